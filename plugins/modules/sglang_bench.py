#!/usr/bin/python
"""Ansible module: benchmark a running SGLang (or OpenAI-compatible) server with bench_client."""

DOCUMENTATION = r"""
---
module: sglang_bench
short_description: Measure TTFT, inter-token latency and throughput of a running SGLang server
description:
  - Streams fixed-length requests to O(base_url) (OpenAI C(/v1/completions), C(/v1/chat/completions)
    or SGLang C(/generate)) at a fixed concurrency, and returns the median over O(repeats) runs after
    O(warmup) requests of request/output throughput, single-stream decode speed, TTFT, ITL, TPOT
    and end-to-end latency (mean/p50/p90/p99), plus the speculative decoding accept length when the
    server reports one.
  - The prompt is calibrated against the server's own C(prompt_tokens) so that it is O(input_len)
    tokens long; every request asks for exactly O(output_len) tokens with C(ignore_eos).
  - Output token counts come from the server's usage and are cross-checked against the streamed
    chunks; mismatches are returned in C(result.usage_check).
  - Read-only (it only sends generation requests), so it also runs under C(--check) and never reports
    C(changed).
  - Pure Python standard library (plugins/module_utils/verify/bench_client.py); runs with the host's Python (3.8 or newer).
options:
  model:
    description: Model name sent with OpenAI requests; default is the first id of C(/v1/models).
    type: str
  input_len:
    description: Prompt length in tokens, as the server counts them (chat template included).
    type: int
    default: 128
  output_len:
    description: Output tokens per request.
    type: int
    default: 128
  concurrency:
    description: Requests in flight at once.
    type: int
    default: 1
  num_prompts:
    description: Requests per run.
    type: int
    default: 8
  warmup:
    description: Requests sent (at O(concurrency)) before measuring.
    type: int
    default: 1
  repeats:
    description: Runs of O(num_prompts) requests; the result is the median per metric.
    type: int
    default: 1
  connect_timeout_s:
    description: Connect timeout (default the smaller of 10 s and O(timeout_s)).
    type: float
  read_timeout_s:
    description: Longest wait for the next byte of a response (default O(timeout_s)).
    type: float
  temperature:
    description: Sampling temperature.
    type: float
    default: 0.0
  calibrate:
    description: Calibrate the prompt to O(input_len) tokens with probe requests; if false, the
      prompt is O(input_len) one-token words plus whatever the template adds.
    type: bool
    default: true
  api_key:
    description: "Sent as C(Authorization: Bearer ...); never logged or returned."
    type: str
  headers:
    description: Extra HTTP headers.
    type: dict
    default: {}
  fail_on_error:
    description: Fail when any measured request failed (the result is still returned).
    type: bool
    default: true
  service:
    description:
      - The systemd service running the server, when the benchmark runs on its host. Its main process's
        PID and start are returned as C(result.server_start) (read with C(systemctl show) and
        C(/proc/<pid>/stat), no privileges), which server lifetime was measured, so that the verify
        history can tell runs of one lifetime from runs across a restart.
    type: str
extends_documentation_fragment: [sglang.fleet.bench_client]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Single-stream decode speed
  sglang.fleet.sglang_bench:
    base_url: http://127.0.0.1:30000
    input_len: 1024
    output_len: 256
    num_prompts: 4
    repeats: 3
  register: __sglang_bench_c1

- name: Throughput at concurrency 8 on the native API, with an API key
  sglang.fleet.sglang_bench:
    base_url: "http://{{ inventory_hostname }}:30000"
    api: generate
    concurrency: 8
    num_prompts: 32
    api_key: "{{ sglang_api_key }}"
  register: __sglang_bench_c8

- ansible.builtin.debug:
    msg: "{{ __sglang_bench_c1.result.decode_tok_s_per_stream.p50 | round(1) }} tok/s,
      accept length {{ __sglang_bench_c1.result.spec_accept_length }}"
"""

RETURN = r"""
result:
  description:
    - Output of bench_client.run_benchmark. Keys C(completed), C(failed), C(errors) (list of
      error/count), C(duration_s), C(request_throughput), C(output_throughput), C(input_throughput)
      (per second), C(total_output_tokens), C(total_input_tokens), C(decode_tok_s_per_stream),
      C(ttft_ms), C(itl_ms), C(tpot_ms), C(e2e_ms) (each mean/p50/p90/p99/min/max/n),
      C(output_tokens) and C(prompt_tokens) (expected/min/max/requests_not_expected),
      C(usage_check), C(spec_accept_length), C(spec_accept_length_source), C(prompt), C(warmup),
      C(runs) (each run's metrics), C(client), and the arguments; with O(service), C(server_start)
      (C(<UTC start> pid <MainPID>) of the service's main process after the benchmark, null when
      unknown).
  returned: success or failed requests
  type: dict
  sample:
    completed: 8
    failed: 0
    output_throughput: 3712.5
    decode_tok_s_per_stream: {mean: 3800.1, p50: 3790.2, p90: 3900.0, p99: 3950.3, min: 3600.0, max: 3960.0, n: 8}
    ttft_ms: {mean: 2.1, p50: 2.0, p90: 2.6, p99: 2.9, min: 1.8, max: 3.0, n: 8}
    spec_accept_length: null
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.module_options import bench_client_options
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import server_start
from ansible_collections.sglang.fleet.plugins.module_utils.verify.bench_client import BenchError, run_benchmark


def main():
    module = AnsibleModule(
        argument_spec={
            **bench_client_options(),
            "model": {"type": "str"},
            "input_len": {"type": "int", "default": 128},
            "output_len": {"type": "int", "default": 128},
            "concurrency": {"type": "int", "default": 1},
            "num_prompts": {"type": "int", "default": 8},
            "warmup": {"type": "int", "default": 1},
            "repeats": {"type": "int", "default": 1},
            "connect_timeout_s": {"type": "float"},
            "read_timeout_s": {"type": "float"},
            "temperature": {"type": "float", "default": 0.0},
            "calibrate": {"type": "bool", "default": True},
            "api_key": {"type": "str", "no_log": True},
            "headers": {"type": "dict", "default": {}},
            "fail_on_error": {"type": "bool", "default": True},
            "service": {"type": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = run_benchmark(
            p["base_url"], p["api"], p["model"], p["input_len"], p["output_len"], p["concurrency"],
            p["num_prompts"], p["warmup"], p["repeats"], p["timeout_s"], p["headers"],
            api_key=p["api_key"], connect_timeout_s=p["connect_timeout_s"], read_timeout_s=p["read_timeout_s"],
            temperature=p["temperature"], calibrate=p["calibrate"],
        )
    except BenchError as e:
        module.fail_json(msg=f"benchmark of {p['base_url']} failed: {e}")
    if p["service"]:
        result["server_start"] = server_start(p["service"])
    if p["fail_on_error"] and result["failed"]:
        first = result["errors"][0]["error"] if result["errors"] else "unknown"
        module.fail_json(msg=f"{result['failed']} of {result['failed'] + result['completed']} requests to "
                             f"{p['base_url']} failed; first error: {first}", result=result)
    module.exit_json(changed=False, result=result)


if __name__ == "__main__":
    main()
