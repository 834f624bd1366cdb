"""deploy.yml end to end on a lab host of its own (ct129 mirror, 10.89.83.0/24, sglang-deploy-*).

A first deploy serves; a second changes nothing; --check --diff shows nothing; every kind of
bad input stops the play with a message that says what to fix, before anything on the host
changes (unit file bytes and the server's PID stay the same); a version can be switched and
switched back without reinstalling.
"""

import json

import pytest
from lab_fleet import deployed_lab_fleet, recap, unflow

pytestmark = pytest.mark.lab

HOST = "ct129"
CT129_ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
              "mem_fraction_static": 0.88, "context_length": 131072}
FAST = ("--skip-tags", "sglang_verify")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with deployed_lab_fleet(tmp_path_factory.mktemp("deploy-lab"), "sglang-deploy", "10.89.83.", hosts=[HOST]) as fleet:
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


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sglang_args": {**CT129_ARGS, "tp_size": 4}},
         "ct129: these arguments need 4 GPU(s) per node (tp_size 4) but the host has 2 (declared); lower "
         "tp_size to at most 2 or fix sglang_hardware.gpu_count"),
        ({"sglang_args": {**CT129_ARGS, "tp_size": "two"}},
         "sglang_args.tp_size is 'two': it must be a whole number >= 1 (e.g. tp_size: 2, without quotes)"),
        ({"sglang_args": {**CT129_ARGS, "tp_size": 0}},
         "sglang_args.tp_size is 0: it must be a whole number >= 1"),
        ({"sglang_args": {**CT129_ARGS, "port": 70000}},
         "sglang_args.port is 70000: it must be a whole number from 1 to 65535"),
        ({"sglang_args": {**CT129_ARGS, "model_path": "/models/Qwen3.6-72B"}},
         "ct129: sglang_args.model_path /models/Qwen3.6-72B has no config.json on the host"),
        ({"sglang_args": {**CT129_ARGS, "api_key": "s3cret-value"}},
         "sglang_args.api_key is a secret and would be visible in the unit file and in the process list; set it "
         "in sglang_service_secrets.SGLANG_API_KEY"),
        ({"sglang_args": {**CT129_ARGS, "speculative_num_stpes": 3}},
         "sglang 0.5.11 would refuse to start with these arguments (nothing was changed)"),
        ({"sglang_service_ready_timout_s": 10},
         "unknown variable sglang_service_ready_timout_s: did you mean sglang_service_ready_timeout_s?"),
        ({"sglang_service_ready_timeout_s": "soon"}, "sglang_service_ready_timeout_s"),
        ({"sglang_version": "0.5.x"}, "ml_env_sglang_version (sglang_version) is '0.5.x': it must be a PyPI release"),
        ({"sglang_args": {**CT129_ARGS, "host": "0.0.0.0"}},
         "ct129: sglang_args.host 0.0.0.0 serves SGLang beyond this host, and sglang_service_secrets has no "
         "SGLANG_API_KEY"),
        ({"sglang_args": {**CT129_ARGS, "host": "::"}, "sglang_service_allow_unauthenticated_bind": False},
         "or set sglang_service_allow_unauthenticated_bind: true if an open server is intended"),
    ],
    ids=["tp-over-gpus", "tp-not-int", "tp-zero", "port-range", "model-missing", "secret-in-args",
         "misspelled-flag", "misspelled-var", "wrong-type", "bad-version", "open-bind", "open-bind-v6"],
)
def test_bad_input_stops_before_anything_changes(fleet, extra, message):
    before = host_state(fleet)
    rc, out = fleet.play("deploy.yml", "-e", json.dumps(extra), *FAST)
    assert rc != 0, out
    assert message in unflow(out), out
    assert recap(out, HOST)["changed"] == 0
    assert host_state(fleet) == before
    assert "s3cret-value" not in out


@pytest.mark.parametrize("extra", [{"sglang_service_allow_unauthenticated_bind": True},
                                   {"sglang_service_secrets": {"SGLANG_API_KEY": "lab-key-5f1c"}}],
                         ids=["intended", "with-api-key"])
def test_open_bind_passes_preflight_when_intended_or_authenticated(fleet, extra):
    """--check: the checks pass and the unit would change (to --host 0.0.0.0); nothing is changed."""
    before = host_state(fleet)
    rc, out = fleet.play("deploy.yml", "--check", "--diff", "-e",
                         json.dumps({"sglang_args": {**CT129_ARGS, "host": "0.0.0.0"}, **extra}), *FAST)
    assert "serves SGLang beyond this host" not in out
    assert "+    --host 0.0.0.0 \\" in out, out
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
