"""Translating numbers between two keys: every arm under both, the shift, the order, Kendall's tau."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from relgrade.errors import InputError
from relgrade.evaluation.translate import diff_decisions, kendall_tau_b, pooled_depth, translate


def _run(rows):
    return pd.DataFrame([{"query_id": q, "chunk_id": c, "rank": r, "score": float(10 - r)}
                         for q, c, r in rows])


def _key(rows):
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grade"])


# Arm x ranks a above b (q1) and c above d (q2); arm y the reverse.
RUNS = {"x": _run([("q1", "a", 1), ("q1", "b", 2), ("q2", "c", 1), ("q2", "d", 2)]),
        "y": _run([("q1", "b", 1), ("q1", "a", 2), ("q2", "d", 1), ("q2", "c", 2)])}
# The shallow key graded only what x put first; the deeper key regraded them 0, found b and
# d relevant, and added q3, which neither arm answers.
PREVIOUS = _key([("q1", "a", 1), ("q2", "c", 1)])
CURRENT = _key([("q1", "a", 0), ("q1", "b", 2), ("q2", "c", 0), ("q2", "d", 1),
                ("q3", "e", 1)])


def test_kendall_tau_b_counts_concordant_and_discordant_pairs():
    # ab and ac agree, bc is reversed: (2 - 1) / 3
    assert kendall_tau_b({"a": 0.5, "b": 0.4, "c": 0.3},
                         {"a": 0.6, "b": 0.2, "c": 0.3}) == pytest.approx(1 / 3)


def test_kendall_tau_b_with_ties_divides_by_the_untied_pairs():
    # x ties a and b; of the 3 pairs: ab tied in x, ac concordant, bc concordant;
    # y has no tie: (2 - 0) / sqrt((3 - 1) * (3 - 0)) = 2 / sqrt(6)
    assert kendall_tau_b({"a": 1.0, "b": 1.0, "c": 0.0},
                         {"a": 3.0, "b": 2.0, "c": 1.0}) == pytest.approx(2 / np.sqrt(6))


@pytest.mark.parametrize("x, y", [({"a": 1.0}, {"a": 2.0}),
                                  ({"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 2.0}),
                                  ({"a": 1.0, "b": None}, {"a": 1.0, "b": 2.0})])
def test_kendall_tau_b_is_none_when_undefined(x, y):
    assert kendall_tau_b(x, y) is None


def test_kendall_tau_b_matches_scipy_on_random_scorings_with_ties():
    rng = np.random.default_rng(20261201)
    for n in range(2, 9):
        for _ in range(25):
            # few distinct values, so ties are common
            a, b = rng.integers(0, 4, size=n), rng.integers(0, 4, size=n)
            mine = kendall_tau_b({str(i): float(v) for i, v in enumerate(a)},
                                 {str(i): float(v) for i, v in enumerate(b)})
            theirs = sps.kendalltau(a, b).statistic
            if np.isnan(theirs):
                assert mine is None
            else:
                assert mine == pytest.approx(theirs, abs=1e-12)


def test_every_arm_is_scored_under_both_keys_with_its_shift_and_rank():
    t = translate(runs=RUNS, previous=PREVIOUS, current=CURRENT, measure="RR@10",
                  previous_record={"key_sha256": "0" * 64, "pool_version": "p-old", "round": 1},
                  current_record={"key_sha256": "1" * 64, "pool_version": "p-new", "round": 1})
    # previous: x finds the relevant chunk first in q1 and q2 (RR 1, 1), y second (.5, .5).
    # current: x finds it second (.5, .5), y first (1, 1); q3 is unanswered (0 for both).
    assert t.arms == [
        {"arm": "y", "previous": 0.5, "current": pytest.approx(2 / 3),
         "shift": pytest.approx(2 / 3 - 0.5), "rank_previous": 2, "rank_current": 1},
        {"arm": "x", "previous": 1.0, "current": pytest.approx(1 / 3),
         "shift": pytest.approx(1 / 3 - 1.0), "rank_previous": 1, "rank_current": 2}]
    assert t.order_previous == ["x", "y"] and t.order_current == ["y", "x"]
    assert t.order_changed is True and t.kendall_tau == -1.0
    assert t.previous == {"key_sha256": "0" * 64, "pool_version": "p-old",
                          "rubric_version": None, "round": 1, "queries": 2}
    assert t.current["queries"] == 3 and t.current["pool_version"] == "p-new"
    assert t.queries_shared == 2
    assert t.to_dict()["arms"][0]["arm"] == "y"


def test_the_means_match_pytrec_eval_with_unanswered_queries_counted_as_zero():
    import pytrec_eval

    for key in (PREVIOUS, CURRENT):
        qrels = {}
        for q, c, g in key.itertuples(index=False):
            qrels.setdefault(q, {})[c] = int(g)
        t = translate(runs=RUNS, previous=key, current=key, measure="nDCG@10")
        for row in t.arms:
            run = {}
            for q, c, _, s in RUNS[row["arm"]].itertuples(index=False):
                run.setdefault(q, {})[c] = s
            scored = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
            values = [scored.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels]
            assert row["current"] == pytest.approx(np.mean(values), abs=1e-12)
            assert row["shift"] == 0.0
        assert t.order_changed is False


def test_three_arms_tau_matches_scipy_on_the_arms_scores():
    runs = dict(RUNS, z=_run([("q1", "e", 1), ("q1", "b", 2), ("q2", "d", 1)]))
    t = translate(runs=runs, previous=PREVIOUS, current=CURRENT, measure="RR@10")
    arms = sorted(r["arm"] for r in t.arms)
    prev = [next(r["previous"] for r in t.arms if r["arm"] == a) for a in arms]
    curr = [next(r["current"] for r in t.arms if r["arm"] == a) for a in arms]
    # z: previous RR 0 on q1 and q2 (nothing it retrieves was relevant): 0;
    # current: b at rank 2 (.5), d at rank 1 (1), q3 0: 0.5
    assert dict(zip(arms, curr))["z"] == pytest.approx(0.5)
    assert t.kendall_tau == pytest.approx(sps.kendalltau(prev, curr).statistic)


def test_an_arm_with_nothing_scored_under_a_key_has_no_shift_and_ranks_last():
    only_q9 = _key([("q9", "a", 0)])  # nothing relevant: no query is scored
    t = translate(runs=RUNS, previous=only_q9, current=CURRENT, measure="RR@10")
    assert [r["previous"] for r in t.arms] == [None, None]
    assert [r["shift"] for r in t.arms] == [None, None]
    assert t.order_previous == ["x", "y"]  # by name, none has a score
    assert t.kendall_tau is None and t.previous["queries"] == 0


def test_no_run_is_refused_naming_the_params_key():
    with pytest.raises(InputError) as e:
        translate(runs={}, previous=PREVIOUS, current=CURRENT, measure="RR@10")
    assert str(e.value) == ("arms: no run to translate: the experiment declares no arm. "
                            "declare an arm in params `arms`")


def test_a_key_without_grades_is_refused_naming_the_column():
    with pytest.raises(InputError) as e:
        translate(runs=RUNS, previous=PREVIOUS.drop(columns="grade"), current=CURRENT,
                  measure="RR@10")
    assert str(e.value) == ("the previous key: qrels need the columns query_id, chunk_id, "
                            "grade (found no grade)")


def test_an_unknown_measure_is_refused():
    with pytest.raises(InputError) as e:
        translate(runs=RUNS, previous=PREVIOUS, current=CURRENT, measure="NoSuchMeasure@3")
    assert str(e.value).startswith("NoSuchMeasure@3: unknown measure (found NoSuchMeasure).")


def test_the_inputs_are_not_changed():
    before = {k: v.copy() for k, v in RUNS.items()}, PREVIOUS.copy(), CURRENT.copy()
    translate(runs=RUNS, previous=PREVIOUS, current=CURRENT, measure="RR@10")
    for a, b in itertools.zip_longest(before[0].values(), RUNS.values()):
        pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(before[1], PREVIOUS)
    pd.testing.assert_frame_equal(before[2], CURRENT)


# --- decision files at two revisions ------------------------------------------------------


def _decision(mean, pool="p-1", key="aaaaaaaaaaaa", measure="R@10"):
    return {"measure": measure, "mean": mean, "pool_version": pool, "key": key}


def test_decisions_of_one_pool_compare_arm_by_arm():
    d = diff_decisions({"a": _decision(0.5), "b": _decision(0.25)},
                       {"a": _decision(0.625, key="bbbbbbbbbbbb"), "b": _decision(0.25)})
    assert d["comparable"] is True and d["reason"] == ""
    assert d["pools"] == ("p-1", "p-1")
    assert d["keys"] == ("aaaaaaaaaaaa", "aaaaaaaaaaaa, bbbbbbbbbbbb")
    assert d["arms"] == [{"arm": "a", "measure": "R@10", "old": 0.5, "new": 0.625,
                          "change": 0.125},
                         {"arm": "b", "measure": "R@10", "old": 0.25, "new": 0.25,
                          "change": 0.0}]


def test_decisions_of_two_pool_versions_are_not_comparable():
    d = diff_decisions({"a": _decision(0.5)}, {"a": _decision(0.625, pool="p-2")})
    assert d["comparable"] is False and d["reason"] == "not comparable: pool p-1 vs p-2"
    assert d["arms"][0]["change"] == 0.125  # still shown, for the reader to judge


def test_a_mixed_side_or_another_measure_is_not_comparable():
    mixed = diff_decisions({"a": _decision(0.5)},
                           {"a": _decision(0.5), "b": _decision(0.5, pool="p-2")})
    assert mixed["reason"] == "not comparable: pool p-1 vs p-1, p-2"
    other = diff_decisions({"a": _decision(0.5)}, {"a": _decision(0.5, measure="RR@10")})
    assert other["reason"] == "not comparable: measure R@10 vs RR@10"


def test_a_decision_file_without_a_pool_version_leaves_comparability_unknown():
    old = {"a": {"measure": "R@10", "mean": 0.5}}
    d = diff_decisions(old, {"a": _decision(0.5)})
    assert d["comparable"] is False
    assert d["reason"] == ("comparability unknown: the decision file of a names no pool "
                           "version (written before relgrade recorded it)")


def test_an_arm_on_one_side_only_has_no_change():
    d = diff_decisions({"a": _decision(0.5)}, {"a": _decision(0.5), "new": _decision(0.75)})
    assert d["arms"][1] == {"arm": "new", "measure": "R@10", "old": None, "new": 0.75,
                            "change": None}


def test_a_side_without_decision_files_is_not_comparable_and_is_named():
    d = diff_decisions({}, {"a": _decision(0.5)}, sides=("HEAD~1", "HEAD"))
    assert d["comparable"] is False
    assert d["reason"] == "not comparable: no decision files at HEAD~1"
    assert d["pools"] == ("none", "p-1")
    assert d["arms"] == [{"arm": "a", "measure": "R@10", "old": None, "new": 0.5,
                          "change": None}]
    new = diff_decisions({"a": _decision(0.5)}, {}, sides=("HEAD", "workspace"))
    assert new["reason"] == "not comparable: no decision files at workspace"
    both = diff_decisions({}, {}, sides=("HEAD~1", "HEAD"))
    assert both["comparable"] is False and both["arms"] == []
    assert both["reason"] == "not comparable: no decision files at HEAD~1 or at HEAD"
    same = diff_decisions({}, {}, sides=("HEAD", "HEAD"))
    assert same["reason"] == "not comparable: no decision files at HEAD"


def test_a_model_key_mean_and_a_ppi_estimate_are_not_comparable():
    # a ppi experiment's files before PPI++ decided held the model key's mean (no estimator)
    before = {"a": _decision(0.64), "b": _decision(0.27)}
    after = {"a": _decision(0.59) | {"estimator": "ppi++"},
             "b": _decision(0.05) | {"estimator": "ppi++"}}
    d = diff_decisions(before, after, sides=("HEAD~1", "workspace"))
    assert d["comparable"] is False
    assert d["reason"] == "not comparable: estimator the key's mean vs ppi++"
    assert d["estimators"] == ("the key's mean", "ppi++")
    assert diff_decisions(after, after)["comparable"] is True


# Arm z joined after the previous key froze: its first pair n is not in it.
WITH_NEW = {"x": _run([("q1", "a", 1), ("q1", "b", 2)]),
            "y": _run([("q1", "b", 1), ("q1", "a", 2)]),
            "z": _run([("q1", "n", 1), ("q1", "a", 2)])}
BEFORE_Z = _key([("q1", "a", 1), ("q1", "b", 0)])
AFTER_Z = _key([("q1", "a", 1), ("q1", "b", 0), ("q1", "n", 1)])


def test_an_arm_new_to_the_previous_key_is_left_out_of_tau_and_the_order():
    t = translate(runs=WITH_NEW, previous=BEFORE_Z, current=AFTER_Z, measure="RR@10", depth=2)
    # RR: previous x 1, y 1/2, z 1/2 (n never judged: not relevant); current x 1, y 1/2, z 1
    assert [(r["arm"], r["previous"], r["current"]) for r in t.arms] == [
        ("x", 1.0, 1.0), ("z", 0.5, 1.0), ("y", 0.5, 0.5)]
    assert t.arms_new == ["z"]
    # the full order moved (x > y > z, then x > z > y) through z alone; x > y under both
    assert t.order_previous == ["x", "y", "z"] and t.order_current == ["x", "z", "y"]
    assert t.order_changed is False
    assert t.kendall_tau == 1.0  # over x, y: one concordant pair
    assert t.to_dict()["arms_new"] == ["z"]


def test_without_the_pool_depth_every_arm_counts_in_tau_as_before():
    t = translate(runs=WITH_NEW, previous=BEFORE_Z, current=AFTER_Z, measure="RR@10")
    # pairs xy concordant, xz tied now, yz tied before: 1 / sqrt((3 - 1) (3 - 1)) = 0.5
    assert t.kendall_tau == pytest.approx(0.5)
    assert t.order_changed is True and t.arms_new == []
    assert "arms_new" not in t.to_dict()


def test_a_pool_made_deeper_singles_out_no_arm():
    # at depth 2 the previous key lacks a pair of every arm (x's b, y's a): no arm is new
    shallow = _key([("q1", "a", 1), ("q1", "b", 0)])
    runs = {"x": _run([("q1", "a", 1), ("q1", "c", 2)]),
            "y": _run([("q1", "b", 1), ("q1", "d", 2)])}
    t = translate(runs=runs, previous=shallow, current=shallow, measure="RR@10", depth=2)
    assert t.arms_new == []


def test_the_pool_depth_is_read_from_the_key_as_the_deepest_rank_every_arm_is_held_to():
    # the current key holds x's a, b, y's b, a and z's n, a: every pair, to rank 2
    assert pooled_depth(WITH_NEW, AFTER_Z) == 2
    # the previous key lacks z's first pair n: no arm is held past rank 0 in it
    assert pooled_depth(WITH_NEW, BEFORE_Z) == 0
    # x's second pair c is missing from a key of a and b: x and y are held to rank 1
    runs = {"x": _run([("q1", "a", 1), ("q1", "c", 2)]),
            "y": _run([("q1", "b", 1), ("q1", "a", 2)])}
    assert pooled_depth(runs, BEFORE_Z) == 1
