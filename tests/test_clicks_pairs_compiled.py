"""The skip-above pairs made by the compiled pass of a log stored sorted by session
(relgrade.clicks._log_scan): the same rows in the same order as sql/skip_above.sql, written
as the same Parquet bytes; on a damaged or unprovable log, and without the compiled module,
the SQL makes them as before."""

from __future__ import annotations

import sys

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from relgrade import clicks
from relgrade.clicks import engine
from relgrade.clicks import log as L
from relgrade.clicks import pairs as P
from relgrade.errors import InputError
from tests.test_clicks_log_scan import DAMAGES, sessions_of, write
from tests.test_clicks_pairs import HAND, HAND_PAIRS, HAND_PROPENSITY
from tests.test_clicks_propensity import SEED, simulate_log

_log_scan = pytest.importorskip("relgrade.clicks._log_scan")

DUCKDB = engine.get("duckdb")


def both_ways(path, weights, tmp_path):
    """The pairs file written from the compiled pass and from the SQL: (compiled log, the
    compiled file's bytes, the SQL file's bytes)."""
    fast = DUCKDB.open_log(path, weights=weights)
    slow = DUCKDB.open_log(path)
    assert slow.compiled_pairs is None
    a, b = tmp_path / "compiled.parquet", tmp_path / "sql.parquet"
    n = DUCKDB.write_pairs(fast, weights, a)
    m = DUCKDB.write_pairs(slow, weights, b)
    assert n == m == pq.ParquetFile(a).metadata.num_rows
    return fast, a.read_bytes(), b.read_bytes()


def test_the_hand_example_stored_sorted_gives_its_hand_made_pairs(tmp_path):
    # tests/test_clicks_pairs.py's three sessions, each stored in a shuffled position order
    # (the pairs' order is by clicked, then skipped position, not by stored row).
    rows = [HAND[i] for i in (2, 0, 3, 1, 7, 5, 4, 6, 10, 8, 9)]
    path = write(tmp_path / "log.parquet", rows, row_group_size=len(rows))
    weights = P.weight_columns(HAND_PROPENSITY, clip=10)
    log = DUCKDB.open_log(path, weights=weights)
    assert log.compiled_pairs is not None and len(log.compiled_pairs.table) == 6
    got = duckdb.connect().from_arrow(log.compiled_pairs.table)
    assert tuple(got.columns) == P.PAIR_COLUMNS
    assert got.fetchall() == HAND_PAIRS
    fast, a, b = both_ways(path, weights, tmp_path)
    assert a == b


@pytest.mark.parametrize("share,propensity,clip", [
    (0.0, {k: 1 / k for k in range(1, 11)}, 10.0),
    (0.3, {k: 1 / k for k in range(1, 11)}, 3.0),          # clipped weights
    (0.0, {1: 1.0, 2: 0.5, 3: 0.3, 4: 0.2, 5: 0.1}, 10.0),  # clicks below 5 give no pair
    (0.0, {1: 1.0}, 10.0),                                  # no pair at all
])
def test_simulated_logs_give_the_sql_paths_pairs_file_byte_for_byte(tmp_path, share,
                                                                      propensity, clip):
    frame, _, _ = simulate_log(SEED, sessions=3000, randomized_share=share)
    frame = frame.sort_values(["session_id", "position"], ignore_index=True)
    # Each session's rows in a seeded order within the session: the pass reads positions
    # in any order.
    rng = np.random.default_rng(SEED)
    frame = frame.assign(_k=rng.random(len(frame))).sort_values(
        ["session_id", "_k"], ignore_index=True).drop(columns="_k")
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=2000)
    weights = P.weight_columns(propensity, clip=clip)
    fast, a, b = both_ways(path, weights, tmp_path)
    assert fast.compiled_pairs is not None
    assert a == b
    if len(propensity) > 1:
        assert len(fast.compiled_pairs.table) > _log_scan.BATCH_ROWS  # several batches


def test_sessions_across_the_streams_batches_give_their_pairs_once(tmp_path):
    # 1,400,007 rows in sessions of seven: the Arrow stream's batches (a million rows) end
    # inside a session, whose rows the pass keeps across the batches.
    path = tmp_path / "log.parquet"
    duckdb.connect().execute(
        "COPY (SELECT 's' || lpad(CAST(i // 7 AS VARCHAR), 7, '0') AS session_id, "
        "'q' || CAST((i // 7) % 13 AS VARCHAR) AS query_id, "
        "'c' || CAST((i * 3) % 7 AS VARCHAR) AS chunk_id, "
        "CAST(i % 7 + 1 AS BIGINT) AS position, CAST(hash(i) % 3 = 0 AS INTEGER) AS clicked, "
        "'r' AS ranker, false AS randomized "
        f"FROM range(1400007) t(i)) TO '{path}' (FORMAT parquet)")
    weights = P.weight_columns({k: 1 / k for k in range(1, 8)}, clip=10)
    fast, a, b = both_ways(path, weights, tmp_path)
    assert fast.compiled_pairs is not None
    assert a == b


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_log_gets_no_compiled_pairs_and_the_same_refusal_or_pairs(tmp_path,
                                                                           damage):
    changes, message = DAMAGES[damage]
    rows = sessions_of([3] * 4)
    for at, row in changes.items():
        rows[at] = row
    path = write(tmp_path / "log.parquet", rows, row_group_size=len(rows))
    weights = P.weight_columns({1: 1.0, 2: 0.5, 3: 0.25}, clip=10)
    if message is not None:
        with pytest.raises(InputError) as with_weights:
            DUCKDB.open_log(path, weights=weights)
        with pytest.raises(InputError) as without:
            DUCKDB.open_log(path)
        assert str(with_weights.value) == str(without.value)
        assert message in str(with_weights.value)
        return
    fast, a, b = both_ways(path, weights, tmp_path)
    assert fast.compiled_pairs is None
    assert a == b


