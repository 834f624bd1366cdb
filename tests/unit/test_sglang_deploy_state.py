"""A host in sync with its last complete deploy (plugins/module_utils/release/deploy_state.py, plugins/action/
sglang_deploy_state.py): what is saved, what counts as a difference, and what the fingerprint holds."""

import hashlib
import importlib.util
import json
import os
import stat
import subprocess
import time

import pytest
from ansible_run import REPO, run_module

from ansible_collections.sglang.fleet.plugins.module_utils.release import records
from ansible_collections.sglang.fleet.plugins.module_utils.release.deploy_state import (
    check,
    file_differences,
    load,
    save,
    snapshot,
    verify_reason,
)

spec = importlib.util.spec_from_file_location("deploy_state_action", REPO / "plugins" / "action" / "sglang_deploy_state.py")
action = importlib.util.module_from_spec(spec)
spec.loader.exec_module(action)


@pytest.fixture
def host(tmp_path):
    """What a complete deploy leaves: a unit, an EnvironmentFile, a folder and the ml-env link."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "sglang.service").write_text("[Service]\nExecStart=/opt/ml-env/sglang-0.5.11/bin/python\n")
    env = tmp_path / "etc" / "sglang.env"
    env.write_text('SGLANG_API_KEY="k1"\n')
    env.chmod(0o600)
    (tmp_path / "sglang-0.5.11").mkdir()
    (tmp_path / "current").symlink_to(tmp_path / "sglang-0.5.11")
    paths = [str(tmp_path / "etc" / "sglang.service"), str(env), str(tmp_path / "etc"), str(tmp_path / "current")]
    return tmp_path, paths


def test_the_record_is_private_and_saving_the_same_deploy_again_is_no_change(host, tmp_path):
    _root, paths = host
    state = tmp_path / "state"
    record = snapshot("f1", paths)
    assert save(str(state), record) is True
    assert stat.S_IMODE((state / "deployed.json").stat().st_mode) == 0o600
    assert save(str(state), snapshot("f1", paths)) is False
    assert load(str(state)) == json.loads(json.dumps(record))
    assert file_differences(load(str(state))) == []


@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: (r / "etc" / "sglang.service").write_text("[Service]\nExecStart=/bin/false\n"),
     "sglang.service changed since the last deploy (content)"),
    (lambda r: (r / "etc" / "sglang.env").chmod(0o644), "sglang.env changed since the last deploy: a file 0o600"),
    (lambda r: (r / "etc" / "sglang.env").unlink(), "sglang.env changed since the last deploy: a file 0o600"),
    (lambda r: ((r / "current").unlink(), (r / "current").symlink_to(r / "elsewhere")),
     "current changed since the last deploy: a link to"),
], ids=["unit-edited", "env-readable", "env-removed", "link-moved"])
def test_every_change_since_the_deploy_is_named(host, change, expected):
    root, paths = host
    saved = json.loads(json.dumps(snapshot("f1", paths)))
    change(root)
    found = file_differences(saved)
    assert len(found) == 1 and expected in found[0], found


def test_a_missing_service_account_is_a_difference(host):
    _root, paths = host
    saved = json.loads(json.dumps(snapshot("f1", paths, user="root", group="root")))
    assert file_differences(saved) == []
    saved["accounts"]["user"] = ["sglang-gone", 4242]
    assert file_differences(saved) == ["the service account sglang-gone:root changed since the last deploy"]


def test_no_record_or_other_inputs_means_the_whole_deploy(host, tmp_path):
    _root, paths = host
    state = str(tmp_path / "state")
    assert check(state, "f1", "sglang-test-none", [], "")[0].startswith("no complete deploy is recorded in ")
    save(state, snapshot("f1", paths))
    assert check(state, "f2", "sglang-test-none", [], "") == [
        "the inventory's variables or the project's code changed since the last complete deploy"]
    # Same inputs and files, but the service is not running (no such unit here): still not in sync.
    reasons = check(state, "f1", "sglang-test-none", [], "")
    assert reasons and all("sglang-test-none" in r for r in reasons), reasons


def test_the_inputs_digest_holds_the_deploys_inputs_and_not_batches_or_reports():
    names = ["sglang_version", "sglang_args", "ml_env_profile", "sglang_service_secrets", "sglang_verify_min_tok_s",
             "sglang_rollout_batches", "sglang_report_dir", "sglang_audit_report_dir", "sglang_preflight_passed",
             "_sglang_service_argv", "ansible_host", "lab_model"]
    assert action.input_names(names) == ["ml_env_profile", "sglang_args", "sglang_service_secrets",
                                         "sglang_verify_min_tok_s", "sglang_version"]
    base = action.inputs_digest({"sglang_args": {"tp_size": 2}}, "c1")
    assert base == action.inputs_digest({"sglang_args": {"tp_size": 2}}, "c1")
    assert base != action.inputs_digest({"sglang_args": {"tp_size": 1}}, "c1")
    assert base != action.inputs_digest({"sglang_args": {"tp_size": 2}}, "c2")


def test_the_code_digest_follows_the_code_and_not_its_caches_or_docs(tmp_path):
    (tmp_path / "roles" / "r" / "__pycache__").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "main.yml").write_text("a: 1\n")
    first = action.code_digest(str(tmp_path), ("roles",))
    (tmp_path / "roles" / "r" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (tmp_path / "roles" / "r" / "y.pyc").write_bytes(b"\0")
    (tmp_path / "roles" / "r" / "README.md").write_text("a README edit is no new deploy\n")
    assert action.code_digest(str(tmp_path), ("roles",)) == first
    (tmp_path / "roles" / "r" / "main.yml").write_text("a: 2\n")
    assert action.code_digest(str(tmp_path), ("roles",)) != first


def fingerprint_of(extra_vars):
    """The fingerprint the action plugin computes for a host with these variables (no look at the host)."""
    rc, result, out = run_module({"state": "check", "skip_reason": "not looked at"}, module="sglang_deploy_state",
                                 extra_vars=extra_vars)
    assert rc == 0 and result["in_sync"] is False and result["reasons"] == ["not looked at"], out
    return result["fingerprint"]


def test_the_action_plugin_fingerprints_the_hosts_variables_as_templated():
    base = {"sglang_version": "0.5.11", "sglang_args": {"tp_size": 2}, "sglang_service_secrets": {"SGLANG_API_KEY": "k1"}}
    first = fingerprint_of(base)
    assert fingerprint_of({**base, "sglang_rollout_batches": [1], "sglang_report_dir": "/tmp/r"}) == first
    assert fingerprint_of({**base, "sglang_verify_min_output_tok_s": 5}) != first  # its checks run again
    assert fingerprint_of({**base, "sglang_service_secrets": {"SGLANG_API_KEY": "k2"}}) != first  # a rotated key
    assert fingerprint_of({**base, "sglang_args": "{{ {'tp_size': 1 + 1} }}"}) == first  # as templated
    assert fingerprint_of({**base, "sglang_args": {"tp_size": 1}}) != first


def test_the_module_saves_and_then_finds_the_record(host, tmp_path):
    _root, paths = host
    state = str(tmp_path / "state")
    rc, result, out = run_module({"state": "save", "state_dir": state, "fingerprint": "f1", "paths": paths},
                                 module="sglang_deploy_state")
    assert rc == 0 and result["changed"] is True, out
    assert load(state)["fingerprint"] == "f1"
    rc, result, out = run_module({"state": "check", "state_dir": state, "fingerprint": "f1",
                                  "service": "sglang-test-none"}, module="sglang_deploy_state")
    assert rc == 0 and result["in_sync"] is False, out
    assert result["machine_id"] and os.path.exists(state)
    assert not any("changed since the last deploy" in r for r in result["reasons"]), result["reasons"]


def test_a_host_in_sync_is_still_compared_with_the_others_for_two_names_of_one_machine():
    spec = importlib.util.spec_from_file_location("args_filters", REPO / "plugins" / "filter" / "sglang_args.py")
    filters = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(filters)
    hostvars = {"ct129": {"sglang_release_in_sync": {"in_sync": True, "machine_id": "machine-id a"}},
                "ct129-alias": {"sglang_service_machine_id": "machine-id a"},
                "h200x1": {"sglang_service_machine_id": "machine-id b"}}
    hosts = list(hostvars)
    assert filters.sglang_same_machine(hosts, hostvars, "ct129-alias") == ["ct129"]
    assert filters.sglang_same_machine(hosts, hostvars, "ct129") == ["ct129-alias"]
    assert filters.sglang_same_machine(hosts, hostvars, "h200x1") == []


@pytest.fixture
def deployed(tmp_path):
    """A host as a complete deploy of ct129's flags on 0.5.11 leaves it, its server process running
    (a real process, whose start time restart_pending reads) and its record saved."""
    from wheels import ml_env_on_disk  # noqa: PLC0415

    from ansible_collections.sglang.fleet.plugins.module_utils.host.args import systemd_quote, to_argv  # noqa: PLC0415

    root = tmp_path / "ml-env"
    venv, lock = ml_env_on_disk(root)
    args = {"model_path": "/models/qwen", "tp_size": 2, "port": 30000}
    launcher, entry = "/usr/local/lib/sglang-fleet/sglang_launch.py", "sglang.launch_server"
    argv = [f"{venv}/bin/python", launcher, entry, *to_argv(args)]
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nExecStart=" + " ".join(systemd_quote(w) for w in argv) + "\n")
    os.utime(unit, (time.time() - 60, time.time() - 60))  # written well before its process started:
    proc = subprocess.Popen(["sleep", "120"])              # no restart pending
    desired = {"host": "ct129", "version": "0.5.11", "venv": str(venv), "env_root": str(root), "entrypoint": entry,
               "args": args, "unit_file": str(unit), "launcher": launcher,
               "lock_file": str(lock)}
    save(str(tmp_path / "state"), snapshot("f1", [str(unit), str(root / "current")]))
    yield tmp_path, desired, argv, proc.pid
    proc.kill()
    proc.wait()


def running(tmp_path, pid, argv):
    """systemd's view of the service (active, enabled, MainPID) and /proc/<pid>/cmdline as drift reads it."""
    cmdline = tmp_path / "proc" / str(pid) / "cmdline"
    cmdline.parent.mkdir(parents=True, exist_ok=True)
    cmdline.write_bytes(b"\0".join(w.encode() for w in argv) + b"\0")
    return lambda cmd: (0, f"ActiveState=active\nUnitFileState=enabled\nNeedDaemonReload=no\nMainPID={pid}\n", "")


