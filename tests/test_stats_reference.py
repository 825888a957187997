"""relgrade.evaluation.stats checked against slow reference loops and independent implementations.

The loops below redo each computation one resample (or one sign pattern) at a time with the
standard library's NormalDist, from the same seeded generator and the draw layout the module
documents; scipy.stats.bootstrap and scipy.stats.ttest_rel are
the independent implementations.
"""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats as sps

from relgrade.evaluation import stats

N01 = NormalDist()


def _quantile(sorted_x, q):
    """numpy's default quantile (linear between order statistics), written out."""
    h = (len(sorted_x) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_x) - 1)
    return sorted_x[lo] + (h - lo) * (sorted_x[hi] - sorted_x[lo])


def _slow_bootstrap(x, seed, n_resamples, level, method, weights=None):
    """One resample at a time: indices, mean, then the percentile or BCa bounds."""
    rng = np.random.default_rng(seed)
    n = len(x)
    w = [1.0] * n if weights is None else list(weights)
    means = []
    for _ in range(n_resamples):
        idx = rng.integers(0, n, size=n, dtype=np.int64)
        means.append(sum(w[i] * x[i] for i in idx) / sum(w[i] for i in idx))
    est = sum(wi * xi for wi, xi in zip(w, x)) / sum(w)
    alpha = (1 - level) / 2
    qs = [alpha, 1 - alpha]
    if method == "bca":
        below = sum(m < est for m in means) + 0.5 * sum(m == est for m in means)
        z0 = N01.inv_cdf(below / n_resamples)
        total_wx = sum(wi * xi for wi, xi in zip(w, x))
        jk = [(total_wx - w[i] * x[i]) / (sum(w) - w[i]) for i in range(n)]
        jbar = sum(jk) / n
        acc = sum((jbar - j) ** 3 for j in jk) / (6 * sum((jbar - j) ** 2 for j in jk) ** 1.5)
        qs = [N01.cdf(z0 + (z0 + z) / (1 - acc * (z0 + z))) for z in map(N01.inv_cdf, qs)]
    s = sorted(means)
    mean_of_means = sum(means) / n_resamples
    se = math.sqrt(sum((m - mean_of_means) ** 2 for m in means) / (n_resamples - 1))
    return est, _quantile(s, qs[0]), _quantile(s, qs[1]), se


DATASETS = {
    "skewed": np.random.default_rng(1).beta(0.5, 3.0, size=60),
    "binary": (np.random.default_rng(2).random(45) < 0.3).astype(float),
    "grid": np.random.default_rng(3).integers(0, 5, size=33) / 4,
}


@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_bootstrap_interval_matches_a_slow_reference_loop(name, method):
    x = DATASETS[name]
    ci = stats.bootstrap_ci(x, rng=np.random.default_rng(99), n_resamples=400, level=0.9,
                            method=method)
    est, lo, hi, se = _slow_bootstrap(list(x), 99, 400, 0.9, method)
    assert ci.method == method
    assert (ci.estimate, ci.low, ci.high, ci.se) == pytest.approx((est, lo, hi, se), rel=1e-9,
                                                                  abs=1e-12)


def test_weighted_bootstrap_matches_the_slow_loop():
    x = DATASETS["skewed"]
    w = np.random.default_rng(4).integers(1, 20, size=x.size).astype(float)
    ci = stats.bootstrap_ci(x, rng=np.random.default_rng(5), n_resamples=300, weights=w)
    ref = _slow_bootstrap(list(x), 5, 300, 0.95, "bca", weights=list(w))
    assert (ci.estimate, ci.low, ci.high, ci.se) == pytest.approx(ref, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_bootstrap_interval_equals_scipy_bootstrap_with_the_same_generator(method):
    # scipy.stats.bootstrap draws its resample indices with rng.integers(0, n, (B, n)),
    # the stream relgrade documents, so the two must agree to rounding.
    x = np.random.default_rng(7).gamma(2.0, 0.1, size=150)
    ours = stats.bootstrap_ci(x, rng=np.random.default_rng(8), n_resamples=5000,
                              method=method.lower())
    ref = sps.bootstrap((x,), np.mean, n_resamples=5000, method=method,
                        confidence_level=0.95, rng=np.random.default_rng(8))
    assert (ours.low, ours.high) == pytest.approx(
        (ref.confidence_interval.low, ref.confidence_interval.high), rel=1e-12)
    assert ours.se == pytest.approx(ref.standard_error, rel=1e-12)


def test_exact_sign_flip_matches_brute_force_enumeration():
    d = np.random.default_rng(10).normal(0.05, 0.2, size=9)
    observed = abs(d.sum())
    count = sum(abs(sum(s * x for s, x in zip(signs, d))) >= observed - 1e-12
                for signs in itertools.product((1, -1), repeat=d.size))
    flip = stats.sign_flip_test(d, rng=np.random.default_rng(0))
    assert flip.method == "exact"
    assert flip.p == count / 2 ** 9


def test_monte_carlo_sign_flip_matches_a_slow_loop_over_the_documented_bit_layout():
    d = np.random.default_rng(11).normal(0.02, 0.3, size=45)    # 45 > 20: Monte Carlo
    b_perm = 301
    rng = np.random.default_rng(12)
    observed = abs(d.sum())
    extreme = 0
    for _ in range(b_perm):
        words = rng.integers(0, 2 ** 32, size=2, dtype=np.uint32)    # ceil(45 / 32) words
        total = 0.0
        for j, x in enumerate(d):
            flipped = (int(words[j // 32]) >> (j % 32)) & 1
            total += -x if flipped else x
        extreme += abs(total) >= observed - 1e-9 * np.abs(d).sum()
    flip = stats.sign_flip_test(d, rng=np.random.default_rng(12), n_permutations=b_perm)
    assert flip.method == "monte-carlo"
    assert flip.extreme == extreme
    assert flip.p == (extreme + 1) / (b_perm + 1)


def test_monte_carlo_sign_flip_agrees_with_the_exact_p_value():
    d = np.random.default_rng(13).normal(0.1, 0.3, size=14)
    exact = stats.sign_flip_test(d, rng=np.random.default_rng(0))
    mc = stats.sign_flip_test(d, rng=np.random.default_rng(1), n_permutations=20000,
                              exact_max_n=0)
    assert exact.method == "exact" and mc.method == "monte-carlo"
    se = math.sqrt(exact.p * (1 - exact.p) / 20000)
    assert abs(mc.p - exact.p) < 4 * se + 1e-4


def test_paired_t_and_effect_size_match_scipy():
    g = np.random.default_rng(14)
    a = g.random(40)
    b = a - g.normal(0.03, 0.1, size=40)
    ref = sps.ttest_rel(a, b)
    t = stats.paired_t_test(a, b)
    assert (t.t, t.p, t.df) == pytest.approx((ref.statistic, ref.pvalue, 39), rel=1e-12)
    assert stats.cohens_dz(a - b) == pytest.approx(ref.statistic / math.sqrt(40), rel=1e-12)
