"""#27's proof: the history gate decided by the fixed tolerance and by the noise-aware test, side by
side, on runs of an unchanged server, with losses injected by scaling the current run.

Each decision goes through the real gate code (plugins/module_utils/verify/gates.py `evaluate`,
gate_mode fixed and noise on the same inputs): the history is `--window` passing runs of one release
(their medians and every repeat, as verify-history.jsonl holds them), the current run is one more
run of the same server, scaled by (1 - loss). Printed per loss: how often each gate fails, and how
often the noise-aware one says inconclusive (which never rolls a host back). With `--remeasure N`,
an inconclusive noise-aware verdict measures the server again (one more run, scaled alike) up to N
times, as roles/sglang_verify/tasks/remeasure.yml does; the table then says how many measurements a
decision took on average (verify's time).

Sources of runs:
- `synthetic`: repeats drawn as exp(N(0, --cv)) around a level that itself moves exp(N(0, --run-cv))
  from run to run (0: the repeats are independent, the README table's first rows);
- `sim`: the lab's simulator (lab/sglang_sim) as ct129 (0.5.11, NEXTN 3 steps, ~54 tok/s) with its
  `noise_cv` knob at `--cv` (each request's speed spread, seeded): `--runs` runs of `--repeats`
  repeats, recorded as for `llama`; the simulator paces tokens itself, so this checks the knob
  and the gates end to end rather than a machine's noise;
- `llama`: llama-server (tests/real_engine, built and cached) on this machine, `--runs` runs of
  `--repeats` repeats of the bench client at concurrency 1 (decode tok/s per repeat); `--save` keeps
  them, `--samples FILE` evaluates a saved set without a server. Decisions then resample the
  recorded runs (history and current drawn without replacement).
- `sglang`: the real SGLang 0.5.23 on this machine's CPU (the lab host cpu1's launch, started as
  bench/real_sglang_vs_llama.py does: `--sglang-python` of a venv with sglang==0.5.23) serving the
  lab's tiny Llama, recorded and resampled as for `llama`.

    .venv/bin/python bench/noise_gates.py synthetic --cv 0.02 --repeats 5 --earlier 15
    .venv/bin/python bench/noise_gates.py synthetic --cv 0.02 --repeats 3 --earlier 15 --remeasure 1
    .venv/bin/python bench/noise_gates.py sim --cv 0.02 --runs 26 --repeats 5 --earlier 15
    .venv/bin/python bench/noise_gates.py llama --runs 16 --repeats 5 --requests 10 --earlier 10
    .venv/bin/python bench/noise_gates.py sglang --sglang-python /tmp/rs/bin/python --runs 26 --repeats 4 --earlier 10
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
import tempfile
import threading

REPO = pathlib.Path(__file__).resolve().parents[1]
# --collection DIR: the gates of another commit (a tree with ansible_collections/sglang/fleet/plugins)
_COLLECTION = sys.argv[sys.argv.index("--collection") + 1] if "--collection" in sys.argv else str(REPO / ".collections")
sys.path.insert(0, _COLLECTION)
sys.path.insert(0, str(REPO / "plugins" / "module_utils" / "verify"))
sys.path.insert(0, str(REPO / "tests" / "real_engine"))
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import evaluate, fingerprint  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.verify.noise import pooled_noise  # noqa: E402

ARGS = {"model_path": "/models/bench", "tp_size": 1}
GPU = declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 1})
SHAPE = {"api": "completions", "input_len": 128, "output_len": 64}
LOSSES = (0.0, 0.03, 0.05, 0.08, 0.10, 0.15)


def bench_of(repeats: list[float]) -> list[dict]:
    """A concurrency-1 benchmark result with each repeat's decode tok/s, as bench_client returns it."""
    return [{"concurrency": 1, "decode_tok_s_per_stream": {"p50": statistics.median(repeats)},
             "output_throughput": statistics.median(repeats), "completed": len(repeats), "failed": 0,
             "runs": [{"decode_tok_s_per_stream": {"p50": x}, "output_throughput": x} for x in repeats], **SHAPE}]


def history_of(runs: list[list[float]], earlier: list[list[float]] = ()) -> list[dict]:
    """History records: `earlier` runs of an older release (they teach the host's noise, never the
    baseline), then `runs` of this one."""
    workload = f"completions in={SHAPE['input_len']} out={SHAPE['output_len']} c=1"
    out = []
    for version, group in (("0.5.22", earlier), ("0.5.23", runs)):
        fp = fingerprint(version, ARGS)["id"]
        out += [{"generated_at": f"20261203T{len(out):06d}Z", "fingerprint": fp, "workload": workload,
                 "passed": True, "samples": {"decode_tok_s@1": r},
                 "metrics": {"decode_tok_s@1": statistics.median(r), "output_tok_s@1": statistics.median(r)}}
                for r in group]
    return out


