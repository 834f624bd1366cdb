"""Unit tests for bench_client's parsers, statistics and payloads (no server)."""

import random

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.verify.bench_client import (
    BenchError,
    ChunkedDecoder,
    SSEParser,
    _event_output,
    _median_of,
    build_payload,
    make_prompt,
    parse_json,
    parse_prometheus_value,
    percentile,
    summarize,
    summarize_run,
)

BODY = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n"


def test_chunked_whole_body():
    d = ChunkedDecoder()
    assert d.feed(BODY) == b"hello, world"
    assert d.done
    assert d.feed(b"more") == b""


def test_chunked_byte_by_byte():
    d = ChunkedDecoder()
    out = b"".join(d.feed(BODY[i:i + 1]) for i in range(len(BODY)))
    assert out == b"hello, world"
    assert d.done


def test_chunked_split_anywhere():
    for cut in range(len(BODY) + 1):
        d = ChunkedDecoder()
        assert d.feed(BODY[:cut]) + d.feed(BODY[cut:]) == b"hello, world", cut
        assert d.done, cut


def test_chunked_not_done_until_last_chunk():
    d = ChunkedDecoder()
    assert d.feed(b"5\r\nhel") == b"hel"
    assert d.feed(b"lo\r\n") == b"lo"
    assert not d.done
    assert d.feed(b"0\r\n\r\n") == b""
    assert d.done


def test_chunked_bad_size_line():
    with pytest.raises(ValueError, match=r"^malformed chunked body: bad chunk size line b'zz'$"):
        ChunkedDecoder().feed(b"zz\r\nhello\r\n")


def test_chunked_missing_crlf_after_data():
    with pytest.raises(ValueError, match=r"^malformed chunked body: expected CRLF after chunk, got b'XY'$"):
        ChunkedDecoder().feed(b"2\r\nabXY")


def test_sse_events_split_anywhere():
    raw = b'data: {"a": 1}\n\n: ping\n\ndata: {"b": 2}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n'
    for cut in range(len(raw) + 1):
        p = SSEParser()
        events = p.feed(raw[:cut]) + p.feed(raw[cut:]) + p.flush()
        assert events == ['{"a": 1}', '{"b": 2}', "line1\nline2", "[DONE]"], cut


def test_sse_data_without_space_and_flush_without_blank_line():
    p = SSEParser()
    assert p.feed(b"data:x\n\ndata: [DONE]") == ["x"]
    assert p.flush() == ["[DONE]"]
    assert p.flush() == []


def test_sse_utf8_split_across_feeds():
    raw = 'data: {"t": "é€"}\n\n'.encode()
    p = SSEParser()
    assert p.feed(raw[:13]) == []
    assert p.feed(raw[13:]) == ['{"t": "é€"}']


