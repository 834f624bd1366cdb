"""GPU facts: nvidia-smi parsing (real H200 captures, A6000 from NVIDIA's formats), declared hardware,
the no-GPU paths, and the Ansible module run by ansible itself against a stand-in nvidia-smi."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import (
    GPU_SPECS,
    QUERY_ARGV,
    GpuFactsError,
    build_facts,
    collect_facts,
    cpu_facts,
    declared_facts,
    find_spec,
    parse_query_csv,
    parse_topo,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "gpu"


def read(*parts):
    return (FIX.joinpath(*parts)).read_text()


def gpu(index, name, cc, mem, bus):
    return {"index": index, "name": name, "compute_capability": cc, "memory_mib": mem, "bus_id": bus}


H200 = "NVIDIA H200"
A6000 = "NVIDIA RTX A6000"


def test_h200x1_facts():
    facts = build_facts(read("h200x1", "query-gpu.csv"), read("h200x1", "topo.txt"), read("h200x1", "nvidia-smi.txt"))
    assert facts == {
        "source": "detected",
        "gpu_count": 1,
        "gpu_model": H200,
        "gpus": [gpu(0, H200, "9.0", 143771, "00000000:00:06.0")],
        "compute_capability": "9.0",
        "sm": 90,
        "memory_mib": 143771,
        "interconnect": "none",
        "link_matrix": {"devices": ["GPU0"], "links": [["X"]]},
        "nvlink_links": None,
        "driver_version": "580.159.04",
        "cuda_version": "13.0",
        "hbm_bandwidth_gbs": 4800,
        "gpu_spec": "H200",
    }


def test_h200x1_module_argv_capture():
    """What the module's own argv printed on a real H200 (2026-11-30, device run; UUID masked)."""
    facts = build_facts(read("h200x1", "query-gpu-module-argv.csv"), None, read("h200x1", "nvidia-smi.txt"))
    assert facts == build_facts(read("h200x1", "query-gpu.csv"), None, read("h200x1", "nvidia-smi.txt"))
    assert (facts["gpu_count"], facts["gpu_model"], facts["compute_capability"], facts["memory_mib"],
            facts["driver_version"]) == (1, H200, "9.0", 143771, "580.159.04")


def test_h200x2_facts_nvlink():
    facts = build_facts(read("h200x2", "query-gpu.csv"), read("h200x2", "topo.txt"), read("h200x2", "nvidia-smi.txt"))
    assert facts == {
        "source": "detected",
        "gpu_count": 2,
        "gpu_model": H200,
        "gpus": [gpu(0, H200, "9.0", 143771, "00000000:00:06.0"), gpu(1, H200, "9.0", 143771, "00000000:00:07.0")],
        "compute_capability": "9.0",
        "sm": 90,
        "memory_mib": 143771,
        "interconnect": "nvlink",
        "link_matrix": {"devices": ["GPU0", "GPU1"], "links": [["X", "NV18"], ["NV18", "X"]]},
        "nvlink_links": "NV18",
        "driver_version": "580.159.04",
        "cuda_version": "13.0",
        "hbm_bandwidth_gbs": 4800,
        "gpu_spec": "H200",
    }


@pytest.mark.parametrize(
    ("case", "bus1", "cell", "interconnect", "nvlink"),
    [
        ("a6000x2-phb", "00000000:02:00.0", "PHB", "pcie", None),
        ("a6000x2-sys", "00000000:81:00.0", "SYS", "pcie", None),
        ("a6000x2-nv4", "00000000:02:00.0", "NV4", "nvlink", "NV4"),
    ],
)
def test_a6000x2_facts(case, bus1, cell, interconnect, nvlink):
    facts = build_facts(read(case, "query-gpu.csv"), read(case, "topo.txt"))
    assert facts == {
        "source": "detected",
        "gpu_count": 2,
        "gpu_model": A6000,
        "gpus": [gpu(0, A6000, "8.6", 49140, "00000000:01:00.0"), gpu(1, A6000, "8.6", 49140, bus1)],
        "compute_capability": "8.6",
        "sm": 86,
        "memory_mib": 49140,
        "interconnect": interconnect,
        "link_matrix": {"devices": ["GPU0", "GPU1"], "links": [["X", cell], [cell, "X"]]},
        "nvlink_links": nvlink,
        "driver_version": "535.183.01",
        "cuda_version": None,
        "hbm_bandwidth_gbs": 768,
        "gpu_spec": "RTX A6000",
    }


