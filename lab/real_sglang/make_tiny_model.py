#!/usr/bin/env python3
"""Write a tiny Llama model (2 layers, width 64, byte-level tokenizer) without any download.

Lab only: the real-SGLang lab host serves it on its CPU. Standard library only, so that
lab/prepare.yml runs it on the host with the system Python (ansible.builtin.script). The same
seed writes the same bytes; the weights are random, so the text it generates is noise, while
its token counts and timings are real.

    make_tiny_model.py DEST [--seed N]

Files: config.json, generation_config.json, model.safetensors (bf16), tokenizer.json,
tokenizer_config.json, special_tokens_map.json, as transformers' save_pretrained writes them.
"""

import argparse
import json
import os
import random
import struct

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 64, 128, 2, 4, 2, 16
SPECIAL_TOKENS = ["<s>", "</s>", "<unk>", "<pad>"]
VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)
BOS_ID, EOS_ID, UNK_ID, PAD_ID = range(256, VOCAB_SIZE)
MAX_POSITIONS = 4096
CHAT_TEMPLATE = ("{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
                 "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")


def byte_alphabet():
    """GPT-2's byte -> printable character map, which the ByteLevel pre-tokenizer uses."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return chars


def tokenizer_json():
    vocab = {char: byte for byte, char in byte_alphabet().items()}
    vocab.update({token: 256 + i for i, token in enumerate(SPECIAL_TOKENS)})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 256 + i, "content": token, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, token in enumerate(SPECIAL_TOKENS)],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": []},
    }


def tensor_shapes():
    shapes = {"model.embed_tokens.weight": [VOCAB_SIZE, HIDDEN]}
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}."
        shapes.update({
            prefix + "input_layernorm.weight": [HIDDEN],
            prefix + "self_attn.q_proj.weight": [HEADS * HEAD_DIM, HIDDEN],
            prefix + "self_attn.k_proj.weight": [KV_HEADS * HEAD_DIM, HIDDEN],
            prefix + "self_attn.v_proj.weight": [KV_HEADS * HEAD_DIM, HIDDEN],
            prefix + "self_attn.o_proj.weight": [HIDDEN, HEADS * HEAD_DIM],
            prefix + "post_attention_layernorm.weight": [HIDDEN],
            prefix + "mlp.gate_proj.weight": [INTERMEDIATE, HIDDEN],
            prefix + "mlp.up_proj.weight": [INTERMEDIATE, HIDDEN],
            prefix + "mlp.down_proj.weight": [HIDDEN, INTERMEDIATE],
        })
    shapes["model.norm.weight"] = [HIDDEN]
    shapes["lm_head.weight"] = [VOCAB_SIZE, HIDDEN]
    return shapes


def bf16(value):
    """A float's bfloat16 bytes (little-endian): the upper half of its float32, truncated."""
    return struct.pack("<f", value)[2:]


def safetensors_bytes(seed):
    """The safetensors file: u64 header length, JSON header (8-byte aligned), then the data."""
    rng = random.Random(seed)
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape in sorted(tensor_shapes().items()):
        count = 1
        for dim in shape:
            count *= dim
        if name.endswith("norm.weight"):
            data = bf16(1.0) * count
        else:
            data = b"".join(bf16(rng.gauss(0.0, 0.02)) for _ in range(count))
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def config():
    """The model's config.json (a lab simulator host serving the same model declares it too)."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "vocab_size": VOCAB_SIZE, "max_position_embeddings": MAX_POSITIONS, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "initializer_range": 0.02,
        "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": PAD_ID,
    }


def files(seed):
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    return {
        "config.json": json.dumps(config(), indent=2),
        "generation_config.json": json.dumps({"bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
                                              "pad_token_id": PAD_ID}, indent=2),
        "tokenizer.json": json.dumps(tokenizer_json(), ensure_ascii=False),
        "tokenizer_config.json": json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                             "model_max_length": MAX_POSITIONS,
                                             "clean_up_tokenization_spaces": False,
                                             "chat_template": CHAT_TEMPLATE, **special}, indent=2),
        "special_tokens_map.json": json.dumps(special, indent=2),
        "model.safetensors": safetensors_bytes(seed),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", help="folder to write the model into (created)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights (default 0)")
    args = parser.parse_args()
    os.makedirs(args.dest, exist_ok=True)
    for name, content in files(args.seed).items():
        data = content if isinstance(content, bytes) else (content + "\n").encode()
        path = os.path.join(args.dest, name)
        with open(path + ".tmp", "wb") as out:
            out.write(data)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
