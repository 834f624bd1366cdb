#!/usr/bin/python
"""Ansible module: a running SGLang server's greedy outputs for fixed prompts (tune.yml's output check)."""

DOCUMENTATION = r"""
---
module: sglang_outputs
short_description: Generate greedy outputs of fixed prompts on a running SGLang server
description:
  - Sends O(prompts) fixed prompts (the same on every host and release), one at a time, at temperature 0
    with EOS ignored, O(output_len) tokens each, and returns the generated texts.
  - tune.yml compares a candidate's outputs with the incumbent's when a flag that can change the
    model's outputs (a quantised KV cache, another dtype) is being tried.
  - Read-only (generation requests only); runs under C(--check) and never reports C(changed).
  - Pure Python standard library (plugins/module_utils/verify/bench_client.py).
options:
  prompts:
    description: How many fixed prompts.
    type: int
    default: 8
  output_len:
    description: Tokens generated for each.
    type: int
    default: 32
extends_documentation_fragment: [sglang.fleet.bench_client, sglang.fleet.api_key]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: The incumbent's greedy outputs
  sglang.fleet.sglang_outputs:
    base_url: http://127.0.0.1:30000
    prompts: 8
    output_len: 32
  register: __outputs
"""

RETURN = r"""
outputs:
  description: The generated text of each prompt, in order.
  type: list
  elements: str
  returned: success
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.module_options import api_key_option, bench_client_options
from ansible_collections.sglang.fleet.plugins.module_utils.verify.bench_client import BenchError, greedy_outputs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            prompts=dict(type="int", default=8),
            output_len=dict(type="int", default=32),
            **bench_client_options(),
            **api_key_option(),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["prompts"] < 1 or p["output_len"] < 1:
        module.fail_json(msg=f"prompts and output_len must be at least 1: {p['prompts']}, {p['output_len']}")
    try:
        outputs = greedy_outputs(p["base_url"], p["api"], None, p["prompts"], p["output_len"],
                                 api_key=p["api_key"] or None, timeout_s=p["timeout_s"])
    except BenchError as e:
        module.fail_json(msg=f"greedy outputs of {p['base_url']} failed: {e}")
    module.exit_json(changed=False, outputs=outputs)


if __name__ == "__main__":
    main()