def test_banner_cuda_version_a6000():
    facts = build_facts(read("a6000x2-phb", "query-gpu.csv"), read("a6000x2-phb", "topo.txt"),
                        read("a6000x2-phb", "nvidia-smi.txt"))
    assert facts["cuda_version"] == "12.2"


def test_cuda_version_from_xml():
    facts = build_facts(read("h200x1", "query-gpu.csv"), None, read("h200x1", "nvidia-smi-q.xml"))
    assert facts["cuda_version"] == "13.0"


def test_noheader_with_fields():
    gpus = parse_query_csv(read("h200x2", "query-gpu-noheader.csv"), ("index", "name", "compute_cap", "memory.total"))
    assert gpus == [
        {"index": i, "name": H200, "compute_capability": "9.0", "memory_mib": 143771, "bus_id": None,
         "driver_version": None}
        for i in (0, 1)
    ]


def test_noheader_nounits_default_fields_equals_header_form():
    plain = parse_query_csv(read("a6000x2-phb", "query-gpu-noheader-nounits.csv"))
    assert plain == parse_query_csv(read("a6000x2-phb", "query-gpu.csv"))


def test_header_nounits():
    text = "index, name, compute_cap, memory.total [MiB]\n0, NVIDIA L4, 8.9, 23034\n"
    assert parse_query_csv(text) == [
        {"index": 0, "name": "NVIDIA L4", "compute_capability": "8.9", "memory_mib": 23034, "bus_id": None,
         "driver_version": None}
    ]


def test_mixed_gpus_lowest_capability_and_bandwidth():
    text = ("index, name, compute_cap, memory.total [MiB]\n"
            "0, NVIDIA GeForce RTX 4090, 8.9, 24564 MiB\n1, NVIDIA RTX A6000, 8.6, 49140 MiB\n")
    topo = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSYS\t0-15\nGPU1\tSYS\t X \t0-15\n"
    facts = build_facts(text, topo)
    assert (facts["gpu_model"], facts["compute_capability"], facts["sm"], facts["memory_mib"],
            facts["hbm_bandwidth_gbs"], facts["gpu_spec"]) == (
        "NVIDIA GeForce RTX 4090 + NVIDIA RTX A6000", "8.6", 86, 24564, 768, "RTX 4090 + RTX A6000")


def test_unknown_model_detected_has_no_bandwidth():
    facts = build_facts("index, name, compute_cap, memory.total [MiB]\n0, NVIDIA A800 80GB PCIe, 8.0, 81920 MiB\n")
    assert (facts["gpu_spec"], facts["hbm_bandwidth_gbs"], facts["sm"]) == (None, None, 80)


