#!/usr/bin/env python3
"""Send the same probes to an SGLang server (the real one or the lab simulator) and print what
each answered, reduced to its shape: status, JSON keys and value types, stream chunk shapes,
`finish_reason`, `usage` keys, the `/metrics` families with their types and label names.

Lab only (standard library): `tests/fixtures/real_sglang/0.5.23-cpu-probes.json` is what the real
SGLang 0.5.23 answered on lab host cpu1; the simulator's fidelity test sends the same probes to the
simulator and compares (tests/sim/test_sim.py), and the real-host lab test sends them to the real
server again (tests/lab/test_real_sglang_lab.py), so the capture cannot go stale.

    probe.py --base-url http://127.0.0.1:30000 --api-key KEY --model NAME [--context-length N]

The server must require KEY (the probes without a key and with a wrong one expect a refusal).
"""

import argparse
import json
import sys
import urllib.error
import urllib.request

PROMPT = "Hello world"


def shape(value, depth=0):
    """A JSON value's shape: a type name, {key: shape} for an object, [shape of the first item] for
    a list (down to 3 levels; deeper values are their type name)."""
    if isinstance(value, dict):
        return {k: shape(v, depth + 1) for k, v in sorted(value.items())} if depth < 3 else "object"
    if isinstance(value, list):
        return [shape(value[0], depth + 1)] if value and depth < 3 else "list"
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), type(value).__name__)


