#!/usr/bin/env python3
"""#40's recordings: verify runs of the real SGLang host (the lab's cpu1) as they come, every repeat kept.

    .venv/bin/python bench/real_gate_runs.py record --runs 50 --phase idle --restart-every 10 --out FILE
    .venv/bin/python bench/real_gate_runs.py record --runs 50 --phase load --restart-every 10 --out FILE \
        --load "make verify" --load ...
    .venv/bin/python bench/real_gate_runs.py record --runs 10 --phase loss-mrr2 --out FILE

One run is exactly what verify measures (roles/sglang_verify/tasks/measure.yml with the lab's
settings: the sglang_bench module on the host itself, concurrency 1 and 4, 4 repeats of 2 requests
per stream after 1 warm-up request per stream, 128 in / 64 out), sent through Ansible to cpu1 of
`make demo`'s fleet. Each line of FILE: the phase, when, runs since the server's last restart, each
level's every repeat and its figure (the median: what verify gates). `--restart-every K` restarts
the service every K runs (a deploy restarts it; the run after a restart is marked). `--load CMD`
runs CMD in a loop beside the recording (other lab work: a phase "load"). A real loss is recorded
after deploying it (deploy.yml -e with the slower flag and sglang_verify_fail_on_gates=false), as
phase "loss-<what>".
The evaluation of both gates on the recorded runs is bench/noise_gates.py `replay`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
HOST = "cpu1"
INVENTORY = REPO / "inventories" / "lab" / "hosts.yml"
LEVELS = (1, 4)
VERIFY = {"api": "completions", "input_len": 128, "output_len": 64, "repeats": 4, "requests_per_stream": 2,
          "warmup_per_stream": 1}


def ansible(module: str, args: dict, become: bool = False) -> dict:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    cmd = [str(REPO / ".venv" / "bin" / "ansible"), HOST, "-i", str(INVENTORY), "-o", "-m", module, "-a", json.dumps(args)]
    if become:
        cmd.append("--become")
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    try:   # one line: "cpu1 | SUCCESS => {...}"
        res = json.loads(out.stdout.split("=>", 1)[1])
    except (ValueError, IndexError):
        raise SystemExit(f"ansible {module} on {HOST} failed: {out.stdout[-2000:]} {out.stderr[-2000:]}") from None
    if res.get("failed") or res.get("unreachable") or (module.endswith("sglang_bench") and "result" not in res):
        raise SystemExit(f"ansible {module} on {HOST}: {res.get('msg')}")
    return res


def base_url() -> str:
    res = ansible("ansible.builtin.debug", {"msg": "{{ sglang_host.url }}"})
    return res["msg"]


def measure(url: str) -> dict:
    """One verify measurement: every repeat's decode tok/s (c=1) and output tok/s (c=4)."""
    levels = {}
    for c in LEVELS:
        res = ansible("sglang.fleet.sglang_bench", {
            "base_url": url, "api": VERIFY["api"], "input_len": VERIFY["input_len"], "output_len": VERIFY["output_len"],
            "concurrency": c, "num_prompts": c * VERIFY["requests_per_stream"], "warmup": c * VERIFY["warmup_per_stream"],
            "repeats": VERIFY["repeats"], "timeout_s": 300})["result"]
        key = "decode_tok_s_per_stream" if c == 1 else "output_throughput"
        repeats = [r["decode_tok_s_per_stream"]["p50"] if c == 1 else r["output_throughput"] for r in res["runs"]]
        levels[str(c)] = {"metric": "decode_tok_s@1" if c == 1 else f"output_tok_s@{c}", "repeats": repeats,
                          "figure": (res[key]["p50"] if c == 1 else res[key]), "failed": res.get("failed")}
    return levels


def main_pid(name: str) -> str:
    return ansible("ansible.builtin.systemd_service", {"name": name}, become=True)["status"]["MainPID"]


def restart(url: str) -> float:
    """Restart the service as a deploy does and wait until a new main process generates (the old one
    may answer for a moment); the seconds it took."""
    t0 = time.monotonic()
    name = ansible("ansible.builtin.debug", {"msg": "{{ sglang_host.service.name }}"})["msg"]
    before = main_pid(name)
    ansible("ansible.builtin.systemd_service", {"name": name, "state": "restarted"}, become=True)
    while time.monotonic() - t0 < 900:
        time.sleep(5)
        if main_pid(name) in (before, "0"):
            continue
        with contextlib.suppress(SystemExit):
            ansible("ansible.builtin.uri", {"url": f"{url}/health_generate", "timeout": 30})
            return time.monotonic() - t0
    raise SystemExit("the service did not generate within 900 s of its restart")


@contextlib.contextmanager
def load(commands: list[str]):
    procs = [subprocess.Popen(f"while true; do {cmd}; done >/dev/null 2>&1", shell=True, cwd=REPO,
                              start_new_session=True) for cmd in commands]
    try:
        yield
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 15)
            p.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=("record",))
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--phase", default="idle")
    p.add_argument("--restart-every", type=int, default=0)
    p.add_argument("--restart-first", action="store_true", help="restart before the first run")
    p.add_argument("--load", action="append", default=[], help="a command run in a loop beside the recording")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    url = base_url()
    out = pathlib.Path(a.out)
    since = 0
    with load(a.load):
        if a.restart_first:
            print(f"restart {restart(url):.0f} s", flush=True)
        for i in range(a.runs):
            if a.restart_every and i and i % a.restart_every == 0:
                print(f"restart {restart(url):.0f} s", flush=True)
                since = 0
            t0 = time.time()
            for attempt in range(10):   # a server still starting under load: again, later
                try:
                    levels = measure(url)
                    break
                except SystemExit as exc:
                    if attempt == 9:
                        raise
                    print(f"measure again in 30 s: {exc}", flush=True)
                    time.sleep(30)
                    t0 = time.time()
            rec = {"phase": a.phase, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
                   "loadavg_1m": round(os.getloadavg()[0], 2),
                   "seconds": round(time.time() - t0, 1), "since_restart": since,
                   "levels": levels, "load": a.load}
            since += 1
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(f"run {i + 1}: " + ", ".join(f"{v['metric']} {v['figure']:.1f} ({statistics.median(v['repeats']):.1f})"
                                               for v in levels.values()) + f" in {rec['seconds']} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
