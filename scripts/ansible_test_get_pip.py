"""Stand-in for get-pip.py, which ansible-test downloads from ci-files.testing.ansible.com (not
reachable from every CI machine): bootstrap pip from the interpreter's own ensurepip, then run
`pip install` with get-pip's arguments (ansible-test passes the pinned pip version in them)."""
import ensurepip
import os
import runpy
import sys

config = os.environ.get("PIP_CONFIG_FILE")
ensurepip.bootstrap(upgrade=True, default_pip=True)
# ensurepip points PIP_CONFIG_FILE at /dev/null for its own run: pip's configuration (an index
# mirror, a CA bundle) applies to the install below
os.environ.pop("PIP_CONFIG_FILE", None)
if config is not None:
    os.environ["PIP_CONFIG_FILE"] = config
# --no-setuptools / --no-wheel are get-pip's own options, not pip's
sys.argv = ["pip", "install", *(a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel"))]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
