"""Verify a running SGLang under load: gates and a report (stdlib only).

Input: benchmark results (bench_client.run_benchmark, one per concurrency level; the level-1 run
is the single-stream run), the host's thresholds, its history (records of previous runs, as
written to `verify-history.jsonl`), GPU facts, model weight bytes, TP size and the SGLang version
and arguments. Output: a report with three gates, each `pass`, `fail` or `skip`:

- `floor`: single-stream decode tok/s >= `min_decode_tok_s` (0: no floor);
- `history`: each measured metric (single-stream decode tok/s, output tok/s at every other
  concurrency level) within `regression_tolerance_pct` % below the median of the host's last
  `history_window` PASSING runs with the same fingerprint (SGLang version + normalised argv)
  and the same workload (API, input/output lengths, concurrency levels);
  no such run yet: `skip`, and this run starts the baseline;
- `accept_length`: speculative decoding configured -> the server's accept length >=
  `min_accept_length` (0: off); none reported counts as a failure (MTP silently off);
- `last_good`: each metric within `regression_tolerance_pct` % below the host's last known good
  release (plugins/module_utils/release/records.py) on the same model, GPUs and workload, whatever its
  version or flags: the regression a version or flag change brings, which `history` cannot see
  (a new fingerprint has no history). `accept_regression` reports the drop without failing.

Every failure message puts measured value, threshold, history median and roofline side by side
and says what to check. The roofline (plugins/module_utils/verify/roofline.py) is the memory-bandwidth upper
bound of single-stream decode; the report shows the measured efficiency against it.
"""

from __future__ import annotations

import json
import math
import os

from ansible_collections.sglang.fleet.plugins.module_utils.host.args import fingerprint
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import is_cpu_host
from ansible_collections.sglang.fleet.plugins.module_utils.verify import noise
from ansible_collections.sglang.fleet.plugins.module_utils.verify.roofline import (
    NOT_ON_CPU,
    RooflineError,
    decode_upper_bound,
    efficiency_pct,
)

DECODE = "decode_tok_s@1"
GATES = ("floor", "history", "accept_length", "last_good")
CHECK_SPEED = ("check: GPU clocks and throttling (nvidia-smi -q -d PERFORMANCE), other processes on the GPUs "
               "(nvidia-smi), the resolved settings (ansible-playbook audit.yml -l {host}), the service log")
CHECK_SPEED_CPU = ("check: other processes on the host's cores (top), CPU frequency scaling, the resolved settings "
                   "(ansible-playbook audit.yml -l {host}), the service log")
CHECK_SPEC = ("check: speculative decoding really runs (ansible-playbook audit.yml -l {host}: "
              "speculative_algorithm and speculative_num_steps in /server_info; MTP can be silently off, "
              "sglang PR #23859), the draft model / MTP weights, speculative_num_steps and "
              "speculative_num_draft_tokens in sglang_args")


class VerifyError(ValueError):
    """Input the verification cannot use."""


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value, unit="tok/s", digits=1):
    return "n/a" if value is None else f"{value:.{digits}f} {unit}".rstrip()


def median(values):
    """Median of a non-empty list of numbers (mean of the middle two for an even count)."""
    vals = sorted(values)
    if not vals:
        raise VerifyError("median of an empty list")
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def tp_size_of(args):
    """The TP size from the arguments (tp_size, its alias tensor_parallel_size), default 1."""
    tp = args.get("tp_size", args.get("tensor_parallel_size")) or 1
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise VerifyError(f"tp_size must be a whole number >= 1, got {tp!r}")
    return tp


def speculative_algorithm(args):
    """The configured speculative algorithm (None when speculative decoding is off)."""
    algo = args.get("speculative_algorithm")
    return str(algo) if algo else None


