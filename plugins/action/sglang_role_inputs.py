"""Action plugin: check the variables of several roles in one task, before any of them runs.

For each role of ``roles`` ("name" for its main entry point, "name:entry" for another), in order:
  1. its entry point's meta/argument_specs.yml against the values set for it (ansible.builtin.
     validate_argument_spec's check and message); for a role of ``with_defaults``, also its defaults
     as the role sees them (what Ansible's role-entry validation does);
  2. misspelled ``<role>_*`` variables (filter_plugins/fleet_vars.py's unknown_role_vars, the check
     of roles/sglang_common/tasks/check_vars.yml, same message).
The first role with a problem fails the task with that message. deploy.yml's checks play runs it
once per host for the roles of the rollout, where it was one task per check and role (each task is a
worker fork and a round of templating on the controller: bench/README.md, "What one task costs").
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.sglang.fleet.plugins.filter import fleet_vars

ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "roles"))


def entry_options(role, entry, specs):
    """The options of `role`'s entry point `entry` in its argument specs `specs` (meta/argument_specs.yml)."""
    if entry not in specs:
        raise AnsibleActionFail(f"sglang_role_inputs: roles/{role} has no argument spec entry point {entry!r}")
    return specs[entry].get("options") or {}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("roles", "with_defaults"))

    def role_data(self, role, name):
        """The role's defaults/main.yml or vars/main.yml ({} when absent), loaded as Ansible loads them
        (its templates trusted, so that they render)."""
        path = os.path.join(ROLES_DIR, role, name)
        return (self._loader.load_from_file(path, trusted_as_template=True) or {}) if os.path.exists(path) else {}

    def role_args(self, role, spec, task_vars, with_defaults):
        """The values set for the role's options; with_defaults: the host's, else the role's defaults,
        templated with the role's defaults and vars in scope (as inside the role, where Ansible validates
        them: its derived defaults too, at the cost of templating them all)."""
        role_data = ({**self.role_data(role, "defaults/main.yml"), **self.role_data(role, "vars/main.yml")}
                     if with_defaults else {})
        # role_path: a default of a role this play imports is in task_vars too, and may use it
        scope = {**role_data, **task_vars, "role_path": os.path.join(ROLES_DIR, role), "role_name": role}
        values = {name: scope[name] for name in spec if name in scope}
        return self._templar.copy_with_new_env(available_variables=scope).template(values)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        roles = self._task.args.get("roles")
        with_defaults = set(self._task.args.get("with_defaults") or [])
        if not isinstance(roles, list) or not roles:
            raise AnsibleActionFail("sglang_role_inputs needs roles: a list of role names (name or name:entry)")
        for item in roles:
            role, entry = (str(item).split(":", 1) + ["main"])[:2]
            role_path = os.path.join(ROLES_DIR, role)
            specs = fleet_vars.role_argument_specs(role_path)  # read once: the entry's options, then the names it knows
            spec = entry_options(role, entry, specs)
            validation = ArgumentSpecValidator(spec).validate(self.role_args(role, spec, task_vars, role in with_defaults),
                                                              validate_role_argument_spec=True)
            if validation.error_messages:
                result.update(failed=True, argument_errors=validation.error_messages,
                              msg="Validation of arguments failed:\n" + "\n".join(validation.error_messages))
                return result
            problems = fleet_vars.unknown_role_vars(list(task_vars), role_path, specs)
            if problems:
                result.update(failed=True, msg="; ".join(problems))
                return result
        result.update(changed=False, msg=f"checked the variables of {', '.join(map(str, roles))}")
        return result
