"""The pool-bias checks a block of whole queries at a time (`poolbias.pool_bias_blocks`,
`unique_contributions_blocks`): the same report, number for number and row for row, as
one call over every query, however the queries are cut into blocks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.evaluation import poolbias

MEASURES = ["nDCG(dcg='exp-log2')@5", "R@5", "RR@10", "P@3", "Judged@5"]


def _experiment(seed: int, n_queries: int = 23):
    """Three arms' runs of depth 8 over 12 candidates a query, a key of their top 4 (one
    query's key all 0), and the provenance the pool stage would write."""
    rng = np.random.default_rng(seed)
    queries = [f"q{i:02d}" for i in range(n_queries)]
    runs, prov, key = [], [], {}
    for q in queries:
        cands = [f"{q}-c{j}" for j in range(12)]
        for arm in ("x", "y", "z"):
            picked = rng.permutation(cands)[:8]
            for r, c in enumerate(picked, start=1):
                runs.append({"arm": arm, "query_id": q, "chunk_id": str(c), "rank": r,
                             "score": float(10 - r)})
                if r <= 4:
                    prov.append({"query_id": q, "chunk_id": str(c), "arm": arm, "rank": r,
                                 "score": float(10 - r), "source": "depth"})
                    key[(q, str(c))] = 0 if q == "q03" else int(rng.integers(0, 3))
    runs = pd.DataFrame(runs)
    runs = runs[~((runs["arm"] == "z") & (runs["query_id"] == "q05"))]  # z skips q05
    prov = pd.DataFrame(prov).sort_values(["query_id", "chunk_id", "arm"]).reset_index(drop=True)
    key = pd.DataFrame([{"query_id": q, "chunk_id": c, "grade": g}
                        for (q, c), g in sorted(key.items())])
    key = key[key["query_id"] != "q07"].reset_index(drop=True)  # a query the key dropped
    return key, runs.reset_index(drop=True), prov


def _blocks(key, runs, cuts):
    ids = sorted(key["query_id"].unique())
    edges = [0, *cuts, len(ids)]
    for lo, hi in zip(edges[:-1], edges[1:]):
        mine = set(ids[lo:hi])
        yield (key[key["query_id"].isin(mine)].reset_index(drop=True),
               runs[runs["query_id"].isin(mine)].reset_index(drop=True))


@pytest.mark.parametrize("seed,cuts", [(1, []), (2, [1]), (3, [5, 6, 17]),
                                       (4, list(range(1, 22)))])
def test_the_report_by_blocks_is_the_report_over_every_query(seed, cuts):
    key, runs, prov = _experiment(seed)
    whole = poolbias.pool_bias_report(qrels=key, runs=runs, provenance=prov, depth=4,
                                      measures=MEASURES, cutoffs=[3, 5])
    unique = poolbias.unique_contributions_blocks(
        [prov[prov["query_id"].isin(set(b))] for b in
         np.array_split(np.array(sorted(prov["query_id"].unique())), 4)], depth=4)
    pd.testing.assert_frame_equal(unique, poolbias.unique_contributions(prov, depth=4))
    by_blocks = poolbias.pool_bias_blocks(
        _blocks(key, runs, cuts), unique=unique, arms=["x", "y", "z"], depth=4,
        measures=MEASURES, cutoffs=[3, 5])
    assert by_blocks == whole  # floats equal exactly, rows in the same order


def test_an_arm_left_out_loses_only_the_pairs_it_alone_brought():
    key, runs, prov = _experiment(5, n_queries=4)
    rep = poolbias.pool_bias_blocks(_blocks(key, runs, [1, 2]),
                                    unique=poolbias.unique_contributions(prov, depth=4),
                                    arms=["x", "y", "z"], depth=4, measures=["R@5"],
                                    cutoffs=[5])
    unique = poolbias.unique_contributions(prov, depth=4)
    in_key = unique.merge(key, on=["query_id", "chunk_id"])
    for row in rep["leave_one_arm_out"]:
        assert row["removed_pairs"] == int((in_key["arm"] == row["arm"]).sum())
    assert rep["unique_pairs"] == unique.groupby("arm").size().to_dict()


def test_blocks_values_are_laid_out_as_the_stacked_table_by_arm_then_measure_then_row():
    from relgrade.evaluation.poolbias import _Stacked

    s = _Stacked(["m1", "m2"])
    s.add(pd.DataFrame({"arm": ["b", "a", "a"], "query_id": ["q1"] * 3,
                        "measure": ["m2", "x", "m2"], "value": [1.0, 2.0, 3.0]}))
    s.add(pd.DataFrame({"arm": ["a", "b", "a"], "query_id": ["q2"] * 3,
                        "measure": ["m1", "m2", "m2"], "value": [4.0, 5.0, 6.0]}))
    f = s.frame()
    # a: m1 (asked first), m2, then x (not asked: after the asked ones); then b
    assert f.to_dict("list") == {"arm": ["a", "a", "a", "a", "b", "b"],
                                 "measure": ["m1", "m2", "m2", "x", "m2", "m2"],
                                 "value": [4.0, 3.0, 6.0, 2.0, 1.0, 5.0]}


