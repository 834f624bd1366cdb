#!/usr/bin/python
"""A host's SGLang releases: read them, record one, restore one (plugins/module_utils/release/records.py)."""

DOCUMENTATION = r"""
module: sglang_release
short_description: Read, record and restore a host's SGLang releases (the last known good among them)
description:
  - Keeps a record per release under O(state_dir) (C(releases/<id>/release.json) with copies of
    the unit and the EnvironmentFile, root only) and two pointers, C(current) and C(last-good).
    A release id is C(<sglang version>-<12 hex>) from the unit's and environment's bytes.
  - O(state=read) changes nothing (check mode too) and also tells whether the running service
    predates its unit, environment or launcher (a restart an interrupted run left pending).
  - O(state=record) records the release on disk with O(status); C(good) makes it the last known
    good. Then keeps the newest O(keep) records (and the current and last good ones) and removes
    the C(sglang-*) venvs in O(env_root) that no kept release uses.
  - O(state=restore) puts release O(release)'s unit and environment back and points
    O(venv_link) at its venv; the caller reloads systemd and restarts the service.
options:
  state: {description: What to do., type: str, choices: [read, record, restore], default: read}
  state_dir: {description: Folder of the records., type: path, default: /var/lib/sglang-fleet}
  unit_file: {description: The service's unit file., type: path, default: /etc/systemd/system/sglang.service}
  env_file: {description: The service's EnvironmentFile., type: path, default: /etc/sglang/sglang.env}
  service: {description: systemd unit name (O(state=read) looks for a pending restart)., type: str, default: sglang}
  files: {description: "Files whose change needs a restart (unit, environment, launcher).", type: list, elements: path, default: []}
  status: {description: The recorded release's status., type: str, choices: [good, failed, unverified], default: good}
  meta: {description: "The record's fields (version, venv, args, fingerprint, model_path, controller, verify, failure).", type: dict, default: {}}
  keep: {description: Records kept after O(state=record) (current and last good always)., type: int, default: 3}
  env_root: {description: Folder of the venvs to prune ("" to keep them all)., type: path, default: ""}
  release: {description: Id of the release O(state=restore) puts back., type: str, default: ""}
  venv_link: {description: Link to point at the restored release's venv ("" to leave alone)., type: path, default: ""}
  now: {description: UTC time stamp of this run., type: str, default: ""}
  version: {description: SGLang version of the unit on disk (O(state=read) returns its RV(live_id))., type: str, default: ""}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Read the host's releases
  sglang.fleet.sglang_release:
    state: read
  register: releases

- name: Record the verified release as the last known good
  sglang.fleet.sglang_release:
    state: record
    status: good
    meta: {version: "0.5.11", venv: /opt/ml-env/sglang-0.5.11, verify: {passed: true}}
    env_root: /opt/ml-env
    now: "20261130T120000Z"

- name: Put the last known good back
  sglang.fleet.sglang_release:
    state: restore
    release: "{{ releases.last_good.id }}"
    venv_link: /opt/ml-env/current
"""

RETURN = r"""
releases: {description: "Every record, oldest first.", type: list, returned: state=read}
current: {description: Id of the release the service runs (null before the first record)., type: str, returned: state=read}
last_good: {description: "Record of the last known good release, or null.", type: dict, returned: state=read}
previous_good: {description: "Newest good record other than the current one, or null.", type: dict, returned: state=read}
live_id: {description: "Id of the release the unit and environment on disk describe, with O(version) (null without).", type: str, returned:
    state=read}
restart_pending: {description: Why the running service must restart ("" when it need not)., type: str, returned: state=read}
record: {description: The recorded or restored release., type: dict, returned: state=record or restore}
removed: {description: Release ids and venvs pruned., type: list, returned: state=record}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.release.records import (
    ReleaseError,
    prune,
    read_state,
    record,
    release_id,
    restart_pending,
    restore,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["read", "record", "restore"], "default": "read"},
            "state_dir": {"type": "path", "default": "/var/lib/sglang-fleet"},
            "unit_file": {"type": "path", "default": "/etc/systemd/system/sglang.service"},
            "env_file": {"type": "path", "default": "/etc/sglang/sglang.env"},
            "service": {"type": "str", "default": "sglang"},
            "files": {"type": "list", "elements": "path", "default": []},
            "status": {"type": "str", "choices": ["good", "failed", "unverified"], "default": "good"},
            "meta": {"type": "dict", "default": {}},
            "keep": {"type": "int", "default": 3},
            "env_root": {"type": "path", "default": ""},
            "release": {"type": "str", "default": ""},
            "venv_link": {"type": "path", "default": ""},
            "now": {"type": "str", "default": ""},
            "version": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["state"] == "read":
            state = read_state(p["state_dir"])
            try:  # the environment is root only: a read-only play without become has no live id
                live_id = release_id(p["version"], p["unit_file"], p["env_file"]) if p["version"] else None
            except PermissionError:
                live_id = None
            module.exit_json(changed=False, **state, live_id=live_id,
                             restart_pending=restart_pending(p["service"], p["files"]))
        if module.check_mode:
            module.exit_json(changed=False, record={}, removed=[])
        if p["state"] == "record":
            changed, rec = record(p["state_dir"], p["unit_file"], p["env_file"], p["meta"], p["status"], p["now"])
            removed = prune(p["state_dir"], p["keep"], p["env_root"], protect=[p["meta"].get("venv") or ""])
            module.exit_json(changed=changed or bool(removed), record=rec, removed=removed)
        if not p["release"]:
            module.fail_json(msg="sglang_release: state=restore needs release (an id from releases.yml)")
        changed, rec = restore(p["state_dir"], p["release"], p["unit_file"], p["env_file"], p["venv_link"])
        module.exit_json(changed=changed, record=rec)
    except (ReleaseError, OSError) as exc:
        module.fail_json(msg=f"sglang_release: {exc}")


if __name__ == "__main__":
    main()
