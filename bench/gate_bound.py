#!/usr/bin/env python3
"""#40's oracle bound: what any gate could catch on the recorded verify runs of the real SGLang host.

    .venv/bin/python bench/gate_bound.py            # both recordings, both metrics, ~1 min

No gate code is run. The noise is each recording's own: the log of each unchanged run's figure (the
median of its repeats, as verify takes it) against the median of the up to 6 runs around it since the
same restart, itself left out (bench/tune_offline.py's `real_ratios`, per metric and per recording;
runs, never repeats). An oracle test knows that distribution exactly. Draw k runs of the release judged
and n reference runs from it (with replacement; n = inf: the reference level known exactly), scale the
judged ones by (1 - loss), and compute a statistic on the logs:

- mean:   mean of the k judged - mean of the n reference;
- median: median of the k judged - median of the n reference;
- best:   the best (largest) of the k judged - mean of the n reference (verify judges a re-measured
          run on its best measurement: noise.compare_runs);
- LR (n = inf only): the Neyman-Pearson likelihood ratio of the k judged runs for that loss, on a
  kernel density of the noise (the most powerful test of all for that density; drawn from it, a
  smoothed bootstrap with the variance kept).

Every statistic's threshold is its own 1 % quantile without a loss (false alarms 1 %); detection is the
share of draws with the loss beyond it. Since a loss shifts the judged logs only, mean, median and best
are detected at loss L when stat0 < q01 + |ln(1 - L)|, and the smallest loss detected 90 % of the time
is 1 - exp(-(q90 - q01)). Beside them the normal theory's k for 90 % of 20 % losses:
(z_0.99 + z_0.90) sigma sqrt(1/k + 1/n) <= ln(1 / 0.8), with sigma the logs' sd and their robust sd
(1.4826 x MAD). `--boot` resamples each recording's ratios (runs) and redoes the 20 % row at n = inf,
for the spread that ~40-110 runs leave on a 1 % tail.

The ratios leave out two things, both noted in bench/README.md: they are local (a level change between
lifetimes or loads is removed, which favours the oracle), and each is against a median of <= 6 noisy
neighbours (which widens them by ~10 %; `--deflate` shrinks the logs by that factor, against the oracle).
"""

from __future__ import annotations

import argparse
import bisect
import math
import pathlib
import random
import statistics
import sys
import time
from statistics import NormalDist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gate_replay import METRICS, load_runs

REPO = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = REPO / "bench" / "samples"
RECORDINGS = {   # name: (file, the phases of unchanged runs)
    "loaded": (SAMPLES / "real-sglang-verify-runs-2026-12-05.jsonl", ("idle", "unit-tests", "mixed")),
    "quiet": (SAMPLES / "real-sglang-verify-runs-2026-12-06-idle.jsonl", ("idle",)),
}
LOSSES = (0.10, 0.20, 0.30, 0.50)
KS = (1, 2, 3, 4, 6, 10)
NS = (5, 10, 15, math.inf)
STATS = ("mean", "median", "best")
ALPHA, POWER = 0.01, 0.90
K_MAX = 64


def log_ratios(path, phases, metric):
    """tune_offline.real_ratios for one metric, as logs: each run's figure against the median of the up
    to 3 runs before and 3 after it within its server lifetime, itself left out."""
    segments = {}
    for run in load_runs(path):
        if run["phase"] in phases:
            segments.setdefault(run["server_start"], []).append(statistics.median(run["repeats"][metric]))
    out = []
    for figures in segments.values():
        for i, f in enumerate(figures):
            around = figures[max(0, i - 3):i] + figures[i + 1:i + 4]
            if around:
                out.append(math.log(f / statistics.median(around)))
    return out


def deflate(logs, rng, draws=4000):
    """The logs shrunk by the share of their variance that the neighbours' median adds (that median's
    variance for 6 draws of the same noise, by resampling)."""
    var = statistics.pvariance(logs)
    med = statistics.pvariance([statistics.median(rng.choices(logs, k=6)) for _ in range(draws)])
    c = statistics.fmean(logs)
    return [c + (x - c) / math.sqrt(1 + med / var) for x in logs]


def quantile(sorted_xs, p):
    return sorted_xs[min(len(sorted_xs) - 1, int(p * len(sorted_xs)))]


def judged_stats(logs, k, trials, rng):
    """Per draw of k judged runs: (mean, median, best) of their logs."""
    out = {"mean": [], "median": [], "best": []}
    for _ in range(trials):
        xs = rng.choices(logs, k=k)
        out["mean"].append(sum(xs) / k)
        out["median"].append(statistics.median(xs))
        out["best"].append(max(xs))
    return out


