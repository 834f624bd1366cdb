"""audit.yml, deploy.yml's audit and drift.yml on lab hosts of their own (10.89.79.0/24, sglang-audit-*).

Starts its own copy of the lab fleet (never the sglang-lab or sglang-mol containers), deployed as the
rollout modules deploy it (rollout_support.rollout_fleet: one deploy per test run, the others start from
its snapshot), then: the ct129 audit passes and shows what the seeds found; a removed flag stops
deploy.yml before anything changes; drift: the fleet is in sync (also under --check, changed=0),
ct129's unit edited by hand and restarted (mem_fraction_static 0.88 -> 0.80) makes drift.yml fail
naming the setting, both values and the fix while the other hosts stay in sync, and deploy.yml -l
ct129 brings it back; last, a simulator fault makes the runtime audit fail with a clear message.
Reports go to a temp folder, never reports/. Needs podman and the lab image (`make lab-image`).
"""
import json
import re

import pytest
import yaml
from lab_fleet import BIN, recap, run, unflow
from rollout_support import rollout_fleet

pytestmark = pytest.mark.lab

CT129_ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
              "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
              "mem_fraction_static": 0.88, "context_length": 131072, "disable_radix_cache": True}
HOSTS = ("ct129", "h200x1", "h200x2")


def recaps(out):
    return {h: {k: recap(out, h)[k] for k in ("changed", "failed")} for h in HOSTS}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with rollout_fleet(tmp_path_factory, "sglang-audit", "10.89.79.") as fleet:
        yield fleet


def test_audit_ct129_shows_what_the_seeds_found(fleet):
    rc, out = fleet.play("audit.yml", "-l", "ct129")
    assert rc == 0, out
    text = unflow(out)
    assert "hardware: 2x NVIDIA RTX A6000 (SM86), declared in the inventory (sglang_hardware), not detected" in text
    assert ("prefill/piecewise CUDA graph: auto-disabled - Qwen3_5ForConditionalGeneration is multimodal "
            "(configs/model_config.py multimodal_model_archs); sglang 0.5.11 disables piecewise CUDA graph for "
            "multimodal models; rule sglang/srt/server_args.py:1229; override --enforce-piecewise-cuda-graph") in text
    assert "FlashInfer all-reduce fusion: unavailable on this hardware - NVIDIA RTX A6000 is SM86" in text
    assert "single-batch overlap: off by default" in text and "two-batch overlap: off by default" in text
    assert "speculative decoding: EAGLE 3/1/4, as predicted" in text
    assert "expectations: 7 checked, all met" in text
    assert "expectations against the server: 7 checked, all met" in text
    # the inventory's own assertion on the installed source (sglang_source_assertions)
    assert "source assertions (sglang_source_assertions): 1 checked, all passed" in text
    assert "pass cuda_graph_max_bs default is 32 on 35-60 GB GPUs at TP < 4" in text
    assert recap(out, "ct129") == {"ok": recap(out, "ct129")["ok"], "changed": 0, "failed": 0, "unreachable": 0}
    latest = json.loads((fleet.reports / "ct129" / "audit-latest.json").read_text())
    assert (latest["host"], latest["phase"], latest["ok"]) == ("ct129", "runtime", True)
    assert latest["runtime"]["endpoint"] == "/server_info"
    assert (fleet.reports / "ct129" / f"audit-{latest['generated_at']}.json").is_file()


def test_audit_and_deploy_under_check_change_nothing(fleet):
    """On hosts of all three flag eras (a plain re-deploy changing nothing: the rollout tests)."""
    for playbook in ("audit.yml", "deploy.yml"):
        rc, out = fleet.play(playbook, "--check", "--diff")
        assert rc == 0, out
        assert [recap(out, h)["changed"] for h in ("ct129", "h200x2", "h200x1")] == [0, 0, 0], out
    for host in HOSTS:
        assert f"{host}: in sync with its last complete deploy" in unflow(out), out


# deploy.yml --check --diff of a change, on a host of each era: a flag (context_length) or the release.
FLAG_CHANGES = {"ct129": ("context_length", 131072, 8192), "h200x2": ("context_length", 32768, 8192)}
VERSION_CHANGES = {"h200x1": ("0.5.23", "0.5.18")}
# What a preview must leave as it was: the unit, the running server, the venvs, the release records.
HOST_STATE = ("systemctl show sglang -p MainPID; sha256sum /etc/systemd/system/sglang.service; "
              "readlink /opt/ml-env/current; ls /opt/ml-env; find /var/lib/sglang-fleet -type f | sort | xargs sha256sum")


def preview(fleet, changes):
    """deploy.yml --check --diff with each host's host_vars changed as `changes` says ({host: "flag" | "version"})."""
    saved = {}
    for host, kind in changes.items():
        path = fleet.inventory.parent / "host_vars" / f"{host}.yml"
        saved[path] = path.read_text()
        data = yaml.safe_load(saved[path])
        if kind == "flag":
            name, _, value = FLAG_CHANGES[host]
            data["sglang_args"] = {**data["sglang_args"], name: value}
        else:
            data["sglang_version"] = VERSION_CHANGES[host][1]
        path.write_text(yaml.safe_dump(data))
    try:
        return fleet.play("deploy.yml", "--check", "--diff")
    finally:
        for path, text in saved.items():
            path.write_text(text)


