"""The audit on real SGLang releases (PyPI wheels) and the simulator: what the seeds found by hand.

The seeds' ct129 (2x RTX A6000, Qwen3.6-27B, TP 2, NEXTN 3/1/4, sglang 0.5.11): piecewise CUDA
graph auto-disabled by the multimodal rule (override --enforce-piecewise-cuda-graph), FlashInfer
all-reduce fusion unavailable (SM86 < SM90), single/two-batch overlap off by default, EAGLE 3/1/4.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import (
    AuditError,
    load_installed,
    read_model_config,
    read_server,
    runtime_audit,
    static_audit,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import to_argv
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts

pytestmark = pytest.mark.wheels

REPO = pathlib.Path(__file__).resolve().parents[2]
LAB = REPO / "inventories" / "lab"
COMMON = yaml.safe_load((REPO / "group_vars" / "all" / "sglang.yml").read_text())["sglang_args_common"]
CT129 = yaml.safe_load((LAB / "host_vars" / "ct129.yml").read_text())

_spec = importlib.util.spec_from_file_location("_sim_tests", REPO / "tests" / "sim" / "test_sim.py")
_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sim)


def venv_with(tmp_path, version):
    """A venv laid out like the host's: lib/python3.11/site-packages/sglang -> the release's tree."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "sglang").symlink_to(sglang_source_tree(version))
    return str(tmp_path / "venv")


def ct129_model(tmp_path):
    model = tmp_path / "models" / "Qwen3.6-27B"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(CT129["lab_model"]["config"]))
    return str(model)


def ct129_report(tmp_path, expect=None, extra_args=None, version="0.5.11"):
    src, where = load_installed(venv_with(tmp_path, version), version)
    args = {**COMMON, **CT129["sglang_args"], "model_path": ct129_model(tmp_path), **(extra_args or {})}
    config, note = read_model_config(args["model_path"])
    hw = declared_facts(CT129["sglang_hardware"])
    report = static_audit(src, args, hw, CT129["sglang_expect"] if expect is None else expect,
                          source_path=where, model_config=config, model_note=note, host="ct129")
    return src, args, report


def by_name(report):
    return {f["name"]: f for f in report["findings"]}


def test_ct129_static_report_shows_what_the_seeds_found(tmp_path):
    _, _, report = ct129_report(tmp_path)
    f = by_name(report)
    pw = f["prefill/piecewise CUDA graph"]
    assert (pw["status"], pw["rule_file"], pw["rule_line"], pw["override"]) == (
        "auto-disabled", "sglang/srt/server_args.py", 1229, "--enforce-piecewise-cuda-graph")
    src_line = (pathlib.Path(sglang_source_tree("0.5.11")) / "srt" / "server_args.py").read_text().splitlines()[1228]
    assert "is_multimodal" in src_line     # the rule really is at that line of the installed release
    fusion = f["FlashInfer all-reduce fusion"]
    assert fusion["status"] == "unavailable on this hardware"
    assert fusion["reason"].startswith("NVIDIA RTX A6000 is SM86; sglang 0.5.11 auto-enables FlashInfer all-reduce "
                                       "fusion only on SM90 (Hopper) or SM100 (Blackwell)")
    assert f["single-batch overlap"]["status"] == f["two-batch overlap"]["status"] == "off by default"
    assert f["speculative decoding"]["value"] == {"algorithm": "EAGLE", "num_steps": 3, "eagle_topk": 1,
                                                 "num_draft_tokens": 4}
    assert report["sglang"]["version"] == "0.5.11" and report["sglang"]["era"] == "A"
    assert report["sglang"]["source_path"].endswith("venv/lib/python3.11/site-packages/sglang")
    # The lab/production expectations are met: the demo passes.
    assert report["ok"] is True, report["failures"]
    assert [e["setting"] for e in report["expectations"] if e["ok"]] == list(CT129["sglang_expect"])
    lines = report["lines"]
    assert lines[1] == ("hardware: 2x NVIDIA RTX A6000 (SM86), declared in the inventory (sglang_hardware), "
                        "not detected")
    assert lines[4].startswith("  prefill/piecewise CUDA graph: auto-disabled - Qwen3_5ForConditionalGeneration is "
                               "multimodal")
    assert "; rule sglang/srt/server_args.py:1229; override --enforce-piecewise-cuda-graph; to enable: add " \
           "--enforce-piecewise-cuda-graph" in lines[4]
    assert lines[-1] == "expectations: 7 checked, all met"


