"""Router drift and verify through the router (plugins/module_utils/router/drift.py,
sglang_router_verify.py): what the router host shows against the inventory, item by item, and the
fleet's benchmark against the sum of its replicas. The real router and release parser run in
tests/lab/test_router_lab.py; here the host's views are given."""

import http.server
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.router.drift import (
    compare,
    drift_report,
    observe,
    redact_router_argv,
)
from ansible_collections.sglang.fleet.plugins.module_utils.router.verify import (
    RouterVerifyError,
    compare_pd,
    load_reports,
    plan,
    plan_pd,
)
from ansible_collections.sglang.fleet.plugins.module_utils.router.verify import compare as verify_compare

REPO = pathlib.Path(__file__).resolve().parents[2]
VENV = "/opt/ml-env/sglang-router-0.3.2"
A, B = "http://10.0.0.11:30000", "http://10.0.0.12:30000"
ARGV = ["--worker-urls", A, B, "--policy", "round_robin", "--port", "8080"]
RUNNING = [f"{VENV}/bin/python", "-m", "sglang_router.launch_router", *ARGV]
PARSED = {"policy": "round_robin", "port": 8080, "worker_urls": [A, B], "api_key": None}


def desired(**over):
    return {"host": "router", "version": "0.3.2", "venv": VENV, "service": "sglang-router", "argv": ARGV,
            "parsed": PARSED, "workers": {A: "rep1", B: "rep2"}, "workers_group": "sglang_servers", **over}


def observed(**over):
    return {"service": {"installed": True, "unit_file_state": "enabled", "active_state": "active", "main_pid": 42},
            "unit": RUNNING, "running": RUNNING, "workers_error": None,
            "workers": [{"url": A, "id": "id-a", "is_healthy": True}, {"url": B, "id": "id-b", "is_healthy": True}],
            **over}


def test_a_router_as_the_inventory_says_is_in_sync():
    report = drift_report(desired(), observed(), {"parsed": dict(PARSED)})
    assert report["in_sync"] is True and report["items"] == [] and report["lines"] == ["router: in sync"]


def test_a_worker_taken_out_and_one_the_inventory_does_not_know_are_one_item_each():
    seen = observed(workers=[{"url": A, "id": "id-a", "is_healthy": True},
                             {"url": "http://rep1:30000", "id": "id-x", "is_healthy": True}])
    items = compare(desired(), seen, {"parsed": dict(PARSED)})
    assert [(i["what"], i["desired"], i["actual"]) for i in items] == [
        (f"worker {B} (rep2)", "routed (rep2 of sglang_servers)", "missing from the router's /workers"),
        ("worker http://rep1:30000", "not routed (no host of sglang_servers has this URL)", "routed (router worker id id-x)")]
    assert items[0]["fix"].startswith("run deploy.yml -l rep2")
    assert items[1]["fix"].startswith("DELETE /workers/id-x on the router")


def test_an_unhealthy_worker_and_an_api_that_does_not_answer():
    sick = observed(workers=[{"url": A, "id": "id-a", "is_healthy": True}, {"url": B, "id": "id-b", "is_healthy": False}])
    assert [i["what"] for i in compare(desired(), sick, {"parsed": dict(PARSED)})] == [f"worker {B} (rep2) healthy"]
    down = observed(workers=None, workers_error="GET http://127.0.0.1:8080/workers failed: refused")
    assert [(i["what"], i["actual"]) for i in compare(desired(), down, {"parsed": dict(PARSED)})] == [
        ("router workers", "GET http://127.0.0.1:8080/workers failed: refused")]


def test_a_flag_that_differs_is_an_item_and_secrets_are_never_compared():
    running = {"parsed": {**PARSED, "policy": "random", "api_key": "<redacted>"}}
    items = compare(desired(parsed={**PARSED, "api_key": "other"}), observed(), running)
    assert [(i["what"], i["desired"], i["actual"]) for i in items] == [("policy", "round_robin", "random")]
    assert items[0]["fix"].startswith("run router.yml -l router")


