"""What a host's last complete deploy left, and whether the host is still exactly that.

Runs on the host (stdlib only, Python 3.8+). deploy.yml saves, as the last step of a host's
complete deploy, `<state_dir>/deployed.json` (root, 0600): the fingerprint of the inputs it
deployed (the inventory's variables and the project's code, computed on the controller) and a
snapshot of what it left (the unit, the EnvironmentFile, the launcher, the venv's lock marker, the
ml-env link, folders, the service account). The next deploy compares first: same fingerprint,
the same files, the service enabled, running since its files changed and answering
/health_generate, and drift.yml finding nothing (the staged model's files included), and the host
is in sync: deploy.yml skips its checks, install and restart, and verifies it only where its
release is not proven yet (`verify_reason`). Anything else (a file edited by hand, a stopped
service, a changed variable) and the host gets the whole deploy.
"""

import grp
import hashlib
import json
import os
import pwd
import stat

from ansible_collections.sglang.fleet.plugins.module_utils.drift.host_drift import (
    DriftError,
    compare,
    desired_state,
    item_line,
    observe,
)
from ansible_collections.sglang.fleet.plugins.module_utils.files import write_atomic
from ansible_collections.sglang.fleet.plugins.module_utils.release.records import (
    read_state,
    restart_pending,
)
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import (
    http_status,
    run_command,
    systemd_show,
)

RECORD = "deployed.json"


def _entry(path):
    """What is at `path`: a file's sha256, a link's target or a folder, with mode and owners."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    entry = {"mode": oct(stat.S_IMODE(st.st_mode)), "uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISLNK(st.st_mode):
        return {"link": os.readlink(path)}
    if stat.S_ISDIR(st.st_mode):
        entry["type"] = "folder"
        return entry
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    entry.update(type="file", sha256=digest.hexdigest())
    return entry


def _ids(user, group):
    found = {}
    try:
        found["user"] = [user, pwd.getpwnam(user).pw_uid] if user else None
    except KeyError:
        found["user"] = [user, None]
    try:
        found["group"] = [group, grp.getgrnam(group).gr_gid] if group else None
    except KeyError:
        found["group"] = [group, None]
    return found


def snapshot(fingerprint, paths, user="", group=""):
    """The record of a complete deploy: its fingerprint, the paths it manages and the account."""
    return {"fingerprint": fingerprint, "paths": {p: _entry(p) for p in sorted(set(paths))},
            "accounts": _ids(user, group)}


def load(state_dir):
    """The saved record, or None when there is none (or it cannot be read)."""
    try:
        with open(os.path.join(state_dir, RECORD), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def save(state_dir, record):
    """Write the record (root only); True when it changed."""
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    path = os.path.join(state_dir, RECORD)
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return False
    except OSError:
        pass
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    write_atomic(path, text.encode(), 0o600)
    return True


def _describe(entry):
    if not entry.get("exists", True):
        return "missing"
    if "link" in entry:
        return f"a link to {entry['link']}"
    return f"a {entry.get('type')} {entry.get('mode')} uid {entry.get('uid')} gid {entry.get('gid')}"


def file_differences(saved):
    """What differs between the saved record's paths and accounts and the host now."""
    found = []
    for path, was in sorted((saved.get("paths") or {}).items()):
        now = _entry(path)
        if now == was:
            continue
        if was.get("sha256") and now.get("sha256") and was.get("sha256") != now.get("sha256") \
                and {k: v for k, v in was.items() if k != "sha256"} == {k: v for k, v in now.items() if k != "sha256"}:
            found.append(f"{path} changed since the last deploy (content)")
        else:
            found.append(f"{path} changed since the last deploy: {_describe(was)}, now {_describe(now)}")
    accounts = saved.get("accounts") or {}
    user, group = (accounts.get("user") or [""])[0], (accounts.get("group") or [""])[0]
    if _ids(user, group) != accounts:
        found.append(f"the service account {user}:{group} changed since the last deploy")
    return found


def service_problems(service, files, run=None):
    """Why the service is not as a complete deploy leaves it: enabled, active, nothing pending."""
    shown, _error = systemd_show(service, ("ActiveState", "UnitFileState", "NeedDaemonReload", "MainPID"), run)
    found = []
    if shown.get("ActiveState") != "active":
        found.append(f"{service} is {shown.get('ActiveState') or 'unknown'}, not active")
    if shown.get("UnitFileState") != "enabled":
        found.append(f"{service} is {shown.get('UnitFileState') or 'unknown'}, not enabled")
    if shown.get("NeedDaemonReload") == "yes":
        found.append(f"systemd has not loaded {service}'s unit file as it is on disk")
    pending = restart_pending(service, files, shown.get("MainPID", "0")) if not found else ""
    if pending:
        found.append(pending)
    return found


def health_problem(url, api_key="", timeout=30):
    """"" when GET `url` (/health_generate: the server generates one token) answers 200."""
    code, why = http_status(url, api_key, timeout)
    if code is None:
        return f"{url} did not answer ({why})"
    return "" if code == 200 else f"{url} answered {code}, not 200"


def drift_problems(desired, server_url="", api_key="", timeout=30, run=None, proc="/proc"):
    """drift.yml's verdict on the host, as its lines ([] when in sync): the same desired state,
    the same reading (plugins/module_utils/drift/host_drift.py observe) and the same comparison."""
    try:
        want = desired_state(**desired)
    except DriftError as exc:
        return [f"drift cannot compare the host: {exc}"]
    src, observed = observe(want, run or run_command, server_url=server_url, api_key=api_key, timeout=timeout, proc=proc)
    return [f"drift: {item_line(want['host'], item).split(': ', 1)[-1]}" for item in compare(src, want, observed)]


def check(state_dir, fingerprint, service, files, health_url, api_key="", timeout=30, desired=None, server_url="",
          run=None, proc="/proc"):
    """Why the host is not in sync with its last complete deploy ([] when it is): a deploy is in
    sync when drift.yml would say so (`desired`: its desired state) and, beyond drift, nothing of
    what the deploy left changed (the fingerprint of its inputs, the files, the service account),
    no restart or unit reload is pending and the server generates."""
    saved = load(state_dir)
    if saved is None:
        return [f"no complete deploy is recorded in {os.path.join(state_dir, RECORD)}"]
    if saved.get("fingerprint") != fingerprint:
        return ["the inventory's variables or the project's code changed since the last complete deploy"]
    found = file_differences(saved)
    found += service_problems(service, files, run)
    if not found and health_url:
        problem = health_problem(health_url, api_key, timeout)
        if problem:
            found.append(problem)
    if not found and desired:
        found += drift_problems(desired, server_url, api_key, timeout, run, proc)
    return found


def verify_reason(state_dir, always=False):
    """Why deploy.yml verifies a host in sync ("" when it leaves it alone): asked to, or its release is
    not proven yet. Verify is the only path that promotes an unverified release to the last known good
    (records.record), so a host whose current release is not good, or that has none good, is verified."""
    if always:
        return "sglang_release_verify_in_sync is true"
    state = read_state(state_dir)
    last_good = (state["last_good"] or {}).get("id")
    if not last_good:
        return "it has no last known good release yet"
    current = next((r for r in state["releases"] if r.get("id") == state["current"]), None)
    if current is None:
        return "its current release has no record"
    if current.get("status") != "good":
        return f"its release {current.get('id')} is {current.get('status') or 'unverified'}"
    return ""
