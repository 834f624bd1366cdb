"""Run a playbook with ansible-runner and read its outcome from the runner's job events (never stdout)."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shlex
import sys
import tempfile

import ansible_runner

REPO = pathlib.Path(__file__).resolve().parent.parent
PLAYBOOKS = ("deploy", "audit", "verify", "drift", "releases", "rollback", "regression")

# ansible-playbook's exit codes (ansible.executor.task_queue_manager), which this module returns too.
RC_OK, RC_ERROR, RC_FAILED, RC_UNREACHABLE = 0, 1, 2, 4


@dataclasses.dataclass
class TaskFailure:
    """One failed (not ignored) task on a host, or the reason a host was unreachable."""

    task: str
    msg: str


@dataclasses.dataclass
class HostResult:
    """A host's play recap and what failed on it."""

    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0
    failures: list[TaskFailure] = dataclasses.field(default_factory=list)

    @property
    def status(self) -> str:
        """unreachable, failed, changed or ok (the first that applies)."""
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        return "changed" if self.changed else "ok"


@dataclasses.dataclass
class RunResult:
    """The outcome of one playbook run."""

    playbook: str
    rc: int  # 0 ok, 2 a host failed, 4 a host unreachable, 1 no play ran (error says why)
    ansible_rc: int  # ansible-playbook's own exit status
    runner_status: str  # ansible-runner's: successful, failed, timeout, canceled
    hosts: dict[str, HostResult]
    error: str = ""  # ansible-playbook's own error when it ran no play (bad playbook, inventory, option)
    artifact_dir: str = ""  # the runner's artifacts when kept (job_events/, stdout), else ""

    def to_dict(self) -> dict:
        return {
            "playbook": self.playbook,
            "rc": self.rc,
            "ansible_rc": self.ansible_rc,
            "runner_status": self.runner_status,
            "error": self.error,
            "artifact_dir": self.artifact_dir,
            "hosts": {h: {**dataclasses.asdict(r), "status": r.status} for h, r in self.hosts.items()},
        }


def failure_message(res: dict) -> str:
    """A failed task's message from its result: msg, else the failed loop items' msgs, else stderr or rc.

    A no_log task's result reaches the events already censored by the runner's callback
    ({"censored": "the output has been hidden ..."}): that text is all there is to show.
    """
    if "censored" in res:
        return str(res["censored"])
    items = [r for r in res.get("results") or [] if isinstance(r, dict) and r.get("failed")]
    if items:
        return "; ".join(failure_message(r) for r in items)
    for key in ("msg", "stderr", "module_stderr"):
        if res.get(key):
            return str(res[key]).strip()
    return f"rc {res['rc']}" if "rc" in res else "failed (no message)"


def read_events(events) -> tuple[dict[str, HostResult], dict]:
    """Per-host results and the play recap (playbook_on_stats event_data, {} if none) from job events."""
    hosts: dict[str, HostResult] = {}
    stats: dict = {}
    for event in events:
        kind, data = event.get("event"), event.get("event_data") or {}
        if kind == "playbook_on_stats":
            stats = data
        elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            host = hosts.setdefault(data["host"], HostResult(data["host"]))
            host.failures.append(TaskFailure(data.get("task", ""), failure_message(data.get("res") or {})))
    keys = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable", "skipped": "skipped",
            "rescued": "rescued", "ignored": "ignored"}
    for name in sorted({h for k in keys for h in stats.get(k) or {}} | set(hosts)):
        host = hosts.setdefault(name, HostResult(name))
        for key, field in keys.items():
            setattr(host, field, int((stats.get(key) or {}).get(name, 0)))
    return dict(sorted(hosts.items())), stats


def exit_code(hosts: dict[str, HostResult], ansible_rc: int, played: bool) -> int:
    """4 if a host was unreachable, else 2 if one failed (ansible-playbook's rule), else 0; 1 when
    ansible-playbook ran no play and failed (its own rc for that, e.g. 4 for a parse error or 2 for
    a bad option, would read as a host's fault)."""
    if any(h.unreachable for h in hosts.values()):
        return RC_UNREACHABLE
    if any(h.failed for h in hosts.values()):
        return RC_FAILED
    if ansible_rc and not played:
        return RC_ERROR
    return ansible_rc


