#!/usr/bin/python
"""Audit a host's SGLang: what the installed release does with its flags here, and why."""

DOCUMENTATION = r"""
module: sglang_audit
short_description: Predict and check what the installed SGLang does with a host's flags
description:
  - Runs on the host. Reads the C(sglang) package installed in O(venv) (lib/python3*/site-packages/sglang)
    as text, never importing it, and the model's C(config.json) from the host (model_path in O(args);
    a Hugging Face repo id leaves the model config unknown).
  - Turns O(args) into argv exactly as the C(sglang_argv) filter does, checks it with the release's
    parser, and predicts each optimisation - on, auto-disabled (rule, file:line of this release,
    override flag), unavailable on this hardware (why), off by default (how to enable).
  - Checks O(expect) (the host's C(sglang_expect)) against the prediction.
  - Evaluates O(assertions) (the host's C(sglang_source_assertions)) over the installed sglang package
    - a regex over a file or glob inside it, must match, must not match or an exact count, optionally a
    captured group compared with a value - and fails for each one that fails or cannot be checked,
    like an unmet expectation. At most 2,000 files are read per assertion.
  - With O(server_url), also reads the running server's resolved settings (C(/server_info), or
    C(/get_server_info) on older releases) and model info, reports every setting SGLang resolved
    differently than predicted, and checks O(expect) against what the server runs.
  - Read-only; supports check mode.
options:
  venv: {description: The venv of this SGLang version (C(<sglang_env_root>/sglang-<version>)), type: path, required: true}
  version: {description: The sglang_version the venv must hold ("" to accept any)., type: str, default: ""}
  args: {description: The host's SGLang arguments as a mapping (the host model's sglang_host.args)., type: dict, required: true}
  hardware: {description: GPU facts (ansible_facts.sglang_gpu from gpu_facts)., type: dict, default: {}}
  expect: {description: Expected settings (sglang_expect)., type: dict, default: {}}
  assertions:
    description:
      - Checks on the installed source (sglang_source_assertions), each a mapping with C(name), C(path)
        (a file or glob relative to the sglang package folder, or a list of them), C(regex) (Python, re.MULTILINE),
        C(must) (match or not_match) or C(count) (exact number of matches), optionally C(group) and C(equals)
        (with must=match, the first match's captured group compared as text), C(message) and C(fix).
      - Invalid items (unknown keys, a bad regex, a path leaving the package) fail the module.
    type: list
    elements: dict
    default: []
  fail_on_expectations: {description: Fail when an expectation is not met or the server differs from the prediction., type: bool, default: true}
  missing_ok: {description: Return installed=false instead of failing when the venv has no sglang yet., type: bool, default: false}
  server_url: {description: Base URL of the running server ("" for the static audit only)., type: str, default: ""}
  server_missing_ok: {description: Return server=false instead of failing when the server cannot be reached., type: bool, default: false}
  environment:
    description:
      - The service's environment (sglang_host.service.environment).
      - Packages its PYTHONPATH puts ahead of the release's are reported (C(shadowed)) and warned about.
    type: dict
    default: {}
extends_documentation_fragment: [sglang.fleet.api_key, sglang.fleet.http_timeout, sglang.fleet.inventory_host]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Audit the installed SGLang against the host's flags and expectations
  sglang.fleet.sglang_audit:
    venv: /opt/ml-env/sglang-0.5.11
    version: "0.5.11"
    args: "{{ sglang_host.args }}"
    hardware: "{{ ansible_facts.sglang_gpu }}"
    expect: {speculative_num_steps: 3, cuda_graph: "on"}
    assertions:
      - name: multimodal auto-disable rule present
        path: srt/server_args.py
        regex: '^\s*if self\.get_model_config\(\)\.is_multimodal:\n\s*self\.disable_piecewise_cuda_graph = True'
        must: match
    server_url: http://127.0.0.1:30000
"""

RETURN = r"""
report: {description: "The whole report (sglang, hardware, model, argv, findings, expectations, assertions, runtime, failures); assertions
    has one entry per source assertion (name, status pass, fail or error, detail, location sglang/<file>:<line> of the first match,
    locations, matches, files_read, value, message, fix).", type: dict, returned: always}
lines: {description: "The readable report, one line per optimisation.", type: list, returned: always}
failures: {description: "Messages of the expectations not met, the source assertions that failed or could not be checked, and the runtime
    mismatches.", type: list, returned: always}
ok: {description: True when nothing failed., type: bool, returned: always}
installed: {description: False when the venv has no sglang yet (with missing_ok)., type: bool, returned: always}
server: {description: False when the server could not be reached (with server_missing_ok)., type: bool, returned: when server_url is set}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import (
    AuditError,
    load_installed,
    read_model_config,
    read_server,
    result_for,
    runtime_audit,
    static_audit,
)
from ansible_collections.sglang.fleet.plugins.module_utils.module_options import inventory_host_option, server_options


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            version=dict(type="str", default=""),
            args=dict(type="dict", required=True),
            hardware=dict(type="dict", default={}),
            expect=dict(type="dict", default={}),
            assertions=dict(type="list", elements="dict", default=[]),
            fail_on_expectations=dict(type="bool", default=True),
            missing_ok=dict(type="bool", default=False),
            server_url=dict(type="str", default=""),
            server_missing_ok=dict(type="bool", default=False),
            **server_options(),
            **inventory_host_option(),
            environment=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    where = f"{p['host']}: " if p["host"] else ""
    try:
        src, path = load_installed(p["venv"], p["version"] or None)
    except AuditError as exc:
        if p["missing_ok"]:
            why = (f"not audited under --check: {p['venv']} is not built yet (check mode builds nothing; "
                   "a real run builds it, then audits it)" if module.check_mode else f"not audited: {exc}")
            module.exit_json(changed=False, installed=False, ok=True, failures=[], report={}, lines=[where + why])
        module.fail_json(msg=f"{where}{exc}")
    model_config, note = read_model_config(p["args"].get("model_path"))
    try:
        report = static_audit(src, p["args"], p["hardware"], p["expect"], source_path=path,
                              model_config=model_config, model_note=note, host=p["host"],
                              assertions=p["assertions"], environment=p["environment"])
    except AuditError as exc:
        module.fail_json(msg=str(exc))
    extra = {"installed": True}
    if p["server_url"]:
        try:
            server = read_server(p["server_url"], p["api_key"], p["timeout"])
        except AuditError as exc:
            extra["server"] = False
            if p["server_missing_ok"]:
                report["lines"].append(f"runtime: not audited ({exc})")
            else:
                report["failures"].append(f"{where}runtime audit: {exc}")
                report["lines"].append(f"runtime: FAILED {exc}")
                report["ok"] = False
        else:
            runtime_audit(report, src, server, p["expect"], host=p["host"], check_mode=module.check_mode)
            extra["server"] = True
    result = result_for(report)
    if p["fail_on_expectations"] and not report["ok"]:
        module.fail_json(msg="\n".join([f"{where}SGLang audit failed:"] + report["failures"]),
                         **result, **extra)
    module.exit_json(changed=False, **result, **extra)


if __name__ == "__main__":
    main()
