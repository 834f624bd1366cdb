"""Drift of one host: the inventory's desired state against what the host really runs.

Four views of reality, each compared with the desired state (version, venv, entrypoint, args):

- the service: unit installed, enabled, active (``systemctl show``);
- the running main process: its argv (``/proc/<MainPID>/cmdline``) split into python (-> venv),
  launcher, entrypoint and SGLang argv; the SGLang argv normalised through the installed
  release's flag table (``--tp 2`` == ``--tp-size 2``, order and ``--x=v`` forms do not matter)
  and compared setting by setting with the desired one, normalised the same way;
- the unit file on disk against the running process (edited but not restarted: pending restart);
- the installed release in the desired venv, its ml_env marker against the lock, ``current``;
- optionally the running server's resolved settings (``/server_info``) for the keys the host sets;
- the staged model revision (sglang_model) against its marker: sizes and mtimes, or every sha256.

    observed = observe(desired, run=..., ...)     # on the host: systemctl, /proc, files, HTTP
    items = compare(src, desired, observed)       # pure: [{what, desired, actual, fix}]
    report = drift_report(...)                    # both, plus readable lines

Secrets never leave: argv values of secret flags and secret server settings are ``<redacted>``
(``sglang_args.redact_argv``, ``read_server``), and secrets are never compared.
Stdlib only; used by plugins/modules/sglang_drift.py on the host and by the unit tests.
"""
from __future__ import annotations

import os

from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import (
    AuditError,
    display_value,
    find_installed,
    read_server,
    same_value,
)
from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import (
    REDACTED,
    SECRET_FIELDS,
    ArgsError,
    redact_argv,
    to_argv,
)
from ansible_collections.sglang.fleet.plugins.module_utils.model import files as model_files
from ansible_collections.sglang.fleet.plugins.module_utils.source import UnknownLayout, normalise_argv
from ansible_collections.sglang.fleet.plugins.module_utils.source.cache import cached_source
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import (
    read_cmdline,
    read_service,
    read_unit_argv,
    read_venv_marker,
)


class DriftError(SglangFleetError):
    """Something drift cannot work with; the message says what to do."""


# --------------------------------------------------------------------------------------
# Parsing what the host shows
# --------------------------------------------------------------------------------------

def redact_settings(settings: dict) -> dict:
    return {k: (REDACTED if k in SECRET_FIELDS and v is not None else v) for k, v in settings.items()}


def split_launch(argv: list[str], launcher: str) -> dict:
    """The service's argv -> {python, venv, launcher, entrypoint, sglang_argv}.

    ``<venv>/bin/python <launcher> <entrypoint> <sglang argv>`` (what sglang_service runs),
    ``<python> -m <module> <argv>`` or ``<python> <file.py> <argv>`` (started another way).
    """
    if not argv:
        return {"python": None, "venv": None, "launcher": None, "entrypoint": None, "sglang_argv": []}
    python, rest = argv[0], argv[1:]
    used_launcher = None
    if rest and (rest[0] == launcher or os.path.basename(rest[0]) == os.path.basename(launcher or "-")):
        used_launcher, rest = rest[0], rest[1:]
    if rest[:1] == ["-m"]:
        rest = rest[1:]
    entrypoint = rest[0] if rest and not rest[0].startswith("-") else None
    sglang_argv = rest[1:] if entrypoint else rest
    venv = None
    if os.path.basename(os.path.dirname(python)) == "bin":
        venv = os.path.dirname(os.path.dirname(python))
    return {"python": python, "venv": venv, "launcher": used_launcher, "entrypoint": entrypoint,
            "sglang_argv": sglang_argv}


# --------------------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------------------

def _item(what, desired, actual, fix):
    return {"what": what, "desired": desired, "actual": actual, "fix": fix}


def _normalise(src, argv, whose):
    """(settings, error): argv normalised with the release's parser, secret values redacted."""
    try:
        return redact_settings(normalise_argv(src, argv)), None
    except ValueError as exc:
        return None, f"{whose} argv does not parse with sglang {src.version}: {exc}"


def diff_settings(desired: dict, actual: dict) -> list[tuple[str, object, object]]:
    """[(field, desired, actual)] for each setting that differs, is missing or is extra (sorted)."""
    out = []
    for key in sorted(set(desired) | set(actual)):
        if key in desired and key in actual and same_value(desired[key], actual[key]):
            continue
        out.append((key, desired.get(key), actual.get(key)))
    return out


