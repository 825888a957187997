"""The key: the key grader's grades of the whole pool, frozen, sorted and hashed.

The key holds one row per pool pair, ``(query_id, chunk_id, grade)``, taken from the key
grader (params ``grading.key_grader``) for the current round only. The auditor's grades never
enter it, not even on the audit queries: those queries would otherwise carry a different
grader than the rest. A query whose whole pool has no grade at or above ``relevant_min`` is
dropped and listed, since every arm would score 0 on it.

The key's hash
--------------
The canonical byte form of a key is one line per row, rows sorted by ``query_id`` and then
``chunk_id`` in Python string order (Unicode code point order), each line the JSON object
``{"query_id":"...","chunk_id":"...","grade":N}`` with the keys in that order, no spaces,
non-ASCII characters written as UTF-8 rather than escaped, and ids as JSON strings, followed
by a single LF. An empty key is zero bytes. ``key_sha256`` is the lowercase hex sha256 of
those bytes. The key file (params ``paths.key``) is written in exactly this form, so
``sha256sum key.jsonl`` reproduces the hash.

The key is built, sorted, written and compared as Arrow columns, never as a Python object
per pair: Arrow orders strings by their UTF-8 bytes, which is code point order, and a
string JSON escapes (a quote, a backslash, a control character) is written by the
:mod:`json` module itself, so the bytes are those of the definition above. Since the
grades table is written in query order, the key stage makes the key a block of whole
queries at a time (:func:`key_table` per block, :func:`key_lines`, :func:`made_on_lines`;
see :mod:`relgrade.protocol.key_blocks`): the blocks' lines, one after the other, are the
key's bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.canonical import canonical_json
from relgrade.errors import InputError, ProtocolError


def _sorted_table(key: pd.DataFrame) -> pa.Table:
    """The key's rows as Arrow columns in canonical order; refuses two rows of one pair.

    Returns a table of ``query_id``, ``chunk_id`` (``large_string``, the ids as ``str``
    gives them) and ``grade`` (int64), sorted by (query_id, chunk_id, grade). Arrow orders
    strings by their UTF-8 bytes, which is Unicode code point order: Python's string order.
    """
    table = pa.table({
        "query_id": _ids(key["query_id"]), "chunk_id": _ids(key["chunk_id"]),
        "grade": pa.array(key["grade"].to_numpy(dtype="int64"), type=pa.int64()),
    })
    order = pc.sort_indices(table, sort_keys=[("query_id", "ascending"),
                                              ("chunk_id", "ascending"),
                                              ("grade", "ascending")])
    table = table.take(order).combine_chunks()
    n = table.num_rows
    if n > 1:
        q, c = table["query_id"], table["chunk_id"]
        same = pc.and_(pc.equal(q.slice(1), q.slice(0, n - 1)),
                       pc.equal(c.slice(1), c.slice(0, n - 1)))
        if pc.any(same).as_py():
            i = int(np.flatnonzero(same.to_numpy(zero_copy_only=False))[0])
            raise InputError("a key holds one grade per pair",
                             item=f"pair ({q[i].as_py()}, {c[i].as_py()})", found="two rows")
    return table


def _ids(column: pd.Series) -> pa.Array:
    """An id column as ``str`` gives it, as an Arrow ``large_string`` array."""
    return pa.array(column.astype(str), type=pa.large_string())


def _plain_text(column: pd.Series) -> pa.Array:
    """Each value of ``column`` as ``str(value)`` gives it (a missing value too: ``"nan"``,
    ``"None"``), as an Arrow ``large_string`` array without nulls."""
    if isinstance(column.dtype, pd.StringDtype):
        return pc.fill_null(pa.array(column, type=pa.large_string()),
                            str(column.dtype.na_value))
    if column.dtype == object or isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(object)
        plain = column.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
        if not plain.all():
            column = column.where(plain, column.map(str))
        return pa.array(column, type=pa.large_string())
    return pa.array(column.astype(str), type=pa.large_string())


def _text(column: pd.Series) -> pa.DictionaryArray:
    """:func:`_plain_text` as a dictionary array: each distinct text once, a code per row.
    A categorical column's categories are converted once, not per row."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy().astype(np.int32)
        words = _plain_text(pd.Series(column.cat.categories, dtype=object))
        if (codes < 0).any():  # a missing value, as str(nan)
            words = pa.concat_arrays([words, pa.array(["nan"], pa.large_string())])
            codes = np.where(codes < 0, len(words) - 1, codes).astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(codes), words)
    return pc.dictionary_encode(_plain_text(column))


def _one(values) -> pa.Array:
    """A chunked array as one array (dictionaries unified)."""
    if isinstance(values, pa.ChunkedArray):
        if pa.types.is_dictionary(values.type):
            values = pa.table({"v": values}).unify_dictionaries()["v"]
        values = values.combine_chunks()
    return values


