"""A rater panel as tables: assignment, gold in the queues, aggregation, adjudication.

Every expected value is worked out by hand in the test's comments.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.raters.aggregate import dawid_skene
from relgrade.raters.assign import (
    assign_pairs,
    check_assignment,
    check_panel_gold,
    queue_orders,
    rater_orders,
    rater_queues,
    select_gold,
)
from relgrade.raters.panel import (
    adjudicate,
    aggregate_panel,
    queued_expert_grades,
    removed_on_gold,
    require_expert,
)

S = [0, 1, 2]
RATERS = ["r1", "r2", "r3", "r4", "r5"]


def pool_of(n_queries=4, per_query=5):
    return pd.DataFrame([(f"q{i}", f"c{i}{j}") for i in range(n_queries)
                         for j in range(per_query)], columns=["query_id", "chunk_id"])


# --- assignment ---------------------------------------------------------------------------

@pytest.mark.parametrize("per_pair", [3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_pair_gets_per_pair_distinct_raters_and_loads_differ_by_at_most_one(per_pair, seed):
    pool = pool_of()
    a = assign_pairs(pool, RATERS, per_pair=per_pair, rng=np.random.default_rng(seed))
    per = a.groupby(["query_id", "chunk_id"])["grader"]
    assert (per.size() == per_pair).all() and (per.nunique() == per_pair).all()
    loads = a.groupby("grader").size()
    # 20 pairs x per_pair over 5 raters: exactly 4 * per_pair each
    assert loads.tolist() == [4 * per_pair] * 5


def test_the_assignment_is_rebuilt_exactly_from_its_seed_and_changes_with_it():
    pool = pool_of()
    one = assign_pairs(pool, RATERS, per_pair=3, rng=np.random.default_rng(7))
    two = assign_pairs(pool.sample(frac=1, random_state=3), RATERS[::-1], per_pair=3,
                       rng=np.random.default_rng(7))
    pd.testing.assert_frame_equal(one, two)
    other = assign_pairs(pool, RATERS, per_pair=3, rng=np.random.default_rng(8))
    assert not one.equals(other)


def test_loads_are_floor_or_ceiling_when_the_pairs_do_not_divide_evenly():
    a = assign_pairs(pool_of(1, 7), RATERS[:4], per_pair=3, rng=np.random.default_rng(1))
    # 7 pairs x 3 = 21 over 4 raters: 5, 5, 5, 6 in some order
    assert sorted(a.groupby("grader").size().tolist()) == [5, 5, 5, 6]


def test_more_raters_per_pair_than_raters_is_refused():
    with pytest.raises(InputError, match="raters.per_pair must be a whole number from 1 to "
                                         "the number of raters"):
        assign_pairs(pool_of(), RATERS[:3], per_pair=4, rng=np.random.default_rng(0))


def test_a_rater_listed_twice_is_refused():
    with pytest.raises(InputError, match="r2: a rater is listed twice"):
        assign_pairs(pool_of(), ["r1", "r2", "r2", "r3"], per_pair=3,
                     rng=np.random.default_rng(0))
    table = pd.DataFrame([("r1", "q", "a"), ("r2", "q", "a"), ("r1", "q", "a")],
                         columns=["grader", "query_id", "chunk_id"])
    with pytest.raises(InputError) as e:
        check_assignment(table)
    assert str(e.value).startswith("r1: pair (q, a): a rater is listed twice for one pair")


# --- gold -------------------------------------------------------------------------------------

def test_a_gold_pair_not_in_the_pool_is_refused_naming_the_file_and_the_pair():
    gold = pd.DataFrame({"query_id": ["q0", "q9"], "chunk_id": ["c00", "x"], "grade": [2, 1]})
    with pytest.raises(InputError) as e:
        check_panel_gold(gold, pool=pool_of(), scale=S, path="gold.tsv")
    assert str(e.value) == ("gold.tsv: pair (q9, x): a gold pair is not in the pool. Gold "
                            "questions are pool pairs with a known grade")


def test_a_gold_grade_off_the_scale_is_refused():
    gold = pd.DataFrame({"query_id": ["q0"], "chunk_id": ["c00"], "grade": [3]})
    with pytest.raises(InputError) as e:
        check_panel_gold(gold, pool=pool_of(), scale=S, path="gold.tsv")
    assert str(e.value) == "gold.tsv: pair (q0, c00): a gold grade is off the scale 0, 1, 2 (found 3)"


def test_gold_pairs_go_to_per_pair_raters_like_work_and_each_rater_gets_its_share():
    # 20 pool pairs, 5 raters, 3 per pair: 60 (rater, pair) rows, 12 per rater. A share of
    # 0.3 takes round(0.3 * 20) = 6 of the 8 gold pairs; dealt first, 6 * 3 = 18 gold rows
    # spread over 5 raters: 3 or 4 each (floor(18 / 5) = 3, and 18 - 5 * 3 = 3 raters get 4).
    pool = pool_of()
    gold = pool.iloc[[0, 3, 5, 10, 12, 15, 16, 17]].assign(grade=[2, 1, 0, 2, 1, 0, 2, 0])
    used = select_gold(gold, pool=pool, fraction=0.3, rng=np.random.default_rng(5))
    assert len(used) == 6 and set(zip(used["query_id"], used["chunk_id"])) <= \
        set(zip(gold["query_id"], gold["chunk_id"]))
    a = assign_pairs(pool, RATERS, per_pair=3, rng=np.random.default_rng(4), first=used)
    q = rater_queues(a, used)
    assert q["work"].all()                                  # nothing beyond the assignment
    assert len(q) == 60 and q.groupby("grader").size().tolist() == [12] * 5
    per_pair = q.groupby(["query_id", "chunk_id"]).agg(raters=("grader", "size"),
                                                       gold=("gold", "first"))
    assert per_pair["raters"].eq(3).all()                   # gold and work alike
    assert int(per_pair["gold"].sum()) == 6
    assert sorted(q.groupby("grader")["gold"].sum().tolist()) == [3, 3, 4, 4, 4]
    assert not q.duplicated(["grader", "query_id", "chunk_id"]).any()


def test_the_gold_questions_are_rebuilt_exactly_from_their_seed():
    pool = pool_of()
    gold = pool.iloc[::2].assign(grade=0)                   # 10 known pairs, 6 needed
    one = select_gold(gold, pool=pool, fraction=0.3, rng=np.random.default_rng(9))
    two = select_gold(gold.iloc[::-1], pool=pool, fraction=0.3, rng=np.random.default_rng(9))
    pd.testing.assert_frame_equal(one, two)                 # the file's row order is moot
    a = assign_pairs(pool, RATERS, per_pair=3, rng=np.random.default_rng(4), first=one)
    b = assign_pairs(pool, RATERS, per_pair=3, rng=np.random.default_rng(4), first=two)
    pd.testing.assert_frame_equal(a, b)


def test_too_few_gold_pairs_for_the_share_is_refused_with_both_counts():
    # round(0.4 * 20) = 8 gold questions needed, 6 known
    gold = pool_of().iloc[:6].assign(grade=1)
    with pytest.raises(InputError) as e:
        select_gold(gold, pool=pool_of(), fraction=0.4, rng=np.random.default_rng(0))
    assert str(e.value) == ("gold.fraction: too few gold pairs for the share asked (found 6 "
                            "gold pairs in the pool, 8 needed for a share of 0.4 of its 20 "
                            "pairs). Add gold pairs to the gold file or lower gold.fraction")


def test_without_gold_to_deal_first_the_assignment_is_unchanged():
    pool = pool_of()
    plain = assign_pairs(pool, RATERS, per_pair=3, rng=np.random.default_rng(4))
    empty = assign_pairs(pool, RATERS, per_pair=3, rng=np.random.default_rng(4),
                         first=pool.iloc[:0])
    pd.testing.assert_frame_equal(plain, empty)


def test_a_raters_order_depends_on_the_chunk_ids_only_never_on_which_are_gold():
    queue = pd.DataFrame({"grader": ["r1"] * 4, "query_id": ["q"] * 4,
                          "chunk_id": ["a", "b", "c", "d"], "work": [True] * 4,
                          "gold": [False] * 4})
    flipped = queue.assign(work=[True, False, True, False], gold=[False, True, False, True])
    one = rater_orders(queue, seed=3, round=1, batch_size=2)
    two = rater_orders(flipped, seed=3, round=1, batch_size=2)
    assert one["chunk_id"].tolist() == two["chunk_id"].tolist()
    assert one["batch"].tolist() == [0, 0, 1, 1]
    expert = queue_orders(queue[["query_id", "chunk_id"]], role="expert", seed=3, round=1,
                          batch_size=5)
    assert sorted(expert["chunk_id"]) == ["a", "b", "c", "d"]


# --- aggregation ------------------------------------------------------------------------

def _panel(rows):
    """Grades and a queue where every graded pair is the rater's work."""
    grades = pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "grade"])
    queues = grades[["grader", "query_id", "chunk_id"]].assign(work=True, gold=False)
    pool = grades[["query_id", "chunk_id"]].drop_duplicates()
    return grades, queues, pool


