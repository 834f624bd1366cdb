"""The run-to-run comparison (plugins/module_utils/verify/noise.py): the noise learned from run figures,
moderated by a prior, the verdict's error rates on simulated runs at a known noise, what it says when it
cannot tell, and whether a baseline moved between two measurements."""

import math
import random
from statistics import fmean

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.verify import gates, noise
from ansible_collections.sglang.fleet.plugins.module_utils.verify.noise import (
    best_of,
    bracket,
    compare_runs,
    geomean,
    judge,
    moderate,
    pooled_noise,
    run_noise,
    t_quantile,
)

CV = 0.02   # the run-to-run spread of one run's decode throughput


def runs(rng, n, mean=100.0, cv=CV):
    return [mean * math.exp(rng.gauss(0, cv)) for _ in range(n)]


@pytest.mark.parametrize(("p", "dof", "exact"), [(0.99, 1, 31.821), (0.99, 2, 6.965), (0.95, 2, 2.920),
                                                 (0.975, 5, 2.5706), (0.99, 10, 2.7638), (0.95, 30, 1.6973),
                                                 (0.01, 4, -3.747), (0.99, 500, 2.3338), (0.99, math.inf, 2.3263)])
def test_t_quantile_matches_the_tables(p, dof, exact):
    """Student's t tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2) to their 4-5 digits."""
    assert t_quantile(p, dof) == pytest.approx(exact, abs=6e-4)


def test_pooled_noise_ignores_each_runs_own_level():
    """Runs at 50 and at 200 tok/s with the same relative spread pool to that spread (the bench's
    description of one run's repeats)."""
    rng = random.Random(7)
    groups = [runs(rng, 5, mean=50 if i % 2 else 200) for i in range(40)]
    sigma, dof = pooled_noise(groups)
    assert dof == 160 and sigma == pytest.approx(CV, rel=0.15)


def test_geomean_is_the_level_the_log_scale_compares():
    assert geomean([50.0, 200.0]) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="positive numbers"):
        geomean([1.0, 0.0])


# ------------------------------------------------------------------ run_noise: learned from run figures

def test_run_noise_learns_the_run_to_run_spread_of_steady_runs():
    """Independent runs at 2 %: the clipped, corrected mean square of successive differences is
    unbiased for normal noise (WINSOR_K), so the estimate lands on the true spread."""
    rng = random.Random(5)
    got = run_noise([runs(rng, 200)])
    assert got["sigma"] == pytest.approx(CV, rel=0.12)
    assert got["differences"] == 199


@pytest.mark.parametrize("n", [2, 3, 5, 10, 20])
def test_run_noise_degrees_of_freedom_are_von_neumanns(n):
    """2 (n-1)^2 / (3n - 4) per series of n runs, summed over the series, at least 1."""
    rng = random.Random(n)
    assert run_noise([runs(rng, n)])["dof"] == max(1, round(2 * (n - 1) ** 2 / (3 * n - 4)))
    both = run_noise([runs(rng, n), runs(rng, n, mean=300)])
    assert both["dof"] == max(1, round(2 * 2 * (n - 1) ** 2 / (3 * n - 4)))
    assert both["differences"] == 2 * (n - 1)   # no difference across two series (releases)


def test_a_level_step_inside_a_series_is_clipped_and_does_not_teach_the_noise():
    """20 runs at 1 % noise with a 20 % loss after run 10: the step is one difference, clipped at three
    robust standard deviations, so sigma stays near 1 % (unclipped it would be about 3.5 %)."""
    rng = random.Random(3)
    series = runs(rng, 10, mean=500.0, cv=0.01) + runs(rng, 10, mean=400.0, cv=0.01)
    got = run_noise([series])
    assert got["clipped"] >= 1 and got["differences"] == 19
    assert got["sigma"] < 0.02
    logs = [math.log(x) for x in series]
    unclipped = math.sqrt(sum((b - a) ** 2 for a, b in zip(logs, logs[1:])) / 19 / 2)
    assert unclipped > 0.035


def test_a_slow_run_between_passing_runs_keeps_its_size_and_a_failed_one_is_clipped():
    """20 runs at 1 % noise, run 10 once 40 % slow. Marked passing (the gates kept it), its two steps are
    the host's own noise, heavy tail and all, and sigma grows; marked failed, they are clipped at three
    robust standard deviations and sigma stays near 1 %. Without flags every step counts as untrusted."""
    rng = random.Random(11)
    series = runs(rng, 20, cv=0.01)
    series[10] *= 0.6
    passing = run_noise([series], [[True] * 20])
    failed = run_noise([series], [[i != 10 for i in range(20)]])
    assert (passing["clipped"], failed["clipped"]) == (0, 2)
    assert passing["sigma"] > 0.1 and failed["sigma"] < 0.025
    assert passing["sigma"] > 4 * failed["sigma"]
    assert run_noise([series])["clipped"] == 2 and run_noise([series])["sigma"] < 0.025


