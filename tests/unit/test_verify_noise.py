"""The noise-aware comparison (plugins/module_utils/verify/noise.py): its error rates on simulated
throughputs at a known noise, and what it says when it cannot tell."""

import math
import random

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.verify.noise import (
    compare,
    compare_runs,
    pooled_noise,
    t_quantile,
)

CV = 0.02   # the run-to-run spread of one repeat's decode throughput


def repeats(rng, n, mean=100.0, cv=CV):
    return [mean * math.exp(rng.gauss(0, cv)) for _ in range(n)]


def history_noise(rng, runs=20, n=5):
    return pooled_noise([repeats(rng, n, mean=rng.uniform(90, 110)) for _ in range(runs)])


@pytest.mark.parametrize(("p", "dof", "exact"), [(0.99, 1, 31.821), (0.99, 2, 6.965), (0.95, 2, 2.920),
                                                 (0.975, 5, 2.5706), (0.99, 10, 2.7638), (0.95, 30, 1.6973),
                                                 (0.01, 4, -3.747), (0.99, 500, 2.3338), (0.99, math.inf, 2.3263)])
def test_t_quantile_matches_the_tables(p, dof, exact):
    """Student's t tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2) to their 4-5 digits."""
    assert t_quantile(p, dof) == pytest.approx(exact, abs=6e-4)


def test_pooled_noise_ignores_each_runs_own_level():
    """Runs at 50 and at 200 tok/s with the same relative spread pool to that spread."""
    rng = random.Random(7)
    runs = [repeats(rng, 5, mean=50 if i % 2 else 200) for i in range(40)]
    sigma, dof = pooled_noise(runs)
    assert dof == 160 and sigma == pytest.approx(CV, rel=0.15)


def rates(loss, trials=2000, n=5, seed=11):
    rng = random.Random(seed)
    sigma, dof = history_noise(rng)
    verdicts = [compare(repeats(rng, n, mean=100 * (1 - loss)), repeats(rng, n), sigma, dof)["verdict"]
                for _ in range(trials)]
    return {v: verdicts.count(v) / trials for v in set(verdicts)}


def test_an_unchanged_release_fails_at_most_one_percent_of_the_time():
    assert rates(0.0).get("fail", 0) <= 0.01


def test_a_five_percent_loss_fails_at_least_95_percent_of_the_time():
    assert rates(0.05)["fail"] >= 0.95


def test_a_gain_never_fails():
    assert rates(-0.05).get("fail", 0) == 0


def test_noise_too_large_to_tell_is_inconclusive_and_says_what_it_can_detect():
    rng = random.Random(3)
    result = compare(repeats(rng, 3, mean=97, cv=0.10), repeats(rng, 3, cv=0.10), sigma=0.10, dof=12)
    assert result["verdict"] == "inconclusive"
    assert result["detectable"] > 0.15
    assert "detects a loss of" in result["message"] and result["message"].endswith("inconclusive")


def test_fewer_than_three_repeats_is_a_point_comparison_said_as_such():
    result = compare([88.0, 89.0], [100.0, 100.0], sigma=0.02, dof=40)
    assert result["verdict"] == "point" and result["point_verdict"] == "fail"
    assert "a point comparison of the medians against -10 %, not a test" in result["message"]
    assert compare([95.0, 96.0], [100.0, 100.0])["point_verdict"] == "pass"


def test_bad_throughputs_are_refused():
    with pytest.raises(ValueError, match="positive numbers"):
        compare([0.0, 1.0, 2.0], [1.0, 1.0, 1.0])


def test_run_to_run_an_unchanged_release_fails_at_most_one_percent_and_a_big_loss_is_caught():
    """Runs whose figures move 2 % between runs: the host's noise from 4 releases x 4 runs (12 dof),
    this run against the window's 5 runs."""
    rng = random.Random(5)
    sigma, dof = pooled_noise([[100 * math.exp(rng.gauss(0, CV)) for _ in range(4)] for _ in range(4)])

    def verdicts(loss, trials=2000):
        out = [compare_runs(100 * (1 - loss) * math.exp(rng.gauss(0, CV)),
                            [100 * math.exp(rng.gauss(0, CV)) for _ in range(5)], sigma, dof)["verdict"]
               for _ in range(trials)]
        return {v: out.count(v) / trials for v in set(out)}

    assert verdicts(0.0).get("fail", 0) <= 0.01
    assert verdicts(0.15)["fail"] >= 0.95


def test_measuring_the_current_run_again_narrows_the_run_to_run_comparison():
    """Each measurement of this run is one more draw of the run-to-run noise: se = sigma * sqrt(1/n + 1/k)."""
    once = compare_runs(96.0, [100.0, 101.0, 99.0], 0.02, 8)
    thrice = compare_runs([96.0, 96.5, 95.5], [100.0, 101.0, 99.0], 0.02, 8)
    assert once["se"] == pytest.approx(0.02 * math.sqrt(1 + 1 / 3))
    assert thrice["se"] == pytest.approx(0.02 * math.sqrt(1 / 3 + 1 / 3))
    assert (thrice["n"], thrice["m"]) == (3, 3) and thrice["detectable"] < once["detectable"]
    assert "this run measured 3 times vs 3 reference runs" in thrice["message"]