def test_majority_ties_go_to_the_queue_never_to_the_first_label():
    grades, queues, pool = _panel([
        ("q", "a", "r1", 2), ("q", "a", "r2", 2), ("q", "a", "r3", 1),  # 2 wins, spread 1
        ("q", "b", "r1", 0), ("q", "b", "r2", 1),                       # tie 0-1
        ("q", "c", "r1", 0), ("q", "c", "r2", 1), ("q", "c", "r3", 2),  # tie 0-1-2, spread 2
        ("q", "d", "r1", 0), ("q", "d", "r2", 0), ("q", "d", "r3", 2),  # 0 wins, spread 2
    ])
    r = aggregate_panel(grades, queues=queues, pool=pool, gold=None, scale=S, max_spread=1)
    agg = r.aggregated.set_index("chunk_id")
    assert agg["grade"].to_dict() == {"a": 2, "b": 0, "c": 1, "d": 0}
    assert agg["tie"].to_dict() == {"a": False, "b": True, "c": True, "d": False}
    assert agg["support"].to_dict() == pytest.approx({"a": 2 / 3, "b": 1 / 2, "c": 1 / 3,
                                                      "d": 2 / 3})
    assert r.queue[["chunk_id", "reason"]].values.tolist() == [
        ["b", "majority tie between grades 0, 1"],
        ["c", "majority tie between grades 0, 1, 2; spread 2 > max_spread 1"],
        ["d", "spread 2 > max_spread 1"],
    ]


