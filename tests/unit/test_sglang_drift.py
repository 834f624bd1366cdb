"""Drift of one host against the real sglang 0.5.11 flag table (the lab's ct129 mirror).

Desired state: ct129's inventory (group_vars + host_vars); observed state: what observe() reads
from systemctl, /proc/<pid>/cmdline, the unit file and the venv, built here by hand or, for
observe() itself, from a scratch venv, unit file and /proc folder.
"""
import json
import pathlib

import pytest
import yaml
from wheels import ml_env_on_disk, sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.drift.host_drift import (
    compare,
    desired_state,
    drift_report,
    fleet_summary,
    observe,
    split_launch,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import (
    REDACTED,
    flag_groups,
    redact_argv,
    systemd_quote,
    to_argv,
)
from ansible_collections.sglang.fleet.plugins.module_utils.source import load_source
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import (
    parse_cmdline,
    parse_show,
    systemd_split,
    unit_exec_start,
)

pytestmark = pytest.mark.wheels

REPO = pathlib.Path(__file__).resolve().parents[2]
COMMON = yaml.safe_load((REPO / "group_vars" / "all" / "sglang.yml").read_text())["sglang_args_common"]
CT129 = yaml.safe_load((REPO / "inventories" / "lab" / "host_vars" / "ct129.yml").read_text())
ARGS = {**COMMON, **CT129["sglang_args"]}
VENV = "/opt/ml-env/sglang-0.5.11"
OLD_VENV = "/opt/ml-env/sglang-0.5.9"
LAUNCHER = "/usr/local/lib/sglang-fleet/sglang_launch.py"
ENTRY = "sglang.launch_server"
DEPLOY = "run deploy.yml -l ct129"


@pytest.fixture(scope="module")
def src():
    return load_source(sglang_source_tree("0.5.11"))


def desired(args=ARGS):
    return desired_state("ct129", "0.5.11", VENV, ENTRY, args, service="sglang", launcher=LAUNCHER,
                         unit_file="/etc/systemd/system/sglang.service")


def launch(sglang_argv, venv=VENV):
    return [f"{venv}/bin/python", LAUNCHER, ENTRY, *sglang_argv]


def observed(running_argv, unit_argv=None, active="active", server=None):
    """What a healthy host shows, running ``running_argv`` (full argv) from a unit with ``unit_argv``."""
    unit_argv = running_argv if unit_argv is None else unit_argv
    return {
        "installed": {"venv": VENV, "version": "0.5.11", "marker": "matches", "current": VENV, "error": None},
        "service": {"installed": True, "unit_file_state": "enabled", "active_state": active,
                    "main_pid": 4242 if active == "active" else 0},
        "unit": {"path": "/etc/systemd/system/sglang.service", "argv": unit_argv},
        "running": {"pid": 4242, **split_launch(running_argv, LAUNCHER)} if active == "active" else None,
        "server": server,
    }


def with_flag(argv, flag, value):
    """``argv`` with the value after ``flag`` replaced."""
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def test_in_sync_when_the_host_runs_the_inventorys_argv(src):
    assert compare(src, desired(), observed(launch(to_argv(ARGS)))) == []


def test_tp_abbreviation_and_order_are_not_drift(src):
    # as typed by hand: --tp for --tp-size, --x=v, flags in reverse order
    typed = []
    for flag, values in reversed(flag_groups(ARGS)):
        flag = "--tp" if flag == "--tp-size" else flag
        typed += [f"{flag}={values[0]}"] if flag == "--mem-fraction-static" else [flag, *values]
    assert typed[:4] == ["--tp", "2", "--speculative-num-steps", "3"] and "--mem-fraction-static=0.88" in typed
    assert compare(src, desired(), observed(launch(typed))) == []


def test_a_changed_mem_fraction_is_drift(src):
    argv = launch(with_flag(to_argv(ARGS), "--mem-fraction-static", "0.80"))
    items = compare(src, desired(), observed(argv))
    assert items == [{"what": "mem_fraction_static", "desired": 0.88, "actual": 0.8, "fix": DEPLOY}]
    report = drift_report(src, desired(), observed(argv))
    assert report["lines"] == [
        "ct129: DRIFTED, 1 difference: mem_fraction_static",
        "ct129: mem_fraction_static: desired 0.88, actual 0.8 -> fix: run deploy.yml -l ct129",
    ]
    assert report["in_sync"] is False and report["differences"] == 1


def test_a_missing_flag_is_drift(src):
    argv = to_argv(ARGS)
    i = argv.index("--context-length")
    items = compare(src, desired(), observed(launch(argv[:i] + argv[i + 2:])))
    assert items == [{"what": "context_length", "desired": 131072, "actual": None, "fix": DEPLOY}]


def test_an_extra_flag_is_drift(src):
    items = compare(src, desired(), observed(launch(to_argv(ARGS) + ["--disable-cuda-graph"])))
    assert items == [{"what": "disable_cuda_graph", "desired": None, "actual": True, "fix": DEPLOY}]
    report = drift_report(src, desired(), observed(launch(to_argv(ARGS) + ["--disable-cuda-graph"])))
    assert report["lines"][1] == ("ct129: disable_cuda_graph: desired unset, actual true -> fix: "
                                  "run deploy.yml -l ct129")


def test_a_host_still_running_the_old_venv(src):
    argv = launch(to_argv(ARGS), venv=OLD_VENV)
    items = compare(src, desired(), observed(argv, unit_argv=launch(to_argv(ARGS))))
    assert items == [
        {"what": "running venv", "desired": VENV, "actual": OLD_VENV,
         "fix": "run deploy.yml -l ct129 (restarts it on sglang 0.5.11)"},
        {"what": "pending restart (the unit on disk differs from the running process)",
         "desired": f"python {VENV}/bin/python (unit)", "actual": f"python {OLD_VENV}/bin/python (running)",
         "fix": "run deploy.yml -l ct129 (renders the inventory's unit and restarts sglang)"},
    ]


def test_unit_changed_but_not_restarted_is_a_pending_restart(src):
    running = launch(to_argv(ARGS))
    unit = launch(with_flag(to_argv(ARGS), "--mem-fraction-static", "0.80"))
    items = compare(src, desired(), observed(running, unit_argv=unit))
    assert items == [{
        "what": "pending restart (the unit on disk differs from the running process)",
        "desired": "mem_fraction_static 0.8 (unit)", "actual": "mem_fraction_static 0.88 (running)",
        "fix": "run deploy.yml -l ct129 (renders the inventory's unit and restarts sglang)"}]
    # the same unit, spelled differently (--tp for --tp-size), is no pending restart
    spelled = launch(["--tp" if w == "--tp-size" else w for w in to_argv(ARGS)])
    assert compare(src, desired(), observed(running, unit_argv=spelled)) == []


def test_secrets_in_the_running_argv_are_redacted(src):
    argv = launch(to_argv(ARGS) + ["--api-key", "sk-live-123", "--admin-api=adm-456"])
    report = drift_report(src, desired(), observed(argv, unit_argv=launch(to_argv(ARGS))))
    text = json.dumps(report)
    assert "sk-live-123" not in text and "adm-456" not in text
    assert [(i["what"], i["desired"], i["actual"]) for i in report["items"]] == [
        ("admin_api_key", None, REDACTED), ("api_key", None, REDACTED),
        ("pending restart (the unit on disk differs from the running process)",
         "admin_api_key unset (unit); api_key unset (unit)", f"admin_api_key {REDACTED} (running); api_key {REDACTED} (running)"),
    ]
    assert report["running"]["sglang_argv"][-3:] == ["--api-key", REDACTED, f"--admin-api={REDACTED}"]
    assert redact_argv(["--api-k", "x", "--port", "1", "--admin-api-key=y"]) == \
        ["--api-k", REDACTED, "--port", "1", f"--admin-api-key={REDACTED}"]


def test_service_stopped_compares_the_unit_instead(src):
    unit = launch(with_flag(to_argv(ARGS), "--context-length", "65536"))
    items = compare(src, desired(), observed(None, unit_argv=unit, active="failed"))
    assert items == [
        {"what": "service active", "desired": "active", "actual": "failed",
         "fix": "run deploy.yml -l ct129 (starts it); if it keeps stopping: journalctl -u sglang"},
        {"what": "unit context_length", "desired": 131072, "actual": 65536, "fix": DEPLOY},
    ]


def test_service_not_installed_and_venv_not_built(src):
    obs = observed(None, active="inactive")
    obs["service"] = {"installed": False, "unit_file_state": "", "active_state": "inactive", "main_pid": 0}
    obs["installed"] = {"venv": VENV, "version": None, "marker": None, "current": None,
                        "error": f"no installed sglang in {VENV}"}
    assert compare(None, desired(), obs) == [
        {"what": "sglang installed", "desired": "0.5.11", "actual": None,
         "fix": f"run deploy.yml -l ct129 (builds {VENV})"},
        {"what": "service installed", "desired": True, "actual": False,
         "fix": "run deploy.yml -l ct129 (installs and starts sglang)"},
    ]


def test_marker_current_and_enabled(src):
    obs = observed(launch(to_argv(ARGS)))
    obs["installed"].update(marker="differs", current=OLD_VENV)
    obs["service"]["unit_file_state"] = "disabled"
    assert [(i["what"], i["desired"], i["actual"]) for i in compare(src, desired(), obs)] == [
        ("ml_env marker", "matches the lock", "differs from the lock (built from another lock)"),
        ("ml_env current", VENV, OLD_VENV),
        ("service enabled", "enabled", "disabled"),
    ]


def test_resolved_settings_only_for_keys_the_argv_agrees_on(src):
    server = {"url": "http://127.0.0.1:30000",
              "resolved": {"tp_size": 2, "speculative_algorithm": "EAGLE", "mem_fraction_static": 0.85,
                           "context_length": 131072, "speculative_num_steps": 3, "disable_cuda_graph": True}}
    items = compare(src, desired(), observed(launch(to_argv(ARGS)), server=server))
    assert items == [{"what": "resolved mem_fraction_static", "desired": 0.88, "actual": 0.85,
                      "fix": "SGLang changed it at start-up: read journalctl -u sglang; audit.yml says why"}]
    unreachable = {"url": "http://127.0.0.1:30000", "error": "cannot reach http://127.0.0.1:30000/server_info"}
    assert compare(src, desired(), observed(launch(to_argv(ARGS)), server=unreachable))[0]["what"] == "server"


def test_parsers():
    assert parse_show("MainPID=12\nActiveState=active\nUnitFileState=enabled\n") == \
        {"MainPID": "12", "ActiveState": "active", "UnitFileState": "enabled"}
    assert parse_cmdline(b"/v/bin/python\0/l.py\0sglang.launch_server\0--tp\x002\0") == \
        ["/v/bin/python", "/l.py", "sglang.launch_server", "--tp", "2"]
    words = ["--json-model-override-args", '{"a": "b c"}', "--x", "50%$HOME", "plain"]
    assert systemd_split(" ".join(systemd_quote(w) for w in words)) == words
    unit = ("[Service]\nExecStart=/v/bin/python /l.py sglang.launch_server \\\n    --model-path /m \\\n"
            "    --tp-size 2\nRestart=on-failure\n")
    assert unit_exec_start(unit) == ["/v/bin/python", "/l.py", "sglang.launch_server", "--model-path", "/m",
                                     "--tp-size", "2"]
    assert split_launch(["/v/bin/python", "-m", "sglang.launch_server", "--tp", "2"], LAUNCHER) == {
        "python": "/v/bin/python", "venv": "/v", "launcher": None, "entrypoint": "sglang.launch_server",
        "sglang_argv": ["--tp", "2"]}


def test_fleet_summary():
    assert fleet_summary({"ct129": {"in_sync": False, "differences": 2}, "h200x1": {"in_sync": True},
                          "h200x2": None}) == {
        "in_sync": ["h200x1"], "drifted": {"ct129": 2}, "unchecked": ["h200x2"],
        "line": "drift: 1 host in sync, 1 drifted (ct129: 2), 1 not checked (h200x2)"}
    assert fleet_summary({"a": {"in_sync": True}, "b": {"in_sync": True}})["line"] == "drift: 2 hosts in sync, 0 drifted"


def test_observe_reads_systemctl_proc_unit_and_venv(tmp_path, src):
    """observe() end to end on scratch files: a venv holding the real 0.5.11 tree, a unit, /proc."""
    root = tmp_path / "ml-env"
    venv, lock = ml_env_on_disk(root)
    argv = [f"{venv}/bin/python", LAUNCHER, ENTRY, *to_argv(ARGS)]
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nExecStart=" + " ".join(systemd_quote(w) for w in argv[:3])
                    + "".join(f" \\\n    {w}" for w in to_argv(ARGS)) + "\n")
    proc = tmp_path / "proc" / "77"
    proc.mkdir(parents=True)
    (proc / "cmdline").write_bytes(b"\0".join(w.encode() for w in argv[:-1] + ["3"]) + b"\0")  # tp 3
    calls = []

    def run(cmd):
        calls.append(cmd)
        return 0, "ActiveState=active\nMainPID=77\nUnitFileState=enabled\n", ""

    want = desired_state("ct129", "0.5.11", str(venv), ENTRY, ARGS, launcher=LAUNCHER, unit_file=str(unit),
                         lock_file=str(lock), env_root=str(root))
    got_src, obs = observe(want, run, proc=str(tmp_path / "proc"))
    assert calls == [["systemctl", "show", "sglang", "-p", "ActiveState", "-p", "MainPID", "-p", "UnitFileState"]]
    assert got_src.version == "0.5.11"
    assert obs["installed"]["marker"] == "matches" and obs["installed"]["current"] == str(venv)
    assert [(i["what"], i["desired"], i["actual"]) for i in compare(got_src, want, obs)] == [
        ("tp_size", 2, 3),
        ("pending restart (the unit on disk differs from the running process)", "tp_size 2 (unit)",
         "tp_size 3 (running)"),
    ]