def _plain(values) -> pa.Array:
    """A dictionary array decoded to its values; any other array as it is."""
    values = _one(values)
    if pa.types.is_dictionary(values.type):
        return values.dictionary.take(values.indices)
    return values


#: Characters :func:`relgrade.canonical.canonical_json` escapes in a string.
_ESCAPED = r'[\x00-\x1f"\\]'


def _json_strings(values) -> pa.Array:
    """Each string as canonical JSON writes it (quoted; ``"``, backslash and control
    characters escaped, everything else as it is). A dictionary array stays one: its
    dictionary is encoded, once per distinct string."""
    values = _one(values)
    if pa.types.is_dictionary(values.type):
        return pa.DictionaryArray.from_arrays(values.indices,
                                              _json_strings(values.dictionary))
    values = values.cast(pa.large_string())
    quoted = pc.binary_join_element_wise(_word('"'), values, _word('"'), _word(""))
    odd = pc.match_substring_regex(values, _ESCAPED)
    if pc.any(odd).as_py():  # the few that need an escape, written by the json module itself
        mask = odd.to_numpy(zero_copy_only=False)
        escaped = [canonical_json(v) for v in values.filter(odd).to_pylist()]
        quoted = pc.replace_with_mask(quoted, pa.array(mask),
                                      pa.array(escaped, type=pa.large_string()))
    return quoted


def _joined(lines) -> memoryview:
    """The bytes of an Arrow string array's values, one after the other, without a copy."""
    lines = _one(lines).cast(pa.large_string())
    if len(lines) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)
    start, stop = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return memoryview(lines.buffers()[2])[start:stop]


def _jsonl(columns: Mapping[str, pa.Array]) -> memoryview:
    """Canonical JSON lines (keys in the order given, LF-terminated) of string columns,
    already JSON-encoded (:func:`_json_strings`, or integers as text)."""
    parts: list = []
    for i, (name, values) in enumerate(columns.items()):
        parts += [_word(("{" if i == 0 else ",") + canonical_json(name) + ":"),
                  _plain(values).cast(pa.large_string())]
    return _joined(pc.binary_join_element_wise(*parts, _word("}\n"), _word("")))


def _word(text: str) -> pa.Scalar:
    """A constant of a line, as the ``large_string`` the columns are."""
    return pa.scalar(text, pa.large_string())


def key_lines(table: pa.Table) -> memoryview:
    """The canonical lines (see the module docstring) of a sorted key table.

    Parameters
    ----------
    table : pyarrow.Table
        ``query_id``, ``chunk_id`` (string), ``grade`` (integer), already in canonical
        order (as :func:`key_table` returns it); one block of whole queries of a key gives
        that block's part of the key's bytes.

    Returns
    -------
    memoryview
        The LF-terminated lines, one per row, in the table's order (empty for no row).
    """
    return _jsonl({"query_id": _json_strings(table["query_id"]),
                   "chunk_id": _json_strings(table["chunk_id"]),
                   "grade": table["grade"].cast(pa.large_string())})


