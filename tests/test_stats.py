"""Behaviour of relgrade.evaluation.stats on hand-computed cases and on the known traps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import stats

A = np.array([0.5, 0.25, 0.75, 0.125, 0.375])
STEP = np.array([0.0625, 0.125, 0.0625, 0.125, 0.0625])


def rng(seed=0):
    return np.random.default_rng(seed)


# --- the traps -----------------------------------------------------------------------

def test_an_arm_against_itself_has_zero_difference_p_one_and_no_nan():
    t = stats.paired_t_test(A, A)
    flip = stats.sign_flip_test(A - A, rng=rng())
    ci = stats.bootstrap_ci(A - A, rng=rng())
    assert (t.t, t.df, t.p, t.infinite) == (0.0, 4, 1.0, False)
    assert flip.p == 1.0
    assert (ci.estimate, ci.low, ci.high, ci.se) == (0.0, 0.0, 0.0, 0.0)
    assert stats.cohens_dz(A - A) == 0.0
    assert stats.bootstrap_p_value(np.zeros(100), 0.0) == 1.0


def test_a_constant_shift_gives_an_infinite_t_flagged_and_the_exact_sign_flip_floor():
    t = stats.paired_t_test(A + 0.0625, A)
    assert t.infinite and t.t is None and t.p is None
    assert "infinite" in t.notes[0]
    flip = stats.sign_flip_test((A + 0.0625) - A, rng=rng())
    # Only the observed signs and their mirror reach |sum|: 2 of 2**5 patterns.
    assert flip.method == "exact"
    assert flip.p == 2 / 2 ** 5 == 0.0625
    assert stats.cohens_dz((A + 0.0625) - A) is None


def test_paired_t_on_an_uneven_step_matches_the_hand_computed_statistic():
    d = STEP
    sd = math.sqrt(((d - 0.0875) ** 2).sum() / 4)          # mean(d) = 0.0875
    t_hand = 0.0875 / (sd / math.sqrt(5))
    t = stats.paired_t_test(A + STEP, A)
    assert t.t == pytest.approx(t_hand, rel=1e-12)
    assert t.t == pytest.approx(5.7155, abs=5e-5)
    assert t.df == 4
    assert t.p == pytest.approx(0.00464, abs=5e-6)
    assert stats.cohens_dz(STEP) == pytest.approx(t_hand / math.sqrt(5), rel=1e-12)


def test_an_arm_scoring_one_on_every_query_gets_a_degenerate_zero_width_interval():
    for method in ("bca", "percentile"):
        ci = stats.bootstrap_ci(np.ones(10), rng=rng(), n_resamples=1000, method=method)
        assert (ci.low, ci.high, ci.se) == (1.0, 1.0, 0.0)
        assert ci.method == "degenerate"
        assert "degenerate" in ci.notes[0]
        assert all(math.isfinite(x) for x in (ci.estimate, ci.low, ci.high, ci.se))


def test_p_values_are_never_zero_even_for_a_huge_effect():
    d = np.linspace(1.0, 2.0, 200)                       # every query improves
    flip = stats.sign_flip_test(d, rng=rng(), n_permutations=999)
    assert flip.method == "monte-carlo"
    assert flip.p == 1 / 1000
    boot = stats.bootstrap_means(d, rng=rng(), n_resamples=999)
    assert stats.bootstrap_p_value(boot, float(d.mean())) == 1 / 1000


def test_the_same_seed_gives_identical_numbers_and_another_seed_does_not():
    x = rng(5).normal(0.01, 0.1, size=300)
    a1 = stats.bootstrap_ci(x, rng=rng(11), n_resamples=2000)
    a2 = stats.bootstrap_ci(x, rng=rng(11), n_resamples=2000)
    b = stats.bootstrap_ci(x, rng=rng(12), n_resamples=2000)
    assert a1 == a2
    assert (a1.low, a1.high) != (b.low, b.high)
    f1 = stats.sign_flip_test(x, rng=rng(11), n_permutations=2000)
    f2 = stats.sign_flip_test(x, rng=rng(11), n_permutations=2000)
    assert f1 == f2


# --- bootstrap -----------------------------------------------------------------------

def test_resample_means_do_not_depend_on_the_block_size(monkeypatch):
    x = rng(1).random(777)
    big = stats.bootstrap_means(x, rng=rng(3), n_resamples=500)
    monkeypatch.setattr(stats, "BLOCK_ELEMENTS", 777 * 7)   # 7 resamples a block
    small = stats.bootstrap_means(x, rng=rng(3), n_resamples=500)
    assert np.array_equal(big, small)
    flips_big = stats.sign_flip_test(x - 0.5, rng=rng(3), n_permutations=500)
    monkeypatch.setattr(stats, "BLOCK_ELEMENTS", 100)
    assert stats.sign_flip_test(x - 0.5, rng=rng(3), n_permutations=500) == flips_big


def test_arms_resampled_together_share_the_query_indices():
    x = rng(2).random((3, 50))
    together = stats.bootstrap_means(x, rng=rng(4), n_resamples=300)
    alone = stats.bootstrap_means(x[1], rng=rng(4), n_resamples=300)
    assert together.shape == (300, 3)
    assert np.allclose(together[:, 1], alone, rtol=0, atol=1e-15)
    # paired: the difference of the means is the mean of the differences, resample by resample
    diff = stats.bootstrap_means(x[0] - x[2], rng=rng(4), n_resamples=300)
    assert np.allclose(together[:, 0] - together[:, 2], diff, atol=1e-12)


def test_weighted_mean_and_its_leave_one_out_values_by_hand():
    v = np.array([1.0, 0.0, 0.5])
    w = np.array([3.0, 1.0, 2.0])
    assert stats.weighted_mean(v, w) == pytest.approx((3 * 1.0 + 0 + 2 * 0.5) / 6)
    jk = stats.jackknife_means(v, w)
    assert jk.tolist() == pytest.approx([(0 + 1.0) / 3, (3 + 1.0) / 5, 3.0 / 4])
    assert stats.jackknife_means(v).tolist() == pytest.approx([0.25, 0.75, 0.5])


def test_equal_weights_give_the_unweighted_interval():
    x = rng(6).random(80)
    plain = stats.bootstrap_ci(x, rng=rng(1), n_resamples=1000)
    weighted = stats.bootstrap_ci(x, rng=rng(1), n_resamples=1000, weights=np.full(80, 2.5))
    assert weighted.estimate == pytest.approx(plain.estimate, rel=1e-12)
    assert (weighted.low, weighted.high) == pytest.approx((plain.low, plain.high), rel=1e-9)


def test_traffic_weights_pull_the_estimate_towards_heavy_queries():
    v = np.array([1.0, 0.0, 0.0, 0.0])
    ci = stats.bootstrap_ci(v, rng=rng(), n_resamples=500, weights=[97.0, 1.0, 1.0, 1.0])
    assert ci.estimate == pytest.approx(0.97)


def test_bca_falls_back_to_percentile_when_every_resample_sits_above_the_estimate():
    boot = np.linspace(0.6, 0.9, 101)
    ci = stats.interval_from_resamples(boot, 0.5, level=0.9, method="bca",
                                       jackknife=np.array([0.4, 0.5, 0.6]))
    assert ci.method == "percentile"
    assert "bias correction undefined" in ci.notes[0]
    assert (ci.low, ci.high) == pytest.approx((0.615, 0.885))   # 5% and 95% of 0.6..0.9


def test_bca_falls_back_when_the_jackknife_has_no_spread():
    boot = np.linspace(0.4, 0.6, 101)
    ci = stats.interval_from_resamples(boot, 0.5, method="bca", jackknife=np.full(4, 0.5))
    assert ci.method == "percentile"
    assert "acceleration undefined" in ci.notes[0]


def test_bca_with_no_skew_and_no_bias_equals_the_percentile_interval():
    boot = np.linspace(-1.0, 1.0, 2001)                    # symmetric around the estimate 0
    jk = np.array([-0.1, 0.0, 0.1])                        # symmetric: acceleration 0
    bca = stats.interval_from_resamples(boot, 0.0, method="bca", jackknife=jk)
    pct = stats.interval_from_resamples(boot, 0.0, method="percentile", n=3)
    assert bca.method == "bca"
    assert (bca.low, bca.high) == pytest.approx((pct.low, pct.high), abs=1e-12)
    assert (pct.low, pct.high) == pytest.approx((-0.95, 0.95))


def test_standard_error_of_a_mean_shrinks_like_one_over_root_n():
    x = rng(8).normal(size=400)
    se_boot = stats.bootstrap_ci(x, rng=rng(9), n_resamples=4000).se
    se_formula = x.std(ddof=0) / math.sqrt(400)             # bootstrap SE of a mean
    assert se_boot == pytest.approx(se_formula, rel=0.05)


def test_bad_input_is_an_input_error():
    with pytest.raises(InputError, match="finite"):
        stats.bootstrap_ci([0.1, float("nan")], rng=rng())
    with pytest.raises(InputError, match="no queries"):
        stats.bootstrap_ci([], rng=rng())
    with pytest.raises(InputError, match="greater than 0"):
        stats.bootstrap_ci([0.1, 0.2], rng=rng(), weights=[1.0, 0.0])
    with pytest.raises(InputError, match="between 0 and 1"):
        stats.bootstrap_ci([0.1, 0.2], rng=rng(), level=95)
    with pytest.raises(InputError, match="same shape"):
        stats.paired_t_test([0.1, 0.2], [0.1])


# --- sign flips, Holm, generators ----------------------------------------------------

def test_zero_differences_do_not_count_towards_the_exact_enumeration():
    d = np.array([0.1, 0.0, 0.2, 0.0, 0.3])
    flip = stats.sign_flip_test(d, rng=rng())
    # 3 non-zero differences: patterns with |sum| >= 0.6 are +++ and ---: 2 of 8.
    assert (flip.method, flip.n_permutations, flip.extreme, flip.p) == ("exact", 8, 2, 0.25)


def test_sign_flip_counts_ties_as_extreme():
    d = np.array([0.25, 0.25, 0.5])
    # observed 1.0; only +++ and --- reach it (the others give 0 or 0.5): p = 2/8
    assert stats.sign_flip_test(d, rng=rng()).p == 0.25
    d = np.array([0.5, 0.25, -0.25])
    # observed 0.5; +-- ties it (0.5 - 0.25 + 0.25), ++- exceeds it (1.0), +-+ gives 0:
    # with the mirrors, 6 of 8 patterns are at least as extreme
    assert stats.sign_flip_test(d, rng=rng()).p == 0.75


# --- power ---------------------------------------------------------------------------

def test_queries_needed_scale_with_the_square_of_the_standard_error():
    z = special.ndtri(0.975) + special.ndtri(0.8)            # 1.959964 + 0.841621
    p = stats.power_analysis(se=0.01, n=100, reference=0.5, relative_change=0.02)
    assert p.target == pytest.approx(0.01)
    assert p.detectable == pytest.approx(z * 0.01)
    assert p.n_needed == math.ceil(100 * z ** 2) == 785
    assert p.power_now == pytest.approx(special.ndtr(1.0 - special.ndtri(0.975)))  # 0.1685
    # half the standard error needs a quarter of the queries
    q = stats.power_analysis(se=0.005, n=100, reference=0.5, relative_change=0.02)
    assert q.n_needed == math.ceil(100 * z ** 2 / 4) == 197


def test_power_is_undefined_not_zero_when_the_standard_error_or_reference_is_zero():
    p = stats.power_analysis(se=0.0, n=10, reference=1.0)
    assert p.n_needed is None and p.power_now is None and "standard error is 0" in p.notes[0]
    q = stats.power_analysis(se=0.02, n=10, reference=0.0)
    assert q.n_needed is None and "reference mean is 0" in q.notes[0]
    with pytest.raises(InputError):
        stats.power_analysis(se=0.01, n=10, reference=0.5, power=1.2)


def test_differences_equal_up_to_rounding_count_as_a_constant_shift():
    d = (A + 0.05) - A                                   # 0.05 give or take one ulp
    assert d.max() != d.min()
    t = stats.paired_t_test(A + 0.05, A)
    assert t.infinite and t.t is None
    assert stats.cohens_dz(d) is None


# --- properties ----------------------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import settings as hsettings
from hypothesis import strategies as st


@hsettings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-8, 8), min_size=1, max_size=40))
def test_sign_flip_p_lies_in_zero_one_and_ignores_the_sign_of_every_difference(ints):
    d = np.asarray(ints, dtype=float) / 8
    p = stats.sign_flip_test(d, rng=rng(1), n_permutations=200).p
    assert 0.0 < p <= 1.0
    # the test is two-sided: mirroring every difference changes nothing
    assert stats.sign_flip_test(-d, rng=rng(1), n_permutations=200).p == p


# --- the interval rule and the mean test (issue: intervals honest at 10-36 queries) ------

def test_off_mode_counts_queries_off_the_most_common_value():
    # five zeros, then 0.1 twice, -0.2 once: the mode is 0, three queries off it
    assert stats.off_mode([0, 0, 0, 0, 0, 0.1, 0.1, -0.2]) == 3
    assert stats.off_mode([0.3, 0.3, 0.3]) == 0
    assert stats.off_mode(np.arange(40) / 40) == 39
    assert stats.nonzero([0, 0, 0.1, -0.2]) == 2


def test_t_interval_is_scipys_student_interval_by_hand_and_by_scipy():
    # d = (0.1, -0.05, 0.2, 0, 0.15): mean 0.08, sum of squared deviations 0.043,
    # sd = sqrt(0.043 / 4) = 0.103682, se = sd / sqrt(5) = 0.0463681, t_{4, 0.975} = 2.776445
    d = np.array([0.1, -0.05, 0.2, 0.0, 0.15])
    ci = stats.t_interval(d, level=0.95)
    half = 2.776445 * 0.0463681
    assert (ci.low, ci.high) == pytest.approx((0.08 - half, 0.08 + half), abs=2e-6)
    ref = sps.t.interval(0.95, 4, loc=d.mean(), scale=sps.sem(d))
    assert (ci.low, ci.high) == pytest.approx(ref, rel=1e-12)
    assert (ci.method, ci.n_resamples, ci.se) == ("t", 0, pytest.approx(sps.sem(d)))


def test_weighted_t_interval_with_equal_weights_is_the_unweighted_one():
    d = np.random.default_rng(3).normal(0, 1, 9)
    a = stats.t_interval(d)
    b = stats.t_interval(d, weights=np.full(9, 2.5))
    assert (b.low, b.high, b.se) == pytest.approx((a.low, a.high, a.se), rel=1e-12)


def test_weighted_standard_error_by_hand():
    # v = (0, 1, 1), w = (2, 1, 1): m = 2/4 = 0.5; sum w^2 (v - m)^2 = 4*0.25 + 0.25 + 0.25
    # = 1.5; se = sqrt(3/2 * 1.5) / 4 = 1.5 / 4 = 0.375
    assert stats.standard_error([0.0, 1.0, 1.0], [2.0, 1.0, 1.0]) == pytest.approx(0.375)


def test_mean_test_below_the_threshold_is_scipys_one_sample_t_test():
    d = np.array([0.1, -0.05, 0.2, 0.0, 0.15])
    t = stats.mean_test(d, rng=np.random.default_rng(0))
    ref = sps.ttest_1samp(d, 0.0)
    assert t.method == "t"
    assert (t.statistic, t.p) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-12)
    # hand value: t = 0.08 / 0.0463681 = 1.72532, two-sided p on 4 df = 0.1596
    assert t.p == pytest.approx(0.1596, abs=1e-4)


def test_mean_test_edge_cases_give_one_or_the_exact_sign_flip_value():
    assert stats.mean_test(np.zeros(7), rng=np.random.default_rng(0)).p == 1.0
    t = stats.mean_test(np.full(6, 0.05), rng=np.random.default_rng(0))
    assert (t.method, t.p, t.statistic) == ("exact-sign-flip", 2 / 2 ** 6, None)


def test_bootstrap_t_from_the_resamples_of_an_explicit_loop():
    # 40 distinct differences: the rule takes the studentized bootstrap. Same generator,
    # same indices as bootstrap_means: recompute every resample's mean and sd by hand.
    d = np.random.default_rng(11).gamma(2.0, 0.05, 40) - 0.1
    B = 500
    ci = stats.difference_interval(d, rng=np.random.default_rng(5), n_resamples=B)
    test = stats.mean_test(d, rng=np.random.default_rng(5), n_permutations=B)
    idx = np.random.default_rng(5).integers(0, 40, size=(B, 40))
    g = d[idx]
    se = d.std(ddof=1) / np.sqrt(40)
    tstar = (g.mean(1) - d.mean()) / (g.std(1, ddof=1) / np.sqrt(40))
    lo_q, hi_q = np.quantile(tstar, [0.025, 0.975])
    assert ci.method == "bootstrap-t" and stats.RULE_NOTE in ci.notes
    assert (ci.low, ci.high) == pytest.approx((d.mean() - hi_q * se, d.mean() - lo_q * se),
                                              rel=1e-9)
    t_obs = d.mean() / se
    assert test.method == "bootstrap-t"
    assert test.p == pytest.approx(((np.abs(tstar) >= abs(t_obs)).sum() + 1) / (B + 1))


def test_the_rule_switches_at_30_queries_off_the_mode():
    rng = np.random.default_rng(2)
    ties = np.concatenate([np.zeros(40), rng.normal(0, 0.1, 29)])
    more = np.concatenate([np.zeros(40), rng.normal(0, 0.1, 30)])
    assert stats.difference_interval(ties, rng=rng, n_resamples=200).method == "t"
    assert stats.difference_interval(more, rng=rng, n_resamples=200).method == "bootstrap-t"
    assert stats.difference_interval(more, rng=rng, n_resamples=200, method="bca").method \
        == "bca"
    with pytest.raises(InputError, match="unknown interval method"):
        stats.difference_interval(more, rng=rng, method="wald")


def test_weighted_bootstrap_t_with_equal_weights_is_the_unweighted_one():
    d = np.random.default_rng(4).normal(0.01, 0.1, 50)
    a = stats.difference_interval(d, rng=np.random.default_rng(1), n_resamples=300)
    b = stats.difference_interval(d, rng=np.random.default_rng(1), n_resamples=300,
                                  weights=np.full(50, 3.0))
    assert (b.low, b.high) == pytest.approx((a.low, a.high), rel=1e-9)


def test_power_is_withheld_when_the_spread_rests_on_few_nonzero_differences():
    p = stats.power_analysis(se=0.01, n=12, reference=0.5, nonzero=2, min_nonzero=10)
    assert (p.power_now, p.n_needed, p.detectable) == (None, None, None)
    assert p.notes[0] == ("the set cannot yet tell how many queries a 2% change needs: the "
                          "spread rests on 2 non-zero differences of 12 queries, fewer than "
                          "metrics.power_min_nonzero (10)")
    assert stats.power_analysis(se=0.01, n=12, reference=0.5, nonzero=10,
                                min_nonzero=10).n_needed is not None
