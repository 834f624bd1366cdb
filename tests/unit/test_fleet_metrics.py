"""scripts/fleet_metrics.py on real reports (tests/fixtures/fleet_reports, see its README), read back with
prometheus_client's parser; and scripts/fleet_report.py on the same reports through the shared reader."""

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "fleet_reports"
HOSTS = ("in-sync", "drifted", "failed-verify", "no-verify", "blocked-compat", "speculative")
PY = sys.executable


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fleet_metrics = load_script("fleet_metrics")


def parse(text):
    """{(metric name, ((label, value), ...)): value} through the reference parser; every family is a
    documented gauge."""
    samples = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge" and family.documentation, family.name
        assert family.name.startswith("sglang_fleet_")
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = s.value
    return samples


def series(samples, host):
    """{metric name without prefix, or name{label=value,...} for the labels other than host: value} of one host."""
    out = {}
    for (name, labels), value in samples.items():
        if ("host", host) in labels:
            rest = ",".join(f"{k}={v}" for k, v in labels if k != "host")
            out[name.removeprefix("sglang_fleet_") + (f"{{{rest}}}" if rest else "")] = value
    return out


@pytest.fixture(scope="module")
def fleet():
    text, count = fleet_metrics.fleet_metrics(FIXTURES)
    assert count == len(HOSTS)
    return parse(text)


def stamp(text):
    return fleet_metrics.fleet_reports.stamp_seconds(text)


def test_a_host_in_sync_that_passed_everything(fleet):
    m = series(fleet, "in-sync")  # h200x2 of the demo fleet
    assert {k: v for k, v in m.items() if not k.startswith("report_timestamp")} == {
        "drift_in_sync": 1, "drift_items": 0,
        "verify_passed": 1, "verify_gate_passed{gate=floor}": 1, "verify_gate_passed{gate=history}": 1,
        "verify_last_pass_timestamp_seconds": stamp("20261201T080922Z"),
        "verify_decode_tokens_per_second": 58.5, "verify_decode_floor_tokens_per_second": 50.0,
        "verify_roofline_tokens_per_second": 121.6, "verify_roofline_ratio": 0.481,
        "verify_output_tokens_per_second{concurrency=1}": 57.20153634289457,
        "verify_output_tokens_per_second{concurrency=4}": 221.260732556473,
        "audit_ok": 1, "audit_findings{status=on}": 5, "audit_findings{status=auto-disabled}": 0,
        "audit_findings{status=unavailable on this hardware}": 0, "audit_findings{status=off by default}": 4,
        "compat_status{status=ok,version=0.5.18}": 1, "compat_status{status=unknown,version=0.5.18}": 0,
        "compat_status{status=blocked,version=0.5.18}": 0,
        "compat_checks{status=ok}": 7, "compat_checks{status=unknown}": 0, "compat_checks{status=blocked}": 0,
        "release_info{release=0.5.18-f143f116d7e6,status=good,version=0.5.18}": 1,
        "last_good_release_info{release=0.5.18-f143f116d7e6,version=0.5.18}": 1,
    }
    # no speculative decoding on this host: no accept length series rather than a made-up 0
    assert "verify_accept_length" not in m
    assert m["report_timestamp_seconds{kind=verify}"] == stamp("20261201T080922Z")
    assert m["report_timestamp_seconds{kind=drift}"] == stamp("20261201T081104Z")
    release = os.path.getmtime(FIXTURES / "in-sync" / "release-latest.json")  # no run time of its own
    assert m["report_timestamp_seconds{kind=release}"] == release


def test_a_host_with_speculative_decoding(fleet):
    m = series(fleet, "speculative")  # ct129 of the demo fleet: 2x A6000, MTP 3 steps
    assert m["verify_accept_length"] == 3.006666666666667
    assert m["verify_gate_passed{gate=accept_length}"] == 1
    assert (m["verify_decode_tokens_per_second"], m["verify_roofline_ratio"]) == (53.84, 0.379)


