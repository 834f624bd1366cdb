"""How many streamed tokens/s can bench_client ingest on one core?

A stdlib source server (its own process, pinned to another core) answers every request with a
pre-built chunked SSE stream of OpenAI completion chunks (one token per chunk, llama.cpp-sized
JSON, usage + [DONE] at the end). The client (this process, pinned to core 0) runs
bench_client.run_benchmark against it. Two source patterns:

- `batched`: the source writes 64 KiB blocks (many events per TCP read): parser/JSON cost only.
- `per_token`: one write per event, as a real server does; the client reads ~1 event per syscall.

The source must be faster than the client for the number to be the client's ceiling: the table
shows the client's CPU use (100 % = one core busy), which should be close to 100 %.

With `--sglang-python PY` (a throwaway venv with `pip install --no-deps sglang` plus aiohttp, msgspec,
numpy, orjson, requests, tqdm, transformers, psutil, pybase64, pyzmq, datasets; no torch),
`python -m sglang.bench_serving --backend sglang-oai` is run the same way, pinned to the same core,
through bench/client_sglang_runner.py (which skips sglang's torch-importing package __init__s).
It needs a tokenizer (`--tokenizer DIR`, default: the tiny test model's, in which "A" x N is N
tokens) and a ShareGPT-format file for its random dataset (written to a temp dir).

    .venv/bin/python bench/client_ceiling.py [--tokens 20000] [--concurrency 1 8] [--sglang-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import pathlib
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "module_utils"))
import bench_client

CHUNK_JSON = {"choices": [{"text": "A", "index": 0, "logprobs": None, "finish_reason": None}],
              "created": 1796023530, "model": "tiny", "system_fingerprint": "b1-0c1e570",
              "object": "text_completion", "id": "chatcmpl-5ttXs9VwfTR327bLEX02cv6HudYcm4jd"}


def _chunk(payload: bytes) -> bytes:
    data = b"data: " + payload + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def build_stream(tokens: int) -> tuple[bytes, list[bytes]]:
    """(response head, list of per-event chunked frames) for one request of `tokens` tokens."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    ev = _chunk(json.dumps(CHUNK_JSON).encode())
    usage = {"choices": [{"text": "", "index": 0, "finish_reason": "length"}],  # llama.cpp style
             "usage": {"prompt_tokens": 8, "completion_tokens": tokens}}
    tail = [_chunk(json.dumps(usage).encode()), _chunk(b"[DONE]"), b"0\r\n\r\n"]
    return head, [ev] * tokens + tail


def _serve(port_q, tokens: int, pattern: str, core: int | None, delay_s: float) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    head, frames = build_stream(tokens)
    blocks, cur = [], bytearray()
    for f in frames:
        cur += f
        if len(cur) >= 65536:
            blocks.append(bytes(cur))
            cur = bytearray()
    blocks.append(bytes(cur))

    async def handle(reader, writer):
        try:
            hdr = await reader.readuntil(b"\r\n\r\n")
            n = next((int(x.split(b":")[1]) for x in hdr.split(b"\r\n") if x.lower().startswith(b"content-length")), 0)
            await reader.readexactly(n)
            if hdr.startswith(b"GET "):  # /v1/models, else 404 JSON like llama-server (/server_info)
                models = hdr.startswith(b"GET /v1/models ")
                status = b"200 OK" if models else b"404 Not Found"
                body = b'{"data": [{"id": "m"}]}' if models else b'{"error": {"code": 404, "message": "Not Found"}}'
                writer.write(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (status, len(body), body))
                await writer.drain()
                return
            writer.write(head)
            if pattern == "batched":
                for b in blocks:
                    writer.write(b)
                    await writer.drain()
            else:
                for f in frames:
                    writer.write(f)
                    await writer.drain()
                    if delay_s:
                        await asyncio.sleep(delay_s)
                    else:
                        await asyncio.sleep(0)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        port_q.put(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main())


class Source:
    """The source server in a child process: `with Source(tokens, pattern) as url:`."""

    def __init__(self, tokens: int, pattern: str = "batched", core: int | None = 1, delay_s: float = 0.0):
        self.args = (tokens, pattern, core, delay_s)

    def __enter__(self) -> str:
        q = mp.get_context("fork").Queue()
        self.proc = mp.get_context("fork").Process(target=_serve, args=(q, *self.args), daemon=True)
        self.proc.start()
        return f"http://127.0.0.1:{q.get(timeout=10)}"

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.join(5)


