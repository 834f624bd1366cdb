"""`make sweep`'s core (scripts/release_sweep.py) on a fixed sample of releases, and its failure modes.

The sample spans the three layouts and uses wheels other tests already download (tests/wheels.py
VERSIONS, test_real_parser.py's DEFECT_RELEASES), so CI fetches nothing more. The full sweep over
every release on PyPI is `make sweep` (docs/release-sweep.md).
"""
import copy
import importlib.util
import json
import sys
import textwrap

import pytest
from wheels import REPO, sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.source import Runtime, load_source

pytestmark = pytest.mark.wheels

_spec = importlib.util.spec_from_file_location("release_sweep", REPO / "scripts" / "release_sweep.py")
sweep = sys.modules["release_sweep"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)

# era A (0.5.3: DeprecatedAction raises), B, C (first and newest tested)
SAMPLE = ("0.4.10.post2", "0.5.3", "0.5.16", "0.5.20", "0.5.23")


@pytest.mark.parametrize("version", SAMPLE)
def test_reader_equals_real_parser(version):
    row = sweep.check_release(version)
    assert row.failure is None
    assert row.mismatches == []
    assert row.disagreements == []
    assert row.bad_suggestions == []
    # the comparison ran over the whole table, not a stubbed remnant of it
    assert row.options > 100 and row.compared["dest"] == row.flags
    assert row.compared["choices"] > 0.9 * row.flags and row.compared["default"] > 0.9 * row.flags
    # argparse's own behaviour, whatever the release: help exits, a typo is unknown
    assert (row.verdicts["--help"], row.verdicts["--he"], row.verdicts["--tp-szie 2"]) == ("help", "help", "unknown")
    assert "spec EAGLE 3/1/4" in row.ct129


def test_comparison_reports_each_kind_of_difference():
    """A reader table that differs from the real parser in any compared attribute is reported."""
    pkg = sglang_source_tree("0.5.11")
    real = sweep.real_parser(pkg)
    clean = load_source(pkg)
    row = sweep.Row("0.5.11")
    sweep.compare(clean, real, row)
    assert row.mismatches == []

    src = copy.deepcopy(clean)
    for cached in ("by_option", "by_dest"):
        src.__dict__.pop(cached, None)
    flags = src.by_option
    src.flags.remove(flags["--enable-metrics"])
    flags["--attention-backend"].choices = [c for c in flags["--attention-backend"].choices if c != "triton"]
    flags["--mem-fraction-static"].type = "int"
    flags["--schedule-policy"].default = "lifo"
    flags["--tp-size"].nargs = "+"
    flags["--trust-remote-code"].action = "store"
    src.__dict__.pop("by_option")  # --enable-metrics is gone
    row = sweep.Row("0.5.11")
    sweep.compare(src, real, row)
    found = "\n".join(row.mismatches)
    for expected in ("missing --enable-metrics", "--attention-backend: choices", "--mem-fraction-static: type",
                     "--schedule-policy: default", "nargs reader '+'", "--trust-remote-code: action"):
        assert expected in found
    # a value the reader leaves to run time is not compared (its parser accepts anything there)
    flags["--schedule-policy"].default = Runtime("os.environ['X']")
    row = sweep.Row("0.5.11")
    sweep.compare(src, real, row)
    assert "--schedule-policy default" in row.loose
    assert not any(m.startswith("--schedule-policy") for m in row.mismatches)


def _tree(tmp_path, server_args: str | None):
    pkg = tmp_path / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "version.py").write_text('__version__ = "9.9.9"\n')
    if server_args is not None:
        (pkg / "srt" / "server_args.py").write_text(textwrap.dedent(server_args))
    return pkg


def _run(tmp_path, capsys, pkg):
    out = tmp_path / "sweep.md"
    rc = sweep.main(["--tree", str(pkg), "--out", str(out)])
    return rc, capsys.readouterr().err, out.read_text()


def test_tree_without_server_args_fails_loudly(tmp_path, capsys):
    pkg = _tree(tmp_path, None)
    rc, err, page = _run(tmp_path, capsys, pkg)
    assert rc == 1
    assert f"FAILED {pkg}: unknown layout" in err and "no srt/server_args.py" in err
    assert "**FAILED**: unknown layout" in page and "failed 1" in page


def test_newer_layout_fails_loudly(tmp_path, capsys):
    """A server_args.py whose flags are registered some new way: the reader refuses it."""
    pkg = _tree(tmp_path, """
        import dataclasses
        from sglang.srt.flag_registry import register_all

        @dataclasses.dataclass
        class ServerArgs:
            model_path: str = None

            @staticmethod
            def add_cli_args(parser):
                register_all(parser, ServerArgs)
        """)
    rc, err, page = _run(tmp_path, capsys, pkg)
    assert rc == 1
    assert "unknown layout" in err and "neither calls parser.add_argument" in err
    assert "**FAILED**" in page


def test_known_layout_read_wrongly_is_a_mismatch(tmp_path, capsys):
    """Era A, but a choice list grows by ``.append`` (the reader evaluates assignments only): the real
    parser (this synthetic server_args.py runs for real) shows the difference, and the sweep fails."""
    lines = ["import dataclasses", "", 'BACKENDS = ["triton", "flashinfer"]', 'BACKENDS.append("fa3")', "", "",
             "@dataclasses.dataclass", "class ServerArgs:", "    model_path: str = None", "",
             "    @staticmethod", "    def add_cli_args(parser):",
             '        parser.add_argument("--model-path", type=str, required=True)',
             '        parser.add_argument("--attention-backend", choices=BACKENDS)']
    lines += [f'        parser.add_argument("--flag-{i}", type=int, default={i})' for i in range(60)]
    pkg = _tree(tmp_path, "\n".join(lines) + "\n")
    rc, err, page = _run(tmp_path, capsys, pkg)
    assert rc == 1
    assert "- mismatch: --attention-backend: choices reader ['flashinfer', 'triton'] vs parser " \
           "['fa3', 'flashinfer', 'triton']" in page
    assert f"{pkg}: 1 mismatches" in err


def test_release_list():
    data = {"releases": {
        "0.4.5": [{"packagetype": "bdist_wheel"}],               # older than the sweep's floor
        "0.4.6": [{"packagetype": "bdist_wheel"}],
        "0.5.10": [{"packagetype": "bdist_wheel"}],
        "0.5.9": [{"packagetype": "bdist_wheel"}],
        "0.5.10rc0": [{"packagetype": "bdist_wheel"}],           # pre-release
        "0.5.2": [{"packagetype": "sdist"}],                     # no wheel
        "0.5.3": [{"packagetype": "bdist_wheel", "yanked": True}],
    }}
    assert sweep.releases_from_json(data) == ["0.4.6", "0.5.9", "0.5.10"]
    assert sweep.releases_from_json(data, pre=True) == ["0.4.6", "0.5.9", "0.5.10rc0", "0.5.10"]
    pinned = sweep.pinned_releases()
    assert set(SAMPLE) <= set(pinned)
    assert json.dumps(pinned) == json.dumps(sorted(pinned, key=sweep.Version))
