"""One grader's round taken a block of whole queries at a time, checked as the bank checks it.

:func:`relgrade.protocol.bank_columns.bank_of_column_blocks` reads a whole round into the
judgment bank. :class:`QueryCursor` walks the same blocks (a grade file's rows and its bank
sidecar's lines, :class:`relgrade.io.grade_columns.RoundBlocks`) and hands them on cut at
query boundaries: every row of the queries up to a given id, then the next ones. Each block
is checked by the same row rules as it comes and cut to the columns the bank keeps.

A grade file is in query order in practice, not by promise. The cursor checks it: a row
whose query sorts (by code point, as Python compares str) before the row above it stops the
cursor (``broken``), as does any row rule broken or a reader's refusal. No error is worded
here: the caller then reads the bank whole, which names the first bad row as it always did.
With the order kept, all rows of a pair come out together, so the rule "one grade per pair
and made-on record" is checked within each cut
(:func:`relgrade.protocol.bank_columns.bank_frame`).
"""

from __future__ import annotations

from typing import Collection, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.protocol.bank_columns import block_breaks
from relgrade.schema import MADE_ON

#: The grade rows' columns the bank keeps.
ROW_COLUMNS = ["query_id", "chunk_id", "reason", "grade"]

#: The bank lines' columns the bank keeps.
LINE_COLUMNS = [*MADE_ON, "graded_at"]


def _text(column) -> pa.ChunkedArray:
    """An id column as large strings (the type both sides of a comparison share)."""
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column])
    return column.cast(pa.large_string())


def out_of_order(query_ids, previous: str | None) -> bool:
    """Whether ``query_ids`` (string array, shape (n,)) go down anywhere, the first of them
    against ``previous`` (the id before them, or None) included.

    Examples
    --------
    >>> out_of_order(pa.array(["q1", "q1", "q2"]), "q0")
    False
    >>> out_of_order(pa.array(["q2", "q1"]), None)
    True
    """
    q = _text(query_ids).combine_chunks()
    if not len(q):
        return False
    if previous is not None and q[0].as_py() < previous:
        return True
    if len(q) > 1:
        return bool(pc.any(pc.less(q.slice(1), q.slice(0, len(q) - 1))).as_py())
    return False