def measure(tokens: int, pattern: str, concurrency: int, num_prompts: int) -> dict:
    ncpu = os.cpu_count() or 1
    with Source(tokens, pattern, core=1 if ncpu > 1 else None) as url:
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        res = bench_client.run_benchmark(url, "completions", "m", 8, tokens, concurrency, num_prompts, warmup=0,
                                         repeats=1, timeout_s=300, calibrate=False, spec_accept_length=False)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    assert res["failed"] == 0, res["errors"]
    assert res["usage_check"]["usage_vs_chunks_mismatch"] == 0
    return {"pattern": pattern, "concurrency": concurrency, "tokens": res["total_output_tokens"],
            "tok_s": res["output_throughput"], "tok_per_cpu_s": res["total_output_tokens"] / cpu,
            "client_cpu_pct": 100 * cpu / wall}


def measure_sglang(py: str, tokenizer: str, dataset: str, tokens: int, pattern: str, concurrency: int,
                   num_prompts: int) -> float | str:
    # bench_serving writes a .jsonl result file; keep it out of the working tree
    """sglang.bench_serving's output tok/s against the same source, pinned to core 0 (or why not)."""
    runner = pathlib.Path(__file__).resolve().parent / "client_sglang_runner.py"
    with Source(tokens, pattern, core=1 if (os.cpu_count() or 1) > 1 else None) as url:
        argv = [py, str(runner), "--backend", "sglang-oai", "--base-url", url, "--dataset-name", "random",
                "--dataset-path", dataset, "--random-input-len", "8", "--random-output-len", str(tokens),
                "--random-range-ratio", "1.0", "--num-prompts", str(num_prompts), "--max-concurrency",
                str(concurrency), "--tokenizer", tokenizer, "--model", "m", "--disable-tqdm",
                "--output-file", os.path.join(os.path.dirname(dataset), "bench_serving.jsonl")]
        if (os.cpu_count() or 1) > 1:
            argv = ["taskset", "-c", "0", *argv]
        p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                           timeout=600, check=False)
    m = re.search(r"Output token throughput \(tok/s\):\s+([0-9.]+)", p.stdout)
    return float(m.group(1)) if m and p.returncode == 0 else f"failed: {(p.stderr or p.stdout)[-200:]!r}"


def main() -> None:
    p = argparse.ArgumentParser(description="bench_client ingest ceiling on one core")
    p.add_argument("--tokens", type=int, default=20000, help="tokens per request")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    p.add_argument("--sglang-python", help="python of a venv where sglang.bench_serving can run (see doc)")
    p.add_argument("--tokenizer", help="HF tokenizer folder for bench_serving (default: the tiny test model's)")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="client-ceiling-")
    if a.sglang_python:
        dataset = os.path.join(tmp, "sharegpt.json")
        text = "the server streams one token at a time and the client reads every chunk " * 4
        with open(dataset, "w") as f:
            json.dump([{"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": "ok"}]}] * 64, f)
        if not a.tokenizer:
            sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "real_engine"))
            from make_tiny_model import make_tiny_model

            make_tiny_model(tmp)
            a.tokenizer = os.path.join(tmp, "tokenizer")
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})
    rows = []
    for pattern in ("batched", "per_token"):
        for c in a.concurrency:
            r = measure(a.tokens, pattern, c, max(c, 2))
            r["sglang"] = (measure_sglang(a.sglang_python, a.tokenizer, dataset, a.tokens, pattern, c, max(c, 2))
                           if a.sglang_python else "not run")
            rows.append(r)
    print(f"bench_client {bench_client.__version__}, Python {sys.version.split()[0]}, client pinned to 1 core, "
          f"{a.tokens} tokens per request\n")
    print("| source pattern | concurrency | tokens | bench_client tok/s | tok per client CPU-s | client CPU "
          "| sglang.bench_serving tok/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        sg = f"{r['sglang']:,.0f}" if isinstance(r["sglang"], float) else r["sglang"]
        print(f"| {r['pattern']} | {r['concurrency']} | {r['tokens']} | {r['tok_s']:,.0f} | "
              f"{r['tok_per_cpu_s']:,.0f} | {r['client_cpu_pct']:.0f} % | {sg} |")


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
