#!/usr/bin/env python3
"""Tasks per host for a first deploy, a flag change and a no-op of one lab host (issue #41's figures).

    .venv/bin/python bench/deploy_tasks.py [--host h200x2]

Starts one fresh lab host of its own (prefix sglang-tasks, 10.89.86.0/24, the lab's host_vars),
prepares it, then runs deploy.yml three times: the first deploy, a flag change (context_length
halved, through -e), and a no-op (the same -e again). Prints, per run, PLAY RECAP's ok (changed
included) and skipped for the host, their sum (the tasks), the wall seconds and the controller's
CPU seconds (user + sys of ansible-playbook and its children). Removes the host at the end.

    .venv/bin/python bench/deploy_tasks.py --profile DIR

also samples each run's controller with py-spy (`pip install py-spy==0.4.1`; it follows the forked
workers, 100 samples a second, idle samples left out) into DIR/<run>.txt, collapsed stacks, and prints
where the controller's samples went (controller_profile.py). The CPU column then includes py-spy's own.
"""

import argparse
import json
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

REPO = pathlib.Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
PREFIX, SUBNET = "sglang-tasks", "10.89.86."
KNOWN_HOSTS = REPO / ".lab" / "known_hosts" / PREFIX


def write_inventory(tmp, host):
    lab = yaml.safe_load((REPO / "inventories" / "lab" / "hosts.yml").read_text())
    address = lab["all"]["children"]["sglang_servers"]["children"]["sglang_lab"]["hosts"][host]["ansible_host"]
    inv = tmp / "inventories" / "tasks"
    inv.mkdir(parents=True)
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"children": {"sglang_lab": {
        "hosts": {host: {"ansible_host": address.replace("10.89.77.", SUBNET)}},
        "vars": {"lab_known_hosts": str(KNOWN_HOSTS)}}}}}}}))
    for sub in ("group_vars", "host_vars"):
        (inv / sub).symlink_to(REPO / "inventories" / "lab" / sub)
    return inv / "hosts.yml"


def play(inventory, host, *args, profile=None):
    """(ok, skipped, wall s, controller CPU s) of one ansible-playbook run; fails when it fails. ``profile``:
    a file for py-spy's collapsed stacks of the run."""
    reports = inventory.parent / "reports"  # keep the demo fleet's history clean
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "SGLANG_FLEET_LAB_KEY": str(REPO / ".lab" / "ssh" / "id_ed25519")}
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory), "-e", f"sglang_report_dir={reports}", *args]
    if profile:
        command = [str(BIN / "py-spy"), "record", "--subprocesses", "--format", "raw", "--output", str(profile),
                   "--", *command]
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    recap = re.search(rf"^{re.escape(host)}\s+: ok=(\d+)\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)",
                      proc.stdout, re.M)
    # py-spy may exit non-zero after the play ended ("No child process"): the recap says how the play went
    if (proc.returncode and not profile) or not recap or recap[2] != "0" or recap[3] != "0":
        sys.exit(proc.stdout[-4000:] + proc.stderr[-2000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return int(recap[1]), int(recap[4]), wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="h200x2")
    parser.add_argument("--profile", type=pathlib.Path, help="sample each run's controller with py-spy into this folder")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    def profiled(name):
        return {"profile": args.profile / f"{name}.txt"} if args.profile else {}

    host_vars = yaml.safe_load((REPO / "inventories" / "lab" / "host_vars" / f"{args.host}.yml").read_text())
    changed = {**host_vars["sglang_args"], "context_length": int(host_vars["sglang_args"].get("context_length", 8192)) // 2}
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sglang-tasks-"))
    inventory = write_inventory(tmp, args.host)
    lab = [str(BIN / "python"), str(REPO / "lab" / "lab.py")]
    rows = []
    try:
        subprocess.run([*lab, "up", "--inventory", str(inventory), "--prefix", PREFIX, "--no-build"], check=True,
                       cwd=REPO, capture_output=True)
        play(inventory, args.host, "lab/prepare.yml")
        rows.append(("first deploy", play(inventory, args.host, "deploy.yml", **profiled("first"))))
        flag = ("-e", json.dumps({"sglang_args": changed}))
        rows.append(("flag change (context_length halved)",
                     play(inventory, args.host, "deploy.yml", *flag, **profiled("flag-change"))))
        rows.append(("no-op", play(inventory, args.host, "deploy.yml", *flag, **profiled("no-op"))))
    finally:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False,
                       cwd=REPO, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"| deploy.yml -l {args.host} | tasks (ok + skipped) | wall s | controller CPU-s |\n|---|---|---|---|")
    for name, (ok, skipped, wall, cpu) in rows:
        print(f"| {name} | {ok + skipped} ({ok} + {skipped}) | {wall:.1f} | {cpu:.1f} |")
    if args.profile:
        from controller_profile import report
        for name in ("first", "flag-change", "no-op"):
            print(f"\n{name}:\n" + report(args.profile / f"{name}.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
