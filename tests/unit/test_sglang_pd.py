"""PD disaggregation as inventory groups: the servers' derived --disaggregation-mode and
--disaggregation-bootstrap-port (plugins/module_utils/host/pd.py, the filter plugins/filter/sglang_pd.py),
the router's --prefill/--decode (plugins/filter/sglang_router.py), and every refusal of a bad pair."""
import importlib.util
import pathlib

import pytest

from ansible_collections.sglang.fleet.plugins.filter import sglang_pd as pd_filters
from ansible_collections.sglang.fleet.plugins.module_utils.host import pd

REPO = pathlib.Path(__file__).resolve().parents[2]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


router = _load("sglang_router_filters", "plugins/filter/sglang_router.py")

PAIR = {"sglang_pd_prefill_group": "qwen_prefill", "sglang_pd_decode_group": "qwen_decode"}


def fleet(**over):
    """p1, p2 (qwen_prefill), d1 (qwen_decode): the pair named in the vars of their parent group; solo apart."""
    hv = {
        "p1": {"ansible_host": "10.0.0.11", "sglang_args": {"model_path": "/m"}, **PAIR},
        "p2": {"ansible_host": "10.0.0.12", "sglang_args": {"model_path": "/m", "port": 30001}, **PAIR},
        "d1": {"ansible_host": "10.0.0.21", "sglang_args": {"model_path": "/m"}, **PAIR},
        "solo": {"ansible_host": "10.0.0.30", "sglang_args": {"model_path": "/m"}},
    }
    for host, values in over.items():
        hv[host] = {k: v for k, v in {**hv[host], **values}.items() if v is not None}
    groups = {"all": list(hv), "qwen_prefill": ["p1", "p2"], "qwen_decode": ["d1"], "qwen_pd": ["p1", "p2", "d1"]}
    return hv, groups


def test_each_side_is_derived_from_its_group_with_one_bootstrap_port():
    hv, groups = fleet()
    plans = {h: pd.plan_of(h, hv, groups) for h in ("p1", "p2", "d1")}
    assert all(p["problems"] == [] for p in plans.values())
    assert plans["p1"]["args"] == {"disaggregation_mode": "prefill", "disaggregation_bootstrap_port": 8998}
    assert plans["p2"]["args"] == {"disaggregation_mode": "prefill", "disaggregation_bootstrap_port": 8998}
    assert plans["d1"]["args"] == {"disaggregation_mode": "decode", "disaggregation_bootstrap_port": 8998}
    hv, groups = fleet(**{h: {"sglang_pd_bootstrap_port": 9100} for h in ("p1", "p2", "d1")})
    assert pd.plan_of("d1", hv, groups)["args"]["disaggregation_bootstrap_port"] == 9100


def test_the_filter_is_the_pd_plan():
    """plugins/filter/sglang_pd.py only maps the filter name to module_utils/host/pd.py."""
    assert pd_filters.FilterModule().filters() == {"sglang_pd_plan": pd.plan_of}


def test_a_host_outside_any_pair_gets_nothing():
    hv, groups = fleet()
    assert pd.plan_of("solo", hv, groups) == {"problems": []}


def test_typed_derived_flags_are_refused_with_the_reason():
    hv, groups = fleet(d1={"sglang_args": {"model_path": "/m", "disaggregation_bootstrap_port": 9000}})
    (msg,) = pd.plan_of("d1", hv, groups)["problems"]
    assert msg.startswith("sglang_args sets disaggregation_bootstrap_port: in a PD pair these are derived")
    assert "a decode server binds nothing on it, it only falls back to it for a request without bootstrap_port" in msg
    hv, groups = fleet(solo={"sglang_args": {"model_path": "/m", "disaggregation_mode": "prefill"}})
    assert pd.plan_of("solo", hv, groups)["problems"][0].startswith("sglang_args sets disaggregation_mode:")


def test_a_host_in_both_groups_is_refused():
    hv, groups = fleet()
    groups["qwen_decode"] = ["d1", "p2"]
    (msg,) = pd.plan_of("p1", hv, groups)["problems"]
    assert msg == ("p2 in both 'qwen_prefill' (prefill) and 'qwen_decode' (decode): a server runs one "
                   "--disaggregation-mode; keep each host in one of the two groups")


