"""Zero-downtime rollouts behind SGLang's real router, on lab hosts of their own
(10.89.107.0/24, containers sglang-router-*): two replicas of one model (rep1, rep2: the
simulator on the real SGLang 0.5.23 wheel) and a router host running the real sglang-router
from PyPI (roles/sglang_router, playbooks/router.yml).

A client load goes through the router (the only endpoint a user knows) while deploy.yml rolls a
change out to every replica one at a time. With draining (sglang_router_host set), each replica
leaves the router and finishes its in-flight requests before it restarts: zero failed requests.
The same rollout with draining switched off (sglang_router_host="") restarts replicas under
load: the streams they were serving break, and the client counts them. The router keeps its
default retries on (sglang-router 0.3.2 router_args.py:77, retry_max_retries 5): a user gets
them, and they cannot resume a stream the restart cut.
"""

import json
import shutil
import threading
import time
import urllib.request

import pytest
import yaml
from lab_fleet import BIN, KNOWN_HOSTS, LIGHT_VERIFY, REPO, recap, run

pytestmark = pytest.mark.lab

PREFIX, SUBNET = "sglang-router", "10.89.107."
REPLICAS = ("rep1", "rep2")
ROUTER_PORT = 8080


def inventory(tmp_path):
    """The lab inventory with two replicas of h200x1 (served beyond loopback, behind the router)
    and a router host of its own."""
    inv = tmp_path / "lab"
    shutil.copytree(REPO / "inventories" / "lab", inv)
    known = str(KNOWN_HOSTS / PREFIX)
    replica = yaml.safe_load((inv / "host_vars" / "h200x1.yml").read_text())
    replica["sglang_args"] = {**replica["sglang_args"], "host": "0.0.0.0"}
    # the lab network is internal: an open bind is intended here (a production fleet sets SGLANG_API_KEY)
    replica.update(sglang_service_allow_unauthenticated_bind=True, sglang_router_host="router")
    for name in REPLICAS:
        (inv / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(replica))
    lab_vars = yaml.safe_load((inv / "group_vars" / "sglang_lab.yml").read_text())
    (inv / "group_vars" / "sglang_lab.yml").write_text(yaml.safe_dump({**lab_vars, **LIGHT_VERIFY}))
    connection = {k: lab_vars[k] for k in ("ansible_user", "ansible_ssh_private_key_file", "ansible_ssh_common_args")}
    data = {"all": {"children": {
        "sglang_servers": {"children": {"sglang_lab": {
            "hosts": {name: {"ansible_host": f"{SUBNET}{11 + i}"} for i, name in enumerate(REPLICAS)},
            "vars": {"lab_known_hosts": known}}}},
        "sglang_routers": {
            "hosts": {"router": {"ansible_host": f"{SUBNET}20"}},
            "vars": {**connection, "lab_known_hosts": known,
                     "sglang_router_args": {"host": "0.0.0.0", "port": ROUTER_PORT, "policy": "round_robin"}}}}}}
    path = inv / "hosts.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if shutil.which("podman") is None:
        pytest.skip("podman not installed (make lab-deps)")
    tmp = tmp_path_factory.mktemp("router")
    inv = inventory(tmp)
    lab_py = [BIN / "python", REPO / "lab" / "lab.py"]
    rc, out = run([*lab_py, "up", "--inventory", inv, "--prefix", PREFIX, "--no-build", "--timeout", "300"])
    assert rc == 0, out

    def play(*args):
        return run([BIN / "ansible-playbook", "-i", inv, "-e", f"sglang_report_dir={tmp / 'reports'}", *args], 900)
    try:
        for playbook, args in (("lab/prepare.yml", ()), ("router.yml", ()),
                               ("deploy.yml", ("-e", '{"sglang_rollout_batches": ["100%"]}'))):
            rc, out = play(playbook, *args)
            assert rc == 0, out
        yield play
    finally:
        run([*lab_py, "down", "--inventory", inv, "--prefix", PREFIX])


def router(path, body=None, method=None):
    req = urllib.request.Request(f"http://{SUBNET}20:{ROUTER_PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, resp.read()


def one_streamed_generation(tokens=24):
    """True when a streamed /generate through the router ends with all its tokens and [DONE]."""
    try:
        status, raw = router("/generate", {"text": "hello router", "stream": True,
                                           "sampling_params": {"max_new_tokens": tokens}})
    except Exception:  # connection refused or reset, HTTP error: the user saw a failure
        return False
    events = [line[6:] for line in raw.decode(errors="replace").splitlines() if line.startswith("data: ")]
    if status != 200 or not events or events[-1] != "[DONE]":
        return False
    return json.loads(events[-2])["meta_info"]["completion_tokens"] == tokens


class Load:
    """Clients sending streamed generations through the router, back to back, counting outcomes."""

    def __init__(self, clients=4):
        self.ok = self.failed = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client, daemon=True) for _ in range(clients)]

    def client(self):
        while not self.stop.is_set():
            good = one_streamed_generation()
            with self.lock:
                self.ok, self.failed = self.ok + good, self.failed + (not good)

    def __enter__(self):
        for t in self.threads:
            t.start()
        time.sleep(2)
        return self

    def __exit__(self, *exc):
        time.sleep(2)
        self.stop.set()
        for t in self.threads:
            t.join(60)


def workers():
    return sorted(w["url"] for w in json.loads(router("/workers")[1])["workers"] if w["is_healthy"])


def rollout(play, marker, *extra):
    """deploy.yml one replica at a time, with a change that restarts each (a unit environment value)."""
    env = {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json", "ROLLOUT_MARKER": marker}
    return play("deploy.yml", "-e", json.dumps({"sglang_rollout_batches": [1], "sglang_service_environment": env}),
                *extra)


EXPECTED_WORKERS = [f"http://{SUBNET}{11 + i}:30000" for i in range(len(REPLICAS))]


def test_the_router_serves_through_both_replicas(fleet):
    assert workers() == EXPECTED_WORKERS
    assert all(one_streamed_generation() for _ in range(4))


def test_a_rollout_of_every_replica_behind_the_router_fails_no_request(fleet):
    with Load() as load:
        rc, out = rollout(fleet, "drained")
    assert rc == 0, out
    for host in REPLICAS:
        assert recap(out, host)["failed"] == 0
        assert f"{host}: out of router router (http://{SUBNET}" in out, out
        assert f"{host}: back in router router (http://{SUBNET}" in out, out
    print(f"drained rollout: {load.ok} requests ok, {load.failed} failed")
    assert load.ok > 20
    assert load.failed == 0
    assert workers() == EXPECTED_WORKERS


def test_the_same_rollout_without_draining_breaks_requests(fleet):
    with Load() as load:
        rc, out = rollout(fleet, "undrained", "-e", "sglang_router_host=")
    assert rc == 0, out
    assert "out of router" not in out
    print(f"undrained rollout: {load.ok} requests ok, {load.failed} failed")
    assert load.ok > 20
    assert load.failed > 0
