"""What a tuning candidate must hold besides being fast (stdlib only, Python 3.8+).

- **Latency limits** (``sglang_tune_limits``): ``{"ttft_ms_p90@4": 2000, "itl_ms_p50@1": 40}``, a
  percentile of TTFT, inter-token or end-to-end latency at one of verify's concurrency levels, in ms.
  A percentile is read from one measurement's requests (bench_client's ``latency_ms``: every request of
  every repeat pooled), so the plan refuses one the measurement is too small to estimate: a p-th
  percentile needs ``TAIL / (1 - p)`` observations a measurement, ``TAIL`` of them beyond it (p90: 100
  requests; p99: 1,000). A candidate over a limit (the median of its measurements' percentiles) is
  infeasible, with the figure that says so, and the search goes on.
- **The output check**: a flag that can change the model's outputs (``CHANGES_OUTPUTS``, or any flag
  the space marks ``lossy: true``) is tried only when the space says ``lossy: true`` for it (opt-in).
  The incumbent's greedy generations of fixed prompts are the reference; a candidate that changes such
  a flag is generated the same way after its restart, and fewer identical outputs than
  ``min_identical`` make it infeasible.
"""

from __future__ import annotations

import math
import re
import statistics

from ansible_collections.sglang.fleet.plugins.module_utils.tune.search import HELD_BACK, same_value
from ansible_collections.sglang.fleet.plugins.module_utils.tune.session import TuneError

LIMIT_NAME = re.compile(r"^(ttft|itl|e2e)_ms_p(50|90|99)@([1-9][0-9]*)$")
LATENCY = {"ttft": "TTFT", "itl": "inter-token latency", "e2e": "end-to-end latency"}
# observations beyond a percentile one measurement must hold for it to be read from that measurement
TAIL = 10
OVER_LIMIT, CHANGES_OUTPUTS = HELD_BACK

# Flags whose values change the numbers a model computes, not only how fast: quantised weights or KV
# cache, another dtype. Tried only with `lossy: true` in the space (then checked against the incumbent).
LOSSY_FLAGS = {
    "quantization": "quantised weights",
    "kv_cache_dtype": "a quantised KV cache",
    "dtype": "another compute dtype",
    "torchao_config": "torchao quantisation",
    "quantization_param_path": "the KV cache's scaling factors",
}
OUTPUT_CHECK_DEFAULTS = {"prompts": 8, "tokens": 32, "min_identical": 1.0}


# ---------------------------------------------------------------------------------------------- limits

def limit_label(name):
    """`ttft_ms_p90@4` -> `p90 TTFT at concurrency 4`."""
    kind, pct, c = LIMIT_NAME.match(name).groups()
    return f"p{pct} {LATENCY[kind]} at concurrency {c}"


def plan_limits(limits, shape):
    """(limits as {name: ms}, the plan's lines). ``shape``: verify's measurement ({levels: [1, 4],
    repeats, requests_per_stream, output_len}). Raises TuneError saying what to fix: an unknown name, a
    concurrency verify does not measure, a percentile one measurement is too small to estimate."""
    if not isinstance(limits, dict):
        raise TuneError(f"sglang_tune_limits must be a mapping of limit -> ms, e.g. {{ttft_ms_p90@4: 2000}}: {limits!r}")
    out, lines = {}, []
    for name, value in limits.items():
        m = LIMIT_NAME.match(str(name))
        if not m:
            raise TuneError(f"sglang_tune_limits: {name!r} is not a limit: write <ttft|itl|e2e>_ms_p<50|90|99>@<concurrency>, "
                            "e.g. ttft_ms_p90@4")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise TuneError(f"sglang_tune_limits: {name}: the limit must be a number of milliseconds above 0: {value!r}")
        kind, pct, c = m.group(1), int(m.group(2)), int(m.group(3))
        levels = [int(x) for x in shape["levels"]]
        if c not in levels:
            raise TuneError(f"sglang_tune_limits: {name}: verify measures at concurrency {', '.join(map(str, levels))} "
                            f"(sglang_verify_concurrency): add {c} there, or limit one of those")
        requests = int(shape["repeats"]) * int(shape["requests_per_stream"]) * c
        have = requests * (int(shape["output_len"]) - 1) if kind == "itl" else requests
        need = math.ceil(TAIL * 100 / (100 - pct))
        unit = "inter-token gaps" if kind == "itl" else "requests"
        if have < need:
            raise TuneError(f"sglang_tune_limits: {name}: a p{pct} needs at least {need} {unit} a measurement to have "
                            f"{TAIL} beyond it, and verify's measurement at concurrency {c} makes {have} "
                            f"({shape['repeats']} repeats x {shape['requests_per_stream']} requests x {c} streams"
                            + (f" x {int(shape['output_len']) - 1} gaps" if kind == "itl" else "")
                            + "): raise sglang_verify_repeats or sglang_verify_requests_per_stream, or limit a lower "
                            "percentile")
        out[str(name)] = float(value)
        lines.append(f"limit: {limit_label(name)} at most {value:g} ms (read from {have} {unit} a measurement)")
    return out, lines


