"""execution-environment.yml (AWX/AAP): `ansible-builder create` writes its build context, the
build's own introspection keeps every pin, the pins are requirements/dev.lock's, and requirements/ee.txt
covers every third-party import of the code that runs on the controller. (The image build itself needs
a registry for the base image: not run here.)"""

import ast
import pathlib
import re
import subprocess
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
EE_TXT = REPO / "requirements" / "ee.txt"
BINDEP = REPO / "requirements" / "bindep.txt"
IMPORT_TO_DIST = {"yaml": "pyyaml", "huggingface_hub": "huggingface-hub"}  # import name -> PyPI name, where they differ


def pins(text):
    """{name: version} of the `name==version` lines (comments and hashes left out)."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;\\#]+)", text, flags=re.M)
    return {name.lower(): version for name, version in found}


def test_create_writes_the_pinned_build_context(tmp_path):
    context = tmp_path / "context"
    p = subprocess.run([BIN / "ansible-builder", "create", "-f", REPO / "execution-environment.yml", "-c", context],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    containerfile = (context / "Containerfile").read_text()
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core==2.19.14 ansible-runner==2.4.3"' in containerfile
    assert 'ARG PYCMD="/usr/bin/python3.11"' in containerfile
    assert "COPY _build/requirements.txt requirements.txt" in containerfile
    assert "COPY _build/bindep.txt bindep.txt" in containerfile
    assert (context / "_build" / "requirements.txt").read_text() == EE_TXT.read_text()
    assert (context / "_build" / "bindep.txt").read_text() == BINDEP.read_text()

    # the build's introspection step (what the image installs from) keeps every pin
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, context / "_build" / "scripts" / "introspect.py", "introspect",
                        f"--user-pip={context / '_build' / 'requirements.txt'}",
                        f"--user-bindep={context / '_build' / 'bindep.txt'}",
                        f"--write-pip={out / 'requirements.txt'}", f"--write-bindep={out / 'bindep.txt'}"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert pins((out / "requirements.txt").read_text()) == pins(EE_TXT.read_text())
    assert [line.split("  #")[0] for line in (out / "bindep.txt").read_text().splitlines()] == [
        "openssh-clients [platform:rpm]", "git-core [platform:rpm]"]


def test_pins_are_the_dev_locks():
    lock = pins((REPO / "requirements" / "dev.lock").read_text())
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())["dependencies"]
    wanted = pins(EE_TXT.read_text())
    wanted.update(pins(ee["ansible_core"]["package_pip"]))
    wanted.update(pins(ee["ansible_runner"]["package_pip"]))
    assert len(wanted) == 12
    assert {name: lock.get(name) for name in wanted} == wanted


def test_ee_requirements_cover_the_controller_imports():
    """Every third-party import of the collection's plugins/ (its filters included) is in ee.txt."""
    imported = set()
    for folder in ("plugins",):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
                imported |= {n.split(".")[0] for n in names}
    third_party = {IMPORT_TO_DIST.get(n, n) for n in imported - set(sys.stdlib_module_names)
                   if n not in ("ansible", "ansible_collections", "__future__")}
    assert third_party == {"packaging", "pyyaml", "huggingface-hub"}
    assert third_party <= set(pins(EE_TXT.read_text()))
