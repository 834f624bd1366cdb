"""The host model's filters (playbooks/prelude.yml computes it once per server as `sglang_host`).

The logic lives in plugins/module_utils/host/host_model.py (what each field means); a refusal
there (HostModelError) is Ansible's filter error here, with the same message and the same cause
(Ansible appends each cause's words to the message it shows).
"""

import functools

from ansible.errors import AnsibleFilterError

from ansible_collections.sglang.fleet.plugins.module_utils.host import host_model


def _refusal_as_filter_error(func):
    @functools.wraps(func)
    def filter_(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except host_model.HostModelError as exc:
            raise AnsibleFilterError(str(exc)) from exc.__cause__

    return filter_


class FilterModule:
    def filters(self):
        return {"sglang_host_model": _refusal_as_filter_error(host_model.host_model),
                "sglang_host_variant": _refusal_as_filter_error(host_model.host_variant)}
