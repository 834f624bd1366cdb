"""The observe layer: how sglang-fleet reads a host, in one place.

Runs on the host (stdlib only, Python 3.8+) and only reads. Every module that looks at a running
host uses these readers, so that they cannot disagree about what they saw:

    systemd_show(service, props)   ``systemctl show -p A -p B`` -> ({A: x, B: y}, error or None)
    read_service(run, name, unit)  its state, enabled or not, MainPID, and whether the unit file exists
    process_start(pid)             when a process started (/proc/<pid>/stat and /proc/stat)
    server_start(service)          which lifetime of a service runs: its main PID and that start, or None
    read_cmdline(pid)              its argv (/proc/<pid>/cmdline)
    read_unit_argv(unit_file)      the argv of a unit file's ExecStart= (systemd's quoting undone)
    read_venv_marker(venv, lock)   the lock ml_env leaves in a venv it finished, against the desired lock
    get_json(url, api_key)         an endpoint's JSON (urllib's HTTPError / URLError raised as is)
    http_status(url, api_key)      (status, "") of a GET, or (None, why it did not answer)

Users: sglang_drift (the service, the running argv, the unit's ExecStart), sglang_deploy_state (is the host
what its last deploy left), sglang_release (a restart pending), sglang_router_drift (the same, for the router), sglang_audit's
server reader and sglang_host_check (the venv marker).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request


def run_command(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return 1, "", str(exc)
    return p.returncode, p.stdout, p.stderr


def parse_show(text: str) -> dict:
    """``systemctl show -p A -p B`` output (``A=x`` lines) -> {A: x}."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def systemd_show(service: str, props, run=None) -> tuple[dict, str | None]:
    """({prop: value}, None), or ({}, why systemctl failed). One ``-p`` per property and no
    ``--value``: what systemd and the lab's docker-systemctl-replacement both read.
    `run(argv) -> (rc, stdout, stderr)`: AnsibleModule.run_command, or a subprocess by default."""
    argv = ["systemctl", "show", service]
    for prop in props:
        argv += ["-p", prop]
    rc, out, err = (run or run_command)(argv)
    if rc != 0:
        return {}, ((err or out) or f"systemctl exited {rc}").strip()[:500]
    return parse_show(out), None


def main_pid(props: dict) -> int:
    """MainPID of a systemd_show result (0: not running)."""
    value = str(props.get("MainPID") or "0")
    return int(value) if value.isdigit() else 0


def read_service(run, name: str, unit_file: str) -> dict:
    """The service as systemd shows it  + whether its unit file exists."""
    props, error = systemd_show(name, ("ActiveState", "MainPID", "UnitFileState"), run)
    return {"installed": os.path.isfile(unit_file), "unit_file_state": props.get("UnitFileState", ""),
            "active_state": props.get("ActiveState", ""), "main_pid": main_pid(props), "systemctl_error": error}


def process_start(pid, proc: str = "/proc") -> float | None:
    """Unix time the process started (/proc/<pid>/stat starttime + /proc/stat btime), or None."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8", errors="replace") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22; comm may hold spaces
        with open(os.path.join(proc, "stat"), encoding="utf-8") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def server_start(service: str, run=None, proc: str = "/proc") -> str | None:
    """The lifetime of `service`'s running server, as ``"<UTC start time> pid <MainPID>"`` (the same
    string for every read until it restarts), or None when systemd shows no main process or its start
    cannot be read. Needs no privileges: ``systemctl show`` and /proc/<pid>/stat."""
    props, error = systemd_show(service, ("MainPID",), run)
    pid = 0 if error else main_pid(props)
    started = process_start(pid, proc) if pid else None
    if started is None:
        return None
    centis = int(round(started * 100))
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(centis // 100))}.{centis % 100:02d}Z pid {pid}"


def parse_cmdline(raw) -> list[str]:
    """/proc/<pid>/cmdline (NUL-separated bytes or str) -> argv."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    words = raw.split("\0")
    if words and words[-1] == "":
        words.pop()
    return words


def read_cmdline(pid: int, proc: str = "/proc") -> list[str] | None:
    if not pid:
        return None
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fh:
            return parse_cmdline(fh.read()) or None
    except OSError:
        return None


def _request(url: str, api_key: str = "", accept_json: bool = False):
    headers = {"Accept": "application/json"} if accept_json else {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return urllib.request.Request(url, headers=headers)


def get_json(url: str, api_key: str = "", timeout: float = 10.0):
    """The JSON a GET of `url` answers. Raises urllib's HTTPError (a status), URLError / OSError
    (no answer) and ValueError (not JSON): each caller says what they mean for it."""
    with urllib.request.urlopen(_request(url, api_key, accept_json=True), timeout=timeout) as resp:  # noqa: S310
        return json.loads(resp.read().decode("utf-8", errors="replace"))


def http_status(url: str, api_key: str = "", timeout: float = 30.0) -> tuple[int | None, str]:
    """(status, "") of a GET of `url`, or (None, why it did not answer)."""
    try:
        with urllib.request.urlopen(_request(url, api_key), timeout=timeout) as resp:  # noqa: S310
            return resp.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (OSError, ValueError) as exc:
        return None, exc.__class__.__name__


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "s": " "}


def systemd_split(line: str) -> list[str]:
    """An ExecStart= command line -> argv, undoing what ``sglang_args.systemd_quote`` does.

    White space separates words; double or single quotes group, with C escapes; ``$$`` and
    ``%%`` are a literal ``$`` and ``%``.
    """
    words, word, quote, i, started = [], [], None, 0, False
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and i + 1 < len(line):
                i += 1
                word.append(_ESCAPES.get(line[i], line[i]))
            elif c == quote:
                quote = None
            else:
                word.append(c)
        elif c in " \t":
            if started:
                words.append("".join(word))
                word, started = [], False
        elif c in "\"'":
            quote, started = c, True
        elif c == "\\" and i + 1 < len(line):
            i += 1
            word.append(_ESCAPES.get(line[i], line[i]))
            started = True
        else:
            word.append(c)
            started = True
        i += 1
    if started:
        words.append("".join(word))
    return [w.replace("$$", "$").replace("%%", "%") for w in words]


def unit_exec_start(text: str) -> list[str] | None:
    """The argv of the unit's ``ExecStart=`` (continuation lines joined; ``-@+!:`` prefixes dropped)."""
    joined = re.sub(r"\\\n", " ", text or "")
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("ExecStart="):
            value = line[len("ExecStart="):].lstrip()
            value = value.lstrip("-@+!:")
            return systemd_split(value)
    return None


def read_unit_argv(unit_file: str) -> list[str] | None:
    """The argv of ``unit_file``'s ExecStart=, or None when the file has none."""
    with open(unit_file, encoding="utf-8", errors="replace") as fh:
        return unit_exec_start(fh.read())


# What ml_env writes into a venv it finished: a copy of the lock it was built from
# (roles/ml_env/vars/main.yml writes the same name; the host model's venv_marker is this path).
VENV_MARKER = ".sglang-fleet-lock.txt"


def read_venv_marker(venv: str, lock_file: str = "") -> str:
    """Whether ``venv`` is a finished ml_env and from which lock: "missing" (never finished),
    "matches" / "differs" (its marker against ``lock_file``), or "present" (no lock to compare)."""
    marker = os.path.join(venv, VENV_MARKER) if venv else ""
    if not marker or not os.path.isfile(marker):
        return "missing"
    if not lock_file or not os.path.isfile(lock_file):
        return "present"
    with open(marker, "rb") as got, open(lock_file, "rb") as want:
        return "matches" if got.read() == want.read() else "differs"
