"""Uncut reciprocal rank without ranking every list in full: ``per_query`` ranks the top k of
each list and ranks whole lists only for queries whose top k holds nothing relevant. Its
values must equal a full sort's, score ties broken as trec_eval breaks them (chunk id
descending as byte strings), and the rank rule (rank, then score, then chunk id)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade import ranking
from relgrade.evaluation import metrics
from relgrade.evaluation.metrics import per_query


def _full_sort_rr(qrels: pd.DataFrame, run: pd.DataFrame, rel: int, ties: str) -> dict:
    """RR of each query by sorting its whole list in Python (trec_eval's rule)."""
    grades = {(q, c): g for q, c, g in qrels[["query_id", "chunk_id", "grade"]]
              .itertuples(index=False)}
    out = {}
    for q, rows in run.groupby("query_id", sort=False):
        items = list(rows[["chunk_id", "rank", "score"]].itertuples(index=False))
        # chunk id descending as bytes: sort ascending by the negated byte values
        def key(t):
            text = tuple(-b for b in t.chunk_id.encode()) + (1,)
            return (t.rank, -t.score, text) if ties == "rank" else (-t.score, text)
        items.sort(key=key)
        out[q] = next((1.0 / (i + 1) for i, t in enumerate(items)
                       if grades.get((q, t.chunk_id), -99) >= rel), 0.0)
    return out


@st.composite
def qrels_and_run(draw):
    n_queries = draw(st.integers(1, 6))
    qrels, run = [], []
    chunks = ["a", "b", "ab", "ba", "c", "d10", "d9", "e", "é", "f", "g", "h"]
    for qi in range(n_queries):
        q = f"q{qi}"
        depth = draw(st.integers(0, len(chunks)))
        listed = draw(st.permutations(chunks))[:depth]
        # few distinct scores: many ties, broken by chunk id
        scores = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=depth,
                               max_size=depth))
        pairs = sorted(zip(listed, scores), key=lambda p: -p[1])  # written score descending
        if draw(st.booleans()):
            pairs = draw(st.permutations(pairs))  # a list not written in score order
        ranks = draw(st.permutations(list(range(1, depth + 1)))) if pairs else []
        run += [(q, c, r, s) for (c, s), r in zip(pairs, ranks)]
        for c in draw(st.lists(st.sampled_from(chunks), unique=True, max_size=6)):
            qrels.append((q, c, draw(st.integers(-1, 3))))
    return (pd.DataFrame(qrels, columns=["query_id", "chunk_id", "grade"]),
            pd.DataFrame(run, columns=["query_id", "chunk_id", "rank", "score"]))


@settings(max_examples=150, deadline=None)
@given(data=qrels_and_run(), ties=st.sampled_from(["score", "rank"]),
       rel=st.integers(1, 2), cutoff=st.integers(1, 4))
def test_uncut_rr_equals_a_full_sort_of_every_list(data, ties, rel, cutoff):
    qrels, run = data
    if qrels.empty:
        return
    expected = _full_sort_rr(qrels, run, rel, ties)
    # with and without a cut measure (which sets how deep the first look goes), and beside
    # NumRet, which reads whole lists and so ranks every list in full as before
    for extra in ([], [f"nDCG@{cutoff}"], [f"R@{cutoff}", "NumRet"]):
        table = per_query(qrels=qrels, run=run, measures=["RR", *extra], ties=ties,
                          relevant_min=rel, on_missing_query="skip")
        got = table[table["measure"] == f"RR(rel={rel})" if rel != 1 else
                    table["measure"] == "RR"]
        values = dict(zip(got["query_id"], got["value"]))
        has_relevant = set(qrels.loc[qrels["grade"] >= rel, "query_id"])
        assert set(values) == has_relevant & set(run["query_id"])
        for q, v in values.items():
            assert v == expected[q], (q, extra)


def test_only_queries_with_nothing_relevant_in_the_top_k_look_deeper(monkeypatch):
    # q1's first relevant chunk is at rank 2 (inside the top 3), q2's at rank 5
    qrels = pd.DataFrame({"query_id": ["q1", "q2"], "chunk_id": ["b", "e"], "grade": [1, 2]})
    run = pd.DataFrame({"query_id": ["q1"] * 5 + ["q2"] * 5,
                        "chunk_id": list("abcde") * 2, "rank": list(range(1, 6)) * 2,
                        "score": [5.0, 4.0, 3.0, 2.0, 1.0] * 2})
    ranked = []
    real = metrics.canonical_order

    def spy(group, *args, **kwargs):
        ranked.append(sorted(set(np.asarray(group).tolist())))
        return real(group, *args, **kwargs)

    monkeypatch.setattr(metrics, "canonical_order", spy)
    table = per_query(qrels=qrels, run=run, measures=["RR", "R@3"])
    rr = table[table["measure"] == "RR"].set_index("query_id")["value"]
    assert rr.to_dict() == {"q1": 1 / 2, "q2": 1 / 5}
    # the first look ranks both lists' top 3; the deeper look orders q2's relevant rows only
    assert ranked == [[0, 1], [1]]


@pytest.mark.parametrize("relevant", [["e"], ["e", "d"]])
def test_hash_collisions_are_told_apart_by_the_text(monkeypatch, relevant):
    # every chunk id hashes alike: one relevant pair per query is matched by hash and checked
    # as text; two relevant pairs hash alike and are matched as text only
    monkeypatch.setattr(ranking, "_text_hash", lambda ids: np.zeros(len(ids), np.uint64))
    qrels = pd.DataFrame({"query_id": ["q1"] * len(relevant), "chunk_id": relevant,
                          "grade": [1] * len(relevant)})
    run = pd.DataFrame({"query_id": ["q1"] * 6, "chunk_id": list("abcdef"),
                        "rank": list(range(1, 7)), "score": [5.0, 4.0, 4.0, 3.0, 2.0, 1.0]})
    table = per_query(qrels=qrels, run=run, measures=["RR", "R@2"])
    # canonical order a, c, b (4.0 tied: c > b), d, e, f
    expected = 1 / 5 if relevant == ["e"] else 1 / 4
    assert table.loc[table["measure"] == "RR", "value"].tolist() == [expected]
