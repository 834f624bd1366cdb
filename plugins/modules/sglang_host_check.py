#!/usr/bin/python
"""Ansible module: read-only checks of a host before deploy changes it."""

DOCUMENTATION = r"""
---
module: sglang_host_check
short_description: Check the port, the model folder and the machine's identity before a deploy; read the host's compatibility facts
description:
  - Fails when another process (not the service's MainPID or its children) listens on O(port),
    or when O(service_user) cannot read the model's config.json; returns the machine's identity
    (machine-id, else the SSH host key) so two inventory names for one machine can be refused.
  - With O(facts), also returns C(host_facts) for roles/sglang_compat - free space on the filesystems
    of O(env_root) and the model, whether O(venv) is already built, RAM, the model's weight bytes
    (model.safetensors.index.json, else the *.safetensors sizes) and the parts of its config.json
    the memory check reads - and, with O(python), that interpreter's version, architecture and glibc.
  - Read-only; needs root to see every process's sockets.
options:
  host: {description: The inventory name (for messages)., type: str, required: true}
  port: {description: The port SGLang will listen on., type: int, default: 30000}
  service: {description: The systemd unit name., type: str, default: sglang}
  service_user: {description: The user the server runs as., type: str, default: sglang}
  model_path: {description: "The model folder (or a repo id, then not checked).", type: str, default: ""}
  model_required: {description: "Refuse a model folder without config.json (false for a model sglang_model stages later).", type: bool, default: false}
  checks: {description: Run the port and model-folder checks (false with O(facts) for facts alone)., type: bool, default: true}
  facts: {description: Also return C(host_facts)., type: bool, default: false}
  env_root: {description: Folder of the SGLang venvs (its filesystem's free space)., type: str, default: ""}
  venv: {description: The release's venv (already built when it holds ml_env's marker)., type: str, default: ""}
  python: {description: "Interpreter to probe for version, architecture and glibc (empty to skip).", type: str, default: ""}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Check the port is free for the service and the service user can read the model
  sglang.fleet.sglang_host_check:
    host: "{{ inventory_hostname }}"
    port: 30000
    service: sglang
    service_user: sglang
    model_path: /models/Qwen3.6-27B
  become: true
  register: host_check

- name: Read the host's Python, disk, memory and model only (no checks), for the compatibility verdict
  sglang.fleet.sglang_host_check:
    host: "{{ inventory_hostname }}"
    checks: false
    facts: true
    env_root: /opt/ml-env
    venv: /opt/ml-env/sglang-0.5.11
    model_path: /models/Qwen3.6-27B
    python: /usr/bin/python3
"""

RETURN = r"""
machine_id: {description: The machine's identity., returned: always, type: str}
host_facts:
  description:
    - env_root, env_free_bytes, env_mount, venv, venv_ready, mem_total_bytes, mem_available_bytes,
      model_free_bytes, model_mount, model (weight_bytes, weights_from, config or error); with
      O(python) also python_version, architecture, glibc (or python_error).
  returned: with facts
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.host.check import (
    PYTHON_PROBE,
    descendants,
    host_facts,
    listening_inodes,
    machine_id,
    model_missing_problem,
    model_problem,
    port_owners,
    port_problem,
    python_facts,
)
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import systemd_show


def main():
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "port": {"type": "int", "default": 30000},
            "service": {"type": "str", "default": "sglang"},
            "service_user": {"type": "str", "default": "sglang"},
            "model_path": {"type": "str", "default": ""},
            "model_required": {"type": "bool", "default": False},
            "checks": {"type": "bool", "default": True},
            "facts": {"type": "bool", "default": False},
            "env_root": {"type": "str", "default": ""},
            "venv": {"type": "str", "default": ""},
            "python": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    result = {"changed": False, "machine_id": machine_id()}
    if p["facts"]:
        result["host_facts"] = host_facts(p["env_root"], p["venv"], p["model_path"])
        if p["python"]:
            rc, out, err = module.run_command([p["python"], "-c", PYTHON_PROBE], check_rc=False)
            result["host_facts"].update(python_facts(out) if rc == 0 else {"python_error": (err or out).strip()[-300:]})
    if not p["checks"]:
        module.exit_json(**result)
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
        main_pid = systemd_show(p["service"], ("MainPID",), module.run_command)[0].get("MainPID", "")
        problem = port_problem(p["host"], p["port"], p["service"], descendants(main_pid), port_owners(inodes))
        if problem:
            problems.append(problem)
    if p["model_path"].startswith("/"):
        problem = ((p["model_required"] and model_missing_problem(p["host"], p["model_path"]))
                   or model_problem(p["host"], p["model_path"], p["service_user"]))
        if problem:
            problems.append(problem)
    if problems:
        module.fail_json(msg="; ".join(problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
