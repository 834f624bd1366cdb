"""Documentation of the `host` option of the modules that name the host only in their messages (issue #43).

The argument spec beside it is plugins/module_utils/module_options.py's inventory_host(); a module
whose `host` is required or means more (sglang_drift, sglang_host_check, sglang_router_drift,
sglang_router_verify) documents its own.
"""

from __future__ import annotations


class ModuleDocFragment:
    # sglang.fleet.inventory_host
    DOCUMENTATION = r"""
options:
  host:
    description: The host's inventory name, used in messages ("" for none).
    type: str
    default: ""
"""
