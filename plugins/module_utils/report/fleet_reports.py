"""Read the fleet's per-host reports on the controller: `<reports>/<host>/<kind>-latest.json`.

`host_path` is the one formula of a host's folder under a reports folder: the roles name it through
the filter sglang.fleet.sglang_report_path (plugins/filter/fleet_reports.py), the scripts through
host_folders, the router's verify through load_reports (module_utils/router/verify.py).

The roles write them through roles/sglang_common/tasks/report.yml (plugins/action/sglang_report.py):
audit, verify, drift, release and compat, each also kept as `<kind>-<UTC stamp>.json`, plus
verify's `verify-history.jsonl` (one line per verify run). Read by scripts/fleet_report.py (the
Markdown table) and scripts/fleet_metrics.py (Prometheus). Runs on the controller; stdlib only.
A missing or unreadable report reads as None (a host that never ran that playbook).
"""

import datetime
import json
import os

from ansible_collections.sglang.fleet.plugins.module_utils.files import atomic_file

KINDS = ("audit", "verify", "drift", "release", "compat")
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"  # generated_at, recorded_at, promoted_at: 20261201T081104Z


def write_atomic(path, text, mode=0o600, tmp_suffix=""):
    """Write `text` to `path` through a temporary file in the same folder renamed into place, so a
    reader never sees half of it (UTF-8, not synced); `mode` is the file's. `tmp_suffix` keeps
    the temporary file out of a reader's glob (node_exporter reads only *.prom)."""
    name = os.path.basename(os.fspath(path))
    with atomic_file(path, mode, encoding="utf-8", fsync=False, prefix=f".{name}.", suffix=tmp_suffix) as f:
        f.write(text)
    return path


def load(path):
    """The JSON object in `path`, or None when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def host_path(reports_dir, host, *names):
    """`<reports_dir>/<host>`, the host's folder of reports, or `<reports_dir>/<host>/<name>/...`, a file
    or folder in it (verify-history.jsonl, verify-latest.json, tune-<stamp>/...)."""
    return os.path.join(str(reports_dir), str(host), *(str(n) for n in names))


def host_folders(reports_dir, hosts=()):
    """The folders of `hosts`, or of every host under `reports_dir` (sorted by name)."""
    if not hosts:
        try:
            hosts = [n for n in sorted(os.listdir(reports_dir)) if os.path.isdir(host_path(reports_dir, n))]
        except OSError:
            return []
    return [host_path(reports_dir, h) for h in hosts]


def latest(folder):
    """{kind: the host's latest report of that kind, or None} for every kind of KINDS."""
    return {kind: load(os.path.join(folder, kind + "-latest.json")) for kind in KINDS}


def stamp_seconds(stamp):
    """Unix time of a report stamp (20261201T081104Z), or None when it is not one."""
    try:
        when = datetime.datetime.strptime(str(stamp), STAMP_FORMAT)
    except ValueError:
        return None
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def report_time(folder, kind):
    """Unix time of the host's latest `kind` report: its generated_at, else the file's mtime
    (release and compat reports carry no run time of their own); None when there is none."""
    path = os.path.join(folder, kind + "-latest.json")
    report = load(path)
    if report is None:
        return None
    when = stamp_seconds(report.get("generated_at"))
    return when if when is not None else os.path.getmtime(path)


def verify_history(folder):
    """The host's verify runs, oldest first (verify-history.jsonl); unreadable lines are skipped."""
    runs = []
    try:
        with open(os.path.join(folder, "verify-history.jsonl"), encoding="utf-8") as f:
            for line in f:
                try:
                    run = json.loads(line)
                except ValueError:
                    continue
                if isinstance(run, dict):
                    runs.append(run)
    except OSError:
        pass
    return runs


def last_good_release(folder):
    """The host's last known good release as the controller saw it: of its release reports with
    status good, the one promoted last (promoted_at, else recorded_at); None if there is none."""
    good = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.startswith("release-") and name.endswith(".json"):
            record = load(os.path.join(folder, name))
            if record and record.get("status") == "good":
                good.append(record)
    return max(good, key=lambda r: str(r.get("promoted_at") or r.get("recorded_at") or ""), default=None)
