"""bench_client against misbehaving stdlib fake servers on 127.0.0.1: clear errors, never a hang."""

import asyncio
import json
import socket
import time

import pytest
from fake_server import FakeServer, FullBacklog

from ansible_collections.sglang.fleet.plugins.module_utils.verify.bench_client import (
    BenchError,
    build_payload,
    greedy_outputs,
    http_post_json,
    read_spec_accept_length,
    run_benchmark,
    stream_request,
)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(url, api="completions", timeout_s=5.0, **kw):
    payload = build_payload(api, "m", " a b c", 5)
    return asyncio.run(stream_request(url, api, payload, timeout_s=timeout_s, **kw))


def timed_one(url, **kw):
    """one(), and how long it took."""
    t0 = time.monotonic()
    r = one(url, **kw)
    return r, time.monotonic() - t0


def test_ok_stream_measured():
    with FakeServer("ok", tokens=5) as s:
        r = one(s.url)
    assert r["ok"] and r["error"] is None and r["done"]
    assert (r["chunks"], r["usage_tokens"], r["output_tokens"], r["prompt_tokens"], r["text_len"]) == (5, 5, 5, 7, 5)
    assert len(r["itl"]) == 4 and 0 < r["ttft"] <= r["e2e"]


def test_server_down_is_a_clear_error_at_once():
    port = closed_port()
    t0 = time.monotonic()
    with pytest.raises(BenchError) as e:
        run_benchmark(f"http://127.0.0.1:{port}", "completions", "m", 8, 4, timeout_s=5.0)
    assert time.monotonic() - t0 < 2.0
    assert str(e.value) == (f"prompt calibration request failed: POST http://127.0.0.1:{port}/v1/completions: "
                            f"cannot connect to 127.0.0.1:{port}: connection refused (is the server running?)")


def test_http_500_reports_status_and_body():
    with FakeServer("http500") as s:
        r = one(s.url)
        with pytest.raises(BenchError) as e:
            run_benchmark(s.url, "chat", "m", 8, 4, timeout_s=5.0, calibrate=False)
    expected = 'HTTP 500: {"error": {"message": "boom: out of KV cache", "code": 500}}'
    assert r["error"] == f"POST {s.url}/v1/completions: {expected}"
    assert str(e.value) == f"all 1 warm-up requests failed; first error: POST {s.url}/v1/chat/completions: {expected}"


def test_greedy_outputs_post_json_and_name_a_failed_request():
    """greedy_outputs sends each prompt with http_post_json (one JSON body, not streamed, the key as a
    Bearer token) and a failed one names its URL, status and body, as a streamed request's error does."""
    with FakeServer("http500") as s:
        with pytest.raises(BenchError) as e:
            greedy_outputs(s.url, "completions", "m", 2, 4, api_key="k", timeout_s=5.0)
        status, body = asyncio.run(http_post_json(s.url + "/", "/generate", {"text": "x"}, timeout_s=5.0))
        (head, sent), (head_2, sent_2) = (r.split(b"\r\n\r\n", 1) for r in s.requests)
    assert str(e.value) == f'POST {s.url}/v1/completions: HTTP 500: {{"error": {{"message": "boom: out of KV cache", "code": 500}}}}'
    assert (status, json.loads(body)["error"]["code"]) == (500, 500)
    for h in (head, head_2):
        assert b"\r\nContent-Type: application/json\r\n" in h and b"\r\nConnection: close" in h
    assert head.startswith(b"POST /v1/completions HTTP/1.1\r\n") and b"\r\nAuthorization: Bearer k" in head
    assert json.loads(sent)["stream"] is False and "stream_options" not in json.loads(sent)
    assert head_2.startswith(b"POST /generate HTTP/1.1\r\n") and json.loads(sent_2) == {"text": "x"}


def test_failures_during_the_run_are_counted_not_raised():
    with FakeServer("http500") as s:
        res = run_benchmark(s.url, "completions", "m", 8, 4, concurrency=2, num_prompts=6, warmup=0, timeout_s=5.0,
                            calibrate=False, spec_accept_length=False)
    assert (res["completed"], res["failed"]) == (0, 6)
    assert res["errors"] == [{"error": f'POST {s.url}/v1/completions: HTTP 500: {{"error": {{"message": '
                                       f'"boom: out of KV cache", "code": 500}}}}', "count": 6}]
    assert res["output_throughput"] == 0.0 and res["ttft_ms"]["p50"] is None


def test_stream_cut_after_three_chunks():
    with FakeServer("cut", tokens=10, cut_after=3) as s:
        r = one(s.url)
    assert not r["ok"] and r["chunks"] == 3
    assert r["error"] == (f"POST {s.url}/v1/completions: connection closed by the server mid-stream "
                          "(streaming, 3 chunks with output received; chunked body not finished)")


def test_stream_without_done():
    with FakeServer("no_done", tokens=4) as s:
        r = one(s.url)
    assert r["error"] == (f"{s.url}/v1/completions: stream ended without [DONE] after 4 chunks with output "
                          "(connection closed by the server mid-stream)")


def test_server_that_cannot_accept_hits_the_connect_timeout():
    with FullBacklog() as url:
        r, elapsed = timed_one(url, timeout_s=10.0, connect_timeout_s=0.5)
    assert 0.5 <= elapsed < 1.0
    assert r["error"] == f"POST {url}/v1/completions: connect timeout after 0.5 s (connecting)"


