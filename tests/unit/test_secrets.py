"""Secrets read back from a server are redacted where they are read, and never compared.

Shapes are real SGLang's /server_info: 0.5.11 `dataclasses.asdict(server_args)` (api_key and
admin_api_key in clear, no launch_command), 0.5.23 `build_server_info` (`resolved_dict()` plus
`launch_command`, the raw argv, watermark config already redacted by SGLang itself). The runtime
tests read the simulator, which is as bad as the release it stands for (lab/sglang_sim/README.md).
"""
import importlib.util
import json
import pathlib

import pytest
import yaml
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import (
    load_installed,
    read_model_config,
    read_server,
    runtime_audit,
    static_audit,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import (
    REDACTED,
    is_secret_flag,
    redact_argv,
    redact_server_info,
    redact_text,
    to_argv,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts

REPO = pathlib.Path(__file__).resolve().parents[2]
KEY, ADMIN = "canary-K3y-0a1b", "canary-Adm-9z8y"

_spec = importlib.util.spec_from_file_location("_sim_tests", REPO / "tests" / "sim" / "test_sim.py")
_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sim)


def test_secret_flags_abbreviations_and_equals_forms():
    argv = ["--model-path", "/m", "--api-key", KEY, "--admin-api=" + ADMIN, "--api-k", KEY,
            "--ssl-keyfile", "/k.pem", "--ssl-keyfile-pass", "pw", "--watermark-config={}", "--port", "1"]
    assert redact_argv(argv) == [
        "--model-path", "/m", "--api-key", REDACTED, f"--admin-api={REDACTED}", "--api-k", REDACTED,
        "--ssl-keyfile", "/k.pem", "--ssl-keyfile-pass", REDACTED, f"--watermark-config={REDACTED}", "--port", "1"]
    # an exact flag is never an abbreviation; "--" alone and short prefixes are no secret flag
    assert [is_secret_flag(w) for w in ("--ssl-keyfile", "--", "--a", "--api", "api-key")] == \
        [False, False, False, True, False]


def test_server_info_0_5_11_shape():
    info = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "api_key": KEY, "admin_api_key": None,
            "ssl_keyfile_password": None, "served_model_name": "qwen", "internal_states": [{"x": 1}],
            "version": "0.5.11"}
    assert redact_server_info(info) == {**info, "api_key": REDACTED}


def test_server_info_0_5_23_shape():
    info = {"model_path": "/models/Qwen3-8B", "api_key": KEY, "admin_api_key": ADMIN,
            "watermark_config": "<redacted>", "speculative_num_draft_tokens": 4,
            "launch_command": f"--model-path /models/Qwen3-8B --tp-size 1 --api-key {KEY} --admin-api-key={ADMIN}",
            "kv_events": None, "internal_states": [{"avg_spec_accept_length": 3.1}], "version": "0.5.23"}
    assert redact_server_info(info) == {
        **info, "api_key": REDACTED, "admin_api_key": REDACTED, "watermark_config": REDACTED,
        "launch_command": f"--model-path /models/Qwen3-8B --tp-size 1 --api-key {REDACTED} "
                          f"--admin-api-key={REDACTED}"}


def test_known_secret_values_anywhere_even_with_spaces():
    spaced = "two words"
    info = {"launch_command": f"--api-key {spaced} --port 1", "note": [f"x{KEY}y"], "n": 3}
    assert redact_server_info(info, [KEY, spaced, ""]) == {
        "launch_command": f"--api-key {REDACTED} --port 1", "note": [f"x{REDACTED}y"], "n": 3}
    assert redact_text("a b ab", ["ab", "a"]) == f"{REDACTED} b {REDACTED}"


# ----------------------------------------------------------------------------- on the simulator


@pytest.mark.wheels
@pytest.mark.parametrize("version", ["0.5.11", "0.5.20", "0.5.23"])
def test_runtime_audit_of_a_server_with_keys_redacts_and_is_not_pending(tmp_path, version):
    """The launcher appends --api-key/--admin-api-key in-process: real SGLang 0.5.20+ shows them in
    launch_command. The audit must not call that a pending restart, nor carry the keys anywhere."""
    args = {"tp_size": 2, "context_length": 32768}
    sim = _sim.Sim(tmp_path / "host", version, to_argv(args) + ["--api-key", KEY, "--admin-api-key", ADMIN])
    try:
        sim.wait_healthy()
        site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
        site.mkdir(parents=True)
        (site / "sglang").symlink_to(sglang_source_tree(version))
        src, _ = load_installed(str(tmp_path / "venv"), version)
        args = {"model_path": str(sim.model), "port": sim.port, **args}
        config, note = read_model_config(args["model_path"])
        hardware = yaml.safe_load((REPO / "inventories" / "lab" / "host_vars" / "ct129.yml").read_text())
        report = static_audit(src, args, declared_facts(hardware["sglang_hardware"]), {},
                              model_config=config, model_note=note, host="ct129")
        server = read_server(sim.url, KEY, secrets=[ADMIN])
        report = runtime_audit(report, src, server, {}, host="ct129")
    finally:
        sim.stop()
    text = json.dumps(report)
    assert KEY not in text and ADMIN not in text
    assert server["server_info"]["api_key"] == server["server_info"]["admin_api_key"] == REDACTED
    rt = report["runtime"]
    assert (rt["restart_pending"], rt["pending"], report["failures"]) == (False, [], [])
    if version == "0.5.11":
        assert "launch_command" not in rt["resolved"]
    else:
        assert rt["resolved"]["launch_command"].endswith(
            f"--context-length 32768 --tp-size 2 --api-key {REDACTED} --admin-api-key {REDACTED}")
