"""verify.yml on lab hosts of its own: the ct129 mirror passes, and each fault fails its own gate.

Own hosts: inventories/lab copied to a scratch inventory on 10.89.80.0/24, containers
`sglang-verify-*` (`lab/lab.py up/down --prefix sglang-verify`; other prefixes are never touched).
lab/prepare.yml + deploy.yml (which ends with the verification), then verify.yml with the
simulator's fault knobs (`lab_sim_faults` -> /etc/sglang-sim/config.json, read at service start):
degrade_factor 0.5 -> the absolute floor; 0.9 with the floor lowered -> the history gate (after
passing runs built it); disable_optimization speculative -> the accept-length gate. Short
benchmarks (input 128, output 64 tokens); reports go to a temp folder, never reports/.
Needs the lab image (make lab-image) and root; ~5 min on 2 cores.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from lab_fleet import BIN, ENV, REPO, lab_fleet

pytestmark = pytest.mark.lab

# The fixed tolerance decides, as these tests' thresholds are written for it; the noise-aware
# gates (the role's default) are the last test's subject, which sets gate_mode noise.
SHORT = {"sglang_verify_input_len": 128, "sglang_verify_output_len": 64, "sglang_verify_repeats": 3,
         "sglang_verify_requests_per_stream": 2, "sglang_verify_concurrency": [1, 4], "sglang_verify_gate_mode": "fixed"}


class Lab:
    """The verify test's view of its lab fleet: playbooks with short benchmarks, fault knobs, reports."""

    def __init__(self, fleet):
        self.inventory = fleet.inventory
        self.reports = fleet.reports
        self.env = ENV

    def run(self, argv, check=True, timeout=900):
        proc = subprocess.run(argv, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, argv))} -> rc {proc.returncode}\n{proc.stdout[-6000:]}\n"
                                 f"{proc.stderr[-3000:]}")
        return proc

    def playbook(self, playbook, *extra, limit=None, check=True, extra_vars=None):
        argv = [BIN / "ansible-playbook", "-i", self.inventory, playbook, "-e", json.dumps(
            dict(SHORT, sglang_report_dir=str(self.reports), **(extra_vars or {})))]
        if limit:
            argv += ["-l", limit]
        return self.run(argv + list(extra), check=check)

    def faults(self, host, faults):
        """Set the simulator's fault knobs on `host` and restart its service; wait until it generates."""
        self.playbook("lab/prepare.yml", "-e", json.dumps({"lab_sim_faults": faults}), limit=host)
        self.run([BIN / "ansible", "-i", self.inventory, host, "--become", "-m", "ansible.builtin.systemd_service",
                  "-a", "name=sglang state=restarted"])
        deadline = time.monotonic() + 60
        while True:
            proc = self.run([BIN / "ansible", "-i", self.inventory, host, "-m", "ansible.builtin.uri",
                             "-a", "url=http://127.0.0.1:30000/health_generate timeout=5"], check=False)
            if proc.returncode == 0:
                return
            assert time.monotonic() < deadline, f"{host} not healthy after restart:\n{proc.stdout[-2000:]}"
            time.sleep(1)

    def history(self, host):
        path = self.reports / host / "verify-history.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []

    def latest(self, host):
        return json.loads((self.reports / host / "verify-latest.json").read_text())


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with lab_fleet(tmp_path_factory.mktemp("verify-lab"), "sglang-verify", "10.89.80.") as fleet:
        lab = Lab(fleet)
        lab.playbook("lab/prepare.yml")
        lab.deploy = lab.playbook("deploy.yml", extra_vars={"sglang_rollout_batches": ["100%"]})
        yield lab


