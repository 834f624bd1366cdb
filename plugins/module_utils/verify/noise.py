"""Noise-aware comparison of run figures against reference runs (stdlib only, Python 3.8+).

A gate compares this run's figure of one metric (e.g. its median decode tok/s at concurrency 1; its
best measurement, less the best's expected lead, when the run was measured again) with the figures of
reference runs (the host's passing history, or its last known good release's runs). Throughput noise
is multiplicative, so the comparison is on log values: the effect is the ratio of the geometric means,
``exp(mean(log current) - mean(log reference)) - 1``, the one figure a message shows.

The noise that matters is **run to run**: a run's repeats share its load, clocks and warm-up, so their
spread says little about how far two runs fall apart (bench/README.md, "Gates on the real engine":
the real SGLang's runs move 2-4 times as far as one run's repeats suggest). So the noise is learned
from runs only (run_noise), and it is *moderated* with a prior until the host has runs enough
(moderate, the empirical-Bayes variance of limma's moderated t, Smyth 2004): the prior is the pooled
run-to-run noise of the host's peers (same hardware and workload) or a stated default, set aside once
the host's own runs reject it (prior_conflicts: a quiet host is not held to a noisy prior). Without either
there is no comparison: the verdict is ``inconclusive``, which never rolls a host back on its own.

run_noise learns from every run, failed ones included, robustly: from the differences between
successive runs of one release and flags. A difference that involves a run which failed a gate is
clipped at three robust standard deviations: a real loss or a change of environment is one step
between two runs, so it adds one clipped difference, not its size, and cannot teach the gate that
losses are noise. Differences between passing runs (inconclusive ones kept included) are kept whole:
they are the host's own noise, heavy tails and all.

Verdicts, for a false-alarm rate ``alpha``, a power ``power`` and the smallest loss the user cares
about ``min_effect`` (fractions, e.g. 0.01, 0.95, 0.03):

- ``fail``: the loss is significant (one-sided, at ``alpha``) and at least ``min_effect``;
- ``inconclusive``: not a failure, but either the measured loss is at least ``min_effect`` and
  within the noise, or the noise is too large to tell at that size: these runs would not detect a
  loss of ``max_detectable`` (default twice ``min_effect``) with probability ``power``; or no noise
  is known;
- ``pass``: otherwise.

``detectable`` is the smallest loss these settings detect with probability ``power``:
``(t(1-alpha) + t(power)) * se``, as a fraction.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist, fmean, median

# Successive differences are clipped at this many robust standard deviations (1.4826 x the median
# absolute difference); WINSOR_K = E[min(Z^2, c^2)] for a standard normal Z makes the clipped mean
# square unbiased for normal noise.
CLIP = 3.0
WINSOR_K = ((2 * NormalDist().cdf(CLIP) - 1) - 2 * CLIP * NormalDist().pdf(CLIP)
            + 2 * CLIP ** 2 * (1 - NormalDist().cdf(CLIP)))


# Fewer successive differences than this: the clipping scale is the prior's, not their median.
SHORT = 5


def _logs(values):
    out = [math.log(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    if len(out) != len(values):
        raise ValueError(f"throughputs must be positive numbers: {values!r}")
    return out


def geomean(values):
    """The geometric mean of positive numbers (the level the log-scale comparison compares)."""
    return math.exp(fmean(_logs(list(values))))


def pooled_noise(runs):
    """(sigma, degrees of freedom) on the log scale of one value around its group's mean, pooled over
    ``runs`` (lists; groups with fewer than 2 values add nothing). (None, 0) without any. Descriptive:
    the bench reports one run's repeats with it; the gates learn run to run with run_noise."""
    ss, dof = 0.0, 0
    for run in runs:
        if len(run) < 2:
            continue
        logs = _logs(run)
        mu = fmean(logs)
        ss += sum((x - mu) ** 2 for x in logs)
        dof += len(logs) - 1
    return (math.sqrt(ss / dof), dof) if dof else (None, 0)