def test_a_rater_below_the_gold_threshold_is_removed_and_their_grades_discarded():
    # r3 answers the two gold pairs (a, b) wrongly: accuracy 0 on 2 gold answers
    grades, queues, pool = _panel([
        ("q", "a", "r1", 2), ("q", "a", "r2", 2), ("q", "a", "r3", 0),
        ("q", "b", "r1", 0), ("q", "b", "r2", 0), ("q", "b", "r3", 2),
        ("q", "c", "r1", 1), ("q", "c", "r2", 1), ("q", "c", "r3", 2),
    ])
    gold = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [2, 0]})
    r = aggregate_panel(grades, queues=queues, pool=pool, gold=gold, scale=S,
                        min_accuracy=0.6, min_gold=2, max_spread=1)
    assert r.decisions[["grader", "removed"]].values.tolist() == [["r3", True]]
    acc = r.accuracy.set_index("grader")
    assert acc.loc["r3", ["gold_pairs", "correct", "accuracy", "within_one"]].tolist() == \
        [2, 0, 0.0, 0.0]
    # without r3 every pair is unanimous: nothing queued, spreads 0
    assert r.aggregated[["chunk_id", "grade", "votes", "spread"]].values.tolist() == [
        ["a", 2, 2, 0], ["b", 0, 2, 0], ["c", 1, 2, 0]]
    assert len(r.queue) == 0
    # r3's answers against the known grades: true 0 -> gave 2, true 2 -> gave 0
    assert r.confusion["r3"]["against_gold"] == [[0, 0, 1], [0, 0, 0], [1, 0, 0]]


