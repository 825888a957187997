"""The compiled check of a log stored sorted by session (relgrade.clicks._log_scan): on good
logs it gives the SQL check's rows, sessions and patterns exactly; on every damaged log it
settles nothing, and the log is refused (or accepted) by the SQL check with the same words."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from relgrade.clicks import LOG_COLUMNS, ClickLog, engine
from relgrade.clicks import log as L
from relgrade.clicks import propensity as PR
from relgrade.errors import InputError
from tests.test_clicks_propensity import SEED, simulate_log

_log_scan = pytest.importorskip("relgrade.clicks._log_scan")


def write(path, rows, *, row_group_size=4):
    """``rows`` (tuples in LOG_COLUMNS order) as Parquet, in row groups of that many rows."""
    columns = list(zip(*rows))
    table = pa.table({c: list(v) for c, v in zip(LOG_COLUMNS, columns)})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def sessions_of(lengths):
    """Clean sessions s0, s1, ...: session i shows lengths[i] chunks at positions 1..n,
    clicks the first and the third, and flags positions 1 and 2 as randomized."""
    return [(f"s{i}", "q", f"c{k}", k, int(k in (1, 3)), "r", k <= 2)
            for i, n in enumerate(lengths) for k in range(1, n + 1)]


def compiled(path, threads=1, **settings):
    """What the compiled pass makes of the Parquet log at ``path`` (None: not settled)."""
    con = L.connect(threads=threads)
    for name, value in settings.items():
        con.execute(f"SET {name} = {value}")
    relation = con.read_parquet(str(path))
    types = dict(zip(relation.columns, relation.types))
    expressions = {c: L._expression(c, L._family(types[c])) for c in LOG_COLUMNS}
    relation.create_view(L.RAW_VIEW, replace=True)
    con.execute(L.sql("log_view").format(view=L.LOG_VIEW, source=L.RAW_VIEW, **expressions))
    settled = L._compiled_check(con)
    return None if settled is None else settled[:3]


def by_sql(path):
    """The SQL check's ClickLog of the same file (no files given: one pass, no compiled one)."""
    con = L.connect()
    return ClickLog.from_relation(con, con.read_parquet(str(path)), source=str(path))


def assert_same_log(a, b):
    assert (a.rows, a.sessions) == (b.rows, b.sessions)
    assert (a.patterns is None) == (b.patterns is None)
    if a.patterns is not None:
        for column in L.PATTERN_COLUMNS:
            assert a.patterns[column].dtype == b.patterns[column].dtype
            np.testing.assert_array_equal(a.patterns[column], b.patterns[column])


def test_a_hand_made_log_gives_its_hand_counted_patterns(tmp_path):
    # Sessions of 3, 3 and 2 rows: shown masks 0b111, 0b111, 0b11; clicks at 1 and 3
    # (0b101, 0b101, 0b1); flagged 1 and 2 (0b11 each); flagged clicks 0b1.
    path = write(tmp_path / "log.parquet", sessions_of([3, 3, 2]))
    rows, sessions, patterns = compiled(path)
    assert (rows, sessions) == (8, 3)
    assert patterns["shown"].tolist() == [0b11, 0b111]
    assert patterns["clicks"].tolist() == [0b1, 0b101]
    assert patterns["flagged"].tolist() == [0b11, 0b11]
    assert patterns["flagged_clicks"].tolist() == [0b1, 0b1]
    assert patterns["sessions"].tolist() == [1, 2]
    assert_same_log(engine.open_log(path), by_sql(path))


@pytest.mark.parametrize("share", [0.0, 0.3])
def test_a_simulated_sorted_log_gives_the_sql_checks_result(tmp_path, share):
    frame, _, _ = simulate_log(SEED, sessions=3000, randomized_share=share)
    frame = frame.sort_values(["session_id", "position"], ignore_index=True)
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=2000)
    assert compiled(path) is not None
    fast, slow = engine.open_log(path), by_sql(path)
    assert (fast.rows, fast.sessions) == (30000, 3000)
    assert_same_log(fast, slow)
    if share:
        # The same curve, draw for draw (the patterns' order feeds the bootstrap).
        a = PR.randomization(slow, rng=np.random.default_rng(SEED), n_boot=200)
        b = PR.randomization(fast, rng=np.random.default_rng(SEED), n_boot=200)
        assert a.to_dict() == b.to_dict()


@pytest.mark.parametrize("large,threads", [(False, 1), (True, 1), (False, 2)])
def test_sessions_across_the_streams_batches_are_counted_once(tmp_path, large, threads):
    # 1,400,007 rows in sessions of seven: the Arrow stream's batches (a million rows) end
    # inside a session. With large buffers the strings come with 64-bit offsets; on two
    # threads DuckDB reads the twelve row groups in parallel and still streams them in order.
    path = tmp_path / "log.parquet"
    duckdb.connect().execute(
        "COPY (SELECT 's' || lpad(CAST(i // 7 AS VARCHAR), 7, '0') AS session_id, "
        "'q' || CAST((i // 7) % 13 AS VARCHAR) AS query_id, "
        "'c' || CAST((i * 3) % 7 AS VARCHAR) AS chunk_id, "
        "CAST(i % 7 + 1 AS BIGINT) AS position, CAST(hash(i) % 3 = 0 AS INTEGER) AS clicked, "
        "'r' AS ranker, hash(i // 7) % 5 = 0 AND i % 7 < 2 AS randomized "
        f"FROM range(1400007) t(i)) TO '{path}' (FORMAT parquet)")
    settings = {"arrow_large_buffer_size": "true"} if large else {}
    rows, sessions, patterns = compiled(path, threads, **settings)
    slow = by_sql(path)
    assert (rows, sessions) == (slow.rows, slow.sessions) == (1400007, 200001)
    for column in L.PATTERN_COLUMNS:
        np.testing.assert_array_equal(patterns[column], slow.patterns[column])


