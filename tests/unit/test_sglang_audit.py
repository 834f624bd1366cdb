"""plugins/module_utils/audit/host_audit.py without a real SGLang tree: wording, expectations, runtime compare, HTTP."""
import json
import socket
import types

import pytest
from local_http import QuietHandler, serving

from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import (
    AuditError,
    Check,
    _check_optimisation,
    compare_resolved,
    find_installed,
    hardware_line,
    read_model_config,
    read_server,
    runtime_audit,
)
from ansible_collections.sglang.fleet.plugins.module_utils.source import Finding

PIECEWISE_ON = Finding("prefill/piecewise CUDA graph", "on", True,
                       "on by default in sglang 0.5.11; no auto-disable rule matched the checked conditions "
                       "(multimodal)", "sglang/srt/server_args.py", 1229, "--disable-piecewise-cuda-graph")
PIECEWISE_AUTO_OFF = Finding(
    "prefill/piecewise CUDA graph", "auto-disabled", False,
    "Qwen3_5ForConditionalGeneration is multimodal; sglang 0.5.11 disables piecewise CUDA graph for "
    "multimodal models", "sglang/srt/server_args.py", 1229, "--enforce-piecewise-cuda-graph",
    "add --enforce-piecewise-cuda-graph (skips the auto-disable rules)")
FUSION_SM86 = Finding("FlashInfer all-reduce fusion", "unavailable on this hardware", False,
                      "NVIDIA RTX A6000 is SM86", "sglang/srt/server_args.py", 2330,
                      "--enable-flashinfer-allreduce-fusion")
SPEC_314 = Finding("speculative decoding", "on",
                   {"algorithm": "EAGLE", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4},
                   "NEXTN is converted to EAGLE by sglang 0.5.11: EAGLE 3/1/4", "sglang/srt/server_args.py",
                   3310, "--speculative-algorithm")


# ----------------------------------------------------------------------------- wording