def test_steady_passing_runs_are_not_corrected_for_clipping():
    """Only clipped (untrusted) differences get the WINSOR_K correction: the same steady series gives a
    smaller sigma as passing runs (kept whole, no correction) than unflagged (clipped, corrected)."""
    rng = random.Random(12)
    series = runs(rng, 30, cv=0.01)
    logs = [math.log(x) for x in series]
    plain = math.sqrt(sum((b - a) ** 2 for a, b in zip(logs, logs[1:])) / 29 / 2)
    assert run_noise([series], [[True] * 30])["sigma"] == pytest.approx(plain)
    assert run_noise([series])["sigma"] > plain


def test_figures_mostly_equal_still_clip_a_failed_runs_step():
    """A quantised figure: most successive differences are 0, so their median is; the scale then comes
    from the median of the nonzero ones, and a failed run's 40 % step is still clipped."""
    series = [100.0] * 6 + [101.0, 100.0, 101.0, 60.0]
    got = run_noise([series], [[True] * 9 + [False]])
    assert got["clipped"] == 1 and got["sigma"] < 0.02


def test_run_noise_without_two_runs_of_one_series_knows_nothing():
    assert run_noise([[100.0], [90.0]]) == {"sigma": None, "dof": 0, "differences": 0, "clipped": 0}
    assert run_noise([]) == {"sigma": None, "dof": 0, "differences": 0, "clipped": 0}
    assert run_noise([[100.0, 100.0, 100.0]])["sigma"] == 0.0
    with pytest.raises(ValueError, match="positive numbers"):
        run_noise([[100.0, -1.0]])


# ------------------------------------------------------------------ moderate: own noise and a prior

def test_moderate_weighs_the_own_noise_and_the_prior_by_their_degrees_of_freedom():
    sigma, dof = moderate(0.01, 6, 0.03, 4)
    assert dof == 10 and sigma == pytest.approx(math.sqrt((6 * 0.01 ** 2 + 4 * 0.03 ** 2) / 10))
    # many own runs outweigh the prior
    assert moderate(0.01, 400, 0.03, 4)[0] == pytest.approx(0.01, rel=0.05)


def test_moderate_with_one_side_missing_takes_the_other_and_with_none_knows_nothing():
    assert moderate(None, 0, 0.03, 4) == (0.03, 4)
    assert moderate(0.02, 5, None, 0) == (0.02, 5)
    assert moderate(0.02, 5, 0.03, 0) == (0.02, 5)
    assert moderate(None, 0, None, 0) == (None, 0)


@pytest.mark.parametrize(("own", "dof", "prior", "rejects"), [
    (0.015, 38, 0.20, True),    # the lab's real SGLang on a quiet machine against cpu1's CI-load prior
    (0.17, 10, 0.02, True),     # a loaded CPU engine against the GPU default
    (0.18, 12, 0.20, False),    # what the prior says
    (0.01, 6, 0.03, False),     # a third of the prior over 6 dof: well within chance
    (0.005, 1, 0.20, False),    # one dof tells nothing
    (None, 0, 0.20, False),
])
def test_a_prior_is_set_aside_only_where_the_hosts_own_runs_reject_it(own, dof, prior, rejects):
    assert noise.prior_conflicts(own, dof, prior) is rejects
    sigma, total = moderate(own, dof, prior, 4)
    if rejects:
        assert (sigma, total) == (own, dof)
    elif own is not None and dof:
        assert total == dof + 4 and sigma == pytest.approx(math.sqrt((dof * own ** 2 + 4 * prior ** 2) / (dof + 4)))


def test_a_quiet_hosts_own_noise_decides_and_the_basis_says_the_prior_was_set_aside():
    """40 runs of one release moving ~1.5 % (the real SGLang on a quiet machine, bench/README.md) against a
    20 % prior: the gate judges with the host's own noise, and says why."""
    runs = [{"fingerprint": "f", "passed": True, "generated_at": f"2026120{i // 10}T{i:06d}Z",
             "metrics": {"decode_tok_s@1": 460.0 * (1 + 0.015 * ((i * 7) % 5 - 2) / 1.4)}} for i in range(40)]
    th = {"run_noise_prior_pct": 20.0, "run_noise_prior_dof": 4}
    est = gates.noise_estimate("decode_tok_s@1", runs, [], th)
    assert est["sigma"] < 0.03 and est["dof"] == 26 and est["source"] == "host", est   # 26: run_noise's dof of 40 runs
    assert est["basis"].endswith("prior 20 % as 4 dof, sglang_verify_run_noise_prior_pct: set aside, this host's own "
                                 "runs reject it"), est["basis"]


