"""Parse sglang-router argv with the argparse of that exact release, in a child process.

The parser is the one ``python -m sglang_router.launch_router`` builds (sglang-router 0.3.2
launch_router.py:63-100 ``parse_router_args`` -> router_args.py:146 ``RouterArgs.add_cli_args``),
then ``from_cli_args`` and ``_validate_router_args`` (launch_router.py:36-46), imported from the
release's package extracted on the controller. Its compiled extension is loaded (it gives the
tool-call parser choices, router_args.py:660). Used by plugins/modules/sglang_router_flags.py (the
preflight) and plugins/modules/sglang_router_drift.py (the running argv against the inventory's).
Stdlib only, and the collection's root error.
"""

import json
import os
import sys

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError

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


class RouterParserError(SglangFleetError):
    """The release's parser could not be built; the message says what to do."""


def parse_router_argv(run_command, source_dir, argv):
    """{"parsed": {RouterArgs field: value}} or {"error": argparse's message} for `argv` (no program
    name). `run_command(argv) -> (rc, out, err)`; `source_dir` is the extracted sglang_router folder."""
    package_root = os.path.dirname(source_dir.rstrip("/"))
    rc, out, err = run_command([sys.executable, "-c", CHILD, package_root, json.dumps(list(argv))])
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RouterParserError(
            f"cannot build the argument parser of the sglang-router release in {source_dir} on the controller "
            f"(rc {rc}): {(err or out).strip()[-800:]}. The check loads the release's compiled extension: run it "
            "from a Linux controller of the host's CPU architecture") from None
