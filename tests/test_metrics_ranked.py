"""Scoring rows ranked elsewhere (``metrics.per_query_ranked``, what ``relgrade evaluate
--engine spark`` scores): the rows ``ranked_reads`` names give every value ``per_query``
gives on the whole run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import metrics

QRELS = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q3"],
                      "chunk_id": ["a", "b", "c", "d", "e"], "grade": [2, 0, 1, 1, 0]})


def ranked_rows(qrels: pd.DataFrame, run: pd.DataFrame, depth, levels, ties="score"):
    """Rank a run as trec_eval does (pandas sort: score descending, then chunk id
    descending; with ties="rank" the rank column first) and keep the rows the measures read,
    as an engine outside the library would hand them over."""
    run = run[run["query_id"].isin(set(qrels["query_id"]))].copy()
    keys = (["rank"] if ties == "rank" else []) + ["score", "chunk_id"]
    run = run.sort_values(["query_id"] + keys,
                          ascending=[True] + ([True] if ties == "rank" else []) + [False, False],
                          kind="mergesort")
    run["pos"] = run.groupby("query_id").cumcount() + 1
    run["n_ret"] = run.groupby("query_id")["chunk_id"].transform("size")
    run = run.merge(qrels, on=["query_id", "chunk_id"], how="left")
    keep = np.ones(len(run), bool) if depth is None else (run["pos"] <= depth).to_numpy().copy()
    for level in levels:
        rel = run["pos"].where(run["grade"] >= level)
        first = rel.groupby(run["query_id"]).transform("min")
        keep |= (run["pos"] == first).to_numpy()
    run = run[keep].sample(frac=1.0, random_state=3)  # any row order
    return pa.table({"query_id": pa.array(run["query_id"], pa.large_string()),
                     "pos": pa.array(run["pos"], pa.int64()),
                     "grade": pa.array(run["grade"].astype("Int64"), pa.int64()),
                     "n_ret": pa.array(run["n_ret"], pa.int64())})


def test_reads_are_the_deepest_cutoff_and_uncut_rr_levels():
    assert metrics.ranked_reads(["nDCG@10", "R@100", "RR", "RR(rel=2)"]) == (100, (1, 2))
    assert metrics.ranked_reads(["RR"]) == (metrics.DEEP_RR_DEPTH, (1,))
    assert metrics.ranked_reads(["AP", "RR"]) == (None, ())


def test_ranked_rows_give_hand_computed_values():
    # q1 ranked x, c (grade 1), a (grade 2); q2: z, d (grade 1); q3 has nothing relevant
    run = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2", "q9"],
                        "chunk_id": ["x", "c", "a", "z", "d", "d"], "rank": [1, 2, 3, 1, 2, 1],
                        "score": [3.0, 2.0, 2.0, 1.0, 0.5, 1.0]})
    table = ranked_rows(QRELS, run, 10, (1,))
    pq = metrics.per_query_ranked(qrels=QRELS, ranked=table, measures=["RR", "P@2"])
    got = {(q, m): v for q, m, v in pq.itertuples(index=False)}
    # ties at 2.0: chunk id descending puts c before a
    assert got == {("q1", "RR"): 0.5, ("q2", "RR"): 0.5, ("q1", "P@2"): 0.5,
                   ("q2", "P@2"): 0.5}


@pytest.mark.parametrize("ties", ["score", "rank"])
@pytest.mark.parametrize("missing", ["zero", "skip"])
def test_ranked_rows_score_as_the_whole_run(ties, missing):
    rng = np.random.default_rng(30)
    n_q, depth = 300, 40
    qrels = pd.DataFrame({"query_id": np.repeat([f"q{i}" for i in range(n_q)], 8),
                          "chunk_id": [f"c{j}" for j in rng.integers(0, 60, n_q * 8)],
                          "grade": rng.integers(0, 3, n_q * 8)})
    qrels = qrels.drop_duplicates(["query_id", "chunk_id"], ignore_index=True)
    rows = []
    for i in range(n_q + 20):  # 20 queries the qrels lack; some left unanswered
        if rng.random() < 0.05:
            continue
        chunks = rng.choice(60, size=depth, replace=False)
        score = np.round(rng.normal(size=depth), 1)  # coarse: ties at every cut
        rows.append(pd.DataFrame({"query_id": f"q{i}", "chunk_id": [f"c{c}" for c in chunks],
                                  "rank": rng.permutation(depth) + 1, "score": score}))
    run = pd.concat(rows, ignore_index=True)
    for names in (["nDCG(dcg='exp-log2')@10", "R@10", "RR", "RR(rel=2)", "Judged@5",
                   "ERR@20", "RBP(p=0.9)@15"],
                  ["AP", "Bpref", "RR@3", "Rprec", "IPrec@0.5", "NumRet", "nDCG",
                   "RBPResid(p=0.8)"]):
        expected = metrics.per_query(qrels=qrels, run=run, measures=names, ties=ties,
                                     on_missing_query=missing)
        depth_read, levels = metrics.ranked_reads(names)
        got = metrics.per_query_ranked(
            qrels=qrels, ranked=ranked_rows(qrels, run, depth_read, levels, ties),
            measures=names, on_missing_query=missing)
        pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_inferred_measures_are_refused_from_ranked_rows():
    table = ranked_rows(QRELS, pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"],
                                             "rank": [1], "score": [1.0]}), 10, ())
    with pytest.raises(InputError, match="xinfAP@10 cannot be scored from ranked rows"):
        metrics.per_query_ranked(qrels=QRELS, ranked=table, measures=["xinfAP@10"])
