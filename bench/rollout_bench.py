#!/usr/bin/env python3
"""Rollouts on a 6-host lab fleet, batched against all at once, side by side in one run (issue 8).

    .venv/bin/python bench/rollout_bench.py [--rounds 2] [--load-s 4]

Starts its own six lab hosts (prefix sglang-rollbench, 10.89.101.0/24: two of each lab host,
same host_vars), deploys them, then per round rolls a new release out to the whole fleet twice,
interleaved: all at once (`sglang_rollout_batches: ["100%"]`) and in batches (the default, a
canary then 25 %). The new release differs by its unit's environment and takes `--load-s`
seconds to load (the simulator's slow_start_s), as a real model load does, only longer in
proportion. A sampler on every host asks its own `/health_generate` every 0.2 s during the
rollout; the table gives the wall time and the fewest hosts serving at any moment.

Then, per round, the time from a failed gate to the last known good release serving again: a
release 50 % slower (degrade_factor 0.5) on one host fails verify's floor and last-known-good
gates and is rolled back; measured from the failed release's record (written the moment the
rescue starts, 1 s resolution) to the first 200 of `/health_generate` after the rollback's
restart, and to the end of the play (rolled back, waited for and verified).
"""

import argparse
import datetime
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
PREFIX = "sglang-rollbench"
SUBNET = "10.89.101."
LAB_HOSTS = ("ct129", "h200x2", "h200x1")
HOSTS = {f"{h}{suffix}": f"{SUBNET}{11 + 3 * i + j}" for i, suffix in enumerate(("", "b"))
         for j, h in enumerate(LAB_HOSTS)}
KEY = REPO / ".lab" / "ssh" / "id_ed25519"
KNOWN_HOSTS = REPO / ".lab" / "known_hosts" / PREFIX
SSH = ["ssh", "-i", str(KEY), "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={KNOWN_HOSTS}",
       "-o", "LogLevel=ERROR", "-o", "BatchMode=yes"]
SAMPLER = ("while true; do printf '%s %s\\n' \"$(date +%s.%N)\" \"$(curl -s -o /dev/null -m 1 -w '%{http_code}' "
           "http://127.0.0.1:30000/health_generate)\"; sleep 0.2; done")
SIM_CONFIG = {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json"}
# verify's benchmark kept light (as in the lab tests): what is measured here is the rollout
# around it, and every deploy below still verifies each host it changes
LIGHT_VERIFY = f"@{REPO / 'lab' / 'light_verify.yml'}"


def write_inventory(tmp):
    inv = tmp / "inventories" / "rollbench"
    (inv / "host_vars").mkdir(parents=True)
    hosts = "\n".join(f"            {h}:\n              ansible_host: {ip}" for h, ip in HOSTS.items())
    (inv / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_servers:\n      children:\n        sglang_lab:\n          hosts:\n"
        + hosts + f"\n          vars:\n            lab_known_hosts: {KNOWN_HOSTS}\n")
    (inv / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
    for host in HOSTS:
        shutil.copy(REPO / "inventories" / "lab" / "host_vars" / f"{host.rstrip('b')}.yml", inv / "host_vars" / f"{host}.yml")
    return inv / "hosts.yml"


def playbook(inventory, *args, check=True):
    env = {"SGLANG_FLEET_LAB_KEY": str(KEY), "PATH": f"{BIN}:/usr/bin:/bin:/usr/sbin:/sbin",
           "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "HOME": str(pathlib.Path.home())}
    reports = f"{inventory.parent}/reports"  # keep the demo fleet's history clean
    extra = ["-e", f"sglang_report_dir={reports}", "-e", LIGHT_VERIFY]
    start = time.time()
    p = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), *extra, *args], cwd=REPO, env=env,
                       capture_output=True, text=True, check=False)
    if check and p.returncode:
        sys.exit(f"ansible-playbook {' '.join(args)} failed:\n{p.stdout[-4000:]}{p.stderr[-2000:]}")
    return start, time.time(), p