def test_a_drifted_host(fleet):
    m = series(fleet, "drifted")  # ct129 of the lab drift test: mem_fraction_static edited by hand
    assert (m["drift_in_sync"], m["drift_items"]) == (0, 1)
    assert m["audit_findings{status=auto-disabled}"] == 1
    assert m["report_timestamp_seconds{kind=drift}"] == stamp("20261201T052954Z")
    assert not [k for k in m if k.startswith("verify_")]


def test_a_failed_verify_with_speculative_decoding_silently_off(fleet):
    m = series(fleet, "failed-verify")
    assert {k: v for k, v in m.items() if k.startswith("verify_")} == {
        "verify_passed": 0,
        "verify_gate_passed{gate=history}": 1, "verify_gate_passed{gate=accept_length}": 0,
        # the last passing run of verify-history.jsonl, two failed runs ago
        "verify_last_pass_timestamp_seconds": stamp("20261201T054800Z"),
        "verify_decode_tokens_per_second": 22.71, "verify_roofline_tokens_per_second": 47.2,
        "verify_roofline_ratio": 0.481,
        "verify_output_tokens_per_second{concurrency=1}": 22.23495110251861,
        "verify_output_tokens_per_second{concurrency=4}": 85.85552089201525,
    }
    assert m["report_timestamp_seconds{kind=verify}"] == stamp("20261201T055040Z")


def test_a_host_with_no_verify_yet(fleet):
    m = series(fleet, "no-verify")
    assert sorted(k for k in m if k.startswith("report_timestamp")) == [
        "report_timestamp_seconds{kind=compat}", "report_timestamp_seconds{kind=drift}"]
    assert not [k for k in m if k.startswith(("verify_", "audit_", "release_", "last_good_"))]
    assert (m["drift_in_sync"], m["drift_items"]) == (1, 0)


def test_a_blocked_compat_verdict(fleet):
    m = series(fleet, "blocked-compat")
    assert {k: v for k, v in m.items() if k.startswith("compat_")} == {
        "compat_status{status=ok,version=0.5.11}": 0, "compat_status{status=unknown,version=0.5.11}": 0,
        "compat_status{status=blocked,version=0.5.11}": 1,
        "compat_checks{status=ok}": 5, "compat_checks{status=unknown}": 1, "compat_checks{status=blocked}": 1,
    }


def test_last_known_good_is_the_release_promoted_last_not_the_current_one(tmp_path):
    host = tmp_path / "h1"
    host.mkdir()
    good = json.loads((FIXTURES / "in-sync" / "release-latest.json").read_text())
    older = {**good, "id": "0.5.17-aaaaaaaaaaaa", "version": "0.5.17", "promoted_at": "20261101T000000Z"}
    failed = {**good, "id": "0.5.19-bbbbbbbbbbbb", "version": "0.5.19", "status": "failed",
              "recorded_at": "20261202T000000Z"}
    failed.pop("promoted_at")
    for name, record in (("release-20261101T000000Z.json", older), ("release-20261201T080945Z.json", good),
                         ("release-20261202T000000Z.json", failed), ("release-latest.json", failed)):
        (host / name).write_text(json.dumps(record))
    m = series(parse(fleet_metrics.fleet_metrics(tmp_path)[0]), "h1")
    assert m == {"report_timestamp_seconds{kind=release}": os.path.getmtime(host / "release-latest.json"),
                 "release_info{release=0.5.19-bbbbbbbbbbbb,status=failed,version=0.5.19}": 1,
                 "last_good_release_info{release=0.5.18-f143f116d7e6,version=0.5.18}": 1}