def compare(src, desired: dict, observed: dict) -> list[dict]:
    """Drift items ``{what, desired, actual, fix}`` of one host, in a fixed order.

    ``src``: the release installed in the desired venv (None when it is not installed: the
    argv is then compared as typed). ``desired``: {host, version, venv, entrypoint, args,
    service}. ``observed``: what ``observe`` read (see there).
    """
    host = _Host(src, desired)
    items = _installed_items(host, observed.get("installed") or {})
    items += _model_items(host, observed.get("model") or [])
    svc = observed.get("service") or {}
    if not svc.get("installed"):
        items.append(_item("service installed", True, False, f"{host.deploy} (installs and starts {host.service})"))
        return items
    items += _service_items(host, svc)
    want_argv = desired["argv"]
    if src is not None:
        host.want, err = _normalise(src, want_argv, "the inventory's")
        if err:
            items.append(_item("desired argv", "valid", err, "fix sglang_args in the inventory"))
    items += _launch_items(host, observed.get("running"), observed.get("unit") or {})
    items += _resolved_items(host, observed.get("server"), svc, {i["what"] for i in items})
    return items


class _Host:
    """What each comparison of one host needs: the release, the desired state, the fix's command."""

    def __init__(self, src, desired: dict):
        self.src = src
        self.desired = desired
        self.deploy = f"run deploy.yml -l {desired.get('host') or 'HOST'}"
        self.service = desired.get("service", "sglang")
        self.want = None   # the inventory's settings, normalised (None: no release to read them with)

    def settings(self, launch: dict, whose: str):
        """(settings, error) of a launch's SGLang argv, normalised with the installed release;
        (None, None) without one."""
        if self.src is None:
            return None, None
        return _normalise(self.src, launch["sglang_argv"], whose)


def _installed_items(host: _Host, inst: dict) -> list[dict]:
    """The installed release, the ml_env marker, ``current``."""
    desired, deploy = host.desired, host.deploy
    items = []
    if inst.get("error"):
        items.append(_item("sglang installed", desired["version"], None, f"{deploy} (builds {desired['venv']})"))
    elif inst.get("version") != desired["version"]:
        items.append(_item("sglang installed", desired["version"], inst.get("version"),
                           f"{deploy} (rebuilds {desired['venv']})"))
    if not inst.get("error"):
        marker = inst.get("marker")
        if marker == "missing":
            items.append(_item("ml_env marker", "present", "missing (the venv was never finished)",
                               f"{deploy} (rebuilds the venv)"))
        elif marker == "differs":
            items.append(_item("ml_env marker", "matches the lock", "differs from the lock (built from another lock)",
                               f"{deploy} (rebuilds the venv)"))
    current = inst.get("current")
    if current is not None and current != desired["venv"]:
        items.append(_item("ml_env current", desired["venv"], current, deploy))
    return items


def _model_items(host: _Host, problems: list) -> list[dict]:
    """The staged model revision: its files against the marker written when they were checked."""
    model = host.desired.get("model") or {}
    items = []
    for problem in problems:
        desired_, actual = problem.get("expected"), problem.get("actual")
        if problem.get("problem") == "modified":
            desired_, actual = "as checked when staged", "modified since (same size, another mtime)"
        elif problem.get("problem") == "size":
            desired_, actual = f"{desired_} bytes", f"{actual} bytes"
        items.append(_item(f"model file {problem['path'] or model.get('path')}", desired_, actual,
                           f"{host.deploy} (its staging sends the file again; -e sglang_model_verify=deep checks "
                           "every file by sha256)"))
    return items


def _service_items(host: _Host, svc: dict) -> list[dict]:
    """The installed service: enabled, active."""
    items = []
    if svc.get("unit_file_state") != "enabled":
        items.append(_item("service enabled", "enabled", svc.get("unit_file_state") or "unknown", host.deploy))
    if svc.get("active_state") != "active":
        items.append(_item("service active", "active", svc.get("active_state") or "unknown",
                           f"{host.deploy} (starts it); if it keeps stopping: journalctl -u {host.service}"))
    return items