@pytest.mark.wheels
def test_deploy_is_in_sync_exactly_when_drift_is(deployed):
    """Deploy's "in sync" is drift's plus its own record: a running server whose flags differ from the
    unit while every file the deploy left is as saved (a hand-started server, a hand edit reverted
    without a restart) is drift, so deploy does not skip the host; the same host running the unit's
    flags is in sync for both."""
    from ansible_collections.sglang.fleet.plugins.module_utils.drift.host_drift import (  # noqa: PLC0415
        desired_state,
        drift_report,
        observe,
    )

    tmp_path, desired, argv, pid = deployed
    unit = desired["unit_file"]
    i = argv.index("--tp-size")
    for served, in_sync in ((argv, True), (argv[:i + 1] + ["3"] + argv[i + 2:], False)):
        run = running(tmp_path, pid, served)
        reasons = check(str(tmp_path / "state"), "f1", "sglang", [unit], "", desired=desired, run=run,
                        proc=str(tmp_path / "proc"))
        src, observed = observe(desired_state(**desired), run, proc=str(tmp_path / "proc"))
        report = drift_report(src, desired_state(**desired), observed)
        assert (reasons == [], report["in_sync"]) == (in_sync, in_sync), (reasons, report["lines"])
        if not in_sync:
            assert reasons[0].startswith("drift: tp_size: desired 2, actual 3 -> fix: ")
            assert check(str(tmp_path / "state"), "f1", "sglang", [unit], "", run=run) == []  # the record alone misses it


