"""The whole-list duplicate check ``relgrade evaluate`` makes on every run
(:func:`relgrade.ranking.validate_run`): chunk ids hashed to 64 bits, ties compared as text."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade import ranking
from relgrade.errors import InputError
from relgrade.ranking import validate_run


def _run(rows, arm=None):
    df = pd.DataFrame(rows, columns=["query_id", "chunk_id", "rank", "score"])
    if arm is not None:
        df["arm"] = arm
    return df


def _first_repeat_by_text(df: pd.DataFrame, columns) -> list[int] | None:
    seen: dict = {}
    firsts = []
    for i, key in enumerate(df[columns].itertuples(index=False, name=None)):
        seen.setdefault(key, []).append(i)
    for rows in seen.values():
        if len(rows) > 1:
            firsts.append(rows[:2])
    return min(firsts) if firsts else None


@pytest.mark.parametrize("seed", range(6))
def test_the_first_repeated_pair_in_row_order_is_found(seed):
    rng = np.random.default_rng(seed)
    n = 400
    rows = [(f"q{rng.integers(0, 5)}", f"d{rng.integers(0, 10 ** int(rng.integers(1, 4)))}"
             + "x" * int(rng.integers(0, 20)), i + 1, 1.0) for i in range(n)]
    df = _run(rows)
    got = ranking._repeated_rows(df, ["query_id", "chunk_id"])
    expected = _first_repeat_by_text(df, ["query_id", "chunk_id"])
    assert (None if got is None else got.tolist()) == expected


def test_hash_collisions_are_told_apart_by_the_text(monkeypatch):
    # every chunk id hashes alike: only the text comparison can tell them apart
    monkeypatch.setattr(ranking, "_text_hash", lambda ids: np.zeros(len(ids), np.uint64))
    distinct = _run([("q1", "a", 1, 3.0), ("q1", "b", 2, 2.0), ("q2", "a", 1, 1.0)])
    assert ranking._repeated_rows(distinct, ["query_id", "chunk_id"]) is None
    validate_run(distinct)
    repeated = _run([("q1", "a", 1, 3.0), ("q1", "b", 2, 2.0), ("q1", "c", 3, 1.5),
                     ("q1", "b", 4, 1.0), ("q1", "a", 5, 0.5)])
    assert ranking._repeated_rows(repeated, ["query_id", "chunk_id"]).tolist() == [0, 4]


def test_ids_of_every_length_hash_by_their_own_bytes_only():
    ids = ["", "a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "abcdefgh" * 3, "é", "ü" * 9]
    h = ranking._text_hash(ranking.arrow_ids(pd.Series(ids, dtype="str")))
    assert len(set(h.tolist())) == len(ids)
    # the same id hashes alike wherever it sits in the buffer
    again = ranking._text_hash(ranking.arrow_ids(pd.Series(list(reversed(ids)), dtype="str")))
    assert again.tolist() == list(reversed(h.tolist()))


def test_a_repeat_within_one_arm_is_an_error_naming_both_ranks():
    run = pd.concat([_run([("q1", "a", 1, 2.0), ("q1", "b", 2, 1.0)], arm="bm25"),
                     _run([("q1", "a", 1, 2.0), ("q1", "a", 7, 1.0)], arm="dense")],
                    ignore_index=True)
    with pytest.raises(InputError) as e:
        validate_run(run, path="runs.jsonl")
    assert str(e.value) == ("runs.jsonl: arm dense, query q1, chunk a: a chunk is listed "
                            "twice for one query (found at ranks 1 and 7). List each chunk "
                            "at most once per query")


def test_scoring_joins_on_the_text_when_pair_hashes_tie(monkeypatch):
    from relgrade.evaluation import metrics

    qrels = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["a", "b", "a"],
                          "grade": [2, 1, 1]})
    run = _run([("q1", "b", 1, 3.0), ("q1", "x", 2, 2.0), ("q1", "a", 3, 1.0),
                ("q2", "a", 1, 1.0)])
    measures = ["nDCG@2", "AP", "RR"]
    hashed = metrics.per_query(qrels=qrels, run=run, measures=measures)
    monkeypatch.setattr(metrics, "pair_hashes", lambda codes, ids: np.zeros(len(ids),
                                                                            np.uint64))
    by_text = metrics.per_query(qrels=qrels, run=run, measures=measures)
    pd.testing.assert_frame_equal(hashed, by_text)
    # AP of q1: b at 1 and a at 3 of 2 relevant
    assert hashed["value"].tolist()[2] == pytest.approx((1 / 1 + 2 / 3) / 2)
    with pytest.raises(InputError, match="query q1, chunk b: a chunk is listed twice"):
        metrics.per_query(qrels=qrels, run=pd.concat([run, run.iloc[[0]]]),
                          measures=measures)