def _launch_items(host: _Host, running, unit: dict) -> list[dict]:
    """The running process against the inventory, and the unit on disk against the running process
    (or, when nothing runs, what the unit would start against the inventory)."""
    if running:
        items, have = _against_inventory(host, "running", running, "the running", "")
        if unit.get("argv") is not None:
            items += _pending_restart(host, unit["argv"], running, have)
        return items
    if unit.get("argv") is not None:
        ulaunch = split_launch(unit["argv"], host.desired.get("launcher", ""))
        return _against_inventory(host, "unit", ulaunch, "the unit's", "unit ")[0]
    return []


def _against_inventory(host: _Host, label, got, whose, key_prefix):
    """Drift items of one launch (running process or unit) against the inventory, and its settings."""
    desired = host.desired
    found = []
    if got.get("venv") != desired["venv"]:
        found.append(_item(f"{label} venv", desired["venv"], got.get("venv") or got.get("python"),
                           f"{host.deploy} (restarts it on sglang {desired['version']})"))
    if got.get("entrypoint") != desired["entrypoint"]:
        found.append(_item(f"{label} entrypoint", desired["entrypoint"], got.get("entrypoint"), host.deploy))
    settings, err = host.settings(got, whose)
    if err:
        found.append(_item(f"{label} argv", "parses", err, host.deploy))
    elif host.want is not None:
        found += [_item(key_prefix + key, d, a, host.deploy) for key, d, a in diff_settings(host.want, settings)]
    return found, settings


def _pending_restart(host: _Host, unit_argv, running: dict, have) -> list[dict]:
    """The unit on disk against the running process: edited but not restarted."""
    ulaunch = split_launch(unit_argv, host.desired.get("launcher", ""))
    pending = [(k, ulaunch[k], running[k]) for k in ("python", "launcher", "entrypoint")
               if ulaunch[k] != running[k]]
    uset, uerr = host.settings(ulaunch, "the unit's")
    if uerr:
        pending.append(("argv", uerr, "parses"))
    elif have is not None and uset is not None:
        pending += diff_settings(uset, have)
    elif ulaunch["sglang_argv"] != running["sglang_argv"]:
        pending.append(("argv", " ".join(redact_argv(ulaunch["sglang_argv"])),
                        " ".join(redact_argv(running["sglang_argv"]))))
    if not pending:
        return []
    return [_item("pending restart (the unit on disk differs from the running process)",
                  "; ".join(f"{k} {display_value(u)} (unit)" for k, u, _ in pending),
                  "; ".join(f"{k} {display_value(r)} (running)" for k, _, r in pending),
                  f"{host.deploy} (renders the inventory's unit and restarts {host.service})")]


def _resolved_items(host: _Host, server, svc: dict, differs: set) -> list[dict]:
    """What the server resolved, for the keys the host sets and the running argv agrees on."""
    if not server or host.want is None:
        return []
    if server.get("error"):
        if svc.get("active_state") == "active":
            return [_item("server", "answers /server_info", server["error"],
                          f"journalctl -u {host.service}; then {host.deploy}")]
        return []
    resolved = server.get("resolved") or {}
    items = []
    for key in sorted(host.want):
        if key in SECRET_FIELDS or key in differs or key not in resolved:
            continue
        if not same_value(host.want[key], resolved[key]):
            items.append(_item(f"resolved {key}", host.want[key], resolved[key],
                               f"SGLang changed it at start-up: read journalctl -u {host.service}; "
                               "audit.yml says why"))
    return items


def item_line(host: str, item: dict) -> str:
    return (f"{host}: {item['what']}: desired {display_value(item['desired'])}, actual {display_value(item['actual'])}"
            f" -> fix: {item['fix']}")


def summary_line(host: str, items: list[dict]) -> str:
    if not items:
        return f"{host}: in sync"
    n = len(items)
    return f"{host}: DRIFTED, {n} difference{'s' if n != 1 else ''}: " + ", ".join(i["what"] for i in items)


# --------------------------------------------------------------------------------------
# Reading the host
# --------------------------------------------------------------------------------------

