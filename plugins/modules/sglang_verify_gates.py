#!/usr/bin/python
"""Ansible module: verification gates (floor, history, accept length, last known good) and report for one host."""

DOCUMENTATION = r"""
module: sglang_verify_gates
short_description: Gate a host's benchmark against its floor, its own history and its accept length
description:
  - Pure computation over its inputs (plugins/module_utils/verify/gates.py), plus reading O(history_file)
    (JSON lines, one record per earlier run) where it runs; the role runs it on the controller,
    where the history lives.
  - Gates, each pass, fail or skip. C(floor) - single-stream decode tok/s >= O(min_decode_tok_s).
    C(history) - every metric within O(regression_tolerance_pct) % below the median of the last
    O(history_window) passing runs with the same SGLang version and flags (fingerprint of version
    and normalised argv). C(accept_length) - speculative decoding configured -> accept length
    >= O(min_accept_length), none reported fails. C(last_good) - every metric within
    O(regression_tolerance_pct) % below the host's last known good release O(last_good) on the same
    model, GPUs and workload, whatever its version or flags (C(accepted) with O(accept_regression)).
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
  min_decode_tok_s: {description: Floor for single-stream decode tok/s (0 = none)., type: float, default: 0}
  min_accept_length: {description: Minimum speculative accept length (0 = none)., type: float, default: 0}
  history_window: {description: Passing runs the history median is taken over., type: int, default: 5}
  regression_tolerance_pct: {description: "Allowed drop below the history median, in %, where there is no test (fewer than 3
      repeats a side, or no noise estimate).", type: float, default: 5}
  min_effect_pct: {description: "The smallest loss that matters, in %: a loss fails only when it is at least this and beyond the
      host's noise (plugins/module_utils/verify/noise.py). Unset = the fixed O(regression_tolerance_pct) only.", type: float}
  gate_mode: {description: "What decides the history and last-good gates: noise (the noise-aware verdict, where
      O(min_effect_pct) is set) or fixed (O(regression_tolerance_pct); the noise-aware verdict is reported).", type: str, default: noise}
  inconclusive: {description: "An inconclusive noise-aware gate: keep (never fails the run) or fail.", type: str, default: keep}
  false_alarm_pct: {description: "The chance, in %, that an unchanged release fails the noise-aware test.", type: float, default: 1}
  power_pct: {description: "The chance, in %, with which the smallest detectable loss the report states is detected.", type: float,
    default: 95}
  history_file: {description: JSON-lines history of this host ("" or a missing file = no history)., type: path, default: ""}
  host: {description: Name used in messages., type: str, default: ""}
  stamp: {description: UTC time stamp of this run., type: str, default: ""}
  last_good: {description: "The host's last known good release record (the C(last_good) that M(sglang.fleet.sglang_release) returns); {} =
      none.", type: dict, default: {}}
  accept_regression: {description: Report a drop below the last known good without failing (a new baseline)., type: bool, default: false}
  earlier: {description: "This run's earlier measurements (each result's C(measurement)), when an inconclusive gate had the
      server measured again: the run is judged on all of them (each measurement's figure, every repeat).", type: list,
    elements: dict, default: []}
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
inconclusive: {description: "True when a noise-aware gate cannot tell (what has the server measured again).", type: bool,
  returned: always}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.host.args import ArgsError
from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import VerifyError, evaluate, read_history_file


def main():
    module = AnsibleModule(
        argument_spec={
            "bench": {"type": "list", "elements": "dict", "required": True},
            "version": {"type": "str", "required": True},
            "args": {"type": "dict", "required": True},
            "gpu": {"type": "dict", "default": {}},
            "weight_bytes": {"type": "int", "default": 0},
            "min_decode_tok_s": {"type": "float", "default": 0.0},
            "min_accept_length": {"type": "float", "default": 0.0},
            "history_window": {"type": "int", "default": 5},
            "regression_tolerance_pct": {"type": "float", "default": 5.0},
            "min_effect_pct": {"type": "float"},
            "gate_mode": {"type": "str", "default": "noise"},
            "inconclusive": {"type": "str", "default": "keep"},
            "false_alarm_pct": {"type": "float", "default": 1.0},
            "power_pct": {"type": "float", "default": 95.0},
            "history_file": {"type": "path", "default": ""},
            "host": {"type": "str", "default": ""},
            "stamp": {"type": "str", "default": ""},
            "last_good": {"type": "dict", "default": {}},
            "accept_regression": {"type": "bool", "default": False},
            "earlier": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    history = read_history_file(p["history_file"])
    thresholds = {k: p[k] for k in ("min_decode_tok_s", "min_accept_length", "history_window",
                                    "regression_tolerance_pct", "min_effect_pct", "false_alarm_pct", "power_pct",
                                    "gate_mode", "inconclusive")}
    try:
        out = evaluate(p["bench"], thresholds, history, p["gpu"], p["weight_bytes"] or None, p["version"],
                       p["args"], p["host"], p["stamp"], last_good=p["last_good"] or None,
                       accept_regression=p["accept_regression"], earlier=p["earlier"])
    except (VerifyError, ArgsError) as exc:
        module.fail_json(msg=f"sglang_verify: {exc}")
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
