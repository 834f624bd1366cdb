"""Safe rollouts on lab hosts of their own (10.89.102.0/24, containers sglang-rollout-*).

deploy.yml rolls out in batches (the canary ct129 first), and a host this run changed that fails
(health wait, runtime audit, a verify gate) is rolled back to its last known good release before
the play fails it. Each fault asserts the end state: the failing host serves its last known good
again (same unit bytes and argv as before, /health_generate and a generation answer), hosts of
later batches were never touched (same PID, same unit), history and reports are intact, and a
re-run after fixing the input converges with no failure. The seeds' redeploy, an interrupted
controller and a lost host are tests/lab/test_rollout_recovery_lab.py's (a fleet of its own, so
the two run side by side).
"""

import json
import re

import pytest
from lab_fleet import recap, unflow
from rollout_support import (
    HOSTS,
    assert_serves,
    converges,
    everywhere,
    faulty,
    history,
    host_state,
    rolled_back_line,
    rollout_fleet,
)

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with rollout_fleet(tmp_path_factory, "sglang-rollout", "10.89.102.") as fleet:
        yield fleet


def test_the_first_deploy_recorded_each_host_s_last_known_good(fleet):
    for host in HOSTS:
        state = host_state(fleet, host)
        assert state["current"] == state["last_good"]
        record = json.loads(fleet.ssh(host, f"cat /var/lib/sglang-fleet/releases/{state['current']}/release.json"))
        assert (record["status"], record["verify"]["passed"]) == ("good", True)
        assert record["unit_sha256"] == state["unit"]
    ct129 = json.loads(fleet.ssh("ct129", "cat /var/lib/sglang-fleet/releases/$(cat /var/lib/sglang-fleet/current)/"
                                          "release.json"))
    speed = ct129["verify"]["metrics"]["decode_tok_s@1"]
    assert 45 < speed < 65  # the simulator's ct129 (53.8 tok/s nominal), as measured through SSH on a shared CPU
    rc, out = fleet.play("releases.yml", "-l", "ct129")
    assert rc == 0, out
    assert re.search(rf"{re.escape(ct129['id'])}\s+good \(current, last known good\)\s+sglang 0\.5\.11\s+fingerprint\s+"
                     rf"{ct129['fingerprint']}\s+{re.escape(str(speed))} tok/s single stream\s+recorded \d{{8}}T\d{{6}}Z "
                     r"by \S+\s+at commit \S+", unflow(out)), out


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
    "h200x2": ("degrade_factor=0.5", r"floor: single-stream decode 2\d\.\d tok/s < floor 45\.0 tok/s"),
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