@pytest.mark.wheels
@pytest.mark.parametrize(("damage", "finding"), [
    (lambda f: os.truncate(f, os.path.getsize(f) - 1), "size"),
    (lambda f: os.utime(f, (time.time(), time.time() + 5)), "modified"),
])
def test_a_staged_model_file_drift_finds_takes_the_host_out_of_sync(deployed, damage, finding):
    """README: "a host that drift.yml reports as drifted is never skipped". The staged model's files are
    part of drift's comparison (roles/sglang_drift's _sglang_drift_model), so deploy's in-sync check
    reports a truncated or rewritten weight file, as drift does, and the host gets the whole deploy
    (whose staging sends the file again) instead of "nothing to do"."""
    from ansible_collections.sglang.fleet.plugins.module_utils.model.files import mark  # noqa: PLC0415

    tmp_path, desired, argv, pid = deployed
    folder = tmp_path / "models" / "qwen"
    folder.mkdir(parents=True)
    weights = folder / "model.safetensors"
    weights.write_bytes(b"w" * 4096)
    lock = {"format": 1, "repo": "Qwen/Qwen3.6-27B", "source": None, "revision": "qwen",
            "files": [{"path": "model.safetensors", "size": 4096,
                       "sha256": hashlib.sha256(b"w" * 4096).hexdigest()}]}
    mark(str(folder), lock, "sizes", "20261206T000000Z")
    desired = {**desired, "model": {"path": str(folder), "mode": "sizes"}}
    run = running(tmp_path, pid, argv)

    def reasons():
        return check(str(tmp_path / "state"), "f1", "sglang", [desired["unit_file"]], "", desired=desired, run=run,
                     proc=str(tmp_path / "proc"))

    assert reasons() == []
    damage(str(weights))
    found = reasons()
    assert len(found) == 1 and found[0].startswith("drift: model file model.safetensors: "), found
    assert ("4096 bytes, actual 4095 bytes" in found[0]) if finding == "size" else ("modified since" in found[0])


