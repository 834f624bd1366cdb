"""Filters that turn a host's SGLang arguments (a mapping) into argv and unit lines, and a unit's
systemd hardening.

The logic lives in plugins/module_utils/host/args.py (shared with modules on the hosts) and
plugins/module_utils/unit_hardening.py; controller plugins cannot import a project's module_utils
through `ansible.module_utils`, so it is loaded from the collection's own path.
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sglang.fleet.plugins.module_utils import unit_hardening
from ansible_collections.sglang.fleet.plugins.module_utils.host import args as sglang_args


def _wrap(name, func):
    def filter_(value, *rest, **kwargs):
        try:
            return func(value, *rest, **kwargs)
        except sglang_args.ArgsError as exc:
            raise AnsibleFilterError(f"{name}: {exc}") from exc

    return filter_


def sglang_redact(text, secrets):
    """`text` with every value of `secrets` (a mapping such as sglang_service_secrets, or a list)
    replaced by <redacted>, e.g. a service log that SGLang wrote its server args into."""
    values = secrets.values() if isinstance(secrets, dict) else (secrets or [])
    return sglang_args.redact_text(text, [v for v in values if isinstance(v, (str, int)) and not isinstance(v, bool)])


def sglang_same_machine(hosts, hostvars, me):
    """The other hosts of `hosts` on `me`'s machine: its id read in sglang_service's preflight, or for a host
    in sync with its last deploy (which skips that preflight) in sglang_release's in-sync comparison."""
    def machine(host):
        hv = hostvars[host]
        return hv.get("sglang_service_machine_id") or (hv.get("sglang_release_in_sync") or {}).get("machine_id") or ""
    mine = machine(me)
    return [h for h in hosts if h != me and mine and machine(h) == mine]


def sglang_unit_hardening(own=None):
    """The collection's base systemd hardening (module_utils/unit_hardening.py BASE) with a unit's
    `own` settings over it: each role's default hardening, e.g.
    `{{ {'PrivateDevices': 'yes'} | sglang.fleet.sglang_unit_hardening }}`."""
    try:
        return unit_hardening.hardening(own)
    except TypeError as exc:
        raise AnsibleFilterError(f"sglang_unit_hardening: {exc}") from exc


class FilterModule:
    def filters(self):
        return {
            "sglang_argv": _wrap("sglang_argv", sglang_args.to_argv),
            "sglang_unit_lines": _wrap("sglang_unit_lines", sglang_args.unit_lines),
            "sglang_unit_hardening": sglang_unit_hardening,
            "systemd_quote": _wrap("systemd_quote", sglang_args.systemd_quote),
            "sglang_args_problems": sglang_args.check_args,
            "sglang_expect_problems": sglang_args.check_expect,
            "sglang_same_machine": sglang_same_machine,
            "env_file_line": _wrap("env_file_line", sglang_args.env_file_line),
            "sglang_local_url": sglang_args.local_url,
            "sglang_is_loopback": sglang_args.is_loopback,
            "sglang_redact": sglang_redact,
            "sglang_unit_value_problems": sglang_args.unit_value_problems,
        }
