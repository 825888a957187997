"""The judgment bank's row rules stated over columns: one grade file and its sidecar at a time.

:func:`relgrade.protocol.grades.bank_of_file` checks a grade file row by row (keys and their
order, ids, scale, reasons, the pairing with the bank sidecar, one grade per pair and
made-on record). :func:`bank_of_columns` states the same rules over Arrow columns
(:mod:`relgrade.io.grade_columns` reads them) and builds the same table. It never words an
error: when any row breaks a rule it returns None, and the caller reads the file row by
row, which stops at the first bad row with the message it always gave (the file, the line,
the pair, the rule). Every rule is checked here at least as strictly as there, so a file
accepted here is accepted there with the same table.

The rules, as columns:

* keys: exactly ``query_id, chunk_id, reason, grade`` in that order (the reader's
  ``keys_in_order``; Arrow refused other keys, types and repeats already);
* ids: not empty and not only whitespace (whitespace as :meth:`str.isspace` has it);
* grade on the scale; reason at most ``max_reason_chars`` code points and
  ``max_reason_words`` words (runs of non-whitespace, as :meth:`str.split` counts them);
  not empty where :func:`relgrade.protocol.grades.reason_required` asks for one, unless
  the row's bank line says it was imported from a format without reasons;
* row i is made on bank line i: as many lines as rows at least, the same pair, and a
  ``row_sha256`` (when the line has one) equal to the sha256 of the row's line, which is
  the canonical JSON :func:`relgrade.protocol.sidecar.row_sha256` hashes whenever relgrade
  wrote it (a line written otherwise goes to the row path, which hashes the parsed row);
* every made-on value a non-empty string; no two rows of one pair made on the same
  content, intent and rubric.
"""

from __future__ import annotations

from typing import Collection, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.schema import BANK, MADE_ON

#: Judgment-bank columns held as pandas categoricals: few distinct values, repeated on every
#: row (the intent of a query, the rubric, the time of a batch), each held once.
CATEGORICAL = ("intent_sha256", "rubric_version", "rubric_sha256", "graded_at")

#: The characters :meth:`str.isspace` calls whitespace (and :meth:`str.split` splits on),
#: as a regular-expression class body (RE2 syntax).
WHITESPACE = (r"\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}"
              r"\x{2029}\x{202f}\x{205f}\x{3000}")


def word_counts(texts: pa.Array) -> np.ndarray:
    """Words per text as ``len(text.split())`` counts them.

    Parameters
    ----------
    texts : pyarrow.Array or ChunkedArray of string, shape (n,)

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        Runs of characters that are not whitespace (:data:`WHITESPACE`).

    Examples
    --------
    >>> word_counts(pa.array(["two words", "", "  a\\u00a0b\\x1fc "])).tolist()
    [2, 0, 3]
    """
    return pc.count_substring_regex(texts, f"[^{WHITESPACE}]+") \
        .to_numpy(zero_copy_only=False).astype(np.int64)


def blank_ids(ids: pa.Array) -> np.ndarray:
    """Whether each id is empty or only whitespace (``not id.strip()``).

    Examples
    --------
    >>> blank_ids(pa.array(["q1", "", " \\u3000", "a b"])).tolist()
    [False, True, True, False]
    """
    return pc.match_substring_regex(ids, f"^[{WHITESPACE}]*$") \
        .to_numpy(zero_copy_only=False).astype(bool)


_STR = {pa.string(): pd.StringDtype("pyarrow", na_value=np.nan),
        pa.large_string(): pd.StringDtype("pyarrow", na_value=np.nan)}


