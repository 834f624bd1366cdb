"""Filter that checks a host's sglang_source_assertions before anything on the host changes.

The logic lives in plugins/module_utils/audit/assertions.py (also run on the hosts by the sglang_audit
module); controller plugins cannot import a project's module_utils through `ansible.module_utils`,
so it is loaded from the file next door.
"""

from ansible_collections.sglang.fleet.plugins.module_utils.audit import assertions as sglang_assertions


def source_assertion_problems(items, variable=sglang_assertions.VARIABLE):
    """Problems with a list of source assertions (one message each, naming the item); [] when fine."""
    return sglang_assertions.validate(items, variable)


class FilterModule:
    def filters(self):
        return {"sglang_source_assertion_problems": source_assertion_problems}