class Samplers:
    """One ssh per host printing `<epoch> <http code>` of its own /health_generate every 0.2 s."""

    def __init__(self):
        self.samples = {h: [] for h in HOSTS}
        self.procs = []

    def __enter__(self):
        for host, ip in HOSTS.items():
            proc = subprocess.Popen([*SSH, f"root@{ip}", SAMPLER], stdout=subprocess.PIPE, text=True)
            self.procs.append(proc)
            threading.Thread(target=self._read, args=(host, proc), daemon=True).start()
        time.sleep(2)
        return self

    def _read(self, host, proc):
        for line in proc.stdout:
            stamp, _, code = line.strip().partition(" ")
            try:
                self.samples[host].append((float(stamp), code == "200"))
            except ValueError:
                continue

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()

    def min_serving(self, start, end, step=0.2):
        """Fewest hosts whose latest sample at t says 200, over t in [start, end]."""
        fewest, t = len(HOSTS), start
        while t <= end:
            up = 0
            for rows in self.samples.values():
                last = [ok for stamp, ok in rows if stamp <= t]
                up += bool(last and last[-1])
            fewest = min(fewest, up)
            t += step
        return fewest

    def back_up(self, host, after):
        """First time after `after` that `host` answers 200 following a non-200 (its restart)."""
        down = False
        for stamp, ok in self.samples[host]:
            if stamp < after:
                continue
            down |= not ok
            if down and ok:
                return stamp
        return None


def release_env(**faults):
    knobs = ",".join(f"{k}={v}" for k, v in sorted(faults.items()))
    return json.dumps({"sglang_service_environment": {**SIM_CONFIG, "SGLANG_SIM_FAULTS": knobs}})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--load-s", type=float, default=4)
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sglang-rollbench-"))
    inventory = write_inventory(tmp)
    lab = [str(BIN / "python"), str(REPO / "lab" / "lab.py")]
    rollouts = {"all at once": ([], []), "batched [1, 25%]": ([], [])}
    rollback = ([], [])
    try:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False, capture_output=True)
        subprocess.run([*lab, "up", "--inventory", str(inventory), "--prefix", PREFIX, "--no-build"], check=True,
                       capture_output=True)
        playbook(inventory, "lab/prepare.yml")
        playbook(inventory, "deploy.yml", "-e", '{"sglang_rollout_batches": ["100%"]}')
        variant = 0
        for _ in range(args.rounds):
            for name, batches in (("all at once", ["100%"]), ("batched [1, 25%]", [1, "25%"])):
                variant += 1  # every rollout is a new release: another unit environment
                env = release_env(slow_start_s=args.load_s, degrade_factor=1.0 - variant / 1000)
                with Samplers() as samplers:
                    start, end, _ = playbook(inventory, "deploy.yml", "-e", env,
                                             "-e", json.dumps({"sglang_rollout_batches": batches}))
                rollouts[name][0].append(end - start)
                rollouts[name][1].append(samplers.min_serving(start, end))
            with Samplers() as samplers:
                # a new failed release each round (its record's time is the gate's failure)
                start, end, p = playbook(inventory, "deploy.yml", "-l", "ct129", "-e",
                                         release_env(degrade_factor=0.5 - variant / 1000), check=False)
            if "rolled back to" not in p.stdout:
                sys.exit(f"the degraded release was not rolled back:\n{p.stdout[-4000:]}")
            rid = subprocess.run([*SSH, f"root@{HOSTS['ct129']}", "grep -l '\"status\": \"failed\"' "
                                  "/var/lib/sglang-fleet/releases/*/release.json | xargs ls -t | head -1 | xargs cat"],
                                 capture_output=True, text=True, check=True).stdout
            failed_at = datetime.datetime.strptime(json.loads(rid)["recorded_at"], "%Y%m%dT%H%M%SZ").replace(
                tzinfo=datetime.UTC).timestamp()
            serving = samplers.back_up("ct129", failed_at)
            rollback[0].append(serving - failed_at if serving else float("nan"))
            rollback[1].append(end - failed_at)
    finally:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False,
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"6 lab hosts, new release loading {args.load_s:g} s, {args.rounds} rounds (interleaved)\n")
    print("| rollout | wall s (median) | samples s | fewest hosts serving (min over rounds) | per round |\n|---|---|---|---|---|")
    for name, (walls, mins) in rollouts.items():
        print(f"| {name} | {statistics.median(walls):.1f} | {', '.join(f'{w:.1f}' for w in walls)} | "
              f"{min(mins)} of {len(HOSTS)} | {', '.join(map(str, mins))} |")
    print("\n| failed gate -> | median s | samples s |\n|---|---|---|")
    print(f"| last known good answers /health_generate | {statistics.median(rollback[0]):.1f} | "
          f"{', '.join(f'{s:.1f}' for s in rollback[0])} |")
    print(f"| play ends (rolled back, waited for, verified) | {statistics.median(rollback[1]):.1f} | "
          f"{', '.join(f'{s:.1f}' for s in rollback[1])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