def test_the_raters_removed_on_gold_are_those_the_aggregation_removes():
    # r3 misses both gold pairs (accuracy 0 on 2 answers); r1 and r2 hit both
    grades, queues, pool = _panel([
        ("q", "a", "r1", 2), ("q", "a", "r2", 2), ("q", "a", "r3", 0),
        ("q", "b", "r1", 0), ("q", "b", "r2", 0), ("q", "b", "r3", 2),
        ("q", "c", "r1", 1), ("q", "c", "r2", 1), ("q", "c", "r3", 2),
    ])
    gold = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [2, 0]})
    assert removed_on_gold(grades, queues=queues, gold=gold, min_accuracy=0.6,
                           min_gold=2) == ["r3"]
    # 2 gold answers are too few when 3 are needed: kept (flagged), not removed
    assert removed_on_gold(grades, queues=queues, gold=gold, min_accuracy=0.6,
                           min_gold=3) == []
    assert removed_on_gold(grades, queues=queues, gold=None, min_accuracy=0.6,
                           min_gold=2) == []


def test_a_pair_left_without_a_kept_rater_goes_to_the_expert():
    grades, queues, pool = _panel([("q", "a", "r1", 2), ("q", "a", "r2", 0)])
    pool = pd.concat([pool, pd.DataFrame({"query_id": ["q"], "chunk_id": ["z"]})])
    r = aggregate_panel(grades, queues=queues, pool=pool, gold=None, scale=S)
    assert r.queue[["chunk_id", "reason"]].values.tolist()[-1] == ["z", "no kept rater graded it"]


def test_a_grade_outside_the_raters_queue_is_refused():
    grades, queues, pool = _panel([("q", "a", "r1", 2), ("q", "a", "r2", 0)])
    grades = pd.concat([grades, pd.DataFrame([("q", "a", "r9", 1)], columns=grades.columns)])
    with pytest.raises(InputError, match=r"r9: pair \(q, a\): a rater graded a pair that is "
                                         "not in their queue"):
        aggregate_panel(grades, queues=queues, pool=pool, gold=None, scale=S)


def test_dawid_skene_posteriors_after_one_em_step_match_the_hand_computation():
    # Binary scale, pairs a (1, 1) and b (0, 1) from raters r1, r2. Start: vote shares
    # T_a = (0, 1), T_b = (1/2, 1/2). M-step: priors (1/4, 3/4); r1's row for true 0 is
    # (1, ~0) (only b, given 0), for true 1 (1/3, 2/3); r2 gives 1 whatever the truth.
    # E-step: a: 1/4 * ~0 against 3/4 * 2/3 -> P(1) = 1 - 1e-10; b: 1/4 * 1 * 1 = 1/4
    # against 3/4 * 1/3 * 1 = 1/4 -> (1/2, 1/2) but for the 1e-10 floors: r1's true-0 row
    # is (1 - 2e-10, 2e-10), r2's true-0 row (2e-10, 1 - 2e-10) and true-1 row
    # (6.7e-11, 1 - 6.7e-11), so P_b(1) = 1/2 + (4e-10 - 2/3 * 1e-10) / 4 = 1/2 + 8.33e-11.
    g = pd.DataFrame({"query_id": ["q"] * 4, "chunk_id": ["a", "a", "b", "b"],
                      "grader": ["r1", "r2", "r1", "r2"], "grade": [1, 1, 0, 1]})
    ds = dawid_skene(g, scale=[0, 1], max_iter=1)
    post = ds.posteriors
    assert post.loc[("q", "a")].tolist() == pytest.approx([0.0, 1.0], abs=1e-9)
    assert post.loc[("q", "b")].tolist() == pytest.approx([0.5, 0.5], abs=1e-9)
    assert post.loc[("q", "b")].iloc[1] - 0.5 == pytest.approx(1e-10 * (4 - 2 / 3) / 4,
                                                                 rel=1e-3)
    assert ds.labels[["chunk_id", "grade"]].values.tolist() == [["a", 1], ["b", 1]]
    # the posteriors equal the start (vote shares), so the next M-step moves nothing: EM
    # stops converged after this one step
    assert ds.iterations == 1 and ds.converged is True