def test_deploy_check_diff_previews_a_change_on_every_era_and_leaves_the_host_as_it_was(fleet):
    """A flag change on era A and B hosts (whose /server_info has no launch_command to show a pending
    restart), a release change on the era C one, in one play (in sync on all three: the test above). The
    preview passes: the diff, what a real run would restart or build, and the phases that need the
    restarted server said to be skipped (not a runtime mismatch with the server still on the old flags, nor
    a rollback decision); the hosts are untouched."""
    changes = {"ct129": "flag", "h200x2": "flag", "h200x1": "version"}
    before = {host: fleet.ssh(host, HOST_STATE) for host in HOSTS}
    rc, out = preview(fleet, changes)
    assert rc == 0, out
    flat = unflow(out)
    assert "MISMATCH" not in out and "rolled back" not in out, out
    for host, kind in changes.items():
        assert recap(out, host)["failed"] == 0 and recap(out, host)["changed"] > 0, out
        assert f"{host} (--check): a real run would restart sglang: its unit changed" in flat, out
        assert (f"{host} (--check): skipped because nothing was restarted: readiness, runtime audit, verify, "
                "release record") in flat, out
        if kind == "flag":
            name, old, new = FLAG_CHANGES[host]
            flag = "--" + name.replace("_", "-")
            assert f"-    {flag} {old} \\" in out and f"+    {flag} {new} \\" in out, out
        else:
            old, new = VERSION_CHANGES[host]
            assert f"+ExecStart=/opt/ml-env/sglang-{new}/bin/python " in out, out
            assert (f"{host} (--check): a real run would build /opt/ml-env/sglang-{new} from its lock (offline, "
                    "every hash checked); check mode cannot build it, nor read what it would hold") in flat, out
            assert (f"{host}: not audited under --check: /opt/ml-env/sglang-{new} is not built yet (check mode "
                    "builds nothing; a real run builds it, then audits it)") in flat, out
    assert {host: fleet.ssh(host, HOST_STATE) for host in HOSTS} == before


def test_removed_flag_stops_deploy_before_anything_changes(fleet):
    before = fleet.ssh("h200x1", "systemctl show sglang -p MainPID; sha256sum /etc/systemd/system/sglang.service")
    extra = {"sglang_args": {"model_path": "/models/Qwen3-8B", "tp_size": 1, "context_length": 32768,
                             "enforce_piecewise_cuda_graph": True}}
    rc, out = fleet.play("deploy.yml", "-l", "h200x1", "-e", json.dumps(extra))
    assert rc == 2, out
    assert "h200x1: sglang 0.5.23 would refuse to start with these arguments (nothing was changed):" in out
    assert "--enforce-piecewise-cuda-graph is not a flag of sglang 0.5.23" in out
    assert recap(out, "h200x1")["changed"] == 0
    after = fleet.ssh("h200x1", "systemctl show sglang -p MainPID; sha256sum /etc/systemd/system/sglang.service")
    assert after == before


def latest(reports, host):
    return json.loads((reports / host / "drift-latest.json").read_text())


def test_drift_in_sync_then_hand_edit_then_deploy_brings_it_back(fleet):
    lab, play, reports = fleet, fleet.play, fleet.reports

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


def test_fault_disabling_the_prefill_graph_fails_the_runtime_audit(fleet):
    # ct129 asks for the prefill graph (--enforce-piecewise-cuda-graph) and expects it ...
    extra = json.dumps({"sglang_args": {**CT129_ARGS, "enforce_piecewise_cuda_graph": True},
                        "sglang_expect": {"speculative_num_steps": 3, "piecewise_cuda_graph": "on"}})
    # ... but the server silently turns it off (simulator fault knob).
    rc, out = fleet.play("lab/prepare.yml", "-l", "ct129", "-e",
                  json.dumps({"lab_sim_faults": {"disable_optimization": "piecewise_cuda_graph"}}))
    assert rc == 0, out
    try:
        rc, out = fleet.play("deploy.yml", "-l", "ct129", "-e", extra)   # the unit changes: restart
        assert rc == 2, out
        assert "prefill/piecewise CUDA graph: on - --enforce-piecewise-cuda-graph skips the auto-disable rules" \
            in unflow(out)
        rc, out = fleet.play("audit.yml", "-l", "ct129", "-e", extra)
        assert rc == 2, out
        msg = out[out.index("fatal: [ct129]"):]
        assert ("ct129: SGLang resolved prefill/piecewise CUDA graph differently than predicted: predicted on, "
                "rule sglang/srt/server_args.py:1196, server says disable_piecewise_cuda_graph=true. Something at "
                "start-up that the static audit does not model changed it: read the service log, and compare "
                "sglang_args with the server's launch_command") in msg
        assert ("ct129: sglang_expect.piecewise_cuda_graph: expected on, the server runs off (server_info "
                "disable_piecewise_cuda_graph=true).") in msg
        latest = json.loads((fleet.reports / "ct129" / "audit-latest.json").read_text())
        assert latest["ok"] is False and len(latest["runtime"]["mismatches"]) == 1
    finally:
        rc, out = fleet.play("lab/prepare.yml", "-l", "ct129")
        assert rc == 0, out
        rc, out = fleet.play("deploy.yml", "-l", "ct129", "--skip-tags", "sglang_verify")
        assert rc == 0, out
