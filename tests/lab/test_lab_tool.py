"""lab/lab.py on a host of its own (10.89.84.0/24, sglang-labtool-*): a container whose process
died behind podman's back (a restarted machine) is reported as stale and recreated by `up`."""

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
