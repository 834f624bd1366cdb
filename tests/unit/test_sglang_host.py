"""plugins/module_utils/host/host_model.py: the host model every playbook computes once per server
(playbooks/prelude.yml, through the filter plugins/filter/sglang_host.py), and the one merge of the
inventory's arguments behind it."""
import pathlib
import re
import subprocess

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.sglang.fleet.plugins.filter import sglang_host as host_filters
from ansible_collections.sglang.fleet.plugins.module_utils.host import host_model as host

REPO = pathlib.Path(__file__).resolve().parents[2]
FILTERS = host_filters.FilterModule().filters()

COMMON = {"mem_fraction_static": 0.85, "port": 30000}
# Code that reads sglang_args_common to merge it: Jinja's combine, a Python mapping's get, or a loop
# over the two names.
MERGE = re.compile(r"sglang_args_common[^\n]*combine|get\([\"']sglang_args_common|[\"']sglang_args_common[\"'], [\"']sglang_args[\"']")


def fleet():
    """solo (one host), a multi-node server big0 + big1, a PD pair p1 (prefill) / d1 (decode)."""
    big = {"sglang_version": "0.5.18", "sglang_args_common": COMMON, "sglang_multinode_group": "big",
           "sglang_args": {"model_path": "/models/big", "tp_size": 16}}
    pair = {"sglang_version": "0.5.23", "sglang_args_common": COMMON, "sglang_pd_prefill_group": "pre",
            "sglang_pd_decode_group": "dec", "sglang_args": {"model_path": "/models/pd"}}
    hv = {"solo": {"sglang_version": "0.5.11", "sglang_args_common": COMMON, "ansible_host": "10.0.0.9",
                   "sglang_args": {"model_path": "/models/solo", "mem_fraction_static": 0.9, "host": "0.0.0.0",
                                   "port": 31000}},
          "big0": {**big, "ansible_host": "10.0.0.10"}, "big1": {**big, "ansible_host": "10.0.0.11"},
          "p1": {**pair, "ansible_host": "10.0.0.21"}, "d1": {**pair, "ansible_host": "10.0.0.22"}}
    groups = {"all": list(hv), "sglang_servers": list(hv), "big": ["big0", "big1"], "pre": ["p1"], "dec": ["d1"]}
    return hv, groups


def model(me, hv=None, groups=None):
    if hv is None:
        hv, groups = fleet()
    return host.host_model(me, hv, groups, list(hv))


def test_a_single_host_merges_the_fleet_s_args_under_its_own():
    m = model("solo")
    assert m["inventory_args"] == m["args"] == {"mem_fraction_static": 0.9, "port": 31000,
                                                "model_path": "/models/solo", "host": "0.0.0.0"}
    assert m["argv"][:2] == ["--model-path", "/models/solo"] and "--mem-fraction-static" in m["argv"]
    assert m["url"] == "http://127.0.0.1:31000"  # a wildcard bind reached through loopback
    assert (m["version"], m["multinode"], m["pd"], m["problems"], m["serves_api"]) == ("0.5.11", {}, {}, [], True)


def test_a_multi_node_server_s_nodes_get_their_derived_flags_in_args_not_in_the_inventory():
    hv, groups = fleet()
    rank0, rank1 = model("big0", hv, groups), model("big1", hv, groups)
    assert rank1["args"] == {**COMMON, "model_path": "/models/big", "tp_size": 16,
                             "nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.10:20000"}
    assert "nnodes" not in rank1["inventory_args"] and "nnodes" not in hv["big1"]["sglang_args"]
    flags = dict(zip(rank1["argv"][::2], rank1["argv"][1::2]))
    assert (flags["--nnodes"], flags["--node-rank"], flags["--dist-init-addr"]) == ("2", "1", "10.0.0.10:20000")
    assert (rank0["serves_api"], rank1["serves_api"]) == (True, False)
    assert rank1["multinode"]["rank0"] == "big0" and rank1["multinode"]["members"] == ["big0", "big1"]


def test_a_pd_pair_s_sides_get_their_mode_and_bootstrap_port():
    hv, groups = fleet()
    prefill, decode = model("p1", hv, groups), model("d1", hv, groups)
    assert (prefill["args"]["disaggregation_mode"], decode["args"]["disaggregation_mode"]) == ("prefill", "decode")
    assert prefill["args"]["disaggregation_bootstrap_port"] == decode["args"]["disaggregation_bootstrap_port"] == 8998
    assert (prefill["pd"]["role"], decode["pd"]["role"], prefill["problems"]) == ("prefill", "decode", [])


def test_a_bad_declaration_is_in_problems_for_the_prelude_to_refuse():
    hv, groups = fleet()
    hv["solo"]["sglang_args"] = {"model_path": "/m", "node_rank": 1, "disaggregation_mode": "prefill"}
    problems = model("solo", hv, groups)["problems"]
    assert [p.split(":")[0] for p in problems] == ["sglang_args sets node_rank", "sglang_args sets disaggregation_mode"]
    # a node outside the play: the whole server must be in it
    assert "has nodes outside this play: big1 (rank 1)" in host.host_model("big0", hv, groups, ["big0"])["problems"][0]


