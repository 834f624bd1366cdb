"""bench_client's failure paths against a real llama-server: a stopped server, the engine's own
HTTP error, a server killed mid-stream, a stream slower than the request deadline."""

import asyncio
import threading
import time

import pytest
from conftest import LlamaServer

from ansible_collections.sglang.fleet.plugins.module_utils.verify.bench_client import (
    BenchError,
    build_payload,
    run_benchmark,
    stream_request,
)

pytestmark = pytest.mark.real_engine


@pytest.fixture
def own_llama_server(llama_server_binary, tiny_model_dir):
    """A llama-server of this test's own (these tests stop or kill it)."""
    server = LlamaServer(llama_server_binary, tiny_model_dir)
    server.start()
    yield server
    server.stop()


def stream(url, words=4, output_len=16, **kw):
    payload = build_payload("completions", "tiny", " a" * words, output_len)
    return asyncio.run(stream_request(url, "completions", payload, **kw))


def test_stopped_server_is_refused_at_once(own_llama_server):
    url = own_llama_server.url
    assert stream(url, timeout_s=10)["ok"]
    own_llama_server.stop()
    t0 = time.monotonic()
    with pytest.raises(BenchError) as e:
        run_benchmark(url, "completions", "tiny", 16, 8, timeout_s=10)
    assert time.monotonic() - t0 < 2.0
    assert str(e.value) == (f"prompt calibration request failed: POST {url}/v1/completions: cannot connect to "
                            f"127.0.0.1:{own_llama_server.port}: connection refused (is the server running?)")


def test_engine_error_is_reported_with_its_message(llama_server):
    # 8 slots share -c 32768: 4096 tokens per slot; a 6000-token prompt does not fit
    r = stream(llama_server.url, words=6000, timeout_s=30)
    assert not r["ok"] and r["chunks"] == 0
    assert r["error"] == (f"POST {llama_server.url}/v1/completions: HTTP 400: "
                          '{"error":{"code":400,"message":"request (6000 tokens) exceeds the available context size '
                          '(4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":6000,'
                          '"n_ctx":4096}}')


def kill_once_it_streams(server, stop):
    """Kill the server 0.3 s after it started processing a request (its /metrics gauge), not at a fixed time:
    on a loaded machine a fixed 0.4 s came before the first chunk."""
    while not stop.is_set():
        if server.metric("llamacpp:requests_processing") >= 1:
            time.sleep(0.3)
            server.proc.kill()
            return
        time.sleep(0.02)


def test_server_killed_mid_stream(own_llama_server):
    stop = threading.Event()
    killer = threading.Thread(target=kill_once_it_streams, args=(own_llama_server, stop), daemon=True)
    killer.start()
    try:
        r = stream(own_llama_server.url, output_len=4000, timeout_s=30)
    finally:
        stop.set()
        killer.join(10)
    assert not r["ok"] and r["chunks"] > 0
    assert r["error"].startswith(f"POST {own_llama_server.url}/v1/completions: connection ")
    assert f"streaming, {r['chunks']} chunks with output received" in r["error"]
    assert "closed by the server mid-stream" in r["error"] or "Connection reset by peer" in r["error"]


def test_stream_slower_than_the_deadline(llama_server):
    t0 = time.monotonic()
    r = stream(llama_server.url, output_len=4000, timeout_s=0.5)
    elapsed = time.monotonic() - t0
    assert 0.5 <= elapsed < 1.0
    assert not r["ok"] and r["chunks"] > 0
    assert r["error"] == (f"POST {llama_server.url}/v1/completions: request deadline of 0.5 s exceeded "
                          f"(streaming, {r['chunks']} chunks with output received)")
