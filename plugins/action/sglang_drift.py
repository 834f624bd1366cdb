"""Action plugin: one host's whole drift check in one task - the controller's half of sglang_drift.

Drift is read-only and runs across the fleet, so its cost per host is the number of tasks per
host (each one a worker fork and a round of variable templating on the controller). This task
does what three per-host tasks did:
  1. refuses misspelled variables of the calling role (`sglang_drift_*` names that are not in its
     meta/argument_specs.yml: filter_plugins/fleet_vars.py's unknown_role_vars, the check of
     roles/sglang_common/tasks/check_vars.yml);
  2. runs the sglang_drift module on the host (plugins/modules/sglang_drift.py);
  3. writes the host's report on the controller, `<report_dir>/drift-<report_stamp>.json` and
     `drift-latest.json` (plugins/action/sglang_report.py's writer: 0600 in a 0700 folder), also
     under --check and never as a change.
With `fleet` (the summary, run once on the controller) only the module runs. The result is
no_log when an `api_key` is given (the task needs no no_log of its own).
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sglang.fleet.filter_plugins import fleet_vars as _fleet_vars
from ansible_collections.sglang.fleet.plugins.action import sglang_report as _reports

REPORT_ARGS = ("report_dir", "report_stamp", "report_check_mode")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        report = {name: args.pop(name, None) for name in REPORT_ARGS}
        role = self._task._role
        if args.get("fleet") is None and role is not None:
            problems = _fleet_vars.unknown_role_vars(task_vars, role._role_path)
            if problems:
                result.update(failed=True, msg="; ".join(problems))
                return result
        result.update(self._execute_module(module_name="sglang.fleet.sglang_drift", module_args=args, task_vars=task_vars))
        # no_log for the module's result when the server's API key was sent, and only then: a
        # task-level no_log would also hide the variable check's message above.
        result["_ansible_no_log"] = bool(args.get("api_key")) or bool(result.get("_ansible_no_log"))
        if report["report_dir"] and isinstance(result.get("report"), dict) and not result.get("failed"):
            stamp = to_text(report["report_stamp"])
            content = {**result["report"], "generated_at": stamp, "check_mode": bool(report["report_check_mode"])}
            try:
                result["report_paths"] = _reports.write_report(os.path.expanduser(to_text(report["report_dir"])),
                                                               "drift", stamp, content)
            except (OSError, TypeError, ValueError) as exc:
                raise AnsibleActionFail(f"sglang_drift could not write the drift report: {exc}") from exc
        return result