def levels(bench):
    """Per concurrency level: decode tok/s per stream (p50), output tok/s, TTFT/ITL p50, errors.

    `bench`: list of run_benchmark results (any order); one of them must be at concurrency 1.
    """
    out = {}
    for res in bench:
        c = res.get("concurrency")
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise VerifyError(f"benchmark result without a valid concurrency: {c!r}")
        if c in out:
            raise VerifyError(f"two benchmark results at concurrency {c}")
        out[c] = {
            "concurrency": c,
            "decode_tok_s": (res.get("decode_tok_s_per_stream") or {}).get("p50"),
            "output_tok_s": res.get("output_throughput"),
            "request_s": res.get("request_throughput"),
            "ttft_ms_p50": (res.get("ttft_ms") or {}).get("p50"),
            "itl_ms_p50": (res.get("itl_ms") or {}).get("p50"),
            "e2e_ms_p50": (res.get("e2e_ms") or {}).get("p50"),
            "completed": res.get("completed"),
            "failed": res.get("failed"),
            "accept_length": res.get("spec_accept_length"),
            "api": res.get("api"),
            "input_len": res.get("input_len"),
            "output_len": res.get("output_len"),
            "repeats": res.get("repeats"),
            # each repeat's own figures (bench_client's `runs`): what the noise-aware gates compare
            "samples": {
                "decode_tok_s": [x for x in ((r.get("decode_tok_s_per_stream") or {}).get("p50")
                                             for r in res.get("runs") or []) if _num(x) and x > 0],
                "output_tok_s": [x for x in (r.get("output_throughput") for r in res.get("runs") or [])
                                 if _num(x) and x > 0],
            },
        }
    if 1 not in out:
        raise VerifyError("no single-stream (concurrency 1) benchmark result")
    if not _num(out[1]["decode_tok_s"]):
        raise VerifyError(f"the single-stream run measured no decode speed (completed {out[1]['completed']}, "
                          f"failed {out[1]['failed']}); output_len must be >= 2")
    return [out[c] for c in sorted(out)]


def metrics_of(lv):
    """The gated metrics: single-stream decode tok/s and output tok/s at every other level."""
    metrics = {DECODE: round(lv[0]["decode_tok_s"], 2)}
    for row in lv[1:]:
        if _num(row["output_tok_s"]):
            metrics[f"output_tok_s@{row['concurrency']}"] = round(row["output_tok_s"], 2)
    return metrics


def samples_of(lv):
    """Each gated metric's per-repeat values (metrics_of's names); a metric without any is left out."""
    out = {DECODE: lv[0]["samples"]["decode_tok_s"]} if lv[0]["samples"]["decode_tok_s"] else {}
    for row in lv[1:]:
        if row["samples"]["output_tok_s"]:
            out[f"output_tok_s@{row['concurrency']}"] = row["samples"]["output_tok_s"]
    return out


def combine_measurements(earlier, metrics, samples):
    """This verify's measurements as one run, when an inconclusive gate measured the server again:
    `earlier` its earlier measurements, each one's own figures (evaluate's `measurement`), `metrics`/
    `samples` the latest's. Returns (metrics: the median of each metric over the measurements, samples: every
    repeat of every measurement, figures: {metric: each measurement's figure}: what the run-to-run
    comparison takes as this run)."""
    figures = {name: [] for name in metrics}
    merged = {}
    for rec in [*earlier, {"metrics": metrics, "samples": samples}]:
        if not (isinstance(rec, dict) and isinstance(rec.get("metrics"), dict)):
            raise VerifyError(f"an earlier measurement of this run has no metrics: {rec!r}")
        for name in figures:
            value = rec["metrics"].get(name)
            if _num(value) and value > 0:
                figures[name].append(value)
        for name, values in (rec.get("samples") or {}).items():
            merged.setdefault(name, []).extend(v for v in values if _num(v) and v > 0)
    return {name: round(median(vals), 2) if vals else metrics[name] for name, vals in figures.items()}, merged, figures


def host_noise(history, shape):
    """The host's noise per metric, learned from its passing runs of this workload whatever their
    version or flags (a new release has no runs of its own yet):
    {"runs": {metric: (sigma, dof)}: run to run, each run's figure around the mean of the runs with
    its fingerprint; "within": {metric: (sigma, dof)}: one repeat around its run's mean}."""
    by_fp, within = {}, {}
    for rec in history:
        if not (isinstance(rec, dict) and rec.get("passed") is True and rec.get("workload") == shape):
            continue
        for name, value in (rec.get("metrics") or {}).items():
            if _num(value) and value > 0:
                by_fp.setdefault(name, {}).setdefault(rec.get("fingerprint"), []).append(value)
        for name, values in (rec.get("samples") or {}).items():
            if isinstance(values, list) and all(_num(v) and v > 0 for v in values):
                within.setdefault(name, []).append(values)
    return {"runs": {name: noise.pooled_noise(list(groups.values())) for name, groups in by_fp.items()},
            "within": {name: noise.pooled_noise(groups) for name, groups in within.items()}}


