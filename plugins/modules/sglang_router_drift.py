#!/usr/bin/python
"""Compare one router host's sglang-router with the inventory, read-only."""

DOCUMENTATION = r"""
module: sglang_router_drift
short_description: Where a router host's sglang-router differs from the inventory (service, argv, unit, workers)
description:
  - Without O(observed), runs on the router host and reads only - C(systemctl show O(service)), the unit
    file, the running main process's argv (C(/proc/<MainPID>/cmdline)) and the router's live workers
    (C(GET O(api_url)/workers), sglang-router 0.3.2). Returns them as RV(observed).
  - With O(observed), runs on the controller - parses the inventory's argv (O(argv)) and the running one
    with the release's own argparse (O(source_dir)) and compares them field by field, the running venv
    with O(venv), the unit with the running process, and the live workers with O(workers). Returns the
    report, in the shape of sglang_drift's. Fails only when the inventory's argv does not parse.
  - Secret fields (api_key, oracle_password, control_plane_api_keys) are never compared and are masked.
options:
  service: {description: systemd unit name., type: str, default: sglang-router}
  unit_file: {description: The unit file on disk., type: path, default: /etc/systemd/system/sglang-router.service}
  api_url: {description: "The router's base URL, read on the router host (observe).", type: str}
  observed: {description: What the observe run returned (compare)., type: dict}
  host: {description: Inventory name (compare)., type: str}
  version: {description: sglang-router release the host must run (compare)., type: str}
  venv: {description: The venv the router must run from (compare)., type: path}
  argv: {description: "The inventory's router argv, workers included (compare).", type: list, elements: str}
  source_dir: {description: The extracted sglang_router package of the release (compare)., type: path}
  workers: {description: "{url: inventory host} of the router's workers group (compare).", type: dict}
  workers_group: {description: The workers group's name (compare)., type: str, default: sglang_servers}
  launcher: {description: The launcher the unit runs (compare)., type: path, default: /usr/local/lib/sglang-fleet/sglang_launch.py}
  api_key: {description: "The router's API key, sent as a bearer token to read /workers (observe); never logged.", type: str}
extends_documentation_fragment: [sglang.fleet.http_timeout]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Read the router host
  sglang.fleet.sglang_router_drift:
    api_url: http://127.0.0.1:8080
  register: seen

- name: Compare with the inventory
  sglang.fleet.sglang_router_drift:
    observed: "{{ seen.observed }}"
    host: router
    version: "0.3.2"
    venv: /opt/ml-env/sglang-router-0.3.2
    argv: [--worker-urls, "http://10.0.0.11:30000", --policy, round_robin]
    source_dir: ~/.cache/sglang-fleet/wheelhouse/src/sglang-router-0.3.2/WHEEL/sglang_router
    workers: {"http://10.0.0.11:30000": gpu-a}
  delegate_to: localhost
"""

RETURN = r"""
observed: {description: "service, unit (argv), running (argv), workers ([{url, id, is_healthy}]), workers_error.", type: dict, returned: observe}
report: {description: "items, lines, in_sync, differences, desired, service, unit, running, workers.", type: dict, returned: compare}
lines: {description: "The summary line, then one line per item.", type: list, returned: compare}
in_sync: {description: True when nothing differs., type: bool, returned: compare}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.module_options import http_timeout_option
from ansible_collections.sglang.fleet.plugins.module_utils.router.drift import drift_report, observe, redact_router_argv
from ansible_collections.sglang.fleet.plugins.module_utils.router.parser import RouterParserError, parse_router_argv


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type="str", default="sglang-router"),
            unit_file=dict(type="path", default="/etc/systemd/system/sglang-router.service"),
            api_url=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            **http_timeout_option(),
            observed=dict(type="dict"),
            host=dict(type="str"),
            version=dict(type="str"),
            venv=dict(type="path"),
            argv=dict(type="list", elements="str"),
            source_dir=dict(type="path"),
            workers=dict(type="dict"),
            workers_group=dict(type="str", default="sglang_servers"),
            launcher=dict(type="path", default="/usr/local/lib/sglang-fleet/sglang_launch.py"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["observed"] is None:
        if not p["api_url"]:
            module.fail_json(msg="sglang_router_drift needs api_url (observe) or observed (compare)")
        seen = observe(lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C", "SYSTEMD_PAGER": ""}),
                       p["service"], p["unit_file"], p["api_url"], p["timeout"], api_key=p["api_key"])
        module.exit_json(changed=False, observed=seen)
    missing = [k for k in ("host", "version", "venv", "argv", "source_dir", "workers") if p[k] is None]
    if missing:
        module.fail_json(msg=f"sglang_router_drift (compare) needs {', '.join(missing)}")
    seen = p["observed"]
    try:
        want = parse_router_argv(module.run_command, p["source_dir"], p["argv"])
        running = None
        if seen.get("running"):
            launch = seen["running"]
            args = launch[launch.index("sglang_router.launch_router") + 1:] if "sglang_router.launch_router" in launch else launch[1:]
            running = parse_router_argv(module.run_command, p["source_dir"], args)
    except RouterParserError as exc:
        module.fail_json(msg=f"{p['host']}: {exc}")
    if "error" in want:
        module.fail_json(msg=f"{p['host']}: sglang_router_args are refused by sglang-router {p['version']}'s own argparse: "
                             f"{want['error']} (argv: {' '.join(redact_router_argv(p['argv']))}). Fix sglang_router_args "
                             "(keys are the argparse dests); nothing was read as drift")
    desired = {"host": p["host"], "version": p["version"], "venv": p["venv"].rstrip("/"), "service": p["service"],
               "argv": p["argv"], "parsed": want["parsed"], "workers": p["workers"],
               "workers_group": p["workers_group"], "launcher": p["launcher"]}
    report = drift_report(desired, seen, running)
    module.exit_json(changed=False, report=report, lines=report["lines"], in_sync=report["in_sync"])


if __name__ == "__main__":
    main()
