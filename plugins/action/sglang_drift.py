"""Action plugin: one host's whole drift check in one task - the controller's half of sglang_drift.

Drift is read-only and runs across the fleet, so its cost per host is the number of tasks per
host (each one a worker fork and a round of variable templating on the controller). This task
does what three per-host tasks did:
  1. refuses misspelled variables of the calling role (`sglang_drift_*` names that are not in its
     meta/argument_specs.yml: filter_plugins/fleet_vars.py's unknown_role_vars, the check of
     roles/sglang_common/tasks/check_vars.yml);
  2. runs the sglang_drift module on the host (plugins/modules/sglang_drift.py);
  3. writes the host's report on the controller, `<report_dir>/drift-<report_stamp>.json` and
     `drift-latest.json` (plugins/action/sglang_report.py's run_module_and_report, as the audit's,
     compat's and release's action plugins: 0600 in a 0700 folder), also under --check and never as
     a change; `report_check_mode` is the report's `check_mode` (the task runs with check_mode false).
With `fleet` (the summary, run once on the controller) only the module runs. The result is
no_log when an `api_key` is given (the task needs no no_log of its own).
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.sglang.fleet.plugins.action.sglang_report import run_module_and_report
from ansible_collections.sglang.fleet.plugins.filter import fleet_vars as _fleet_vars


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        role = self._task._role
        if args.get("fleet") is None and role is not None:
            problems = _fleet_vars.unknown_role_vars(task_vars, role._role_path)
            if problems:
                result.update(failed=True, msg="; ".join(problems))
                return result

        def content(drift, stamp):
            # a host's report; the fleet summary (`fleet`) returns none and is not written
            if not isinstance(drift.get("report"), dict):
                return None
            return {**drift["report"], "generated_at": stamp, "check_mode": bool(args.get("report_check_mode"))}

        result.update(run_module_and_report(self, "sglang.fleet.sglang_drift", task_vars, "drift", content,
                                            name="sglang_drift"))
        # no_log for the module's result when the server's API key was sent, and only then: a
        # task-level no_log would also hide the variable check's message above.
        result["_ansible_no_log"] = bool(args.get("api_key")) or bool(result.get("_ansible_no_log"))
        return result