def metric_label(name):
    """`decode_tok_s@1` -> `single-stream decode`, `output_tok_s@4` -> `output at concurrency 4`."""
    kind, _, c = name.partition("@")
    return "single-stream decode" if kind == "decode_tok_s" else f"output at concurrency {c}"


def workload(lv):
    """The benchmark's shape (`completions in=512 out=256 c=1,4`): runs of other shapes never compare."""
    row = lv[0]
    return (f"{row.get('api') or 'completions'} in={row.get('input_len')} out={row.get('output_len')} "
            f"c={','.join(str(r['concurrency']) for r in lv)}")


def baseline(history, fp_id, window, shape=None):
    """Median per metric over the last `window` passing records with fingerprint `fp_id`.

    Records of other fingerprints (version or flags), of another workload `shape` (when given),
    failed runs and check-mode runs are ignored.
    Returns {"runs": n, "window": window, "since": first stamp, "last": last stamp,
    "median": {metric: value}, "accept_length": median or None}.
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise VerifyError(f"history_window must be a whole number >= 1, got {window!r}")
    same = [r for r in history if isinstance(r, dict) and r.get("fingerprint") == fp_id and r.get("passed") is True
            and isinstance(r.get("metrics"), dict) and (shape is None or r.get("workload") == shape)]
    same.sort(key=lambda r: str(r.get("generated_at", "")))
    used = same[-window:]
    med = {}
    for name in sorted({k for r in used for k in r["metrics"]}):
        vals = [r["metrics"][name] for r in used if _num(r["metrics"].get(name))]
        if vals:
            med[name] = round(median(vals), 2)
    acc = [r["accept_length"] for r in used if _num(r.get("accept_length"))]
    run_values = {name: [r["metrics"][name] for r in used if _num(r["metrics"].get(name)) and r["metrics"][name] > 0]
                  for name in med}
    samples = {}
    for r in used:
        for name, values in (r.get("samples") or {}).items():
            if isinstance(values, list):
                samples.setdefault(name, []).extend(v for v in values if _num(v) and v > 0)
    return {
        "runs": len(used), "window": window, "samples": samples, "values": run_values,
        "since": used[0].get("generated_at") if used else None,
        "last": used[-1].get("generated_at") if used else None,
        "median": med, "accept_length": round(median(acc), 2) if acc else None,
    }


def roofline(gpu, weight_bytes, tp_size, accept_length):
    """decode_upper_bound for the host, or {"error": why} when it cannot be computed; on a CPU host
    {"error": NOT_ON_CPU, "not_applicable": true} (no GPU memory bandwidth bounds its decode)."""
    if is_cpu_host(gpu):
        return {"error": NOT_ON_CPU, "not_applicable": True}
    if not weight_bytes:
        return {"error": "model weight bytes unknown (set sglang_model_weight_bytes, or give the model folder "
                         "a model.safetensors.index.json / *.safetensors / config.json)"}
    try:
        return decode_upper_bound(gpu or {}, weight_bytes, tp_size, accept_length)
    except RooflineError as exc:
        return {"error": str(exc)}


def _roof_text(roof, measured):
    if roof.get("not_applicable"):
        return f"roofline {roof['error']}"
    if "error" in roof:
        return f"roofline n/a ({roof['error']})"
    return (f"roofline {_fmt(roof['upper_bound_tok_s'])} at accept length {roof['accept_length']:.2f}, "
            f"measured {efficiency_pct(measured, roof):.1f} % of it")


def _hist_text(base, name):
    if not base["runs"]:
        return "history median n/a (no passing run with this version and flags yet)"
    value = base["median"].get(name)
    return f"history median {_fmt(value)} over {base['runs']} passing run{'s' if base['runs'] != 1 else ''}"


def compare_metrics(metrics, reference, tol, ref_key, stats=None):
    """(rows, failed rows): each metric against its reference value (`ref_key` in the row), failing
    when more than `tol` % below it; metrics without a positive reference are left out.

    `stats` adds the noise-aware comparison (plugins/module_utils/verify/noise.py): {"mode": "fixed"
    or "noise", "samples": this run's repeats per metric, "reference": the reference's repeats per
    metric, "reference_runs": the reference runs' figures per metric, "noise": host_noise(), "alpha",
    "power", "min_effect" (fractions)}. Each row gets its verdict (noise_verdict: pass, fail,
    inconclusive or point), effect, interval, detectable loss, noise and what the noise was learned
    from; in mode "noise" that verdict is the row's status (a point comparison keeps `tol`), in mode
    "fixed" it is reported next to the fixed tolerance's status."""
    rows = []
    for name in sorted(metrics, key=lambda n: (n != DECODE, n)):
        ref = reference.get(name)
        if not _num(ref) or ref <= 0:
            continue
        value, limit = metrics[name], ref * (1 - tol / 100.0)
        row = {"metric": name, "measured": value, ref_key: ref,
               "change_pct": -round(100.0 * (ref - value) / ref, 1), "threshold": round(limit, 2),
               "status": "pass" if value >= limit else "fail"}
        res = noise_verdict(name, value, stats, tol) if stats else None
        if res:
            row.update({"noise_verdict": res["verdict"], "comparison": res["message"], "noise_basis": res["basis"],
                        **noise_figures(res)})
            if stats["mode"] == "noise" and res["verdict"] != "point":
                row["status"], row["decided_by"] = res["verdict"], "noise"
        rows.append(row)
    return rows, [r for r in rows if r["status"] == "fail"]


