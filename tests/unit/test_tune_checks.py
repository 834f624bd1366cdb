"""tune.yml's latency limits and output check (plugins/module_utils/tune/checks.py), alone and through the
module's plan and record on the real 0.5.11 source the lab's ct129 runs."""

import json

import pytest
from test_tune_session import drive, params
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.tune import checks, session
from ansible_collections.sglang.fleet.plugins.modules import sglang_tune

VERIFY = {"levels": [1, 4], "repeats": 4, "requests_per_stream": 2, "output_len": 64}


def levels(ttft_p90_at_4=None, itl_p50_at_1=None):
    """One measurement's verify levels with the pooled latencies the limits read (gates.levels' rows)."""
    return [{"concurrency": 1, "latency_ms": {"itl": {"p50": itl_p50_at_1}, "ttft": {}, "e2e": {}}},
            {"concurrency": 4, "latency_ms": {"ttft": {"p90": ttft_p90_at_4}, "itl": {}, "e2e": {}}}]


# ---------------------------------------------------------------------------------------------- limits

def test_a_limit_is_read_from_as_many_observations_as_its_percentile_needs():
    limits, lines = checks.plan_limits({"itl_ms_p90@1": 40, "ttft_ms_p50@4": 2000}, VERIFY)
    assert limits == {"itl_ms_p90@1": 40.0, "ttft_ms_p50@4": 2000.0}
    assert lines == ["limit: p90 inter-token latency at concurrency 1 at most 40 ms (read from 504 inter-token gaps "
                     "a measurement)",
                     "limit: p50 TTFT at concurrency 4 at most 2000 ms (read from 32 requests a measurement)"]


@pytest.mark.parametrize(("limits", "message"), [
    ({"ttft_ms_p90@4": 2000}, "sglang_tune_limits: ttft_ms_p90@4: a p90 needs at least 100 requests a measurement to "
                              "have 10 beyond it, and verify's measurement at concurrency 4 makes 32 (4 repeats x 2 "
                              "requests x 4 streams): raise sglang_verify_repeats or sglang_verify_requests_per_stream, "
                              "or limit a lower percentile"),
    ({"itl_ms_p99@1": 40}, "a p99 needs at least 1000 inter-token gaps a measurement to have 10 beyond it, and "
                           "verify's measurement at concurrency 1 makes 504 (4 repeats x 2 requests x 1 streams x 63 gaps)"),
    ({"ttft_ms_p50@8": 2000}, "ttft_ms_p50@8: verify measures at concurrency 1, 4 (sglang_verify_concurrency): add 8 "
                              "there, or limit one of those"),
    ({"ttft_p90@4": 2000}, "'ttft_p90@4' is not a limit: write <ttft|itl|e2e>_ms_p<50|90|99>@<concurrency>"),
    ({"ttft_ms_p95@4": 2000}, "'ttft_ms_p95@4' is not a limit"),
    ({"ttft_ms_p50@4": "fast"}, "ttft_ms_p50@4: the limit must be a number of milliseconds above 0: 'fast'"),
    ({"ttft_ms_p50@4": 0}, "the limit must be a number of milliseconds above 0: 0"),
    ([2000], "sglang_tune_limits must be a mapping of limit -> ms"),
])
def test_a_limit_that_cannot_be_held_or_read_is_refused_saying_what_to_fix(limits, message):
    with pytest.raises(session.TuneError) as err:
        checks.plan_limits(limits, VERIFY)
    assert message in str(err.value)


def test_a_candidate_over_a_limit_on_the_median_of_its_measurements_is_held_back():
    limits = {"ttft_ms_p90@4": 2000.0, "itl_ms_p50@1": 40.0}
    assert checks.over_limits(limits, [levels(1900, 30), levels(2600, 30), levels(1950, 35)]) is None
    assert checks.over_limits(limits, [levels(2100, 30), levels(2600, 41), levels(1950, 45)]) == (
        "over its latency limit: p90 TTFT at concurrency 4 was 2,100 ms (limit 2,000 ms); "
        "p50 inter-token latency at concurrency 1 was 41 ms (limit 40 ms)")
    with pytest.raises(session.TuneError, match="no measurement has a p90 TTFT at concurrency 4"):
        checks.over_limits(limits, [[{"concurrency": 4, "ttft_ms_p50": 20}]])


# ---------------------------------------------------------------------------------------- output check

def test_a_flag_that_changes_outputs_is_tried_only_when_the_space_says_lossy():
    with pytest.raises(session.TuneError) as err:
        checks.plan_output_check({"kv_cache_dtype": ["auto", "fp8_e5m2"]}, {})
    assert str(err.value) == (
        "sglang_tune_space: kv_cache_dtype can change the model's outputs (a quantised KV cache): trying it is opt-in: "
        "write it as {values: [...], lossy: true}; each candidate's greedy outputs are then checked against the "
        "incumbent's (sglang_tune_output_check)")
    check, lines = checks.plan_output_check(
        {"kv_cache_dtype": {"values": ["auto", "fp8_e5m2"], "lossy": True}, "schedule_policy": ["fcfs", "lpm"]}, {})
    assert check == {"flags": ["kv_cache_dtype"], "prompts": 8, "tokens": 32, "min_identical": 1.0, "reference": None}
    assert lines == ["output check: kv_cache_dtype can change outputs: 8 fixed prompts, 32 greedy tokens each, at least "
                     "100% identical to the incumbent's"]
    assert checks.plan_output_check({"schedule_policy": ["fcfs", "lpm"]}, {}) == (
        {"flags": [], "prompts": 8, "tokens": 32, "min_identical": 1.0, "reference": None}, [])


