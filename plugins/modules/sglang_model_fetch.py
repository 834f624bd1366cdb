#!/usr/bin/python
"""Ansible module: fetch a model revision once on the controller and write or check its lock."""

DOCUMENTATION = r"""
module: sglang_model_fetch
short_description: Fetch a model revision on the controller (hub or folder) and write or check its lock
description:
  - Runs on the controller (C(delegate_to=localhost)). For a hub revision, the real huggingface_hub
    client resolves the revision of O(model) (a branch, tag or short commit is refused with the commit it
    resolves to now), lists the files the globs of O(model) selects, downloads them into
    O(cache_dir)/<name>/<revision>/ and checks every byte against the hub's sizes and LFS sha256.
    A source folder is hashed where it is.
  - The lock (every file's size and sha256) is written to O(lock_dir)/<name>/<revision>.json when
    there is none; when there is one, the hub's listing and the bytes must agree with it.
  - Fails with a message that names the fix for an unknown repo or revision, a gated repo without
    a token, globs that match nothing, a lock that disagrees, a download that does not match.
  - Changes only the controller's cache and lock folders, and reports a change only when it writes a lock
    (a filled download cache is no change, as ml_env's wheelhouse is none).
    Under check mode the revision is fetched and checked all the same, but no lock is written.
options:
  model: {description: "The host model's parsed sglang_model (sglang_host.model).", type: dict, required: true}
  lock_dir: {description: "Folder of the locks (sglang_model_lock_dir).", type: path, required: true}
  cache_dir: {description: "The controller's download cache (sglang_model_cache_dir).", type: path, required: true}
  endpoint: {description: "The hub's URL; empty = HF_ENDPOINT, else https://huggingface.co.", type: str, default: ""}
  token: {description: "A hub token (sglang_model_hf_token; never logged). Empty = HF_TOKEN or none.", type: str, default: ""}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Fetch the revision and write its lock
  sglang.fleet.sglang_model_fetch:
    model: "{{ sglang_host.model }}"
    lock_dir: "{{ inventory_dir }}/model-locks"
    cache_dir: ~/.cache/sglang-fleet/models
  delegate_to: localhost
  register: __fetched
"""

RETURN = r"""
lock:
  description: The revision's lock (format, repo, source, revision, files [path, size, sha256]).
  type: dict
  returned: success
lock_file: {description: "Where the lock is.", type: str, returned: success}
lock_written: {description: "True when this run wrote the lock (there was none).", type: bool, returned: success}
folder: {description: "The controller folder the revision is staged from.", type: str, returned: success}
downloaded_bytes: {description: "Bytes this run downloaded (0 when the cache held the revision).", type: int, returned: success}
total_bytes: {description: "The revision's size.", type: int, returned: success}
model_facts: {description: "config.json keys and weight bytes, read from the controller's copy (for the host checks).", type: dict, returned: success}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.model.fetch import FetchError, fetch


def main():
    module = AnsibleModule(
        argument_spec={
            "model": {"type": "dict", "required": True},
            "lock_dir": {"type": "path", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "endpoint": {"type": "str", "default": ""},
            "token": {"type": "str", "default": "", "no_log": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    endpoint = (p["endpoint"] or os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    try:
        result = fetch(p["model"], p["lock_dir"], p["cache_dir"], endpoint=endpoint, token=p["token"] or None,
                       write_lock=not module.check_mode)
    except FetchError as exc:
        module.fail_json(msg=str(exc))
    # the download cache is not a change (as ml_env's wheelhouse); a new lock is one (a file to commit)
    module.exit_json(changed=result["lock_written"], endpoint=endpoint, **result)


if __name__ == "__main__":
    main()
