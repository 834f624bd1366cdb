"""Safe rollouts on lab hosts of their own (10.89.102.0/24, containers sglang-rollout-*).

deploy.yml rolls out in batches (the canary ct129 first), and a host this run changed that fails
(health wait, runtime audit, a verify gate) is rolled back to its last known good release before
the play fails it. Each fault asserts the end state: the failing host serves its last known good
again (same unit bytes and argv as before, /health_generate and a generation answer), hosts of
later batches were never touched (same PID, same unit), history and reports are intact, and a
re-run after fixing the input converges with no failure.

Faults that belong to one release travel in its unit's environment (SGLANG_SIM_FAULTS, see
lab/sglang_sim/README.md), so restoring the previous unit removes them, as with a bad release.
"""

import json
import re
import signal
import subprocess
import threading
import time

import pytest
from lab_fleet import BIN, ENV, REPO, deployed_lab_fleet, recap, unflow

pytestmark = pytest.mark.lab

HOSTS = ("ct129", "h200x2", "h200x1")
CT129_ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
              "mem_fraction_static": 0.88, "context_length": 131072}
# Short, single-level benchmarks: the simulator paces tokens exactly, and the cross-release gate
# compares runs of one workload. Each host's release carries the simulator faults that
# `rollout_faults` (-e) gives it, in its unit's environment: a new fault is a new release, and
# restoring the previous unit removes it, as with a bad release.
GROUP_VARS = {
    "sglang_verify_concurrency": [1], "sglang_verify_repeats": 2, "sglang_verify_requests_per_stream": 1,
    "rollout_faults": {},
    "sglang_service_environment": {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json",
                                   "SGLANG_SIM_FAULTS": "{{ rollout_faults[inventory_hostname] | default('') }}"},
}


def faulty(**per_host):
    """-e giving each named host a release with these simulator faults (knob=value,...)."""
    return ("-e", json.dumps({"rollout_faults": per_host}))


def everywhere(faults):
    return faulty(**{h: faults for h in HOSTS})


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with deployed_lab_fleet(tmp_path_factory.mktemp("rollout-lab"), "sglang-rollout", "10.89.102.",
                            group_vars=GROUP_VARS) as fleet:
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


def test_the_first_deploy_recorded_each_host_s_last_known_good(fleet):
    for host in HOSTS:
        state = host_state(fleet, host)
        assert state["current"] == state["last_good"]
        record = json.loads(fleet.ssh(host, f"cat /var/lib/sglang-fleet/releases/{state['current']}/release.json"))
        assert (record["status"], record["verify"]["passed"]) == ("good", True)
        assert record["unit_sha256"] == state["unit"]
    rc, out = fleet.play("releases.yml", "-l", "ct129")
    assert rc == 0, out
    assert re.search(r"0\.5\.11-[0-9a-f]{12}\s+good \(current, last known good\)\s+sglang 0\.5\.11\s+fingerprint\s+"
                     r"[0-9a-f]{16}\s+53\.\d+ tok/s single stream\s+recorded \d{8}T\d{6}Z by \S+\s+at commit \S+",
                     unflow(out)), out


def test_a_canary_that_never_becomes_healthy_is_rolled_back_and_the_rollout_stops(fleet):
    before = {h: host_state(fleet, h) for h in HOSTS}
    hist = {h: history(fleet, h) for h in HOSTS}
    rc, out = fleet.play("deploy.yml", *everywhere("never_healthy=true"), "-e", "sglang_service_ready_timeout_s=6")
    assert rc != 0
    assert recap(out, "ct129")["failed"] == 1
    text = unflow(out)
    assert "ct129: Probe /health_generate until the model answers" in text or "did not answer" in text, out
    assert re.search(rolled_back_line(before["ct129"]), text), out
    assert_serves(fleet, "ct129", before["ct129"])
    for host in ("h200x2", "h200x1"):  # later batches: never touched
        assert host_state(fleet, host) == before[host]
    for host in HOSTS:  # history only grows
        assert history(fleet, host).startswith(hist[host])
    records = [json.loads(fleet.ssh("ct129", f"cat {path}")) for path in
               fleet.ssh("ct129", "ls /var/lib/sglang-fleet/releases/*/release.json").split()]
    assert sorted(r["status"] for r in records) == ["failed", "good"]
    assert "did not answer" in next(r["failure"] for r in records if r["status"] == "failed")
    out = converges(fleet)
    assert all(recap(out, h)["changed"] == 0 for h in HOSTS), out