def test_the_panel_uses_dawid_skene_when_asked_and_reports_its_matrices():
    grades, queues, pool = _panel([
        ("q", "a", "r1", 2), ("q", "a", "r2", 2), ("q", "a", "r3", 2),
        ("q", "b", "r1", 0), ("q", "b", "r2", 0), ("q", "b", "r3", 0),
    ])
    r = aggregate_panel(grades, queues=queues, pool=pool, gold=None, scale=S,
                        method="dawid-skene")
    assert r.aggregated["grade"].tolist() == [2, 0]
    assert r.dawid_skene["converged"] is True
    assert set(r.confusion["r1"]) == {"against_gold", "against_aggregate", "estimated"}
    assert r.confusion["r1"]["against_aggregate"] == [[1, 0, 0], [0, 0, 0], [0, 0, 1]]


# --- adjudication ---------------------------------------------------------------------------

def _tied():
    grades, queues, pool = _panel([
        ("q", "a", "r1", 2), ("q", "a", "r2", 2), ("q", "a", "r3", 2),
        ("q", "b", "r1", 0), ("q", "b", "r2", 2),
    ])
    return aggregate_panel(grades, queues=queues, pool=pool, gold=None, scale=S)


def test_a_tie_with_no_expert_declared_is_an_error_naming_the_pairs():
    r = _tied()
    with pytest.raises(InputError) as e:
        require_expert(r.queue, None)
    assert str(e.value) == ("adjudication.expert: aggregation ties and pairs need "
                            "adjudication but no expert is declared (found (q, b)). Declare a "
                            "grader with role expert and name it in adjudication.expert")


def test_the_experts_grade_and_reason_replace_the_aggregate_with_provenance():
    r = _tied()
    none = pd.DataFrame(columns=["query_id", "chunk_id", "grade", "reason"])
    rows, prov, pending = adjudicate(r.aggregated, r.queue, none, expert="e")
    assert pending.values.tolist() == [["e", "q", "b", "adjudicate"]] and rows.empty
    expert = pd.DataFrame([("q", "b", 2, "the chunk answers it")],
                          columns=["query_id", "chunk_id", "grade", "reason"])
    rows, prov, pending = adjudicate(r.aggregated, r.queue, expert, expert="e")
    assert pending.empty
    assert rows.values.tolist() == [["q", "a", 2, "aggregate of 3 raters: 2,2,2"],
                                    ["q", "b", 2, "the chunk answers it"]]
    # the tie rule had recorded 1 (median of 0 and 2) until the expert's 2 replaced it
    assert prov.values.tolist() == [["q", "b", 1, 2, "e", "the chunk answers it",
                                     "majority tie between grades 0, 2; spread 2 > "
                                     "max_spread 1"]]


def _switched():
    # a: 2,2,2 agree; b: 1,2 a tie of spread 1 (queued by the majority vote only: the
    # spread rule, max_spread 1, queues neither); c: 0,0,2 spread 2 (queued by both)
    grades, queues, pool = _panel([
        ("q", "a", "r1", 2), ("q", "a", "r2", 2), ("q", "a", "r3", 2),
        ("q", "b", "r1", 1), ("q", "b", "r2", 2),
        ("q", "c", "r1", 0), ("q", "c", "r2", 0), ("q", "c", "r3", 2),
    ])
    return {m: aggregate_panel(grades, queues=queues, pool=pool, gold=None, scale=S,
                               method=m, max_spread=1) for m in ("majority", "dawid-skene")}


def test_the_queue_differs_by_method_on_a_tie_of_spread_one():
    r = _switched()
    assert r["majority"].queue["chunk_id"].tolist() == ["b", "c"]
    assert r["dawid-skene"].queue["chunk_id"].tolist() == ["c"]


