#!/usr/bin/env python3
"""#42 on the real engine: tune.yml against the exhaustive grid, on the real SGLang 0.5.23 (the lab's cpu1).

    .venv/bin/python bench/tune_real.py [--repeats 3] [--budget 40] [--out bench/samples/tune-real-<date>.json]

One lab host of its own (prefix sglang-tunereal, 10.89.114.0/24, with its own lab hub for the tiny
Llama), deployed as tests/lab/test_real_sglang_lab.py deploys cpu1. On its CPU path only
scheduler-side settings exist (no speculative decoding, no CUDA graphs), so the space is the
scheduler's: SPACE below. Then:

1. **the grid**: every configuration deployed (deploy.yml with the configuration's flags, gates
   reported only) and measured `--repeats` times by verify.yml (its own report folder per
   configuration), each configuration's figure the geometric mean of its measurements;
2. **the search**: what ran put back, then `tune.yml` over the same space (its default settings, the
   host's verify history as its noise), `--budget` minutes;
3. the table: each configuration's figure against the incumbent's, the grid's best, tune's answer
   and where its winner ranks on the grid, both times. Everything it measured goes to `--out`.

Nothing here runs in CI: each configuration is a real restart (~50-70 s on this 2-core machine).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "lab"), str(REPO / "tests"), str(REPO / ".collections")]
from lab_fleet import LIGHT_VERIFY, lab_fleet  # noqa: E402
from lab_hub import lab_hub  # noqa: E402

HOST, PREFIX, SUBNET = "cpu1", "sglang-tunereal", "10.89.114."
ARGS = {"device": "cpu", "attention_backend": "torch_native", "max_total_tokens": 8192}
METRIC = "output_tok_s@4"
# The scheduler's settings that exist on the CPU path (0.5.23), the incumbent's value first.
SPACE = {"num_continuous_decode_steps": [1, 4, 16], "disable_overlap_schedule": [False, True]}
GATES = {"sglang_verify_gate_mode": "noise", "sglang_verify_concurrency": [1, 4], "sglang_verify_remeasure": 0}


def configs():
    names = list(SPACE)
    return [dict(zip(names, values)) for values in itertools.product(*SPACE.values())]


def args_of(config):
    """The host's flags with a configuration's values; a value equal to the release's default is left unset."""
    out = dict(ARGS)
    for flag, value in config.items():
        if value != SPACE[flag][0]:
            out[flag] = value
    return out


def geomean(values):
    return math.exp(statistics.fmean(math.log(v) for v in values))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="measurements per configuration of the grid")
    p.add_argument("--budget", type=float, default=40, help="tune.yml's sglang_tune_budget_minutes")
    p.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "samples" / f"tune-real-{time.strftime('%Y-%m-%d')}.json")
    a = p.parse_args()
    record = {"space": SPACE, "metric": METRIC, "repeats": a.repeats, "grid": [], "tune": None}
    with tempfile.TemporaryDirectory(prefix="tune-real-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        with lab_hub(tmp / "hub") as hub, \
                lab_fleet(tmp, PREFIX, SUBNET, hosts=(HOST,), group_vars={**LIGHT_VERIFY, **GATES},
                          extra_vars={"sglang_model_endpoint": hub["endpoint"]}) as fleet:
            def play(*args, timeout=2700):
                rc, out = fleet.play(*args, "-l", HOST, timeout=timeout)
                if rc != 0:
                    raise SystemExit(f"{' '.join(map(str, args))} failed:\n{out[-6000:]}")
                return out

            started = time.monotonic()
            play("lab/prepare.yml")
            play("deploy.yml")
            for _ in range(3):   # the host's history: its run-to-run noise for the search
                play("verify.yml")
            print(f"deployed and verified in {time.monotonic() - started:.0f} s", flush=True)

            grid_started = time.monotonic()
            for i, config in enumerate(configs()):
                t0 = time.monotonic()
                play("deploy.yml", "-e", json.dumps({"sglang_args": args_of(config), "sglang_verify_fail_on_gates": False,
                                                     "sglang_verify_compare_last_good": False}))
                figures = []
                for k in range(a.repeats):
                    folder = tmp / "grid" / f"{i}-{k}"
                    play("verify.yml", "-e", json.dumps({"sglang_verify_report_dir": str(folder),
                                                         "sglang_verify_fail_on_gates": False}))
                    figures.append(json.loads((folder / HOST / "verify-latest.json").read_text())["metrics"][METRIC])
                row = {"config": config, "figures": figures, "figure": geomean(figures), "seconds": time.monotonic() - t0}
                record["grid"].append(row)
                print(f"grid {i + 1}/{len(configs())} {config}: {row['figure']:.1f} tok/s "
                      f"({', '.join(f'{x:.0f}' for x in figures)}), {row['seconds']:.0f} s", flush=True)
            record["grid_s"] = time.monotonic() - grid_started

            play("deploy.yml", "-e", json.dumps({"sglang_args": ARGS}))   # what ran, back
            t0 = time.monotonic()
            play("tune.yml", "-e", json.dumps({"sglang_tune_space": SPACE, "sglang_tune_metric": METRIC,
                                              "sglang_tune_budget_minutes": a.budget,
                                              "sglang_tune_restart_s": 70, "sglang_tune_measure_s": 15}), timeout=5400)
            record["tune_s"] = time.monotonic() - t0
            record["tune"] = json.loads((fleet.reports / HOST / "tune-latest.json").read_text())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n")
    report(record)


def report(record) -> None:
    grid = record["grid"]
    incumbent = grid[0]["figure"]
    best = max(grid, key=lambda r: r["figure"])
    print(f"\n| configuration | {record['metric']} (geomean of {record['repeats']}) | vs the incumbent | measurements |")
    print("|---|---|---|---|")
    for row in sorted(grid, key=lambda r: -r["figure"]):
        print(f"| {row['config']} | {row['figure']:.1f} | {(row['figure'] / incumbent - 1) * 100:+.1f} % | "
              f"{', '.join(f'{x:.0f}' for x in row['figures'])} |")
    result = record["tune"]["result"]
    winner = {k: result["winner"][k] for k in record["space"]}
    rank = 1 + sorted((r["figure"] for r in grid), reverse=True).index(next(r["figure"] for r in grid if r["config"] == winner))
    print(f"\ngrid: {len(grid)} configurations in {record['grid_s'] / 60:.1f} min; best {best['config']} "
          f"{(best['figure'] / incumbent - 1) * 100:+.1f} % against the incumbent")
    print(f"tune.yml: {'won' if result['won'] else 'the incumbent stays'}: {winner} (rank {rank} of {len(grid)} on "
          f"the grid), {result['measurements']} measurements, {result['restarts']} restarts, "
          f"{record['tune_s'] / 60:.1f} min")
    for line in result["lines"]:
        print("   ", line)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--report":
        report(json.loads(pathlib.Path(sys.argv[2]).read_text()))
    else:
        main()
