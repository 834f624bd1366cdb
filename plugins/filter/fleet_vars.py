"""Filters for checking a host's variables against what the project knows."""

import difflib
import os

import yaml
from ansible.errors import AnsibleFilterError


def unknown_vars(present, known, prefix):
    """Names in `present` starting with `prefix` that are not in `known`, each with a hint.

    Catches misspelled role variables (`sglang_service_ready_timout_s`), which Ansible would
    otherwise ignore silently.
    """
    if not isinstance(present, (list, tuple)) or not isinstance(known, (list, tuple, dict)):
        raise AnsibleFilterError("unknown_vars: expects a list of names and a list of known names")
    known = sorted(k for k in known if k.startswith(prefix))
    messages = []
    for name in sorted(n for n in present if n.startswith(prefix) and n not in known):
        # compare what follows the shared prefix, or every name would look close
        close = difflib.get_close_matches(name[len(prefix):], [k[len(prefix):] for k in known], n=1, cutoff=0.6)
        hint = f"did you mean {prefix}{close[0]}?" if close else f"known {prefix}* variables: {', '.join(known)}"
        messages.append(f"unknown variable {name}: {hint}")
    return messages


def role_argument_specs(role_path):
    """The `argument_specs` mapping of the role at `role_path` (its meta/argument_specs.yml)."""
    with open(os.path.join(role_path, "meta", "argument_specs.yml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)["argument_specs"]


def unknown_role_vars(present, role_path, specs=None):
    """unknown_vars for the role at `role_path`: its `<role>_*` names among `present` that its
    meta/argument_specs.yml knows neither as an input (entry point main) nor as one of the facts it
    sets for others (entry point outputs, which no tasks file runs). `specs`: that file's
    argument_specs when the caller has read it already (role_argument_specs), else it is read here.
    Used by roles/sglang_common/tasks/check_vars.yml, plugins/action/sglang_drift.py and
    plugins/action/sglang_role_inputs.py."""
    if specs is None:
        specs = role_argument_specs(role_path)
    known = [*specs["main"]["options"], *(specs.get("outputs") or {}).get("options", {})]
    return unknown_vars(list(present), known, f"{os.path.basename(os.path.normpath(role_path))}_")


class FilterModule:
    def filters(self):
        return {"unknown_vars": unknown_vars, "unknown_role_vars": unknown_role_vars}
