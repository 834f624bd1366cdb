"""How many streamed tokens/s can bench_client ingest on one core?

A stdlib source server (its own process, pinned to core 1, a thread per connection writing on a
blocking socket) answers every request with a pre-built chunked SSE stream of OpenAI completion
chunks (one token per chunk, llama.cpp-sized JSON, usage + [DONE] at the end). The client (this
process, pinned to core 0) runs bench_client.run_benchmark against it. Two source patterns:

- `batched`: the source writes 64 KiB blocks (many events per TCP read): parser/JSON cost only.
- `per_token`: one write per event with TCP_NODELAY, as a real server sends tokens; how many
  events one read then gets depends on how far the client lags behind the source.

The source must be faster than the client for the number to be the client's ceiling. The table
shows the client's CPU use (100 % = one core busy) and the source's capacity: tokens it streamed
per second of its own CPU time, i.e. what it could send with its core to itself. A capacity well
above the client's rate means the client was the limit.

With `--sglang-python PY` (a throwaway venv with `pip install --no-deps sglang` plus aiohttp, msgspec,
numpy, orjson, requests, tqdm, transformers, psutil, pybase64, pyzmq, datasets; no torch),
`python -m sglang.bench_serving --backend sglang-oai` is run the same way, pinned to the same core,
through bench/client_sglang_runner.py (which skips sglang's torch-importing package __init__s).
It needs a tokenizer (`--tokenizer DIR`, default: the tiny test model's, in which "A" x N is N
tokens) and a ShareGPT-format file for its random dataset (written to a temp dir).

    .venv/bin/python bench/client_ceiling.py [--tokens 100000] [--concurrency 1 8] [--rounds 3] [--sglang-python PY]
"""

from __future__ import annotations

import argparse
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
import threading
import time
from statistics import median_high

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "plugins" / "module_utils" / "verify"))
import bench_client

# Clients on core 0, the source on core 1 (both on the one core of a 1-CPU machine).
SOURCE_CORE = 1 if (os.cpu_count() or 1) > 1 else None

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


def _handle(conn: socket.socket, head: bytes, frames: list[bytes], blocks: list[bytes], pattern: str,
            delay_s: float, sent) -> None:
    """Answer one request on a blocking socket: as fast as one thread can write (or `delay_s` apart)."""
    try:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = b""
        while b"\r\n\r\n" not in req:
            got = conn.recv(65536)
            if not got:
                return
            req += got
        hdr, _, body = req.partition(b"\r\n\r\n")
        n = next((int(x.split(b":")[1]) for x in hdr.split(b"\r\n") if x.lower().startswith(b"content-length")), 0)
        while len(body) < n:
            body += conn.recv(65536)
        if hdr.startswith(b"GET "):  # /v1/models, else 404 JSON like llama-server (/server_info)
            models = hdr.startswith(b"GET /v1/models ")
            status = b"200 OK" if models else b"404 Not Found"
            reply = b'{"data": [{"id": "m"}]}' if models else b'{"error": {"code": 404, "message": "Not Found"}}'
            conn.sendall(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (status, len(reply), reply))
            return
        conn.sendall(head)
        for piece in (blocks if pattern == "batched" else frames):
            conn.sendall(piece)
            if delay_s:
                time.sleep(delay_s)
        with sent.get_lock():
            sent.value += len(frames) - 3  # token events; usage, [DONE] and the last chunk are not tokens
    except OSError:
        pass
    finally:
        conn.close()


def _serve(port_q, sent, tokens: int, pattern: str, core: int | None, delay_s: float) -> None:
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
    server = socket.create_server(("127.0.0.1", 0), backlog=512)
    port_q.put(server.getsockname()[1])
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_handle, args=(conn, head, frames, blocks, pattern, delay_s, sent), daemon=True).start()


class Source:
    """The source server in a child process: `with Source(tokens, pattern) as src: src.url`.

    On exit `capacity` is the tokens it streamed per second of its own CPU time: what it could
    send with a core to itself. Above the client's rate, the source was not the limit.
    """

    def __init__(self, tokens: int, pattern: str = "batched", core: int | None = 1, delay_s: float = 0.0):
        self.args = (tokens, pattern, core, delay_s)
        self.capacity = 0.0

    def __enter__(self) -> Source:
        ctx = mp.get_context("fork")
        q, self.sent = ctx.Queue(), ctx.Value("q", 0)
        self.proc = ctx.Process(target=_serve, args=(q, self.sent, *self.args), daemon=True)
        self.proc.start()
        self.url = f"http://127.0.0.1:{q.get(timeout=10)}"
        return self

    def _cpu_s(self) -> float:
        fields = pathlib.Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def __exit__(self, *exc) -> None:
        cpu = self._cpu_s()
        self.capacity = self.sent.value / cpu if cpu else float("inf")
        self.proc.terminate()
        self.proc.join(5)


