"""Partial regrade rounds: which rounds merge, which pairs are regraded, what is owed."""

from __future__ import annotations

import pandas as pd

from relgrade.protocol import bank, regrade


def test_the_chain_of_a_partial_round_runs_back_to_the_last_full_round():
    assert regrade.round_chain(1, {1: "relevant"}) == [1]  # round 1 has nothing before it
    assert regrade.round_chain(4, {4: "relevant", 3: "all", 2: "relevant"}) == [3, 4]
    assert regrade.round_chain(4, {4: "relevant", 3: "relevant", 2: "relevant"}) == [1, 2, 3, 4]
    assert regrade.round_chain(4, {4: "all", 3: "relevant"}) == [4]


def test_the_scope_is_every_pool_pair_either_grader_graded_relevant():
    previous = pd.DataFrame({
        "query_id": ["q", "q", "q", "q", "r", "r"],
        "chunk_id": ["a", "a", "b", "c", "d", "e"],
        "grader": ["g", "x", "g", "x", "g", "g"],
        "grade": [2, 1, 0, 1, 1, 0]})
    # a: 2 and 1; b: 0 only; c: the auditor's 1; d: 1; e: 0; f never graded; d left the pool
    pool = pd.DataFrame({"query_id": ["q", "q", "q", "r", "r"],
                         "chunk_id": ["a", "b", "c", "e", "f"]})
    got = regrade.scope(previous, pool, graders=["g", "x"], relevant_min=1)
    assert list(zip(got["query_id"], got["chunk_id"])) == [("q", "a"), ("q", "c")]
    # with relevant_min 2 only the 2 counts
    got = regrade.scope(previous, pool, graders=["g", "x"], relevant_min=2)
    assert list(zip(got["query_id"], got["chunk_id"])) == [("q", "a")]


def test_pairs_of_a_partial_round_are_owed_as_regrade_by_both_graders_on_audited_queries():
    now = dict(content=pd.Series({"a": "A", "b": "B", "c": "C"}),
               intents=pd.Series({"q": "i", "r": "i"}), rubric_sha256="r")
    rows = [("q", "a", "g", 1, 2), ("q", "b", "g", 1, 0), ("r", "c", "g", 1, 1),
            ("q", "a", "x", 1, 2), ("q", "b", "x", 1, 0)]
    judged = pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "round", "grade"])
    judged = judged.assign(content_sha256=judged["chunk_id"].str.upper(), intent_sha256="i",
                           rubric_sha256="r")
    pool = pd.DataFrame({"query_id": ["q", "q", "r"], "chunk_id": ["a", "b", "c"]})
    scope = regrade.scope(judged, pool, graders=["g", "x"], relevant_min=1)
    left = judged[~regrade.superseded(judged, scope, round=2)]
    pending = bank.pending_work(pool, left, key_grader="g", auditor="x", audit_ids=["q"],
                                regrade=scope, **now)
    # g regrades a and c; x (auditing q) regrades a; b's 0s stand for both
    assert list(pending.itertuples(index=False, name=None)) == [
        ("g", "q", "a", "regrade"), ("g", "r", "c", "regrade"), ("x", "q", "a", "regrade")]
    assert bank.pending_message(pending) == (
        "grading: 2 pairs need g (2 regrade), 1 needs x (1 regrade); "
        "run `relgrade grade run --grader g` or `relgrade serve`")
