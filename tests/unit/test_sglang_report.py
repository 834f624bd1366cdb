"""The shared report writer (plugins/action/sglang_report.py), run as a playbook runs it."""

import json
import stat

from ansible_run import run_module


def test_a_report_and_its_latest_copy_are_private_and_written_under_check(tmp_path):
    folder = tmp_path / "reports" / "ct129"
    report = {"host": "ct129", "status": "pass", "decode_tok_s": 53.8, "note": "é"}
    rc, result, out = run_module({"dir": str(folder), "kind": "verify", "stamp": "2026-12-01T08:00:00Z",
                                  "report": report}, check=True, module="sglang_report")
    assert rc == 0, out
    assert result["changed"] is False
    assert sorted(p.name for p in folder.iterdir()) == ["verify-2026-12-01T08:00:00Z.json", "verify-latest.json"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text()) == report


def test_a_second_run_replaces_latest_and_keeps_the_first_stamp(tmp_path):
    for stamp, value in (("2026-12-01T08:00:00Z", 1), ("2026-12-01T09:00:00Z", 2)):
        rc, _result, out = run_module({"dir": str(tmp_path), "kind": "audit", "stamp": stamp,
                                       "report": {"run": value}}, module="sglang_report")
        assert rc == 0, out
    assert json.loads((tmp_path / "audit-latest.json").read_text()) == {"run": 2}
    assert json.loads((tmp_path / "audit-2026-12-01T08:00:00Z.json").read_text()) == {"run": 1}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report-")]


def test_a_stamp_that_is_a_path_is_refused_and_nothing_is_written(tmp_path):
    rc, result, out = run_module({"dir": str(tmp_path / "h"), "kind": "audit", "stamp": "../../etc/x",
                                  "report": {"a": 1}}, module="sglang_report")
    assert rc != 0
    assert "must be a time stamp without '/'" in result["msg"], out
    assert not (tmp_path / "h").exists()


def drift(tmp_path, **extra):
    """sglang.fleet.sglang_drift as drift.yml's task runs it (the action plugin, then the module on localhost)."""
    args = {"host": "ct129", "version": "0.5.11", "venv": str(tmp_path / "venv"), "entrypoint": "sglang.launch_server",
            "args": {"model_path": "/m", "tp_size": 2}, "unit_file": str(tmp_path / "sglang.service"), **extra}
    return run_module(args, module="sglang_drift")


def test_drift_writes_its_report_through_the_shared_writer(tmp_path):
    """The host's drift report: the module's report, stamped with report_stamp and report_check_mode."""
    folder = tmp_path / "reports" / "ct129"
    rc, result, out = drift(tmp_path, report_dir=str(folder), report_stamp="20261201T080000Z", report_check_mode=True)
    assert rc == 0, out
    assert result["report_paths"] == [str(folder / "drift-20261201T080000Z.json"), str(folder / "drift-latest.json")]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text()) == {**result["report"], "generated_at": "20261201T080000Z", "check_mode": True}
    assert result["in_sync"] is False and "report_check_mode" not in result["invocation"]["module_args"]


def test_drift_without_report_dir_or_in_fleet_mode_writes_nothing(tmp_path):
    rc, result, out = drift(tmp_path)
    assert rc == 0 and "report_paths" not in result, out
    folder = tmp_path / "fleet"
    rc, result, out = run_module({"fleet": {"ct129": None}, "report_dir": str(folder), "report_stamp": "20261201T080000Z",
                                  "report_check_mode": False}, module="sglang_drift")
    assert rc == 0, out
    assert result["summary"]["line"] == "drift: 0 hosts in sync, 0 drifted, 1 not checked (ct129)"
    assert "report_paths" not in result and not folder.exists()


def test_a_drift_report_that_cannot_be_written_fails_with_drifts_message(tmp_path):
    rc, result, out = drift(tmp_path, report_dir=str(tmp_path / "r"), report_stamp="a/b", report_check_mode=False)
    assert rc != 0
    assert result["msg"] == ("sglang_drift could not write the drift report: report stamp 'a/b' must be a time stamp "
                             "without '/' or spaces"), out
