"""Scoring a run whose ranked lists are one ordered block each by index arithmetic on the
blocks: the top rows with the ties at the cut, each list's length, uncut RR's deeper look,
and the qrels join of a run whose pairs the scan proved distinct. The values are the ones
the row-by-row paths give, and hand-computed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

from relgrade import ranking
from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.evaluation import metrics
from relgrade.io import trec_scan
from relgrade.io.trec_scan import read_run_coded
from relgrade.ranking import validate_run

# q1: b, c, d tie with the cut's 2nd row (b), so all three are ranked: a, d, c, b (equal
# scores: chunk id descending), then e, the only relevant chunk, at rank 5.
# q2: y, relevant, at rank 2. q3: one row, nothing relevant retrieved.
# q4: n, relevant, ties with o and p below m: m, p, o, n, so rank 4.
RUN = ("q1 Q0 a 1 5.0 t\nq1 Q0 b 2 4.0 t\nq1 Q0 c 3 4.0 t\nq1 Q0 d 4 4.0 t\nq1 Q0 e 5 1.0 t\n"
       "q2 Q0 x 1 3 t\nq2 Q0 y 2 2 t\nq2 Q0 z 3 1 t\n"
       "q3 Q0 w 1 1 t\n"
       "q4 Q0 m 1 2.0 t\nq4 Q0 n 2 1.0 t\nq4 Q0 o 3 1.0 t\nq4 Q0 p 4 1.0 t\nq4 Q0 q 5 0.5 t\n")
QRELS = "q1 0 e 1\nq1 0 b 0\nq2 0 y 2\nq3 0 v 1\nq4 0 n 1\nq4 0 m 0\n"
# (P@2, RR) per query, by score and by the rank column (q1: e at rank 5 either way; q4:
# n's rank 2 comes first by rank)
BY_SCORE = {"q1": (0.0, 1 / 5), "q2": (0.5, 1 / 2), "q3": (0.0, 0.0), "q4": (0.0, 1 / 4)}
BY_RANK = {"q1": (0.0, 1 / 5), "q2": (0.5, 1 / 2), "q3": (0.0, 0.0), "q4": (0.5, 1 / 2)}


def _evaluate(tmp_path, monkeypatch, scan: bool, *args):
    (tmp_path / "key.qrels").write_text(QRELS)
    (tmp_path / "arm.trec").write_text(RUN)
    monkeypatch.setattr(trec_scan, "SCAN_MIN_BYTES", 0 if scan else 1 << 62)
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                       str(tmp_path / "arm.trec"), "-m", "P@2", "-m",
                                       "recip_rank", "--per-query", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("ties", ["score", "rank"])
def test_the_blocks_give_the_hand_computed_values_with_and_without_the_scan(
        tmp_path, monkeypatch, ties):
    expected = BY_SCORE if ties == "score" else BY_RANK
    docs = [_evaluate(tmp_path, monkeypatch, scan, "--ties", ties) for scan in (True, False)]
    assert docs[0] == docs[1]
    got = {(row["query_id"], row["measure"]): row["value"] for row in docs[0]["per_query"]}
    assert got == {**{(q, "P@2"): p for q, (p, _) in expected.items()},
                   **{(q, "RR"): rr for q, (_, rr) in expected.items()}}
    assert docs[0]["runs"]["arm"] == {
        "P@2": sum(p for p, _ in expected.values()) / 4,
        "RR": sum(rr for _, rr in expected.values()) / 4}


def test_top_rows_keep_the_ties_at_the_cut_and_tell_each_lists_block():
    # lists 7, 3, 5 (codes); scores descending in each; depth 2
    group = np.array([7, 7, 7, 7, 3, 3, 5, 5, 5])
    score = np.array([9.0, 8.0, 8.0, 1.0, 4.0, 4.0, 6.0, 5.0, 4.0])
    cut, (starts, lengths) = metrics._top_rows(group, score, 2, "score")
    # list 7: rows 0, 1 and row 2 (ties with row 1); list 3: both; list 5: its first two
    assert cut.tolist() == [0, 1, 2, 4, 5, 6, 7]
    assert (starts.tolist(), lengths.tolist()) == ([0, 4, 6], [4, 2, 3])
    # by rank: ranks ascending, row 2's rank ties with row 1's
    rank = np.array([1, 2, 2, 4, 1, 2, 1, 2, 3])
    assert metrics._top_rows(group, rank, 2, "rank")[0].tolist() == [0, 1, 2, 4, 5, 6, 7]
    # a list in two blocks, or out of order: no blocks, nothing cut
    assert metrics._top_rows(np.array([1, 1, 2, 1]), np.ones(4), 1, "score") == (None, None)
    assert metrics._top_rows(group, score[::-1].copy(), 2, "score") == (None, None)
    # every list within the depth: nothing to cut, the blocks still told
    cut, (starts, lengths) = metrics._top_rows(group, score, 4, "score")
    assert cut is None and lengths.tolist() == [4, 2, 3]


def test_a_scanned_run_hashing_alike_everywhere_is_joined_by_the_text(tmp_path,
                                                                       monkeypatch):
    (tmp_path / "key.qrels").write_text(QRELS)
    (tmp_path / "arm.trec").write_text(RUN)
    qrels = pd.DataFrame([line.split() for line in QRELS.splitlines()],
                         columns=["query_id", "iter", "chunk_id", "grade"])
    qrels = qrels.drop(columns="iter").astype({"grade": "int64"})
    run, codes = read_run_coded(tmp_path / "arm.trec", scan=True)
    if not codes.distinct:
        pytest.skip("numba is not installed: the scan reads nothing")
    validate_run(run, codes=codes)
    measures = ["P@2", "recip_rank"]
    expected = metrics.per_query(qrels=qrels, run=run, measures=measures)
    # every pair hash alike: the qrels' lookup holds none, so the ranked rows' index is
    # built, finds them alike, and the text decides
    monkeypatch.setattr(ranking, "_text_hash", lambda ids: np.zeros(len(ids), np.uint64))
    key = metrics.index_qrels(qrels)
    assert key.pair_lookup() is None
    alike = codes.__class__(query=codes.query, queries=codes.queries,
                            chunk_hash=np.zeros(len(run), np.uint64), distinct=True)
    got = metrics.per_query(qrels=key, run=run, measures=measures, codes=alike)
    pd.testing.assert_frame_equal(got, expected)
    value = dict(zip(zip(got["query_id"], got["measure"]), got["value"]))
    assert value[("q4", "RR")] == 1 / 4 and value[("q2", "P@2")] == 0.5


def test_a_ranked_pair_hashing_like_another_qrels_pair_is_caught_by_the_text():
    # the ranked rows' hashes: x's made equal to the qrels pair (q2, y); the join sees two
    # ranked rows on one qrels row and joins on the text instead
    qrels = pd.DataFrame({"query_id": ["q2"], "chunk_id": ["y"], "grade": [2]})
    key = metrics.index_qrels(qrels)
    qs = np.array([0, 0])
    chunks = pa.chunked_array([pa.array(["x", "y"], type=pa.large_string())])
    hashes = ranking._text_hash(chunks)
    y = hashes[1]
    assert metrics._grade_rows(key, qs, chunks, np.array([y, y]), distinct=True) is None
    assert metrics._grade_rows(key, qs, chunks, hashes, distinct=True).tolist() == [1]
    assert metrics._grade_rows(key, qs, chunks, hashes).tolist() == [1]


def test_qrels_read_by_the_reader_are_indexed_without_counting_their_pairs_again(tmp_path):
    qrels = pd.DataFrame({"query_id": ["q2", "q1", "q1"], "chunk_id": ["a", "b", "a"],
                          "grade": [1, 0, 2]})
    checked = metrics.index_qrels(qrels, pairs_checked=True)
    plain = metrics.index_qrels(qrels)
    for name in ("q", "grade", "pair_hash", "ideal_q", "ideal_pos", "ideal_grade"):
        assert np.array_equal(getattr(checked, name), getattr(plain, name)), name
    assert checked.query_ids.to_pylist() == ["q1", "q2"] and checked.q.tolist() == [1, 0, 0]
    twice = pd.concat([qrels, qrels.iloc[[1]]], ignore_index=True)
    with pytest.raises(InputError, match="query q1, chunk b: one .query, chunk. pair is "
                                        "graded twice in the qrels"):
        metrics.index_qrels(twice)
    # the command still refuses a repeated pair: the reader names both lines
    (tmp_path / "key.qrels").write_text("q1 0 b 0\nq1 0 a 2\nq1 0 b 1\n")
    (tmp_path / "arm.trec").write_text(RUN)
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                       str(tmp_path / "arm.trec")])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {tmp_path / 'key.qrels'}:3: ")
    assert "graded twice" in result.output and "lines 1 and 3" in result.output
