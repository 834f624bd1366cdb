"""tune.yml on a lab host of its own (10.89.98.0/24, sglang-tune-*), ct129 deployed as the regression
module deploys it (the same fleet: one of the two starts from the other's snapshot).

The seeds' case: ct129 redeployed with 1-step MTP, `tune.yml` finds the steps on the simulator's default
surface, writes them into host_vars and the host serves them. Then the limits: a latency limit and a flag
that changes outputs, on a surface of the test's own.
"""

import json
import re
import subprocess
import sys

import pytest
import yaml
from lab_fleet import REPO, STEADY_VERIFY, deployed_lab_fleet, edit_host_vars, unflow
from rollout_support import CT129_ARGS

pytestmark = pytest.mark.lab

HOST = "ct129"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with deployed_lab_fleet(tmp_path_factory.mktemp("tune"), "sglang-tune", "10.89.98.", hosts=(HOST,),
                            group_vars=STEADY_VERIFY, shared=True) as fleet:
        yield fleet


# The seeds' redeploy on the same release: 1-step MTP (the draft tokens follow the steps: SGLang sets
# steps + 1 for topk 1, 0.5.11 srt/server_args.py:3539-3546), below the seeds' 50 tok/s floor.
SEEDS_ONE_STEP = {"sglang_version": "0.5.11",
                  "sglang_args": {k: v for k, v in {**CT129_ARGS, "speculative_num_steps": 1}.items()
                                  if k != "speculative_num_draft_tokens"},
                  "sglang_expect": {}, "sglang_verify_min_decode_tok_s": 0, "sglang_verify_min_accept_length": 0,
                  "sglang_tune_budget_minutes": 20, "sglang_tune_restart_s": 15, "sglang_tune_measure_s": 10}


