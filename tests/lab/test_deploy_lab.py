"""deploy.yml end to end on a lab host of its own (ct129 mirror, 10.89.83.0/24, sglang-deploy-*).

A first deploy serves; a second changes nothing; --check --diff shows nothing; a host in sync with
its last complete deploy is left alone (verified only while its release is not proven good), one
changed by hand gets the whole deploy; an open bind
passes the checks when intended or authenticated; a version can be switched and switched back
without reinstalling. Bad inputs (refused before anything changes) are
tests/lab/test_bad_inputs_lab.py's subject.
"""

import json
import re

import pytest
from lab_fleet import deployed_lab_fleet, recap, unflow

pytestmark = pytest.mark.lab

HOST = "ct129"
CT129_ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
              "mem_fraction_static": 0.88, "context_length": 131072, "disable_radix_cache": True}
FAST = ("--skip-tags", "sglang_verify")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with deployed_lab_fleet(tmp_path_factory.mktemp("deploy-lab"), "sglang-deploy", "10.89.83.", hosts=[HOST],
                            shared=True) as fleet:
        yield fleet


def host_state(fleet):
    """What must not change when a deploy is refused: the unit's bytes and the server's PID."""
    unit = fleet.ssh(HOST, "sha256sum /etc/systemd/system/sglang.service").split()[0]
    pid = fleet.ssh(HOST, "systemctl show sglang -p MainPID").strip()
    return unit, pid


