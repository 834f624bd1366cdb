"""Fidelity of bench_client: its output tok/s against sglang.bench_serving on the same server.

A real llama-server (tests/real_engine: built from source and cached, serving the tiny test model)
on 127.0.0.1; for each concurrency level, N pairs of runs, INTERLEAVED (ours, theirs; then
theirs, ours; ...) so that drift of the shared machine hits both alike. Same fixed lengths
(random prompts of --input-len tokens, --output-len tokens with ignore_eos), same number of
prompts, same concurrency. bench_serving runs through bench/client_sglang_runner.py from a
throwaway venv without torch (see bench/client_ceiling.py, --sglang-python). Prints a table of
per-pair ratios (ours / theirs) and their median.

    .venv/bin/python bench/verify_fidelity.py --sglang-python /tmp/sglvenv/bin/python \
        [--pairs 9] [--concurrency 1 4] [--input-len 128] [--output-len 256] [--num-prompts 16]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "module_utils" / "verify"))
sys.path.insert(0, str(REPO / "tests" / "real_engine"))
import bench_client
from conftest import LlamaServer
from make_tiny_model import make_tiny_model


def ours(url: str, a, c: int) -> float:
    res = bench_client.run_benchmark(url, "completions", "tiny", a.input_len, a.output_len, c, a.num_prompts,
                                     warmup=1, repeats=1, timeout_s=120, spec_accept_length=False)
    assert res["failed"] == 0, res["errors"]
    return res["output_throughput"]


def theirs(url: str, a, c: int, tokenizer: str, dataset: str, tmp: str) -> float:
    argv = [a.sglang_python, str(REPO / "bench" / "client_sglang_runner.py"), "--backend", "sglang-oai",
            "--base-url", url, "--dataset-name", "random", "--dataset-path", dataset,
            "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
            "--random-range-ratio", "1.0", "--num-prompts", str(a.num_prompts), "--max-concurrency", str(c),
            "--tokenizer", tokenizer, "--model", "tiny", "--disable-tqdm",
            "--output-file", os.path.join(tmp, "bench_serving.jsonl")]
    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                       timeout=600, check=False)
    m = re.search(r"Output token throughput \(tok/s\):\s+([0-9.]+)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"bench_serving failed (rc {p.returncode}):\n{(p.stderr or p.stdout)[-2000:]}")
    return float(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sglang-python", required=True, help="python of a venv where sglang.bench_serving runs")
    p.add_argument("--pairs", type=int, default=9)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--no-pin", dest="pin", action="store_false",
                   help="do not pin llama-server to CPU 0 and both clients to CPU 1")
    a = p.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    a.pin = a.pin and len(cpus) >= 2
    binary = subprocess.run(["bash", str(REPO / "tests" / "real_engine" / "build_llama_server.sh")], check=True,
                            capture_output=True, text=True).stdout.strip().splitlines()[-1]
    tmp = tempfile.mkdtemp(prefix="verify-fidelity-")
    model = pathlib.Path(tmp) / "model"
    make_tiny_model(model)
    dataset = os.path.join(tmp, "sharegpt.json")  # bench_serving's random dataset samples its text
    text = "the server streams one token at a time and the client reads every chunk " * 8
    with open(dataset, "w") as f:
        json.dump([{"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": "ok"}]}] * 64, f)
    server = LlamaServer(binary, model)
    if a.pin:  # the server inherits CPU 0; then this process (and bench_serving, its child) moves to CPU 1
        os.sched_setaffinity(0, {cpus[0]})
    server.start()
    if a.pin:
        os.sched_setaffinity(0, {cpus[1]})
    rows = []
    try:
        for c in a.concurrency:
            for i in range(a.pairs):
                if i % 2 == 0:
                    o = ours(server.url, a, c)
                    t = theirs(server.url, a, c, str(model / "tokenizer"), dataset, tmp)
                else:
                    t = theirs(server.url, a, c, str(model / "tokenizer"), dataset, tmp)
                    o = ours(server.url, a, c)
                rows.append((c, i, o, t, o / t))
                print(f"c={c} pair {i + 1}: ours {o:.0f} tok/s, bench_serving {t:.0f} tok/s, ratio {o / t:.3f}",
                      file=sys.stderr, flush=True)
    finally:
        server.stop()
    pinning = f"server on CPU {cpus[0]}, clients on CPU {cpus[1]}" if a.pin else "no CPU pinning"
    print(f"llama-server (tiny model, -np 8 -t 2; {pinning}), input {a.input_len}, output {a.output_len} tokens, "
          f"{a.num_prompts} prompts per run, {a.pairs} interleaved pairs per level\n")
    print("| concurrency | bench_client tok/s (median) | bench_serving tok/s (median) | ratio per pair (min .. max) "
          "| median ratio |")
    print("|---|---|---|---|---|")
    for c in a.concurrency:
        rs = [r for r in rows if r[0] == c]
        ratios = [r[4] for r in rs]
        print(f"| {c} | {statistics.median(r[2] for r in rs):.0f} | {statistics.median(r[3] for r in rs):.0f} | "
              f"{min(ratios):.3f} .. {max(ratios):.3f} | {statistics.median(ratios):.3f} |")


if __name__ == "__main__":
    main()
