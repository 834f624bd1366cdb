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
from wheels import VERSIONS, msgspec_dir, sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.source import (
    FLAG_HISTORY,
    load_source,
    validate_argv,
    vtuple,
)

pytestmark = pytest.mark.wheels
DUMP = pathlib.Path(__file__).with_name("real_parser_dump.py")
def _real_parser(version: str, *args: str, stdin: str | None = None):
    tree = sglang_source_tree(version).parent
    extra = [str(msgspec_dir())] if vtuple(version) >= (0, 5, 20) else []
    proc = subprocess.run([sys.executable, "-S", "-s", str(DUMP), *args, str(tree), *extra], input=stdin,
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _real_actions(version: str) -> list[dict]:
    return _real_parser(version)


# Releases of issue #11's defects, beside the ones tests/wheels.py lists
DEFECT_RELEASES = ("0.5.3", "0.5.15.post1")


@pytest.mark.parametrize("version", ["0.4.10.post2", "0.5.3", "0.5.11", "0.5.13.post1", "0.5.15.post1", "0.5.18",
                                     "0.5.20", "0.5.23"])
def test_option_strings_equal_real_parser(version):
    real = _real_actions(version)
    src = load_source(sglang_source_tree(version))
    # same option strings, in the same order (the order decides argparse's ambiguity messages)
    assert src.option_strings() == [o for a in real for o in a["option_strings"]]
    mine = {tuple(f.option_strings): f for f in src.flags}
    for a in real[1:]:  # [0] is -h/--help
        f = mine[tuple(a["option_strings"])]
        assert (f.dest, f.nargs, f.required) == (a["dest"], a["nargs"], a["required"]), a


def _sample_value(src, *options):
    """A value the first of ``options`` (old flag, then its replacements) accepts: a choice, else "1"."""
    for o in options:
        f = src.by_option.get(o)
        if f is not None and isinstance(f.choices, list) and f.choices:
            return str(f.choices[0])
    return "1"


# How many suggestions each release's test checks (a count that drops means suggestions were lost)
SUGGESTIONS = {"0.4.10.post2": 0, "0.5.3": 7, "0.5.6": 1, "0.5.9": 1, "0.5.11": 1, "0.5.13.post1": 6,
               "0.5.15.post1": 19, "0.5.16": 19, "0.5.18": 21, "0.5.19": 21, "0.5.20": 23, "0.5.21": 23,
               "0.5.22": 23, "0.5.23": 24}


@pytest.mark.parametrize("version", sorted(set(VERSIONS) | set(DEFECT_RELEASES) | {"0.5.21", "0.5.22"}))
def test_suggested_replacements_parse_with_the_real_parser(version):
    """Every replacement validate_argv suggests for a removed or renamed flag is argv the release accepts."""
    src = load_source(sglang_source_tree(version))
    olds = [f.option_strings[0] for f in src.flags
            if f.deprecated_alias_of or f.removed_message or f.action.startswith("Deprecated")]
    olds += [o for o in FLAG_HISTORY if not src.has(o)]
    cases = []
    for old in olds:
        f = src.by_option.get(old)
        takes_value = f.takes_value if f is not None else True
        repl = [o for o, _ in FLAG_HISTORY.get(old, ("", []))[1]]
        argv = [old, _sample_value(src, old, *repl)] if takes_value else [old]
        for p in validate_argv(src, ["--model-path", "m", *argv]):
            if p.kind in ("removed", "renamed"):
                cases += [(old, s) for s in p.suggestion]
    results = _real_parser(version, "--parse", stdin=json.dumps([["--model-path", "m", *s.split()]
                                                                 for _, s in cases]))
    bad = [(old, s, r["error"]) for (old, s), r in zip(cases, results) if not r["ok"]]
    assert bad == []
    assert len(cases) == SUGGESTIONS[version], cases