@pytest.mark.parametrize(("settings", "message"), [
    ({"prompt": 8}, "sglang_tune_output_check: unknown keys ['prompt'] (known: prompts, tokens, min_identical)"),
    ({"tokens": 0}, "sglang_tune_output_check: tokens must be a whole number above 0: 0"),
    ({"min_identical": 1.5}, "min_identical is the share of outputs that must be identical, above 0 and at most 1: 1.5"),
])
def test_output_check_settings_are_checked(settings, message):
    with pytest.raises(session.TuneError) as err:
        checks.plan_output_check({}, settings)
    assert message in str(err.value)


def test_the_incumbents_outputs_are_the_reference_and_a_candidate_must_match_them():
    check = {"flags": ["kv_cache_dtype"], "prompts": 3, "tokens": 8, "min_identical": 1.0, "reference": None}
    inc = {"kv_cache_dtype": "auto", "schedule_policy": "fcfs"}
    assert checks.needs_outputs(check, inc, inc, first_step=True)
    assert not checks.needs_outputs(check, inc, dict(inc, schedule_policy="lpm"), first_step=False)
    assert checks.needs_outputs(check, inc, dict(inc, kv_cache_dtype="fp8_e5m2"), first_step=False)
    assert not checks.needs_outputs({"flags": []}, inc, inc, first_step=True)
    assert checks.outputs_differ(check, ["ABCDEFGH", "ABCDEFGH", "ABCDEFGH"]) is None   # the reference
    assert check["reference"] == ["ABCDEFGH"] * 3
    assert checks.outputs_differ(check, ["ABCDEFGH"] * 3) is None
    assert checks.outputs_differ(check, ["ABCDEFGH", "ABCdefgh", "ABCDEFGH"]) == (
        "changes outputs: 1 of 3 greedy outputs differ from the incumbent's (prompt 2 from character 4: 'defgh' for "
        "'DEFGH'), 100% must be identical")
    check["min_identical"] = 0.6
    assert checks.outputs_differ(check, ["ABCDEFGH", "ABCdefgh", "ABCDEFGH"]) is None


# ------------------------------------------------------------------------------------- through the module

def measurement(decode, ttft_p50_at_4):
    """One measurement as roles/sglang_tune/tasks/measure.yml keeps it: sglang_bench's results (the fields verify
    reads), single-stream decode and, at concurrency 4, the pooled TTFT the limits read."""
    return [{"concurrency": 1, "decode_tok_s_per_stream": {"p50": decode}},
            {"concurrency": 4, "output_throughput": 4 * decode, "latency_ms": {"ttft": {"p50": ttft_p50_at_4}}}]


@pytest.fixture(scope="module")
def src_0511():
    return str(sglang_source_tree("0.5.11"))


def test_candidates_over_a_limit_or_with_other_outputs_are_infeasible_and_the_incumbent_stays(src_0511, tmp_path):
    """The module's plan and record calls as the role makes them: fp8 KV faster but its greedy outputs
    differ; lpm faster but its TTFT over the limit: both infeasible with the figure that says why."""
    state_file = tmp_path / "state.json"
    space = {"kv_cache_dtype": {"values": ["auto", "fp8_e5m2"], "lossy": True}, "schedule_policy": ["fcfs", "lpm"]}
    tune, extra = sglang_tune.plan(params(src_0511, state_file=str(state_file), space=space,
                                          limits={"ttft_ms_p50@4": 500}, output_check={"prompts": 2, "tokens": 8},
                                          verify_shape=VERIFY, outputs=None))
    assert "ct129: limit: p50 TTFT at concurrency 4 at most 500 ms (read from 32 requests a measurement)" in extra["plan_lines"]

    def outcome_of(step):
        c = step["candidate"]
        fp8, lpm = c["kv_cache_dtype"] == "fp8_e5m2", c["schedule_policy"] == "lpm"
        ttft = 3000.0 if lpm else 120.0
        outputs = (["ABCdefgh", "ABCdefgh"] if fp8 else ["ABCDEFGH", "ABCDEFGH"]) if step["check_outputs"] else None
        return {"outcome": [measurement(40.0 * (1.3 if fp8 or lpm else 1.0), ttft * (1 + 0.01 * i))
                            for i in range(step["measurements"])], "outputs": outputs}

    asked, step = drive(tune, state_file, outcome_of, most=20)
    seen = [(s["candidate"]["kv_cache_dtype"], s["candidate"]["schedule_policy"], s["check_outputs"]) for s in asked]
    assert seen[0] == ("auto", "fcfs", True)   # the incumbent's outputs are the reference
    assert ("fp8_e5m2", "fcfs", True) in seen and ("auto", "lpm", False) in seen
    result = step["result"]
    assert not result["won"], result["message"]
    rows = {json.dumps(r["changes"], sort_keys=True): r for r in result["rows"]}
    fp8 = rows[json.dumps({"kv_cache_dtype": ["auto", "fp8_e5m2"]})]
    lpm = rows[json.dumps({"schedule_policy": ["fcfs", "lpm"]})]
    assert fp8["verdict"] == "infeasible" and fp8["why"].startswith(
        "changes outputs: 2 of 2 greedy outputs differ from the incumbent's (prompt 1 from character 4"), fp8
    assert result["measurements"] == 4, result   # the incumbent's 2, then one each: measured, then held back
    assert lpm["verdict"] == "infeasible" and lpm["why"] == (
        "over its latency limit: p50 TTFT at concurrency 4 was 3,000 ms (limit 500 ms)"), lpm


