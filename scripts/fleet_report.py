#!/usr/bin/env python3
"""Print the fleet's latest release, audit, verify and drift results as one table.

    scripts/fleet_report.py [--reports reports] [--html FILE] [host ...]

Reads `<reports>/<host>/audit-latest.json` (sglang_audit), `verify-latest.json` (sglang_verify),
`drift-latest.json` (sglang_drift), `release-latest.json` (sglang_release), `compat-latest.json`
(sglang_compat), `upgrade-latest.json` (upgrade-preview.yml: shown, never a failure) and `tune-latest.json`
(tune.yml: its measured gain, in "left on the table"), written on the controller by deploy.yml, audit.yml,
verify.yml, drift.yml, upgrade-preview.yml and tune.yml. Exit 1
when a host's latest audit or verification failed, it drifted from the inventory or its release is
blocked on it, 2 when there is nothing to report. --html also writes a static HTML page with the same
table and each host's throughput history as charts (scripts/fleet_report_html.py).
"""

import argparse
import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / ".collections")]  # the collection imports as Ansible imports it
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import is_cpu_host  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.model import spec as model_spec  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.report import fleet_reports  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.source.optimisations import AUTO_DISABLED, UNAVAILABLE  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import decode_noise_row  # noqa: E402

NOT_ON = (AUTO_DISABLED, UNAVAILABLE)   # statuses the "left on the table" column lists
# A CPU host's cells (`device: cpu`): its GPUs, and the GPU roofline, which is not applicable there.
CPU_HOST, CPU_NA = "none (CPU host)", "n/a (CPU host)"
COLUMNS = ["host", "sglang", "release", "model", "gpus", "compat", "audit", "verify", "drift", "decode tok/s", "vs history",
           "roofline tok/s", "of roofline", "left on the table", "upgrade preview"]


def host_row(folder):
    reports = fleet_reports.latest(folder)
    audit, verify, drift = reports["audit"], reports["verify"], reports["drift"]
    release, compat = reports["release"], reports["compat"]
    row = {"host": pathlib.Path(folder).name, "ok": True}
    upgrade = fleet_reports.load(os.path.join(folder, "upgrade-latest.json"))
    if upgrade:  # what the last preview said the target release changes on this host (its summary line)
        row["upgrade preview"] = upgrade.get("summary", "?").split(" ", 1)[-1]
    if compat:  # "ok", else the counts ("5 ok, 2 unknown"), for the release it checked
        status = compat.get("status", "?")
        row["compat"] = (status if status == "ok" else compat.get("summary", status)) + f" ({compat.get('version', '?')})"
        row["ok"] &= status != "blocked"
    if release:  # the release deploy last recorded (rolled-back failures are recorded too)
        row["release"] = f"{release.get('id', '?')} ({release.get('status', '?')})"
        # the revision it ran (sglang_model), else the folder the inventory gave
        row["model"] = model_spec.describe(release.get("model")) or release.get("model_path") or "-"
    if audit:
        sg, hw = audit.get("sglang", {}), audit.get("hardware", {})
        row["sglang"] = f"{sg.get('version', '?')} (era {sg.get('era', '?')})"
        shadowed = [e["package"] + (": lab stand-in" if e.get("lab_standin") else ": shadowed")
                    for e in audit.get("shadowed") or []]   # not the release's package (lab/real_sglang)
        if shadowed:
            row["sglang"] += f"; {', '.join(shadowed)}"
        row["gpus"] = (CPU_HOST if is_cpu_host(hw) else
                       f"{hw.get('gpu_count', '?')}x {hw.get('gpu_model', '?')} ({hw.get('source', '?')})")
        off = [f"{f['name']}: {f['status']}" for f in audit.get("findings", []) if f.get("status") in NOT_ON]
        row["left on the table"] = "; ".join(off) or "nothing"
        row["audit"] = "ok" if audit.get("ok") else f"FAILED ({len(audit.get('failures', []))})"
        row["ok"] &= bool(audit.get("ok"))
    tuned = tune_text(fleet_reports.load(os.path.join(folder, "tune-latest.json")))
    if tuned:   # what tune.yml measured on this host, before what the audit says is off
        row["left on the table"] = tuned + ("; " + row["left on the table"] if row.get("left on the table") else "")
    if verify:
        bound = (verify.get("roofline") or {}).get("upper_bound_tok_s")
        single = (verify.get("metrics") or {}).get("decode_tok_s@1")
        row["decode tok/s"] = f"{single:.1f}" if isinstance(single, (int, float)) else "?"
        row["roofline tok/s"] = f"{bound:.0f}" if isinstance(bound, (int, float)) else "?"
        eff = verify.get("efficiency_pct")
        row["of roofline"] = f"{eff:.0f} %" if isinstance(eff, (int, float)) else "?"
        if (verify.get("roofline") or {}).get("not_applicable"):  # a CPU host: no GPU bandwidth to bound it
            row["roofline tok/s"] = row["of roofline"] = CPU_NA
        row["verify"] = "PASS" if verify.get("passed") else "FAIL"
        row["ok"] &= bool(verify.get("passed"))
        against_history = vs_history(verify)
        if against_history:   # a router's verify has no history gate
            row["vs history"] = against_history
    if drift:
        n = drift.get("differences", 0)
        row["drift"] = "in sync" if drift.get("in_sync") else f"{n} difference{'s' if n != 1 else ''}"
        row["ok"] &= bool(drift.get("in_sync"))
    if "router" in ((verify or {}).get("role"), (drift or {}).get("role")):
        router_columns(row, verify, drift)
    return row if (audit or verify or drift or release or compat or upgrade) else None


