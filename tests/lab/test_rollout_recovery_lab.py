"""Rollouts that go wrong in other ways, on lab hosts of their own (10.89.104.0/24, sglang-rollrec-*).

The seeds' redeploy (3-step -> 1-step MTP, no expectations, no floors) is caught against the last
known good release and rolled back; accepting it on purpose makes it the baseline and rollback.yml
returns; the controller interrupted while a host restarts marks nothing good; a host lost
mid-rollout stops the rollout, and a re-run converges once it is back.
"""

import json
import re
import signal
import time

import pytest
from lab_fleet import recap, unflow
from rollout_support import (
    CT129_ARGS,
    HOSTS,
    assert_serves,
    converges,
    deploy_in_background,
    everywhere,
    faulty,
    host_state,
    rolled_back_line,
    rollout_fleet,
    when_restarted,
)

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with rollout_fleet(tmp_path_factory, "sglang-rollrec", "10.89.104.") as fleet:
        yield fleet


def test_the_seeds_one_step_redeploy_is_caught_against_the_last_known_good_and_rolled_back(fleet):
    """No expectations, no floors: only the cross-release gate sees 3-step -> 1-step MTP (-30 %)."""
    before = host_state(fleet, "ct129")
    one_step = {**CT129_ARGS, "speculative_num_steps": 1, "speculative_num_draft_tokens": 2}
    bare = ("-e", json.dumps({"sglang_args": one_step, "sglang_expect": {}, "sglang_verify_min_decode_tok_s": 0,
                              "sglang_verify_min_accept_length": 0}))
    rc, out = fleet.play("deploy.yml", "-l", "ct129", *bare)
    assert rc != 0, out
    text = unflow(out)
    # the lab's fixed tolerance decides (lab/light_verify.yml); the reference is the deploy's one passing run
    assert re.search(r"last known good: against release 0\.5\.11-[0-9a-f]{12} \(sglang 0\.5\.11, fingerprint "
                     r"[0-9a-f]{16}, verified \d{8}T\d{6}Z, 1 passing run\): single-stream decode 3[5-8]\.\d tok/s is "
                     r"(2[7-9]|3[0-3])\.\d % below the last known good 5[1-4]\.\d tok/s \(threshold 4[6-9]\.\d tok/s = "
                     r"that - 10 %\); what changed: speculative_num_draft_tokens 4 -> 2, speculative_num_steps 3 -> 1",
                     text), out
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


def test_the_controller_interrupted_while_a_host_restarts_leaves_nothing_marked_good(fleet):
    before = host_state(fleet, "ct129")
    slow = faulty(ct129="slow_start_s=8")
    proc = deploy_in_background(fleet, "deploy.yml", "-l", "ct129", *slow)
    watcher = when_restarted(fleet, "ct129", before["pid"], lambda: proc.send_signal(signal.SIGINT))
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
    container = "sglang-rollrec-h200x2"
    proc = deploy_in_background(fleet, "deploy.yml", *slow, "-e", '{"sglang_rollout_batches": [1, 1, 1]}')
    watcher = when_restarted(fleet, "h200x2", before["h200x2"]["pid"],
                              lambda: fleet.podman("stop", "-t", "0", container, check=False))
    out, _ = proc.communicate(timeout=600)
    watcher.join(timeout=5)
    assert proc.returncode != 0, out
    assert re.search(r"^h200x2\s+: .*unreachable=1", out, re.M), out
    assert host_state(fleet, "h200x1") == before["h200x1"]  # the batch after it never started
    ct129 = host_state(fleet, "ct129")
    assert ct129["current"] == ct129["last_good"] != before["ct129"]["current"]  # the canary passed
    fleet.podman("start", container)
    deadline = time.monotonic() + 60
    while fleet.ssh_status("h200x2", "true", timeout=30)[0]:
        assert time.monotonic() < deadline, "h200x2 did not come back"
        time.sleep(1)
    out = converges(fleet, *slow)
    states = {h: host_state(fleet, h) for h in HOSTS}
    assert all(s["current"] == s["last_good"] != before[h]["current"] for h, s in states.items())
