"""ml_env's install in one task: sglang.fleet.sglang_venv on localhost, on the real sglang 0.5.11 wheel
and the real uv wheel (the controller wheelhouse of tests/unit/test_sglang_wheelhouse.py).

The folders, the wheels (one by one, or one tar), the lock, uv unpacked from its checked wheel, the
venv built offline and marked complete, each owned by root with the role's modes; --check changes
nothing and says what a real run would build; a failed step removes the half-built venv and says
which step failed and why, in the words the role's rescue used.
"""

import hashlib
import json
import os
import pathlib
import platform
import re
import stat
import subprocess
import sys

import jinja2
import pytest
from ansible_run import REPO, run_module

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.release import venv_build
from ansible_collections.sglang.fleet.plugins.module_utils.release.venv_build import (
    CHECK,
    CREATE,
    INSTALL,
    MARK,
    REMOVE,
    StepFailed,
    build,
    create_argv,
    failure_message,
    install_argv,
    truncate,
)
from ansible_collections.sglang.fleet.plugins.module_utils.release.wheels import bundle

WHEELHOUSE = REPO / ".cache" / "ml-env-wheelhouse"  # test_sglang_wheelhouse.py's
PYTHON = str(pathlib.Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}")
HOST = {"python_version": f"{sys.version_info[0]}.{sys.version_info[1]}", "architecture": platform.machine(),
        "glibc": platform.libc_ver()[1]}
TAIL = ("The half-built venv was removed and nothing else changed; the running service still uses its previous "
        "environment. Fix the cause and re-run.")


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def owner_mode(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid, oct(stat.S_IMODE(st.st_mode))


@pytest.fixture(scope="module")
def wheels():
    """The controller's light lock of sglang 0.5.11 and the uv 0.13.9 wheel (sglang_wheelhouse's result)."""
    rc, result, out = run_module({"version": "0.5.11", "dest": str(WHEELHOUSE), "profile": "light",
                                  "uv_version": "0.13.9", **HOST}, module="sglang_wheelhouse", timeout=600)
    assert rc == 0, out
    return result


def task_args(pushed, root, **over):
    """What roles/ml_env/tasks/install.yml passes (`pushed`: sglang_wheelhouse's result), for a root of `root`."""
    venv = f"{root}/sglang-0.5.11"
    return {"venv": venv, "python": PYTHON, "installer": "uv", "profile": "light",
            "folders": [str(root), f"{root}/wheelhouse", f"{root}/locks"], "wheelhouse": f"{root}/wheelhouse",
            "bundle": "", "wheels": [pushed["wheel"], pushed["uv_wheel"]], "lock": f"{root}/locks/sglang-0.5.11-light.txt",
            "lock_content": pushed["lock"], "marker": f"{venv}/.sglang-fleet-lock.txt", "uv": f"{root}/.tools/uv-0.13.9",
            "uv_wheel": os.path.basename(pushed["uv_wheel"]), "uv_lock": f"{root}/locks/uv-0.13.9.txt",
            "uv_lock_content": pushed["uv_lock"], "uv_version": "0.13.9", **over}


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the role's files belong to root (run as root, as CI does)")


@pytest.mark.wheels
@needs_root
def test_the_wheels_and_the_lock_are_pushed_and_the_venv_built_offline(wheels, tmp_path):
    root = tmp_path / "ml-env"
    args = task_args(wheels, root)
    rc, result, out = run_module(args, module="sglang_venv", timeout=300)
    assert rc == 0 and result["changed"] is True and result["venv"] == args["venv"], out
    for folder in ("", "wheelhouse", "locks"):
        assert owner_mode(root / folder) == (0, 0, "0o755")
    pushed = sorted(p.name for p in (root / "wheelhouse").iterdir())
    assert pushed == sorted(os.path.basename(w) for w in args["wheels"])
    for wheel in args["wheels"]:
        assert sha256(root / "wheelhouse" / os.path.basename(wheel)) == sha256(wheel)
        assert owner_mode(root / "wheelhouse" / os.path.basename(wheel)) == (0, 0, "0o644")
    for path, text in ((args["lock"], wheels["lock"]), (args["uv_lock"], wheels["uv_lock"]), (args["marker"], wheels["lock"])):
        assert pathlib.Path(path).read_text() == text and owner_mode(path) == (0, 0, "0o644")
    assert owner_mode(f"{args['uv']}/bin/uv") == (0, 0, "0o755")
    got = json.loads(venv_python(args, "import importlib.metadata as m, json; "
                                       "print(json.dumps(sorted(d.metadata['Name'] for d in m.distributions())))"))
    assert got == ["sglang"]  # the light lock: the sglang wheel alone (--no-deps)


def venv_python(args, code):
    return subprocess.run([f"{args['venv']}/bin/python", "-c", code], capture_output=True, text=True, check=True).stdout


@pytest.mark.wheels
@needs_root
def test_the_full_profiles_tar_is_unpacked_into_the_wheelhouse(wheels, tmp_path):
    root = tmp_path / "ml-env"
    tar = bundle([wheels["wheel"], wheels["uv_wheel"]], wheels["lock"], "test", str(tmp_path / "controller"))
    args = task_args(wheels, root, bundle=tar, wheels=[])
    rc, result, out = run_module(args, module="sglang_venv", timeout=300)
    assert rc == 0 and result["changed"] is True, out
    for wheel in (wheels["wheel"], wheels["uv_wheel"]):
        pushed = root / "wheelhouse" / os.path.basename(wheel)
        assert sha256(pushed) == sha256(wheel) and owner_mode(pushed) == (0, 0, "0o644")
    assert pathlib.Path(args["marker"]).read_text() == wheels["lock"]


@pytest.mark.wheels
def test_check_mode_changes_nothing_and_says_what_a_real_run_would_build(wheels, tmp_path):
    root = tmp_path / "ml-env"
    rc, result, out = run_module(task_args(wheels, root), module="sglang_venv", check=True)
    assert rc == 0 and result["changed"] is True, out
    assert result["msg"] == (f"localhost (--check): a real run would build {root}/sglang-0.5.11 from its lock (offline, "
                             "every hash checked); check mode cannot build it, nor read what it would hold")
    assert not root.exists()


@pytest.mark.wheels
@needs_root
def test_a_uv_wheel_the_lock_does_not_name_is_refused_and_no_venv_is_left(wheels, tmp_path):
    root = tmp_path / "ml-env"
    other = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, wheels["uv_lock"])
    args = task_args(wheels, root, uv_lock_content=other)
    rc, result, out = run_module(args, module="sglang_venv", timeout=300)
    assert rc != 0, out
    name = os.path.basename(wheels["uv_wheel"])
    assert result["msg"] == (
        f'Building {root}/sglang-0.5.11 with uv failed in "Refuse a uv wheel whose sha256 is not in the lock": {name} on '
        f"the host has sha256 {sha256(wheels['uv_wheel'])}, none of the {len(re.findall('sha256:', other))} that "
        f"{root}/locks/uv-0.13.9.txt locks for uv 0.13.9: the wheelhouse changed after it was locked; remove the wheel "
        f"from the controller's wheelhouse and deploy again.. {TAIL}")
    assert result["step"] == "Refuse a uv wheel whose sha256 is not in the lock"
    assert not pathlib.Path(args["venv"]).exists() and not pathlib.Path(args["uv"]).exists()


