"""The URL a router reaches a server host at, the worker list of a router and its API key's
checks (Python decides)."""

# The PD pair's checks are the servers' (plugins/module_utils/host/pd.py); the secret fields and the
# loopback test are the server's arguments' (plugins/module_utils/host/args.py).
from ansible_collections.sglang.fleet.plugins.module_utils.host import args as sglang_args
from ansible_collections.sglang.fleet.plugins.module_utils.host import pd as sglang_pd

# Flags the PD plan derives from the inventory: never typed in sglang_router_args.
PD_DERIVED = ("pd_disaggregation", "prefill", "decode", "prefill_urls", "decode_urls", "worker_urls")


def worker_url(hostvars, name):
    """`sglang_router_worker_url` of the host if set, else http://<ansible_host>:<its SGLang port>
    (the inventory's arguments, as sglang_service renders them; SGLang's default 30000)."""
    v = hostvars[name]
    if v.get("sglang_router_worker_url"):
        return str(v["sglang_router_worker_url"])
    args = sglang_args.inventory_args(v, name)
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


def worker_keys(names, hostvars):
    """The distinct SGLANG_API_KEY values of the servers (sglang_service_secrets; "" for none), sorted."""
    return sorted({str((hostvars[n].get("sglang_service_secrets") or {}).get("SGLANG_API_KEY") or "")
                   for n in names})


def key_problems(router_key, keys_of_workers, router_args, allow_open, me):
    """Why the router's API key setup is refused, in words that never hold a key.

    One key (sglang_router_api_key, by default its workers' SGLANG_API_KEY): the real router
    requires it from its clients (its own API, the worker API included) and sends it to the workers
    it starts with (--api-key, sglang-router 0.3.2 router_args.py:827: "the api key used for the
    authorization with the worker"); a worker it knows without a key gets the client's header.
    """
    problems = []
    typed = sorted(k for k in (router_args or {}) if str(k).replace("-", "_") in sglang_args.ROUTER_SECRET_FIELDS)
    if typed:
        problems.append(f"{me}: sglang_router_args sets {', '.join(typed)}: a secret in argv shows in the unit file and "
                        "the process list. Set the router's key in sglang_router_api_key (ansible-vault "
                        "encrypt_string; it defaults to its workers' sglang_service_secrets.SGLANG_API_KEY), kept in a "
                        "root-only EnvironmentFile; control_plane_api_keys and oracle_password are not supported")
    router_key, keys = str(router_key or ""), [str(k or "") for k in keys_of_workers]
    if len(keys) > 1:
        problems.append(f"{me}: its workers do not share one SGLANG_API_KEY (sglang_service_secrets; some differ or "
                        "some have none): the router sends every worker one key (--api-key), so the others would "
                        "answer it 401. Give the servers behind one router one key")
    elif keys and keys[0] and router_key != keys[0]:
        problems.append(f"{me}: sglang_router_api_key is not its workers' SGLANG_API_KEY: every worker would answer "
                        "the router 401. Leave sglang_router_api_key unset (it defaults to the workers' key) or set "
                        "the same key")
    host = str((router_args or {}).get("host", "0.0.0.0"))  # RouterArgs.host: 0.0.0.0 (router_args.py:16)
    if not router_key and not allow_open and not sglang_args.is_loopback(host):
        problems.append(f"{me}: the router listens on {host} without an API key: anyone who reaches its port could "
                        "send requests and remove its workers (its worker API). Set sglang_router_api_key, or the "
                        "workers' sglang_service_secrets.SGLANG_API_KEY it defaults to (ansible-vault "
                        "encrypt_string), or sglang_router_args.host: 127.0.0.1, or "
                        "sglang_router_allow_unauthenticated_bind: true if an open router is intended")
    return problems


class FilterModule:
    def filters(self):
        return {"sglang_router_worker_url": lambda name, hostvars: worker_url(hostvars, name),
                "sglang_router_worker_urls": worker_urls,
                "sglang_router_pd_plan": pd_plan,
                "sglang_router_worker_keys": worker_keys,
                "sglang_router_key_problems": key_problems}
