"""Gold questions: seeding them into raters' queues, accuracy per rater, rater removal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.raters.gold import (
    ACCURACY_COLUMNS,
    DECISION_COLUMNS,
    QUEUE_COLUMNS,
    check_gold,
    gold_accuracy,
    remove_raters,
    seed_gold,
)


def pool_of(n, query="q1", prefix="c"):
    return pd.DataFrame({"query_id": [query] * n,
                         "chunk_id": [f"{prefix}{i:02d}" for i in range(n)]})


def gold_of(n, query="g1"):
    return pd.DataFrame({"query_id": [query] * n, "chunk_id": [f"k{i:02d}" for i in range(n)],
                         "grade": [i % 3 for i in range(n)]})


def rng(seed=11):
    return np.random.default_rng(seed)


# --- seed_gold ---------------------------------------------------------------------------

def test_gold_makes_up_the_share_of_each_raters_queue():
    # 18 work pairs, none gold: k = round((0.1 * 18 - 0) / 0.9) = round(2.0) = 2 -> 2 of 20.
    queue = seed_gold(pool_of(18), gold_of(30), share=0.10, rng=rng(), graders=["r1", "r2"])
    assert list(queue.columns) == QUEUE_COLUMNS
    for name in ("r1", "r2"):
        mine = queue[queue["grader"] == name]
        assert len(mine) == 20
        assert int(mine["gold"].sum()) == 2
        assert sorted(mine["position"]) == list(range(20))
        # every work pair is still there, once
        work = mine[~mine["gold"]]
        assert sorted(work["chunk_id"]) == [f"c{i:02d}" for i in range(18)]


def test_gold_pairs_already_in_the_queue_count_towards_the_share():
    # one of the 18 work pairs is a gold pair: k = round((1.8 - 1) / 0.9) = round(0.889) = 1.
    pool = pool_of(18)
    gold = pd.concat([gold_of(10), pd.DataFrame({"query_id": ["q1"], "chunk_id": ["c05"],
                                                 "grade": [2]})], ignore_index=True)
    queue = seed_gold(pool, gold, share=0.10, rng=rng())
    assert "grader" not in queue.columns  # one queue
    assert len(queue) == 19
    assert int(queue["gold"].sum()) == 2
    assert bool(queue.loc[queue["chunk_id"] == "c05", "gold"].item())


def test_a_pool_with_a_grader_column_seeds_each_assigned_queue():
    # r1: 9 pairs -> round(0.9 / 0.9) = 1 gold; r2: 27 pairs -> round(2.7 / 0.9) = 3 gold.
    pool = pd.concat([pool_of(9).assign(grader="r1"), pool_of(27, prefix="d").assign(grader="r2")],
                     ignore_index=True)
    queue = seed_gold(pool, gold_of(20), share=0.10, rng=rng())
    counts = queue.groupby("grader")["gold"].agg(["size", "sum"])
    assert counts.loc["r1"].tolist() == [10, 1]
    assert counts.loc["r2"].tolist() == [30, 3]


def test_the_same_seed_gives_the_same_queue_and_gold_row_order_does_not_matter():
    gold = gold_of(30)
    a = seed_gold(pool_of(40), gold, rng=rng(5), graders=["r1", "r2", "r3"])
    b = seed_gold(pool_of(40), gold.sample(frac=1, random_state=3), rng=rng(5),
                  graders=["r3", "r1", "r2"])
    pd.testing.assert_frame_equal(a, b)
    c = seed_gold(pool_of(40), gold, rng=rng(6), graders=["r1", "r2", "r3"])
    assert not a.equals(c)


def test_raters_draw_their_gold_pairs_independently():
    queue = seed_gold(pool_of(90), gold_of(60), share=0.10, rng=rng(3), graders=["r1", "r2"])
    drawn = {g: set(q.loc[q["gold"], "chunk_id"]) for g, q in queue.groupby("grader")}
    assert len(drawn["r1"]) == len(drawn["r2"]) == 10  # round(9 / 0.9)
    assert drawn["r1"] != drawn["r2"]


def test_nothing_a_rater_sees_tells_gold_from_the_rest():
    pool = pool_of(18)
    gold = gold_of(30, query="q1")  # gold pairs of the same query, like any other chunk
    seen = np.zeros(20, dtype=int)
    for seed in range(200):
        queue = seed_gold(pool, gold, rng=rng(seed))
        visible = queue.drop(columns="gold")
        assert list(visible.columns) == ["query_id", "chunk_id", "position"]
        assert visible["query_id"].map(type).eq(str).all()
        assert visible["chunk_id"].map(type).eq(str).all()
        assert queue["position"].tolist() == list(range(20))  # sorted by position
        seen[queue.loc[queue["gold"], "position"].to_numpy()] += 1
    # Gold lands anywhere in the queue, not in a block: each of the 20 places held a gold
    # pair in some of the 200 queues (a place is missed with probability 0.9**200 < 1e-9).
    assert (seen > 0).all()
    assert seen.sum() == 400


def test_share_zero_adds_no_gold_and_still_shuffles():
    queue = seed_gold(pool_of(12), gold_of(5), share=0.0, rng=rng())
    assert len(queue) == 12 and not queue["gold"].any()
    assert queue["chunk_id"].tolist() != [f"c{i:02d}" for i in range(12)]


def test_too_few_gold_pairs_is_an_error_naming_the_rater():
    with pytest.raises(InputError) as e:
        seed_gold(pool_of(90), gold_of(4), share=0.10, rng=rng(), graders=["r1"])
    assert str(e.value) == ("r1: too few gold pairs for the share asked (found 4 gold pairs "
                            "outside the queue, 10 needed for a share of 0.1). Add gold pairs "
                            "or lower the share")


@pytest.mark.parametrize("share", [-0.1, 1.0, 1.5, float("nan")])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(InputError, match="gold share must be at least 0 and below 1"):
        seed_gold(pool_of(5), gold_of(5), share=share, rng=rng())


def test_seed_gold_needs_a_generator_and_a_clean_queue():
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        seed_gold(pool_of(5), gold_of(5), rng=np.random.RandomState(1))
    twice = pd.concat([pool_of(3), pool_of(1)], ignore_index=True)
    with pytest.raises(InputError, match=r"pair \(q1, c00\): a pair is twice in one queue"):
        seed_gold(twice, gold_of(5), rng=rng())


# --- the gold table ----------------------------------------------------------------------

def test_check_gold_normalises_ids_and_sorts():
    gold = pd.DataFrame({"query_id": [2, 1], "chunk_id": [7, 4411], "grade": [1.0, 2]})
    out = check_gold(gold)
    assert out.values.tolist() == [["1", "4411", 2], ["2", "7", 1]]
    assert out["grade"].dtype == np.int64


def test_check_gold_refuses_a_pair_twice_and_fractional_grades():
    with pytest.raises(InputError, match=r"pair \(q, a\): the gold table lists a pair twice"):
        check_gold(pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "a"],
                                 "grade": [1, 2]}))
    with pytest.raises(InputError, match=r"pair \(q, b\): a gold grade must be a whole number"):
        check_gold(pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
                                 "grade": [1, 1.5]}))
    with pytest.raises(InputError, match="lacks column"):
        check_gold(pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"]}))


# --- gold_accuracy -----------------------------------------------------------------------

GOLD = pd.DataFrame({"query_id": ["q1"] * 5, "chunk_id": ["a", "b", "c", "d", "e"],
                     "grade": [2, 0, 1, 2, 0]})


def grades_table(rows):
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "grade"])


def rater(name, grades, chunks="abcde"):
    return [("q1", c, name, g) for c, g in zip(chunks, grades) if g is not None]


def test_gold_accuracy_by_hand():
    rows = (rater("good", [2, 0, 1, 2, 1])          # 4 of 5 exact, the miss is one step
            + rater("bad", [0, 2, 1, 0, 2])         # 1 of 5 exact; 0-for-2 four times
            + rater("few", [2, None, None, None, 2])  # 2 gold answers: 1 exact, 1 two steps off
            + [("q1", "zz", "none", 1)])             # graded no gold pair
    acc = gold_accuracy(grades_table(rows), GOLD)
    assert list(acc.columns) == ACCURACY_COLUMNS
    assert acc["grader"].tolist() == ["bad", "few", "good", "none"]
    assert acc["gold_pairs"].tolist() == [5, 2, 5, 0]
    assert acc["correct"].tolist() == [1, 1, 4, 0]
    np.testing.assert_allclose(acc["accuracy"].to_numpy()[:3], [1 / 5, 1 / 2, 4 / 5])
    np.testing.assert_allclose(acc["within_one"].to_numpy()[:3], [1 / 5, 1 / 2, 5 / 5])
    # no gold answer: undefined, not 0
    assert np.isnan(acc.loc[3, "accuracy"]) and np.isnan(acc.loc[3, "within_one"])


def test_gold_accuracy_ignores_null_grades_and_refuses_two_grades_for_a_pair():
    rows = rater("r", [2, 0, 1, 2, 0])
    table = grades_table(rows + [("q1", "f", "r", None)])
    assert gold_accuracy(table, GOLD)["correct"].tolist() == [5]
    with pytest.raises(InputError, match=r"r: pair \(q1, a\): a grader has two grades"):
        gold_accuracy(grades_table(rows + [("q1", "a", "r", 1)]), GOLD)


# --- remove_raters -----------------------------------------------------------------------

def test_raters_below_the_threshold_are_removed_with_all_their_grades():
    rows = (rater("good", [2, 0, 1, 2, 1]) + rater("bad", [0, 2, 1, 0, 2])
            + rater("few", [2, None, None, None, 2]))
    grades = grades_table(rows)
    acc = gold_accuracy(grades, GOLD)
    kept, decisions = remove_raters(grades, acc, threshold=0.7, min_gold=3)
    assert sorted(set(kept["grader"])) == ["few", "good"]
    assert len(kept) == 5 + 2  # every grade of "bad" discarded, nothing else
    assert kept.equals(grades[grades["grader"] != "bad"].reset_index(drop=True))
    assert list(decisions.columns) == DECISION_COLUMNS
    assert decisions["grader"].tolist() == ["bad", "few"]
    assert decisions["removed"].tolist() == [True, False]
    assert decisions["gold_pairs"].tolist() == [5, 2]
    assert decisions["reason"].tolist() == [
        "removed: gold accuracy 0.2000 below 0.7 on 5 gold answers; all their grades discarded",
        "kept, flagged: only 2 gold answers, fewer than min_gold 3; accuracy not judged",
    ]


def test_accuracy_equal_to_the_threshold_stays():
    grades = grades_table(rater("r", [2, 0, 1, 2, 2]))  # 4 of 5 = 0.8
    kept, decisions = remove_raters(grades, gold_accuracy(grades, GOLD), threshold=0.8,
                                    min_gold=5)
    assert len(kept) == 5 and decisions.empty
    kept, decisions = remove_raters(grades, gold_accuracy(grades, GOLD), threshold=0.81,
                                    min_gold=5)
    assert kept.empty and decisions["removed"].tolist() == [True]


def test_a_rater_without_gold_answers_is_flagged_even_with_min_gold_zero():
    grades = grades_table([("q1", "zz", "new", 1)])
    kept, decisions = remove_raters(grades, gold_accuracy(grades, GOLD), threshold=0.7,
                                    min_gold=0)
    assert len(kept) == 1
    assert decisions["reason"].tolist() == [
        "kept, flagged: only 0 gold answers, fewer than min_gold 0; accuracy not judged"]
    # a rater missing from the accuracy table counts as having no gold answers
    kept, decisions = remove_raters(grades, gold_accuracy(grades, GOLD).iloc[:0],
                                    threshold=0.7, min_gold=1)
    assert len(kept) == 1 and decisions["removed"].tolist() == [False]


def test_remove_raters_refuses_bad_settings():
    grades = grades_table(rater("r", [2, 0, 1, 2, 2]))
    acc = gold_accuracy(grades, GOLD)
    with pytest.raises(InputError, match="threshold must be between 0 and 1"):
        remove_raters(grades, acc, threshold=70, min_gold=5)
    with pytest.raises(InputError, match="min_gold must be a whole number"):
        remove_raters(grades, acc, threshold=0.7, min_gold=-1)
    with pytest.raises(InputError, match="accuracy table lacks column"):
        remove_raters(grades, acc.drop(columns="gold_pairs"), threshold=0.7, min_gold=5)