@pytest.mark.wheels
@needs_root
def test_a_failed_install_names_its_step_and_the_installers_error_and_removes_the_venv(wheels, tmp_path):
    root = tmp_path / "ml-env"
    args = task_args(wheels, root, lock_content=re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "1" * 64, wheels["lock"]))
    rc, result, out = run_module(args, module="sglang_venv", timeout=300)
    assert rc != 0, out
    prefix = f'Building {root}/sglang-0.5.11 with uv failed in "Install SGLang into the venv": '
    assert result["msg"].startswith(prefix) and result["msg"].endswith(f". {TAIL}"), result["msg"]
    assert result["msg"][len(prefix):-len(TAIL) - 2] == result["stderr"].strip()
    assert "Hash mismatch for `sglang==0.5.11`" in result["stderr"] and result["rc"] == 1
    assert result["cmd"][:3] == [f"{root}/.tools/uv-0.13.9/bin/uv", "pip", "install"]
    assert not pathlib.Path(args["venv"]).exists()
    assert pathlib.Path(args["lock"]).read_text() == args["lock_content"]  # written before the build, as before


def test_the_commands_are_the_roles():
    p = {"installer": "uv", "profile": "full", "python": "/usr/bin/python3", "venv": "/e/sglang-1", "uv": "/e/.tools/uv",
         "wheelhouse": "/e/wheelhouse", "lock": "/e/locks/l.txt"}
    assert create_argv(p) == ["/e/.tools/uv/bin/uv", "venv", "--quiet", "--python", "/usr/bin/python3", "/e/sglang-1"]
    assert install_argv(p) == ["/e/.tools/uv/bin/uv", "pip", "install", "--python", "/e/sglang-1/bin/python",
                               "--compile-bytecode", "--require-hashes", "--no-index", "--find-links", "/e/wheelhouse",
                               "-r", "/e/locks/l.txt"]
    assert install_argv({**p, "profile": "light"})[5:] == ["--require-hashes", "--no-index", "--find-links",
                                                          "/e/wheelhouse", "-r", "/e/locks/l.txt", "--no-deps"]
    pip = {**p, "installer": "pip"}
    assert create_argv(pip) == ["/usr/bin/python3", "-m", "venv", "/e/sglang-1"]
    assert install_argv(pip) == ["/e/sglang-1/bin/pip", "install", "--disable-pip-version-check", "--no-input",
                                 "--require-hashes", "--no-index", "--find-links", "/e/wheelhouse", "-r", "/e/locks/l.txt"]


