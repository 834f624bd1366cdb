"""A host's SGLang releases: what it runs, what it ran, and the last one that passed every gate.

Runs on the host (stdlib only, Python 3.8+). State lives under one folder (default
/var/lib/sglang-fleet, written by root, readable by the read-only plays' unprivileged user
except the environment copies):

    releases/<id>/release.json   the record: version, venv, checksums, flags fingerprint, args,
                                 model, who deployed it from which project commit, when, and
                                 the verify result
    releases/<id>/unit           a copy of the systemd unit that release ran with
    releases/<id>/env            a copy of its EnvironmentFile (secrets: root only, 0600)
    current                      the id of the release the service runs now
    last-good                    the id of the last release that passed every gate

A release id is `<sglang version>-<12 hex>`, the hex from the unit's and the environment's
bytes: deploying the same inventory again finds the same release (nothing is written), and
switching back to an earlier inventory finds the earlier record.
"""

import hashlib
import json
import os
import re
import shutil

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.files import read_bytes, replace_symlink, write_atomic
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import fingerprint
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import process_start, systemd_show

RELEASES = "releases"
CURRENT = "current"
LAST_GOOD = "last-good"
STATUSES = ("good", "failed", "unverified")
_ID_RE = re.compile(r"^[0-9A-Za-z.+_-]+-[0-9a-f]{12}$")
_VENV_RE = re.compile(r"^sglang-[0-9A-Za-z.+_-]+$")


class ReleaseError(SglangFleetError, ValueError):
    """A release that cannot be read, recorded or restored."""


def sha256_of(path):
    """sha256 hex of a file's bytes ("" when it does not exist)."""
    data = read_bytes(path, b"")
    return hashlib.sha256(data).hexdigest() if data else ""


def release_id(version, unit_file, env_file):
    """`<version>-<12 hex>` from the version and the unit's and environment's bytes."""
    digest = hashlib.sha256()
    for part in (str(version).encode(), read_bytes(unit_file, b""), read_bytes(env_file, b"")):
        digest.update(hashlib.sha256(part).digest())
    return f"{version}-{digest.hexdigest()[:12]}"


def _pointer(state_dir, name):
    text = read_bytes(os.path.join(state_dir, name), b"").decode("utf-8", "replace").strip()
    return text or None


def _set_pointer(state_dir, name, rid):
    if _pointer(state_dir, name) == rid:
        return False
    write_atomic(os.path.join(state_dir, name), (rid + "\n").encode(), 0o644)
    return True


def _folder(state_dir, rid):
    if not _ID_RE.match(str(rid)):
        raise ReleaseError(f"{rid!r} is not a release id (e.g. 0.5.11-0123456789ab; releases.yml lists them)")
    return os.path.join(state_dir, RELEASES, rid)


def load(state_dir, rid):
    """The record of release `rid` (ReleaseError when there is none)."""
    path = os.path.join(_folder(state_dir, rid), "release.json")
    try:
        with open(path, encoding="utf-8") as fh:
            rec = json.load(fh)
    except FileNotFoundError:
        raise ReleaseError(f"no release {rid} on this host (releases.yml lists them)") from None
    except ValueError as exc:
        raise ReleaseError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(rec, dict):
        raise ReleaseError(f"{path} does not hold a release record")
    return rec


def _order(rec):
    return (str(rec.get("promoted_at") or rec.get("recorded_at") or ""), str(rec.get("id")))


def read_state(state_dir):
    """{releases (oldest first), current, last_good, previous_good}: ids, and records for the last two.

    `previous_good` is the newest good release other than the current one: where a manual
    rollback goes by default.
    """
    folder = os.path.join(state_dir, RELEASES)
    records = []
    if os.path.isdir(folder):
        for rid in sorted(os.listdir(folder)):
            if not _ID_RE.match(rid):
                continue
            try:
                records.append(load(state_dir, rid))
            except ReleaseError:
                continue
    records.sort(key=_order)
    current, last_good = _pointer(state_dir, CURRENT), _pointer(state_dir, LAST_GOOD)
    by_id = {r.get("id"): r for r in records}
    good = [r for r in records if r.get("status") == "good" and r.get("id") != current]
    return {
        "releases": records,
        "current": current,
        "last_good": by_id.get(last_good),
        "previous_good": good[-1] if good else None,
    }


