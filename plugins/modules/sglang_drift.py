#!/usr/bin/python
"""Compare one host's SGLang with the inventory's desired state, read-only."""

DOCUMENTATION = r"""
module: sglang_drift
short_description: Where a host's SGLang differs from the inventory (service, argv, unit, venv, server)
description:
  - Runs on the host and reads only. Compares the desired state (O(version), O(venv),
    O(entrypoint), O(args)) with the service (C(systemctl show NAME -p ActiveState -p MainPID
    -p UnitFileState)), the running main process (C(/proc/<MainPID>/cmdline)), the unit file on
    disk, the sglang release installed in O(venv) (read as text, never imported), the ml_env
    marker against O(lock_file), the C(current) link in O(env_root) and, with O(server_url), the
    running server's resolved settings for the keys O(args) sets.
  - Both the running and the desired SGLang argv are normalised with the parser of the release
    installed in O(venv), so C(--tp 2) equals C(--tp-size 2) and order does not matter.
  - Returns one item C({what, desired, actual, fix}) per difference; values of C(--api-key) and
    C(--admin-api-key) are masked. Never fails for drift (the role decides); supports check mode.
options:
  host: {description: "Inventory name (used in lines and in the fix, C(run deploy.yml -l HOST)); required without O(fleet).", type: str}
  version: {description: The desired sglang_version; required without O(fleet)., type: str}
  venv: {description: The desired venv (C(<sglang_env_root>/sglang-<version>)); required without O(fleet)., type: path}
  env_root: {description: "Folder of the venvs, holding the C(current) link (\"\" to skip).", type: path, default: ""}
  lock_file: {description: The ml_env lock the venv's marker must match ("" to skip)., type: path, default: ""}
  entrypoint: {description: What the launcher starts (sglang_service_entrypoint); required without O(fleet)., type: str}
  args: {description: The desired SGLang arguments as a mapping (the host model's sglang_host.args); required without O(fleet)., type: dict}
  service: {description: systemd unit name., type: str, default: sglang}
  unit_file: {description: The unit file on disk., type: path, default: /etc/systemd/system/sglang.service}
  launcher: {description: The launcher the unit runs., type: path, default: /usr/local/lib/sglang-fleet/sglang_launch.py}
  server_url: {description: Base URL of the running server on the host ("" to skip the resolved settings)., type: str, default: ""}
  model:
    description:
      - "The staged model revision to compare with the marker written when it was checked - C({path, mode}),
        mode C(sizes) (sizes and mtimes) or C(deep) (every sha256 against the lock); {} to skip."
    type: dict
    default: {}
  fleet:
    description:
      - "Summarise the fleet instead of reading a host - C({host: report}), a report being this
        module's RV(report), or null for a host that was not checked. Run it on the controller."
    type: dict
extends_documentation_fragment: [sglang.fleet.api_key, sglang.fleet.http_timeout]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Compare the host with the inventory
  sglang.fleet.sglang_drift:
    host: "{{ inventory_hostname }}"
    version: "0.5.11"
    venv: /opt/ml-env/sglang-0.5.11
    env_root: /opt/ml-env
    lock_file: /opt/ml-env/locks/sglang-0.5.11-full.txt
    entrypoint: sglang.launch_server
    args: "{{ sglang_host.args }}"
    server_url: http://127.0.0.1:30000
  register: drift

- name: Summarise the fleet once every host was checked
  sglang.fleet.sglang_drift:
    fleet: {ct129: "{{ hostvars.ct129.drift.report }}", h200x1: null}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
report: {description: "The whole report (items, lines, desired, installed, service, unit, running).", type: dict, returned: without fleet}
items: {description: "One {what, desired, actual, fix} per difference.", type: list, returned: without fleet}
lines: {description: "The summary line, then one readable line per item.", type: list, returned: without fleet}
in_sync: {description: True when nothing differs., type: bool, returned: without fleet}
summary: {description: "The fleet summary (in_sync hosts, drifted {host - differences}, unchecked, line).", type: dict, returned: with fleet}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.drift.host_drift import (
    DriftError,
    desired_state,
    drift_report,
    fleet_summary,
    observe,
)
from ansible_collections.sglang.fleet.plugins.module_utils.module_options import server_options


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str"),
            version=dict(type="str"),
            venv=dict(type="path"),
            env_root=dict(type="path", default=""),
            lock_file=dict(type="path", default=""),
            entrypoint=dict(type="str"),
            args=dict(type="dict"),
            service=dict(type="str", default="sglang"),
            unit_file=dict(type="path", default="/etc/systemd/system/sglang.service"),
            launcher=dict(type="path", default="/usr/local/lib/sglang-fleet/sglang_launch.py"),
            server_url=dict(type="str", default=""),
            **server_options(),
            model=dict(type="dict", default={}),
            fleet=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["fleet"] is not None:
        module.exit_json(changed=False, summary=fleet_summary(p["fleet"]))
    missing = [k for k in ("host", "version", "venv", "entrypoint", "args") if p[k] is None]
    if missing:
        module.fail_json(msg=f"missing required arguments: {', '.join(missing)} (or give fleet)")
    try:
        desired = desired_state(p["host"], p["version"], p["venv"], p["entrypoint"], p["args"],
                                service=p["service"], unit_file=p["unit_file"], launcher=p["launcher"],
                                lock_file=p["lock_file"] or "", env_root=p["env_root"] or "",
                                model=p["model"] or {})
    except DriftError as exc:
        module.fail_json(msg=str(exc))

    def run(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C", "SYSTEMD_PAGER": ""})

    src, observed = observe(desired, run, server_url=p["server_url"], api_key=p["api_key"], timeout=p["timeout"])
    report = drift_report(src, desired, observed)
    module.exit_json(changed=False, report=report, items=report["items"], lines=report["lines"],
                     in_sync=report["in_sync"])


if __name__ == "__main__":
    main()
