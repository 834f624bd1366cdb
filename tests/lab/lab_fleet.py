"""Lab fleets of their own for end-to-end tests (podman hosts over real SSH).

Each test module starts its own copy of the lab inventory on its own /24 and container
prefix, so tests never touch the demo fleet (sglang-lab) or molecule (sglang-mol), and keep
their reports in a temporary folder so the demo fleet's verify history stays clean.
Needs podman and the lab image (`make lab-image`).
"""

import contextlib
import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

from sglang_fleet import run_playbook

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
KEY = REPO / ".lab" / "ssh" / "id_ed25519"
KNOWN_HOSTS = REPO / ".lab" / "known_hosts"  # lab.py up writes <prefix> here
IMAGE = "localhost/sglang-fleet-lab:bookworm"
# A lab fleet's hosts unless a module names its own: one per SGLang flag layout (eras A, B, C)
LAB_HOSTS = ("ct129", "h200x2", "h200x1")
ENV = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "SGLANG_FLEET_LAB_KEY": str(KEY),
       "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


def run(argv, timeout=600):
    p = subprocess.run([str(a) for a in argv], cwd=REPO, env=ENV, capture_output=True, text=True,
                       timeout=timeout, check=False)
    return p.returncode, p.stdout + p.stderr


class PlayOutput(str):
    """What a play printed (for the messages a user reads), with its per-host results read by
    sglang_fleet's runner from ansible-runner's job events (`hosts`: name -> HostResult)."""

    hosts: dict


