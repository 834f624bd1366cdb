"""`device: cpu` (issue #25): a server without GPUs, end to end through the project's checks.

The host model says the device; a CPU server needs 0 GPUs (the TP/PP/DP-vs-GPU check does not
apply) and has no GPU facts (nvidia-smi is not run: tests/gpu/test_gpu_facts.py runs the module);
a GPU declaration on it is refused with what to do; compat, the roofline and the reports say "not
applicable on a CPU host" or weigh what does apply (the model against the host's RAM). A GPU host
keeps its behaviour (its tests: test_sglang_args.py, test_sglang_compat.py, test_sglang_verify.py).
"""

import json
import pathlib
import re
import subprocess

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import hardware_line, shadowed_packages
from ansible_collections.sglang.fleet.plugins.module_utils.compat.checks import (
    check_driver,
    check_gpu_arch,
    check_memory_fit,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host import gpu_facts, multinode
from ansible_collections.sglang.fleet.plugins.module_utils.host import host_model as host
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import check_args, device_of, gpus_needed
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import (
    GpuFactsError,
    cpu_facts,
    declared_facts,
)
from ansible_collections.sglang.fleet.plugins.module_utils.verify import gates, roofline
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import evaluate
from scripts import fleet_report

REPO = pathlib.Path(__file__).resolve().parents[2]



CPU = cpu_facts()
H200X2 = declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 2})
# The issue #25 lab host: the real SGLang 0.5.23 on CPU (a small model: Qwen3-0.6B's config.json).
CPU_ARGS = {"model_path": "/models/Qwen3-0.6B", "device": "cpu", "attention_backend": "torch_native",
            "disable_cuda_graph": True, "mem_fraction_static": 0.5}
QWEN3_06B = {"architectures": ["Qwen3ForCausalLM"], "torch_dtype": "bfloat16", "hidden_size": 1024,
             "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
             "max_position_embeddings": 40960}
WEIGHTS = 1_503_300_328  # Qwen3-0.6B's model.safetensors tensor bytes (bf16)
RAM_16G = {"mem_total_bytes": 16 * 1024 ** 3, "mem_available_bytes": 12 * 1024 ** 3}


# --- the host model: the device, from the one merge of the inventory's arguments --------------------------------

def hostvars(common=None, args=None):
    return {"cpu1": {"sglang_version": "0.5.23", "sglang_args_common": common or {},
                     "sglang_args": {"model_path": "/models/Qwen3-0.6B", **(args or {})}}}


@pytest.mark.parametrize("common,args,device", [
    ({}, {}, "cuda"),                                   # unset: SGLang's default (CUDA)
    ({}, {"device": "cpu"}, "cpu"),
    ({"device": "cpu"}, {}, "cpu"),                     # the fleet's common arguments say it
    ({"device": "cpu"}, {"device": "cuda"}, "cuda"),    # the host's own over the fleet's
    ({}, {"device": "cuda"}, "cuda"),
])
def test_the_host_model_says_the_device_from_the_merged_arguments(common, args, device):
    hv = hostvars(common, args)
    model = host.host_model("cpu1", hv, {"all": ["cpu1"]}, ["cpu1"])
    assert model["device"] == device == device_of(model["args"])