def test_worker_urls_in_argv_venv_and_pending_restart():
    other = ["/opt/ml-env/sglang-router-0.3.1/bin/python", "-m", "sglang_router.launch_router", "--worker-urls", A,
             "--policy", "round_robin", "--port", "8080"]
    items = compare(desired(), observed(running=other), {"parsed": {**PARSED, "worker_urls": [A]}})
    assert [i["what"] for i in items] == ["running venv", "worker_urls",
                                          "pending restart (the unit on disk differs from the running process)"]
    assert items[0]["actual"] == "/opt/ml-env/sglang-router-0.3.1 -m sglang_router.launch_router"
    assert (items[1]["desired"], items[1]["actual"]) == ([A, B], [A])
    assert B in items[2]["actual"] and "0.3.1" in items[2]["actual"]


def test_the_router_runs_through_the_launcher_the_unit_names():
    launcher = "/usr/local/lib/sglang-fleet/sglang_launch.py"
    launched = [f"{VENV}/bin/python", launcher, "sglang_router.launch_router", *ARGV]
    want = desired(launcher=launcher)
    assert drift_report(want, observed(unit=launched, running=launched), {"parsed": dict(PARSED)})["in_sync"] is True
    # an older unit (-m, no launcher: the key would have to be in argv) is drift, with the fix
    items = compare(want, observed(), {"parsed": dict(PARSED)})
    assert [(i["what"], i["desired"], i["actual"]) for i in items] == [
        ("running venv", f"{VENV} {launcher} sglang_router.launch_router", f"{VENV} -m sglang_router.launch_router")]
    assert items[0]["fix"].startswith("run router.yml -l router")


def test_a_stopped_or_missing_router():
    stopped = observed(service={"installed": True, "unit_file_state": "enabled", "active_state": "failed", "main_pid": 0},
                       running=None, workers=None)
    assert [(i["what"], i["actual"]) for i in compare(desired(), stopped, None)] == [("service active", "failed")]
    gone = observed(service={"installed": False, "unit_file_state": "", "active_state": "inactive", "main_pid": 0})
    assert [i["what"] for i in compare(desired(), gone, None)] == ["service installed"]


def test_secret_values_are_masked_in_every_form():
    argv = ["--api-key", "s3cret", "--oracle-password=pw", "--control-plane-api-keys", "k1", "k2", "--policy", "random"]
    assert redact_router_argv(argv) == ["--api-key", "<redacted>", "--oracle-password=<redacted>",
                                        "--control-plane-api-keys", "<redacted>", "<redacted>", "--policy", "random"]
    report = drift_report(desired(argv=argv), observed(), {"parsed": dict(PARSED)})
    assert "s3cret" not in json.dumps(report) and "pw" not in json.dumps(report["desired"])


