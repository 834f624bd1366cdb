"""Write a llama-architecture F16 GGUF of a real model's shape with generated weights (no download).

    python bench/roofline_gpu/make_model.py SHAPE OUT_DIR   -> OUT_DIR/model.gguf, OUT_DIR/model.json
    python bench/roofline_gpu/make_model.py --bytes SHAPE   -> bytes of tensor data it would write

SHAPE is one of SHAPES: the dimensions of a public model, random N(0, 0.02) weights. Batch-1
decode reads every weight whatever its value, so its speed is the real model's speed at that
size. The tokenizer is the real byte-level BPE of tests/real_engine/make_tiny_model.py, padded
with unused tokens up to the shape's vocabulary, so the embedding and LM head have their true
size. model.json: the shape as a Hugging Face config.json (what sglang-fleet's roofline reads)
and every tensor's bytes. Needs `gguf` (llama.cpp's gguf-py) and numpy. Streams the tensors to
disk (a few GB of RAM at most); ~15 s per 10 GB on the H200 machine.
"""

from __future__ import annotations

import json
import pathlib
import sys

import gguf
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "real_engine"))
from make_tiny_model import CHAT_TEMPLATE, SPECIALS, build_tokenizer  # noqa: E402

# name: (public model whose dimensions these are, hidden, layers, ffn, heads, kv heads, vocab, tied)
SHAPES = {
    "llama-1b": ("Llama-3.2-1B", 2048, 16, 8192, 32, 8, 128256, True),
    "llama-8b": ("Llama-3.1-8B", 4096, 32, 14336, 32, 8, 128256, False),
    "llama-14b": ("Qwen2.5-14B dimensions, llama layers", 5120, 48, 13824, 40, 8, 152064, False),
}
N_CTX = 4096
SEED = 1234
POOL = 1 << 27  # 128 Mi random f16 values; tensors are windows into (or tilings of) this pool


def tensor_plan(hidden, layers, ffn, heads, kv_heads, vocab, tied):
    """[(name, numpy shape, dtype)] in llama.cpp's llama tensor names."""
    head_dim = hidden // heads
    plan = [("token_embd.weight", (vocab, hidden), np.float16)]
    for i in range(layers):
        plan += [
            (f"blk.{i}.attn_norm.weight", (hidden,), np.float32),
            (f"blk.{i}.attn_q.weight", (heads * head_dim, hidden), np.float16),
            (f"blk.{i}.attn_k.weight", (kv_heads * head_dim, hidden), np.float16),
            (f"blk.{i}.attn_v.weight", (kv_heads * head_dim, hidden), np.float16),
            (f"blk.{i}.attn_output.weight", (hidden, heads * head_dim), np.float16),
            (f"blk.{i}.ffn_norm.weight", (hidden,), np.float32),
            (f"blk.{i}.ffn_gate.weight", (ffn, hidden), np.float16),
            (f"blk.{i}.ffn_up.weight", (ffn, hidden), np.float16),
            (f"blk.{i}.ffn_down.weight", (hidden, ffn), np.float16),
        ]
    plan.append(("output_norm.weight", (hidden,), np.float32))
    if not tied:
        plan.append(("output.weight", (vocab, hidden), np.float16))
    return plan


def make_model(shape: str, out_dir: str | pathlib.Path) -> pathlib.Path:
    if shape not in SHAPES:
        sys.exit(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    origin, hidden, layers, ffn, heads, kv_heads, vocab, tied = SHAPES[shape]
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    base, merges = build_tokenizer()
    normal = base[: -len(SPECIALS)]
    pad = [f"<|unused_{i}|>" for i in range(vocab - len(base))]
    tokens = normal + pad + SPECIALS
    types = ([gguf.TokenType.NORMAL] * len(normal) + [gguf.TokenType.UNUSED] * len(pad)
             + [gguf.TokenType.CONTROL] * len(SPECIALS))
    eos = vocab - len(SPECIALS)

    w = gguf.GGUFWriter(str(out / "model.gguf"), "llama")
    w.add_name(f"sglang-fleet roofline model {shape} ({origin}, generated weights)")
    w.add_context_length(N_CTX)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(eos)
    w.add_eos_token_id(eos)
    w.add_eot_token_id(eos + 2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    plan = tensor_plan(hidden, layers, ffn, heads, kv_heads, vocab, tied)
    for name, shp, dtype in plan:
        w.add_tensor_info(name, shp, np.dtype(dtype), int(np.prod(shp)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()

    pool = (np.random.default_rng(SEED).standard_normal(POOL, dtype=np.float32) * 0.02).astype(np.float16)
    step = 7919  # a different window of the pool for each tensor
    for k, (_name, shp, dtype) in enumerate(plan):
        n = int(np.prod(shp))
        if dtype == np.float32:
            data = np.ones(shp, dtype=np.float32)
        elif n <= POOL // 2:
            off = (k * step) % (POOL // 2)
            data = pool[off:off + n].reshape(shp)
        else:
            data = np.resize(pool, n).reshape(shp)
        w.write_tensor_data(data)
    w.close()

    tensor_bytes = {name: int(np.prod(shp)) * np.dtype(dtype).itemsize for name, shp, dtype in plan}
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
        "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "vocab_size": vocab, "tie_word_embeddings": tied,
        "max_position_embeddings": N_CTX, "torch_dtype": "float16",
    }
    info = {"shape": shape, "origin": origin, "config": config, "tensor_bytes": tensor_bytes,
            "total_tensor_bytes": sum(tensor_bytes.values()),
            "file_bytes": (out / "model.gguf").stat().st_size}
    (out / "model.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return out / "model.gguf"


def shape_bytes(shape: str) -> int:
    """Bytes of tensor data the shape's GGUF holds (the file is a few MB more)."""
    _, *dims = SHAPES[shape]
    return sum(int(np.prod(shp)) * np.dtype(dt).itemsize for _, shp, dt in tensor_plan(*dims))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--bytes":
        print(shape_bytes(sys.argv[2]))
    elif len(sys.argv) == 3:
        print(make_model(sys.argv[1], sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} [--bytes] SHAPE [OUT_DIR]  (SHAPE: {', '.join(SHAPES)})")