def key_table(
    grades: pd.DataFrame,
    *,
    key_grader: str,
    round: int,
    pool: pd.DataFrame,
    relevant_min: int,
) -> tuple[pa.Table, list[str]]:
    """:func:`build_key`'s key as Arrow columns, before the refusal of an empty key.

    Parameters
    ----------
    grades, key_grader, round, pool, relevant_min
        As :func:`build_key`. A block of whole queries of the grades table with the pool's
        rows of the same queries gives that block's part of the key.

    Returns
    -------
    key : pyarrow.Table of shape (n_pairs, 3)
        ``query_id``, ``chunk_id`` (large_string, the ids as ``str`` gives them),
        ``grade`` (int64), sorted by (query_id, chunk_id) in code point order, without the
        dropped queries; possibly empty.
    dropped_query_ids : list of str
        Queries whose whole pool has no grade >= ``relevant_min``, sorted.

    Raises
    ------
    InputError
        As :func:`build_key`, except for the empty key.
    """
    mine = grades[(grades["grader"].astype(str) == key_grader)
                  & (grades["round"].astype("int64") == int(round))]
    table = _sorted_table(mine)
    pairs = ["query_id", "chunk_id"]
    pool_pairs = pa.table({"query_id": _ids(pool["query_id"]), "chunk_id": _ids(pool["chunk_id"])})
    outside = table.join(pool_pairs, keys=pairs, join_type="left anti", use_threads=False)
    if outside.num_rows:  # named: the first in the key's order
        first = pc.sort_indices(outside, sort_keys=[(p, "ascending") for p in pairs])[0].as_py()
        q, c = outside["query_id"][first].as_py(), outside["chunk_id"][first].as_py()
        raise InputError("the key grader graded a pair outside the pool", item=f"pair ({q}, {c})",
                         found=f"{outside.num_rows} such pairs",
                         fix="Rerun the grades stage against the current pool")
    # every pool row without a key grade (a pair the pool lists twice counts twice), per query
    lacking = pool_pairs.join(table.select(pairs), keys=pairs, join_type="left anti",
                              use_threads=False)
    if lacking.num_rows:
        per = _by_query(lacking.group_by("query_id", use_threads=False)
                        .aggregate([("chunk_id", "count")]))
        missing = dict(zip(per["query_id"].to_pylist(), per["chunk_id_count"].to_pylist()))
        n = sum(missing.values())
        shown = ", ".join(f"{q} ({k})" for q, k in list(missing.items())[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise InputError(f"{n} pool pairs lack a grade from the key grader, in "
                         f"{len(missing)} queries: {shown}{more}", item=key_grader,
                         fix=f"Grade them (`relgrade grade` grades only the missing pairs) "
                             f"for round {int(round)}")
    best = _by_query(table.group_by("query_id", use_threads=False).aggregate([("grade", "max")]))
    dropped = best["query_id"].filter(pc.less(best["grade_max"], relevant_min)).to_pylist()
    kept = table.filter(pc.invert(pc.is_in(table["query_id"],
                                           value_set=pa.array(dropped, pa.large_string()))))
    return kept, dropped


def build_key(
    grades: pd.DataFrame,
    *,
    key_grader: str,
    round: int,
    pool: pd.DataFrame,
    relevant_min: int,
    source=None,
) -> tuple[pd.DataFrame, list[str]]:
    """Build the key from the key grader's grades of the pool.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table: columns ``query_id``, ``chunk_id``, ``grader``, ``round``,
        ``grade`` (at least), one row per (pair, grader, round).
    key_grader : str
        Whose grades make the key (params ``grading.key_grader``).
    round : int
        The grading round (params ``grading.round``).
    pool : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``: every pair the key must grade.
    relevant_min : int
        The lowest grade that counts as relevant (params ``scale.relevant_min``).
    source : str or os.PathLike, optional
        The grades table's file, named by the error of a key left empty.

    Returns
    -------
    key : pandas.DataFrame of shape (n_pairs, 3)
        Columns ``query_id`` (str), ``chunk_id`` (str), ``grade`` (int64), sorted by
        (query_id, chunk_id) in Python string order, without the dropped queries.
    dropped_query_ids : list of str
        Queries whose whole pool has no grade >= ``relevant_min``, sorted.

    Raises
    ------
    InputError
        A pool pair lacks a grade from the key grader (the message says how many and in
        which queries); the key grader graded a pair outside the pool, or one pair twice; or
        no query is left after dropping.

    Notes
    -----
    Dropping follows the protocol: a query with nothing relevant in its pool scores 0 for
    every arm, and keeping it only pulls the arms' means towards each other.
    """
    kept, dropped = key_table(grades, key_grader=key_grader, round=round, pool=pool,
                              relevant_min=relevant_min)
    if not kept.num_rows:
        raise InputError("no query has a chunk graded relevant by the key grader: the key "
                         "would be empty", path=source, item=key_grader,
                         found=f"{len(dropped)} queries dropped, every grade of "
                               f"{key_grader} below scale.relevant_min {relevant_min}",
                         fix=f"Check {key_grader}'s grades (a grader that grades every pair "
                             "0 makes no key) and params scale.relevant_min")
    return _frame(kept), dropped


def _by_query(table: pa.Table) -> pa.Table:
    """A table of one row per query, sorted by ``query_id`` (code point order)."""
    return table.take(pc.sort_indices(table["query_id"]))


def _frame(table: pa.Table) -> pd.DataFrame:
    """A sorted key table as pandas: ``query_id``, ``chunk_id`` (str), ``grade`` (int64)."""
    text = pd.StringDtype("pyarrow", na_value=np.nan)
    out = table.select(["query_id", "chunk_id", "grade"]).to_pandas(
        types_mapper={pa.string(): text, pa.large_string(): text}.get)
    return out.astype({"query_id": "str", "chunk_id": "str", "grade": "int64"})


def key_bytes(key: pd.DataFrame) -> bytes:
    """The key's canonical byte form (see the module docstring).

    Parameters
    ----------
    key : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``grade``; any row order.

    Returns
    -------
    bytes
        One LF-terminated UTF-8 JSON line per row, in (query_id, chunk_id) order.

    Raises
    ------
    InputError
        Two rows for one pair.

    Examples
    --------
    >>> key_bytes(pd.DataFrame({"query_id": ["q2", "q1"], "chunk_id": ["7", "é"],
    ...                         "grade": [0, 2]}))
    b'{"query_id":"q1","chunk_id":"\\xc3\\xa9","grade":2}\\n{"query_id":"q2","chunk_id":"7","grade":0}\\n'
    """
    return key_lines(_sorted_table(key)).tobytes()


def key_sha256(key: pd.DataFrame) -> str:
    """The key's hash: hex sha256 of :func:`key_bytes` (64 lowercase hex characters)."""
    return hashlib.sha256(key_lines(_sorted_table(key))).hexdigest()


#: Columns of a key's made-on table: what each key row's grade was made on.
MADE_ON_COLUMNS = ("query_id", "chunk_id", "content_sha256", "intent_sha256", "rubric_sha256")
_PAIR = ["query_id", "chunk_id"]
_MADE = list(MADE_ON_COLUMNS[2:])


def made_on_bytes(key: pd.DataFrame, made_on: pd.DataFrame) -> bytes:
    """What every key row's grade was made on, in canonical byte form.

    The key's own bytes (and so its hash) hold only ``(query_id, chunk_id, grade)``; this
    table, written beside it and hashed into its record (``made_on_sha256``), says on which
    chunk content, intent line and rubric file each grade was made.

    Parameters
    ----------
    key : pandas.DataFrame
        The key (``query_id``, ``chunk_id``, ``grade``).
    made_on : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``content_sha256``, ``intent_sha256``, ``rubric_sha256``
        for at least every key pair (more rows are ignored).

    Returns
    -------
    bytes
        One LF-terminated canonical JSON line per key row (keys in the order of
        :data:`MADE_ON_COLUMNS`), rows in the key's (query_id, chunk_id) order.

    Raises
    ------
    InputError
        A key pair has no made-on row.

    Examples
    --------
    >>> k = pd.DataFrame({"query_id": ["q"], "chunk_id": ["c"], "grade": [2]})
    >>> m = pd.DataFrame({"query_id": ["q"], "chunk_id": ["c"], "content_sha256": ["h"],
    ...                   "intent_sha256": ["i"], "rubric_sha256": ["r"]})
    >>> made_on_bytes(k, m)
    b'{"query_id":"q","chunk_id":"c","content_sha256":"h","intent_sha256":"i","rubric_sha256":"r"}\\n'
    """
    return b"".join(made_on_blocks(key, made_on))


def made_on_blocks(key: pd.DataFrame, made_on: pd.DataFrame, *,
                   rows: int = 1 << 16) -> Iterator[bytes]:
    """:func:`made_on_bytes` in blocks of ``rows`` lines, for a writer that streams them
    (:func:`relgrade.io.files.write_blocks`): memory holds one block's lines, not the file.

    Parameters
    ----------
    key, made_on : pandas.DataFrame
        As :func:`made_on_bytes`.
    rows : int, default 65536
        Lines per block.

    Returns
    -------
    iterator of bytes
        Blocks whose concatenation is :func:`made_on_bytes`; none for an empty key.

    Raises
    ------
    InputError
        A key pair has no made-on row: raised by the call, before any block.
    """
    encoded = _made_on_encoded(_sorted_table(key), made_on)
    n = len(encoded["query_id"])

    def blocks():
        for start in range(0, n, rows):
            yield _jsonl({name: values.slice(start, rows)
                          for name, values in encoded.items()}).tobytes()
    return blocks()


def made_on_lines(table: pa.Table, made_on: pd.DataFrame) -> memoryview:
    """:func:`made_on_bytes` of a key table already in canonical order, not sorted again.

    Parameters
    ----------
    table : pyarrow.Table
        A sorted key table (:func:`key_table`), or one block of whole queries of it.
    made_on : pandas.DataFrame
        As :func:`made_on_bytes`: a made-on row for at least every pair of ``table``.

    Returns
    -------
    memoryview
        The made-on lines of ``table``'s rows, in its order.

    Raises
    ------
    InputError
        A pair of ``table`` has no made-on row (the message of :func:`made_on_bytes`).
    """
    return _jsonl(_made_on_encoded(table, made_on))


def _made_on_encoded(table: pa.Table, made_on: pd.DataFrame) -> dict:
    """The columns of :data:`MADE_ON_COLUMNS` JSON-encoded for the sorted key ``table``'s
    rows; refuses a pair without a made-on row."""
    table = _with_made_on(table, made_on)
    made = table["made"].to_numpy()
    if not made.all():
        i = int(np.flatnonzero(~made)[0])
        raise InputError("a key pair without what its grade was made on",
                         item=f"pair ({table['query_id'][i].as_py()}, "
                              f"{table['chunk_id'][i].as_py()})")
    return {name: _json_strings(table[name]) for name in MADE_ON_COLUMNS}


def _made_on_table(made_on: pd.DataFrame) -> pa.Table:
    """A made-on table as Arrow text (each value as ``str`` gives it; the hashes as
    dictionary columns), in its rows' order."""
    return pa.table({"query_id": _plain_text(made_on["query_id"]),
                     "chunk_id": _plain_text(made_on["chunk_id"]),
                     **{name: _text(made_on[name]) for name in _MADE}})


def _with_made_on(table: pa.Table, made_on: pd.DataFrame) -> pa.Table:
    """The sorted key ``table`` with each pair's made-on columns (from the last made-on row
    of the pair; null for a pair without one) and ``made`` (bool: the pair has one), in
    the key's order."""
    made = _made_on_table(made_on)
    joined = table.select(_PAIR).append_column("row", pa.array(np.arange(table.num_rows))).join(
        made.select(_PAIR).append_column("at", pa.array(np.arange(made.num_rows))),
        keys=_PAIR, join_type="left outer", use_threads=False).select(["row", "at"])
    if joined.num_rows > table.num_rows:  # a pair with several made-on rows: the last counts
        joined = joined.group_by("row", use_threads=False).aggregate([("at", "max")]) \
            .rename_columns(["row", "at"])
    at = joined["at"].take(pc.sort_indices(joined["row"]))
    for name in _MADE:
        table = table.append_column(name, made[name].take(at))
    return table.append_column("made", pc.is_valid(at))


def _codes(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Two dictionary arrays' values as integer codes of one shared dictionary (-1: null),
    so that equal strings get equal codes."""
    a, b = _one(a), _one(b)
    ids = pc.dictionary_encode(pa.concat_arrays([a.dictionary, b.dictionary])).indices
    ids = ids.to_numpy(zero_copy_only=False)

    def codes(x, own):
        i = pc.fill_null(x.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.where(i >= 0, own[np.maximum(i, 0)] if len(own) else -1, -1)
    return codes(a, ids[:len(a.dictionary)]), codes(b, ids[len(a.dictionary):])


def content_revision(old_key: pd.DataFrame, old_made_on: pd.DataFrame,
                     new_key: pd.DataFrame, new_made_on: pd.DataFrame) -> dict:
    """How a new key differs from the frozen one, pair by pair, and whether content explains it.

    A key used for metrics may not change afterwards (the void rule), except where what was
    graded changed: a pair whose chunk text, intent line or rubric changed was regraded on
    something new, which is pending work, not a second look at the same evidence.

    Parameters
    ----------
    old_key, new_key : pandas.DataFrame
        The frozen key and the new one (``query_id``, ``chunk_id``, ``grade``).
    old_made_on, new_made_on : pandas.DataFrame
        Their made-on tables (see :func:`made_on_bytes`).

    Returns
    -------
    dict
        ``regraded``: pairs of both keys whose made-on row differs (content, intent or rubric
        changed), as ``[{"query_id", "chunk_id", "content_sha256", "grade_before", "grade"}]``
        with the new content hash; ``changed``: pairs whose grade differs although they were
        graded on the same content, intent and rubric, ``[(query_id, chunk_id), ...]``;
        ``added`` and ``removed``: pairs in only one of the keys. A new key is a revision by
        content alone when ``changed``, ``added`` and ``removed`` are all empty.

    Examples
    --------
    >>> old = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [2, 0]})
    >>> new = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [0, 0]})
    >>> m = lambda h: pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
    ...                             "content_sha256": [h, "B"], "intent_sha256": ["i", "i"],
    ...                             "rubric_sha256": ["r", "r"]})
    >>> r = content_revision(old, m("A"), new, m("A2"))
    >>> r["regraded"], r["changed"]
    ([{'query_id': 'q', 'chunk_id': 'a', 'content_sha256': 'A2', 'grade_before': 2, 'grade': 0}], [])
    """
    old = _with_made_on(_sorted_table(old_key), old_made_on)
    new = _with_made_on(_sorted_table(new_key), new_made_on)
    both = old.select(_PAIR).append_column("i0", pa.array(np.arange(old.num_rows))).join(
        new.select(_PAIR).append_column("i1", pa.array(np.arange(new.num_rows))),
        keys=_PAIR, join_type="full outer", use_threads=False)
    both = both.take(pc.sort_indices(both, sort_keys=[(p, "ascending") for p in _PAIR]))
    i0 = pc.fill_null(both["i0"], -1).to_numpy()
    i1 = pc.fill_null(both["i1"], -1).to_numpy()
    common = np.flatnonzero((i0 >= 0) & (i1 >= 0))
    a, b = i0[common], i1[common]
    made0, made1 = old["made"].to_numpy()[a], new["made"].to_numpy()[b]
    same_text = np.ones(len(common), dtype=bool)
    for name in _MADE:
        c0, c1 = _codes(old[name], new[name])
        same_text &= c0[a] == c1[b]
    same_made = (~made0 & ~made1) | (made0 & made1 & same_text)
    g0, g1 = old["grade"].to_numpy()[a], new["grade"].to_numpy()[b]

    def pairs(at) -> list[tuple[str, str]]:
        at = pa.array(at, type=pa.int64())
        return list(zip(both["query_id"].take(at).to_pylist(),
                        both["chunk_id"].take(at).to_pylist()))

    moved = np.flatnonzero(~same_made)
    content = new["content_sha256"].take(pa.array(b[moved], type=pa.int64())).to_pylist()
    regraded = [{"query_id": q, "chunk_id": c, "content_sha256": h if m else None,
                 "grade_before": int(before), "grade": int(after)}
                for (q, c), h, m, before, after in zip(pairs(common[moved]), content,
                                                       made1[moved], g0[moved], g1[moved])]
    return {"regraded": regraded,
            "changed": pairs(common[same_made & (g0 != g1)]),
            "added": pairs(np.flatnonzero((i1 >= 0) & (i0 < 0))),
            "removed": pairs(np.flatnonzero((i0 >= 0) & (i1 < 0)))}


def revision_pairs(diff: Mapping) -> list[dict] | None:
    """The pairs a revision regraded, or None when ``diff`` is not a revision.

    The rule the key stage and the ppi stage share: a new key (the key, or the ppi stage's
    human key) revises the decision key when every pair it differs on is in both keys and
    was regraded on changed chunk content, intent line or rubric; a grade changed on the
    same content, or a pair added or removed, is not a revision.

    Parameters
    ----------
    diff : dict
        :func:`content_revision` of the decision key and the new one.

    Returns
    -------
    list of dict or None
        ``diff["regraded"]`` when it is not empty and ``changed``, ``added`` and
        ``removed`` are; else None.

    Examples
    --------
    >>> revision_pairs({"regraded": [{"query_id": "q"}], "changed": [], "added": [],
    ...                 "removed": []})
    [{'query_id': 'q'}]
    >>> revision_pairs({"regraded": [{"query_id": "q"}], "changed": [("q", "b")],
    ...                 "added": [], "removed": []}) is None
    True
    """
    if diff["changed"] or diff["added"] or diff["removed"] or not diff["regraded"]:
        return None
    return diff["regraded"]


def qrels_frame(key: pd.DataFrame) -> pd.DataFrame:
    """The key in canonical order as a qrels table (``query_id``, ``chunk_id``, ``grade``)."""
    return _frame(_sorted_table(key))


def require_gate(gate: Mapping | None, *, source) -> None:
    """Refuse to freeze a key unless the agreement gate passed.

    Raises
    ------
    ProtocolError
        ``gate`` is ``None`` (no gate record) or its ``passed`` is not ``true``.
    """
    if gate is None:
        raise ProtocolError(f"no key before the gate passes: {source} does not exist; run the "
                            "agreement and gate stages first")
    passed = gate.get("passed") if isinstance(gate, Mapping) else None
    if passed is not True:
        raise ProtocolError(f"no key before the gate passes: {source} records passed="
                            f"{json.dumps(passed)}; revise the rubric or intents and regrade")


def grader_setup(grades_manifest: Mapping) -> dict:
    """Each grader's setup from the grades manifest, without the coverage details."""
    keep = ("kind", "family", "model", "person", "role", "rubric_version", "round", "file",
            "sha256", "rows")
    return {name: {k: e[k] for k in keep if k in e}
            for name, e in grades_manifest.get("graders", {}).items()}


