"""Will this SGLang release run on this host? The checks on real release data (PyPI captures of three
eras, tests/fixtures/compat), the real nvidia-smi captures (tests/fixtures/gpu), A6000-style and
old-driver cases, and the glibc of Debian 11/12 and Ubuntu 20.04/22.04. No network."""

import copy
import json
import os
import pathlib
import types
import urllib.error

import pytest
import yaml

from ansible_collections.sglang.fleet.plugins.module_utils.compat.checks import (
    bad_ignores,
    check_disk,
    check_driver,
    check_gpu_arch,
    check_host_ram,
    check_memory_fit,
    check_platform,
    check_python,
    cuda_runtime,
    kv_bytes_per_token,
    runs_on,
    verdict,
)
from ansible_collections.sglang.fleet.plugins.module_utils.compat.release_facts import CompatError, Pypi, uv_reason
from ansible_collections.sglang.fleet.plugins.module_utils.host.check import (
    free_bytes,
    meminfo,
    model_facts,
    python_facts,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import build_facts, declared_facts

REPO = pathlib.Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "compat"
GPU = REPO / "tests" / "fixtures" / "gpu"
DRIVERS = yaml.safe_load((REPO / "roles" / "sglang_compat" / "files" / "cuda_min_driver.yml").read_text())
# the real table, measured from the wheels (scripts/wheel_sm_targets.py)
KERNELS = yaml.safe_load((REPO / "roles" / "sglang_compat" / "files" / "kernel_sm_targets.yml").read_text())
INDEX = json.loads((FIX / "sglang-index.json").read_text())
DEBIAN11 = UBUNTU2004 = "2.31"
UBUNTU2204, DEBIAN12 = "2.35", "2.36"
GIB = 1024 ** 3


def release(version, **changes):
    data = json.loads((FIX / f"release-{version}.json").read_text())
    data.update(changes)
    return data


def h200(case="h200x1"):
    return build_facts((GPU / case / "query-gpu.csv").read_text(), (GPU / case / "topo.txt").read_text(),
                       (GPU / case / "nvidia-smi.txt").read_text())


def a6000():
    return build_facts((GPU / "a6000x2-phb" / "query-gpu.csv").read_text(), (GPU / "a6000x2-phb" / "topo.txt").read_text(),
                       (GPU / "a6000x2-phb" / "nvidia-smi.txt").read_text())


# --- the captured release facts ---------------------------------------------------------------------

@pytest.mark.parametrize(("version", "torch", "kernel"), [("0.5.11", "2.11.0", "0.4.2"), ("0.5.18", "2.13.0", "0.4.6.post1"),
                                                          ("0.5.23", "2.14.1", "0.4.10")])
def test_every_era_pins_torch_on_cuda_13(version, torch, kernel):
    pins = release(version)["pins"]
    assert (pins["sglang"], pins["torch"], pins["sglang-kernel"]) == (version, torch, kernel)
    assert cuda_runtime(pins) == ("13.0", "nvidia-cuda-runtime 13.0.96")


def test_cuda_runtime_from_a_cu12_wheel_or_torchs_local_version():
    assert cuda_runtime({"torch": "2.8.0", "nvidia-cuda-runtime-cu12": "12.8.90"}) == ("12.8", "nvidia-cuda-runtime-cu12 12.8.90")
    assert cuda_runtime({"torch": "2.8.0+cu126"}) == ("12.6", "torch 2.8.0+cu126")
    assert cuda_runtime({"torch": "2.8.0+cpu"}) == (None, "torch 2.8.0+cpu pins no nvidia-cuda-runtime (a CPU or ROCm build?)")


# --- platform: glibc and architecture ------------------------------------------------------------------

@pytest.mark.parametrize("glibc", [DEBIAN12, UBUNTU2204])
def test_0_5_23_installs_on_debian12_and_ubuntu2204(glibc):
    got = check_platform(release("0.5.23"), "3.11", "x86_64", glibc, INDEX)
    assert got["status"] == "ok"
    assert got["detail"] == (f"needs glibc >= 2.34 (sglang), the host has {glibc} on x86_64 (every wheel of the full "
                             "profile resolved for it)")


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_manylinux_2_34_releases_are_blocked_on_debian11_and_ubuntu2004(version):
    reason = (f"Because sglang=={version} has no wheels with a matching platform tag (e.g., `manylinux_2_31_x86_64`) and "
              f"you require sglang=={version}, we can conclude that your requirements are unsatisfiable.")
    got = check_platform(release(version, resolve_error=reason), "3.11", "x86_64", DEBIAN11, INDEX)
    assert got == {
        "check": "platform", "status": "blocked",
        "detail": f"sglang {version} has wheels for glibc >= 2.34 (manylinux_2_34) only; the host is x86_64, glibc 2.31 "
                  "(Debian 11 / Ubuntu 20.04)",
        "fix": "move the host to glibc >= 2.34 (RHEL 9, Ubuntu 22.04, Debian 12, Ubuntu 24.04, Debian 13 or newer) or "
               "stay on a release with wheels for this host: sglang 0.5.10.post1 is the newest whose sglang wheel "
               "installs here"}


def test_aarch64_has_wheels_and_an_unknown_architecture_is_blocked():
    assert check_platform(release("0.5.23"), "3.11", "aarch64", DEBIAN12, INDEX)["status"] == "ok"
    got = check_platform(release("0.5.23"), "3.11", "ppc64le", DEBIAN12, INDEX)
    assert got == {"check": "platform", "status": "blocked", "fix": "run SGLang on an x86_64 or aarch64 host",
                   "detail": "the host's CPU is ppc64le: SGLang and torch ship Linux wheels for x86_64 and aarch64 only"}


def test_a_dependency_without_any_wheel_leaves_the_platform_unknown_with_uvs_reason():
    reason = ("Because cuda-tile==1.6.0rc5 has no usable wheels and sglang==0.5.18 depends on cuda-tile==1.6.0rc5, we "
              "can conclude that sglang==0.5.18 cannot be used.")
    bare = release("0.5.18", resolve_error=reason, pins={"sglang": "0.5.18"})
    bare["files"] = {"sglang": bare["files"]["sglang"]}
    got = check_platform(bare, "3.11", "x86_64", DEBIAN12, INDEX)
    assert got["status"] == "unknown"
    assert got["detail"] == (
        "needs glibc >= 2.34 (sglang), the host has 2.36 on x86_64 for sglang; the rest is unknown: the full profile "
        f"(sglang with its CUDA stack) of sglang 0.5.18 does not resolve for this host: {reason}")
    assert "ml_env_extra_pins" in got["fix"]


def test_musl_is_blocked():
    got = check_platform(release("0.5.23"), "3.11", "x86_64", "", INDEX)
    assert (got["status"], got["fix"]) == ("blocked", "use a glibc distribution (Debian, Ubuntu, RHEL)")


def test_an_offline_controller_with_nothing_cached_is_unknown_never_ok():
    offline = {"version": "0.5.23", "pins": {"sglang": "0.5.23"}, "files": {}, "size": {},
               "error": "the controller could not resolve sglang 0.5.23 (is it offline? nothing is cached in /c/locks "
                        "for this host): Failed to fetch"}
    checks = [check_platform(offline, "3.11", "x86_64", DEBIAN12), check_python(offline, "3.11", "x86_64", DEBIAN12),
              check_driver(offline, h200(), DRIVERS), check_gpu_arch(offline, h200(), "x86_64", KERNELS)]
    assert {c["status"] for c in checks} == {"unknown"}
    assert all(c["detail"] == offline["error"] for c in checks)


# --- Python ------------------------------------------------------------------------------------------

def test_python_3_10_is_blocked_on_0_5_23_with_the_last_release_for_it():
    got = check_python(release("0.5.23"), "3.10", "x86_64", UBUNTU2204, INDEX)
    assert got == {"check": "python", "status": "blocked",
                   "detail": "sglang 0.5.23 requires Python >=3.11; the host's Python is 3.10",
                   "fix": "point ml_env_python at a Python the release supports (install it on the host), or stay on "
                          "sglang 0.5.21, the newest whose sglang wheel installs on Python 3.10"}


@pytest.mark.parametrize(("version", "python"), [("0.5.11", "3.10"), ("0.5.18", "3.12"), ("0.5.23", "3.11")])
def test_supported_pythons_pass(version, python):
    got = check_python(release(version), python, "x86_64", DEBIAN12, INDEX)
    assert got["status"] == "ok"
    assert got["detail"].startswith(f"Python {python} meets sglang's Requires-Python >=3.1")


def test_python_3_14_has_no_sglang_wheel():
    got = check_python(release("0.5.23"), "3.14", "x86_64", DEBIAN12, INDEX)
    assert got["status"] == "blocked"
    assert got["detail"].startswith("sglang 0.5.23 has x86_64 wheels for cp311, cp312, cp313 only")


# --- NVIDIA driver -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["h200x1", "h200x2"])
def test_the_real_h200_driver_580_runs_cuda_13(case):
    got = check_driver(release("0.5.23"), h200(case), DRIVERS)
    assert got == {"check": "driver", "status": "ok", "fix": "",
                   "detail": "driver 580.159.04 >= 580.65.06, the minimum for CUDA 13.0 (nvidia-cuda-runtime 13.0.96)"}


@pytest.mark.parametrize("version", ["0.5.11", "0.5.18", "0.5.23"])
def test_an_a6000_on_driver_535_is_blocked_on_every_era(version):
    gpu = a6000()
    assert (gpu["driver_version"], gpu["cuda_version"]) == ("535.183.01", "12.2")
    got = check_driver(release(version), gpu, DRIVERS)
    assert got["status"] == "blocked"
    assert got["detail"] == (f"NVIDIA driver 535.183.01 is older than CUDA 13.0 needs (>= 580.65.06; nvidia-cuda-runtime "
                             f"13.0.96, pinned by sglang {version}'s torch); the driver supports CUDA 12.2 at most")
    assert got["fix"].startswith("upgrade the host's NVIDIA driver to 580.65.06 or newer (the 580 branch or a later one)")


def test_a_declared_driver_stands_in_for_nvidia_smi():
    old = declared_facts({"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "driver_version": "570.86.15"})
    assert check_driver(release("0.5.11"), old, DRIVERS)["status"] == "blocked"
    new = declared_facts({"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "driver_version": "580.95.05"})
    assert check_driver(release("0.5.11"), new, DRIVERS)["status"] == "ok"


def test_a_declared_host_without_a_driver_is_unknown_and_says_how_to_declare_it():
    got = check_driver(release("0.5.23"), declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 1}), DRIVERS)
    assert got["status"] == "unknown"
    assert got["detail"] == (
        "CUDA 13.0 (nvidia-cuda-runtime 13.0.96) needs a driver the table knows, but the host's driver is unknown: "
        "sglang_hardware declares none (add driver_version: the output of nvidia-smi --query-gpu=driver_version "
        "--format=csv,noheader)")


def test_minor_version_compatibility_passes_with_a_note_and_a_new_cuda_is_unknown():
    cu128 = {"version": "x", "pins": {"torch": "2.8.0", "nvidia-cuda-runtime-cu12": "12.8.90"}}
    got = check_driver(cu128, a6000(), DRIVERS)  # 535 >= 525.60.13 (CUDA 12.x), < 570.26 (CUDA 12.8 itself)
    assert got["status"] == "ok"
    assert "through CUDA minor version compatibility (>= 525.60.13); NVIDIA lists 570.26 for CUDA 12.8" in got["detail"]
    cu14 = {"version": "x", "pins": {"torch": "3.0.0", "nvidia-cuda-runtime": "14.1.20"}}
    got = check_driver(cu14, h200(), DRIVERS)
    assert got["status"] == "unknown"
    assert got["detail"].startswith("CUDA 14.1 (nvidia-cuda-runtime 14.1.20) is not in the driver table")


def test_no_gpu_found_leaves_the_driver_unknown():
    got = check_driver(release("0.5.23"), {"source": "none", "gpu_count": 0, "error": "nvidia-smi not found"}, DRIVERS)
    assert got["status"] == "unknown"
    assert got["detail"].endswith("the host's driver is unknown: nvidia-smi found no driver on the host")


# --- GPU architecture ----------------------------------------------------------------------------------------

def test_sm_rules():
    assert runs_on({"sm": ["80"]}, (8, 6)) == "cubin"  # a plain cubin runs on a higher minor
    assert runs_on({"sm": ["86"]}, (8, 0)) is None  # ... not a lower one
    assert runs_on({"sm": ["90a"]}, (9, 0)) == "cubin"
    assert runs_on({"sm": ["90a"]}, (10, 0)) is None  # arch-specific: that CC only
    assert runs_on({"sm": ["100f"]}, (10, 3)) == "cubin"  # family-specific: the later members of its family
    assert runs_on({"sm": ["103f"]}, (10, 0)) is None
    assert runs_on({"sm": ["120a"], "ptx": ["80"]}, (12, 0)) == "cubin"
    assert runs_on({"sm": [], "ptx": ["80"]}, (12, 0)) == "ptx"  # PTX JIT-compiles for newer CCs
    assert runs_on({"sm": [], "ptx": ["90"]}, (8, 6)) is None


def test_without_the_kernel_table_the_gpu_check_is_unknown_with_the_reason():
    got = check_gpu_arch(release("0.5.23"), h200(), "x86_64", None)
    assert got == {"check": "gpu_arch", "status": "unknown", "fix": "",
                   "detail": "no table of the kernels' SM targets yet (roles/sglang_compat/files/kernel_sm_targets.yml): "
                             "cannot tell whether the release's kernels include sm_90"}


def declared(model, count=1):
    return declared_facts({"gpu_model": model, "gpu_count": count})


def test_every_era_has_kernels_for_the_lab_and_seed_gpus_on_x86_64():
    assert check_gpu_arch(release("0.5.23"), h200(), "x86_64", KERNELS) == {
        "check": "gpu_arch", "status": "ok", "fix": "", "detail": "sm_90 kernels in sglang-kernel 0.4.10"}
    for version in ("0.5.11", "0.5.18", "0.5.23"):
        assert check_gpu_arch(release(version), a6000(), "x86_64", KERNELS)["status"] == "ok", version


def test_a_t4_is_blocked_on_every_current_release_with_the_last_one_that_runs_on_it():
    # sm_75 (Turing) cubins are only in sgl-kernel 0.2.8 (sglang 0.4.10.post2), measured from the wheels
    got = check_gpu_arch(release("0.5.23"), declared("NVIDIA T4"), "x86_64", KERNELS)
    assert got["status"] == "blocked"
    assert got["detail"] == ("sglang-kernel 0.4.10 has no kernels for sm_75 (NVIDIA T4): cubins 80, 86, 89, 90, 90a, "
                             "100f, 103a, 120a, PTX none")
    assert got["fix"] == ("sglang 0.4.10.post2 is the newest release known to run on sm_75 (it pins sgl-kernel 0.2.8): "
                          "set sglang_version to it, or run this release on GPUs it has kernels for")


def test_an_a100_on_an_arm_host_lost_its_kernels_after_sglang_kernel_0_4_2():
    # the aarch64 wheels from sglang-kernel 0.4.5 on carry nothing below sm_90
    assert check_gpu_arch(release("0.5.11"), declared("NVIDIA A100"), "aarch64", KERNELS)["status"] == "ok"
    got = check_gpu_arch(release("0.5.23"), declared("NVIDIA A100"), "aarch64", KERNELS)
    assert got["status"] == "blocked"
    assert got["fix"].startswith("sglang 0.5.11 is the newest release known to run on sm_80 (it pins sglang-kernel 0.4.2)")


def test_blackwell_runs_on_the_family_cubins():
    b300 = declared_facts({"gpu_model": "NVIDIA B300", "gpu_count": 8, "compute_capability": "10.3",
                           "hbm_bandwidth_gbs": 8000})
    assert check_gpu_arch(release("0.5.18"), b300, "x86_64", KERNELS)["detail"] == \
        "sm_103 kernels in sglang-kernel 0.4.6.post1"  # sm_100f covers CC 10.3


def test_a_version_missing_from_the_table_is_unknown():
    table = copy.deepcopy(KERNELS)
    del table["packages"]["sglang-kernel"]["0.4.6.post1"]["x86_64"]
    got = check_gpu_arch(release("0.5.18"), h200(), "x86_64", table)
    assert got["status"] == "unknown"
    assert got["detail"] == "cannot tell whether the release's kernels include sm_90: sglang-kernel 0.4.6.post1 (x86_64) is not in the table"


# --- memory fit (the lab's models: inventories/lab/host_vars) ---------------------------------------------------

QWEN36 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "torch_dtype": "bfloat16",
          "text_config": {"hidden_size": 5120, "num_hidden_layers": 64, "num_attention_heads": 40,
                          "num_key_value_heads": 8, "max_position_embeddings": 262144}}
CT129 = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "mem_fraction_static": 0.88, "context_length": 131072}
A6000X2 = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2}


