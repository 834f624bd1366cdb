"""regression.yml's plan and verdict (plugins/module_utils/verify/regression.py)."""

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.verify.regression import (
    AGAIN,
    RegressionError,
    judge,
    measured,
    plan,
)

SEEDS_ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
GOOD = {"id": "0.5.11-0123456789ab", "version": "0.5.11", "args": SEEDS_ARGS}
ONE_STEP = {**SEEDS_ARGS, "speculative_num_steps": 1, "speculative_num_draft_tokens": 2}
WL = "completions in=128 out=64 c=1"
# verify's settings as the role's defaults have them, the noise prior pinned (a tuning of the defaults
# does not move the figures below)
TH = {"min_effect_pct": 3, "false_alarm_pct": 1, "power_pct": 95, "run_noise_prior_pct": 2, "run_noise_prior_dof": 4}


def test_the_plan_applies_each_difference_alone_to_the_last_known_good_then_all_together_then_the_baseline_again():
    steps = plan(GOOD, "0.5.12", ONE_STEP)
    assert [s["name"] for s in steps] == [
        "the last known good (0.5.11-0123456789ab)", "sglang 0.5.11 -> 0.5.12", "speculative_num_draft_tokens 4 -> 2",
        "speculative_num_steps 3 -> 1", "every change together (the desired state)", AGAIN]
    assert steps[0]["args"] == SEEDS_ARGS and steps[0]["version"] == "0.5.11"
    assert (steps[1]["version"], steps[1]["args"]) == ("0.5.12", SEEDS_ARGS)
    assert steps[3]["version"] == "0.5.11" and steps[3]["args"] == {**SEEDS_ARGS, "speculative_num_steps": 1}
    assert steps[3]["change"] == {"kind": "flag", "flag": "speculative_num_steps", "from": 3, "to": 1}
    assert (steps[4]["version"], steps[4]["args"]) == ("0.5.12", ONE_STEP)
    # the last step is the baseline again: the same release and flags as step 0, no change
    assert (steps[-1]["version"], steps[-1]["args"], steps[-1]["change"]) == ("0.5.11", SEEDS_ARGS, None)


def test_a_flag_the_desired_state_removes_or_adds_is_one_step_and_one_change_needs_no_together_step():
    steps = plan(GOOD, "0.5.11", {k: v for k, v in SEEDS_ARGS.items() if k != "speculative_eagle_topk"})
    assert [s["name"] for s in steps] == ["the last known good (0.5.11-0123456789ab)",
                                          "speculative_eagle_topk 1 -> unset", AGAIN]
    assert "speculative_eagle_topk" not in steps[1]["args"]
    added = plan(GOOD, "0.5.11", {**SEEDS_ARGS, "mem_fraction_static": 0.8})
    assert added[1]["name"] == "mem_fraction_static unset -> 0.8" and added[1]["args"]["mem_fraction_static"] == 0.8


def test_nothing_to_search_and_no_last_known_good_are_refused_with_the_reason():
    with pytest.raises(RegressionError, match="the desired state is the last known good release 0.5.11-0123456789ab"):
        plan(GOOD, "0.5.11", dict(SEEDS_ARGS))
    with pytest.raises(RegressionError, match="the host has no last known good release"):
        plan({}, "0.5.12", ONE_STEP)


