"""The sglang unit, rendered through the role's template and the project's filters, judged by the
real systemd-analyze: exposure at most 2.5 with the GPU devices allowed, and `verify` clean.

Skipped where systemd-analyze is absent; `--offline=true` needs no running systemd."""

import json
import os
import subprocess
import sys
from pathlib import Path

from systemd_analyze import ANALYZE, exposure, needs_analyze

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_service"

PLAY = """\
- name: Render the sglang unit as the role does
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {repo}/group_vars/all/sglang.yml
    - {role}/defaults/main.yml
    - {role}/vars/main.yml
  tasks:
    - name: Render the unit as the role does (sglang_service's unit task, sglang_common's template)
      ansible.builtin.import_role:
        name: sglang_service
        tasks_from: unit
"""


def render(tmp_path, **variables):
    """The unit file the role writes for these variables (over defaults), at tmp_path/sglang.service.

    The venv is a folder with bin/python -> this Python, so `systemd-analyze verify` finds ExecStart's binary."""
    venv = fake_venv(tmp_path / "venv")
    unit = tmp_path / "sglang.service"
    play(tmp_path / "render.yml", PLAY.format(repo=REPO, role=ROLE), "localhost,",
         {"_sglang_service_unit_file": str(unit), "_sglang_service_env_file": str(tmp_path / "sglang.env"),
          "ansible_python_interpreter": sys.executable, "sglang_service_venv": str(venv),
          "sglang_args": {"model_path": "/models/Qwen3-27B", "tp_size": 2}, **variables})
    return unit


def fake_venv(venv):
    """A folder with bin/python -> this Python (what ExecStart names must exist for systemd-analyze)."""
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    if not (venv / "bin" / "python").exists():
        (venv / "bin" / "python").symlink_to(sys.executable)
    return venv


def play(path, text, inventory, extra):
    """ansible-playbook `text` (written to `path`) with the repo's ansible.cfg; fails the test on rc != 0."""
    path.write_text(text)
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", inventory, str(path),
                           "-e", json.dumps(extra)], cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_analyze
def test_rendered_unit_exposure_is_at_most_2_5_and_verify_is_clean(tmp_path):
    unit = render(tmp_path, sglang_service_log_file="/var/log/sglang/sglang.log")
    lines = unit.read_text().splitlines()
    # the GPU device nodes stay reachable, nothing else is writable but the service home
    for line in ("DevicePolicy=closed", "DeviceAllow=char-nvidia* rw", "ProtectSystem=strict",
                 "ReadWritePaths=/var/lib/sglang", "CapabilityBoundingSet=", "NoNewPrivileges=yes",
                 "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK"):
        assert line in lines, line
    # allow list first, then what is taken out of it: the order systemd reads them in
    filters = [line for line in lines if line.startswith("SystemCallFilter=")]
    assert filters == ["SystemCallFilter=@system-service pidfd_getfd", "SystemCallFilter=~@privileged"]
    assert not any(line.startswith(("MemoryDenyWriteExecute=", "PrivateDevices=")) for line in lines)
    assert exposure(unit) <= 2.5
    proc = subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


@needs_analyze
def test_exposure_measures_the_hardening(tmp_path):
    """Without the role's hardening the same unit is rated EXPOSED: the score above is the hardening's."""
    assert exposure(render(tmp_path, sglang_service_hardening={})) > 9.0


def test_list_values_render_one_line_each(tmp_path):
    unit = render(tmp_path, sglang_service_unit_extra={"ReadWritePaths": ["/data/hf", "/data/triton"],
                                                       "LimitMEMLOCK": "infinity"})
    lines = unit.read_text().splitlines()
    assert [line for line in lines if line.startswith("ReadWritePaths=")] == [
        "ReadWritePaths=/var/lib/sglang", "ReadWritePaths=/data/hf", "ReadWritePaths=/data/triton"]
    assert "LimitMEMLOCK=infinity" in lines


ROUTER = REPO / "roles" / "sglang_router"
ROUTER_PLAY = """\
- name: Render the router's unit as the role does
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {role}/defaults/main.yml
    - {role}/vars/main.yml
  tasks:
    - name: Render the unit (sglang_router's unit task, sglang_common's template)
      ansible.builtin.import_role:
        name: sglang_router
        tasks_from: unit
"""


def render_router(tmp_path, **variables):
    """The router's unit for two workers (over the role's defaults), at tmp_path/sglang-router.service."""
    venv = fake_venv(tmp_path / "router-venv")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"sglang_servers": {"hosts": {
        "rep1": {"ansible_host": "10.0.0.11"}, "rep2": {"ansible_host": "10.0.0.12"}}}},
        "hosts": {"localhost": {"ansible_connection": "local"}}}}))
    unit = tmp_path / "sglang-router.service"
    play(tmp_path / "render-router.yml", ROUTER_PLAY.format(role=ROUTER), str(inventory),
         {"_sglang_router_unit_file": str(unit), "_sglang_router_env_file": str(tmp_path / "router.env"),
          "_sglang_router_venv": str(venv), "ansible_python_interpreter": sys.executable,
          "sglang_router_version": "0.3.2", **variables})
    return unit


@needs_analyze
def test_the_router_unit_is_a_hardened_cpu_only_service(tmp_path):
    """The same unit template as the server's, with the router's hardening (data in its defaults):
    no devices at all, and a lower exposure than the server's, which needs the GPUs."""
    unit = render_router(tmp_path)
    lines = unit.read_text().splitlines()
    for line in ("PrivateDevices=yes", "DevicePolicy=closed", "ProtectHome=yes", "CapabilityBoundingSet=",
                 "ReadWritePaths=/var/lib/sglang-router", "RestartSec=5", "TimeoutStopSec=30"):
        assert line in lines, line
    assert not any(line.startswith(("DeviceAllow=", "TimeoutStartSec=")) for line in lines)
    assert "--worker-urls http://10.0.0.11:30000 http://10.0.0.12:30000" in unit.read_text()
    assert exposure(unit) <= 2.0
    proc = subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")
    assert exposure(render_router(tmp_path, sglang_router_hardening={})) > 9.0
