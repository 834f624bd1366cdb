"""PD disaggregation on lab hosts of their own (10.89.109.0/24, containers sglang-pd-*): one prefill
server (pre1) and one decode server (dec1) of one model, declared as two inventory groups under a
group naming the pair, and a router host running the real sglang-router 0.3.2 in PD mode
(--pd-disaggregation --prefill URL BOOTSTRAP_PORT --decode URL, rendered from the groups).

The simulator stands in for both sides (the real SGLang 0.5.23 wheel's argparse and the release's
PD behaviour, lab/sglang_sim/README.md): the router sends each generation to both with one
bootstrap_room; the prefill answers after its first token, the decode streams once the room's KV
came. Both sides log the room, so the test matches the rooms the prefill served with the rooms the
decode streamed. A bad pair (a host in both groups) is refused before any host changes.
"""

import concurrent.futures
import json
import re
import shutil
import time

import pytest
import yaml
from lab_fleet import KNOWN_HOSTS, LIGHT_VERIFY, REPO, LabFleet, lab_hosts, recap, run, unflow
from router_client import RouterClient

pytestmark = pytest.mark.lab

PREFIX, SUBNET = "sglang-pd", "10.89.109."
ROUTER_PORT = 8080
BOOTSTRAP_PORT = 8998
IPS = {"pre1": f"{SUBNET}11", "dec1": f"{SUBNET}12", "router": f"{SUBNET}20"}
PD_ROUTER = RouterClient(f"http://{IPS['router']}:{ROUTER_PORT}", timeout=60)
router = PD_ROUTER.request
LOG = "/var/log/journal/sglang.service.log"  # the lab's journal (lab/README.md)
PAIR = {"sglang_pd_prefill_group": "qwen_prefill", "sglang_pd_decode_group": "qwen_decode",
        "sglang_pd_bootstrap_port": BOOTSTRAP_PORT}
# verify through the PD router, light as the lab's (lab/light_verify.yml); a floor at c=1 it meets
VERIFY_PD = {"concurrency": [1, 2], "input_len": 64, "output_len": 32, "requests_per_stream": 1,
             "warmup_per_stream": 0, "repeats": 1, "api": "completions", "min_output_tok_s": {1: 5}}


def inventory(tmp_path, bad=False):
    """The lab inventory: pre1 and dec1 (h200x1's profile, served beyond loopback), the pair named in
    the vars of qwen_pd, and a router host in PD mode. `bad`: pre1 in the decode group too."""
    inv = tmp_path / ("bad" if bad else "lab")
    shutil.copytree(REPO / "inventories" / "lab", inv)
    known = str(KNOWN_HOSTS / PREFIX)
    server = yaml.safe_load((inv / "host_vars" / "h200x1.yml").read_text())
    server["sglang_args"] = {**server["sglang_args"], "host": "0.0.0.0"}
    # the lab network is internal: an open bind is intended here (a production fleet sets SGLANG_API_KEY)
    server["sglang_service_allow_unauthenticated_bind"] = True
    for name in ("pre1", "dec1"):
        (inv / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(server))
    lab_vars = yaml.safe_load((inv / "group_vars" / "sglang_lab.yml").read_text())
    (inv / "group_vars" / "sglang_lab.yml").write_text(yaml.safe_dump({**lab_vars, **LIGHT_VERIFY}))
    connection = {k: lab_vars[k] for k in ("ansible_user", "ansible_ssh_private_key_file", "ansible_ssh_common_args")}
    data = {"all": {"children": {
        "sglang_servers": {"children": {
            "sglang_lab": {"hosts": {h: {"ansible_host": IPS[h]} for h in ("pre1", "dec1")},
                           "vars": {"lab_known_hosts": known}},
            "qwen_pd": {"children": {"qwen_prefill": {"hosts": {"pre1": {}}},
                                     "qwen_decode": {"hosts": {"dec1": {}, **({"pre1": {}} if bad else {})}}},
                        "vars": PAIR}}},
        "sglang_routers": {
            "hosts": {"router": {"ansible_host": IPS["router"]}},
            "vars": {**connection, "lab_known_hosts": known,
                     "sglang_router_prefill_group": "qwen_prefill", "sglang_router_decode_group": "qwen_decode",
                     "sglang_router_allow_unauthenticated_bind": True,  # the lab's internal network, as the servers
                     "sglang_router_args": {"host": "0.0.0.0", "port": ROUTER_PORT, "policy": "round_robin",
                                            "worker_startup_check_interval": 1},
                     "sglang_router_verify_pd": VERIFY_PD}}}}}
    path = inv / "hosts.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if shutil.which("podman") is None:
        pytest.skip("podman not installed (make lab-deps)")
    tmp = tmp_path_factory.mktemp("pd")
    inv = inventory(tmp)
    with lab_hosts(inv, PREFIX):
        lab = LabFleet(inv, tmp / "reports", KNOWN_HOSTS / PREFIX)
        rc, out = lab.play("lab/prepare.yml")
        assert rc == 0, out
        # The router and its servers deploy at once (different hosts): the router starts first and
        # takes each server in once it answers (worker_startup_check_interval, 1 s here).
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            plays = {"deploy.yml": pool.submit(lab.play, "deploy.yml", "-e", '{"sglang_rollout_batches": ["100%"]}'),
                     "router.yml": pool.submit(lab.play, "router.yml")}
            outs = {name: future.result() for name, future in plays.items()}
        for rc, out in outs.values():
            assert rc == 0, out
        end = time.monotonic() + 120
        while time.monotonic() < end and not generates():
            time.sleep(1)
        yield lab, tmp, {name: out for name, (_, out) in outs.items()}


