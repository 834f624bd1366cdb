"""Pure-logic tests of sglang_source on small fake trees (no wheels needed)."""
import textwrap

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.source import (
    FLAG_HISTORY,
    Runtime,
    UnknownLayout,
    load_source,
    normalise_argv,
    parse_human_readable_int,
    validate_argv,
    vtuple,
)


def _tree(tmp_path, server_args: str, version="9.9.9"):
    pkg = tmp_path / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "version.py").write_text(f'__version__ = "{version}"\n')
    (pkg / "srt" / "server_args.py").write_text(textwrap.dedent(server_args))
    return pkg


def _era_a(n_extra=60):
    extra = "".join(f'        parser.add_argument("--opt-{i}", type=int, default=ServerArgs.x)\n'
                    for i in range(n_extra))
    return (
        "import argparse\nimport dataclasses\nMODES = ['a', 'b']\n\n"
        "@dataclasses.dataclass\nclass ServerArgs:\n    x: int = 7\n    mode: str = 'a'\n\n"
        "    @staticmethod\n    def add_cli_args(parser):\n"
        '        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1)\n'
        '        parser.add_argument("--mode", choices=MODES, default=ServerArgs.mode)\n'
        '        parser.add_argument("--flag", action="store_true")\n'
        '        parser.add_argument("--dyn", choices=registry(), default=os.environ.get("X"))\n'
        + extra +
        "\n    @classmethod\n    def from_cli_args(cls, args):\n"
        "        args.tp_size = args.tensor_parallel_size\n")


def test_unknown_layout_no_server_args(tmp_path):
    (tmp_path / "sglang").mkdir()
    with pytest.raises(UnknownLayout, match="no srt/server_args.py; expected the installed sglang/"):
        load_source(tmp_path / "sglang")


def test_unknown_layout_no_serverargs_class(tmp_path):
    pkg = _tree(tmp_path, "X = 1\n")
    with pytest.raises(UnknownLayout) as e:
        load_source(pkg)
    assert str(e.value) == ("sglang/srt/server_args.py: no class ServerArgs and no _INPUT_NAMESPACES; "
                            "unknown sglang flag layout")


def test_unknown_layout_no_add_argument(tmp_path):
    pkg = _tree(tmp_path, "class ServerArgs:\n    def add_cli_args(parser):\n        pass\n")
    with pytest.raises(UnknownLayout, match="neither calls parser.add_argument on a @dataclass"):
        load_source(pkg)


def test_unknown_layout_too_few_flags(tmp_path):
    pkg = _tree(tmp_path, _era_a(n_extra=0))
    with pytest.raises(UnknownLayout, match="era A: only 4 flags found; the flag layout changed"):
        load_source(pkg)


def test_era_a_fake_tree(tmp_path):
    src = load_source(_tree(tmp_path, _era_a()))
    assert (src.version, src.era, len(src.flags)) == ("9.9.9", "A", 64)
    tp, mode, flag, dyn = src.flags[:4]
    assert (tp.dest, tp.field, tp.type, tp.line) == ("tensor_parallel_size", "tp_size", "int", 12)
    assert (mode.choices, mode.default) == (["a", "b"], "a")
    assert (flag.action, flag.default, flag.nargs) == ("store_true", False, 0)
    assert dyn.choices == Runtime("registry()")
    assert dyn.default == Runtime('os.environ.get("X")')
    assert src.flags[4].default == 7
    assert normalise_argv(src, ["--tp", "2", "--mode=b", "--flag"]) == {
        "tp_size": 2, "mode": "b", "flag": True}
    assert normalise_argv(src, ["--dyn", "anything"]) == {"dyn": "anything"}


def test_validate_messages_fake_tree(tmp_path):
    src = load_source(_tree(tmp_path, _era_a()))
    probs = validate_argv(src, ["--mode", "c", "--opt", "1", "--tp"])
    assert [(p.kind, p.flag) for p in probs] == [("bad_choice", "--mode"), ("ambiguous", "--opt"),
                                                 ("missing_value", "--tp")]
    assert probs[0].message == ("--mode: value not accepted by sglang 9.9.9: argparse fails with "
                                "'argument --mode: invalid choice: 'c' (choose from 'a', 'b')'. "
                                "Use one of: a, b.")
    assert probs[1].suggestion[:2] == ["--opt-0", "--opt-1"]
    assert probs[2].message == ("--tp-size needs a value in sglang 9.9.9: argparse fails with 'argument "
                                "--tensor-parallel-size/--tp-size: expected one argument'. Give it a value.")


def test_flag_history_replacement_for_unknown(tmp_path):
    src = load_source(_tree(tmp_path, _era_a()))
    [p] = validate_argv(src, ["--enable-piecewise-cuda-graph"])
    assert (p.kind, p.suggestion) == ("removed", [])
    assert p.message.endswith("Remove it; it has no replacement in 9.9.9.")
    assert "--cuda-graph-max-bs" in FLAG_HISTORY


def test_human_readable_int():
    assert [parse_human_readable_int(x) for x in ("128k", "1Ki", "25.6k", "42")] == [128000, 1024, 25600, 42]


def test_version_order():
    assert vtuple("0.5.9") < vtuple("0.5.13") < vtuple("0.5.13.post1") < vtuple("0.5.14")