def test_partial_nvlink_is_pcie():
    topo = ("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\n"
            "GPU0\t X \tNV4\tSYS\tSYS\t0-15\nGPU1\tNV4\t X \tSYS\tSYS\t0-15\n"
            "GPU2\tSYS\tSYS\t X \tNV4\t16-31\nGPU3\tSYS\tSYS\tNV4\t X \t16-31\n")
    query = "".join(f"{i}, NVIDIA RTX A6000, 8.6, 49140\n" for i in range(4))
    facts = build_facts(query, topo, fields=("index", "name", "compute_cap", "memory.total"))
    assert (facts["interconnect"], facts["nvlink_links"]) == ("pcie", None)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H200", "H200"), ("NVIDIA H200 NVL", "H200"), ("NVIDIA GH200 480GB", None),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H20", "H20"), ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"), ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
        ("NVIDIA A10", "A10"), ("NVIDIA A10G", "A10"), ("NVIDIA A30", "A30"), ("NVIDIA A40", "A40"),
        ("NVIDIA L4", "L4"), ("NVIDIA L40", "L40"), ("NVIDIA L40S", "L40S"),
        ("NVIDIA RTX A6000", "RTX A6000"), ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
        ("Quadro RTX 6000", None), ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("AMD Instinct MI300X", "MI300X"), ("Tesla T4", "T4"), ("Tesla V100-SXM2-32GB", "V100"),
    ],
)
def test_find_spec(name, key):
    row = find_spec(name)
    assert (row[0] if row else None) == key


def test_spec_bandwidths():
    bw = {row[0]: row[2] for row in GPU_SPECS}
    assert {k: bw[k] for k in ("H200", "H100 SXM", "H100 PCIe", "H20", "A100 80GB SXM", "A100 40GB", "RTX A6000",
                               "RTX 6000 Ada", "L40S", "L4", "A10", "B200", "RTX 4090", "RTX 3090", "MI300X")} == {
        "H200": 4800, "H100 SXM": 3350, "H100 PCIe": 2000, "H20": 4000, "A100 80GB SXM": 2039, "A100 40GB": 1555,
        "RTX A6000": 768, "RTX 6000 Ada": 960, "L40S": 864, "L4": 300, "A10": 600, "B200": 8000,
        "RTX 4090": 1008, "RTX 3090": 936, "MI300X": 5300}


# --- parse errors -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "nvidia-smi query returned no GPU lines"),
        ("index, name, compute_cap\n", "nvidia-smi query returned no GPU lines"),
        ("0, NVIDIA H200, 9.0, 143771\n",
         ("nvidia-smi query line 1: 4 values for 7 columns (index, name, uuid, pci.bus_id, compute_cap, "
          "memory.total, driver_version): '0, NVIDIA H200, 9.0, 143771'")),
        ("index, name, compute_cap\n0, NVIDIA H200, 9\n", "nvidia-smi query line 2: compute_cap '9' is not like '8.6'"),
        ("index, name, memory.total [MiB]\n0, NVIDIA H200, lots\n",
         "nvidia-smi query line 2: memory.total 'lots' is not a number"),
        ("uuid, compute_cap\nGPU-0, 9.0\n", "nvidia-smi query has no 'index' column (columns: uuid, compute_cap)"),
    ],
)
def test_query_errors(text, message):
    with pytest.raises(GpuFactsError) as exc:
        parse_query_csv(text)
    assert str(exc.value) == message


def test_topo_errors():
    with pytest.raises(GpuFactsError) as exc:
        parse_topo("Legend:\n  X = Self\n")
    assert str(exc.value) == "nvidia-smi topo -m: no header line with GPU columns"
    with pytest.raises(GpuFactsError) as exc:
        parse_topo("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-15\n")
    assert str(exc.value) == "nvidia-smi topo -m: no row for GPU1"
    with pytest.raises(GpuFactsError) as exc:
        build_facts(read("h200x2", "query-gpu.csv"), read("h200x1", "topo.txt"))
    assert str(exc.value) == "nvidia-smi topo -m lists 1 GPUs, the query 2"


def test_topo_drops_nic_rows():
    assert parse_topo(read("a6000x2-sys", "topo.txt")) == {
        "devices": ["GPU0", "GPU1"], "links": [["X", "SYS"], ["SYS", "X"]]}


# --- collect_facts: what the module runs --------------------------------------------------------