def run_noise(series, trusted=None, prior_sigma=None):
    """Run-to-run noise of one figure, robustly: ``series`` are lists of run figures in time order,
    each of one release and flags (a list per fingerprint); ``trusted`` (the same shape, booleans)
    marks runs that passed their gates. Returns {"sigma", "dof", "differences", "clipped"}; sigma None
    and dof 0 without two runs in one series.

    Each successive difference of log figures has variance 2 sigma^2 for independent runs. A
    difference that involves a run which failed a gate (not trusted) is clipped at CLIP robust standard
    deviations of all differences (a real loss counts once, at that size); a difference between two
    passing runs is the host's own noise, tails included, and is kept whole. The mean square is
    corrected by WINSOR_K for the clipped part, and the degrees of freedom are those of the mean square
    successive difference, 2 (n-1)^2 / (3n - 4) per series of n runs (von Neumann's estimator is 2/3 as
    efficient as the sample variance).

    With fewer than SHORT differences their median says little (with one, a failed run's step would
    set its own clipping limit), so the scale comes from ``prior_sigma`` where one is given."""
    diffs, dof = [], 0.0
    for k, figures in enumerate(series):
        logs = _logs(list(figures))
        ok = list(trusted[k]) if trusted is not None else [False] * len(logs)
        diffs += [(b - a, ok[i] and ok[i + 1]) for i, (a, b) in enumerate(zip(logs, logs[1:]))]
        n = len(logs)
        if n >= 2:
            dof += 2 * (n - 1) ** 2 / (3 * n - 4)
    if not diffs:
        return {"sigma": None, "dof": 0, "differences": 0, "clipped": 0}
    sizes = [abs(d) for d, _ok in diffs]
    if prior_sigma and len(diffs) < SHORT:
        scale = math.sqrt(2) * prior_sigma   # the spread of a difference of two runs at the prior's noise
    else:
        scale = 1.4826 * (median(sizes) or median([x for x in sizes if x] or [0.0]))
    limit = CLIP * scale if scale > 0 else math.inf
    clipped = sum(abs(d) > limit for d, ok in diffs if not ok)
    squares = [d * d if ok else min(d * d, limit * limit) for d, ok in diffs]
    untrusted = sum(not ok for _d, ok in diffs)
    # the clipped part is corrected for what clipping takes from normal noise
    mean_square = (sum(sq for sq, (_d, ok) in zip(squares, diffs) if ok)
                   + sum(sq for sq, (_d, ok) in zip(squares, diffs) if not ok) / (WINSOR_K if untrusted else 1)
                   ) / len(diffs)
    return {"sigma": math.sqrt(mean_square / 2), "dof": max(1, round(dof)), "differences": len(diffs),
            "clipped": clipped}


# A prior the host's own runs reject: their variance is outside the central 99.8 % of what the prior's
# would give over their dof (chi-square, two-sided at 0.1 % a side).
PRIOR_CONFLICT_Z = NormalDist().inv_cdf(1 - 0.001)


def prior_conflicts(own_sigma, own_dof, prior_sigma):
    """Whether the host's own noise (``own_sigma`` over ``own_dof``) rejects the prior's: own_dof * s^2 /
    s0^2 is chi-square with own_dof dof if the prior is right (Wilson-Hilferty's normal approximation
    of its cube root). A stated prior is a placeholder for a host without history (e.g. 20 % for the
    lab's CPU engine under CI load); a host that shows 1.5 % over 38 dof, or 17 % over 10 against a 2 %
    prior, is not what it says, and pooling with it would keep a wrong scale for ever."""
    if own_sigma is None or prior_sigma is None or not own_dof or own_dof < 2 or prior_sigma <= 0 or own_sigma <= 0:
        return False   # no spread at all (a noiseless double, identical figures) says nothing about the scale
    x = own_dof * own_sigma ** 2 / prior_sigma ** 2
    spread = 2 / (9 * own_dof)
    z = ((x / own_dof) ** (1 / 3) - (1 - spread)) / math.sqrt(spread)
    return abs(z) > PRIOR_CONFLICT_Z