def test_a_host_in_sync_is_verified_only_while_its_release_is_not_proven_good(tmp_path):
    """Verify is what promotes a release to the last known good (records.record), so deploy verifies a host
    in sync whose current release is not good, or that has no last known good; otherwise only when asked."""
    state = str(tmp_path / "state")
    assert verify_reason(state) == "it has no last known good release yet"
    unit, env = tmp_path / "sglang.service", tmp_path / "sglang.env"
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    env.write_text("")
    meta = {"version": "0.5.11", "args": {"tp_size": 2}}
    rid = records.record(state, str(unit), str(env), meta, "unverified", "20261206T000000Z")[1]["id"]
    assert verify_reason(state) == "it has no last known good release yet"
    records.record(state, str(unit), str(env), meta, "good", "20261206T000100Z")
    assert verify_reason(state) == ""
    assert verify_reason(state, always=True) == "sglang_release_verify_in_sync is true"
    unit.write_text("[Service]\nExecStart=/bin/false\n")   # a new release, current but not verified
    other = records.record(state, str(unit), str(env), meta, "unverified", "20261206T000200Z")[1]["id"]
    assert other != rid and verify_reason(state) == f"its release {other} is unverified"


def test_deploys_in_sync_check_gives_drift_everything_drift_compares():
    """deploy's in-sync check passes drift's comparison the same desired state drift.yml passes it
    (roles/sglang_drift/tasks/check.yml), so nothing drift compares can be missing from "in sync" (the
    staged model's files were, until #41). What is not the desired state: the server's address and key
    (server_url, api_key: passed beside it), the probe's timeout and drift's report."""
    import yaml  # noqa: PLC0415

    in_sync = yaml.safe_load((REPO / "roles" / "sglang_release" / "tasks" / "in_sync.yml").read_text())
    drift = yaml.safe_load((REPO / "roles" / "sglang_drift" / "tasks" / "check.yml").read_text())
    deploy_args = next(t for t in in_sync if "sglang.fleet.sglang_deploy_state" in t)["sglang.fleet.sglang_deploy_state"]
    drift_args = next(t for t in drift if "sglang.fleet.sglang_drift" in t)["sglang.fleet.sglang_drift"]
    beside = {"server_url", "api_key", "timeout", "report_dir", "report_stamp", "report_check_mode"}
    assert set(drift_args) - beside == set(deploy_args["desired"])
    assert {"server_url", "api_key"} <= set(deploy_args)
