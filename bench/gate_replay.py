#!/usr/bin/env python3
"""#40's proof: today's gates and the new ones, side by side, on verify runs of the real SGLang host.

    .venv/bin/python bench/gate_replay.py bench/samples/real-sglang-verify-runs-2026-12-05.jsonl \
        --old-collection /tmp/old   # a tree holding ansible_collections/sglang/fleet/plugins at the old commit

The runs are bench/real_gate_runs.py's recordings (every repeat of each level of each verify run, as
they came). Every decision goes through the real gate code (`gates.evaluate`, history and last-good
gates, both metrics verify gates: single-stream decode and output at concurrency 4); the old code is
loaded from `--old-collection` in a child process (`git archive <commit> plugins`).

Two ways to draw the decisions, both resampling **runs**, never repeats:
- `sequential` ("as they came"): the host's history grows run by run in time order, each run joining
  it with the verdict the gate gave it (so a gate that fails good runs starves its own reference, as on
  cpu1); each run, scaled by (1 - loss), is judged against the history before it. A re-measure takes
  the run 30 s later (SPACING runs on) as the second measurement, as sglang_verify_remeasure_delay_s
  waits. The first runs of the sequence are the state after a first
  deploy (no noise learned), the later ones a settled host.
- `resampled`: `--trials` times, `--window` + 1 runs drawn at random (the history, and the run judged),
  plus `--earlier` runs of another release (the noise of a settled host); a re-measure draws one more.

Printed per loss: the share of decisions that fail (with a one-sided 95 % Clopper-Pearson upper
bound at 0 %), that are inconclusive (kept), the measurements a decision took on average (verify's
time, in measurements), and the median detectable loss on single-stream decode.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import pathlib
import random
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
METRICS = ("decode_tok_s@1", "output_tok_s@4")
SHAPE = {"api": "completions", "input_len": 128, "output_len": 64}
ARGS = {"model_path": "/srv/models/sglang-lab--tiny-llama/ea80", "device": "cpu", "attention_backend": "torch_native",
        "max_total_tokens": 8192}
OLD_ARGS = {**ARGS, "max_running_requests": 16}   # the last good release: another fingerprint
GPU = {"source": "none", "gpu_count": 0, "gpu_model": None}
LOSSES = (0.0, 0.05, 0.10, 0.20)
SPACING = 3   # runs came ~10 s apart: a re-measure 30 s later is the third run after
# cpu1's settings today (inventories/lab/host_vars/cpu1.yml at 56cb629: tolerance 90 %, the role's
# noise-aware defaults), and the new gate's (the role's defaults, cpu1 without a workaround)
OLD_THRESHOLDS = {"min_decode_tok_s": 0, "min_accept_length": 0, "history_window": 5, "regression_tolerance_pct": 90,
                  "gate_mode": "noise", "inconclusive": "keep", "min_effect_pct": 3, "false_alarm_pct": 1, "power_pct": 95}
NEW_THRESHOLDS = {"min_decode_tok_s": 0, "run_noise_prior_pct": 20}   # cpu1's prior (its host_vars)


def load_runs(path):
    """The recorded runs in time order; each one's server lifetime from its `since_restart` (0, or no
    step of one from the run before: the service was restarted), as sglang_bench's `server_start`
    names it on a host (the lifetime's first run's time)."""
    runs, start, before = [], None, None
    for line in pathlib.Path(path).read_text().splitlines():
        rec = json.loads(line)
        levels = rec["levels"]
        if start is None or rec["since_restart"] == 0 or rec["since_restart"] != before + 1:
            start = rec["at"]
        before = rec["since_restart"]
        runs.append({"phase": rec["phase"], "at": rec["at"], "since_restart": rec["since_restart"],
                     "server_start": start, "args": rec.get("args") or {},
                     "repeats": {lv["metric"]: lv["repeats"] for lv in levels.values()}})
    return runs


def bench_of(run, scale=1.0):
    """The two sglang_bench results verify gates, from a recorded run's repeats (scaled), with the
    server's start (--no-lifetimes: none, as records written before it was kept)."""
    out = []
    for metric in METRICS:
        c = int(metric.rpartition("@")[2])
        reps = [x * scale for x in run["repeats"][metric]]
        key = "decode_tok_s_per_stream" if c == 1 else None
        res = {"concurrency": c, "completed": len(reps) * c * 2, "failed": 0, **SHAPE,
               "server_start": run["server_start"],   # the gates before #40's restart part ignore it
               "output_throughput": statistics.median(reps),
               "runs": [({"decode_tok_s_per_stream": {"p50": x}, "output_throughput": x} if key else
                         {"output_throughput": x}) for x in reps]}
        if key:
            res["decode_tok_s_per_stream"] = {"p50": statistics.median(reps)}
        out.append(res)
    return out


