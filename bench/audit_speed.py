"""How long the audit's source reading takes: load_source + predict, median of 5 runs per era.

    .venv/bin/python bench/audit_speed.py            # one release per era (wheels from the cache)
    .venv/bin/python bench/audit_speed.py 0.5.18     # chosen releases
Target: under 2 s per release on the controller and on a lab host.
"""
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "plugins" / "module_utils"), str(REPO / "tests")]

from source import load_source, normalise_argv, predict
from wheels import sglang_source_tree

ERAS = {"A": "0.5.11", "B": "0.5.18", "C": "0.5.23"}
HW = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "compute_capability": "8.6", "source": "declared"}
MODEL = {"architectures": ["Qwen3_5ForConditionalGeneration"]}
ARGV = ["--model-path", "/m", "--tp", "2", "--speculative-algorithm", "NEXTN"]


def once(tree) -> float:
    t0 = time.perf_counter()
    src = load_source(tree)
    predict(src, normalise_argv(src, ARGV), HW, MODEL)
    return time.perf_counter() - t0


def main(versions):
    for version in versions:
        tree = sglang_source_tree(version)
        runs = [once(tree) for _ in range(5)]
        print(f"sglang {version:14s} median {statistics.median(runs):.3f} s  "
              f"(min {min(runs):.3f}, max {max(runs):.3f})")


if __name__ == "__main__":
    main(sys.argv[1:] or list(ERAS.values()))