def test_pairs_asked_with_other_weights_come_from_the_sql(tmp_path):
    path = write(tmp_path / "log.parquet", sessions_of([4] * 9), row_group_size=36)
    opened = P.weight_columns({1: 1.0, 2: 0.5, 3: 0.25, 4: 0.2}, clip=10)
    asked = P.weight_columns({1: 1.0, 2: 0.5, 3: 0.25, 4: 0.2}, clip=4)
    log = DUCKDB.open_log(path, weights=opened)
    assert P.compiled_for(log, opened) is log.compiled_pairs is not None
    assert P.compiled_for(log, asked) is None
    out, expected = tmp_path / "pairs.parquet", tmp_path / "expected.parquet"
    DUCKDB.write_pairs(log, asked, out)
    DUCKDB.write_pairs(DUCKDB.open_log(path), asked, expected)
    assert out.read_bytes() == expected.read_bytes()
    # Each of the nine sessions clicks positions 1 and 3 and skips 2: one pair, weight 4
    # (1 / 0.25, under the clip of 4).
    assert duckdb.connect().read_parquet(str(out)).aggregate(
        "count(*), min(weight), max(weight)").fetchall() == [(9, 4.0, 4.0)]


def test_weights_the_compiled_pass_cannot_follow_are_left_to_the_sql():
    assert P.compiled_weights(None) is None
    twice = {"position": np.array([1, 2, 2]), "weight": np.array([1.0, 2.0, 2.0])}
    assert P.compiled_weights(twice) is None
    nan = {"position": np.array([1, 2]), "weight": np.array([1.0, np.nan])}
    assert P.compiled_weights(nan) is None
    table = np.frombuffer(L.encode_weights({"position": np.array([2, 65, 0]),
                                            "weight": np.array([2.0, 3.0, 4.0])}))
    assert table.shape == (64,) and table[1] == 2.0
    assert np.isnan(np.delete(table, 1)).all()


def test_without_the_compiled_module_the_sql_writes_the_same_file(tmp_path, monkeypatch):
    frame, _, _ = simulate_log(SEED, sessions=500)
    frame = frame.sort_values(["session_id", "position"], ignore_index=True)
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    weights = P.weight_columns({k: 1 / k for k in range(1, 11)}, clip=10)
    built = tmp_path / "built.parquet"
    log = DUCKDB.open_log(path, weights=weights)
    assert log.compiled_pairs is not None
    DUCKDB.write_pairs(log, weights, built)
    # The module not built: its import fails.
    monkeypatch.setitem(sys.modules, "relgrade.clicks._log_scan", None)
    monkeypatch.delattr(clicks, "_log_scan", raising=False)
    log = DUCKDB.open_log(path, weights=weights)
    assert log.compiled_pairs is None
    unbuilt = tmp_path / "unbuilt.parquet"
    DUCKDB.write_pairs(log, weights, unbuilt)
    assert built.read_bytes() == unbuilt.read_bytes()


def test_the_pairs_stream_can_be_read_twice_and_outlives_its_log(tmp_path):
    path = write(tmp_path / "log.parquet", HAND, row_group_size=len(HAND))
    table = DUCKDB.open_log(path, weights=P.weight_columns(HAND_PROPENSITY, clip=10)
                            ).compiled_pairs.table
    con = duckdb.connect()
    assert con.from_arrow(table).fetchall() == HAND_PAIRS
    assert con.from_arrow(table).fetchall() == HAND_PAIRS
    stream = table.__arrow_c_stream__()
    del table
    assert con.from_arrow(_Capsule(stream)).fetchall() == HAND_PAIRS
    with pytest.raises(NotImplementedError):
        DUCKDB.open_log(path, weights=P.weight_columns(HAND_PROPENSITY)
                        ).compiled_pairs.table.__arrow_c_stream__(object())


class _Capsule:
    """An object handing out one stream capsule, made before its table was dropped."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self.capsule


def test_check_sorted_refuses_weights_of_the_wrong_size(tmp_path):
    con = duckdb.connect()
    relation = con.sql("SELECT 's' AS session_id")
    with pytest.raises(ValueError, match="64 float64"):
        _log_scan.check_sorted(relation.__arrow_c_stream__(), b"\0" * 8)
