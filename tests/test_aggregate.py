"""Several raters per pair: majority vote and its ties, Dawid-Skene, high-variance pairs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.raters.aggregate import (
    DS_COLUMNS,
    FLAG_COLUMNS,
    MAJORITY_COLUMNS,
    check_ratings,
    dawid_skene,
    flag_high_variance,
    majority,
    majority_grade,
)

S = [0, 1, 2]


def table(spec, query="q1"):
    """{chunk: [grade of r1, grade of r2, ...]} -> long table (None = not graded)."""
    rows = [(query, chunk, f"r{j + 1}", g) for chunk, grades in spec.items()
            for j, g in enumerate(grades) if g is not None]
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "grade"])


# --- majority ----------------------------------------------------------------------------

TIES = {
    "a": [2, 2, 1],        # plurality 2
    "b": [0, 2],           # tie {0, 2}: median 1
    "c": [0, 1],           # tie {0, 1}: median 0.5 -> 0
    "d": [1, 2],           # tie {1, 2}: median 1.5 -> 1
    "e": [0, 1, 2],        # three-way tie: median 1
    "f": [0, 0, 2, 2, 1],  # tie {0, 2} with a lone 1: median 1
    "g": [2],              # one rater
}


def test_majority_with_ties_takes_the_median_of_the_tied_grades_rounded_down():
    out = majority(table(TIES), scale=S)
    assert list(out.columns) == MAJORITY_COLUMNS
    assert out["chunk_id"].tolist() == list("abcdefg")
    assert out["grade"].tolist() == [2, 1, 0, 1, 1, 1, 2]
    assert out["votes"].tolist() == [3, 2, 2, 2, 3, 5, 1]
    # share of the pair's raters who gave the recorded grade (nobody gave b's 1)
    np.testing.assert_allclose(out["agreement"], [2 / 3, 0, 1 / 2, 1 / 2, 1 / 3, 1 / 5, 1])
    assert out["grade"].dtype == np.int64 and out["votes"].dtype == np.int64


def test_majority_follows_the_sampling_modules_rule_pair_by_pair():
    rng = np.random.default_rng(4)
    spec = {f"c{i:03d}": rng.integers(0, 3, size=rng.integers(1, 6)).tolist()
            for i in range(300)}
    out = majority(table(spec), scale=S)
    assert out["grade"].tolist() == [majority_grade(spec[c], S) for c in sorted(spec)]


@pytest.mark.parametrize("tie, expected", [
    ("low", [2, 0, 0, 1, 0, 0, 2]),
    ("high", [2, 2, 1, 2, 2, 2, 2]),
])
def test_other_tie_rules_take_the_lowest_or_highest_tied_grade(tie, expected):
    assert majority(table(TIES), scale=S, tie=tie)["grade"].tolist() == expected


def test_majority_on_a_scale_with_gaps_rounds_down_to_a_grade_of_the_scale():
    out = majority(table({"a": [1, 7], "b": [0, 3, 3]}), scale=[0, 1, 3, 7])
    assert out["grade"].tolist() == [3, 3]  # median of {1, 7} = 4 -> 3


def test_majority_ignores_row_order_and_reads_integer_ids_as_strings():
    g = table(TIES)
    shuffled = g.sample(frac=1, random_state=1).reset_index(drop=True)
    pd.testing.assert_frame_equal(majority(g, scale=S), majority(shuffled, scale=S))
    ints = pd.DataFrame({"query_id": [7, 7], "chunk_id": [4411, 4411], "grader": ["x", "y"],
                         "grade": [1, 1]})
    assert majority(ints, scale=S)[["query_id", "chunk_id"]].values.tolist() == [["7", "4411"]]


def test_null_grades_are_not_votes_and_empty_input_gives_an_empty_table():
    g = table({"a": [2, 2, 1]})
    g.loc[len(g)] = ["q1", "a", "r9", None]
    assert majority(g, scale=S)["votes"].tolist() == [3]
    empty = majority(g.iloc[:0], scale=S)
    assert list(empty.columns) == MAJORITY_COLUMNS and empty.empty


def test_majority_refuses_bad_input_naming_the_grader_and_pair():
    with pytest.raises(InputError, match=r"^r2: pair \(q1, a\): grade outside the scale 0, 1, 2 "
                                         r"\(found 3\)$"):
        majority(table({"a": [1, 3]}), scale=S)
    twice = pd.concat([table({"a": [1, 2]}), table({"a": [0]})], ignore_index=True)
    with pytest.raises(InputError, match=r"r1: pair \(q1, a\): a grader has two grades for one "
                                         r"pair\. Select one grading round first"):
        majority(twice, scale=S)
    with pytest.raises(InputError, match="unknown tie rule"):
        majority(table({"a": [1]}), scale=S, tie="random")
    with pytest.raises(InputError, match="lacks column"):
        majority(table({"a": [1]}).drop(columns="grader"), scale=S)
    with pytest.raises(InputError, match="whole number"):
        majority(table({"a": [1.5]}), scale=S)


def test_check_ratings_sorts_by_pair_and_grader():
    g = table({"b": [1, 0], "a": [2, None, 1]})
    out = check_ratings(g)
    assert out.values.tolist() == [["q1", "a", "r1", 2], ["q1", "a", "r3", 1],
                                   ["q1", "b", "r1", 1], ["q1", "b", "r2", 0]]


# --- Dawid-Skene -------------------------------------------------------------------------

# Twelve pairs, four of each true grade. "accurate" always gives the true grade; "flipper"
# reverses the scale (0 <-> 2, 1 stays 1); "noisy" is right except on c00 (2 for 0),
# c03 (1 for 0) and c08 (0 for 2).
TRUTH = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
NOISY = [2, 0, 0, 1, 1, 1, 1, 1, 0, 2, 2, 2]
CHUNKS = [f"c{i:02d}" for i in range(12)]


def adversarial():
    rows = []
    for name, grades in (("accurate", TRUTH), ("flipper", [2 - t for t in TRUTH]),
                         ("noisy", NOISY)):
        rows += [("q1", c, name, g) for c, g in zip(CHUNKS, grades)]
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "grade"])


def test_majority_fails_where_the_flipper_and_a_noisy_rater_agree():
    # c00: 0, 2, 2 -> 2; c03: 0, 2, 1 -> three-way tie -> 1; c08: 2, 0, 0 -> 0.
    out = majority(adversarial(), scale=S)
    assert out["grade"].tolist() == [2, 0, 0, 1, 1, 1, 1, 1, 0, 2, 2, 2]


def test_dawid_skene_learns_the_flipper_and_recovers_the_truth():
    result = dawid_skene(adversarial(), scale=S)
    labels, confusion, priors = result
    assert list(labels.columns) == DS_COLUMNS
    assert labels["chunk_id"].tolist() == CHUNKS
    assert labels["grade"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    np.testing.assert_allclose(labels["posterior"], 1.0, atol=1e-6)
    assert result.converged and result.iterations < 100
    # With the truth found, each confusion row is the rater's grades on the four pairs of
    # that true grade (entries floored at 1e-10).
    expected = {
        "accurate": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
        "flipper": [[0, 0, 1], [0, 1, 0], [1, 0, 0]],
        "noisy": [[2 / 4, 1 / 4, 1 / 4], [0, 1, 0], [1 / 4, 0, 3 / 4]],
    }
    for name, matrix in expected.items():
        np.testing.assert_allclose(confusion.loc[name].to_numpy(), matrix, atol=1e-6)
    np.testing.assert_allclose(confusion.to_numpy().sum(axis=1), 1.0)
    assert confusion.index.names == ["grader", "true_grade"]
    np.testing.assert_allclose(priors.to_numpy(), [4 / 12, 4 / 12, 4 / 12], atol=1e-6)
    assert priors.index.tolist() == S


def test_dawid_skene_gives_the_same_answer_on_shuffled_rows_and_renamed_raters():
    base = dawid_skene(adversarial(), scale=S)
    for seed in range(5):
        shuffled = adversarial().sample(frac=1, random_state=seed).reset_index(drop=True)
        again = dawid_skene(shuffled, scale=S)
        pd.testing.assert_frame_equal(again.labels, base.labels)
        pd.testing.assert_frame_equal(again.confusion, base.confusion)
        assert again.iterations == base.iterations
    renamed = adversarial().replace({"grader": {"accurate": "z", "flipper": "a", "noisy": "m"}})
    other = dawid_skene(renamed, scale=S)
    assert other.labels["grade"].tolist() == base.labels["grade"].tolist()
    np.testing.assert_allclose(other.labels["posterior"], base.labels["posterior"])
    np.testing.assert_allclose(other.confusion.loc["a"], base.confusion.loc["flipper"])


def test_dawid_skene_with_raters_on_different_pairs():
    # The noisy rater skipped c01 and c10, leaving two raters there who split 0-2: majority
    # records 1 on both; Dawid-Skene still finds the truth.
    g = adversarial()
    g = g[~((g["grader"] == "noisy") & g["chunk_id"].isin(["c01", "c10"]))]
    assert majority(g, scale=S)["grade"].tolist() == [2, 1, 0, 1, 1, 1, 1, 1, 0, 2, 1, 2]
    labels, _, _ = dawid_skene(g, scale=S)
    assert labels["grade"].tolist() == TRUTH


def test_dawid_skene_on_unanimous_raters_keeps_their_grade():
    g = table({"a": [2, 2, 2], "b": [0, 0, 0], "c": [1, 1, 1], "d": [0, 0, 0]})
    labels, _, priors = dawid_skene(g, scale=S)
    assert labels["grade"].tolist() == [2, 0, 1, 0]
    np.testing.assert_allclose(labels["posterior"], 1.0, atol=1e-6)
    np.testing.assert_allclose(priors.to_numpy(), [2 / 4, 1 / 4, 1 / 4], atol=1e-6)


def test_dawid_skene_stops_at_max_iter_and_says_it_did_not_converge():
    result = dawid_skene(adversarial(), scale=S, max_iter=1)
    assert result.iterations == 1 and not result.converged
    assert np.isfinite(result.log_likelihood) and result.log_likelihood < 0


def test_dawid_skene_refuses_bad_settings_and_empty_input():
    g = adversarial()
    with pytest.raises(InputError, match="no grades to aggregate"):
        dawid_skene(g.iloc[:0], scale=S)
    with pytest.raises(InputError, match="unknown start"):
        dawid_skene(g, scale=S, init="uniform")
    with pytest.raises(InputError, match="max_iter must be"):
        dawid_skene(g, scale=S, max_iter=0)
    with pytest.raises(InputError, match="tol must be"):
        dawid_skene(g, scale=S, tol=-1.0)


# --- flag_high_variance ------------------------------------------------------------------

SPREAD = {
    "a": [0, 2, 2],        # variance 8/9, 0 and 2 both given
    "b": [0, 1, 2],        # variance 2/3, 0 and 2
    "c": [1, 2, 2],        # variance 2/9
    "d": [0, 1],           # variance 1/4
    "e": [2],              # one grade: never flagged
    "f": [0, 2],           # variance 1
    "g": [0, 0, 0, 0, 2],  # mean 0.4: variance (4 * 0.16 + 2.56) / 5 = 0.64
    "h": [0, 1, 1, 2],     # variance (1 + 0 + 0 + 1) / 4 = 0.5, exactly the threshold
}


def test_flagged_pairs_by_hand():
    out = flag_high_variance(table(SPREAD), threshold=0.5)
    assert list(out.columns) == FLAG_COLUMNS
    assert out["chunk_id"].tolist() == ["a", "b", "f", "g", "h"]
    assert out["grades"].tolist() == ["0,2,2", "0,1,2", "0,2", "0,0,0,0,2", "0,1,1,2"]
    np.testing.assert_allclose(out["variance"], [8 / 9, 2 / 3, 1, 0.64, 0.5])
    np.testing.assert_allclose(out["mean"], [4 / 3, 1, 1, 0.4, 1])
    assert out["votes"].tolist() == [3, 3, 2, 5, 4]
    assert out["spread"].tolist() == [2, 2, 2, 2, 2]
    assert out.loc[0, "reason"] == "variance 0.8889 >= 0.5; grades 0 and 2 both given"


def test_the_spread_rule_flags_opposite_grades_under_a_high_variance_threshold():
    out = flag_high_variance(table(SPREAD), threshold=0.9)
    assert out["chunk_id"].tolist() == ["a", "b", "f", "g", "h"]
    assert out["reason"].tolist() == [
        "grades 0 and 2 both given", "grades 0 and 2 both given",
        "variance 1.0000 >= 0.9; grades 0 and 2 both given", "grades 0 and 2 both given",
        "grades 0 and 2 both given"]
    only_variance = flag_high_variance(table(SPREAD), threshold=0.9, min_spread=None)
    assert only_variance["chunk_id"].tolist() == ["f"]
    assert only_variance["reason"].tolist() == ["variance 1.0000 >= 0.9"]


def test_nothing_is_flagged_when_raters_agree_within_one_step():
    out = flag_high_variance(table({"a": [1, 2, 2], "b": [0, 0, 1], "c": [1]}), threshold=0.5)
    assert out.empty and list(out.columns) == FLAG_COLUMNS


def test_flag_high_variance_refuses_bad_settings():
    with pytest.raises(InputError, match="variance threshold"):
        flag_high_variance(table(SPREAD), threshold=-0.1)
    with pytest.raises(InputError, match="min_spread"):
        flag_high_variance(table(SPREAD), threshold=0.5, min_spread=0)
