"""The sglang_flags module: the preflight flag check against one release's real source."""

import pytest
from ansible_run import run_module
from wheels import sglang_source_tree

pytestmark = pytest.mark.wheels


def test_a_misspelled_flag_fails_with_the_closest_match_and_nothing_changed():
    rc, result, _ = run_module({"source_dir": str(sglang_source_tree("0.5.11")), "host": "ct129",
                                "argv": ["--model-path", "/m", "--speculative-num-stpes", "3"]},
                               module="sglang_flags")
    assert rc != 0
    assert result["msg"].startswith("ct129: sglang 0.5.11 would refuse to start with these arguments "
                                    "(nothing was changed):\n  - ")
    assert "--speculative-num-steps" in result["msg"]
    assert result["msg"].endswith("Fix sglang_args in the inventory and re-run.")
    assert [p["kind"] for p in result["problems"]] == ["unknown"]


def test_a_removed_flag_names_its_replacement_in_that_release():
    rc, result, _ = run_module({"source_dir": str(sglang_source_tree("0.5.20")),
                                "argv": ["--model-path", "/m", "--enforce-piecewise-cuda-graph"]},
                               module="sglang_flags")
    assert rc != 0
    assert "--cuda-graph-backend-prefill" in result["msg"]
    assert result["version"] == "0.5.20" and result["era"] == "C"


def test_an_abbreviation_passes_with_a_warning_and_normalises():
    rc, result, out = run_module({"source_dir": str(sglang_source_tree("0.5.11")),
                                  "argv": ["--model-path", "/m", "--tp", "2"]}, module="sglang_flags")
    assert rc == 0, result
    assert result["normalised"] == {"model_path": "/m", "tp_size": 2}
    assert ("--tp is an abbreviation of --tp-size that sglang 0.5.11 accepts; write the full name: a prefix breaks "
            "when a later release adds a flag that shares it (--cuda-graph-max-bs became ambiguous in 0.5.20)"
            in " ".join(out.split()))


def test_an_unreadable_source_says_how_to_get_it(tmp_path):
    rc, result, _ = run_module({"source_dir": str(tmp_path / "nope"), "argv": []}, module="sglang_flags")
    assert rc != 0
    assert result["msg"].startswith(f"cannot read the SGLang source in {tmp_path / 'nope'}: ")
    assert result["msg"].endswith("Run deploy.yml (its ml_env role downloads and extracts the release) first.")


def test_help_is_refused_not_reported_unknown():
    rc, result, _ = run_module({"source_dir": str(sglang_source_tree("0.5.11")), "host": "ct129",
                                "argv": ["--model-path", "/m", "--he"]}, module="sglang_flags")
    assert rc != 0
    assert [(p["flag"], p["kind"]) for p in result["problems"]] == [("--he", "help")]
    assert ("  - --he is not a server flag (argparse expands it to --help): it is argparse's help option, so "
            "sglang 0.5.11 would print its usage and exit without starting the server. Remove it.\n") in result["msg"]


def test_a_flag_whose_deprecated_action_raises_fails_the_check():
    """sglang 0.5.3 (issue #11): DeprecatedAction raises ValueError, the server would die at start."""
    rc, result, _ = run_module({"source_dir": str(sglang_source_tree("0.5.3")),
                                "argv": ["--model-path", "/m", "--enable-flashinfer-cutlass-moe"]},
                               module="sglang_flags")
    assert rc != 0
    [p] = result["problems"]
    assert (p["kind"], p["severity"], p["suggestion"]) == (
        "removed", "error", ["--moe-runner-backend flashinfer_cutlass"])
    assert "the server dies at start with 'ValueError: NOTE: --enable-flashinfer-cutlass-moe is deprecated." \
        in result["msg"]
