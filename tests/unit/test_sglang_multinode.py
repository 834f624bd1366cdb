"""plugins/module_utils/host/multinode.py: a multi-node server's derived flags, its refusals, and the
rollout's batch sizes (compared with Ansible's own batching, PlaybookExecutor._get_serialized_batches);
the filters of plugins/filter/sglang_multinode.py that offer them to the playbooks."""
import pytest
from ansible.errors import AnsibleFilterError
from ansible.executor.playbook_executor import PlaybookExecutor
from ansible.utils.helpers import pct_to_int

from ansible_collections.sglang.fleet.plugins.filter import sglang_multinode as multinode_filters
from ansible_collections.sglang.fleet.plugins.module_utils.host import multinode as mn

FILTERS = multinode_filters.FilterModule().filters()

ARGS = {"model_path": "/models/Qwen3-235B", "tp_size": 4}


def fleet(**over):
    """A 3-host inventory: big0, big1 (group big, in that order) and solo."""
    hv = {
        "big0": {"ansible_host": "10.0.0.10", "sglang_version": "0.5.18", "sglang_args": dict(ARGS),
                 "sglang_multinode_group": "big", "sglang_multinode_port": 20000},
        "big1": {"ansible_host": "10.0.0.11", "sglang_version": "0.5.18", "sglang_args": dict(ARGS),
                 "sglang_multinode_group": "big", "sglang_multinode_port": 20000},
        "solo": {"ansible_host": "10.0.0.12", "sglang_version": "0.5.23", "sglang_args": {"model_path": "/m"}},
    }
    for host, values in over.items():
        hv[host] = {**hv[host], **values}
    groups = {"all": list(hv), "sglang_servers": list(hv), "big": ["big0", "big1"]}
    return hv, groups


def plan(me, hv, groups, play=None):
    return mn.plan_of(me, hv, groups, play or list(hv))


def test_flags_derived_from_the_group_order_and_rank0_address():
    hv, groups = fleet()
    p0, p1 = plan("big0", hv, groups), plan("big1", hv, groups)
    assert p0["problems"] == p1["problems"] == []
    assert p0["args"] == {"nnodes": 2, "node_rank": 0, "dist_init_addr": "10.0.0.10:20000"}
    assert p1["args"] == {"nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.10:20000"}
    assert p1["rank0"] == "big0"
    # reversed inventory order: the other host is rank 0
    groups["big"] = ["big1", "big0"]
    assert plan("big0", hv, groups)["args"]["node_rank"] == 1
    assert plan("big0", hv, groups)["args"]["dist_init_addr"] == "10.0.0.11:20000"


def test_ipv6_rank0_is_bracketed_and_an_explicit_address_wins():
    hv, groups = fleet(big0={"ansible_host": "fd00::10"})
    assert plan("big1", hv, groups)["args"]["dist_init_addr"] == "[fd00::10]:20000"
    hv["big0"]["sglang_multinode_addr"] = "ib0.big0"
    assert plan("big1", hv, groups)["args"]["dist_init_addr"] == "ib0.big0:20000"


def test_a_host_outside_any_group_gets_nothing():
    hv, groups = fleet()
    assert plan("solo", hv, groups) == {"problems": []}


@pytest.mark.parametrize("key", ["nnodes", "node_rank", "dist_init_addr", "node-rank"])
def test_typed_derived_flags_refused_on_any_host(key):
    hv, groups = fleet(solo={"sglang_args": {"model_path": "/m", key: 1}})
    problems = plan("solo", hv, groups)["problems"]
    assert len(problems) == 1 and f"sglang_args sets {key}" in problems[0] and "sglang_multinode_group" in problems[0]
    # typed on a node of a group too (the host model adds them to its args, never to sglang_args)
    hv["big0"]["sglang_args"] = {**ARGS, "nnodes": 2, "node_rank": 0, "dist_init_addr": "10.0.0.10:20000"}
    assert "sglang_args sets dist_init_addr, nnodes, node_rank" in plan("big0", hv, groups)["problems"][0]