def moderate(own_sigma, own_dof, prior_sigma, prior_dof):
    """(sigma, dof): the host's own noise moderated by a prior, s^2 = (d0 s0^2 + d s^2) / (d0 + d) with
    d0 + d degrees of freedom (Smyth 2004, limma's moderated t); the host's own alone where it rejects the
    prior (prior_conflicts). Either side may be missing (sigma None or dof 0); both missing: (None, 0)."""
    if prior_conflicts(own_sigma, own_dof, prior_sigma):
        return own_sigma, own_dof
    parts = [(s, d) for s, d in ((own_sigma, own_dof), (prior_sigma, prior_dof)) if s is not None and d and d > 0]
    dof = sum(d for _s, d in parts)
    if not dof:
        return None, 0
    return math.sqrt(sum(d * s * s for s, d in parts) / dof), dof


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
    freedom, or without any); a fractional dof is rounded down (the wider interval)."""
    z = NormalDist().inv_cdf(p)
    if not dof or dof == math.inf or dof > 1000:
        return z
    dof = max(1, int(dof))
    lo, hi = -1e4, 1e4
    for _step in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, dof) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@functools.lru_cache(maxsize=16)
def best_of(n):
    """(mean, variance) of the largest of n standard normal values (the normal order statistic; by
    numerical integration: n = 2 gives 0.5642 and 0.6817, as Harter's tables)."""
    if n <= 1:
        return 0.0, 1.0
    unit, step = NormalDist(), 0.002
    xs = [-9 + step * i for i in range(int(18 / step) + 1)]
    dens = [n * unit.pdf(x) * unit.cdf(x) ** (n - 1) for x in xs]
    mean = sum(x * f for x, f in zip(xs, dens)) * step
    return mean, sum(x * x * f for x, f in zip(xs, dens)) * step - mean * mean


def compare_runs(current, reference_runs, sigma, dof, *, alpha=0.01, power=0.95, min_effect=0.03,
                 max_detectable=None, basis=""):
    """The verdict on this run's figure ``current`` (a number, or a list when the run was measured
    again: each measurement's figure) against the figures of ``reference_runs``, with ``sigma``/``dof``
    the run-to-run noise of that figure and ``basis`` what it was learned from (said in the message).
    ``sigma`` None: no noise known, the verdict is inconclusive.

    A run measured n > 1 times is judged on its **best** measurement: other load on a host only slows
    a run down, so the fastest measurement is the least disturbed (Python's timeit takes the fastest
    repeat for that reason), and a loss then stands only when every measurement shows it. The best of
    n leads the level by sigma x E[max of n normals] even without a loss; that lead is taken off the
    effect and the standard error is the order statistic's (best_of), so an unchanged run still fails
    at alpha.

    Returns a dict: verdict, current (the geometric mean, or the best measurement) and reference (the
    reference runs' geometric mean), effect, interval (lo, hi) at 1 - 2 alpha, se, detectable, sigma,
    dof, n (measurements), m (reference runs), and ``message``: the effect with its interval and basis
    (percentages)."""
    refs = _logs(list(reference_runs))
    cur = _logs(list(current) if isinstance(current, (list, tuple)) else [current])
    if not refs or not cur:
        raise ValueError("compare_runs needs this run's figure and at least one reference run")
    n, k = len(cur), len(refs)
    lead, spread = best_of(n)
    d = max(cur) - fmean(refs) - (lead * sigma if sigma else 0.0)
    this = "this run" if n == 1 else (f"this run's best of {n} measurements, less its expected lead "
                                      f"{(math.exp(lead * sigma) - 1) * 100 if sigma else 0:.1f} %")
    what = f"{this} vs {k} reference run{'s' if k != 1 else ''}"
    out = {"n": n, "m": k, "current": math.exp(max(cur)), "reference": math.exp(fmean(refs)),
           "effect": math.exp(d) - 1, "sigma": sigma, "dof": dof}
    if not sigma or not dof:
        return {**out, "verdict": "inconclusive", "interval": None, "se": None, "detectable": None,
                "message": (f"{(math.exp(d) - 1) * 100:+.1f} % ({what}; no run-to-run noise known: {basis or 'none'}): "
                            "inconclusive")}
    se = sigma * math.sqrt(spread + 1 / k)
    return {**out, **judge(d, se, dof, alpha, power, min_effect, max_detectable,
                           f"{what}, run-to-run noise {sigma * 100:.1f} % over {dof:g} dof"
                           + (f" ({basis})" if basis else ""))}


def could_fail(current, reference_runs, sigma, dof, alpha, min_effect):
    """Would this run fail if one more measurement came out no better than its best so far? (Then the
    best stays, its expected lead grows with n + 1 and the standard error shrinks: compare_runs.) What
    decides whether measuring again is worth its time."""
    cur = _logs(list(current) if isinstance(current, (list, tuple)) else [current])
    refs = _logs(list(reference_runs))
    lead, spread = best_of(len(cur) + 1)
    d = max(cur) - fmean(refs) - lead * sigma
    return math.exp(d) - 1 <= -min_effect and d < -t_quantile(1 - alpha, dof) * sigma * math.sqrt(spread + 1 / len(refs))


def judge(d, se, dof, alpha, power, min_effect, max_detectable, basis):
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


def bracket(before, after, sigma, dof, *, alpha=0.01):
    """Did a baseline move while other things were measured between its two measurements? ``before``
    and ``after``: the baseline's figures (numbers or lists) measured first and last, ``sigma``/``dof``
    the run-to-run noise. Two-sided at ``alpha``. Returns {"moved": bool or None (no noise known),
    "effect" (after against before), "interval", "reference": every baseline figure (what the steps
    between are then compared with), "message"}."""
    first = list(before) if isinstance(before, (list, tuple)) else [before]
    last = list(after) if isinstance(after, (list, tuple)) else [after]
    d = fmean(_logs(last)) - fmean(_logs(first))
    effect = math.exp(d) - 1
    out = {"effect": effect, "reference": first + last}
    if not sigma or not dof:
        return {**out, "moved": None, "interval": None,
                "message": f"the baseline moved {effect * 100:+.1f} % between its first and last measurement "
                           "(no run-to-run noise known to tell whether that is noise)"}
    se = sigma * math.sqrt(1 / len(first) + 1 / len(last))
    t = t_quantile(1 - alpha / 2, dof)
    lo, hi = math.exp(d - t * se) - 1, math.exp(d + t * se) - 1
    moved = abs(d) > t * se
    return {**out, "moved": moved, "interval": (lo, hi),
            "message": (f"the baseline moved {effect * 100:+.1f} % [{lo * 100:+.1f}, {hi * 100:+.1f}] between its "
                        f"first and last measurement: "
                        + ("beyond the run-to-run noise: the host itself changed while the steps ran, so their "
                           "comparisons are suspect; measure again on a quiet host" if moved else
                           "within the run-to-run noise; the steps are compared with both measurements"))}