def fake_build(tmp_path, answers):
    """build() with pip (no uv steps) and commands answered by `answers` {step name: (rc, stderr)}."""
    venv = tmp_path / "sglang-1"
    lock = tmp_path / "lock.txt"
    lock.write_text("sglang==1 --hash=sha256:" + "a" * 64 + "\n")
    p = {"installer": "pip", "profile": "light", "python": "/usr/bin/python3", "venv": str(venv), "uv": "",
         "wheelhouse": str(tmp_path), "lock": str(lock), "marker": str(venv / ".sglang-fleet-lock.txt")}
    steps = {tuple(create_argv(p)): CREATE, tuple(install_argv(p)): INSTALL}
    ran = []

    def run(argv):
        step = steps.get(tuple(argv), CHECK)
        ran.append(step)
        if step == CREATE:
            (venv / "bin").mkdir(parents=True)
            (venv / "bin" / "python").touch()
        rc, err = answers.get(step, (0, ""))
        return rc, "", err

    return p, run, ran


def test_a_venv_missing_installed_files_is_not_marked_complete(tmp_path):
    p, run, ran = fake_build(tmp_path, {CHECK: (1, "installed files missing: /e/sglang-1/lib/x.py")})
    (tmp_path / "sglang-1").mkdir()
    (tmp_path / "sglang-1" / "half-built").touch()
    with pytest.raises(StepFailed) as failed:
        build(p, run)
    assert (failed.value.step, failed.value.detail) == (CHECK, "installed files missing: /e/sglang-1/lib/x.py")
    assert ran == [CREATE, INSTALL, CHECK]  # the half-built venv was removed first: created again
    assert not (tmp_path / "sglang-1" / "half-built").exists() and not os.path.exists(p["marker"])


def test_a_build_that_passes_every_step_is_marked_with_its_lock(tmp_path):
    p, run, ran = fake_build(tmp_path, {})
    build(p, run)
    assert ran == [CREATE, INSTALL, CHECK]
    assert pathlib.Path(p["marker"]).read_text() == pathlib.Path(p["lock"]).read_text()


def test_a_step_that_cannot_run_its_program_says_why(tmp_path):
    p, _, _ = fake_build(tmp_path, {})

    def run(argv):
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    with pytest.raises(StepFailed) as failed:
        build(p, run)
    assert failed.value.step == CREATE
    assert failed.value.detail == "[Errno 2] No such file or directory: '/usr/bin/python3'"


def test_the_failure_message_is_the_rescues():
    assert failure_message("/opt/ml-env/sglang-1", "uv", INSTALL, "  error: No space left on device (os error 28)\n") == (
        'Building /opt/ml-env/sglang-1 with uv failed in "Install SGLang into the venv": error: No space left on device '
        f"(os error 28). {TAIL}")
    # Jinja's truncate(1500), which the rescue used: kept up to 1505 characters, else cut at a word with "..."
    assert truncate("x" * 1505) == "x" * 1505
    assert truncate("word " * 400) == "word " * 298 + "word..."
    env = jinja2.Environment()
    for text in ("x" * 1505, "x" * 1506, "word " * 400, "a" * 1499 + " b" * 10, "short"):
        assert truncate(text) == env.from_string("{{ t | truncate(1500) }}").render(t=text)
    assert REMOVE == "Remove a half-built or outdated environment" and MARK == "Mark the environment as complete"


def test_a_venv_that_cannot_be_removed_says_what_the_file_module_said(tmp_path, monkeypatch):
    (tmp_path / "venv").mkdir()

    def refuse(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(venv_build.shutil, "rmtree", refuse)
    with pytest.raises(SglangFleetError) as refused:
        venv_build.remove_path(str(tmp_path / "venv"))
    assert str(refused.value) == f"rmtree failed: [Errno 13] Permission denied: '{tmp_path / 'venv'}'"
