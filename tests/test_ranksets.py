"""Rank-sets (relgrade.evaluation.ranksets): hand-computed max-t intervals and rank counts,
exact ranks for separated arms, the full range for identical ones, PPI++ estimates equal to
the jackknife interval's, seeded reproducibility and the errors on bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import ppi, ranksets

# d* - d for a pair of two arms on four resamples: -1/4, 1/4, -1/8, 1/8 (exact in binary)
# se (ddof 1) = sqrt((2/16 + 2/64) / 3) = sqrt(5/96)
# |d* - d| / se = (1/4) / se (twice) and (1/8) / se (twice); the 0.95 quantile ("higher")
# is (1/4) / se = sqrt(6/5), so the half-width is 1/4
DEV = np.array([-0.25, 0.25, -0.125, 0.125])
CRIT = math.sqrt(6 / 5)


def _boot(est0: float) -> np.ndarray:
    return np.column_stack([est0 + DEV, np.zeros(4)])


def test_the_max_t_half_width_on_two_arms_matches_the_arithmetic():
    r = ranksets.from_bootstrap([1.0, 0.0], _boot(1.0))
    assert r.critical == pytest.approx(CRIT, abs=1e-12)
    # interval of mu_0 - mu_1 = [0.75, 1.25] > 0: arm 0 is surely better
    assert r.better.tolist() == [[False, True], [False, False]]
    assert (r.rank_low.tolist(), r.rank_high.tolist()) == ([1, 2], [1, 2])


def test_a_difference_inside_the_half_width_leaves_both_arms_at_ranks_one_to_two():
    # interval of mu_0 - mu_1 = [0.1875 - 0.25, 0.1875 + 0.25] holds 0
    r = ranksets.from_bootstrap([0.1875, 0.0], _boot(0.1875))
    assert not r.better.any()
    assert (r.rank_low.tolist(), r.rank_high.tolist()) == ([1, 1], [2, 2])
    assert r.tied_groups() == [[0, 1]]


def test_lower_is_better_reverses_the_ranks():
    r = ranksets.from_bootstrap([1.0, 0.0], _boot(1.0), higher_is_better=False)
    assert (r.rank_low.tolist(), r.rank_high.tolist()) == ([2, 1], [2, 1])
    assert r.tied_groups() == [[1], [0]]


def test_a_chain_of_ties_gives_overlapping_rank_sets():
    # three arms at 0.375, 0.1875, 0.0; arms 0 and 2 move together on every resample (by
    # DEV), arm 1 stays: pairs (0, 1) and (1, 2) deviate by +/-DEV (half-width 0.25), so
    # 0 vs 1 and 1 vs 2: [-0.0625, 0.4375] hold 0; pair (0, 2) never moves (se 0) and
    # differs by 0.375: arm 0 is surely better than arm 2
    est = np.array([0.375, 0.1875, 0.0])
    boot = est + np.column_stack([DEV, np.zeros(4), DEV])
    r = ranksets.from_bootstrap(est, boot)
    assert r.critical == pytest.approx(CRIT, abs=1e-12)
    assert r.better.tolist() == [[False, False, True], [False, False, False],
                                 [False, False, False]]
    assert r.rank_low.tolist() == [1, 1, 2]
    assert r.rank_high.tolist() == [2, 3, 3]
    assert r.tied_groups() == [[0, 1, 2]]


def test_three_clearly_separated_arms_get_their_exact_ranks():
    rng = np.random.default_rng(1)
    v = np.array([0.8, 0.5, 0.2])[:, None] + rng.normal(0, 0.05, (3, 50))
    r = ranksets.rank_sets(v[[1, 0, 2]], rng=np.random.default_rng(7), n_resamples=500)
    assert r.rank_low.tolist() == r.rank_high.tolist() == [2, 1, 3]
    assert r.tied_groups() == [[1], [0], [2]]
    assert r.to_dict(["b", "a", "c"])["tied_groups"] == [["a"], ["b"], ["c"]]


def test_identical_arms_span_every_rank():
    rng = np.random.default_rng(2)
    row = rng.uniform(0, 1, 40)
    r = ranksets.rank_sets(np.tile(row, (3, 1)), rng=np.random.default_rng(0),
                           n_resamples=200)
    assert r.rank_low.tolist() == [1, 1, 1] and r.rank_high.tolist() == [3, 3, 3]
    assert r.critical == 0.0 and r.tied_groups() == [[0, 1, 2]]


def test_two_noisy_equal_arms_and_a_clearly_worse_one():
    rng = np.random.default_rng(3)
    v = np.vstack([rng.uniform(0.5, 1.0, (2, 60)), rng.uniform(0.0, 0.1, (1, 60))])
    r = ranksets.rank_sets(v, rng=np.random.default_rng(4), n_resamples=500)
    assert r.rank_low.tolist() == [1, 1, 3] and r.rank_high.tolist() == [2, 2, 3]
    d = r.to_dict(["x", "y", "z"])
    assert d["arms"]["z"] == {"estimate": pytest.approx(v[2].mean(), abs=1e-15),
                              "rank_low": 3, "rank_high": 3}
    assert d["n_resamples"] == 500 and d["level"] == 0.95


def test_the_same_seed_gives_the_same_sets_and_the_critical_value_is_its_quantile():
    rng = np.random.default_rng(5)
    v = rng.normal(0, 1, (4, 30)) + np.array([[0.0], [0.3], [0.6], [0.9]])
    a = ranksets.rank_sets(v, rng=np.random.default_rng(11), n_resamples=300)
    b = ranksets.rank_sets(v, rng=np.random.default_rng(11), n_resamples=300)
    assert a.critical == b.critical and (a.better == b.better).all()
    # the same resamples drawn by hand, the max-t statistic and its 95% quantile
    idx = np.random.default_rng(11).integers(0, 30, size=(300, 30))
    boot = v[:, idx].mean(axis=2).T
    est = v.mean(axis=1)
    t = []
    for i in range(4):
        for j in range(i + 1, 4):
            d = boot[:, i] - boot[:, j]
            t.append(np.abs(d - (est[i] - est[j])) / d.std(ddof=1))
    assert a.critical == pytest.approx(np.sort(np.max(t, axis=0))[math.ceil(0.95 * 299)],
                                       abs=1e-12)


def test_traffic_weights_weight_every_mean_and_unit_weights_change_nothing():
    rng = np.random.default_rng(9)
    v = rng.uniform(0, 1, (3, 25)) + np.array([[0.2], [0.0], [0.1]])
    w = rng.uniform(0.5, 2.0, 25)
    r = ranksets.rank_sets(v, rng=np.random.default_rng(3), n_resamples=200, weights=w)
    assert r.estimate == pytest.approx((v * w).sum(axis=1) / w.sum(), abs=1e-15)
    plain = ranksets.rank_sets(v, rng=np.random.default_rng(3), n_resamples=200)
    ones = ranksets.rank_sets(v, rng=np.random.default_rng(3), n_resamples=200,
                              weights=np.ones(25))
    assert ones.critical == pytest.approx(plain.critical, abs=1e-12)
    assert ones.estimate == pytest.approx(plain.estimate, abs=1e-15)
    with pytest.raises(InputError, match="positive finite numbers, one per query"):
        ranksets.rank_sets(v, rng=np.random.default_rng(3), weights=np.ones(24))


def test_ppi_rank_sets_estimate_with_the_arms_shared_lambda():
    rng = np.random.default_rng(6)
    k, n, big_n = 4, 20, 200
    f = np.array([[0.8], [0.6], [0.4], [0.2]]) + rng.normal(0, 0.1, (k, big_n))
    y = f[:, :n] - 0.1 + rng.normal(0, 0.05, (k, n))       # a lenient model, tracking
    r = ranksets.ppi_rank_sets(y, f[:, :n], f, rng=np.random.default_rng(1), n_resamples=400)
    theta, _, _ = ppi.jackknife_rows(y, f[:, :n], f)
    assert r.estimate == pytest.approx(theta, abs=1e-15)
    assert r.rank_low.tolist() == r.rank_high.tolist() == [1, 2, 3, 4]


def test_ppi_rank_sets_are_narrower_than_human_only_when_the_model_tracks_people():
    rng = np.random.default_rng(8)
    k, n, big_n = 5, 15, 300
    f = np.linspace(0.6, 0.4, k)[:, None] + rng.normal(0, 0.15, (k, big_n))
    y = f[:, :n] + rng.normal(0, 0.02, (k, n))
    p = ranksets.ppi_rank_sets(y, f[:, :n], f, rng=np.random.default_rng(2), n_resamples=500)
    h = ranksets.rank_sets(y, rng=np.random.default_rng(2), n_resamples=500)
    size = lambda r: (r.rank_high - r.rank_low + 1).sum()  # noqa: E731
    assert size(p) < size(h)


@pytest.mark.parametrize("call, message", [
    (lambda: ranksets.rank_sets([[0.1, np.nan], [0.2, 0.3]], rng=np.random.default_rng(0)),
     "must be finite"),
    (lambda: ranksets.rank_sets([0.1, 0.2], rng=np.random.default_rng(0)), "shape"),
    (lambda: ranksets.rank_sets([[0.1], [0.2]], rng=np.random.default_rng(0)),
     "at least 2 queries"),
    (lambda: ranksets.rank_sets([[0.1, 0.2]], rng=np.random.default_rng(0), level=1.0),
     "level must lie in"),
    (lambda: ranksets.rank_sets([[0.1, 0.2]], rng=np.random.default_rng(0), n_resamples=50),
     "at least 100 bootstrap"),
    (lambda: ranksets.ppi_rank_sets([[0.1, 0.2, 0.3]], [[0.1, 0.2]], [[0.1, 0.2, 0.3]],
                                    rng=np.random.default_rng(0)), "at least 3 queries"),
    (lambda: ranksets.ppi_rank_sets([[0.1, 0.2, 0.3]], [[0.1, 0.2, 0.3, 0.4]],
                                    [[0.1, 0.2, 0.3, 0.4]], rng=np.random.default_rng(0)),
     "shapes"),
    (lambda: ranksets.from_bootstrap([0.1, 0.2], np.zeros((5, 3))), "resamples, arms"),
])
def test_bad_input_is_refused_with_the_rule(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_a_long_per_query_table_is_ranked_arm_by_arm_on_one_measure():
    import pandas as pd

    rng = np.random.default_rng(12)
    v = np.array([[0.2], [0.9], [0.5]]) + rng.normal(0, 0.02, (3, 30))
    rows = [{"arm": arm, "query_id": f"q{j:02d}", "measure": m,
             "value": float(v[i, j]) if m == "nDCG@10" else 1.0 - float(v[i, j])}
            for i, arm in enumerate(["c", "a", "b"]) for j in range(30)
            for m in ("nDCG@10", "other")]
    table = pd.DataFrame(rows).sample(frac=1.0, random_state=0)   # order does not matter
    d = ranksets.table_rank_sets(table, measure="nDCG@10", rng=np.random.default_rng(1),
                                 n_resamples=300)
    # arms sorted: a (0.9), b (0.5), c (0.2)
    direct = ranksets.rank_sets(v[[1, 2, 0]], rng=np.random.default_rng(1), n_resamples=300)
    assert d["critical"] == pytest.approx(direct.critical, abs=1e-12)
    assert {a: (r["rank_low"], r["rank_high"]) for a, r in d["arms"].items()} == {
        "a": (1, 1), "b": (2, 2), "c": (3, 3)}
    assert d["tied_groups"] == [["a"], ["b"], ["c"]]
    assert (d["measure"], d["queries"], d["method"]) == ("nDCG@10", 30, ranksets.METHOD)
    with pytest.raises(InputError, match="per-query values missing"):
        ranksets.table_rank_sets(table[~((table["arm"] == "b") & (table["query_id"] == "q03"))],
                                 measure="nDCG@10", rng=np.random.default_rng(1))
    with pytest.raises(InputError, match="a query has no traffic weight"):
        ranksets.table_rank_sets(table, measure="nDCG@10", rng=np.random.default_rng(1),
                                 weights={"q00": 1.0})
