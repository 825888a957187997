"""Anytime-valid confidence sequences and the stopping rule (relgrade.evaluation.anytime):
hand-computed capital on tiny sequences (Waudby-Smith & Ramdas 2024's hedged, predictable
plug-in betting), an independent scalar implementation of the without-replacement capital,
Holm against the hand arithmetic, and the errors on bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import anytime

ALPHA = 0.05


def bet(t: int, s2_prev: float) -> float:
    """The predictable plug-in bet of WSR 2024, eq. 26, written out."""
    return math.sqrt(2 * math.log(2 / ALPHA) / (s2_prev * t * math.log(1 + t)))


def test_hedged_capital_on_two_values_matches_the_arithmetic():
    # values 0.2, 0.3 on [0, 1], null mean 0.15, independent draws; c = 3/4 (WSR 2024).
    c = anytime.TRUNCATION
    assert c == 0.75
    # t = 1: s2_0 = 1/4; the + bet is truncated at c/m = 0.75/0.15 = 5, the - bet at
    # c/(1-m) = 0.75/0.85.
    lam1 = bet(1, 0.25)
    assert lam1 > 5
    kp1 = 1 + 5 * (0.2 - 0.15)
    km1 = 1 - (0.75 / 0.85) * (0.2 - 0.15)
    # t = 2: xbar_1 = (1/2 + 0.2) / 2 = 0.35, s2_1 = (1/4 + (0.2 - 0.35)^2) / 2
    s2_1 = (0.25 + 0.15 ** 2) / 2
    lam2 = bet(2, s2_1)
    assert lam2 < 5                                  # the + bet is not truncated now
    kp2 = kp1 * (1 + lam2 * (0.3 - 0.15))
    km2 = km1 * (1 - (0.75 / 0.85) * (0.3 - 0.15))
    expected = np.log([(kp1 + km1) / 2, (kp2 + km2) / 2])
    got = anytime.log_capital(np.array([0.2, 0.3]), np.array([0.15]), alpha=ALPHA,
                              population=None)[0]
    assert got == pytest.approx(expected, abs=1e-12)
    cs = anytime.confidence_sequence([0.2, 0.3], lower_bound=0.0, upper_bound=1.0,
                                     null=0.15)
    # p_t = 1 / max_{s<=t} K_s
    assert cs.p_value == pytest.approx([1 / max(1.0, (kp1 + km1) / 2),
                                        1 / max((kp1 + km1) / 2, (kp2 + km2) / 2)], abs=1e-12)


def test_a_difference_on_minus_one_to_one_is_rescaled_before_betting():
    # differences 0.8, 0.8 on [-1, 1] are 0.9, 0.9 on [0, 1]; the null 0 is m = 0.5, where
    # both bets are truncated at c/0.5 = 1.5: K+ = (1 + 1.5 * 0.4)^t = 1.6^t, K- = 0.4^t.
    cs = anytime.confidence_sequence([0.8, 0.8], lower_bound=-1.0, upper_bound=1.0)
    k1 = (1.6 + 0.4) / 2
    k2 = (1.6 ** 2 + 0.4 ** 2) / 2
    assert cs.p_value == pytest.approx([1 / k1, 1 / k2], abs=1e-12)
    assert cs.mean == pytest.approx([0.8, 0.8])


def _scalar_log_capital(x, m, alpha, population):
    """The without-replacement hedged capital, one candidate and one step at a time."""
    kp = km = 1.0
    out = []
    s = 0.0
    s2_sum = 0.0
    x_sum = 0.0
    dead = False
    for t, xt in enumerate(x, start=1):
        s2_prev = 0.25 if t == 1 else (0.25 + s2_sum) / t
        lam = math.sqrt(2 * math.log(2 / alpha) / (s2_prev * t * math.log(1 + t)))
        mu = m if population is None else (population * m - s) / (population - t + 1)
        if mu < 0 or mu > 1:
            dead = True
        if dead:
            out.append(math.inf)
        else:
            lp = lam if mu == 0 else min(lam, 0.75 / mu)
            lm = lam if mu == 1 else min(lam, 0.75 / (1 - mu))
            kp *= 1 + lp * (xt - mu)
            km *= 1 - lm * (xt - mu)
            out.append(math.log((kp + km) / 2))
        s += xt
        x_sum += xt
        xbar = (0.5 + x_sum) / (t + 1)
        s2_sum += (xt - xbar) ** 2
    return out


@pytest.mark.parametrize("population", [None, 40, 25])
def test_vectorised_capital_matches_a_scalar_loop(population):
    rng = np.random.default_rng(3)
    x = rng.beta(2, 3, size=25)
    ms = np.array([0.0, 0.05, 0.3, 0.4, 0.5, 0.77, 1.0])
    got = anytime.log_capital(x, ms, alpha=0.1, population=population)
    for i, m in enumerate(ms):
        want = _scalar_log_capital(x, m, 0.1, population)
        assert got[i] == pytest.approx(want, rel=1e-10, abs=1e-10)


def test_sequence_shrinks_and_p_values_fall_over_time():
    rng = np.random.default_rng(7)
    d = np.clip(rng.normal(0.15, 0.2, size=120), -1, 1)
    cs = anytime.confidence_sequence(d, lower_bound=-1.0, upper_bound=1.0, population=400)
    assert np.all(np.diff(cs.low) >= 0) and np.all(np.diff(cs.high) <= 0)
    assert np.all(np.diff(cs.p_value) <= 0)
    assert np.all(cs.low <= cs.high)
    # the CS excludes 0 exactly when the p-value is below alpha (up to the grid's padding)
    assert cs.low[-1] > 0 and cs.p_value[-1] <= 0.05


def test_the_whole_population_pins_the_mean():
    # sampling all N = 6 values without replacement: the logical bounds meet at the mean.
    v = [0.1, -0.3, 0.5, 0.0, 0.2, 0.4]
    cs = anytime.confidence_sequence(v, lower_bound=-1.0, upper_bound=1.0, population=6)
    assert cs.low[-1] == pytest.approx(np.mean(v)) and cs.high[-1] == pytest.approx(np.mean(v))


def test_coverage_at_every_time_holds_in_a_small_simulation():
    # 200 sequences of 60 draws without replacement from one population of 300 differences;
    # the CS misses the population mean at some time in at most alpha of them (Ville), with
    # room for simulation noise (binomial sd at 5%: 1.5 points).
    rng = np.random.default_rng(11)
    pop = np.clip(rng.normal(0.05, 0.3, size=300), -1, 1)
    mu = pop.mean()
    miss = 0
    for _ in range(200):
        d = rng.permutation(pop)[:60]
        cs = anytime.confidence_sequence(d, lower_bound=-1, upper_bound=1, population=300,
                                         grid=401)
        miss += bool(np.any((cs.low > mu) | (cs.high < mu)))
    assert miss / 200 <= 0.05


def test_holm_over_anytime_p_values_matches_the_hand_arithmetic():
    # sorted 0.01, 0.04, 0.30 against 0.05/3, 0.05/2, 0.05: the first is rejected, the
    # second is not (0.04 > 0.025), so the third is not. Adjusted: 3*0.01, 2*0.04, 0.30.
    s = anytime.settle([0.04, 0.01, 0.30], [-1, -1, -0.02], [1, 1, 0.03], alpha=0.05,
                       margin=0.05, t=10)
    assert s.p_holm == pytest.approx([0.08, 0.03, 0.30])
    assert s.significant.tolist() == [False, True, False]
    assert s.equivalent.tolist() == [False, False, True]
    assert not s.settled
    s = anytime.settle([0.004, 0.01, 0.30], [-1, -1, -0.02], [1, 1, 0.03], alpha=0.05,
                       margin=0.05, t=10)
    assert s.significant.tolist() == [True, True, False] and s.settled


def test_a_zero_margin_settles_only_by_significance():
    s = anytime.settle([0.5], [-0.001], [0.001], alpha=0.05, margin=0.0, t=3)
    assert not s.equivalent[0] and not s.settled


def test_the_rule_stops_at_the_first_batch_end_where_all_settle():
    # one comparison whose differences are all 0.8: the capital at the null 0 grows by
    # (1.6^t + 0.4^t) / 2 and passes 1/alpha = 20 at t = 8 (13.4 at t = 7, 21.5 at 8),
    # so batches of 3 look at 3, 6, 9 and stop at 9; batches of 8 stop at 8.
    k = [(1.6 ** t + 0.4 ** t) / 2 for t in range(1, 10)]
    assert k[6] < 20 <= k[7]
    r = anytime.run_stop([[0.8] * 30], level=0.95, margin=0.0, batch=3, population=None)
    assert (r.stopped_at, r.settled, r.sample) == (9, True, 30)
    r = anytime.run_stop([[0.8] * 30], level=0.95, margin=0.0, batch=8, population=None)
    assert r.stopped_at == 8


def test_an_unsettled_family_uses_the_whole_sample():
    r = anytime.run_stop([[0.0, 0.1, -0.1, 0.05, -0.05, 0.0]], level=0.95, margin=0.0,
                         batch=2, population=None)
    assert (r.stopped_at, r.settled) == (6, False)


def test_batch_ends_cover_the_sample():
    assert anytime.batch_ends(10, 4) == [4, 8, 10]
    assert anytime.batch_ends(8, 4) == [4, 8]
    assert anytime.batch_ends(3, 5) == [3]


@pytest.mark.parametrize("call, rule", [
    (lambda: anytime.batch_ends(10, 0), "stopping batch size >= 1"),
    (lambda: anytime.confidence_sequence([0.5, 1.2], lower_bound=-1, upper_bound=1),
     "values within [-1, 1]"),
    (lambda: anytime.confidence_sequence([], lower_bound=-1, upper_bound=1),
     "non-empty"),
    (lambda: anytime.confidence_sequence([0.1], lower_bound=-1, upper_bound=1, level=1.0),
     "level in (0, 1)"),
    (lambda: anytime.confidence_sequence([0.1, 0.2], lower_bound=-1, upper_bound=1,
                                         population=1), "population at least"),
    (lambda: anytime.confidence_sequence([float("nan")], lower_bound=-1, upper_bound=1),
     "finite values"),
    (lambda: anytime.settle([0.1], [0], [0], alpha=0.05, margin=-0.1, t=1),
     "indifference margin >= 0"),
])
def test_bad_input_is_refused_with_the_rule(call, rule):
    with pytest.raises(InputError, match=None) as e:
        call()
    assert rule in str(e.value)
