"""The 64-bit hash of an id (:func:`relgrade.ranking.pair_hashes`) depends on the id alone:
not on the longest id beside it in its array or Arrow chunk. Pooling's duplicate and corpus
checks and ``relgrade evaluate``'s join of a run with its qrels compare hashes made in
different arrays, so an id that hashed differently there was missed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from relgrade import ranking
from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.protocol import pool as P


def _ids(*chunks):
    return pa.chunked_array([pa.array(c, type=pa.large_string()) for c in chunks])


def test_an_id_hashes_alike_whatever_stands_beside_it():
    alone = ranking.pair_hashes(np.zeros(1), _ids(["c1"]))
    # beside a 20-byte id (three 8-byte words where "c1" has one), in one chunk or two
    beside = ranking.pair_hashes(np.zeros(2), _ids(["c1", "a-much-longer-id-0001"]))
    split = ranking.pair_hashes(np.zeros(3), _ids(["x" * 17], ["c1", "y"]))
    assert alone[0] == beside[0] == split[1]
    assert beside[1] != alone[0]


def test_a_chunk_listed_twice_across_two_arrow_chunks_is_refused():
    # the run's rows come in two Arrow chunks (as a large file or Parquet row groups give
    # them), the longest id of each having a different number of 8-byte words
    run = pa.table({"query_id": _ids(["q1", "q1"], ["q1", "q1"]),
                    "chunk_id": _ids(["c1", "c2"], ["a-much-longer-id-0001", "c1"]),
                    "rank": pa.array([1, 2, 3, 4], pa.int64()),
                    "score": pa.array([4.0, 3.0, 2.0, 1.0])})
    with pytest.raises(InputError, match="listed twice") as e:
        P.arm_candidates(run, 2)
    assert "query q1, chunk c1" in str(e.value) and "ranks 1 and 4" in str(e.value)


def test_a_run_with_a_long_chunk_id_is_scored_against_its_qrels(tmp_path):
    # q1's relevant chunk c1 is ranked first beside a chunk id of three 8-byte words; q2's
    # relevant d1 is first too: every measure is 1 on both queries
    (tmp_path / "key.qrels").write_text("q1 0 c1 1\nq1 0 c2 0\nq2 0 d1 1\n")
    (tmp_path / "run.trec").write_text(
        "q1 Q0 c1 1 2.0 x\nq1 Q0 a-much-longer-chunk-id 2 1.0 x\nq2 Q0 d1 1 1.0 x\n")
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                       str(tmp_path / "run.trec"), "-m", "RR", "-m",
                                       "nDCG@10", "-m", "R@10"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].split() == ["run", "1.0", "1.0", "1.0"]