# Each damaged log: the rows of sessions_of([3] * 4) with one change, and the SQL check's
# words for it (None: a valid log the compiled pass leaves to the SQL check).
DAMAGES = {
    "repeated chunk": ({5: ("s1", "q", "c1", 3, 1, "r", False)},
                       "session s1: a session shows each chunk at most once "
                       "(found chunk c1 at positions 1, 3)"),
    "repeated position": ({5: ("s1", "q", "c9", 2, 1, "r", False)},
                          "session s1: a session shows one chunk per position "
                          "(found position 2 holds c2, c9)"),
    "two queries": ({7: ("s2", "q2", "c2", 2, 0, "r", True)},
                    "session s2: a session answers one query from one ranker "
                    "(found queries q, q2)"),
    "two rankers": ({11: ("s3", "q", "c3", 3, 1, "r2", False)},
                    "session s3: a session answers one query from one ranker "
                    "(found rankers r, r2)"),
    "clicked 7": ({4: ("s1", "q", "c2", 2, 7, "r", True)},
                  "session s1, position 2: clicked must be 0 or 1 (or true / false) "
                  "(found 7)"),
    "empty chunk": ({2: ("s0", "q", "", 3, 1, "r", False)},
                    "session s0, position 3: chunk_id must be a non-empty string or an "
                    "integer (found an empty value)"),
    "missing query": ({9: ("s3", None, "c1", 1, 1, "r", True)},
                      "session s3, position 1: query_id must be a non-empty string or an "
                      "integer (found an empty value)"),
    "position 0": ({10: ("s3", "q", "c2", 0, 0, "r", True)},
                   "session s3: position must be a whole number of at least 1 (found 0)"),
    "missing session": ({11: (None, "q", "c3", 3, 1, "r", False)},
                        "session_id must be a non-empty string or an integer "
                        "(found an empty value)"),
    "missing randomized": ({0: ("s0", "q", "c1", 1, 1, "r", None)},
                           "session s0, position 1: randomized must be true or false "
                           "(or 1 / 0) (found an empty value)"),
    # Valid logs the compiled pass cannot prove: a position above 64, a session whose rows
    # are not one run, sessions out of order.
    "position 65": ({2: ("s0", "q", "c3", 65, 1, "r", False)}, None),
    "session in two runs": ({6: ("s0", "q", "c9", 4, 0, "r", False)}, None),
    "sessions out of order": ({3: ("s", "q", "c1", 1, 0, "r", False)}, None),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_log_is_left_to_the_sql_check_and_words_the_same(tmp_path, damage):
    changes, message = DAMAGES[damage]
    rows = sessions_of([3] * 4)
    for at, row in changes.items():
        rows[at] = row
    # One row group: the statistics cannot show rows out of order within it.
    path = write(tmp_path / "log.parquet", rows, row_group_size=len(rows))
    assert compiled(path) is None
    if message is None:
        assert_same_log(engine.open_log(path), by_sql(path))
        return
    with pytest.raises(InputError) as sql_error:
        by_sql(path)
    with pytest.raises(InputError) as error:
        engine.open_log(path)
    assert message in str(sql_error.value)
    assert str(error.value).replace(str(path), "LOG") == \
        str(sql_error.value).replace(str(path), "LOG")


def test_an_empty_sorted_log_is_refused_as_before(tmp_path):
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({c: pa.array([], type=t) for c, t in zip(
        LOG_COLUMNS, [pa.string()] * 3 + [pa.int64(), pa.int8(), pa.string(), pa.bool_()])}),
        path)
    with pytest.raises(InputError, match="the log has no rows"):
        engine.open_log(path)


def test_row_groups_out_of_session_order_are_not_offered_to_the_compiled_pass(tmp_path):
    # Row groups (s2, s3), (s0, s1): each in order, the file not.
    rows = sessions_of([2] * 4)
    path = write(tmp_path / "log.parquet", rows[4:] + rows[:4], row_group_size=4)
    con = duckdb.connect()
    assert not L._stored_in_order(con, [str(path)])
    assert L._stored_in_order(con, [str(write(tmp_path / "sorted.parquet", rows))])
    assert_same_log(engine.open_log(path), by_sql(path))


def test_a_stream_of_other_columns_is_not_settled():
    con = duckdb.connect()
    relation = con.sql("SELECT 's' AS session_id, 1 AS position")
    assert _log_scan.check_sorted(relation.__arrow_c_stream__())[0] == _log_scan.NOT_MINE
    with pytest.raises(TypeError):
        _log_scan.check_sorted(object())


@pytest.mark.parametrize("kept", [True, False])
def test_the_callers_insertion_order_setting_is_left_as_it_was(tmp_path, kept):
    path = write(tmp_path / "log.parquet", sessions_of([3, 3, 2]))
    con = duckdb.connect(config={"preserve_insertion_order": kept})
    log = ClickLog.from_relation(con, con.read_parquet(str(path)), source="log.parquet",
                                 files=[str(path)])
    assert (log.rows, log.sessions) == (8, 3)
    setting = "SELECT current_setting('preserve_insertion_order')"
    assert con.execute(setting).fetchall()[0][0] is kept