def _strings(col) -> pd.Series:
    """A string column as the row path builds it (pandas' ``str`` dtype, on the Arrow
    buffers: no Python string per row)."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    return pd.Series(col.to_pandas(types_mapper=_STR.get), dtype="str")


def row_rule_breaks(rows: pa.Table, *, spec: Mapping, scale: Iterable[int],
                    max_reason_words: int, max_reason_chars: int = 300,
                    reasonless: np.ndarray | None = None) -> np.ndarray:
    """Which grade rows break a row rule of
    :func:`relgrade.protocol.grades.validate_grade_rows`, over columns.

    Parameters
    ----------
    rows : pyarrow.Table of shape (n_rows, >= 5)
        :func:`relgrade.io.grade_columns.read_grade_columns`' table (``query_id``,
        ``chunk_id``, ``reason``, ``grade``, ``keys_in_order``).
    spec : mapping
        The grader's params entry (``role``, ``kind``): whether a reason is required
        (:func:`relgrade.protocol.grades.reason_required`).
    scale, max_reason_words, max_reason_chars
        As for :func:`relgrade.protocol.grades.validate_grade_rows`.
    reasonless : numpy.ndarray of bool, shape (n_rows,), optional
        Rows excused from the reason (imported from a format without reasons).

    Returns
    -------
    numpy.ndarray of bool, shape (n_rows,)
        True where the keys are out of order, an id is blank, the grade is off the scale,
        or the reason is too long or missing where one is required.
    """
    n = rows.num_rows
    qid, cid = rows.column("query_id"), rows.column("chunk_id")
    grade, reason = rows.column("grade"), rows.column("reason")
    words = word_counts(reason)
    kind, role = spec["kind"], spec["role"]
    needed = np.full(n, kind != "import")
    if kind == "human" and role == "auditor":
        needed &= grade.to_numpy() != 0
    if reasonless is not None:
        needed &= ~reasonless
    bad = ~rows.column("keys_in_order").to_numpy(zero_copy_only=False).astype(bool)
    bad |= blank_ids(qid) | blank_ids(cid)
    bad |= ~pc.is_in(grade, value_set=pa.array(sorted({int(g) for g in scale}), pa.int64())) \
        .to_numpy(zero_copy_only=False).astype(bool)
    bad |= pc.utf8_length(reason).to_numpy(zero_copy_only=False) > max_reason_chars
    bad |= words > max_reason_words
    bad |= needed & (words == 0)
    return bad


def rows_of_columns(rows: pa.Table, *, spec: Mapping, pool: pd.DataFrame | None,
                    audit_query_ids: Iterable[str] | None, scale: Iterable[int],
                    max_reason_words: int,
                    max_reason_chars: int = 300) -> pd.DataFrame | None:
    """A grader's new rows checked over columns as
    :func:`relgrade.protocol.grades.validate_grader_file` checks them row by row.

    Parameters
    ----------
    rows : pyarrow.Table of shape (n_rows, >= 5)
        :func:`relgrade.io.grade_columns.read_grade_columns`' table of the file.
    spec : mapping
        The grader's params entry (``role``, ``kind``).
    pool : pandas.DataFrame or None
        The pool (``query_id``, ``chunk_id``, strings): every row's pair must be in it;
        None skips that check.
    audit_query_ids : iterable of str or None
        For an auditor, the audit queries its rows must be of; None skips that check.
    scale, max_reason_words, max_reason_chars
        As for :func:`relgrade.protocol.grades.validate_grade_rows`.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 4), or None
        ``query_id``, ``chunk_id``, ``reason`` (``str``), ``grade`` (int64) in file order,
        equal to :func:`relgrade.protocol.grades.validate_grader_file`'s table of the same
        file; None when the file is empty or any row breaks a rule (a row rule, a pair
        outside the pool, a pair given twice, an auditor's query outside the audit sample):
        read it row by row then, for the message.
    """
    n = rows.num_rows
    if not n:
        return None
    if row_rule_breaks(rows, spec=spec, scale=scale, max_reason_words=max_reason_words,
                       max_reason_chars=max_reason_chars).any():
        return None
    qid, cid = rows.column("query_id"), rows.column("chunk_id")
    if _pair_codes(qid, cid)[1] != n:
        return None  # a pair given twice
    if spec["role"] == "auditor" and audit_query_ids is not None:
        audit = pa.array(sorted({str(q) for q in audit_query_ids}), pa.string())
        if not pc.all(pc.is_in(qid, value_set=audit)).as_py():
            return None
    if pool is not None:
        pairs = pa.table({"query_id": qid, "chunk_id": cid})
        pooled = pa.table({"query_id": pa.array(pool["query_id"].astype(str), pa.string()),
                           "chunk_id": pa.array(pool["chunk_id"].astype(str), pa.string())})
        outside = pairs.join(pooled, keys=["query_id", "chunk_id"], join_type="left anti",
                             use_threads=False)
        del pairs, pooled
        if outside.num_rows:
            return None
    out = pd.DataFrame({"query_id": _strings(qid), "chunk_id": _strings(cid),
                        "reason": _strings(rows.column("reason")),
                        "grade": pd.Series(rows.column("grade").to_numpy(), dtype="int64")})
    pa.default_memory_pool().release_unused()  # the checks' temporaries are garbage now
    return out


def _pair_codes(qid, cid) -> tuple[np.ndarray, int]:
    """Each row's pair as one int64 code (query code × chunk count + chunk code), and how
    many distinct pairs there are."""
    q = pc.dictionary_encode(qid).combine_chunks()
    c = pc.dictionary_encode(cid).combine_chunks()
    pair = q.indices.to_numpy(zero_copy_only=False).astype(np.int64) * len(c.dictionary) \
        + c.indices.to_numpy(zero_copy_only=False)
    return pair, int(len(np.unique(pair)))


def bank_of_columns(rows: pa.Table, bank: pa.Table, *, name: str, spec: Mapping,
                    round: int, scale: Iterable[int], max_reason_words: int,
                    max_reason_chars: int = 300,
                    reasonless_formats: Collection[str] = ()) -> pd.DataFrame | None:
    """One grade file and its bank sidecar as judgment-bank rows, checked over columns.

    Parameters
    ----------
    rows : pyarrow.Table of shape (n_rows, 6)
        :func:`relgrade.io.grade_columns.read_grade_columns`'s table of the grade file.
    bank : pyarrow.Table of shape (n_lines, 11)
        :func:`relgrade.io.grade_columns.read_bank_columns`'s table of its sidecar.
    name : str
        The grader.
    spec : mapping
        Its params entry (``role``, ``kind``).
    round : int
        The file's round (0 when unknown).
    scale, max_reason_words, max_reason_chars
        As for :func:`relgrade.protocol.grades.validate_grade_rows`.
    reasonless_formats : collection of str
        Import formats whose grades carry no reason
        (:data:`relgrade.protocol.grades.REASONLESS_FORMATS`).

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 13), or None
        :data:`relgrade.schema.BANK` plus ``sequence`` (the row's 0-based position), equal
        to :func:`relgrade.protocol.grades.bank_of_file`'s table of the same files; None
        when any row breaks a rule of the module (read the file row by row for the
        message).
    """
    n = rows.num_rows
    if n > bank.num_rows:
        return None  # grade rows without their bank lines
    if not n:
        return None  # nothing to gain; the row path handles an empty file
    bank = bank.slice(0, n)
    if _breaks(rows, bank, spec=spec, scale=scale, max_reason_words=max_reason_words,
               max_reason_chars=max_reason_chars, reasonless_formats=reasonless_formats):
        return None
    qid, cid = rows.column("query_id"), rows.column("chunk_id")
    if _repeated_made_on(qid, cid, bank):
        return None  # two rows of one pair made on the same content, intent and rubric
    pa.default_memory_pool().release_unused()  # the checks' temporaries are garbage now
    return _bank_frame(rows, bank, name=name, round=round)


def bank_of_column_blocks(blocks, *, name: str, spec: Mapping, round: int,
                          scale: Iterable[int], max_reason_words: int,
                          max_reason_chars: int = 300,
                          reasonless_formats: Collection[str] = ()) -> pd.DataFrame | None:
    """:func:`bank_of_columns` of a round read a block of rows at a time.

    Each block is checked by the same rules as it comes and cut to the columns the bank
    keeps (ids, reason, grade, made-on values, time) before the next is read, so the grade
    lines' and bank lines' hashes and the sidecar's other fields are never held for the
    whole file. "One grade per pair and made-on record", which spans blocks, is checked on
    the kept columns at the end.

    Parameters
    ----------
    blocks : iterable of (pyarrow.Table, pyarrow.Table)
        :class:`relgrade.io.grade_columns.RoundBlocks`: the grade file's rows and the
        sidecar's lines of the same rows, block by block (a block's ``lines`` shorter than
        its ``rows`` when the sidecar ends first).
    name, spec, round, scale, max_reason_words, max_reason_chars, reasonless_formats
        As for :func:`bank_of_columns`.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 13), or None
        The table :func:`bank_of_columns` gives for the whole files (equal to it, column
        by column); None when it would give None (a row breaks a rule, the sidecar has
        fewer lines than the file has rows, the file has no row) or when ``blocks`` stops
        because a reader refused a file (then see its ``refused``).
    """
    kept = []
    for rows, bank in blocks:
        if rows.num_rows > bank.num_rows:
            return None  # grade rows without their bank lines
        if _breaks(rows, bank, spec=spec, scale=scale, max_reason_words=max_reason_words,
                   max_reason_chars=max_reason_chars, reasonless_formats=reasonless_formats):
            return None
        kept.append((rows.select(["query_id", "chunk_id", "reason", "grade"]),
                     bank.select([*MADE_ON, "graded_at"])))
        del rows, bank
        pa.default_memory_pool().release_unused()  # the block's other columns are garbage
    if getattr(blocks, "refused", False) or not kept:
        return None  # a reader refused a file; or no row (the row path handles it)
    # each column in one piece (the bank's later filters and takes would join its chunks
    # into a whole copy each time), one column at a time; the dictionary columns over one
    # dictionary, for their codes
    rows = pa.concat_tables([r for r, _ in kept])
    bank = pa.concat_tables([b for _, b in kept]).unify_dictionaries()
    del kept
    rows, bank = _one_chunk(rows), _one_chunk(bank)
    if _repeated_made_on(rows.column("query_id"), rows.column("chunk_id"), bank):
        return None  # two rows of one pair made on the same content, intent and rubric
    pa.default_memory_pool().release_unused()
    return _bank_frame(rows, bank, name=name, round=round)


def block_breaks(rows: pa.Table, bank: pa.Table, *, spec: Mapping, scale: Iterable[int],
                 max_reason_words: int, max_reason_chars: int = 300,
                 reasonless_formats: Collection[str] = ()) -> bool:
    """Whether one block of :class:`relgrade.io.grade_columns.RoundBlocks` breaks a row rule
    of :func:`bank_of_columns`: a row without its bank line beside it, or any rule of a row
    and its line (the pair, the made-on values, the row's hash).

    Parameters
    ----------
    rows : pyarrow.Table of shape (n, 6)
        A block of the grade file's rows.
    bank : pyarrow.Table of shape (m, 11)
        The sidecar's lines of the same rows (``m < n`` when the sidecar ended first).
    spec, scale, max_reason_words, max_reason_chars, reasonless_formats
        As for :func:`bank_of_columns`.

    Returns
    -------
    bool
        True when the block must go to the row path (which words the error).
    """
    if rows.num_rows > bank.num_rows:
        return True
    return _breaks(rows, bank, spec=spec, scale=scale, max_reason_words=max_reason_words,
                   max_reason_chars=max_reason_chars, reasonless_formats=reasonless_formats)


def bank_frame(rows: pa.Table, bank: pa.Table, *, name: str, round: int,
               first: int = 0) -> pd.DataFrame | None:
    """Checked rows of one grader and their bank lines as judgment-bank rows, or None when
    two rows of one pair were made on the same content, intent and rubric.

    Parameters
    ----------
    rows : pyarrow.Table of shape (n, >= 4)
        ``query_id``, ``chunk_id``, ``reason``, ``grade`` (checked by :func:`block_breaks`).
    bank : pyarrow.Table of shape (n, >= 5)
        Their lines' :data:`relgrade.schema.MADE_ON` values and ``graded_at``.
    name : str
        The grader.
    round : int
        The file's round.
    first : int, default 0
        The 0-based place of the first row in its file (``sequence`` counts from it).

    Returns
    -------
    pandas.DataFrame of shape (n, 13) or None
        As :func:`bank_of_columns` gives the same rows; every pair's rows must all be in
        ``rows`` for the one-grade-per-made-on-record rule to be the file's.
    """
    if rows.num_rows and _repeated_made_on(rows.column("query_id"), rows.column("chunk_id"),
                                           bank):
        return None
    out = _bank_frame(rows, bank, name=name, round=round)
    out["sequence"] = np.arange(first, first + rows.num_rows, dtype="int64")
    return out


def _breaks(rows: pa.Table, bank: pa.Table, *, spec: Mapping, scale: Iterable[int],
            max_reason_words: int, max_reason_chars: int,
            reasonless_formats: Collection[str]) -> bool:
    """Whether any of ``rows`` breaks a row rule or its pairing with the line of ``bank``
    beside it (as many lines as rows), as :func:`bank_of_columns` states them."""
    fmt = bank.column("imported_format")
    reasonless = pc.fill_null(pc.is_in(fmt, value_set=pa.array(sorted(reasonless_formats),
                                                                 pa.string())), False)
    bad = row_rule_breaks(rows, spec=spec, scale=scale, max_reason_words=max_reason_words,
                          max_reason_chars=max_reason_chars,
                          reasonless=reasonless.to_numpy(zero_copy_only=False).astype(bool))
    for k in ("query_id", "chunk_id"):  # row i is made on bank line i: the same pair
        same = pc.fill_null(pc.equal(bank.column(k), rows.column(k)), False)
        bad |= ~same.to_numpy(zero_copy_only=False).astype(bool)
    for k in MADE_ON:
        col = bank.column(k).cast(pa.string())
        empty = pc.fill_null(pc.equal(col, ""), True)
        bad |= empty.to_numpy(zero_copy_only=False).astype(bool)
    if bad.any():
        return True
    digest = bank.column("row_sha256")
    if digest.null_count < len(digest):  # a line without one: bound by the pair alone
        same = pc.fill_null(pc.equal(rows.column("line_sha256"), digest), True)
        if not pc.all(same).as_py():
            return True
    return False


def _bank_frame(rows: pa.Table, bank: pa.Table, *, name: str, round: int) -> pd.DataFrame:
    """The judgment bank's table of checked rows and their bank lines (same length)."""
    n = rows.num_rows
    out = pd.DataFrame({"query_id": _strings(rows.column("query_id")),
                        "chunk_id": _strings(rows.column("chunk_id"))})
    out["grader"] = name
    out["round"] = int(round)
    out["grade"] = pd.Series(rows.column("grade").to_numpy(), dtype="int64")
    out["reason"] = _strings(rows.column("reason"))
    for k in MADE_ON:
        out[k] = _held(bank.column(k), k)
    out["graded_at"] = _held(bank.column("graded_at"), "graded_at")
    out["sequence"] = np.arange(n, dtype="int64")
    return out[[*BANK, "sequence"]]


def _one_chunk(table: pa.Table) -> pa.Table:
    """``table`` with each column in one chunk, joined one column at a time (a column's
    chunks are let go, and Arrow's freed buffers handed back, once it is joined)."""
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        if column.num_chunks > 1:
            table = table.set_column(i, name,
                                     pa.chunked_array([column.combine_chunks()], column.type))
            del column
            pa.default_memory_pool().release_unused()
    return table


def _repeated_made_on(qid, cid, bank: pa.Table) -> bool:
    """Whether two rows of one pair were made on the same :data:`MADE_ON` values.

    Each pair is coded as one int64 (query code × chunk count + chunk code); only rows of a
    pair that occurs more than once are compared on their made-on values (as dictionary
    codes), so the common file, one row per pair, costs one integer hash table."""
    q = pc.dictionary_encode(qid).combine_chunks()
    c = pc.dictionary_encode(cid).combine_chunks()
    pair = q.indices.to_numpy(zero_copy_only=False).astype(np.int64) * len(c.dictionary) \
        + c.indices.to_numpy(zero_copy_only=False)
    del q, c
    _, first, counts = np.unique(pair, return_inverse=True, return_counts=True)
    again = counts[first] > 1
    del first, counts
    if not again.any():
        return False
    rows = np.flatnonzero(again)
    made = pa.table({"pair": pa.array(pair[rows]),
                     **{k: _codes(bank.column(k)).take(pa.array(rows)) for k in MADE_ON}})
    keys = made.group_by(list(made.column_names), use_threads=False).aggregate([])
    return keys.num_rows != len(rows)


def _codes(col) -> pa.Array:
    """A column's dictionary codes (int32), or the column itself when it is not one."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col.indices if pa.types.is_dictionary(col.type) else col


def _held(col, name: str) -> pd.Series:
    """A bank column as the judgment bank's table holds it: a categorical for the columns of
    :data:`CATEGORICAL` (sorted categories, built from the dictionary, never from one string
    per row; a missing time is ``""``), a ``str`` column otherwise."""
    if name not in CATEGORICAL:
        return _strings(col)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    values = col.dictionary.to_pylist()
    codes = pc.fill_null(col.indices, 0).to_numpy(zero_copy_only=False)
    if col.null_count:  # only a time may be missing (the made-on values were checked)
        codes = np.where(col.is_null().to_numpy(zero_copy_only=False), len(values), codes)
        values = values + [""]
    return categorical_from(values, codes)


def categorical_from(values: list, codes: np.ndarray) -> pd.Series:
    """A categorical Series of ``values[codes]``, categories the distinct values in Python
    string order (as :func:`as_categorical` makes them).

    Parameters
    ----------
    values : list of str, length k
        The dictionary (repeats allowed).
    codes : numpy.ndarray of int, shape (n,)
        Positions in ``values``, each in ``[0, k)``.

    Returns
    -------
    pandas.Series of category dtype, shape (n,)
    """
    cats = sorted(set(values))
    where = {v: i for i, v in enumerate(cats)}
    remap = np.array([where[v] for v in values], dtype=np.int32)
    taken = remap[np.asarray(codes, dtype=np.int64)] if len(codes) else \
        np.zeros(0, dtype=np.int32)
    return pd.Series(pd.Categorical.from_codes(taken, categories=pd.Index(cats, dtype="str")))


def as_categorical(values) -> pd.Series:
    """Strings as the judgment bank holds a column of :data:`CATEGORICAL`.

    Parameters
    ----------
    values : sequence of str, length n

    Returns
    -------
    pandas.Series of category dtype, shape (n,)
        Categories the distinct values in Python string order (``str`` dtype).

    Examples
    --------
    >>> as_categorical(["b", "a", "b"]).cat.codes.tolist()
    [1, 0, 1]
    """
    values = list(values)
    where: dict = {}
    codes = np.fromiter((where.setdefault(v, len(where)) for v in values), dtype=np.int64,
                        count=len(values))
    return categorical_from(list(where), codes)


def concat_bank(parts: list) -> pd.DataFrame:
    """Judgment-bank tables stacked, the columns of :data:`CATEGORICAL` kept categorical.

    Parameters
    ----------
    parts : list of pandas.DataFrame
        Tables of :func:`bank_of_columns` or :func:`relgrade.protocol.grades.bank_of_file`
        (same columns); at least one.

    Returns
    -------
    pandas.DataFrame
        ``pandas.concat(parts, ignore_index=True)``, except that each column of
        :data:`CATEGORICAL` is one categorical over the union of the parts' categories (in
        Python string order): ``pandas.concat`` would turn categoricals with different
        categories into one Python string per row.
    """
    if len(parts) == 1:
        return parts[0].reset_index(drop=True)
    cats = {k: sorted(set().union(*(p[k].cat.categories for p in parts)))
            for k in CATEGORICAL if all(isinstance(p[k].dtype, pd.CategoricalDtype)
                                        for p in parts)}
    parts = [p.assign(**{k: p[k].cat.set_categories(pd.Index(c, dtype="str"))
                         for k, c in cats.items()}) for p in parts]
    return pd.concat(parts, ignore_index=True)
