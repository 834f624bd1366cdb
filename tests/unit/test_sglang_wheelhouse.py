"""ml_env's controller wheelhouse: pins read from the real wheel, FlashInfer kept in lockstep."""

import importlib.util
import shutil

import pytest
from ansible_run import REPO, run_module
from wheels import sglang_wheel

pytestmark = pytest.mark.wheels

_spec = importlib.util.spec_from_file_location("sglang_wheelhouse", REPO / "library" / "sglang_wheelhouse.py")
wheelhouse = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wheelhouse)


def test_pins_come_from_the_wheel_with_flashinfer_in_lockstep():
    pins = wheelhouse.wheel_pins(sglang_wheel("0.5.11"))
    assert pins["torch"] == "2.11.0"
    assert pins["sglang-kernel"] == "0.4.2"
    assert pins["flashinfer-python"] == pins["flashinfer-cubin"] == pins["flashinfer-jit-cache"] == "0.6.8.post1"
    assert "runai-model-streamer" not in pins  # extras are not part of the base install


@pytest.fixture()
def dest(tmp_path):
    """A wheelhouse that already holds the 0.5.11 wheel, so nothing is downloaded."""
    shutil.copy(sglang_wheel("0.5.11"), tmp_path)
    return tmp_path


def test_module_reads_a_cached_wheel_extracts_its_source_and_reports_no_change(dest):
    rc, result, _ = run_module({"version": "0.5.11", "dest": str(dest), "python_version": "3.11"},
                               module="sglang_wheelhouse")
    assert rc == 0, result
    assert result["changed"] is False and result["downloaded"] == []
    assert result["source_dir"] == str(dest / "src" / "sglang-0.5.11" / "sglang")
    assert (dest / "src" / "sglang-0.5.11" / "sglang" / "srt" / "server_args.py").is_file()
    assert result["pins"]["sglang"] == "0.5.11"
    assert len(result["wheel_sha256"]) == 64


def test_an_extra_pin_that_skews_flashinfer_is_refused(dest):
    rc, result, _ = run_module({"version": "0.5.11", "dest": str(dest), "python_version": "3.11",
                                "extra_pins": {"flashinfer-jit-cache": "0.6.9"}}, module="sglang_wheelhouse")
    assert rc != 0
    assert result["msg"] == (
        "ml_env_extra_pins {'flashinfer-jit-cache': '0.6.9'} would skew FlashInfer against sglang 0.5.11, which "
        "pins flashinfer-python==0.6.8.post1; flashinfer-python, flashinfer-cubin and flashinfer-jit-cache must "
        "move in lockstep (sglang PR 28786): remove the pin or pin all three to the same version")
