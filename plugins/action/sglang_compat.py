"""Action plugin: the sglang_compat module, then the host's compatibility report on the controller.

With ``report_dir``: ``<report_dir>/compat-<now>.json`` and ``compat-latest.json`` (plugins/action/
sglang_report.py's writer: 0600 in a 0700 folder): the host, the release, the verdict and its checks,
what was ignored and whether it ran under --check; written under --check too, never as a change.
Without it, the module alone (plugins/modules/sglang_compat.py).
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.sglang.fleet.plugins.action.sglang_report import run_module_and_report


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self._task.args

        def content(verdict, stamp):
            return {"host": task_vars.get("inventory_hostname"), "version": args.get("version"),
                    "status": verdict.get("status"), "summary": verdict.get("summary"), "checks": verdict.get("checks"),
                    "release": verdict.get("release"), "ignore": args.get("ignore", []),
                    "check_mode": bool(task_vars.get("ansible_check_mode"))}

        result.update(run_module_and_report(self, "sglang.fleet.sglang_compat", task_vars, "compat", content))
        return result
