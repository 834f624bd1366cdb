"""How many streamed tokens/s can bench_client ingest on one core?

A stdlib source server (its own process, pinned to another core) answers every request with a
pre-built chunked SSE stream of OpenAI completion chunks (one token per chunk, llama.cpp-sized
JSON, usage + [DONE] at the end). The client (this process, pinned to core 0) runs
bench_client.run_benchmark against it. Two source patterns:

- `batched`: the source writes 64 KiB blocks (many events per TCP read): parser/JSON cost only.
- `per_token`: one write per event, as a real server does; the client reads ~1 event per syscall.

The source must be faster than the client for the number to be the client's ceiling: the table
shows the client's CPU use (100 % = one core busy), which should be close to 100 %.

    .venv/bin/python bench/client_ceiling.py [--tokens 20000] [--concurrency 1 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import pathlib
import resource
import socket
import sys
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
    usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": tokens}}
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


def main() -> None:
    p = argparse.ArgumentParser(description="bench_client ingest ceiling on one core")
    p.add_argument("--tokens", type=int, default=20000, help="tokens per request")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    a = p.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})
    rows = []
    for pattern in ("batched", "per_token"):
        for c in a.concurrency:
            rows.append(measure(a.tokens, pattern, c, max(c, 2)))
    print(f"bench_client {bench_client.__version__}, Python {sys.version.split()[0]}, client pinned to 1 core, "
          f"{a.tokens} tokens per request\n")
    print("| source pattern | concurrency | tokens | client tok/s | tok per client CPU-s | client CPU |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['pattern']} | {r['concurrency']} | {r['tokens']} | {r['tok_s']:,.0f} | "
              f"{r['tok_per_cpu_s']:,.0f} | {r['client_cpu_pct']:.0f} % |")


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