def test_first_deploy_serves(fleet):
    assert fleet.ssh(HOST, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health_generate") == "200"
    info = json.loads(fleet.ssh(HOST, "curl -s http://127.0.0.1:30000/get_server_info"))
    assert (info["version"], info["tp_size"], info["speculative_num_steps"]) == ("0.5.11", 2, 3)


def test_second_deploy_changes_nothing_and_check_diff_is_clean(fleet):
    before = host_state(fleet)
    rc, out = fleet.play("deploy.yml", *FAST)
    assert rc == 0, out
    assert recap(out, HOST)["changed"] == 0
    rc, out = fleet.play("deploy.yml", "--check", "--diff", *FAST)
    assert rc == 0, out
    assert recap(out, HOST)["changed"] == 0
    assert host_state(fleet) == before


IN_SYNC = "ct129: in sync with its last complete deploy"

UNIT = "/etc/systemd/system/sglang.service"


def current_release(fleet):
    return fleet.ssh(HOST, "cat /var/lib/sglang-fleet/current").strip()


def release_status(fleet, rid):
    return json.loads(fleet.ssh(HOST, f"cat /var/lib/sglang-fleet/releases/{rid}/release.json"))["status"]


def test_a_host_in_sync_is_left_alone_and_a_host_changed_by_hand_gets_the_whole_deploy(fleet):
    """The in-sync shortcut skips the checks, install and restart only while nothing differs, and sends
    no benchmark traffic (a change of default: the in-sync verify was every time) unless the host's
    release is not proven good yet, or sglang_release_verify_in_sync asks for it."""
    before = host_state(fleet)
    rid = current_release(fleet)
    assert release_status(fleet, rid) == "good"   # the fixture's deploy verified it
    rc, out = fleet.play("deploy.yml")
    assert rc == 0, out
    assert f"{IN_SYNC}: nothing to do" in unflow(out), out
    assert "Render the systemd unit" not in out and "Benchmark" not in out, out
    assert recap(out, HOST)["changed"] == 0 and host_state(fleet) == before
    # the no-op's cost: a handful of tasks (#41's target: at most 10 per host in sync), as PLAY RECAP counts them
    ok, skipped = map(int, re.search(rf"^{HOST}\s+: ok=(\d+) .* skipped=(\d+)", out, re.M).groups())
    assert ok + skipped <= 10, (ok, skipped)

    rc, out = fleet.play("deploy.yml", "-e", "sglang_release_verify_in_sync=true")
    assert rc == 0 and f"{IN_SYNC}: nothing to install or restart; verify runs (sglang_release_verify_in_sync is true)" \
        in unflow(out), out
    assert "Benchmark" in out and host_state(fleet) == before, out

    # A release not proven good (here its record set back by hand): verified, and good again.
    fleet.ssh(HOST, f"sed -i 's/\"status\": \"good\"/\"status\": \"unverified\"/' /var/lib/sglang-fleet/releases/{rid}/release.json")
    assert release_status(fleet, rid) == "unverified"
    rc, out = fleet.play("deploy.yml")
    assert rc == 0 and f"{IN_SYNC}: nothing to install or restart; verify runs (its release {rid} is unverified)" \
        in unflow(out), out
    assert "Benchmark" in out and release_status(fleet, rid) == "good" and host_state(fleet) == before, out

    # A hand edit of the unit: the whole deploy, which puts the inventory's unit back and restarts.
    fleet.ssh(HOST, f"echo '# hand edit' >> {UNIT}")
    rc, out = fleet.play("deploy.yml", *FAST)
    assert rc == 0, out
    assert f"ct129: the whole deploy: {UNIT} changed since the last deploy (content)" in unflow(out), out
    unit, pid = host_state(fleet)
    assert unit == before[0] and pid != before[1], "the unit was not put back, or the service not restarted"

    # A stopped service: the whole deploy starts it.
    fleet.ssh(HOST, "systemctl stop sglang")
    rc, out = fleet.play("deploy.yml", *FAST)
    assert rc == 0, out
    assert "ct129: the whole deploy: sglang is inactive, not active" in unflow(out), out
    assert fleet.ssh(HOST, "systemctl is-active sglang").strip() == "active"

    # In sync again; opted out: the whole deploy, which changes nothing.
    rc, out = fleet.play("deploy.yml", *FAST)
    assert rc == 0 and IN_SYNC in out, out
    rc, out = fleet.play("deploy.yml", "-e", "sglang_release_skip_unchanged=false", *FAST)
    assert rc == 0, out
    assert "ct129: the whole deploy: sglang_release_skip_unchanged is false" in unflow(out), out
    assert "Render the systemd unit" in out and recap(out, HOST)["changed"] == 0, out


@pytest.mark.parametrize("extra", [{"sglang_service_allow_unauthenticated_bind": True},
                                   {"sglang_service_secrets": {"SGLANG_API_KEY": "lab-key-5f1c"}}],
                         ids=["intended", "with-api-key"])
def test_open_bind_passes_preflight_when_intended_or_authenticated(fleet, extra):
    """--check: the checks pass and the unit would change (to --host 0.0.0.0); nothing is changed."""
    before = host_state(fleet)
    rc, out = fleet.play("deploy.yml", "--check", "--diff", "-e",
                         json.dumps({"sglang_args": {**CT129_ARGS, "host": "0.0.0.0"}, **extra}), *FAST)
    assert rc == 0, out
    assert "serves SGLang beyond this host" not in out
    assert "+    --host 0.0.0.0 \\" in out, out
    assert "ct129 (--check): a real run would restart sglang: its unit changed" in unflow(out), out
    assert host_state(fleet) == before


def test_version_switch_and_back_keeps_both_envs(fleet):
    marker = "stat -c %Y.%i /opt/ml-env/sglang-0.5.11/.sglang-fleet-lock.txt"
    built = fleet.ssh(HOST, marker)
    rc, out = fleet.play("deploy.yml", "-e", "sglang_version=0.5.13.post1", *FAST)
    assert rc == 0, out
    assert "/opt/ml-env/sglang-0.5.13.post1/bin/python" in fleet.ssh(HOST, "cat /etc/systemd/system/sglang.service")
    rc, out = fleet.play("deploy.yml", *FAST)
    assert rc == 0, out
    assert fleet.ssh(HOST, marker) == built, "switching back rebuilt the 0.5.11 venv"
    unit = fleet.ssh(HOST, "cat /etc/systemd/system/sglang.service")
    assert "/opt/ml-env/sglang-0.5.11/bin/python" in unit
    envs = fleet.ssh(HOST, "ls /opt/ml-env").split()
    assert {"sglang-0.5.11", "sglang-0.5.13.post1"} <= set(envs)
    info = json.loads(fleet.ssh(HOST, "curl -s http://127.0.0.1:30000/get_server_info"))
    assert info["version"] == "0.5.11"
