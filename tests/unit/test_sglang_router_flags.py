"""The sglang_router_flags module (roles/sglang_router): router flags checked with the argparse of
the real sglang-router release from PyPI (its wheel, compiled extension included), before a host changes."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

import pytest
from wheels import CACHE, WHEELS, _lock, pip_python

pytestmark = pytest.mark.wheels

REPO = pathlib.Path(__file__).resolve().parents[2]
VERSION = "0.3.2"


@pytest.fixture(scope="module")
def package():
    """<repo>/.cache/sglang-src/sglang-router-<VERSION>/sglang_router, from the PyPI wheel (downloaded once)."""
    dest = CACHE / "sglang-src" / f"sglang-router-{VERSION}"
    WHEELS.mkdir(parents=True, exist_ok=True)
    with _lock(WHEELS / f".sglang-router-{VERSION}.lock"):
        if not (dest / ".complete").exists():
            wheels = sorted(WHEELS.glob(f"sglang_router-{VERSION}-*manylinux*x86_64*.whl"))
            if not wheels:
                subprocess.run([pip_python(), "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                                "--disable-pip-version-check", "--platform", "manylinux2014_x86_64",
                                f"sglang-router=={VERSION}", "-d", str(WHEELS)], check=True)
                wheels = sorted(WHEELS.glob(f"sglang_router-{VERSION}-*manylinux*x86_64*.whl"))
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = pathlib.Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
            with zipfile.ZipFile(wheels[0]) as zf:
                zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("sglang_router/")])
            if dest.exists():  # a half-finished earlier attempt (no marker)
                shutil.rmtree(dest)
            os.replace(tmp, dest)
            (dest / ".complete").write_text(wheels[0].name + "\n")
    return dest / "sglang_router"


def check(package, argv):
    """(rc, result) of `ansible localhost -m sglang_router_flags`, as preflight.yml runs it."""
    cmd = [str(pathlib.Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,",
           "-e", f"ansible_python_interpreter={sys.executable}",
           "-m", "sglang.fleet.sglang_router_flags", "-a", json.dumps({"source_dir": str(package), "argv": argv, "host": "lb1"})]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
           "ANSIBLE_NOCOLOR": "1"}
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    start = p.stdout.find("=> {")
    assert start >= 0, p.stdout + p.stderr
    return p.returncode, json.loads(p.stdout[start + 3:])


def test_a_misspelled_flag_is_refused_with_the_closest_flag_of_the_release(package):
    rc, result = check(package, ["--worker-urls", "http://10.0.0.1:30000", "--polcy", "round_robin"])
    assert rc != 0
    msg = result["msg"]
    assert msg.startswith("lb1: sglang_router_args are refused by the installed sglang-router's own argparse: "
                          "unrecognized arguments: --polcy (closest flags of this release: --policy")  # closest first
    assert msg.endswith("Fix sglang_router_args (keys are the argparse dests: policy for --policy; "
                        "`python -m sglang_router.launch_router --help` lists them); nothing was changed")


def test_a_bad_choice_is_refused_with_the_release_choices(package):
    rc, result = check(package, ["--worker-urls", "http://10.0.0.1:30000", "--policy", "least_busy"])
    assert rc != 0
    assert ("argument --policy: invalid choice: 'least_busy' (choose from 'random', 'round_robin', 'cache_aware', "
            "'power_of_two', 'manual')") in result["msg"]


def test_a_valid_argv_is_accepted_and_parsed_as_the_router_would(package):
    rc, result = check(package, ["--worker-urls", "http://10.0.0.1:30000", "http://10.0.0.2:30000",
                                 "--host", "0.0.0.0", "--port", "8080", "--policy", "cache_aware",
                                 "--disable-retries", "--tool-call-parser", "qwen"])
    assert rc == 0, result
    parsed = result["parsed"]
    assert parsed["worker_urls"] == ["http://10.0.0.1:30000", "http://10.0.0.2:30000"]
    assert (parsed["host"], parsed["port"], parsed["policy"]) == ("0.0.0.0", 8080, "cache_aware")
    assert parsed["disable_retries"] is True and parsed["tool_call_parser"] == "qwen"
    assert parsed["retry_max_retries"] == 5  # untouched: the release's own default (router_args.py:77)
