"""The preflight checks the bad-input corpus (tests/lab/test_bad_inputs_lab.py) drives end to end:
hub ids, quoted numbers in sglang_expect, the port owner, the service user's access to the model,
the machine's identity, and declared GPUs against nvidia-smi."""

import base64
import hashlib
import os
import pathlib
import shutil
import tempfile

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.host.args import check_args, check_expect
from ansible_collections.sglang.fleet.plugins.module_utils.host.check import (
    listening_inodes,
    machine_id,
    model_problem,
    port_owners,
    port_problem,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import (
    build_facts,
    declared_facts,
    declared_mismatch,
)

GPU = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "gpu"


@pytest.mark.parametrize("model", ["/models/Qwen3.6-27B", "Qwen/Qwen3-8B", "gpt2", "meta-llama/Llama-3.1-8B"])
def test_paths_and_hub_ids_pass(model):
    assert check_args({"model_path": model}) == []


@pytest.mark.parametrize("model", ["~/models/x", "./x", "models/a/b", "Qwen/Qwen3 8B", "a--b/c", "a/../b", "-x/y"])
def test_neither_path_nor_hub_id_is_refused(model):
    assert check_args({"model_path": model}) == [
        f"sglang_args.model_path {model!r} is neither a folder on the host (those start with /) nor a Hugging Face "
        "repo id (owner/name of letters, digits, '.', '_' and '-'): write the absolute path (e.g. "
        "/models/Qwen3.6-27B) or the repo id (e.g. Qwen/Qwen3-8B)"]


def test_quoted_numbers_in_expect_are_refused_and_words_pass():
    assert check_expect({"tp_size": 2, "cuda_graph": "on", "speculative_algorithm": "EAGLE", "x": "1e3",
                         "y": " .5"}) == [
        "sglang_expect.x is '1e3', a quoted number: SGLang resolves it as a number, so the text never matches; "
        "write it without quotes (sglang_expect.x: 1e3)",
        "sglang_expect.y is ' .5', a quoted number: SGLang resolves it as a number, so the text never matches; "
        "write it without quotes (sglang_expect.y: .5)"]
    assert check_expect(["tp_size"]) == ["sglang_expect must be a mapping of setting: value, got list"]


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7918 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0
   1: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 5151 1 0
   2: 0100007F:7918 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 6262 1 0
"""


def test_listeners_on_a_port_and_who_holds_them(tmp_path):
    assert listening_inodes(31000, [TCP]) == {"4242"}  # 0x7918; the ESTABLISHED row is not a listener
    assert listening_inodes(30000, [TCP]) == {"5151"}
    assert listening_inodes(8080, [TCP]) == set()
    proc = tmp_path / "proc"
    (proc / "77" / "fd").mkdir(parents=True)
    (proc / "77" / "comm").write_text("python3\n")
    os.symlink("socket:[4242]", proc / "77" / "fd" / "3")
    (proc / "self").mkdir()
    assert port_owners({"4242"}, str(proc)) == {"77": "python3"}
    assert port_problem("ct129", 31000, "sglang", {"12"}, {"77": "python3"}) == (
        "ct129: sglang_args.port 31000 is already in use on the host by pid 77 (python3), not by the sglang "
        "service: stop that process, or set sglang_args.port to a free port")
    assert port_problem("ct129", 31000, "sglang", {"12", "77"}, {"77": "python3"}) is None


@pytest.fixture
def open_dir():
    """A folder every user can enter (pytest's own tmp_path sits under a 0700 folder)."""
    path = pathlib.Path(tempfile.mkdtemp(dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_model_the_service_user_cannot_read(open_dir):
    tmp_path = open_dir
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    user = "nobody-sglang-fleet-test"  # does not exist: a user deploy will create (only "other" bits count)
    assert model_problem("h", str(model), user) is None
    model.chmod(0o700)
    problem = model_problem("h", str(model), user)
    assert problem.startswith(f"h: sglang_args.model_path {model} cannot be read by the service user {user} "
                              f"(sglang_service_user), created by deploy: {model} is drwx------ "), problem
    assert problem.endswith("or set sglang_args.model_path to a folder it can read")
    model.chmod(0o755)
    (model / "config.json").chmod(0o600)
    assert f"{model / 'config.json'} is -rw------- " in model_problem("h", str(model), user)
    assert model_problem("h", str(tmp_path / "missing"), user) is None  # its own message elsewhere


def test_machine_id_prefers_machine_id_then_the_ssh_host_key(tmp_path):
    blob = b"\x00\x00\x00\x0bssh-ed25519" + bytes(36)
    pub = tmp_path / "key.pub"
    pub.write_text(f"ssh-ed25519 {base64.b64encode(blob).decode()} root@x\n")
    fingerprint = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert machine_id((str(tmp_path / "none"), str(pub))) == f"SSH host key SHA256:{fingerprint}"
    mid = tmp_path / "machine-id"
    mid.write_text("0123abcd\n")
    assert machine_id((str(mid), str(pub))) == "machine-id 0123abcd"
    assert machine_id((str(tmp_path / "none"),)) == ""


def test_declared_gpus_against_a_real_nvidia_smi_capture():
    detected = build_facts((GPU / "h200x1" / "query-gpu-module-argv.csv").read_text())
    assert declared_mismatch(declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 1}), detected) is None
    assert declared_mismatch(declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 2}), detected) == (
        "sglang_hardware declares 2x NVIDIA H200, but nvidia-smi on the host reports 1x NVIDIA H200: fix "
        "sglang_hardware (gpu_model, gpu_count) to match the host, or leave sglang_hardware out to use what "
        "nvidia-smi detects")
    assert "declares 1x NVIDIA RTX A6000, but nvidia-smi on the host reports 1x NVIDIA H200" in declared_mismatch(
        declared_facts({"gpu_model": "NVIDIA RTX A6000", "gpu_count": 1}), detected)
    assert declared_mismatch(declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 2}),
                             {"source": "none", "gpu_count": 0, "error": "no driver"}) is None
