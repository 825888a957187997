"""Pool-bias checks: unique contributions, leave-one-arm-out, condensed lists, judged@k."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import poolbias

NDCG = "nDCG(dcg='exp-log2')@2"
L3 = np.log2(3)


def _runs(lists: dict) -> pd.DataFrame:
    rows = []
    for arm, per_q in lists.items():
        for qid, chunks in per_q.items():
            for r, c in enumerate(chunks, start=1):
                rows.append({"arm": arm, "query_id": qid, "chunk_id": c, "rank": r,
                             "score": float(10 - r)})
    return pd.DataFrame(rows)


def _key(grades: dict) -> pd.DataFrame:
    return pd.DataFrame([{"query_id": q, "chunk_id": c, "grade": g}
                         for (q, c), g in grades.items()])


# One query, depth 2: x finds a, b; y finds a, d; z finds e, a. Grades a=2, b=1, d=0, e=2.
RUNS = _runs({"x": {"q1": ["a", "b", "c"]}, "y": {"q1": ["a", "d"]}, "z": {"q1": ["e", "a"]}})
KEY = _key({("q1", "a"): 2, ("q1", "b"): 1, ("q1", "d"): 0, ("q1", "e"): 2})
PROV = pd.DataFrame({
    "query_id": ["q1"] * 6, "chunk_id": ["a", "a", "a", "b", "d", "e"],
    "arm": ["x", "y", "z", "x", "y", "z"], "rank": [1, 1, 2, 2, 2, 1],
    "score": [9.0] * 6, "source": ["depth"] * 6})


def test_unique_contributions_are_pairs_no_other_arm_found():
    u = poolbias.unique_contributions(PROV, depth=2)
    assert u.values.tolist() == [["x", "q1", "b"], ["y", "q1", "d"], ["z", "q1", "e"]]


def test_a_pair_another_arm_reached_through_the_tail_is_not_unique():
    prov = pd.concat([PROV, pd.DataFrame({"query_id": ["q1"], "chunk_id": ["e"], "arm": ["x"],
                                          "rank": [7], "score": [1.0], "source": ["tail"]})])
    u = poolbias.unique_contributions(prov, depth=2)
    assert ["z", "q1", "e"] not in u.values.tolist()


def test_leave_one_arm_out_rescore_and_rank_by_hand():
    loo = poolbias.leave_one_arm_out(qrels=KEY, runs=RUNS, provenance=PROV, depth=2,
                                     measures=[NDCG, "R@2"]).set_index(["arm", "measure"])
    idcg = 3 + 3 / L3                                   # gains 3, 3 at ranks 1, 2
    full = {"x": (3 + 1 / L3) / idcg, "y": 3 / idcg, "z": 1.0}
    for arm, v in full.items():
        assert loo.loc[(arm, NDCG), "full"] == pytest.approx(v)
    # z without e: ranks e (now ungraded) then a; ideal is a (2), b (1)
    z = loo.loc[("z", NDCG)]
    assert z["reduced"] == pytest.approx((3 / L3) / (3 + 1 / L3))     # 0.5213
    assert z["change"] == pytest.approx(z["reduced"] - 1.0)
    assert (z["rank_full"], z["rank_reduced"], z["rank_change"]) == (1, 3, 2)
    assert (z["removed_pairs"], z["removed_relevant"]) == (1, 1)
    # recall: relevant {a, b, e} -> z finds 2 of 3; after removal {a, b} -> 1 of 2
    assert loo.loc[("z", "R@2"), "full"] == pytest.approx(2 / 3)
    assert loo.loc[("z", "R@2"), "reduced"] == pytest.approx(1 / 2)
    # y's unique chunk d was graded 0: removing it changes nothing
    assert loo.loc[("y", NDCG), "change"] == pytest.approx(0.0)
    assert loo.loc[("y", NDCG), "removed_relevant"] == 0


def test_a_query_left_with_nothing_relevant_drops_out_of_the_reduced_mean():
    runs = _runs({"x": {"q1": ["a"], "q2": ["m"]}, "y": {"q1": ["a"], "q2": ["n"]}})
    key = _key({("q1", "a"): 1, ("q2", "m"): 2, ("q2", "n"): 0})
    prov = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"], "chunk_id": ["a", "a", "m", "n"],
                         "arm": ["x", "y", "x", "y"], "rank": [1, 1, 1, 1], "score": [1.0] * 4,
                         "source": ["depth"] * 4})
    loo = poolbias.leave_one_arm_out(qrels=key, runs=runs, provenance=prov, depth=1,
                                     measures=["R@1"]).set_index("arm")
    assert (loo.loc["x", "queries_full"], loo.loc["x", "queries_reduced"]) == (2, 1)
    assert loo.loc["x", "full"] == pytest.approx(1.0)
    assert loo.loc["x", "reduced"] == pytest.approx(1.0)     # only q1 is left, found


def test_condensed_list_moves_judged_chunks_into_the_places_of_unjudged_ones():
    runs = _runs({"w": {"q1": ["u", "a", "b"]}})
    key = _key({("q1", "a"): 2, ("q1", "b"): 1})
    cond = poolbias.condensed_runs(runs, key)
    assert cond["chunk_id"].tolist() == ["a", "b"]
    assert len(runs) == 3                                   # input untouched
    out = poolbias.condensed_scores(qrels=key, runs=runs, measures=[NDCG, "Judged@2"])
    row = out.set_index("measure").loc[NDCG]
    assert row["standard"] == pytest.approx((3 / L3) / (3 + 1 / L3))
    assert row["condensed"] == pytest.approx(1.0)
    assert "Judged@2" not in out["measure"].tolist()


def test_condensed_scores_match_pytrec_eval_judged_documents_only():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    g = np.random.default_rng(3)
    qrels, lists = {}, {}
    for q in range(12):
        qid = f"q{q:02d}"
        docs = [f"d{i:02d}" for i in range(30)]
        judged = g.choice(docs, size=12, replace=False)
        qrels[qid] = {d: int(g.integers(0, 3)) for d in judged}
        qrels[qid][judged[0]] = 2                          # something relevant
        lists[qid] = list(g.permutation(docs)[:15])
    runs = _runs({"w": lists})
    key = _key({(q, d): gr for q, ds in qrels.items() for d, gr in ds.items()})
    ours = poolbias.condensed_scores(qrels=key, runs=runs, measures=["nDCG@10", "R@10"])
    ours = ours.set_index("measure")
    run = {q: {d: float(10 - r) for r, d in enumerate(ds, start=1)} for q, ds in lists.items()}
    for flag, col in ((False, "standard"), (True, "condensed")):
        ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_10"},
                                            judged_docs_only_flag=flag)
        res = ev.evaluate(run)
        assert ours.loc["nDCG@10", col] == pytest.approx(
            np.mean([r["ndcg_cut_10"] for r in res.values()]), abs=1e-12)
        assert ours.loc["R@10", col] == pytest.approx(
            np.mean([r["recall_10"] for r in res.values()]), abs=1e-12)


def test_judged_at_k_by_hand():
    runs = _runs({"w": {"q1": ["u", "a", "b"]}})
    key = _key({("q1", "a"): 2, ("q1", "b"): 1})
    j = poolbias.judged_at_k(qrels=key, runs=runs, cutoffs=[1, 2, 3]).set_index("k")
    assert j["judged"].tolist() == pytest.approx([0.0, 1 / 2, 2 / 3])
    assert j["unjudged_share"].tolist() == pytest.approx([1.0, 1 / 2, 1 / 3])


def test_report_bundles_the_three_checks_as_json_rows():
    rep = poolbias.pool_bias_report(qrels=KEY, runs=RUNS, provenance=PROV, depth=2,
                                    measures=[NDCG, "Judged@2"], cutoffs=[2])
    assert rep["unique_pairs"] == {"x": 1, "y": 1, "z": 1}
    assert {r["measure"] for r in rep["leave_one_arm_out"]} == {NDCG}
    assert {r["arm"] for r in rep["judged"]} == {"x", "y", "z"}
    assert [r["judged"] for r in rep["judged"]] == pytest.approx([1.0, 1.0, 1.0])


def test_bad_provenance_or_depth_is_an_input_error():
    with pytest.raises(InputError, match="source"):
        poolbias.unique_contributions(PROV.drop(columns="source"), depth=2)
    with pytest.raises(InputError, match="pool.depth"):
        poolbias.unique_contributions(PROV, depth=0)
