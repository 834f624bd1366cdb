#!/usr/bin/python
"""Plan and judge the benchmark through the router against its replicas' own verify reports."""

DOCUMENTATION = r"""
module: sglang_router_verify
short_description: The router's end-to-end benchmark next to the sum of its replicas' (controller only)
description:
  - Reads each replica's latest verify report (O(reports_dir)/<replica>/verify-latest.json). Without
    O(bench), returns the benchmark to run through the router (RV(workload) - the replicas' workload,
    each concurrency level times the number of replicas). With O(bench) (sglang_bench results, one per
    level), returns the report - throughput against the replicas' sum (the ratio), latency against
    their mean - and RV(ok) (every ratio >= O(min_ratio), no failed request).
  - For a PD router (O(pd)), the workload is O(pd)'s and the report gates each level on its floor and on failed requests.
  - Fails with what to do when a replica has no report or the replicas were verified differently.
    Computes only (changed=false).
options:
  host: {description: The router's inventory name., type: str, required: true}
  reports_dir: {description: Controller folder of the per-host reports., type: path, required: true}
  replicas: {description: Inventory names of the router's replicas., type: list, elements: str, required: true}
  bench: {description: "sglang_bench results through the router, one per planned level.", type: list, elements: dict}
  min_ratio: {description: Lowest fleet throughput as a share of the replicas' sum., type: float, default: 0.8}
  pd:
    description:
      - A PD router (its servers have no verify of their own) - the workload and floors, sglang_router_verify_pd
        (concurrency, input_len, output_len, requests_per_stream, warmup_per_stream, repeats, api, min_output_tok_s).
        O(replicas) is then not read; the gate is no failed request and each level at its floor.
    type: dict
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Plan the benchmark through the router
  sglang.fleet.sglang_router_verify:
    host: router
    reports_dir: reports
    replicas: [rep1, rep2]
  register: plan
  delegate_to: localhost
"""

RETURN = r"""
workload: {description: "api, model, input_len, output_len, repeats, replicas, levels [{concurrency, num_prompts, warmup,
    replica_concurrency}].", type: dict, returned: always}
report: {description: The router's verify report., type: dict, returned: with bench}
lines: {description: Readable lines., type: list, returned: with bench}
ok: {description: True when every level passed., type: bool, returned: with bench}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.router.verify import (
    RouterVerifyError,
    compare,
    compare_pd,
    load_reports,
    plan,
    plan_pd,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            reports_dir=dict(type="path", required=True),
            replicas=dict(type="list", elements="str", required=True),
            bench=dict(type="list", elements="dict"),
            min_ratio=dict(type="float", default=0.8),
            pd=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["pd"] is not None:
            reports, workload = {}, plan_pd(p["pd"])
        else:
            reports = load_reports(p["reports_dir"], p["replicas"])
            workload = plan(reports)
    except RouterVerifyError as exc:
        module.fail_json(msg=f"{p['host']}: {exc}")
    if p["bench"] is None:
        module.exit_json(changed=False, workload=workload)
    if p["pd"] is not None:
        report = compare_pd(p["host"], workload, p["bench"], p["pd"].get("min_output_tok_s"))
    else:
        report = compare(p["host"], workload, p["bench"], reports, p["min_ratio"])
    module.exit_json(changed=False, workload=workload, report=report, lines=report["lines"], ok=report["passed"])


if __name__ == "__main__":
    main()
