"""Memory-bandwidth roofline for single-stream decode (stdlib only).

At batch 1 each decode pass reads every weight once, so a pass takes at least
weight_bytes / (effective bandwidth of the GPUs that hold the weights). With speculative
decoding (MTP, EAGLE) one pass yields `accept_length` tokens on average, and verifying a few
draft tokens costs about the same as one (batch 4-8 cost 1.04-1.05x batch 1 on H200):

    tok/s <= accept_length * EFFICIENCY * bandwidth_per_gpu * tp_size / weight_bytes

Tensor parallelism splits the weights over tp_size GPUs that read in parallel. The bound
ignores all-reduce, KV-cache and attention reads, so real decode stays below it.
"""
import json
import math
import os
import struct

# Calibration (../shared/notes/real-engine-and-gpu.md, H200, PyTorch bf16, CUDA graph, batch-1
# GEMV over a weight stack): 7.8 GB in 1.98 ms = 3,966 GB/s, 26.9 GB in 6.75 ms = 3,987 GB/s,
# 53.8 GB in 13.07 ms = 4,120 GB/s, against the datasheet's 4,800 GB/s: 0.826, 0.831, 0.858.
# We take the 26.9 GB point, 3,987 / 4,800 = 0.831 -> 0.83: it is the size of the models this
# project serves (~27 GB), and the lower end keeps the bound a bound. GDDR cards (A6000) are
# assumed to reach the same fraction of their datasheet figure; that is not measured.
# Re-checked on an H200 on 2026-11-30 (tests/fixtures/gpu/README.md): a plain 8 GB read
# (torch sum) ran at 4,179 GB/s = 0.87 of datasheet, so 0.83 is reachable; torch 2.11's default
# GEMV (F.linear, one token, CUDA graph) reached only 0.40-0.70, depending on the shapes.
# Against a real engine (bench/README.md, "Roofline against a real H200", 2026-12-01): llama.cpp
# CUDA F16 single-stream decode reached 82-84 % of this bound for 16-30 GB of weights and 42-48 %
# for 2.5 GB (kernel launch bound): ~80 % of the roofline is about as good as decode gets.
EFFICIENCY = 0.83

GB = 1e9  # datasheet bandwidth and weight sizes are decimal GB

# A CPU host (GPU facts with source "cpu", the host model's `device: cpu`) has no GPU memory bandwidth
# to bound decode by. The same words as module_utils/host/gpu_facts.py NOT_ON_CPU (a unit test holds
# them equal): this module imports nothing of the repository (bench/roofline_gpu loads it alone).
NOT_ON_CPU = "not applicable on a CPU host (sglang_args.device: cpu)"

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1, "int8": 1, "uint8": 1,
}


class RooflineError(ValueError):
    """Input the roofline cannot use."""


