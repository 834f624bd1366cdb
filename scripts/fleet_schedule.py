#!/usr/bin/env python3
"""Run drift (and verify) for the systemd timer of roles/sglang_schedule, then write the metrics.

    scripts/fleet_schedule.py -i INVENTORY --reports-dir DIR --textfile-dir DIR [-p drift -p verify] [options]

Each playbook runs through ansible-runner (sglang_fleet.run_playbook: its outcome read from the
runner's job events, not stdout) with its reports in --reports-dir, report-only (a drifted host or a
failed gate is data, not a failed run). Then every host's latest reports and each run's outcome go
to `<textfile-dir>/sglang_fleet.prom` (scripts/fleet_metrics.py), also when a run failed. Exit 0
when every run was ok, else the first failed run's code (2 a host failed, 4 unreachable, ...).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]
import fleet_metrics  # noqa: E402

from sglang_fleet.runner import run_playbook  # noqa: E402

# A scheduled check reports; it never fails the host for what it found (the metrics say it).
REPORT_ONLY = {"sglang_drift_fail_on_drift": False, "sglang_verify_fail_on_gates": False}


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-i", "--inventory", action="append", required=True, help="inventory (repeatable)")
    parser.add_argument("-p", "--playbook", action="append",
                        help="drift, verify, another playbook name or file, in order (repeatable; default: drift)")
    parser.add_argument("--reports-dir", type=pathlib.Path, required=True, help="where the playbooks write reports")
    parser.add_argument("--textfile-dir", type=pathlib.Path, required=True, help="node_exporter's textfile folder")
    parser.add_argument("-l", "--limit", help="hosts pattern")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="JSON", help="more variables (repeatable)")
    parser.add_argument("--vault-password-file", help="for inventories with vault-encrypted secrets")
    parser.add_argument("--private-key", help="SSH key for the fleet's hosts")
    parser.add_argument("--timeout", type=int, help="seconds each playbook may run")
    return parser.parse_args(argv)


def run(args) -> tuple[int, list[tuple]]:
    """Run each playbook; (exit code, fleet_metrics.add_run arguments per run)."""
    options = []
    if args.vault_password_file:
        options += ["--vault-password-file", args.vault_password_file]
    if args.private_key:
        options += ["--private-key", args.private_key]
    extra = [json.dumps({**REPORT_ONLY, "sglang_report_dir": str(args.reports_dir.resolve())}), *args.extra_vars]
    rc, runs = 0, []
    for playbook in args.playbook or ["drift"]:
        start = time.time()
        result = run_playbook(playbook, inventory=args.inventory, limit=args.limit, extra_vars=extra, args=options,
                              timeout=args.timeout)
        end = time.time()
        name = pathlib.Path(playbook).stem
        hosts = {h.host: h.status for h in result.hosts.values()}
        runs.append((name, hosts, result.rc, end, end - start))
        print(f"{name}: rc {result.rc}, {len(hosts)} host(s) in {end - start:.1f} s"
              + "".join(f"\n  {h.host} {h.status}: {f.task}: {f.msg}" for h in result.hosts.values() for f in h.failures)
              + (f"\n  no play ran: {result.error}" if result.error else ""))
        rc = rc or result.rc
    return rc, runs


def main(argv=None) -> int:
    args = parse(argv)
    args.reports_dir.mkdir(parents=True, exist_ok=True)
    rc, runs = run(args)
    text, count = fleet_metrics.fleet_metrics(args.reports_dir, runs=runs)
    print(f"{fleet_metrics.write_textfile(text, args.textfile_dir)}: {count} host(s), {len(runs)} run(s)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