class Workers(http.server.BaseHTTPRequestHandler):
    """GET /workers, behind the key as the real router with --api-key (401 without it)."""
    body = b""
    key = "router-key"

    def do_GET(self):  # noqa: N802
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            self.send_response(401)
            self.end_headers()
            return
        self.send_response(200 if self.path == "/workers" else 404)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_observe_reads_the_service_the_process_and_the_workers(tmp_path):
    unit = tmp_path / "sglang-router.service"
    unit.write_text("[Service]\nExecStart=" + " \\\n    ".join(RUNNING[:3] + ["--api-key", "s3cret"]) + "\n")
    (tmp_path / "proc" / "42").mkdir(parents=True)
    (tmp_path / "proc" / "42" / "cmdline").write_bytes("\0".join(RUNNING[:3] + ["--api-key", "s3cret"]).encode() + b"\0")
    Workers.body = json.dumps({"workers": [{"id": "id-a", "url": A, "is_healthy": True, "load": 0}], "total": 1}).encode()
    server = http.server.HTTPServer(("127.0.0.1", 0), Workers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        def run(argv):
            assert argv == ["systemctl", "show", "sglang-router", "-p", "ActiveState", "-p", "MainPID", "-p", "UnitFileState"]
            return 0, "ActiveState=active\nMainPID=42\nUnitFileState=enabled\n", ""
        url = f"http://127.0.0.1:{server.server_port}"
        seen = observe(run, "sglang-router", str(unit), url, proc=str(tmp_path / "proc"), api_key=Workers.key)
        keyless = observe(run, "sglang-router", str(unit), url, proc=str(tmp_path / "proc"))
    finally:
        server.shutdown()
    assert keyless["workers"] is None and "HTTP Error 401" in keyless["workers_error"]
    assert seen["running"] == RUNNING[:3] + ["--api-key", "<redacted>"] == seen["unit"]
    assert seen["workers"] == [{"url": A, "id": "id-a", "is_healthy": True}] and seen["workers_error"] is None


def replica_report(out_tok_s, api="completions", model="m"):
    return {"bench": [{"api": api, "model": model, "input_len": 128, "output_len": 64, "repeats": 2, "concurrency": c,
                       "num_prompts": 2 * c, "warmup": {"requests": c}} for c in (1, 4)],
            "levels": [{"concurrency": c, "output_tok_s": out_tok_s * c, "request_s": c / 2, "ttft_ms_p50": 100.0 * c,
                        "e2e_ms_p50": 1000.0 * c} for c in (1, 4)]}


def test_verify_plans_the_replicas_workload_times_their_number():
    workload = plan({"rep1": replica_report(50), "rep2": replica_report(60), "rep3": replica_report(55)})
    assert (workload["api"], workload["model"], workload["input_len"], workload["output_len"], workload["repeats"]) == (
        "completions", "m", 128, 64, 2)
    assert workload["levels"] == [{"replica_concurrency": 1, "concurrency": 3, "num_prompts": 6, "warmup": 3},
                                  {"replica_concurrency": 4, "concurrency": 12, "num_prompts": 24, "warmup": 12}]


def test_verify_refuses_replicas_verified_differently_or_not_at_all(tmp_path):
    with pytest.raises(RouterVerifyError, match=r"different workloads \(rep1: .*; rep2: .*api': 'chat'"):
        plan({"rep1": replica_report(50), "rep2": replica_report(50, api="chat")})
    (tmp_path / "rep1").mkdir()
    (tmp_path / "rep1" / "verify-latest.json").write_text(json.dumps(replica_report(50)))
    with pytest.raises(RouterVerifyError, match=r"no readable verify report for rep2 .* Run verify.yml -l rep2 first"):
        load_reports(str(tmp_path), ["rep1", "rep2"])


def test_verify_puts_the_fleet_next_to_the_sum_of_its_replicas():
    reports = {"rep1": replica_report(50), "rep2": replica_report(60)}
    bench = [{"output_throughput": 99.0, "request_throughput": 0.9, "ttft_ms": {"p50": 120.0}, "e2e_ms": {"p50": 1100.0},
              "completed": 4, "failed": 0},
             {"output_throughput": 330.0, "request_throughput": 3.5, "ttft_ms": {"p50": 420.0}, "e2e_ms": {"p50": 4100.0},
              "completed": 16, "failed": 0}]
    report = verify_compare("router", plan(reports), bench, reports, 0.8)
    first, second = report["levels"]
    assert (first["concurrency"], first["replicas_output_tok_s"], first["ratio"]) == (2, 110.0, 0.9)
    assert (second["concurrency"], second["replicas_output_tok_s"], second["ratio"]) == (8, 440.0, 0.75)
    assert (second["replicas_ttft_ms_p50"], second["replicas_e2e_ms_p50"]) == (400.0, 4000.0)
    assert report["passed"] is False and report["failures"] == [
        "c=8: 330.0 tok/s through the router is 0.75 x the sum of its 2 replicas (440.0 tok/s, each at c=4), below 0.80 "
        "(sglang_router_verify_min_ratio): check the router's policy and its host's CPU"]
    assert report["metrics"] == {"output_tok_s@2": 99.0, "output_tok_s@8": 330.0}


PD_SETTINGS = {"concurrency": [1, 4], "input_len": 512, "output_len": 256, "requests_per_stream": 2,
               "warmup_per_stream": 1, "repeats": 3, "api": "completions", "min_output_tok_s": {"1": 40}}


def test_a_pd_router_is_verified_end_to_end_against_its_floors():
    """A PD pair has no per-server verify to sum: its router's benchmark is the workload of
    sglang_router_verify_pd, gated on each level's floor and on failed requests."""
    workload = plan_pd(PD_SETTINGS)
    assert workload["levels"] == [{"concurrency": 1, "replica_concurrency": 1, "num_prompts": 2, "warmup": 1},
                                  {"concurrency": 4, "replica_concurrency": 4, "num_prompts": 8, "warmup": 4}]
    assert (workload["api"], workload["input_len"], workload["output_len"], workload["repeats"]) == ("completions", 512, 256, 3)
    bench = [{"output_throughput": 35.5, "request_throughput": 0.14, "ttft_ms": {"p50": 90.0}, "e2e_ms": {"p50": 7000.0},
              "completed": 2, "failed": 0},
             {"output_throughput": 130.0, "request_throughput": 0.5, "ttft_ms": {"p50": 150.0}, "e2e_ms": {"p50": 7900.0},
              "completed": 7, "failed": 1}]
    report = compare_pd("router", workload, bench, PD_SETTINGS["min_output_tok_s"])
    assert report["mode"] == "pd" and report["passed"] is False
    assert report["failures"] == [
        "c=1: 35.5 tok/s through the PD router, below its floor 40.0 (sglang_router_verify_pd.min_output_tok_s)",
        "c=4: 1 request(s) failed through the PD router"]
    assert report["line"] == ("router: FAIL through the PD router: c=1 35.5 tok/s out (floor 40.0), TTFT p50 90 ms, "
                              "e2e p50 7000 ms; c=4 130.0 tok/s out, TTFT p50 150 ms, e2e p50 7900 ms")
    assert report["metrics"] == {"output_tok_s@1": 35.5, "output_tok_s@4": 130.0}
    ok = compare_pd("router", workload, [{**b, "output_throughput": 50.0, "failed": 0} for b in bench], {})
    assert ok["passed"] is True and ok["gates"][0]["message"] == "no failed request"


@pytest.mark.parametrize("settings, message", [
    ({**PD_SETTINGS, "concurrency": []}, "one or more levels"),
    ({k: v for k, v in PD_SETTINGS.items() if k != "input_len"}, "missing or has a bad 'input_len'"),
    ({**PD_SETTINGS, "repeats": "many"}, "missing or has a bad"),
])
def test_a_bad_pd_verify_setting_is_refused_with_what_it_needs(settings, message):
    with pytest.raises(RouterVerifyError, match=message):
        plan_pd(settings)


def test_the_fleet_report_shows_the_router_row_from_its_drift_and_verify(tmp_path):
    """`make report`'s row for a router: its release and healthy workers (drift), its throughput next to
    its replicas' sum (verify through the router); no GPU, audit or roofline columns of its own."""
    reports = {"rep1": replica_report(50), "rep2": replica_report(60)}
    bench = [{"output_throughput": 99.0, "request_throughput": 0.9, "ttft_ms": {"p50": 120.0}, "e2e_ms": {"p50": 1100.0},
              "completed": 4, "failed": 0},
             {"output_throughput": 418.0, "request_throughput": 3.5, "ttft_ms": {"p50": 420.0}, "e2e_ms": {"p50": 4100.0},
              "completed": 16, "failed": 0}]
    sick = [{"url": A, "id": "id-a", "is_healthy": True}, {"url": B, "id": "id-b", "is_healthy": False}]
    folder = tmp_path / "router"
    folder.mkdir()
    (folder / "verify-latest.json").write_text(json.dumps(verify_compare("router", plan(reports), bench, reports, 0.8)))
    (folder / "drift-latest.json").write_text(json.dumps(drift_report(desired(), observed(workers=sick),
                                                                      {"parsed": dict(PARSED)})))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fleet_report.py"), "--reports", str(tmp_path), "router"],
                          capture_output=True, text=True, check=False, timeout=120)
    row = [line for line in proc.stdout.splitlines() if line.startswith("| router ")]
    assert row == ["| router | router 0.3.2 | - | - | 1/2 workers healthy | - | - | PASS | 1 difference | - | - | - | - | "
                   "c=2: 99 tok/s out, 0.90 x the sum of 2 replicas; c=8: 418 tok/s out, 0.95 x the sum of 2 replicas | - |"]
    assert proc.returncode == 1, proc.stdout + proc.stderr  # drifted: the unhealthy worker