def reference_stats(logs, n, trials, rng):
    """Per draw of n reference runs: (mean, median) of their logs; n = inf: the level itself (0)."""
    if n == math.inf:
        return {"mean": [0.0] * trials, "median": [0.0] * trials}
    out = {"mean": [], "median": []}
    for _ in range(trials):
        xs = rng.choices(logs, k=n)
        out["mean"].append(sum(xs) / n)
        out["median"].append(statistics.median(xs))
    return out


def oracle(logs, ks, ns, trials, rng):
    """{(stat, k, n): the null statistic's draws, sorted}."""
    refs = {n: reference_stats(logs, n, trials, rng) for n in ns}
    out = {}
    for k in ks:
        judged = judged_stats(logs, k, trials, rng)
        for n in ns:
            for stat in STATS:
                ref = refs[n]["median" if stat == "median" else "mean"]
                out[stat, k, n] = sorted(j - r for j, r in zip(judged[stat], ref))
    return out


def detection(null_sorted, loss):
    """The share of draws with the loss below the null's 1 % quantile (the loss shifts the judged logs)."""
    threshold = quantile(null_sorted, ALPHA) - math.log(1 - loss)
    return bisect.bisect_left(null_sorted, threshold) / len(null_sorted)


def smallest(null_sorted):
    """The smallest loss detected POWER of the time: 1 - exp(-(q90 - q01))."""
    return 1 - math.exp(-(quantile(null_sorted, POWER) - quantile(null_sorted, ALPHA)))


class Density:
    """A Gaussian kernel density of the logs (Silverman's bandwidth), variance kept, on a grid."""

    def __init__(self, logs, step=0.002):
        self.logs, n = logs, len(logs)
        sd = statistics.pstdev(logs)
        iqr = quantile(sorted(logs), 0.75) - quantile(sorted(logs), 0.25)
        self.h = 0.9 * min(sd, iqr / 1.349) * n ** -0.2
        self.c, self.shrink = statistics.fmean(logs), 1 / math.sqrt(1 + self.h ** 2 / sd ** 2)
        self.lo, self.step = min(logs) - 1.5, step
        unit = NormalDist(0, self.h * self.shrink)
        centres = [self.c + (x - self.c) * self.shrink for x in logs]
        size = int((max(logs) + 1.5 - self.lo) / step) + 1
        self.grid = [math.log(max(1e-300, sum(unit.pdf(self.lo + i * step - m) for m in centres) / n)) for i in range(size)]

    def logpdf(self, x):
        i = round((x - self.lo) / self.step)
        return self.grid[min(len(self.grid) - 1, max(0, i))]

    def draw(self, rng, k):
        return [self.c + (x - self.c + rng.gauss(0, self.h)) * self.shrink for x in rng.choices(self.logs, k=k)]


def lr_detection(density, k, loss, trials, rng):
    """The Neyman-Pearson test of k judged runs (level known) for one loss: detection at 1 % false alarms."""
    d = math.log(1 - loss)

    def stat(xs):
        return sum(density.logpdf(x - d) - density.logpdf(x) for x in xs)

    null = sorted(stat(density.draw(rng, k)) for _ in range(trials))
    threshold = quantile(null, 1 - ALPHA)
    return sum(stat([x + d for x in density.draw(rng, k)]) > threshold for _ in range(trials)) / trials