def latency_of(levels, name):
    """One measurement's figure of limit ``name`` from its verify levels (gates.levels' rows), or None."""
    kind, pct, c = LIMIT_NAME.match(name).groups()
    row = next((r for r in levels or [] if isinstance(r, dict) and r.get("concurrency") == int(c)), None)
    value = ((row or {}).get("latency_ms") or {}).get(kind, {}).get(f"p{pct}")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def over_limits(limits, measurements):
    """Why a candidate is over its latency limits (the reason that makes it infeasible), or None.
    ``measurements``: each measurement's verify levels; a limit's figure is the median over them."""
    over = []
    for name, limit in limits.items():
        values = [v for v in (latency_of(levels, name) for levels in measurements) if v is not None]
        if not values:
            raise TuneError(f"no measurement has a {limit_label(name)}: verify's levels carry no latency_ms "
                            "(bench_client's pooled latencies); the lab host and the controller must run the same collection")
        figure = statistics.median(values)
        if figure > limit:
            over.append(f"{limit_label(name)} was {figure:,.0f} ms (limit {limit:,.0f} ms)")
    return f"{OVER_LIMIT}: " + "; ".join(over) if over else None


# ---------------------------------------------------------------------------------------- output check

def plan_output_check(space, settings):
    """The output check's plan: {flags (those of the space that can change outputs), prompts, tokens,
    min_identical, reference: None}, and its line. A flag of LOSSY_FLAGS in the space without
    `lossy: true` is refused: trying it is opt-in."""
    cfg = dict(OUTPUT_CHECK_DEFAULTS, **(settings or {}))
    unknown = set(cfg) - set(OUTPUT_CHECK_DEFAULTS)
    if unknown:
        raise TuneError(f"sglang_tune_output_check: unknown keys {sorted(unknown)} (known: {', '.join(OUTPUT_CHECK_DEFAULTS)})")
    for key in ("prompts", "tokens"):
        if isinstance(cfg[key], bool) or not isinstance(cfg[key], int) or cfg[key] < 1:
            raise TuneError(f"sglang_tune_output_check: {key} must be a whole number above 0: {cfg[key]!r}")
    if isinstance(cfg["min_identical"], bool) or not isinstance(cfg["min_identical"], (int, float)) \
            or not 0 < cfg["min_identical"] <= 1:
        raise TuneError(f"sglang_tune_output_check: min_identical is the share of outputs that must be identical, "
                        f"above 0 and at most 1: {cfg['min_identical']!r}")
    flags = []
    for flag, dim in (space or {}).items():
        lossy = isinstance(dim, dict) and dim.get("lossy") is True
        if flag in LOSSY_FLAGS and not lossy:
            raise TuneError(f"sglang_tune_space: {flag} can change the model's outputs ({LOSSY_FLAGS[flag]}): trying it "
                            "is opt-in: write it as {values: [...], lossy: true}; each candidate's greedy outputs are then "
                            "checked against the incumbent's (sglang_tune_output_check)")
        if lossy:
            flags.append(flag)
    check = {"flags": flags, "prompts": cfg["prompts"], "tokens": cfg["tokens"],
             "min_identical": float(cfg["min_identical"]), "reference": None}
    lines = ([f"output check: {', '.join(flags)} can change outputs: {cfg['prompts']} fixed prompts, {cfg['tokens']} "
              f"greedy tokens each, at least {cfg['min_identical']:.0%} identical to the incumbent's"] if flags else [])
    return check, lines


def needs_outputs(check, incumbent, candidate, first_step):
    """Whether this step generates the fixed prompts: the incumbent's first step (the reference) when
    any flag can change outputs, and a candidate that changes one of those flags."""
    if not check or not check["flags"]:
        return False
    return first_step or any(not same_value(candidate.get(f), incumbent.get(f)) for f in check["flags"])


def outputs_differ(check, outputs):
    """Why a candidate's greedy outputs fail the check (the reason that makes it infeasible), or None.
    The first call (the incumbent's) keeps ``outputs`` as the reference."""
    if check["reference"] is None:
        check["reference"] = list(outputs)
        return None
    ref = check["reference"]
    if len(outputs) != len(ref):
        raise TuneError(f"the output check got {len(outputs)} outputs for {len(ref)} reference prompts")
    differ = [i for i, (a, b) in enumerate(zip(ref, outputs)) if a != b]
    if (len(ref) - len(differ)) / len(ref) >= check["min_identical"]:
        return None
    first = differ[0]
    at = next((k for k, (a, b) in enumerate(zip(ref[first], outputs[first])) if a != b),
              min(len(ref[first]), len(outputs[first])))
    return (f"{CHANGES_OUTPUTS}: {len(differ)} of {len(ref)} greedy outputs differ from the incumbent's (prompt "
            f"{first + 1} from character {at + 1}: {outputs[first][at:at + 24]!r} for {ref[first][at:at + 24]!r}), "
            f"{check['min_identical']:.0%} must be identical")