def test_the_fleet_report_row_of_a_pd_router_reads_its_end_to_end_levels(tmp_path):
    workload = plan_pd(PD_SETTINGS)
    bench = [{"output_throughput": 41.0, "request_throughput": 0.16, "ttft_ms": {"p50": 90.0}, "e2e_ms": {"p50": 6200.0},
              "completed": 2, "failed": 0},
             {"output_throughput": 150.0, "request_throughput": 0.6, "ttft_ms": {"p50": 140.0}, "e2e_ms": {"p50": 6800.0},
              "completed": 8, "failed": 0}]
    folder = tmp_path / "router"
    folder.mkdir()
    (folder / "verify-latest.json").write_text(json.dumps(compare_pd("router", workload, bench, {"1": 40})))
    (folder / "drift-latest.json").write_text(json.dumps(drift_report(desired(), observed(), {"parsed": dict(PARSED)})))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fleet_report.py"), "--reports", str(tmp_path), "router"],
                          capture_output=True, text=True, check=False, timeout=120)
    row = [line for line in proc.stdout.splitlines() if line.startswith("| router ")]
    assert row == ["| router | router 0.3.2 | - | - | 2/2 workers healthy | - | - | PASS | in sync | - | - | - | - | "
                   "c=1: 41 tok/s out, the PD pair end to end; c=4: 150 tok/s out, the PD pair end to end | - |"], proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr


