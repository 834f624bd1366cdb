"""Each role's defaults, argument specs and README tables agree."""

import pathlib
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists())


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_every_default_is_specified_and_every_role_option_has_a_default(role):
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    own = {name for name in options if name.startswith(role.name + "_")}
    assert set(defaults) == own, "defaults/main.yml and meta/argument_specs.yml disagree"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_vars_hold_no_tunables(role):
    vars_file = role / "vars" / "main.yml"
    if vars_file.exists():
        names = yaml.safe_load(vars_file.read_text()) or {}
        assert all(name.startswith("_") for name in names), "vars/ beats the inventory: tunables go in defaults/"


def test_readme_variable_tables_are_current():
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "variables_doc.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