def test_an_empty_or_missing_side_and_a_half_named_pair_are_refused():
    hv, groups = fleet()
    groups["qwen_decode"] = []
    assert pd.plan_of("p1", hv, groups)["problems"] == [
        "p1: the PD decode group 'qwen_decode' has no hosts: a PD pair needs at least one decode server"]
    del groups["qwen_decode"]
    assert "'qwen_decode' is not an inventory group" in pd.plan_of("p1", hv, groups)["problems"][0]
    hv, groups = fleet(p1={"sglang_pd_decode_group": None})
    assert pd.plan_of("p1", hv, groups)["problems"][0].startswith(
        "p1 names only one side of a PD pair (sglang_pd_prefill_group 'qwen_prefill', sglang_pd_decode_group '')")
    hv, groups = fleet(solo=PAIR)
    assert "solo names the PD pair 'qwen_prefill' / 'qwen_decode' but is in neither group" in \
        pd.plan_of("solo", hv, groups)["problems"][0]


def test_bootstrap_port_must_be_one_free_port_of_the_pair():
    hv, groups = fleet(p2={"sglang_pd_bootstrap_port": 9000})
    assert "has more than one sglang_pd_bootstrap_port (p1 8998, p2 9000, d1 8998)" in \
        pd.plan_of("p1", hv, groups)["problems"][0]
    hv, groups = fleet(**{h: {"sglang_pd_bootstrap_port": 30001} for h in ("p1", "p2", "d1")})
    (msg,) = pd.plan_of("p2", hv, groups)["problems"]
    assert msg.startswith("sglang_pd_bootstrap_port 30001 is this prefill server's API port")
    assert pd.plan_of("p1", hv, groups)["problems"] == []  # p1 serves on 30000
    assert pd.plan_of("d1", hv, groups)["problems"] == []  # a decode binds nothing there
    hv, groups = fleet(**{h: {"sglang_pd_bootstrap_port": "8998"} for h in ("p1", "p2", "d1")})
    assert pd.plan_of("d1", hv, groups)["problems"][0].startswith(
        "sglang_pd_bootstrap_port is '8998': it must be a whole number from 1 to 65535")


# sglang_args takes disaggregation-transfer-backend for disaggregation_transfer_backend (one argparse
# dest): the pair's checks read it either way.
@pytest.mark.parametrize("key", ["disaggregation_transfer_backend", "disaggregation-transfer-backend"])
def test_transfer_backend_one_per_pair_and_never_fake_on_prefill(key):
    hv, groups = fleet(d1={"sglang_args": {"model_path": "/m", key: "nixl"}})
    assert "one transfer backend: p1 mooncake, p2 mooncake, d1 nixl" in pd.plan_of("p1", hv, groups)["problems"][0]
    fake = {"sglang_args": {"model_path": "/m", key: "fake"}}
    hv, groups = fleet(p1=fake, p2=fake, d1=fake)
    (msg,) = pd.plan_of("p1", hv, groups)["problems"]
    assert msg.startswith("disaggregation_transfer_backend fake on a prefill server: SGLang refuses it at start")
    assert pd.plan_of("d1", hv, groups)["problems"] == []


def test_one_release_one_model_and_one_kv_layout_per_pair():
    """What the decode refuses only at its first request (0.5.23 common/conn.py:1320-1335), refused before
    any change: the same release, model, page size and KV cache dtype on both sides."""
    hv, groups = fleet(**{h: {"sglang_version": "0.5.23"} for h in ("p1", "p2", "d1")})
    assert all(pd.plan_of(h, hv, groups)["problems"] == [] for h in ("p1", "p2", "d1"))
    hv["d1"]["sglang_version"] = "0.5.18"
    (msg,) = pd.plan_of("p1", hv, groups)["problems"]
    assert msg.startswith("the PD pair 'qwen_prefill' / 'qwen_decode' runs more than one SGLang release "
                          "(p1 0.5.23, p2 0.5.23, d1 0.5.18): the KV transfer is internal to a release")
    assert msg.endswith("set sglang_version once, in the pair's group vars")
    hv, groups = fleet(d1={"sglang_args": {"model_path": "/other", "page-size": 16}},
                       p2={"sglang_args": {"model_path": "/m", "kv_cache_dtype": "fp8_e4m3"}})
    problems = pd.plan_of("d1", hv, groups)["problems"]
    assert [p.split(":")[0] for p in problems] == [
        "the PD pair 'qwen_prefill' / 'qwen_decode' declares model_path differently (p1 /m, p2 /m, d1 /other)",
        "the PD pair 'qwen_prefill' / 'qwen_decode' declares page_size differently (p1 (not set), p2 (not set), d1 16)",
        "the PD pair 'qwen_prefill' / 'qwen_decode' declares kv_cache_dtype differently "
        "(p1 (not set), p2 fp8_e4m3, d1 (not set))"]
    assert '"Both servers must use the same --page-size value"' in problems[1]
    assert problems[2].endswith("set sglang_args.kv_cache_dtype the same on both groups, or on neither")
    assert pd.plan_of("solo", hv, groups)["problems"] == []  # outside the pair: nothing to compare


