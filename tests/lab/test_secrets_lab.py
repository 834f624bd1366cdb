"""A canary secret never leaves the EnvironmentFile (10.89.96.0/24, containers sglang-secret-*).

Its own copy of the lab fleet: ct129 (sglang 0.5.11, era A), h200x2 (0.5.18, era B) and h200x1
(0.5.23, era C; real SGLang 0.5.20+ puts `--api-key <key>` in /server_info's launch_command). The
simulator is as bad as those releases (keys in clear in /server_info, its start-up log of every
server arg). With canary values for SGLANG_API_KEY, SGLANG_ADMIN_API_KEY and HF_TOKEN: deploy.yml,
audit.yml, verify.yml, drift.yml and lab/show.yml at -vvv, and one deploy whose readiness fails so that the
rescue prints the service log. Then every byte of the play output, of the reports folder (history
included) and of the hosts' service logs is searched for the canaries; the runtime audit must pass
(no false "pending restart"). Needs podman and the lab image (make lab-image).
"""
import json
import secrets

import pytest
from lab_fleet import lab_fleet, recap, unflow

pytestmark = pytest.mark.lab

HOSTS = ("ct129", "h200x2", "h200x1")
TAG = secrets.token_hex(6)
CANARIES = {"SGLANG_API_KEY": f"canary-api-{TAG}", "SGLANG_ADMIN_API_KEY": f"canary-admin-{TAG}",
            "HF_TOKEN": f"hf_canary{TAG}"}
# What this test does not need, left out: verify.yml's benchmark kept short (the simulator paces
# tokens exactly), and deploy.yml's rollout in batches (all hosts at once)
SHORT = {"sglang_verify_concurrency": [1], "sglang_verify_repeats": 2, "sglang_verify_requests_per_stream": 1,
         "sglang_rollout_batches": ["100%"]}
LOG = "/var/log/journal/sglang.service.log"   # the lab's journal (lab/README.md)


def leaks(text):
    return sorted(name for name, value in CANARIES.items() if value in text)


def test_a_canary_secret_never_leaves_the_environment_file(tmp_path):
    extra = tmp_path / "secrets.json"
    extra.write_text(json.dumps({"sglang_service_secrets": CANARIES, **SHORT}))
    outputs = {}
    with lab_fleet(tmp_path, "sglang-secret", "10.89.96.") as fleet:
        rc, outputs["prepare"] = fleet.play("lab/prepare.yml")
        assert rc == 0, outputs["prepare"]
        for name, args in (("deploy", ("deploy.yml", "--skip-tags", "sglang_verify")), ("audit", ("audit.yml",)),
                           ("verify", ("verify.yml",)), ("drift", ("drift.yml",)), ("show", ("lab/show.yml",))):
            rc, outputs[name] = fleet.play(*args, "-vvv", "-e", f"@{extra}")
            assert rc == 0, outputs[name][-20000:]

        # the keys are in force (the server refuses a request without one) and reached the host only
        # through the root-only EnvironmentFile
        for host in HOSTS:
            assert fleet.ssh(host, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models") == "401"
            assert fleet.ssh(host, "stat -c '%a %U' /etc/sglang/sglang.env; grep -c canary /etc/sglang/sglang.env") \
                == "600 root\n3\n"
        # the runtime audit passes on all three releases: the key in 0.5.23's launch_command is no pending restart
        for host in HOSTS:
            latest = json.loads((fleet.reports / host / "audit-latest.json").read_text())
            assert (latest["phase"], latest["ok"], latest["runtime"]["restart_pending"]) == ("runtime", True, False)
        h200x1 = json.loads((fleet.reports / "h200x1" / "audit-latest.json").read_text())["runtime"]["resolved"]
        assert "--api-key <redacted> --admin-api-key <redacted>" in h200x1["launch_command"]
        assert "drift: 3 hosts in sync, 0 drifted" in unflow(outputs["drift"])
        assert "sglang 0.5.23 (1x NVIDIA H200, declared)" in unflow(outputs["show"])

        # h200x1 never becomes healthy: the readiness rescue prints the service log (SGLang's own
        # `server_args=` line, key included before the launcher redacts it)
        rc, outputs["prepare-fault"] = fleet.play("lab/prepare.yml", "-l", "h200x1", "-e",
                                                  json.dumps({"lab_sim_faults": {"never_healthy": True}}))
        assert rc == 0, outputs["prepare-fault"]
        fleet.ssh("h200x1", "systemctl restart sglang")
        rc, outputs["deploy-unready"] = fleet.play(
            "deploy.yml", "-l", "h200x1", "--skip-tags", "sglang_verify", "-vvv", "-e", f"@{extra}",
            "-e", "sglang_service_ready_timeout_s=3")
        assert rc == 2, outputs["deploy-unready"][-20000:]
        assert recap(outputs["deploy-unready"], "h200x1")["failed"] == 1
        shown = outputs["deploy-unready"]
        assert "did not answer" in shown and "lines of the service log ---" in shown
        assert "server_args={'model_path': '/models/Qwen3-8B'" in shown and "'api_key': '<redacted>'" in shown

        host_logs = {host: fleet.ssh(host, f"cat {LOG}") for host in HOSTS}
        assert "api_key='<redacted>'" in host_logs["ct129"]          # 0.5.11: server_args=ServerArgs(...)
        assert "'api_key': '<redacted>'" in host_logs["h200x1"]      # 0.5.23: server_args={...}
        reports = {str(p.relative_to(fleet.reports)): p.read_bytes().decode("utf-8", "replace")
                   for p in sorted(fleet.reports.rglob("*")) if p.is_file()}

    assert any(name.endswith("verify-history.jsonl") for name in reports)
    assert {name: leaks(text) for name, text in outputs.items() if leaks(text)} == {}
    assert {name: leaks(text) for name, text in reports.items() if leaks(text)} == {}
    assert {host: leaks(text) for host, text in host_logs.items() if leaks(text)} == {}