def test_one_block_is_kept_as_given():
    from relgrade.evaluation.poolbias import _Stacked

    block = pd.DataFrame({"arm": ["b", "a"], "query_id": ["q1", "q1"], "measure": ["m", "m"],
                          "value": [1.0, 2.0]})
    s = _Stacked(["m"])
    s.add(block)
    assert s.frame() is block


def test_each_groups_mean_from_its_own_values_is_the_stacked_tables_group_mean_bit_for_bit():
    from relgrade.evaluation.poolbias import _means, _Stacked

    # a's m: 1e16, 1, 1, -1e16 in stacked order: pandas' compensated group sum keeps both
    # 1s (2 / 4 = 0.5) where adding in order would lose them (0.0)
    s = _Stacked(["m", "n"])
    s.add(pd.DataFrame({"arm": ["a", "b", "a"], "query_id": ["q1"] * 3,
                        "measure": ["m", "m", "n"], "value": [1e16, 0.1, 0.2]}))
    s.add(pd.DataFrame({"arm": ["a", "a", "b", "a"], "query_id": ["q2", "q2", "q2", "q3"],
                        "measure": ["m", "n", "m", "m"], "value": [1.0, 0.7, 0.2, 1.0]}))
    s.add(pd.DataFrame({"arm": ["b", "a", "a"], "query_id": ["q4"] * 3,
                        "measure": ["m", "m", "n"], "value": [0.3, -1e16, 0.1]}))
    got = s.means()
    want = _means(s.frame())
    pd.testing.assert_frame_equal(got, want)
    assert got["mean"].tolist() == want["mean"].tolist()  # bit for bit
    assert got.to_dict("list")["arm"] == ["a", "a", "b"]
    assert got.to_dict("list")["measure"] == ["m", "n", "m"]
    assert got["mean"].iloc[0] == 0.5
    assert got["queries"].tolist() == [4, 3, 3]


def test_one_blocks_means_are_the_blocks_group_means():
    from relgrade.evaluation.poolbias import _means, _Stacked

    block = pd.DataFrame({"arm": ["b", "a", "b"], "query_id": ["q1", "q1", "q2"],
                          "measure": ["m", "m", "m"], "value": [1.0, 2.0, 4.0]})
    s = _Stacked(["m"])
    s.add(block)
    pd.testing.assert_frame_equal(s.means(), _means(block))
    assert s.means().to_dict("list") == {"arm": ["b", "a"], "measure": ["m", "m"],
                                         "mean": [2.5, 2.0], "queries": [2, 1]}


@pytest.mark.parametrize("seed,cuts,parts", [(6, [3, 9], 5), (7, list(range(1, 22)), 23),
                                             (8, [], 3), (9, [11], 1)])
def test_the_unique_pairs_by_provenance_block_beside_the_key_give_the_same_report(
        seed, cuts, parts):
    key, runs, prov = _experiment(seed)
    whole = poolbias.pool_bias_report(qrels=key, runs=runs, provenance=prov, depth=4,
                                      measures=MEASURES, cutoffs=[3, 5])
    pieces = [prov[prov["query_id"].isin(set(b))] for b in
              np.array_split(np.array(sorted(prov["query_id"].unique())), parts)]
    by_blocks = poolbias.pool_bias_blocks(
        _blocks(key, runs, cuts),
        unique=(poolbias.unique_contributions(p, depth=4) for p in pieces),
        arms=["x", "y", "z"], depth=4, measures=MEASURES, cutoffs=[3, 5])
    assert by_blocks == whole


def _pairs(rows):
    return pd.DataFrame(rows, columns=["arm", "query_id", "chunk_id"])


def test_the_unique_pairs_cursor_holds_only_the_queries_not_yet_reached():
    from relgrade.evaluation.poolbias import _UniqueCursor

    parts = iter([_pairs([["x", "q1", "a"], ["y", "q2", "b"], ["x", "q2", "c"]]),
                  _pairs([]),
                  _pairs([["y", "q3", "d"]]),
                  _pairs([["x", "q5", "e"]])])
    cur = _UniqueCursor(parts)
    assert len(cur.held) == 1  # the first part is made at once
    assert cur.of(np.array(["q1"])).values.tolist() == [["x", "q1", "a"]]
    assert [p.values.tolist() for p in cur.held] == [[["y", "q2", "b"], ["x", "q2", "c"]]]
    assert cur.of(np.array(["q2", "q3"])).values.tolist() == [
        ["y", "q2", "b"], ["x", "q2", "c"], ["y", "q3", "d"]]
    assert cur.held == []
    assert len(cur.of(np.array(["q4"]))) == 0  # q5's part read, and kept for later
    assert [p.values.tolist() for p in cur.held] == [[["x", "q5", "e"]]]
    assert cur.totals() == {"x": 3, "y": 2}


def test_a_bad_provenance_is_refused_before_any_block_is_scored():
    def key_blocks():
        raise AssertionError("scored before the provenance was checked")
        yield

    with pytest.raises(poolbias.InputError, match="provenance lacks column"):
        poolbias.pool_bias_blocks(
            key_blocks(), arms=["x"], depth=4, measures=["R@5"], cutoffs=[5],
            unique=(poolbias.unique_contributions(p, depth=4)
                    for p in [pd.DataFrame({"query_id": ["q"]})]))
