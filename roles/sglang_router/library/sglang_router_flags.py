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
  host: {description: Name used in messages., type: str, default: ""}
"""

EXAMPLES = r"""
- name: Check the router flags
  sglang_router_flags:
    source_dir: ~/.cache/sglang-fleet/wheelhouse/src/sglang-router-0.3.2/WHEEL/sglang_router
    argv: [--policy, round_robin]
  delegate_to: localhost
"""

RETURN = r"""
parsed: {description: "The settings the argv makes (RouterArgs fields), when it parses.", type: dict, returned: success}
"""

import json
import os
import sys

from ansible.module_utils.basic import AnsibleModule

# Run in a child: the release's modules are imported there, never in Ansible's process.
CHILD = r"""
import argparse, difflib, json, sys
sys.path.insert(0, sys.argv[1])
from sglang_router.router_args import RouterArgs

class Refused(Exception):
    pass

class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's message, raised instead of printed + exit 2
        raise Refused(message)

# launch_router.py:64-100: the launcher's parser, RouterArgs.add_cli_args(parser, use_router_prefix=False)
parser = Parser(prog="sglang_router.launch_router")
RouterArgs.add_cli_args(parser, use_router_prefix=False)
argv = json.loads(sys.argv[2])
flags = sorted(parser._option_string_actions)
try:
    ns, unknown = parser.parse_known_args(argv)
    if unknown:
        hints = []
        for word in unknown:
            if word.startswith("--"):
                close = difflib.get_close_matches(word.split("=", 1)[0], flags, n=3, cutoff=0.6)
                hints.append(word + (" (closest flags of this release: " + ", ".join(close) + ")" if close
                                     else " (no flag of this release is close)"))
        raise Refused("unrecognized arguments: " + "; ".join(hints or unknown))
    # launch_router.py:36-46: from_cli_args, then _validate_router_args before the Rust router starts
    args = RouterArgs.from_cli_args(ns, use_router_prefix=False)
    args._validate_router_args()
except (Refused, ValueError) as exc:
    print(json.dumps({"error": str(exc)}))
    sys.exit(0)
print(json.dumps({"parsed": {k: v for k, v in vars(args).items() if isinstance(v, (str, int, float, bool, list, type(None)))}}, default=str))
"""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source_dir=dict(type="path", required=True),
            argv=dict(type="list", elements="str", required=True),
            host=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    where = f"{p['host']}: " if p["host"] else ""
    package_root = os.path.dirname(p["source_dir"].rstrip("/"))
    rc, out, err = module.run_command([sys.executable, "-c", CHILD, package_root, json.dumps(p["argv"])])
    try:
        result = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        module.fail_json(msg=f"{where}cannot build the argument parser of the sglang-router release in {p['source_dir']} "
                             f"on the controller (rc {rc}): {(err or out).strip()[-800:]}. The check loads the release's "
                             "compiled extension: run it from a Linux controller of the host's CPU architecture")
    if "error" in result:
        module.fail_json(msg=f"{where}sglang_router_args are refused by the installed sglang-router's own argparse: "
                             f"{result['error']}. Fix sglang_router_args (keys are the argparse dests: policy for "
                             "--policy; `python -m sglang_router.launch_router --help` lists them); nothing was changed")
    module.exit_json(changed=False, parsed=result["parsed"])


if __name__ == "__main__":
    main()
