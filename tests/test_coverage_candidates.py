"""The candidate intervals of benchmarks/coverage_intervals.py for the missed small-sample
cells: the empirical-likelihood statistic and interval against hand-computed values and
statsmodels' independent implementation, the Bartlett factor by hand, the ties-as-an-atom
interval against scipy's Clopper-Pearson and t intervals, and the betting interval against
a scalar transcription of its formula."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

SIM = Path(__file__).resolve().parents[1] / "benchmarks" / "coverage_intervals.py"


@pytest.fixture(scope="module")
def ci():
    spec = importlib.util.spec_from_file_location("coverage_intervals", SIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_el_statistic_of_three_values_matches_the_hand_solved_multiplier(ci):
    # z = (-1, 0, 2): -1/(1 - lam) + 2/(1 + 2 lam) = 0 gives lam = 1/4, so
    # -2 log R(0) = 2 (log 0.75 + log 1 + log 1.5) = 2 log 1.125
    x = np.array([[-1.0, 0.0, 2.0]])
    assert ci.el_statistic(x, np.array([0.0]))[0] == pytest.approx(2 * math.log(1.125),
                                                                   abs=1e-12)
    # at the sample mean the multiplier is 0 and the statistic 0; outside the range inf
    assert ci.el_statistic(x, np.array([1 / 3]))[0] == pytest.approx(0.0, abs=1e-12)
    assert ci.el_statistic(x, np.array([2.0]))[0] == math.inf


def test_el_interval_matches_statsmodels_empirical_likelihood(ci):
    from statsmodels.emplike.descriptive import DescStatUV

    rng = np.random.default_rng(7)
    x = ci.population("skewed", rng, (4, 12))
    lo, hi = ci.el_rows(x)
    for i in range(4):
        ref = DescStatUV(x[i]).ci_mean(sig=0.05)
        assert lo[i] == pytest.approx(ref[0], abs=1e-9)
        assert hi[i] == pytest.approx(ref[1], abs=1e-9)


def test_masked_el_interval_is_the_interval_of_the_kept_values(ci):
    rng = np.random.default_rng(3)
    kept = ci.population("skewed", rng, (1, 7))
    x = np.concatenate([kept, np.zeros((1, 5))], 1)
    mask = np.arange(12)[None] < 7
    assert np.allclose(ci.el_rows(x, mask=mask), ci.el_rows(kept), atol=1e-12)


def test_bartlett_factor_of_three_values_by_hand(ci):
    # deviations (-4, -1, 5)/3: mu2 = 14/9, mu3 = 20/27, mu4 = 98/27;
    # a = mu4/(2 mu2^2) - mu3^2/(3 mu2^3) = 0.75 - 400/8232; factor 1 + a/3
    x = np.array([[-1.0, 0.0, 2.0]])
    assert ci.bartlett_factor(x)[0] == pytest.approx(1 + (0.75 - 400 / 8232) / 3, abs=1e-12)


def test_atom_interval_is_the_product_of_clopper_pearson_and_t_at_half_alpha(ci):
    x = np.array([[0.0, 0.0, 0.1, 0.3, 0.0, -0.05]])
    lo, hi = ci.atom_rows(x, "t")
    nz = np.array([0.1, 0.3, -0.05])
    p_lo, p_hi = sps.binomtest(3, 6).proportion_ci(0.975, "exact")
    mu_lo, mu_hi = sps.t.interval(0.975, 2, nz.mean(), sps.sem(nz))
    assert mu_lo < 0 < mu_hi
    # mu's interval straddles 0: the widest p scales both ends
    assert lo[0] == pytest.approx(p_hi * mu_lo, abs=1e-12)
    assert hi[0] == pytest.approx(p_hi * mu_hi, abs=1e-12)
    # every difference tied: the non-zero mean is unknown within the bound, p within CP
    lo0, hi0 = ci.atom_rows(np.zeros((1, 6)), "t")
    p0 = sps.binomtest(0, 6).proportion_ci(0.975, "exact").high
    assert (lo0[0], hi0[0]) == pytest.approx((-p0, p0), abs=1e-12)


def _betting_scalar(x, alpha=0.05, c=0.5):
    """Waudby-Smith & Ramdas (2023) hedged capital, transcribed term by term."""
    y = [(v + 1) / 2 for v in x]
    n = len(y)
    lams, s_sum, y_sum, sig_prev = [], 0.0, 0.0, 0.25
    for i, yi in enumerate(y, start=1):
        lams.append(math.sqrt(2 * math.log(2 / alpha) / (n * sig_prev)))
        y_sum += yi
        mu_i = (0.5 + y_sum) / (i + 1)
        s_sum += (yi - mu_i) ** 2
        sig_prev = (0.25 + s_sum) / (i + 1)

    def excess(m):
        kp = km = 1.0
        for yi, lam in zip(y, lams):
            kp *= 1 + min(lam, c / m) * (yi - m)
            km *= 1 - min(lam, c / (1 - m)) * (yi - m)
        return math.log(max(kp, km) / 2) - math.log(1 / alpha)

    ybar = sum(y) / n
    lo = optimize.brentq(excess, 1e-12, ybar)
    hi = optimize.brentq(excess, ybar, 1 - 1e-12)
    return 2 * lo - 1, 2 * hi - 1


def test_betting_interval_matches_a_scalar_transcription_of_the_hedged_capital(ci):
    rng = np.random.default_rng(11)
    x = ci.population("skewed, 50% ties", rng, (3, 12)) + 0.04
    lo, hi = ci.betting_rows(x)
    for i in range(3):
        ref = _betting_scalar(list(x[i]))
        assert (lo[i], hi[i]) == pytest.approx(ref, abs=1e-9)
        assert lo[i] < x[i].mean() < hi[i]


def test_atom_el_takes_the_corrected_el_interval_of_the_non_zero_values(ci):
    nz = np.array([0.1, 0.3, -0.05, 0.02])
    x = np.array([[0.0, 0.1, 0.0, 0.3, -0.05, 0.0, 0.02]])
    lo, hi = ci.atom_rows(x, "el")
    mu_lo, mu_hi = ci.el_rows(nz[None], 0.975, bartlett=True)
    p_lo, p_hi = sps.binomtest(4, 7).proportion_ci(0.975, "exact")
    assert mu_lo[0] < 0 < mu_hi[0]
    assert (lo[0], hi[0]) == pytest.approx((p_hi * mu_lo[0], p_hi * mu_hi[0]), abs=1e-12)
    # one non-zero value: the non-zero mean is only known to lie in [-1, 1]
    one = np.array([[0.0, 0.0, 0.2, 0.0]])
    p1 = sps.binomtest(1, 4).proportion_ci(0.975, "exact").high
    lo1, hi1 = ci.atom_rows(one, "el")
    assert (lo1[0], hi1[0]) == pytest.approx((-p1, p1), abs=1e-12)