def streamed_generation(tokens):
    return PD_ROUTER.streamed_generation("hello disaggregated world", tokens)


def generates():
    try:
        status, events = streamed_generation(2)
    except OSError:  # refused, reset, HTTP error: not serving yet
        return False
    return status == 200 and events[-1:] == ["[DONE]"] and "meta_info" in events[-2]


def rooms(log, pattern):
    return set(re.findall(pattern, log))


def test_each_side_runs_in_its_mode_and_the_router_in_pd_mode(fleet):
    lab, _, outs = fleet
    for host, mode in (("pre1", "prefill"), ("dec1", "decode")):
        argv = lab.ssh(host, "cat /proc/$(pgrep -f sglang_sim.py | head -1)/cmdline | tr '\\0' ' '")
        assert f" --disaggregation-mode {mode} " in argv and f" --disaggregation-bootstrap-port {BOOTSTRAP_PORT} " in argv, argv
    assert "a deploy records its release unverified" in unflow(outs["deploy.yml"])
    rc, unit = run(["ssh", "-i", REPO / ".lab" / "ssh" / "id_ed25519", "-o", "BatchMode=yes", "-o",
                    f"UserKnownHostsFile={KNOWN_HOSTS / PREFIX}", f"root@{IPS['router']}",
                    "cat /etc/systemd/system/sglang-router.service"])
    assert rc == 0, unit
    assert (f"--pd-disaggregation \\\n    --policy round_robin \\\n    --port {ROUTER_PORT} \\\n"
            "    --worker-startup-check-interval 1 \\\n"
            f"    --prefill http://{IPS['pre1']}:30000 {BOOTSTRAP_PORT} \\\n"
            f"    --decode http://{IPS['dec1']}:30000\n") in unit, unit
    assert "--worker-urls" not in unit


def test_streamed_generations_through_the_router_are_prefilled_then_decoded(fleet):
    lab, _, _ = fleet
    for tokens in (8, 24, 3):
        status, events = streamed_generation(tokens)
        assert status == 200 and events[-1] == "[DONE]", events
        last = json.loads(events[-2])
        assert last["meta_info"]["completion_tokens"] == tokens and len(last["text"]) == tokens, last
    prefilled = rooms(lab.ssh("pre1", f"cat {LOG}"), rf"prefill: bootstrap_room=(\d+) prefilled 3 tokens, KV ready "
                                                     rf"for {re.escape(IPS['pre1'])}:{BOOTSTRAP_PORT}")
    decode_log = lab.ssh("dec1", f"cat {LOG}")
    received = rooms(decode_log, rf"decode: bootstrap_room=(\d+) KV received from {re.escape(IPS['pre1'])}:"
                                 rf"{BOOTSTRAP_PORT}, decoding \d+ tokens")
    streamed = rooms(decode_log, r"decode: bootstrap_room=(\d+) done, (?:8|24|3) tokens")
    assert len(prefilled) >= 3, prefilled  # one room per request, the router's (random) ids
    assert streamed <= received and len(streamed) >= 3
    assert streamed <= prefilled  # every room the decode streamed was prefilled by pre1


