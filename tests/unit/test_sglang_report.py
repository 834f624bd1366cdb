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