def test_tune_recovers_the_seeds_mtp_steps_writes_them_and_the_host_serves_them(fleet):
    """tune.yml on the seeds' ct129 redeployed with 1-step MTP, no sglang_tune_space: the default space
    (MTP steps 1-5) and the audit's candidate (0.5.11 auto-disables the piecewise CUDA graph for this
    multimodal model: forced off and on). The simulator's default surface decodes fastest at 3-4 steps
    and gives forcing the graph nothing (lab/sglang_sim/README.md, "Response surface"; the tuner never
    reads it). The search measures the incumbent, walks the steps up, confirms the best on a fresh
    restart, writes it into host_vars/ct129.yml (comments kept) and deploy.yml's roles roll the host out
    to it, its first verify compared with the confirmation's runs. False-alarm
    budget: a win must beat 1 step by 2 % at 5 % (the search's alpha); the surface's 3-step gain is
    ~35 %, so a miss would take a measurement ~10 noise widths off (the simulator's noise is ~2 %)."""
    rc, out = fleet.play("lab/prepare.yml", "-l", HOST, "-e", json.dumps({"lab_sim_faults": {}}))
    assert rc == 0, out[-5000:]
    edit_host_vars(fleet, HOST, SEEDS_ONE_STEP)
    # the seeds' redeploy was accepted by hand (its last-good gate would roll it back: -30 %)
    rc, out = fleet.play("deploy.yml", "-l", HOST, "-e", "sglang_verify_compare_last_good=false")
    assert rc == 0, out[-20000:]
    assert json.loads(fleet.ssh(HOST, "curl -s http://127.0.0.1:30000/get_server_info"))["speculative_num_steps"] == 1
    pid = fleet.ssh(HOST, "systemctl show sglang -p MainPID")

    # a misspelled flag in the space is refused before anything changes
    rc, out = fleet.play("tune.yml", "-l", HOST, "-e", json.dumps({"sglang_tune_space": {"speculative_num_stepz": [1, 2]}}))
    assert rc != 0 and "ct129: speculative_num_stepz: --speculative-num-stepz is not a flag of sglang 0.5.11: it fails " \
        "with 'unrecognized arguments: --speculative-num-stepz'. Did you mean --speculative-num-steps" in unflow(out), out[-5000:]
    assert fleet.ssh(HOST, "systemctl show sglang -p MainPID") == pid
    rc, out = fleet.play("tune.yml", "-l", HOST, "--check")   # the plan only
    assert rc == 0, out[-20000:]
    flat = unflow(out)
    assert re.search(r"ct129: 5 of 5 candidates fit in 20 min at one measurement each", flat), out
    assert "ct129: prefill/piecewise CUDA graph: auto-disabled here: " in flat and \
        "trying enforce_piecewise_cuda_graph false and true" in flat, out
    assert "ct129: FlashInfer all-reduce fusion: unavailable on this hardware: " in flat, out
    assert fleet.ssh(HOST, "systemctl show sglang -p MainPID") == pid

    host_vars = fleet.inventory.parent / "host_vars" / f"{HOST}.yml"
    host_vars.write_text("# the seeds' host, tuned by tune.yml\n" + host_vars.read_text())
    rc, out = fleet.play("tune.yml", "-l", HOST, "-e", "sglang_tune_write=true", timeout=1800)
    assert rc == 0, out[-20000:]
    answer = json.loads((fleet.reports / HOST / "tune-latest.json").read_text())
    result = answer["result"]
    assert result["won"] is True, result["lines"]
    steps = result["winner"]["speculative_num_steps"]
    assert steps in (3, 4), result["lines"]
    assert result["gain"] > 0.2 and result["interval"][0] > 0.02, result["lines"]
    assert result["left_on_table"].endswith(f"speculative_num_steps 1 -> {steps}"), result["left_on_table"]
    rows = {json.dumps(r["changes"]): r for r in result["rows"]}
    assert rows["{}"]["verdict"] == "incumbent", result["lines"]
    assert "ct129: tuned decode_tok_s@1: the winner +" in unflow(out), out
    # written into the host's own file, its comment kept, and served through the deploy's roles and gates
    text = host_vars.read_text()
    assert text.startswith("# the seeds' host, tuned by tune.yml\n") and f"speculative_num_steps: {steps}\n" in text, text
    assert yaml.safe_load(text)["sglang_args"]["speculative_num_steps"] == steps
    info = json.loads(fleet.ssh(HOST, "curl -s http://127.0.0.1:30000/get_server_info"))
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (steps, steps + 1), info
    # the rollout's verify compared the new flags with the confirmation's runs (they joined the history)
    verify = json.loads((fleet.reports / HOST / "verify-latest.json").read_text())
    history = next(g for g in verify["gates"] if g["gate"] == "history")
    decode = next(r for r in history["metrics"] if r["metric"] == "decode_tok_s@1")
    assert decode["reference_runs"] >= 2 and history["status"] in ("pass", "inconclusive"), history
    rc, out = fleet.play("drift.yml", "-l", HOST)
    assert rc == 0, out[-20000:]
    report = subprocess.run([sys.executable, "scripts/fleet_report.py", "--reports", str(fleet.reports), HOST],
                            cwd=REPO, capture_output=True, text=True, check=False).stdout
    assert re.search(rf"tuned \d{{8}}: \+\d+\.\d % \[\+\d+\.\d, \+\d+\.\d\]: speculative_num_steps 1 -> {steps} "
                     r"\(written into the inventory\)", report), report


