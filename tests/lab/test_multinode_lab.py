"""One SGLang server over two lab hosts, declared as an inventory group (README: Multi-node servers).

Its own fleet (10.89.108.0/24, prefix sglang-multi): h200x2 and h200x1, both 2x H200 on 0.5.18,
in group qwen_big (h200x2 first: rank 0) with tp_size 4. deploy.yml with the default batches
([1, "25%"], whose canary would split the group) brings both up as one server; a bad group is
refused before either host changes.
"""

import json
import re

import pytest
import yaml
from lab_fleet import LIGHT_VERIFY, lab_fleet, unflow

pytestmark = pytest.mark.lab

RANK0, RANK1 = "h200x2", "h200x1"
PORT = 20000
ARGS = {"model_path": "/models/Qwen3-32B", "tp_size": 4, "mem_fraction_static": 0.85, "context_length": 32768}
FAST = ("--skip-tags", "sglang_verify")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    # the lab's rank-0 peer waits 90 s for the other nodes, not torch's 30 min
    group_vars = {**LIGHT_VERIFY, "lab_sim_faults": {"rendezvous_timeout_s": 90}}
    with lab_fleet(tmp_path_factory.mktemp("multinode-lab"), "sglang-multi", "10.89.108.", hosts=[RANK0, RANK1],
                   group_vars=group_vars) as fleet:
        inv = fleet.inventory.parent
        # both nodes alike (one release, the same GPUs and arguments): h200x2's host_vars on both
        node = yaml.safe_load((inv / "host_vars" / f"{RANK0}.yml").read_text())
        node["sglang_args"] = ARGS
        for host in (RANK0, RANK1):
            (inv / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump(node))
        # the group, in an inventory source of its own next to hosts.yml (lab.py reads hosts.yml only)
        group = inv / "multinode.yml"
        group.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"children": {"qwen_big": {
            "hosts": {RANK0: None, RANK1: None}, "vars": {"sglang_multinode_group": "qwen_big"}}}}}}}, sort_keys=False))
        fleet.group_inventory = group
        rc, out = play(fleet, "lab/prepare.yml")
        assert rc == 0, out
        rc, out = play(fleet, "deploy.yml")   # the default batches: [1, "25%"]
        fleet.first_deploy = out
        (tmp_path_factory.getbasetemp() / "multinode-first-deploy.log").write_text(out)
        assert rc == 0, out
        yield fleet


def play(fleet, playbook, *args):
    return fleet.play(playbook, "-i", fleet.group_inventory, *args)


def argv(fleet, host):
    pid = fleet.ssh(host, "systemctl show sglang -p MainPID").strip().split("=")[1]
    return fleet.ssh(host, f"tr '\\0' ' ' < /proc/{pid}/cmdline")


def state(fleet):
    """What a refused deploy must leave alone: every node's unit bytes and server PID."""
    return {h: (fleet.ssh(h, "sha256sum /etc/systemd/system/sglang.service").split()[0],
                fleet.ssh(h, "systemctl show sglang -p MainPID").strip()) for h in (RANK0, RANK1)}


