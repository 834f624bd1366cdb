"""Decode roofline: weight bytes from a model folder or config, bounds for ct129 (2x A6000) and H200."""
import json
import pathlib
import struct

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import build_facts, declared_facts
from ansible_collections.sglang.fleet.plugins.module_utils.verify.roofline import (
    EFFICIENCY,
    RooflineError,
    decode_upper_bound,
    efficiency_pct,
    estimate_params,
    model_weight_bytes,
)

FIX = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "gpu"

# Llama-3-8B's config.json (the published parameter count is 8,030,261,248).
LLAMA3_8B = {
    "hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 128256, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def a6000x2():
    case = FIX / "a6000x2-phb"
    return build_facts((case / "query-gpu.csv").read_text(), (case / "topo.txt").read_text())


def h200x1():
    case = FIX / "h200x1"
    return build_facts((case / "query-gpu.csv").read_text(), (case / "topo.txt").read_text())


def write_safetensors(path, tensor_bytes):
    header = json.dumps({"w": {"dtype": "BF16", "shape": [tensor_bytes // 2], "data_offsets": [0, tensor_bytes]}})
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0" * tensor_bytes)


# --- weight bytes ----------------------------------------------------------------------------------

def test_efficiency_is_the_h200_calibration():
    # notes: 26.9 GB read in 6.75 ms on an H200 (datasheet 4,800 GB/s)
    measured = 26.9e9 / 6.75e-3 / 1e9
    assert round(measured) == 3985
    assert EFFICIENCY == 0.83
    assert abs(measured / 4800 - EFFICIENCY) < 0.005


def test_estimate_llama3_8b_exact():
    assert estimate_params(LLAMA3_8B) == 8_030_261_248
    assert model_weight_bytes(LLAMA3_8B) == {
        "bytes": 16_060_522_496, "method": "config_estimate", "detail": "8030261248 parameters x 2 bytes (bfloat16)"}


def test_estimate_dtypes_and_quantization():
    assert model_weight_bytes({**LLAMA3_8B, "torch_dtype": "float32"})["bytes"] == 4 * 8_030_261_248
    fp8 = model_weight_bytes({**LLAMA3_8B, "quantization_config": {"quant_method": "fp8"}})
    assert (fp8["bytes"], fp8["detail"]) == (8_030_261_248, "8030261248 parameters x 1 bytes (fp8)")
    awq = model_weight_bytes({**LLAMA3_8B, "quantization_config": {"quant_method": "awq", "bits": 4}})
    assert (awq["bytes"], awq["detail"]) == (4_015_130_624, "8030261248 parameters x 0.5 bytes (4-bit awq)")
    tied = estimate_params({**LLAMA3_8B, "tie_word_embeddings": True})
    assert tied == 8_030_261_248 - 128256 * 4096


def test_estimate_moe_counts_all_experts():
    moe = {"hidden_size": 2048, "num_hidden_layers": 2, "vocab_size": 1000, "num_attention_heads": 16,
           "num_key_value_heads": 4, "intermediate_size": 6144, "num_experts": 8, "moe_intermediate_size": 768}
    attn = 2048 * 128 * (2 * 16 + 2 * 4)
    mlp = 8 * 3 * 2048 * 768 + 2048 * 8
    assert estimate_params(moe) == 2 * 1000 * 2048 + 2 * (attn + mlp + 2 * 2048) + 2048


def test_index_dict_and_folder(tmp_path):
    index = {"metadata": {"total_size": 26_912_345_678}, "weight_map": {"lm_head.weight": "model-00001.safetensors"}}
    assert model_weight_bytes(index) == {"bytes": 26_912_345_678, "method": "safetensors_index",
                                         "detail": "metadata.total_size"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    write_safetensors(tmp_path / "model-00001.safetensors", 64)
    assert model_weight_bytes(tmp_path) == {"bytes": 26_912_345_678, "method": "safetensors_index",
                                            "detail": "model.safetensors.index.json metadata.total_size"}


def test_safetensors_files_without_index(tmp_path):
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", 1000)
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", 24)
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    assert model_weight_bytes(str(tmp_path)) == {"bytes": 1024, "method": "safetensors_files",
                                                 "detail": "2 .safetensors files"}


def test_config_only_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    assert model_weight_bytes(tmp_path)["method"] == "config_estimate"


def test_weight_bytes_errors(tmp_path):
    with pytest.raises(RooflineError) as exc:
        model_weight_bytes(tmp_path)
    assert str(exc.value) == f"{tmp_path}: no model.safetensors.index.json, *.safetensors or config.json"
    with pytest.raises(RooflineError) as exc:
        model_weight_bytes(tmp_path / "nope")
    assert str(exc.value) == f"{tmp_path / 'nope'}: not a model folder"
    with pytest.raises(RooflineError) as exc:
        model_weight_bytes({"weight_map": {}})
    assert str(exc.value) == "safetensors index has no positive metadata.total_size"
    with pytest.raises(RooflineError) as exc:
        model_weight_bytes({"hidden_size": 8, "num_hidden_layers": 1})
    assert str(exc.value) == "config.json: missing 'vocab_size'; cannot estimate the parameter count"
    with pytest.raises(RooflineError) as exc:
        model_weight_bytes({**LLAMA3_8B, "torch_dtype": "float4"})
    assert str(exc.value).startswith("config.json: unknown dtype 'float4' (known: bf16, bfloat16,")
    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 10_000) + b"{}")
    with pytest.raises(RooflineError) as exc:
        model_weight_bytes(tmp_path)
    assert str(exc.value) == f"{tmp_path / 'bad.safetensors'}: not a safetensors file (header length 10000 > file size 10)"


# --- bounds ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("accept", "bound"), [(3.0, 141.7), (3.5, 165.3)])
def test_ct129_two_a6000_bound(accept, bound):
    """The seeds' host: 2x RTX A6000 (768 GB/s each), ~27 GB of weights, TP 2, MTP accept 3.0-3.5."""
    result = decode_upper_bound(a6000x2(), 27e9, tp_size=2, accept_length=accept)
    assert result == {
        "upper_bound_tok_s": bound,
        "passes_per_s": 47.2,
        "bandwidth_gbs": 768,
        "efficiency": 0.83,
        "tp_size": 2,
        "accept_length": accept,
        "method": "memory-bandwidth roofline (single stream, weights read once per pass)",
        "formula": f"{accept:g} accepted/pass x 0.83 x 768 GB/s x 2 GPU / 27.00 GB = {bound} tok/s",
    }
    assert 140 <= result["upper_bound_tok_s"] <= 170
    declared = decode_upper_bound(declared_facts({"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2}), 27e9, 2, accept)
    assert declared == result


def test_ct129_measured_efficiency():
    """50-57 tok/s measured on ct129 is about a third of the bound."""
    low = decode_upper_bound(a6000x2(), 27e9, 2, 3.0)
    high = decode_upper_bound(a6000x2(), 27e9, 2, 3.5)
    assert (efficiency_pct(50, low), efficiency_pct(57, high)) == (35.3, 34.5)
    assert efficiency_pct(57.0, 165.3) == 34.5


@pytest.mark.parametrize(("gb", "passes", "measured"), [(7.8, 510.8, 506), (26.9, 148.1, 148), (53.8, 74.1, 76.5)])
def test_h200_passes_match_calibration(gb, passes, measured):
    """Notes' H200 measurements: the bound at accept 1 is within 3.5 % of the measured passes/s."""
    result = decode_upper_bound(h200x1(), gb * 1e9, tp_size=1, accept_length=1)
    assert result["passes_per_s"] == result["upper_bound_tok_s"] == passes
    assert abs(passes / measured - 1) < 0.035


def test_h200_nvlink_pair_doubles_bound():
    case = FIX / "h200x2"
    facts = build_facts((case / "query-gpu.csv").read_text(), (case / "topo.txt").read_text())
    assert decode_upper_bound(facts, 26.9e9, 2, 1)["upper_bound_tok_s"] == 296.2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tp_size": 4}, "tp_size 4 > gpu_count 2 of 'NVIDIA RTX A6000'"),
        ({"tp_size": 0}, "tp_size must be a positive integer, got 0"),
        ({"accept_length": 0}, "accept_length must be a positive number, got 0"),
        ({"efficiency": 1.2}, "efficiency must be in (0, 1], got 1.2"),
        ({"weight_bytes": -5}, "weight_bytes must be a positive number, got -5"),
    ],
)
def test_bound_errors(kwargs, message):
    args = {"facts": a6000x2(), "weight_bytes": 27e9, **kwargs}
    with pytest.raises(RooflineError) as exc:
        decode_upper_bound(**args)
    assert str(exc.value) == message


def test_bound_needs_bandwidth():
    facts = build_facts("index, name, compute_cap, memory.total [MiB]\n0, NVIDIA A800 80GB PCIe, 8.0, 81920 MiB\n")
    with pytest.raises(RooflineError) as exc:
        decode_upper_bound(facts, 27e9)
    assert str(exc.value) == "no memory bandwidth for gpu_model 'NVIDIA A800 80GB PCIe'; declare hbm_bandwidth_gbs"
    with pytest.raises(RooflineError) as exc:
        decode_upper_bound({"source": "none", "gpu_count": 0, "error": "x", "hbm_bandwidth_gbs": 768}, 27e9)
    assert str(exc.value) == "tp_size 1 > gpu_count 0 of None"


def test_efficiency_pct_errors():
    with pytest.raises(RooflineError) as exc:
        efficiency_pct(50, 0)
    assert str(exc.value) == "bound must be a positive number, got 0"
    with pytest.raises(RooflineError) as exc:
        efficiency_pct(-1, 100)
    assert str(exc.value) == "measured must be a number >= 0, got -1"
