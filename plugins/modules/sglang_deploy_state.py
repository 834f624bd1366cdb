#!/usr/bin/python
"""Is the host still what its last complete deploy left? Save that, or check it (plugins/module_utils/release/deploy_state.py)."""

DOCUMENTATION = r"""
module: sglang_deploy_state
short_description: Save what a complete deploy left on a host, or check the host is still exactly that
description:
  - O(state=save) writes C(<state_dir>/deployed.json) (root, 0600) with O(fingerprint) and a
    snapshot of O(paths) (a file's sha256, mode and owners; a link's target; a folder's mode and
    owners) and of the service account. Changed only when the record changes.
  - O(state=check) changes nothing (check mode too) and returns RV(in_sync) with the RV(reasons)
    it is not; in sync means the same fingerprint, every saved path and the account as saved,
    O(service) enabled and active with no restart pending and no unit reload pending, and
    O(health_url) answering 200, and, with O(desired), drift.yml's comparison finding nothing
    (the same desired state, reading and comparison as the sglang_drift module; deploy's in sync
    is drift's plus what only the deploy knows, so the two cannot disagree).
  - The action plugin of the same name computes O(fingerprint) on the controller when it is not
    given (the inventory's C(sglang_*) and C(ml_env_*) variables and the project's code).
options:
  state: {description: What to do., type: str, choices: [check, save], default: check}
  state_dir: {description: Folder of the record., type: path, default: /var/lib/sglang-fleet}
  fingerprint: {description: Hash of the deploy's inputs., type: str, required: true}
  paths: {description: What the deploy manages on the host (O(state=save))., type: list, elements: path, default: []}
  user: {description: The service user (O(state=save))., type: str, default: ""}
  group: {description: The service group (O(state=save))., type: str, default: ""}
  service: {description: systemd unit name., type: str, default: sglang}
  files: {description: "Files whose change needs a restart (unit, environment, launcher), O(state=check).", type: list, elements: path, default: []}
  health_url: {description: "URL that must answer 200 (O(state=check)); empty: not probed.", type: str, default: ""}
  timeout: {description: Seconds for the probe., type: int, default: 30}
  desired:
    description:
      - "The desired state drift compares the host with (O(state=check)): the sglang_drift module's
        host, version, venv, env_root, lock_file, entrypoint, args, service, unit_file and launcher;
        {} leaves drift's comparison out."
    type: dict
    default: {}
  server_url: {description: "With O(desired): the server whose resolved settings drift compares too (\"\" to skip).", type: str, default: ""}
  verify_always: {description: "O(state=check): RV(verify_reason) is set for every host in sync, not only an unproven one.", type: bool, default: false}
extends_documentation_fragment: [sglang.fleet.api_key]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Compare the host with its last complete deploy
  sglang.fleet.sglang_deploy_state:
    state: check
    files: [/etc/systemd/system/sglang.service, /etc/sglang/sglang.env]
    health_url: http://127.0.0.1:30000/health_generate
  register: in_sync
"""

RETURN = r"""
in_sync: {description: The host is what its last complete deploy left., type: bool, returned: state=check}
reasons: {description: Why it is not (empty when in sync)., type: list, returned: state=check}
fingerprint: {description: The fingerprint compared or saved., type: str, returned: always}
machine_id: {description: "What identifies the machine (deploy.yml's same-machine check).", type: str, returned: state=check}
verify_reason:
  description: >-
    Why a host in sync is verified all the same (its current release is not good, it has no last
    known good, or O(verify_always)); empty: deploy leaves it alone.
  type: str
  returned: state=check
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.host.check import machine_id
from ansible_collections.sglang.fleet.plugins.module_utils.module_options import api_key_option
from ansible_collections.sglang.fleet.plugins.module_utils.release.deploy_state import (
    check,
    save,
    snapshot,
    verify_reason,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["check", "save"], "default": "check"},
            "state_dir": {"type": "path", "default": "/var/lib/sglang-fleet"},
            "fingerprint": {"type": "str", "required": True},
            "paths": {"type": "list", "elements": "path", "default": []},
            "user": {"type": "str", "default": ""},
            "group": {"type": "str", "default": ""},
            "service": {"type": "str", "default": "sglang"},
            "files": {"type": "list", "elements": "path", "default": []},
            "health_url": {"type": "str", "default": ""},
            **api_key_option(),
            "timeout": {"type": "int", "default": 30},
            "desired": {"type": "dict", "default": {}},
            "server_url": {"type": "str", "default": ""},
            "verify_always": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "check":
        reasons = check(p["state_dir"], p["fingerprint"], p["service"], p["files"], p["health_url"],
                        p["api_key"], p["timeout"], p["desired"], p["server_url"], module.run_command)
        module.exit_json(changed=False, in_sync=not reasons, reasons=reasons, fingerprint=p["fingerprint"],
                         machine_id=machine_id(),
                         verify_reason="" if reasons else verify_reason(p["state_dir"], p["verify_always"]))
    if not p["paths"]:
        module.fail_json(msg="sglang_deploy_state: state=save needs paths (what the deploy manages)")
    record = snapshot(p["fingerprint"], p["paths"], p["user"], p["group"])
    try:
        changed = False if module.check_mode else save(p["state_dir"], record)
    except OSError as exc:
        module.fail_json(msg=f"sglang_deploy_state: cannot save {p['state_dir']}: {exc}")
    module.exit_json(changed=changed, fingerprint=p["fingerprint"])


if __name__ == "__main__":
    main()
