"""One SGLang server spanning several hosts, declared as an inventory group.

The group's hosts, in inventory order, are the server's nodes: the first is rank 0 (the one that
serves the API). `nnodes`, `node_rank` and `dist_init_addr` (SGLang's `--nnodes`, `--node-rank`,
`--dist-init-addr`: 0.5.11 srt/server_args.py:5144-5154, 0.5.23 srt/arg_groups/fields/parallel.py:
24-25) are derived from it here, never typed per host. The host model (host_model.py) takes its
node's place from `plan_of`; plugins/filter/sglang_multinode.py offers these functions to the
playbooks as filters. Controller only, pure; stdlib only.
"""

# The inventory's arguments are merged in plugins/module_utils/host/args.py.
from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.host import args as sglang_args

DERIVED = ("nnodes", "node_rank", "dist_init_addr")


class BatchError(SglangFleetError, ValueError):
    """A rollout batch size (deploy.yml's serial) that is neither a number of hosts nor a percentage."""


_args = sglang_args.inventory_args


def _without_derived(args):
    return {k: v for k, v in args.items() if str(k).replace("-", "_") not in DERIVED}


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def plan_of(me, hostvars, groups, play_hosts_all):
    """This host's place in its multi-node server, or why the group is refused.

    Returns {"problems": [...]} and, for a member of a group, "group", "members", "rank0",
    "node_rank", "nnodes" and "args" (the derived flags, which the host model adds to its args).
    """
    mine = hostvars[me]
    args = _args(mine)
    problems = []
    typed = sorted(k for k in args if str(k).replace("-", "_") in DERIVED)
    if typed:
        problems.append(
            f"sglang_args sets {', '.join(typed)}: these are derived from the host's multi-node group "
            "(its hosts in inventory order: the first is rank 0; dist_init_addr is rank 0's address and "
            "sglang_multinode_port). Remove them, and declare the server as a group whose vars set "
            "sglang_multinode_group: <the group's name> (README: Multi-node servers)")
    group = mine.get("sglang_multinode_group")
    if not group:
        return {"problems": problems}
    group = str(group)
    members = list(groups.get(group) or [])
    if me not in members:
        return {"problems": problems + [
            f"sglang_multinode_group is {group!r} but {me} is not a host of an inventory group {group!r}: "
            "set sglang_multinode_group in that group's vars (group_vars/<group>.yml) to the group's own name"]}
    declared = sorted({str(hostvars[h].get("sglang_multinode_group")) for h in play_hosts_all
                       if hostvars[h].get("sglang_multinode_group")} | {group})
    twice = [g for g in declared if g != group and me in (groups.get(g) or [])]
    if twice:
        problems.append(f"{me} is a host of the multi-node servers {group!r} and {', '.join(map(repr, twice))}: "
                        "a host can be a node of one server only; remove it from all but one group")
    strangers = [h for h in members if str(hostvars[h].get("sglang_multinode_group") or "") != group]
    if strangers:
        problems.append(f"the hosts {', '.join(strangers)} of group {group!r} do not say sglang_multinode_group: "
                        f"{group} (they are in another multi-node group, or the variable is set per host): "
                        "set it once in the group's vars and keep each host in one group")
    if len(members) < 2:
        problems.append(f"multi-node group {group!r} has one host ({me}): a multi-node server needs at least 2; "
                        "remove sglang_multinode_group for a single-host server")
    missing = [f"{h} (rank {members.index(h)})" for h in members if h not in play_hosts_all]
    if missing:
        problems.append(
            f"multi-node server {group!r} has nodes outside this play: {', '.join(missing)}. Its nodes start and "
            f"restart as one unit, so every one must be in the play: add them to -l (e.g. -l {group})")
    version = mine.get("sglang_version")
    other_version = [f"{h} ({hostvars[h].get('sglang_version')})" for h in members
                     if h != me and hostvars[h].get("sglang_version") != version]
    if other_version:
        problems.append(f"the nodes of multi-node server {group!r} must run one SGLang release: {me} has "
                        f"sglang_version {version}, {', '.join(other_version)}; set sglang_version once in the "
                        "group's vars")
    flat = _without_derived(args)
    for h in members:
        if h == me:
            continue
        theirs = _without_derived(_args(hostvars[h], h))
        diff = sorted(str(k) for k in set(flat) | set(theirs) if flat.get(k) != theirs.get(k))
        if diff:
            problems.append(f"the nodes of multi-node server {group!r} must run the same sglang_args: {me} and {h} "
                            f"differ in {', '.join(diff)}; set sglang_args once in the group's vars")
    rank0 = members[0]
    port = hostvars[rank0].get("sglang_multinode_port", 20000)
    if not _is_int(port) or not 1 <= port <= 65535:
        problems.append(f"sglang_multinode_port is {port!r}: it must be a whole number from 1 to 65535 "
                        "(the port on rank 0 that every node's torch.distributed joins)")
    addr = str(hostvars[rank0].get("sglang_multinode_addr") or hostvars[rank0].get("ansible_host") or rank0)
    if any(c.isspace() for c in addr) or not addr:
        problems.append(f"rank 0's address {addr!r} (sglang_multinode_addr, else ansible_host) is not a host name "
                        "or IP: set sglang_multinode_addr on the group to an address every node reaches")
    if ":" in addr and not addr.startswith("["):
        addr = f"[{addr}]"
    return {"problems": problems, "group": group, "members": members, "rank0": rank0,
            "nnodes": len(members), "node_rank": members.index(me),
            "args": {"nnodes": len(members), "node_rank": members.index(me), "dist_init_addr": f"{addr}:{port}"}}


