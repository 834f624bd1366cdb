"""Documentation of the `timeout` option of the modules that read a server over HTTP (issue #43: written once).

Its argument spec is plugins/module_utils/module_options.py's http_timeout_option(); ansible-test's
validate-modules checks that the two agree in every module that uses them. A module whose timeout
is another one (a probe's 30 s, a whole wait, rsync's limit) documents its own.
"""

from __future__ import annotations


class ModuleDocFragment:
    # sglang.fleet.http_timeout
    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds for each HTTP request.
    type: int
    default: 10
"""
