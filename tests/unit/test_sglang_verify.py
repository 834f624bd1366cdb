"""sglang_verify gates (plugins/module_utils/verify/gates.py) and their settings (settings.py): one exact
message per gate, then what a user relies on, on the report's fields: each gate's status, the noise-aware
rows (verdict, effect, reference runs, noise source), the history record and when to measure again."""

import json
import math
import random

import pytest
import yaml
from ansible_run import REPO

from ansible_collections.sglang.fleet.plugins.filter import sglang_verify as verify_filters
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts
from ansible_collections.sglang.fleet.plugins.module_utils.verify import gates, noise, settings
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import (
    DECODE,
    VerifyError,
    baseline,
    evaluate,
    fingerprint,
    levels,
    read_history,
)

GPU = declared_facts({"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2})
HARDWARE = "NVIDIA RTX A6000 x2"
ARGS = {"host": "127.0.0.1", "port": 30000, "model_path": "/models/Qwen3.6-27B", "tp_size": 2,
        "speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4}
# The noise prior as the role's defaults have it, pinned: the figures of the messages below do not move
# when the defaults are tuned (test_the_role_defaults_are_the_settings_defaults checks the defaults).
PRIOR = {"run_noise_prior_pct": 2, "run_noise_prior_dof": 4}
TH = {"min_decode_tok_s": 50, "min_accept_length": 2.5, "history_window": 3, "regression_tolerance_pct": 5, **PRIOR}
FIXED = {**TH, "gate_mode": "fixed"}
W = 27_000_000_000
FP = fingerprint("0.5.11", ARGS)["id"]
ROOF = "roofline 150.6 tok/s at accept length 3.19"
SHAPE = {"api": "completions", "input_len": 512, "output_len": 256}
WL = "completions in=512 out=256 c=1,4"
STAMP = "20261130T080000Z"


def bench(decode, out4, accept=3.19):
    return [
        {"concurrency": 1, "decode_tok_s_per_stream": {"p50": decode}, "output_throughput": decode * 0.93,
         "spec_accept_length": accept, "completed": 6, "failed": 0, **SHAPE},
        {"concurrency": 4, "decode_tok_s_per_stream": {"p50": decode * 0.97}, "output_throughput": out4,
         "spec_accept_length": accept, "completed": 24, "failed": 0, **SHAPE},
    ]


def rec(stamp, decode, out4, passed=True, fp=FP, accept=3.19, wl=WL, **extra):
    return {"generated_at": stamp, "fingerprint": fp, "workload": wl, "passed": passed, "accept_length": accept,
            "metrics": {"decode_tok_s@1": decode, "output_tok_s@4": out4}, **extra}


def server(args=ARGS, version="0.5.11", host="ct129", weight_bytes=W, gpu=GPU):
    return {"host": host, "version": version, "args": args, "gpu": gpu, "weight_bytes": weight_bytes}


def run(b, history=(), th=TH, args=ARGS, version="0.5.11", weight_bytes=W, stamp=STAMP, **kw):
    """One verify run of ct129 as sglang_verify_gates runs it."""
    return evaluate(b, th, server(args, version, weight_bytes=weight_bytes), list(history), stamp=stamp, **kw)


def gate(result, name):
    return next(g for g in result["report"]["gates"] if g["gate"] == name)


def decode_row(g):
    return next(r for r in g["metrics"] if r["metric"] == DECODE)


def stamp_of(i):
    return f"20261201T{i // 60:02d}{i % 60:02d}00Z"


def verify_runs(decodes, history=(), th=None, host="ct129", peers=(), start=0):
    """Verify runs one after the other, each record appended to the history as the role does: (the
    results, the history). Thresholds default to the role's defaults (no floor, no accept length)."""
    history, results = list(history), []
    for i, decode in enumerate(decodes, start):
        r = evaluate(bench(decode, decode * 3.6), th or {}, server(host=host), list(history), peers=peers,
                     stamp=stamp_of(i))
        history.append(r["record"])
        results.append(r)
    return results, history


def steady(n, level, cv=0.01, seed=1):
    rng = random.Random(seed)
    return [round(level * math.exp(rng.gauss(0, cv)), 1) for _ in range(n)]


HISTORY = [rec("20261130T070000Z", 53.0, 190.0), rec("20261130T071000Z", 54.0, 200.0),
           rec("20261130T072000Z", 55.0, 195.0)]
# Ten runs of one release whose figures move ~0.6 % from run to run.
STEADY = [rec(f"20261130T0{i}0000Z", d, o) for i, (d, o) in enumerate(zip(
    (53.6, 54.1, 53.5, 54.3, 53.8, 54.6, 53.9, 54.2, 53.4, 54.0),
    (195.0, 196.8, 194.2, 197.1, 195.5, 196.0, 194.8, 196.4, 195.2, 195.9)))]


# ------------------------------------------------------------------ one exact message per gate

def test_the_floor_gate_fails_below_the_floor_and_says_what_to_check():
    r = run(bench(26.9, 96.0), HISTORY, th=FIXED | {"regression_tolerance_pct": 60})
    assert r["ok"] is False
    assert r["failures"] == [
        f"floor: single-stream decode 26.9 tok/s < floor 50.0 tok/s (history median 54.0 tok/s over 3 passing runs; "
        f"{ROOF}, measured 17.9 % of it); {gates.CHECK_SPEED.format(host='ct129')}; accept length 3.19",
    ]
    assert r["record"]["passed"] is False
    assert r["record"]["gates"] == {"floor": "fail", "history": "pass", "accept_length": "pass", "last_good": "skip"}
    floor = gate(r, "floor")
    assert (floor["measured"], floor["threshold"]) == (26.9, 50.0)


def test_the_history_gate_fails_a_loss_beyond_the_run_to_run_noise_with_one_figure_per_metric():
    """gate_mode noise: each metric's one figure (the effect with its interval, the reference runs and
    the noise it was judged with), then what to check, then how to start a new baseline."""
    r = run(bench(43.0, 157.0), STEADY, th={"min_decode_tok_s": 40, "min_accept_length": 2.5, **PRIOR})
    history = gate(r, "history")
    assert (history["status"], r["ok"]) == ("fail", False)
    noise = ("this run vs 5 reference runs, run-to-run noise 1.4 % over 10 dof (this host's 10 runs as 6 dof + prior "
             "2 % as 4 dof, sglang_verify_run_noise_prior_pct)")
    check = gates.CHECK_SPEED.format(host="ct129").removeprefix("check: ")
    assert r["failures"] == [history["message"]] == [
        f"history: single-stream decode 43.0 tok/s against the reference 54.0 tok/s: -20.4 % [-24.2, -16.4] ({noise}; "
        f"detects a loss of 7.5 % or more, cares from 3.0 %): fail; output at concurrency 4 157.0 tok/s against the "
        f"reference 195.7 tok/s: -19.8 % [-23.4, -15.9] ({noise}; detects a loss of 7.1 % or more, cares from 3.0 %): "
        f"fail (last 5 passing runs of sglang 0.5.11 with these flags, fingerprint {FP}, workload {WL}, "
        f"20261130T050000Z .. 20261130T090000Z; floor 40.0 tok/s; {ROOF}, measured 28.6 % of it); check: what "
        f"changed since 20261130T090000Z (driver, CUDA, firmware, GPU clocks, other load on the host, the model "
        f"files), then {check}; {gates.REBASELINE}"]
    row = decode_row(history)
    assert (row["status"], row["noise_verdict"], row["decided_by"], row["noise_basis"], row["noise_source"]) == (
        "fail", "fail", "noise", "runs", "host+prior")
    assert (row["reference_runs"], row["measurements"]) == (5, 1) and row["effect_pct"] == pytest.approx(-20.4, abs=0.05)
    assert row["interval_pct"][1] < -3 and "threshold" not in row


def test_the_accept_length_gate_fails_a_low_accept_length_and_says_what_to_check():
    r = run(bench(51.0, 190.0, accept=1.85), HISTORY, th=FIXED | {"regression_tolerance_pct": 60})
    assert r["failures"] == [
        "accept length: 1.85 < minimum 2.5 (history median 3.19; speculative_algorithm NEXTN; single-stream decode "
        f"51.0 tok/s, roofline 87.4 tok/s at accept length 1.85, measured 58.4 % of it); "
        f"{gates.CHECK_SPEC.format(host='ct129')}",
    ]
    acc = gate(r, "accept_length")
    assert (acc["status"], acc["measured"], acc["threshold"], acc["history_median"]) == ("fail", 1.85, 2.5, 3.19)


def last_good(decode=53.8, out4=192.0, version="0.5.11", args=ARGS, wl=WL, gpu=("NVIDIA RTX A6000", 2)):
    return {"id": f"{version}-0123456789ab", "version": version, "fingerprint": fingerprint(version, args)["id"],
            "args": args, "model_path": args["model_path"], "gpu": {"gpu_model": gpu[0], "gpu_count": gpu[1]},
            "verify": {"passed": True, "generated_at": "20261130T060000Z", "workload": wl,
                       "metrics": {"decode_tok_s@1": decode, "output_tok_s@4": out4}}}


ONE_STEP = {**ARGS, "speculative_num_steps": 1, "speculative_num_draft_tokens": 2}
NO_FLOOR = {**TH, "min_decode_tok_s": 0, "min_accept_length": 0}


def run_lg(b, lg, args=ONE_STEP, version="0.5.11", th=NO_FLOOR, history=()):
    return run(b, history, th=th, args=args, version=version, last_good=lg)


def test_the_seeds_one_step_redeploy_fails_against_the_last_known_good_without_any_expectation():
    """A host with no history of its own: its last known good's one recorded run, judged with the prior."""
    r = run_lg(bench(37.7, 140.0, accept=1.85), last_good())
    assert r["ok"] is False
    assert r["record"]["gates"] == {"floor": "skip", "history": "skip", "accept_length": "skip", "last_good": "fail"}
    noise = ("this run vs 1 reference run, run-to-run noise 2.0 % over 4 dof (prior 2 % as 4 dof, "
             "sglang_verify_run_noise_prior_pct); detects a loss of 17.3 % or more, cares from 3.0 %")
    assert r["failures"] == [
        f"last known good: against release 0.5.11-0123456789ab (sglang 0.5.11, fingerprint {FP}, verified "
        f"20261130T060000Z, its one recorded run): single-stream decode 37.7 tok/s against the last known good 53.8 "
        f"tok/s: -29.9 % [-38.5, -20.2] ({noise}): fail; output at concurrency 4 140.0 tok/s against the last known "
        f"good 192.0 tok/s: -27.1 % [-36.0, -16.9] ({noise}): fail; what changed: speculative_num_draft_tokens 4 -> "
        f"2, speculative_num_steps 3 -> 1; roofline 87.4 tok/s at accept length 1.85, measured 43.1 % of it; fix the "
        f"inventory, or accept the new speed as the baseline with -e sglang_verify_accept_regression=true"]
    lg = gate(r, "last_good")
    assert (lg["runs"], lg["release"], decode_row(lg)["noise_source"]) == (1, "0.5.11-0123456789ab", "prior")


# ------------------------------------------------------------------ the gates on their fields

def test_pass_with_history():
    r = run(bench(53.8, 192.0), HISTORY, th=FIXED)
    assert r["ok"] is True and r["failures"] == []
    assert r["line"] == ("ct129: PASS single-stream decode 53.8 tok/s (floor 50.0 tok/s, history 54.0 tok/s over 3, "
                         "roofline 150.6 tok/s, 35.7 % of it), accept length 3.19 (min 2.5); c=4 192.0 tok/s out "
                         "[floor pass, history pass, accept_length pass, last_good skip]")
    assert r["record"] == {
        "generated_at": STAMP, "host": "ct129", "version": "0.5.11", "fingerprint": FP, "workload": WL,
        "hardware": HARDWARE, "passed": True,
        "gates": {"floor": "pass", "history": "pass", "accept_length": "pass", "last_good": "skip"},
        "metrics": {"decode_tok_s@1": 53.8, "output_tok_s@4": 192.0}, "samples": {}, "measurements": 1,
        "accept_length": 3.19,
        "efficiency_pct": 35.7, "upper_bound_tok_s": 150.6,
    }
    assert r["report"]["roofline"]["formula"] == (
        "3.19 accepted/pass x 0.83 x 768 GB/s x 2 GPU / 27.00 GB = 150.6 tok/s")
    # gate_mode fixed: the tolerance decides, against the reference runs' median
    rows = gate(r, "history")["metrics"]
    assert [(m["metric"], m["reference"], m["reference_runs"], m["change_pct"], m["status"]) for m in rows] == [
        ("decode_tok_s@1", 54.0, 3, -0.4, "pass"), ("output_tok_s@4", 195.0, 3, -1.5, "pass")]
    assert r["measure_again"] is False and r["inconclusive"] is False



def test_the_record_keeps_the_server_lifetime_measured_and_old_records_without_it_still_work():
    """sglang_bench's server_start (the latest measurement's) goes into the history record, so that the
    noise within one server lifetime can be told from the noise across a restart; records written before
    it (no field) are read as before, and a run without one writes none."""
    started = "2026-12-06T13:14:03.12Z pid 4242"
    with_start = [{**res, "server_start": started} for res in bench(53.8, 192.0)]
    r = run(with_start, HISTORY, th=FIXED)
    plain = run(bench(53.8, 192.0), HISTORY, th=FIXED)
    assert r["record"]["server_start"] == started and "server_start" not in plain["record"]
    assert {k: v for k, v in r["record"].items() if k != "server_start"} == plain["record"]
    assert [g["status"] for g in r["report"]["gates"]] == [g["status"] for g in plain["report"]["gates"]]
    again = run(bench(53.0, 190.0), [*HISTORY, r["record"]], th=FIXED)
    assert (gate(again, "history")["status"], gate(again, "history")["runs"]) == ("pass", 3)
    assert gates.server_start_of(r["record"]) == started and gates.server_start_of(HISTORY[0]) is None

def test_the_fixed_mode_decides_by_the_tolerance_and_reports_the_noise_aware_verdict():
    r = run(bench(48.4, 176.0), HISTORY, th=FIXED | {"min_decode_tok_s": 40})
    history = gate(r, "history")
    assert (history["status"], r["ok"]) == ("fail", False)
    assert [(m["metric"], m["change_pct"], m["threshold"], m["status"]) for m in history["metrics"]] == [
        ("decode_tok_s@1", -10.4, 51.3, "fail"), ("output_tok_s@4", -9.7, 185.25, "fail")]
    row = decode_row(history)
    assert row["noise_verdict"] in ("fail", "inconclusive", "pass") and "decided_by" not in row
    assert history["message"].endswith(
        f"; noise-aware, reported only (sglang_verify_gate_mode fixed): single-stream decode {row['comparison']}")
    assert r["report"]["thresholds"]["gate_mode"] == "fixed"
    # -8 % on a steady host passes the fixed 10 %: the noise-aware verdict that would fail it is only reported
    r = run(bench(49.5, 196.0), STEADY, th=FIXED | {"regression_tolerance_pct": 10, "min_decode_tok_s": 40})
    row = decode_row(gate(r, "history"))
    assert (r["ok"], gate(r, "history")["status"], row["status"], row["noise_verdict"]) == (True, "pass", "pass", "fail")


@pytest.mark.parametrize("accept", [None, 0.0], ids=["none", "metrics-gauge-zero"])
def test_no_accept_length_reported_with_speculative_configured_fails(accept):
    r = run(bench(22.7, 85.0, accept=accept), th={**TH, "min_decode_tok_s": 20})
    assert r["report"]["accept_length"] is None and r["record"]["accept_length"] is None
    acc = gate(r, "accept_length")
    assert (acc["status"], acc["measured"], r["ok"]) == ("fail", None, False)
    assert r["failures"] == [acc["message"]]
    assert "the server reports no accept length" in acc["message"]
    assert acc["message"].endswith(gates.CHECK_SPEC.format(host="ct129"))
    assert r["report"]["roofline"]["accept_length"] == 1.0   # the roofline of a server that does not speculate


def test_no_history_yet_skips_the_history_gate_and_this_run_starts_the_baseline():
    r = run(bench(53.8, 192.0))
    assert r["ok"] is True
    history = gate(r, "history")
    assert history["status"] == "skip" and "metrics" not in history
    assert "this run starts the baseline" in history["message"]
    assert r["record"]["gates"]["history"] == "skip" and r["record"]["passed"] is True
    assert r["line"].startswith("ct129: PASS single-stream decode 53.8 tok/s (floor 50.0 tok/s, no history yet, ")


def test_history_of_other_versions_flags_workloads_failed_runs_is_no_reference():
    other_flags = fingerprint("0.5.11", dict(ARGS, speculative_num_steps=1))["id"]
    other_version = fingerprint("0.5.12", ARGS)["id"]
    assert len({FP, other_flags, other_version}) == 3
    history = [rec("20261130T060000Z", 90.0, 300.0, fp=other_flags),
               rec("20261130T061000Z", 90.0, 300.0, fp=other_version),
               rec("20261130T062000Z", 90.0, 300.0, passed=False),
               rec("20261130T062500Z", 90.0, 300.0, wl="completions in=128 out=64 c=1,4"),
               rec("20261130T063000Z", 53.0, 190.0)]
    r = run(bench(52.0, 188.0), history, th=FIXED)
    assert r["ok"] is True
    assert r["report"]["history"] == {"runs": 1, "window": 3, "dropped": 0, "passing": 1,
                                      "values": {"decode_tok_s@1": [53.0], "output_tok_s@4": [190.0]},
                                      "since": "20261130T063000Z", "last": "20261130T063000Z",
                                      "median": {"decode_tok_s@1": 53.0, "output_tok_s@4": 190.0},
                                      "accept_length": 3.19}
    # the failed run of this fingerprint is no reference, but its step to the next run informs the noise
    assert r["report"]["noise"][DECODE]["basis"].startswith("this host's 4 runs (1 failed) as 1 dof")
    # and with only the other records, no reference at all
    r = run(bench(52.0, 188.0), history[:4])
    assert r["record"]["gates"]["history"] == "skip"


def test_window_takes_the_last_k_passing_runs():
    history = [rec(f"20261130T0{i}0000Z", v, 100.0) for i, v in enumerate([10.0, 20.0, 30.0, 40.0, 50.0])]
    assert baseline(history, FP, 3)["median"]["decode_tok_s@1"] == 40.0
    assert baseline(history, FP, 2)["median"]["decode_tok_s@1"] == 45.0
    assert baseline(list(reversed(history)), FP, 3)["since"] == "20261130T020000Z"
    assert baseline(history + [rec("20261130T060000Z", 5.0, 100.0, passed=False)], FP, 3)["values"][DECODE] == [
        30.0, 40.0, 50.0]


def test_the_baseline_starts_again_at_the_latest_rebaseline_record():
    history = [rec(f"20261130T0{i}0000Z", v, 100.0) for i, v in enumerate([50.0, 51.0, 50.5, 50.8])]
    history += [rec("20261130T050000Z", 40.0, 80.0, rebaseline=True), rec("20261130T060000Z", 40.5, 81.0)]
    base = baseline(history, FP, 5)
    assert (base["runs"], base["dropped"], base["since"]) == (2, 4, "20261130T050000Z")
    assert base["values"][DECODE] == [40.0, 40.5]
    assert baseline(history[:4], FP, 5)["runs"] == 4


def test_a_rebaseline_says_how_many_passing_runs_stop_being_the_reference_beyond_the_window_too():
    """The message counts every passing run since the latest re-baseline (that record included), not only
    the window's 3: all of them stop being the reference. Failed runs and runs before it are not counted."""
    history = [rec(f"20261130T00{i:02d}00Z", 50.0 + i / 10, 180.0) for i in range(3)]
    history += [rec("20261130T010000Z", 53.0, 190.0, rebaseline=True)]
    history += [rec(f"20261130T02{i:02d}00Z", 53.0 + i / 10, 190.0) for i in range(7)]
    history += [rec("20261130T030000Z", 40.0, 150.0, passed=False)]
    base = baseline(history, FP, 3, WL)
    assert (base["runs"], base["passing"], base["dropped"]) == (3, 8, 3)
    r = run(bench(53.4, 191.0), history, th=TH | {"rebaseline": True})
    assert gate(r, "history")["message"] == (
        f"history: a new baseline starts with this run (sglang_verify_rebaseline): the 8 earlier passing runs of "
        f"sglang 0.5.11 with these flags (fingerprint {FP}) no longer count as its reference ({ROOF}, measured 35.5 % "
        "of it)")
    assert r["report"]["history"]["passing"] == 8 and r["record"]["rebaseline"] is True


def test_fingerprint_ignores_order_and_false_flags():
    a = fingerprint("0.5.11", {"tp_size": 2, "model_path": "/m", "enable_metrics": False})
    b = fingerprint("0.5.11", {"model_path": "/m", "tp_size": 2})
    assert a == b == {"id": a["id"], "version": "0.5.11", "argv": ["--model-path", "/m", "--tp-size", "2"]}


def test_no_speculation_skips_the_accept_gate_and_no_floor_skips_the_floor():
    args = {k: v for k, v in ARGS.items() if not k.startswith("speculative")}
    r = run(bench(22.7, 85.0, accept=None), th=dict(TH, min_decode_tok_s=0), args=args)
    assert r["ok"] is True
    assert (gate(r, "floor")["status"], gate(r, "accept_length")["status"]) == ("skip", "skip")
    assert "sglang_verify_min_decode_tok_s" in gate(r, "floor")["message"]
    assert r["report"]["speculative_algorithm"] is None


def test_roofline_unavailable_is_reported_not_fatal():
    r = run(bench(53.8, 192.0), weight_bytes=0, stamp="s")
    assert r["ok"] is True
    assert r["report"]["roofline"] == {"error": (
        "model weight bytes unknown (set sglang_model_weight_bytes, or give the model folder a "
        "model.safetensors.index.json / *.safetensors / config.json)")}
    assert "roofline n/a" in r["line"] and r["record"]["upper_bound_tok_s"] is None


def test_bad_input():
    with pytest.raises(VerifyError, match=r"^no single-stream \(concurrency 1\) benchmark result$"):
        levels(bench(50.0, 100.0)[1:])
    with pytest.raises(VerifyError, match="^two benchmark results at concurrency 1$"):
        levels(bench(50.0, 100.0)[:1] * 2)
    with pytest.raises(VerifyError, match=r"^sglang_verify settings out of range: "
                                          r"sglang_verify_regression_tolerance_pct 100: must be a number in \[0, 100\)$"):
        run(bench(50.0, 100.0), th=dict(TH, regression_tolerance_pct=100))
    with pytest.raises(VerifyError, match="^history_window must be a whole number >= 1, got 0$"):
        baseline([], FP, 0)


def test_read_history_skips_blank_and_broken_lines():
    text = json.dumps(rec("a", 1.0, 2.0)) + "\n\n{not json\n[1]\n" + json.dumps(rec("b", 1.0, 2.0)) + "\n"
    assert [r["generated_at"] for r in read_history(text)] == ["a", "b"]


# ------------------------------------------------------------------ the last known good gate

def test_a_version_change_is_named_and_an_accepted_regression_passes():
    new = {**ARGS, "cuda_graph_max_bs": 8}
    r = run_lg(bench(40.0, 150.0), last_good(), args=new, version="0.5.18", th={**NO_FLOOR, "accept_regression": True})
    assert r["ok"] is True
    lg = gate(r, "last_good")
    assert lg["status"] == "accepted" and lg["changed"] == ["sglang 0.5.11 -> 0.5.18", "cuda_graph_max_bs unset -> 8"]
    assert lg["message"].endswith("accepted as the new baseline (sglang_verify_accept_regression)")
    assert r["record"]["gates"]["last_good"] == "accepted"


def test_within_tolerance_of_the_last_known_good_passes_and_says_what_changed():
    r = run_lg(bench(52.0, 190.0), last_good(), th=NO_FLOOR | {"gate_mode": "fixed"})
    lg = gate(r, "last_good")
    assert (r["ok"], lg["status"]) == (True, "pass")
    assert [(m["metric"], m["change_pct"], m["status"]) for m in lg["metrics"]] == [
        ("decode_tok_s@1", -3.3, "pass"), ("output_tok_s@4", -1.0, "pass")]
    assert lg["changed"] == ["speculative_num_draft_tokens 4 -> 2", "speculative_num_steps 3 -> 1"]
    assert lg["message"].startswith("last known good: within 5 % of release 0.5.11-0123456789ab")
    assert ("; what changed: speculative_num_draft_tokens 4 -> 2, speculative_num_steps 3 -> 1; noise-aware, reported "
            "only (sglang_verify_gate_mode fixed): ") in lg["message"]


def test_a_small_loss_against_the_last_known_goods_one_run_is_inconclusive_not_a_rollback():
    r = run_lg(bench(52.0, 190.0), last_good())
    lg = gate(r, "last_good")
    assert (r["ok"], lg["status"], decode_row(lg)["noise_verdict"]) == (True, "inconclusive", "inconclusive")
    assert decode_row(lg)["effect_pct"] == pytest.approx(-3.35, abs=0.01)


def test_the_last_known_good_gate_compares_with_that_releases_passing_runs_in_the_history():
    """Its passing runs in the host's history (failed ones are no reference), else the one run its
    release record keeps."""
    lg_runs = [rec(stamp_of(i), d, d * 3.6) for i, d in enumerate(steady(8, 54.0, seed=4))]
    history = [*lg_runs, rec(stamp_of(20), 40.0, 150.0, passed=False)]
    r = run_lg(bench(37.7, 140.0, accept=1.85), last_good(), history=history, th={})
    lg = gate(r, "last_good")
    assert (lg["status"], lg["runs"]) == ("fail", 5)
    row = decode_row(lg)
    assert row["reference_runs"] == 5 and row["noise_source"] == "host+prior"
    assert row["reference"] == pytest.approx(math.exp(sum(math.log(x["metrics"][DECODE]) for x in lg_runs[-5:]) / 5),
                                             abs=0.01)
    assert ", 5 passing runs): " in lg["message"]
    # without them: the one recorded run
    alone = gate(run_lg(bench(37.7, 140.0, accept=1.85), last_good(), th={}), "last_good")
    assert (alone["runs"], decode_row(alone)["reference_runs"], decode_row(alone)["reference"]) == (1, 1, 53.8)
    assert ", its one recorded run): " in alone["message"]


@pytest.mark.parametrize(("lg", "why"), [
    (last_good(wl="completions in=128 out=64 c=1"), "ran another workload (completions in=128 out=64 c=1); not compared"),
    (last_good(gpu=("NVIDIA H200", 2)), "ran other GPUs (NVIDIA H200 x2); not compared"),
    (last_good(args={**ARGS, "model_path": "/models/Other"}), "ran another model (/models/Other); not compared"),
])
def test_a_last_known_good_on_other_model_gpus_or_workload_is_not_compared(lg, why):
    r = run_lg(bench(20.0, 80.0), lg)
    g = gate(r, "last_good")
    assert (r["ok"], g["status"]) == (True, "skip") and g["message"].endswith(why)


def test_the_last_known_good_itself_is_left_to_the_history_gate():
    r = run_lg(bench(20.0, 80.0), last_good(), args=ARGS)
    g = gate(r, "last_good")
    assert g["status"] == "skip" and g["message"].endswith("history compares its runs")


# ------------------------------------------------------------------ run-to-run noise: scenarios

def test_a_quiet_host_with_runs_enough_passes_an_unchanged_run():
    """0.5 % a run over 40 runs rejects the 2 % prior (noise.prior_conflicts): the host's own noise decides."""
    _, history = verify_runs(steady(40, 480.0, cv=0.005, seed=2))
    r = verify_runs([480.0], history, start=40)[0][0]
    history_gate = gate(r, "history")
    row = decode_row(history_gate)
    assert (history_gate["status"], row["noise_verdict"], row["noise_basis"], row["noise_source"]) == (
        "pass", "pass", "runs", "host")
    assert row["reference_runs"] == 5 and row["detectable_pct"] <= 3.0
    assert "prior 2 % as 4 dof, sglang_verify_run_noise_prior_pct: set aside, this host's own runs reject it" in \
        history_gate["message"]
    assert history_gate["message"].startswith("history: no loss beyond the noise against the last 5 passing runs")
    assert r["measure_again"] is False


def test_a_host_whose_first_run_was_fast_converges_on_its_later_runs_without_failing():
    """The issue: the first run of a host at 481 tok/s, then 420-445 tok/s. With the default prior no
    later run fails (a loss within 3 % noise is inconclusive, and kept), the inconclusive runs become
    references, and once 5 of them are the window the first run no longer counts."""
    results, history = verify_runs([481.0, 440.0, 425.0, 445.0, 420.0, 437.0, 430.0])
    assert [r["ok"] for r in results] == [True] * 7
    assert [gate(r, "history")["status"] for r in results] == ["skip"] + ["inconclusive"] * 6
    assert all(rec["passed"] for rec in history)
    first = decode_row(gate(results[1], "history"))
    assert (first["reference"], first["reference_runs"], first["effect_pct"]) == (481.0, 1, -8.52)
    after = verify_runs([441.0], history, start=7)[0][0]
    row = decode_row(gate(after, "history"))
    assert row["reference_runs"] == 5 and 420.0 < row["reference"] < 445.0   # 481 left the window
    assert gate(after, "history")["status"] in ("pass", "inconclusive") and abs(row["effect_pct"]) < 3.0


def test_a_real_loss_fails_keeps_failing_and_passes_again_after_a_rebaseline():
    """Ten steady runs (1 % noise), then a 20 % loss: it fails, and so does every later run at the slower
    level, since failed runs are no reference (and their one step is clipped out of the noise). A run
    with rebaseline=true starts a new baseline at the new speed."""
    results, history = verify_runs(steady(10, 500.0, seed=1) + steady(3, 400.0, seed=2))
    assert all(r["ok"] for r in results[:10])
    slow = results[10:]
    assert [gate(r, "history")["status"] for r in slow] == ["fail"] * 3 and not any(r["ok"] for r in slow)
    assert [rec["passed"] for rec in history[10:]] == [False] * 3
    last = decode_row(gate(slow[-1], "history"))
    assert last["reference"] > 490 and last["effect_pct"] < -15 and last["noise_pct"] < 2.5
    assert "this host's 12 runs (2 failed) as 8 dof, 1 step clipped" in slow[-1]["report"]["noise"][DECODE]["basis"]
    assert gate(slow[-1], "history")["message"].endswith(gates.REBASELINE)

    rebased = evaluate(bench(400.0, 1440.0), {"rebaseline": True}, server(), history, stamp=stamp_of(13))
    assert (gate(rebased, "history")["status"], rebased["ok"]) == ("skip", True)
    assert rebased["record"]["rebaseline"] is True and rebased["record"]["passed"] is True
    assert "rebaseline" not in history[0]
    history.append(rebased["record"])

    after = verify_runs([401.0], history, start=14)[0][0]
    row = decode_row(gate(after, "history"))
    # one reference run and ~2 % noise cannot say "pass" yet, but the new speed no longer fails
    assert after["ok"] is True and gate(after, "history")["status"] in ("pass", "inconclusive")
    assert (row["reference_runs"], row["reference"]) == (1, 400.0)
    assert after["report"]["history"]["dropped"] == 10   # every passing run before the rebaseline


def test_a_host_that_stays_slow_after_its_first_run_keeps_failing_on_a_short_history():
    """One run at 500 tok/s, then the host stays 25 % slow. With two or three runs the failed step cannot
    set its own clipping limit (its median is itself), so it is clipped at the prior's scale: the loss
    does not teach the gate that 25 % is noise, and every slow run fails instead of turning
    inconclusive and being kept as a reference."""
    results, _history = verify_runs([500.0, 375.0, 376.0, 374.0])
    assert [gate(r, "history")["status"] for r in results] == ["skip", "fail", "fail", "fail"]
    basis = results[-1]["report"]["noise"][DECODE]["basis"]
    assert "(2 failed)" in basis and "clipped" in basis and "prior 2 % as 4 dof" in basis
    assert decode_row(gate(results[-1], "history"))["noise_pct"] < 6


def test_a_host_without_runs_of_its_own_takes_the_noise_of_peers_of_its_hardware():
    _, peer_history = verify_runs(steady(10, 500.0, seed=3), host="peer1")
    assert {r["hardware"] for r in peer_history} == {HARDWARE}
    _, mine = verify_runs([480.0])

    def source(peers):
        r = verify_runs([470.0], mine, peers=peers, start=1)[0][0]
        return decode_row(gate(r, "history"))["noise_source"], r["report"]["noise"][DECODE]["basis"]

    assert source(peer_history)[0] == "peers" and source(peer_history)[1].startswith("peers peer1: ")
    other_hardware = [{**r, "hardware": "NVIDIA H100 80GB HBM3 x1"} for r in peer_history]
    assert source(other_hardware)[0] == "prior"
    assert source([{k: v for k, v in r.items() if k != "hardware"} for r in peer_history])[0] == "prior"
    assert source([])[0] == "prior"
    # with no run at all of its own, the peers' noise is still its noise
    alone = evaluate(bench(470.0, 1692.0), {}, server(), [], peers=peer_history)
    assert alone["report"]["noise"][DECODE]["source"] == "peers"


def test_without_a_prior_or_peers_a_host_without_runs_enough_is_inconclusive_never_failed():
    _, mine = verify_runs([480.0])
    r = verify_runs([300.0], mine, th={"run_noise_prior_pct": 0}, start=1)[0][0]
    history_gate = gate(r, "history")
    row = decode_row(history_gate)
    assert (history_gate["status"], r["ok"], r["failures"]) == ("inconclusive", True, [])
    assert (row["noise_basis"], row["noise_source"], row["noise_pct"], row["interval_pct"]) == ("none", "none", None, None)
    assert row["effect_pct"] == -37.5
    assert r["measure_again"] is False   # measuring again cannot tell without a noise


def test_an_inconclusive_gate_fails_the_run_only_when_the_policy_says_so():
    _, mine = verify_runs([481.0])
    kept = verify_runs([440.0], mine, start=1)[0][0]
    strict = verify_runs([440.0], mine, th={"inconclusive": "fail"}, start=1)[0][0]
    assert (kept["ok"], gate(kept, "history")["status"]) == (True, "inconclusive")
    assert strict["ok"] is False and strict["failures"] == [gate(strict, "history")["message"]]
    assert strict["failures"][0].startswith("history: cannot tell against the last 1 passing run")


# ------------------------------------------------------------------ measuring again

def measured(figures, history=STEADY, th=None):
    """evaluate() once per measurement of one run, each given the measurements before it, as
    roles/sglang_verify/tasks/remeasure.yml does: the last result."""
    earlier = []
    for figure in figures:
        r = run(bench(figure, 195.5), history, th=th or PRIOR, stamp="20261130T120000Z", earlier=list(earlier))
        earlier.append(r["measurement"])
    return r


def test_a_suspected_loss_is_measured_again_and_judged_on_its_best_measurement():
    once = measured([51.8])
    history = gate(once, "history")
    # -4.1 %, within the noise for one measurement; a second one no better would fail the run
    assert (history["status"], once["ok"], once["measure_again"]) == ("inconclusive", True, True)
    assert decode_row(history)["effect_pct"] <= -3 and decode_row(history)["could_fail"] is True
    assert history["message"].endswith("more measurements (sglang_verify_remeasure) or runs in the history narrow it")
    # the second shows the loss too: judged on the faster one, less the lead the best of two has by chance
    twice = measured([51.8, 51.9])
    again = gate(twice, "history")
    row = decode_row(again)
    assert (again["status"], twice["ok"]) == ("fail", False)
    assert row["measurements"] == 2 and row["measured"] == 51.9
    assert "this run's best of 2 measurements, less its expected lead 0.8 % vs 5 reference runs" in row["comparison"]
    assert row["detectable_pct"] < decode_row(history)["detectable_pct"]
    assert twice["line"].endswith("(2 measurements)")
    # the history record is the run: its best measurement
    assert twice["record"]["measurements"] == 2 and twice["record"]["metrics"][DECODE] == 51.9
    # a second measurement at the usual speed: the first was a slow moment, the run is no failure
    moment = measured([51.8, 54.0])
    assert gate(moment, "history")["status"] in ("pass", "inconclusive") and moment["ok"] is True
    assert moment["record"]["metrics"][DECODE] == 54.0


# Twenty runs of one release whose figures move ~0.4 % from run to run (moderated by the 2 % prior: ~1 %).
QUIET = [rec(f"20261130T{i // 60:02d}{i % 60:02d}00Z", d, o) for i, (d, o) in enumerate(
    zip(steady(20, 54.0, cv=0.004, seed=4), steady(20, 195.5, cv=0.004, seed=5)))]


def test_a_slow_first_measurement_that_the_next_one_does_not_repeat_passes():
    """On a quiet host a first measurement 4 % slow fails on its own and has the server measured again; a
    second one at the usual speed passes the run (the slow moment was other load), one that repeats the
    loss fails it."""
    first = measured([51.8], history=QUIET)
    assert (gate(first, "history")["status"], first["ok"], first["measure_again"]) == ("fail", False, True)
    r = measured([51.8, 53.9], history=QUIET)
    history = gate(r, "history")
    assert (history["status"], r["ok"], r["measure_again"], r["record"]["measurements"]) == ("pass", True, False, 2)
    row = decode_row(history)
    assert row["measured"] == 53.9 and -3 < row["effect_pct"] < 0
    assert r["record"]["passed"] is True and r["record"]["metrics"][DECODE] == 53.9   # the best of the two: the least disturbed
    repeated = measured([51.8, 51.7], history=QUIET)
    assert (gate(repeated, "history")["status"], repeated["ok"]) == ("fail", False)


def test_an_unchanged_run_on_a_noisy_host_is_not_measured_again():
    """An unchanged run that is inconclusive only because the host's noise hides small losses (here over
    12 %) suspects no loss: it is kept as it is, since one more measurement would cost time and change
    nothing. A suspected loss is measured again."""
    results, _ = verify_runs([481.0, 440.0, 425.0, 445.0])
    unchanged = results[3]
    row = decode_row(gate(unchanged, "history"))
    assert gate(unchanged, "history")["status"] == "inconclusive" and row["effect_pct"] > -3
    assert row["detectable_pct"] > 12
    assert unchanged["measure_again"] is False and unchanged["ok"] is True
    # -8.5 % against one reference run on a 12 % host: no second measurement could make it a failure
    assert results[1]["measure_again"] is False and decode_row(gate(results[1], "history"))["effect_pct"] < -3


def test_measure_again_when_the_floor_fails_or_a_row_could_fail_on_one_more_measurement():
    def with_row(could_fail, gate_name="history"):
        return [{"gate": "floor", "status": "pass"},
                {"gate": gate_name, "status": "inconclusive", "metrics": [{"metric": DECODE, "could_fail": could_fail}]}]

    assert gates.measure_again([{"gate": "floor", "status": "fail"}, {"gate": "history", "status": "skip"}]) is True
    assert gates.measure_again(with_row(True)) is True
    assert gates.measure_again(with_row(True, gate_name="last_good")) is True
    assert gates.measure_again(with_row(False)) is False
    assert gates.measure_again([{"gate": "floor", "status": "skip"}]) is False


def test_could_fail_says_whether_a_second_measurement_as_low_as_this_one_would_fail():
    """Against 5 reference runs at 100 with 2 % noise over 30 dof, at 1 % false alarms: a run at -8 %
    could fail on a second measurement (the best stays -8 %, less the best's lead, with a smaller
    standard error); a run at -1.5 % could not (less than the minimum effect even with the lead), nor could any
    run of a host whose noise is 15 %."""
    refs = [100.0, 101.0, 99.0, 100.5, 99.5]
    assert noise.could_fail([92.0], refs, 0.02, 30, 0.01, 0.03) is True
    assert noise.could_fail([98.5], refs, 0.02, 30, 0.01, 0.03) is False
    assert noise.could_fail([80.0], refs, 0.15, 30, 0.01, 0.03) is False
    # a gate row carries it: a fixed-mode row never asks (the tolerance decides there)
    fixed = gates.compare_metric(DECODE, [92.0], refs, settings.thresholds({"gate_mode": "fixed"}),
                                 {"sigma": 0.02, "dof": 30, "source": "host", "basis": "b"})
    assert "could_fail" not in fixed
    noisy = gates.compare_metric(DECODE, [92.0], refs, settings.thresholds({}),
                                 {"sigma": 0.02, "dof": 30, "source": "host", "basis": "b"})
    assert noisy["status"] in ("fail", "inconclusive") and noisy["could_fail"] is True


def test_an_earlier_measurement_that_is_not_a_record_is_refused():
    with pytest.raises(VerifyError, match="an earlier measurement of this run has no metrics"):
        run(bench(53.4, 196.0), STEADY, earlier=[{"decode": 51.0}])


# ------------------------------------------------------------------ the settings (settings.py)

def test_the_role_defaults_are_the_settings_defaults():
    defaults = yaml.safe_load((REPO / "roles" / "sglang_verify" / "defaults" / "main.yml").read_text())
    assert {name: defaults[f"sglang_verify_{name}"] for name in settings.SPEC} == settings.DEFAULTS


def test_missing_empty_and_none_settings_take_the_defaults():
    assert settings.problems({}) == []
    assert settings.thresholds({}) == settings.DEFAULTS
    assert settings.thresholds(dict.fromkeys(settings.SPEC)) == settings.DEFAULTS
    assert settings.thresholds(dict.fromkeys(settings.SPEC, "")) == settings.DEFAULTS
    assert evaluate(bench(53.8, 192.0), {}, server(), [])["report"]["thresholds"] == settings.DEFAULTS


def test_settings_as_ansible_templates_them_are_converted():
    got = settings.thresholds({"min_effect_pct": "5", "history_window": "7", "run_noise_prior_dof": "4.0",
                               "rebaseline": "True", "accept_regression": "false", "gate_mode": "fixed"})
    assert (got["min_effect_pct"], got["history_window"], got["run_noise_prior_dof"]) == (5.0, 7, 4)
    assert (got["rebaseline"], got["accept_regression"], got["gate_mode"]) == (True, False, "fixed")


@pytest.mark.parametrize(("name", "value"), [
    ("min_decode_tok_s", -1), ("min_accept_length", "x"), ("history_window", 0), ("history_window", 2.5),
    ("regression_tolerance_pct", 100), ("gate_mode", "strict"), ("inconclusive", "rollback"), ("remeasure", 6),
    ("min_effect_pct", 0), ("min_effect_pct", "3%"), ("min_effect_pct", True), ("false_alarm_pct", 50),
    ("power_pct", 100), ("power_pct", 40), ("run_noise_prior_pct", 50), ("run_noise_prior_pct", -1),
    ("run_noise_prior_dof", 0), ("run_noise_prior_dof", 101), ("accept_regression", "maybe"), ("rebaseline", 2),
])
def test_each_setting_out_of_range_is_named_with_its_variable(name, value):
    assert settings.problems({name: value}) == [f"sglang_verify_{name} {value!r}: must be {settings.SPEC[name][1]}"]


def test_every_problem_is_refused_at_once_and_unknown_names_too():
    with pytest.raises(VerifyError) as err:
        run(bench(53.8, 192.0), th={"min_effect_pct": 0, "gate_mode": "strict"})
    assert str(err.value) == ("sglang_verify settings out of range: sglang_verify_gate_mode 'strict': must be noise or "
                              "fixed; sglang_verify_min_effect_pct 0: must be a number in (0, 100)")
    assert settings.problems({"min_effect": 3}) == [
        f"sglang_verify_min_effect is not a verify threshold (known: {', '.join(settings.SPEC)})"]
    assert settings.problems([3]) == ["the verify thresholds must be a dict, got list"]


def test_the_role_checks_its_settings_with_the_same_problems():
    check = verify_filters.FilterModule().filters()["sglang_verify_threshold_problems"]
    assert check({"power_pct": 100, "remeasure": 1}) == ["sglang_verify_power_pct 100: must be a number in [50, 100)"]
    assert check(settings.DEFAULTS) == []
