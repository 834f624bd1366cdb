"""Action plugin: the sglang_audit module, then the host's audit report on the controller, in one task.

With ``report_dir`` (and ``report_stamp``: one report per host and run even when deploy.yml runs the
static and runtime phases apart; default now, UTC) the report is ``<report_dir>/audit-<stamp>.json``
and ``audit-latest.json`` (plugins/action/sglang_report.py's writer: 0600 in a 0700 folder), written
under --check too and never as a change, unless the venv is not there yet (``installed: false``).
Without them it is the module alone (plugins/modules/sglang_audit.py); the role's runtime task is
no_log when it sends an ``api_key``.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.sglang.fleet.plugins.action.sglang_report import run_module_and_report


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)

        def content(audit, stamp):
            if audit.get("installed") is False or not isinstance(audit.get("report"), dict):
                return None
            return {**audit["report"], "host": task_vars.get("inventory_hostname"), "generated_at": stamp,
                    "check_mode": bool(task_vars.get("ansible_check_mode"))}

        result.update(run_module_and_report(self, "sglang.fleet.sglang_audit", task_vars, "audit", content))
        return result