def test_every_read_of_the_gpus_passes_the_host_models_device():
    """Roles take the device from sglang_host.device, never re-derive it from the arguments."""
    files = subprocess.run(["git", "ls-files", "roles/*.yml", "playbooks/*.yml"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    calls = [(f, m.group(0)) for f in files for m in re.finditer(r"sglang\.fleet\.gpu_facts:\n(?:\s+\w+: .*\n)+",
                                                                  (REPO / f).read_text())]
    assert sorted({f for f, _ in calls}) == ["playbooks/upgrade-preview.yml", "roles/sglang_audit/tasks/checks.yml",
                                             "roles/sglang_compat/tasks/main.yml",
                                             "roles/sglang_service/tasks/preflight.yml",
                                             "roles/sglang_tune/tasks/main.yml", "roles/sglang_verify/tasks/checks.yml"]
    assert all('device: "{{ sglang_host.device }}"' in call for _, call in calls), calls
    assert not [f for f in files if re.search(r"device.{0,40}sglang_\w*args|args\.device", (REPO / f).read_text())]


# --- 0 GPUs: the TP/PP/DP-vs-GPU check does not apply ----------------------------------------------------------

def test_a_cpu_server_needs_no_gpu_and_passes_the_gpu_check_with_none():
    assert gpus_needed(CPU_ARGS) == 0
    assert gpus_needed({**CPU_ARGS, "tp_size": 2, "dp_size": 2}) == 0
    assert check_args(CPU_ARGS, CPU["gpu_count"], CPU["source"]) == []
    # SGLang 0.5.23 itself fits tp x pp x dp ranks to the NUMA nodes at start: no project rule on tp_size
    assert check_args({**CPU_ARGS, "tp_size": 2}, 0, "cpu") == []


def test_a_gpu_server_still_needs_its_gpus():
    assert gpus_needed({"tp_size": 2}) == gpus_needed({"tp_size": 2, "device": "cuda"}) == 2
    assert gpus_needed({}) == 1
    assert check_args({"model_path": "/models/m", "tp_size": 2}, 0, "none") == [
        "these arguments need 2 GPU(s) per node (tp_size 2) but the host has 0 (none); lower tp_size to at most 0 "
        "or fix sglang_hardware.gpu_count"]


def test_the_other_argument_checks_still_apply_on_a_cpu_host():
    assert check_args({**CPU_ARGS, "tp_size": 0}, 0, "cpu") == [
        "sglang_args.tp_size is 0: it must be a whole number >= 1 (e.g. tp_size: 2, without quotes)"]


@pytest.mark.parametrize("environment", [{}, {"SGLANG_USE_CPU_ENGINE": "0"}, {"OMP_NUM_THREADS": "2"}])
def test_a_cpu_server_without_sglangs_cpu_switch_is_refused_with_the_fix(environment):
    # Without SGLANG_USE_CPU_ENGINE=1 SGLang's is_cpu() is False and it fails at start-up on the CUDA path
    # (the real 0.5.23 on this machine: rotary_embedding/base.py:138 imports vllm's CUDA ops).
    problems = check_args(CPU_ARGS, 0, "cpu", environment)
    assert len(problems) == 1
    assert "SGLANG_USE_CPU_ENGINE: \"1\"" in problems[0] and "sglang_service_environment" in problems[0]


def test_a_cpu_server_with_sglangs_cpu_switch_passes_and_a_gpu_server_needs_none():
    assert check_args(CPU_ARGS, 0, "cpu", {"SGLANG_USE_CPU_ENGINE": "1"}) == []
    assert check_args(CPU_ARGS, 0, "cpu", {"SGLANG_USE_CPU_ENGINE": 1}) == []  # YAML's unquoted 1
    assert check_args({"model_path": "/models/m"}, 1, "declared", {}) == []

def test_a_multi_node_cpu_server_has_no_gpus_to_count():
    members = {"c0": {"ansible_facts": {"sglang_gpu": CPU}}, "c1": {"ansible_facts": {"sglang_gpu": CPU}}}
    plan = {"group": "cpus", "members": ["c0", "c1"]}
    assert multinode.gpu_problems(plan, members, {**CPU_ARGS, "tp_size": 2}) == []
    gpu_args = {**CPU_ARGS, "device": "cuda", "tp_size": 2}
    assert multinode.gpu_problems(plan, members, gpu_args) == [
        "multi-node server 'cpus': tp_size 2 x pp_size 1 = 2 but its 2 nodes have 0 GPUs (0 each); set tp_size x "
        "pp_size to 0 in the group's sglang_args, or fix sglang_hardware.gpu_count"]


# --- GPU facts: none read on a CPU host, and a declaration of GPUs there is refused --------------------------

def test_a_cpu_host_has_cpu_facts_without_nvidia_smi():
    assert cpu_facts() == cpu_facts({}) == cpu_facts({"gpu_count": 0}) == {
        "source": "cpu", "gpu_count": 0, "gpu_model": None, "gpus": [],
        "reason": "not applicable on a CPU host (sglang_args.device: cpu)"}
    assert gpu_facts.is_cpu_host(CPU) and not gpu_facts.is_cpu_host(H200X2) and not gpu_facts.is_cpu_host(None)


@pytest.mark.parametrize("decl,what", [
    ({"gpu_model": "NVIDIA H200", "gpu_count": 2}, "gpu_count: 2, gpu_model: NVIDIA H200"),
    ({"gpu_model": "NVIDIA H200"}, "gpu_model: NVIDIA H200"),
    ({"hbm_bandwidth_gbs": 4800}, "hbm_bandwidth_gbs"),
])
def test_a_gpu_declaration_on_a_cpu_host_is_refused_with_what_to_do(decl, what):
    with pytest.raises(GpuFactsError) as err:
        cpu_facts(decl)
    assert str(err.value) == (
        "the host's server runs with device: cpu (sglang_args or sglang_args_common), so it uses no GPU, but "
        f"sglang_hardware declares GPUs ({what}): remove sglang_hardware from the host (or set gpu_count: 0), or "
        "drop device: cpu from its sglang_args to run it on the GPUs")


def test_a_gpu_declaration_still_needs_a_gpu_count_on_a_gpu_host():
    with pytest.raises(GpuFactsError, match=r"^GPU declaration: gpu_count must be a positive integer, got 0$"):
        declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 0})