def history_status(current: list[float], history: list[dict], mode: str, window: int, tolerance: float,
                   measured=()) -> tuple:
    """The history gate's (status, noise basis, detectable %, this measurement) for `current` after
    this run's earlier `measured` measurements."""
    thresholds = {"min_decode_tok_s": 0, "min_accept_length": 0, "history_window": window,
                  "regression_tolerance_pct": tolerance, "gate_mode": mode, "min_effect_pct": 3,
                  "false_alarm_pct": 1, "power_pct": 95}
    if "server" in inspect.signature(evaluate).parameters:   # the gates since #40
        server = {"host": "bench", "version": "0.5.23", "args": ARGS, "gpu": GPU, "weight_bytes": 0}
        report = evaluate(bench_of(current), thresholds, server, history, earlier=list(measured),
                          stamp="20261203T235959Z")
        again = report["measure_again"]
    else:
        report = evaluate(bench_of(current), thresholds, history, GPU, 0, "0.5.23", ARGS, "bench", "20261203T235959Z",
                          earlier=list(measured))
        again = report["inconclusive"]
    gate = next(g for g in report["report"]["gates"] if g["gate"] == "history")
    row = next(r for r in gate["metrics"] if r["metric"] == "decode_tok_s@1")
    return gate["status"], row.get("noise_basis"), row.get("detectable_pct"), report["measurement"], again


def decide(draw, losses, trials: int, window: int, tolerance: float) -> list[dict]:
    """`draw()` -> (history runs, current runs, earlier runs): rates of each gate's verdict per loss.
    The fixed gate takes the first current run; the noise-aware one measures again (the next current
    run) while it is inconclusive and runs are left."""
    rows = []
    for loss in losses:
        counts = {"fixed fail": 0, "noise fail": 0, "noise inconclusive": 0}
        detectable, basis, measurements = [], set(), 0
        for _ in range(trials):
            history_runs, currents, earlier = draw()
            currents = [[x * (1 - loss) for x in run] for run in currents]
            history = history_of(history_runs, earlier)
            fixed = history_status(currents[0], history, "fixed", window, tolerance)[0]
            measured = []
            for current in currents:
                noisy, how, det, record, again = history_status(current, history, "noise", window, tolerance, measured)
                measured.append(record)
                if not again:
                    break
            measurements += len(measured)
            counts["fixed fail"] += fixed == "fail"
            counts["noise fail"] += noisy == "fail"
            counts["noise inconclusive"] += noisy == "inconclusive"
            basis.add(how)
            if det is not None:
                detectable.append(det)
        rows.append({"loss_pct": round(100 * loss), **{k: v / trials for k, v in counts.items()},
                     "detectable_pct": statistics.median(detectable) if detectable else None,
                     "measurements": measurements / trials, "basis": ",".join(sorted(b for b in basis if b))})
    return rows


def measure_runs(url: str, model: str, runs: int, repeats: int, requests: int) -> list[list[float]]:
    """`runs` bench_client runs at concurrency 1 of `repeats` repeats of `requests` requests: decode tok/s
    per repeat."""
    import bench_client

    out = []
    for i in range(runs):
        res = bench_client.run_benchmark(url, "completions", model, SHAPE["input_len"], SHAPE["output_len"], 1,
                                         requests, warmup=1, repeats=repeats, timeout_s=300,
                                         spec_accept_length=False, ignore_eos=True)
        out.append([r["decode_tok_s_per_stream"]["p50"] for r in res["runs"]])
        print(f"run {i + 1}: " + ", ".join(f"{x:.1f}" for x in out[-1]), flush=True)
    return out


def record_sim(runs: int, repeats: int, requests: int, cv: float) -> list[list[float]]:
    sys.path.insert(0, str(REPO / "tests" / "sim"))
    from test_sim import CT129_ARGV, Sim

    with tempfile.TemporaryDirectory(prefix="noise-gates-sim-") as tmp:
        sim = Sim(pathlib.Path(tmp), "0.5.11", CT129_ARGV, config={"noise_cv": cv, "noise_seed": 27})
        threading.Thread(target=sim.proc.stderr.read, daemon=True).start()   # its access log
        try:
            sim.wait_healthy()
            return measure_runs(sim.url, None, runs, repeats, requests)
        finally:
            sim.proc.terminate()
            sim.proc.wait(10)


