"""Release records on a host (plugins/module_utils/release/records.py), on a scratch folder standing for /."""

import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.host.args import fingerprint
from ansible_collections.sglang.fleet.plugins.module_utils.release.records import (
    ReleaseError,
    prune,
    read_state,
    record,
    release_id,
    restart_pending,
    restore,
)

ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_num_steps": 3}


@pytest.fixture
def host(tmp_path):
    """A host's files: unit, env file, venvs and the state folder."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "ml-env").mkdir()
    h = {"state": str(tmp_path / "state"), "unit": str(tmp_path / "etc" / "sglang.service"),
         "env": str(tmp_path / "etc" / "sglang.env"), "root": str(tmp_path / "ml-env"),
         "link": str(tmp_path / "ml-env" / "current")}
    return h


def deploy(h, version, unit_text, env_text="SGLANG_API_KEY=\"k1\"\n"):
    """What sglang_service does: a venv for the version, the unit and env file on disk."""
    os.makedirs(os.path.join(h["root"], f"sglang-{version}"), exist_ok=True)
    with open(h["unit"], "w") as fh:
        fh.write(unit_text)
    with open(h["env"], "w") as fh:
        fh.write(env_text)
    return {"version": version, "venv": os.path.join(h["root"], f"sglang-{version}"), "args": ARGS,
            "verify": {"passed": True, "metrics": {"decode_tok_s@1": 53.8}}}


def test_a_good_release_becomes_current_and_last_known_good_and_a_second_record_changes_nothing(host):
    meta = deploy(host, "0.5.11", "ExecStart=a\n")
    changed, rec = record(host["state"], host["unit"], host["env"], meta, "good", "20261130T100000Z")
    rid = release_id("0.5.11", host["unit"], host["env"])
    assert changed and rec["id"] == rid and rid.startswith("0.5.11-")
    assert rec["fingerprint"] == fingerprint("0.5.11", ARGS)["id"]
    assert (rec["status"], rec["recorded_at"], rec["promoted_at"]) == ("good", "20261130T100000Z", "20261130T100000Z")
    state = read_state(host["state"])
    assert (state["current"], state["last_good"]["id"], state["previous_good"]) == (rid, rid, None)
    # the copies: the unit as it was, the secrets root only
    folder = os.path.join(host["state"], "releases", rid)
    assert open(os.path.join(folder, "unit")).read() == "ExecStart=a\n"
    assert oct(os.stat(os.path.join(folder, "env")).st_mode & 0o777) == "0o600"
    assert record(host["state"], host["unit"], host["env"], meta, "good", "20261130T110000Z")[0] is False


def test_unverified_and_failed_releases_never_become_last_known_good(host):
    good = deploy(host, "0.5.11", "ExecStart=a\n")
    record(host["state"], host["unit"], host["env"], good, "good", "T1")
    record(host["state"], host["unit"], host["env"], deploy(host, "0.5.11", "ExecStart=b\n"), "unverified", "T2")
    state = read_state(host["state"])
    assert state["last_good"]["id"] != state["current"]
    record(host["state"], host["unit"], host["env"], deploy(host, "0.5.18", "ExecStart=c\n"), "failed", "T3")
    state = read_state(host["state"])
    assert (state["last_good"]["version"], state["last_good"]["recorded_at"]) == ("0.5.11", "T1")
    assert [r["status"] for r in state["releases"]] == ["good", "unverified", "failed"]


def test_a_deploy_without_verify_does_not_demote_a_good_release(host):
    meta = deploy(host, "0.5.11", "ExecStart=a\n")
    record(host["state"], host["unit"], host["env"], meta, "good", "T1")
    changed, rec = record(host["state"], host["unit"], host["env"], {**meta, "verify": None}, "unverified", "T2")
    assert (changed, rec["status"], rec["verify"]["passed"]) == (False, "good", True)


def test_restore_puts_the_unit_env_and_venv_link_back_byte_for_byte(host):
    record(host["state"], host["unit"], host["env"], deploy(host, "0.5.11", "ExecStart=old\n", "K=\"old\"\n"),
           "good", "T1")
    lkg = read_state(host["state"])["last_good"]
    record(host["state"], host["unit"], host["env"], deploy(host, "0.5.18", "ExecStart=new\n", "K=\"new\"\n"),
           "failed", "T2")
    os.symlink(os.path.join(host["root"], "sglang-0.5.18"), host["link"])
    changed, rec = restore(host["state"], lkg["id"], host["unit"], host["env"], host["link"])
    assert changed and rec["id"] == lkg["id"]
    assert open(host["unit"]).read() == "ExecStart=old\n" and open(host["env"]).read() == "K=\"old\"\n"
    assert oct(os.stat(host["env"]).st_mode & 0o777) == "0o600"
    assert os.readlink(host["link"]) == os.path.join(host["root"], "sglang-0.5.11")
    assert read_state(host["state"])["current"] == lkg["id"]
    assert restore(host["state"], lkg["id"], host["unit"], host["env"], host["link"])[0] is False


def test_restore_refuses_an_unknown_id_and_a_pruned_venv_with_what_to_do(host):
    with pytest.raises(ReleaseError, match=r"^'\.\./x' is not a release id \(e\.g\. 0\.5\.11-0123456789ab"):
        restore(host["state"], "../x", host["unit"], host["env"])
    with pytest.raises(ReleaseError, match=r"^no release 0\.5\.11-0123456789ab on this host \(releases\.yml lists them\)$"):
        restore(host["state"], "0.5.11-0123456789ab", host["unit"], host["env"])
    meta = deploy(host, "0.5.11", "ExecStart=a\n")
    _, rec = record(host["state"], host["unit"], host["env"], meta, "good", "T1")
    os.rmdir(meta["venv"])
    with pytest.raises(ReleaseError, match=r"runs from .*sglang-0\.5\.11, which is gone \(pruned or removed\): deploy "
                                           r"sglang_version 0\.5\.11 again instead$"):
        restore(host["state"], rec["id"], host["unit"], host["env"], host["link"])


def test_prune_keeps_the_newest_records_the_current_and_last_good_and_their_venvs(host):
    ids = []
    for i, version in enumerate(["0.5.9", "0.5.10", "0.5.11", "0.5.13", "0.5.18"]):
        _, rec = record(host["state"], host["unit"], host["env"], deploy(host, version, f"ExecStart={i}\n"),
                        "good" if version == "0.5.9" else "unverified", f"T{i}")
        ids.append(rec["id"])
    os.makedirs(os.path.join(host["root"], "locks"))  # not a venv: never pruned
    removed = prune(host["state"], 2, host["root"])
    kept = [r["id"] for r in read_state(host["state"])["releases"]]
    assert kept == [ids[0], ids[3], ids[4]]  # 0.5.9 is the last known good
    assert sorted(removed) == sorted([ids[1], ids[2], os.path.join(host["root"], "sglang-0.5.10"),
                                      os.path.join(host["root"], "sglang-0.5.11")])
    assert sorted(os.listdir(host["root"])) == ["locks", "sglang-0.5.13", "sglang-0.5.18", "sglang-0.5.9"]


def test_records_are_readable_json_with_who_and_what(host):
    meta = {**deploy(host, "0.5.11", "ExecStart=a\n"), "controller": {"user": "ops", "commit": "abc1234"},
            "model_path": "/models/Qwen3.6-27B"}
    _, rec = record(host["state"], host["unit"], host["env"], meta, "good", "T1")
    on_disk = json.loads(open(os.path.join(host["state"], "releases", rec["id"], "release.json")).read())
    assert on_disk == rec
    assert {k: on_disk[k] for k in ("controller", "model_path", "venv", "unit_sha256")} == {
        "controller": {"user": "ops", "commit": "abc1234"}, "model_path": "/models/Qwen3.6-27B",
        "venv": meta["venv"], "unit_sha256": __import__("hashlib").sha256(b"ExecStart=a\n").hexdigest()}


def test_restart_pending_when_the_unit_is_newer_than_the_running_process(tmp_path, monkeypatch):
    """A real process stands for the service's main process; systemctl answers with its PID."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "systemctl").write_text(f"#!/bin/sh\necho MainPID={proc.pid}\n")
        (fake / "systemctl").chmod(0o755)
        monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
        unit = tmp_path / "sglang.service"
        unit.write_text("old")
        os.utime(unit, (time.time() - 3600, time.time() - 3600))
        assert restart_pending("sglang", [str(unit), str(tmp_path / "missing.env")]) == ""
        time.sleep(0.2)
        unit.write_text("new")
        assert restart_pending("sglang", [str(unit)]) == (
            f"{unit} changed after the running process started (pid {proc.pid}): a restart is pending")
        (fake / "systemctl").write_text("#!/bin/sh\necho MainPID=0\n")
        assert restart_pending("sglang", [str(unit)]) == ""  # not running: starting it is no restart
        # a MainPID the caller read already (one systemctl show) is used as it is
        assert restart_pending("sglang", [str(unit)], str(proc.pid)).startswith(f"{unit} changed after")
        assert restart_pending("sglang", [str(unit)], "0") == ""
    finally:
        proc.kill()
        proc.wait()