def tune_text(tune):
    """The last tune.yml's answer (tune-latest.json): its confirmed gain with the interval and the changes,
    whether they were written into the inventory; or that nothing beat what runs. None without one."""
    result = (tune or {}).get("result")
    if not result:
        return None
    when = str(tune.get("generated_at") or "")[:8]
    if result.get("won") and result.get("left_on_table"):
        return (f"tuned {when}: {result['left_on_table']}"
                + (" (written into the inventory)" if tune.get("written") else " (not written: -e sglang_tune_write=true)"))
    return f"tuned {when}: nothing beats what runs ({len(result.get('rows') or []) - 1} candidates)"


def vs_history(verify):
    """Single-stream decode against the host's history, as the noise-aware verdict puts it: the change, its
    interval, the smallest loss this host can detect and the verdict (sglang_verify's noise_verdict row);
    without a run-to-run noise (noise_basis none) the change and "no noise known: inconclusive"; a report
    written before the noise-aware gates: the change and the tolerance's verdict."""
    gate = next((g for g in verify.get("gates") or [] if g.get("gate") == "history"), None)
    if gate is None:
        return None
    row = decode_noise_row(gate)
    if not row:
        decode = next((r for r in gate.get("metrics") or [] if r.get("metric") == "decode_tok_s@1"), None)
        if decode and decode.get("noise_basis") == "none":   # no run-to-run noise known: nothing to judge by
            return f"{decode['change_pct']:+.1f} % (no noise known: inconclusive)"
        if decode:   # a report from before the noise-aware gates: the tolerance decided
            tol = gate.get("tolerance_pct")
            return (f"{decode['change_pct']:+.1f} % ({decode.get('status', '?')} by the "
                    + (f"{tol:g} % " if isinstance(tol, (int, float)) else "") + "tolerance)")
        return "no history yet" if gate.get("status") == "skip" else "?"
    lo, hi = row["interval_pct"]
    return (f"{row['effect_pct']:+.1f} % [{lo:+.1f}, {hi:+.1f}], detects {row['detectable_pct']:.1f} %: "
            f"{row['noise_verdict']}")


def router_columns(row, verify, drift):
    """A router's row: its release and workers (drift), and its throughput next to the sum of its
    replicas' own (verify through the router); a router has no GPU, audit or roofline."""
    desired, workers = (drift or {}).get("desired") or {}, (drift or {}).get("workers") or []
    row["sglang"] = f"router {desired.get('version', '?')}"
    row["gpus"] = f"{sum(1 for w in workers if w.get('is_healthy'))}/{len(workers)} workers healthy"
    for column in ("release", "compat", "audit", "decode tok/s", "roofline tok/s", "of roofline"):
        row[column] = "-"
    levels = (verify or {}).get("levels") or []
    row["left on the table"] = "; ".join(
        f"c={lv['concurrency']}: {lv['output_tok_s']:.0f} tok/s out, "
        + (f"{lv['ratio']:.2f} x the sum of {lv['replicas']} replicas" if lv.get("ratio") is not None
           else "the PD pair end to end")
        for lv in levels) or "not verified through the router"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=pathlib.Path, default=REPO / "reports")
    parser.add_argument("--html", type=pathlib.Path, metavar="FILE",
                        help="also write the report as one self-contained HTML page with charts")
    parser.add_argument("hosts", nargs="*")
    args = parser.parse_args()
    if args.html and args.html.is_dir():
        parser.error(f"--html {args.html} is a folder: give the page's file name, e.g. {args.html / 'fleet-report.html'}")
    folders = fleet_reports.host_folders(args.reports, args.hosts)
    hosts = [(f, r) for f, r in ((f, host_row(f)) for f in folders) if r]
    rows = [r for _, r in hosts]
    if not rows:
        print(f"no reports under {args.reports}: run deploy.yml, audit.yml, verify.yml or drift.yml first", file=sys.stderr)
        return 2
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "-")) for c in COLUMNS) + " |")
    if args.html:
        try:  # matplotlib only when asked: the table needs nothing but the stdlib
            from scripts import fleet_report_html
        except ImportError as exc:
            print(f"--html needs {exc.name}: install the pinned toolchain (make venv)", file=sys.stderr)
            return 2
        fleet_report_html.write(args.html, hosts, COLUMNS, args.reports)
        print(f"HTML report: {args.html}", file=sys.stderr)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
