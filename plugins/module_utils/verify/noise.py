"""Noise-aware comparison of a throughput against a reference (stdlib only, Python 3.8+).

A gate compares this run's repeats of one metric (e.g. decode tok/s at concurrency 1) with a
reference's (the host's passing history, or its last known good release). Throughput noise is
multiplicative, so the comparison is on log values: the effect is
``exp(mean(log current) - mean(log reference)) - 1``.

The noise is the host's own: the coefficient of variation of one repeat, pooled over the repeats
of its passing runs (each run's repeats around that run's own mean, so a release that is faster or
slower as a whole adds nothing). With noise sigma (log scale, ~ CV) and n, m repeats, the effect's
standard error is ``sigma * sqrt(1/n + 1/m)``; sigma's own uncertainty (few pooled repeats) is
carried by Student's t with the pooled degrees of freedom.

Verdicts, for a false-alarm rate ``alpha``, a power ``power`` and the smallest loss the user cares
about ``min_effect`` (fractions, e.g. 0.01, 0.95, 0.03):

- ``fail``: the loss is significant (one-sided, at ``alpha``) and at least ``min_effect``;
- ``inconclusive``: not a failure, but either the measured loss is at least ``min_effect`` and
  within the noise, or the noise is too large to tell at that size: these repeats would not detect
  a loss of ``max_detectable`` (default twice ``min_effect``) with probability ``power``;
- ``pass``: otherwise;
- ``point``: fewer than 3 repeats on either side or no noise estimate: a point comparison of the
  medians against ``point_tolerance`` (the fixed percentage of earlier releases), said as such.

``detectable`` is the smallest loss these settings detect with probability ``power``:
``(t(1-alpha) + t(power)) * se``, as a fraction.
"""

from __future__ import annotations

import math
from statistics import NormalDist

MIN_REPEATS = 3


def _logs(values):
    out = [math.log(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    if len(out) != len(values):
        raise ValueError(f"throughputs must be positive numbers: {values!r}")
    return out


def _mean(xs):
    return sum(xs) / len(xs)


def _median(values):
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def pooled_noise(runs):
    """(sigma, degrees of freedom) of one repeat on the log scale, pooled over ``runs`` (each a list
    of one run's repeats); runs with fewer than 2 repeats add nothing. (None, 0) without any."""
    ss, dof = 0.0, 0
    for run in runs:
        if len(run) < 2:
            continue
        logs = _logs(run)
        mu = _mean(logs)
        ss += sum((x - mu) ** 2 for x in logs)
        dof += len(logs) - 1
    return (math.sqrt(ss / dof), dof) if dof else (None, 0)


def t_quantile(p, dof):
    """Student's t quantile (Abramowitz & Stegun 26.7.5 expansion around the normal quantile;
    within 1 % of the exact value from 3 degrees of freedom, the normal's at infinity)."""
    z = NormalDist().inv_cdf(p)
    if not dof or dof == math.inf:
        return z
    v = float(dof)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3))


def compare(current, reference, sigma=None, dof=0, *, alpha=0.01, power=0.95, min_effect=0.03,
            max_detectable=None, point_tolerance=0.10):
    """The verdict on ``current`` repeats against ``reference`` repeats (see the module's docstring).

    ``sigma``/``dof``: the host's pooled noise (pooled_noise); without it, the two samples' own
    spread is pooled. Returns a dict: verdict, effect, interval (lo, hi) at 1 - 2 alpha, se,
    detectable, sigma, dof, n, m, and a one-line ``message`` (percentages)."""
    cur, ref = _logs(list(current)), _logs(list(reference))
    if not cur or not ref:
        raise ValueError("both sides need at least one repeat")
    n, m = len(cur), len(ref)
    if sigma is None:
        sigma, dof = pooled_noise([list(current), list(reference)])
    effect = math.exp(_mean(cur) - _mean(ref)) - 1
    base = {"n": n, "m": m, "effect": effect, "sigma": sigma, "dof": dof}
    if n < MIN_REPEATS or m < MIN_REPEATS or not sigma:
        point = _median(current) / _median(reference) - 1
        verdict = "fail" if point < -point_tolerance else "pass"
        return {**base, "verdict": "point", "point_verdict": verdict, "effect": point, "interval": None,
                "se": None, "detectable": None,
                "message": (f"{point * 100:+.1f} % ({n} vs {m} repeats: a point comparison of the medians "
                            f"against -{point_tolerance * 100:.0f} %, not a test; {verdict})")}
    d = _mean(cur) - _mean(ref)
    se = sigma * math.sqrt(1 / n + 1 / m)
    t_alpha, t_power = t_quantile(1 - alpha, dof), t_quantile(power, dof)
    lo, hi = math.exp(d - t_alpha * se) - 1, math.exp(d + t_alpha * se) - 1
    detectable = 1 - math.exp(-(t_alpha + t_power) * se)
    significant = d < -t_alpha * se
    max_detectable = 2 * min_effect if max_detectable is None else max_detectable
    if significant and effect <= -min_effect:
        verdict = "fail"
    elif effect <= -min_effect or detectable > max_detectable:
        verdict = "inconclusive"
    else:
        verdict = "pass"
    message = (f"{effect * 100:+.1f} % [{lo * 100:+.1f}, {hi * 100:+.1f}] ({n} vs {m} repeats, "
               f"noise {sigma * 100:.1f} % per repeat over {dof} dof; detects a loss of "
               f"{detectable * 100:.1f} % or more, cares from {min_effect * 100:.1f} %): {verdict}")
    return {**base, "verdict": verdict, "interval": (lo, hi), "se": se, "detectable": detectable,
            "message": message}