def test_a_value_no_command_line_can_hold_leaves_argv_empty_for_the_checks_to_name():
    hv, groups = fleet()
    hv["solo"]["sglang_args"] = {"model_path": "/m", "served_model_name": "a\nb"}
    m = model("solo", hv, groups)
    assert m["argv"] is None and m["args"]["served_model_name"] == "a\nb"


FIX = ("not a mapping: write each SGLang flag as a key (its argparse dest: tp_size for --tp-size) with its value, "
       "true for a flag without one, e.g. {name}: {{tp_size: 2, enable_metrics: true}}")


@pytest.mark.parametrize(("var", "value", "kind"), [
    ("sglang_args", ["--tp", "2"], "a list"),
    ("sglang_args", "--tp 2", "a string"),
    ("sglang_args", 2, "a number"),
    ("sglang_args_common", ["--enable-metrics"], "a list"),
])
def test_flags_written_as_a_command_line_stop_the_prelude_with_the_fix(var, value, kind):
    """Not Python's `dictionary update sequence element #0 has length 9`: the host, the variable, what it is."""
    hv, groups = fleet()
    hv["solo"][var] = value
    with pytest.raises(host.HostModelError) as err:
        model("solo", hv, groups)
    assert str(err.value) == f"solo: {var} is {kind}, " + FIX.format(name=var)
    with pytest.raises(AnsibleFilterError) as err:  # as the prelude sees it: the filter's error, the same words
        FILTERS["sglang_host_model"]("solo", hv, groups, list(hv))
    assert str(err.value) == f"solo: {var} is {kind}, " + FIX.format(name=var)


def test_a_peer_s_flags_written_as_a_command_line_are_named_on_each_node_that_reads_them():
    hv, groups = fleet()
    hv["big1"] = {**hv["big1"], "sglang_args": "--tp-size 16"}
    with pytest.raises(host.HostModelError) as err:
        model("big0", hv, groups)
    assert str(err.value) == "big0: sglang_args of big1 is a string, " + FIX.format(name="sglang_args")
    hv["d1"] = {**hv["d1"], "sglang_args": ["--model-path", "/models/pd"]}
    with pytest.raises(AnsibleFilterError, match=r"^p1: sglang_args of d1 is a list, not a mapping"):
        FILTERS["sglang_host_model"]("p1", hv, groups, list(hv))