def test_drift_sees_the_pair_and_its_router_in_sync_and_verify_measures_it_through_the_router(fleet):
    lab, tmp, _ = fleet
    rc, out = lab.play("drift.yml")
    assert rc == 0, out
    text = unflow(out)
    assert "drift: 2 hosts in sync, 0 drifted" in text, out
    assert "router: in sync" in text, out
    rc, out = lab.play("verify.yml", "-l", "router")
    assert rc == 0, out
    report = json.loads((tmp / "reports" / "router" / "verify-latest.json").read_text())
    assert report["mode"] == "pd" and report["passed"] is True
    assert [(lv["concurrency"], lv["failed"], lv["floor_tok_s"]) for lv in report["levels"]] == [(1, 0, 5.0), (2, 0, None)]
    assert all(lv["output_tok_s"] > 5 and lv["completed"] == lv["concurrency"] for lv in report["levels"]), report
    assert "router: PASS through the PD router: c=1 " in unflow(out), out
    # a floor the pair cannot reach fails the router, with the level and the floor
    rc, out = lab.play("verify.yml", "-l", "router", "-e", json.dumps({"sglang_router_verify_pd": {
        **VERIFY_PD, "concurrency": [1], "min_output_tok_s": {1: 100000}}}))
    assert rc != 0
    assert "router: c=1: " in unflow(out) and "tok/s through the PD router, below its floor 100000.0" in unflow(out), out


def test_a_rollout_takes_each_side_out_of_the_router_and_puts_it_back_as_its_kind(fleet):
    lab, _, _ = fleet

    def kinds():  # each worker as the router knows it, less its id and its live load
        return {w["url"]: {k: v for k, v in w.items() if k not in ("id", "load")}
                for w in json.loads(router("/workers")[1])["workers"]}
    before = kinds()
    prefill, decode = f"http://{IPS['pre1']}:30000", f"http://{IPS['dec1']}:30000"
    assert sorted(before) == sorted([prefill, decode]), before
    print(f"the router's workers before the rollout: {before}")
    assert "prefill" in json.dumps(before[prefill]["worker_type"]) and str(BOOTSTRAP_PORT) in json.dumps(before[prefill])
    assert "decode" in json.dumps(before[decode]["worker_type"])
    env = {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json", "ROLLOUT_MARKER": "pd"}
    rc, out = lab.play("deploy.yml", "-e", json.dumps({"sglang_rollout_batches": [1], "sglang_router_host": "router",
                                                       "sglang_service_environment": env}))
    assert rc == 0, out
    for host in ("pre1", "dec1"):
        assert recap(out, host)["failed"] == 0
        assert f"{host}: out of router router (http://{IPS[host]}:30000)" in out, out
        assert f"{host}: back in router router (http://{IPS[host]}:30000)" in out, out
    assert kinds() == before  # the prefill back as a prefill with its bootstrap port, the decode as a decode
    assert generates()


def test_a_direct_request_without_the_router_is_refused_by_a_pd_server(fleet):
    lab, _, _ = fleet
    out = lab.ssh("pre1", "curl -s -w ' %{http_code}' -H 'Content-Type: application/json' -d "
                          "'{\"text\": \"hi\", \"sampling_params\": {\"max_new_tokens\": 2}}' http://127.0.0.1:30000/generate")
    assert out.endswith(" 400") and "Disaggregated request received without bootstrap room id" in out, out


def test_a_bad_pd_pair_is_refused_before_any_host_changes(fleet):
    lab, tmp, _ = fleet
    state = "md5sum /etc/systemd/system/sglang.service; pgrep -f sglang_sim.py"
    before = {h: lab.ssh(h, state) for h in ("pre1", "dec1")}
    bad = inventory(tmp, bad=True)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        bad_lab = LabFleet(bad, tmp / "bad", KNOWN_HOSTS / PREFIX)
        servers = pool.submit(bad_lab.play, "deploy.yml", "-e", '{"sglang_rollout_batches": ["100%"]}', timeout=600)
        routers = pool.submit(bad_lab.play, "router.yml", timeout=600)
    rc, out = servers.result()
    assert rc != 0
    flat = unflow(out)
    assert ("pre1: pre1 in both 'qwen_prefill' (prefill) and 'qwen_decode' (decode): a server runs one "
            "--disaggregation-mode; keep each host in one of the two groups") in flat, out
    assert recap(out, "pre1")["changed"] == 0 and recap(out, "dec1")["changed"] == 0
    rc, out = routers.result()
    assert rc != 0
    assert "router: pre1 in both 'qwen_prefill' (prefill) and 'qwen_decode' (decode)" in unflow(out), out
    assert recap(out, "router")["changed"] == 0
    assert {h: lab.ssh(h, state) for h in ("pre1", "dec1")} == before
    status, events = streamed_generation(5)  # still serving
    assert status == 200 and json.loads(events[-2])["meta_info"]["completion_tokens"] == 5
