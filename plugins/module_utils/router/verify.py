"""Verify through the router: the fleet end to end against the sum of its replicas.

Each replica's latest verify report (roles/sglang_verify: ``<reports>/<host>/verify-latest.json``)
holds its own benchmark per concurrency level. ``plan`` takes that workload (api, model, lengths,
repeats; the same on every replica, or it says which differs) and scales each level by the number of
replicas: N replicas measured at concurrency c each are benchmarked through the router at N x c,
with N x their requests and warm-up. ``compare`` puts the router's results next to the replicas':
output and request throughput against their sum (the ratio; the gate is ``min_ratio``), latency
(TTFT, end to end, p50) against their mean.

A PD router's servers have no verify of their own (a PD server answers only requests carrying
its router's bootstrap fields), so ``plan_pd`` takes the workload from sglang_router_verify_pd and
``compare_pd`` gates the pair end to end: no failed request, each level at least its floor.
Controller only, pure; stdlib only.
"""

import json

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.report.fleet_reports import host_path


class RouterVerifyError(SglangFleetError):
    """Something the router's verify cannot work with; the message says what to do."""


def _workload(report):
    bench = report.get("bench") or []
    if not bench:
        return None
    first = bench[0]
    return {"api": first.get("api"), "model": first.get("model"), "input_len": first.get("input_len"),
            "output_len": first.get("output_len"), "repeats": first.get("repeats"),
            "levels": [{"concurrency": b.get("concurrency"), "num_prompts": b.get("num_prompts"),
                        "warmup": (b.get("warmup") or {}).get("requests", 0)} for b in bench]}


def load_reports(reports_dir, replicas):
    """{replica: its latest verify report}; refuses a replica that has none."""
    out, missing = {}, []
    for name in replicas:
        path = host_path(reports_dir, name, "verify-latest.json")
        try:
            with open(path, encoding="utf-8") as fh:
                out[name] = json.load(fh)
        except (OSError, ValueError):
            missing.append(name)
    if missing:
        raise RouterVerifyError(
            f"no readable verify report for {', '.join(missing)} under {reports_dir}: the router is compared with "
            f"its replicas' latest verify. Run verify.yml -l {','.join(missing)} first (deploy.yml verifies too)")
    return out


def plan(reports):
    """The benchmark to run through the router: the replicas' workload, each level x N replicas."""
    if not reports:
        raise RouterVerifyError("the router has no replicas to compare with (sglang_router_workers_group is empty)")
    workloads = {name: _workload(r) for name, r in sorted(reports.items())}
    empty = [n for n, w in workloads.items() if w is None]
    if empty:
        raise RouterVerifyError(f"the latest verify report of {', '.join(empty)} has no benchmark: run verify.yml on it")
    first_name, first = next(iter(workloads.items()))
    for name, w in workloads.items():
        if w != first:
            raise RouterVerifyError(
                f"the replicas were verified with different workloads ({first_name}: {first}; {name}: {w}): "
                "the router's verify needs one to sum them. Verify them with the same sglang_verify_* settings")
    n = len(workloads)
    return {**first, "replicas": n,
            "levels": [{"replica_concurrency": lv["concurrency"], "concurrency": n * lv["concurrency"],
                        "num_prompts": n * lv["num_prompts"], "warmup": n * lv["warmup"]} for lv in first["levels"]]}


def _p50(stats):
    return (stats or {}).get("p50")


def compare(host, workload, bench, reports, min_ratio):
    """The router's report: per level the fleet's throughput and latency next to the replicas' sum
    and mean, the ratio, the gate (ratio >= min_ratio, no failed request) and readable lines."""
    n = workload["replicas"]
    levels, failures = [], []
    for lv, got in zip(workload["levels"], bench):
        c = lv["replica_concurrency"]
        mine = [next((x for x in r.get("levels") or [] if x.get("concurrency") == c), {}) for r in reports.values()]
        out_sum = sum(float(x.get("output_tok_s") or 0) for x in mine)
        req_sum = sum(float(x.get("request_s") or 0) for x in mine)
        fleet_out = float(got.get("output_throughput") or 0)
        ratio = fleet_out / out_sum if out_sum else None
        level = {
            "concurrency": lv["concurrency"], "replica_concurrency": c, "replicas": n,
            "output_tok_s": fleet_out, "request_s": got.get("request_throughput"),
            "ttft_ms_p50": _p50(got.get("ttft_ms")), "e2e_ms_p50": _p50(got.get("e2e_ms")),
            "completed": got.get("completed"), "failed": got.get("failed"),
            "replicas_output_tok_s": round(out_sum, 2), "replicas_request_s": round(req_sum, 4),
            "replicas_ttft_ms_p50": round(sum(float(x.get("ttft_ms_p50") or 0) for x in mine) / n, 2),
            "replicas_e2e_ms_p50": round(sum(float(x.get("e2e_ms_p50") or 0) for x in mine) / n, 2),
            "ratio": None if ratio is None else round(ratio, 3),
        }
        levels.append(level)
        if ratio is None:
            failures.append(f"c={lv['concurrency']}: the replicas' reports have no output throughput at concurrency {c}")
        elif ratio < min_ratio:
            failures.append(f"c={lv['concurrency']}: {fleet_out:.1f} tok/s through the router is {ratio:.2f} x the sum of "
                            f"its {n} replicas ({out_sum:.1f} tok/s, each at c={c}), below {min_ratio:.2f} "
                            "(sglang_router_verify_min_ratio): check the router's policy and its host's CPU")
        if got.get("failed"):
            failures.append(f"c={lv['concurrency']}: {got['failed']} request(s) failed through the router")
    parts = [f"c={lv['concurrency']} {lv['output_tok_s']:.1f} tok/s out = "
             f"{(lv['ratio'] if lv['ratio'] is not None else float('nan')):.2f} x the sum of {n} replicas "
             f"({lv['replicas_output_tok_s']:.1f} tok/s, each at c={lv['replica_concurrency']}), TTFT p50 "
             f"{(lv['ttft_ms_p50'] or 0):.0f} ms (replicas {lv['replicas_ttft_ms_p50']:.0f} ms), e2e p50 "
             f"{(lv['e2e_ms_p50'] or 0):.0f} ms (replicas {lv['replicas_e2e_ms_p50']:.0f} ms)" for lv in levels]
    passed = not failures
    line = f"{host}: {'PASS' if passed else 'FAIL'} through the router: " + "; ".join(parts)
    gate = {"gate": "fleet_ratio", "status": "pass" if passed else "fail", "threshold": min_ratio,
            "message": "; ".join(failures) or f"every level >= {min_ratio:.2f} x the replicas' sum, no failed request"}
    return {
        "host": host, "role": "router", "passed": passed, "failures": failures, "line": line,
        "lines": [line] + [f"{host}: {f}" for f in failures], "gates": [gate], "levels": levels,
        "metrics": {f"output_tok_s@{lv['concurrency']}": round(lv["output_tok_s"], 2) for lv in levels},
        "replicas": sorted(reports), "workload": {k: v for k, v in workload.items() if k != "levels"},
        "bench": bench,
    }


