"""Peak RSS of bench_client with 64 concurrent streams.

Each configuration runs in a fresh child process (so ru_maxrss is its own peak): baseline RSS after
importing bench_client, then run_benchmark at concurrency 64 against the stdlib source server of
client_ceiling.py (own process, one event per write, optional delay so all 64 streams stay open
at the same time). Per-request results keep every inter-token latency (a float per token), so
memory grows with tokens per request; the table shows how much.

    .venv/bin/python bench/client_memory.py
"""

from __future__ import annotations

import json
import pathlib
import resource
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
CONFIGS = [  # (streams, tokens per stream, source delay per token in s)
    (64, 200, 0.005),
    (64, 2000, 0.0005),
    (64, 20000, 0.0),
]


def rss_kib() -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def child(streams: int, tokens: int, delay: float) -> dict:
    sys.path.insert(0, str(HERE))
    import client_ceiling

    bench_client = client_ceiling.bench_client
    base = rss_kib()
    with client_ceiling.Source(tokens, "per_token", core=None, delay_s=delay) as src:
        t0 = time.perf_counter()
        res = bench_client.run_benchmark(src.url, "completions", "m", 8, tokens, streams, streams, warmup=0, repeats=1,
                                         timeout_s=600, calibrate=False, spec_accept_length=False)
        wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    assert res["failed"] == 0, res["errors"]
    return {"streams": streams, "tokens": tokens, "delay_ms": delay * 1000, "base_mib": base / 1024,
            "peak_mib": peak / 1024, "per_stream_kib": (peak - base) / streams, "wall_s": wall,
            "total_tokens": res["total_output_tokens"], "e2e_p50_s": res["e2e_ms"]["p50"] / 1000}


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))))
        return
    rows = []
    for streams, tokens, delay in CONFIGS:
        out = subprocess.run([sys.executable, __file__, "--child", str(streams), str(tokens), str(delay)],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout))
    print(f"Python {sys.version.split()[0]}; each row a fresh process; all streams open at once "
          "(wall ~ one stream's e2e)\n")
    print("| streams | tokens/stream | RSS after import | peak RSS | peak - base per stream | wall | e2e p50 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['streams']} | {r['tokens']} | {r['base_mib']:.1f} MiB | {r['peak_mib']:.1f} MiB | "
              f"{r['per_stream_kib']:.0f} KiB | {r['wall_s']:.2f} s | {r['e2e_p50_s']:.2f} s |")


if __name__ == "__main__":
    main()