def k_needed(logs, n, stat, loss, trials, rng, k_max=K_MAX):
    """The fewest judged runs that detect `loss` POWER of the time (None: more than k_max)."""
    ref = reference_stats(logs, n, trials, rng)["median" if stat == "median" else "mean"]
    lo = 1
    while lo <= k_max:
        judged = judged_stats(logs, lo, trials, rng)[stat]
        if detection(sorted(j - r for j, r in zip(judged, ref)), loss) >= POWER:
            return lo
        lo = lo + 1 if lo < 10 else lo + max(1, lo // 5)
    return None


def lr_k_needed(density, loss, trials, rng, k_max=K_MAX):
    """The fewest judged runs the likelihood-ratio test (level known) needs for `loss` POWER of the time."""
    k = 1
    while k <= k_max:
        if lr_detection(density, k, loss, trials, rng) >= POWER:
            return k
        k = k + 1 if k < 10 else k + max(1, k // 5)
    return None


def normal_k(sigma, n, loss=0.20):
    """Normal theory: the fewest k with (z_0.99 + z_0.90) sigma sqrt(1/k + 1/n) <= ln(1 / (1 - loss))."""
    z = NormalDist().inv_cdf(1 - ALPHA) + NormalDist().inv_cdf(POWER)
    room = (math.log(1 / (1 - loss)) / (z * sigma)) ** 2 - (0 if n == math.inf else 1 / n)
    return math.ceil(1 / room) if room > 0 else None


def fmt_n(n):
    return "inf" if n == math.inf else str(n)


def fmt_k(k):
    return f"> {K_MAX}" if k is None else str(k)


def pct(x):
    return f"{100 * x:.0f} %"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=20000, help="draws per (k, n) (default 20000)")
    p.add_argument("--boot", type=int, default=40, help="bootstrap replicates of the ratios for the 20 %% row (0: none)")
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--deflate", action="store_true", help="shrink the logs by the neighbours' median's share of their variance")
    p.add_argument("--recordings", nargs="+", choices=list(RECORDINGS), default=list(RECORDINGS))
    a = p.parse_args()
    started = time.monotonic()
    rng = random.Random(a.seed)
    for name in a.recordings:
        path, phases = RECORDINGS[name]
        print(f"## {name}: {path.name}, phases {', '.join(phases)}\n")
        for metric in METRICS:
            logs = log_ratios(path, phases, metric)
            if a.deflate:
                logs = deflate(logs, rng)
            sd, mad = statistics.pstdev(logs), 1.4826 * statistics.median(abs(x - statistics.median(logs)) for x in logs)
            s = sorted(logs)
            print(f"### {metric}: {len(logs)} runs, log sd {100 * sd:.1f} %, robust sd {100 * mad:.1f} %, "
                  f"slowest {100 * (math.exp(s[0]) - 1):+.0f} %, 1 in 20 below {100 * (math.exp(quantile(s, 0.05)) - 1):+.0f} %\n")
            res = oracle(logs, KS, NS, a.trials, rng)
            density = Density(logs)
            print("| loss | n | statistic | " + " | ".join(f"k={k}" for k in KS) + " |")
            print("|---|---|---|" + "---|" * len(KS))
            for loss in LOSSES:
                for n in NS:
                    for stat in STATS:
                        cells = [pct(detection(res[stat, k, n], loss)) for k in KS]
                        print(f"| {pct(loss)} | {fmt_n(n)} | {stat} | " + " | ".join(cells) + " |")
                cells = [pct(lr_detection(density, k, loss, a.trials // 4, rng)) for k in KS]
                print(f"| {pct(loss)} | inf | LR (kernel h {100 * density.h:.1f} %) | " + " | ".join(cells) + " |")
            print("| smallest loss caught 90 % | inf / 15 | mean | "
                  + " | ".join(f"{pct(smallest(res['mean', k, math.inf]))} / {pct(smallest(res['mean', k, 15]))}" for k in KS) + " |")
            print("| | inf / 15 | best | "
                  + " | ".join(f"{pct(smallest(res['best', k, math.inf]))} / {pct(smallest(res['best', k, 15]))}" for k in KS) + " |")
            print()
            print("k for 90 % of 20 % losses at 1 % false alarms (n = 15 / inf):")
            for stat in STATS:
                ks = [fmt_k(k_needed(logs, n, stat, 0.20, a.trials, rng)) for n in (15, math.inf)]
                print(f"- {stat}: {ks[0]} / {ks[1]}")
            print(f"- LR (level known): - / {fmt_k(lr_k_needed(density, 0.20, a.trials // 4, rng))}")
            print(f"- normal theory, sigma {100 * sd:.1f} % (robust {100 * mad:.1f} %): "
                  f"{fmt_k(normal_k(sd, 15))} / {fmt_k(normal_k(sd, math.inf))} "
                  f"(robust {fmt_k(normal_k(mad, 15))} / {fmt_k(normal_k(mad, math.inf))})")
            if a.boot:
                boot = {(stat, k): [] for stat in STATS for k in (2, 3)}
                for _ in range(a.boot):
                    again = rng.choices(logs, k=len(logs))
                    r = oracle(again, (2, 3), (math.inf,), a.trials // 10, rng)
                    for key in boot:
                        boot[key].append(detection(r[key[0], key[1], math.inf], 0.20))
                print(f"- bootstrap of the runs ({a.boot}), 20 % at n = inf, median [5th, 95th pct]: " + "; ".join(
                    f"{stat} k={k} {pct(statistics.median(v))} [{pct(quantile(sorted(v), 0.05))}, {pct(quantile(sorted(v), 0.95))}]"
                    for (stat, k), v in boot.items()))
            print(f"\n({time.monotonic() - started:.0f} s)\n", flush=True)


if __name__ == "__main__":
    sys.exit(main())