def test_label_values_are_escaped(tmp_path):
    odd = 'we"ird\\host'
    (tmp_path / odd).mkdir()
    release = {"id": 'id "1"\nsecond line \\', "version": "0.5.18", "status": "good"}
    (tmp_path / odd / "release-latest.json").write_text(json.dumps(release))
    text = fleet_metrics.fleet_metrics(tmp_path)[0]
    assert 'host="we\\"ird\\\\host"' in text and 'release="id \\"1\\"\\nsecond line \\\\"' in text
    assert parse(text)[("sglang_fleet_release_info", (("host", odd), ("release", release["id"]),
                                                      ("status", "good"), ("version", "0.5.18")))] == 1


def test_unreadable_reports_are_no_reports(tmp_path):
    (tmp_path / "h1").mkdir()
    (tmp_path / "h1" / "verify-latest.json").write_text('{"passed": tru')  # cut short
    (tmp_path / "h1" / "drift-latest.json").write_text("[]")
    (tmp_path / "h1" / "verify-history.jsonl").write_text('{"passed": true, "generated_at": "20261201T000000Z"}\nnot json\n')
    (tmp_path / "empty").mkdir()
    text, count = fleet_metrics.fleet_metrics(tmp_path)
    assert (text, count) == ("", 0)


def test_the_textfile_is_replaced_atomically_and_readable_by_node_exporter(tmp_path):
    path = fleet_metrics.write_textfile("# old\n", tmp_path)
    assert path == str(tmp_path / "sglang_fleet.prom")
    with pytest.raises(TypeError):
        fleet_metrics.write_textfile(None, tmp_path)  # a failed write leaves the previous file, no temporary
    assert Path(path).read_text() == "# old\n"
    fleet_metrics.write_textfile("# new\n", tmp_path)
    assert Path(path).read_text() == "# new\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert os.listdir(tmp_path) == ["sglang_fleet.prom"]
    with pytest.raises(ValueError, match=r"'x.txt': node_exporter's textfile collector reads only \*.prom files"):
        fleet_metrics.write_textfile("", tmp_path, "x.txt")