# --- compat: the GPU checks are not applicable, the memory fit is the host's RAM ---------------------------------

RELEASE = {"version": "0.5.23", "pins": {"sglang": "0.5.23", "torch": "2.11.0",
                                         "nvidia-cuda-runtime": "13.0.96"}, "files": {}}


def test_the_driver_and_gpu_architecture_checks_are_not_applicable_on_a_cpu_host():
    assert check_driver(RELEASE, CPU, {"toolkit": {}}) == {
        "check": "driver", "status": "ok", "fix": "",
        "detail": "not applicable on a CPU host (sglang_args.device: cpu): no NVIDIA driver is needed"}
    assert check_gpu_arch(RELEASE, CPU, "x86_64", None) == {
        "check": "gpu_arch", "status": "ok", "fix": "",
        "detail": "not applicable on a CPU host (sglang_args.device: cpu): no GPU kernel runs there"}
    # a GPU host without its driver stays unknown, never "not applicable"
    assert check_driver(RELEASE, {"source": "none", "gpu_count": 0}, {"toolkit": {}})["status"] == "unknown"


def test_a_cpu_host_weighs_the_model_against_its_ram():
    got = check_memory_fit(CPU_ARGS, CPU, {"weight_bytes": WEIGHTS, "config": QWEN3_06B}, RAM_16G)
    assert got == {"check": "memory_fit", "status": "ok", "fix": "", "detail": (
        "weights 1.4 GiB / TP 1 = 1.4 GiB per rank; 16.0 GiB per rank (the host's RAM 16.0 GiB / 1 rank (at most: "
        "SGLang gives each rank one NUMA node's share)) x mem_fraction_static 0.5 = 8.0 GiB, 6.6 GiB left for the "
        "KV cache = 61790 tokens at 112 KiB/token (28 layers, 8 KV heads x 128 per rank, 2-byte)")}
    # (16 GiB x 0.5 - 1,503,300,328 B) // (2 x 28 layers x 8 KV heads x 128 x 2 B) = 61790 tokens


def test_a_model_larger_than_a_cpu_hosts_ram_is_refused_with_the_numbers():
    args = {**CPU_ARGS, "model_path": "/models/Qwen3-32B", "tp_size": 2}
    got = check_memory_fit(args, CPU, {"weight_bytes": 65_535_000_000, "config": QWEN3_06B}, RAM_16G)
    assert got["status"] == "blocked"
    assert got["detail"] == (
        "weights 61.0 GiB / TP 2 = 30.5 GiB per rank; 8.0 GiB per rank (the host's RAM 16.0 GiB / 2 ranks (at most: "
        "SGLang gives each rank one NUMA node's share)) x mem_fraction_static 0.5 = 4.0 GiB: the weights do not fit "
        "(26.5 GiB short)")
    assert got["fix"] == "add RAM, raise sglang_args.mem_fraction_static, or use a smaller or quantized model"


def test_a_cpu_host_without_meminfo_leaves_the_fit_unknown():
    got = check_memory_fit(CPU_ARGS, CPU, {"weight_bytes": WEIGHTS, "config": QWEN3_06B}, {})
    assert (got["status"], got["detail"]) == ("unknown", "RAM unknown: the host's RAM is unknown (no /proc/meminfo)")


# --- the roofline and the reports: not applicable on a CPU host ---------------------------------------------------

def test_the_roofline_is_not_applicable_on_a_cpu_host():
    assert roofline.NOT_ON_CPU == gpu_facts.NOT_ON_CPU  # one wording, two modules (roofline.py imports nothing)
    with pytest.raises(roofline.RooflineError, match=r"^not applicable on a CPU host \(sglang_args\.device: cpu\)$"):
        roofline.decode_upper_bound(CPU, WEIGHTS)


def bench(decode):
    shape = {"api": "completions", "input_len": 512, "output_len": 256}
    return [{"concurrency": 1, "decode_tok_s_per_stream": {"p50": decode}, "output_throughput": decode * 0.9,
             "completed": 6, "failed": 0, **shape}]


def verify_cpu(b, th):
    server = {"host": "cpu1", "version": "0.5.23", "args": CPU_ARGS, "gpu": CPU, "weight_bytes": WEIGHTS}
    return evaluate(b, th, server, [], stamp="20261201T080000Z")