@dataclass(frozen=True)
class KeyTotals:
    """What a key's record says of the key itself, without the key: for a key made and
    hashed a block of queries at a time.

    Attributes
    ----------
    sha256 : str
        :func:`key_sha256` of the whole key (its lines hashed as they were made).
    pairs : int
        Rows of the key.
    queries : int
        Distinct query ids of the key.
    """

    sha256: str
    pairs: int
    queries: int


def build_record(
    key: pd.DataFrame | KeyTotals,
    *,
    frozen_at: str,
    rubric_version: str,
    round: int,
    manifests: Mapping[str, Mapping],
    pool_sha256: str,
    dropped_queries: Iterable[str],
    post_hoc: bool,
    deviations: Iterable[str] = (),
    provenance: Mapping | None = None,
) -> dict:
    """The key's record: what it is, when it was frozen, from what, and how it departs.

    Parameters
    ----------
    key : pandas.DataFrame or KeyTotals
        The key (see :func:`build_key`), or its hash and counts.
    frozen_at : str
        UTC time, ISO 8601.
    rubric_version : str
        Params ``grading.rubric_version``.
    round : int
        Params ``grading.round``.
    manifests : mapping of str to mapping
        The stages' manifests the key was built from: ``corpus``, ``queries`` and
        ``intents`` (their ``sha256`` is recorded), ``pool`` (its ``pool_version``) and
        ``grades`` (the grader setup and each grade file's ``sha256``).
    pool_sha256 : str
        The pool table's file hash.
    dropped_queries : iterable of str
        Queries left out of the key (see :func:`build_key`).
    post_hoc : bool
        Whether the key is a post-hoc correction of one already used for metrics.
    deviations : iterable of str, optional
        Departures from the protocol (params ``grading.deviations``), carried with the key
        so every number built on it has them.
    provenance : mapping, optional
        What else the key was made with (see :func:`record_provenance`), appended after
        ``deviations``.

    Returns
    -------
    dict
        ``key_sha256``, ``frozen_at``, ``rubric_version``, ``round``, ``grader_setup``,
        ``pool_version``, ``input_sha256`` (``corpus``, ``queries``, ``intents``, ``pool``,
        ``grades``: grader → file hash), ``dropped_queries``, ``post_hoc``, ``pairs`` and
        ``queries`` in the key, ``deviations``; in that order; then the entries of
        ``provenance``.

    Raises
    ------
    KeyError
        A manifest named above is missing from ``manifests``.
    """
    grades = manifests["grades"]
    inputs = {name: manifests[name].get("sha256") for name in ("corpus", "queries", "intents")}
    inputs["pool"] = pool_sha256
    inputs["grades"] = {g: e["sha256"] for g, e in grades["graders"].items() if e["sha256"]}
    if not isinstance(key, KeyTotals):
        key = KeyTotals(key_sha256(key), int(len(key)), int(key["query_id"].nunique()))
    return {
        "key_sha256": key.sha256,
        "frozen_at": frozen_at,
        "rubric_version": str(rubric_version),
        "round": int(round),
        "grader_setup": grader_setup(grades),
        "pool_version": manifests["pool"]["pool_version"],
        "input_sha256": inputs,
        "dropped_queries": sorted(dropped_queries),
        "post_hoc": bool(post_hoc),
        "pairs": key.pairs,
        "queries": key.queries,
        "deviations": [str(d) for d in deviations],
    } | dict(provenance or {})