def test_parse_json_is_json_loads():
    assert parse_json('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    assert parse_json(' {"a": 1} ') == {"a": 1}
    for bad in ('{"a": 1} trailing', "not json", ""):
        with pytest.raises(ValueError):
            parse_json(bad)


def test_percentile_linear_interpolation():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert percentile(xs, 50) == 2.5
    assert percentile(xs, 90) == pytest.approx(3.7)
    assert percentile(xs, 99) == pytest.approx(3.97)
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_summarize_scales_to_ms():
    s = summarize([0.001, 0.002, 0.003], 1000.0)
    assert s == {"mean": pytest.approx(2.0), "p50": 2.0, "p90": pytest.approx(2.8), "p99": pytest.approx(2.98),
                 "min": 1.0, "max": 3.0, "n": 3}
    assert summarize([])["p50"] is None


def _req(ttft, e2e, out, chunks=None, usage=True, prompt=10, ok=True, error=None):
    return {"ok": ok, "error": error, "ttft": ttft, "e2e": e2e, "itl": [(e2e - ttft) / (out - 1)] * (out - 1) if ok else [],
            "chunks": out if chunks is None else chunks, "output_tokens": out, "usage_tokens": out if usage else None,
            "prompt_tokens": prompt, "text_len": out, "done": ok}


def test_summarize_run_metrics_and_errors():
    results = [_req(0.1, 1.1, 11), _req(0.2, 2.2, 11, chunks=5),
               _req(None, 0.5, 0, ok=False, error="POST u: HTTP 500: boom")]
    s = summarize_run(results, duration=4.0, output_len=11, input_len=10)
    assert s["completed"] == 2 and s["failed"] == 1
    assert s["errors"] == [{"error": "POST u: HTTP 500: boom", "count": 1}]
    assert s["output_throughput"] == 22 / 4.0
    assert s["request_throughput"] == 0.5
    assert s["decode_tok_s_per_stream"]["min"] == pytest.approx(5.0)  # 10 tokens in 2.0 s
    assert s["decode_tok_s_per_stream"]["max"] == pytest.approx(10.0)
    assert s["ttft_ms"]["mean"] == pytest.approx(150.0)
    assert s["tpot_ms"]["p50"] == pytest.approx(150.0)
    assert s["usage_check"] == {"requests_with_usage": 2, "requests_without_usage": 0, "usage_vs_chunks_mismatch": 1,
                                "examples": [{"usage_tokens": 11, "chunks": 5}]}
    assert s["output_tokens"] == {"expected": 11, "min": 11, "max": 11, "requests_not_expected": 0}


def test_median_over_runs_sums_counts():
    r1 = summarize_run([_req(0.1, 1.1, 11)], 1.0, 11, 10)
    r2 = summarize_run([_req(0.3, 1.3, 11)], 2.0, 11, 10)
    r3 = summarize_run([_req(0.2, 1.2, 11), _req(None, 1, 0, ok=False, error="e")], 3.0, 11, 10)
    m = _median_of([r1, r2, r3])
    assert m["ttft_ms"]["p50"] == pytest.approx(200.0)
    assert m["duration_s"] == 2.0
    assert m["completed"] == 3 and m["failed"] == 1
    assert m["errors"] == [{"error": "e", "count": 1}]
    assert m["ttft_ms"]["n"] == 3


def test_payloads():
    assert build_payload("generate", "m", "hi", 5) == {
        "text": "hi", "sampling_params": {"max_new_tokens": 5, "temperature": 0.0, "ignore_eos": True}, "stream": True}
    assert build_payload("completions", "m", "hi", 5) == {
        "max_tokens": 5, "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True},
        "model": "m", "ignore_eos": True, "prompt": "hi"}
    chat = build_payload("chat", None, "hi", 5, ignore_eos=False)
    assert chat["messages"] == [{"role": "user", "content": "hi"}]
    assert "model" not in chat and "ignore_eos" not in chat


def test_event_output_per_api():
    st = {"gen_text_len": 0, "gen_tokens": 0, "usage_completion": None, "usage_prompt": None}
    assert _event_output("chat", {"choices": [{"delta": {"role": "assistant", "content": ""}}]}, st) == 0
    assert _event_output("chat", {"choices": [{"delta": {"content": "AB"}}]}, st) == 2
    assert _event_output("chat", {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}}, st) == 0
    assert (st["usage_prompt"], st["usage_completion"]) == (3, 9)
    g = {"gen_text_len": 0, "gen_tokens": 0, "usage_completion": None, "usage_prompt": None}
    assert _event_output("generate", {"text": "AB", "meta_info": {"completion_tokens": 2, "prompt_tokens": 4}}, g) == 2
    assert _event_output("generate", {"text": "ABC", "meta_info": {"completion_tokens": 3}}, g) == 1
    assert (g["usage_completion"], g["usage_prompt"]) == (3, 4)
    with pytest.raises(BenchError, match=r"^server error in stream: context too long$"):
        _event_output("completions", {"error": {"message": "context too long", "code": 400}}, st)


def test_prometheus_value():
    text = ('# HELP sglang:spec_accept_length x\nsglang:spec_accept_length_total 9\n'
            'sglang:spec_accept_length{model_name="m",tp_rank="0"} 3.25\n')
    assert parse_prometheus_value(text, "sglang:spec_accept_length") == 3.25
    assert parse_prometheus_value("llamacpp:tokens_predicted_total 42\n", "llamacpp:tokens_predicted_total") == 42.0
    assert parse_prometheus_value("x 1\n", "sglang:spec_accept_length") is None


def test_make_prompt_is_seeded_and_one_word_per_token_unit():
    p = make_prompt(5, random.Random(1))
    assert p == make_prompt(5, random.Random(1))
    assert len(p) == 10 and p.split() == list(p[1::2]) and all(c == " " for c in p[0::2])
