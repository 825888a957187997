"""The key made a block of whole queries at a time: the grades' blocks met with the pool's,
and the key's hash and counts kept as its lines are made.

The grades table and the pool are written in query order, so a block of whole queries of
the grades needs only the pool's rows of the same queries (:func:`with_pool_rows`), and
the key of that block (:func:`relgrade.protocol.key.key_table`) is the key's rows of those
queries in canonical order. Blocks come in ascending query order, so their lines, one
after the other, are the key's bytes; :class:`KeyDigest` hashes them as they come, and
holds only the hash, two counts and the dropped query ids.

The key's record counts the key grader's grades per judge identity and prompt template
from its bank sidecar; :func:`latest_value_counts` counts them from the sidecar's blocks,
holding a pair hash per line and a count per value instead of the lines.

Nothing here words an error for the whole key: a block that breaks a rule of
:func:`relgrade.protocol.key.build_key` raises as that block, and the caller then builds
the key whole, which names what is wrong as it always did.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.protocol.key import KeyTotals, key_lines
from relgrade.protocol.pool import text_hashes


def with_pool_rows(grade_blocks: Iterable[pd.DataFrame],
                   pool_blocks: Iterable[pd.DataFrame]) -> Iterator[tuple[pd.DataFrame,
                                                                          pd.DataFrame]]:
    """Each block of whole queries of the grades with the pool's rows of the same queries.

    Parameters
    ----------
    grade_blocks : iterable of pandas.DataFrame
        Blocks of whole queries of the grades table (a ``query_id`` column), in ascending
        query order (code point order of the ids as ``str`` gives them).
    pool_blocks : iterable of pandas.DataFrame
        The pool's rows (``query_id``, ``chunk_id``) in the same order, in any blocks of
        whole queries.

    Yields
    ------
    (pandas.DataFrame, pandas.DataFrame)
        A grades block and the pool rows whose query sorts after the previous block's last
        query and not after this block's last (so a pool query the grades lack goes with
        the block after it, where it shows as pool pairs without a grade). Pool rows after
        the grades' last query come last, with an empty grades frame. Index from 0.
    """
    pool = iter(pool_blocks)
    held: pd.DataFrame | None = None
    empty = None
    for grades in grade_blocks:
        if not len(grades):
            continue
        empty = grades.iloc[:0]
        last = str(grades["query_id"].iloc[-1])
        parts = []
        while True:
            if held is None:
                held = next(pool, None)
                if held is None:
                    break
            q = held["query_id"].astype(str).to_numpy(dtype=object)
            n = int(np.count_nonzero(q <= last))  # a prefix: the pool is in query order
            parts.append(held.iloc[:n])
            if n < len(held):
                held = held.iloc[n:]
                break
            held = None
        yield grades, _joined(parts)
    rest = ([] if held is None else [held]) + list(pool)
    if empty is not None and sum(len(p) for p in rest):
        yield empty, _joined(rest)


def _joined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in parts if len(p)] or parts[:1]
    if not parts:
        return pd.DataFrame({"query_id": pd.Series([], dtype=object),
                             "chunk_id": pd.Series([], dtype=object)})
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else \
        parts[0].reset_index(drop=True)


class KeyDigest:
    """A key's hash, pair and query counts and dropped queries, from its blocks in order.

    Feed it each block's key table (:func:`relgrade.protocol.key.key_table`) with its
    dropped queries, in ascending query order; :meth:`totals` then gives what
    :func:`relgrade.protocol.key.build_record` needs of the whole key.

    Attributes
    ----------
    dropped : list of str
        The dropped query ids so far, in order.

    Examples
    --------
    >>> from relgrade.protocol.key import key_sha256
    >>> d = KeyDigest()
    >>> t = pa.table({"query_id": pa.array(["q1", "q1"], pa.large_string()),
    ...               "chunk_id": pa.array(["a", "b"], pa.large_string()),
    ...               "grade": pa.array([2, 0], pa.int64())})
    >>> _ = d.add(t, ["q0"])
    >>> d.totals() == KeyTotals(key_sha256(t.to_pandas()), 2, 1), d.dropped
    (True, ['q0'])
    """

    def __init__(self):
        self._hash = hashlib.sha256()
        self._pairs = self._queries = 0
        self.dropped: list[str] = []

    def add(self, table: pa.Table, dropped: Iterable[str]) -> memoryview:
        """Hash one block's key lines and count its rows; returns the lines.

        Parameters
        ----------
        table : pyarrow.Table
            The block's key, sorted (``query_id``, ``chunk_id``, ``grade``).
        dropped : iterable of str
            The block's dropped queries, sorted.

        Returns
        -------
        memoryview
            The block's canonical key lines (:func:`relgrade.protocol.key.key_lines`).
        """
        lines = key_lines(table)
        self._hash.update(lines)
        self._pairs += table.num_rows
        if table.num_rows:
            self._queries += int(pc.count_distinct(table["query_id"]).as_py())
        self.dropped += [str(q) for q in dropped]
        return lines

    def totals(self) -> KeyTotals:
        """The key's hash (hex sha256 of every line so far) and its counts."""
        return KeyTotals(self._hash.hexdigest(), self._pairs, self._queries)