def test_cli_writes_the_textfile(tmp_path):
    proc = subprocess.run([PY, "scripts/fleet_metrics.py", "--reports", str(FIXTURES), "--textfile-dir", str(tmp_path),
                           "in-sync", "drifted"], cwd=REPO, capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", f"{tmp_path}/sglang_fleet.prom: 2 host(s)\n")
    samples = parse((tmp_path / "sglang_fleet.prom").read_text())
    assert {dict(labels)["host"] for _, labels in samples} == {"in-sync", "drifted"}


def test_cli_on_no_reports_says_so_and_writes_an_empty_file(tmp_path):
    out = tmp_path / "textfile"
    out.mkdir()
    (out / "sglang_fleet.prom").write_text("sglang_fleet_drift_in_sync{host=\"gone\"} 1\n")  # stale: replaced
    proc = subprocess.run([PY, "scripts/fleet_metrics.py", "--reports", str(tmp_path / "none"), "--textfile-dir", str(out)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert proc.stderr.startswith(f"no reports under {tmp_path / 'none'}: run deploy.yml")
    assert (out / "sglang_fleet.prom").read_text() == ""


def test_fleet_report_reads_the_same_reports(tmp_path):
    for host in ("in-sync", "drifted", "blocked-compat"):
        shutil.copytree(FIXTURES / host, tmp_path / host)
    proc = subprocess.run([PY, "scripts/fleet_report.py", "--reports", str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 1, proc.stderr  # drifted and blocked
    rows = {line.split(" | ")[0].lstrip("| "): line for line in proc.stdout.splitlines()[2:]}
    assert rows["blocked-compat"] == "| blocked-compat | - | - | - | - | 5 ok, 1 unknown, 1 blocked (0.5.11) | - | - | - | - | - | - | - | - | - |"
    assert " | 1 difference | " in rows["drifted"] and " | PASS | in sync | 58.5 | -0.1 % (pass by the 10 % tolerance) | 122 | 48 % | nothing |" in rows["in-sync"]


def test_the_dashboard_queries_only_metrics_the_exporter_writes():
    dashboard = json.loads((REPO / "dashboards" / "sglang-fleet.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = {name for e in exprs for name in re.findall(r"\bsglang_fleet_[a-z0-9_]+", e)}
    text, _ = fleet_metrics.fleet_metrics(FIXTURES, runs=[("drift", {"in-sync": "ok"}, 0, 1796112000.0, 12.5)])
    written = {family.name for family in text_string_to_metric_families(text)}
    assert used - written == set()
    assert all(re.search(r"\bsglang_fleet_", e) for e in exprs)  # no panel left without a metric
    # the panels: tok/s, % of roofline, drift in sync, verify pass, audit findings
    assert {"sglang_fleet_verify_decode_tokens_per_second", "sglang_fleet_verify_roofline_ratio",
            "sglang_fleet_drift_in_sync", "sglang_fleet_verify_passed", "sglang_fleet_audit_findings"} <= used


NODE_EXPORTER = REPO / ".cache" / "node-exporter" / "usr" / "bin" / "prometheus-node-exporter"


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def node_exporter(tmp_path):
    """Debian's real node_exporter (unpacked by lab/install-deps.sh), textfile collector only, on 127.0.0.1."""
    if not NODE_EXPORTER.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{NODE_EXPORTER} missing: make lab-deps unpacks it")
        pytest.skip(f"{NODE_EXPORTER} missing: run `make lab-deps` (as root) to unpack Debian's node_exporter")
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    port = free_port()
    proc = subprocess.Popen([str(NODE_EXPORTER), f"--web.listen-address=127.0.0.1:{port}",
                             "--collector.disable-defaults", "--collector.textfile",
                             f"--collector.textfile.directory={textfiles}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    yield textfiles, f"http://127.0.0.1:{port}/metrics", proc
    proc.terminate()
    proc.wait(timeout=10)


def scrape(url, proc):
    import time
    import urllib.request
    for _ in range(100):
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.read().decode()
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"node_exporter exited: {proc.stderr.read()}")
            time.sleep(0.1)
    pytest.fail(f"node_exporter did not answer on {url}")


def test_a_real_node_exporter_serves_the_fleet_metrics(node_exporter):
    """What a controller running the scheduled drift exposes: scripts/fleet_metrics.py writes the
    textfile, Debian's node_exporter reads it and serves it next to its own metrics, and a scrape
    parsed with the reference parser gives back every series with its value."""
    textfiles, url, proc = node_exporter
    written, _ = fleet_metrics.fleet_metrics(FIXTURES)
    fleet_metrics.write_textfile(written, textfiles)
    served = {}
    for family in text_string_to_metric_families(scrape(url, proc)):
        for s in family.samples:
            served[(s.name, tuple(sorted(s.labels.items())))] = s.value
    assert served[("node_textfile_scrape_error", ())] == 0  # node_exporter read the file without complaint
    ours = {k: v for k, v in served.items() if k[0].startswith("sglang_fleet_")}
    assert ours == parse(written)
    assert series(ours, "in-sync")["verify_decode_tokens_per_second"] == 58.5


def test_node_exporter_reports_a_broken_textfile(node_exporter):
    """The failure an operator would alert on: a file node_exporter cannot parse is a scrape error,
    not silently missing series (so the atomic write of write_textfile matters)."""
    textfiles, url, proc = node_exporter
    (textfiles / "sglang_fleet.prom").write_text("sglang_fleet_drift_in_sync{host=\"a\"} not-a-number\n")
    text = scrape(url, proc)
    errors = [s.value for f in text_string_to_metric_families(text) for s in f.samples
              if s.name == "node_textfile_scrape_error"]
    assert errors == [1]
    assert "sglang_fleet_" not in text


def verify_on(history_decodes, repeats, **thresholds):
    """A verify result of sglang_verify's gates (gate_mode noise unless given): one single-stream level
    measured as `repeats`, against a history of one run per figure of `history_decodes`."""
    from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts
    from ansible_collections.sglang.fleet.plugins.module_utils.verify.gates import evaluate, fingerprint

    args = {"model_path": "/models/m", "tp_size": 1}
    shape = {"api": "completions", "input_len": 128, "output_len": 64}
    fp = fingerprint("0.5.23", args)["id"]
    bench = [{"concurrency": 1, "decode_tok_s_per_stream": {"p50": sorted(repeats)[len(repeats) // 2]},
              "output_throughput": 1.0, "completed": 3, "failed": 0, **shape,
              "runs": [{"decode_tok_s_per_stream": {"p50": x}, "output_throughput": 1.0} for x in repeats]}]
    history = [{"generated_at": f"20261203T0{i}0000Z", "fingerprint": fp, "workload": "completions in=128 out=64 c=1",
                "passed": True, "metrics": {"decode_tok_s@1": m}, "samples": {"decode_tok_s@1": [m - 0.1, m, m + 0.1]}}
               for i, m in enumerate(history_decodes)]
    thresholds = {"history_window": 5, "regression_tolerance_pct": 10, "gate_mode": "noise", "min_effect_pct": 3,
                  "run_noise_prior_pct": 2, "run_noise_prior_dof": 4, **thresholds}
    server = {"host": "h", "version": "0.5.23", "args": args,
              "gpu": declared_facts({"gpu_model": "NVIDIA H200", "gpu_count": 1}), "weight_bytes": 0}
    return evaluate(bench, thresholds, server, history, stamp="now")


def test_the_noise_aware_verdict_is_in_the_metrics_and_the_fleet_table(tmp_path):
    """A verify report written by sglang_verify's gates (gate_mode noise) on a host whose runs move ~3.6 %
    from run to run: a -4 % run is inconclusive, with its interval and the loss this host can detect."""
    result = verify_on((53.5, 51.6, 55.4), [51.2, 51.3, 51.4])
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "verify-latest.json").write_text(json.dumps(result["report"]))
    text, count = fleet_metrics.fleet_metrics(tmp_path)
    m = series(parse(text), "h")
    assert (m["verify_passed"], m["verify_gate_inconclusive{gate=history}"]) == (1, 1)
    assert "verify_gate_passed{gate=history}" not in m   # neither passed nor failed
    assert m["verify_decode_change_ratio{gate=history}"] == pytest.approx(-0.041, abs=0.001)
    low, high = m["verify_decode_change_interval_ratio{bound=low,gate=history}"], \
        m["verify_decode_change_interval_ratio{bound=high,gate=history}"]
    assert low < m["verify_decode_change_ratio{gate=history}"] < high
    # 3 runs (2 dof of their own, moderated by a 2 % prior as 4 dof) say little
    assert m["verify_decode_detectable_loss_ratio{gate=history}"] == pytest.approx(0.153, abs=0.001)
    cell = load_script("fleet_report").vs_history(result["report"])
    assert cell.startswith("-4.1 % [") and cell.endswith(": inconclusive") and ", detects " in cell, cell


@pytest.mark.parametrize("mode", ["noise", "fixed"])
def test_without_a_run_to_run_noise_the_fleet_table_gives_the_change_and_says_it_cannot_tell(mode):
    """One earlier run and no prior (sglang_verify_run_noise_prior_pct 0): no noise is known, so an 8.5 %
    loss is inconclusive (kept, never rolled back); the fleet table says so, not a verdict it has none of
    (in gate_mode fixed the tolerance decided the gate, the table still gives the noise-aware verdict)."""
    result = verify_on((481.0,), [439.9, 440.0, 440.1], run_noise_prior_pct=0, gate_mode=mode)
    history = next(g for g in result["report"]["gates"] if g["gate"] == "history")
    assert history["metrics"][0]["noise_basis"] == "none" and result["ok"] is True
    assert load_script("fleet_report").vs_history(result["report"]) == "-8.5 % (no noise known: inconclusive)"
