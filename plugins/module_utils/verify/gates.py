"""Verify a running SGLang under load: gates and a report (stdlib only).

Input: benchmark results (bench_client.run_benchmark, one per concurrency level; the level-1 run
is the single-stream run), the verify settings (plugins/module_utils/verify/settings.py: one dict,
checked once), the server (host, version, args, GPU facts, model weight bytes), the host's history
(records of previous runs, as written to `verify-history.jsonl`), its peers' histories and its last
known good release. Output: a report with four gates, each `pass`, `fail`, `inconclusive` or `skip`:

- `floor`: single-stream decode tok/s >= `min_decode_tok_s` (0: no floor);
- `history`: each measured metric (single-stream decode tok/s, output tok/s at every other
  concurrency level) against the host's last `history_window` passing runs with the same
  fingerprint (SGLang version + normalised argv) and workload (API, lengths, concurrency levels),
  since the latest re-baseline (`rebaseline`); none yet: `skip`, and this run starts the baseline;
- `accept_length`: speculative decoding configured -> the server's accept length >=
  `min_accept_length` (0: off); none reported counts as a failure (MTP silently off);
- `last_good`: each metric against the host's last known good release (its passing runs in the
  history, else the one run its record keeps) on the same model, GPUs and workload, whatever its
  version or flags: the regression a version or flag change brings, which `history` cannot see.

In gate_mode `noise` (the default) the history and last-good gates compare run figures with the
host's run-to-run noise (plugins/module_utils/verify/noise.py): learned robustly from every run of
the host's history, failed ones included, and moderated by a prior (its peers' pooled noise where the
inventory has hosts of the same hardware, else `run_noise_prior_pct`); with neither, the comparison is
inconclusive. The message says which basis decided. In gate_mode `fixed` a metric fails more than
`regression_tolerance_pct` % below the reference runs' median, and the noise-aware verdict is
reported beside it.

Every failure message puts measured value, reference, floor and roofline side by side and says what
to check. The roofline (plugins/module_utils/verify/roofline.py) is the memory-bandwidth upper bound
of single-stream decode; the report shows the measured efficiency against it.
"""

from __future__ import annotations

import json
import math
import os
from statistics import median

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import fingerprint
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import is_cpu_host
from ansible_collections.sglang.fleet.plugins.module_utils.verify import noise, settings
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
REBASELINE = ("once the new speed is expected (a changed driver, host or load), start a new baseline with "
              "-e sglang_verify_rebaseline=true")


class VerifyError(SglangFleetError, ValueError):
    """Input the verification cannot use."""


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value, unit="tok/s", digits=1):
    return "n/a" if value is None else f"{value:.{digits}f} {unit}".rstrip()


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
            # every request of every repeat pooled: the percentiles tune.yml's latency limits read
            "latency_ms": res.get("latency_ms"),
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
    """This verify's measurements as one run, when a gate that suspected a loss had the server measured
    again: `earlier` its earlier measurements, each one's own figures (evaluate's `measurement`),
    `metrics`/`samples` the latest's. Returns (metrics: each metric's best measurement, the run's figure
    in the history: the least disturbed, as noise.compare_runs judges it; samples: every repeat of
    every measurement; figures: {metric: each measurement's figure}: what the comparison takes)."""
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
    return {name: round(max(vals), 2) if vals else metrics[name] for name, vals in figures.items()}, merged, figures


def metric_label(name):
    """`decode_tok_s@1` -> `single-stream decode`, `output_tok_s@4` -> `output at concurrency 4`."""
    kind, _, c = name.partition("@")
    return "single-stream decode" if kind == "decode_tok_s" else f"output at concurrency {c}"


def workload(lv):
    """The benchmark's shape (`completions in=512 out=256 c=1,4`): runs of other shapes never compare."""
    row = lv[0]
    return (f"{row.get('api') or 'completions'} in={row.get('input_len')} out={row.get('output_len')} "
            f"c={','.join(str(r['concurrency']) for r in lv)}")


def hardware_of(gpu):
    """The hardware a run was measured on, as peers are matched: `NVIDIA H200 x1`, or `cpu`."""
    if is_cpu_host(gpu):
        return "cpu"
    model, count = _gpu_key(gpu)
    return f"{model or 'unknown GPU'} x{count or '?'}"