def record_llama(runs: int, repeats: int, requests: int) -> list[list[float]]:
    from conftest import ALIAS, LlamaServer
    from make_tiny_model import make_tiny_model as write_tiny_gguf

    binary = subprocess.run(["bash", str(REPO / "tests" / "real_engine" / "build_llama_server.sh")], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory(prefix="noise-gates-") as tmp:
        write_tiny_gguf(pathlib.Path(tmp))
        server = LlamaServer(binary, pathlib.Path(tmp))
        server.start()
        try:
            return measure_runs(server.url, ALIAS, runs, repeats, requests)
        finally:
            server.stop()


def record_sglang(python: str, runs: int, repeats: int, requests: int) -> list[list[float]]:
    from conftest import ALIAS
    from real_sglang_vs_llama import start_sglang

    with tempfile.TemporaryDirectory(prefix="noise-gates-sglang-") as tmp:
        tmp = pathlib.Path(tmp)
        subprocess.run([sys.executable, str(REPO / "lab" / "real_sglang" / "make_tiny_model.py"), str(tmp / "tiny-llama")],
                       check=True, capture_output=True)
        proc, url, _ = start_sglang(python, tmp / "tiny-llama", tmp / "sglang.log")
        try:
            return measure_runs(url, ALIAS, runs, repeats, requests)
        finally:
            proc.terminate()
            proc.wait(30)


def spread(runs: list[list[float]]) -> tuple[float, float]:
    """(CV of one repeat around its run's mean, CV of the runs' medians), on the log scale."""
    return pooled_noise(runs)[0], pooled_noise([[statistics.median(r) for r in runs]])[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", choices=("synthetic", "sim", "llama", "sglang"))
    p.add_argument("--cv", type=float, default=0.02, help="synthetic: noise of one repeat; sim: its noise_cv")
    p.add_argument("--run-cv", type=float, default=0.0, help="synthetic: how far whole runs move")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--runs", type=int, default=14, help="sim, llama: runs to record")
    p.add_argument("--requests", type=int, default=2, help="sim, llama: requests per repeat (sglang_verify's default)")
    p.add_argument("--window", type=int, default=5, help="history runs (sglang_verify_history_window)")
    p.add_argument("--earlier", type=int, default=0, help="runs of an older release in the history (noise only)")
    p.add_argument("--tolerance", type=float, default=10.0, help="the fixed gate's %% (the role's default)")
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--samples", help="sim, llama, sglang: a saved set of runs instead of a server")
    p.add_argument("--save", help="sim, llama, sglang: keep the recorded runs here")
    p.add_argument("--sglang-python", help="sglang: python of a venv with sglang==0.5.23")
    p.add_argument("--remeasure", type=int, default=0, help="measure an inconclusive run again up to N times "
                   "(sglang_verify_remeasure)")
    p.add_argument("--seed", type=int, default=27)
    p.add_argument("--collection", help="the gate code of another commit (git archive <commit> plugins, under "
                   "ansible_collections/sglang/fleet/)")
    a = p.parse_args()
    rng = random.Random(a.seed)
    if a.source == "synthetic":
        def one_run():
            level = 100.0 * math.exp(rng.gauss(0, a.run_cv))
            return [level * math.exp(rng.gauss(0, a.cv)) for _ in range(a.repeats)]

        def draw():
            return ([one_run() for _ in range(a.window)], [one_run() for _ in range(1 + a.remeasure)],
                    [one_run() for _ in range(a.earlier)])
        print(f"synthetic: {a.cv * 100:g} % per repeat, {a.run_cv * 100:g} % run to run, {a.repeats} repeats")
    else:
        if a.samples:
            runs = json.loads(pathlib.Path(a.samples).read_text())
        elif a.source == "sim":
            runs = record_sim(a.runs, a.repeats, a.requests, a.cv)
        elif a.source == "sglang":
            if not a.sglang_python:
                p.error("sglang needs --sglang-python (a venv with sglang==0.5.23, see above) or --samples")
            runs = record_sglang(a.sglang_python, a.runs, a.repeats, a.requests)
        else:
            runs = record_llama(a.runs, a.repeats, a.requests)
        if a.save:
            pathlib.Path(a.save).write_text(json.dumps(runs))
        within, between = spread(runs)
        print(f"{a.source}: {len(runs)} runs of {len(runs[0])} repeats; spread of one repeat {within * 100:.1f} %, "
              f"of a run's median {between * 100:.1f} %")

        def draw():
            picked = rng.sample(runs, a.window + 1 + a.remeasure + a.earlier)
            now = a.window + 1 + a.remeasure
            return picked[:a.window], picked[a.window:now], picked[now:]
    print(f"history window {a.window} (+{a.earlier} runs of an older release), fixed tolerance {a.tolerance:g} %, noise-aware: min effect 3 %, "
          f"false alarms 1 %, power 95 %, measured again up to {a.remeasure} times when inconclusive; "
          f"{a.trials} decisions per loss\n")
    print("| loss | fixed: fails | noise-aware: fails | inconclusive | detectable (median) | measurements | noise from |")
    print("|---|---|---|---|---|---|---|")
    for row in decide(draw, LOSSES, a.trials, a.window, a.tolerance):
        det = "n/a" if row["detectable_pct"] is None else f"{row['detectable_pct']:.1f} %"
        print(f"| {row['loss_pct']} % | {row['fixed fail'] * 100:.1f} % | {row['noise fail'] * 100:.1f} % | "
              f"{row['noise inconclusive'] * 100:.1f} % | {det} | {row['measurements']:.2f} | {row['basis']} |")


if __name__ == "__main__":
    main()