def test_a_node_missing_from_the_play_is_refused_with_the_fix():
    hv, groups = fleet()
    problems = plan("big0", hv, groups, play=["big0", "solo"])["problems"]
    assert problems == ["multi-node server 'big' has nodes outside this play: big1 (rank 1). Its nodes start and "
                        "restart as one unit, so every one must be in the play: add them to -l (e.g. -l big)"]


def test_different_versions_or_args_refused():
    hv, groups = fleet(big1={"sglang_version": "0.5.23"})
    assert "must run one SGLang release: big0 has sglang_version 0.5.18, big1 (0.5.23)" in plan("big0", hv, groups)["problems"][0]
    hv, groups = fleet(big1={"sglang_args": {**ARGS, "mem_fraction_static": 0.8}})
    assert "big0 and big1 differ in mem_fraction_static" in plan("big0", hv, groups)["problems"][0]
    # sglang_args_common counts, the derived keys do not
    hv, groups = fleet(big1={"sglang_args": {**ARGS, "node_rank": 1}})
    assert plan("big0", hv, groups)["problems"] == []


def test_a_host_in_two_groups_and_a_group_of_one_refused():
    hv, groups = fleet(solo={"sglang_multinode_group": "other"})
    groups["other"] = ["solo", "big1"]   # big1 in big and other
    assert any("a host can be a node of one server only" in p for p in plan("big1", hv, groups)["problems"])
    assert any("hosts big1 of group 'other' do not say" in p for p in plan("solo", hv, groups)["problems"])
    hv, groups = fleet(solo={"sglang_multinode_group": "alone"})
    groups["alone"] = ["solo"]
    assert any("needs at least 2" in p for p in plan("solo", hv, groups)["problems"])
    hv, groups = fleet(solo={"sglang_multinode_group": "nosuch"})
    assert "is not a host of an inventory group 'nosuch'" in plan("solo", hv, groups)["problems"][0]


def gpus(hv, counts):
    for host, count in counts.items():
        hv[host]["ansible_facts"] = {"sglang_gpu": {"gpu_count": count}}


@pytest.mark.parametrize("tp,pp,counts,fragment", [
    (4, 1, {"big0": 2, "big1": 2}, None),
    (2, 2, {"big0": 2, "big1": 2}, None),
    (2, 1, {"big0": 2, "big1": 2}, "tp_size 2 x pp_size 1 = 2 but its 2 nodes have 4 GPUs (2 each)"),
    (8, 1, {"big0": 2, "big1": 2}, "set tp_size x pp_size to 4"),
    (4, 1, {"big0": 2, "big1": 1}, "must have the same number of GPUs"),
    (4, 1, {"big0": 2, "big1": None}, "the GPUs of big1 are unknown"),
])
def test_tp_x_pp_against_the_groups_gpus(tp, pp, counts, fragment):
    hv, groups = fleet()
    gpus(hv, counts)
    p = plan("big0", hv, groups)
    problems = mn.gpu_problems(p, hv, {**ARGS, "tp_size": tp, "pp_size": pp})
    assert (problems == []) if fragment is None else (len(problems) == 1 and fragment in problems[0])


class _Inventory:
    def __init__(self, hosts):
        self.hosts = hosts

    def get_hosts(self, _pattern, order=None):
        return list(self.hosts)


class _Play:
    def __init__(self, serial):
        self.hosts, self.order, self.serial = "all", None, serial


def ansible_batches(serial, hosts):
    """Ansible's own batches for `serial` (PlaybookExecutor._get_serialized_batches)."""
    executor = PlaybookExecutor.__new__(PlaybookExecutor)
    executor._inventory = _Inventory(hosts)
    return executor._get_serialized_batches(_Play(serial))


def members(hosts, groups):
    return {h: {"sglang_host": {"multinode": {"group": g}}} for g, ms in groups.items() for h in ms} | \
        {h: {} for h in hosts if not any(h in ms for ms in groups.values())}


@pytest.mark.parametrize("serial", [[1, "25%"], [1, 2, "50%"], ["100%"], [1], [3], [-1], ["10%"]])
def test_batches_without_groups_are_ansibles_own(serial):
    hosts = [f"h{i}" for i in range(9)]
    sizes = mn.rollout_batches(serial, hosts, members(hosts, {}))
    assert ansible_batches(sizes, hosts) == ansible_batches(serial, hosts)