class Gate:
    """One gate implementation (the new one, or the old one in its own import path)."""

    def __init__(self, which):
        from ansible_collections.sglang.fleet.plugins.module_utils.verify import gates
        self.gates, self.which = gates, which
        self.new = "server" in inspect.signature(gates.evaluate).parameters

    def judge(self, run, history, scale=1.0, earlier=(), last_good=None):
        """(the history/last-good verdict, result) for `run` judged against `history`."""
        th = NEW_THRESHOLDS if self.new else OLD_THRESHOLDS
        bench = bench_of(run, scale)
        if self.new:
            server = {"host": "cpu1", "version": "0.5.23", "args": ARGS, "gpu": GPU, "weight_bytes": 0}
            res = self.gates.evaluate(bench, th, server, history, last_good=last_good, earlier=list(earlier),
                                      stamp=f"T{len(history):06d}")
            again = res["measure_again"]
        else:
            res = self.gates.evaluate(bench, th, history, GPU, 0, "0.5.23", ARGS, "cpu1", f"T{len(history):06d}",
                                      last_good=last_good, earlier=list(earlier))
            again = res["inconclusive"]
        gates = {g["gate"]: g for g in res["report"]["gates"]}
        deciding = gates["last_good"] if last_good else gates["history"]
        det = next((r.get("detectable_pct") for r in deciding.get("metrics") or [] if r["metric"] == METRICS[0]), None)
        return {"status": deciding["status"], "ok": res["ok"], "again": again, "record": res["record"],
                "measurement": res["measurement"], "detectable": det}

    def decide(self, runs_next, history, scale, last_good=None, remeasure=1):
        """A verify: the first run, then (while the gate asks) the next ones; (verdict, measurements, detectable)."""
        earlier = []
        for i, run in enumerate(runs_next[:1 + remeasure]):
            out = self.judge(run, history, scale, earlier, last_good)
            earlier.append(out["measurement"])
            if not out["again"] or i == remeasure:
                break
        return out, len(earlier)


def stamp(i):
    return f"20261205T{i:06d}Z"


def sequential(gate, runs, losses, history=None):
    """The history grows in time order with the gate's own verdicts; each run judged at each loss.
    Returns the decisions per loss and the history it grew."""
    rows = {loss: [] for loss in losses}
    history = [] if history is None else history
    for i in range(len(runs)):
        if history:
            for loss in losses:
                # a re-measure waits sglang_verify_remeasure_delay_s (30 s): the run SPACING runs later
                out, n = gate.decide([runs[i]] + runs[i + SPACING:], history, 1 - loss)
                rows[loss].append((out["status"], n, out["detectable"]))
        first, _n = gate.decide(runs[i:i + 1], history, 1.0, remeasure=0)
        history.append({**first["record"], "generated_at": stamp(i)})
    return rows, history


def real_losses(gate, runs, history):
    """Each recorded run of a real loss (phase loss-*) judged against the whole grown history."""
    out = {}
    for i, run in enumerate(runs):
        verdict, n = gate.decide(runs[i:i + 1] + [r for r in runs[i + 1:] if r["phase"] == run["phase"]], history, 1.0)
        out.setdefault(run["phase"], []).append((verdict["status"], n, verdict["detectable"]))
    return out


def resampled(gate, runs, losses, trials, window, earlier, seed):
    rng = random.Random(seed)
    rows = {loss: [] for loss in losses}
    for _ in range(trials):
        picked = rng.sample(runs, window + 2 + earlier)
        hist_runs, now, older = picked[:window], picked[window:window + 2], picked[window + 2:]
        history = []
        for j, run in enumerate(older + hist_runs):
            rec = gate.judge(run, [], 1.0)["record"]
            if j < len(older):   # another release: the noise of a settled host, never the reference
                rec = {**rec, "fingerprint": "0" * 16}
            history.append({**rec, "generated_at": stamp(j), "passed": True})
        for loss in losses:
            out, n = gate.decide(now, history, 1 - loss)
            rows[loss].append((out["status"], n, out["detectable"]))
    return rows