def test_deploy_verifies_every_lab_host_at_its_floor(lab):
    out = lab.deploy.stdout
    for host, floor in (("ct129", 50), ("h200x2", 45), ("h200x1", 90)):
        report = lab.latest(host)
        assert report["passed"] is True, report["failures"]
        assert report["thresholds"]["min_decode_tok_s"] == floor
        assert report["metrics"]["decode_tok_s@1"] > floor
        assert f"'{host}: PASS single-stream decode " in out.replace("\n        ", " ")
        assert [r["passed"] for r in lab.history(host)] == [True]
    ct = lab.latest("ct129")
    assert ct["gpu"] == {"source": "declared", "gpu_model": "NVIDIA RTX A6000", "gpu_count": 2,
                         "hbm_bandwidth_gbs": 768}
    assert ct["weights"] == {"bytes": 27000000000, "method": "safetensors_index",
                             "detail": "model.safetensors.index.json metadata.total_size", "error": None}
    assert 130 < ct["roofline"]["upper_bound_tok_s"] < 170
    assert 30 < ct["efficiency_pct"] < 40
    assert ct["accept_length"] > 2.5


def test_ct129_passes_at_its_threshold_and_check_mode_writes_no_history(lab):
    proc = lab.playbook("verify.yml", limit="ct129")
    assert "ct129                      : ok=" in proc.stdout and "changed=0" in proc.stdout
    report = lab.latest("ct129")
    assert report["passed"] is True
    assert [g["status"] for g in report["gates"]] == ["pass", "pass", "pass", "skip"]
    assert report["thresholds"] == {"min_decode_tok_s": 50.0, "min_accept_length": 2.5, "history_window": 5,
                                    "regression_tolerance_pct": 10.0, "gate_mode": "fixed", "inconclusive": "keep",
                                    "min_effect_pct": 3.0, "false_alarm_pct": 1.0, "power_pct": 95.0}
    # the noise-aware verdict rides along, reported only: two earlier runs of this release are too few
    # for its run-to-run noise, so this run's 3 repeats are judged against theirs
    history = next(g for g in report["gates"] if g["gate"] == "history")
    decode = next(r for r in history["metrics"] if r["metric"] == "decode_tok_s@1")
    assert decode["noise_basis"] == "repeats" and decode["noise_verdict"] in ("pass", "inconclusive", "fail"), decode
    assert re.search(r"run-to-run noise not learned yet \([01] dof\), within-run noise", decode["comparison"]), decode
    assert "; noise-aware, reported only (sglang_verify_gate_mode fixed): single-stream decode" in history["message"]
    before = lab.history("ct129")
    assert len(before) == 2
    proc = lab.playbook("verify.yml", "--check", limit="ct129")
    assert "'ct129: PASS single-stream decode " in proc.stdout.replace("\n        ", " ")
    assert lab.history("ct129") == before
    assert len(list((lab.reports / "ct129").glob("verify-2*.json"))) == 2


def test_half_speed_fails_the_absolute_floor(lab):
    lab.faults("ct129", {"degrade_factor": 0.5})
    proc = lab.playbook("verify.yml", limit="ct129", check=False)
    assert proc.returncode == 2
    report = lab.latest("ct129")
    floor = report["gates"][0]
    assert floor["status"] == "fail"
    assert 20 < floor["measured"] < 30
    assert floor["message"].startswith(f"floor: single-stream decode {floor['measured']:.1f} tok/s < floor 50.0 tok/s "
                                       "(history median ")
    assert "SGLang verify failed for ct129:" in proc.stdout
    assert lab.history("ct129")[-1]["passed"] is False


