"""The log's check on a Parquet log stored sorted by session: where it is cut into ranges of
session ids (hand-computed from the row groups), and that checking it a range at a time gives
the one-pass result and refuses the same logs with the same words."""

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


def write(path, rows, *, row_group_size):
    """``rows`` (tuples in LOG_COLUMNS order) as Parquet, in row groups of that many rows."""
    columns = list(zip(*rows))
    table = pa.table({c: list(v) for c, v in zip(LOG_COLUMNS, columns)})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def sessions_of(lengths, *, ids=None):
    """Clean sessions, session i showing lengths[i] chunks at positions 1..n, clicking the
    first."""
    ids = ids or [f"s{i}" for i in range(len(lengths))]
    return [(sid, "q", f"c{k}", k, int(k == 1), "r", False)
            for sid, n in zip(ids, lengths) for k in range(1, n + 1)]


def bounds(path, *, part_rows, integer=False):
    return L.session_bounds(duckdb.connect(), [str(path)], integer=integer, part_rows=part_rows)


def test_ranges_start_on_row_groups_no_session_spans(tmp_path):
    # Ten sessions of two rows in row groups of four: (s0, s1), (s2, s3), ... (s8, s9). A range
    # holds at least six rows: it ends after two row groups (eight rows), before s4 and s8.
    path = write(tmp_path / "log.parquet", sessions_of([2] * 10), row_group_size=4)
    assert bounds(path, part_rows=6) == ["s4", "s8"]


def test_a_range_ends_inside_a_session_only_once_it_holds_twice_its_rows(tmp_path):
    # Six sessions of three rows in row groups of four: rows of (s0 s0 s0 s1), (s1 s1 s2 s2),
    # (s2 s3 s3 s3), (s4 s4 s4 s5), (s5 s5). With ranges of at least four rows, the end of
    # the first row group splits s1 (not clean, 4 < 2 * 4 rows); the second's splits s2 at
    # eight rows (twice four): cut there, s2 in the second range. The third ends before s4
    # (clean, four rows since); the fourth splits s5 at four rows: no cut.
    path = write(tmp_path / "log.parquet", sessions_of([3] * 6), row_group_size=4)
    assert bounds(path, part_rows=4) == ["s2", "s4"]


def test_integer_session_ids_are_cut_as_numbers(tmp_path):
    # Ids 8, 9, 10, 11: as text "10" < "8", as numbers the row groups are in order.
    rows = [(sid, "q", f"c{k}", k, 0, "r", False) for sid in (8, 9, 10, 11) for k in (1, 2)]
    path = write(tmp_path / "log.parquet", rows, row_group_size=2)
    assert bounds(path, part_rows=2, integer=True) == [9, 10, 11]


def test_no_ranges_for_a_log_not_stored_sorted_by_session_or_too_small(tmp_path):
    rows = sessions_of([2] * 10)
    shuffled = [rows[i] for i in np.random.default_rng(SEED).permutation(len(rows))]
    assert bounds(write(tmp_path / "shuffled.parquet", shuffled, row_group_size=4),
                  part_rows=6) == []
    # Twenty rows are fewer than twice eleven: one pass.
    assert bounds(write(tmp_path / "sorted.parquet", rows, row_group_size=4),
                  part_rows=11) == []


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 6,000 rows, so that a log of a few thousand sessions is cut into several;
    the compiled pass, which would settle a clean sorted log before the ranges are read,
    is left out (tests/test_clicks_log_scan.py checks it against the SQL check)."""
    monkeypatch.setattr(L, "PART_ROWS", 6000)
    monkeypatch.setattr(L, "_compiled_check", lambda con, pair_weights=None: None)


def test_a_sorted_log_checked_a_range_at_a_time_gives_the_one_pass_result(tmp_path,
                                                                          small_ranges):
    frame, _, _ = simulate_log(SEED, sessions=3000, randomized_share=0.3)
    frame = frame.sort_values(["session_id", "position"], ignore_index=True)
    # Sessions of ten rows in row groups of 2,000 (200 sessions): a range every three.
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=2000)
    assert bounds(path, part_rows=L.PART_ROWS) == ["s000600", "s001200", "s001800", "s002400"]
    con = duckdb.connect()
    one = ClickLog.from_relation(con, con.read_parquet(str(path)), source="log.parquet")
    ranges = engine.open_log(path)
    assert (ranges.rows, ranges.sessions) == (one.rows, one.sessions) == (30000, 3000)
    for column in L.PATTERN_COLUMNS:
        assert ranges.patterns[column].dtype == one.patterns[column].dtype
        np.testing.assert_array_equal(ranges.patterns[column], one.patterns[column])
    # The same curve, draw for draw.
    a = PR.randomization(one, rng=np.random.default_rng(SEED), n_boot=200)
    b = PR.randomization(ranges, rng=np.random.default_rng(SEED), n_boot=200)
    assert a.to_dict() == b.to_dict()


@pytest.mark.parametrize("break_at,message", [
    # s1 (first range) and s7 (a later one) each repeat a chunk: the first by id is named.
    ({"s1": ("s1", "q", "c1", 2, 0, "r", False), "s7": ("s7", "q", "c1", 2, 0, "r", False)},
     "session s1: a session shows each chunk at most once (found chunk c1 at positions 1, 2)"),
    # s8 (the last range) shows two queries.
    ({"s8": ("s8", "q2", "c2", 2, 0, "r", False)},
     "session s8: a session answers one query from one ranker (found queries q, q2)"),
    # A bad value in the last range.
    ({"s9": ("s9", "q", "c2", 2, 7, "r", False)},
     "session s9, position 2: clicked must be 0 or 1 (or true / false) (found 7)"),
])
def test_a_rule_broken_in_any_range_is_refused_as_in_one_pass(tmp_path, monkeypatch, break_at,
                                                              message):
    # Sessions of three rows in row groups of six (two sessions), ranges of twelve rows.
    monkeypatch.setattr(L, "PART_ROWS", 12)
    rows = [break_at.get(r[0], r) if r[3] == 2 else r for r in sessions_of([3] * 10)]
    path = write(tmp_path / "log.parquet", rows, row_group_size=6)
    assert bounds(path, part_rows=12) == ["s4", "s8"]
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        engine.open_log(path)


def test_a_session_spanning_two_row_groups_at_a_cut_is_checked_whole(tmp_path, monkeypatch):
    # Sessions of three rows in row groups of four (as above, cut before s2 and s4); s2's
    # three rows lie in two row groups and answer two queries: refused, as in one pass.
    monkeypatch.setattr(L, "PART_ROWS", 4)
    rows = sessions_of([3] * 6)
    rows[7] = ("s2", "q2", "c2", 2, 0, "r", False)
    path = write(tmp_path / "log.parquet", rows, row_group_size=4)
    assert bounds(path, part_rows=4) == ["s2", "s4"]
    with pytest.raises(InputError, match=r"session s2: a session answers one query from one "
                                         r"ranker \(found queries q, q2\)"):
        engine.open_log(path)


def test_rows_without_a_session_id_are_counted_once(tmp_path, monkeypatch):
    # A missing id sorts nowhere in the row groups' statistics; its row belongs to the first
    # range only, and is refused by its rule, counted once.
    monkeypatch.setattr(L, "PART_ROWS", 12)
    rows = sessions_of([3] * 10)
    rows[-1] = (None, "q", "c3", 3, 0, "r", False)
    path = write(tmp_path / "log.parquet", rows, row_group_size=6)
    with pytest.raises(InputError, match=r"session_id must be a non-empty string or an "
                                         r"integer \(found an empty value\). 1 row\(s\)"):
        engine.open_log(path)