def recap(out, host):
    """A host's recap counters: from the job events of a LabFleet.play, else from the PLAY RECAP
    that ansible-playbook printed (plays the tests start themselves)."""
    if isinstance(out, PlayOutput):
        assert host in out.hosts, out
        result = out.hosts[host]
        return {"ok": result.ok, "changed": result.changed, "failed": result.failed,
                "unreachable": result.unreachable}
    m = re.search(rf"^{host}\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out, re.M)
    assert m, out
    return {"ok": int(m.group(1)), "changed": int(m.group(2)), "failed": int(m.group(4)),
            "unreachable": int(m.group(3))}


def unflow(out):
    """The play output with the YAML callback's line folding undone (for substring checks)."""
    return re.sub(r"\s*\n\s+", " ", out)


# verify's benchmark kept light in every module whose subject is not verify itself
# (tests/lab/test_verify_lab.py keeps the lab's defaults)
LIGHT_VERIFY = yaml.safe_load((REPO / "lab" / "light_verify.yml").read_text())
# 3 repeats where a step's figure is judged (regression.yml, tune.yml): their median, steadier under CI
# load (the judge compares run figures with the run-to-run noise: a host's history has one run per
# release there, so verify's prior, 2 %)
STEADY_VERIFY = {**LIGHT_VERIFY, "sglang_verify_repeats": 3}

# The deployed fleets' rollouts: the canary alone, then every other host in one batch. The
# default [1, "25%"] makes three sequential batches of a 3-host lab fleet; the rollouts'
# batch-by-batch behaviour is tested where it is the subject (its tests pass their batches).
# A play keyword (`serial`), so an extra var: group_vars do not reach it.
CANARY_THEN_REST = {"sglang_rollout_batches": [1, "100%"]}


def edit_host_vars(fleet, host, values):
    """Set `values` in the fleet's host_vars/<host>.yml (what a user edits in the inventory)."""
    path = fleet.inventory.parent / "host_vars" / f"{host}.yml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), **values}))


def addresses(group):
    """{host: ansible_host} of every host in an inventory group and the groups under it."""
    found = {name: spec["ansible_host"] for name, spec in (group.get("hosts") or {}).items()
             if spec and "ansible_host" in spec}
    for child in (group.get("children") or {}).values():
        found.update(addresses(child or {}))
    return found


class LabFleet:
    """A running copy of the lab inventory: play(), ssh(), and where its reports go."""

    def __init__(self, inventory, reports, known_hosts, extra_vars=None):
        self.inventory = inventory
        self.extra_vars = extra_vars or {}  # before the test's own -e, which win
        self.reports = reports
        self.known_hosts = known_hosts
        self.ip = addresses(yaml.safe_load(inventory.read_text())["all"])  # ssh() reaches every host

    def play(self, playbook, *args, timeout=900):
        """Run a playbook (relative to the repository) through sglang_fleet's ansible-runner entry
        point: (ansible-playbook's exit status, PlayOutput)."""
        extra = json.dumps({**self.extra_vars, "sglang_report_dir": str(self.reports)})
        with tempfile.TemporaryDirectory(prefix="lab-play-") as artifacts:
            result = run_playbook(str(REPO / playbook), inventory=[str(self.inventory)], args=["-e", extra, *map(str, args)],
                                  artifacts=artifacts, timeout=timeout,
                                  envvars={"SGLANG_FLEET_LAB_KEY": str(KEY), "ANSIBLE_FORCE_COLOR": "0"})
            out = PlayOutput(pathlib.Path(result.artifact_dir, "stdout").read_text(errors="replace"))
        out.hosts = result.hosts
        return result.ansible_rc, out

    def podman(self, *argv, check=True):
        """podman with the lab's containers.conf (test equipment: stop, start or change a host)."""
        p = podman_lab(*argv)
        assert p.returncode == 0 or not check, p.stdout + p.stderr
        return p.stdout

    def ssh_status(self, host, command, timeout=60):
        """(rc, output) of `command` as root on a host, host key checked, not asserted (test
        equipment: the host may be going away)."""
        return run(["ssh", "-i", KEY, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o",
                    f"UserKnownHostsFile={self.known_hosts}", "-o", "ConnectTimeout=2", "-o", "LogLevel=ERROR",
                    f"root@{self.ip[host]}", command], timeout)

    def ssh(self, host, command):
        """Run `command` as root on a host (test equipment: inspect and break it); its output."""
        rc, out = self.ssh_status(host, command)
        assert rc == 0, out
        return out


@contextlib.contextmanager
def lab_fleet(tmp_path, prefix, subnet, hosts=None, group_vars=None, extra_vars=None, extend=None, images=None):
    """Start the lab hosts (LAB_HOSTS, or only `hosts`) on `subnet` (e.g. "10.89.83.") as `prefix`-*,
    with `group_vars` over the lab group's (group_vars/sglang_lab.yml of the copy) and
    `extra_vars` given to every play before the test's own -e. `extend(data, inventory_dir)` may
    add hosts and groups to the copy's inventory (its parsed hosts.yml) before the hosts start;
    `images` ({host: image}) starts those hosts from a snapshot instead of the lab image."""
    if shutil.which("podman") is None:
        pytest.skip("podman not installed (make lab-deps)")
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode:
        pytest.skip("lab image missing (make lab-image)")
    inv = tmp_path / "lab"
    shutil.copytree(REPO / "inventories" / "lab", inv)
    inventory = inv / "hosts.yml"
    data = yaml.safe_load(inventory.read_text())
    servers = data["all"]["children"]["sglang_servers"]
    group = servers["children"]["sglang_lab"]
    group["hosts"] = {name: {"ansible_host": spec["ansible_host"].replace("10.89.77.", subnet),
                             **({"lab_image": images[name]} if name in (images or {}) else {})}
                      for name, spec in group["hosts"].items() if name in (hosts or LAB_HOSTS)}
    group["vars"]["lab_known_hosts"] = str(KNOWN_HOSTS / prefix)
    # the lab servers alone: the demo's router and its replicas' group stay out of the tests' copies
    servers["children"] = {"sglang_lab": group}
    data["all"]["children"] = {"sglang_servers": servers}
    if extend:
        extend(data, inv)
    # keep the inventory's host order: the rollout's batches follow it
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    if group_vars:
        lab_vars = inv / "group_vars" / "sglang_lab.yml"
        lab_vars.write_text(yaml.safe_dump({**yaml.safe_load(lab_vars.read_text()), **group_vars}))
    with lab_hosts(inventory, prefix):
        yield LabFleet(inventory, tmp_path / "reports", KNOWN_HOSTS / prefix, extra_vars)


@contextlib.contextmanager
def lab_hosts(inventory, prefix):
    """`lab.py up` the inventory's hosts as `prefix`-*, and `lab.py down` after, their CPU seconds kept
    first (HOST_CPU_S)."""
    lab_py = [BIN / "python", REPO / "lab" / "lab.py"]
    # generous: `make test` starts several fleets at once next to the unit tests on two cores
    rc, out = run([*lab_py, "up", "--inventory", inventory, "--prefix", prefix, "--no-build", "--timeout", "300"])
    assert rc == 0, out
    LIVE_PREFIXES.add(prefix)
    try:
        yield
    finally:
        HOST_CPU_S[prefix] = containers_cpu_s(prefix)
        LIVE_PREFIXES.discard(prefix)
        DOWN_CPU_S[0] += HOST_CPU_S[prefix]
        run([*lab_py, "down", "--inventory", inventory, "--prefix", prefix])


# CPU seconds each fleet's hosts used (their containers' cgroups, read before `lab.py down`): what
# tests/lab/conftest.py reports per module and per test beside the controller's share
HOST_CPU_S = {}
LIVE_PREFIXES = set()
DOWN_CPU_S = [0.0]  # all fleets this process took down


def hosts_cpu_s():
    """CPU seconds of every fleet this process started so far: those up, and those already down."""
    return DOWN_CPU_S[0] + sum(containers_cpu_s(prefix) for prefix in LIVE_PREFIXES)


def podman_lab(*argv):
    """podman with the lab's containers.conf, not asserted."""
    return subprocess.run(["podman", *argv], env={**ENV, "CONTAINERS_CONF": str(REPO / ".lab" / "containers.conf")},
                          capture_output=True, text=True, check=False)


def containers_cpu_s(prefix):
    """CPU seconds used by the containers named `prefix`-* so far (cgroup v1 cpuacct or v2 cpu.stat);
    0 for one whose cgroup cannot be read."""
    out = podman_lab("ps", "-a", "--filter", f"name=^{prefix}-", "--format", "{{.ID}}", "--no-trunc").stdout.split()
    total = 0.0
    for cid in out:
        for path, scale in ((f"/sys/fs/cgroup/cpuacct/libpod_parent/libpod-{cid}/cpuacct.usage", 1e-9),
                            (f"/sys/fs/cgroup/libpod_parent/libpod-{cid}/cpu.stat", 1e-6)):
            with contextlib.suppress(OSError, ValueError, IndexError):
                text = pathlib.Path(path).read_text()
                total += scale * float(text.split()[1] if text.startswith("usage_usec") else text)
                break
    return total


# Modules that deploy the same hosts the same way share that state (#41): the first to ask deploys it
# and leaves a snapshot (each host's container committed as an image, the controller's reports copied);
# the others start their hosts from it. One test run's snapshots (SGLANG_FLEET_SNAPSHOT_RUN, set by
# tests/conftest.py before pytest-xdist starts its workers) are removed at its end; a run never sees
# another's, nor an older tree's.
SNAPSHOTS = REPO / ".lab" / "snapshots"
SNAPSHOT_IMAGE = "localhost/sglang-fleet-snapshot"
SNAPSHOT_USE = {}  # prefix -> how its deployed fleet began (tests/lab/conftest.py reports it)


def snapshot_run():
    """This test run's id (a run without tests/conftest.py's, e.g. a script: one of its own)."""
    return os.environ.setdefault("SGLANG_FLEET_SNAPSHOT_RUN", os.urandom(6).hex())


def snapshot_key(hosts, group_vars, deploy_args):
    """What a deployed fleet's state is made of: its hosts, the group_vars over the lab's, deploy.yml's arguments."""
    spec = json.dumps([sorted(hosts), group_vars, list(deploy_args)], sort_keys=True)
    return f"{snapshot_run()}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"


@contextlib.contextmanager
def snapshot_lock(key):
    """One module at a time makes or reads the snapshot `key` (the others wait for it)."""
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    with open(SNAPSHOTS / f"{key}.lock", "w", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def snapshot_images(key, hosts):
    """{host: image} of snapshot `key`, or {} unless every host has one (and its reports were kept)."""
    images = {host: f"{SNAPSHOT_IMAGE}:{key}-{host}" for host in hosts}
    kept = (SNAPSHOTS / key / "reports").is_dir() and all(
        podman_lab("image", "exists", image).returncode == 0 for image in images.values())
    return images if kept else {}


def take_snapshot(fleet, key, prefix, hosts):
    """Commit each host's container (files only: /run and the mounted key are not in it) and copy the reports."""
    for host in hosts:
        fleet.podman("commit", "--quiet", f"{prefix}-{host}", f"{SNAPSHOT_IMAGE}:{key}-{host}")
    shutil.copytree(fleet.reports, SNAPSHOTS / key / "reports")


def start_from_snapshot(fleet, key, hosts):
    """The snapshot's reports in the fleet's folder; each host's server up again (PID 1 starts its units)."""
    shutil.copytree(SNAPSHOTS / key / "reports", fleet.reports, dirs_exist_ok=True)
    for host in hosts:
        rc, out = fleet.ssh_status(host, "for i in $(seq 300); do curl -sf -o /dev/null "
                                         "http://127.0.0.1:30000/health && exit 0; sleep 0.2; done; exit 1", timeout=120)
        assert rc == 0, f"{host}: the server of its snapshot did not answer /health within 60 s: {out}"


def remove_snapshots(run):
    """Remove the snapshot images and folders of test run `run`."""
    tags = podman_lab("images", "--format", "{{.Repository}}:{{.Tag}}",
                      "--filter", f"reference={SNAPSHOT_IMAGE}:{run}-*").stdout.split()
    if tags:
        podman_lab("rmi", "--force", *tags)
    for path in SNAPSHOTS.glob(f"{run}-*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()


@contextlib.contextmanager
def deployed_lab_fleet(tmp_path, prefix, subnet, hosts=None, deploy_args=(), group_vars=None, shared=False):
    """lab_fleet(), then lab/prepare.yml and deploy.yml (with `deploy_args`) on it, every host in
    one batch (the rollout's batches are tests/lab/test_rollout_lab.py's subject, not the setup's);
    verify's benchmark is LIGHT_VERIFY unless `group_vars` says otherwise. Later deploys roll out
    in two batches, the canary then the rest (CANARY_THEN_REST), unless a test passes its own.
    `shared`: another module deploys the same fleet (snapshot_key): the first of them to ask deploys it
    and takes a snapshot, the other starts from it."""
    hosts, group_vars = tuple(hosts or LAB_HOSTS), {**LIGHT_VERIFY, **(group_vars or {})}
    key = snapshot_key(hosts, group_vars, deploy_args)
    with contextlib.ExitStack() as stack:
        with snapshot_lock(key) if shared else contextlib.nullcontext():
            images = snapshot_images(key, hosts) if shared else {}
            fleet = stack.enter_context(lab_fleet(tmp_path, prefix, subnet, hosts, group_vars, CANARY_THEN_REST,
                                                  images=images))
            if images:
                start_from_snapshot(fleet, key, hosts)
                SNAPSHOT_USE[prefix] = "started from a snapshot"
            else:
                for playbook, args in (("lab/prepare.yml", ()),
                                       ("deploy.yml", ("-e", '{"sglang_rollout_batches": ["100%"]}', *deploy_args))):
                    rc, out = fleet.play(playbook, *args)
                    assert rc == 0, out
                if shared:
                    take_snapshot(fleet, key, prefix, hosts)
                    SNAPSHOT_USE[prefix] = "deployed, snapshot taken"
        yield fleet
