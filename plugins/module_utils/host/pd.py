"""PD disaggregation: one model's prefill servers and decode servers, declared as two inventory groups.

The pair is named once, in the vars of a group holding both (sglang_pd_prefill_group,
sglang_pd_decode_group, and sglang_pd_bootstrap_port); each host's `disaggregation_mode` and
`disaggregation_bootstrap_port` are derived from which of the two groups it is in, never typed per
host. What the real release does with them (SGLang 0.5.23):
- `--disaggregation-mode {null,prefill,decode}`: srt/arg_groups/fields/disagg.py:55-58, checked in
  srt/arg_groups/serving_hook.py:219-220.
- a prefill server starts the KV bootstrap server on `--host`:`--disaggregation-bootstrap-port`
  (default 8998, fields/disagg.py:81-83; srt/managers/disagg_service.py:27-48): a second listener
  beside the API port, so the two must differ.
- a decode server binds nothing there: its `--disaggregation-bootstrap-port` is only what a request
  without `bootstrap_port` falls back to (srt/managers/scheduler.py:2970-2971); the router sends the
  prefill's port with every request, so the pair shares one port.
- "fake" is refused on a prefill server (srt/arg_groups/pd_disaggregation_hook.py:146-148), and
  both sides move the KV cache with one `--disaggregation-transfer-backend` (default mooncake).

The host model (host_model.py) takes the host's side from `plan_of`; the router's PD plan
(plugins/filter/sglang_router.py) checks the pair with `pair_problems` and `pair_of`;
plugins/filter/sglang_pd.py offers `plan_of` to the playbooks as a filter. Controller only, pure;
stdlib only.
"""

# The inventory's arguments are merged in plugins/module_utils/host/args.py.
from ansible_collections.sglang.fleet.plugins.module_utils.host import args as sglang_args

DERIVED = ("disaggregation_mode", "disaggregation_bootstrap_port")
DEFAULT_BOOTSTRAP_PORT = 8998  # 0.5.23 srt/arg_groups/fields/disagg.py:81-83
DEFAULT_TRANSFER_BACKEND = "mooncake"  # 0.5.23 srt/arg_groups/fields/disagg.py:65-71


_args = sglang_args.inventory_args


def _dest(key):
    return str(key).replace("-", "_")


def _declared(hv, host=None):
    """The host's SGLang arguments keyed by argparse dest (tp-size and tp_size are one flag)."""
    return {_dest(k): v for k, v in _args(hv, host).items()}


def _is_port(value):
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def pair_of(hv):
    """(prefill group, decode group) a host's vars name, or None when it names neither."""
    p, d = hv.get("sglang_pd_prefill_group"), hv.get("sglang_pd_decode_group")
    return (str(p or ""), str(d or "")) if (p or d) else None


def pair_problems(prefill_group, decode_group, groups, who):
    """What is wrong with a pair of groups as such (shared by the servers and the router)."""
    if not prefill_group or not decode_group:
        return [f"{who} names only one side of a PD pair (sglang_pd_prefill_group {prefill_group!r}, "
                f"sglang_pd_decode_group {decode_group!r}): set both, in the vars of a group holding the two"]
    if prefill_group == decode_group:
        return [f"{who}: the prefill and decode groups are both {prefill_group!r}: a PD pair is two groups, one "
                "of prefill servers and one of decode servers"]
    problems = []
    for side, group in (("prefill", prefill_group), ("decode", decode_group)):
        if group not in groups:
            problems.append(f"{who}: the PD {side} group {group!r} is not an inventory group: create it with the "
                            f"{side} servers as its hosts, or fix the name")
        elif not groups[group]:
            problems.append(f"{who}: the PD {side} group {group!r} has no hosts: a PD pair needs at least one "
                            f"{side} server")
    both = [h for h in groups.get(prefill_group) or [] if h in (groups.get(decode_group) or [])]
    if both:
        problems.append(f"{', '.join(both)} in both {prefill_group!r} (prefill) and {decode_group!r} (decode): "
                        "a server runs one --disaggregation-mode; keep each host in one of the two groups")
    return problems


# What the two sides of a pair must declare alike (missing = the release's default, so: on both or on
# neither). The decode fetches the prefill's KV layout at its first request and refuses a mismatch
# there, after the deploy (0.5.23 srt/disaggregation/common/conn.py:1320-1335).
SAME_ARGS = (("model_path", "the decode continues from the KV cache the prefill computed for this model"),
             ("page_size", "\"Both servers must use the same --page-size value\" (0.5.23 "
                           "srt/disaggregation/common/conn.py:1320-1325, raised at the first request)"),
             ("kv_cache_dtype", "\"Both servers must use the same --kv-cache-dtype value\" (0.5.23 "
                                "srt/disaggregation/common/conn.py:1327-1335, raised at the first request)"))


