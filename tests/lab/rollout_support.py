"""What the rollout lab tests share (tests/lab/test_rollout_lab.py, test_rollout_recovery_lab.py).

Faults that belong to one release travel in its unit's environment (SGLANG_SIM_FAULTS, see
lab/sglang_sim/README.md), so restoring the previous unit removes them, as with a bad release.
"""

import contextlib
import json
import re
import subprocess
import threading
import time

from lab_fleet import BIN, ENV, REPO, deployed_lab_fleet, recap

HOSTS = ("ct129", "h200x2", "h200x1")
CT129_ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
              "mem_fraction_static": 0.88, "context_length": 131072, "disable_radix_cache": True}
# Verify's benchmark is lab_fleet.LIGHT_VERIFY (the simulator paces tokens exactly, and the
# cross-release gate compares runs of one workload). Each host's release carries the simulator faults that
# `rollout_faults` (-e) gives it, in its unit's environment: a new fault is a new release, and
# restoring the previous unit removes it, as with a bad release.
GROUP_VARS = {
    "rollout_faults": {},
    "sglang_service_environment": {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json",
                                   "SGLANG_SIM_FAULTS": "{{ rollout_faults[inventory_hostname] | default('') }}"},
}


def faulty(**per_host):
    """-e giving each named host a release with these simulator faults (knob=value,...)."""
    return ("-e", json.dumps({"rollout_faults": per_host}))


def everywhere(faults):
    return faulty(**{h: faults for h in HOSTS})



@contextlib.contextmanager
def rollout_fleet(tmp_path_factory, prefix, subnet):
    """The lab fleet as `prefix`-* on `subnet`, deployed once (every host's first release is good). One deploy
    per test run: the rollout modules, the audit's and the bad inputs' start from its snapshot (lab_fleet.py)."""
    with deployed_lab_fleet(tmp_path_factory.mktemp(prefix), prefix, subnet, group_vars=GROUP_VARS,
                            shared=True) as fleet:
        yield fleet


def host_state(fleet, host):
    """What identifies what a host serves: its unit's bytes, main PID, argv and release pointers."""
    out = fleet.ssh(host, "sha256sum /etc/systemd/system/sglang.service; systemctl show sglang -p MainPID; "
                          "cat /var/lib/sglang-fleet/current /var/lib/sglang-fleet/last-good")
    unit, pid, current, last_good = out.split()[0], out.split()[2], out.split()[3], out.split()[4]
    argv = fleet.ssh(host, f"tr '\\0' ' ' < /proc/{pid.split('=')[1]}/cmdline")
    return {"unit": unit, "pid": pid, "argv": argv, "current": current, "last_good": last_good}


def history(fleet, host):
    path = fleet.reports / host / "verify-history.jsonl"
    return path.read_text() if path.exists() else ""


def assert_serves(fleet, host, before):
    """The host serves the release it served `before`: same unit bytes and argv, health and a generation."""
    now = host_state(fleet, host)
    assert {k: now[k] for k in ("unit", "argv", "current", "last_good")} == \
        {k: before[k] for k in ("unit", "argv", "current", "last_good")}
    assert fleet.ssh(host, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health_generate") == "200"
    gen = json.loads(fleet.ssh(host, "curl -s http://127.0.0.1:30000/generate -H 'Content-Type: application/json' "
                                     "-d '{\"text\": \"hello\", \"sampling_params\": {\"max_new_tokens\": 4}}'"))
    assert gen["meta_info"]["completion_tokens"] == 4
    return now


def rolled_back_line(before, version=r"0\.5\.11"):
    lkg = before["last_good"]
    return rf"rolled back to {re.escape(lkg)} \(sglang {version}, fingerprint [0-9a-f]{{16}}\): serving again, " \
           rf"[0-9.]+ tok/s single stream"


def converges(fleet, *args):
    rc, out = fleet.play("deploy.yml", *args)
    assert rc == 0, out
    for host in HOSTS if "-l" not in args else (args[args.index("-l") + 1],):
        assert recap(out, host)["failed"] == 0
    return out


def when_restarted(fleet, host, pid_before, then, timeout=300):
    """Call `then()` as soon as `host`'s service runs another main PID (a restart of this rollout)."""
    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                rc, pid = fleet.ssh_status(host, "systemctl show sglang -p MainPID", timeout=30)
            except subprocess.TimeoutExpired:   # a loaded machine: ask again, the watch must not die
                continue
            if rc == 0 and pid.strip() not in (pid_before, "MainPID=0", ""):
                then()
                return
            time.sleep(0.3)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def deploy_in_background(fleet, *args):
    return subprocess.Popen([str(BIN / "ansible-playbook"), "-i", str(fleet.inventory),
                             "-e", f"sglang_report_dir={fleet.reports}", *args], cwd=REPO,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