def loss_text(row, ref_key, ref_name, threshold_name, tol):
    """A failed row as the gate's message says it: the noise-aware figures where they decided
    (effect, interval, what the noise was learned from, detectable loss), else the tolerance."""
    head = f"{metric_label(row['metric'])} {_fmt(row['measured'])} is {-row['change_pct']:.1f} % below {ref_name}{_fmt(row[ref_key])}"
    if row.get("decided_by") == "noise":
        return f"{head}: {row['comparison']}"
    return f"{head} (threshold {_fmt(row['threshold'])} = {threshold_name} - {tol:g} %)"


def within_text(rows, tol, ref):
    """A passing gate's comparison with `ref`: the noise-aware one on single-stream decode where it
    decided, else the tolerance with the largest change."""
    decided = next((r for r in rows if r.get("decided_by") == "noise" and r["metric"] == DECODE), None)
    if decided:
        return f"no loss beyond the noise against {ref} (single-stream decode {decided['comparison']})"
    worst = min(rows, key=lambda r: r["change_pct"]) if rows else None
    return (f"within {tol:g} % of {ref}"
            + (f" (largest change {worst['change_pct']:+.1f} % in {metric_label(worst['metric'])})" if worst else ""))


def noise_figures(res):
    """A noise-aware comparison's figures in %, as the reports show them: effect, interval,
    detectable loss and noise (None where the comparison has none, e.g. a point comparison)."""
    def pct(x):
        return None if x is None else round(100 * x, 2)
    return {"effect_pct": pct(res["effect"]),
            "interval_pct": None if res.get("interval") is None else [pct(x) for x in res["interval"]],
            "detectable_pct": pct(res.get("detectable")), "noise_pct": pct(res.get("sigma"))}


def noise_verdict(name, value, stats, tol):
    """The noise-aware verdict on metric `name` (see compare_metrics), with `basis`: `runs` (this run
    against the reference runs, with the host's run-to-run noise: needs 2 dof, e.g. 3 passing runs of
    one release), else `repeats` (this run's repeats against the reference's, with the spread of one
    repeat: it ignores what changes between runs, said in the message), else a point comparison."""
    opts = {"alpha": stats["alpha"], "power": stats["power"], "min_effect": stats["min_effect"]}
    run_sigma, run_dof = stats["noise"]["runs"].get(name, (None, 0))
    refs = stats.get("reference_runs", {}).get(name)
    if refs and run_sigma and run_dof >= 2:
        current = stats.get("figures", {}).get(name) or value
        return {**noise.compare_runs(current, refs, run_sigma, run_dof, **opts), "basis": "runs"}
    cur, ref = stats["samples"].get(name), stats.get("reference", {}).get(name)
    if not (cur and ref):
        return None
    sigma, dof = stats["noise"]["within"].get(name, (None, 0))
    res = noise.compare(cur, ref, sigma, dof, point_tolerance=tol / 100.0,
                        noise_name=f"run-to-run noise not learned yet ({run_dof} dof), within-run noise", **opts)
    return {**res, "basis": "point" if res["verdict"] == "point" else "repeats"}


def decode_noise_row(gate):
    """A gate's single-stream decode row when the noise-aware comparison tested it (basis `runs` or
    `repeats`, not a point comparison), else None: what the reports, the fleet table and the metrics show."""
    return next((r for r in gate.get("metrics") or []
                 if r.get("metric") == DECODE and r.get("noise_basis") in ("runs", "repeats")), None)