def latest_value_counts(blocks: Iterable[pa.Table | None],
                        fields: Mapping[str, str]) -> dict[str, dict[str, int]] | None:
    """Pairs per value of each field on each pair's last bank line, from a sidecar's blocks,
    holding a 64-bit hash of each line's pair and a count per value, not the lines.

    What :func:`relgrade.graders.cache.judge_counts` and
    :func:`relgrade.graders.cache.template_counts` count on a whole sidecar table, when
    every line is of another pair (no pair hash repeats: then each line is its pair's last,
    whatever the hash); None when a pair may repeat (two lines with one hash), a block is
    None (the column reader refused the file) or an id is missing: count the whole table
    then.

    Parameters
    ----------
    blocks : iterable of pyarrow.Table or None
        The sidecar's lines in file order, in blocks with ``query_id``, ``chunk_id`` and
        the fields (string or dictionary columns).
    fields : mapping of str to str
        Field → the value counted for a line without it (null or empty).

    Returns
    -------
    dict of str to dict of str to int, or None
        Per field, value → lines, in the order the values first come.

    Examples
    --------
    >>> t = pa.table({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "judge": ["j", None]})
    >>> latest_value_counts([t], {"judge": "none"})
    {'judge': {'j': 1, 'none': 1}}
    >>> latest_value_counts([t, t], {"judge": "none"}) is None
    True
    """
    hashes: list[np.ndarray] = []
    words: dict[str, dict[str, int]] = {f: {} for f in fields}
    # lines per value code: a value's code is its rank of first coming (each block's
    # dictionary is in the order its values first come), so the counts need no codes kept
    counts: dict[str, np.ndarray] = {f: np.zeros(0, np.int64) for f in fields}
    for block in blocks:
        if block is None or block.column("query_id").null_count \
                or block.column("chunk_id").null_count:
            return None
        q, c = text_hashes(block.column("query_id")), text_hashes(block.column("chunk_id"))
        hashes.append(q * np.uint64(0x9E3779B97F4A7C15) ^ c)  # wraps: a hash, not a value
        del q, c
        for field, missing in fields.items():
            value = block.column(field).cast(pa.string())
            value = pc.if_else(pc.fill_null(pc.equal(value, ""), True), missing, value)
            coded = pc.dictionary_encode(value).combine_chunks()
            seen = words[field]
            own = np.array([seen.setdefault(w, len(seen))
                            for w in coded.dictionary.to_pylist()], dtype=np.int64)
            if len(own):
                at = np.bincount(own[coded.indices.to_numpy(zero_copy_only=False)],
                                 minlength=len(seen))
                at[:len(counts[field])] += counts[field]
                counts[field] = at
    every = _joined_hashes(hashes)
    every.sort()  # in place: a repeated hash sits beside its twin
    if bool(np.any(every[1:] == every[:-1])):
        return None
    return {field: {name: int(n) for name, n in zip(words[field], counts[field].tolist()) if n}
            for field in fields}


def _joined_hashes(parts: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate(parts)`` (uint64, shape (sum of lengths,)), each part let go once it
    is copied: the copy costs one part beside the result, not every part. Empties
    ``parts``."""
    out = np.empty(sum(len(p) for p in parts), np.uint64)
    at = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        out[at: at + len(part)] = part
        at += len(part)
    return out
