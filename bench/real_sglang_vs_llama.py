"""The real SGLang 0.5.23 on the CPU next to llama-server, one tiny model size, side by side.

Both on 127.0.0.1 of this machine: SGLang's CPU path (the lab's launch: torch_native attention,
the lab's sgl_kernel stand-in on PYTHONPATH, lab/real_sglang/README.md) serving the tiny Llama of
lab/real_sglang/make_tiny_model.py, and llama.cpp's llama-server (tests/real_engine: built and
cached, `-np 8 -t 2`) serving the GGUF of tests/real_engine/make_tiny_model.py: both 2 layers,
width 64, 4 heads, 2 KV heads. Measures each server's start (process start until it generates),
then per round the same bench_client run on each (alternating which goes first): output tok/s at
concurrency 1 and 4, 128 tokens in, 64 out, ignore_eos. Prints the medians and the per-round ratio.

    uv venv /tmp/rs --python 3.11 && VIRTUAL_ENV=/tmp/rs uv pip install sglang==0.5.23
    .venv/bin/python bench/real_sglang_vs_llama.py --sglang-python /tmp/rs/bin/python [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "module_utils" / "verify"))
sys.path.insert(0, str(REPO / "tests" / "real_engine"))
import bench_client
from conftest import ALIAS, LlamaServer, free_port
from make_tiny_model import make_tiny_model as write_tiny_gguf

CONCURRENCY = (1, 4)


def generates(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def start_sglang(python: str, model: pathlib.Path, log: pathlib.Path) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(REPO / "lab" / "real_sglang")}
    argv = [python, "-m", "sglang.launch_server", "--model-path", str(model), "--device", "cpu",
            "--attention-backend", "torch_native", "--max-total-tokens", "8192", "--host", "127.0.0.1",
            "--port", str(port), "--served-model-name", ALIAS]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    while not generates(url + "/health_generate"):
        if proc.poll() is not None or time.monotonic() - start > 600:
            proc.kill()
            raise RuntimeError(f"sglang did not come up:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return proc, url, time.monotonic() - start


def output_tok_s(url: str, concurrency: int) -> float:
    res = bench_client.run_benchmark(url, "completions", ALIAS, 128, 64, concurrency, 4 * concurrency,
                                     warmup=1, repeats=1, timeout_s=300, spec_accept_length=False)
    assert res["failed"] == 0, res["errors"]
    return res["output_throughput"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sglang-python", required=True, help="python of a venv with sglang==0.5.23 (see above)")
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    binary = subprocess.run(["bash", str(REPO / "tests" / "real_engine" / "build_llama_server.sh")], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    with tempfile.TemporaryDirectory(prefix="real-vs-llama-") as tmp:
        tmp = pathlib.Path(tmp)
        subprocess.run([sys.executable, str(REPO / "lab" / "real_sglang" / "make_tiny_model.py"), str(tmp / "tiny-llama")],
                       check=True, capture_output=True)
        write_tiny_gguf(tmp / "gguf")
        t0 = time.monotonic()
        llama = LlamaServer(binary, tmp / "gguf")
        llama.start()
        llama_start = time.monotonic() - t0
        sglang, sglang_url, sglang_start = start_sglang(a.sglang_python, tmp / "tiny-llama", tmp / "sglang.log")
        servers = {"sglang": sglang_url, "llama-server": llama.url}
        got = {(name, c): [] for name in servers for c in CONCURRENCY}
        try:
            for r in range(a.rounds):
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for c in CONCURRENCY:
                    for name in order:
                        got[(name, c)].append(output_tok_s(servers[name], c))
                print(f"round {r + 1}: " + ", ".join(f"{n} c={c} {v[-1]:.1f}" for (n, c), v in got.items()), flush=True)
        finally:
            sglang.terminate()
            sglang.wait(30)
            llama.stop()
    print(f"\nstart until it generates: sglang {sglang_start:.1f} s, llama-server {llama_start:.1f} s")
    print("| concurrency | sglang tok/s (median) | llama-server tok/s (median) | sglang / llama-server (median of rounds) |")
    print("|---|---|---|---|")
    for c in CONCURRENCY:
        s, l_ = got[("sglang", c)], got[("llama-server", c)]
        ratio = statistics.median(x / y for x, y in zip(s, l_))
        print(f"| {c} | {statistics.median(s):.1f} | {statistics.median(l_):.1f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