def _show(value):
    return "unset" if value is None else json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) \
        else str(value).lower() if isinstance(value, bool) else str(value)


def changes(old_version, old_args, version, args):
    """Each difference between two releases, the release first, then each flag by name:
    [{"kind": "version" or "flag", "name": "sglang 0.5.11 -> 0.5.18" or "speculative_num_steps 3 -> 1",
    "flag" (flags only), "from", "to"}]; a flag one side does not set is None there ("unset")."""
    out = [{"kind": "version", "name": f"sglang {old_version} -> {version}", "from": str(old_version), "to": str(version)}
           ] if str(old_version) != str(version) else []
    old_args, args = old_args or {}, args or {}
    for key in sorted(set(old_args) | set(args)):
        before, after = old_args.get(key), args.get(key)
        if before != after:
            out.append({"kind": "flag", "name": f"{key} {_show(before)} -> {_show(after)}", "flag": key,
                        "from": before, "to": after})
    return out


def what_changed(old_version, old_args, version, args):
    """["sglang 0.5.11 -> 0.5.18", "speculative_num_steps 3 -> 1", ...] between two releases."""
    return [change["name"] for change in changes(old_version, old_args, version, args)]


def _gpu_key(gpu):
    gpu = gpu or {}
    return (gpu.get("gpu_model"), gpu.get("gpu_count"))


def last_good_gate(last_good, fp, args, metrics, shape, gpu, tol, accept_regression, side, stats=None):
    """The `last_good` gate (see module doc); `last_good` is the host's release record or None."""
    gate = {"gate": "last_good", "status": "skip"}
    if not last_good:
        return {**gate, "message": "last known good: none on this host yet (the first release that passes every "
                                   "gate becomes it)"}
    lg = last_good.get("verify") or {}
    name = (f"release {last_good.get('id')} (sglang {last_good.get('version')}, fingerprint "
            f"{last_good.get('fingerprint')}, verified {lg.get('generated_at') or '?'})")
    gate["release"] = last_good.get("id")
    if last_good.get("fingerprint") == fp["id"]:
        return {**gate, "message": f"last known good: this is the last known good {name}; history compares its runs"}
    why = None
    if str(last_good.get("model_path")) != str(args.get("model_path")):
        why = f"another model ({last_good.get('model_path')})"
    elif _gpu_key(last_good.get("gpu")) != _gpu_key(gpu):
        why = "other GPUs ({} x{})".format(*_gpu_key(last_good.get("gpu")))
    elif lg.get("workload") != shape:
        why = f"another workload ({lg.get('workload')})"
    elif not isinstance(lg.get("metrics"), dict):
        why = "no verify result"
    if why:
        return {**gate, "message": f"last known good: {name} ran {why}; not compared"}
    changed = what_changed(last_good.get("version"), last_good.get("args"), fp["version"], args)
    rows, failed = compare_metrics(metrics, lg["metrics"], tol, "last_good",
                                   stats and {**stats, "reference": lg.get("samples") or {},
                                              "reference_runs": {k: [v] for k, v in lg["metrics"].items()
                                                                 if _num(v) and v > 0}})
    gate.update({"tolerance_pct": tol, "metrics": rows, "changed": changed})
    what = "what changed: " + (", ".join(changed) if changed else "nothing in version or flags (the environment?)")
    unsure = [r for r in rows if r["status"] == "inconclusive"]
    if unsure and not failed:
        return {**gate, "status": "inconclusive", "message": (
            f"last known good: cannot tell against {name}: "
            + "; ".join(f"{metric_label(r['metric'])} {r['comparison']}" for r in unsure) + f"; {what}")}
    if not failed:
        return {**gate, "status": "pass", "message": f"last known good: {within_text(rows, tol, name)}; {what}"}
    parts = "; ".join(loss_text(r, "last_good", "", "last known good", tol) for r in failed)
    msg = (f"last known good: against the last known good {name}: {parts}; {what}; {side}"
           if any(r.get("decided_by") == "noise" for r in failed) else
           f"last known good: {parts} of the last known good {name}; {what}; {side}")
    if accept_regression:
        return {**gate, "status": "accepted",
                "message": msg + "; accepted as the new baseline (sglang_verify_accept_regression)"}
    return {**gate, "status": "fail",
            "message": msg + "; fix the inventory, or accept the new speed as the baseline with "
                             "-e sglang_verify_accept_regression=true"}