def upper_bound(k, n, conf=0.95):
    """One-sided Clopper-Pearson upper bound of a binomial rate (bisection on the binomial CDF)."""
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):
        p = (lo + hi) / 2
        cdf = sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k + 1))
        lo, hi = (p, hi) if cdf > 1 - conf else (lo, p)
    return hi


def summarise(rows):
    out = []
    for loss, decisions in rows.items():
        n = len(decisions)
        fails = sum(s == "fail" for s, _m, _d in decisions)
        dets = [d for _s, _m, d in decisions if d is not None]
        out.append({"loss_pct": round(100 * loss), "decisions": n, "fail": fails / n,
                    "fail_upper": upper_bound(fails, n), "inconclusive": sum(s == "inconclusive" for s, _m, _d in decisions) / n,
                    "measurements": statistics.fmean(m for _s, m, _d in decisions),
                    "detectable": statistics.median(dets) if dets else None})
    return out


def child(args):
    """Run one gate's evaluation in this process (the import path set by the parent)."""
    every = load_runs(args.samples)
    if args.no_lifetimes:
        every = [{**r, "server_start": None} for r in every]
    runs = [r for r in every if r["phase"] in args.phases]
    gate = Gate(args.which)
    rows, history = sequential(gate, runs, LOSSES)
    losses = real_losses(gate, [r for r in every if r["phase"].startswith("loss-")], history)
    out = {"sequential": summarise(rows),
           "resampled": summarise(resampled(gate, runs, LOSSES, args.trials, 5, args.earlier, args.seed)),
           "real": {phase: summarise({0: decisions})[0] for phase, decisions in losses.items()}}
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("samples")
    p.add_argument("--old-collection", required=True)
    p.add_argument("--phases", nargs="+", default=["idle", "unit-tests", "mixed"])
    p.add_argument("--trials", type=int, default=300)
    p.add_argument("--earlier", type=int, default=10)
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--no-lifetimes", action="store_true",
                   help="judge the runs without their server's start (as history records written before it was kept)")
    p.add_argument("--child", choices=("old", "new"))
    a = p.parse_args()
    if a.child:
        a.which = a.child
        return child(a)
    results = {}
    for which, path in (("old", a.old_collection), ("new", str(REPO / ".collections"))):
        cmd = [sys.executable, __file__, a.samples, "--old-collection", a.old_collection, "--child", which,
               "--trials", str(a.trials), "--earlier", str(a.earlier), "--seed", str(a.seed), "--phases", *a.phases] + (["--no-lifetimes"] if a.no_lifetimes else [])
        env_path = f"{path}"
        out = subprocess.run(cmd, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, capture_output=True,
                             text=True, check=True)
        results[which] = json.loads(out.stdout.strip().splitlines()[-1])
    runs = [r for r in load_runs(a.samples) if r["phase"] in a.phases]
    counts = ", ".join(f"{ph}: {sum(r['phase'] == ph for r in runs)}" for ph in a.phases)
    print(f"{len(runs)} runs ({counts})\n")
    for how in ("sequential", "resampled"):
        print(f"### {how}\n")
        print("| loss | gate | decisions | fails (95 % upper bound) | inconclusive (kept) | measurements | detectable (median) |")
        print("|---|---|---|---|---|---|---|")
        for i in range(len(LOSSES)):
            for which in ("old", "new"):
                r = results[which][how][i]
                det = "n/a" if r["detectable"] is None else f"{r['detectable']:.1f} %"
                bound = f" (<= {100 * r['fail_upper']:.1f} %)" if r["loss_pct"] == 0 else ""
                print(f"| {r['loss_pct']} % | {'today' if which == 'old' else 'new'} | {r['decisions']} | "
                      f"{100 * r['fail']:.1f} %{bound} | {100 * r['inconclusive']:.1f} % | {r['measurements']:.2f} | {det} |")
        print()
    if results["new"]["real"]:
        print("### real losses (each recorded run of the slower server against the whole grown history)\n")
        print("| phase | gate | runs | fails | inconclusive (kept) | measurements |")
        print("|---|---|---|---|---|---|")
        for phase in sorted(results["new"]["real"]):
            for which in ("old", "new"):
                r = results[which]["real"][phase]
                print(f"| {phase} | {'today' if which == 'old' else 'new'} | {r['decisions']} | {100 * r['fail']:.1f} % | "
                      f"{100 * r['inconclusive']:.1f} % | {r['measurements']:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
