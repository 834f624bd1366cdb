#!/usr/bin/env python3
"""Model staging (issue 26): bytes and time of a first staging, a no-op re-run and a new revision,
the rate against rsync's bandwidth limit, and a rollout's downtime with and without pre-staging.

    .venv/bin/python bench/model_staging.py [--rounds 3] [--bwlimit 20M]

Starts its own lab hub (lab/hub, olah behind its front: sglang-lab/bulk-model, ~268 MB in shards,
two commits; the second changes one 67 MB shard and config.json) and its own lab host (a copy of
h200x1s, prefix sglang-modelbench, 10.89.113.0/24). Every deploy stages with
`sglang_model_stage_bwlimit` set to the stated link speed (on the local container network a copy is
nearly free, which would hide what staging costs).

Downtime is the gap in the host's own /health_generate (asked every 0.2 s over ssh) while deploy.yml
moves it to the other revision, which is first removed from the host so that it has to be staged:
- with pre-staging: deploy.yml as it is (the revision is staged while the old release serves);
- without: the same deploy.yml, but the service is stopped the moment the copy starts (the revision's
  folder appears on the host): the host is down from the copy's start until the new release serves,
  as when a model is copied after the old server is stopped.
Both orders alternate in each round; the table gives medians.
"""

import argparse
import json
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
PREFIX, SUBNET, HOST = "sglang-modelbench", "10.89.113.", "h200x1s"
KEY = REPO / ".lab" / "ssh" / "id_ed25519"
KNOWN_HOSTS = REPO / ".lab" / "known_hosts" / PREFIX
SSH = ["ssh", "-i", str(KEY), "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={KNOWN_HOSTS}",
       "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", f"root@{SUBNET}16"]
ROOT = "/var/lib/sglang-fleet/models/sglang-lab--bulk-model"
STAGED = re.compile(r"h200x1s: \S+: (\d+) files, ([\d.]+) MB sent in ([\d.]+) s")
SAMPLER = ("while true; do printf '%s %s\\n' \"$(date +%s.%N)\" \"$(curl -s -o /dev/null -m 1 -w '%{http_code}' "
           "http://127.0.0.1:30000/health_generate)\"; sleep 0.2; done")


def rate_of(bwlimit):
    """rsync's --bwlimit in bytes/s (its units: KiB, or a K/M/G suffix of 1024s)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)", bwlimit.upper())
    return float(m.group(1)) * 1024 ** {"": 1, "K": 1, "M": 2, "G": 3}[m.group(2)]


def write_inventory(tmp, endpoint):
    inv = tmp / "inventory"
    (inv / "host_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_servers:\n      children:\n        sglang_lab:\n          hosts:\n"
        f"            {HOST}:\n              ansible_host: {SUBNET}16\n"
        f"          vars:\n            lab_known_hosts: {KNOWN_HOSTS}\n")
    (inv / "group_vars").symlink_to(REPO / "inventories" / "lab" / "group_vars")
    shutil.copy(REPO / "inventories" / "lab" / "host_vars" / f"{HOST}.yml", inv / "host_vars" / f"{HOST}.yml")
    shutil.copytree(REPO / "inventories" / "lab" / "model-locks", inv / "model-locks")
    return inv / "hosts.yml"


def play(inventory, tmp, endpoint, *args):
    env = {"SGLANG_FLEET_LAB_KEY": str(KEY), "PATH": f"{BIN}:/usr/bin:/bin:/usr/sbin:/sbin",
           "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "HOME": str(pathlib.Path.home())}
    extra = ["-e", f"sglang_report_dir={tmp}/reports", "-e", f"@{REPO / 'lab' / 'light_verify.yml'}",
             "-e", f"sglang_model_endpoint={endpoint}", "-e", f"sglang_model_cache_dir={tmp}/cache"]
    p = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), *extra, *args], cwd=REPO, env=env,
                       capture_output=True, text=True, check=False)
    if p.returncode:
        sys.exit(f"ansible-playbook {' '.join(args)} failed:\n{p.stdout[-6000:]}{p.stderr[-2000:]}")
    return re.sub(r"\s*\n\s+", " ", p.stdout)


def staged(out):
    m = STAGED.search(out)
    return {"files": int(m.group(1)), "mb": float(m.group(2)), "s": float(m.group(3))}


def model(revision):
    return json.dumps({"sglang_model": {"repo": "sglang-lab/bulk-model", "revision": revision,
                                        "files": ["*.json", "*.safetensors"]}})


def stop_when_staging(folder):
    """Stop the service as soon as rsync creates the revision's folder on the host (--mkpath)."""
    subprocess.run([*SSH, f"while [ ! -d {folder} ]; do sleep 0.1; done; systemctl stop sglang"], check=True,
                   timeout=600)


