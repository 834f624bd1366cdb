#!/usr/bin/python
"""Documentation of the sglang_role_inputs action (plugins/action/sglang_role_inputs.py does the work)."""

DOCUMENTATION = r"""
---
module: sglang_role_inputs
short_description: Check the variables of several roles in one task (argument specs and misspellings)
description:
  - For each role of O(roles), in order, validates the values set for its entry point against its
    meta/argument_specs.yml, as Ansible's role-entry validation does, then refuses C(<role>_*) variables the
    role does not know (a misspelling Ansible would ignore). Fails with the first role's problem.
  - Runs on the controller, in the controller's process; changes nothing.
options:
  roles:
    description: Role names, C(name) for the main entry point or C(name:entry) for another.
    type: list
    elements: str
    required: true
  with_defaults:
    description:
      - Roles whose defaults are validated too, templated as inside the role (Ansible's role-entry validation;
        it templates every default of the role, a cost per host). The others are validated on the values set for them.
    type: list
    elements: str
    default: []
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Check the rollout roles' variables
  sglang.fleet.sglang_role_inputs:
    roles: ["ml_env:preflight", "sglang_service:preflight", sglang_compat, sglang_audit, sglang_verify]
    with_defaults: [ml_env, sglang_service, sglang_compat]
"""

RETURN = r"""
argument_errors: {description: The argument spec's errors of the first role that has some., returned: failure, type: list, elements: str}
"""
