"""The simulator as a node of a multi-node server (--nnodes/--node-rank/--dist-init-addr), two
processes on this machine joined over TCP like two hosts, on a real sglang release tree."""
from __future__ import annotations

import time

import pytest

from tests.sim.test_sim import LLAMA, Sim, free_port

pytestmark = pytest.mark.wheels
VERSION = "0.5.18"


def node(tmp_path, rank, addr, nnodes=2, config=None):
    return Sim(tmp_path / f"node{rank}", VERSION, ["--tp-size", "4", "--nnodes", str(nnodes), "--node-rank", str(rank),
                                                    "--dist-init-addr", addr, "--enable-metrics"],
               config=config, model=LLAMA)


def test_rank0_serves_after_every_node_joined_and_the_others_serve_health_only(tmp_path):
    addr = f"127.0.0.1:{free_port()}"
    follower = node(tmp_path, 1, addr)   # the other ranks first, as deploy restarts them
    time.sleep(1.5)
    assert follower.proc.poll() is None, follower.proc.stderr.read()
    leader = node(tmp_path, 0, addr)
    try:
        leader.wait_healthy(timeout=60)
        status, body = leader.request("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}})
        assert status == 200, body
        follower.wait_listening(timeout=30)
        # launch_dummy_health_check_server's routes, nothing of the API
        assert [follower.get(p)[0] for p in ("/health", "/health_generate", "/ping", "/metrics")] == [200] * 4
        assert follower.get("/server_info")[0] == 404
        assert follower.request("/generate", {"text": "hi"})[0] == 404
        # a lost node ends the server
        follower.proc.terminate()
        assert leader.proc.wait(timeout=15) == 1
        assert "lost a peer node" in leader.proc.stderr.read()
    finally:
        for sim in (leader, follower):
            if sim.proc.poll() is None:
                sim.proc.kill()


def test_rank0_whose_peers_never_come_times_out_like_torch(tmp_path):
    leader = node(tmp_path, 0, f"127.0.0.1:{free_port()}", config={"rendezvous_timeout_s": 2})
    assert leader.proc.wait(timeout=30) == 1
    err = leader.proc.stderr.read()
    assert "DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined." in err, err


def test_a_rank_whose_rank0_never_comes_times_out(tmp_path):
    port = free_port()
    follower = node(tmp_path, 1, f"127.0.0.1:{port}", config={"rendezvous_timeout_s": 2})
    assert follower.proc.wait(timeout=30) == 1
    err = follower.proc.stderr.read()
    assert f"DistNetworkError: The client socket has timed out after 2s while trying to connect to (127.0.0.1, {port})" in err


def test_each_node_needs_only_its_share_of_the_gpus(tmp_path):
    """tp_size 4 over 2 nodes of 2 GPUs starts; over 1 node of 2 GPUs it is refused."""
    single = Sim(tmp_path / "single", VERSION, ["--tp-size", "4"], model=LLAMA)
    assert single.proc.wait(timeout=30) == 1
    assert "tp_size=4 needs" in single.proc.stderr.read()
