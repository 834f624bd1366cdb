"""Run one of the collection's modules the way a playbook does: `ansible localhost -m sglang.fleet.NAME`
(repo ansible.cfg)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def run_module(args: dict, check: bool = False, timeout: float = 120, module: str = "sglang_bench",
               extra_vars: dict | None = None) -> tuple[int, dict, str]:
    """Return (rc, module result, raw output) of one ad-hoc run against localhost (`extra_vars`: -e)."""
    argv = [str(pathlib.Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,",
            "-e", f"ansible_python_interpreter={sys.executable}", "-m", module if "." in module else f"sglang.fleet.{module}", "-a", json.dumps(args)]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    if check:
        argv.append("--check")
    argv.append("-vvv")  # -vvv shows the module's invocation (where no_log must hide secrets)
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "0"}
    p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    out = p.stdout
    start = out.find("=> {")
    if start < 0:
        raise AssertionError(f"no module result in ansible output (rc {p.returncode}):\n{out}\n{p.stderr}")
    return p.returncode, json.loads(out[start + 3:]), out + p.stderr