def test_only_module_utils_sglang_args_merges_the_inventory_s_args():
    """The host model's promise: one merge. Any other code naming sglang_args_common merges it again."""
    files = subprocess.run(["git", "ls-files", "*.py", "*.yml", "*.j2"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    merging = sorted(f for f in files if (REPO / f).is_file() and not f.startswith(("tests/", "inventories/", "group_vars/", "molecule/"))
                     and not f.endswith("argument_specs.yml")
                     and MERGE.search((REPO / f).read_text()))
    assert merging == ["plugins/module_utils/host/args.py"]


def test_the_host_models_defaults_are_the_roles_defaults():
    """What the host model assumes for a variable the inventory leaves unset is the role's own default."""
    service = yaml.safe_load((REPO / "roles" / "sglang_service" / "defaults" / "main.yml").read_text())
    ml_env = yaml.safe_load((REPO / "roles" / "ml_env" / "defaults" / "main.yml").read_text())
    router = yaml.safe_load((REPO / "roles" / "sglang_router" / "vars" / "main.yml").read_text())
    assert (host.DEFAULT_SERVICE, host.DEFAULT_ENTRYPOINT, host.DEFAULT_PROFILE) == (
        service["sglang_service_name"], service["sglang_service_entrypoint"], ml_env["ml_env_profile"])
    assert router["_sglang_router_launcher"] == host.LAUNCHER  # one launcher on a host, for both units
    assert f"/{host.VENV_MARKER}" in (REPO / "roles" / "ml_env" / "vars" / "main.yml").read_text()


def test_the_paths_follow_the_inventory():
    hv, groups = fleet()
    hv["solo"].update(sglang_env_root="/opt/ml-env", sglang_service_name="sglang-a", ml_env_profile="light")
    m = model("solo", hv, groups)
    assert (m["env_root"], m["venv"], m["venv_marker"], m["lock_file"]) == (
        "/opt/ml-env", "/opt/ml-env/sglang-0.5.11", "/opt/ml-env/sglang-0.5.11/.sglang-fleet-lock.txt",
        "/opt/ml-env/locks/sglang-0.5.11-light.txt")
    assert m["service"] == {"name": "sglang-a", "unit_file": "/etc/systemd/system/sglang-a.service",
                            "env_file": "/etc/sglang/sglang-a.env", "entrypoint": "sglang.launch_server",
                            "launcher": "/usr/local/lib/sglang-fleet/sglang_launch.py", "environment": {}}
    hv["solo"]["ml_env_root"] = "/srv/envs"  # ml_env's own root wins: it is where ml_env builds
    assert model("solo", hv, groups)["venv"] == "/srv/envs/sglang-0.5.11"


SHA_A, SHA_B = "a" * 40, "b" * 40


def test_sglang_model_derives_model_path_under_the_model_root():
    hv, groups = fleet()
    hv["solo"]["sglang_args"] = {"port": 31000}
    hv["solo"]["sglang_model"] = {"repo": "Qwen/Qwen3-8B", "revision": SHA_A}
    m = model("solo", hv, groups)
    assert m["args"]["model_path"] == f"/var/lib/sglang-fleet/models/Qwen--Qwen3-8B/{SHA_A}"
    assert "model_path" not in m["inventory_args"] and m["argv"][:2] == ["--model-path", m["args"]["model_path"]]
    assert (m["model"]["kind"], m["model"]["pinned"], m["model"]["files"], m["problems"]) == ("hub", True, ["*"], [])
    hv["solo"]["sglang_model_root"] = "/data/models/"
    assert model("solo", hv, groups)["args"]["model_path"] == f"/data/models/Qwen--Qwen3-8B/{SHA_A}"


def test_a_host_without_sglang_model_keeps_its_own_model_path():
    m = model("solo")
    assert m["model"] == {} and m["args"]["model_path"] == "/models/solo"


def test_sglang_model_and_a_different_model_path_are_refused():
    hv, groups = fleet()
    hv["solo"]["sglang_model"] = {"repo": "Qwen/Qwen3-8B", "revision": SHA_A}
    (problem,) = model("solo", hv, groups)["problems"]
    assert "sglang_args.model_path /models/solo disagrees with sglang_model" in problem and "remove model_path" in problem


def test_a_bad_sglang_model_is_a_problem_naming_the_key():
    hv, groups = fleet()
    hv["solo"]["sglang_args"] = {}
    hv["solo"]["sglang_model"] = {"repo": "Qwen/Qwen3-8B", "revison": SHA_A}
    (problem,) = model("solo", hv, groups)["problems"]
    assert "unknown key(s) revison" in problem


def test_replicas_behind_one_router_must_serve_the_same_revision():
    hv, groups = fleet()
    for name, sha in (("r1", SHA_A), ("r2", SHA_B), ("r3", SHA_A)):
        hv[name] = {"sglang_version": "0.5.23", "sglang_router_host": "router", "sglang_args": {},
                    "sglang_model": {"repo": "Qwen/Qwen3-8B", "revision": sha}}
    groups["sglang_servers"] += ["r1", "r2", "r3"]
    (problem,) = host.host_model("r1", hv, groups, ["r1"])["problems"]
    assert problem.startswith("r2, another replica behind router router, serves Qwen/Qwen3-8B@bbbbbbbbbbbb")
    assert host.host_model("r3", hv, groups, ["r3"])["problems"] != []
    hv["r2"]["sglang_model"]["revision"] = SHA_A
    assert host.host_model("r1", hv, groups, ["r1"])["problems"] == []


def test_a_variant_follows_its_version_and_args_and_refuses_a_server_of_several_hosts():
    """sglang_host_variant (regression.yml's steps, tune.yml's candidates): venv and lock follow the version."""
    hv, groups = fleet()
    hv["solo"].update(ml_env_root="/srv/envs", ml_env_profile="light")
    base = model("solo", hv, groups)
    v = host.host_variant(base, "0.5.23", {"model_path": "/models/solo", "port": 31000, "tp_size": 2})
    assert (v["version"], v["venv"], v["venv_marker"], v["lock_file"]) == (
        "0.5.23", "/srv/envs/sglang-0.5.23", "/srv/envs/sglang-0.5.23/.sglang-fleet-lock.txt",
        "/srv/envs/locks/sglang-0.5.23-light.txt")
    assert v["args"] == v["inventory_args"] == {"model_path": "/models/solo", "port": 31000, "tp_size": 2}
    assert v["argv"] == ["--model-path", "/models/solo", "--port", "31000", "--tp-size", "2"]
    assert (v["url"], v["service"], v["name"]) == ("http://127.0.0.1:31000", base["service"], "solo")
    refusal = ("big0: regression.yml and tune.yml measure a server of one host; this one is part of a multi-node "
               "server or a PD pair")
    with pytest.raises(host.HostModelError) as err:
        host.host_variant(model("big0"), "0.5.23", {})
    assert str(err.value) == refusal
    with pytest.raises(AnsibleFilterError) as err:  # as regression.yml and tune.yml see it
        FILTERS["sglang_host_variant"](model("big0"), "0.5.23", {})
    assert str(err.value) == refusal


def test_the_filters_are_the_host_model_s_functions():
    """plugins/filter/sglang_host.py only maps the filter names to module_utils/host/host_model.py."""
    hv, groups = fleet()
    assert sorted(FILTERS) == ["sglang_host_model", "sglang_host_variant"]
    assert FILTERS["sglang_host_model"]("big1", hv, groups, list(hv)) == model("big1", hv, groups)
    assert FILTERS["sglang_host_variant"].__wrapped__ is host.host_variant
