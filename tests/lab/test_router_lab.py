"""Zero-downtime rollouts behind SGLang's real router, on lab hosts of their own
(10.89.107.0/24, containers sglang-router-*): two replicas of one model (rep1, rep2: the
simulator on the real SGLang 0.5.23 wheel) and a router host running the real sglang-router
from PyPI (roles/sglang_router, playbooks/router.yml).

The fleet comes up as a new user's might: rep1 deployed before the router ever ran (it serves
nothing, so its deploy goes on and says the router is not up), then site.yml (the router, which
takes rep1 in, then rep2's first deploy). Last, a router that is down refuses the rollout of its
serving replicas before either changes.

A client load goes through the router (the only endpoint a user knows) while deploy.yml rolls a
change out to every replica one at a time. With draining (sglang_router_host set), each replica
leaves the router and finishes its in-flight requests before it restarts: zero failed requests.
The same rollout with draining switched off (sglang_router_host="") restarts replicas under
load: the streams they were serving break, and the client counts them. The router keeps its
default retries on (sglang-router 0.3.2 router_args.py:77, retry_max_retries 5): a user gets
them, and they cannot resume a stream the restart cut.

The replicas and the router share one API key (the replicas' sglang_service_secrets.SGLANG_API_KEY,
which sglang_router_api_key defaults to): the router requires it from clients and sends it to its
workers, and it shows nowhere but in the root-only EnvironmentFiles.

drift.yml compares the router with the inventory (its running argv parsed with the release's own
argparse, its live /workers against the replicas) and verify.yml benchmarks the fleet through it
next to the sum of the replicas' own verify results.
"""

import json
import re
import shutil
import time
import urllib.error

import pytest
import yaml
from lab_fleet import BIN, KNOWN_HOSTS, LIGHT_VERIFY, REPO, LabFleet, lab_hosts, recap, run, unflow
from router_client import Load, RouterClient

pytestmark = pytest.mark.lab

PREFIX, SUBNET = "sglang-router", "10.89.107."
REPLICAS = ("rep1", "rep2")
ROUTER_PORT = 8080
API_KEY = "lab-router-key-3f9c2e"  # the replicas' key, and so the router's
LAUNCHER = "/usr/local/lib/sglang-fleet/sglang_launch.py"
CLIENT = RouterClient(f"http://{SUBNET}20:{ROUTER_PORT}", API_KEY)
router, workers, wait_for = CLIENT.request, CLIENT.workers, CLIENT.wait_for


def inventory(tmp_path):
    """The lab inventory with two replicas of h200x1 (served beyond loopback with an API key, behind
    the router) and a router host of its own (no key of its own: it takes the replicas')."""
    inv = tmp_path / "lab"
    shutil.copytree(REPO / "inventories" / "lab", inv)
    known = str(KNOWN_HOSTS / PREFIX)
    replica = yaml.safe_load((inv / "host_vars" / "h200x1.yml").read_text())
    replica["sglang_args"] = {**replica["sglang_args"], "host": "0.0.0.0"}
    replica.update(sglang_service_secrets={"SGLANG_API_KEY": API_KEY}, sglang_router_host="router")
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

    with lab_hosts(inv, PREFIX):
        lab = LabFleet(inv, tmp / "reports", KNOWN_HOSTS / PREFIX)
        rc, out = lab.play("lab/prepare.yml")
        assert rc == 0, out
        # A fresh fleet in the wrong order: rep1 deployed before its router ever ran. It serves
        # nothing yet, so there is nothing to drain: its deploy goes on and says so.
        rc, out = lab.play("deploy.yml", "-l", "rep1")
        lab.deploy_before_router = (rc, out)
        # Then the whole fleet in its order (site.yml: the router first, then every server).
        rc, out = lab.play("site.yml", "-e", '{"sglang_rollout_batches": ["100%"]}')
        lab.site = (rc, out)
        assert rc == 0, out
        yield lab


