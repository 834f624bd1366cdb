"""Shared test setup: make the repo's module_utils importable the way Ansible modules import them.

Modules do `from ansible.module_utils.sglang_source import ...`; Ansible resolves that against the
`module_utils = module_utils` path in ansible.cfg. Tests get the same import path by extending the
`ansible.module_utils` package path with this repo's folder.
"""
import pathlib

import ansible.module_utils

REPO = pathlib.Path(__file__).resolve().parent.parent
if str(REPO / "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(REPO / "module_utils"))