def test_ct129_expecting_the_prefill_graph_fails_with_the_fix(tmp_path):
    _, _, report = ct129_report(tmp_path, expect={"piecewise_cuda_graph": "on"})
    assert report["failures"] == [
        "ct129: sglang_expect.piecewise_cuda_graph: expected on, predicted auto-disabled "
        "(Qwen3_5ForConditionalGeneration is multimodal (configs/model_config.py multimodal_model_archs); "
        "sglang 0.5.11 disables piecewise CUDA graph for multimodal models; rule sglang/srt/server_args.py:1229). "
        "Fix: set sglang_args.enforce_piecewise_cuda_graph: true, i.e. add --enforce-piecewise-cuda-graph (skips "
        "the auto-disable rules; the language model prefill is captured, the vision encoder stays eager); or "
        "change sglang_expect.piecewise_cuda_graph"]
    # ... and the fix works.
    _, _, report = ct129_report(tmp_path / "fixed", expect={"piecewise_cuda_graph": "on"},
                                extra_args={"enforce_piecewise_cuda_graph": True})
    assert report["ok"] is True


def test_one_step_mtp_is_caught_statically(tmp_path):
    _, _, report = ct129_report(tmp_path, extra_args={"speculative_num_steps": 1, "speculative_num_draft_tokens": 2})
    assert report["failures"] == [
        "ct129: sglang_expect.speculative_num_steps: expected 3, predicted 1 (NEXTN is converted to EAGLE by "
        "sglang 0.5.11: EAGLE 1/1/2; rule sglang/srt/server_args.py:3310). Fix: set sglang_args.speculative_num_steps: "
        "3, or change sglang_expect.speculative_num_steps",
        "ct129: sglang_expect.speculative_num_draft_tokens: expected 4, predicted 2 (NEXTN is converted to EAGLE by "
        "sglang 0.5.11: EAGLE 1/1/2; rule sglang/srt/server_args.py:3310). Fix: set "
        "sglang_args.speculative_num_draft_tokens: 4, or change sglang_expect.speculative_num_draft_tokens"]


def test_removed_flag_on_0_5_23_is_refused(tmp_path):
    with pytest.raises(AuditError) as err:
        ct129_report(tmp_path, extra_args={"enforce_piecewise_cuda_graph": True}, version="0.5.23")
    assert str(err.value).startswith("ct129: sglang 0.5.23 would refuse these arguments: ")
    assert "--enforce-piecewise-cuda-graph" in str(err.value)


def test_wrong_venv_version(tmp_path):
    venv = venv_with(tmp_path, "0.5.11")
    with pytest.raises(AuditError) as err:
        load_installed(venv, "0.5.18")
    assert str(err.value) == (f"{venv}/lib/python3.11/site-packages/sglang is sglang 0.5.11, not sglang_version "
                              "0.5.18: the venv was built for another release; run deploy.yml to rebuild it")


# ----------------------------------------------------------------------------- runtime, on the simulator

def sim_for(tmp_path, args, config=None):
    """The simulator started with the host's argv, rendered as the unit renders it (sglang_argv)."""
    argv = to_argv({k: v for k, v in args.items() if k not in ("model_path", "port")})
    sim = _sim.Sim(tmp_path / "host", "0.5.11", argv, config=config)
    sim.wait_healthy()
    return sim


