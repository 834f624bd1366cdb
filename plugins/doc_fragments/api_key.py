"""Documentation of the `api_key` option of the modules that send a server's API key (issue #43: written once).

Its argument spec is plugins/module_utils/module_options.py's api_key_option(); ansible-test's
validate-modules checks that the two agree in every module that uses them. A module whose key is
another one (sglang_router_drift: the router's) or has no default (sglang_bench) documents its own.
"""

from __future__ import annotations


class ModuleDocFragment:
    # sglang.fleet.api_key
    DOCUMENTATION = r"""
options:
  api_key:
    description: The server's API key (its SGLANG_API_KEY), sent as a Bearer token; empty when it requires none. Never logged.
    type: str
    default: ""
"""
