"""Action plugin: ml_env's install in one task: push the wheels, then the sglang_venv module writes the
lock and builds the venv from it (plugins/modules/sglang_venv.py).

On the controller, in order, each with the builtin it was a task of (same files, modes, owners, check
and diff behaviour, same messages): the ``folders`` (ansible.builtin.file, root, 0755), the wheels into
``wheelhouse`` (ansible.builtin.unarchive of ``bundle``, else ansible.builtin.copy of each of
``wheels``), then the module (the lock, and the build unless --check). The first that fails fails the
task with its own result. Under --check the task also says what a real run would build (the role's
debug task said it). One task where ml_env's install was 16 on a first deploy of the lab's h200x2.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

ACTION_ARGS = ("folders", "wheels", "bundle")
MODULE_ARGS = ("venv", "python", "installer", "profile", "wheelhouse", "lock", "lock_content", "marker", "uv", "uv_wheel",
               "uv_lock", "uv_lock_content", "uv_version")
ROOT_ONLY = {"owner": "root", "group": "root"}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ACTION_ARGS + MODULE_ARGS)

    def _builtin_action(self, name, args, task_vars):
        """Run builtin action plugin `name` (copy, unarchive) with `args`, as its own task would."""
        task = self._task.copy()
        task.args = args
        action = self._shared_loader_obj.action_loader.get(
            name, task=task, connection=self._connection, play_context=self._play_context, loader=self._loader,
            templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        return action.run(task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self._task.args
        steps = []
        try:
            for folder in args.get("folders") or []:
                steps.append(self._execute_module(
                    module_name="ansible.legacy.file", task_vars=task_vars,
                    module_args={"path": folder, "state": "directory", "mode": "0755", **ROOT_ONLY}))
                if steps[-1].get("failed"):
                    return {**result, **steps[-1]}
            dest = args["wheelhouse"].rstrip("/") + "/"
            if args.get("bundle"):
                # the full profile's ~200 wheels as one tar, made once per lock on the controller: one
                # SSH copy per wheel cost minutes of round trips per host (bench/README.md)
                pushes = [("ansible.legacy.unarchive", {"src": args["bundle"], "dest": dest, "mode": "0644", **ROOT_ONLY})]
            else:
                pushes = [("ansible.legacy.copy", {"src": wheel, "dest": dest, "mode": "0644", **ROOT_ONLY})
                          for wheel in args.get("wheels") or []]
            for name, push in pushes:
                steps.append(self._builtin_action(name, push, task_vars))
                if steps[-1].get("failed"):
                    return {**result, **steps[-1]}
            built = self._execute_module(module_name="sglang.fleet.sglang_venv", task_vars=task_vars,
                                         module_args={k: args[k] for k in MODULE_ARGS if k in args})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        steps.append(built)
        diffs = [d for step in steps for d in (step.get("diff") if isinstance(step.get("diff"), list) else [step.get("diff")])
                 if d]
        result.update(built, changed=any(step.get("changed") for step in steps))
        result.pop("diff", None)
        if diffs:
            result["diff"] = diffs
        if not built.get("failed") and self._task.check_mode:
            # shown as a debug task's message is (--check previews what a deploy would do)
            result.update(_ansible_verbose_always=True, msg=(
                f"{task_vars.get('inventory_hostname')} (--check): a real run would build {args['venv']} from its lock "
                "(offline, every hash checked); check mode cannot build it, nor read what it would hold"))
        return result