def fake_router_proc(tmp_path, started_at):
    """A /proc where process 42 is the real router: its cmdline overwritten with its title
    (sglang-router 0.3.2 launch_router.py:32 setproctitle), started at `started_at`."""
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cmdline").write_bytes(b"sglang::router" + b"\0" * 40)
    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S"] + ["0"] * 18 + [str(int((started_at - 1_000_000) * ticks))] + ["0"] * 20
    (proc / "42" / "stat").write_text("42 (python -m sglang) " + " ".join(fields) + "\n")
    (proc / "stat").write_text("cpu  1 2 3\nbtime 1000000\n")
    return proc


@pytest.mark.parametrize("unit_age_s, pending", [(60, False), (-60, True)])
def test_a_renamed_router_runs_the_unit_it_started_from(tmp_path, unit_age_s, pending):
    unit = tmp_path / "sglang-router.service"
    unit.write_text("[Service]\nExecStart=" + " \\\n    ".join(RUNNING) + "\n")
    started = time.time() - 600
    os.utime(unit, (started - unit_age_s, started - unit_age_s))
    proc = fake_router_proc(tmp_path, started)

    def run(argv):
        return 0, "ActiveState=active\nMainPID=42\nUnitFileState=enabled\n", ""
    seen = observe(run, "sglang-router", str(unit), "http://127.0.0.1:9", timeout=1, proc=str(proc))
    assert seen["running"] == RUNNING and seen["unit_newer_than_process"] is pending
    assert seen["running_from"].startswith("the unit (42 renamed itself 'sglang::router'")
    seen["workers"], seen["workers_error"] = observed()["workers"], None
    items = compare(desired(), seen, {"parsed": dict(PARSED)})
    assert [i["what"] for i in items] == (["pending restart (the unit on disk differs from the running process)"]
                                          if pending else [])