# ------------------------------------------------------------------ compare_runs: the verdict

@pytest.mark.parametrize(("n", "mean", "variance"), [(2, 0.5642, 0.6817), (3, 0.8463, 0.5595)])
def test_best_of_n_is_the_normal_order_statistic_of_harters_tables(n, mean, variance):
    """The mean and variance of the largest of n standard normals (Harter 1961)."""
    got = best_of(n)
    assert got[0] == pytest.approx(mean, abs=1e-3) and got[1] == pytest.approx(variance, abs=1e-3)
    assert best_of(1) == (0.0, 1.0)


def test_one_measurement_is_compared_with_the_reference_runs_geometric_mean():
    res = compare_runs(95.0, [90.0, 110.0, 100.0], 0.02, 20)
    assert res["current"] == pytest.approx(95.0)
    assert res["reference"] == pytest.approx(geomean([90.0, 110.0, 100.0]))
    assert res["effect"] == pytest.approx(95.0 / geomean([90.0, 110.0, 100.0]) - 1)
    assert (res["n"], res["m"]) == (1, 3)
    assert res["se"] == pytest.approx(0.02 * math.sqrt(1 + 1 / 3))


def test_a_run_measured_again_is_judged_on_its_best_measurement_less_its_expected_lead():
    """Other load only slows a run down: of two measurements the faster is the run, less the lead the best
    of two has over the level by chance (0.5642 sigma)."""
    res = compare_runs([90.0, 110.0], [100.0, 100.0, 100.0], 0.02, 20)
    assert res["current"] == pytest.approx(110.0) and res["reference"] == pytest.approx(100.0)
    assert res["effect"] == pytest.approx(1.1 * math.exp(-best_of(2)[0] * 0.02) - 1)
    assert (res["n"], res["m"]) == (2, 3)
    assert compare_runs([110.0, 90.0], [100.0, 100.0, 100.0], 0.02, 20)["effect"] == pytest.approx(res["effect"])
    assert res["message"].startswith("+8.8 % [")
    assert "(this run's best of 2 measurements, less its expected lead 1.1 % vs 3 reference runs, " in res["message"]


def test_without_a_noise_the_comparison_is_inconclusive_whatever_the_loss():
    res = compare_runs(50.0, [100.0], None, 0, basis="no runs and no prior")
    assert res["verdict"] == "inconclusive"
    assert (res["interval"], res["se"], res["detectable"]) == (None, None, None)
    assert res["effect"] == pytest.approx(-0.5)
    assert res["message"] == ("-50.0 % (this run vs 1 reference run; no run-to-run noise known: no runs and no prior): "
                              "inconclusive")


def test_run_to_run_an_unchanged_release_fails_at_most_one_percent_and_a_big_loss_is_caught():
    """Runs whose figures move 2 % between runs: the host's noise learned from 4 releases x 4 runs,
    this run against the window's 5 runs."""
    rng = random.Random(5)
    noise = run_noise([runs(rng, 4) for _ in range(4)])
    sigma, dof = noise["sigma"], noise["dof"]

    def verdicts(loss, trials=2000):
        out = [compare_runs(100 * (1 - loss) * math.exp(rng.gauss(0, CV)), runs(rng, 5), sigma, dof)["verdict"]
               for _ in range(trials)]
        return {v: out.count(v) / trials for v in set(out)}

    assert verdicts(0.0).get("fail", 0) <= 0.01
    assert verdicts(0.15)["fail"] >= 0.95
    assert verdicts(-0.05).get("fail", 0) == 0   # a gain never fails


def test_noise_too_large_to_tell_is_inconclusive_and_says_what_it_can_detect():
    result = compare_runs(99.0, [100.0, 101.0, 99.0], sigma=0.10, dof=12)
    assert result["verdict"] == "inconclusive"
    assert result["detectable"] > 0.15
    assert "detects a loss of" in result["message"] and result["message"].endswith("inconclusive")


