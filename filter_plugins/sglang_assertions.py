"""Filter that checks a host's sglang_source_assertions before anything on the host changes.

The logic lives in module_utils/sglang_assertions.py (also run on the hosts by the sglang_audit
module); controller plugins cannot import a project's module_utils through `ansible.module_utils`,
so it is loaded from the file next door.
"""

import importlib.util
import pathlib

_PATH = pathlib.Path(__file__).resolve().parent.parent / "module_utils" / "sglang_assertions.py"
_SPEC = importlib.util.spec_from_file_location("_sglang_fleet_assertions", _PATH)
sglang_assertions = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sglang_assertions)


def source_assertion_problems(items, variable=sglang_assertions.VARIABLE):
    """Problems with a list of source assertions (one message each, naming the item); [] when fine."""
    return sglang_assertions.validate(items, variable)


class FilterModule:
    def filters(self):
        return {"sglang_source_assertion_problems": source_assertion_problems}
