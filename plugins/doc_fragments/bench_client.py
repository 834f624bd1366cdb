"""Documentation of the server options of the modules that drive a server with the bench client (issue #43).

sglang_bench and sglang_outputs both send generation requests through
plugins/module_utils/verify/bench_client.py: the server's URL, the endpoint and one request's deadline
mean the same in each. Their argument specs are plugins/module_utils/module_options.py's
bench_client_options(); ansible-test's validate-modules checks that the two agree in every module that
uses them. What differs (sglang_bench's api_key without a default, each module's output_len) stays in
the module.
"""

from __future__ import annotations


class ModuleDocFragment:
    # sglang.fleet.bench_client
    DOCUMENTATION = r"""
options:
  base_url:
    description: Server URL, e.g. C(http://127.0.0.1:30000).
    type: str
    required: true
  api:
    description: Endpoint to drive.
    type: str
    choices: [completions, chat, generate]
    default: completions
  timeout_s:
    description: Deadline for one request, from connect to the last byte.
    type: float
    default: 60
"""
