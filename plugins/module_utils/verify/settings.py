"""The verify gates' settings: one dict, its defaults and ranges, checked once (stdlib only).

The role passes `sglang_verify_<name>` for each name below as one `thresholds` dict (built in
roles/sglang_verify/vars/main.yml); deploy's checks run the same `problems()` (the
`sglang_verify_threshold_problems` filter) before any host changes, and `thresholds()` refuses what
it names. The role's defaults (roles/sglang_verify/defaults/main.yml) equal DEFAULTS
(tests/unit/test_sglang_verify.py checks it).
"""

from __future__ import annotations

import math

# name: (default, what it must be). The prior's default, 2 % over 4 dof: #27's GPU figure, which keeps
# the synthetic check's rates (bench/README.md "Gates on the real engine"); a noisier host states its
# own in the inventory (the lab's real SGLang on a 2-core CPU: 20 %, measured there).
SPEC = {
    "min_decode_tok_s": (0.0, "a number >= 0 (0: no floor)"),
    "min_accept_length": (0.0, "a number >= 0 (0: not checked)"),
    "history_window": (5, "a whole number >= 1"),
    "regression_tolerance_pct": (10.0, "a number in [0, 100)"),
    "gate_mode": ("noise", "noise or fixed"),
    "inconclusive": ("keep", "keep or fail"),
    "remeasure": (1, "a whole number from 0 to 5"),
    "min_effect_pct": (3.0, "a number in (0, 100)"),
    "false_alarm_pct": (1.0, "a number in (0, 50)"),
    "power_pct": (95.0, "a number in [50, 100)"),
    "run_noise_prior_pct": (2.0, "a number in [0, 50) (0: no prior)"),
    "run_noise_prior_dof": (4, "a whole number from 1 to 100"),
    "accept_regression": (False, "true or false"),
    "rebaseline": (False, "true or false"),
}
DEFAULTS = {name: default for name, (default, _what) in SPEC.items()}


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _flag(value):
    if isinstance(value, bool):
        return value
    return {"true": True, "yes": True, "false": False, "no": False}.get(str(value).strip().lower())


def _in(lo, hi, lo_open=False, hi_open=True, whole=False):
    """A converter: the value as a number within [lo, hi) (or the bounds given), else None."""
    def convert(value):
        num = _number(value)
        if num is None or (whole and num != int(num)):
            return None
        if num < lo or (lo_open and num == lo) or num > hi or (hi_open and num == hi):
            return None
        return int(num) if whole else num
    return convert


def _one_of(*choices):
    return lambda value: value if value in choices else None


CONVERT = {
    "min_decode_tok_s": _in(0, math.inf),
    "min_accept_length": _in(0, math.inf),
    "history_window": _in(1, 10 ** 6, hi_open=False, whole=True),
    "regression_tolerance_pct": _in(0, 100),
    "gate_mode": _one_of("noise", "fixed"),
    "inconclusive": _one_of("keep", "fail"),
    "remeasure": _in(0, 5, hi_open=False, whole=True),
    "min_effect_pct": _in(0, 100, lo_open=True),
    "false_alarm_pct": _in(0, 50, lo_open=True),
    "power_pct": _in(50, 100),
    "run_noise_prior_pct": _in(0, 50),
    "run_noise_prior_dof": _in(1, 100, hi_open=False, whole=True),
    "accept_regression": _flag,
    "rebaseline": _flag,
}


def problems(raw):
    """Each setting of `raw` that is unknown or out of range, as `sglang_verify_<name> <value>: must be
    <what>` (empty when all are fine). Missing settings (or None, or "": a role variable left unset)
    take DEFAULTS."""
    if not isinstance(raw, dict):
        return [f"the verify thresholds must be a dict, got {type(raw).__name__}"]
    out = [f"sglang_verify_{name} is not a verify threshold (known: {', '.join(SPEC)})" for name in raw
           if name not in SPEC]
    for name, (_default, what) in SPEC.items():
        if raw.get(name) not in (None, "") and CONVERT[name](raw[name]) is None:
            out.append(f"sglang_verify_{name} {raw[name]!r}: must be {what}")
    return out


def thresholds(raw, error=ValueError):
    """The settings as their types, DEFAULTS for what `raw` leaves out (or gives as None); raises
    `error` naming every problem (problems())."""
    bad = problems(raw)
    if bad:
        raise error("sglang_verify settings out of range: " + "; ".join(bad))
    return {name: DEFAULTS[name] if raw.get(name) in (None, "") else CONVERT[name](raw[name]) for name in SPEC}
