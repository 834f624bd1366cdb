"""bench_client and the sglang_bench module against a real llama-server serving the tiny model."""

import asyncio
import hashlib
import itertools
import json
import urllib.request

import pytest
from ansible_run import run_module
from make_tiny_model import make_tiny_model

from ansible_collections.sglang.fleet.plugins.module_utils.verify.bench_client import (
    build_payload,
    run_benchmark,
    stream_request,
)

pytestmark = pytest.mark.real_engine


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_one_stream_parsed_exactly(llama_server, api):
    payload = build_payload(api, "tiny", " a b c d e f", 24)
    r = asyncio.run(stream_request(llama_server.url, api, payload, timeout_s=30))
    assert r["error"] is None and r["ok"] and r["done"]
    assert (r["chunks"], r["usage_tokens"], r["output_tokens"], r["text_len"]) == (24, 24, 24, 24)
    assert len(r["itl"]) == 23
    assert r["prompt_tokens"] == (6 if api == "completions" else 6 + 16)  # ChatML wrapping adds 16 tokens


@pytest.mark.parametrize("concurrency", [1, 4, 8])
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_exact_token_counts(llama_server, api, concurrency):
    n = 2 * concurrency
    before = llama_server.metric("llamacpp:tokens_predicted_total")
    res = run_benchmark(llama_server.url, api, "tiny", input_len=64, output_len=32, concurrency=concurrency,
                        num_prompts=n, warmup=1, repeats=1, timeout_s=60)
    predicted = llama_server.metric("llamacpp:tokens_predicted_total") - before
    assert res["errors"] == [] and (res["completed"], res["failed"]) == (n, 0)
    assert res["output_tokens"] == {"expected": 32, "min": 32, "max": 32, "requests_not_expected": 0}
    assert res["total_output_tokens"] == 32 * n
    assert res["prompt"]["exact"] and res["prompt"]["per_word_tokens"] == 1.0
    assert res["prompt"]["overhead_tokens"] == (0 if api == "completions" else 16)
    assert res["prompt_tokens"] == {"expected": 64, "min": 64, "max": 64, "requests_not_expected": 0}
    assert res["usage_check"] == {"requests_with_usage": n, "requests_without_usage": 0,
                                  "usage_vs_chunks_mismatch": 0, "examples": []}
    assert res["ttft_ms"]["n"] == n and res["itl_ms"]["n"] == 31 * n
    assert res["output_throughput"] > 0 and res["decode_tok_s_per_stream"]["p50"] > 0
    assert res["ttft_ms"]["p50"] <= res["ttft_ms"]["p90"] <= res["ttft_ms"]["p99"] <= res["ttft_ms"]["max"]
    # the server's own counter: calibration probes (1 token each), 1 warm-up and n measured requests
    probes = predicted - 32 * (n + 1)
    assert 3 <= probes <= 7
    assert res["spec_accept_length"] is None and res["spec_accept_length_source"] is None


def test_repeats_report_median_and_every_run(llama_server):
    res = run_benchmark(llama_server.url, "completions", "tiny", input_len=32, output_len=16, concurrency=2,
                        num_prompts=4, warmup=2, repeats=3, timeout_s=60, calibrate=False)
    assert len(res["runs"]) == 3 and res["completed"] == 12 and res["total_output_tokens"] == 12 * 16
    assert res["warmup"] == {"requests": 2, "failed": 0}
    ttfts = sorted(r["ttft_ms"]["p50"] for r in res["runs"])
    assert res["ttft_ms"]["p50"] == ttfts[1]
    assert res["prompt_tokens"]["min"] == res["prompt_tokens"]["max"] == 32  # " x" words are 1 token each


def test_module_against_llama_server(llama_server):
    rc, res, raw = run_module({"base_url": llama_server.url, "api": "chat", "input_len": 48, "output_len": 20,
                               "concurrency": 4, "num_prompts": 8, "api_key": "not-logged-key"}, check=True)
    assert rc == 0, raw
    r = res["result"]
    assert (r["completed"], r["failed"], r["model"], r["total_output_tokens"]) == (8, 0, "tiny", 160)
    assert r["prompt_tokens"]["min"] == r["prompt_tokens"]["max"] == 48
    assert "not-logged-key" not in raw


def _bpe_encode(tok: dict, text: str) -> list[int]:
    """Reference byte-level BPE over the tokenizer.json (ASCII text, GPT-2 pre-tokenizer)."""
    from make_tiny_model import PRETOKENIZE, bytes_to_unicode

    vocab = tok["model"]["vocab"]
    ranks = {tuple(m.split(" ")): i for i, m in enumerate(tok["model"]["merges"])}
    b2u = bytes_to_unicode()
    ids = []
    for word in PRETOKENIZE.findall(text):
        parts = [b2u[b] for b in word.encode()]
        while len(parts) > 1:
            pairs = [(ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(itertools.pairwise(parts))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids += [vocab[p] for p in parts]
    return ids


def test_gguf_and_tokenizer_json_agree(llama_server, tiny_model_dir, tmp_path):
    text = " a b c the quick brown fox, the server streams tokens; ABCXYZ 42 times!"
    req = urllib.request.Request(llama_server.url + "/tokenize", data=json.dumps({"content": text}).encode())
    with urllib.request.urlopen(req, timeout=10) as r:
        server_ids = json.loads(r.read())["tokens"]
    tok = json.loads((tiny_model_dir / "tokenizer" / "tokenizer.json").read_text())
    assert _bpe_encode(tok, text) == server_ids
    assert server_ids[:3] == [tok["model"]["vocab"][f"Ġ{c}"] for c in "abc"]
    make_tiny_model(tmp_path)
    digest = hashlib.sha256((tmp_path / "model.gguf").read_bytes()).hexdigest()
    assert digest == hashlib.sha256(llama_server.gguf.read_bytes()).hexdigest()
