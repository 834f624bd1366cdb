"""sglang_verify gates: exact messages for pass, each failure, no history, other version/flags."""

import json
import re

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import (
    VerifyError,
    baseline,
    evaluate,
    fingerprint,
    levels,
    median,
    read_history,
)

GPU = declared_facts({"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2})
ARGS = {"host": "127.0.0.1", "port": 30000, "model_path": "/models/Qwen3.6-27B", "tp_size": 2,
        "speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4}
TH = {"min_decode_tok_s": 50, "min_accept_length": 2.5, "history_window": 3, "regression_tolerance_pct": 5}
W = 27_000_000_000
FP = fingerprint("0.5.11", ARGS)["id"]
ROOF = "roofline 150.6 tok/s at accept length 3.19"
SHAPE = {"api": "completions", "input_len": 512, "output_len": 256}
WL = "completions in=512 out=256 c=1,4"
CHECK_SPEED = ("check: GPU clocks and throttling (nvidia-smi -q -d PERFORMANCE), other processes on the GPUs "
               "(nvidia-smi), the resolved settings (ansible-playbook audit.yml -l ct129), the service log")
CHECK_SPEC = ("check: speculative decoding really runs (ansible-playbook audit.yml -l ct129: speculative_algorithm "
              "and speculative_num_steps in /server_info; MTP can be silently off, sglang PR #23859), the draft "
              "model / MTP weights, speculative_num_steps and speculative_num_draft_tokens in sglang_args")


def bench(decode, out4, accept=3.19):
    return [
        {"concurrency": 1, "decode_tok_s_per_stream": {"p50": decode}, "output_throughput": decode * 0.93,
         "spec_accept_length": accept, "completed": 6, "failed": 0, **SHAPE},
        {"concurrency": 4, "decode_tok_s_per_stream": {"p50": decode * 0.97}, "output_throughput": out4,
         "spec_accept_length": accept, "completed": 24, "failed": 0, **SHAPE},
    ]


def rec(stamp, decode, out4, passed=True, fp=FP, accept=3.19, wl=WL):
    return {"generated_at": stamp, "fingerprint": fp, "workload": wl, "passed": passed, "accept_length": accept,
            "metrics": {"decode_tok_s@1": decode, "output_tok_s@4": out4}}


HISTORY = [rec("20261130T070000Z", 53.0, 190.0), rec("20261130T071000Z", 54.0, 200.0),
           rec("20261130T072000Z", 55.0, 195.0)]


def run(b, history=(), th=TH, args=ARGS):
    return evaluate(b, th, list(history), GPU, W, "0.5.11", args, "ct129", "20261130T080000Z")


def test_pass_with_history():
    r = run(bench(53.8, 192.0), HISTORY)
    assert r["ok"] is True and r["failures"] == []
    assert r["line"] == ("ct129: PASS single-stream decode 53.8 tok/s (floor 50.0 tok/s, history 54.0 tok/s over 3, "
                         "roofline 150.6 tok/s, 35.7 % of it), accept length 3.19 (min 2.5); c=4 192.0 tok/s out "
                         "[floor pass, history pass, accept_length pass, last_good skip]")
    assert r["lines"][1:] == [
        f"floor: single-stream decode 53.8 tok/s >= floor 50.0 tok/s (history median 54.0 tok/s over 3 passing runs; "
        f"{ROOF}, measured 35.7 % of it)",
        f"history: within 5 % of the median of the last 3 passing runs of sglang 0.5.11 with these flags, fingerprint "
        f"{FP}, workload {WL}, 20261130T070000Z .. 20261130T072000Z (largest change -1.5 % in output at concurrency 4)",
        f"accept length: 3.19 >= minimum 2.5 (history median 3.19; speculative_algorithm NEXTN; single-stream decode "
        f"53.8 tok/s, {ROOF}, measured 35.7 % of it)",
        "last known good: none on this host yet (the first release that passes every gate becomes it)",
    ]
    assert r["record"] == {
        "generated_at": "20261130T080000Z", "host": "ct129", "version": "0.5.11", "fingerprint": FP, "workload": WL,
        "passed": True,
        "gates": {"floor": "pass", "history": "pass", "accept_length": "pass", "last_good": "skip"},
        "metrics": {"decode_tok_s@1": 53.8, "output_tok_s@4": 192.0}, "samples": {}, "measurements": 1,
        "accept_length": 3.19,
        "efficiency_pct": 35.7, "upper_bound_tok_s": 150.6,
    }
    assert r["report"]["roofline"]["formula"] == (
        "3.19 accepted/pass x 0.83 x 768 GB/s x 2 GPU / 27.00 GB = 150.6 tok/s")


def test_absolute_floor_fails():
    r = run(bench(26.9, 96.0), HISTORY, th=dict(TH, regression_tolerance_pct=60))
    assert r["ok"] is False
    assert r["failures"] == [
        f"floor: single-stream decode 26.9 tok/s < floor 50.0 tok/s (history median 54.0 tok/s over 3 passing runs; "
        f"{ROOF}, measured 17.9 % of it); {CHECK_SPEED}; accept length 3.19",
    ]
    assert r["record"]["passed"] is False
    assert r["record"]["gates"] == {"floor": "fail", "history": "pass", "accept_length": "pass", "last_good": "skip"}


def test_history_fails_above_the_floor():
    r = run(bench(48.4, 176.0), HISTORY, th=dict(TH, min_decode_tok_s=40))
    assert r["failures"] == [
        "history: single-stream decode 48.4 tok/s is 10.4 % below the history median 54.0 tok/s (threshold 51.3 tok/s "
        "= median - 5 %); output at concurrency 4 176.0 tok/s is 9.7 % below the history median 195.0 tok/s "
        f"(threshold 185.2 tok/s = median - 5 %) (last 3 passing runs of sglang 0.5.11 with these flags, fingerprint "
        f"{FP}, workload {WL}, 20261130T070000Z .. 20261130T072000Z; floor 40.0 tok/s; roofline 150.6 tok/s at accept length 3.19, "
        "measured 32.1 % of it); check: what changed since 20261130T072000Z (driver, CUDA, firmware, GPU clocks, "
        "other load on the host, the model files), then GPU clocks and throttling (nvidia-smi -q -d PERFORMANCE), "
        "other processes on the GPUs (nvidia-smi), the resolved settings (ansible-playbook audit.yml -l ct129), "
        "the service log",
    ]
    gate = r["report"]["gates"][1]
    assert [(m["metric"], m["change_pct"], m["status"]) for m in gate["metrics"]] == [
        ("decode_tok_s@1", -10.4, "fail"), ("output_tok_s@4", -9.7, "fail")]


def test_accept_length_too_low_fails():
    r = run(bench(51.0, 190.0, accept=1.85), HISTORY, th=dict(TH, regression_tolerance_pct=60))
    assert r["failures"] == [
        "accept length: 1.85 < minimum 2.5 (history median 3.19; speculative_algorithm NEXTN; single-stream decode "
        f"51.0 tok/s, roofline 87.4 tok/s at accept length 1.85, measured 58.4 % of it); {CHECK_SPEC}",
    ]


@pytest.mark.parametrize("accept", [None, 0.0], ids=["none", "metrics-gauge-zero"])
def test_no_accept_length_reported_with_speculative_configured_fails(accept):
    r = run(bench(22.7, 85.0, accept=accept), th=dict(TH, min_decode_tok_s=20))
    assert r["report"]["accept_length"] is None
    assert r["failures"] == [
        "accept length: speculative_algorithm NEXTN is configured but the server reports no accept length (minimum "
        "2.5; history median n/a): speculative decoding is not running; single-stream decode 22.7 tok/s, roofline "
        f"47.2 tok/s at accept length 1.00, measured 48.1 % of it; {CHECK_SPEC}",
    ]


def test_no_history_yet_skips_the_history_gate():
    r = run(bench(53.8, 192.0))
    assert r["ok"] is True
    assert r["lines"][2] == (
        f"history: no passing run of sglang 0.5.11 with these flags (fingerprint {FP}) and this workload ({WL}) yet; "
        f"this run starts the baseline ({ROOF}, measured 35.7 % of it)")
    assert r["record"]["gates"]["history"] == "skip"
    assert r["line"].startswith("ct129: PASS single-stream decode 53.8 tok/s (floor 50.0 tok/s, no history yet, ")


def test_history_of_other_versions_flags_workloads_failed_runs_is_ignored():
    other_flags = fingerprint("0.5.11", dict(ARGS, speculative_num_steps=1))["id"]
    other_version = fingerprint("0.5.12", ARGS)["id"]
    assert len({FP, other_flags, other_version}) == 3
    history = [rec("20261130T060000Z", 90.0, 300.0, fp=other_flags),
               rec("20261130T061000Z", 90.0, 300.0, fp=other_version),
               rec("20261130T062000Z", 90.0, 300.0, passed=False),
               rec("20261130T062500Z", 90.0, 300.0, wl="completions in=128 out=64 c=1,4"),
               rec("20261130T063000Z", 53.0, 190.0)]
    r = run(bench(52.0, 188.0), history)
    assert r["ok"] is True
    assert r["report"]["history"] == {"runs": 1, "window": 3, "samples": {},
                                      "values": {"decode_tok_s@1": [53.0], "output_tok_s@4": [190.0]},
                                      "since": "20261130T063000Z", "last": "20261130T063000Z",
                                      "median": {"decode_tok_s@1": 53.0, "output_tok_s@4": 190.0},
                                      "accept_length": 3.19}
    # and with only the other records, no history at all
    r = run(bench(52.0, 188.0), history[:4])
    assert r["record"]["gates"]["history"] == "skip"


def test_window_takes_the_last_k_passing_runs():
    history = [rec(f"20261130T0{i}0000Z", v, 100.0) for i, v in enumerate([10.0, 20.0, 30.0, 40.0, 50.0])]
    assert baseline(history, FP, 3)["median"]["decode_tok_s@1"] == 40.0
    assert baseline(history, FP, 2)["median"]["decode_tok_s@1"] == 45.0
    assert baseline(list(reversed(history)), FP, 3)["since"] == "20261130T020000Z"


def test_fingerprint_ignores_order_and_false_flags():
    a = fingerprint("0.5.11", {"tp_size": 2, "model_path": "/m", "enable_metrics": False})
    b = fingerprint("0.5.11", {"model_path": "/m", "tp_size": 2})
    assert a == b == {"id": a["id"], "version": "0.5.11", "argv": ["--model-path", "/m", "--tp-size", "2"]}


def test_no_speculation_skips_the_accept_gate_and_no_floor_skips_the_floor():
    args = {k: v for k, v in ARGS.items() if not k.startswith("speculative")}
    r = run(bench(22.7, 85.0, accept=None), th=dict(TH, min_decode_tok_s=0), args=args)
    assert r["ok"] is True
    assert r["lines"][1] == "floor: no sglang_verify_min_decode_tok_s set"
    assert r["lines"][3] == "accept length: speculative decoding not configured"


def test_roofline_unavailable_is_reported_not_fatal():
    r = evaluate(bench(53.8, 192.0), TH, [], GPU, None, "0.5.11", ARGS, "ct129", "s")
    assert r["ok"] is True
    assert r["report"]["roofline"] == {"error": (
        "model weight bytes unknown (set sglang_model_weight_bytes, or give the model folder a "
        "model.safetensors.index.json / *.safetensors / config.json)")}
    assert "roofline n/a" in r["line"]


def test_bad_input():
    with pytest.raises(VerifyError, match=r"^no single-stream \(concurrency 1\) benchmark result$"):
        levels(bench(50.0, 100.0)[1:])
    with pytest.raises(VerifyError, match="^two benchmark results at concurrency 1$"):
        levels(bench(50.0, 100.0)[:1] * 2)
    with pytest.raises(VerifyError, match="^thresholds out of range"):
        run(bench(50.0, 100.0), th=dict(TH, regression_tolerance_pct=100))
    with pytest.raises(VerifyError, match="^history_window must be a whole number >= 1, got 0$"):
        baseline([], FP, 0)
    assert median([3, 1, 2, 10]) == 2.5


def test_read_history_skips_blank_and_broken_lines():
    text = json.dumps(rec("a", 1.0, 2.0)) + "\n\n{not json\n[1]\n" + json.dumps(rec("b", 1.0, 2.0)) + "\n"
    assert [r["generated_at"] for r in read_history(text)] == ["a", "b"]


# --- the cross-release gate: the host's last known good release, whatever its version or flags ---

def last_good(decode=53.8, out4=192.0, version="0.5.11", args=ARGS, wl=WL, gpu=("NVIDIA RTX A6000", 2)):
    return {"id": f"{version}-0123456789ab", "version": version, "fingerprint": fingerprint(version, args)["id"],
            "args": args, "model_path": args["model_path"], "gpu": {"gpu_model": gpu[0], "gpu_count": gpu[1]},
            "verify": {"passed": True, "generated_at": "20261130T060000Z", "workload": wl,
                       "metrics": {"decode_tok_s@1": decode, "output_tok_s@4": out4}}}


ONE_STEP = {**ARGS, "speculative_num_steps": 1, "speculative_num_draft_tokens": 2}
NO_FLOOR = {**TH, "min_decode_tok_s": 0, "min_accept_length": 0}


def run_lg(b, lg, args=ONE_STEP, version="0.5.11", accept=False, th=NO_FLOOR):
    return evaluate(b, th, [], GPU, W, version, args, "ct129", "20261130T080000Z", last_good=lg,
                    accept_regression=accept)


def test_the_seeds_one_step_redeploy_fails_against_the_last_known_good_without_any_expectation():
    r = run_lg(bench(37.7, 140.0, accept=1.85), last_good())
    assert r["ok"] is False
    assert r["record"]["gates"] == {"floor": "skip", "history": "skip", "accept_length": "skip", "last_good": "fail"}
    msg = r["failures"][0]
    lg_fp = fingerprint("0.5.11", ARGS)["id"]
    assert msg.startswith(
        "last known good: single-stream decode 37.7 tok/s is 29.9 % below 53.8 tok/s (threshold 51.1 tok/s = last "
        "known good - 5 %); output at concurrency 4 140.0 tok/s is 27.1 % below 192.0 tok/s (threshold 182.4 tok/s = "
        f"last known good - 5 %) of the last known good release 0.5.11-0123456789ab (sglang 0.5.11, fingerprint "
        f"{lg_fp}, verified 20261130T060000Z); what changed: speculative_num_draft_tokens 4 -> 2, "
        "speculative_num_steps 3 -> 1; roofline")
    assert msg.endswith("fix the inventory, or accept the new speed as the baseline with "
                        "-e sglang_verify_accept_regression=true")


def test_a_version_change_is_named_and_an_accepted_regression_passes():
    new = {**ARGS, "cuda_graph_max_bs": 8}
    r = run_lg(bench(40.0, 150.0), last_good(), args=new, version="0.5.18", accept=True)
    assert r["ok"] is True
    gate = r["report"]["gates"][-1]
    assert gate["status"] == "accepted" and gate["changed"] == ["sglang 0.5.11 -> 0.5.18", "cuda_graph_max_bs unset -> 8"]
    assert gate["message"].endswith("accepted as the new baseline (sglang_verify_accept_regression)")


def test_within_tolerance_of_the_last_known_good_passes_and_says_what_changed():
    r = run_lg(bench(52.0, 190.0), last_good())
    gate = r["report"]["gates"][-1]
    assert (r["ok"], gate["status"]) == (True, "pass")
    assert gate["message"].startswith(
        "last known good: within 5 % of release 0.5.11-0123456789ab (sglang 0.5.11, fingerprint ")
    assert gate["message"].endswith("(largest change -3.3 % in single-stream decode); what changed: "
                                    "speculative_num_draft_tokens 4 -> 2, speculative_num_steps 3 -> 1")


@pytest.mark.parametrize(("lg", "why"), [
    (last_good(wl="completions in=128 out=64 c=1"), "ran another workload (completions in=128 out=64 c=1); not compared"),
    (last_good(gpu=("NVIDIA H200", 2)), "ran other GPUs (NVIDIA H200 x2); not compared"),
    (last_good(args={**ARGS, "model_path": "/models/Other"}), "ran another model (/models/Other); not compared"),
])
def test_a_last_known_good_on_other_model_gpus_or_workload_is_not_compared(lg, why):
    r = run_lg(bench(20.0, 80.0), lg)
    gate = r["report"]["gates"][-1]
    assert (r["ok"], gate["status"]) == (True, "skip") and gate["message"].endswith(why)


def test_the_last_known_good_itself_is_left_to_the_history_gate():
    r = run_lg(bench(20.0, 80.0), last_good(), args=ARGS)
    gate = r["report"]["gates"][-1]
    assert gate["status"] == "skip" and gate["message"].endswith("history compares its runs")


# ------------------------------------------------------------------ noise-aware gates (#27)

NOISY_TH = {**TH, "gate_mode": "noise", "min_effect_pct": 3, "false_alarm_pct": 1, "power_pct": 95}


def repeated(decodes, out4s):
    """bench() with each repeat's figures in `runs`, as bench_client returns them."""
    b = bench(median(decodes), median(out4s))
    b[0]["runs"] = [{"decode_tok_s_per_stream": {"p50": d}, "output_throughput": d * 0.93} for d in decodes]
    b[1]["runs"] = [{"decode_tok_s_per_stream": {"p50": o / 4}, "output_throughput": o} for o in out4s]
    return b


def sampled(stamp, decodes, out4s):
    return {**rec(stamp, median(decodes), median(out4s)),
            "samples": {"decode_tok_s@1": decodes, "output_tok_s@4": out4s}}


STEADY = [sampled(f"20261130T07{i}000Z", [53.0 + (i + j) % 3 * 0.5 for j in range(5)],
                  [195.0 + (i * j) % 4 for j in range(5)]) for i in range(3)]


def test_the_record_keeps_every_repeat_and_an_unchanged_run_passes_with_its_interval():
    r = run(repeated([53.4, 53.9, 53.5, 54.0, 53.6], [196.0, 197.0, 195.5, 196.5, 197.5]), STEADY, NOISY_TH)
    assert r["record"]["samples"]["decode_tok_s@1"] == [53.4, 53.9, 53.5, 54.0, 53.6]
    history = next(g for g in r["report"]["gates"] if g["gate"] == "history")
    assert history["status"] == "pass"
    row = history["metrics"][0]
    assert row["noise_verdict"] == "pass" and row["interval_pct"][0] < row["effect_pct"] < row["interval_pct"][1]
    assert row["noise_pct"] < 1.0 and row["detectable_pct"] < 3.0
    # the message says what decided: the noise-aware comparison, not a tolerance the gate did not use
    assert history["message"].startswith("history: no loss beyond the noise against the median of the last 3 passing "
                                         "runs"), history["message"]
    assert f"(single-stream decode {row['comparison']})" in history["message"] and "within 5 %" not in history["message"]


def test_a_loss_beyond_the_noise_and_the_minimum_effect_fails_naming_its_interval():
    r = run(repeated([49.0, 49.3, 48.8, 49.1, 49.4], [180.0, 181.0, 179.0, 180.5, 181.5]), STEADY, NOISY_TH)
    history = next(g for g in r["report"]["gates"] if g["gate"] == "history")
    assert history["status"] == "fail" and r["ok"] is False
    assert history["metrics"][0]["noise_verdict"] == "fail" and history["metrics"][0]["interval_pct"][1] < -3
    # the failure states the effect, its interval and the detectable loss, not the fixed threshold
    # (a -8 % loss would pass a 10 % tolerance: "threshold ... = median - 10 %" would contradict it)
    row = history["metrics"][0]
    assert re.search(r"^history: single-stream decode 49\.1 tok/s is 8\.\d % below the history median 53\.\d tok/s: "
                     r"-8\.\d % \[-\d+\.\d, -\d+\.\d\] \(.*detects a loss of \d\.\d % or more, cares from 3\.0 %\): fail",
                     history["message"]), history["message"]
    assert "threshold" not in history["message"].split(";")[0], history["message"]
    assert history["message"] in r["failures"]
    assert f"{row['comparison']}" in history["message"]


def test_noise_too_large_to_tell_is_inconclusive_and_never_fails_the_run():
    noisy = [sampled(f"20261130T07{i}000Z", [40.0, 55.0, 62.0, 48.0, 66.0], [150.0, 230.0, 190.0, 170.0, 220.0])
             for i in range(3)]
    r = run(repeated([50.0, 58.0, 47.0, 61.0, 52.0], [175.0, 210.0, 185.0, 200.0, 190.0]), noisy, NOISY_TH)
    history = next(g for g in r["report"]["gates"] if g["gate"] == "history")
    assert history["status"] == "inconclusive" and r["ok"] is True
    assert history["message"].startswith("history: cannot tell against the last 3 passing runs")
    assert "detects a loss of" in history["message"]


def test_two_repeats_are_a_point_comparison_said_as_such():
    r = run(repeated([53.0, 54.0], [195.0, 196.0]), STEADY, NOISY_TH)
    row = next(g for g in r["report"]["gates"] if g["gate"] == "history")["metrics"][0]
    assert row["noise_verdict"] == "point" and row["status"] == "pass"
    assert "a point comparison of the medians against -5 %, not a test" in row["comparison"]


# Three runs of one release whose medians move 3-4 % from run to run (the machine's load changes
# between runs) while each run's repeats agree within 0.5 %: the runs' own spread is the noise.
DRIFTING = [sampled(f"20261130T07{i}000Z", [m - 0.2, m, m + 0.2, m - 0.1, m + 0.1], [195.0, 195.5, 196.0, 195.0, 195.5])
            for i, m in enumerate((53.5, 51.6, 55.4))]


def test_a_loss_within_the_run_to_run_noise_is_inconclusive_not_a_failure():
    """-4 % is far outside one run's repeats (0.4 %) but inside how far whole runs fall apart here:
    judged against its repeats alone it would fail (and roll the host back)."""
    r = run(repeated([51.2, 51.4, 51.3, 51.5, 51.3], [195.0, 195.5, 196.0, 195.0, 195.5]), DRIFTING, NOISY_TH)
    history = next(g for g in r["report"]["gates"] if g["gate"] == "history")
    row = history["metrics"][0]
    assert (row["noise_basis"], row["noise_verdict"], history["status"], r["ok"]) == ("runs", "inconclusive",
                                                                                       "inconclusive", True)
    assert "this run vs 3 reference runs, run-to-run noise 3.6 % over 2 dof" in row["comparison"], row
    assert row["detectable_pct"] > 20   # 3 runs say little: what this host can tell is in the message


def test_the_fixed_mode_decides_by_the_tolerance_and_reports_the_noise_aware_verdict():
    fixed = {**NOISY_TH, "gate_mode": "fixed"}
    r = run(repeated([51.2, 51.4, 51.3, 51.5, 51.3], [195.0, 195.5, 196.0, 195.0, 195.5]), DRIFTING, fixed)
    history = next(g for g in r["report"]["gates"] if g["gate"] == "history")
    assert history["status"] == "pass" and history["metrics"][0]["noise_verdict"] == "inconclusive"
    assert "; noise-aware, reported only (sglang_verify_gate_mode fixed): single-stream decode -4.1 %" \
        in history["message"], history["message"]
    assert r["report"]["thresholds"]["gate_mode"] == "fixed"


def test_an_inconclusive_gate_fails_the_run_only_when_the_policy_says_so():
    strict = {**NOISY_TH, "inconclusive": "fail"}
    r = run(repeated([51.2, 51.4, 51.3, 51.5, 51.3], [195.0, 195.5, 196.0, 195.0, 195.5]), DRIFTING, strict)
    assert r["ok"] is False and r["failures"][0].startswith("history: cannot tell against the last 3 passing runs")


@pytest.mark.parametrize(("setting", "message"), [
    ({"min_effect_pct": 0}, "min_effect_pct 0 (0 < it < 100)"),
    ({"false_alarm_pct": 60}, "false_alarm_pct 60 (0 < it < 50)"),
    ({"power_pct": 100}, "power_pct 100 (50 <= it < 100)"),
    ({"gate_mode": "strict"}, "gate_mode 'strict' (fixed or noise)"),
    ({"inconclusive": "rollback"}, "inconclusive 'rollback' (keep or fail)"),
    ({"min_effect_pct": "3%"}, "min_effect_pct '3%'"),
])
def test_noise_settings_out_of_range_are_refused_naming_the_variable(setting, message):
    with pytest.raises(VerifyError, match="noise-aware gate settings out of range") as err:
        run(repeated([53.4, 53.9, 53.5], [196.0, 197.0, 195.5]), STEADY, {**NOISY_TH, **setting})
    assert message in str(err.value) and "sglang_verify_min_effect_pct" in str(err.value)


# Eight runs of one release whose figures move 1.4 % from run to run: 7 dof of run-to-run noise.
SETTLED = [sampled(f"20261130T0{i}0000Z", [round(m * f, 2) for f in (0.998, 1.0, 1.002)], [195.0, 195.5, 196.0])
           for i, m in enumerate((53.0, 54.1, 52.4, 53.6, 54.6, 52.9, 53.3, 54.0))]


def measured(figures, history=SETTLED, th=NOISY_TH):
    """evaluate() once per measurement of one run, each given the records of the ones before it, as
    roles/sglang_verify/tasks/remeasure.yml does: the last result."""
    earlier = []
    for figure in figures:
        r = evaluate(repeated([figure - 0.1, figure, figure + 0.1], [195.0, 195.5, 196.0]), th, list(history),
                     GPU, W, "0.5.11", ARGS, "ct129", "20261130T080000Z", earlier=list(earlier))
        earlier.append(r["measurement"])
    return r


def test_an_inconclusive_run_measured_again_is_judged_on_all_its_measurements():
    once = next(g for g in measured([51.6])["report"]["gates"] if g["gate"] == "history")
    assert once["status"] == "inconclusive" and once["metrics"][0]["detectable_pct"] > 7
    assert once["message"].endswith("more repeats (sglang_verify_repeats) or measurements "
                                    "(sglang_verify_remeasure) narrow it"), once["message"]
    r = measured([51.6, 51.7])
    twice = next(g for g in r["report"]["gates"] if g["gate"] == "history")
    assert twice["status"] == "inconclusive" and r["ok"] is True
    assert "this run measured 2 times vs 3 reference runs" in twice["metrics"][0]["comparison"]
    assert twice["metrics"][0]["detectable_pct"] < once["metrics"][0]["detectable_pct"]
    assert "still inconclusive after 2 measurements of this run" in twice["message"]
    assert r["line"].endswith("(2 measurements)")
    # the history record is the run: the median of its measurements, every repeat of both
    assert r["record"]["measurements"] == 2 and r["record"]["metrics"]["decode_tok_s@1"] == 51.65
    assert r["record"]["samples"]["decode_tok_s@1"] == pytest.approx([51.5, 51.6, 51.7, 51.6, 51.7, 51.8])
    # a third measurement that agrees: the loss is now told from the noise
    thrice = measured([51.6, 51.7, 51.4])
    assert next(g for g in thrice["report"]["gates"] if g["gate"] == "history")["status"] == "fail"
    assert thrice["ok"] is False and len(thrice["record"]["samples"]["decode_tok_s@1"]) == 9
    assert thrice["record"]["metrics"]["decode_tok_s@1"] == 51.6


def test_a_slow_first_measurement_that_the_next_one_does_not_repeat_passes():
    r = measured([51.6, 53.6])
    history = next(g for g in r["report"]["gates"] if g["gate"] == "history")
    assert (history["status"], r["ok"]) == ("pass", True) and history["metrics"][0]["effect_pct"] == pytest.approx(-1.5, abs=0.05)


def test_an_earlier_measurement_that_is_not_a_record_is_refused():
    with pytest.raises(VerifyError, match="an earlier measurement of this run has no metrics"):
        evaluate(repeated([53.4, 53.9, 53.5], [196.0, 197.0, 195.5]), NOISY_TH, list(SETTLED), GPU, W, "0.5.11",
                 ARGS, "ct129", "20261130T080000Z", earlier=[{"decode": 51.0}])


def test_the_last_known_good_gate_in_noise_mode_says_the_loss_with_its_interval():
    """gate_mode noise, the seeds' redeploy against a last known good that kept its repeats: the
    message leads with the release it compares with, then each loss with its interval and what the
    host can detect (not a tolerance the gate did not use)."""
    lg = last_good()
    lg["verify"]["samples"] = {"decode_tok_s@1": [53.6, 53.8, 54.0, 53.7, 53.9],
                               "output_tok_s@4": [191.0, 192.0, 193.0, 191.5, 192.5]}
    noisy = {**NO_FLOOR, "gate_mode": "noise", "min_effect_pct": 3, "false_alarm_pct": 1, "power_pct": 95}
    r = evaluate(repeated([37.5, 37.7, 37.9, 37.6, 37.8], [139.0, 140.0, 141.0, 139.5, 140.5]), noisy, STEADY, GPU, W,
                 "0.5.11", ONE_STEP, "ct129", "20261130T080000Z", last_good=lg)
    gate = r["report"]["gates"][-1]
    assert (r["ok"], gate["status"]) == (False, "fail")
    assert re.search(r"^last known good: against the last known good release 0\.5\.11-0123456789ab \(sglang 0\.5\.11, "
                     r"fingerprint \w+, verified 20261130T060000Z\): single-stream decode 37\.7 tok/s is 29\.9 % below "
                     r"53\.8 tok/s: -29\.9 % \[-\d+\.\d, -\d+\.\d\] \(.*detects a loss of \d+\.\d % or more, cares from "
                     r"3\.0 %\): fail; output at concurrency 4", gate["message"]), gate["message"]
    assert "threshold" not in gate["message"]
