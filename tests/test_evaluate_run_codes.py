"""One run's ids coded once (:func:`relgrade.ranking.run_codes`) and shared by the duplicate
check, the qrels join, uncut RR's deeper look and the coverage note of ``relgrade evaluate``:
the same values and the same errors as when each step codes the ids itself."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade import ranking
from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.evaluation import metrics
from relgrade.ranking import pair_hashes, pair_hashes_of, run_codes, validate_run


def _run(rows):
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "rank", "score"]).astype(
        {"query_id": "str", "chunk_id": "str"})


# q1's list is split in two blocks; q9 is not in the qrels
SPLIT = _run([("q2", "b", 1, 3.0), ("q2", "c", 2, 2.0), ("q1", "a", 1, 9.0),
              ("q9", "z", 1, 1.0), ("q1", "x", 2, 8.0)])


def test_queries_are_coded_first_seen_first_even_when_a_list_is_split():
    codes = run_codes(SPLIT)
    assert codes.query.tolist() == [0, 0, 1, 2, 1]
    assert codes.query.dtype == np.int64
    assert codes.queries.to_pylist() == ["q2", "q1", "q9"]
    # the chunk hashes are the ones every pair hash is built from
    ids = ranking.arrow_ids(SPLIT["chunk_id"])
    assert codes.chunk_hash.tolist() == ranking._text_hash(ids).tolist()
    q = np.array([4, 0, 1, 1, 7])
    assert pair_hashes_of(q, codes.chunk_hash).tolist() == pair_hashes(q, ids).tolist()


def test_a_repeat_in_a_split_list_is_named_with_both_ranks_as_without_codes():
    run = _run([("q1", "a", 1, 3.0), ("q2", "a", 1, 2.0), ("q1", "b", 2, 1.0),
                ("q1", "a", 5, 0.5)])
    messages = []
    for codes in (None, run_codes(run)):
        with pytest.raises(InputError) as e:
            validate_run(run, path="arm.trec", codes=codes)
        messages.append(str(e.value))
    assert messages[0] == messages[1] == (
        "arm.trec: query q1, chunk a: a chunk is listed twice for one query "
        "(found at ranks 1 and 5). List each chunk at most once per query")
    validate_run(SPLIT, codes=run_codes(SPLIT))  # q2's and q1's "a"/"b" differ: no error


def test_codes_of_another_run_or_of_stacked_arms_are_refused():
    other = run_codes(SPLIT.iloc[:3].reset_index(drop=True))
    with pytest.raises(InputError, match="run codes were made for another run"):
        validate_run(SPLIT, codes=other)
    qrels = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grade": [1]})
    with pytest.raises(InputError, match="run codes were made for another run"):
        metrics.per_query(qrels=qrels, run=SPLIT, measures=["RR"], codes=other)
    with pytest.raises(InputError, match="one arm's run"):
        run_codes(SPLIT.assign(arm="bm25"))


# q1: twelve chunks, the relevant "r" tied at 5.0 with "z", which sorts first (chunk ids
# descending), so r is at rank 12; q2: its relevant chunk at rank 3; q9 is not in the qrels
DEEP = _run([("q1", f"c{i:02d}", i, 20.0 - i) for i in range(1, 11)]
            + [("q1", "r", 11, 5.0), ("q1", "z", 12, 5.0)]
            + [("q9", "r", 1, 1.0)]
            + [("q2", f"d{i}", i, 10.0 - i) for i in range(1, 12)])
DEEP_QRELS = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"],
                           "chunk_id": ["r", "c03", "d3", "d5"], "grade": [1, 0, 2, 0]})


@pytest.mark.parametrize("ties", ["score", "rank"])
def test_uncut_rr_past_the_cut_is_the_same_with_shared_codes(ties):
    measures = ["ndcg_cut.10", "recall.10", "recip_rank"]
    codes = run_codes(DEEP)
    validate_run(DEEP, codes=codes)
    shared = metrics.per_query(qrels=DEEP_QRELS, run=DEEP, measures=measures, ties=ties,
                               codes=codes)
    alone = metrics.per_query(qrels=DEEP_QRELS, run=DEEP, measures=measures, ties=ties)
    pd.testing.assert_frame_equal(shared, alone)
    rr = shared[shared["measure"] == "RR"].set_index("query_id")["value"]
    # by score: z before r (equal scores, "z" > "r"); by rank: r's rank 11 comes first
    assert rr.to_dict() == {"q1": 1 / 12 if ties == "score" else 1 / 11, "q2": 1 / 3}
    # q2: grade 2 at rank 3, its only positive grade: (2 / log2 4) / (2 / log2 2) = 0.5
    ndcg = shared[shared["measure"].str.startswith("nDCG")].set_index("query_id")["value"]
    assert ndcg.to_dict() == {"q1": 0.0, "q2": 0.5}
    assert metrics.query_coverage(DEEP_QRELS, DEEP, codes=codes) == (2, (1, "q9"))
    assert metrics.query_coverage(DEEP_QRELS, DEEP) == (2, (1, "q9"))


def test_every_chunk_hashing_alike_is_told_apart_by_the_text(monkeypatch):
    measures = ["ndcg_cut.10", "recall.10", "recip_rank"]
    expected = metrics.per_query(qrels=DEEP_QRELS, run=DEEP, measures=measures)
    monkeypatch.setattr(ranking, "_text_hash", lambda ids: np.zeros(len(ids), np.uint64))
    key = metrics.index_qrels(DEEP_QRELS)  # the key's pair hashes collide too
    codes = run_codes(DEEP)
    validate_run(DEEP, codes=codes)
    got = metrics.per_query(qrels=key, run=DEEP, measures=measures, codes=codes)
    pd.testing.assert_frame_equal(got, expected)
    twice = pd.concat([DEEP, DEEP.iloc[[3]]], ignore_index=True)
    with pytest.raises(InputError, match="query q1, chunk c04: a chunk is listed twice"):
        validate_run(twice, codes=run_codes(twice))


def test_the_command_scores_a_split_list_and_looks_past_the_cut(tmp_path):
    (tmp_path / "key.qrels").write_text(
        "".join(f"{q} 0 {c} {g}\n" for q, c, g in DEEP_QRELS.itertuples(index=False)))
    lines = [f"{q} Q0 {c} {r} {s} t\n" for q, c, r, s in DEEP.itertuples(index=False)]
    # q2's list split around q9's row: still one ranked list
    (tmp_path / "arm.trec").write_text("".join(lines[:12] + lines[13:18] + lines[12:13]
                                               + lines[18:]))
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                       str(tmp_path / "arm.trec"), "-m", "recip_rank",
                                       "-m", "ndcg_cut.10", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["runs"]["arm"] == {"RR": (1 / 12 + 1 / 3) / 2, "nDCG@10": 0.25}
    (tmp_path / "dup.trec").write_text("".join(lines) + lines[14])
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                       str(tmp_path / "dup.trec")])
    assert result.exit_code != 0
    assert result.output.strip() == (
        f"Error: {tmp_path / 'dup.trec'}:25: query q2, chunk d2: a chunk is listed twice for "
        "one query (found lines 15 and 25). List each chunk at most once per query")
