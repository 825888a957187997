"""Runs: checking them, their canonical ranking, and the integer coding of their ids.

A run is a long table ``query_id`` (str), ``chunk_id`` (str), ``rank`` (int64), ``score``
(float64), plus ``arm`` (str) when several arms' runs are stacked (:data:`relgrade.schema.RUN`,
:data:`relgrade.schema.RUNS`). Pooling and every metric read a run through
:func:`canonical_ranking`, so they all see one and the same order; they code ids as integers
through :func:`id_codes`, :func:`sorted_codes` and :func:`codes_in`, so the id order is
defined once. :func:`run_codes` codes one run's query ids and hashes its chunk ids once, for
the duplicate check of :func:`validate_run` and the qrels join of
:func:`relgrade.evaluation.metrics.per_query` to share. Files of runs are read by
:mod:`relgrade.io.runs`.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.errors import InputError
from relgrade.schema import RUN

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported where a function builds a pandas object, never at module level: the
# pool stage's process works on Arrow tables alone and does not load it (0.26 CPU-s). A
# value can only be a pandas object when pandas is loaded already, so the type checks ask
# sys.modules (:func:`_loaded_pandas`).


def _loaded_pandas():
    """The pandas module when some code has imported it, else None."""
    return sys.modules.get("pandas")

TIES = ("score", "rank")


# --- checking ------------------------------------------------------------------------

def column_names(table) -> list[str]:
    """The column names of a pandas DataFrame or a pyarrow Table, in order.

    Parameters
    ----------
    table : pandas.DataFrame or pyarrow.Table

    Returns
    -------
    list of str

    Examples
    --------
    >>> column_names(pa.table({"query_id": arrow_strings(["q1"])}))
    ['query_id']
    """
    if isinstance(table, pa.Table):
        return table.column_names
    return [str(c) for c in table.columns]


def float_values(values) -> np.ndarray:
    """A column of numbers as float64, a missing value as NaN.

    Parameters
    ----------
    values : pandas.Series, pyarrow.Array or pyarrow.ChunkedArray, shape (n,)
        Numbers (an integer or float type).

    Returns
    -------
    ndarray of float64, shape (n,)
        A float64 Arrow column without nulls is read from its buffer (:func:`numpy_values`),
        not copied.
    """
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if values.null_count:
            return np.asarray([np.nan if v is None else v for v in values.to_pylist()],
                              dtype=np.float64)
        return numpy_values(values).astype(np.float64, copy=False)
    return values.to_numpy(dtype=np.float64, na_value=np.nan)


def _group_columns(run) -> list[str]:
    return ["arm", "query_id"] if "arm" in column_names(run) else ["query_id"]


def _cell(run, column: str, row: int):
    """One value of a DataFrame's or an Arrow table's column, as a Python object."""
    if isinstance(run, pa.Table):
        return run[column][row].as_py()
    return run[column].iat[row]


def _row_item(run, row: int) -> str:
    item = f"query {_cell(run, 'query_id', row)}, chunk {_cell(run, 'chunk_id', row)}"
    if "arm" in column_names(run):
        item = f"arm {_cell(run, 'arm', row)}, " + item
    return item


@dataclass(frozen=True, eq=False)
class RunCodes:
    """One run's ids coded once: what the duplicate check and the qrels join both hash.

    Build it with :func:`run_codes`; pass it as ``codes=`` to :func:`validate_run`,
    :func:`relgrade.evaluation.metrics.per_query` and
    :func:`relgrade.evaluation.metrics.query_coverage` of the same run (rows unchanged).
    """

    query: np.ndarray       # int64 (n_rows,): position of each row's query id in `queries`
    queries: pa.Array       # large_string (n_distinct,): the distinct query ids, first seen first
    chunk_hash: np.ndarray  # uint64 (n_rows,): the 64-bit hash of each chunk id's UTF-8 bytes
    #: True only when it is proven that no (query, chunk) pair repeats (every query's rows
    #: adjacent, no chunk hash twice among them): the duplicate check then has nothing to
    #: do. :func:`relgrade.io.trec_scan.coded_run` proves it while it reads the file.
    distinct: bool = False


def _require_run_columns(run, path) -> None:
    names = column_names(run)
    missing = [c for c in RUN if c not in names]
    if missing:
        raise InputError(f"a run needs the columns {', '.join(RUN)}", path=path,
                         found="no " + ", ".join(missing))


def run_codes(run, *, path=None) -> RunCodes:
    """Code a run's query ids and hash its chunk ids, once for every later step.

    Parameters
    ----------
    run : pandas.DataFrame or pyarrow.Table
        One arm's run: columns ``query_id``, ``chunk_id``, ``rank``, ``score`` (no ``arm``),
        as :func:`relgrade.io.runs.read_run` or
        :func:`relgrade.io.runtable.read_run_table` returns it. Not modified.
    path : str or os.PathLike, optional
        The file the run came from, named in the error.

    Returns
    -------
    RunCodes
        ``query`` (int64, shape (n_rows,)): Arrow's dictionary code of each row's query
        id, in order of first appearance (one hash lookup per block of adjacent equal
        ids); ``queries`` (pyarrow large_string array): those ids; ``chunk_hash``
        (uint64, shape (n_rows,)): the chunk ids' 64-bit text hash, the one
        :func:`pair_hashes` combines with a query code.

    Raises
    ------
    InputError
        A column is missing, the run has an ``arm`` column (code each arm's rows apart),
        or a query id is missing (null).
    """
    _require_run_columns(run, path)
    if "arm" in column_names(run):
        raise InputError("run codes are for one arm's run, without an arm column", path=path)
    qids = arrow_ids(run["query_id"]).combine_chunks()
    if qids.null_count:
        raise InputError("query_id is missing in a row", path=path)
    n = len(qids)
    # a ranked list's rows are usually adjacent: only the first row of each block of equal
    # query ids is dictionary-encoded, and its code repeated over the block (the codes are
    # those of encoding every row: first seen, first coded)
    head = np.ones(n, dtype=bool)
    if n > 1:
        head[1:] = numpy_values(pc.not_equal(qids[1:], qids[:-1]))
    starts = np.flatnonzero(head).astype(np.int64)
    encoded = pc.dictionary_encode(qids.take(arrow_array(starts)))
    query = np.repeat(numpy_values(encoded.indices).astype(np.int64),
                      np.diff(np.r_[starts, n]))
    return RunCodes(query=query, queries=encoded.dictionary.cast(pa.large_string()),
                    chunk_hash=_text_hash(arrow_ids(run["chunk_id"])))


def check_codes(run, codes: RunCodes | None, path=None) -> None:
    """Check that ``codes`` can be :func:`run_codes` of ``run``.

    Parameters
    ----------
    run : pandas.DataFrame or pyarrow.Table
        The run the codes are passed with.
    codes : RunCodes or None
        None passes.
    path : str or os.PathLike, optional
        The run's file, named in the error.

    Returns
    -------
    None

    Raises
    ------
    InputError
        ``run`` has an ``arm`` column, or ``codes`` hold another number of rows. (Codes of
        another run with as many rows are not detected: pass the codes of this very run.)
    """
    if codes is None:
        return
    if "arm" in column_names(run) or len(codes.query) != len(run) or \
            len(codes.chunk_hash) != len(run):
        raise InputError("run codes were made for another run", path=path,
                         fix="Pass run_codes(run) of this very run")


#: How to fix an empty run inside an experiment, where every run is an arm's.
EMPTY_RUN_FIX = "Give every arm at least one ranked chunk"


def validate_run(run, *, path=None, queries=None, chunks=None,
                 codes: RunCodes | None = None, lines=None,
                 empty_fix: str = EMPTY_RUN_FIX) -> None:
    """Check a run against the rules every arm's run must follow.

    Parameters
    ----------
    run : pandas.DataFrame or pyarrow.Table
        Columns ``query_id``, ``chunk_id``, ``rank``, ``score`` (and ``arm`` when stacked),
        as returned by :func:`relgrade.io.runs.read_run` (or, as Arrow,
        :func:`relgrade.io.runtable.read_run_table`). Not modified. The checks and their
        messages are the same for both.
    path : str or os.PathLike, optional
        The file the run came from, named in the error.
    queries : iterable of str, optional
        Every known query id; when given, a run row for another query is an error.
    chunks : iterable of str, optional
        Every known chunk id (the corpus); when given, an unknown chunk is an error.
    codes : RunCodes, optional
        :func:`run_codes` of this run (one arm): the duplicate check uses its query codes
        and chunk hashes instead of computing them again. The outcome is the same.
    lines : object, optional
        Where ``run``'s rows sit in ``path``, when ``run`` holds that file's rows in file
        order: its method ``lines(rows)`` gives the 1-based line of each 0-based row
        (:func:`relgrade.io.runs.run_lines`; asked only to word an error). None: a run
        built in memory or read from a file without lines (Parquet).
    empty_fix : str, default :data:`EMPTY_RUN_FIX`
        The fix an empty run's error gives: an experiment's arm by default; a command on
        plain files words it for itself (``relgrade evaluate``, ``relgrade compare``).

    Returns
    -------
    None

    Raises
    ------
    InputError
        The run has no rows; a column is missing; a score is NaN or infinite (naming the
        query and chunk); a chunk is listed twice for one query (naming query, chunk and
        the lines of both rows, the second as ``path:line``, given ``lines``; else both
        ranks); a query id or chunk id is not in ``queries`` / ``chunks`` (naming the first
        one, its line as ``path:line`` given ``lines``, and how many rows are affected);
        ``codes`` were made for another run.
    """
    _require_run_columns(run, path)
    check_codes(run, codes, path)
    if len(run) == 0:
        raise InputError("the run is empty", path=path, fix=empty_fix)
    score = float_values(run["score"])
    bad = ~np.isfinite(score)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("score must be a finite number", path=path, item=_row_item(run, row),
                         found=repr(float(score[row])))
    for c in _group_columns(run) + ["chunk_id"]:
        # relgrade joins ids with U+001F into pair keys: an id holding it is refused here
        if holds_separator(arrow_ids(run[c])):
            held = pc.match_substring(arrow_ids(run[c]), ID_SEPARATOR)
            row = int(np.flatnonzero(held.to_numpy(zero_copy_only=False))[0])
            raise InputError(f"{c} holds the control character U+001F", path=path,
                             item=_row_item(run, row))
    rows = _repeated_rows(run, _group_columns(run) + ["chunk_id"], codes)
    if rows is not None:
        item = _row_item(run, int(rows[0]))
        if lines is not None:
            first, then = lines.lines([int(r) for r in rows])
            raise InputError("a chunk is listed twice for one query", path=path, line=then,
                             item=item, found=f"lines {first} and {then}",
                             fix="List each chunk at most once per query")
        ranks = (numpy_values(run["rank"]) if isinstance(run, pa.Table)
                 else run["rank"].to_numpy())[rows]
        raise InputError("a chunk is listed twice for one query", path=path, item=item,
                         found=f"at ranks {int(ranks[0])} and {int(ranks[1])}",
                         fix="List each chunk at most once per query")
    for col, known, what in (("query_id", queries, "query"), ("chunk_id", chunks, "chunk")):
        if known is None:
            continue
        unknown = ~pc.is_in(arrow_ids(run[col]), value_set=_id_set(known)).to_numpy(
            zero_copy_only=False)
        if unknown.any():
            row = int(np.flatnonzero(unknown)[0])
            # the first few distinct unknown ids, in file order: enough to see the pattern
            first = list(dict.fromkeys(run[col].to_numpy()[unknown].astype(str)))[:5]
            line = lines.lines([row])[0] if lines is not None else None
            raise InputError(f"unknown {what} id", path=path, line=line,
                             item=_row_item(run, row),
                             found=f"{int(unknown.sum())} row(s) name "
                                   f"{'queries' if what == 'query' else 'chunks'} that are not "
                                   f"in the {'query set' if what == 'query' else 'corpus'}, "
                                   f"first {', '.join(first)}")


def _repeated_rows(run, columns: list[str],
                   codes: RunCodes | None = None) -> np.ndarray | None:
    """The first two rows (in row order) that agree on every column, or None.

    The list columns (arm, query) are few distinct values and are dictionary-encoded; the
    chunk ids, nearly all distinct, are hashed to 64 bits straight from Arrow's buffers
    (hashing a million strings into a table costs more than reading the file). Rows are
    sorted by (list code, hash) and only rows whose hashes tie are compared as text, so a
    hash collision cannot make a false duplicate. ``codes`` (one arm's run, columns query
    and chunk): the query codes and chunk hashes already made.
    """
    *lists, last = columns
    if codes is not None and codes.distinct:
        return None  # proven when the codes were made: no chunk hash repeats in a query
    chunk = arrow_ids(run[last])
    if codes is not None:
        group = codes.query.astype(np.uint64)
        h = pair_hashes_of(group, codes.chunk_hash)
    else:
        group = np.zeros(len(run), dtype=np.uint64)
        for c in lists:
            encoded = pc.dictionary_encode(arrow_ids(run[c]).combine_chunks())
            group = group * np.uint64(max(len(encoded.dictionary), 1)) + \
                numpy_values(encoded.indices).astype(np.uint64)
        h = pair_hashes(group, chunk)
    sorted_h = np.sort(h)
    if not (sorted_h[1:] == sorted_h[:-1]).any():
        return None  # the usual case, told by one sort of the hashes
    order = np.argsort(h, kind="stable")
    sorted_h = h[order]
    tie = np.flatnonzero(sorted_h[1:] == sorted_h[:-1])
    # each block of equal hashes (a few rows) is split by the real ids, compared as text
    best = None
    for start in tie[np.r_[True, np.diff(tie) > 1]]:
        stop = start + 1
        while stop < len(order) and sorted_h[stop] == sorted_h[start]:
            stop += 1
        seen: dict = {}
        for row in sorted(int(r) for r in order[start:stop]):
            seen.setdefault((int(group[row]), chunk[row].as_py()), []).append(row)
        for rows in seen.values():
            if len(rows) > 1 and (best is None or rows[0] < best[0]):
                best = rows[:2]
    return None if best is None else np.asarray(best, dtype=np.int64)


_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(9)], dtype=np.uint64)  # low i bytes


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that spreads every input bit. ``x`` is
    overwritten (and returned) when it is a uint64 array."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for shift, mul in ((30, _MIX1), (27, _MIX2)):
            np.bitwise_xor(x, x >> np.uint64(shift), out=x)
            np.multiply(x, mul, out=x)
        np.bitwise_xor(x, x >> np.uint64(31), out=x)
    return x


def pair_hashes(codes: np.ndarray | None, ids: pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each (integer code, string id) pair, e.g. (query code, chunk id).

    Parameters
    ----------
    codes : ndarray of int, shape (n_rows,), or None
        Non-negative codes (a query's position in a sorted id list); None hashes each id as
        with code 0 (the id's text hash alone), without an array of zeros.
    ids : pyarrow.ChunkedArray of large_string, shape (n_rows,)
        As :func:`arrow_ids` returns.

    Returns
    -------
    ndarray of uint64, shape (n_rows,)
        Equal pairs hash alike; unequal pairs collide with probability about 2^-64, so a
        caller compares the real ids wherever two hashes tie.
    """
    text = _text_hash(ids)
    return text if codes is None else pair_hashes_of(codes, text)


def pair_hashes_of(codes: np.ndarray, text_hash: np.ndarray) -> np.ndarray:
    """:func:`pair_hashes` from the ids' text hashes (:attr:`RunCodes.chunk_hash`).

    Parameters
    ----------
    codes : ndarray of int, shape (n_rows,)
        Non-negative codes.
    text_hash : ndarray of uint64, shape (n_rows,)
        The ids' 64-bit text hashes, as :func:`run_codes` makes them.

    Returns
    -------
    ndarray of uint64, shape (n_rows,)
        Equal to ``pair_hashes(codes, ids)``; no string is read.
    """
    with np.errstate(over="ignore"):
        return text_hash ^ (np.asarray(codes).astype(np.uint64) * _MIX2)


def _text_hash(ids: pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each string's UTF-8 bytes, read 8 bytes at a time (uint64).

    The hash of a string of ``n`` bytes is ``_mix(h)`` with ``h = n`` and, for each of its
    ``ceil(n / 8)`` 8-byte words ``w`` (the last one zero-padded, little-endian),
    ``h = (h ^ w) * _MIX1``: a function of the string alone, so equal strings hash alike
    in any two arrays and any Arrow chunks. (Until 2026-12 a string shorter than the
    longest of its chunk took extra rounds for the words it does not have, so the same
    id could hash differently in a run and in the qrels: matches were missed.)
    """
    out = []
    for chunk in ids.chunks:
        n = len(chunk)
        if n == 0:
            continue
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[
            chunk.offset: chunk.offset + n + 1]
        raw = chunk.buffers()[2]
        data = np.frombuffer(raw, dtype=np.uint8) if raw is not None else np.zeros(0, np.uint8)
        lengths = np.diff(offsets)
        words = int(-(-int(lengths.max()) // 8))
        # zeros past the end, so every string's every word can be read without a bound check
        data = np.concatenate([data[offsets[0]: offsets[-1]],
                               np.zeros(8 * max(words, 1), np.uint8)])
        starts = offsets[:-1] - offsets[0]
        # every 8-byte window of the bytes, unaligned (x86 and ARM read these)
        windows = np.ndarray(shape=(len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
        h = lengths.astype(np.uint64)
        with np.errstate(over="ignore"):
            for w in range(words):
                word = windows[starts + 8 * w if w else starts]
                if not (lengths >= 8 * (w + 1)).all():
                    # keep only the string's own bytes of the window
                    word &= _MASKS[np.clip(lengths - 8 * w, 0, 8)]
                if (lengths > 8 * w).all():
                    np.bitwise_xor(h, word, out=h)
                    np.multiply(h, _MIX1, out=h)
                else:
                    # a string without a w-th word keeps its hash: no round for it
                    h = np.where(lengths > 8 * w, (h ^ word) * _MIX1, h)
        out.append(_mix(h))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


ID_SEPARATOR = "\x1f"  # joins ids into one key; whitespace-free TREC ids cannot hold it


def holds_separator(ids: pa.ChunkedArray) -> bool:
    """Whether any id holds U+001F, found by one byte search of each chunk's string data.

    Parameters
    ----------
    ids : pyarrow.ChunkedArray of large_string, as :func:`arrow_ids` returns.

    Returns
    -------
    bool
    """
    for chunk in ids.chunks:
        if len(chunk) == 0 or chunk.buffers()[2] is None:
            continue
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[
            chunk.offset: chunk.offset + len(chunk) + 1]
        # U+001F is the one byte 0x1f in UTF-8, never part of another character's bytes
        if memoryview(chunk.buffers()[2])[offsets[0]: offsets[-1]].tobytes().find(b"\x1f") >= 0:
            return True
    return False


def pair_keys(*ids: pa.ChunkedArray) -> pa.ChunkedArray:
    """One string key per row: the given id columns joined by U+001F.

    Parameters
    ----------
    *ids : pyarrow.ChunkedArray of large_string, each shape (n_rows,)
        e.g. query ids and chunk ids.

    Returns
    -------
    pyarrow.ChunkedArray of large_string, shape (n_rows,)
    """
    return pc.binary_join_element_wise(*ids, _separator())


@functools.lru_cache(maxsize=None)
def _separator() -> pa.Scalar:
    """U+001F as an Arrow large_string scalar (taken from an array: ``pa.scalar`` imports
    pandas on its first call in a process)."""
    return arrow_strings([ID_SEPARATOR])[0]


def _id_set(known) -> pa.Array:
    import pandas as pd

    if isinstance(known, (pd.Series, pd.Index, np.ndarray, list, tuple, pa.Array,
                          pa.ChunkedArray)):
        values = known
    else:
        values = list(known)
    if isinstance(values, pd.Index):
        values = values.to_series()
    if not isinstance(values, (pd.Series, pa.Array, pa.ChunkedArray)):
        values = pd.Series(values, dtype=object).astype("str")
    return pc.unique(arrow_ids(values).combine_chunks())


# --- id codes: the one id order pooling, metrics and retrieval share ------------------

def id_codes(values) -> tuple[np.ndarray, pa.Array]:
    """Integer codes of string ids whose order is the ids' byte order, and the distinct ids.

    Parameters
    ----------
    values : pandas.Series, pyarrow array or array-like of str, shape (n_rows,)
        Ids (str, object or categorical dtype).

    Returns
    -------
    codes : ndarray of int64, shape (n_rows,)
        ``codes[i] < codes[j]`` exactly when ``values[i] < values[j]`` as byte strings.
    uniques : pyarrow.Array of large_string, shape (n_distinct,)
        The distinct ids in byte order; ``uniques[codes[i]] == values[i]`` (see
        :func:`ids_at`).

    Raises
    ------
    InputError
        An id is missing (null).

    Notes
    -----
    Arrow's dictionary encoding hashes the rows once and only the distinct ids are sorted
    (Arrow sorts strings by their UTF-8 bytes, which for valid UTF-8 is Python's code point
    order of ``str``).

    Examples
    --------
    >>> codes, uniques = id_codes(["b", "a", "b"])
    >>> codes.tolist(), uniques.to_pylist()
    ([1, 0, 1], ['a', 'b'])
    """
    arr = arrow_ids(values)
    if arr.null_count:
        raise InputError("an id is missing", found=f"{arr.null_count} empty value(s)")
    encoded = pc.dictionary_encode(arr.combine_chunks())
    dictionary = encoded.dictionary
    sort = pc.array_sort_indices(dictionary)
    order = numpy_values(sort)
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    codes = position[numpy_values(encoded.indices)]
    return codes, dictionary.take(sort)


def sorted_codes(values) -> tuple[np.ndarray, pd.Index]:
    """Integer codes of string ids whose order is the ids' byte order.

    Parameters
    ----------
    values : array-like of str, shape (n_rows,)
        Ids (str, object or categorical dtype).

    Returns
    -------
    codes : ndarray of int64, shape (n_rows,)
        As :func:`id_codes`.
    uniques : pandas.Index of str
        The distinct ids in byte order; ``uniques[codes[i]] == values[i]``.

    Raises
    ------
    InputError
        An id is missing (null).
    """
    import pandas as pd

    codes, uniques = id_codes(values)
    return codes, pd.Index(pd.Series(uniques, dtype="str"))


def ids_at(uniques: pa.Array, codes: np.ndarray) -> pd.Series:
    """The ids ``uniques[codes]`` as a pandas Series of dtype ``str``.

    Parameters
    ----------
    uniques : pyarrow.Array of str, shape (n_distinct,)
        Distinct ids, as :func:`id_codes` returns them.
    codes : ndarray of int, shape (n_rows,)
        Positions in ``uniques``.

    Returns
    -------
    pandas.Series of str, shape (n_rows,)
        With a fresh 0..n_rows-1 index.

    Examples
    --------
    >>> codes, uniques = id_codes(["b", "a"])
    >>> ids_at(uniques, codes[::-1]).tolist()
    ['a', 'b']
    """
    return uniques.take(pa.array(codes, type=pa.int64())).to_pandas()


def codes_in(values: pa.ChunkedArray, value_set: pa.ChunkedArray) -> np.ndarray:
    """Position of each value in ``value_set`` (distinct values), -1 when absent.

    Parameters
    ----------
    values : pyarrow.ChunkedArray of large_string, shape (n_rows,)
        Ids, as :func:`arrow_ids` returns them.
    value_set : pyarrow.ChunkedArray of large_string, shape (n_distinct,)
        Distinct ids.

    Returns
    -------
    ndarray of int32, shape (n_rows,)
        ``value_set[out[i]] == values[i]``, or -1 where ``values[i]`` is not in the set.

    Examples
    --------
    >>> codes_in(arrow_ids(["b", "x"]), arrow_ids(["a", "b"])).tolist()
    [1, -1]
    """
    found = pc.index_in(values, value_set=value_set.combine_chunks())
    if not len(found):
        return np.zeros(0, dtype=np.int32)
    # a scalar taken from an array: fill_null(-1) would make it with pa.scalar
    return np.array(numpy_values(found.fill_null(_minus_one())), dtype=np.int32)


@functools.lru_cache(maxsize=None)
def _minus_one() -> pa.Scalar:
    """-1 as an Arrow int32 scalar (taken from an array: ``pa.scalar`` imports pandas)."""
    return arrow_array(np.array([-1], dtype=np.int32))[0]


def arrow_array(values: np.ndarray) -> pa.Array:
    """A numpy array as an Arrow array, made from its buffer (what ``pa.array`` gives).

    ``pyarrow.array`` asks pandas, on its first call in a process, whether the values are a
    pandas object, and so imports pandas (0.26 CPU-s) even for a numpy array; building the
    array from its buffer does not. Numbers are not copied.

    Parameters
    ----------
    values : ndarray of bool, int or float, shape (n,)

    Returns
    -------
    pyarrow.Array of shape (n,)
        bool, intN / uintN or floatN as ``values``' dtype, no nulls.

    Raises
    ------
    TypeError
        ``values`` is not one-dimensional or of another dtype.

    Examples
    --------
    >>> arrow_array(np.array([True, False, True])).to_pylist()
    [True, False, True]
    >>> arrow_array(np.arange(3)[::-1]).to_pylist()
    [2, 1, 0]
    """
    values = np.ascontiguousarray(values)
    if values.ndim != 1 or values.dtype.kind not in "biuf":
        raise TypeError(f"not a 1-d array of bool or numbers: {values.dtype} "
                        f"of shape {values.shape}")
    if values.dtype.kind == "b":  # Arrow packs booleans 8 to a byte, first in the low bit
        return pa.Array.from_buffers(pa.bool_(), len(values), [
            None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


_NUMPY_TYPES = {str(t): np.dtype(d) for t, d in (
    (pa.int8(), "i1"), (pa.int16(), "<i2"), (pa.int32(), "<i4"), (pa.int64(), "<i8"),
    (pa.uint8(), "u1"), (pa.uint16(), "<u2"), (pa.uint32(), "<u4"), (pa.uint64(), "<u8"),
    (pa.float32(), "<f4"), (pa.float64(), "<f8"))}


def numpy_values(values) -> np.ndarray:
    """The values of an Arrow array as a numpy array: what ``to_numpy(zero_copy_only=False)``
    gives, read from the buffer for booleans, integers and floats without nulls.

    Arrow's ``to_numpy`` converts through its pandas conversion code, which imports pandas
    on its first call in a process (0.26 CPU-s); reading the buffer does not. A single chunk
    is not copied. Other types, and arrays holding a null, go through ``to_numpy``.

    Parameters
    ----------
    values : pyarrow.Array or pyarrow.ChunkedArray, shape (n,)

    Returns
    -------
    ndarray of shape (n,)
        For intN, uintN and floatN without nulls the matching numpy dtype (int64 -> int64,
        double -> float64, ...), read-only when it is a view of the Arrow buffer; for
        booleans without nulls, bool (unpacked from the bits, a new array).

    Examples
    --------
    >>> numpy_values(pa.chunked_array([[1, 2], [3]])).tolist()
    [1, 2, 3]
    """
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    if pa.types.is_boolean(values.type) and not values.null_count:
        # Arrow's bits, the first value in the lowest bit: unpacked from the buffer
        parts = [np.unpackbits(np.frombuffer(c.buffers()[1], dtype=np.uint8),
                               bitorder="little")[c.offset: c.offset + len(c)].view(bool)
                 for c in chunks if len(c)]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
    dtype = _NUMPY_TYPES.get(str(values.type))
    if dtype is None or values.null_count:
        return values.to_numpy(zero_copy_only=False) if isinstance(values, pa.Array) \
            else values.to_numpy()
    parts = [np.frombuffer(c.buffers()[1], dtype=dtype)[c.offset: c.offset + len(c)]
             for c in chunks if len(c)]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def arrow_strings(values) -> pa.Array:
    """Python strings as an Arrow large_string array, built from their UTF-8 bytes (without
    ``pa.array``'s pandas import, see :func:`arrow_array`).

    Parameters
    ----------
    values : sequence of str, length n

    Returns
    -------
    pyarrow.Array of large_string, shape (n,), no nulls.

    Examples
    --------
    >>> arrow_strings(["b", "", "\u00e9"]).to_pylist()
    ['b', '', 'é']
    """
    data = [str(v).encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.large_string(), len(data), [
        None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def arrow_ids(values) -> pa.ChunkedArray:
    """Ids as an Arrow ``large_string`` array (zero-copy for pandas' Arrow-backed ``str``).

    Parameters
    ----------
    values : pandas.Series, pyarrow array or array-like of str, shape (n_rows,)

    Returns
    -------
    pyarrow.ChunkedArray of large_string, shape (n_rows,)
    """
    pd = _loaded_pandas()
    if pd is not None and isinstance(values, pd.Series) and not isinstance(
            values.dtype, (pd.StringDtype, pd.CategoricalDtype)):
        values = values.astype("str")
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        arr = values
    elif isinstance(values, (list, tuple)) and all(isinstance(v, str) for v in values):
        arr = arrow_strings(values)
    else:
        arr = pa.array(values)
    if isinstance(arr, pa.Array):
        arr = pa.chunked_array([arr])
    if not pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_string())
    return arr


# --- the canonical ranking -----------------------------------------------------------

def _sorted_codes(values) -> np.ndarray:
    return sorted_codes(values)[0]


def canonical_order(group: np.ndarray, score: np.ndarray, chunk_id, *,
                    rank: np.ndarray | None = None, ties: str = "score",
                    depth: int | None = None) -> np.ndarray:
    """The permutation that puts run rows in canonical order.

    Parameters
    ----------
    group : ndarray of int, shape (n_rows,)
        Ranked-list code of each row (a query, or an (arm, query) pair); lists come out in
        ascending code order.
    score : ndarray of float64, shape (n_rows,)
        The run's scores.
    chunk_id : pandas.Series, pyarrow array or ndarray of str, shape (n_rows,)
        The chunk ids; read only for rows whose sort keys tie.
    rank : ndarray of int, shape (n_rows,), optional
        The run's rank column; required when ``ties="rank"``.
    ties : {"score", "rank"}
        ``"score"``: score descending, then chunk_id descending as byte strings (trec_eval);
        ``"rank"``: rank ascending, then score descending, then chunk_id descending.
    depth : int, optional
        Only the first ``depth`` positions of each list must be in canonical order (a
        caller that reads the top ``depth`` only): rows tied below that keep their input
        order. None: every position.

    Returns
    -------
    ndarray of int64, shape (n_rows,)
        Row positions in canonical order.

    Raises
    ------
    InputError
        ``ties`` is not ``"score"`` or ``"rank"``.

    Notes
    -----
    trec_eval sorts each query's results by score descending and breaks ties by comparing
    document numbers with ``strcmp`` in descending order (``form_res_rels.c``). Rows already
    in that order (as most run files are written) are recognised in linear time and not
    sorted again; otherwise one ``numpy.lexsort`` on the numeric keys orders them, and only
    rows whose numeric keys tie have their chunk ids compared.
    """
    if ties not in TIES:
        raise InputError("ties must be `score` or `rank`", found=repr(ties))
    if ties == "rank" and rank is None:
        raise InputError("ties=`rank` needs the run's rank column")
    group = np.asarray(group)
    n = len(group)
    if n == 0:
        return np.arange(0, dtype=np.int64)
    neg_score = -np.asarray(score, dtype=np.float64)
    keys = [neg_score] if ties == "score" else [np.asarray(rank), neg_score]
    order = _presorted_order(group, keys)
    if order is None:
        order = np.lexsort(tuple(reversed(keys)) + (group,))
    g_sorted = group[order]
    k_sorted = [k[order] for k in keys]
    # rows whose (group, numeric keys) equal their neighbour's: order them by chunk_id desc
    same = g_sorted[1:] == g_sorted[:-1]
    for k in k_sorted:
        same &= k[1:] == k[:-1]
    if same.any():
        tied = np.zeros(n, dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        pos = np.flatnonzero(tied)
        # a segment starts where a tied row does not tie with the row before it
        seg_start = np.ones(len(pos), dtype=bool)
        seg_start[1:] = ~same[pos[1:] - 1]
        segment = np.cumsum(seg_start)
        if depth is not None:
            # keep only tie segments that begin within the first `depth` of their list
            list_starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
            first_rows = pos[seg_start]
            list_of = np.searchsorted(list_starts, first_rows, side="right") - 1
            begins = first_rows - list_starts[list_of] + 1 <= depth
            inside = begins[segment - 1]
            pos, segment = pos[inside], segment[inside]
        tied_ids = arrow_ids(chunk_id).take(arrow_array(order[pos]))
        within = pc.sort_indices(pa.table({"segment": arrow_array(segment),
                                           "chunk_id": tied_ids}),
                                 sort_keys=[("segment", "ascending"),
                                            ("chunk_id", "descending")])
        order[pos] = order[pos][numpy_values(within)]
    return order


def _presorted_order(group: np.ndarray, keys: list[np.ndarray]) -> np.ndarray | None:
    """Canonical order without a full sort when each list is contiguous and sorted by keys."""
    n = len(group)
    same = group[1:] == group[:-1]
    # within a ranked list, the key tuples must be non-decreasing (lexicographic)
    ok = np.ones(n - 1, dtype=bool)
    eq = np.ones(n - 1, dtype=bool)
    for k in keys:
        ok &= ~eq | (k[:-1] <= k[1:])
        eq &= k[:-1] == k[1:]
    if not np.all(ok | ~same):
        return None
    starts = np.flatnonzero(np.r_[True, ~same])
    if len(np.unique(group[starts])) != len(starts):
        return None  # a ranked list is split over several blocks
    if np.all(group[starts[1:]] > group[starts[:-1]]):
        return np.arange(n, dtype=np.int64)
    lengths = np.diff(np.r_[starts, n])
    block_order = np.argsort(group[starts], kind="stable")
    new_lengths = lengths[block_order]
    new_starts = np.cumsum(np.r_[0, new_lengths[:-1]])
    shift = np.repeat(starts[block_order] - new_starts, new_lengths)
    return np.arange(n, dtype=np.int64) + shift


def ranks_in_sorted(group_sorted: np.ndarray) -> np.ndarray:
    """1-based position of each row within its group, for rows sorted by group.

    Parameters
    ----------
    group_sorted : ndarray of int, shape (n_rows,)
        Group codes, equal codes adjacent.

    Returns
    -------
    ndarray of int64, shape (n_rows,)
    """
    n = len(group_sorted)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, group_sorted[1:] != group_sorted[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths) + 1


def canonical_ranking(run: pd.DataFrame, *, ties: str = "score") -> pd.DataFrame:
    """The run in canonical order, its ranks rewritten 1..n per ranked list.

    Parameters
    ----------
    run : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``rank``, ``score``; with an ``arm`` column each
        (arm, query) is its own ranked list. Not modified.
    ties : {"score", "rank"}, default "score"
        ``"score"``: trec_eval's rule, score descending then chunk_id descending compared
        as byte strings, the input rank ignored. ``"rank"``: the run's rank ascending (ties
        in rank broken by score descending, then chunk_id descending).

    Returns
    -------
    pandas.DataFrame
        The same columns, rows sorted by (arm,) query_id (byte order) and then canonical
        order, ``rank`` (int64) the 1-based canonical position, a fresh 0..n-1 index.

    Raises
    ------
    InputError
        ``ties`` is neither ``"score"`` nor ``"rank"``.

    Notes
    -----
    Ids are sorted through integer codes (``pandas.factorize`` with sorted uniques), never
    compared as Python strings row by row, so ten million rows take a few seconds.

    Examples
    --------
    >>> import pandas as pd
    >>> run = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["d1", "d2", "d3"],
    ...                     "rank": [1, 2, 3], "score": [1.0, 1.0, 2.0]})
    >>> canonical_ranking(run)["chunk_id"].tolist()
    ['d3', 'd2', 'd1']
    """
    if ties not in TIES:
        raise InputError("ties must be `score` or `rank`", found=repr(ties))
    group = _sorted_codes(run["query_id"])
    if "arm" in run.columns:
        arm = _sorted_codes(run["arm"])
        group = arm * (int(group.max(initial=0)) + 1) + group
    order = canonical_order(group, run["score"].to_numpy(dtype=np.float64), run["chunk_id"],
                            rank=run["rank"].to_numpy() if ties == "rank" else None, ties=ties)
    out = run.take(order).reset_index(drop=True)
    out["rank"] = ranks_in_sorted(group[order])
    return out


#: Significant decimal digits a computed arm's scores keep before they are ranked.
SCORE_DIGITS = 12


def round_scores(scores, digits: int = SCORE_DIGITS) -> np.ndarray:
    """Scores rounded to ``digits`` significant decimal digits, as ``%.{digits}g`` prints them.

    A computed arm's scores are rounded before ranking so that its run does not depend on
    the last bits of floating-point arithmetic, which vary with the CPU and the libraries'
    code paths (summation order, SIMD): two scores equal to 12 digits are a tie, broken by
    the documented rule, on every machine, and the run file's bytes (hence ``dvc.lock``)
    agree across machines.

    Parameters
    ----------
    scores : array-like of float, shape (n,)
        Finite scores.
    digits : int, default :data:`SCORE_DIGITS`
        Significant decimal digits kept, at least 1.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        Each score as the nearest float to its ``digits``-digit decimal rounding (Python's
        ``format`` rounding: correctly rounded, half to even on the decimal value).

    Examples
    --------
    >>> round_scores([1 / 3, 2.0000000000001, 12345.678901234567]).tolist()
    [0.333333333333, 2.0, 12345.6789012]
    """
    values = np.asarray(scores, dtype=np.float64).ravel()
    spec = f".{int(digits)}g"
    return np.fromiter((float(format(v, spec)) for v in values.tolist()), dtype=np.float64,
                       count=len(values))


def top_k(run: pd.DataFrame, k: int, *, ties: str = "score") -> pd.DataFrame:
    """The rows of each ranked list whose canonical rank is at most ``k``.

    Parameters
    ----------
    run : pandas.DataFrame
        A run (see :func:`canonical_ranking`). Not modified.
    k : int
        The cutoff, at least 1.
    ties : {"score", "rank"}, default "score"
        The tie rule of :func:`canonical_ranking`.

    Returns
    -------
    pandas.DataFrame
        :func:`canonical_ranking` rows with ``rank <= k``, in canonical order.

    Raises
    ------
    InputError
        ``k`` is below 1.
    """
    if int(k) < 1:
        raise InputError("the cutoff k must be at least 1", found=k)
    ranked = canonical_ranking(run, ties=ties)
    return ranked[ranked["rank"].to_numpy() <= int(k)].reset_index(drop=True)
