"""Option set of sglang_source's parser == the REAL SGLang parser, built from the wheel.

The real parser comes from tests/source/real_parser_dump.py, run in a separate interpreter
(`python -S -s`: stdlib only) that executes sglang's own ``server_args.py`` / ``arg_groups/`` with
every other import stubbed. Era C needs msgspec; it is pip-installed (from PyPI) into
``.cache/msgspec-py311`` once.
"""
import json
import pathlib
import subprocess
import sys

import pytest
from ansible.module_utils.sglang_source import _vtuple, load_source
from wheels import CACHE, _pip_python, sglang_source_tree

pytestmark = pytest.mark.wheels
DUMP = pathlib.Path(__file__).with_name("real_parser_dump.py")
MSGSPEC = CACHE / f"msgspec-py{sys.version_info.major}{sys.version_info.minor}"


def _msgspec_dir() -> pathlib.Path:
    if not (MSGSPEC / "msgspec").is_dir():
        subprocess.run([_pip_python(), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--only-binary=:all:", "--python-version",
                        f"{sys.version_info.major}.{sys.version_info.minor}",
                        "--target", str(MSGSPEC), "msgspec"], check=True, capture_output=True)
    return MSGSPEC


def _real_actions(version: str) -> list[dict]:
    tree = sglang_source_tree(version).parent
    extra = [str(_msgspec_dir())] if _vtuple(version) >= (0, 5, 20) else []
    proc = subprocess.run([sys.executable, "-S", "-s", str(DUMP), str(tree), *extra],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("version", ["0.4.10.post2", "0.5.11", "0.5.13.post1", "0.5.18", "0.5.20",
                                     "0.5.23"])
def test_option_strings_equal_real_parser(version):
    real = _real_actions(version)
    src = load_source(sglang_source_tree(version))
    # same option strings, in the same order (the order decides argparse's ambiguity messages)
    assert src.option_strings() == [o for a in real for o in a["option_strings"]]
    mine = {tuple(f.option_strings): f for f in src.flags}
    for a in real[1:]:  # [0] is -h/--help
        f = mine[tuple(a["option_strings"])]
        assert (f.dest, f.nargs, f.required) == (a["dest"], a["nargs"], a["required"]), a
