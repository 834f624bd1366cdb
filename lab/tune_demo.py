#!/usr/bin/env python3
"""The seeds' story on the lab fleet after `make demo`: ct129 redeployed with 1-step MTP, then tune.yml
finds the steps that leave nothing on the table, writes them and serves them (`make tune-demo`).

The lab inventory is copied to .lab/tune-demo/ (the repository's inventory stays as it is) and ct129's
file there set as the seeds' redeploy left it: `speculative_num_steps: 1` (SGLang then drafts 2
tokens), no expectations and no floors (the redeploy was accepted by hand). deploy.yml rolls ct129
out to that, its last-good gate off (it would roll the -30 % back); then `tune.yml -l ct129 -e
sglang_tune_write=true` searches the default space (steps 1-5, and the audit's candidate: 0.5.11
auto-disables the piecewise CUDA graph for this multimodal model), confirms the best on a fresh
restart, writes it into .lab/tune-demo/host_vars/ct129.yml and deploys it. The answer goes to
reports/ct129/tune-latest.json and the fleet report's "left on the table" column. `make demo` puts
ct129 back on the repository's inventory (3-step MTP).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
LAB = REPO / "inventories" / "lab"
COPY = REPO / ".lab" / "tune-demo"   # two levels below the repository, as inventories/lab is (its paths say ../../)
HOST = "ct129"
# What the seeds' redeploy ran, and what made it pass by hand; a 20-minute budget at the simulator's costs.
SEEDS = {"sglang_expect": {}, "sglang_verify_min_decode_tok_s": 0, "sglang_verify_min_accept_length": 0,
         "sglang_tune_budget_minutes": 20, "sglang_tune_restart_s": 15, "sglang_tune_measure_s": 10}


def inventory_copy():
    """.lab/tune-demo/: the lab inventory with ct129 at 1-step MTP. Returns its hosts.yml."""
    if COPY.exists():
        shutil.rmtree(COPY)
    shutil.copytree(LAB, COPY, symlinks=True)
    path = COPY / "host_vars" / f"{HOST}.yml"
    data = yaml.safe_load(path.read_text())
    args = {k: v for k, v in data["sglang_args"].items() if k != "speculative_num_draft_tokens"}
    args["speculative_num_steps"] = 1
    data.update(SEEDS, sglang_args=args)
    path.write_text("# ct129 as the seeds' redeploy left it (lab/tune_demo.py); tune.yml writes its winner here\n"
                    + yaml.safe_dump(data, sort_keys=False))
    return COPY / "hosts.yml"


def play(inventory, *args):
    argv = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), *args]
    print("+", " ".join(argv[1:]), flush=True)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    if subprocess.run(argv, cwd=REPO, env=env, check=False).returncode:
        sys.exit(f"{args[0]} failed: see its output above")


def main():
    inventory = inventory_copy()
    play(inventory, "deploy.yml", "-l", HOST, "-e", "sglang_verify_compare_last_good=false")
    play(inventory, "tune.yml", "-l", HOST, "-e", "sglang_tune_write=true")
    tuned = yaml.safe_load((COPY / "host_vars" / f"{HOST}.yml").read_text())["sglang_args"]
    print(f"\n{HOST} now runs speculative_num_steps {tuned['speculative_num_steps']} "
          f"({COPY.relative_to(REPO)}/host_vars/{HOST}.yml); `make report` shows the gain, `make demo` puts "
          "the repository's inventory back")


if __name__ == "__main__":
    main()
