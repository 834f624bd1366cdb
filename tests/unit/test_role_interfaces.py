"""Roles talk through their documented interface only.

A role's private names (`_<role>_*` facts and vars, `__<role>*` registers) are read inside that role
alone; what other roles and the playbooks read is one of its outputs: named `<role>_*` (ansible-lint's
var-naming), declared in the `outputs` entry point of its meta/argument_specs.yml (so that the
misspelled-variable check, plugins/filter/fleet_vars.py, knows it) and listed in its README.
"""

import re

import pytest
import yaml
from ansible_run import REPO

ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir())
CODE = [p for top in ("playbooks", "roles", "plugins", "lab")
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


def declared_outputs(role):
    specs = REPO / "roles" / role / "meta" / "argument_specs.yml"
    if not specs.exists():
        return {}
    return (yaml.safe_load(specs.read_text(encoding="utf-8"))["argument_specs"].get("outputs") or {}).get("options", {})


@pytest.mark.parametrize("role", ROLES)
def test_a_roles_outputs_are_its_own_names_declared_and_in_its_readme(role):
    readme = (REPO / "roles" / role / "README.md").read_text(encoding="utf-8")
    for name in outputs(role):
        owner = next((r for r in ROLES if name.startswith(f"{r}_")), None)
        assert owner is not None, f"{role}'s output {name} is named after no role (<role>_*)"
        if owner == role:
            assert f"`{name}`" in readme, f"roles/{role}/README.md does not list its output {name}"
        if (REPO / "roles" / owner / "meta" / "argument_specs.yml").exists():
            assert name in declared_outputs(owner), f"{name} is not in roles/{owner}/meta/argument_specs.yml's outputs"
    assert set(declared_outputs(role)) <= set(outputs(role)), "an output is declared that the role never sets"


def test_the_variable_check_accepts_a_roles_outputs_and_still_refuses_a_misspelling():
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("fleet_vars", REPO / "plugins" / "filter" / "fleet_vars.py")
    fleet_vars = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fleet_vars)
    role = str(REPO / "roles" / "sglang_release")
    assert fleet_vars.unknown_role_vars(["sglang_release_in_sync", "sglang_release_records"], role) == []
    assert fleet_vars.unknown_role_vars(["sglang_release_in_synk"], role) == [
        "unknown variable sglang_release_in_synk: did you mean sglang_release_in_sync?"]


def test_the_scan_sees_the_outputs_the_playbooks_rely_on():
    # deploy.yml's in-sync gate and rollout batches, verify's result for the release record
    assert "sglang_release_in_sync" in outputs("sglang_release")
    assert "sglang_service_rollout_serial" in outputs("sglang_service")
    assert "sglang_verify_result" in outputs("sglang_verify")
