"""Roles talk through their documented interface only.

A role's private names (`_<role>_*` facts and vars, `__<role>*` registers) are read inside that role
alone; what other roles and the playbooks read is a public output, listed in the role's README, whose
name no role's misspelled-variable check (roles/sglang_common/tasks/check_vars.yml) mistakes for
one of its inputs.
"""

import re

import pytest
import yaml
from ansible_run import REPO

ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
CODE = [p for top in ("playbooks", "roles", "filter_plugins", "library", "action_plugins", "module_utils", "lab")
        for p in (REPO / top).rglob("*") if p.suffix in (".yml", ".yaml", ".j2", ".py") and p.is_file()]
CODE += [p for p in REPO.glob("*.yml")]


def private_names(role):
    return re.compile(rf"(?<![A-Za-z0-9_])(?:_{re.escape(role)}_[a-z0-9_]+|__{re.escape(role)}(?:_[a-z0-9_]+)?)\b")


def test_no_role_or_playbook_reads_another_roles_private_names():
    crossings = []
    for path in CODE:
        rel = path.relative_to(REPO)
        text = path.read_text(encoding="utf-8", errors="replace")
        for role in ROLES:
            if rel.parts[:2] == ("roles", role):
                continue
            crossings += [f"{rel}: {name}" for name in sorted(set(private_names(role).findall(text)))]
    assert crossings == []


def tasks(items):
    for item in items or []:
        if not isinstance(item, dict):
            continue
        yield item
        for key in ("block", "rescue", "always"):
            yield from tasks(item.get(key))


def outputs(role):
    """The facts a role leaves for others: set_fact keys and registers without a leading underscore."""
    found = set()
    for path in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
        for task in tasks(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if isinstance(task.get("register"), str):
                found.add(task["register"])
            facts = task.get("ansible.builtin.set_fact") or task.get("set_fact")
            if isinstance(facts, dict):
                found.update(k for k in facts if k != "cacheable")
    return sorted(n for n in found if not n.startswith("_"))


@pytest.mark.parametrize("role", ROLES)
def test_a_roles_public_outputs_are_in_its_readme_and_look_like_no_roles_input(role):
    readme = (REPO / "roles" / role / "README.md").read_text(encoding="utf-8")
    for name in outputs(role):
        assert f"`{name}`" in readme, f"roles/{role}/README.md does not list its output {name}"
        clashes = [r for r in ROLES if name.startswith(f"{r}_")]
        assert clashes == [], f"{role}'s output {name} looks like an input of {clashes} (check_vars would refuse it)"


def test_the_scan_sees_the_outputs_the_playbooks_rely_on():
    # deploy.yml's in-sync gate and rollout batches, verify's result for the release record
    assert "sglang_deploy_state" in outputs("sglang_release")
    assert "sglang_rollout_serial" in outputs("sglang_service")
    assert "sglang_verification" in outputs("sglang_verify")