def record(state_dir, unit_file, env_file, meta, status, now):
    """Record the release the unit and environment on disk describe; (changed, record).

    `meta`: version, venv, args, fingerprint, model_path, controller, verify, failure.
    It becomes the current release; status `good` also makes it the last known good, while
    `unverified` (verify skipped) and `failed` (a gate failed; rolled back unless opted out)
    never do. Nothing is
    written when the record, its status and the pointers are already as asked.
    """
    if status not in STATUSES:
        raise ReleaseError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    if not os.path.isfile(unit_file):
        raise ReleaseError(f"{unit_file} does not exist: nothing was deployed to record")
    version = str(meta.get("version") or "")
    if not version:
        raise ReleaseError("the release's SGLang version is missing")
    rid = release_id(version, unit_file, env_file)
    folder = _folder(state_dir, rid)
    changed = False
    for path in (state_dir, os.path.join(state_dir, RELEASES)):
        if not os.path.isdir(path):
            os.makedirs(path, mode=0o755)
            changed = True
    try:
        old = load(state_dir, rid)
    except ReleaseError:
        old = None
    if status == "unverified" and old is not None:  # a deploy that skipped verify proves nothing new
        status = old.get("status") or status
    promote = status == "good" and (_pointer(state_dir, LAST_GOOD) != rid or (old or {}).get("status") != "good")
    if old is None or old.get("status") != status or promote:
        rec = dict(old or {})
        rec.update({k: v for k, v in meta.items() if v is not None})
        rec.update({
            "id": rid, "status": status, "version": version,
            "fingerprint": fingerprint(version, meta.get("args") or {})["id"],
            "unit_sha256": sha256_of(unit_file), "env_sha256": sha256_of(env_file),
            "unit_file": unit_file, "env_file": env_file,
        })
        rec.setdefault("recorded_at", now)
        if promote:
            rec["promoted_at"] = now
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o755)
        write_atomic(os.path.join(folder, "unit"), read_bytes(unit_file, b""), 0o644)
        write_atomic(os.path.join(folder, "env"), read_bytes(env_file, b""), 0o600)
        write_atomic(os.path.join(folder, "release.json"),
                     (json.dumps(rec, indent=1, sort_keys=True) + "\n").encode(), 0o644)
        changed = True
    else:
        rec = old
    if status == "good":
        changed |= _set_pointer(state_dir, LAST_GOOD, rid)
    changed |= _set_pointer(state_dir, CURRENT, rid)
    return changed, rec


def restore(state_dir, rid, unit_file, env_file, venv_link=""):
    """Put release `rid`'s unit and environment back (atomically) and point `venv_link` at its venv.

    Returns (changed, record). The caller reloads systemd and restarts the service.
    """
    rec = load(state_dir, rid)
    folder = _folder(state_dir, rid)
    changed = False
    for name, dest, mode in (("unit", unit_file, 0o644), ("env", env_file, 0o600)):
        data = read_bytes(os.path.join(folder, name), b"")
        if name == "unit" and not data:
            raise ReleaseError(f"release {rid} has no copy of its unit in {folder}")
        if read_bytes(dest, b"") != data or not os.path.exists(dest):
            write_atomic(dest, data, mode)
            changed = True
    venv = rec.get("venv") or ""
    if venv_link and venv:
        if not os.path.isdir(venv):
            raise ReleaseError(f"release {rid} runs from {venv}, which is gone (pruned or removed): "
                               f"deploy sglang_version {rec.get('version')} again instead")
        if os.path.realpath(venv_link) != os.path.realpath(venv):
            replace_symlink(venv_link, venv)
            changed = True
    changed |= _set_pointer(state_dir, CURRENT, rid)
    if rec.get("status") == "good":  # a good release put back by hand is the last known good again
        changed |= _set_pointer(state_dir, LAST_GOOD, rid)
    return changed, rec


def prune(state_dir, keep, env_root="", protect=()):
    """Keep the newest `keep` records and the newest `keep` good ones (failed deploys never push a
    good release out: rollback.yml needs them), and always current and last-good; remove the
    rest, then every `<env_root>/sglang-*` venv no kept record (or `protect`) uses.

    Returns the removed release ids and venv paths.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ReleaseError(f"keep must be a whole number >= 1, got {keep!r}")
    state = read_state(state_dir)
    pinned = {state["current"], (state["last_good"] or {}).get("id")}
    records = state["releases"]
    good = [r for r in records if r.get("status") == "good"]
    keep_ids = {r.get("id") for r in records[-keep:] + good[-keep:]} | pinned
    kept = [r for r in records if r.get("id") in keep_ids]
    removed = []
    for rec in records:
        if rec not in kept:
            shutil.rmtree(_folder(state_dir, rec["id"]), ignore_errors=True)
            removed.append(rec["id"])
    used = {os.path.realpath(p) for p in [r.get("venv") for r in kept] + list(protect) if p}
    if env_root and os.path.isdir(env_root):
        for name in sorted(os.listdir(env_root)):
            path = os.path.join(env_root, name)
            if _VENV_RE.match(name) and os.path.isdir(path) and not os.path.islink(path) \
                    and os.path.realpath(path) not in used:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def running_since(service, main_pid=None):
    """(main pid, start time in seconds since the epoch) of a systemd service, (0, None) when down.
    `main_pid`: its MainPID as the caller already read it (systemctl show), else read here."""
    if main_pid is None:
        main_pid = systemd_show(service, ("MainPID",))[0].get("MainPID", "0")
    pid = int(main_pid) if str(main_pid).isdigit() else 0
    if pid <= 0:
        return 0, None
    return pid, process_start(pid)


def restart_pending(service, files, main_pid=None):
    """Why the running service must restart although nothing changes now, or "": one of `files`
    (unit, environment, launcher) is newer than its process (an interrupted run rendered them
    and never restarted it). `main_pid` as running_since."""
    pid, started = running_since(service, main_pid)
    if not pid or started is None:  # not running: starting it is not a restart
        return ""
    for path in files:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        # /proc start times have clock-tick (10 ms) resolution; a render follows a restart by more
        if mtime > started + 0.05:
            return f"{path} changed after the running process started (pid {pid}): a restart is pending"
    return ""
