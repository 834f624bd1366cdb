#!/usr/bin/python
"""Ansible module: regression.yml's verdict, which single change costs the throughput."""

DOCUMENTATION = r"""
module: sglang_regression_judge
short_description: Name the change that costs a host's throughput, from its measured steps
description:
  - Pure computation over its inputs (plugins/module_utils/verify/regression.py), plus reading
    O(history_file) (the host's verify history, for its noise) where it runs; regression.yml runs it
    on the controller.
  - Each step's single-stream decode is compared with the baseline's (the last known good release,
    step 0, and the same again as the last step, which brackets the others and tells whether the host
    itself moved) by the verify gates' run-to-run comparison - C(fail) (a loss beyond the noise and at
    least the minimum effect, C(min_effect_pct) in O(thresholds)), C(inconclusive) or C(pass) - and the culprit is the single
    change with the largest loss judged C(fail).
  - Never changes anything (changed=false); supports check mode.
options:
  results: {description: "One per step of the plan, in order: name, change, and bench (the step's benchmark results, one per
      concurrency level, as sglang_verify's measure entry point registers them) or error (why the step could not run).",
    type: list, elements: dict, required: true}
  history_file: {description: The host's verify history ("" or a missing file = none)., type: path, default: ""}
  thresholds: {description: "verify's settings (plugins/module_utils/verify/settings.py): min_effect_pct, false_alarm_pct,
      power_pct, run_noise_prior_pct, run_noise_prior_dof; the others are not used. Missing ones take the defaults.",
    type: dict, default: {}}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Name the change that costs the throughput
  sglang.fleet.sglang_regression_judge:
    results: "{{ _regression_results }}"
    history_file: reports/ct129/verify-history.jsonl
  delegate_to: localhost
"""

RETURN = r"""
steps: {description: "Each step with its decode tok/s, verdict, effect, interval and detectable loss in %.", type: list,
  returned: always}
culprit: {description: The name of the change that costs the throughput (null when none is beyond the noise)., type: str,
  returned: always}
baseline_moved: {description: "Whether the baseline moved beyond the noise between its two measurements (null when it was not
    measured again or no noise is known).", type: bool, returned: always}
lines: {description: "One line per step, then the verdict.", type: list, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import VerifyError, read_history_file
from ansible_collections.sglang.fleet.plugins.module_utils.verify.regression import RegressionError, judge, measured


def main():
    module = AnsibleModule(
        argument_spec={
            "results": {"type": "list", "elements": "dict", "required": True},
            "history_file": {"type": "path", "default": ""},
            "thresholds": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    history = read_history_file(p["history_file"])
    try:
        out = judge([measured(r) for r in p["results"]], history, p["thresholds"])
    except (RegressionError, VerifyError) as exc:
        module.fail_json(msg=f"sglang_regression_judge: {exc}")
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
