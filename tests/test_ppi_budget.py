"""The judging-budget curve (relgrade.evaluation.budget): bandit orders worked by hand, the
full budget reproduces the full-judgment decision, cost arithmetic, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import budget

# One query, pool columns 0..4; relevant: 0, 3, 4. Arm 0 ranks 0, 1, 2; arm 1 ranks 3, 4, 0.
GRADES = np.array([[2.0, 0.0, 0.0, 1.0, 1.0]])
RANKED = np.array([[[0, 1, 2]], [[3, 4, 0]]])


def test_maxmean_order_worked_by_hand():
    # both arms at (0+1)/(0+2) = .5, tie to arm 0: judge 0 (relevant) -> arm 0 at 2/3
    # arm 0: judge 1 (not) -> 2/4 = .5, tie with arm 1 at .5, arm 0 again: judge 2 -> 2/5
    # arm 1 (.5): judge 3 (relevant) -> 2/3; judge 4 -> 3/4; its next, 0, is judged: done
    order = budget.bandit_order(GRADES, RANKED, method="maxmean", k=3)
    assert order.tolist() == [[0, 1, 2, 3, 4]]


def test_move_to_front_order_worked_by_hand():
    # priorities (0, 0): arm 0 judges 0 (relevant, stays 0), then 1 (not: -1)
    # arm 1 (0) judges 3, 4 (relevant), its 0 is judged: exhausted; arm 0 judges 2
    order = budget.bandit_order(GRADES, RANKED, method="mtf", k=3)
    assert order.tolist() == [[0, 1, 3, 4, 2]]


def _experiment(seed=0, n_q=60, n_arms=4, width=12, depth=5):
    rng = np.random.default_rng(seed)
    human = rng.choice([0.0, 1.0, 2.0], p=[.6, .25, .15], size=(n_q, width))
    model = np.clip(human + rng.choice([-1, 0, 1], p=[.1, .6, .3], size=human.shape), 0, 2)
    ranked = np.stack([np.stack([rng.choice(width, depth, replace=False) for _ in range(n_q)])
                       for _ in range(n_arms)])
    return human, model, ranked


def test_full_budget_reproduces_the_full_judgment_decision():
    human, model, ranked = _experiment()
    df = budget.budget_curve(human, ranked, model_grades=model, fractions=[1.0], k=5,
                             rng=np.random.default_rng(3), strategies=["uniform", "maxmean",
                                                                        "mtf"])
    assert df["kendall_tau"].tolist() == [1.0, 1.0, 1.0]
    assert df["top_half_tau"].tolist() == [1.0, 1.0, 1.0]
    assert df["verdicts_preserved"].tolist() == [1.0, 1.0, 1.0]
    assert df["judged_fraction"].tolist() == [1.0, 1.0, 1.0]


def test_annotator_hours_are_judgments_times_seconds_over_3600():
    human, model, ranked = _experiment()
    df = budget.budget_curve(human, ranked, model_grades=model, fractions=[0.1, 0.5], k=5,
                             rng=np.random.default_rng(3), seconds_per_judgment=30)
    assert list(df.columns) == budget.COLUMNS
    assert sorted(set(df["strategy"])) == ["maxmean", "mtf", "ppi", "uniform"]
    # uniform at 0.1: round(0.1 * 60) = 6 queries of 12 pool pairs = 72 judgments, 0.6 hours
    row = df[(df.strategy == "uniform") & (df.budget == 0.1)].iloc[0]
    assert (row.queries, row.judgments, row.annotator_hours) == (6, 72, 72 * 30 / 3600)
    # a bandit at 0.5 judges ceil(0.5 * 12) = 6 pairs on each of the 60 queries
    row = df[(df.strategy == "mtf") & (df.budget == 0.5)].iloc[0]
    assert (row.judgments, row.judged_fraction) == (360, 0.5)


def test_curve_is_reproducible_with_the_same_generator():
    human, model, ranked = _experiment(seed=5)
    a = budget.budget_curve(human, ranked, model_grades=model, fractions=[0.2], k=5,
                            rng=np.random.default_rng(8))
    b = budget.budget_curve(human, ranked, model_grades=model, fractions=[0.2], k=5,
                            rng=np.random.default_rng(8))
    assert a.equals(b)


def test_ppi_without_model_grades_is_an_error():
    human, _, ranked = _experiment()
    with pytest.raises(InputError, match="the ppi strategy needs model grades"):
        budget.budget_curve(human, ranked, strategies=["ppi"], k=5, rng=np.random.default_rng(0))
    with pytest.raises(InputError, match=r"the human fraction must lie in \(0, 1\]"):
        budget.budget_curve(human, ranked, fractions=[1.5], k=5, rng=np.random.default_rng(0))


def test_judgments_rise_with_the_budget_when_pool_sizes_differ():
    # pools of 5 or 12 pairs (padding NaN past each query's pool): the budgets' query samples
    # are nested, so no budget spends fewer judgments than a smaller one; the full budget
    # spends every pool pair (sum of the pool sizes)
    human, model, ranked = _experiment(seed=2, width=12, depth=5)
    sizes = np.where(np.arange(60) % 3 == 0, 12, 5)
    for q, size in enumerate(sizes):
        human[q, size:] = np.nan
        model[q, size:] = np.nan
    ranked = np.stack([np.stack([np.random.default_rng(q).choice(sizes[q], 5, replace=False)
                                 for q in range(60)]) for _ in range(4)])
    fractions = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.8, 1.0]
    df = budget.budget_curve(human, ranked, model_grades=model, fractions=fractions, k=5,
                             rng=np.random.default_rng(11), strategies=["uniform", "ppi"])
    for strategy in ("uniform", "ppi"):
        spent = df[df.strategy == strategy]["judgments"].tolist()
        assert spent == sorted(spent), strategy
        assert spent[-1] == int(sizes.sum())
    assert df[df.strategy == "uniform"]["queries"].tolist() == [6, 9, 12, 15, 18, 21, 24, 30,
                                                                 36, 48, 60]
