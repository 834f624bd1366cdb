"""On a real GPU machine: capture nvidia-smi outputs, parse them with plugins/module_utils/host/gpu_facts.py,
check the facts, and (if torch is there) re-measure the decode-like read bandwidth.

    python3 tests/gpu/h200_capture.py OUTDIR [--expect-count 1 --expect-model "NVIDIA H200"]

Stdlib only (torch optional); imports gpu_facts.py and roofline.py by path, no Ansible needed.
"""
import argparse
import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def load(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "plugins" / "module_utils" / {"gpu_facts": "host"}.get(name, "verify") / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def measure_read_bandwidth(gb=8.0, iters=20, graph=True):
    """Batch-1 bf16 decode-like reads: F.linear of one token over a stack of weight matrices,
    replayed as a CUDA graph (the notes' method). Returns (GB/s, ms/pass, bytes) or None."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    layers, k = 16, 8192
    n = int(gb * 1e9 / 2 / layers / k)
    ws = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")

    def step():
        for w in ws:
            F.linear(x, w)

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.synchronize()
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        step = g.replay
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / iters
    nbytes = sum(w.numel() * 2 for w in ws)
    ws.clear()
    torch.cuda.empty_cache()
    return nbytes / (ms / 1e3) / 1e9, ms, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--expect-count", type=int, default=1)
    ap.add_argument("--expect-model", default="NVIDIA H200")
    ap.add_argument("--expect-cc", default="9.0")
    ap.add_argument("--bandwidth", action="store_true", help="also measure read bandwidth with torch")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu_facts, roofline = load("gpu_facts"), load("roofline")

    smi = shutil.which("nvidia-smi")
    for name, argv in (("query-gpu.csv", gpu_facts.QUERY_ARGV), ("topo.txt", gpu_facts.TOPO_ARGV),
                       ("nvidia-smi.txt", ())):
        rc, stdout, stderr = run([smi, *argv]) if smi else (127, "", "nvidia-smi not found")
        (out / name).write_text(stdout + (f"\n# rc={rc} stderr={stderr}" if rc else ""))
    calls = []
    facts = gpu_facts.collect_facts(lambda argv: (calls.append(argv), run(argv))[1], smi)
    (out / "facts.json").write_text(json.dumps(facts, indent=2) + "\n")

    checks = {
        "source detected": facts.get("source") == "detected",
        f"gpu_count == {args.expect_count}": facts.get("gpu_count") == args.expect_count,
        f"gpu_model == {args.expect_model}": facts.get("gpu_model") == args.expect_model,
        f"compute_capability == {args.expect_cc}": facts.get("compute_capability") == args.expect_cc,
        "memory_mib within 1% of 143771": abs((facts.get("memory_mib") or 0) / 143771 - 1) < 0.01,
        "hbm_bandwidth_gbs == 4800": facts.get("hbm_bandwidth_gbs") == 4800,
    }
    report = {"argv_run": calls, "facts": facts, "checks": checks}
    if args.bandwidth and facts.get("source") == "detected":
        report["bandwidth"] = []
        for gb in (8.0, 26.9):
            measured = measure_read_bandwidth(gb)
            if not measured:
                break
            gbs, ms, nbytes = measured
            bound = roofline.decode_upper_bound(facts, nbytes, 1, 1)
            report["bandwidth"].append({
                "bytes_per_pass": nbytes, "ms_per_pass": round(ms, 3), "gb_s": round(gbs, 1),
                "fraction_of_datasheet": round(gbs / facts["hbm_bandwidth_gbs"], 3),
                "measured_passes_per_s": round(1e3 / ms, 1), "bound_passes_per_s": bound["passes_per_s"],
            })
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print("ALL CHECKS PASS" if all(checks.values()) else "CHECKS FAILED")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