def test_hardware_declared_is_never_called_detected():
    hw = {"source": "declared", "gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "compute_capability": "8.6"}
    assert hardware_line(hw) == ("hardware: 2x NVIDIA RTX A6000 (SM86), declared in the inventory "
                                 "(sglang_hardware), not detected")


def test_hardware_detected_says_nvidia_smi():
    hw = {"source": "detected", "gpu_model": "NVIDIA H200", "gpu_count": 8, "sm": 90}
    assert hardware_line(hw) == "hardware: 8x NVIDIA H200 (SM90), detected with nvidia-smi"


def test_hardware_none_says_unknown_with_the_reason():
    hw = {"source": "none", "gpu_count": 0, "error": "nvidia-smi not found (no NVIDIA driver installed)"}
    assert hardware_line(hw) == ("hardware: unknown (nvidia-smi not found (no NVIDIA driver installed)); "
                                 "predictions that depend on the GPU say 'compute capability unknown'")


def test_model_config_of_a_repo_id_is_unknown():
    assert read_model_config("Qwen/Qwen3-8B") == (None, (
        "model config unknown: Qwen/Qwen3-8B is a Hugging Face repo id (SGLang downloads it at start); "
        "the static audit reads config.json only from a folder on the host"))


def test_model_config_read_from_the_folder(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    assert read_model_config(str(tmp_path)) == ({"architectures": ["Qwen3ForCausalLM"]},
                                                f"from {tmp_path}/config.json on the host")
    assert read_model_config(str(tmp_path / "nope")) == (
        None, f"model config unknown: {tmp_path}/nope/config.json does not exist on the host")


def test_find_installed_globs_the_venv(tmp_path):
    with pytest.raises(AuditError) as err:
        find_installed(str(tmp_path))
    assert str(err.value) == (
        f"no installed sglang in {tmp_path} (looked for lib/python3*/site-packages/sglang/srt/server_args.py): "
        "run deploy.yml first (its ml_env role builds this venv), or check sglang_version and sglang_env_root")
    pkg = tmp_path / "lib" / "python3.11" / "site-packages" / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "srt" / "server_args.py").write_text("")
    assert find_installed(str(tmp_path)) == str(pkg)


# ----------------------------------------------------------------------------- expectations

def test_expectation_on_but_auto_disabled_names_rule_and_fix():
    c = _check_optimisation("piecewise_cuda_graph", "on", PIECEWISE_AUTO_OFF)
    assert c.ok is False
    assert c.message("ct129") == (
        "ct129: sglang_expect.piecewise_cuda_graph: expected on, predicted auto-disabled "
        "(Qwen3_5ForConditionalGeneration is multimodal; sglang 0.5.11 disables piecewise CUDA graph for "
        "multimodal models; rule sglang/srt/server_args.py:1229). Fix: set "
        "sglang_args.enforce_piecewise_cuda_graph: true, i.e. add --enforce-piecewise-cuda-graph (skips the "
        "auto-disable rules); or change sglang_expect.piecewise_cuda_graph")


def test_expectation_true_on_unavailable_hardware_says_not_possible():
    c = _check_optimisation("flashinfer_allreduce_fusion", True, FUSION_SM86)
    assert c.message() == (
        "sglang_expect.flashinfer_allreduce_fusion: expected on, predicted unavailable on this hardware "
        "(NVIDIA RTX A6000 is SM86; rule sglang/srt/server_args.py:2330). Fix: not possible on this "
        "hardware; remove sglang_expect.flashinfer_allreduce_fusion for this host")


@pytest.mark.parametrize(("expected", "ok"), [
    ("off", True), (False, True), ("auto-disabled", True), ("on", False), ("off by default", False)])
def test_expectation_off_or_a_status(expected, ok):
    assert _check_optimisation("piecewise_cuda_graph", expected, PIECEWISE_AUTO_OFF).ok is ok


def test_expectation_with_a_made_up_status():
    c = _check_optimisation("cuda_graph", "enabled", PIECEWISE_ON)
    assert (c.ok, c.fix) == (False, "expect one of: on, off, auto-disabled, unavailable on this hardware, "
                                    "off by default")


def test_value_mismatch_message():
    c = Check("speculative_num_steps", 3, 1, False, reason="NEXTN as given",
              fix="set sglang_args.speculative_num_steps: 3, or change sglang_expect.speculative_num_steps")
    assert c.message("ct129") == (
        "ct129: sglang_expect.speculative_num_steps: expected 3, predicted 1 (NEXTN as given). "
        "Fix: set sglang_args.speculative_num_steps: 3, or change sglang_expect.speculative_num_steps")


# ----------------------------------------------------------------------------- runtime compare

def test_runtime_prefill_graph_resolved_off_though_predicted_on():
    mismatches, lines = compare_resolved([PIECEWISE_ON], {"disable_piecewise_cuda_graph": True})
    assert [m["message"] for m in mismatches] == [
        "SGLang resolved prefill/piecewise CUDA graph differently than predicted: predicted on, rule "
        "sglang/srt/server_args.py:1229, server says disable_piecewise_cuda_graph=true. Something at start-up "
        "that the static audit does not model changed it: read the service log, and compare sglang_args with "
        "the server's launch_command"]
    assert lines == ["  MISMATCH prefill/piecewise CUDA graph: predicted on, rule sglang/srt/server_args.py:1229; "
                     "server says disable_piecewise_cuda_graph=true"]


def test_runtime_agreeing_settings_are_listed_as_predicted():
    mismatches, lines = compare_resolved(
        [PIECEWISE_AUTO_OFF, SPEC_314],
        {"disable_piecewise_cuda_graph": True, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
         "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4})
    assert mismatches == []
    assert lines == ["  prefill/piecewise CUDA graph: off, as predicted (disable_piecewise_cuda_graph=true)",
                     "  speculative decoding: EAGLE 3/1/4, as predicted"]


def test_runtime_prefill_backend_names_on_newer_releases():
    pred = Finding("prefill/piecewise CUDA graph", "on", "tc_piecewise", "default prefill backend tc_piecewise",
                   override="--cuda-graph-backend-prefill")
    mismatches, _ = compare_resolved([pred], {"cuda_graph_backend_prefill": "disabled"})
    assert mismatches[0]["server"] == "cuda_graph_backend_prefill=disabled"


def test_runtime_speculative_silently_off():
    mismatches, _ = compare_resolved([SPEC_314], {"speculative_algorithm": None, "speculative_num_steps": None})
    assert mismatches[0]["message"].startswith(
        "SGLang resolved speculative decoding differently than predicted: predicted on (EAGLE 3/1/4), rule "
        "sglang/srt/server_args.py:3310, server says speculative_algorithm=unset.")


def _report(findings, expect_checks=(), args=None):
    import dataclasses
    return {"findings": [dataclasses.asdict(f) for f in findings], "expectations": list(expect_checks),
            "failures": [], "lines": [], "args": args or {}, "model": {"config": "read"}, "phase": "static"}


SRC_0511 = types.SimpleNamespace(version="0.5.11")


def test_runtime_audit_expectation_against_the_server():
    report = _report([SPEC_314], [{"setting": "speculative_num_steps", "ok": True, "actual": 3}])
    server = {"url": "http://127.0.0.1:30000", "endpoint": "/get_server_info", "model_info": None,
              "server_info": {"version": "0.5.11", "speculative_algorithm": "EAGLE", "speculative_num_steps": 1,
                              "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}}
    runtime_audit(report, SRC_0511, server, {"speculative_num_steps": 3}, host="ct129")
    assert report["ok"] is False
    assert report["failures"][1] == (
        "ct129: sglang_expect.speculative_num_steps: expected 3, the server runs 1 (server_info "
        "speculative_num_steps). Fix: sglang_args already give it (predicted 3); SGLang changed it at start-up: "
        "read the service log, and check the service was restarted after the last deploy")
    assert report["runtime"]["endpoint"] == "/get_server_info"


def test_runtime_audit_other_version_fails_but_only_notes_under_check_mode():
    server = {"url": "http://127.0.0.1:30000", "endpoint": "/server_info", "model_info": None,
              "server_info": {"version": "0.5.18"}}
    report = runtime_audit(_report([]), SRC_0511, server, {}, host="ct129")
    assert report["failures"] == [
        "ct129: the server was not started with the inventory's SGLang and arguments: sglang version (venv 0.5.11, "
        "server 0.5.18). Run deploy.yml to restart it with the inventory's."]
    report = runtime_audit(_report([]), SRC_0511, server, {}, host="ct129", check_mode=True)
    assert report["ok"] is True
    assert report["runtime"]["notes"] == [
        "ct129: the server was not started with the inventory's SGLang and arguments: sglang version (venv 0.5.11, "
        "server 0.5.18). deploy.yml would restart it."]


# ----------------------------------------------------------------------------- HTTP

class _Handler(QuietHandler):
    routes: dict = {}
    seen: list = []

    def do_GET(self):  # noqa: N802
        self.seen.append((self.path, self.headers.get("Authorization")))
        code, body = self.routes.get(self.path, (404, {"detail": "Not Found"}))
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def fake_server():
    _Handler.seen = []
    with serving(_Handler) as url:
        yield None, url


def test_read_server_falls_back_to_the_old_endpoint_names(fake_server):
    _, url = fake_server
    _Handler.routes = {"/get_server_info": (200, {"version": "0.5.11", "tp_size": 2}),
                       "/get_model_info": (200, {"architectures": ["Qwen3_5ForConditionalGeneration"]})}
    got = read_server(url, "s3cret")
    assert (got["endpoint"], got["model_endpoint"]) == ("/get_server_info", "/get_model_info")
    assert got["server_info"]["tp_size"] == 2
    assert _Handler.seen[0] == ("/server_info", "Bearer s3cret")


def test_read_server_prefers_the_new_names(fake_server):
    _, url = fake_server
    _Handler.routes = {"/server_info": (200, {"version": "0.5.23"}), "/model_info": (200, {})}
    assert read_server(url)["endpoint"] == "/server_info"
    assert _Handler.seen[0] == ("/server_info", None)


def test_read_server_401_says_where_the_key_goes(fake_server):
    _, url = fake_server
    _Handler.routes = {"/server_info": (401, {"error": "Unauthorized"})}
    with pytest.raises(AuditError) as err:
        read_server(url)
    assert str(err.value) == (f"{url}/server_info answered 401 Unauthorized: the server has an API key; put it in "
                              "sglang_service_secrets.SGLANG_API_KEY")


def test_read_server_down():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AuditError) as err:
        read_server(f"http://127.0.0.1:{port}", timeout=2)
    assert str(err.value) == (f"cannot reach http://127.0.0.1:{port}/server_info: [Errno 111] Connection refused; "
                              "is the service running (systemctl status sglang, or run deploy.yml)?")


def test_read_server_takes_the_resolved_context_length_from_v1_models(fake_server):
    # the real 0.5.23 (lab host cpu1): /server_info shows context_length as given (null),
    # /v1/models the length it resolved from the model's config
    _, url = fake_server
    _Handler.routes = {"/server_info": (200, {"version": "0.5.23", "context_length": None}), "/model_info": (200, {}),
                       "/v1/models": (200, {"object": "list", "data": [
                           {"id": "/models/tiny-llama", "object": "model", "max_model_len": 4096}]})}
    assert read_server(url)["max_model_len"] == 4096
    _Handler.routes["/v1/models"] = (404, {"detail": "Not Found"})
    assert read_server(url)["max_model_len"] is None


CONTEXT_4096 = Finding("context_length", "on", 4096, "None by default: the model's max_position_embeddings "
                       "from config.json")


@pytest.mark.parametrize(("max_model_len", "line"), [
    (4096, "  context_length: 4096, as predicted (context_length=4096)"),
    (8192, "  context_length: server resolved context_length=8192 (predicted 4096)"),   # said, not failed
    (None, "  context_length: the server shows context_length as given (unset), not what it resolved "
           "(predicted 4096)"),
])
def test_runtime_audit_compares_the_context_length_the_server_resolved(max_model_len, line):
    server = {"url": "http://127.0.0.1:30000", "endpoint": "/server_info", "model_info": None,
              "server_info": {"version": "0.5.11", "context_length": None}, "max_model_len": max_model_len}
    report = runtime_audit(_report([CONTEXT_4096]), SRC_0511, server, {}, host="cpu1")
    assert report["ok"] is True and report["runtime"]["mismatches"] == []
    assert report["runtime"]["lines"][-1] == line
