"""Action plugin: the controller's half of sglang_deploy_state, the digest of a host's deploy inputs.

The module's `fingerprint` option, when the task gives none, is `inputs_digest`: a sha256 of the
host's inventory name, every `sglang_*` and `ml_env_*` variable of the host as the task sees it
(inventory, group_vars, -e; templated, vault values decrypted) and the project's code (roles,
modules, plugins, playbooks) and the ansible-core version: what a deploy is made of and checks.
Verify's variables are in it (a changed one gets the whole deploy, so its checks run); the
rollout's batches (play-level) and report folders (the controller's) are not.
With a `skip_reason` the host is reported out of sync, for that reason, without a look.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re

import yaml
from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ANSIBLE_VERSION

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODE_FOLDERS = ("roles", "plugins", "filter_plugins", "playbooks")
INPUT = re.compile(r"^(sglang|ml_env)_")
# Caches, and documentation (a README edit must not give every host the whole deploy).
NOT_CODE = (".pyc", ".pyo", ".md")
# sglang_release_verify_in_sync says what deploy does with a host in sync: it cannot take it out of sync.
NOT_AN_INPUT = re.compile(r"^sglang_rollout_|_report_dir$|^sglang_preflight_passed$|^sglang_host$"
                          r"|^sglang_release_verify_in_sync$")


def role_outputs(root=PROJECT):
    """What the roles set for others (their argument specs' `outputs` entry point): results, not inputs."""
    names = set()
    for specs in sorted(glob.glob(os.path.join(root, "roles", "*", "meta", "argument_specs.yml"))):
        with open(specs, encoding="utf-8") as fh:
            names.update((yaml.safe_load(fh)["argument_specs"].get("outputs") or {}).get("options") or {})
    return frozenset(names)


OUTPUTS = role_outputs()


def code_digest(root=PROJECT, folders=CODE_FOLDERS):
    """sha256 of the project's code: every file's path and bytes (no caches, no READMEs), and ansible-core's version."""
    digest = hashlib.sha256(ANSIBLE_VERSION.encode())
    for folder in folders:
        for base, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(NOT_CODE):
                    continue
                path = os.path.join(base, name)
                digest.update(to_bytes(os.path.relpath(path, root)) + b"\0")
                with open(path, "rb") as fh:
                    digest.update(hashlib.sha256(fh.read()).digest())
    return digest.hexdigest()


def input_names(names):
    """The variables a deploy is made of, among `names`."""
    return sorted(n for n in names if INPUT.match(n) and not NOT_AN_INPUT.search(n) and n not in OUTPUTS)


def inputs_digest(values, code):
    """sha256 of the inputs' values (a mapping name -> templated value) and the code digest: what
    sglang_deploy_state saves and compares as its `fingerprint` (not host/args.py's fingerprint, the
    SGLang version and argv that make two runs comparable)."""
    text = json.dumps({"code": code, "vars": values}, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        skip_reason = args.pop("skip_reason", "")
        if not args.get("fingerprint"):
            values = {}
            for name in input_names(task_vars):
                try:
                    values[name] = self._templar.template(task_vars[name])
                except Exception as exc:  # noqa: BLE001 (a variable that does not template is an input too)
                    values[name] = f"<{exc.__class__.__name__}>"
            values["inventory_hostname"] = task_vars.get("inventory_hostname")  # a record is one name's
            args["fingerprint"] = inputs_digest(values, code_digest())
        if args.get("state", "check") == "check" and skip_reason:
            result.update(changed=False, in_sync=False, fingerprint=args["fingerprint"], reasons=[skip_reason])
            return result
        result.update(self._execute_module(module_name="sglang.fleet.sglang_deploy_state", module_args=args,
                                           task_vars=task_vars))
        return result
