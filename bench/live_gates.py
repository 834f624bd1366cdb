#!/usr/bin/env python3
"""#27's live check through Ansible: the noise-aware gates on a lab host with the machine loaded.

    .venv/bin/python bench/live_gates.py [--verifies 20] [--load 2] [--loss 0.08] [--seed 27]

Starts one lab host of its own (`--host`, default h200x1: a simulator host, ~117 tok/s single
stream; prefix sglang-livegates, 10.89.112.0/24) with the simulator's `noise_cv` at `--cv` (0.02,
the GPU run-to-run spread #27 takes as typical) and verify at the role's defaults (concurrency 1
and 4, 4 repeats, one re-measure) in `sglang_verify_gate_mode: noise`, no floor (the history and
last-good gates decide alone). While `--load` busy processes load the machine's cores:
1. `verify.yml -l HOST` `--verifies` times on the unchanged host: every run should pass or be
   inconclusive (kept), none fail;
2. one `deploy.yml -l HOST` of a release `--loss` slower (the simulator's degrade_factor in the
   new unit's environment, a fault that goes with the unit): it should fail a gate and be rolled
   back to the last known good release.
Prints each run's verdict and a table of counts; exits 1 when an unchanged run failed or the slow
release was not rolled back.
"""

import argparse
import contextlib
import json
import multiprocessing
import pathlib
import signal
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "lab"))
sys.path.insert(0, str(REPO / ".collections"))
from lab_fleet import deployed_lab_fleet, unflow  # noqa: E402

from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import decode_noise_row  # noqa: E402

SIM_CONFIG = {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json"}
# verify's own defaults (roles/sglang_verify/defaults/main.yml) over the lab's light verify, with
# the noise-aware gate deciding
VERIFY = {"sglang_verify_concurrency": [1, 4], "sglang_verify_repeats": 4, "sglang_verify_requests_per_stream": 2,
          "sglang_verify_remeasure": 1, "sglang_verify_gate_mode": "noise", "sglang_verify_min_decode_tok_s": 0}


def burn():
    # forked after ansible-runner set its own SIGTERM handler, which the child would inherit
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        pass


@contextlib.contextmanager
def loaded(n):
    procs = [multiprocessing.Process(target=burn, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.join()


def last_report(fleet, host):
    latest = fleet.reports / host / "verify-latest.json"
    return json.loads(latest.read_text()) if latest.exists() else {}


def failed_report(fleet, host):
    """The newest verify report that failed (the slow release's, before the rollback verified the old one)."""
    for path in sorted((fleet.reports / host).glob("verify-2*.json"), reverse=True):
        report = json.loads(path.read_text())
        if report.get("passed") is False:
            return report
    return {}


def decode_row(report, gate_name):
    """The gate's single-stream decode row where the noise-aware comparison tested it, else {}."""
    gate = next((g for g in report.get("gates", []) if g.get("gate") == gate_name), {})
    return decode_noise_row(gate) or {}


def describe(report):
    """One line: the run's decode, each gate's status, and the history and last-good gates' effect,
    interval and detectable loss on single-stream decode."""
    figures = ""
    for gate_name in ("history", "last_good"):
        row = decode_row(report, gate_name)
        if row:
            interval = row.get("interval_pct")
            figures += (f"; {gate_name}: {row['effect_pct']:+.1f} %"
                        + (f" [{interval[0]:+.1f}, {interval[1]:+.1f}]" if interval else "")
                        + (f", detectable {row['detectable_pct']:.1f} %" if row.get("detectable_pct") is not None else ""))
    n = report.get("measurements", 1)
    return (f"decode {report.get('metrics', {}).get('decode_tok_s@1', 0):.1f} tok/s, "
            + ", ".join(f"{g['gate']} {g['status']}" for g in report.get("gates", []))
            + figures + f" ({n} measurement{'s' if n > 1 else ''})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="h200x1")
    p.add_argument("--verifies", type=int, default=20)
    p.add_argument("--load", type=int, default=2, help="busy processes loading the machine")
    p.add_argument("--cv", type=float, default=0.02, help="the simulator's noise_cv")
    p.add_argument("--loss", type=float, default=0.08, help="the slow release's loss")
    p.add_argument("--seed", type=int, default=27, help="the simulator's noise_seed (one seed, one sequence)")
    a = p.parse_args()
    group_vars = {**VERIFY, "lab_sim_faults": {"noise_cv": a.cv, "noise_seed": a.seed}}
    with tempfile.TemporaryDirectory(prefix="live-gates-") as tmp, \
            deployed_lab_fleet(pathlib.Path(tmp), "sglang-livegates", "10.89.112.", hosts=(a.host,),
                               group_vars=group_vars) as fleet, loaded(a.load):
        counts, times = {}, []
        for i in range(a.verifies):
            t0 = time.monotonic()
            rc, out = fleet.play("verify.yml", "-l", a.host)
            times.append(time.monotonic() - t0)
            report = last_report(fleet, a.host)
            verdict = {g["gate"]: g["status"] for g in report.get("gates", [])}
            outcome = ("fail" if rc else "inconclusive (kept)" if "inconclusive" in verdict.values() else "pass")
            counts[outcome] = counts.get(outcome, 0) + 1
            print(f"verify {i + 1}: rc {rc}, {outcome}, {times[-1]:.0f} s: {describe(report)}", flush=True)
            if rc:
                print("  " + "\n  ".join(report.get("failures", [])), flush=True)
        before = fleet.ssh(a.host, "cat /var/lib/sglang-fleet/current").strip()
        env = {**SIM_CONFIG, "SGLANG_SIM_FAULTS": f"degrade_factor={1 - a.loss:g}"}
        t0 = time.monotonic()
        rc, out = fleet.play("deploy.yml", "-l", a.host, "-e", json.dumps({"sglang_service_environment": env}))
        deploy_s = time.monotonic() - t0
        after = fleet.ssh(a.host, "cat /var/lib/sglang-fleet/current").strip()
        caught = rc != 0 and f"rolled back to {before}" in unflow(out) and after == before
        slow = failed_report(fleet, a.host)
        for line in slow.get("failures", []):
            print(f"slow release: {line}")
    print(f"\n{a.host}, noise_cv {a.cv:g} (seed {a.seed}), {a.load} busy processes, gate_mode noise, 4 repeats, remeasure 1\n")
    print("| unchanged verifies | pass | inconclusive (kept) | fail | verify time (median) |")
    print("|---|---|---|---|---|")
    print(f"| {a.verifies} | {counts.get('pass', 0)} | {counts.get('inconclusive (kept)', 0)} | "
          f"{counts.get('fail', 0)} | {statistics.median(times):.0f} s |")
    print(f"\na release {a.loss * 100:g} % slower: {describe(slow)}; "
          f"{'caught and rolled back to ' + before if caught else 'NOT rolled back (rc ' + str(rc) + ')'}, "
          f"deploy {deploy_s:.0f} s")
    sys.exit(0 if caught and not counts.get("fail") else 1)


if __name__ == "__main__":
    main()
