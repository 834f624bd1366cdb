#!/usr/bin/python
"""Ansible module: read-only checks of a host before deploy changes it."""

DOCUMENTATION = r"""
---
module: sglang_host_check
short_description: Check the port, the model folder and the machine's identity before a deploy
description:
  - Fails when another process (not the service's MainPID or its children) listens on O(port),
    or when O(service_user) cannot read the model's config.json; returns the machine's identity
    (machine-id, else the SSH host key) so two inventory names for one machine can be refused.
  - Read-only; needs root to see every process's sockets.
options:
  host: {description: The inventory name (for messages)., type: str, required: true}
  port: {description: The port SGLang will listen on., type: int, required: true}
  service: {description: The systemd unit name., type: str, required: true}
  service_user: {description: The user the server runs as., type: str, required: true}
  model_path: {description: The model folder (or a repo id, then not checked)., type: str, default: ""}
author:
  - sglang-fleet
"""

RETURN = r"""
machine_id: {description: The machine's identity., returned: always, type: str}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_host_check import (
    descendants,
    listening_inodes,
    machine_id,
    model_problem,
    port_owners,
    port_problem,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "port": {"type": "int", "required": True},
            "service": {"type": "str", "required": True},
            "service_user": {"type": "str", "required": True},
            "model_path": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    problems = []
    tables = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                tables.append(f.read())
        except OSError:
            pass
    inodes = listening_inodes(p["port"], tables)
    if inodes:
        rc, out, _err = module.run_command(["systemctl", "show", "-p", "MainPID", p["service"]], check_rc=False)
        main_pid = out.strip().partition("=")[2] if rc == 0 else ""
        problem = port_problem(p["host"], p["port"], p["service"], descendants(main_pid), port_owners(inodes))
        if problem:
            problems.append(problem)
    if p["model_path"].startswith("/"):
        problem = model_problem(p["host"], p["model_path"], p["service_user"])
        if problem:
            problems.append(problem)
    result = {"changed": False, "machine_id": machine_id()}
    if problems:
        module.fail_json(msg="; ".join(problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
