"""sglang_fleet runs real playbooks through ansible-runner and reads the outcome from its job events.

Fixture playbooks (tests/fixtures/runner/) run against the controller itself (connection local) and
against 127.0.0.1:1, where nothing listens (unreachable); drift.yml runs for real, in check mode,
against the controller, which has no SGLang: two drift items, the host fails.
"""

import json
import pathlib

import pytest

from sglang_fleet import HostResult, TaskFailure, run_playbook
from sglang_fleet.__main__ import main
from sglang_fleet.runner import REPO, exit_code, failure_message, read_events

FIXTURES = REPO / "tests" / "fixtures" / "runner"
INVENTORY = str(FIXTURES / "hosts.yml")
SECRET = "canary-7f3e9b1d-not-for-output"  # hosts.yml's fixture_secret
COMPARE = "Compare the service, the running argv, the unit, the venv and the server with the inventory"  # drift's task
CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
REFUSED = ("Task failed: Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 1: "
           "Connection refused")


def test_ok_playbook_json_and_exit_code(capsys):
    rc = main([str(FIXTURES / "ok.yml"), "-i", INVENTORY, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["rc"] == 0 and out["ansible_rc"] == 0 and out["runner_status"] == "successful"
    assert out["error"] == "" and out["artifact_dir"] == ""
    assert out["playbook"] == str(FIXTURES / "ok.yml")
    recap = {"ok": 2, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 0, "rescued": 0, "ignored": 0}
    assert out["hosts"] == {h: {"host": h, **recap, "failures": [], "status": "changed"} for h in ("alpha", "beta")}


def test_check_mode_reaches_the_playbook():
    result = run_playbook(str(FIXTURES / "ok.yml"), inventory=[INVENTORY], limit="alpha", check=True)
    assert result.rc == 0
    # command does not run under --check: skipped, no change
    assert result.hosts == {"alpha": HostResult("alpha", ok=1, skipped=1)}
    assert result.hosts["alpha"].status == "ok"


def test_failed_unreachable_rescued_ignored_and_no_log(tmp_path):
    result = run_playbook(str(FIXTURES / "fail.yml"), inventory=[INVENTORY], artifacts=str(tmp_path))
    assert result.rc == 4 and result.ansible_rc == 4 and result.runner_status == "failed"
    assert result.hosts == {
        "alpha": HostResult("alpha", ok=4, failed=1, skipped=1, rescued=1, ignored=1, failures=[
            TaskFailure("Fail inside a block", "rescued failure"), TaskFailure("Check the disk", "alpha: disk full")]),
        "beta": HostResult("beta", ok=2, failed=1, skipped=1, ignored=1, failures=[
            TaskFailure("Use the secret", CENSORED)]),
        "nowhere": HostResult("nowhere", unreachable=1, failures=[TaskFailure("Reach the host", REFUSED)]),
    }
    assert [h.status for h in result.hosts.values()] == ["failed", "failed", "unreachable"]

    # no_log: the runner's events carry censored results; nothing this package returns holds the secret
    assert SECRET not in json.dumps(result.to_dict())
    events = [json.loads(p.read_text()) for p in pathlib.Path(result.artifact_dir, "job_events").glob("*.json")]
    assert len(events) > 20
    assert not [e["event"] for e in events if SECRET in json.dumps(e.get("event_data"))]
    shown = [e for e in events if e["event_data"].get("task") == "Show the secret" and e["event"] == "runner_on_ok"]
    assert [e["event_data"]["res"] for e in shown] == [{"censored": CENSORED}]  # alpha (beta failed before)
    # (ansible-core 2.19's display of a failed no_log task's error still lets its msg into the
    # text output, event "stdout" and the artifacts' stdout: ansible/ansible#85696. The summary
    # is built from event_data only.)
    # the kept artifacts' command file has no copy of the environment
    command = json.loads(pathlib.Path(result.artifact_dir, "command").read_text())
    assert sorted(command) == ["command", "cwd"] and command["cwd"] == str(REPO)
    assert command["command"][0].endswith("ansible-playbook")


def test_failed_host_summary_and_exit_code(capsys):
    rc = main([str(FIXTURES / "fail.yml"), "-i", INVENTORY, "-l", "local"])
    out = capsys.readouterr().out
    assert rc == 2
    assert out == (
        "alpha  failed  ok=4 changed=0 failed=1 unreachable=0 skipped=1 rescued=1 ignored=1\n"
        "    Fail inside a block: rescued failure\n"
        "    Check the disk: alpha: disk full\n"
        "beta   failed  ok=2 changed=0 failed=1 unreachable=0 skipped=1 rescued=0 ignored=1\n"
        f"    Use the secret: {CENSORED}\n"
        "fail.yml: 2 failed (rc 2)\n"
    )
    assert SECRET not in out


def test_no_play_ran_is_an_error_not_a_host_failure():
    result = run_playbook(str(FIXTURES / "ok.yml"), inventory=[INVENTORY], limit="no-such-host")
    assert result.rc == 1 and result.hosts == {}
    assert "no hosts" in result.error, result.error


@pytest.fixture
def local_inventory(tmp_path):
    """The controller itself as the one SGLang server `here` (connection local): it has no SGLang."""
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  children:\n    sglang_servers:\n      hosts:\n        here:\n"
                    "          ansible_connection: local\n"
                    "          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n")
    return path


def test_real_drift_in_check_mode_against_the_controller(tmp_path, local_inventory, capsys):
    """drift.yml as it is (repo ansible.cfg, roles, modules, group_vars), read-only, on this machine."""
    rc = main(["drift", "--check", "-i", str(local_inventory), "-e", f"sglang_report_dir={tmp_path / 'reports'}",
               "-e", "sglang_version=0.5.23", "-e", "sglang_service_name=sglang-fleet-test-absent", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["playbook"] == str(REPO / "drift.yml")
    here = out["hosts"]["here"]
    assert (here["status"], here["changed"], here["failed"]) == ("failed", 0, 1)
    assert here["failures"] == [{
        "task": "Show the host's drift and stop for a host that drifted from the inventory",
        "msg": "here drifted from the inventory (drift: 0 hosts in sync, 1 drifted (here: 2)):\n"
               "here: sglang installed: desired 0.5.23, actual unset -> fix: run deploy.yml -l here "
               "(builds /opt/ml-env/sglang-0.5.23)\n"
               "here: service installed: desired true, actual false -> fix: run deploy.yml -l here "
               "(installs and starts sglang-fleet-test-absent)",
    }]
    assert (tmp_path / "reports" / "here" / "drift-latest.json").is_file()


def test_real_drift_refuses_a_misspelled_variable_before_reading_the_host(tmp_path, local_inventory, capsys):
    """The drift check's own task refuses a misspelled sglang_drift_* name (no separate check task)."""
    rc = main(["drift", "--check", "-i", str(local_inventory), "-e", f"sglang_report_dir={tmp_path / 'reports'}",
               "-e", "sglang_version=0.5.23", "-e", "sglang_drift_fail_on_drfit=false", "--json"])
    here = json.loads(capsys.readouterr().out)["hosts"]["here"]
    assert rc == 2 and here["failures"] == [{
        "task": COMPARE,
        "msg": "unknown variable sglang_drift_fail_on_drfit: did you mean sglang_drift_fail_on_drift?",
    }]
    assert not (tmp_path / "reports" / "here").exists()


def test_real_drift_censors_its_comparison_only_when_it_sends_an_api_key(tmp_path, local_inventory):
    """The comparison is no_log when it sends the server's API key; its variable check stays readable."""
    common = [f"sglang_report_dir={tmp_path / 'reports'}", "sglang_version=0.5.23",
              "sglang_service_name=sglang-fleet-test-absent"]
    result = run_playbook("drift", inventory=[str(local_inventory)], check=True,
                          extra_vars=[*common, f"sglang_drift_api_key={SECRET}", "sglang_drift_fail_on_drfit=false"])
    assert result.hosts["here"].failures == [TaskFailure(
        COMPARE, "unknown variable sglang_drift_fail_on_drfit: did you mean sglang_drift_fail_on_drift?")]
    for key, censored in ((SECRET, True), ("", False)):
        artifacts = tmp_path / f"artifacts-{censored}"
        run_playbook("drift", inventory=[str(local_inventory)], check=True, artifacts=str(artifacts),
                     extra_vars=[*common, f"sglang_drift_api_key={key}"])
        events = [json.loads(p.read_text()) for p in artifacts.glob("*/job_events/*.json")]
        compared = [e["event_data"]["res"] for e in events
                    if e["event"] == "runner_on_ok" and e["event_data"].get("task") == COMPARE]
        assert len(compared) == 1 and ("in_sync" not in compared[0]) is censored, compared
        assert (compared[0].get("censored") == CENSORED) is censored
        output = "".join(p.read_text() for p in [*artifacts.glob("*/job_events/*.json"), *artifacts.glob("*/stdout")])
        assert SECRET not in output


def test_failure_message_and_exit_code_rules():
    assert failure_message({"msg": " boom \n"}) == "boom"
    assert failure_message({"censored": CENSORED, "msg": "x"}) == CENSORED
    assert failure_message({"results": [{"failed": False, "msg": "ok"}, {"failed": True, "msg": "a"},
                                        {"failed": True, "stderr": "b"}], "msg": "One or more items failed"}) == "a; b"
    assert failure_message({"rc": 3}) == "rc 3"
    assert failure_message({}) == "failed (no message)"
    down, bad = HostResult("a", unreachable=1), HostResult("b", failed=1)
    assert exit_code({"a": down, "b": bad}, 4, True) == 4
    assert exit_code({"b": bad}, 2, True) == 2
    assert exit_code({}, 4, False) == 1  # a parse error: ansible-playbook's 4 is not an unreachable host
    assert exit_code({"c": HostResult("c", ok=1)}, 0, True) == 0


def test_events_ignore_ignored_failures_and_read_the_recap():
    events = [
        {"event": "runner_on_failed", "event_data": {"host": "a", "task": "t1", "res": {"msg": "x"},
                                                     "ignore_errors": True}},
        {"event": "runner_on_failed", "event_data": {"host": "a", "task": "t2", "res": {"msg": "y"}}},
        {"event": "playbook_on_stats", "event_data": {"ok": {"a": 3, "b": 1}, "failures": {"a": 1},
                                                      "ignored": {"a": 1}, "changed": {}, "dark": {}}},
    ]
    hosts, stats = read_events(events)
    assert stats["ok"] == {"a": 3, "b": 1}
    assert hosts == {"a": HostResult("a", ok=3, failed=1, ignored=1, failures=[TaskFailure("t2", "y")]),
                     "b": HostResult("b", ok=1)}


def test_unknown_playbook_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["deplo"])
    assert exc.value.code == 2
    assert "unknown playbook 'deplo': one of deploy, audit, verify, drift, releases, rollback, regression or a playbook file" \
        in capsys.readouterr().err


def test_timeout_is_an_error_with_the_reason():
    result = run_playbook(str(FIXTURES / "slow.yml"), inventory=[INVENTORY], timeout=3)
    assert result.runner_status == "timeout" and result.rc == 1 and result.hosts == {}
    assert result.error.splitlines()[0] == "ansible-runner: timed out after 3 s", result.error
