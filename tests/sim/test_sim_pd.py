"""The simulator as the two sides of a PD pair (--disaggregation-mode prefill / decode), two processes
on this machine, on the real sglang 0.5.23 tree: requests sent the way sglang-router 0.3.2's PD mode
sends them (the same body, with bootstrap_host/bootstrap_port/bootstrap_room, to both at once)."""
from __future__ import annotations

import concurrent.futures
import json
import random
import urllib.request

import pytest

from tests.sim.test_sim import LLAMA, Sim, free_port

pytestmark = pytest.mark.wheels
VERSION = "0.5.23"
NO_ROOM = "Invalid request: Disaggregated request received without bootstrap room id. req.rid="


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """(prefill, decode, bootstrap port); the decode gives up on a room after 2 s (the real default is 300)."""
    monkeypatch.setenv("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", "2")
    port = free_port()
    flags = ["--disaggregation-bootstrap-port", str(port)]
    prefill = Sim(tmp_path / "prefill", VERSION, ["--disaggregation-mode", "prefill", *flags], model=LLAMA)
    decode = Sim(tmp_path / "decode", VERSION, ["--disaggregation-mode", "decode", *flags], model=LLAMA)
    try:
        prefill.wait_healthy(timeout=60)
        decode.wait_healthy(timeout=60)
        yield prefill, decode, port
    finally:
        prefill.stop()
        decode.stop()


def log_of(sim) -> str:
    sim.proc.terminate()
    sim.proc.wait(10)
    return sim.proc.stderr.read()


def body(port, room, stream=True, tokens=12):
    return {"text": "hello pd", "stream": stream, "sampling_params": {"max_new_tokens": tokens},
            "bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": room}


def test_router_style_request_prefill_answers_one_token_decode_streams_after_the_kv(pair):
    prefill, decode, port = pair
    room = random.getrandbits(63)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        streamed = pool.submit(decode.stream, "/generate", body(port, room))
        status, raw = pool.submit(prefill.request, "/generate", body(port, room, stream=False)).result()
        events = [e for _, e in streamed.result()]
    assert status == 200, raw
    assert json.loads(raw)["meta_info"]["completion_tokens"] == 1
    assert events[-1] == "[DONE]"
    assert events[-2]["meta_info"]["completion_tokens"] == 12 and events[-2]["text"] == "ABCDEFGHIJKL"
    assert f"sglang-sim prefill: bootstrap_room={room} prefilled 2 tokens" in log_of(prefill)
    decode_log = log_of(decode)
    assert f"sglang-sim decode: bootstrap_room={room} KV received from 127.0.0.1:{port}, decoding 12 tokens" in decode_log
    assert f"sglang-sim decode: bootstrap_room={room} done, 12 tokens" in decode_log


def test_each_side_reports_its_mode_and_the_prefill_serves_a_bootstrap_server(pair):
    prefill, decode, port = pair
    assert prefill.json("/server_info")["disaggregation_mode"] == "prefill"
    assert decode.json("/server_info")["disaggregation_mode"] == "decode"
    assert prefill.json("/server_info")["disaggregation_bootstrap_port"] == port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
        assert (resp.status, resp.read()) == (200, b"OK")


def test_a_request_without_bootstrap_room_is_refused_by_both_sides(pair):
    prefill, decode, _ = pair
    plain = {"text": "hello", "sampling_params": {"max_new_tokens": 4}}
    status, raw = prefill.request("/generate", plain)
    assert status == 400
    assert json.loads(raw)["error"]["message"].startswith(NO_ROOM)
    events = [e for _, e in decode.stream("/generate", {**plain, "stream": True})]
    assert events[-1] == "[DONE]" and len(events) == 2
    reason = events[0]["meta_info"]["finish_reason"]
    assert (reason["type"], reason["status_code"]) == ("abort", 400) and reason["message"].startswith(NO_ROOM)


def test_a_decode_whose_room_is_never_prefilled_fails_after_the_waiting_timeout(pair):
    _, decode, port = pair
    status, raw = decode.request("/generate", body(port, 42, stream=False))
    assert status == 500
    detail = json.loads(raw)["detail"]
    assert detail.startswith("Decode handshake failed for request rank=0 ")
    assert "decode_req.req.bootstrap_room=42 with exception KVTransferError(bootstrap_room=42): Request 42 timed " \
           "out after 2." in detail and detail.endswith("s in KVPoll.WaitingForInput")


def test_openai_routes_refuse_without_a_room_and_serve_with_one(pair):
    prefill, decode, port = pair
    status, raw = prefill.request("/v1/completions", {"prompt": "hi", "max_tokens": 3})
    assert status == 400
    err = json.loads(raw)
    assert (err["object"], err["code"]) == ("error", 400) and err["message"].startswith(NO_ROOM)
    events = [e for _, e in decode.stream("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                                   "max_tokens": 3, "stream": True})]
    assert events[-1] == "[DONE]" and events[0]["error"]["type"] == "BAD_REQUEST"
    room = random.getrandbits(63)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        streamed = pool.submit(decode.stream, "/v1/completions", {"prompt": "hi", "max_tokens": 5, "stream": True,
                                                                   "bootstrap_host": "127.0.0.1", "bootstrap_port": port,
                                                                   "bootstrap_room": room})
        status, raw = pool.submit(prefill.request, "/v1/completions",
                                  {"prompt": "hi", "max_tokens": 5, "bootstrap_host": "127.0.0.1",
                                   "bootstrap_port": port, "bootstrap_room": room}).result()
        events = [e for _, e in streamed.result()]
    assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 1
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == "ABCDE"