def test_an_incumbent_over_its_limit_ends_the_search_saying_so(src_0511, tmp_path):
    state_file = tmp_path / "state.json"
    tune, _ = sglang_tune.plan(params(src_0511, state_file=str(state_file), space={"schedule_policy": ["fcfs", "lpm"]},
                                      limits={"ttft_ms_p50@4": 500}, output_check={}, verify_shape=VERIFY, outputs=None))
    state_file.write_text(json.dumps(tune))
    step = sglang_tune.next_of(tune)
    tune, _ = sglang_tune.record(params(state_file=str(state_file), outcome=[measurement(40.0, 900.0)] * step["measurements"],
                                        outputs=None))
    step = sglang_tune.next_of(tune)
    assert step["action"] == "done" and step["result"]["message"] == (
        "the incumbent itself is over its latency limit: p50 TTFT at concurrency 4 was 900 ms (limit 500 ms): a "
        "candidate must hold what the incumbent does not; relax sglang_tune_limits, or tune at a lower load")


def test_a_step_that_had_to_check_outputs_but_recorded_none_is_refused(src_0511, tmp_path):
    state_file = tmp_path / "state.json"
    tune, _ = sglang_tune.plan(params(src_0511, state_file=str(state_file),
                                      space={"kv_cache_dtype": {"values": ["auto", "fp8_e5m2"], "lossy": True}},
                                      limits={}, output_check={}, verify_shape=VERIFY, outputs=None))
    state_file.write_text(json.dumps(tune))
    with pytest.raises(session.TuneError, match="record its greedy outputs"):
        sglang_tune.record(params(state_file=str(state_file), outcome=[40.0, 40.0], outputs=None))


def test_a_measurement_is_read_with_verifys_code_and_a_figure_alone_cannot_be_held_to_a_limit(src_0511, tmp_path):
    """record reads each measurement's figure of the search's metric and its latencies from the benchmark
    results (gates.levels, gates.metrics_of); a measurement without the metric's level, or a bare figure
    where a latency limit must be judged, is refused saying why."""
    state_file = tmp_path / "state.json"
    tune, _ = sglang_tune.plan(params(src_0511, state_file=str(state_file), space={"schedule_policy": ["fcfs", "lpm"]},
                                      metric="output_tok_s@4", output_check={}, verify_shape=VERIFY, outputs=None))
    state_file.write_text(json.dumps(tune))
    single = [[{"concurrency": 1, "decode_tok_s_per_stream": {"p50": 40.0}}]]
    with pytest.raises(session.TuneError, match="the measurement has no output_tok_s@4: verify's concurrency levels must include 4"):
        sglang_tune.record(params(state_file=str(state_file), outcome=single, seconds=20, outputs=None))
    with pytest.raises(session.TuneError, match="a measurement verify cannot read: no single-stream"):
        sglang_tune.record(params(state_file=str(state_file), outcome=[[{"concurrency": 4}]], seconds=20, outputs=None))
    step = sglang_tune.next_of(tune)
    tune, _ = sglang_tune.record(params(state_file=str(state_file), outcome=[measurement(40.0, 100.0)] * step["measurements"],
                                        seconds=20, outputs=None))
    incumbent = next(iter(tune["state"]["configs"].values()))
    assert incumbent["figures"] == [160.0] * step["measurements"], incumbent   # the output at 4 (4 x 40), not the decode
    state_file.write_text(json.dumps(tune))
    tune, _ = sglang_tune.plan(params(src_0511, state_file=str(state_file), space={"schedule_policy": ["fcfs", "lpm"]},
                                      limits={"ttft_ms_p50@4": 500}, output_check={}, verify_shape=VERIFY, outputs=None))
    state_file.write_text(json.dumps(tune))
    with pytest.raises(session.TuneError, match="latency limits are judged on verify's measurements, not on figures alone"):
        sglang_tune.record(params(state_file=str(state_file), outcome=[40.0, 40.0], seconds=20, outputs=None))
