#!/usr/bin/env python3
"""Fleet-size benchmark (issue 10): drift, a no-op deploy and a bare ping at 10 and 30 lab hosts.

    .venv/bin/python bench/scale_bench.py [--sizes 10 30] [--rounds 3]

For each size, starts that many lab hosts of its own (prefix sglang-scale, 10.89.90.0/24, every
host with the lab's h200x1 host_vars), prepares and deploys them once (verify skipped: this
measures the fleet machinery, not the simulator's speed), then measures side by side, `--rounds`
times each, interleaved:
  - drift.yml with the project's ansible.cfg;
  - drift.yml with Ansible's defaults (forks 5, no pipelining; its default ssh_args) and no
    caching: each host's cached reading of its SGLang source (plugins/module_utils/source/cache.py)
    is moved aside for these runs, so each host reads its source afresh;
  - drift.yml with Ansible's defaults and the source cache (what forks and pipelining alone buy);
  - a no-op deploy.yml --skip-tags sglang_verify (every host in sync with its last deploy: only
    the in-sync comparison runs, roles/sglang_release/README.md);
  - the same no-op deploy with sglang_release_skip_unchanged=false (every check and task, as
    before the in-sync comparison; left out with --without-whole);
  - a bare `ping` play, with ansible.cfg and with Ansible's defaults (the floor of any play).
Each run's wall time and the controller's CPU time (user + sys of ansible-playbook and
everything it started: workers, ssh) are taken from the child's rusage. Also records each lab
host's memory (podman stats). Prints a markdown table of medians and removes its hosts.
"""

import argparse
import json
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
PREFIX = "sglang-scale"
NET = "10.89.90."
KEY = REPO / ".lab" / "ssh" / "id_ed25519"
KNOWN_HOSTS = REPO / ".lab" / "known_hosts" / PREFIX
PODMAN_ENV = {**os.environ, "CONTAINERS_CONF": str(REPO / ".lab" / "containers.conf")}

# Ansible's own defaults for what ansible.cfg tunes; the paths stay (the project needs them).
DEFAULTS_CFG = """[defaults]
roles_path = {repo}/roles
library = {repo}/library
action_plugins = {repo}/action_plugins
module_utils = {repo}/module_utils
filter_plugins = {repo}/filter_plugins
host_key_checking = True
interpreter_python = auto_silent
retry_files_enabled = False
"""


def hosts(n):
    return {f"s{i:02d}": f"{NET}{10 + i}" for i in range(1, n + 1)}


def write_inventory(tmp, n):
    inv = tmp / f"inventory-{n}"
    (inv / "host_vars").mkdir(parents=True)
    lines = "\n".join(f"            {h}:\n              ansible_host: {ip}" for h, ip in hosts(n).items())
    (inv / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_servers:\n      children:\n        sglang_lab:\n          hosts:\n"
        + lines + f"\n          vars:\n            lab_known_hosts: {KNOWN_HOSTS}\n")
    (inv / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
    for h in hosts(n):
        (inv / "host_vars" / f"{h}.yml").symlink_to(REPO / "inventories" / "lab" / "host_vars" / "h200x1.yml")
    return inv / "hosts.yml"


def run(argv, env=None):
    """(wall s, controller CPU s) of one command and everything it started."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def playbook(inventory, cfg, *args):
    env = {"SGLANG_FLEET_LAB_KEY": str(KEY), "PATH": f"{BIN}:/usr/bin:/bin:/usr/sbin:/sbin",
           "ANSIBLE_CONFIG": str(cfg), "HOME": str(pathlib.Path.home())}
    reports = f"{inventory.parent}/reports"  # keep the demo fleet's reports and history clean
    return run([str(BIN / "ansible-playbook"), "-i", str(inventory), "-e", f"sglang_report_dir={reports}", *args],
               env=env)


def host_memory(n):
    """Each lab host's memory use (podman stats of this bench's containers only)."""
    names = [f"{PREFIX}-{h}" for h in hosts(n)]
    out = subprocess.run(["podman", "stats", "--no-stream", "--format", "json", *names], env=PODMAN_ENV,
                         capture_output=True, text=True, check=True).stdout
    return {row["name"]: row["mem_usage"].split("/")[0].strip() for row in json.loads(out or "[]")}


CACHES = "/opt/ml-env/sglang-*/lib/python3*/site-packages/.sglang-fleet-source.pickle"


def source_caches(n, on):
    """Move each host's cached source reading aside (on=False) or back (not timed)."""
    src, dst = ('"$f.off"', '"$f"') if on else ('"$f"', '"$f.off"')
    pattern = CACHES + (".off" if on else "")
    script = f'for f in {pattern}; do [ -e "$f" ] || continue; f="${{f%.off}}"; mv {src} {dst}; done'
    for h in hosts(n):
        subprocess.run(["podman", "exec", f"{PREFIX}-{h}", "sh", "-c", script], env=PODMAN_ENV, check=True,
                       capture_output=True)