def http(fleet, host, path):
    return fleet.ssh(host, f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:30000{path}")


def test_deploy_runs_one_server_over_both_nodes_with_derived_flags(fleet):
    addr = f"{fleet.ip[RANK0]}:{PORT}"
    for rank, host in enumerate((RANK0, RANK1)):
        words = argv(fleet, host)
        assert re.search(r"--nnodes 2( |$)", words), words
        assert re.search(rf"--node-rank {rank}( |$)", words), words
        assert f"--dist-init-addr {addr}" in words, words
        assert "--tp-size 4" in words, words
    # rank 0 serves the API, and resolved what the flags say; rank 1 serves health only (as SGLang)
    info = json.loads(fleet.ssh(RANK0, "curl -s http://127.0.0.1:30000/server_info"))
    assert (info["nnodes"], info["node_rank"], info["dist_init_addr"], info["tp_size"]) == (2, 0, addr, 4)
    assert http(fleet, RANK1, "/health_generate") == "200"
    assert http(fleet, RANK1, "/server_info") == "404"
    out = unflow(fleet.first_deploy)
    # one batch holding both nodes, although the default canary is 1 host: one rollout play header
    assert out.count("PLAY [Roll SGLang out") == 1, out
    # rank 1 restarted in a task before rank 0's
    assert re.search(rf"TASK \[sglang_service : Restart the other ranks first\] \**\s*skipping: \[{RANK0}\]\s*"
                     rf"changed: \[{RANK1}\]\s*TASK \[sglang_service : Restart the service on its new unit[^\]]*\] \**\s*"
                     rf"skipping: \[{RANK1}\]\s*changed: \[{RANK0}\]", fleet.first_deploy), out
    # verified on rank 0 only; both record the release as good (rank 1 takes rank 0's verdict)
    assert re.search(rf"{RANK0}: PASS single-stream decode", out) and f"{RANK1}: PASS" not in out, out
    for host in (RANK0, RANK1):
        assert re.search(rf"{host}: release \S+ \(sglang 0\.5\.18\) is good, the last known good", out), out
    # drift derives the same flags: both nodes are what the inventory says
    rc, out = play(fleet, "drift.yml")
    assert rc == 0, out
    assert "drift: 2 hosts in sync, 0 drifted" in unflow(out), out
    # audit and verify read the server's API on rank 0; rank 1 (health only) gets the static audit
    rc, out = play(fleet, "audit.yml")
    assert rc == 0, out
    runtime = re.search(r"TASK \[sglang_audit : Compare the running server's resolved settings with the prediction\] "
                        r"\**\s*(.*?)\n\s*\n", out, re.S)
    assert runtime and f"skipping: [{RANK1}]" in runtime.group(1) and "included: " in runtime.group(1), out
    assert RANK0 in runtime.group(1).split("included: ")[1], out
    rc, out = play(fleet, "verify.yml")
    assert rc == 0, out
    assert re.search(rf"{RANK0}: PASS single-stream decode", unflow(out)) and f"{RANK1}: PASS" not in unflow(out), out


@pytest.mark.parametrize("args,message", [
    (("-l", RANK1), f"multi-node server 'qwen_big' has nodes outside this play: {RANK0} (rank 0). Its nodes start "
                    "and restart as one unit, so every one must be in the play: add them to -l (e.g. -l qwen_big)"),
    (("-e", json.dumps({"sglang_args": {**ARGS, "tp_size": 2}})),
     "multi-node server 'qwen_big': tp_size 2 x pp_size 1 = 2 but its 2 nodes have 4 GPUs (2 each); set tp_size x "
     "pp_size to 4 in the group's sglang_args, or fix sglang_hardware.gpu_count"),
    (("-e", json.dumps({"sglang_args": {**ARGS, "node_rank": 1}})), "sglang_args sets node_rank: these are derived"),
], ids=["one-node-of-the-group", "tp-not-the-groups-gpus", "typed-node-rank"])
def test_a_bad_group_is_refused_with_both_nodes_untouched(fleet, args, message):
    before = state(fleet)
    rc, out = play(fleet, "deploy.yml", *args, *FAST)
    assert rc != 0, out
    assert message in unflow(out), out
    assert state(fleet) == before


def release(fleet, host):
    """A node's unit bytes and release pointers (current, last known good)."""
    return fleet.ssh(host, "sha256sum /etc/systemd/system/sglang.service | cut -d' ' -f1; "
                           "cat /var/lib/sglang-fleet/current /var/lib/sglang-fleet/last-good").split()


def test_tune_refuses_a_node_of_a_multi_node_server_before_anything_changes(fleet):
    """Its flags are derived for the group together: one node cannot be measured alone."""
    before = state(fleet)
    rc, out = play(fleet, "tune.yml", "-l", "qwen_big", "-e", json.dumps({"sglang_tune_space": {"schedule_policy": ["fcfs", "lpm"]}}))
    assert rc != 0
    assert (f"{RANK0}: tune.yml measures a server of one host; this one is part of a multi-node server, whose flags are "
            "derived together: tune a single-host server of the same hardware and model, then copy its flags") in unflow(out), out
    assert state(fleet) == before


def test_a_release_failing_verify_rolls_every_node_back_together(fleet):
    """The new release serves at a fifth of the speed (a simulator fault in the unit's environment,
    on both nodes like any release): rank 0's verify fails its floor, rank 1 takes that verdict, and
    both nodes go back to their last known good as one server."""
    before = {h: release(fleet, h) for h in (RANK0, RANK1)}
    slow = {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json", "SGLANG_SIM_FAULTS": "degrade_factor=0.2"}
    rc, out = play(fleet, "deploy.yml", "-e", json.dumps({"sglang_service_environment": slow}))
    assert rc != 0, out
    text = unflow(out)
    assert re.search(r"floor: single-stream decode \d+\.\d tok/s < floor 45\.0 tok/s", text), out
    assert f"{RANK1}: node {RANK0} of multi-node server qwen_big failed" in text, out
    for host in (RANK0, RANK1):
        assert re.search(rf"{host}: .*rolled back to {re.escape(before[host][1])} \(sglang 0\.5\.18", text), out
        assert release(fleet, host) == before[host]
    # one server again: rank 0 generates at full speed through both nodes, rank 1 serves health
    assert "SGLANG_SIM_FAULTS" not in argv(fleet, RANK0)
    gen = json.loads(fleet.ssh(RANK0, "curl -s http://127.0.0.1:30000/generate -H 'Content-Type: application/json' "
                                      "-d '{\"text\": \"hello\", \"sampling_params\": {\"max_new_tokens\": 4}}'"))
    assert gen["meta_info"]["completion_tokens"] == 4
    assert http(fleet, RANK1, "/health_generate") == "200"
    rc, out = play(fleet, "drift.yml")
    assert rc == 0 and "drift: 2 hosts in sync, 0 drifted" in unflow(out), out