def read_installed(venv: str, version: str, lock_file: str, env_root: str) -> tuple[object, dict]:
    """(SglangSource or None, {version, path, marker, current, error})."""
    info = {"venv": venv, "version": None, "path": None, "marker": None, "current": None, "error": None}
    current = os.path.join(env_root, "current") if env_root else ""
    if current and os.path.islink(current):
        info["current"] = os.path.normpath(os.path.join(env_root, os.readlink(current)))
    try:
        where = find_installed(venv)
        src = cached_source(where)
    except (AuditError, UnknownLayout, OSError) as exc:
        info["error"] = str(exc)
        return None, info
    info["version"], info["path"] = src.version, where
    info["marker"] = read_venv_marker(venv, lock_file)
    if info["marker"] == "present":
        info["marker"] = "present (no lock file to compare)"
    return src, info


def observe(desired: dict, run, *, server_url: str = "", api_key: str = "", timeout: float = 10.0,
            proc: str = "/proc") -> tuple[object, dict]:
    """(installed release, what the host shows) for ``compare``; reads only."""
    src, installed = read_installed(desired["venv"], desired["version"], desired.get("lock_file", ""),
                                    desired.get("env_root", ""))
    svc = read_service(run, desired.get("service", "sglang"), desired["unit_file"])
    observed = {"installed": installed, "service": svc, "unit": {}, "running": None, "server": None}
    model = desired.get("model") or {}
    if model.get("path"):
        observed["model"] = model_files.drift(model["path"], model.get("mode") or "sizes")
    if svc["installed"]:
        observed["unit"] = {"path": desired["unit_file"], "argv": read_unit_argv(desired["unit_file"])}
    cmd = read_cmdline(svc["main_pid"], proc) if svc["active_state"] in ("active", "reloading") else None
    if cmd:
        observed["running"] = {"pid": svc["main_pid"], **split_launch(cmd, desired.get("launcher", ""))}
    if server_url and observed["running"]:
        try:
            info = read_server(server_url, api_key, timeout)["server_info"]
            resolved = {k: v for k, v in info.items() if k not in SECRET_FIELDS and k != "launch_command"}
            observed["server"] = {"url": server_url, "resolved": resolved}
        except AuditError as exc:
            observed["server"] = {"url": server_url, "error": str(exc)}
    return src, observed


def desired_state(host: str, version: str, venv: str, entrypoint: str, args: dict, **extra) -> dict:
    """The inventory's side: the argv the unit is rendered from (``to_argv``) and the rest."""
    try:
        argv = to_argv(args)
    except ArgsError as exc:
        raise DriftError(f"{host}: {exc}") from exc
    return {"host": host, "version": version, "venv": venv.rstrip("/"), "entrypoint": entrypoint,
            "args": args, "argv": argv, **extra}


def drift_report(src, desired: dict, observed: dict) -> dict:
    """The JSON report: items, a summary line and one line per item; nothing secret in it."""
    items = compare(src, desired, observed)
    host = desired["host"]
    running = observed.get("running")
    shown_running = None
    if running:
        shown_running = {**running, "sglang_argv": redact_argv(running["sglang_argv"])}
    unit = dict(observed.get("unit") or {})
    if unit.get("argv"):
        unit["argv"] = redact_argv(unit["argv"])
    lines = [summary_line(host, items)] + [item_line(host, i) for i in items]
    return {
        "host": host, "in_sync": not items, "differences": len(items), "items": items,
        "summary": lines[0], "lines": lines,
        "desired": {"version": desired["version"], "venv": desired["venv"], "entrypoint": desired["entrypoint"],
                    "argv": desired["argv"]},
        "installed": observed.get("installed"), "service": observed.get("service"), "unit": unit,
        "running": shown_running,
        "server": {k: v for k, v in (observed.get("server") or {}).items() if k != "resolved"} or None,
    }


def fleet_summary(reports: dict) -> dict:
    """{host: report} -> {in_sync: [...], drifted: {host: n}, unchecked: [...], line}."""
    in_sync = sorted(h for h, r in reports.items() if r and r.get("in_sync"))
    drifted = {h: r["differences"] for h, r in sorted(reports.items()) if r and not r.get("in_sync")}
    unchecked = sorted(h for h, r in reports.items() if not r)
    line = f"drift: {len(in_sync)} host{'s' if len(in_sync) != 1 else ''} in sync, {len(drifted)} drifted"
    if drifted:
        line += " (" + ", ".join(f"{h}: {n}" for h, n in drifted.items()) + ")"
    if unchecked:
        line += f", {len(unchecked)} not checked ({', '.join(unchecked)})"
    return {"in_sync": in_sync, "drifted": drifted, "unchecked": unchecked, "line": line}
