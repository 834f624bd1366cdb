#!/usr/bin/env python3
"""Write the fleet's latest reports as Prometheus metrics (node_exporter textfile-collector format).

    scripts/fleet_metrics.py [--reports reports] [--textfile-dir DIR] [host ...]

Reads the same `<reports>/<host>/` files as scripts/fleet_report.py (plugins/module_utils/report/fleet_reports.py)
and writes `<DIR>/sglang_fleet.prom` atomically (a temporary file renamed into place, so node_exporter
never reads half a file), or prints the metrics without --textfile-dir. Every series has a `host`
label; a report a host does not have yet (no verify run, say) gives no series for it.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / ".collections")]  # the collection imports as Ansible imports it
from ansible_collections.sglang.fleet.plugins.module_utils.report import fleet_reports  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.source.optimisations import STATUSES  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import decode_noise_row  # noqa: E402

FILE_NAME = "sglang_fleet.prom"
AUDIT_STATUSES = STATUSES  # the audited optimisations' statuses (plugins/module_utils/source/optimisations.py)
COMPAT_STATUSES = ("ok", "unknown", "blocked")  # sglang_compat.STATUSES
HOST_STATUSES = ("ok", "changed", "failed", "unreachable")  # sglang_fleet.HostResult.status

# name (without the sglang_fleet_ prefix) -> HELP text; every metric is a gauge.
HELP = {
    "report_timestamp_seconds": "Unix time of the host's latest report of this kind (its run; file time for release and compat).",
    "drift_in_sync": "1 if the host's latest drift check found it as the inventory says, else 0.",
    "drift_items": "Differences between the host and the inventory found by its latest drift check.",
    "verify_passed": "1 if the host's latest verify passed every gate, else 0.",
    "verify_gate_passed": "1 if the gate passed in the host's latest verify, 0 if it failed (skipped or inconclusive gates have no series).",
    "verify_last_pass_timestamp_seconds": "Unix time of the host's latest verify that passed every gate (verify-history.jsonl).",
    "verify_decode_tokens_per_second": "Single-stream decode throughput measured by the host's latest verify.",
    "verify_decode_floor_tokens_per_second": "The host's single-stream decode floor (sglang_verify_min_decode_tok_s), when set.",
    "verify_roofline_tokens_per_second": "Memory-bandwidth upper bound of single-stream decode on the host's GPUs.",
    "verify_roofline_ratio": "Measured single-stream decode as a fraction of the roofline (0-1).",
    "verify_accept_length": "Speculative decoding accept length (tokens per step) in the host's latest verify.",
    "verify_output_tokens_per_second": "Output throughput at each concurrency level of the host's latest verify.",
    "verify_gate_inconclusive": "1 if the gate's noise-aware verdict could not tell a loss from the host's noise, else 0.",
    "verify_decode_change_ratio": "Single-stream decode against the gate's reference (history, last known good), "
                                  "as a fraction (-0.05 = 5 % slower).",
    "verify_decode_change_interval_ratio": "The change's interval at the gate's false-alarm rate (bound low, high).",
    "verify_decode_detectable_loss_ratio": "The smallest single-stream decode loss the gate detects with its power, "
                                           "given the host's noise.",
    "audit_ok": "1 if the host's latest audit met every expectation, else 0.",
    "audit_findings": "Optimisations in the host's latest audit, by status.",
    "compat_status": "The host's compatibility verdict for the release it checked: 1 for the verdict's status, 0 for the others.",
    "compat_checks": "Compatibility checks of the host's latest verdict, by status.",
    "release_info": "The release deploy last recorded on the host (its current release), with its status.",
    "last_good_release_info": "The host's last known good release (the last one that passed every gate).",
    "run_success": "1 if the scheduled playbook run ended with every host ok, else 0.",
    "run_timestamp_seconds": "Unix time the scheduled playbook run ended.",
    "run_duration_seconds": "Wall time of the scheduled playbook run.",
    "run_hosts": "Hosts of the scheduled playbook run, by outcome.",
}


def noise_aware(m, labels, gate):
    """A gate's noise-aware verdict on single-stream decode (sglang_verify's noise_verdict row): its
    change, interval and detectable loss as fractions; no series for a point comparison."""
    row = decode_noise_row(gate)
    if not row:
        return
    m.add("verify_gate_inconclusive", labels, row.get("noise_verdict") == "inconclusive")
    m.add("verify_decode_change_ratio", labels, round(row["effect_pct"] / 100, 4))
    for bound, value in zip(("low", "high"), row.get("interval_pct") or ()):
        m.add("verify_decode_change_interval_ratio", {**labels, "bound": bound}, round(value / 100, 4))
    m.add("verify_decode_detectable_loss_ratio", labels, round(row["detectable_pct"] / 100, 4))


def escape_label(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def number(value):
    """A finite int or float (True is 1), else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value == value and value not in (float("inf"), float("-inf")):
        return value
    return None


class Metrics:
    """Samples grouped by metric, written in the order the metrics were first added."""

    def __init__(self):
        self.samples: dict[str, list[tuple[dict, float]]] = {}

    def add(self, name: str, labels: dict, value) -> None:
        if name not in HELP:
            raise KeyError(f"no HELP text for metric {name!r}")
        value = number(value)
        if value is not None:
            self.samples.setdefault(name, []).append((labels, value))

    def text(self) -> str:
        lines = []
        for name, samples in self.samples.items():
            full = "sglang_fleet_" + name
            lines += [f"# HELP {full} {HELP[name]}", f"# TYPE {full} gauge"]
            for labels, value in samples:
                pairs = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
                lines.append(f"{full}{{{pairs}}} {value!r}" if pairs else f"{full} {value!r}")
        return "\n".join(lines) + "\n" if lines else ""