def request(base, method, path, body=None, key=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:  # noqa: S310 - the lab's own servers
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode("utf-8", "replace")


def answer(status, ctype, text):
    """A non-streamed answer's shape."""
    try:
        body = shape(json.loads(text))
    except ValueError:
        body = "text" if text.strip() else "empty"
    return {"status": status, "json": "json" in ctype, "body": body}


def refusal(status, ctype, text):
    """A bad request's answer: its shape, and the release's own words (the error's type and its message,
    up to the request's echoed input, which the simulator must answer alike)."""
    out = answer(status, ctype, text)
    try:
        body = json.loads(text)
    except ValueError:
        return out
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    message = str(error.get("message", ""))
    # a validation error's message goes on with the request's own input and the endpoint's file: cut there
    out["error"] = {"type": error.get("type"), "message": message.split(", 'input':", 1)[0] if ", 'input':" in message
                    else message.split("\n", 1)[0]}
    return out


def stream(status, text):
    """A streamed answer: the distinct shapes of its `data:` chunks, in order of first appearance,
    the finish reasons seen, and whether it ends with [DONE]."""
    chunks, shapes, reasons = [], [], []
    for line in text.splitlines():
        if line.startswith("data:"):
            chunks.append(line[5:].strip())
    for chunk in chunks:
        if chunk == "[DONE]":
            continue
        data = json.loads(chunk)
        if shape(data) not in shapes:
            shapes.append(shape(data))
        for choice in data.get("choices") or []:
            if choice.get("finish_reason") and choice["finish_reason"] not in reasons:
                reasons.append(choice["finish_reason"])
        reason = ((data.get("meta_info") or {}).get("finish_reason") or {})
        if isinstance(reason, dict) and reason.get("type") and reason["type"] not in reasons:
            reasons.append(reason["type"])
    return {"status": status, "chunk_shapes": shapes, "finish_reasons": reasons,
            "done": bool(chunks) and chunks[-1] == "[DONE]"}


def metrics(text):
    """{family: {"type", "labels"}} of the `sglang:` families, from the # TYPE lines and samples."""
    families, labels = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE sglang:"):
            _, _, name, kind = line.split(maxsplit=3)
            families[name] = kind
        elif line.startswith("sglang:") and "{" in line:
            name = line.split("{", 1)[0]
            keys = [part.split("=", 1)[0] for part in line.split("{", 1)[1].rsplit("}", 1)[0].split('",') if "=" in part]
            labels.setdefault(name, set()).update(k.strip(",") for k in keys)
    out = {}
    for name, kind in sorted(families.items()):
        seen = set()
        for sample, keys in labels.items():
            if sample == name or sample.startswith(name + "_") and sample[len(name) + 1:] in (
                    "bucket", "count", "sum", "total", "created"):
                seen |= keys
        out[name] = {"type": kind, "labels": sorted(seen - {"le"})}
    return out


def probes(base, key, model, context_length):
    gen = {"text": PROMPT, "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    comp = {"model": model, "prompt": PROMPT, "max_tokens": 4, "ignore_eos": True}
    chat = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4, "ignore_eos": True}
    out = {
        "GET /health": answer(*request(base, "GET", "/health", key=key)),
        "GET /health_generate": answer(*request(base, "GET", "/health_generate", key=key)),
        "GET /v1/models": answer(*request(base, "GET", "/v1/models", key=key)),
        "GET /server_info": answer(*request(base, "GET", "/server_info", key=key)),
        "POST /generate": answer(*request(base, "POST", "/generate", gen, key)),
        "POST /generate stream": stream(*request(base, "POST", "/generate", {**gen, "stream": True}, key)[::2]),
        "POST /v1/completions": answer(*request(base, "POST", "/v1/completions", comp, key)),
        "POST /v1/completions stream": stream(*request(
            base, "POST", "/v1/completions", {**comp, "stream": True, "stream_options": {"include_usage": True}},
            key)[::2]),
        "POST /v1/chat/completions": answer(*request(base, "POST", "/v1/chat/completions", chat, key)),
        "POST /v1/chat/completions stream": stream(*request(
            base, "POST", "/v1/chat/completions", {**chat, "stream": True, "stream_options": {"include_usage": True}},
            key)[::2]),
        "POST /v1/completions bad JSON": answer(*request(base, "POST", "/v1/completions", key=key, raw=b"{not json")),
        "POST /v1/completions unknown model": answer(*request(
            base, "POST", "/v1/completions", {**comp, "model": "no-such-model"}, key)),
        "POST /v1/completions max_tokens beyond the context": answer(*request(
            base, "POST", "/v1/completions", {**comp, "max_tokens": context_length * 2}, key)),
        # bad requests (#42: the simulator must fail as the real release fails)
        "POST /v1/completions negative temperature": refusal(*request(
            base, "POST", "/v1/completions", {**comp, "temperature": -1}, key)),
        "POST /v1/completions without a prompt": refusal(*request(
            base, "POST", "/v1/completions", {k: v for k, v in comp.items() if k != "prompt"}, key)),
        "POST /v1/chat/completions without messages": refusal(*request(
            base, "POST", "/v1/chat/completions", {k: v for k, v in chat.items() if k != "messages"}, key)),
        "POST /v1/chat/completions max_tokens a string": refusal(*request(
            base, "POST", "/v1/chat/completions", {**chat, "max_tokens": "four"}, key)),
        "POST /generate without text": refusal(*request(
            base, "POST", "/generate", {"sampling_params": gen["sampling_params"]}, key)),
        "POST /generate negative max_new_tokens": refusal(*request(
            base, "POST", "/generate", {**gen, "sampling_params": {"max_new_tokens": -1}}, key)),
        "POST /generate top_p above 1": refusal(*request(
            base, "POST", "/generate", {**gen, "sampling_params": {"max_new_tokens": 4, "top_p": 1.5}}, key)),
        "GET /v1/models without a key": answer(*request(base, "GET", "/v1/models")),
        "GET /v1/models with a wrong key": answer(*request(base, "GET", "/v1/models", key=key + "-wrong")),
    }
    status, ctype, text = request(base, "GET", "/metrics", key=key)
    out["GET /metrics"] = {"status": status, "families": metrics(text)}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--context-length", type=int, default=4096)
    args = parser.parse_args()
    json.dump(probes(args.base_url.rstrip("/"), args.api_key, args.model, args.context_length), sys.stdout,
              indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
