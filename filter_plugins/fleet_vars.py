"""Filters for checking a host's variables against what the project knows."""

import difflib

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


class FilterModule:
    def filters(self):
        return {"unknown_vars": unknown_vars}
