"""scripts/fleet_schedule.py, the scheduled job of roles/sglang_schedule, running real playbooks through
ansible-runner on the controller (tests/fixtures/schedule: stand-ins for drift.yml on two local hosts)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from systemd_analyze import ANALYZE, exposure, needs_analyze

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "schedule"


def schedule(tmp_path, *playbooks):
    textfile = tmp_path / "textfile"
    textfile.mkdir(exist_ok=True)
    cmd = [sys.executable, str(REPO / "scripts" / "fleet_schedule.py"), "-i", str(FIXTURES / "hosts.yml"),
           "--reports-dir", str(tmp_path / "reports"), "--textfile-dir", str(textfile)]
    for playbook in playbooks:
        cmd += ["-p", str(FIXTURES / playbook)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300)
    samples = {}
    for family in text_string_to_metric_families((textfile / "sglang_fleet.prom").read_text()):
        for s in family.samples:
            samples[(s.name.removeprefix("sglang_fleet_"), tuple(sorted(s.labels.items())))] = s.value
    return proc, samples


def test_a_scheduled_drift_reports_without_failing_and_writes_the_metrics(tmp_path):
    proc, m = schedule(tmp_path, "drift.yml")
    # the drifted host is a finding, not a failed run: the job passes report-only variables
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith("drift: rc 0, 2 host(s) in ")
    assert proc.stdout.splitlines()[1] == f"{tmp_path}/textfile/sglang_fleet.prom: 2 host(s), 1 run(s)"
    assert (tmp_path / "reports" / "drifted" / "drift-20261201T090000Z.json").is_file()
    assert m[("drift_in_sync", (("host", "drifted"),))] == 0
    assert m[("drift_items", (("host", "drifted"),))] == 1
    assert m[("drift_in_sync", (("host", "in-sync"),))] == 1
    assert m[("run_success", (("playbook", "drift"),))] == 1
    assert {status: m[("run_hosts", (("playbook", "drift"), ("status", status)))]
            for status in ("ok", "changed", "failed", "unreachable")} == {"ok": 2, "changed": 0, "failed": 0, "unreachable": 0}
    assert m[("run_duration_seconds", (("playbook", "drift"),))] > 0


def test_a_failed_run_still_writes_the_metrics_and_fails_the_job(tmp_path):
    proc, m = schedule(tmp_path, "drift.yml", "broken.yml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("broken: rc 2, 2 host(s) in ")
    # the failure read from the runner's events, with its task and message
    assert lines[2] == "  drifted failed: Break on one host: drifted: ssh to the fleet broke"
    assert (m[("run_success", (("playbook", "drift"),))], m[("run_success", (("playbook", "broken"),))]) == (1, 0)
    assert m[("run_hosts", (("playbook", "broken"), ("status", "failed")))] == 1
    assert m[("run_hosts", (("playbook", "broken"), ("status", "ok")))] == 1
    assert m[("drift_in_sync", (("host", "drifted"),))] == 0  # the reports of the runs before it are there


PLAY = """\
- name: Render the schedule's units as the role does
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {role}/defaults/main.yml
    - {role}/vars/main.yml
  tasks:
    - name: Render the units
      ansible.builtin.template:
        src: {role}/templates/sglang-fleet-schedule.{{{{ item }}}}.j2
        dest: "{{{{ unit_dir }}}}/sglang-fleet-schedule.{{{{ item }}}}"
        mode: "0644"
      loop: [service, timer]
"""
ROLE = REPO / "roles" / "sglang_schedule"


def render(tmp_path, **variables):
    """The service and timer the role writes for these variables (over defaults), in tmp_path/units.

    The checkout is tmp_path/checkout with .venv/bin/python -> this Python, so `systemd-analyze
    verify` finds ExecStart's binary."""
    checkout, units = tmp_path / "checkout", tmp_path / "units"
    (checkout / ".venv" / "bin").mkdir(parents=True, exist_ok=True)
    units.mkdir(exist_ok=True)
    if not (checkout / ".venv" / "bin" / "python").exists():
        (checkout / ".venv" / "bin" / "python").symlink_to(sys.executable)
    play = tmp_path / "render.yml"
    play.write_text(PLAY.format(role=ROLE))
    extra = {"unit_dir": str(units), "ansible_python_interpreter": sys.executable,
             "sglang_schedule_project_dir": str(checkout), **variables}
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", str(play),
                           "-e", json.dumps(extra)], cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return units / "sglang-fleet-schedule.service", units / "sglang-fleet-schedule.timer"


def exec_start(service):
    """ExecStart= of the rendered unit as one line (continuations joined)."""
    text = service.read_text().replace(" \\\n    ", " ")
    return next(line for line in text.splitlines() if line.startswith("ExecStart="))


@needs_analyze
def test_rendered_units_verify_clean_and_the_service_is_hardened(tmp_path):
    service, timer = render(tmp_path)
    checkout = tmp_path / "checkout"
    assert exec_start(service) == (
        f"ExecStart={checkout}/.venv/bin/python {checkout}/scripts/fleet_schedule.py"
        " --reports-dir /var/lib/sglang-fleet-schedule/reports --textfile-dir /var/lib/prometheus/node-exporter"
        f" --timeout 900 -i {checkout}/inventories/production/hosts.yml -p drift")
    lines = service.read_text().splitlines()
    for line in ("Type=oneshot", "User=sglang-fleet", "TimeoutStartSec=960", "ProtectSystem=strict",
                 "ReadWritePaths=/var/lib/sglang-fleet-schedule/reports", "CapabilityBoundingSet=",
                 "SystemCallFilter=~@privileged", "PrivateDevices=yes"):
        assert line in lines, line
    assert not [line for line in lines if line.startswith("LoadCredential=")]
    assert "OnCalendar=*:0/15" in timer.read_text().splitlines()
    proc = subprocess.run([ANALYZE, "verify", str(timer)], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")
    assert exposure(service) <= 1.5  # measured 1.5 OK (sglang.service: 1.8)


@needs_analyze
def test_exposure_measures_the_hardening(tmp_path):
    assert exposure(render(tmp_path, sglang_schedule_hardening={})[0]) > 8.0


@needs_analyze
def test_credentials_and_options_reach_the_job_quoted(tmp_path):
    key, vault = tmp_path / "id_ed25519", tmp_path / "vault-pass"
    key.write_text("k")
    vault.write_text("v")
    service, timer = render(tmp_path, sglang_schedule_ssh_key_file=str(key), sglang_schedule_vault_password_file=str(vault),
                            sglang_schedule_playbooks=["drift", "verify"], sglang_schedule_limit="gpu:&prod",
                            sglang_schedule_extra_vars={"sglang_verify_concurrency": [1], "note": "50% of $HOME"},
                            sglang_schedule_inventory=["/etc/sglang-fleet/hosts.yml", "/etc/sglang-fleet/more.yml"])
    line = exec_start(service)
    assert line.endswith(
        " -i /etc/sglang-fleet/hosts.yml -i /etc/sglang-fleet/more.yml -p drift -p verify -l \"gpu:&prod\""
        ' -e "{\\"note\\": \\"50%% of $$HOME\\", \\"sglang_verify_concurrency\\": [1]}"'
        " --private-key %d/ssh-key --vault-password-file %d/vault-password")
    lines = service.read_text().splitlines()
    assert f"LoadCredential=ssh-key:{key}" in lines and f"LoadCredential=vault-password:{vault}" in lines
    assert "TimeoutStartSec=1860" in lines
    proc = subprocess.run([ANALYZE, "verify", str(timer)], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")