@pytest.mark.parametrize("serial", [[1, "25%"], [1, 2, "50%"], [1], [2], ["100%"]])
@pytest.mark.parametrize("hosts,groups", [
    (["a0", "a1", "x", "y", "z"], {"a": ["a0", "a1"]}),
    (["x", "a0", "y", "a1", "z", "b0", "b1", "b2"], {"a": ["a0", "a1"], "b": ["b0", "b1", "b2"]}),
    (["a0", "b0", "a1", "b1"], {"a": ["a0", "a1"], "b": ["b0", "b1"]}),
])
def test_batches_never_split_a_group(serial, hosts, groups):
    batches = ansible_batches(mn.rollout_batches(serial, hosts, members(hosts, groups)), hosts)
    assert [h for b in batches for h in b] == hosts
    for group in groups.values():
        holding = [b for b in batches if set(group) & set(b)]
        assert len(holding) == 1 and set(group) <= set(holding[0]), (serial, batches)
    # not wider than needed: a batch that held no group is the size Ansible would have made
    plain = ansible_batches(serial, hosts)
    assert len(batches[0]) >= len(plain[0])


def test_the_canary_becomes_the_first_group():
    hosts = ["a0", "a1", "x", "y", "z"]
    assert ansible_batches(mn.rollout_batches([1, "25%"], hosts, members(hosts, {"a": ["a0", "a1"]})),
                           hosts) == [["a0", "a1"], ["x"], ["y"], ["z"]]


def test_a_bad_batch_value_is_named():
    message = "sglang_rollout_batches: 'one' is not a number of hosts or a percentage like \"25%\""
    with pytest.raises(mn.BatchError) as err:
        mn.rollout_batches(["one"], ["h"], {"h": {}})
    assert str(err.value) == message
    with pytest.raises(AnsibleFilterError) as err:  # as deploy.yml's rollout sees it: Ansible adds the cause
        FILTERS["sglang_multinode_batches"](["one"], ["h"], {"h": {}})
    assert str(err.value) == message + ": invalid literal for int() with base 10: 'one'"


@pytest.mark.parametrize("value", [1, 3, 0, -1, 2.7, True, "2", "0%", "1%", "10%", "25%", "33%", "50%", "99%", "100%",
                                   "150%", "-10%"])
@pytest.mark.parametrize("total", [1, 3, 7, 9, 40])
def test_a_batch_size_is_read_as_ansible_reads_serial(value, total):
    """serial_size is Ansible's pct_to_int (module_utils may not import ansible.utils)."""
    assert mn.serial_size(value, total) == pct_to_int(value, total)


@pytest.mark.parametrize("value", ["one", "x%", None, [1]])
def test_a_batch_size_ansible_cannot_read_is_refused_alike(value):
    with pytest.raises((TypeError, ValueError)) as ours:
        mn.serial_size(value, 9)
    with pytest.raises((TypeError, ValueError)) as theirs:
        pct_to_int(value, 9)
    assert type(ours.value) is type(theirs.value)


def test_without_lists_the_members_not_through():
    hv = {"a": {"x": True}, "b": {}, "c": {"x": "false"}}
    assert mn.members_without(["a", "b", "c"], hv, "x") == ["b", "c"]


def test_the_filters_are_the_multinode_functions():
    """plugins/filter/sglang_multinode.py only maps the filter names to module_utils/host/multinode.py."""
    hv, groups = fleet()
    assert FILTERS == {"sglang_multinode_plan": mn.plan_of, "sglang_multinode_gpu_problems": mn.gpu_problems,
                       "sglang_multinode_batches": multinode_filters.sglang_multinode_batches,
                       "sglang_multinode_without": mn.members_without}
    hosts = ["a0", "x", "a1", "y"]
    assert FILTERS["sglang_multinode_batches"]([1], hosts, members(hosts, {"a": ["a0", "a1"]})) == [3, 1]