def measurement(decodes):
    return {"metrics": {"decode_tok_s@1": sorted(decodes)[len(decodes) // 2]}, "samples": {"decode_tok_s@1": decodes}}


# The host's history: 6 passing runs of its release, whose figures move ~1 % from run to run.
HISTORY = [{"generated_at": f"20261201T0{i}0000Z", "fingerprint": "f" * 16, "workload": WL, "passed": True,
            "metrics": {"decode_tok_s@1": m}, "samples": {"decode_tok_s@1": [m - 0.3, m, m + 0.3, m + 0.1]}}
           for i, m in enumerate((70.0, 70.9, 69.4, 70.3, 71.0, 69.8))]


def results(steps, decodes):
    return [{"name": s["name"], "change": s["change"], "workload": WL, "measurement": measurement(d)}
            for s, d in zip(steps, decodes)]


def test_the_seeds_case_names_the_speculative_steps_not_the_release():
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    out = judge(results(steps, [[70.2, 70.5, 69.9, 70.3], [70.4, 70.0, 70.6, 70.1], [40.2, 40.5, 39.9, 40.3],
                                [40.1, 40.4, 40.6, 40.0]]), HISTORY, TH)
    assert out["culprit"] == "speculative_num_steps 3 -> 1"
    verdicts = {r["name"]: r["verdict"] for r in out["steps"]}
    # one run against one, with the host's ~1 % noise moderated by the 2 % prior: the release's +0.1 % is
    # inside what this host can tell (inconclusive, not a loss)
    assert verdicts["sglang 0.5.11 -> 0.5.12"] == "inconclusive" and verdicts["speculative_num_steps 3 -> 1"] == "fail"
    row = next(r for r in out["steps"] if r["name"] == "speculative_num_steps 3 -> 1")
    assert -44 < row["effect_pct"] < -41 and row["interval_pct"][1] < -3
    assert out["lines"][-1].startswith("the change that costs the throughput: speculative_num_steps 3 -> 1 (-42.")
    assert out["baseline_moved"] is None   # the baseline was not measured again (no AGAIN result)


def test_a_release_that_is_the_culprit_is_named():
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    out = judge(results(steps, [[70.2, 70.5, 69.9, 70.3], [60.1, 59.8, 60.3, 60.0], [70.3, 70.0, 70.4, 70.2],
                                [60.2, 60.0, 59.9, 60.4]]), HISTORY, TH)
    assert out["culprit"] == "sglang 0.5.11 -> 0.5.12"
    assert {r["name"]: r["verdict"] for r in out["steps"]}["speculative_num_steps 3 -> 1"] != "fail"


def test_a_step_that_could_not_run_is_said_and_the_others_are_still_judged():
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    res = results(steps, [[70.2, 70.5, 69.9, 70.3], [1.0], [40.2, 40.5, 39.9, 40.3], [40.1, 40.4, 40.6, 40.0]])
    res[1] = {"name": res[1]["name"], "change": res[1]["change"], "error": "sglang 0.5.12: no wheel for Python 3.9"}
    out = judge(res, HISTORY, TH)
    assert out["culprit"] == "speculative_num_steps 3 -> 1"
    assert "sglang 0.5.11 -> 0.5.12: not measured: sglang 0.5.12: no wheel for Python 3.9" in out["lines"]


def test_losses_within_the_noise_name_no_culprit_and_say_so():
    """A host whose runs move ~10 % from one to the next: an 8 % loss is within its noise."""
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    noisy = [{**h, "metrics": {"decode_tok_s@1": m}} for h, m in zip(HISTORY, (70.0, 77.0, 63.0, 72.0, 64.0, 75.0))]
    out = judge(results(steps, [[70.2], [64.6], [70.3], [64.4]]), noisy, TH)
    assert out["culprit"] is None
    assert {r["name"]: r["verdict"] for r in out["steps"]}["sglang 0.5.11 -> 0.5.12"] == "inconclusive"
    assert out["lines"][-1].startswith("no single change costs throughput beyond the noise (the largest loss: "
                                       "sglang 0.5.11 -> 0.5.12, -8.")
    assert out["lines"][-1].endswith("; measure again, or with more runs in the host's history")


def test_without_a_history_the_prior_alone_judges_the_steps():
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    out = judge(results(steps, [[70.2], [70.4], [40.2], [40.1], [70.0]]), [], TH)
    assert out["culprit"] == "speculative_num_steps 3 -> 1" and out["baseline_moved"] is False
    step = next(r for r in out["steps"] if r["name"] == "speculative_num_steps 3 -> 1")
    assert step["noise_pct"] == 2.0 and "(prior 2 % as 4 dof, sglang_verify_run_noise_prior_pct)" in step["comparison"]


def test_without_a_history_or_a_prior_no_step_is_judged_a_loss():
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    out = judge(results(steps, [[70.2], [70.4], [40.2], [40.1]]), [], {**TH, "run_noise_prior_pct": 0})
    assert out["culprit"] is None
    assert {r["verdict"] for r in out["steps"][1:]} == {"inconclusive"}
    assert {r["basis"] for r in out["steps"][1:]} == {"none"}


def test_the_baseline_measured_again_alike_did_not_move_and_both_measurements_are_the_reference():
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    assert steps[-1]["name"] == AGAIN
    out = judge(results(steps, [[70.2], [70.4], [40.2], [40.1], [70.0]]), HISTORY, TH)
    assert out["baseline_moved"] is False
    assert out["culprit"] == "speculative_num_steps 3 -> 1"
    assert out["steps"][-1] == {"name": AGAIN, "change": None, "verdict": "baseline", "decode_tok_s": 70.0}
    step = next(r for r in out["steps"] if r["name"] == "speculative_num_steps 3 -> 1")
    assert "this run vs 2 reference runs" in step["comparison"]
    assert out["lines"][1].startswith("the baseline moved -0.3 % [")
    assert out["lines"][1].endswith("within the run-to-run noise; the steps are compared with both measurements")
    assert not any(line.startswith(AGAIN) for line in out["lines"])   # said once, as the drift line
    assert "the baseline itself moved" not in out["lines"][-1]


def test_a_baseline_30_percent_lower_the_second_time_moved_and_the_verdict_says_so():
    """The host's runs move ~1 % (HISTORY): a baseline that comes back 30 % slower is the host changing
    under the steps, said first, and the culprit it still names comes with that warning."""
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    out = judge(results(steps, [[70.2], [70.4], [40.2], [40.1], [49.1]]), HISTORY, TH)
    assert out["baseline_moved"] is True
    drift = out["lines"][1]
    assert drift.startswith("the baseline moved -30.1 % [") and "beyond the run-to-run noise" in drift
    assert drift in out["lines"]
    assert out["lines"][-1].endswith("; but the baseline itself moved, so measure again on a quiet host")


def test_a_baseline_that_could_not_be_measured_again_is_said_and_nothing_is_bracketed():
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    res = results(steps, [[70.2], [70.4], [40.2], [40.1]])
    res.append({"name": AGAIN, "change": None, "error": "the service did not start"})
    out = judge(res, HISTORY, TH)
    assert out["baseline_moved"] is None and out["culprit"] == "speculative_num_steps 3 -> 1"
    assert f"{AGAIN}: not measured: the service did not start" in out["lines"]
    step = next(r for r in out["steps"] if r["name"] == "speculative_num_steps 3 -> 1")
    assert "this run vs 1 reference run" in step["comparison"]


def test_settings_out_of_range_are_refused_naming_the_variable():
    steps = plan(GOOD, "0.5.12", ONE_STEP)
    with pytest.raises(RegressionError, match=r"^sglang_verify settings out of range: sglang_verify_min_effect_pct 0: "):
        judge(results(steps, [[70.2], [70.4]]), HISTORY, {**TH, "min_effect_pct": 0})


def test_an_unmeasured_baseline_is_refused():
    steps = plan(GOOD, "0.5.12", ONE_STEP)
    with pytest.raises(RegressionError, match="the baseline .* could not be measured: the service did not start"):
        judge([{"name": steps[0]["name"], "change": None, "error": "the service did not start"}], HISTORY, TH)


def bench_results(decodes, input_len=128, output_len=64):
    """A step's benchmark at concurrency 1, as sglang_verify's measure entry point registers it (one repeat each)."""
    return [{"concurrency": 1, "api": "completions", "input_len": input_len, "output_len": output_len,
             "repeats": len(decodes), "completed": len(decodes), "failed": 0, "output_throughput": 60.0,
             "decode_tok_s_per_stream": {"p50": sorted(decodes)[len(decodes) // 2]},
             "runs": [{"decode_tok_s_per_stream": {"p50": d}, "output_throughput": d * 0.9} for d in decodes]}]


def test_a_step_read_from_its_raw_benchmark_is_judged_as_its_verify_measurement_would_be():
    """regression.yml's steps run verify's benchmark alone (its measure entry point): the judge reads each
    step's figures and workload from the results with verify's own code, the same verdict as from the
    measurement a whole verify run reports."""
    steps = plan(GOOD, "0.5.12", {**SEEDS_ARGS, "speculative_num_steps": 1})
    decodes = [[70.2, 70.5, 69.9, 70.3], [70.4, 70.0, 70.6, 70.1], [40.2, 40.5, 39.9, 40.3], [40.1, 40.4, 40.6, 40.0]]
    raw = [measured({"name": s["name"], "change": s["change"], "bench": bench_results(d)}) for s, d in zip(steps, decodes)]
    assert raw[0]["workload"] == WL and raw[0]["measurement"] == measurement(decodes[0])
    assert judge(raw, HISTORY, TH) == judge(results(steps, decodes), HISTORY, TH)
    # a benchmark without a single-stream decode is that step's error, and the others are still judged
    broken = measured({"name": steps[1]["name"], "change": steps[1]["change"],
                       "bench": [{**bench_results([70.0])[0], "decode_tok_s_per_stream": {"p50": None}, "runs": []}]})
    assert broken["error"].startswith("its benchmark: the single-stream run measured no decode speed"), broken
    verdicts = {r["name"]: r["verdict"] for r in judge([raw[0], broken, *raw[2:]], HISTORY, TH)["steps"]}
    assert verdicts[steps[1]["name"]] == "not measured" and verdicts["speculative_num_steps 3 -> 1"] == "fail"