FAULTS = {  # host: (its new release's fault, what the play says failed)
    "ct129": ("crash_after_requests=2", r"ct129: Benchmark the server"),
    "h200x2": ("degrade_factor=0.5", r"floor: single-stream decode 2\d\.\d tok/s < floor 50\.0 tok/s"),
    "h200x1": ("disable_optimization=piecewise_cuda_graph",
               r"SGLang resolved prefill/piecewise CUDA graph differently than predicted"),
}


def test_a_release_failing_verify_the_audit_or_under_load_is_rolled_back_on_every_host(fleet):
    """Three faults at once, one per host, all in one batch: a crash during verify, a throughput
    below the floor, and a silently disabled optimisation (the runtime audit)."""
    before = {h: host_state(fleet, h) for h in HOSTS}
    hist = {h: history(fleet, h) for h in HOSTS}
    rc, out = fleet.play("deploy.yml", *faulty(**{h: f for h, (f, _) in FAULTS.items()}),
                         "-e", '{"sglang_rollout_batches": ["100%"]}')
    assert rc != 0, out
    text = unflow(out)
    for host, (_, failure) in FAULTS.items():
        assert recap(out, host)["failed"] == 1, out
        assert re.search(failure, text), (host, out)
        assert re.search(f"{host}: .*" + rolled_back_line(before[host], "[0-9.]+"), text), (host, out)
        assert_serves(fleet, host, before[host])
        assert history(fleet, host).startswith(hist[host])
    out = converges(fleet)
    assert all(recap(out, h)["changed"] == 0 for h in HOSTS), out


def test_the_seeds_one_step_redeploy_is_caught_against_the_last_known_good_and_rolled_back(fleet):
    """No expectations, no floors: only the cross-release gate sees 3-step -> 1-step MTP (-30 %)."""
    before = host_state(fleet, "ct129")
    one_step = {**CT129_ARGS, "speculative_num_steps": 1, "speculative_num_draft_tokens": 2}
    bare = ("-e", json.dumps({"sglang_args": one_step, "sglang_expect": {}, "sglang_verify_min_decode_tok_s": 0,
                              "sglang_verify_min_accept_length": 0}))
    rc, out = fleet.play("deploy.yml", "-l", "ct129", *bare)
    assert rc != 0, out
    text = unflow(out)
    assert re.search(r"last known good: single-stream decode 37\.\d tok/s is (29|30)\.\d % below 53\.\d tok/s "
                     r"\(threshold 48\.\d tok/s = last known good - 10 %\) of the last known good release "
                     r"0\.5\.11-[0-9a-f]{12} \(sglang 0\.5\.11, fingerprint [0-9a-f]{16}, verified \d{8}T\d{6}Z\); "
                     r"what changed: speculative_num_draft_tokens 4 -> 2, speculative_num_steps 3 -> 1", text), out
    assert re.search(rolled_back_line(before), text), out
    assert_serves(fleet, "ct129", before)
    info = json.loads(fleet.ssh("ct129", "curl -s http://127.0.0.1:30000/get_server_info"))
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4)

    # Accepted on purpose: it becomes the baseline; rollback.yml returns to the previous good release.
    rc, out = fleet.play("deploy.yml", "-l", "ct129", *bare, "-e", "sglang_verify_accept_regression=true")
    assert rc == 0, out
    assert "accepted as the new baseline (sglang_verify_accept_regression)" in unflow(out)
    accepted = host_state(fleet, "ct129")
    assert accepted["last_good"] == accepted["current"] != before["current"]
    rc, out = fleet.play("rollback.yml", "-l", "ct129")
    assert rc == 0, out
    assert re.search(rf"ct129: rolled back to {before['current']} \(sglang 0\.5\.11, fingerprint [0-9a-f]{{16}}\): "
                     r"serving again, 5\d\.\d tok/s single stream", unflow(out)), out
    assert_serves(fleet, "ct129", before)
    rc, out = fleet.play("rollback.yml", "-l", "ct129", "-e", "sglang_release_target=0.5.11-000000000000")
    assert rc != 0 and "ct129: no release 0.5.11-000000000000 on this host; releases.yml lists the host's releases: " \
        in unflow(out), out
    out = converges(fleet, "-l", "ct129")
    assert recap(out, "ct129")["changed"] == 0