class QueryCursor:
    """A grader's round cut at query boundaries: :meth:`upto` gives the rows of every query
    up to an id, in file order, with their bank lines.

    Parameters
    ----------
    blocks : iterable of (pyarrow.Table, pyarrow.Table)
        The grade file's rows and its sidecar's lines of the same rows, block by block
        (:class:`relgrade.io.grade_columns.RoundBlocks`; its ``refused`` is read once it
        ends).
    spec : mapping
        The grader's params entry (``role``, ``kind``).
    scale, max_reason_words, max_reason_chars, reasonless_formats
        As for :func:`relgrade.protocol.bank_columns.bank_of_columns`.

    Attributes
    ----------
    broken : bool
        Whether a block broke a rule, the order, or a reader refused: the round must be
        read whole (nothing the cursor gave can be used).
    rows : int
        Rows given so far.
    """

    def __init__(self, blocks: Iterable, *, spec: Mapping, scale: Iterable[int],
                 max_reason_words: int, max_reason_chars: int = 300,
                 reasonless_formats: Collection[str] = ()):
        self._source = blocks
        self._blocks = iter(blocks)
        self._rules = dict(spec=spec, scale=[int(g) for g in scale],
                           max_reason_words=max_reason_words,
                           max_reason_chars=max_reason_chars,
                           reasonless_formats=reasonless_formats)
        self._held: list[tuple[pa.Table, pa.Table]] = []
        self._last: str | None = None  # the last query id read
        self._ended = False
        self.broken = False
        self.rows = 0

    def _read(self) -> bool:
        """Read one more block into the held rows; False once the round has ended."""
        if self._ended or self.broken:
            return False
        block = next(self._blocks, None)
        if block is None:
            self._ended = True
            if getattr(self._source, "refused", False):
                self.broken = True
            return False
        rows, lines = block
        if block_breaks(rows, lines, **self._rules) or \
                out_of_order(rows.column("query_id"), self._last):
            self.broken = True
            return False
        if rows.num_rows:
            self._last = _text(rows.column("query_id"))[rows.num_rows - 1].as_py()
            self._held.append((rows.select(ROW_COLUMNS), lines.select(LINE_COLUMNS)))
        return True

    def _held_last(self) -> str | None:
        """The query id of the last row held, or None when none is."""
        if not self._held:
            return None
        rows = self._held[-1][0]
        return _text(rows.column("query_id"))[rows.num_rows - 1].as_py()

    def upto(self, last: str | None) -> tuple[pa.Table, pa.Table, int] | None:
        """The rows of every query up to ``last`` (all that is left when None) not given yet.

        Parameters
        ----------
        last : str or None
            The last query id of the cut (code point order).

        Returns
        -------
        (rows, lines, first) or None
            ``rows`` (:data:`ROW_COLUMNS`) and ``lines`` (:data:`LINE_COLUMNS`), pyarrow
            tables of the same length, and ``first``, the 0-based place of the first row in
            its file; None once :attr:`broken`.
        """
        while not self.broken:
            held = self._held_last()
            if held is not None and last is not None and held > last:
                break
            if not self._read():
                break
        if self.broken:
            self._held = []
            return None
        if not self._held:
            empty = (pa.table({c: pa.array([], pa.string()) for c in ROW_COLUMNS}),
                     pa.table({c: pa.array([], pa.string()) for c in LINE_COLUMNS}))
            return empty[0], empty[1], self.rows
        rows = pa.concat_tables([r for r, _ in self._held])
        lines = pa.concat_tables([b for _, b in self._held], promote_options="permissive") \
            if len(self._held) > 1 else self._held[0][1]
        n = rows.num_rows
        if last is not None:
            q = _text(rows.column("query_id"))
            n = int(pc.sum(pc.less_equal(q, pa.scalar(last, pa.large_string()))).as_py() or 0)
        self._held = [(rows.slice(n), lines.slice(n))] if n < rows.num_rows else []
        first = self.rows
        self.rows += n
        return rows.slice(0, n), lines.slice(0, n), first


def pool_pair_count(pool) -> int:
    """Distinct ``(query_id, chunk_id)`` pairs of a pool block (pandas.DataFrame), as str."""
    return int(len(pool[["query_id", "chunk_id"]].astype(str).drop_duplicates()))


def sum_entries(total: dict, part: Mapping) -> dict:
    """Two grades-manifest entries of one grader summed: ``rows``, ``queries``,
    ``pairs_missing``, ``bank_rows`` and ``unused`` added, ``missing`` joined (``part``'s
    queries after ``total``'s); every other key as in ``part``.

    Parameters
    ----------
    total : dict
        The entry so far, over earlier query blocks (empty at first).
    part : mapping
        The entry of the next block of whole queries (queries sort after ``total``'s).

    Returns
    -------
    dict
        The entry of both blocks together (``total``, updated).

    Examples
    --------
    >>> a = {"role": "grader", "rows": 2, "queries": 1, "pairs_missing": 1,
    ...      "missing": {"q1": ["c"]}, "bank_rows": 3, "unused": 1}
    >>> sum_entries(a, {"role": "grader", "rows": 1, "queries": 1, "pairs_missing": 0,
    ...                 "missing": {}, "bank_rows": 1, "unused": 0})["rows"]
    3
    """
    if not total:
        return {k: (dict(v) if k == "missing" else v) for k, v in part.items()}
    for k, v in part.items():
        if k in ("rows", "queries", "pairs_missing", "bank_rows", "unused"):
            total[k] = int(total[k]) + int(v)
        elif k == "missing":
            total[k].update(v)
        else:
            total[k] = v
    return total


def grader_codes(names: list[str], counts: list[int]) -> np.ndarray:
    """Each grades row's grader as a code (int16, shape (sum(counts),)): ``counts[i]`` rows
    of ``names[i]``, in that order, for counting rows per grader without a str per row."""
    return np.repeat(np.arange(len(names), dtype=np.int16), counts)
