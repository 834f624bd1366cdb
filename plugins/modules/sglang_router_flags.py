#!/usr/bin/python
"""Check the router's argv with the argparse of the exact sglang-router release, before anything changes."""

DOCUMENTATION = r"""
module: sglang_router_flags
short_description: Check sglang-router argv with that release's own argument parser
description:
  - Builds the parser C(python -m sglang_router.launch_router) builds (sglang-router 0.3.2
    launch_router.py:63-100 C(parse_router_args) -> router_args.py:146 C(RouterArgs.add_cli_args)),
    from the release's package extracted on the controller, in a child process, and parses O(argv)
    with it. Its compiled extension (C(sglang_router_rs), which gives the tool-call parser choices,
    router_args.py:660) is loaded, so the controller must be able to load the host's wheel (Linux, same CPU).
  - Fails (nothing has changed yet) with argparse's own message, plus the closest flags of this
    release for an unknown or removed one. Read-only.
options:
  source_dir: {description: The extracted C(sglang_router) package folder., type: path, required: true}
  argv: {description: Router arguments (no program name)., type: list, elements: str, required: true}
extends_documentation_fragment: [sglang.fleet.inventory_host]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Check the router flags
  sglang.fleet.sglang_router_flags:
    source_dir: ~/.cache/sglang-fleet/wheelhouse/src/sglang-router-0.3.2/WHEEL/sglang_router
    argv: [--policy, round_robin]
  delegate_to: localhost
"""

RETURN = r"""
parsed: {description: "The settings the argv makes (RouterArgs fields), when it parses.", type: dict, returned: success}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.module_options import inventory_host_option
from ansible_collections.sglang.fleet.plugins.module_utils.router.parser import RouterParserError, parse_router_argv


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source_dir=dict(type="path", required=True),
            argv=dict(type="list", elements="str", required=True),
            **inventory_host_option(),
        ),
        supports_check_mode=True,
    )
    p = module.params
    where = f"{p['host']}: " if p["host"] else ""
    try:
        result = parse_router_argv(module.run_command, p["source_dir"], p["argv"])
    except RouterParserError as exc:
        module.fail_json(msg=f"{where}{exc}")
    if "error" in result:
        module.fail_json(msg=f"{where}sglang_router_args are refused by the installed sglang-router's own argparse: "
                             f"{result['error']}. Fix sglang_router_args (keys are the argparse dests: policy for "
                             "--policy; `python -m sglang_router.launch_router --help` lists them); nothing was changed")
    module.exit_json(changed=False, parsed=result["parsed"])


if __name__ == "__main__":
    main()
