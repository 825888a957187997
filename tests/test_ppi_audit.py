"""Pool arrays and nDCG@k (relgrade.evaluation.pooled) and the judge audit
(relgrade.evaluation.judge_audit): hand-computed values, scipy's Kendall tau, flags."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import judge_audit as ja
from relgrade.evaluation.pooled import grade_matrix, ndcg_at_k, pool_arrays

NAN = float("nan")


def test_ndcg_counts_unjudged_as_zero_and_ideal_from_every_graded_column():
    # One query, pool columns graded (2, 1, NaN, 0); the arm ranks columns 2, 1, 0.
    g = np.array([[2.0, 1.0, NAN, 0.0]])
    r = np.array([[[2, 1, 0]]])
    # gains at ranks 1..3: 0 (unjudged), 1, 3 -> DCG = 1/log2(3) + 3/log2(4)
    # ideal gains 3, 1, 0 -> IDCG = 3/log2(2) + 1/log2(3)
    expected = (1 / np.log2(3) + 3 / 2) / (3 + 1 / np.log2(3))
    assert ndcg_at_k(g, r, k=3)[0, 0] == pytest.approx(expected, abs=1e-15)


def test_ndcg_of_a_short_list_and_of_a_query_without_relevant_chunk():
    g = np.array([[1.0, 0.0, NAN], [0.0, 0.0, NAN]])
    r = np.array([[[0, -1], [0, 1]]])          # query 0: only rank 1 filled
    out = ndcg_at_k(g, r, k=2)
    assert out[0, 0] == 1.0                     # the one relevant chunk at rank 1
    assert out[0, 1] == 0.0                     # nothing relevant: 0 by the module's rule


def test_pool_arrays_and_grade_matrix_from_tables():
    runs = pd.DataFrame({"arm": ["b", "b", "a", "a", "a"],
                         "query_id": ["q1", "q1", "q1", "q1", "q2"],
                         "chunk_id": ["x", "y", "y", "z", "x"],
                         "rank": [1, 2, 1, 2, 1], "score": [2.0, 1.0, 2.0, 1.0, 1.0]})
    pool = pool_arrays(runs, k=2)
    assert pool.arms == ("a", "b") and pool.query_ids == ("q1", "q2")
    # arm a comes first: q1's columns are y (0), z (1), then b adds x (2)
    assert pool.chunk_ids == (("y", "z", "x"), ("x",))
    assert pool.ranked.tolist() == [[[0, 1], [0, -1]], [[2, 0], [-1, -1]]]
    key = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["x", "y", "x"],
                        "grade": [2, 0, 1]})
    gm = grade_matrix(pool, key)
    assert np.array_equal(gm, np.array([[0.0, NAN, 2.0], [1.0, NAN, NAN]]), equal_nan=True)


@pytest.mark.parametrize("seed", range(5))
def test_kendall_tau_b_equals_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 4, 9).astype(float), rng.integers(0, 4, 9).astype(float)
    assert ja.kendall_tau_b(x, y) == pytest.approx(sps.kendalltau(x, y).statistic, abs=1e-12)
    many = rng.normal(size=(4, 7))
    other = many + rng.normal(size=(4, 7))
    want = [sps.kendalltau(a, b).statistic for a, b in zip(many, other)]
    assert ja.kendall_tau_b(many, other) == pytest.approx(want, abs=1e-12)


def test_kendall_tau_b_is_undefined_when_every_item_is_tied():
    assert math.isnan(ja.kendall_tau_b([1, 1, 1], [1, 2, 3]))


def _two_arm_case():
    # 3 queries, pool of 3 columns; human and model grades per column.
    human = np.array([[0, 1, 2], [1, 1, 0], [2, 2, 2]], dtype=float)
    model = np.array([[1, 1, 2], [2, 2, 0], [2, 2, 1]], dtype=float)
    # arm 0 takes columns 0, 1 everywhere; arm 1 takes column 2, then 1.
    ranked = np.array([[[0, 1]] * 3, [[2, 1]] * 3])
    return human, model, ranked


def test_leniency_is_the_pair_mean_with_a_query_clustered_error():
    human, model, ranked = _two_arm_case()
    arm0, arm1 = ja.arm_leniency(human, model, ranked, sample=[0, 1, 2], k=2)
    # arm 0: differences q0 (1, 0), q1 (1, 1), q2 (0, 0): s = (1, 2, 0), m = (2, 2, 2)
    # R = 3 / 6 = 0.5; residuals s - R m = (0, 1, -1); se^2 = 3/2 * 2 / 36
    assert arm0.mean == 0.5 and arm0.pairs == 6 and arm0.queries == 3
    assert arm0.se == pytest.approx(math.sqrt(1.5 * 2 / 36), abs=1e-15)
    # arm 1: q0 (0, 0), q1 (0, 1), q2 (-1, 0): s = (0, 1, -1), R = 0, se^2 = 3/2 * 2 / 36
    assert arm1.mean == 0.0
    assert arm1.se == pytest.approx(math.sqrt(1.5 * 2 / 36), abs=1e-15)
    z = sps.norm.ppf(0.975)
    assert (arm0.low, arm0.high) == pytest.approx((0.5 - z * arm0.se, 0.5 + z * arm0.se))


def test_audit_flags_spread_and_family_affinity_of_the_most_lenient_arm():
    human, model, ranked = _two_arm_case()
    audit = ja.judge_audit(human, model, ranked, sample=[0, 1, 2], arms=["llm", "bm25"],
                           families={"llm": "acme", "bm25": "lexical"}, model_family="acme",
                           k=2, rng=np.random.default_rng(0), n_resamples=50)
    assert audit.spread == 0.5 and audit.spread_flag          # 0.5 - 0.0 > 0.15
    assert audit.affinity_arms == ("llm",)
    assert len(audit.flags) == 2 and "family affinity: arm llm" in audit.flags[1]
    quiet = ja.judge_audit(human, model, ranked, sample=[0, 1, 2], arms=["llm", "bm25"],
                           families={"llm": "acme", "bm25": "lexical"}, model_family="lexical",
                           k=2, max_spread=0.6, rng=np.random.default_rng(0), n_resamples=50)
    assert quiet.flags == () and quiet.affinity_arms == ()    # bm25 is not the most lenient
    assert set(audit.to_dict()) == {"leniency", "spread", "max_spread", "spread_flag",
                                    "affinity_arms", "order", "flags"}


def test_order_agreement_of_identical_keys_is_perfect_and_reproducible():
    rng = np.random.default_rng(4)
    v = rng.uniform(0, 1, (4, 12)) + np.arange(4)[:, None]
    a = ja.order_agreement(v, v.copy(), rng=np.random.default_rng(9), n_resamples=200)
    b = ja.order_agreement(v, v.copy(), rng=np.random.default_rng(9), n_resamples=200)
    assert [s.to_dict() for s in a] == [s.to_dict() for s in b]
    tau, top, close = a
    assert (tau.value, tau.low, tau.high) == (1.0, 1.0, 1.0)
    assert top.arms == ("2", "3") and top.pairs == 1       # the 2 best arms by human mean
    assert close.value is None and close.pairs == 0       # means 1 apart: no close pair


def test_close_pair_agreement_counts_sign_matches_on_close_pairs():
    # Human means 0.50, 0.51, 0.80; model means 0.52, 0.50, 0.90 (two queries, equal values).
    human = np.array([[0.50, 0.50], [0.51, 0.51], [0.80, 0.80]])
    model = np.array([[0.52, 0.52], [0.50, 0.50], [0.90, 0.90]])
    *_, close = ja.order_agreement(human, model, rng=np.random.default_rng(1), n_resamples=20)
    # only arms 0 and 1 are within 0.02 under the human key; signs: human -, model +
    assert close.pairs == 1 and close.value == 0.0 and close.arms == ("0", "1")


def test_audit_rejects_a_sample_outside_the_pool():
    human, model, ranked = _two_arm_case()
    with pytest.raises(InputError, match="distinct queries of the pool"):
        ja.arm_leniency(human, model, ranked, sample=[0, 5], k=2)