def downtime(run):
    """Seconds /health_generate did not answer 200 while run() ran (samples every ~0.2 s)."""
    samples = []
    proc = subprocess.Popen([*SSH, SAMPLER], stdout=subprocess.PIPE, text=True)

    def read():
        for line in proc.stdout:
            stamp, _, code = line.strip().partition(" ")
            samples.append((float(stamp), code == "200"))
    threading.Thread(target=read, daemon=True).start()
    time.sleep(1.5)
    out = run()
    time.sleep(1.5)
    proc.kill()
    down, last = 0.0, None
    for stamp, ok in samples:
        if last is not None and not last[1]:
            down += stamp - last[0]
        last = (stamp, ok)
    return down, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bwlimit", default="20M", help="rsync's --bwlimit for every staging (default 20M = 20 MiB/s)")
    args = parser.parse_args()
    limit = rate_of(args.bwlimit)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="modelbench-"))
    hub_py = [str(BIN / "python"), str(REPO / "lab" / "hub" / "hub.py")]
    subprocess.run([*hub_py, "up", "--dir", str(tmp / "hub"), "--port", "0"], check=True, capture_output=True)
    hub = json.loads((tmp / "hub" / "hub.json").read_text())
    rev1, rev2 = hub["repos"]["sglang-lab/bulk-model"]
    inventory = write_inventory(tmp, hub["endpoint"])
    lab = [str(BIN / "python"), str(REPO / "lab" / "lab.py")]
    subprocess.run([*lab, "up", "--inventory", str(inventory), "--prefix", PREFIX, "--no-build"], check=True,
                   capture_output=True)
    limited = ("-e", f"sglang_model_stage_bwlimit={args.bwlimit}")
    rows = {"first": [], "noop": [], "new": []}
    down = {"with": [], "without": []}
    try:
        play(inventory, tmp, hub["endpoint"], "lab/prepare.yml")
        rows["first"].append(staged(play(inventory, tmp, hub["endpoint"], "deploy.yml", *limited)))
        for _ in range(args.rounds):
            rows["noop"].append(staged(play(inventory, tmp, hub["endpoint"], "deploy.yml", *limited,
                                            "-e", "sglang_release_skip_unchanged=false")))
            for order in ("with", "without"):
                for target in (rev2, rev1):
                    subprocess.run([*SSH, f"rm -rf {ROOT}/{target}"], check=True)

                    def deploy(target=target, order=order):
                        if order == "without":   # stop the service the moment the copy starts
                            threading.Thread(target=stop_when_staging, args=(f"{ROOT}/{target}",), daemon=True).start()
                        return play(inventory, tmp, hub["endpoint"], "deploy.yml", *limited, "-e", model(target))
                    gap, out = downtime(deploy)
                    down[order].append(gap)
                    rows["new"].append(staged(out))
    finally:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False, capture_output=True)
        subprocess.run([*hub_py, "down", "--dir", str(tmp / "hub")], check=False, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"bwlimit {args.bwlimit} = {limit / 1e6:.1f} MB/s; medians of {args.rounds} rounds\n")
    print("| staging | files | MB sent | seconds | MB/s | of the limit |\n|---|---|---|---|---|---|")
    for name, label in (("first", "first (nothing on the host)"), ("noop", "re-run (the revision is there)"),
                        ("new", "the other revision (one shard + config.json differ; the rest linked)")):
        r = rows[name]
        mb, s = statistics.median(x["mb"] for x in r), statistics.median(x["s"] for x in r)
        rate = mb / s if mb and s else 0.0
        print(f"| {label} | {statistics.median(x['files'] for x in r):g} | {mb:.1f} | {s:.2f} | {rate:.1f} | "
              f"{rate * 1e6 / limit:.0%} |" if mb else f"| {label} | 0 | 0.0 | {s:.2f} | - | - |")
    print("\n| rollout to a revision the host lacks | downtime (s), median | runs |\n|---|---|---|")
    for order, label in (("with", "pre-staged while the old release serves (deploy.yml)"),
                         ("without", "staged after the stop (copy, then restart)")):
        print(f"| {label} | {statistics.median(down[order]):.1f} | {', '.join(f'{x:.1f}' for x in down[order])} |")


if __name__ == "__main__":
    main()
