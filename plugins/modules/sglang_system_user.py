#!/usr/bin/python
"""Documentation of the sglang_system_user action (plugins/action/sglang_system_user.py does the work)."""

DOCUMENTATION = r"""
---
module: sglang_system_user
short_description: A system user in its own system group, in one task
description:
  - Runs ansible.builtin.group (O(group), a system group), then ansible.builtin.user (O(name), a system user
    whose primary group is O(group), its home O(home) made, its shell O(shell)), the two modules with these
    arguments in this order, as two tasks would.
  - The first that fails fails the task with its own message; changed when either changed; check mode as
    the two modules.
options:
  name:
    description: The user.
    type: str
    required: true
  group:
    description: Its primary group (made first, as a system group, when it does not exist).
    type: str
    required: true
  home:
    description: Its home folder (made when the user is created).
    type: str
    required: true
  shell:
    description: Its login shell.
    type: str
    default: /usr/sbin/nologin
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Create the service user and its group
  sglang.fleet.sglang_system_user:
    name: sglang
    group: sglang
    home: /var/lib/sglang
"""

RETURN = r"""
uid: {description: The user's id (ansible.builtin.user's result)., returned: success, type: int}
group: {description: The user's primary group id (ansible.builtin.user's result)., returned: success, type: int}
"""