def test_tune_holds_candidates_to_latency_limits_and_to_the_incumbents_outputs(fleet):
    """tune.yml with a latency limit and a flag that changes outputs, on a surface (this test's own) where
    both are faster: fp8 KV decodes 30 % faster but changes the greedy text, lpm decodes 30 % faster but
    its TTFT is 30x. Refused before anything changes: a lossy flag not marked lossy, a p99 one
    measurement cannot read. Then both candidates are infeasible, each with the figure that says why,
    and the host serves what it ran. No false-alarm budget: the verdicts come from an exact text
    comparison and a 30x TTFT against a limit at ~10x the incumbent's (the simulator paces exactly)."""
    surface = {"effects": [{"setting": "kv_cache_dtype", "equals": "fp8_e5m2", "decode": 1.3, "outputs": "changed"},
                           {"setting": "schedule_policy", "equals": "lpm", "decode": 1.3, "ttft": 30}]}
    rc, out = fleet.play("lab/prepare.yml", "-l", HOST, "-e", json.dumps({"lab_sim_faults": {"surface": surface}}))
    assert rc == 0, out[-5000:]
    ran = fleet.ssh(HOST, "cat /var/lib/sglang-fleet/current").strip()
    pid = fleet.ssh(HOST, "systemctl show sglang -p MainPID")
    space = {"kv_cache_dtype": {"values": ["auto", "fp8_e5m2"], "lossy": True}, "schedule_policy": ["fcfs", "lpm"]}
    # a TTFT p50 at concurrency 1 needs 20 requests a measurement: 3 repeats x 7, 16 tokens each
    # (the tune's first step restarts the incumbent: the surface is loaded then)
    sized = {"sglang_verify_requests_per_stream": 7, "sglang_verify_output_len": 16, "sglang_tune_budget_minutes": 20,
             "sglang_tune_restart_s": 15, "sglang_tune_measure_s": 10}

    rc, out = fleet.play("tune.yml", "-l", HOST, "-e", json.dumps({"sglang_tune_space": {"kv_cache_dtype": ["auto", "fp8_e5m2"]}}))
    assert rc != 0 and "ct129: sglang_tune_space: kv_cache_dtype can change the model's outputs (a quantised KV " \
        "cache): trying it is opt-in" in unflow(out), out[-5000:]
    rc, out = fleet.play("tune.yml", "-l", HOST, "-e", json.dumps({"sglang_tune_space": space, **sized,
                                                                     "sglang_tune_limits": {"ttft_ms_p99@1": 5000}}))
    assert rc != 0 and "ttft_ms_p99@1: a p99 needs at least 1000 requests a measurement to have 10 beyond it, and " \
        "verify's measurement at concurrency 1 makes 21 (3 repeats x 7 requests x 1 streams)" in unflow(out), out[-5000:]
    assert fleet.ssh(HOST, "systemctl show sglang -p MainPID") == pid

    rc, out = fleet.play("tune.yml", "-l", HOST, "-e", json.dumps({"sglang_tune_space": space, **sized,
                                                                     "sglang_tune_from_audit": False,
                                                                     "sglang_tune_limits": {"ttft_ms_p50@1": 2000}}),
                         timeout=1800)
    assert rc == 0, out[-20000:]
    result = json.loads((fleet.reports / HOST / "tune-latest.json").read_text())["result"]
    assert not result["won"] and result["message"] == "no candidate beat the incumbent beyond the noise: the incumbent " \
        "stays", result["lines"]
    rows = {json.dumps(r["changes"]): r for r in result["rows"]}
    fp8, lpm = rows['{"kv_cache_dtype": ["auto", "fp8_e5m2"]}'], rows['{"schedule_policy": ["fcfs", "lpm"]}']
    assert fp8["verdict"] == "infeasible" and fp8["why"] == (
        "changes outputs: 8 of 8 greedy outputs differ from the incumbent's (prompt 1 from character 4: "
        "'defghijklmnopqrstuvwxyza' for 'DEFGHIJKLMNOPQRSTUVWXYZA'), 100% must be identical"), result["lines"]
    assert result["measurements"] == 4, result["lines"]   # the incumbent's 2, then one each (measured, held back)
    assert lpm["verdict"] == "infeasible" and re.fullmatch(
        r"over its latency limit: p50 TTFT at concurrency 1 was [\d,]+ ms \(limit 2,000 ms\)", lpm["why"]), result["lines"]
    assert fleet.ssh(HOST, "cat /var/lib/sglang-fleet/current").strip() == ran
    info = json.loads(fleet.ssh(HOST, "curl -s http://127.0.0.1:30000/get_server_info"))
    assert (info["kv_cache_dtype"], info["schedule_policy"]) == ("auto", "fcfs"), info