def test_measuring_the_current_run_again_narrows_the_run_to_run_comparison():
    """The best of n measurements varies less than one: se = sigma * sqrt(Var(max of n normals) + 1/k)."""
    once = compare_runs(96.0, [100.0, 101.0, 99.0], 0.02, 8)
    thrice = compare_runs([96.0, 96.5, 95.5], [100.0, 101.0, 99.0], 0.02, 8)
    assert once["se"] == pytest.approx(0.02 * math.sqrt(1 + 1 / 3))
    assert thrice["se"] == pytest.approx(0.02 * math.sqrt(best_of(3)[1] + 1 / 3))
    assert (thrice["n"], thrice["m"]) == (3, 3) and thrice["detectable"] < once["detectable"]
    assert thrice["current"] == pytest.approx(96.5)
    assert "this run's best of 3 measurements, less its expected lead 1.7 % vs 3 reference runs" in thrice["message"]


@pytest.mark.parametrize("n", [2, 3])
def test_an_unchanged_run_judged_on_its_best_measurement_still_fails_at_most_at_alpha(n):
    """Taking the lead off the best of n keeps the false-alarm rate: an unchanged run measured n times at
    2 % run-to-run noise fails at most ~1 %, and a 10 % loss that every measurement shows still fails."""
    rng = random.Random(20 + n)

    def fails(loss, trials=2000):
        return sum(compare_runs(runs(rng, n, mean=100 * (1 - loss)), runs(rng, 5), CV, 20)["verdict"] == "fail"
                   for _ in range(trials)) / trials

    assert fails(0.0) <= 0.015
    assert fails(0.10) >= 0.95


def test_one_sided_interference_measured_twice_rarely_fails_an_unchanged_host():
    """An unchanged host whose runs move 1 % but where each measurement, with probability 0.1, is slowed
    by 40 % (other load for a moment). A run that suspects a loss (fail, or inconclusive at least the
    minimum effect down) is measured again, as the role does. Judged on its best measurement, it fails
    only when both measurements were slowed (~1 %); the geometric mean of the same two measurements
    fails whenever one was. A real 20 % loss (both measurements slow) still fails."""
    rng = random.Random(1)
    sigma, dof, k = 0.01, 20, 5

    def measure(level):
        return level * math.exp(rng.gauss(0, sigma)) * (0.6 if rng.random() < 0.1 else 1.0)

    def rates(loss, trials=2000):
        best = mean = 0
        for _ in range(trials):
            refs = runs(rng, k, cv=sigma)
            first = measure(100.0 * (1 - loss))
            one = compare_runs(first, refs, sigma, dof)
            if one["verdict"] == "fail" or (one["verdict"] == "inconclusive" and one["effect"] <= -0.03):
                both = [first, measure(100.0 * (1 - loss))]
                by_best = compare_runs(both, refs, sigma, dof)["verdict"]
                d = fmean(math.log(x) for x in both) - fmean(math.log(x) for x in refs)
                by_mean = judge(d, sigma * math.sqrt(1 / 2 + 1 / k), dof, 0.01, 0.95, 0.03, None, "")["verdict"]
            else:
                by_best = by_mean = one["verdict"]
            best += by_best == "fail"
            mean += by_mean == "fail"
        return best / trials, mean / trials

    best, mean = rates(0.0)
    assert best <= 0.015
    assert mean >= 0.05 and mean > 4 * best
    assert rates(0.20)[0] >= 0.90


def test_bad_throughputs_are_refused():
    with pytest.raises(ValueError, match="positive numbers"):
        compare_runs(0.0, [1.0, 1.0, 1.0], 0.02, 8)
    with pytest.raises(ValueError, match="at least one reference run"):
        compare_runs(1.0, [], 0.02, 8)


# ------------------------------------------------------------------ bracket: did the baseline move?

def test_a_baseline_measured_alike_before_and_after_did_not_move():
    res = bracket([100.0], [99.5], 0.01, 10)
    assert res["moved"] is False and res["reference"] == [100.0, 99.5]
    assert res["effect"] == pytest.approx(-0.005)
    assert res["interval"][0] < res["effect"] < res["interval"][1]
    assert "within the run-to-run noise" in res["message"]


def test_a_baseline_that_lost_30_percent_between_its_measurements_moved():
    res = bracket(100.0, 70.0, 0.01, 10)
    assert res["moved"] is True and res["effect"] == pytest.approx(-0.3)
    assert res["message"].startswith("the baseline moved -30.0 % [")
    assert "the host itself changed while the steps ran" in res["message"]


def test_a_gain_moves_the_baseline_too_two_sided():
    assert bracket(100.0, 130.0, 0.01, 10)["moved"] is True


def test_without_a_noise_the_bracket_cannot_tell():
    res = bracket([100.0, 101.0], [70.0], None, 0)
    assert res["moved"] is None and res["interval"] is None
    assert res["reference"] == [100.0, 101.0, 70.0]
    assert "no run-to-run noise known" in res["message"]