def rollout(fleet, marker, *extra):
    """deploy.yml one replica at a time, with a change that restarts each (a unit environment value)."""
    env = {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json", "ROLLOUT_MARKER": marker}
    return fleet.play("deploy.yml", "-e", json.dumps({"sglang_rollout_batches": [1], "sglang_service_environment": env}),
                *extra)


EXPECTED_WORKERS = [f"http://{SUBNET}{11 + i}:30000" for i in range(len(REPLICAS))]


def test_a_server_deployed_before_its_router_goes_on_and_joins_it_when_it_comes_up(fleet):
    rc, out = fleet.deploy_before_router
    assert rc == 0, out
    flat = unflow(out)
    assert "rep1: its router router is not up (" in flat, out
    assert ("this host serves nothing: nothing to drain; it joins the router when the router comes up "
            "(ansible-playbook router.yml -l router, or site.yml for the whole fleet, routers first)") in flat, out
    assert "rep1: its router router is not up: it joins the router when the router comes up" in flat, out
    assert recap(out, "rep1")["failed"] == 0 and recap(out, "rep1")["changed"] > 0
    # site.yml on the half-deployed fleet: the router comes up with rep1 in it, rep2 gets its first
    # deploy (the router takes it in from its --worker-urls once it generates, or the undrain puts it
    # there), rep1 is in sync, its release verified good by its first deploy: left alone, and routed.
    rc, out = fleet.site
    flat = unflow(out)
    assert recap(out, "router")["failed"] == 0 and recap(out, "rep2")["changed"] > 0
    assert "rep1: in sync with its last complete deploy: nothing to do" in flat, out
    assert EXPECTED_WORKERS[0] in workers(), out
    assert re.search(rf"rep2: (still|back) in router router \({EXPECTED_WORKERS[1]}\)", flat), out


def test_the_router_serves_through_both_replicas(fleet):
    assert workers() == EXPECTED_WORKERS
    assert all(CLIENT.generates_in_full() for _ in range(4))


def router_report(fleet, kind):
    return json.loads((fleet.reports / "router" / f"{kind}-latest.json").read_text())


def test_drift_of_the_router_is_in_sync_with_the_inventory(fleet):
    rc, out = fleet.play("drift.yml")
    assert rc == 0, out
    flat = unflow(out)
    assert "router: in sync" in flat and "routers drift: 1 host in sync, 0 drifted" in flat, out
    report = router_report(fleet, "drift")
    assert report["in_sync"] is True and report["items"] == []
    assert sorted(w["url"] for w in report["workers"]) == EXPECTED_WORKERS
    assert report["running"]["argv"][1:3] == [LAUNCHER, "sglang_router.launch_router"]
    # the fleet report has a row for the router, its drift column read from that report
    rc, table = run([BIN / "python", REPO / "scripts" / "fleet_report.py", "--reports", fleet.reports])
    row = next(line for line in table.splitlines() if line.startswith("| router |"))
    columns = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    assert row.strip("|").split("|")[columns.index("drift")].strip() == "in sync", table


def test_drift_names_a_worker_taken_out_and_one_added_by_hand(fleet):
    rep2 = EXPECTED_WORKERS[1]
    ids = {w["url"]: w["id"] for w in json.loads(router("/workers")[1])["workers"]}
    stranger = "http://rep1:30000"  # rep1 again under a name the inventory does not use: a worker it does not know
    try:
        router(f"/workers/{ids[rep2]}", method="DELETE")
        router("/workers", {"url": stranger}, method="POST")
        wait_for(lambda: workers() == sorted([EXPECTED_WORKERS[0], stranger]), "rep2 is out and the stranger in")
        rc, out = fleet.play("drift.yml", "-l", "router")
        flat = unflow(out)
        assert rc != 0, out
        assert recap(out, "router")["failed"] == 1
        assert f"router: DRIFTED, 2 differences: worker {rep2} (rep2), worker {stranger}" in flat, out
        assert f"router: worker {rep2} (rep2): desired routed (rep2 of sglang_servers), actual missing from the " \
            f"router's /workers -> fix: run deploy.yml -l rep2" in flat, out
        assert "routers drift: 0 hosts in sync, 1 drifted (router: 2)" in flat, out
        assert "router drifted from the inventory" in flat, out
        report = router_report(fleet, "drift")
        assert [(i["what"], i["actual"]) for i in report["items"]] == [
            (f"worker {rep2} (rep2)", "missing from the router's /workers"),
            (f"worker {stranger}", f"routed (router worker id {next(w['id'] for w in report['workers'] if w['url'] == stranger)})")]
    finally:
        ids = {w["url"]: w["id"] for w in json.loads(router("/workers")[1])["workers"]}
        if stranger in ids:
            router(f"/workers/{ids[stranger]}", method="DELETE")
        if rep2 not in ids:
            router("/workers", {"url": rep2, "api_key": API_KEY}, method="POST")
        wait_for(lambda: workers() == EXPECTED_WORKERS, "the router is back to the inventory's workers")


def test_a_router_flag_changed_in_the_inventory_shows_as_drift(fleet):
    changed = {"host": "0.0.0.0", "port": ROUTER_PORT, "policy": "random"}
    rc, out = fleet.play("drift.yml", "-l", "router", "-e", json.dumps({"sglang_router_args": changed,
                                                                 "sglang_drift_fail_on_drift": False}))
    assert rc == 0, out  # report only
    flat = unflow(out)
    assert "router: DRIFTED, 1 difference: policy" in flat, out
    assert "router: policy: desired random, actual round_robin -> fix: run router.yml -l router" in flat, out
    assert [(i["what"], i["desired"], i["actual"]) for i in router_report(fleet, "drift")["items"]] == [
        ("policy", "random", "round_robin")]


def test_verify_through_the_router_is_near_the_sum_of_its_replicas(fleet):
    rc, out = fleet.play("verify.yml", "-l", "router")
    assert rc == 0, out
    report = router_report(fleet, "verify")
    replicas = [json.loads((fleet.reports / r / "verify-latest.json").read_text()) for r in REPLICAS]
    mine = [next(lv for lv in r["levels"] if lv["concurrency"] == 1) for r in replicas]
    (level,) = report["levels"]
    print(f"through the router: {level}")
    assert level["concurrency"] == 2 and level["failed"] == 0  # LIGHT_VERIFY: c=1 per replica, 2 replicas
    assert level["replicas_output_tok_s"] == round(sum(m["output_tok_s"] for m in mine), 2)
    assert 0.7 <= level["output_tok_s"] / level["replicas_output_tok_s"] <= 1.3, level
    assert report["passed"] is True
    assert f"router: PASS through the router: c=2 {level['output_tok_s']:.1f} tok/s out" in unflow(out), out


# The least a drained rollout of 2 replicas, one at a time, may serve of what the fleet served
# before it, in every WINDOW_S seconds: one replica of two serves on (half, less the drain's edges).
SERVING_SHARE, WINDOW_S, BASELINE_S = 0.4, 5.0, 10.0


def test_a_rollout_of_every_replica_behind_the_router_fails_no_request(fleet):
    with Load(CLIENT) as load:
        time.sleep(BASELINE_S)
        start = time.monotonic()
        rc, out = rollout(fleet, "drained")
        end = time.monotonic()
    assert rc == 0, out
    before = sum(start - BASELINE_S <= t < start for t in load.done) / BASELINE_S
    windows = [sum(w <= t < w + WINDOW_S for t in load.done) / WINDOW_S
               for w in (start + i * WINDOW_S for i in range(int((end - start) // WINDOW_S)))]
    print(f"drained rollout: {before:.1f} requests/s before, per {WINDOW_S:.0f} s during: "
          + " ".join(f"{w:.1f}" for w in windows))
    assert before > 1 and len(windows) >= 3
    assert min(windows) >= SERVING_SHARE * before, (before, windows)
    for host in REPLICAS:
        assert recap(out, host)["failed"] == 0
        assert f"{host}: out of router router (http://{SUBNET}" in out, out
        assert f"{host}: back in router router (http://{SUBNET}" in out, out
    print(f"drained rollout: {load.ok} requests ok, {load.failed} failed")
    assert load.ok > 20
    assert load.failed == 0
    assert workers() == EXPECTED_WORKERS
    # put back with their key, as the router's --worker-urls had them: the router read their model
    assert [w["model_id"] for w in json.loads(router("/workers")[1])["workers"]] == ["/models/Qwen3-8B"] * 2
    assert API_KEY not in out


def test_a_rerun_that_changes_nothing_keeps_every_replica_in_the_router(fleet):
    """The drain is for a restart: a deploy that restarts nothing never takes capacity out. Each replica
    is in sync, its release verified good: it is left alone, and stays routed."""
    rc, out = rollout(fleet, "drained")
    assert rc == 0, out
    assert [recap(out, host)["changed"] for host in REPLICAS] == [0, 0], out
    assert "out of router" not in out, out
    for host in REPLICAS:
        assert f"{host}: in sync with its last complete deploy: nothing to do" in unflow(out), out
    assert workers() == EXPECTED_WORKERS


def test_tune_takes_its_host_out_of_the_router_for_the_search_and_puts_it_back(fleet):
    """tune.yml restarts its host once per candidate: the host leaves the router first (its in-flight
    requests finish), so a client of the router sees no failed request, and it is back in at the end,
    serving what it ran."""
    space = {"sglang_tune_space": {"schedule_policy": ["fcfs", "lpm"]}, "sglang_tune_from_audit": False,
             "sglang_tune_budget_minutes": 10, "sglang_tune_restart_s": 15, "sglang_tune_measure_s": 10}
    with Load(CLIENT) as load:
        rc, out = fleet.play("tune.yml", "-l", "rep1", "-e", json.dumps(space))
    assert rc == 0, out[-20000:]
    flat = unflow(out)
    assert f"rep1: out of router router (http://{SUBNET}" in flat and f"rep1: back in router router (http://{SUBNET}" in flat, out
    assert "rep1: tuned decode_tok_s@1: " in flat, out
    print(f"tune behind the router: {load.ok} requests ok, {load.failed} failed")
    assert load.ok > 20 and load.failed == 0
    assert workers() == EXPECTED_WORKERS
    assert API_KEY not in out


def test_the_same_rollout_without_draining_breaks_requests(fleet):
    """The control: rep1 alone restarted under the same load without leaving the router (one replica
    shows it; the drained rollout above did both)."""
    with Load(CLIENT) as load:
        rc, out = rollout(fleet, "undrained", "-e", "sglang_router_host=", "-l", "rep1")
    assert rc == 0 and recap(out, "rep1")["changed"] > 0, out
    assert "out of router" not in out
    print(f"undrained rollout: {load.ok} requests ok, {load.failed} failed")
    assert load.ok > 20
    assert load.failed > 0


def test_the_router_requires_the_key_and_never_shows_it(fleet):
    with pytest.raises(urllib.error.HTTPError) as refused:
        router("/generate", {"text": "no key", "sampling_params": {"max_new_tokens": 2}}, auth=False)
    assert refused.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as refused:
        router("/workers", auth=False)  # its worker API too: nobody without the key removes a worker
    assert refused.value.code == 401
    rc, out = run([BIN / "ansible", "-i", fleet.inventory, "router", "-b", "-m", "shell", "-a",
                   "stat -c '%a %U' /etc/sglang-router/sglang-router.env; grep -c '^SGLANG_API_KEY=' "
                   "/etc/sglang-router/sglang-router.env; cat /etc/systemd/system/sglang-router.service; "
                   "for p in $(pgrep -u sglang-router); do tr '\\0' ' ' < /proc/$p/cmdline; echo; done; "
                   "journalctl -u sglang-router --no-pager | tail -n 200"])
    assert rc == 0, out
    assert "600 root\n1\n" in out, out  # the key is in the root-only EnvironmentFile, once
    assert "EnvironmentFile=/etc/sglang-router/sglang-router.env" in out, out
    assert "sglang::router" in out and f"{LAUNCHER} sglang_router.launch_router" in out, out  # the processes were read
    assert API_KEY not in out, out  # not in the unit, any of the router's argv, or its log
    assert not [p for p in fleet.reports.rglob("*") if p.is_file() and API_KEY in p.read_text(errors="replace")]


def test_a_router_that_is_down_refuses_the_rollout_of_serving_replicas_before_any_change(fleet):
    """A serving replica cannot be drained from a router that is down: refused, named, untouched."""
    state = "systemctl show sglang -p MainPID; sha256sum /etc/systemd/system/sglang.service"
    before = {host: fleet.ssh(host, state) for host in REPLICAS}
    fleet.ssh("router", "systemctl stop sglang-router")
    try:
        rc, out = rollout(fleet, "router-down")
        flat = unflow(out)
        assert rc == 2, out
        for host in REPLICAS:
            assert recap(out, host)["changed"] == 0 and recap(out, host)["failed"] == 1, out
            assert (f"{host}: its router router is not up (http://127.0.0.1:{ROUTER_PORT}/workers: "
                    "<urlopen error [Errno 111] Connection refused>)"
                    f" while {host} serves (http://127.0.0.1:30000/health answered 200)") in flat, out
            assert ("Nothing was changed. Bring the router up first (ansible-playbook router.yml -l router), "
                    "then deploy again; or deploy without draining (-e sglang_router_host=).") in flat, out
        assert {host: fleet.ssh(host, state) for host in REPLICAS} == before
        assert API_KEY not in out
    finally:
        fleet.ssh("router", "systemctl start sglang-router")
    wait_for(lambda: CLIENT.answers(workers) == EXPECTED_WORKERS, "the router is back with both replicas")