NOISE_THRESHOLDS = ("gate_mode", "min_effect_pct", "false_alarm_pct", "power_pct", "inconclusive")


def noise_options(thresholds):
    """The noise-aware gates' settings from `thresholds` (None when min_effect_pct is unset: the fixed
    tolerance alone), each checked: gate_mode fixed (decides by regression_tolerance_pct, reports the
    noise-aware verdict) or noise (decides by it); inconclusive keep (an inconclusive gate never fails
    the run) or fail; min_effect_pct in (0, 100), false_alarm_pct in (0, 50), power_pct in [50, 100)."""
    if thresholds.get("min_effect_pct") is None:
        return None
    mode, policy = thresholds.get("gate_mode", "fixed"), thresholds.get("inconclusive", "keep")
    values = {k: thresholds.get(k, d) for k, d in (("min_effect_pct", None), ("false_alarm_pct", 1), ("power_pct", 95))}
    bad = [f"{k} {v!r}" for k, v in values.items() if not _num(v)]
    if not bad:
        eff, alpha, power = values["min_effect_pct"], values["false_alarm_pct"], values["power_pct"]
        bad = ([f"min_effect_pct {eff:g} (0 < it < 100)"] if not 0 < eff < 100 else []) \
            + ([f"false_alarm_pct {alpha:g} (0 < it < 50)"] if not 0 < alpha < 50 else []) \
            + ([f"power_pct {power:g} (50 <= it < 100)"] if not 50 <= power < 100 else [])
    bad += [f"gate_mode {mode!r} (fixed or noise)"] if mode not in ("fixed", "noise") else []
    bad += [f"inconclusive {policy!r} (keep or fail)"] if policy not in ("keep", "fail") else []
    if bad:
        raise VerifyError("noise-aware gate settings out of range: " + ", ".join(bad)
                          + "; fix sglang_verify_min_effect_pct, _false_alarm_pct, _power_pct, _gate_mode or _inconclusive")
    return {"mode": mode, "inconclusive": policy, "min_effect": values["min_effect_pct"] / 100.0,
            "alpha": values["false_alarm_pct"] / 100.0, "power": values["power_pct"] / 100.0}