def _series(records, name, key):
    """Each group's figures of metric `name` in time order, records grouped by `key(record)`; whether
    each run passed its gates (same shape); the number of failed runs among them."""
    groups, passed, failed = {}, {}, 0
    for rec in sorted(records, key=lambda r: str(r.get("generated_at", ""))):
        value = (rec.get("metrics") or {}).get(name)
        if _num(value) and value > 0:
            groups.setdefault(key(rec), []).append(value)
            passed.setdefault(key(rec), []).append(rec.get("passed") is True)
            failed += rec.get("passed") is False
    return list(groups.values()), list(passed.values()), failed


def server_start_of(record):
    """The server lifetime a history record (or a sglang_bench result) was measured in: its
    `server_start` (sglang_bench's, from the service's main process: its PID and start), None where it
    has none (records written before it was kept, a server without its systemd unit). Kept so that the
    noise between server lifetimes can be learned apart from the noise within one (#40); the gates do
    not decide by it yet (bench/README.md, "Restarts")."""
    start = record.get("server_start") if isinstance(record, dict) else None
    return str(start) if start not in (None, "") else None


def _of_workload(records, shape):
    return [r for r in records if isinstance(r, dict) and r.get("workload") == shape
            and isinstance(r.get("metrics"), dict)]


def host_noise(history, shape, thresholds, peers=(), hardware=None):
    """The run-to-run noise of each metric this host's history has runs of, for the noise-aware gates:
    {metric: {"sigma", "dof", "source", "basis"}} (noise.py's module docstring).

    Own: every run of this workload in `history` (passed or failed), successive runs of one fingerprint
    (noise.run_noise). Prior: the pooled noise of `peers` (other hosts' records) with this `hardware`
    and workload, else `run_noise_prior_pct`; weighted as `run_noise_prior_dof` degrees of freedom.
    `source`: host, host+peers, host+prior, peers, prior or none (then sigma is None)."""
    mine = _of_workload(history, shape)
    others = [r for r in _of_workload(peers, shape) if hardware and r.get("hardware") == hardware]
    names = {n for r in mine + others for n in r["metrics"]}
    out = {}
    for name in sorted(names):
        out[name] = noise_estimate(name, mine, others, thresholds)
    return out


def noise_estimate(name, mine, others, thresholds):
    """host_noise's estimate for one metric (see there)."""
    series, passed, failed = _series(mine, name, lambda r: r.get("fingerprint"))
    runs = sum(len(s) for s in series)
    prior_dof = thresholds["run_noise_prior_dof"]
    stated = thresholds["run_noise_prior_pct"] / 100.0 or None
    peer_series, peer_passed, _failed = _series(others, name, lambda r: (r.get("host"), r.get("fingerprint")))
    peer = noise.run_noise(peer_series, peer_passed, stated)
    if peer["sigma"] and peer["dof"] >= 2:
        hosts = sorted({str(r.get("host")) for r in others})
        prior, prior_text = (peer["sigma"], prior_dof), (
            f"peers {', '.join(hosts)}: {peer['sigma'] * 100:.1f} % over {peer['dof']} dof, as {prior_dof} dof")
        prior_source = "peers"
    elif stated:
        prior = (stated, prior_dof)
        prior_text = f"prior {thresholds['run_noise_prior_pct']:g} % as {prior_dof} dof, sglang_verify_run_noise_prior_pct"
        prior_source = "prior"
    else:
        prior, prior_text, prior_source = (None, 0), "", ""
    # a short history's failed steps are clipped at the prior's scale (noise.run_noise)
    own = noise.run_noise(series, passed, prior[0])
    sigma, dof = noise.moderate(own["sigma"], own["dof"], *prior)
    if prior_text and noise.prior_conflicts(own["sigma"], own["dof"], prior[0]):
        prior_text, prior_source = prior_text + ": set aside, this host's own runs reject it", ""
    clipped = f", {own['clipped']} step{'s' if own['clipped'] != 1 else ''} clipped" if own["clipped"] else ""
    own_text = (f"this host's {runs} runs" + (f" ({failed} failed)" if failed else "") + f" as {own['dof']} dof"
                + clipped) if own["sigma"] is not None else ""
    if not sigma:
        basis = ("this host has no two runs of one release and workload yet, and neither peers of its hardware nor a "
                 "prior (sglang_verify_run_noise_prior_pct 0)")
        return {"sigma": None, "dof": 0, "source": "none", "basis": basis}
    source = "+".join(s for s in ("host" if own["sigma"] is not None else "", prior_source) if s)
    basis = " + ".join(t for t in (own_text, prior_text) if t)
    return {"sigma": sigma, "dof": dof, "source": source, "basis": basis}