class FakeSmi:
    """Answers nvidia-smi argv lists from fixture folders; records what was run."""

    def __init__(self, case=None, rc=0, out=None):
        self.case, self.rc, self.out, self.calls = case, rc, out, []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if self.out is not None:
            return self.rc, self.out, ""
        name = {"topo": "topo.txt", None: "nvidia-smi.txt"}.get(argv[1] if len(argv) > 1 else None, "query-gpu.csv")
        path = FIX / self.case / name
        return (0, path.read_text(), "") if path.exists() else (1, "", f"{name} missing")


def test_collect_h200x2_runs_argv_lists():
    run = FakeSmi("h200x2")
    facts = collect_facts(run, "/usr/bin/nvidia-smi")
    assert run.calls == [["/usr/bin/nvidia-smi", *QUERY_ARGV], ["/usr/bin/nvidia-smi", "topo", "-m"],
                         ["/usr/bin/nvidia-smi"]]
    assert QUERY_ARGV == ("--query-gpu=index,name,uuid,pci.bus_id,compute_cap,memory.total,driver_version",
                          "--format=csv")
    assert (facts["gpu_count"], facts["interconnect"], facts["nvlink_links"], facts["cuda_version"]) == (
        2, "nvlink", "NV18", "13.0")


def test_collect_single_gpu_skips_topo():
    run = FakeSmi("h200x1")
    facts = collect_facts(run, "nvidia-smi")
    assert run.calls == [["nvidia-smi", *QUERY_ARGV], ["nvidia-smi"]]
    assert (facts["interconnect"], facts["link_matrix"]) == ("none", None)


def test_collect_topo_failure_leaves_interconnect_unknown():
    run = FakeSmi("a6000x2-phb")
    facts = collect_facts(lambda argv: (3, "", "boom") if "topo" in argv else run(argv), "nvidia-smi")
    assert (facts["gpu_count"], facts["interconnect"], facts["link_matrix"], facts["cuda_version"]) == (
        2, None, None, "12.2")


def test_collect_missing_binary():
    assert collect_facts(FakeSmi("h200x1"), None) == {
        "source": "none", "gpu_count": 0, "error": "nvidia-smi not found (no NVIDIA driver installed)"}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("nodriver", ("nvidia-smi --query-gpu failed (rc=9): NVIDIA-SMI has failed because it couldn't communicate "
                      "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.")),
        ("nodevice", "nvidia-smi --query-gpu failed (rc=6): No devices were found"),
    ],
)
def test_collect_driver_failures(case, message):
    run = FakeSmi(rc=int(read(case, "rc")), out=read(case, "stdout.txt"))
    assert collect_facts(run, "nvidia-smi") == {"source": "none", "gpu_count": 0, "error": message}
    assert len(run.calls) == 1


def test_collect_garbage_output_is_none_not_exception():
    facts = collect_facts(FakeSmi(out="Segmentation fault\n"), "nvidia-smi")
    assert facts["source"] == "none"
    assert facts["error"].startswith("nvidia-smi query line 1: 1 values for 7 columns")


# --- declared hardware -----------------------------------------------------------------------

def test_declared_a6000():
    assert declared_facts({"gpu_model": A6000, "gpu_count": 2}) == {
        "source": "declared",
        "gpu_count": 2,
        "gpu_model": A6000,
        "gpus": [gpu(0, A6000, "8.6", None, None), gpu(1, A6000, "8.6", None, None)],
        "compute_capability": "8.6",
        "sm": 86,
        "memory_mib": None,
        "interconnect": "pcie",
        "link_matrix": None,
        "nvlink_links": None,
        "driver_version": None,
        "cuda_version": None,
        "hbm_bandwidth_gbs": 768,
        "gpu_spec": "RTX A6000",
    }