def test_verify_on_a_cpu_host_says_the_roofline_is_not_applicable():
    th = {"min_decode_tok_s": 20, "history_window": 3, "regression_tolerance_pct": 5}
    ok = verify_cpu(bench(25.0), th)
    assert ok["ok"] is True
    assert ok["report"]["roofline"] == {"error": "not applicable on a CPU host (sglang_args.device: cpu)",
                                        "not_applicable": True}
    assert ok["report"]["efficiency_pct"] is None and ok["record"]["upper_bound_tok_s"] is None
    assert ok["report"]["gpu"] == {"source": "cpu", "gpu_model": None, "gpu_count": 0, "hbm_bandwidth_gbs": None}
    assert ok["line"] == ("cpu1: PASS single-stream decode 25.0 tok/s (floor 20.0 tok/s, no history yet, roofline "
                          "not applicable on a CPU host) [floor pass, history skip, accept_length skip, last_good skip]")
    slow = verify_cpu(bench(10.0), th)
    assert slow["failures"] == [
        "floor: single-stream decode 10.0 tok/s < floor 20.0 tok/s (history n/a (no passing run with this "
        "version and flags yet); roofline not applicable on a CPU host (sglang_args.device: cpu)); "
        + gates.CHECK_SPEED_CPU.format(host="cpu1")]
    assert slow["record"]["hardware"] == "cpu"   # what a CPU host's peers are matched on


def test_the_audit_says_the_host_has_no_gpu():
    assert hardware_line(CPU) == ("hardware: no GPU, the GPU facts are not applicable on a CPU host "
                                  "(sglang_args.device: cpu); predictions that depend on the GPU say "
                                  "'compute capability unknown'")


def test_the_fleet_report_row_of_a_cpu_host(tmp_path):
    th = {"min_decode_tok_s": 20, "history_window": 3, "regression_tolerance_pct": 5}
    verify = verify_cpu(bench(25.0), th)["report"]
    audit = {"ok": True, "sglang": {"version": "0.5.23", "era": "c"}, "hardware": CPU, "findings": []}
    folder = tmp_path / "cpu1"
    folder.mkdir()
    (folder / "verify-latest.json").write_text(json.dumps(verify))
    (folder / "audit-latest.json").write_text(json.dumps(audit))
    row = fleet_report.host_row(str(folder))
    assert {c: row[c] for c in ("gpus", "decode tok/s", "roofline tok/s", "of roofline", "verify")} == {
        "gpus": "none (CPU host)", "decode tok/s": "25.0", "roofline tok/s": "n/a (CPU host)",
        "of roofline": "n/a (CPU host)", "verify": "PASS"}


def test_the_fleet_report_names_a_package_that_is_not_the_releases(tmp_path):
    audit = {"ok": True, "sglang": {"version": "0.5.23", "era": "C"}, "hardware": CPU, "findings": [],
             "shadowed": [{"package": "sgl_kernel", "path": "/opt/sglang-lab/kernel-standin/sgl_kernel",
                           "lab_standin": True}]}
    folder = tmp_path / "cpu1"
    folder.mkdir()
    (folder / "audit-latest.json").write_text(json.dumps(audit))
    assert fleet_report.host_row(str(folder))["sglang"] == "0.5.23 (era C); sgl_kernel: lab stand-in"
    audit["shadowed"][0]["lab_standin"] = False
    (folder / "audit-latest.json").write_text(json.dumps(audit))
    assert fleet_report.host_row(str(folder))["sglang"] == "0.5.23 (era C); sgl_kernel: shadowed"


def test_a_package_on_the_services_pythonpath_that_shadows_the_releases_is_found(tmp_path):
    site = tmp_path / "venv" / "site-packages"
    for package in ("sglang", "sgl_kernel", "torch"):
        (site / package).mkdir(parents=True)
    (site / "six.py").write_text("")
    first, second = tmp_path / "standin", tmp_path / "other"
    (first / "sgl_kernel").mkdir(parents=True)
    (first / "sgl_kernel" / "__init__.py").write_text('"""stand-in"""\nLAB_STANDIN = True\n')
    (first / "mine").mkdir()                                    # not in the release: not reported
    (first / "mine" / "__init__.py").write_text("")
    second.mkdir()
    (second / "six.py").write_text("")                          # a module file shadows too
    (second / "torch").mkdir()                                  # a folder without __init__.py does not
    env = {"PYTHONPATH": f"{first}:{tmp_path / 'missing'}:{second}"}
    assert shadowed_packages(env, str(site / "sglang")) == [
        {"package": "sgl_kernel", "path": str(first / "sgl_kernel"), "lab_standin": True},
        {"package": "six", "path": str(second / "six.py"), "lab_standin": False}]
    assert shadowed_packages({}, str(site / "sglang")) == []