def test_kv_cache_per_token_reads_the_nested_text_config():
    assert kv_bytes_per_token(QWEN36, 2) == (131072, "64 layers, 4 KV heads x 128 per GPU, 2-byte")
    assert kv_bytes_per_token(QWEN36, 16)[0] == 2 * 64 * 1 * 128 * 2  # fewer KV heads than ranks: replicated
    assert kv_bytes_per_token(QWEN36, 2, "fp8_e4m3")[0] == 65536
    mla = {"num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "torch_dtype": "bfloat16"}
    assert kv_bytes_per_token(mla, 8) == (61 * 576 * 2, "MLA, 61 layers")


def test_ct129_fits_with_the_numbers():
    got = check_memory_fit(CT129, declared_facts(A6000X2), {"weight_bytes": 27000000000, "config": QWEN36})
    assert got["status"] == "ok"
    assert got["detail"] == (
        "weights 25.1 GiB / TP 2 = 12.6 GiB per GPU; 48.0 GiB per GPU (RTX A6000 datasheet, 48 GB) x mem_fraction_static "
        "0.88 = 42.2 GiB, 29.7 GiB left for the KV cache = 243033 tokens at 128 KiB/token (64 layers, 4 KV heads x 128 "
        "per GPU, 2-byte): 1.9 requests of context_length 131072")


def test_weights_that_do_not_fit_one_gpu_are_refused_with_the_numbers():
    args = {**CT129, "tp_size": 1, "mem_fraction_static": 0.5}
    got = check_memory_fit(args, declared_facts(A6000X2), {"weight_bytes": 27000000000, "config": QWEN36})
    assert got["status"] == "blocked"
    assert got["detail"] == ("weights 25.1 GiB / TP 1 = 25.1 GiB per GPU; 48.0 GiB per GPU (RTX A6000 datasheet, 48 GB) "
                             "x mem_fraction_static 0.5 = 24.0 GiB: the weights do not fit (1.1 GiB short)")
    assert got["fix"].startswith("raise tp_size (the host has 2 GPUs), raise sglang_args.mem_fraction_static")
    assert got["fix"].endswith("or use a smaller or quantized model")


def test_a_context_length_the_kv_cache_cannot_hold_is_refused():
    got = check_memory_fit({**CT129, "mem_fraction_static": 0.5}, declared_facts(A6000X2),
                           {"weight_bytes": 27000000000, "config": QWEN36})
    assert got["status"] == "blocked"
    assert got["detail"].endswith("11.4 GiB left for the KV cache = 93611 tokens at 128 KiB/token (64 layers, 4 KV heads "
                                  "x 128 per GPU, 2-byte): less than one request of context_length 131072 (16.0 GiB of "
                                  "KV cache)")
    assert got["fix"].startswith("lower sglang_args.context_length to 93611 or less")


def test_the_real_h200_memory_and_the_lab_h200_hosts():
    qwen3_32b = {"torch_dtype": "bfloat16", "hidden_size": 5120, "num_hidden_layers": 64, "num_attention_heads": 64,
                 "num_key_value_heads": 8, "max_position_embeddings": 40960}
    args = {"model_path": "/models/Qwen3-32B", "tp_size": 2, "mem_fraction_static": 0.85, "context_length": 32768}
    got = check_memory_fit(args, h200("h200x2"), {"weight_bytes": 65500000000, "config": qwen3_32b})
    assert got["status"] == "ok"
    assert got["detail"].startswith("weights 61.0 GiB / TP 2 = 30.5 GiB per GPU; 140.4 GiB per GPU (nvidia-smi) x "
                                    "mem_fraction_static 0.85 = 119.3 GiB")


def test_memory_unknowns_say_why():
    hub = check_memory_fit({"model_path": "Qwen/Qwen3-8B"}, h200(), {})
    assert (hub["status"], hub["detail"]) == ("unknown", "model Qwen/Qwen3-8B is a Hugging Face repo id, downloaded by "
                                                         "SGLang at start: its size is unknown before")
    odd = declared_facts({"gpu_model": "NVIDIA A800 80GB PCIe", "gpu_count": 2, "hbm_bandwidth_gbs": 1935,
                          "compute_capability": "8.0"})
    got = check_memory_fit(CT129, odd, {"weight_bytes": 1, "config": QWEN36})
    assert (got["status"], got["detail"]) == ("unknown", "GPU memory unknown: the memory of 'NVIDIA A800 80GB PCIe' is "
                                                         "unknown: set sglang_hardware.memory_mib")


# --- disk and RAM --------------------------------------------------------------------------------------------------

HOST = {"env_root": "/opt/ml-env", "env_mount": "/", "env_free_bytes": 20 * GIB, "venv": "/opt/ml-env/sglang-0.5.23",
        "venv_ready": False, "mem_total_bytes": 64 * GIB, "mem_available_bytes": 60 * GIB,
        "model_free_bytes": 100 * GIB, "model_mount": "/models"}
FULL = {"full": {"wheels": 207, "wheel_bytes": 6 * GIB, "installed_bytes": 12 * GIB, "method": "207 from PyPI sizes x 2.0 unpacked"}}


def test_disk():
    assert check_disk(release("0.5.23", size=FULL), HOST, "full")["status"] == "ok"
    small = {**HOST, "env_free_bytes": 10 * GIB}
    got = check_disk(release("0.5.23", size=FULL), small, "full")
    assert got == {"check": "disk", "status": "blocked",
                   "detail": "10.0 GiB free on / (holds /opt/ml-env), about 18.0 GiB needed: full profile: 207 wheels, "
                             "6.0 GiB pushed to the host + ~12.0 GiB unpacked (207 from PyPI sizes x 2.0 unpacked; an "
                             "estimate)",
                   "fix": "free 8.0 GiB or more there (older venvs: sglang_release_keep), or set sglang_env_root to a "
                          "larger filesystem"}
    ready = check_disk(release("0.5.23", size=FULL), {**small, "venv_ready": True}, "full")
    assert (ready["status"], ready["detail"]) == ("ok", "sglang 0.5.23 is already installed in /opt/ml-env/sglang-0.5.23; "
                                                        "model filesystem /models: 100.0 GiB free")
    assert check_disk(release("0.5.23", size={}), HOST, "full")["status"] == "unknown"
    full_model = check_disk(release("0.5.23", size=FULL), {**HOST, "model_free_bytes": 0}, "full")
    assert (full_model["status"], full_model["detail"]) == ("blocked", "the model's filesystem (/models) has no space left")


def test_host_ram_blocks_only_what_is_knowable():
    assert check_host_ram(CT129, HOST, {"weight_bytes": 27000000000})["status"] == "ok"
    got = check_host_ram({**CT129, "cpu_offload_gb": 40}, HOST, {})
    assert got["status"] == "blocked"
    assert got["detail"] == ("64.0 GiB RAM, 60.0 GiB available; 2 rank(s) x ~4.0 GiB (an estimate) + cpu_offload_gb 40 x 2 "
                             "= 74.5 GiB: about 82.5 GiB needed, more than the host has")
    assert check_host_ram(CT129, {}, {})["status"] == "unknown"


# --- the verdict ----------------------------------------------------------------------------------------------------

def test_verdict_worst_status_summary_and_ignore():
    checks = [check_platform(release("0.5.23"), "3.11", "x86_64", DEBIAN12, INDEX),
              check_driver(release("0.5.23"), a6000(), DRIVERS),
              check_gpu_arch(release("0.5.23"), a6000(), "x86_64", None)]
    out = verdict(copy.deepcopy(checks))
    assert (out["status"], out["summary"]) == ("blocked", "1 ok, 1 unknown, 1 blocked")
    assert [c["check"] for c in out["blocked"]] == ["driver"]
    assert out["lines"][1].startswith("driver: blocked: NVIDIA driver 535.183.01 is older than CUDA 13.0 needs")
    assert " -> fix: upgrade the host's NVIDIA driver" in out["lines"][1]
    ignored = verdict(copy.deepcopy(checks), ["driver"])
    assert (ignored["status"], ignored["summary"], ignored["blocked"]) == ("unknown", "1 ok, 1 unknown, 1 blocked but ignored", [])
    assert "[ignored: sglang_compat_ignore]" in ignored["lines"][1]
    assert bad_ignores(["memory_fit", "memroy_fit"]) == ["memroy_fit"]


# --- host facts (plugins/module_utils/host/check.py) --------------------------------------------------------------------

def test_model_facts_from_the_index_else_the_safetensors(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**QWEN36, "vision_config": {"depth": 27}}))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 27000000000}}))
    assert model_facts(str(tmp_path)) == {"config": QWEN36, "weight_bytes": 27000000000,
                                          "weights_from": "model.safetensors.index.json metadata.total_size"}
    (tmp_path / "model.safetensors.index.json").unlink()
    (tmp_path / "a.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "b.safetensors").write_bytes(b"x" * 5)
    assert model_facts(str(tmp_path))["weight_bytes"] == 15
    assert model_facts("Qwen/Qwen3-8B") == {"error": "not a folder on the host"}


def test_meminfo_python_probe_and_free_space(tmp_path, monkeypatch):
    assert meminfo("MemTotal:       24575884 kB\nMemFree: 1 kB\nMemAvailable:   23000000 kB\n") == (
        24575884 * 1024, 23000000 * 1024)
    assert python_facts("3.11 x86_64 glibc-2.36\n") == {"python_version": "3.11", "architecture": "x86_64", "glibc": "2.36"}
    assert python_facts("3.12 aarch64 -\n")["glibc"] == ""
    # a fixed statvfs (the real one moves while other processes write): the nearest existing folder is
    # asked, and only what a non-root writer may use counts (f_bavail, not f_bfree)
    asked = []

    def statvfs(path):
        asked.append(str(path))
        return types.SimpleNamespace(f_bavail=1000, f_bfree=1500, f_frsize=4096, f_bsize=4096)

    monkeypatch.setattr(os, "statvfs", statvfs)
    free, mount, err = free_bytes(str(tmp_path / "not" / "yet"), f"rootfs / rootfs rw 0 0\ntmp {tmp_path} tmpfs rw 0 0\n")
    assert (free, mount, err, asked) == (1000 * 4096, str(tmp_path), None, [str(tmp_path)])


# --- PyPI files and their cache (plugins/module_utils/compat/release_facts.py) ----------------------------------------------------

def test_pypi_json_api_then_the_simple_index_then_the_cache(tmp_path):
    calls = []
    simple = {"files": [{"filename": "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", "size": 39063923,
                         "requires-python": ">=3.11"},
                        {"filename": "sglang-0.5.22-cp311-cp311-manylinux_2_34_x86_64.whl", "size": 1}]}

    def fetch(url, accept=None):
        calls.append(url)
        if "/pypi/" in url:
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)
        return simple

    pypi = Pypi(str(tmp_path), fetch=fetch)
    files = pypi.files("sglang", "0.5.23")
    assert files == [{"filename": "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", "size": 39063923,
                      "requires_python": ">=3.11", "yanked": False}]
    assert calls == ["https://pypi.org/pypi/sglang/0.5.23/json", "https://pypi.org/simple/sglang/"]

    def offline(url, accept=None):
        raise urllib.error.URLError("no route to host")

    assert Pypi(str(tmp_path), fetch=offline).files("sglang", "0.5.23") == files  # cached
    with pytest.raises(CompatError) as err:
        Pypi(str(tmp_path), fetch=offline).files("torch", "2.14.1")
    assert str(err.value).startswith("could not read torch 2.14.1's files from https://pypi.org (<urlopen error no "
                                     "route to host>) and none are cached in ")


def test_uv_reason_keeps_uvs_own_words():
    message = ("could not lock sglang==0.5.18 for CPython 3.11 on x86_64-manylinux_2_36: × No solution found when "
               "resolving dependencies:\n  ╰─▶ Because cuda-tile==1.6.0rc5 has no usable wheels and sglang==0.5.18 "
               "depends on cuda-tile==1.6.0rc5, we can conclude that sglang==0.5.18 cannot be used.\n      And because "
               "you require sglang==0.5.18, we can conclude that your requirements are unsatisfiable.\n\n      hint: "
               "Wheels are required -- hosts install offline from wheels only: ...")
    assert uv_reason(message) == ("Because cuda-tile==1.6.0rc5 has no usable wheels and sglang==0.5.18 depends on "
                                  "cuda-tile==1.6.0rc5, we can conclude that sglang==0.5.18 cannot be used.")
