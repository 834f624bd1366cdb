"""The sglang_bench Ansible module, run with `ansible localhost -m` against the fake server."""

import json

from ansible_run import run_module
from fake_server import FakeServer


def test_module_returns_results_in_check_mode_and_hides_the_key():
    with FakeServer("ok", tokens=5) as s:
        rc, res, raw = run_module({"base_url": s.url, "input_len": 7, "output_len": 5, "num_prompts": 3,
                                   "calibrate": False, "api_key": "sekrit-xyz"}, check=True)
        assert all(b"Authorization: Bearer sekrit-xyz" in r for r in s.requests)
    assert rc == 0, raw
    assert res["changed"] is False
    r = res["result"]
    assert (r["completed"], r["failed"], r["model"], r["output_tokens"]["min"], r["output_tokens"]["max"]) == (
        3, 0, "fake", 5, 5)
    assert r["spec_accept_length"] is None
    assert "sekrit" not in raw
    assert res["invocation"]["module_args"]["api_key"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


def test_module_fails_with_actionable_message_when_server_down():
    rc, res, _ = run_module({"base_url": "http://127.0.0.1:9", "input_len": 8, "output_len": 4, "timeout_s": 3})
    assert rc != 0
    assert res["msg"] == ("benchmark of http://127.0.0.1:9 failed: prompt calibration request failed: "
                          "POST http://127.0.0.1:9/v1/completions: cannot connect to 127.0.0.1:9: "
                          "connection refused (is the server running?)")


def test_module_fails_on_request_errors_but_returns_the_result():
    with FakeServer("http500") as s:
        rc, res, _ = run_module({"base_url": s.url, "model": "m", "input_len": 8, "output_len": 4, "warmup": 0,
                                   "num_prompts": 2, "calibrate": False})
    assert rc != 0
    assert res["msg"].startswith(f"2 of 2 requests to {s.url} failed; first error: POST {s.url}/v1/completions: "
                                 "HTTP 500: ")
    assert res["result"]["failed"] == 2
    json.dumps(res["result"])