def record_provenance(
    *,
    qrels_sha256: str,
    rubric_sha256: str | None,
    prompt_template_sha256: str | None,
    graders: Mapping[str, Mapping],
    gate: Mapping,
    audit_lock_sha256: str | None = None,
    judges: Mapping[str, Mapping[str, int]] | None = None,
    prompt_templates: Mapping[str, Mapping[str, int]] | None = None,
    prompt_template_note: str | None = None,
) -> dict:
    """The record's integrity fields: what the key was made with, beyond its inputs.

    Parameters
    ----------
    qrels_sha256 : str
        The qrels file's hash as written (the record is written last and holds it, so a
        key, qrels and record that were not written together are refused when read; see
        :func:`check_whole`).
    rubric_sha256 : str or None
        The rubric file's hash (params ``grading.rubric``).
    prompt_template_sha256 : str or None
        The hash of the prompt template the key's model grades were made with, when they
        name one and the same (from their bank lines); None otherwise, with
        ``prompt_template_note`` saying why.
    graders : mapping of str to mapping
        Params ``graders``: each grader's ``command`` is recorded (None for graders
        without one: people and imports).
    gate : mapping
        The gate's pass record: its ``thresholds`` (the gates used) and ``measures`` (the
        agreement they were checked on); its ``warnings`` when it has any.
    audit_lock_sha256 : str, optional
        The audit lock's hash, when the experiment has one.
    judges : mapping of str to mapping of str to int, optional
        Per model grader, judge identity (64 hex) → grades of the round made under it
        (``"identity not recorded"`` for grades whose bank line names none); see
        :func:`relgrade.graders.cache.judge_counts`.
    prompt_templates : mapping of str to mapping of str to int, optional
        Per model grader, prompt template sha256 → grades of the round made with it
        (``"template not recorded"`` for grades whose bank line names none); see
        :func:`relgrade.graders.cache.template_counts`.
    prompt_template_note : str, optional
        Why ``prompt_template_sha256`` is None (no model grade, grades that name no
        template, several templates).

    Returns
    -------
    dict
        ``qrels_sha256``, ``rubric_sha256``, ``prompt_template_sha256``, ``grader_commands``
        (grader → command, sorted by grader), ``gates``, ``agreement``, then
        ``gate_warnings``, ``audit_lock_sha256``, ``judges``, ``prompt_templates`` (sorted
        by grader) and ``prompt_template_note`` when given.

    Examples
    --------
    >>> record_provenance(qrels_sha256="q", rubric_sha256="r", prompt_template_sha256="t",
    ...                   graders={"b": {"role": "auditor"}, "a": {"command": "grade.sh"}},
    ...                   gate={"thresholds": {"binary_kappa_min": 0.8},
    ...                         "measures": {"binary_kappa": 0.9}})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'qrels_sha256': 'q', 'rubric_sha256': 'r', 'prompt_template_sha256': 't',
     'grader_commands': {'a': 'grade.sh', 'b': None}, 'gates': {'binary_kappa_min': 0.8},
     'agreement': {'binary_kappa': 0.9}}
    """
    out = {
        "qrels_sha256": qrels_sha256,
        "rubric_sha256": rubric_sha256,
        "prompt_template_sha256": prompt_template_sha256,
        "grader_commands": {name: graders[name].get("command") for name in sorted(graders)},
        "gates": dict(gate.get("thresholds") or {}),
        "agreement": dict(gate.get("measures") or {}),
    }
    if gate.get("warnings"):
        out["gate_warnings"] = list(gate["warnings"])
    if audit_lock_sha256:
        out["audit_lock_sha256"] = audit_lock_sha256
    if judges:
        out["judges"] = {name: dict(judges[name]) for name in sorted(judges)}
    if prompt_templates:
        out["prompt_templates"] = {g: dict(prompt_templates[g]) for g in sorted(prompt_templates)}
    if prompt_template_note:
        out["prompt_template_note"] = str(prompt_template_note)
    return out


