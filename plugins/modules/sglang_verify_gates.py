#!/usr/bin/python
"""Ansible module: verification gates (floor, history, accept length, last known good) and report for one host."""

DOCUMENTATION = r"""
module: sglang_verify_gates
short_description: Gate a host's benchmark against its floor, its own history and its accept length
description:
  - Pure computation over its inputs (plugins/module_utils/verify/gates.py), plus reading O(history_file)
    (JSON lines, one record per earlier run) where it runs; the role runs it on the controller,
    where the history lives.
  - Gates, each pass, fail, inconclusive or skip (O(thresholds) names the settings). C(floor) -
    single-stream decode tok/s >= C(min_decode_tok_s). C(history) - every metric against the last
    C(history_window) passing runs with the same SGLang version and flags (fingerprint of version and
    normalised argv) and workload, with the host's run-to-run noise (learned from O(history_file),
    moderated by the peers' noise from O(peer_history_files) or the prior C(run_noise_prior_pct));
    gate_mode C(fixed) - within C(regression_tolerance_pct) % of their median. C(accept_length) -
    speculative decoding configured -> accept length >= C(min_accept_length), none reported fails.
    C(last_good) - every metric against the host's last known good release O(last_good) (its passing
    runs in the history) on the same model, GPUs and workload, whatever its version or flags
    (C(accepted) with C(accept_regression)).
  - Also computes the memory-bandwidth roofline of single-stream decode and the measured efficiency.
  - Never changes anything (changed=false); supports check mode. Does not fail on failed gates
    (the role writes the report first, then fails).
options:
  bench: {description: "sglang_bench results (the result of each run), one per concurrency level; one at concurrency 1.", type: list,
      elements: dict, required: true}
  version: {description: The SGLang version the host runs., type: str, required: true}
  args: {description: The host's SGLang arguments (the host model's sglang_host.args)., type: dict, required: true}
  gpu: {description: GPU facts (ansible_facts.sglang_gpu)., type: dict, default: {}}
  weight_bytes: {description: "Model weight bytes read per decode pass (0 = unknown, no roofline).", type: int, default: 0}
  thresholds: {description: "The verify settings as one dict (the role's sglang_verify_<name> variables; plugins/module_utils/verify/settings.py
      lists them with their defaults and ranges, checked there once): min_decode_tok_s, min_accept_length, history_window,
      regression_tolerance_pct, gate_mode, inconclusive, remeasure, min_effect_pct, false_alarm_pct, power_pct,
      run_noise_prior_pct, run_noise_prior_dof, accept_regression, rebaseline. What it leaves out takes the default.", type: dict,
    default: {}}
  history_file: {description: JSON-lines history of this host ("" or a missing file = no history)., type: path, default: ""}
  peer_history_files: {description: "Other hosts' history files: where their records were measured on the same hardware and
      workload, their pooled run-to-run noise is this host's prior (missing files: none).", type: list, elements: path, default: []}
  stamp: {description: UTC time stamp of this run., type: str, default: ""}
  last_good: {description: "The host's last known good release record (the C(last_good) that M(sglang.fleet.sglang_release) returns); {} =
      none.", type: dict, default: {}}
  earlier: {description: "This run's earlier measurements (each result's C(measurement)), when an inconclusive gate had the
      server measured again: the run is judged on all of them (each measurement's figure, every repeat).", type: list,
    elements: dict, default: []}
extends_documentation_fragment: [sglang.fleet.inventory_host]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Gate the benchmark
  sglang.fleet.sglang_verify_gates:
    bench: "{{ bench_runs.results | map(attribute='result') | list }}"
    version: "0.5.11"
    args: "{{ sglang_host.args }}"
    gpu: "{{ ansible_facts.sglang_gpu }}"
    weight_bytes: 27000000000
    thresholds:
      min_decode_tok_s: 50
      min_accept_length: 2.5
    history_file: reports/ct129/verify-history.jsonl
    host: ct129
  delegate_to: localhost
"""

RETURN = r"""
ok: {description: True when no gate failed., type: bool, returned: always}
line: {description: One readable line for the host., type: str, returned: always}
lines: {description: "The line, then one message per gate.", type: list, returned: always}
failures: {description: Messages of the failed gates., type: list, returned: always}
record: {description: The history record of this run (one JSON line)., type: dict, returned: always}
report: {description: "The whole report (gates, levels, history baseline, roofline, thresholds).", type: dict, returned: always}
measurement: {description: "This measurement's own metrics and samples (what O(earlier) takes for a next one).", type: dict,
  returned: always}
inconclusive: {description: "True when a noise-aware gate cannot tell.", type: bool, returned: always}
measure_again: {description: "True when a gate suspects a loss (a failed floor, a noise-aware metric that failed or is
    inconclusive with a loss of at least min_effect_pct): what has the server measured again.", type: bool, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.host.args import ArgsError
from ansible_collections.sglang.fleet.plugins.module_utils.module_options import inventory_host_option
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import VerifyError, evaluate, read_history_file


def main():
    module = AnsibleModule(
        argument_spec={
            "bench": {"type": "list", "elements": "dict", "required": True},
            "version": {"type": "str", "required": True},
            "args": {"type": "dict", "required": True},
            "gpu": {"type": "dict", "default": {}},
            "weight_bytes": {"type": "int", "default": 0},
            "thresholds": {"type": "dict", "default": {}},
            "history_file": {"type": "path", "default": ""},
            "peer_history_files": {"type": "list", "elements": "path", "default": []},
            **inventory_host_option(),
            "stamp": {"type": "str", "default": ""},
            "last_good": {"type": "dict", "default": {}},
            "earlier": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    peers = [rec for path in p["peer_history_files"] for rec in read_history_file(path)]
    server = {k: p[k] for k in ("host", "version", "args", "gpu", "weight_bytes")}
    try:
        out = evaluate(p["bench"], p["thresholds"], server, read_history_file(p["history_file"]),
                       last_good=p["last_good"] or None, peers=peers, earlier=p["earlier"], stamp=p["stamp"])
    except (VerifyError, ArgsError) as exc:
        module.fail_json(msg=f"sglang_verify: {exc}")
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