def test_an_expert_grade_of_a_pair_no_longer_queued_is_set_aside_not_refused():
    # the expert graded majority's queue (b, c); under Dawid-Skene only c is queued: b's
    # grade is set aside and the key keeps Dawid-Skene's aggregate for b
    r = _switched()["dawid-skene"]
    expert = pd.DataFrame([("q", "b", 1, "half an answer"), ("q", "c", 0, "off topic")],
                          columns=["query_id", "chunk_id", "grade", "reason"])
    kept, aside = queued_expert_grades(expert, r.queue)
    assert kept["chunk_id"].tolist() == ["c"] and aside["chunk_id"].tolist() == ["b"]
    rows, prov, pending = adjudicate(r.aggregated, r.queue, expert, expert="e")
    assert pending.empty
    b = r.aggregated.set_index("chunk_id").loc["b", "grade"]
    assert rows[["chunk_id", "grade"]].values.tolist() == [["a", 2], ["b", b], ["c", 0]]
    assert rows.set_index("chunk_id").loc["b", "reason"] == "aggregate of 2 raters: 1,2"
    assert prov[["chunk_id", "grade"]].values.tolist() == [["c", 0]]


def test_a_newly_queued_pair_is_pending_for_the_expert():
    # the expert graded Dawid-Skene's queue (c); the majority vote queues b too: b is owed
    r = _switched()["majority"]
    expert = pd.DataFrame([("q", "c", 0, "off topic")],
                          columns=["query_id", "chunk_id", "grade", "reason"])
    rows, _, pending = adjudicate(r.aggregated, r.queue, expert, expert="e")
    assert rows.empty
    assert pending.values.tolist() == [["e", "q", "b", "adjudicate"]]


def test_gold_answers_never_enter_the_key():
    # r1's grade of b is a gold answer (b is gold, not r1's work); the known gold grade 0
    # and r1's answer 2 must both stay out of the key: b's key grade is r2 and r3's 1.
    grades = pd.DataFrame([("q", "a", "r1", 2), ("q", "a", "r2", 2), ("q", "a", "r3", 2),
                           ("q", "b", "r1", 2), ("q", "b", "r2", 1), ("q", "b", "r3", 1)],
                          columns=["query_id", "chunk_id", "grader", "grade"])
    queues = grades[["grader", "query_id", "chunk_id"]].assign(
        work=[True, True, True, False, True, True], gold=[False, False, False, True, True, True])
    gold = pd.DataFrame({"query_id": ["q"], "chunk_id": ["b"], "grade": [0]})
    r = aggregate_panel(grades, queues=queues, pool=grades[["query_id", "chunk_id"]]
                        .drop_duplicates(), gold=gold, scale=S, min_accuracy=0.0, min_gold=0)
    rows, _, _ = adjudicate(r.aggregated, r.queue, pd.DataFrame(
        columns=["query_id", "chunk_id", "grade", "reason"]), expert=None)
    assert rows[["chunk_id", "grade"]].values.tolist() == [["a", 2], ["b", 1]]
    assert r.aggregated.set_index("chunk_id").loc["b", "votes"] == 2


def test_raters_are_scored_on_the_gold_questions_of_their_queues_only():
    # the gold file knows a, b and c; the draw took a and c as gold questions, so b was
    # graded as plain work and scores no rater
    from relgrade.pipeline.panel import gold_questions

    gold = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "c"],
                         "grade": [2, 1, 0]})
    queues = pd.DataFrame({"grader": ["r1", "r1", "r2", "r2"], "query_id": ["q"] * 4,
                           "chunk_id": ["a", "b", "b", "c"], "work": [True] * 4,
                           "gold": [True, False, False, True]})
    asked = gold_questions(gold, queues)
    assert asked[["chunk_id", "grade"]].values.tolist() == [["a", 2], ["c", 0]]
    assert gold_questions(None, queues) is None


def test_grades_from_an_earlier_assignment_are_set_aside_not_refused():
    # r1 graded b under an earlier deal; b is now r2's: one grade set aside, a and r2's b kept
    from relgrade.pipeline.panel import queued_grades

    grades = pd.DataFrame({"grader": ["r1", "r1", "r2"], "query_id": ["q"] * 3,
                           "chunk_id": ["a", "b", "b"], "grade": [2, 1, 0]})
    queues = pd.DataFrame({"grader": ["r1", "r2"], "query_id": ["q", "q"],
                           "chunk_id": ["a", "b"], "work": [True, True], "gold": [False, False]})
    kept, aside = queued_grades(grades, queues)
    assert aside == 1
    assert kept[["grader", "chunk_id"]].values.tolist() == [["r1", "a"], ["r2", "b"]]
