"""drift.yml on lab hosts of its own (10.89.82.0/24, containers sglang-drift-*).

inventories/lab copied to a scratch inventory; `lab/lab.py up/down --prefix sglang-drift` (other
prefixes are never touched); lab/prepare.yml and deploy.yml without the benchmark. Then: the
fleet is in sync (also under --check, changed=0); ct129's unit edited by hand and restarted
(mem_fraction_static 0.88 -> 0.80) makes drift.yml fail naming the setting, both values and the
fix, while the other hosts stay in sync; deploy.yml -l ct129 brings it back and drift passes.
Reports go to a temp folder, never reports/. Needs podman and the lab image (make lab-image).
"""
import json
import re

import pytest
from lab_fleet import BIN, deployed_lab_fleet, recap, run, unflow

pytestmark = pytest.mark.lab

HOSTS = ("ct129", "h200x1", "h200x2")


def recaps(out):
    return {h: {k: recap(out, h)[k] for k in ("changed", "failed")} for h in HOSTS}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with deployed_lab_fleet(tmp_path_factory.mktemp("drift-lab"), "sglang-drift", "10.89.82.",
                            deploy_args=("--skip-tags", "sglang_verify")) as fleet:
        yield fleet


def latest(reports, host):
    return json.loads((reports / host / "drift-latest.json").read_text())


def test_drift_in_sync_then_hand_edit_then_deploy_brings_it_back(lab):
    play, reports = lab.play, lab.reports

    # a fresh deploy is in sync, with and without --check, and drift never changes anything
    for mode in ([], ["--check"]):
        rc, out = play("drift.yml", *mode)
        assert rc == 0, out
        flat = unflow(out)
        assert "drift: 3 hosts in sync, 0 drifted" in flat
        for host in ("ct129", "h200x1", "h200x2"):
            assert f"{host}: in sync" in flat
        assert recaps(out) == {h: {"changed": 0, "failed": 0} for h in HOSTS}
    report = latest(reports, "ct129")
    assert report["in_sync"] is True and report["check_mode"] is True
    assert report["running"]["venv"] == "/opt/ml-env/sglang-0.5.11"
    assert report["installed"]["version"] == "0.5.11" and report["installed"]["marker"] == "matches"
    assert report["service"]["active_state"] == "active" and report["service"]["unit_file_state"] == "enabled"

    # by hand on ct129: another memory fraction in the unit, reloaded and restarted
    lab.ssh("ct129", "sed -i 's/--mem-fraction-static 0.88/--mem-fraction-static 0.80/' /etc/systemd/system/sglang.service"
               " && systemctl daemon-reload && systemctl restart sglang")
    assert "--mem-fraction-static\n0.80\n" in lab.ssh("ct129", "tr '\\0' '\\n' < /proc/$(pgrep -of sglang_launch)/cmdline")
    rc, out = play("drift.yml")
    flat = unflow(out)
    assert rc == 2, out
    assert ("ct129: mem_fraction_static: desired 0.88, actual 0.8 -> fix: run deploy.yml -l ct129") in flat
    assert "drift: 2 hosts in sync, 1 drifted (ct129: 1)" in flat
    assert "ct129 drifted from the inventory" in flat
    assert recaps(out) == {"ct129": {"changed": 0, "failed": 1}, "h200x1": {"changed": 0, "failed": 0},
                          "h200x2": {"changed": 0, "failed": 0}}
    report = latest(reports, "ct129")
    assert report["items"] == [{"what": "mem_fraction_static", "desired": 0.88, "actual": 0.8,
                                "fix": "run deploy.yml -l ct129"}]
    assert latest(reports, "h200x1")["in_sync"] is True
    rc, table = run([BIN / "python", "scripts/fleet_report.py", "--reports", reports, "ct129", "h200x1"])
    assert rc == 1, table
    assert re.search(r"^\| ct129 \|.*\| 1 difference \|", table, re.M), table
    assert re.search(r"^\| h200x1 \|.*\| in sync \|", table, re.M), table

    # deploy.yml puts the inventory's unit back and restarts; drift passes again
    rc, out = play("deploy.yml", "-l", "ct129", "--skip-tags", "sglang_verify")
    assert rc == 0, out
    rc, out = play("drift.yml", "-l", "ct129")
    assert rc == 0, out
    assert "drift: 1 host in sync, 0 drifted" in unflow(out)
    assert latest(reports, "ct129")["in_sync"] is True