def test_declared_defaults_and_overrides():
    one = declared_facts({"gpu_model": "H200", "gpu_count": 1})
    assert (one["interconnect"], one["compute_capability"], one["sm"], one["hbm_bandwidth_gbs"]) == (
        "none", "9.0", 90, 4800)
    eight = declared_facts({"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "nvlink_links": "NV18"})
    assert (eight["interconnect"], eight["nvlink_links"], eight["gpu_spec"]) == ("nvlink", "NV18", "H100 SXM")
    bridged = declared_facts({"gpu_model": A6000, "gpu_count": 2, "interconnect": "nvlink", "nvlink_links": "NV4",
                              "memory_mib": 49140})
    assert (bridged["interconnect"], bridged["nvlink_links"], bridged["memory_mib"]) == ("nvlink", "NV4", 49140)
    old = declared_facts({"gpu_model": A6000, "gpu_count": 2, "driver_version": "535.183.01"})
    assert (old["driver_version"], old["cuda_version"]) == ("535.183.01", None)
    mi = declared_facts({"gpu_model": "AMD Instinct MI300X", "gpu_count": 8})
    assert (mi["compute_capability"], mi["sm"], mi["hbm_bandwidth_gbs"]) == (None, None, 5300)


def test_declared_unknown_model_with_explicit_figures():
    facts = declared_facts({"gpu_model": "NVIDIA A800 80GB PCIe", "gpu_count": 2, "hbm_bandwidth_gbs": 1935,
                            "compute_capability": "8.0"})
    assert (facts["gpu_spec"], facts["hbm_bandwidth_gbs"], facts["sm"], facts["interconnect"]) == (
        None, 1935, 80, "pcie")


def test_declared_unknown_model_rejected():
    with pytest.raises(GpuFactsError) as exc:
        declared_facts({"gpu_model": "NVIDIA A800 80GB PCIe", "gpu_count": 2, "hbm_bandwidth_gbs": 1935})
    known = ", ".join(row[0] for row in GPU_SPECS)
    assert str(exc.value) == (f"GPU declaration: unknown gpu_model 'NVIDIA A800 80GB PCIe'; known models: {known}; "
                              "or give hbm_bandwidth_gbs and compute_capability")
    assert "RTX A6000, RTX A5000" in known


@pytest.mark.parametrize(
    ("decl", "message"),
    [
        ([], "GPU declaration must be a mapping, got list"),
        ({"gpu_count": 2}, "GPU declaration needs gpu_model, e.g. 'NVIDIA RTX A6000'"),
        ({"gpu_model": A6000}, "GPU declaration: gpu_count must be a positive integer, got None"),
        ({"gpu_model": A6000, "gpu_count": True}, "GPU declaration: gpu_count must be a positive integer, got True"),
        ({"gpu_model": A6000, "gpu_count": 0}, "GPU declaration: gpu_count must be a positive integer, got 0"),
        ({"gpu_model": A6000, "gpu_count": 2, "gpu_modle": "x"},
         ("GPU declaration: unknown keys gpu_modle (allowed: gpu_model, gpu_count, hbm_bandwidth_gbs, "
          "compute_capability, interconnect, memory_mib, nvlink_links, driver_version)")),
        ({"gpu_model": A6000, "gpu_count": 2, "driver_version": "latest"},
         "GPU declaration: driver_version 'latest' is not like '580.95.05'"),
        ({"gpu_model": A6000, "gpu_count": 2, "interconnect": "infiniband"},
         "GPU declaration: interconnect 'infiniband' is not one of nvlink, pcie, none"),
        ({"gpu_model": A6000, "gpu_count": 2, "compute_capability": "sm86"},
         "GPU declaration: compute_capability 'sm86' is not like '8.6'"),
        ({"gpu_model": A6000, "gpu_count": 2, "hbm_bandwidth_gbs": -1},
         "GPU declaration: hbm_bandwidth_gbs must be a positive number, got -1"),
    ],
)
def test_declared_errors(decl, message):
    with pytest.raises(GpuFactsError) as exc:
        declared_facts(decl)
    assert str(exc.value) == message


# --- the Ansible module, run by ansible against a stand-in nvidia-smi ------------------------------

FAKE_SMI = """#!{python}
import pathlib, sys
pathlib.Path(__file__ + ".ran").write_text("")
case = pathlib.Path({case!r})
args = sys.argv[1:]
if (case / "rc").exists():
    sys.stdout.write((case / "stdout.txt").read_text())
    sys.exit(int((case / "rc").read_text()))
name = "topo.txt" if args[:1] == ["topo"] else "nvidia-smi.txt" if not args else "query-gpu.csv"
sys.stdout.write((case / name).read_text())
"""


def run_module(tmp_path, case, *module_args):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(python=sys.executable, case=str(FIX / case)))
    smi.chmod(0o755)
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.tree",
               ANSIBLE_CALLBACK_TREE_DIR=str(tmp_path / "tree"), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    args = " ".join([f"nvidia_smi={smi}", *module_args])
    proc = subprocess.run(
        [str(pathlib.Path(sys.executable).with_name("ansible")), "localhost", "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", "--check", "-m", "sglang.fleet.gpu_facts", "-a", args],
        check=False, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    tree = tmp_path / "tree" / "localhost"
    assert tree.exists(), proc.stdout + proc.stderr
    return proc.returncode, json.loads(tree.read_text())


def test_module_detects_a6000_in_check_mode(tmp_path):
    rc, result = run_module(tmp_path, "a6000x2-phb")
    assert rc == 0, result
    assert result["changed"] is False
    facts = result["ansible_facts"]["sglang_gpu"]
    assert facts == build_facts(read("a6000x2-phb", "query-gpu.csv"), read("a6000x2-phb", "topo.txt"),
                                read("a6000x2-phb", "nvidia-smi.txt"))
    assert (tmp_path / "nvidia-smi.ran").exists()


def test_module_on_a_cpu_host_runs_no_nvidia_smi(tmp_path):
    rc, result = run_module(tmp_path, "a6000x2-phb", "device=cpu", "required=true")
    assert rc == 0, result
    assert result["ansible_facts"]["sglang_gpu"] == cpu_facts() == {
        "source": "cpu", "gpu_count": 0, "gpu_model": None, "gpus": [],
        "reason": "not applicable on a CPU host (sglang_args.device: cpu)"}
    assert result["msg"] == "no GPU facts read: not applicable on a CPU host (sglang_args.device: cpu)"
    assert not (tmp_path / "nvidia-smi.ran").exists()


def test_module_refuses_a_gpu_declaration_on_a_cpu_host(tmp_path):
    rc, result = run_module(tmp_path, "a6000x2-phb", "device=cpu",
                            "declared='{\"gpu_model\": \"NVIDIA RTX A6000\", \"gpu_count\": 2}'")
    assert rc == 2, result
    assert result["msg"] == (
        "the host's server runs with device: cpu (sglang_args or sglang_args_common), so it uses no GPU, but "
        "sglang_hardware declares GPUs (gpu_count: 2, gpu_model: NVIDIA RTX A6000): remove sglang_hardware from the "
        "host (or set gpu_count: 0), or drop device: cpu from its sglang_args to run it on the GPUs")
    assert not (tmp_path / "nvidia-smi.ran").exists()


def test_module_no_driver_is_not_an_error(tmp_path):
    rc, result = run_module(tmp_path, "nodriver")
    assert rc == 0, result
    assert result["ansible_facts"]["sglang_gpu"] == {
        "source": "none", "gpu_count": 0,
        "error": "nvidia-smi --query-gpu failed (rc=9): NVIDIA-SMI has failed because it couldn't communicate "
                 "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."}


def test_module_required_fails(tmp_path):
    rc, result = run_module(tmp_path, "nodevice", "required=true")
    assert rc == 2
    assert result["ansible_facts"]["sglang_gpu"]["source"] == "none"
    assert result["msg"] == "no GPU detected: nvidia-smi --query-gpu failed (rc=6): No devices were found"
