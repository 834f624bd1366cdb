"""The URL a router reaches a server host at, and the worker list of a router (Python decides)."""

import importlib.util
import pathlib

# The PD pair's checks are the servers' (filter_plugins/sglang_pd.py), loaded from the file.
_PD_PATH = pathlib.Path(__file__).resolve().parents[3] / "filter_plugins" / "sglang_pd.py"
_PD_SPEC = importlib.util.spec_from_file_location("_sglang_fleet_pd", _PD_PATH)
sglang_pd = importlib.util.module_from_spec(_PD_SPEC)
_PD_SPEC.loader.exec_module(sglang_pd)

# Flags the PD plan derives from the inventory: never typed in sglang_router_args.
PD_DERIVED = ("pd_disaggregation", "prefill", "decode", "prefill_urls", "decode_urls", "worker_urls")


def worker_url(hostvars, name):
    """`sglang_router_worker_url` of the host if set, else http://<ansible_host>:<its SGLang port>
    (sglang_args_common + sglang_args, as sglang_service renders them; SGLang's default 30000)."""
    v = hostvars[name]
    if v.get("sglang_router_worker_url"):
        return str(v["sglang_router_worker_url"])
    args = {**(v.get("sglang_args_common") or {}), **(v.get("sglang_args") or {})}
    return f"http://{v.get('ansible_host') or name}:{args.get('port') or 30000}"


def worker_urls(names, hostvars):
    return [worker_url(hostvars, n) for n in names]


def pd_plan(prefill_group, decode_group, groups, hostvars, router_args, me=""):
    """The router's PD mode from its two groups, or why it is refused.

    Returns {"pd": False} when neither group is named; else {"pd": True, "problems": [...],
    "groups": [["--prefill", URL, BOOTSTRAP_PORT], ..., ["--decode", URL], ...]}: sglang-router 0.3.2
    router_args.py:351-364 (--prefill URL [BOOTSTRAP_PORT], nargs="+" append; --decode URL, nargs=1
    append), parsed by router_args.py:976-1023. The bootstrap port is always given: without it the
    router sends bootstrap_port null and the decode falls back to its own setting.
    """
    prefill_group, decode_group = str(prefill_group or ""), str(decode_group or "")
    if not prefill_group and not decode_group:
        return {"pd": False, "problems": []}
    who = f"{me} (sglang_router_prefill_group / sglang_router_decode_group)" if me else "the router"
    problems = sglang_pd.pair_problems(prefill_group, decode_group, groups, who)
    typed = sorted(k for k in (router_args or {}) if str(k).replace("-", "_") in PD_DERIVED)
    if typed:
        problems.append(f"sglang_router_args sets {', '.join(typed)}: in PD mode the router's --pd-disaggregation, "
                        "--prefill and --decode come from sglang_router_prefill_group and sglang_router_decode_group; "
                        "remove them")
    if problems:
        return {"pd": True, "problems": problems, "groups": []}
    prefill, decode = list(groups[prefill_group]), list(groups[decode_group])
    lost = [h for h in prefill + decode if sglang_pd.pair_of(hostvars[h]) != (prefill_group, decode_group)]
    if lost:
        problems.append(f"{', '.join(lost)} of {prefill_group!r} / {decode_group!r} would not run in PD mode: their "
                        "vars do not say sglang_pd_prefill_group: " + prefill_group + " and sglang_pd_decode_group: "
                        + decode_group + ", so their --disaggregation-mode stays null and they would refuse "
                        "nothing, nor transfer anything. Set both in the vars of a group holding the two groups")
    port = {h: hostvars[h].get("sglang_pd_bootstrap_port", sglang_pd.DEFAULT_BOOTSTRAP_PORT) for h in prefill}
    groups_ = [["--prefill", worker_url(hostvars, h), str(port[h])] for h in prefill]
    groups_ += [["--decode", worker_url(hostvars, h)] for h in decode]
    return {"pd": True, "problems": problems, "groups": groups_}


class FilterModule:
    def filters(self):
        return {"sglang_router_worker_url": lambda name, hostvars: worker_url(hostvars, name),
                "sglang_router_worker_urls": worker_urls,
                "sglang_router_pd_plan": pd_plan}