def _ssh(fleet, host, command, timeout=30):
    """(rc, stdout) of `command` as root on `host`, without asserting (the host may be going away)."""
    p = subprocess.run(["ssh", "-i", str(REPO / ".lab" / "ssh" / "id_ed25519"), "-o", "BatchMode=yes", "-o",
                        f"UserKnownHostsFile={fleet.known_hosts}", "-o", "ConnectTimeout=2", "-o", "LogLevel=ERROR",
                        f"root@{fleet.ip[host]}", command], capture_output=True, text=True, check=False, timeout=timeout)
    return p.returncode, p.stdout.strip()


def _when_restarted(fleet, host, pid_before, then, timeout=300):
    """Call `then()` as soon as `host`'s service runs another main PID (a restart of this rollout)."""
    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc, pid = _ssh(fleet, host, "systemctl show sglang -p MainPID")
            if rc == 0 and pid not in (pid_before, "MainPID=0", ""):
                then()
                return
            time.sleep(0.3)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _deploy_in_background(fleet, *args):
    return subprocess.Popen([str(BIN / "ansible-playbook"), "-i", str(fleet.inventory),
                             "-e", f"sglang_report_dir={fleet.reports}", *args], cwd=REPO,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def test_the_controller_interrupted_while_a_host_restarts_leaves_nothing_marked_good(fleet):
    before = host_state(fleet, "ct129")
    slow = faulty(ct129="slow_start_s=8")
    proc = _deploy_in_background(fleet, "deploy.yml", "-l", "ct129", *slow)
    watcher = _when_restarted(fleet, "ct129", before["pid"], lambda: proc.send_signal(signal.SIGINT))
    out, _ = proc.communicate(timeout=600)
    watcher.join(timeout=5)
    assert proc.returncode != 0, out
    now = host_state(fleet, "ct129")
    assert now["unit"] != before["unit"]  # the new unit was written and started...
    assert (now["current"], now["last_good"]) == (before["current"], before["last_good"])  # ...but not recorded
    out = converges(fleet, "-l", "ct129", *slow)
    after = host_state(fleet, "ct129")
    assert after["unit"] == now["unit"] and after["last_good"] == after["current"] != before["current"]


def test_a_host_lost_mid_rollout_stops_it_and_a_rerun_converges_once_it_is_back(fleet):
    before = {h: host_state(fleet, h) for h in HOSTS}
    slow = everywhere("slow_start_s=6")
    container = "sglang-rollout-h200x2"
    proc = _deploy_in_background(fleet, "deploy.yml", *slow, "-e", '{"sglang_rollout_batches": [1, 1, 1]}')
    watcher = _when_restarted(fleet, "h200x2", before["h200x2"]["pid"],
                              lambda: subprocess.run(["podman", "stop", "-t", "0", container], check=False,
                                                     capture_output=True))
    out, _ = proc.communicate(timeout=600)
    watcher.join(timeout=5)
    assert proc.returncode != 0, out
    assert re.search(r"^h200x2\s+: .*unreachable=1", out, re.M), out
    assert host_state(fleet, "h200x1") == before["h200x1"]  # the batch after it never started
    ct129 = host_state(fleet, "ct129")
    assert ct129["current"] == ct129["last_good"] != before["ct129"]["current"]  # the canary passed
    subprocess.run(["podman", "start", container], check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while _ssh(fleet, "h200x2", "true")[0]:
        assert time.monotonic() < deadline, "h200x2 did not come back"
        time.sleep(1)
    out = converges(fleet, *slow)
    states = {h: host_state(fleet, h) for h in HOSTS}
    assert all(s["current"] == s["last_good"] != before[h]["current"] for h, s in states.items())
    converges(fleet)  # and back to the inventory's release everywhere