def test_ten_percent_slower_fails_only_the_history_gate(lab):
    lab.faults("ct129", {})
    lab.playbook("verify.yml", limit="ct129")  # a third passing run
    assert [r["passed"] for r in lab.history("ct129")] == [True, True, False, True]
    lab.faults("ct129", {"degrade_factor": 0.9})
    proc = lab.playbook("verify.yml", limit="ct129", check=False,
                        extra_vars={"sglang_verify_min_decode_tok_s": 40, "sglang_verify_regression_tolerance_pct": 5})
    assert proc.returncode == 2
    report = lab.latest("ct129")
    assert [g["status"] for g in report["gates"]] == ["pass", "fail", "pass", "skip"]
    hist = report["gates"][1]
    assert hist["runs"] == 3
    decode = hist["metrics"][0]
    assert decode["metric"] == "decode_tok_s@1" and -14 < decode["change_pct"] < -6
    assert hist["message"].startswith(
        f"history: single-stream decode {decode['measured']:.1f} tok/s is {-decode['change_pct']:.1f} % below the "
        f"history median {decode['history_median']:.1f} tok/s (threshold ")
    assert "last 3 passing runs of sglang 0.5.11 with these flags" in hist["message"]


def test_speculative_silently_off_fails_the_accept_length_gate(lab):
    lab.faults("ct129", {"disable_optimization": "speculative"})
    proc = lab.playbook("verify.yml", limit="ct129", check=False,
                        extra_vars={"sglang_verify_min_decode_tok_s": 0, "sglang_verify_regression_tolerance_pct": 99})
    assert proc.returncode == 2
    report = lab.latest("ct129")
    assert [g["status"] for g in report["gates"]] == ["skip", "pass", "fail", "skip"]
    assert report["accept_length"] is None
    assert report["gates"][2]["message"].startswith(
        "accept length: speculative_algorithm NEXTN is configured but the server reports no accept length "
        "(minimum 2.5; history median ")
    assert 18 < report["metrics"]["decode_tok_s@1"] < 26
    lab.faults("ct129", {})


def test_an_inconclusive_gate_measures_the_server_again_a_bounded_number_of_times(lab):
    """gate_mode noise with a minimum effect far below what h200x1's noise lets it see (0.01 %) and a
    false-alarm rate so small (1e-6 %) that, with h200x1's 2 degrees of freedom of noise, no loss is
    significant: the history gate cannot tell, whatever the load. verify measures the server again,
    twice at most, judges the run on its three measurements, says it is still inconclusive and keeps
    the release (the default policy). Then, with `inconclusive: fail` and no re-measure, one
    measurement fails the run (its history, now 10 dof, can call a loss under CI load a failure:
    either way the run fails)."""
    unsure = {"sglang_verify_gate_mode": "noise", "sglang_verify_min_effect_pct": 0.01,
              "sglang_verify_false_alarm_pct": 1e-6}
    proc = lab.playbook("verify.yml", limit="h200x1", extra_vars={**unsure, "sglang_verify_remeasure": 2})
    assert proc.stdout.count("TASK [sglang_verify : Benchmark the server at concurrency 1, 4]") == 3, proc.stdout
    report = lab.latest("h200x1")
    history = next(g for g in report["gates"] if g["gate"] == "history")
    assert (report["passed"], history["status"], report["measurements"]) == (True, "inconclusive", 3), history
    assert "still inconclusive after 3 measurements of this run" in history["message"], history["message"]
    assert report["line"].endswith("(3 measurements)")
    record = lab.history("h200x1")[-1]
    assert record["measurements"] == 3 and len(record["samples"]["decode_tok_s@1"]) == 9

    proc = lab.playbook("verify.yml", limit="h200x1", check=False,
                        extra_vars={**unsure, "sglang_verify_remeasure": 0, "sglang_verify_inconclusive": "fail"})
    assert proc.returncode == 2
    assert proc.stdout.count("TASK [sglang_verify : Benchmark the server at concurrency 1, 4]") == 1
    report = lab.latest("h200x1")
    history = next(g for g in report["gates"] if g["gate"] == "history")
    assert report["passed"] is False and report["measurements"] == 1
    assert history["status"] in ("inconclusive", "fail"), history
    if history["status"] == "inconclusive":
        assert history["message"].endswith("more repeats (sglang_verify_repeats) or measurements "
                                           "(sglang_verify_remeasure) narrow it"), history["message"]
