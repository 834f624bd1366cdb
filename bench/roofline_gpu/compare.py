"""Put a device run's measured decode tok/s next to sglang-fleet's roofline for the same GPU and bytes.

    .venv/bin/python bench/roofline_gpu/compare.py [RESULTS_DIR]   (default: newest under results/)

Reads what bench/roofline_gpu/device_run.sh wrote on the device (query-gpu.csv, nvidia-smi.txt,
results.json). The GPU facts come from the captured nvidia-smi output through
module_utils/gpu_facts.build_facts, the weight bytes through module_utils/roofline
.model_weight_bytes (the model's config.json, checked against the GGUF's tensor bytes), and the
bound through roofline.decode_upper_bound: sglang-fleet's own code, not a re-implementation.
Prints a Markdown table (median of llama-bench's repetitions per row) and the implied
efficiency: measured tok/s x bytes read per token / datasheet bandwidth.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".collections"))  # the collection's code imports as Ansible imports it
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import build_facts
from ansible_collections.sglang.fleet.plugins.module_utils.verify.roofline import (
    EFFICIENCY,
    GB,
    decode_upper_bound,
    efficiency_pct,
    model_weight_bytes,
)

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def bytes_read_per_token(tensor_bytes):
    """Weight bytes one batch-1 decode pass reads: all, less an untied embedding table (one row)."""
    total = sum(tensor_bytes.values())
    if "output.weight" in tensor_bytes:  # untied: token_embd is only looked up, not multiplied
        total -= tensor_bytes["token_embd.weight"]
    return total


def compare(folder):
    folder = pathlib.Path(folder)
    facts = build_facts((folder / "query-gpu.csv").read_text(), None, (folder / "nvidia-smi.txt").read_text())
    res = json.loads((folder / "results.json").read_text())
    bw = facts["hbm_bandwidth_gbs"]
    rows = []
    for shape, entry in sorted(res["models"].items(), key=lambda kv: kv[1]["model"]["total_tensor_bytes"]):
        model = entry["model"]
        weights = model_weight_bytes(model["config"])  # what sglang-fleet computes for this config.json
        gguf_bytes = model["total_tensor_bytes"]
        if abs(weights["bytes"] - gguf_bytes) > 0.001 * gguf_bytes:
            raise SystemExit(f"{shape}: roofline.model_weight_bytes {weights['bytes']} != GGUF tensor bytes {gguf_bytes}")
        bound = decode_upper_bound(facts, gguf_bytes)
        read = bytes_read_per_token(model["tensor_bytes"])
        for run in entry.get("llama_bench", []):
            tok_s = statistics.median(run["samples_ts"])
            rows.append({
                "shape": shape, "origin": model["origin"], "weight_bytes": gguf_bytes, "read_bytes": read,
                "flash_attn": bool(run["flash_attn"]), "n_gen": run["n_gen"], "reps": len(run["samples_ts"]),
                "measured_tok_s": round(tok_s, 1), "samples": [round(s, 1) for s in run["samples_ts"]],
                "roofline_tok_s": bound["upper_bound_tok_s"], "pct_of_roofline": efficiency_pct(tok_s, bound),
                "eff_counted": tok_s * gguf_bytes / (bw * GB), "eff_read": tok_s * read / (bw * GB),
                "formula": bound["formula"],
            })
    return facts, res, rows


def markdown(facts, res, rows):
    bench = res["models"][rows[0]["shape"]]["llama_bench"][0]
    read_gbs = (res.get("bandwidth") or {}).get("read_gbs_median")
    out = [
        f"Device: {facts['gpu_model']} x{facts['gpu_count']}, {facts['memory_mib']} MiB, driver "
        f"{facts['driver_version']}, CUDA {facts['cuda_version']}; gpu_facts: {facts['hbm_bandwidth_gbs']} GB/s "
        f"({facts['gpu_spec']}), roofline EFFICIENCY {EFFICIENCY}. Run {res['date_utc']} UTC.",
        f"Engine: llama.cpp llama-bench, build '{bench['build_commit']}' ({bench['backends']}), {res['nvcc']}; "
        f"flags: `{res['build_flags']}`.",
        "",
        "| model (shape of) | weight bytes | read per token | flash attn | measured tok/s (median) | samples | "
        "roofline tok/s | measured / roofline | implied efficiency (counted / read bytes) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['shape']} ({r['origin']}) | {r['weight_bytes'] / GB:.2f} GB | {r['read_bytes'] / GB:.2f} GB | "
            f"{'on' if r['flash_attn'] else 'off'} | {r['measured_tok_s']} | {', '.join(map(str, r['samples']))} | "
            f"{r['roofline_tok_s']} | {r['pct_of_roofline']} % | {r['eff_counted']:.3f} / {r['eff_read']:.3f} |"
        )
    if read_gbs:
        out += ["", f"Plain HBM read on the same GPU (torch sum of 8 GB, median of 10): {read_gbs} GB/s = "
                    f"{read_gbs / facts['hbm_bandwidth_gbs']:.3f} of the datasheet."]
    return "\n".join(out)


def main(argv):
    folder = pathlib.Path(argv[1]) if len(argv) > 1 else max(p for p in RESULTS.iterdir() if p.is_dir())
    facts, res, rows = compare(folder)
    if not rows:
        raise SystemExit(f"{folder}: no llama-bench results")
    print(markdown(facts, res, rows))


if __name__ == "__main__":
    main(sys.argv)