def evaluate(bench, thresholds, history, gpu, weight_bytes, version, args, host="", stamp="", last_good=None,
             accept_regression=False, earlier=None):
    """Gates and report for one verification run (see module doc).

    thresholds: min_decode_tok_s, min_accept_length, history_window, regression_tolerance_pct.
    last_good: the host's last known good release record (plugins/module_utils/release/records.py) or None.
    earlier: this run's earlier measurements (each result's `measurement`: its own metrics and samples),
    when an inconclusive gate had the server measured again (combine_measurements): the run is all of them.
    Returns {"ok", "failures", "lines", "line", "record", "report", "measurement", "inconclusive" (a gate
    is: what has the server measured again)}; `record` goes to history.
    """
    floor = float(thresholds.get("min_decode_tok_s") or 0)
    min_acc = float(thresholds.get("min_accept_length") or 0)
    window = thresholds.get("history_window", 5)
    tol = float(thresholds.get("regression_tolerance_pct", 5))
    if floor < 0 or min_acc < 0 or not 0 <= tol < 100:
        raise VerifyError(f"thresholds out of range: min_decode_tok_s {floor:g}, min_accept_length {min_acc:g}, "
                          f"regression_tolerance_pct {tol:g} (0 <= tolerance < 100)")
    stats_opts = noise_options(thresholds)
    fp = fingerprint(version, args)
    tp = tp_size_of(args)
    algo = speculative_algorithm(args)
    lv = levels(bench)
    metrics, samples = metrics_of(lv), samples_of(lv)
    measurement = {"metrics": metrics, "samples": samples}   # this measurement's own, for a next one
    measurements = 1 + len(earlier or [])
    metrics, samples, figures = combine_measurements(earlier or [], metrics, samples)
    decode = metrics[DECODE]
    # An accept length of 0 (the /metrics gauge of a server that never verified a draft) is none.
    accept = next((row["accept_length"] for row in lv if _num(row["accept_length"]) and row["accept_length"] > 0),
                  None)
    shape = workload(lv)
    base = baseline(history, fp["id"], window, shape)
    stats = stats_opts and {**stats_opts, "samples": samples, "figures": figures, "noise": host_noise(history, shape)}
    roof = roofline(gpu, weight_bytes, tp, accept if _num(accept) and accept > 0 else 1.0)
    check_speed = CHECK_SPEED_CPU if is_cpu_host(gpu) else CHECK_SPEED
    eff = None if "error" in roof else efficiency_pct(decode, roof)
    side = f"{_hist_text(base, DECODE)}; {_roof_text(roof, decode)}"
    gates = []

    # (a) absolute floor
    if floor <= 0:
        gates.append({"gate": "floor", "status": "skip", "message": "floor: no sglang_verify_min_decode_tok_s set"})
    else:
        ok = decode >= floor
        msg = (f"floor: single-stream decode {_fmt(decode)} {'>=' if ok else '<'} floor {_fmt(floor)} ({side})")
        if not ok:
            msg += "; " + check_speed.format(host=host or "HOST")
            if algo:
                msg += f"; accept length {_fmt(accept, '', 2)}"
        gates.append({"gate": "floor", "status": "pass" if ok else "fail", "measured": decode, "threshold": floor,
                      "history_median": base["median"].get(DECODE), "message": msg})

    # (b) regression against the host's own history
    if not base["runs"]:
        gates.append({"gate": "history", "status": "skip", "message": (
            f"history: no passing run of sglang {fp['version']} with these flags (fingerprint {fp['id']}) and this "
            f"workload ({shape}) yet; "
            f"this run starts the baseline ({_roof_text(roof, decode)})")})
    else:
        rows, failed = compare_metrics(metrics, base["median"], tol, "history_median",
                                       stats and {**stats, "reference": base["samples"],
                                                  "reference_runs": base["values"]})
        unsure = [r for r in rows if r["status"] == "inconclusive"]
        hist_of = (f"last {base['runs']} passing run{'s' if base['runs'] != 1 else ''} of sglang {fp['version']} "
                   f"with these flags, fingerprint {fp['id']}, workload {shape}, {base['since']} .. {base['last']}")
        if failed:
            parts = [loss_text(r, "history_median", "the history median ", "median", tol) for r in failed]
            msg = (f"history: {'; '.join(parts)} ({hist_of}; floor {_fmt(floor or None)}; "
                   f"{_roof_text(roof, decode)}); check: what changed since {base['last']} (driver, CUDA, "
                   f"firmware, GPU clocks, other load on the host, the model files), then "
                   + check_speed.format(host=host or "HOST").removeprefix("check: "))
        elif unsure:
            msg = (f"history: cannot tell against the {hist_of}: "
                   + "; ".join(f"{metric_label(r['metric'])} {r['comparison']}" for r in unsure))
        else:
            msg = f"history: {within_text(rows, tol, 'the median of the ' + hist_of)}"
        gates.append({"gate": "history", "status": "fail" if failed else "inconclusive" if unsure else "pass",
                      "tolerance_pct": tol,
                      "runs": base["runs"], "metrics": rows, "message": msg})

    # (c) speculative accept length
    if not algo:
        gates.append({"gate": "accept_length", "status": "skip",
                      "message": "accept length: speculative decoding not configured"})
    elif min_acc <= 0:
        gates.append({"gate": "accept_length", "status": "skip",
                      "message": f"accept length: {_fmt(accept, '', 2)} (no sglang_verify_min_accept_length set)"})
    else:
        hist_acc = f"history median {_fmt(base['accept_length'], '', 2)}" if base["accept_length"] else \
            "history median n/a"
        if not _num(accept):
            ok = False
            msg = (f"accept length: speculative_algorithm {algo} is configured but the server reports no accept "
                   f"length (minimum {min_acc:g}; {hist_acc}): speculative decoding is not running; "
                   f"single-stream decode {_fmt(decode)}, {_roof_text(roof, decode)}; "
                   + CHECK_SPEC.format(host=host or "HOST"))
        else:
            ok = accept >= min_acc
            msg = (f"accept length: {accept:.2f} {'>=' if ok else '<'} minimum {min_acc:g} ({hist_acc}; "
                   f"speculative_algorithm {algo}; single-stream decode {_fmt(decode)}, {_roof_text(roof, decode)})")
            if not ok:
                msg += "; " + CHECK_SPEC.format(host=host or "HOST")
        gates.append({"gate": "accept_length", "status": "pass" if ok else "fail", "measured": accept,
                      "threshold": min_acc, "history_median": base["accept_length"], "message": msg})

    # (d) cross-release: against the host's last known good, whatever its version or flags
    gates.append(last_good_gate(last_good, fp, args, metrics, shape, gpu, tol, accept_regression,
                                _roof_text(roof, decode), stats))

    if stats and stats["mode"] == "fixed":
        for gate in gates:
            decode_row = decode_noise_row(gate)
            if decode_row:
                gate["message"] += (f"; noise-aware, reported only (sglang_verify_gate_mode fixed): single-stream "
                                    f"decode {decode_row['comparison']}")
    for gate in gates:
        if gate["status"] == "inconclusive":
            gate["message"] += (f"; still inconclusive after {measurements} measurements of this run" if measurements > 1
                                else "") + ("; more repeats (sglang_verify_repeats) or measurements "
                                            "(sglang_verify_remeasure) narrow it")
    failing = ("fail", "inconclusive") if stats and stats["inconclusive"] == "fail" else ("fail",)
    failures = [g["message"] for g in gates if g["status"] in failing]
    ok = not failures
    status = {g["gate"]: g["status"] for g in gates}
    roof_short = ("roofline " + NOT_ON_CPU.split(" (", 1)[0] if roof.get("not_applicable") else
                  "roofline n/a" if eff is None else
                  f"roofline {_fmt(roof['upper_bound_tok_s'])}, {eff:.1f} % of it")
    hist_short = (f"history {_fmt(base['median'].get(DECODE))} over {base['runs']}" if base["runs"]
                  else "no history yet")
    others = ", ".join(f"c={row['concurrency']} {_fmt(row['output_tok_s'])} out" for row in lv[1:]
                       if _num(row["output_tok_s"]))
    line = (f"{host}: {'PASS' if ok else 'FAIL'} single-stream decode {_fmt(decode)} "
            f"(floor {_fmt(floor) if floor > 0 else 'none'}, {hist_short}, {roof_short})"
            + (f", accept length {_fmt(accept, '', 2)}" + (f" (min {min_acc:g})" if min_acc > 0 else "")
               if algo else "")
            + (f"; {others}" if others else "")
            + " [" + ", ".join(f"{g} {status[g]}" for g in GATES) + "]"
            + (f" ({measurements} measurements)" if measurements > 1 else ""))
    record = {
        "generated_at": stamp, "host": host, "version": fp["version"], "fingerprint": fp["id"], "workload": shape,
        "passed": ok, "gates": status, "metrics": metrics, "samples": samples, "measurements": measurements,
        "accept_length": accept,
        "efficiency_pct": eff, "upper_bound_tok_s": roof.get("upper_bound_tok_s"),
    }
    report = {
        "host": host, "generated_at": stamp, "passed": ok, "line": line, "failures": failures,
        "sglang_version": fp["version"], "fingerprint": fp, "workload": shape,
        "speculative_algorithm": algo,
        "thresholds": {"min_decode_tok_s": floor, "min_accept_length": min_acc, "history_window": window,
                       "regression_tolerance_pct": tol, **{k: thresholds.get(k) for k in NOISE_THRESHOLDS}},
        "gates": gates, "levels": lv, "metrics": metrics, "measurements": measurements, "accept_length": accept,
        "history": base, "last_good": gates[-1].get("release"), "roofline": roof, "efficiency_pct": eff, "tp_size": tp,
        "weight_bytes": weight_bytes,
        "gpu": {k: (gpu or {}).get(k) for k in ("source", "gpu_model", "gpu_count", "hbm_bandwidth_gbs")},
    }
    return {"ok": ok, "failures": failures, "line": line, "lines": [line] + [g["message"] for g in gates],
            "record": record, "report": report, "measurement": measurement,
            "inconclusive": any(g["status"] == "inconclusive" for g in gates)}


def read_history_file(path):
    """Records of the history file at `path` ("" or a missing file: none)."""
    if not path or not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return read_history(fh.read())


def read_history(text):
    """Records from `verify-history.jsonl` text; blank and unreadable lines are skipped."""
    records = []
    for raw in text.splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


__all__ = [
    "VerifyError",
    "baseline",
    "evaluate",
    "fingerprint",
    "last_good_gate",
    "changes",
    "what_changed",
    "levels",
    "median",
    "read_history",
    "read_history_file",
    "roofline",
    "speculative_algorithm",
    "tp_size_of",
]