def test_failed_deploys_never_push_the_previous_good_releases_out(host):
    """rollback.yml goes to the previous good release: three failures after it must not prune it."""
    ids = []
    for i, (version, status) in enumerate([("0.5.9", "good"), ("0.5.10", "good"), ("0.5.11", "failed"),
                                           ("0.5.11", "failed"), ("0.5.11", "failed")]):
        _, rec = record(host["state"], host["unit"], host["env"], deploy(host, version, f"ExecStart={i}\n"),
                        status, f"T{i}")
        ids.append(rec["id"])
    prune(host["state"], 2, host["root"])
    state = read_state(host["state"])
    assert [r["id"] for r in state["releases"]] == [ids[0], ids[1], ids[3], ids[4]]
    assert state["previous_good"]["id"] == ids[1]
    assert sorted(os.listdir(host["root"])) == ["sglang-0.5.10", "sglang-0.5.11", "sglang-0.5.9"]


def test_a_release_line_names_the_model_revision_it_ran():
    from ansible_collections.sglang.fleet.plugins.filter.sglang_release import release_lines
    rec = {"id": "0.5.23-0123456789ab", "status": "good", "version": "0.5.23", "fingerprint": "f" * 16,
           "model": {"repo": "Qwen/Qwen3-8B", "revision": "c26a71b480cfee239ca8fac22f412e9a85482d2b", "source": None}}
    (line,) = release_lines([rec], current=rec["id"])
    assert "fingerprint ffffffffffffffff  model Qwen/Qwen3-8B@c26a71b480cf  not verified" in line
    assert "model" not in release_lines([{**rec, "model": None}])[0]