def _safetensors_tensor_bytes(path):
    """Bytes of tensor data in a .safetensors file: file size less the 8-byte length and header."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(8)
    if len(head) < 8:
        raise RooflineError(f"{path}: not a safetensors file (shorter than 8 bytes)")
    (header_len,) = struct.unpack("<Q", head)
    if 8 + header_len > size:
        raise RooflineError(f"{path}: not a safetensors file (header length {header_len} > file size {size})")
    return size - 8 - header_len


def _dtype_bytes(config):
    quant = config.get("quantization_config") or {}
    bits = quant.get("bits") or quant.get("w_bit")
    if bits:
        return bits / 8, f"{bits}-bit {quant.get('quant_method', 'quantized')}"
    if str(quant.get("quant_method", "")).lower() == "fp8":
        return 1, "fp8"
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16").replace("torch.", "")
    if dtype not in _DTYPE_BYTES:
        raise RooflineError(f"config.json: unknown dtype {dtype!r} (known: {', '.join(sorted(_DTYPE_BYTES))})")
    return _DTYPE_BYTES[dtype], dtype


def estimate_params(config):
    """Parameter count of a decoder-only transformer from its config.json (llama/qwen style).

    Embeddings (+ LM head unless tied), per layer: q/k/v/o projections (GQA via
    num_key_value_heads), gated MLP (3 * hidden * intermediate) or MoE experts
    (num_experts * 3 * hidden * moe_intermediate_size, plus shared experts and router), 2 norms.
    """
    cfg = config.get("text_config", config)
    try:
        hidden = int(cfg["hidden_size"])
        layers = int(cfg["num_hidden_layers"])
        vocab = int(cfg["vocab_size"])
    except KeyError as exc:
        raise RooflineError(f"config.json: missing {exc.args[0]!r}; cannot estimate the parameter count") from None
    heads = int(cfg.get("num_attention_heads", 1))
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    inter = int(cfg.get("intermediate_size") or 4 * hidden)
    attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts") or 0)
    if experts:
        moe_inter = int(cfg.get("moe_intermediate_size") or inter)
        shared = int(cfg.get("n_shared_experts") or 0) * 3 * hidden * moe_inter
        shared += 3 * hidden * int(cfg.get("shared_expert_intermediate_size") or 0)
        mlp = experts * 3 * hidden * moe_inter + shared + hidden * experts
    else:
        mlp = 3 * hidden * inter
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    return embed + layers * (attn + mlp + 2 * hidden) + hidden


def model_weight_bytes(source):
    """Bytes of weights read per decode pass, and how they were found.

    `source`: a model folder, or a parsed `model.safetensors.index.json` (has "metadata") or
    `config.json` (has "hidden_size") dict. In a folder: the index's metadata.total_size, else
    the tensor bytes of the *.safetensors files, else an estimate from config.json.
    Returns {"bytes": int, "method": "safetensors_index" | "safetensors_files" |
    "config_estimate", "detail": str}. MoE estimates count all experts, not the active ones.
    """
    if isinstance(source, dict):
        if "metadata" in source or "weight_map" in source:
            total = (source.get("metadata") or {}).get("total_size")
            if not isinstance(total, int) or total <= 0:
                raise RooflineError("safetensors index has no positive metadata.total_size")
            return {"bytes": total, "method": "safetensors_index", "detail": "metadata.total_size"}
        params = estimate_params(source)
        nbytes, dtype = _dtype_bytes(source)
        return {
            "bytes": int(params * nbytes),
            "method": "config_estimate",
            "detail": f"{params} parameters x {nbytes:g} bytes ({dtype})",
        }
    folder = os.fspath(source)
    if not os.path.isdir(folder):
        raise RooflineError(f"{folder}: not a model folder")
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as fh:
            result = model_weight_bytes(json.load(fh))
        result["detail"] = "model.safetensors.index.json metadata.total_size"
        return result
    files = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    if files:
        total = sum(_safetensors_tensor_bytes(os.path.join(folder, f)) for f in files)
        return {"bytes": total, "method": "safetensors_files", "detail": f"{len(files)} .safetensors files"}
    config = os.path.join(folder, "config.json")
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as fh:
            return model_weight_bytes(json.load(fh))
    raise RooflineError(f"{folder}: no model.safetensors.index.json, *.safetensors or config.json")


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RooflineError(f"{name} must be a positive number, got {value!r}")
    return value


def decode_upper_bound(facts, weight_bytes, tp_size=1, accept_length=1.0, efficiency=EFFICIENCY):
    """Upper bound on single-stream decode tok/s for GPU facts (gpu_facts) and weight bytes.

    Returns {"upper_bound_tok_s", "passes_per_s", "bandwidth_gbs" (per GPU, datasheet),
    "efficiency", "tp_size", "accept_length", "method", "formula"}. A CPU host's facts raise
    RooflineError(NOT_ON_CPU).
    """
    if facts.get("source") == "cpu":
        raise RooflineError(NOT_ON_CPU)
    bw = facts.get("hbm_bandwidth_gbs")
    if bw is None:
        raise RooflineError(
            f"no memory bandwidth for gpu_model {facts.get('gpu_model')!r}; declare hbm_bandwidth_gbs"
        )
    _positive(bw, "hbm_bandwidth_gbs")
    _positive(weight_bytes, "weight_bytes")
    _positive(accept_length, "accept_length")
    if not 0 < efficiency <= 1:
        raise RooflineError(f"efficiency must be in (0, 1], got {efficiency!r}")
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1:
        raise RooflineError(f"tp_size must be a positive integer, got {tp_size!r}")
    count = facts.get("gpu_count") or 0
    if tp_size > count:
        raise RooflineError(f"tp_size {tp_size} > gpu_count {count} of {facts.get('gpu_model')!r}")
    passes = efficiency * bw * GB * tp_size / weight_bytes
    bound = accept_length * passes
    return {
        "upper_bound_tok_s": round(bound, 1),
        "passes_per_s": round(passes, 1),
        "bandwidth_gbs": bw,
        "efficiency": efficiency,
        "tp_size": tp_size,
        "accept_length": accept_length,
        "method": "memory-bandwidth roofline (single stream, weights read once per pass)",
        "formula": (
            f"{accept_length:g} accepted/pass x {efficiency:g} x {bw:g} GB/s x {tp_size} GPU / "
            f"{weight_bytes / GB:.2f} GB = {bound:.1f} tok/s"
        ),
    }


def efficiency_pct(measured, bound):
    """Measured tok/s as a percentage (1 decimal) of a bound (number or decode_upper_bound dict)."""
    if isinstance(bound, dict):
        bound = bound["upper_bound_tok_s"]
    _positive(bound, "bound")
    if isinstance(measured, bool) or not isinstance(measured, (int, float)) or measured < 0:
        raise RooflineError(f"measured must be a number >= 0, got {measured!r}")
    return round(100.0 * measured / bound, 1)


__all__ = [
    "EFFICIENCY", "NOT_ON_CPU", "RooflineError", "decode_upper_bound", "efficiency_pct", "estimate_params",
    "model_weight_bytes",
]