def measure(tokens: int, pattern: str, concurrency: int, num_prompts: int) -> dict:
    with Source(tokens, pattern, core=SOURCE_CORE) as src:
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        res = bench_client.run_benchmark(src.url, "completions", "m", 8, tokens, concurrency, num_prompts, warmup=0,
                                         repeats=1, timeout_s=300, calibrate=False, spec_accept_length=False)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    assert res["failed"] == 0, res["errors"]
    assert res["usage_check"]["usage_vs_chunks_mismatch"] == 0
    return {"pattern": pattern, "concurrency": concurrency, "tokens": res["total_output_tokens"],
            "tok_s": res["output_throughput"], "tok_per_cpu_s": res["total_output_tokens"] / cpu,
            "client_cpu_pct": 100 * cpu / wall, "source_capacity": src.capacity}


def measure_sglang(py: str, tokenizer: str, dataset: str, tokens: int, pattern: str, concurrency: int,
                   num_prompts: int) -> tuple[float, float] | str:
    """(sglang.bench_serving's output tok/s, source capacity) against the same source, pinned to core 0
    (or why it failed)."""
    runner = pathlib.Path(__file__).resolve().parent / "client_sglang_runner.py"
    with Source(tokens, pattern, core=SOURCE_CORE) as src:
        # bench_serving writes a .jsonl result file; keep it out of the working tree
        argv = [py, str(runner), "--backend", "sglang-oai", "--base-url", src.url, "--dataset-name", "random",
                "--dataset-path", dataset, "--random-input-len", "8", "--random-output-len", str(tokens),
                "--random-range-ratio", "1.0", "--num-prompts", str(num_prompts), "--max-concurrency",
                str(concurrency), "--tokenizer", tokenizer, "--model", "m", "--disable-tqdm",
                "--output-file", os.path.join(os.path.dirname(dataset), "bench_serving.jsonl")]
        if SOURCE_CORE is not None:
            argv = ["taskset", "-c", "0", *argv]
        p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                           timeout=600, check=False)
    m = re.search(r"Output token throughput \(tok/s\):\s+([0-9.]+)", p.stdout)
    return (float(m.group(1)), src.capacity) if m and p.returncode == 0 else f"failed: {(p.stderr or p.stdout)[-200:]!r}"


def main() -> None:
    p = argparse.ArgumentParser(description="bench_client ingest ceiling on one core")
    p.add_argument("--tokens", type=int, default=100000, help="tokens per request")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the table shows medians")
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
    if SOURCE_CORE is not None:
        os.sched_setaffinity(0, {0})
    cases = [(pattern, c) for pattern in ("batched", "per_token") for c in a.concurrency]
    runs: dict[tuple, dict[str, list]] = {case: {k: [] for k in ("ours", "cpu", "src", "sglang", "sg_src")}
                                          for case in cases}
    for _ in range(a.rounds):  # interleaved: both clients see the same machine state, round by round
        for pattern, c in cases:
            r = runs[(pattern, c)]
            m = measure(a.tokens, pattern, c, max(c, 2))
            r["ours"].append(m["tok_s"])
            r["cpu"].append(m["client_cpu_pct"])
            r["src"].append(m["source_capacity"])
            if a.sglang_python:
                sg = measure_sglang(a.sglang_python, a.tokenizer, dataset, a.tokens, pattern, c, max(c, 2))
                if isinstance(sg, str):
                    sys.exit(f"bench_serving {pattern} c={c}: {sg}")
                r["sglang"].append(sg[0])
                r["sg_src"].append(sg[1])
    print(f"bench_client {bench_client.__version__}, Python {sys.version.split()[0]}, clients pinned to 1 core, "
          f"{a.tokens} tokens per request, medians of {a.rounds} interleaved rounds\n")
    print("| source pattern | concurrency | bench_client tok/s | client CPU | source capacity "
          "| sglang.bench_serving tok/s | source capacity | ratio (range over rounds) |")
    print("|---|---|---|---|---|---|---|---|")
    for (pattern, c), r in runs.items():
        ours = median_high(r["ours"])
        sg = f"{median_high(r['sglang']):,.0f} | {median_high(r['sg_src']):,.0f}" if r["sglang"] else "not run | -"
        per_round = sorted(o / g for o, g in zip(r["ours"], r["sglang"]))
        ratio = (f"{ours / median_high(r['sglang']):.2f}x ({per_round[0]:.2f}-{per_round[-1]:.2f})"
                 if r["sglang"] else "-")
        print(f"| {pattern} | {c} | {ours:,.0f} | {median_high(r['cpu']):.0f} % | {median_high(r['src']):,.0f} | {sg} | {ratio} |")


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