def gpu_problems(plan, hostvars, args):
    """TP x PP against the group's GPUs: every node the same count (ansible_facts.sglang_gpu,
    declared or detected), and tp_size x pp_size equal to their sum. A CPU server (`device: cpu`)
    has no GPU to count: SGLang fits its ranks to each node's NUMA nodes itself (gpus_needed)."""
    if not plan.get("group") or sglang_args.gpus_needed(args) == 0:
        return []
    counts = {}
    for h in plan["members"]:
        gpu = (hostvars[h].get("ansible_facts") or {}).get("sglang_gpu") or {}
        counts[h] = gpu.get("gpu_count")
    unknown = [h for h, c in counts.items() if not _is_int(c)]
    if unknown:
        return [f"multi-node server {plan['group']!r}: the GPUs of {', '.join(unknown)} are unknown (an earlier check "
                "failed there, or sglang_hardware.gpu_count is missing): fix that node first"]
    if len(set(counts.values())) > 1:
        return [f"the nodes of multi-node server {plan['group']!r} must have the same number of GPUs (SGLang puts "
                f"tp_size x pp_size / nnodes ranks on each): {', '.join(f'{h} {c}' for h, c in counts.items())}"]
    tp = args.get("tp_size", 1) or 1
    pp = args.get("pp_size", 1) or 1
    total = sum(counts.values())
    if not (_is_int(tp) and _is_int(pp)) or tp * pp != total:
        return [f"multi-node server {plan['group']!r}: tp_size {tp} x pp_size {pp} = {tp * pp if _is_int(tp) and _is_int(pp) else '?'} "
                f"but its {len(counts)} nodes have {total} GPUs ({next(iter(counts.values()))} each); set tp_size x "
                f"pp_size to {total} in the group's sglang_args, or fix sglang_hardware.gpu_count"]
    return []


def serial_size(value, total):
    """One batch size as Ansible reads `serial`: "N%" of `total` hosts (at least 1), else int(value).
    Ansible's own pct_to_int (ansible/utils/helpers.py, which module_utils may not import), as
    PlaybookExecutor._get_serialized_batches calls it; tests/unit/test_sglang_multinode.py compares the two."""
    if isinstance(value, str) and value.endswith("%"):
        return int((int(value.replace("%", "")) / 100.0) * total) or 1
    return int(value)


def rollout_batches(batches, play_hosts_all, hostvars):
    """The rollout's batch sizes (deploy.yml's `serial`) widened so no multi-node group is split.

    `batches` is the user's list (ints and "N%", Ansible's serial); `play_hosts_all` the play's
    hosts in order; `hostvars` gives each member's group (its host model's sglang_host.multinode). Batches are
    cut exactly as Ansible cuts them (PlaybookExecutor._get_serialized_batches; pct_to_int is serial_size), and a
    batch that would end inside a group grows to the group's last host. Returns ints.
    """
    if not isinstance(batches, list):
        batches = [batches]
    if not batches:
        batches = [-1]
    hosts = list(play_hosts_all)
    host_group = {h: (((hostvars[h].get("sglang_host") or {}).get("multinode") or {}).get("group")) for h in hosts}
    total = len(hosts)
    last = {}
    for i, h in enumerate(hosts):
        if host_group.get(h):
            last[host_group[h]] = i
    sizes, start, item = [], 0, 0
    while start < total:
        try:
            size = serial_size(batches[item], total)
        except (TypeError, ValueError) as exc:
            raise BatchError(f"sglang_rollout_batches: {batches[item]!r} is not a number of hosts or a "
                             "percentage like \"25%\"") from exc
        end = total if size <= 0 else min(total, start + size)
        grown = True
        while grown:
            grown = False
            for i in range(start, end):
                g = host_group.get(hosts[i])
                if g and last[g] >= end:
                    end, grown = last[g] + 1, True
        sizes.append(end - start)
        start = end
        item = min(item + 1, len(batches) - 1)
    return sizes


def members_without(members, hostvars, fact):
    """The members whose `fact` is not true (unset, false): the nodes that did not get there."""
    return [h for h in members if not _true(hostvars[h].get(fact))]


def _true(value):
    return value is True or str(value).lower() in ("true", "yes", "1")
