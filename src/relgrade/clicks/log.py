"""The impression log on a DuckDB connection: :class:`ClickLog`, :func:`connect`, :func:`sql`.

:func:`connect` opens DuckDB with relgrade's settings; :class:`ClickLog` checks the caller's
relation against the impression log's rules (see :mod:`relgrade.clicks`) and registers the
typed view every query of the package reads; :func:`sql` reads the package's SQL files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

import duckdb
import numpy as np

from relgrade.errors import InputError
from relgrade.schema import CLICK_LOG

if TYPE_CHECKING:
    import pandas as pd

#: The columns every impression log must have, in the documented order.
LOG_COLUMNS = CLICK_LOG

#: The name of the view relgrade registers over the caller's relation.
RAW_VIEW = "relgrade_clicks_raw"

#: The name of the typed, validated view every query of this package reads.
LOG_VIEW = "relgrade_clicks_log"

#: The name of the typed view over one range of session ids that ``check_log.sql`` reads.
PART_VIEW = "relgrade_clicks_part"

#: About how many rows the check groups at a time when the log is stored sorted by session
#: (:func:`session_bounds`). The check's hash table holds one entry per session of a range,
#: so this bounds its memory (about 35 MiB per million rows of ten-row sessions) whatever
#: the log's size. A range that starts on a row group no session spans costs no CPU (each
#: range reads only its own row groups); one that starts inside a session reads the row
#: group before it twice, so a range ends inside a session only once it holds twice this.
PART_ROWS = 500_000

_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                  "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}
_FLOAT_TYPES = {"FLOAT", "DOUBLE"}

#: What each log column must hold, as every engine words its refusal.
LOG_RULES = {
    "session_id": "session_id must be a non-empty string or an integer",
    "query_id": "query_id must be a non-empty string or an integer",
    "chunk_id": "chunk_id must be a non-empty string or an integer",
    "ranker": "ranker must be a non-empty string or an integer",
    "position": "position must be a whole number of at least 1",
    "clicked": "clicked must be 0 or 1 (or true / false)",
    "randomized": "randomized must be true or false (or 1 / 0)",
}


def sql(name: str) -> str:
    """The text of ``relgrade/clicks/sql/NAME.sql``, read from the installed package.

    Parameters
    ----------
    name : str
        The file's name without ``.sql``, e.g. ``"skip_above"``.

    Returns
    -------
    str
        The SQL text (UTF-8).
    """
    return resources.files(__package__).joinpath("sql", f"{name}.sql").read_text("utf-8")


#: DuckDB's worker threads when the caller names none. One thread checks a log of a million
#: sessions with about a fifth less CPU and half the memory of two: every thread of DuckDB's
#: hash aggregation holds its own table of most of the sessions, which are then merged.
DEFAULT_THREADS = 1


def connect(*, memory_limit: str | None = None,
            threads: int | None = DEFAULT_THREADS) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection set up for logs larger than memory.

    Parameters
    ----------
    memory_limit : str, optional
        DuckDB's memory limit, e.g. ``"4GB"``; DuckDB's default (80% of RAM) when None.
    threads : int or None, default :data:`DEFAULT_THREADS`
        DuckDB's worker threads (at least 1); None leaves DuckDB's default (one per core).
        More threads shorten the wall time on idle cores and cost more CPU-seconds and
        memory in all; no result depends on it (every query whose order matters says
        ``ORDER BY``).

    Returns
    -------
    duckdb.DuckDBPyConnection
        With ``preserve_insertion_order`` off: every query of this package whose order
        matters says ``ORDER BY``, and without the insertion-order guarantee DuckDB can spill
        the pairs' join and sort to its temporary folder instead of failing at the limit.

    Raises
    ------
    InputError
        DuckDB does not accept ``memory_limit``, or ``threads`` is not a whole number of at
        least 1.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise InputError("DuckDB's threads must be a whole number of at least 1",
                         found=str(threads))
    config = {"preserve_insertion_order": False}
    if threads is not None:
        config["threads"] = threads
    con = duckdb.connect(config=config)
    if memory_limit is not None:
        try:
            con.execute("SET memory_limit = $limit", {"limit": str(memory_limit)})
        except duckdb.Error as e:
            raise InputError("not a memory limit DuckDB accepts (e.g. 4GB, 500MB)",
                             found=str(memory_limit),
                             fix=str(e).strip().splitlines()[0]) from None
    return con


def _family(duck_type) -> str:
    text = str(duck_type).upper()
    if text in _INTEGER_TYPES:
        return "integer"
    if text in _FLOAT_TYPES or text.startswith("DECIMAL"):
        return "float"
    if text == "BOOLEAN":
        return "boolean"
    if text == "VARCHAR" or text.startswith("ENUM"):
        return "string"
    return text


def _expression(column: str, family: str) -> str | None:
    """The typed SQL expression for one log column stored as ``family`` (None: refuse)."""
    c = f'"{column}"'
    if column in ("session_id", "query_id", "chunk_id", "ranker"):
        return {"string": f"NULLIF(CAST({c} AS VARCHAR), '')",
                "integer": f"CAST({c} AS VARCHAR)"}.get(family)
    if column == "position":
        return {
            "integer": f"CASE WHEN {c} >= 1 THEN CAST({c} AS BIGINT) END",
            "float": f"CASE WHEN {c} >= 1 AND {c} = floor({c}) AND {c} < 9e18 "
                     f"THEN CAST({c} AS BIGINT) END",
            "string": f"CASE WHEN regexp_full_match(trim(CAST({c} AS VARCHAR)), '[0-9]{{1,18}}') "
                      f"AND CAST(trim(CAST({c} AS VARCHAR)) AS BIGINT) >= 1 "
                      f"THEN CAST(trim(CAST({c} AS VARCHAR)) AS BIGINT) END",
        }.get(family)
    if column == "clicked":
        return {
            "boolean": f"CAST({c} AS INTEGER)",
            "integer": f"CASE WHEN {c} IN (0, 1) THEN CAST({c} AS INTEGER) END",
            "float": f"CASE WHEN {c} IN (0, 1) THEN CAST({c} AS INTEGER) END",
            "string": f"CASE lower(trim(CAST({c} AS VARCHAR))) WHEN '1' THEN 1 WHEN '0' THEN 0 "
                      f"WHEN 'true' THEN 1 WHEN 'false' THEN 0 END",
        }.get(family)
    if column == "randomized":
        return {
            "boolean": c,
            "integer": f"CASE WHEN {c} IN (0, 1) THEN {c} = 1 END",
            "float": f"CASE WHEN {c} IN (0, 1) THEN {c} = 1 END",
            "string": f"CASE lower(trim(CAST({c} AS VARCHAR))) WHEN 'true' THEN true "
                      f"WHEN 'false' THEN false WHEN '1' THEN true WHEN '0' THEN false END",
        }.get(family)
    raise ValueError(column)


@dataclass(frozen=True)
class ClickLog:
    """A validated impression log, open on a DuckDB connection as the view ``LOG_VIEW``.

    Build it with :meth:`from_relation` (a file the caller opened) or :meth:`from_frame`.
    The view reads the caller's relation lazily: every estimator is one or two passes of
    DuckDB over it, never a copy in Python.

    Attributes
    ----------
    con : duckdb.DuckDBPyConnection
        The connection the views live on (the caller's; relgrade adds temporary views
        named ``relgrade_clicks_*`` to it).
    source : str
        What the log was read from, used in every error message (a path).
    rows : int
        Impressions (rows) in the log.
    sessions : int
        Distinct sessions.
    patterns : dict of str to numpy.ndarray, or None
        The sessions' click patterns, read in the same pass as the check, as columns of
        equal length (:data:`PATTERN_COLUMNS`; ``pandas.DataFrame(log.patterns)`` makes
        them a table): one entry per distinct combination of the masks ``shown``,
        ``clicks``, ``flagged`` and ``flagged_clicks`` (uint64; bit ``k - 1`` set when
        position ``k`` is shown / clicked / flagged randomized / both flagged and clicked in
        the session) with the number of ``sessions`` (int64) that have it. Columns rather
        than a DataFrame, so that a command that reads only the patterns never imports
        pandas. None when the
        log shows a position above 64 (the masks cannot hold it) or the log was not built by
        :meth:`from_relation`; the estimators then read the log with SQL instead.
    compiled_pairs : CompiledPairs or None
        The log's skip-above pairs for the weights given to :meth:`from_relation`
        (``pair_weights``), made by the compiled pass while it checked the log; None when
        no weights were given or the compiled pass did not settle the log (the pairs are
        then made by ``sql/skip_above.sql``).
    """

    con: duckdb.DuckDBPyConnection
    source: str
    rows: int
    sessions: int
    patterns: dict | None = field(default=None, repr=False, compare=False)
    compiled_pairs: CompiledPairs | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_relation(cls, con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation,
                      *, source: str, files: list[str] | None = None,
                      pair_weights=None) -> "ClickLog":
        """Validate ``relation`` as an impression log and open it as ``LOG_VIEW`` on ``con``.

        Parameters
        ----------
        con : duckdb.DuckDBPyConnection
            The connection ``relation`` belongs to.
        relation : duckdb.DuckDBPyRelation
            The log, with at least the columns of :data:`LOG_COLUMNS` (others are ignored).
            Ids may be stored as strings or integers; ``position`` as an integer, a whole
            float or a string of digits; ``clicked`` and ``randomized`` as booleans, 0 / 1
            or the strings ``true`` / ``false`` / ``1`` / ``0`` (a CSV read as text).
        source : str
            The file the log came from, for error messages.
        files : list of str, optional
            The Parquet files ``relation`` reads, when it reads Parquet. If their row groups'
            statistics show the log stored sorted by session id, the compiled pass is tried
            first (:func:`_compiled_check`; string session ids only), and the SQL check
            reads it one range of session ids at a time (:func:`session_bounds`);
            otherwise, and when None, the SQL check reads it in one pass. Either way the
            result is the same.
        pair_weights : dict of str to numpy.ndarray, optional
            ``position`` and ``weight`` columns (:func:`relgrade.clicks.pairs.weight_columns`):
            when given and the compiled pass settles the log, it also makes the log's
            skip-above pairs with these weights (:attr:`compiled_pairs`).

        Returns
        -------
        ClickLog

        Raises
        ------
        InputError
            The log has no rows; a column is missing or has a type that cannot hold its
            values; a value breaks
            its column's rule (a missing or empty id, a position below 1 or not whole,
            clicked not 0/1, randomized not a boolean), naming the first such row by session
            and position; a session shows two chunks at one position, one chunk twice, or
            answers several queries or comes from several rankers, naming the session.

        Notes
        -----
        One pass over the log, grouped by (session, query, ranker), for the row rules and the
        session rules and for :attr:`patterns` (``check_log.sql``, whose per-list state is
        a row count, bit masks of positions and chunk hashes, and a list of 32-bit chunk
        hashes; a row with a bad value or a position above 64 sets no bit, so the position
        mask flags it with the repeated positions). A log that pass flags (a broken rule, a
        chunk hash repeated, a position above 64) is checked again by the exact pass
        (``check_log_exact.sql``), which finds the first row or session breaking a rule and
        words the error, so every bad log is refused with the same message whichever pass
        saw it first. The randomized slice's pairing is checked by the
        randomization estimator, which is its only reader.

        A Parquet log whose row groups are stored in session order (string ids) is first
        read by one compiled pass in stored order (``_log_scan.c``, over the typed view's
        Arrow stream), which needs no grouping: each session is a run of rows. When it
        proves every rule kept (the runs' ids increasing, so no session is two runs) it
        gives the rows, sessions and patterns the grouped pass would; when it cannot (a
        rule broken, rows out of order, a position above 64), the log goes through the
        SQL check below as if the pass had not run, which words any error.

        On a log stored sorted by session, the grouped pass runs once per range of session
        ids, each filtered on the stored ``session_id`` so that DuckDB's Parquet reader reads
        only the row groups of the range: its hash table holds a range's sessions, not the
        log's. No session spans two ranges (rows with a missing id are in the first), so the
        counts add up and the patterns' histograms merge by key into the one-pass result.
        """
        columns = list(relation.columns)
        require_columns(columns, source)
        types = dict(zip(columns, relation.types))
        expressions = {}
        for column in LOG_COLUMNS:
            family = _family(types[column])
            expression = _expression(column, family)
            if expression is None:
                raise InputError(f"column {column} cannot be stored as {str(types[column])}",
                                 path=source, fix=LOG_RULES[column])
            expressions[column] = expression
        relation.create_view(RAW_VIEW, replace=True)
        con.execute(sql("log_view").format(view=LOG_VIEW, source=RAW_VIEW, **expressions))

        # A log stored sorted by session is first offered to the compiled pass, which
        # either proves it clean with its counts and patterns or leaves it to the SQL below.
        if files and _family(types["session_id"]) == "string" and _stored_in_order(con, files):
            settled = _compiled_check(con, pair_weights)
            if settled is not None:
                rows, sessions, patterns, compiled = settled
                if rows == 0:
                    raise InputError("the log has no rows", path=source)
                return cls(con=con, source=str(source), rows=rows, sessions=sessions,
                           patterns=patterns, compiled_pairs=compiled)

        # One grouped pass checks the log and keeps the click patterns of its sessions (one
        # pass per range of sessions when the log is stored sorted by session); only a log
        # it flags is looked at again, by the exact pass that words the error.
        bounds = []
        if files and str(types["session_id"]).upper() in ("VARCHAR", *_INTEGER_TYPES):
            bounds = session_bounds(con, files, part_rows=PART_ROWS,
                                    integer=_family(types["session_id"]) == "integer")
        rows = lists = sessions = flagged = repeated_chunk = 0
        histograms = []
        for where in _part_filters(bounds):
            rows_of = RAW_VIEW if where is None else f"(SELECT * FROM {RAW_VIEW} WHERE {where})"
            con.execute(sql("log_view").format(view=PART_VIEW, source=rows_of, **expressions))
            part = con.execute(sql("check_log")).fetchall()[0]
            rows, lists, sessions, flagged, repeated_chunk = (
                a + b for a, b in zip((rows, lists, sessions, flagged, repeated_chunk), part[:5]))
            histograms.append(part[5])
        histogram = histograms[0] if len(histograms) == 1 else _merge_histograms(histograms)
        if rows == 0:
            raise InputError("the log has no rows", path=source)
        deep = 0
        if flagged or repeated_chunk or lists != sessions:
            rows, sessions, deep = _check_exactly(con, source, expressions)
        return cls(con=con, source=str(source), rows=int(rows), sessions=int(sessions),
                   patterns=None if deep else _patterns(histogram))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, source: str = "<DataFrame>",
                   con: duckdb.DuckDBPyConnection | None = None) -> "ClickLog":
        """Open an impression log held in a DataFrame (tests, small logs).

        Parameters
        ----------
        frame : pandas.DataFrame
            The log with the columns of :data:`LOG_COLUMNS`; not modified.
        source : str, default "<DataFrame>"
            A name for error messages.
        con : duckdb.DuckDBPyConnection, optional
            The connection to use; a new in-memory one by default.

        Returns
        -------
        ClickLog

        Raises
        ------
        InputError
            As :meth:`from_relation`.
        """
        con = duckdb.connect() if con is None else con
        return cls.from_relation(con, con.from_df(frame), source=source)


def _check_exactly(con: duckdb.DuckDBPyConnection, source: str,
                   expressions: dict[str, str]) -> tuple[int, int]:
    """Check the log row by row and session by session, and word the first rule broken.

    Run when ``check_log.sql`` flags the log: a row rule is reported before a session rule,
    the first row (by session id, then position) and the first session (by id) by name.

    Returns
    -------
    tuple of (int, int, int)
        Rows, sessions and rows at a position above 64, when nothing is broken after all
        (two chunk ids of a session whose hashes are equal, or positions above 64 that do
        not repeat).

    Raises
    ------
    InputError
        The first rule broken, as :meth:`ClickLog.from_relation` words it.
    """
    result = con.execute(sql("check_log_exact")).fetchall()[0]
    counts = dict(zip(["rows", *LOG_COLUMNS], result[:len(LOG_COLUMNS) + 1]))
    sessions, deep, *firsts = result[len(LOG_COLUMNS) + 1:]
    for column in LOG_COLUMNS:
        if counts[column]:
            session, position, found = con.execute(sql("bad_value").format(
                column=f'"{column}"', expression=expressions[column])).fetchall()[0]
            where = f"session {session}" if session not in (None, "") else "a row"
            if column != "position" and position is not None:
                where += f", position {position}"
            raise InputError(LOG_RULES[column], path=source, item=where,
                             found="an empty value" if found in (None, "") else found,
                             fix=f"{counts[column]:,} row(s) break this rule")
    rules = ("repeated_position", "repeated_chunk", "several_queries", "several_rankers")
    for rule, session in zip(rules, firsts):
        if session is not None and rule == "repeated_chunk":
            session = _confirm_repeated_chunk(con, session)
        if session is not None:
            rows = con.execute(sql("session_rows"), {"session_id": session}).df()
            raise session_error(rows, source, rule, session)
    return int(counts["rows"]), int(sessions), int(deep)


#: The columns of :attr:`ClickLog.patterns`.
PATTERN_COLUMNS = ("shown", "clicks", "flagged", "flagged_clicks", "sessions")


def _patterns(histogram) -> dict:
    """``check_log.sql``'s histogram of session masks as :attr:`ClickLog.patterns`."""
    keys, counts = (histogram or {}).get("key", []), (histogram or {}).get("value", [])
    columns = {c: np.array([k[c] for k in keys], dtype=np.uint64)
               for c in PATTERN_COLUMNS[:4]}
    columns["sessions"] = np.array(counts, dtype=np.int64)
    return columns


def _merge_histograms(histograms: list) -> dict:
    """Several ranges' histograms of session masks as one, keys in DuckDB's order (by
    ``shown``, then ``clicks``, ``flagged``, ``flagged_clicks``, as unsigned integers)."""
    counts: dict[tuple, int] = {}
    for histogram in histograms:
        for key, n in zip((histogram or {}).get("key", []), (histogram or {}).get("value", [])):
            k = tuple(key[c] for c in PATTERN_COLUMNS[:4])
            counts[k] = counts.get(k, 0) + n
    keys = sorted(counts)
    return {"key": [dict(zip(PATTERN_COLUMNS[:4], k)) for k in keys],
            "value": [counts[k] for k in keys]}


def session_bounds(con: duckdb.DuckDBPyConnection, files: list[str], *, integer: bool,
                   part_rows: int = PART_ROWS) -> list:
    """Where to cut a Parquet log stored sorted by session into ranges checked one at a time.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        A connection to read the files' metadata on (no row is read).
    files : list of str
        The log's Parquet files.
    integer : bool
        Whether ``session_id`` is stored as integers (else as strings).
    part_rows : int, default :data:`PART_ROWS`
        About how many rows a range should hold.

    Returns
    -------
    list of str or list of int
        Increasing session ids, each the first of a range (the first range starts below
        them all): each is the smallest id of a row group, taken once a range holds at least
        ``part_rows`` rows and the row group before ends below it, or once it holds twice
        that (the row group before, which a session spans, is then read by both ranges).
        Empty, for one pass over the whole log, when the log holds fewer than twice
        ``part_rows`` rows, when a row group has no statistics for ``session_id``, or when
        the row groups' ranges of ids overlap (the log is not stored sorted by session, and
        each range would read most row groups).

    Notes
    -----
    The statistics only decide how the work is split; the ranges themselves are exact
    filters on the stored ids, so a file whose statistics are off costs time, never a
    wrong count.
    """
    try:
        groups = con.execute(
            "SELECT row_group_num_rows, stats_min_value, stats_max_value "
            "FROM parquet_metadata($files) WHERE path_in_schema = 'session_id'",
            {"files": [str(f) for f in files]}).fetchall()
    except duckdb.Error:
        return []
    if sum(n for n, _, _ in groups) < 2 * part_rows:
        return []
    if any(lo is None or hi is None for _, lo, hi in groups):
        return []
    if integer:
        try:
            groups = [(n, int(lo), int(hi)) for n, lo, hi in groups]
        except ValueError:
            return []
    groups.sort(key=lambda g: (g[1], g[2]))
    if any(before[2] > after[1] for before, after in zip(groups, groups[1:])):
        return []
    bounds, since = [], 0
    for (n, _, end), (_, start, _) in zip(groups, groups[1:]):
        since += n
        if since >= part_rows and (end < start or since >= 2 * part_rows) \
                and (not bounds or start > bounds[-1]):
            bounds.append(start)
            since = 0
    return bounds


def _stored_in_order(con: duckdb.DuckDBPyConnection, files: list[str]) -> bool:
    """Whether the row groups of ``files``, in the order DuckDB reads them, hold increasing
    ranges of ``session_id``, each starting at or above the last one's end (their
    statistics; no row is read; a session may span two row groups).

    Only decides whether the compiled pass is tried: the pass itself proves the order of the
    rows it reads, and gives the log back to the SQL check when they are out of order.
    """
    try:
        groups = con.execute(
            "SELECT stats_min_value, stats_max_value FROM parquet_metadata($files) "
            "WHERE path_in_schema = 'session_id' ORDER BY list_position($files, file_name), "
            "row_group_id", {"files": [str(f) for f in files]}).fetchall()
    except duckdb.Error:
        return False
    if not groups or any(lo is None or hi is None for lo, hi in groups):
        return False
    return all(before[1] <= after[0] for before, after in zip(groups, groups[1:]))


def _compiled_check(con: duckdb.DuckDBPyConnection,
                    pair_weights=None) -> tuple[int, int, dict, CompiledPairs | None] | None:
    """The check of ``check_log.sql`` as one compiled pass over the typed log, in the order
    the rows are stored (:mod:`relgrade.clicks._log_scan`).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        The connection with the typed view :data:`LOG_VIEW`.
    pair_weights : dict of str to numpy.ndarray, optional
        ``position`` and ``weight``: the pass then also makes the skip-above pairs.

    Returns
    -------
    tuple of (int, int, dict, CompiledPairs or None) or None
        The log's rows, its sessions, :attr:`ClickLog.patterns` (the histogram of the
        sessions' masks in DuckDB's order, as ``check_log.sql`` gives them) and the pairs
        (None without ``pair_weights``), when the pass
        proves that the log breaks no rule: every session one run of rows, the runs' ids
        increasing, no value breaking its column's rule, every position at most 64 and each
        position and chunk at most once per session, one query and one ranker per session.
        None when the compiled module is not built or the pass cannot prove it (a rule
        broken, rows out of session order, a position above 64, a DuckDB error while
        reading): the SQL check then decides, and words any error, as without this pass.
    """
    try:
        from relgrade.clicks import _log_scan
    except ImportError:
        return None
    # The rows in stored order whatever the number of threads (relgrade's connection drops
    # that promise for the other queries; a plain scan keeps it at no cost on one thread).
    # The caller's setting is restored afterwards.
    kept = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    con.execute("SET preserve_insertion_order = true")
    try:
        relation = con.sql(f"SELECT session_id, query_id, ranker, chunk_id, position, clicked, "
                           f"randomized FROM {LOG_VIEW}")
        encoded = None if pair_weights is None else encode_weights(pair_weights)
        status, rows, sessions, keys, counts, made = _log_scan.check_sorted(
            relation.__arrow_c_stream__(), encoded)
    except duckdb.Error:
        return None
    finally:
        con.execute(f"SET preserve_insertion_order = {'true' if kept else 'false'}")
    if status != _log_scan.SETTLED:
        return None
    keys = np.frombuffer(keys, dtype=np.uint64).reshape(-1, 3)
    counts = np.frombuffer(counts, dtype=np.int64)
    histogram = sorted((int(shown), int(clicks), int(flagged), int(clicks & flagged), int(n))
                       for (shown, clicks, flagged), n in zip(keys, counts))
    patterns = {c: np.array([h[i] for h in histogram], dtype=np.uint64)
                for i, c in enumerate(PATTERN_COLUMNS[:4])}
    patterns["sessions"] = np.array([h[4] for h in histogram], dtype=np.int64)
    compiled = None if made is None else CompiledPairs(weights=encoded, table=made)
    return int(rows), int(sessions), patterns, compiled


def encode_weights(weights) -> bytes:
    """The weight of a click at positions 1 to 64 as the compiled pass reads them.

    Parameters
    ----------
    weights : dict of str to numpy.ndarray or pandas.DataFrame
        ``position`` (int) and ``weight`` (float) columns.

    Returns
    -------
    bytes
        64 native float64, the k-th the weight at position k, NaN where ``weights`` has
        none (a click there gives no pair, as in ``sql/clicked.sql``'s join). Positions
        outside 1–64 are left out: a log the compiled pass settles shows none.
    """
    table = np.full(64, np.nan, dtype=np.float64)
    position = np.asarray(weights["position"], dtype=np.int64)
    weight = np.asarray(weights["weight"], dtype=np.float64)
    inside = (position >= 1) & (position <= 64)
    table[position[inside] - 1] = weight[inside]
    return table.tobytes()


@dataclass(frozen=True)
class CompiledPairs:
    """Skip-above pairs made by the compiled pass, and the weights they were made with.

    Attributes
    ----------
    weights : bytes
        :func:`encode_weights` of the weights used.
    table : relgrade.clicks._log_scan.Pairs
        The pairs (``len`` gives how many), columns :data:`relgrade.clicks.pairs.PAIR_COLUMNS`
        in ``sql/skip_above.sql``'s order, read by DuckDB through ``__arrow_c_stream__``.
    """

    weights: bytes
    table: object = field(repr=False)


def _part_filters(bounds: list) -> list[str | None]:
    """The SQL conditions on the stored ``session_id`` of the ranges cut at ``bounds``
    (``[None]``: the whole log). Rows with a missing id fall in the first range."""
    if not bounds:
        return [None]

    def literal(value) -> str:
        return str(int(value)) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"

    edges = [None, *bounds, None]
    column = '"session_id"'
    filters = []
    for lo, hi in zip(edges, edges[1:]):
        if lo is None:
            filters.append(f"{column} IS NULL OR {column} < {literal(hi)}")
        elif hi is None:
            filters.append(f"{column} >= {literal(lo)}")
        else:
            filters.append(f"{column} >= {literal(lo)} AND {column} < {literal(hi)}")
    return filters


def _confirm_repeated_chunk(con, session: str) -> str | None:
    """The first session that really repeats a chunk, given one whose chunk hashes repeat."""
    rows = con.execute(sql("session_rows"), {"session_id": session}).df()
    if rows["chunk_id"].duplicated().any():
        return session
    return con.execute(sql("repeated_chunk_exact")).fetchall()[0][0]


def require_columns(columns: list[str], source: str) -> None:
    """Refuse a log that lacks a column of :data:`LOG_COLUMNS` (every engine's check).

    Raises
    ------
    InputError
        Naming the missing columns, the columns found and the ones a log needs.
    """
    missing = [c for c in LOG_COLUMNS if c not in columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=source,
                         found="columns " + ", ".join(columns),
                         fix="An impression log needs the columns "
                             + ", ".join(LOG_COLUMNS) + " (see docs/clicks.md)")


def session_error(rows: pd.DataFrame, source: str, rule: str, session: str) -> InputError:
    """The error for a session that breaks a session rule, from that session's rows.

    Parameters
    ----------
    rows : pandas.DataFrame
        The session's rows: ``position``, ``chunk_id``, ``query_id``, ``ranker``.
    source : str
        The log's path.
    rule : {"repeated_position", "repeated_chunk", "several_queries", "several_rankers"}
        The rule broken.
    session : str
        The session's id.

    Returns
    -------
    InputError
        Naming the session and what it holds (the position shown twice, the chunk shown
        twice, or the queries or rankers it mixes).
    """
    if rule == "repeated_position":
        counts = rows["position"].value_counts()
        position = int(counts[counts > 1].index.min())
        shown = rows.loc[rows["position"] == position, "chunk_id"].astype(str).tolist()
        return InputError("a session shows one chunk per position", path=source,
                          item=f"session {session}",
                          found=f"position {position} holds {', '.join(shown)}")
    if rule == "repeated_chunk":
        counts = rows["chunk_id"].value_counts()
        chunk = sorted(counts[counts > 1].index)[0]
        positions = rows.loc[rows["chunk_id"] == chunk, "position"].astype(str).tolist()
        return InputError("a session shows each chunk at most once", path=source,
                          item=f"session {session}",
                          found=f"chunk {chunk} at positions {', '.join(positions)}")
    column = "query_id" if rule == "several_queries" else "ranker"
    values = sorted(rows[column].astype(str).unique())
    what = "queries" if column == "query_id" else "rankers"
    return InputError("a session answers one query from one ranker", path=source,
                      item=f"session {session}",
                      found=f"{what} {', '.join(values)}",
                      fix="Give each result list shown its own session_id")
