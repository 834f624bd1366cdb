#!/usr/bin/env python3
"""Deploy timings on the lab, measured side by side in one run (issue 2's benchmark).

    .venv/bin/python bench/deploy_bench.py [--rounds 3]

Starts its own three lab hosts (prefix sglang-bench, 10.89.81.0/24, same host_vars as the
lab fleet), then measures:
  1. the first deploy.yml of the fleet (controller wheel cache warm, hosts fresh);
  2. a no-op re-deploy against a bare `ping` play, interleaved, `--rounds` times each;
  3. building one ml-env venv from the same lock with uv and with pip, interleaved on one host.
Prints a markdown table of medians (and every sample) and removes its hosts.
"""

import argparse
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
PREFIX = "sglang-bench"
HOSTS = {"ct129": "10.89.81.11", "h200x2": "10.89.81.12", "h200x1": "10.89.81.13"}
KEY = REPO / ".lab" / "ssh" / "id_ed25519"
KNOWN_HOSTS = REPO / ".lab" / "known_hosts" / PREFIX  # written by `lab.py up --prefix sglang-bench`
SSH = ["ssh", "-i", str(KEY), "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={KNOWN_HOSTS}",
       "-o", "LogLevel=ERROR", "-o", "BatchMode=yes"]


def write_inventory(tmp):
    inv = tmp / "inventories" / "bench"
    inv.mkdir(parents=True)
    hosts = "\n".join(f"            {h}:\n              ansible_host: {ip}" for h, ip in HOSTS.items())
    (inv / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_servers:\n      children:\n        sglang_lab:\n          hosts:\n"
        + hosts + f"\n          vars:\n            lab_known_hosts: {KNOWN_HOSTS}\n")
    for sub in ("group_vars", "host_vars"):
        (inv / sub).symlink_to(REPO / "inventories" / "lab" / sub)
    return inv / "hosts.yml"


def timed(argv, **kw):
    start = time.perf_counter()
    subprocess.run(argv, check=True, cwd=REPO, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def playbook(inventory, *args):
    env = {"SGLANG_FLEET_LAB_KEY": str(KEY), "PATH": f"{BIN}:/usr/bin:/bin:/usr/sbin:/sbin",
           "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "HOME": str(pathlib.Path.home())}
    reports = f"{inventory.parent}/reports"  # keep the demo fleet's history clean
    extra = ["-e", f"sglang_report_dir={reports}"]
    return timed([str(BIN / "ansible-playbook"), "-i", str(inventory), *extra, *args], env=env)


def on_host(ip, script):
    return timed([*SSH, f"root@{ip}", script])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sglang-bench-"))
    inventory = write_inventory(tmp)
    lab = [str(BIN / "python"), str(REPO / "lab" / "lab.py")]
    ping = tmp / "ping.yml"
    ping.write_text("- name: Bare ping\n  hosts: sglang_servers\n  gather_facts: false\n"
                    "  tasks:\n    - name: Ping\n      ansible.builtin.ping:\n")
    rows = []
    try:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False,
                       capture_output=True)
        timed([*lab, "up", "--inventory", str(inventory), "--prefix", PREFIX])
        playbook(inventory, "lab/prepare.yml")
        rows.append(("first deploy.yml, 3 fresh hosts (wheel cache warm)", [playbook(inventory, "deploy.yml")]))
        noop, noop_core, bare = [], [], []
        for _ in range(args.rounds):
            noop.append(playbook(inventory, "deploy.yml"))
            noop_core.append(playbook(inventory, "deploy.yml", "--skip-tags", "sglang_verify"))
            bare.append(playbook(inventory, str(ping)))
        rows.append(("no-op re-deploy.yml, 3 hosts", noop))
        rows.append(("no-op re-deploy.yml --skip-tags sglang_verify, 3 hosts", noop_core))
        rows.append(("bare ping play, 3 hosts", bare))
        lock = "/opt/ml-env/locks/sglang-0.5.11-light.txt"
        common = f"--find-links /opt/ml-env/wheelhouse -r {lock} --no-deps --no-index -q"
        uv_cmd = (f"rm -rf /tmp/b-uv && /opt/ml-env/.tools/uv-0.13.9/bin/uv venv -q --python /usr/bin/python3 /tmp/b-uv"
                  f" && /opt/ml-env/.tools/uv-0.13.9/bin/uv pip install -q --python /tmp/b-uv/bin/python {common}")
        pip_cmd = (f"rm -rf /tmp/b-pip && /usr/bin/python3 -m venv /tmp/b-pip"
                   f" && /tmp/b-pip/bin/pip install --disable-pip-version-check {common}")
        uv, pip = [], []
        for _ in range(args.rounds):
            uv.append(on_host(HOSTS["ct129"], uv_cmd))
            pip.append(on_host(HOSTS["ct129"], pip_cmd))
        rows.append(("ml-env venv, uv (same lock, sglang 0.5.11 light)", uv))
        rows.append(("ml-env venv, pip (same lock, sglang 0.5.11 light)", pip))
    finally:
        subprocess.run([*lab, "down", "--inventory", str(inventory), "--prefix", PREFIX], check=False,
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print("| what | median s | samples s |\n|---|---|---|")
    for name, samples in rows:
        print(f"| {name} | {statistics.median(samples):.1f} | {', '.join(f'{s:.1f}' for s in samples)} |")
    med = {name: statistics.median(s) for name, s in rows}
    print(f"\nno-op deploy / bare ping: {med['no-op re-deploy.yml, 3 hosts'] / med['bare ping play, 3 hosts']:.1f}x; "
          f"pip / uv: {med['ml-env venv, pip (same lock, sglang 0.5.11 light)'] / med['ml-env venv, uv (same lock, sglang 0.5.11 light)']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
