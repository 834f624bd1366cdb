"""The URL a router reaches a server host at, and the worker list of a router (Python decides)."""


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


class FilterModule:
    def filters(self):
        return {"sglang_router_worker_url": lambda name, hostvars: worker_url(hostvars, name),
                "sglang_router_worker_urls": worker_urls}
