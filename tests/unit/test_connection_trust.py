"""SSH trust and least privilege, as configured: host keys verified for every inventory, the lab's
keys in a file of its own, an unprivileged connecting user, and read-only plays that never become root.
(tests/lab/test_lab_tool.py shows a changed or unknown host key refused over real SSH.)"""

import configparser
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
READ_ONLY = {"playbooks/audit.yml": "sglang_audit", "playbooks/verify.yml": "sglang_verify",
             "playbooks/drift.yml": "sglang_drift"}


def test_ansible_cfg_verifies_host_keys():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    assert cfg.getboolean("defaults", "host_key_checking") is True
    ssh_args = cfg.get("ssh_connection", "ssh_args").split()
    assert "StrictHostKeyChecking=yes" in ssh_args
    assert not any(arg.startswith("UserKnownHostsFile=") for arg in ssh_args)  # the user's own, or the lab's


def test_nothing_in_the_repository_turns_host_key_checks_off():
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    offenders = []
    for name in tracked:
        path = REPO / name
        if name == Path(__file__).relative_to(REPO).as_posix() or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for needle in ("StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "host_key_checking = False",
                       "HOST_KEY_CHECKING"):
            if needle in text:
                offenders.append(f"{name}: {needle}")
    assert offenders == []


def test_lab_inventory_connects_as_the_unprivileged_user_with_its_own_known_hosts():
    group_vars = yaml.safe_load((REPO / "inventories/lab/group_vars/sglang_lab.yml").read_text())
    assert group_vars["ansible_user"] == "fleet"
    assert group_vars["ansible_ssh_common_args"] == "-o UserKnownHostsFile={{ lab_known_hosts }}"
    hosts = yaml.safe_load((REPO / "inventories/lab/hosts.yml").read_text())
    lab = hosts["all"]["children"]["sglang_servers"]["children"]["sglang_lab"]
    assert lab["vars"]["lab_known_hosts"] == "{{ inventory_dir }}/../../.lab/known_hosts/sglang-lab"
    production = yaml.safe_load((REPO / "inventories/production/group_vars/sglang_servers.yml").read_text())
    assert production["ansible_user"] != "root"
    assert "ansible_ssh_common_args" not in production  # production keeps ansible.cfg's checks


def _becomes(node, where, found):
    """Collect `become: true` anywhere in a parsed playbook or task file."""
    if isinstance(node, dict):
        if node.get("become") is True:
            found.append(f"{where}: {node.get('name', '?')}")
        for value in node.values():
            _becomes(value, where, found)
    elif isinstance(node, list):
        for item in node:
            _becomes(item, where, found)
    return found


def test_read_only_plays_never_become_root():
    found = []
    for playbook, role in READ_ONLY.items():
        _becomes(yaml.safe_load((REPO / playbook).read_text()), playbook, found)
        for tasks in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
            _becomes(yaml.safe_load(tasks.read_text()), tasks.relative_to(REPO).as_posix(), found)
    assert found == []
