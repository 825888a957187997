"""A grader's new rows checked a block of rows at a time, with compact global state.

:func:`relgrade.protocol.bank_columns.rows_of_columns` checks a whole file's table at once.
:class:`BlockCheck` states the same rules for blocks of it (as
:class:`relgrade.io.grade_columns.GradeBlocks` reads them), so what is held does not grow
with the file's text: the row rules per block; the pair of every row as one int64 code
(query code × chunk count + chunk code), checked against the pool's sorted codes as each
block comes and kept for the one-row-per-pair rule, checked by one sort at the end.

As there, no error is worded here: when any row breaks a rule the check says so, and the
caller reads the file row by row, which names the first bad row as it always did. Ids are
coded through :class:`IdCodes`, which compares the ids themselves wherever the 64-bit
hashes match, so a hash collision can never pass an unknown id (it can only send a file to
the row path).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.protocol.bank_columns import row_rule_breaks
from relgrade.protocol.pool import text_hashes
from relgrade.ranking import arrow_ids


class IdCodes:
    """Known ids (a corpus's chunk ids, the queries) coded by their position, found by hash.

    The ids are hashed once (64-bit, :func:`relgrade.protocol.pool.text_hashes`) and the
    hashes sorted; a lookup hashes the values, finds each by binary search and compares the
    ids themselves where the hashes match. About 16 bytes an id beside the ids' own Arrow
    column, where a dict of Python strings costs about 150.

    Parameters
    ----------
    ids : pyarrow array or ChunkedArray of string, or array-like of str, shape (n,)
        The known ids, in the order that gives their codes 0 .. n - 1.

    Attributes
    ----------
    ids : pyarrow.Array of large_string, shape (n,)
    unique : bool
        Whether no two ids share a hash (so none repeats); a lookup of a repeated id finds
        one of its positions.

    Examples
    --------
    >>> known = IdCodes(["c2", "c1"])
    >>> known.codes(pa.array(["c1", "c3", "c2"])).tolist()
    [1, -1, 0]
    """

    def __init__(self, ids):
        self.ids = arrow_ids(ids).combine_chunks()
        hashes = text_hashes(self.ids)
        self._order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[self._order]
        self.unique = not bool(np.any(self._hashes[1:] == self._hashes[:-1]))

    def __len__(self) -> int:
        return len(self.ids)

    def codes(self, values) -> np.ndarray:
        """The code of each of ``values`` (string array, shape (m,)): int64, shape (m,), -1
        where the value is not a known id."""
        arr = arrow_ids(values)
        out = np.full(len(arr), -1, dtype=np.int64)
        if not len(arr) or not len(self.ids):
            return out
        h = text_hashes(arr)
        at = np.minimum(np.searchsorted(self._hashes, h), len(self._hashes) - 1)
        hit = np.flatnonzero(self._hashes[at] == h)
        if not len(hit):
            return out
        cand = self._order[at[hit]]
        same = pc.equal(arr.take(pa.array(hit)), self.ids.take(pa.array(cand)))
        same = same.to_numpy(zero_copy_only=False).astype(bool)
        out[hit[same]] = cand[same]
        return out


class BlockCheck:
    """The rules of :func:`relgrade.protocol.bank_columns.rows_of_columns`, a block at a
    time.

    Parameters
    ----------
    spec : mapping
        The grader's params entry (``role``, ``kind``).
    queries, chunks : IdCodes
        The ids a row's query and chunk must be among (what a grade can be made on: the
        intents' queries, the corpus's chunks); a row outside them is left to the row path.
    pool : numpy.ndarray of int64, shape (n_pairs,)
        The pool's pairs as codes (``query code * len(chunks) + chunk code``), sorted.
    audit_query_ids : iterable of str or None
        For an auditor, the audit queries its rows must be of; None skips that check.
    scale, max_reason_words, max_reason_chars
        As for :func:`relgrade.protocol.grades.validate_grade_rows`.

    Attributes
    ----------
    n_rows : int
        Rows checked so far.
    """

    def __init__(self, *, spec: Mapping, queries: IdCodes, chunks: IdCodes, pool: np.ndarray,
                 audit_query_ids: Iterable[str] | None, scale: Iterable[int],
                 max_reason_words: int, max_reason_chars: int = 300):
        self.spec = spec
        self.queries, self.chunks = queries, chunks
        self.pool = np.asarray(pool, dtype=np.int64)
        self.scale = [int(g) for g in scale]
        self.max_reason_words, self.max_reason_chars = max_reason_words, max_reason_chars
        self.audit = None
        if spec["role"] == "auditor" and audit_query_ids is not None:
            self.audit = pa.array(sorted({str(q) for q in audit_query_ids}), pa.string())
        self.n_rows = 0
        self._pairs: list[np.ndarray] = []

    def add(self, rows: pa.Table) -> bool:
        """Check one block (:class:`relgrade.io.grade_columns.GradeBlocks`' table); False
        when any row breaks a rule (a row rule, an auditor's query outside the audit sample,
        an id that is not known, a pair outside the pool)."""
        if row_rule_breaks(rows, spec=self.spec, scale=self.scale,
                           max_reason_words=self.max_reason_words,
                           max_reason_chars=self.max_reason_chars).any():
            return False
        qid, cid = rows.column("query_id"), rows.column("chunk_id")
        if self.audit is not None and not pc.all(pc.is_in(qid, value_set=self.audit)).as_py():
            return False
        q = self.queries.codes(qid)
        c = self.chunks.codes(cid)
        if (q < 0).any() or (c < 0).any():
            return False
        pair = q * len(self.chunks) + c
        if not len(self.pool):
            return False
        at = np.minimum(np.searchsorted(self.pool, pair), len(self.pool) - 1)
        if not (self.pool[at] == pair).all():
            return False
        self._pairs.append(pair)
        self.n_rows += rows.num_rows
        return True

    def finish(self) -> bool:
        """Whether every pair checked was given once (one sort of the rows' pair codes)."""
        pairs = np.concatenate(self._pairs) if self._pairs else np.zeros(0, np.int64)
        self._pairs = []
        pairs.sort()
        return not bool(np.any(pairs[1:] == pairs[:-1]))


def pool_codes(blocks: Iterable[pa.Table], *, queries: IdCodes, chunks: IdCodes) -> np.ndarray:
    """The pool's pairs as sorted int64 codes (``query code * len(chunks) + chunk code``).

    Parameters
    ----------
    blocks : iterable of pyarrow.Table or RecordBatch
        The pool's rows (``query_id``, ``chunk_id``), a block at a time.
    queries, chunks : IdCodes
        As for :class:`BlockCheck`; a pooled pair whose query or chunk they lack is left out
        (no row of a file checked against it can name it).

    Returns
    -------
    numpy.ndarray of int64, shape (n_pairs,)
        Sorted; a pair pooled twice is there twice.
    """
    parts = []
    for block in blocks:
        q = queries.codes(block.column("query_id"))
        c = chunks.codes(block.column("chunk_id"))
        keep = (q >= 0) & (c >= 0)
        parts.append(q[keep] * len(chunks) + c[keep])
    out = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    out.sort()
    return out
