"""Run sglang-fleet's playbooks programmatically through ansible-runner: `python -m sglang_fleet drift`."""

from .runner import PLAYBOOKS, HostResult, RunResult, TaskFailure, run_playbook

__all__ = ["PLAYBOOKS", "HostResult", "RunResult", "TaskFailure", "run_playbook"]