def measure(tmp, n, rounds, ping, defaults_cfg, whole=True):
    inventory = write_inventory(tmp, n)
    lab = [str(BIN / "python"), str(REPO / "lab" / "lab.py")]
    ours = REPO / "ansible.cfg"
    rows = []
    try:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False,
                       capture_output=True)
        up, _ = run([*lab, "up", "--inventory", str(inventory), "--prefix", PREFIX])
        playbook(inventory, ours, "lab/prepare.yml")
        first = playbook(inventory, ours, "deploy.yml", "--skip-tags", "sglang_verify",
                         "-e", '{"sglang_rollout_batches": ["100%"]}')
        mem = host_memory(n)
        samples = {k: [] for k in ("drift", "drift_defaults", "drift_defaults_cached", "noop", "noop_whole", "ping",
                                   "ping_defaults")}
        for _ in range(rounds):
            samples["drift"].append(playbook(inventory, ours, "drift.yml"))
            source_caches(n, on=False)
            samples["drift_defaults"].append(playbook(inventory, defaults_cfg, "drift.yml"))
            source_caches(n, on=True)
            samples["drift_defaults_cached"].append(playbook(inventory, defaults_cfg, "drift.yml"))
            samples["noop"].append(playbook(inventory, ours, "deploy.yml", "--skip-tags", "sglang_verify",
                                            "-e", '{"sglang_rollout_batches": ["100%"]}'))
            if whole:
                samples["noop_whole"].append(playbook(inventory, ours, "deploy.yml", "--skip-tags", "sglang_verify",
                                                      "-e", '{"sglang_rollout_batches": ["100%"]}',
                                                      "-e", "sglang_release_skip_unchanged=false"))
            samples["ping"].append(playbook(inventory, ours, str(ping)))
            samples["ping_defaults"].append(playbook(inventory, defaults_cfg, str(ping)))
        rows.append((n, f"lab up ({n} hosts)", [(up, 0.0)]))
        rows.append((n, "first deploy.yml --skip-tags sglang_verify, one batch", [first]))
        rows.append((n, "drift.yml (ansible.cfg)", samples["drift"]))
        rows.append((n, "drift.yml (Ansible defaults, no source cache)", samples["drift_defaults"]))
        rows.append((n, "drift.yml (Ansible defaults, source cache)", samples["drift_defaults_cached"]))
        rows.append((n, "no-op deploy.yml --skip-tags sglang_verify, one batch", samples["noop"]))
        if whole:
            rows.append((n, "the same, the whole deploy (sglang_release_skip_unchanged=false)", samples["noop_whole"]))
        rows.append((n, "bare ping play (ansible.cfg)", samples["ping"]))
        rows.append((n, "bare ping play (Ansible defaults)", samples["ping_defaults"]))
        return rows, mem
    finally:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False,
                       capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--without-whole", action="store_true",
                        help="leave out the whole no-op deploy (sglang_release_skip_unchanged=false), ~4 min per round at 30")
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sglang-scale-"))
    ping = tmp / "ping.yml"
    ping.write_text("- name: Bare ping\n  hosts: sglang_servers\n  gather_facts: false\n"
                    "  tasks:\n    - name: Ping\n      ansible.builtin.ping:\n")
    defaults_cfg = tmp / "defaults.cfg"
    defaults_cfg.write_text(DEFAULTS_CFG.format(repo=REPO))
    rows, mems = [], {}
    try:
        for n in args.sizes:
            got, mem = measure(tmp, n, args.rounds, ping, defaults_cfg, whole=not args.without_whole)
            rows += got
            mems[n] = mem
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("| hosts | what | median wall s | median controller CPU s | CPU s per host | samples (wall/CPU s) |")
    print("|---|---|---|---|---|---|")
    for n, name, samples in rows:
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(f"| {n} | {name} | {wall:.1f} | {cpu:.1f} | {cpu / n:.2f} | "
              f"{', '.join(f'{w:.1f}/{c:.1f}' for w, c in samples)} |")
    medians = {(n, name): statistics.median(s[0] for s in samples) for n, name, samples in rows}
    for n in args.sizes:
        ours = medians[(n, "drift.yml (ansible.cfg)")]
        print(f"\n{n} hosts, drift.yml against ansible.cfg's: Ansible's defaults without the source cache "
              f"{medians[(n, 'drift.yml (Ansible defaults, no source cache)')] / ours:.2f}x, with it "
              f"{medians[(n, 'drift.yml (Ansible defaults, source cache)')] / ours:.2f}x; bare ping, defaults "
              f"against ansible.cfg: {medians[(n, 'bare ping play (Ansible defaults)')] / medians[(n, 'bare ping play (ansible.cfg)')]:.2f}x")
    for n, mem in mems.items():
        print(f"\n{n} hosts, memory per lab host (podman stats): {', '.join(sorted(mem.values()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