def plan_pd(settings):
    """A PD router's benchmark from sglang_router_verify_pd: each level's concurrency, with
    requests_per_stream and warmup_per_stream requests per stream (as the servers' verify)."""
    try:
        levels = [{"concurrency": int(c), "replica_concurrency": int(c),
                   "num_prompts": int(c) * int(settings["requests_per_stream"]),
                   "warmup": int(c) * int(settings["warmup_per_stream"])} for c in settings["concurrency"]]
        workload = {"api": str(settings["api"]), "model": settings.get("model") or "",
                    "input_len": int(settings["input_len"]), "output_len": int(settings["output_len"]),
                    "repeats": int(settings["repeats"])}
    except (KeyError, TypeError, ValueError) as exc:
        raise RouterVerifyError(f"sglang_router_verify_pd is missing or has a bad {exc}: it needs concurrency (a list), "
                                "input_len, output_len, requests_per_stream, warmup_per_stream, repeats and api") from None
    if not levels or any(lv["concurrency"] < 1 for lv in levels):
        raise RouterVerifyError("sglang_router_verify_pd.concurrency needs one or more levels of at least 1")
    return {**workload, "replicas": 0, "pd": True, "levels": levels}


def compare_pd(host, workload, bench, floors):
    """A PD router's report: per level its throughput and latency end to end, the floor of that
    level (sglang_router_verify_pd.min_output_tok_s, {concurrency: tok/s}) and failed requests."""
    floors = {int(k): float(v) for k, v in (floors or {}).items()}
    levels, failures = [], []
    for lv, got in zip(workload["levels"], bench):
        c = lv["concurrency"]
        out = float(got.get("output_throughput") or 0)
        level = {"concurrency": c, "output_tok_s": out, "request_s": got.get("request_throughput"),
                 "ttft_ms_p50": _p50(got.get("ttft_ms")), "e2e_ms_p50": _p50(got.get("e2e_ms")),
                 "completed": got.get("completed"), "failed": got.get("failed"), "floor_tok_s": floors.get(c)}
        levels.append(level)
        if c in floors and out < floors[c]:
            failures.append(f"c={c}: {out:.1f} tok/s through the PD router, below its floor {floors[c]:.1f} "
                            "(sglang_router_verify_pd.min_output_tok_s)")
        if got.get("failed"):
            failures.append(f"c={c}: {got['failed']} request(s) failed through the PD router")
    parts = [f"c={lv['concurrency']} {lv['output_tok_s']:.1f} tok/s out"
             + (f" (floor {lv['floor_tok_s']:.1f})" if lv["floor_tok_s"] is not None else "")
             + f", TTFT p50 {(lv['ttft_ms_p50'] or 0):.0f} ms, e2e p50 {(lv['e2e_ms_p50'] or 0):.0f} ms" for lv in levels]
    passed = not failures
    line = f"{host}: {'PASS' if passed else 'FAIL'} through the PD router: " + "; ".join(parts)
    gate = {"gate": "pd_floor", "status": "pass" if passed else "fail", "threshold": {str(k): v for k, v in floors.items()},
            "message": "; ".join(failures) or "no failed request" + (", every level at its floor" if floors else "")}
    return {
        "host": host, "role": "router", "mode": "pd", "passed": passed, "failures": failures, "line": line,
        "lines": [line] + [f"{host}: {f}" for f in failures], "gates": [gate], "levels": levels,
        "metrics": {f"output_tok_s@{lv['concurrency']}": round(lv["output_tok_s"], 2) for lv in levels},
        "replicas": [], "workload": {k: v for k, v in workload.items() if k != "levels"}, "bench": bench,
    }
