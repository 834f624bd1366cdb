"""Write a deterministic tiny llama-architecture GGUF model plus its Hugging Face tokenizer folder.

    python tests/real_engine/make_tiny_model.py OUT_DIR   -> OUT_DIR/model.gguf, OUT_DIR/tokenizer/

Model: 2 layers, width 64, 4 heads (2 KV heads), FFN 128, context 4096, f32 weights (~0.5 MB).
Tokenizer: GPT-2-style byte-level BPE: 256 byte tokens, the 26 merges " a".." z" (so a prompt of
" x" words costs one token per word), then merges learned from TRAINING_TEXT, then the specials
<|endoftext|> (BOS/EOS), <|im_start|>, <|im_end|>; ChatML chat template. No merge involves an
uppercase letter, so any string of "A".."Z" is exactly one token per letter.

Only "A".."Z" can ever be sampled: every embedding has +EMBED_BIAS in dimension 0, no layer
writes dimension 0 (rows 0 of attn_output/ffn_down are zero), so after the final RMSNorm
dimension 0 is always clearly positive; output rows of "A".."Z" weigh it +LOGIT_SCALE, every
other row -LOGIT_SCALE. Requests therefore never stop on EOS and run to exactly max_tokens, one
token (one character) per streamed chunk. A fixed seed makes the file byte-identical.
"""

from __future__ import annotations

import itertools
import json
import pathlib
import re
import sys

import gguf
import numpy as np

SEED = 1234
N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_CTX = 2, 64, 4, 2, 128, 4096
N_LEARNED_MERGES = 200
EMBED_BIAS, LOGIT_SCALE = 100.0, 10.0
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# ASCII version of the GPT-2 pre-tokenizer regex (the training text is ASCII).
PRETOKENIZE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
TRAINING_TEXT = """
the quick brown fox jumps over the lazy dog. a benchmark measures how fast a server answers:
time to first token, inter token latency, end to end latency and the number of tokens per second.
the server streams one token at a time and the client reads every chunk as soon as it arrives.
when many requests run at the same time the server batches them, and the throughput goes up while
each single stream gets a little slower. the model is tiny, the tokenizer is real, and the numbers
are only good for comparing one run with another on the same machine. speculative decoding drafts
several tokens and the target model accepts some of them; the accept length tells how many.
"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def learn_merges(text: str, n_merges: int, forced: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Classic BPE training on pre-tokenized words; ties broken by the pair itself (deterministic)."""
    b2u = bytes_to_unicode()
    counts: dict[tuple[str, ...], int] = {}
    for word in PRETOKENIZE.findall(text):
        key = tuple(b2u[b] for b in word.encode())
        counts[key] = counts.get(key, 0) + 1
    merges: list[tuple[str, str]] = []

    def apply(pair: tuple[str, str]) -> None:
        nonlocal counts
        new: dict[tuple[str, ...], int] = {}
        for word, c in counts.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        counts = new
        merges.append(pair)

    for pair in forced:
        apply(pair)
    while len(merges) < len(forced) + n_merges:
        pairs: dict[tuple[str, str], int] = {}
        for word, c in counts.items():
            for a, b in itertools.pairwise(word):
                if not any(ch.isupper() for ch in a + b):
                    pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        apply(max(sorted(pairs), key=lambda p: pairs[p]))
    return merges


def build_tokenizer() -> tuple[list[str], list[tuple[str, str]]]:
    """Return (tokens in id order, merges)."""
    b2u = bytes_to_unicode()
    space = b2u[ord(" ")]
    forced = [(space, chr(c)) for c in range(ord("a"), ord("z") + 1)]
    merges = learn_merges(TRAINING_TEXT, N_LEARNED_MERGES, forced)
    tokens = [b2u[b] for b in range(256)]
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            tokens.append(a + b)
            seen.add(a + b)
    return tokens + SPECIALS, merges


def write_hf_tokenizer(out: pathlib.Path, tokens: list[str], merges: list[tuple[str, str]]) -> None:
    """Write tokenizer.json / tokenizer_config.json / special_tokens_map.json / config.json."""
    out.mkdir(parents=True, exist_ok=True)
    n_normal = len(tokens) - len(SPECIALS)
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": n_normal + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, s in enumerate(SPECIALS)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens[:n_normal])},
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }
    dump = {"ensure_ascii": False, "indent": 1, "sort_keys": False}
    (out / "tokenizer.json").write_text(json.dumps(tok, **dump) + "\n", encoding="utf-8")
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIALS[0], "eos_token": SPECIALS[0], "pad_token": SPECIALS[0],
        "model_max_length": N_CTX, "add_bos_token": False, "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, **dump) + "\n", encoding="utf-8")
    special = {"bos_token": SPECIALS[0], "eos_token": SPECIALS[0], "pad_token": SPECIALS[0]}
    (out / "special_tokens_map.json").write_text(json.dumps(special, **dump) + "\n", encoding="utf-8")
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": N_EMBD,
        "intermediate_size": N_FF, "num_hidden_layers": N_LAYER, "num_attention_heads": N_HEAD,
        "num_key_value_heads": N_HEAD_KV, "max_position_embeddings": N_CTX, "vocab_size": len(tokens),
        "rms_norm_eps": 1e-5, "bos_token_id": n_normal, "eos_token_id": n_normal,
    }
    (out / "config.json").write_text(json.dumps(config, **dump) + "\n", encoding="utf-8")


def write_gguf(path: pathlib.Path, tokens: list[str], merges: list[tuple[str, str]]) -> None:
    """Write the GGUF file (metadata + f32 tensors)."""
    rng = np.random.default_rng(SEED)
    n_vocab, n_normal = len(tokens), len(tokens) - len(SPECIALS)
    head_dim = N_EMBD // N_HEAD

    def rand(*shape: int, scale: float = 0.1) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("sglang-fleet tiny test model")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * n_normal + [gguf.TokenType.CONTROL] * len(SPECIALS))
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(n_normal)
    w.add_eos_token_id(n_normal)
    w.add_eot_token_id(n_normal + 2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    embd = rand(n_vocab, N_EMBD, scale=1.0)
    embd[:, 0] = EMBED_BIAS
    w.add_tensor("token_embd.weight", embd)
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(N_HEAD_KV * head_dim, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(N_HEAD_KV * head_dim, N_EMBD))
        attn_out = rand(N_EMBD, N_EMBD)
        attn_out[0, :] = 0.0  # never write residual dimension 0
        w.add_tensor(f"blk.{i}.attn_output.weight", attn_out)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(N_FF, N_EMBD))
        down = rand(N_EMBD, N_FF)
        down[0, :] = 0.0
        w.add_tensor(f"blk.{i}.ffn_down.weight", down)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    out = rand(n_vocab, N_EMBD, scale=1.0)
    letters = [tokens.index(chr(c)) for c in range(ord("A"), ord("Z") + 1)]
    out[:, 0] = -LOGIT_SCALE
    out[letters, 0] = LOGIT_SCALE
    w.add_tensor("output.weight", out)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_tiny_model(out_dir: str | pathlib.Path) -> pathlib.Path:
    """Write OUT/model.gguf and OUT/tokenizer/; return the GGUF path."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokens, merges = build_tokenizer()
    write_hf_tokenizer(out / "tokenizer", tokens, merges)
    path = out / "model.gguf"
    write_gguf(path, tokens, merges)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    print(make_tiny_model(sys.argv[1]))
