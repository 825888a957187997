"""Repeated sampling: majority with the documented tie rule, reasons, self-consistency."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from relgrade.errors import InputError
from relgrade.graders.self_consistency import aggregate_samples, self_consistency
from relgrade.protocol.agreement import fleiss_from_counts
from relgrade.raters.aggregate import majority_grade


def fleiss_kappa(counts):
    return fleiss_from_counts(counts)[0]

S = [0, 1, 2]


@pytest.mark.parametrize("grades, expected", [
    ([2], 2),
    ([2, 2, 1], 2),
    ([0, 0, 2], 0),
    ([1, 0, 1, 2, 1], 1),
])
def test_a_strict_plurality_is_recorded(grades, expected):
    assert majority_grade(grades, S) == expected


@pytest.mark.parametrize("grades, expected", [
    ([0, 2], 1),           # median of {0, 2} = 1
    ([2, 0], 1),
    ([0, 1], 0),           # median 0.5, rounded down
    ([1, 2], 1),           # median 1.5, rounded down
    ([0, 1, 2], 1),        # median of {0, 1, 2} = 1
    ([0, 0, 2, 2], 1),
    ([2, 2, 1, 1, 0], 1),  # modes {1, 2}: 1.5 -> 1
])
def test_ties_take_the_median_of_the_tied_grades_rounded_down(grades, expected):
    assert majority_grade(grades, S) == expected


def test_rounding_down_lands_on_the_scale_when_the_scale_has_gaps():
    # scale 0/1/3/7 (gains of a 0-3 scale used as grades): modes {1, 7} -> median 4 -> 3
    assert majority_grade([1, 7], [0, 1, 3, 7]) == 3
    assert majority_grade([0, 3], [0, 1, 2, 3]) == 1  # median 1.5 -> 1


def test_majority_refuses_an_empty_list_and_grades_off_the_scale():
    with pytest.raises(ValueError, match="no sampled grades"):
        majority_grade([], S)
    with pytest.raises(ValueError, match="not on the scale"):
        majority_grade([1, 3], S)


def samples_table(rows):
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "sample", "reason", "grade"])


def test_aggregate_records_the_majority_and_a_reason_a_sample_gave():
    t = samples_table([
        ("q1", "a", 0, "defines it", 2), ("q1", "a", 1, "defines it too", 2),
        ("q1", "a", 2, "only calls it", 1),
        ("q1", "b", 0, "unrelated", 0), ("q1", "b", 1, "the full answer", 2),
        ("q1", "c", 1, "calls it", 1), ("q1", "c", 0, "a pointer", 1),
    ])
    out = aggregate_samples(t, scale=S)
    assert list(out.columns) == ["query_id", "chunk_id", "reason", "grade"]
    assert out.values.tolist() == [
        ["q1", "a", "defines it", 2],        # first sample with the majority grade
        ["q1", "b", "unrelated", 1],         # 0-2 tie -> 1; nearest are 0 and 2, lower wins
        ["q1", "c", "a pointer", 1],         # lowest sample number among equals
    ]


def test_aggregate_refuses_a_repeated_sample_number():
    t = samples_table([("q1", "a", 0, "x", 1), ("q1", "a", 0, "y", 2)])
    with pytest.raises(InputError, match="same sample twice"):
        aggregate_samples(t, scale=S)


def test_fleiss_kappa_matches_the_worked_example_of_ten_items_and_fourteen_raters():
    # The standard worked example (Fleiss 1971 style; reproduced in many textbooks and on
    # Wikipedia's "Fleiss' kappa" page): P-bar = 0.378, P-e = 0.213, kappa = 0.210.
    table = np.array([
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ])
    assert fleiss_kappa(table) == pytest.approx(0.2099, abs=5e-4)
    assert fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(table, method="fleiss"))


def test_fleiss_kappa_agrees_with_statsmodels_on_random_tables():
    rng = np.random.default_rng(20261130)
    for _ in range(50):
        n_items, n_raters, k = rng.integers(2, 30), rng.integers(2, 7), rng.integers(2, 5)
        table = np.stack([rng.multinomial(n_raters, rng.dirichlet(np.ones(k)))
                          for _ in range(n_items)])
        if (table.sum(axis=0) == table.sum()).any():
            continue  # one category only: undefined (tested below)
        assert fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(table, method="fleiss"))


def test_fleiss_kappa_is_undefined_when_every_rating_is_one_category():
    kappa, note = fleiss_from_counts([[3, 0, 0], [3, 0, 0]])
    assert kappa is None and "chance agreement is 1" in note
    assert fleiss_kappa(np.zeros((0, 3))) is None


def test_fleiss_kappa_is_undefined_with_one_rating_per_item():
    assert fleiss_from_counts([[1, 0], [0, 1]]) == \
        (None, "no pair has grades from two or more raters")


def test_self_consistency_reports_the_fleiss_kappa_of_its_sample_counts():
    # two pairs, three samples each: counts [[3, 0, 0], [1, 2, 0]] over grades 0, 1, 2
    # p = (4/6, 2/6, 0): P_e = 20/36; P_i = (1, 1/3): P-bar = 2/3; kappa = (2/3 - 5/9) / (4/9)
    samples = pd.DataFrame({"query_id": ["q"] * 6, "chunk_id": ["a"] * 3 + ["b"] * 3,
                            "sample": [0, 1, 2] * 2, "reason": ["r"] * 6,
                            "grade": [0, 0, 0, 0, 1, 1]})
    out = self_consistency(samples, scale=S, n_samples=3)
    assert out["fleiss_kappa"] == pytest.approx(0.25, abs=1e-12)
    assert out["fleiss_kappa"] == fleiss_kappa([[3, 0, 0], [1, 2, 0]])


def test_self_consistency_by_hand():
    # three pairs, three samples: (2,2,2) unanimous; (1,1,0); (0,2,1) a three-way tie
    t = samples_table([
        ("q", "a", 0, "r", 2), ("q", "a", 1, "r", 2), ("q", "a", 2, "r", 2),
        ("q", "b", 0, "r", 1), ("q", "b", 1, "r", 1), ("q", "b", 2, "r", 0),
        ("q", "c", 0, "r", 0), ("q", "c", 1, "r", 2), ("q", "c", 2, "r", 1),
        ("q", "d", 0, "r", 1),  # incomplete: left out
    ])
    out = self_consistency(t, scale=S, n_samples=3)
    # counts over (0, 1, 2): a=(0,0,3), b=(1,2,0), c=(1,1,1)
    p_i = [(9 - 3) / 6, (1 + 4 - 3) / 6, (3 - 3) / 6]
    p_bar = sum(p_i) / 3
    p_j = np.array([2, 3, 4]) / 9
    p_e = float((p_j ** 2).sum())
    assert out["pairs"] == 3 and out["incomplete_pairs"] == 1
    assert out["unanimous_share"] == pytest.approx(1 / 3)
    assert out["mean_pairwise_agreement"] == pytest.approx(p_bar)
    assert out["fleiss_kappa"] == pytest.approx((p_bar - p_e) / (1 - p_e))
    assert out["ties"] == 1
    assert "median" in out["tie_rule"]


def test_self_consistency_reports_undefined_kappa_with_a_note():
    t = samples_table([("q", c, s, "r", 0) for c in "ab" for s in range(2)])
    out = self_consistency(t, scale=S, n_samples=2)
    assert out["fleiss_kappa"] is None
    assert out["unanimous_share"] == 1.0
    assert any("undefined" in n for n in out["notes"])
    one = self_consistency(t[t["sample"] == 0], scale=S, n_samples=1)
    assert one["fleiss_kappa"] is None and any("samples >= 2" in n for n in one["notes"])