def test_stalled_server_hits_the_request_deadline():
    with FakeServer("stall") as s:
        r, elapsed = timed_one(s.url, timeout_s=1.0)
    assert 1.0 <= elapsed < 1.5
    assert r["error"] == (f"POST {s.url}/v1/completions: request deadline of 1 s exceeded "
                          "(waiting for response headers)")


def test_stall_mid_stream_hits_the_read_timeout():
    with FakeServer("stall_stream", tokens=10, cut_after=3) as s:
        r, elapsed = timed_one(s.url, timeout_s=10.0, read_timeout_s=0.5)
    assert 0.5 <= elapsed < 1.0
    assert r["error"] == (f"POST {s.url}/v1/completions: read timeout after 0.5 s "
                          "(streaming, 3 chunks with output received)")


def test_read_timeout_counts_from_the_last_byte_not_the_request():
    # 6 tokens 0.2 s apart: 1.2 s in all, longer than the 0.5 s read timeout, never 0.5 s silent
    with FakeServer("ok", tokens=6, delay_s=0.2) as s:
        r = one(s.url, timeout_s=10.0, read_timeout_s=0.5)
    assert r["ok"], r["error"]
    assert r["chunks"] == 6 and r["e2e"] >= 1.0


def test_steady_stream_still_hits_the_request_deadline():
    with FakeServer("ok", tokens=50, delay_s=0.1) as s:
        r, elapsed = timed_one(s.url, timeout_s=1.0, read_timeout_s=0.5)
    assert 1.0 <= elapsed < 1.5
    assert r["error"].startswith(f"POST {s.url}/v1/completions: request deadline of 1 s exceeded (streaming, ")


def test_run_benchmark_with_stalled_server_returns_within_deadline():
    with FakeServer("stall") as s:
        t0 = time.monotonic()
        with pytest.raises(BenchError, match=r"request deadline of 0\.8 s exceeded \(waiting for response headers\)"):
            run_benchmark(s.url, "completions", "m", 8, 4, timeout_s=0.8)
        assert time.monotonic() - t0 < 1.3


def test_usage_mismatch_is_reported():
    with FakeServer("bad_usage", tokens=5) as s:
        res = run_benchmark(s.url, "completions", "m", 7, 5, concurrency=2, num_prompts=4, timeout_s=5.0,
                            calibrate=False, spec_accept_length=False)
    assert res["usage_check"]["usage_vs_chunks_mismatch"] == 4
    assert res["usage_check"]["examples"][0] == {"usage_tokens": 6, "chunks": 5}
    assert res["output_tokens"] == {"expected": 5, "min": 6, "max": 6, "requests_not_expected": 4}


def test_generate_api_counts_tokens_from_meta_info():
    with FakeServer("generate", tokens=6) as s:
        r = one(s.url, api="generate")
        sent = json.loads(s.requests[-1].split(b"\r\n\r\n", 1)[1])
    assert (r["ok"], r["chunks"], r["usage_tokens"], r["prompt_tokens"], r["text_len"]) == (True, 6, 6, 7, 6)
    assert sent["sampling_params"] == {"max_new_tokens": 5, "temperature": 0.0, "ignore_eos": True}


def test_api_key_sent_but_never_returned():
    with FakeServer("ok") as s:
        res = run_benchmark(s.url, "completions", None, 7, 5, num_prompts=2, timeout_s=5.0, calibrate=False,
                            api_key="sekrit-123", headers={"X-Team": "fleet"})
        heads = [r.split(b"\r\n\r\n")[0] for r in s.requests]
    assert all(b"\r\nAuthorization: Bearer sekrit-123" in h and b"\r\nX-Team: fleet" in h for h in heads)
    assert res["model"] == "fake"  # from /v1/models
    assert "sekrit" not in json.dumps(res)


def test_spec_accept_length_sources():
    info = json.dumps({"internal_states": [{"avg_spec_accept_length": 3.4}]}).encode()
    metrics = b'# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name="m"} 2.75\n'
    with FakeServer(routes={"/get_server_info": (200, info)}) as s:
        a, url_a = asyncio.run(read_spec_accept_length(s.url)), s.url
    with FakeServer(routes={"/server_info": (200, b'{"internal_states": [{}]}'), "/metrics": (200, metrics)}) as s:
        b, url_b = asyncio.run(read_spec_accept_length(s.url)), s.url
    with FakeServer() as s:
        c, url_c = asyncio.run(read_spec_accept_length(s.url)), s.url
    assert (a["value"], a["source"]) == (3.4, "/get_server_info internal_states[0].avg_spec_accept_length")
    assert a["tried"] == [f"GET {url_a}/server_info: HTTP 404"]
    assert (b["value"], b["source"]) == (2.75, "/metrics sglang:spec_accept_length")
    assert b["tried"] == [f"GET {url_b}/server_info: no internal_states[0].avg_spec_accept_length",
                          f"GET {url_b}/get_server_info: HTTP 404"]
    assert c == {"value": None, "source": None, "tried": [f"GET {url_c}/server_info: HTTP 404",
                                                          f"GET {url_c}/get_server_info: HTTP 404",
                                                          f"GET {url_c}/metrics: HTTP 404"]}


def test_bad_arguments():
    with pytest.raises(BenchError, match=r"^unknown api 'grpc'; expected one of \['chat', 'completions', 'generate'\]$"):
        run_benchmark("http://127.0.0.1:1", "grpc")
    with pytest.raises(BenchError, match=r"^bad base_url 'localhost:30000': expected http://host:port"):
        run_benchmark("localhost:30000")
    with pytest.raises(BenchError, match=r"^concurrency must be >= 1, got 0$"):
        run_benchmark("http://127.0.0.1:1", concurrency=0)