def runtime_for(tmp_path, config=None, extra_args=None, expect=None):
    src, args, report = ct129_report(tmp_path, expect=expect, extra_args=extra_args)
    sim = sim_for(tmp_path, {**args, **(extra_args or {})}, config)
    try:
        # the simulator's model folder and port are its own: predict for the args it was started with
        args = {**args, "model_path": str(sim.model), "port": sim.port}
        config_json, note = read_model_config(args["model_path"])
        report = static_audit(src, args, declared_facts(CT129["sglang_hardware"]),
                              CT129["sglang_expect"] if expect is None else expect,
                              model_config=config_json, model_note=note, host="ct129")
        return runtime_audit(report, src, read_server(sim.url), CT129["sglang_expect"] if expect is None else expect,
                             host="ct129")
    finally:
        sim.proc.terminate()
        sim.proc.wait(10)


def test_runtime_ct129_agrees_with_the_prediction(tmp_path):
    report = runtime_for(tmp_path)
    assert report["ok"] is True, report["failures"]
    rt = report["runtime"]
    assert rt["mismatches"] == [] and rt["restart_pending"] is False
    assert "  prefill/piecewise CUDA graph: off, as predicted (disable_piecewise_cuda_graph=true)" in rt["lines"]
    assert "  speculative decoding: EAGLE 3/1/4, as predicted" in rt["lines"]
    assert rt["lines"][-1] == "expectations against the server: 7 checked, all met"


def test_runtime_prefill_graph_silently_off(tmp_path):
    report = runtime_for(tmp_path, config={"disable_optimization": "piecewise_cuda_graph"},
                         extra_args={"enforce_piecewise_cuda_graph": True}, expect={"piecewise_cuda_graph": "on"})
    enforce_rule = (pathlib.Path(sglang_source_tree("0.5.11")) / "srt" / "server_args.py").read_text().splitlines()[1195]
    assert enforce_rule.strip() == "if self.enforce_piecewise_cuda_graph:"
    assert report["failures"] == [
        "ct129: SGLang resolved prefill/piecewise CUDA graph differently than predicted: predicted on, rule "
        "sglang/srt/server_args.py:1196, server says disable_piecewise_cuda_graph=true. Something at start-up that "
        "the static audit does not model changed it: read the service log, and compare sglang_args with the "
        "server's launch_command",
        "ct129: sglang_expect.piecewise_cuda_graph: expected on, the server runs off (server_info "
        "disable_piecewise_cuda_graph=true). Fix: sglang_args already give it (predicted on); SGLang changed it at "
        "start-up: read the service log, and check the service was restarted after the last deploy"]


def test_runtime_speculative_silently_off(tmp_path):
    report = runtime_for(tmp_path, config={"disable_optimization": "speculative"})
    assert report["failures"][0].startswith(
        "ct129: SGLang resolved speculative decoding differently than predicted: predicted on (EAGLE 3/1/4), rule "
        "sglang/srt/server_args.py:3310, server says speculative_algorithm=unset.")
    assert "ct129: sglang_expect.speculative_num_steps: expected 3, the server runs unset (server_info " \
           "speculative_num_steps)." in " ".join(report["failures"])