def baseline(history, fp_id, window, shape=None):
    """The reference runs of fingerprint `fp_id`: the last `window` passing records (inconclusive runs
    that were kept are passing) of workload `shape` (when given), since the latest record of that
    fingerprint that started a new baseline (`rebaseline`). Failed runs and check-mode runs are not
    references. Returns {"runs": n, "window", "since", "last", "values": {metric: each run's figure},
    "median": {metric: value}, "accept_length": median or None, "passing": passing runs since the latest
    re-baseline (the window's and older), "dropped": passing runs before it}."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise VerifyError(f"history_window must be a whole number >= 1, got {window!r}")
    same = [r for r in history if isinstance(r, dict) and r.get("fingerprint") == fp_id
            and isinstance(r.get("metrics"), dict) and (shape is None or r.get("workload") == shape)]
    same.sort(key=lambda r: str(r.get("generated_at", "")))
    starts = [i for i, r in enumerate(same) if r.get("rebaseline") is True]
    dropped = sum(r.get("passed") is True for r in same[:starts[-1]]) if starts else 0
    passing = [r for r in (same[starts[-1]:] if starts else same) if r.get("passed") is True]
    used = passing[-window:]
    values = {}
    for r in used:
        for name, value in r["metrics"].items():
            if _num(value) and value > 0:
                values.setdefault(name, []).append(value)
    acc = [r["accept_length"] for r in used if _num(r.get("accept_length"))]
    return {
        "runs": len(used), "window": window, "values": values, "dropped": dropped, "passing": len(passing),
        "since": used[0].get("generated_at") if used else None,
        "last": used[-1].get("generated_at") if used else None,
        "median": {name: round(median(vals), 2) for name, vals in sorted(values.items())},
        "accept_length": round(median(acc), 2) if acc else None,
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
        return "history n/a (no passing run with this version and flags yet)"
    value = base["median"].get(name)
    return f"history median {_fmt(value)} over {base['runs']} passing run{'s' if base['runs'] != 1 else ''}"


def noise_figures(res):
    """A noise-aware comparison's figures in %, as the reports show them: effect, interval,
    detectable loss and noise (None where the comparison has none: no noise known)."""
    def pct(x):
        return None if x is None else round(100 * x, 2)
    return {"effect_pct": pct(res["effect"]),
            "interval_pct": None if res.get("interval") is None else [pct(x) for x in res["interval"]],
            "detectable_pct": pct(res.get("detectable")), "noise_pct": pct(res.get("sigma"))}


def compare_metric(name, figures, refs, thresholds, estimate, tests=1):
    """One metric's row: this run's `figures` (each measurement's) against the reference runs' figures
    `refs`, with the metric's noise `estimate` (host_noise). Both verdicts are in the row; `status` is
    the one gate_mode decides by: noise (noise.compare_runs: this run's figure, or its best measurement
    less the expected lead, against the reference runs' geometric mean) or fixed
    (the median against the reference runs' median less regression_tolerance_pct %). `tests`: how many
    metrics the gate compares; each gets false_alarm_pct / tests (Bonferroni), so that an unchanged run
    fails a gate at most false_alarm_pct % of the time, whatever the number of metrics. A run measured
    more than once is judged on its best measurement (noise.compare_runs)."""
    tol = thresholds["regression_tolerance_pct"]
    value, ref = median(figures), median(refs)
    # no run of this metric in the history (nor the peers'): the prior alone, where there is one
    est = estimate or noise_estimate(name, [], [], thresholds)
    res = noise.compare_runs(figures, refs, est["sigma"], est["dof"], alpha=thresholds["false_alarm_pct"] / 100.0 / tests,
                             power=thresholds["power_pct"] / 100.0, min_effect=thresholds["min_effect_pct"] / 100.0,
                             basis=est["basis"])
    alpha, min_effect = thresholds["false_alarm_pct"] / 100.0 / tests, thresholds["min_effect_pct"] / 100.0
    row = {"metric": name, "reference_runs": len(refs), "measurements": len(figures), "measured": round(value, 2), "reference": round(ref, 2),
           "change_pct": round(100.0 * (value / ref - 1), 1), "threshold": round(ref * (1 - tol / 100.0), 2),
           "status": "pass" if value >= ref * (1 - tol / 100.0) else "fail",
           "noise_verdict": res["verdict"], "comparison": res["message"],
           "noise_basis": "runs" if est["sigma"] else "none", "noise_source": est["source"], **noise_figures(res)}
    if thresholds["gate_mode"] == "noise":
        row.update({"measured": round(res["current"], 2), "reference": round(res["reference"], 2),
                    "change_pct": round(100.0 * res["effect"], 1), "status": res["verdict"], "decided_by": "noise",
                    "could_fail": res["verdict"] == "fail" or (
                        res["verdict"] == "inconclusive" and res["effect"] <= -min_effect and bool(est["sigma"])
                        and noise.could_fail(figures, refs, est["sigma"], est["dof"], alpha, min_effect))})
        del row["threshold"]
    return row


def compare_metrics(figures, reference, thresholds, estimates):
    """(rows, failed rows): each metric of this run (`figures`: each measurement's figure per metric)
    against its reference runs (`reference`: each run's figure per metric); metrics without a
    reference are left out."""
    names = [name for name in sorted(figures, key=lambda n: (n != DECODE, n)) if figures[name] and reference.get(name)]
    rows = [compare_metric(name, figures[name], reference[name], thresholds, estimates.get(name), len(names))
            for name in names]
    return rows, [r for r in rows if r["status"] == "fail"]


def loss_text(row, ref_name, tol):
    """A failed row as the gate's message says it: the noise-aware comparison where it decided (one
    figure: the effect with its interval), else the tolerance."""
    if row.get("decided_by") == "noise":
        return f"{metric_label(row['metric'])} {_fmt(row['measured'])} against {ref_name} {_fmt(row['reference'])}: {row['comparison']}"
    return (f"{metric_label(row['metric'])} {_fmt(row['measured'])} is {-row['change_pct']:.1f} % below {ref_name} "
            f"{_fmt(row['reference'])} (threshold {_fmt(row['threshold'])} = that - {tol:g} %)")


def within_text(rows, tol, ref):
    """A passing gate's comparison with `ref`: the noise-aware one on single-stream decode where it
    decided, else the tolerance with the largest change."""
    decided = next((r for r in rows if r.get("decided_by") == "noise" and r["metric"] == DECODE), None)
    if decided:
        return (f"no loss beyond the noise against {ref} (single-stream decode {_fmt(decided['measured'])} against "
                f"{_fmt(decided['reference'])}: {decided['comparison']})")
    worst = min(rows, key=lambda r: r["change_pct"]) if rows else None
    return (f"within {tol:g} % of {ref}"
            + (f" (largest change {worst['change_pct']:+.1f} % in {metric_label(worst['metric'])})" if worst else ""))


def measure_again(gates):
    """Whether the server should be measured again before this run's verdict stands: the floor failed,
    or a metric of the noise-aware comparison could fail on one more measurement (`could_fail`: it
    failed, or suspects a loss that a second measurement as low as this one would make a failure).
    The run is then judged on its best measurement (noise.compare_runs), so a failure stands only where
    the second measurement, taken sglang_verify_remeasure_delay_s later, shows the loss too: a real
    engine's runs have heavy tails, now and then a run ~40 % slow for a moment of other load
    (bench/README.md "Gates on the real engine"). A run the noise leaves inconclusive whatever the next
    measurement shows is kept as it is, without the delay."""
    return any(g["gate"] == "floor" and g["status"] == "fail" for g in gates) or any(
        row.get("could_fail") for g in gates for row in g.get("metrics") or [])


def decode_noise_row(gate):
    """A gate's single-stream decode row when the noise-aware comparison tested it with a noise
    estimate, else None: what the reports, the fleet table and the metrics show."""
    return next((r for r in gate.get("metrics") or []
                 if r.get("metric") == DECODE and r.get("noise_basis") == "runs"), None)


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


def floor_gate(run):
    """`floor`: single-stream decode against min_decode_tok_s."""
    floor = run["thresholds"]["min_decode_tok_s"]
    if floor <= 0:
        return {"gate": "floor", "status": "skip", "message": "floor: no sglang_verify_min_decode_tok_s set"}
    decode, ok = run["decode"], run["decode"] >= floor
    msg = f"floor: single-stream decode {_fmt(decode)} {'>=' if ok else '<'} floor {_fmt(floor)} ({run['side']})"
    if not ok:
        msg += "; " + run["check_speed"]
        if run["algo"]:
            msg += f"; accept length {_fmt(run['accept'], '', 2)}"
    return {"gate": "floor", "status": "pass" if ok else "fail", "measured": decode, "threshold": floor,
            "history_median": run["base"]["median"].get(DECODE), "message": msg}


def history_gate(run):
    """`history`: each metric against this fingerprint's reference runs (baseline)."""
    base, fp, shape, th = run["base"], run["fp"], run["shape"], run["thresholds"]
    tol = th["regression_tolerance_pct"]
    if th["rebaseline"]:
        return {"gate": "history", "status": "skip", "message": (
            f"history: a new baseline starts with this run (sglang_verify_rebaseline): the "
            f"{base['passing']} earlier passing run{'s' if base['passing'] != 1 else ''} of sglang {fp['version']} with "
            f"these flags (fingerprint {fp['id']}) no longer count as its reference ({_roof_text(run['roof'], run['decode'])})")}
    if not base["runs"]:
        return {"gate": "history", "status": "skip", "message": (
            f"history: no passing run of sglang {fp['version']} with these flags (fingerprint {fp['id']}) and this "
            f"workload ({shape}) yet; this run starts the baseline ({_roof_text(run['roof'], run['decode'])})")}
    rows, failed = compare_metrics(run["figures"], base["values"], th, run["noise"])
    unsure = [r for r in rows if r["status"] == "inconclusive"]
    hist_of = (f"last {base['runs']} passing run{'s' if base['runs'] != 1 else ''} of sglang {fp['version']} "
               f"with these flags, fingerprint {fp['id']}, workload {shape}, {base['since']} .. {base['last']}"
               + (f"; a re-baseline left out {base['dropped']} earlier" if base["dropped"] else ""))
    if failed:
        floor = th["min_decode_tok_s"]
        msg = (f"history: {'; '.join(loss_text(r, 'the reference', tol) for r in failed)} ({hist_of}; "
               f"floor {_fmt(floor or None)}; {_roof_text(run['roof'], run['decode'])}); check: what changed since "
               f"{base['last']} (driver, CUDA, firmware, GPU clocks, other load on the host, the model files), then "
               + run["check_speed"].removeprefix("check: ") + f"; {REBASELINE}")
        status = "fail"
    elif unsure:
        msg = (f"history: cannot tell against the {hist_of}: "
               + "; ".join(f"{metric_label(r['metric'])} {_fmt(r['measured'])} against {_fmt(r['reference'])}: "
                           f"{r['comparison']}" for r in unsure))
        status = "inconclusive"
    else:
        msg, status = f"history: {within_text(rows, tol, 'the ' + hist_of)}", "pass"
    return {"gate": "history", "status": status, "tolerance_pct": tol, "runs": base["runs"], "metrics": rows,
            "message": msg}


def accept_length_gate(run):
    """`accept_length`: the speculative accept length against min_accept_length."""
    algo, accept, min_acc = run["algo"], run["accept"], run["thresholds"]["min_accept_length"]
    if not algo:
        return {"gate": "accept_length", "status": "skip", "message": "accept length: speculative decoding not configured"}
    if min_acc <= 0:
        return {"gate": "accept_length", "status": "skip",
                "message": f"accept length: {_fmt(accept, '', 2)} (no sglang_verify_min_accept_length set)"}
    base, decode, roof = run["base"], run["decode"], run["roof"]
    hist_acc = f"history median {_fmt(base['accept_length'], '', 2)}" if base["accept_length"] else "history median n/a"
    check_spec = CHECK_SPEC.format(host=run["host"] or "HOST")
    if not _num(accept):
        ok = False
        msg = (f"accept length: speculative_algorithm {algo} is configured but the server reports no accept "
               f"length (minimum {min_acc:g}; {hist_acc}): speculative decoding is not running; "
               f"single-stream decode {_fmt(decode)}, {_roof_text(roof, decode)}; " + check_spec)
    else:
        ok = accept >= min_acc
        msg = (f"accept length: {accept:.2f} {'>=' if ok else '<'} minimum {min_acc:g} ({hist_acc}; "
               f"speculative_algorithm {algo}; single-stream decode {_fmt(decode)}, {_roof_text(roof, decode)})")
        if not ok:
            msg += "; " + check_spec
    return {"gate": "accept_length", "status": "pass" if ok else "fail", "measured": accept, "threshold": min_acc,
            "history_median": base["accept_length"], "message": msg}


def last_good_gate(run, last_good):
    """`last_good` (see the module's docstring); `last_good` is the host's release record or None."""
    gate = {"gate": "last_good", "status": "skip"}
    if not last_good:
        return {**gate, "message": "last known good: none on this host yet (the first release that passes every "
                                   "gate becomes it)"}
    fp, args, th = run["fp"], run["args"], run["thresholds"]
    lg = last_good.get("verify") or {}
    name = (f"release {last_good.get('id')} (sglang {last_good.get('version')}, fingerprint "
            f"{last_good.get('fingerprint')}, verified {lg.get('generated_at') or '?'})")
    gate["release"] = last_good.get("id")
    if last_good.get("fingerprint") == fp["id"]:
        return {**gate, "message": f"last known good: this is the last known good {name}; history compares its runs"}
    why = None
    if str(last_good.get("model_path")) != str(args.get("model_path")):
        why = f"another model ({last_good.get('model_path')})"
    elif _gpu_key(last_good.get("gpu")) != _gpu_key(run["gpu"]):
        why = "other GPUs ({} x{})".format(*_gpu_key(last_good.get("gpu")))
    elif lg.get("workload") != run["shape"]:
        why = f"another workload ({lg.get('workload')})"
    elif not isinstance(lg.get("metrics"), dict):
        why = "no verify result"
    if why:
        return {**gate, "message": f"last known good: {name} ran {why}; not compared"}
    # its passing runs in the history (since its latest re-baseline), else the one run its record keeps
    runs = baseline(run["history"], last_good.get("fingerprint"), th["history_window"], run["shape"])
    reference = runs["values"] if runs["runs"] else {k: [v] for k, v in lg["metrics"].items() if _num(v) and v > 0}
    name = name[:-1] + (f", {runs['runs']} passing run{'s' if runs['runs'] != 1 else ''})" if runs["runs"]
                        else ", its one recorded run)")
    changed = what_changed(last_good.get("version"), last_good.get("args"), fp["version"], args)
    tol = th["regression_tolerance_pct"]
    rows, failed = compare_metrics(run["figures"], reference, th, run["noise"])
    gate.update({"tolerance_pct": tol, "metrics": rows, "changed": changed, "runs": runs["runs"] or 1})
    what = "what changed: " + (", ".join(changed) if changed else "nothing in version or flags (the environment?)")
    unsure = [r for r in rows if r["status"] == "inconclusive"]
    if unsure and not failed:
        return {**gate, "status": "inconclusive", "message": (
            f"last known good: cannot tell against {name}: "
            + "; ".join(f"{metric_label(r['metric'])} {_fmt(r['measured'])} against {_fmt(r['reference'])}: "
                        f"{r['comparison']}" for r in unsure) + f"; {what}")}
    if not failed:
        return {**gate, "status": "pass", "message": f"last known good: {within_text(rows, tol, name)}; {what}"}
    parts = "; ".join(loss_text(r, "the last known good", tol) for r in failed)
    msg = f"last known good: against {name}: {parts}; {what}; {_roof_text(run['roof'], run['decode'])}"
    if th["accept_regression"]:
        return {**gate, "status": "accepted",
                "message": msg + "; accepted as the new baseline (sglang_verify_accept_regression)"}
    return {**gate, "status": "fail",
            "message": msg + "; fix the inventory, or accept the new speed as the baseline with "
                             "-e sglang_verify_accept_regression=true"}


def summary_line(run, gates, ok):
    """One readable line for the host: PASS/FAIL, single-stream decode with its floor, history and
    roofline, output at every other level, each gate's status."""
    th, base, roof, decode, algo = run["thresholds"], run["base"], run["roof"], run["decode"], run["algo"]
    floor, min_acc, eff = th["min_decode_tok_s"], th["min_accept_length"], run["efficiency"]
    status = {g["gate"]: g["status"] for g in gates}
    roof_short = ("roofline " + NOT_ON_CPU.split(" (", 1)[0] if roof.get("not_applicable") else
                  "roofline n/a" if eff is None else f"roofline {_fmt(roof['upper_bound_tok_s'])}, {eff:.1f} % of it")
    hist_short = f"history {_fmt(base['median'].get(DECODE))} over {base['runs']}" if base["runs"] else "no history yet"
    others = ", ".join(f"c={row['concurrency']} {_fmt(row['output_tok_s'])} out" for row in run["levels"][1:]
                       if _num(row["output_tok_s"]))
    return (f"{run['host']}: {'PASS' if ok else 'FAIL'} single-stream decode {_fmt(decode)} "
            f"(floor {_fmt(floor) if floor > 0 else 'none'}, {hist_short}, {roof_short})"
            + (f", accept length {_fmt(run['accept'], '', 2)}" + (f" (min {min_acc:g})" if min_acc > 0 else "")
               if algo else "")
            + (f"; {others}" if others else "")
            + " [" + ", ".join(f"{g} {status[g]}" for g in GATES) + "]"
            + (f" ({run['measurements']} measurements)" if run["measurements"] > 1 else ""))


def history_record(run, gates, ok, stamp, samples):
    """This run's line of verify-history.jsonl: what later runs compare with and learn noise from."""
    return {
        "generated_at": stamp, "host": run["host"], "version": run["fp"]["version"], "fingerprint": run["fp"]["id"],
        "workload": run["shape"], "hardware": run["hardware"], "passed": ok,
        "gates": {g["gate"]: g["status"] for g in gates}, "metrics": run["metrics"], "samples": samples,
        "measurements": run["measurements"], "accept_length": run["accept"], "efficiency_pct": run["efficiency"],
        "upper_bound_tok_s": run["roof"].get("upper_bound_tok_s"),
        **({"rebaseline": True} if run["thresholds"]["rebaseline"] else {}),
        **({"server_start": run["server_start"]} if run["server_start"] else {}),
    }


def verify_report(run, gates, ok, stamp, line, failures, weight_bytes):
    """The whole report of this run (verify-<stamp>.json): gates, levels, reference runs, noise, roofline."""
    gpu = run["gpu"]
    return {
        "host": run["host"], "generated_at": stamp, "passed": ok, "line": line, "failures": failures,
        "sglang_version": run["fp"]["version"], "fingerprint": run["fp"], "workload": run["shape"],
        "hardware": run["hardware"], "speculative_algorithm": run["algo"], "thresholds": run["thresholds"],
        "gates": gates, "levels": run["levels"], "metrics": run["metrics"], "measurements": run["measurements"],
        "accept_length": run["accept"], "history": run["base"], "noise": run["noise"],
        "last_good": gates[-1].get("release"), "roofline": run["roof"], "efficiency_pct": run["efficiency"],
        "tp_size": run["tp"], "weight_bytes": weight_bytes,
        "gpu": {k: gpu.get(k) for k in ("source", "gpu_model", "gpu_count", "hbm_bandwidth_gbs")},
    }


def evaluate(bench, thresholds, server, history, *, last_good=None, peers=(), earlier=(), stamp=""):
    """Gates and report for one verification run (see the module's docstring).

    bench: sglang_bench results, one per concurrency level. thresholds: the verify settings
    (settings.py; missing ones take its defaults). server: {"host", "version", "args", "gpu",
    "weight_bytes"} of the server measured. history: the host's records; peers: other hosts' records
    (their noise is this host's prior where the hardware matches); last_good: the host's last known
    good release record or None; earlier: this run's earlier measurements (each result's
    `measurement`), when measure_again had the server measured again: the run is all of them.
    Returns {"ok", "failures", "lines", "line", "record", "report", "measurement", "inconclusive" (a gate
    is), "measure_again" (what has the server measured again)}; `record` goes to history."""
    th = settings.thresholds(thresholds, VerifyError)
    host, version, args = server.get("host") or "", server.get("version"), server.get("args") or {}
    gpu, weight_bytes = server.get("gpu") or {}, server.get("weight_bytes") or None
    fp, tp, algo, lv = fingerprint(version, args), tp_size_of(args), speculative_algorithm(args), levels(bench)
    metrics, samples = metrics_of(lv), samples_of(lv)
    measurement = {"metrics": metrics, "samples": samples}   # this measurement's own, for a next one
    metrics, samples, figures = combine_measurements(list(earlier or []), metrics, samples)
    decode = metrics[DECODE]
    # An accept length of 0 (the /metrics gauge of a server that never verified a draft) is none.
    accept = next((row["accept_length"] for row in lv if _num(row["accept_length"]) and row["accept_length"] > 0), None)
    shape, hardware = workload(lv), hardware_of(gpu)
    base = baseline(history, fp["id"], th["history_window"], shape)
    roof = roofline(gpu, weight_bytes, tp, accept if _num(accept) and accept > 0 else 1.0)
    run = {"thresholds": th, "host": host, "fp": fp, "args": args, "gpu": gpu, "shape": shape, "levels": lv,
           "metrics": metrics, "hardware": hardware, "tp": tp,
           "figures": figures, "decode": decode, "accept": accept, "algo": algo, "base": base, "roof": roof,
           "history": history, "measurements": 1 + len(earlier or []),
           # the server lifetime measured (the latest measurement's): sglang_bench's server_start
           "server_start": next(filter(None, map(server_start_of, reversed(bench))), None),
           "noise": host_noise(history, shape, th, peers, hardware),
           "efficiency": None if "error" in roof else efficiency_pct(decode, roof),
           "check_speed": (CHECK_SPEED_CPU if is_cpu_host(gpu) else CHECK_SPEED).format(host=host or "HOST"),
           "side": f"{_hist_text(base, DECODE)}; {_roof_text(roof, decode)}"}
    gates = [floor_gate(run), history_gate(run), accept_length_gate(run), last_good_gate(run, last_good)]
    for gate in gates:
        decode_row = decode_noise_row(gate)
        if th["gate_mode"] == "fixed" and decode_row:
            gate["message"] += (f"; noise-aware, reported only (sglang_verify_gate_mode fixed): single-stream decode "
                                f"{decode_row['comparison']}")
        if gate["status"] == "inconclusive":
            gate["message"] += ((f"; still inconclusive after {run['measurements']} measurements of this run"
                                 if run["measurements"] > 1 else "")
                                + "; more measurements (sglang_verify_remeasure) or runs in the history narrow it")
    failing = ("fail", "inconclusive") if th["inconclusive"] == "fail" else ("fail",)
    failures = [g["message"] for g in gates if g["status"] in failing]
    ok = not failures
    line = summary_line(run, gates, ok)
    record = history_record(run, gates, ok, stamp, samples)
    report = verify_report(run, gates, ok, stamp, line, failures, weight_bytes)
    return {"ok": ok, "failures": failures, "line": line, "lines": [line] + [g["message"] for g in gates],
            "record": record, "report": report, "measurement": measurement,
            "inconclusive": any(g["status"] == "inconclusive" for g in gates),
            "measure_again": measure_again(gates)}


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