def playbook_path(name: str) -> str:
    """deploy -> <repo>/deploy.yml; a path to a .yml/.yaml file is taken as it is."""
    if name in PLAYBOOKS:
        return str(REPO / f"{name}.yml")
    path = pathlib.Path(name)
    if path.suffix not in (".yml", ".yaml") or not path.is_file():
        raise ValueError(f"unknown playbook {name!r}: one of {', '.join(PLAYBOOKS)} or a playbook file")
    return str(path.resolve())


def _drop_env(artifact_dir: str) -> None:
    """The runner keeps its whole environment in <artifacts>/command; keep only the command and cwd."""
    path = pathlib.Path(artifact_dir, "command")
    if path.is_file():
        data = json.loads(path.read_text())
        path.write_text(json.dumps({k: data[k] for k in ("command", "cwd") if k in data}))


def run_playbook(
    playbook: str,
    *,
    limit: str | None = None,
    inventory: list[str] | None = None,
    extra_vars: list[str] | None = None,
    check: bool = False,
    args: list[str] | None = None,
    artifacts: str | None = None,
    envvars: dict[str, str] | None = None,
    show_output: bool = False,
    timeout: int | None = None,
) -> RunResult:
    """Run a playbook through ansible_runner.run with the repository's ansible.cfg.

    playbook: a name of PLAYBOOKS or a playbook file. extra_vars: ansible-playbook -e values as
    given on its command line (key=value, JSON, @file). args: more ansible-playbook options
    (["--tags", "x", "--diff"]). artifacts: folder that keeps the runner's artifacts
    (<artifacts>/<ident>/job_events, stdout; its `command` file without the environment);
    None: a temporary folder, removed after the results are read.
    """
    path = playbook_path(playbook)
    cmdline = []
    for value in extra_vars or []:  # @file relative to the caller (ansible-playbook runs in REPO)
        cmdline += ["-e", f"@{os.path.abspath(value[1:])}" if value.startswith("@") else value]
    if check:
        cmdline.append("--check")
    cmdline += args or []
    # ansible-playbook from this Python's venv, found without the venv being activated
    bindir = os.path.dirname(sys.executable)
    env = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "PATH": os.pathsep.join([bindir, os.environ.get("PATH", os.defpath)]), **(envvars or {})}
    with tempfile.TemporaryDirectory(prefix="sglang-fleet-runner-") as tmp:
        kwargs = {"artifact_dir": str(pathlib.Path(artifacts).resolve())} if artifacts else {}
        runner = ansible_runner.run(
            private_data_dir=tmp,
            project_dir=str(REPO),
            playbook=path,
            inventory=[str(pathlib.Path(i).resolve()) if os.path.exists(i) else i for i in inventory or []] or None,
            limit=limit,
            cmdline=shlex.join(cmdline) if cmdline else None,
            envvars=env,
            quiet=not show_output,
            suppress_env_files=True,
            timeout=timeout,
            **kwargs,
        )
        hosts, stats = read_events(runner.events)
        error = ""
        rc = runner.rc if isinstance(runner.rc, int) else RC_ERROR
        if rc and not stats:  # no play ran: ansible-playbook said why (runner merges stderr into stdout)
            text = runner.stdout.read() if runner.stdout else ""
            lines = [line for line in text.splitlines() if line.strip()][-10:]
            stopped = {"timeout": f"ansible-runner: timed out after {timeout} s", "canceled": "ansible-runner: canceled"}
            error = "\n".join([stopped[runner.status], *lines] if runner.status in stopped else lines)
            error = error or f"ansible-runner status {runner.status}, ansible-playbook rc {rc}"
        kept = runner.config.artifact_dir if artifacts else ""
        if kept:
            _drop_env(kept)
        return RunResult(playbook=path, rc=exit_code(hosts, rc, bool(stats)), ansible_rc=rc,
                         runner_status=runner.status, hosts=hosts, error=error, artifact_dir=kept)
