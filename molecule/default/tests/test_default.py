"""What a deployed lab host must look like: unit, process, user, port, health and secrets.

Hosts are reached over real SSH with the lab key, read from the scenario's inventory.
"""

import json
import pathlib

import pytest
import testinfra
import yaml

SCENARIO = pathlib.Path(__file__).resolve().parents[1]
REPO = SCENARIO.parents[1]
KEY = REPO / ".lab" / "ssh" / "id_ed25519"
INVENTORY = yaml.safe_load((SCENARIO / "inventory" / "hosts.yml").read_text())
HOSTS = INVENTORY["all"]["children"]["sglang_servers"]["children"]["sglang_lab"]["hosts"]
HOST_VARS = REPO / "inventories" / "lab" / "host_vars"
KNOWN_HOSTS = REPO / ".lab" / "known_hosts" / "sglang-mol"  # written by `lab.py up --prefix sglang-mol`
SSH_ARGS = f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={KNOWN_HOSTS} -o LogLevel=ERROR"


@pytest.fixture(scope="module", params=sorted(HOSTS))
def lab(request):
    name = request.param
    host = testinfra.get_host(
        f"ssh://root@{HOSTS[name]['ansible_host']}", ssh_identity_file=str(KEY), ssh_extra_args=SSH_ARGS
    )
    host_vars = yaml.safe_load((HOST_VARS / f"{name}.yml").read_text())
    host_vars.update(HOSTS[name])
    return name, host, host_vars


def _main_pid(host):
    out = host.check_output("systemctl show sglang -p MainPID")
    return int(out.strip().split("=", 1)[1])


def _argv(host):
    raw = host.check_output(f"cat /proc/{_main_pid(host)}/cmdline | tr '\\0' '\\n'")
    return raw.splitlines()


def test_unit_has_the_hosts_flags_one_per_line(lab):
    name, host, hv = lab
    unit = host.file("/etc/systemd/system/sglang.service")
    assert unit.mode == 0o644 and unit.user == "root"
    text = unit.content_string
    header = [line for line in text.splitlines()[:4] if line.startswith("#")]
    assert any("Ansible managed" in line for line in header), header
    assert f"    --tp-size {hv['sglang_args']['tp_size']} \\" in text.splitlines(keepends=False) or (
        f"    --tp-size {hv['sglang_args']['tp_size']}" in text.splitlines())
    assert f"    --model-path {hv['sglang_args']['model_path']} \\" in text
    for line in ("User=sglang", "Restart=on-failure", "EnvironmentFile=/etc/sglang/sglang.env",
                 "NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=", "DevicePolicy=closed",
                 "DeviceAllow=char-nvidia* rw", "ReadWritePaths=/var/lib/sglang"):
        assert line in text.splitlines()
    assert f"/opt/ml-env/sglang-{hv['sglang_version']}/bin/python" in text


def test_running_process_has_the_same_argv(lab):
    name, host, hv = lab
    argv = _argv(host)
    assert argv[0] == f"/opt/ml-env/sglang-{hv['sglang_version']}/bin/python"
    assert argv[1:3] == ["/usr/local/lib/sglang-fleet/sglang_launch.py", "/opt/sglang-sim/sglang_sim.py"]
    assert argv[3:5] == ["--model-path", hv["sglang_args"]["model_path"]]
    assert argv[argv.index("--tp-size") + 1] == str(hv["sglang_args"]["tp_size"])
    assert "--enable-metrics" in argv


def test_service_runs_as_a_system_user(lab):
    _, host, _ = lab
    user = host.user("sglang")
    assert user.exists and user.uid < 1000 and user.shell == "/usr/sbin/nologin"
    assert host.check_output(f"stat -c %U /proc/{_main_pid(host)}") == "sglang"


def test_server_listens_and_generates(lab):
    name, host, hv = lab
    assert host.socket("tcp://127.0.0.1:30000").is_listening
    key = hv.get("sglang_service_secrets", {}).get("SGLANG_API_KEY")
    auth = f"-H 'Authorization: Bearer {key}'" if key else ""
    code = host.check_output(f"curl -s -o /dev/null -w '%{{http_code}}' {auth} http://127.0.0.1:30000/health_generate")
    assert code == "200"
    info = json.loads(host.check_output(f"curl -s {auth} http://127.0.0.1:30000/get_server_info"))
    assert info["tp_size"] == hv["sglang_args"]["tp_size"]
    assert info["version"] == hv["sglang_version"]


def test_secrets_stay_in_the_root_only_environment_file(lab):
    name, host, hv = lab
    env = host.file("/etc/sglang/sglang.env")
    assert env.mode == 0o600 and env.user == "root" and env.group == "root"
    secrets = hv.get("sglang_service_secrets", {})
    if not secrets:
        assert "=" not in "".join(line for line in env.content_string.splitlines() if not line.startswith("#"))
        return
    for name_, value in secrets.items():
        assert f'{name_}="{value}"' in env.content_string
        assert value not in host.file("/etc/systemd/system/sglang.service").content_string
        assert value not in "\n".join(_argv(host))
        assert value not in host.check_output("ps -eo args")
        assert value not in host.check_output("journalctl -u sglang --no-pager")
    # the key is in force: the server refuses a request without it
    code = host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models")
    assert code == "401"


def test_secrets_stay_out_of_the_controller_reports(lab):
    name, _, hv = lab
    secrets = hv.get("sglang_service_secrets", {}).values()
    reports = sorted((REPO / "reports" / "molecule" / name).glob("*.json"))
    assert reports, f"deploy wrote no audit/verify report for {name}"
    for report in reports:
        text = report.read_text()
        assert not [s for s in secrets if s in text], f"a secret leaked into {report}"
