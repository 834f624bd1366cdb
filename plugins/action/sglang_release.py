"""Action plugin: the sglang_release module, then, for a recorded release, its report on the controller.

With ``report_dir``, ``state: record`` writes the record (with the host's name) as
``<report_dir>/release-<recorded_at>.json`` and ``release-latest.json`` (plugins/action/sglang_report.py's
writer: 0600 in a 0700 folder), not under --check (nothing was recorded). Every other use is the module
alone (plugins/modules/sglang_release.py).
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.sglang.fleet.plugins.action.sglang_report import run_module_and_report


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        recording = self._task.args.get("state") == "record" and not task_vars.get("ansible_check_mode")

        def content(release, stamp):
            record = release.get("record")
            return {**record, "host": task_vars.get("inventory_hostname")} if recording and isinstance(record, dict) else None

        result.update(run_module_and_report(self, "sglang.fleet.sglang_release", task_vars, "release", content,
                                            stamp_of=lambda release: (release.get("record") or {}).get("recorded_at")))
        return result
