"""Each role's defaults, argument specs and README tables agree, and its README has the one skeleton."""

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


README_SECTIONS = ["Inputs", "Outputs", "Tasks files", "Example", "Notes"]


def readme_outline(text):
    """(title, the paragraph under it, [(## heading, its text)]) of a README, code blocks skipped."""
    title, lead, sections, fenced = None, [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("# ") and title is None:
            title = line[2:]
        elif not fenced and line.startswith("## "):
            sections.append((line[3:], []))
        elif sections:
            sections[-1][1].append(line)
        elif title is not None:
            lead.append(line)
    paragraph = [line for line in lead if line.strip()]
    return title, paragraph, [(name, "\n".join(body)) for name, body in sections]


@pytest.mark.parametrize("role", sorted(p for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir()),
                         ids=lambda p: p.name)
def test_every_role_readme_has_the_one_skeleton_and_names_its_tasks_files(role):
    title, purpose, sections = readme_outline((role / "README.md").read_text())
    assert title == role.name
    assert len(purpose) == 1, "one line of purpose under the title"
    assert [name for name, _ in sections] == README_SECTIONS
    tasks_files = dict(sections)["Tasks files"]
    unnamed = [p.name for p in sorted((role / "tasks").glob("*.yml"))
               if f"`{p.name}`" not in tasks_files and f"`{p.stem}`" not in tasks_files]
    assert unnamed == [], "every tasks file is named in the README's Tasks files section"