#: What the record says when no model grade of the round names a prompt template.
NO_TEMPLATE_RECORDED = ("the key's model grades name no prompt template (recorded before "
                        "grade lines named it, or graded outside relgrade): the template "
                        "they were made with is not known")


def grades_template(templates: Mapping[str, Mapping[str, int]], *,
                    not_recorded: str = "template not recorded") -> tuple[str | None, str | None]:
    """The prompt template a key's model grades were made with, from their bank lines.

    Parameters
    ----------
    templates : mapping of str to mapping of str to int
        Per model grader, template sha256 → grades made with it, ``not_recorded`` → grades
        whose bank line names none (:func:`relgrade.graders.cache.template_counts`).
    not_recorded : str, default "template not recorded"
        The key of grades naming no template.

    Returns
    -------
    (str or None, str or None)
        ``(sha256, None)`` when every grade names one and the same template; else
        ``(None, note)``: no model grader graded, no grade names a template
        (:data:`NO_TEMPLATE_RECORDED`), or the grades name several (or some name none).

    Examples
    --------
    >>> grades_template({"m": {"t" * 64: 12}})[0] == "t" * 64
    True
    >>> grades_template({"m": {"template not recorded": 12}})[1] == NO_TEMPLATE_RECORDED
    True
    >>> grades_template({"m": {"a" * 64: 3, "template not recorded": 2}})[1]
    'the model grades were made with 1 prompt template and 2 grades name none (see prompt_templates)'
    >>> grades_template({})
    (None, 'no model grader graded this round: no prompt template made a grade of the key')
    """
    counts: dict[str, int] = {}
    for per in templates.values():
        for sha, n in per.items():
            counts[sha] = counts.get(sha, 0) + int(n)
    named = sorted(k for k in counts if k != not_recorded)
    if not counts:
        return None, "no model grader graded this round: no prompt template made a grade of the key"
    if not named:
        return None, NO_TEMPLATE_RECORDED
    if len(named) == 1 and not_recorded not in counts:
        return named[0], None
    none = counts.get(not_recorded, 0)
    return None, (f"the model grades were made with {len(named)} prompt "
                  f"template{'s' if len(named) > 1 else ''}"
                  + (f" and {none} grade{'s' if none > 1 else ''} name none" if none else "")
                  + " (see prompt_templates)")