def _same_on_both_sides(prefill_group, decode_group, members, hostvars):
    """The pair's release, model and KV layout flags, one value across its hosts."""
    problems = []
    pair = f"the PD pair {prefill_group!r} / {decode_group!r}"
    versions = {h: str(hostvars[h].get("sglang_version") or "?") for h in members}
    if len(set(versions.values())) > 1:
        problems.append(f"{pair} runs more than one SGLang release ({', '.join(f'{h} {v}' for h, v in versions.items())}): "
                        "the KV transfer is internal to a release (0.5.23 srt/disaggregation/common/conn.py:1006-1010 "
                        "warns that \"Mixed SGLang versions may wait for the KV release timeout\"); set sglang_version "
                        "once, in the pair's group vars")
    declared = {h: _declared(hostvars[h], h) for h in members}
    for dest, why in SAME_ARGS:
        values = {h: declared[h].get(dest) for h in members}
        if len({repr(v) for v in values.values()}) > 1:
            shown = ", ".join(f"{h} {'(not set)' if v is None else v}" for h, v in values.items())
            problems.append(f"{pair} declares {dest} differently ({shown}): {why}; set sglang_args.{dest} the same on "
                            "both groups, or on neither")
    return problems


def plan_of(me, hostvars, groups):
    """This host's side of its PD pair, or why the pair is refused.

    Returns {"problems": [...]} and, for a host of a pair, "role" (prefill or decode), "prefill_group",
    "decode_group", "bootstrap_port" and "args" (the derived flags, which the host model adds to its args).
    """
    mine = hostvars[me]
    args = _args(mine)
    problems = []
    typed = sorted(str(k) for k in args if _dest(k) in DERIVED)
    if typed:
        problems.append(
            f"sglang_args sets {', '.join(typed)}: in a PD pair these are derived from the host's group (its "
            "--disaggregation-mode from being in the prefill or the decode group, the bootstrap port from "
            "sglang_pd_bootstrap_port: a decode server binds nothing on it, it only falls back to it for a request "
            "without bootstrap_port, 0.5.23 srt/managers/scheduler.py:2970). Remove them, and declare the pair with "
            "sglang_pd_prefill_group and sglang_pd_decode_group in the vars of a group holding both (README: PD "
            "disaggregation)")
    pair = pair_of(mine)
    if pair is None:
        return {"problems": problems}
    prefill_group, decode_group = pair
    problems += pair_problems(prefill_group, decode_group, groups, me)
    if problems:
        return {"problems": problems}
    prefill, decode = list(groups[prefill_group]), list(groups[decode_group])
    if me not in prefill and me not in decode:
        return {"problems": [f"{me} names the PD pair {prefill_group!r} / {decode_group!r} but is in neither group: "
                             "set sglang_pd_* in the vars of a group holding both, not on a host or a group around "
                             "other servers"]}
    role = "prefill" if me in prefill else "decode"
    members = prefill + decode
    strangers = [h for h in members if pair_of(hostvars[h]) != pair]
    if strangers:
        problems.append(f"the hosts {', '.join(strangers)} of the PD pair {prefill_group!r} / {decode_group!r} name "
                        "another pair or none: set sglang_pd_prefill_group and sglang_pd_decode_group once, in the "
                        "vars of the group holding both")
    ports = {h: hostvars[h].get("sglang_pd_bootstrap_port", DEFAULT_BOOTSTRAP_PORT) for h in members}
    port = ports[me]
    if not _is_port(port):
        problems.append(f"sglang_pd_bootstrap_port is {port!r}: it must be a whole number from 1 to 65535 (the port "
                        "each prefill server's KV bootstrap server listens on; SGLang's default is 8998)")
    elif len({repr(p) for p in ports.values()}) > 1:
        problems.append(f"the PD pair {prefill_group!r} / {decode_group!r} has more than one sglang_pd_bootstrap_port "
                        f"({', '.join(f'{h} {p}' for h, p in ports.items())}): set it once in the pair's group vars")
    if role == "prefill" and _is_port(port) and port == (_declared(mine).get("port") or 30000):
        problems.append(f"sglang_pd_bootstrap_port {port} is this prefill server's API port (sglang_args.port): the "
                        "prefill starts its KV bootstrap server on --host:--disaggregation-bootstrap-port beside the "
                        "API (0.5.23 srt/managers/disagg_service.py:43-48), so the two must differ")
    backends = {h: str(_declared(hostvars[h], h).get("disaggregation_transfer_backend") or DEFAULT_TRANSFER_BACKEND)
                for h in members}
    if len(set(backends.values())) > 1:
        problems.append(f"the PD pair {prefill_group!r} / {decode_group!r} must move the KV cache with one transfer "
                        f"backend: {', '.join(f'{h} {b}' for h, b in backends.items())}; set "
                        "sglang_args.disaggregation_transfer_backend the same on both groups")
    problems += _same_on_both_sides(prefill_group, decode_group, members, hostvars)
    if role == "prefill" and backends[me] == "fake":
        problems.append("disaggregation_transfer_backend fake on a prefill server: SGLang refuses it at start "
                        "(\"Prefill server does not support 'fake' as the transfer backend\", 0.5.23 "
                        "srt/arg_groups/pd_disaggregation_hook.py:146-148); fake is for a decode-only benchmark")
    return {"problems": problems, "role": role, "prefill_group": prefill_group, "decode_group": decode_group,
            "bootstrap_port": port, "args": {"disaggregation_mode": role, "disaggregation_bootstrap_port": port}}
