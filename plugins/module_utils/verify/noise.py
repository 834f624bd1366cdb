"""Noise-aware comparison of a throughput against a reference (stdlib only, Python 3.8+).

A gate compares this run's repeats of one metric (e.g. decode tok/s at concurrency 1) with a
reference's (the host's passing history, or its last known good release). Throughput noise is
multiplicative, so the comparison is on log values: the effect is
``exp(mean(log current) - mean(log reference)) - 1``.

The noise is the host's own, learned from its passing runs. Preferred: run to run
(compare_runs), each run's figure around the mean of the runs of its release and flags, since a
run's repeats share its load and clocks and so understate how far two runs fall apart. Until the
host has such runs: the coefficient of variation of one repeat (compare), pooled over the repeats
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

import functools
import math
from statistics import NormalDist, fmean, median

MIN_REPEATS = 3


def _logs(values):
    out = [math.log(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    if len(out) != len(values):
        raise ValueError(f"throughputs must be positive numbers: {values!r}")
    return out


def pooled_noise(runs):
    """(sigma, degrees of freedom) of one repeat on the log scale, pooled over ``runs`` (each a list
    of one run's repeats); runs with fewer than 2 repeats add nothing. (None, 0) without any."""
    ss, dof = 0.0, 0
    for run in runs:
        if len(run) < 2:
            continue
        logs = _logs(run)
        mu = fmean(logs)
        ss += sum((x - mu) ** 2 for x in logs)
        dof += len(logs) - 1
    return (math.sqrt(ss / dof), dof) if dof else (None, 0)


def t_cdf(t, dof):
    """Student's t distribution function for a whole number of degrees of freedom (the closed forms
    of Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(abs(t) / math.sqrt(dof))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if dof % 2:
        term, acc = math.cos(theta), 0.0
        for k in range(1, (dof - 1) // 2 + 1):
            acc += term
            term *= c2 * (2 * k) / (2 * k + 1)
        inside = 2 / math.pi * (theta + s * acc) if dof > 1 else 2 * theta / math.pi
    else:
        term, acc = 1.0, 0.0
        for k in range(1, dof // 2 + 1):
            acc += term
            term *= c2 * (2 * k - 1) / (2 * k)
        inside = s * acc
    return 0.5 + math.copysign(inside / 2, t)


@functools.lru_cache(maxsize=256)
def t_quantile(p, dof):
    """Student's t quantile: t_cdf inverted by bisection (the normal quantile past 1,000 degrees of
    freedom, or without any)."""
    z = NormalDist().inv_cdf(p)
    if not dof or dof == math.inf or dof > 1000:
        return z
    lo, hi = -1e4, 1e4
    for _step in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, int(dof)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def compare(current, reference, sigma=None, dof=0, *, alpha=0.01, power=0.95, min_effect=0.03,
            max_detectable=None, point_tolerance=0.10, noise_name="within-run noise"):
    """The verdict on ``current`` repeats against ``reference`` repeats (see the module's docstring).

    ``sigma``/``dof``: the host's pooled noise (pooled_noise); without it, the two samples' own
    spread is pooled; ``noise_name`` names that noise in the message. Returns a dict: verdict, effect, interval (lo, hi) at 1 - 2 alpha, se,
    detectable, sigma, dof, n, m, and a one-line ``message`` (percentages)."""
    cur, ref = _logs(list(current)), _logs(list(reference))
    if not cur or not ref:
        raise ValueError("both sides need at least one repeat")
    n, m = len(cur), len(ref)
    if sigma is None:
        sigma, dof = pooled_noise([list(current), list(reference)])
    effect = math.exp(fmean(cur) - fmean(ref)) - 1
    base = {"n": n, "m": m, "effect": effect, "sigma": sigma, "dof": dof}
    if n < MIN_REPEATS or m < MIN_REPEATS or not sigma:
        point = median(current) / median(reference) - 1
        verdict = "fail" if point < -point_tolerance else "pass"
        return {**base, "verdict": "point", "point_verdict": verdict, "effect": point, "interval": None,
                "se": None, "detectable": None,
                "message": (f"{point * 100:+.1f} % ({n} vs {m} repeats: a point comparison of the medians "
                            f"against -{point_tolerance * 100:.0f} %, not a test; {verdict})")}
    d = fmean(cur) - fmean(ref)
    se = sigma * math.sqrt(1 / n + 1 / m)
    return {**base, **_judge(d, se, dof, alpha, power, min_effect, max_detectable,
                             f"{n} vs {m} repeats, {noise_name} {sigma * 100:.1f} % per repeat over {dof} dof")}


def compare_runs(current, reference_runs, sigma, dof, *, alpha=0.01, power=0.95, min_effect=0.03,
                 max_detectable=None):
    """The verdict on this run's figure ``current`` (e.g. its median decode tok/s; a list when an
    inconclusive run was measured again: each measurement's figure) against the figures of
    ``reference_runs`` (earlier passing runs: the history window, or the last known good's one run),
    with ``sigma``/``dof`` the host's run-to-run noise of that figure (pooled_noise over runs of the
    same release and flags). Run to run is the noise that matters: a run's repeats share its load,
    clocks and cache state, so their spread understates how far two runs of one release fall apart.
    Same verdicts and dict as compare(); ``n`` is the number of measurements, ``m`` of reference runs."""
    refs = _logs(list(reference_runs))
    cur = _logs(list(current) if isinstance(current, (list, tuple)) else [current])
    if not refs or not cur or not sigma or dof < 1:
        raise ValueError("compare_runs needs reference runs and a run-to-run noise estimate")
    n, k = len(cur), len(refs)
    d = fmean(cur) - fmean(refs)
    se = sigma * math.sqrt(1 / n + 1 / k)
    this = "this run" if n == 1 else f"this run measured {n} times"
    return {"n": n, "m": k, "effect": math.exp(d) - 1, "sigma": sigma, "dof": dof,
            **_judge(d, se, dof, alpha, power, min_effect, max_detectable,
                     f"{this} vs {k} reference run{'s' if k != 1 else ''}, run-to-run noise "
                     f"{sigma * 100:.1f} % over {dof} dof")}


def _judge(d, se, dof, alpha, power, min_effect, max_detectable, basis):
    """Verdict, interval, detectable loss and message for a log-scale difference ``d`` with standard
    error ``se`` (see the module's docstring)."""
    effect = math.exp(d) - 1
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
    message = (f"{effect * 100:+.1f} % [{lo * 100:+.1f}, {hi * 100:+.1f}] ({basis}; detects a loss of "
               f"{detectable * 100:.1f} % or more, cares from {min_effect * 100:.1f} %): {verdict}")
    return {"verdict": verdict, "interval": (lo, hi), "se": se, "detectable": detectable, "message": message}