def add_host(m: Metrics, folder) -> bool:
    """The metrics of one host's reports; False when it has none."""
    host = os.path.basename(folder)
    reports = fleet_reports.latest(folder)
    if not any(reports.values()):
        return False
    h = {"host": host}
    for kind in fleet_reports.KINDS:
        if reports[kind]:
            m.add("report_timestamp_seconds", {**h, "kind": kind}, fleet_reports.report_time(folder, kind))

    drift = reports["drift"]
    if drift:
        m.add("drift_in_sync", h, bool(drift.get("in_sync")))
        m.add("drift_items", h, drift.get("differences", len(drift.get("items") or [])))

    verify = reports["verify"]
    if verify:
        m.add("verify_passed", h, bool(verify.get("passed")))
        for gate in verify.get("gates") or []:
            if gate.get("status") in ("pass", "fail"):
                m.add("verify_gate_passed", {**h, "gate": gate.get("gate")}, gate["status"] == "pass")
            noise_aware(m, {**h, "gate": gate.get("gate")}, gate)
    passed = [r for r in fleet_reports.verify_history(folder) if r.get("passed")]
    if passed:
        m.add("verify_last_pass_timestamp_seconds", h, fleet_reports.stamp_seconds(passed[-1].get("generated_at")))
    if verify:
        m.add("verify_decode_tokens_per_second", h, (verify.get("metrics") or {}).get("decode_tok_s@1"))
        floor = (verify.get("thresholds") or {}).get("min_decode_tok_s")
        if number(floor):  # 0 = no floor
            m.add("verify_decode_floor_tokens_per_second", h, floor)
        m.add("verify_roofline_tokens_per_second", h, (verify.get("roofline") or {}).get("upper_bound_tok_s"))
        efficiency = number(verify.get("efficiency_pct"))
        m.add("verify_roofline_ratio", h, None if efficiency is None else round(efficiency / 100, 4))
        m.add("verify_accept_length", h, verify.get("accept_length"))  # None (no speculative decoding): no series
        for level in verify.get("levels") or []:
            m.add("verify_output_tokens_per_second", {**h, "concurrency": level.get("concurrency")},
                  level.get("output_tok_s"))

    audit = reports["audit"]
    if audit:
        m.add("audit_ok", h, bool(audit.get("ok")))
        found = [f.get("status") for f in audit.get("findings") or []]
        for status in AUDIT_STATUSES + tuple(sorted({s for s in found if s not in AUDIT_STATUSES})):
            m.add("audit_findings", {**h, "status": status}, found.count(status))

    compat = reports["compat"]
    if compat:
        verdict = compat.get("status")
        for status in COMPAT_STATUSES:
            m.add("compat_status", {**h, "version": compat.get("version", ""), "status": status}, status == verdict)
        counted = [c.get("status") for c in compat.get("checks") or [] if not c.get("ignored")]
        for status in COMPAT_STATUSES:
            m.add("compat_checks", {**h, "status": status}, counted.count(status))

    release = reports["release"]
    if release:
        m.add("release_info", {**h, "release": release.get("id", ""), "version": release.get("version", ""),
                               "status": release.get("status", "")}, 1)
    good = fleet_reports.last_good_release(folder)
    if good:
        m.add("last_good_release_info", {**h, "release": good.get("id", ""), "version": good.get("version", "")}, 1)
    return True


def add_run(m: Metrics, playbook: str, hosts: dict[str, str], rc: int, ended: float, duration: float) -> None:
    """A scheduled run's outcome: `hosts` maps each host to ok, changed, failed or unreachable."""
    p = {"playbook": playbook}
    m.add("run_success", p, rc == 0)
    m.add("run_timestamp_seconds", p, round(ended, 3))
    m.add("run_duration_seconds", p, round(duration, 3))
    for status in HOST_STATUSES:
        m.add("run_hosts", {**p, "status": status}, sum(1 for s in hosts.values() if s == status))


def fleet_metrics(reports_dir, hosts=(), runs=()) -> tuple[str, int]:
    """(the metrics text, how many hosts had reports); runs: add_run's arguments, one tuple per run."""
    m = Metrics()
    count = sum(add_host(m, folder) for folder in fleet_reports.host_folders(str(reports_dir), hosts))
    for run in runs:
        add_run(m, *run)
    return m.text(), count


def write_textfile(text: str, directory, name: str = FILE_NAME) -> str:
    """Write `text` to directory/name (0644, for node_exporter) through a temporary file renamed into place."""
    if not name.endswith(".prom"):
        raise ValueError(f"{name!r}: node_exporter's textfile collector reads only *.prom files")
    path = os.path.join(directory, name)
    fleet_reports.write_atomic(path, text, mode=0o644, tmp_suffix=".tmp")  # not *.prom: never read half-written
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=pathlib.Path, default=REPO / "reports", help="reports folder (default: reports/)")
    parser.add_argument("--textfile-dir", type=pathlib.Path,
                        help=f"node_exporter's textfile folder: write {FILE_NAME} there (default: print the metrics)")
    parser.add_argument("hosts", nargs="*", help="only these hosts (default: every host with reports)")
    args = parser.parse_args(argv)
    text, count = fleet_metrics(args.reports, args.hosts)
    if not count:
        print(f"no reports under {args.reports}: run deploy.yml, audit.yml, verify.yml or drift.yml first", file=sys.stderr)
    if args.textfile_dir:
        print(f"{write_textfile(text, args.textfile_dir)}: {count} host(s)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