def qrels_text(key: pd.DataFrame) -> str:
    """The key as TREC qrels text, ``query_id 0 chunk_id grade`` per line, canonical order."""
    table = _sorted_table(key)
    lines = pc.binary_join_element_wise(table["query_id"], _word("0"), table["chunk_id"],
                                        table["grade"].cast(pa.large_string()), _word(" "))
    return _joined(pc.binary_join_element_wise(lines, _word("\n"), _word(""))
                   ).tobytes().decode("utf-8")


def check_whole(record: Mapping, *, key_sha256: str, qrels_sha256: str | None,
                record_source, key_source, qrels_source) -> None:
    """Refuse a key, qrels and record that were not written together.

    The key stage writes the key file, then the qrels file, then the record last; the
    record holds the sha256 of both. A process killed between those writes, or a file
    edited or swapped by hand, leaves hashes that disagree, and nothing may be scored on
    them.

    Parameters
    ----------
    record : mapping
        The key's record (``key_sha256``, and ``qrels_sha256`` for records written since
        the qrels hash was recorded; an older record without it checks the key only).
    key_sha256, qrels_sha256 : str or None
        The hex sha256 of the key file and of the qrels file as they are on disk
        (``qrels_sha256`` None: no qrels file).
    record_source, key_source, qrels_source : str or os.PathLike
        The three files, named in the message.

    Raises
    ------
    ProtocolError
        The key file's hash is not the record's ``key_sha256``, or the record has a
        ``qrels_sha256`` and the qrels file is missing or hashes otherwise. The message names
        the file, both hashes and the fix (rerun the key stage).
    """
    fix = ("the key stage was interrupted between its writes, or a file was edited or "
           "swapped by hand. Rerun the key stage (`dvc repro key`) to write the three "
           "files again")
    if key_sha256 != record.get("key_sha256"):
        raise ProtocolError(f"{key_source}: the key's sha256 {key_sha256} is not the "
                            f"{record.get('key_sha256')} of its record {record_source}: {fix}")
    want = record.get("qrels_sha256")
    if want is not None and qrels_sha256 != want:
        found = "missing" if qrels_sha256 is None else f"sha256 {qrels_sha256}"
        raise ProtocolError(f"{qrels_source}: the qrels file ({found}) is not the one its "
                            f"record {record_source} froze (sha256 {want}): {fix}")
