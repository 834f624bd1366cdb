"""lab/lab.py on a host of its own (10.89.84.0/24, sglang-labtool-*): a container whose process
died behind podman's back (a restarted machine) is reported as stale and recreated by `up`; host
keys are written by `up` and checked, and Ansible connects as the unprivileged `fleet`."""

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest
from lab_fleet import BIN, ENV, REPO, lab_fleet, run

pytestmark = pytest.mark.lab

PODMAN_ENV = {**ENV, "CONTAINERS_CONF": str(REPO / ".lab" / "containers.conf")}


def inspect(name):
    p = subprocess.run(["podman", "container", "inspect", name], env=PODMAN_ENV, capture_output=True, text=True,
                       check=True)
    return json.loads(p.stdout)[0]["State"]


def kill_behind_podmans_back(name):
    """What a reboot leaves: podman says running, but neither conmon nor the container process exists."""
    state = inspect(name)
    os.kill(state["ConmonPid"], signal.SIGKILL)
    os.kill(state["Pid"], signal.SIGKILL)
    for _ in range(50):  # until it is gone or a zombie
        stat = pathlib.Path(f"/proc/{state['Pid']}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.1)
    assert inspect(name)["Status"] == "running"  # podman has not noticed


def test_stale_container_is_recreated_by_up_and_removed_by_down(tmp_path):
    name = "sglang-labtool-ct129"
    with lab_fleet(tmp_path, "sglang-labtool", "10.89.84.", hosts=["ct129"]) as fleet:
        lab_py = [BIN / "python", REPO / "lab" / "lab.py"]
        args = ["--inventory", fleet.inventory, "--prefix", "sglang-labtool"]
        kill_behind_podmans_back(name)
        rc, out = run([*lab_py, "status", *args])
        assert rc == 3 and f"{name}  stale" in out, out
        rc, out = run([*lab_py, "up", *args, "--no-build"])
        assert rc == 0, out
        assert f"lab: removed {name} (podman said running, but its process is gone); creating it again" in out
        assert fleet.ssh("ct129", "hostname").strip() == "ct129"
        kill_behind_podmans_back(name)
        rc, out = run([*lab_py, "down", *args])
        assert rc == 0 and f"lab: removed {name}" in out, out
        assert subprocess.run(["podman", "container", "exists", name], env=PODMAN_ENV, check=False).returncode == 1


def ansible(fleet, tmp_path, *args):
    """An ad-hoc command on ct129 through the fleet's inventory and ansible.cfg, on an SSH
    connection of its own (a fresh ControlPath dir: a running master would skip the key check)."""
    control = tmp_path / f"cp{len(list(tmp_path.glob('cp*')))}"
    control.mkdir()
    p = subprocess.run([str(BIN / "ansible"), "-i", str(fleet.inventory), "ct129", *args], cwd=REPO,
                       env={**ENV, "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control)}, capture_output=True, text=True,
                       timeout=120, check=False)
    return p.returncode, p.stdout + p.stderr


def test_host_keys_are_written_by_up_and_checked(tmp_path):
    name = "sglang-labtool-ct129"
    with lab_fleet(tmp_path, "sglang-labtool", "10.89.84.", hosts=["ct129"]) as fleet:
        key = subprocess.run(["podman", "exec", name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"], env=PODMAN_ENV,
                             capture_output=True, text=True, check=True).stdout.split()[:2]
        assert fleet.known_hosts == REPO / ".lab" / "known_hosts" / "sglang-labtool"
        assert fleet.known_hosts.read_text() == f"10.89.84.11 {key[0]} {key[1]}\n"

        # Ansible connects as the unprivileged operator and is root only with become.
        rc, out = ansible(fleet, tmp_path, "-m", "ansible.builtin.command", "-a", "id -un")
        assert rc == 0 and out.splitlines()[-1] == "fleet", out
        rc, out = ansible(fleet, tmp_path, "--become", "-m", "ansible.builtin.command", "-a", "id -un")
        assert rc == 0 and out.splitlines()[-1] == "root", out

        # ansible.cfg's StrictHostKeyChecking=yes: an unknown host and a changed key are refused.
        unknown = tmp_path / "unknown_hosts"
        unknown.write_text("")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
        other = (tmp_path / "other.pub").read_text().split()[:2]
        changed = tmp_path / "changed_hosts"
        changed.write_text(f"10.89.84.11 {other[0]} {other[1]}\n")
        for known_hosts, why in (
            (unknown, "No ED25519 host key is known for 10.89.84.11 and you have requested strict checking."),
            (changed, "Host key for 10.89.84.11 has changed and you have requested strict checking."),
        ):
            rc, out = ansible(fleet, tmp_path, "-e", f"lab_known_hosts={known_hosts}", "-m", "ansible.builtin.ping")
            assert rc == 4, out
            assert "ct129 | UNREACHABLE!" in out and why in out and "Host key verification failed." in out, out

        # A recreated container has a new host key: `up` writes it, and SSH checks against it.
        subprocess.run(["podman", "rm", "--force", "--time", "0", name], env=PODMAN_ENV, capture_output=True,
                       check=True)
        rc, out = run([BIN / "python", REPO / "lab" / "lab.py", "up", "--inventory", fleet.inventory, "--prefix",
                       "sglang-labtool", "--no-build"])
        assert rc == 0, out
        new_key = fleet.known_hosts.read_text().split()
        assert new_key[0] == "10.89.84.11" and new_key[2] != key[1], new_key
        assert fleet.ssh("ct129", "hostname").strip() == "ct129"
    assert not fleet.known_hosts.exists()  # `down` removes it