def test_runtime_server_started_with_other_flags(tmp_path):
    # launch_command is in /server_info from 0.5.20 (lab/sglang_sim/README.md): 0.5.11 cannot tell
    src, args, report = ct129_report(tmp_path, version="0.5.20")
    sim = _sim.Sim(tmp_path / "host", "0.5.20", _sim.MTP1_ARGV)
    try:
        sim.wait_healthy()
        args = {**args, "model_path": str(sim.model), "port": sim.port}
        config, _ = read_model_config(args["model_path"])
        report = static_audit(src, args, declared_facts(CT129["sglang_hardware"]), {}, model_config=config,
                              host="ct129")
        runtime_audit(report, src, read_server(sim.url), {}, host="ct129")
    finally:
        sim.proc.terminate()
        sim.proc.wait(10)
    # launch_command says 1 step and 2 draft tokens: both differ from the inventory's 3 and 4
    assert report["failures"][0] == (
        "ct129: the server was not started with the inventory's SGLang and arguments: speculative_num_draft_tokens "
        "(inventory 4, server 2); speculative_num_steps (inventory 3, server 1). Run deploy.yml to restart it "
        "with the inventory's.")
    assert report["failures"][1].startswith(
        "ct129: SGLang resolved speculative decoding differently than predicted: predicted on (EAGLE 3/1/4), rule "
        "sglang/srt/arg_groups/speculative_hook.py:70, server says speculative_algorithm=EAGLE speculative_num_steps=1 "
        "speculative_eagle_topk=1 speculative_num_draft_tokens=2. The server runs other arguments than the "
        "inventory's (see above): run deploy.yml, then audit again")
    assert report["failures"][2].startswith("ct129: SGLang resolved mem_fraction_static differently than predicted: "
                                            "predicted 0.88 (set explicitly), server says mem_fraction_static=0.85.")
    # nor with its context length: read from /v1/models (max_model_len), the model's own 262144
    assert report["failures"][3].startswith("ct129: SGLang resolved context_length differently than predicted: "
                                            "predicted 131072 (set explicitly), server says context_length=262144.")
    assert len(report["failures"]) == 4


# ----------------------------------------------------------------------------- the module, as Ansible runs it

def run_module(args, check=False):
    argv = [str(pathlib.Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,",
            "-e", f"ansible_python_interpreter={sys.executable}", "-m", "sglang.fleet.sglang_audit", "-a", json.dumps(args), "-vvv"]
    if check:
        argv.append("--check")
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "0"}
    p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    out = p.stdout
    return p.returncode, json.loads(out[out.find("=> {") + 3:]), out + p.stderr


def test_module_runtime_in_check_mode_hides_the_api_key(tmp_path):
    venv = venv_with(tmp_path, "0.5.11")
    args = {**COMMON, **CT129["sglang_args"]}
    argv = to_argv({k: v for k, v in args.items() if k not in ("model_path", "port")})
    sim = _sim.Sim(tmp_path / "host", "0.5.11", [*argv, "--api-key", "k3y-s3cret-77"])
    try:
        sim.wait_healthy()
        args = {**args, "model_path": str(sim.model), "port": sim.port}
        rc, result, raw = run_module({"venv": venv, "version": "0.5.11", "args": args,
                                      "hardware": declared_facts(CT129["sglang_hardware"]),
                                      "expect": CT129["sglang_expect"], "server_url": sim.url,
                                      "api_key": "k3y-s3cret-77", "host": "ct129"}, check=True)
    finally:
        sim.proc.terminate()
        sim.proc.wait(10)
    assert rc == 0, raw
    assert (result["changed"], result["ok"], result["server"]) == (False, True, True)
    assert result["report"]["runtime"]["endpoint"] == "/server_info"
    assert "k3y-s3cret-77" not in raw


def test_module_fails_with_the_expectation_messages(tmp_path):
    venv = venv_with(tmp_path, "0.5.11")
    args = {**COMMON, **CT129["sglang_args"], "model_path": ct129_model(tmp_path)}
    rc, result, raw = run_module({"venv": venv, "version": "0.5.11", "args": args,
                                  "hardware": declared_facts(CT129["sglang_hardware"]),
                                  "expect": {"flashinfer_allreduce_fusion": "on"}, "host": "ct129"})
    assert rc == 2, raw
    assert result["msg"] == (
        "ct129: SGLang audit failed:\nct129: sglang_expect.flashinfer_allreduce_fusion: expected on, predicted "
        "unavailable on this hardware (NVIDIA RTX A6000 is SM86; sglang 0.5.11 auto-enables FlashInfer all-reduce "
        "fusion only on SM90 (Hopper) or SM100 (Blackwell), and its kernels need SM90+; rule "
        "sglang/srt/server_args.py:2330). Fix: not possible on this hardware; remove "
        "sglang_expect.flashinfer_allreduce_fusion for this host")
