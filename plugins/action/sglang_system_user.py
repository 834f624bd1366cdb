"""Action plugin: a system user in its own system group, in one task.

ansible.builtin.group (``group``, system), then ansible.builtin.user (``name`` in that group, system,
``home`` made, ``shell``): the same two modules with the same arguments, in the same order, as the
two tasks it replaces (the user module refuses a group that does not exist, so the group comes
first). The first that fails fails the task with its own result; changed when either changed.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("name", "group", "home", "shell"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self._task.args
        missing = [name for name in ("name", "group", "home") if not args.get(name)]
        if missing:
            raise AnsibleActionFail(f"sglang_system_user needs {', '.join(missing)}")
        try:
            group = self._execute_module(module_name="ansible.legacy.group", task_vars=task_vars,
                                         module_args={"name": args["group"], "system": True})
            if group.get("failed"):
                return {**result, **group}
            user = self._execute_module(module_name="ansible.legacy.user", task_vars=task_vars, module_args={
                "name": args["name"], "group": args["group"], "system": True, "home": args["home"], "create_home": True,
                "shell": args.get("shell") or "/usr/sbin/nologin"})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(user)
        if not user.get("failed"):
            result["changed"] = bool(group.get("changed") or user.get("changed"))
        return result
