"""regression.yml on a lab host of its own (10.89.97.0/24, sglang-regress-*): the seeds' case.

ct129 (0.5.11, 3-step MTP) is deployed; a redeploy changes the release (0.5.13.post1) and the MTP
steps (3 -> 1, 4 -> 2 draft tokens) at once, fails its last-good gate and is rolled back. Then
`regression.yml -l ct129` with the same desired state measures the last known good, each change alone,
all of them and the last known good again (did the host move meanwhile?), puts back what ran, and
names the speculative steps, not the release. Then the
release is the culprit: the simulator's `slow_release` knob makes 0.5.13.post1 decode at 70 % on this
host (a release slower on this hardware), and a desired state that changes the release and a flag that
costs nothing at concurrency 1 names the release. tune.yml's tests start from this module's deployed
fleet (its snapshot) in test_tune_lab.py, beside these on another worker.
"""

import json
import re

import pytest
from lab_fleet import STEADY_VERIFY, deployed_lab_fleet, edit_host_vars, unflow
from rollout_support import CT129_ARGS

pytestmark = pytest.mark.lab

HOST = "ct129"
AGAIN = "the last known good again (did the host move while the steps ran?)"
# the verdict's line on the baseline's two measurements (plugins/module_utils/verify/noise.py, bracket)
UNMOVED = (r"the baseline moved [+-]\d+\.\d % \[[+-]\d+\.\d, [+-]\d+\.\d\] between its first and last measurement: "
           r"within the run-to-run noise; the steps are compared with both measurements")
# The seeds' redeploy, written into the inventory as its user did (regression.yml reads the desired state there)
SEEDS_REDEPLOY = {"sglang_version": "0.5.13.post1",
                  "sglang_args": {**CT129_ARGS, "speculative_num_steps": 1, "speculative_num_draft_tokens": 2},
                  "sglang_expect": {}, "sglang_verify_min_decode_tok_s": 0, "sglang_verify_min_accept_length": 0}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with deployed_lab_fleet(tmp_path_factory.mktemp("regress"), "sglang-regress", "10.89.97.", hosts=(HOST,),
                            group_vars=STEADY_VERIFY, shared=True) as fleet:
        yield fleet


def test_a_desired_state_equal_to_the_last_known_good_is_refused_before_anything_changes(fleet):
    before = fleet.ssh(HOST, "systemctl show sglang -p MainPID")
    rc, out = fleet.play("regression.yml", "-l", HOST)
    assert rc != 0
    assert "the desired state is the last known good release" in unflow(out), out
    rc, out = fleet.play("regression.yml", "-l", HOST, "-e", "sglang_version=0.5.13.post1")
    assert rc != 0
    assert "sglang_version was given with -e, which would override the release of every step" in unflow(out), out
    assert fleet.ssh(HOST, "systemctl show sglang -p MainPID") == before


def test_regression_names_the_speculative_steps_and_puts_back_what_ran(fleet):
    edit_host_vars(fleet, HOST, SEEDS_REDEPLOY)
    rc, out = fleet.play("deploy.yml", "-l", HOST)
    assert rc != 0 and "rolled back to 0.5.11-" in unflow(out), out
    ran = fleet.ssh(HOST, "cat /var/lib/sglang-fleet/current").strip()
    pid = fleet.ssh(HOST, "systemctl show sglang -p MainPID")
    rc, out = fleet.play("regression.yml", "-l", HOST, "--check")   # the plan only
    assert rc == 0 and "ct129: 6 steps, then " + ran + " back" in unflow(out), out
    assert fleet.ssh(HOST, "systemctl show sglang -p MainPID") == pid
    assert not list((fleet.reports / HOST).glob("regression-*.json"))

    rc, out = fleet.play("regression.yml", "-l", HOST, timeout=1800)
    assert rc == 0, out[-20000:]
    verdict = json.loads(next((fleet.reports / HOST).glob("regression-*.json")).read_text())
    steps = {s["name"]: s for s in verdict["steps"]}
    assert list(steps) == [f"the last known good ({ran})", "sglang 0.5.11 -> 0.5.13.post1",
                           "speculative_num_draft_tokens 4 -> 2", "speculative_num_steps 3 -> 1",
                           "every change together (the desired state)", AGAIN], verdict
    assert verdict["culprit"] == "speculative_num_steps 3 -> 1", verdict["lines"]
    # the baseline measured first and last brackets the steps: the simulated host did not move
    assert steps[AGAIN]["verdict"] == "baseline" and steps[AGAIN]["decode_tok_s"] > 0, steps[AGAIN]
    assert re.fullmatch(UNMOVED, verdict["lines"][1]), verdict["lines"]
    assert steps["speculative_num_steps 3 -> 1"]["basis"] == "runs", verdict["lines"]
    assert steps["sglang 0.5.11 -> 0.5.13.post1"]["verdict"] != "fail", verdict["lines"]
    assert steps["speculative_num_steps 3 -> 1"]["effect_pct"] < -20, verdict["lines"]
    assert "the change that costs the throughput: speculative_num_steps 3 -> 1" in unflow(out), out
    # what ran is back: the same release, serving the 3-step flags, and no step was recorded as a release
    assert fleet.ssh(HOST, "cat /var/lib/sglang-fleet/current").strip() == ran
    info = json.loads(fleet.ssh(HOST, "curl -s http://127.0.0.1:30000/get_server_info"))
    assert (info["version"], info["speculative_num_steps"]) == ("0.5.11", 3)
    assert fleet.ssh(HOST, "ls /var/lib/sglang-fleet/releases | wc -l").strip() == "2"   # the good one and the failed one
    # the host's verify history holds no step's run
    history = (fleet.reports / HOST / "verify-history.jsonl").read_text().splitlines()
    assert all(json.loads(line)["version"] == "0.5.11" or not json.loads(line)["passed"] for line in history)



def test_regression_names_the_release_when_the_release_is_slower_here(fleet):
    rc, out = fleet.play("lab/prepare.yml", "-l", HOST, "-e", json.dumps({"lab_sim_faults": {"slow_release": "0.5.13.post1=0.7"}}))
    assert rc == 0, out[-5000:]
    ran = fleet.ssh(HOST, "cat /var/lib/sglang-fleet/current").strip()
    edit_host_vars(fleet, HOST, {**SEEDS_REDEPLOY, "sglang_args": {**CT129_ARGS, "max_running_requests": 16},
                           "sglang_expect": {}})
    rc, out = fleet.play("regression.yml", "-l", HOST, timeout=1800)
    assert rc == 0, out[-20000:]
    verdicts = sorted((fleet.reports / HOST).glob("regression-*.json"))
    verdict = json.loads(verdicts[-1].read_text())
    steps = {s["name"]: s for s in verdict["steps"]}
    assert list(steps)[1:] == ["sglang 0.5.11 -> 0.5.13.post1", "max_running_requests unset -> 16",
                               "every change together (the desired state)", AGAIN], verdict
    assert re.fullmatch(UNMOVED, verdict["lines"][1]), verdict["lines"]
    assert verdict["culprit"] == "sglang 0.5.11 -> 0.5.13.post1", verdict["lines"]
    assert -35 < steps["sglang 0.5.11 -> 0.5.13.post1"]["effect_pct"] < -25, verdict["lines"]
    assert steps["max_running_requests unset -> 16"]["verdict"] != "fail", verdict["lines"]
    assert "the change that costs the throughput: sglang 0.5.11 -> 0.5.13.post1" in unflow(out), out
    assert fleet.ssh(HOST, "cat /var/lib/sglang-fleet/current").strip() == ran