def test_the_router_gets_prefill_urls_with_bootstrap_ports_and_decode_urls():
    hv, groups = fleet()
    plan = router.pd_plan("qwen_prefill", "qwen_decode", groups, hv, {"policy": "round_robin"}, "lb")
    assert plan == {"pd": True, "problems": [], "groups": [
        ["--prefill", "http://10.0.0.11:30000", "8998"], ["--prefill", "http://10.0.0.12:30001", "8998"],
        ["--decode", "http://10.0.0.21:30000"]]}
    assert router.pd_plan("", "", groups, hv, {}) == {"pd": False, "problems": []}


def test_the_router_refuses_a_bad_pair_and_typed_pd_flags():
    hv, groups = fleet()
    assert router.pd_plan("qwen_prefill", "", groups, hv, {}, "lb")["problems"][0].startswith(
        "lb (sglang_router_prefill_group / sglang_router_decode_group) names only one side of a PD pair")
    plan = router.pd_plan("qwen_prefill", "qwen_decode", groups, hv, {"pd_disaggregation": True, "decode": ["x"]})
    assert plan["problems"] == ["sglang_router_args sets decode, pd_disaggregation: in PD mode the router's "
                                "--pd-disaggregation, --prefill and --decode come from sglang_router_prefill_group "
                                "and sglang_router_decode_group; remove them"]
    # a server the router would treat as prefill, but which would not run in PD mode
    hv, groups = fleet(p2={"sglang_pd_prefill_group": None, "sglang_pd_decode_group": None})
    assert router.pd_plan("qwen_prefill", "qwen_decode", groups, hv, {})["problems"][0].startswith(
        "p2 of 'qwen_prefill' / 'qwen_decode' would not run in PD mode")


def test_the_router_names_a_worker_whose_flags_are_a_command_line():
    hv, groups = fleet(d1={"sglang_args": "--model-path /m --port 30000"})
    with pytest.raises(ValueError, match=r"^sglang_args of d1 is a string, not a mapping: write each SGLang flag as a "
                                         r"key \(its argparse dest: tp_size for --tp-size\)"):
        router.worker_urls(["p1", "d1"], hv)


@pytest.mark.wheels
def test_the_rendered_pd_argv_is_what_the_real_router_parses():
    """The role's argv (sglang_router_args rendered by sglang_argv, then the plan's --prefill/--decode) through
    sglang-router 0.3.2's own argparse and RouterArgs.from_cli_args (the sglang_router_flags module)."""
    flags = _load("test_sglang_router_flags", "tests/unit/test_sglang_router_flags.py")
    package = flags.package.__wrapped__()
    hv, groups = fleet()
    plan = router.pd_plan("qwen_prefill", "qwen_decode", groups, hv, {})
    argv = ["--pd-disaggregation", "--policy", "round_robin"] + [w for g in plan["groups"] for w in g]
    rc, result = flags.check(package, argv)
    assert rc == 0, result
    parsed = result["parsed"]
    assert parsed["pd_disaggregation"] is True
    assert parsed["prefill_urls"] == [["http://10.0.0.11:30000", 8998], ["http://10.0.0.12:30001", 8998]]
    assert parsed["decode_urls"] == ["http://10.0.0.21:30000"]
    rc, result = flags.check(package, ["--pd-disaggregation", "--prefill", "http://10.0.0.11:30000", "eight"])
    assert rc != 0 and "Invalid bootstrap port: eight. Must be a number or 'none'" in result["msg"]
