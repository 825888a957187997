"""An experiment's key read and made a block of whole queries at a time.

The grades stage writes ``paths.grades`` in query order, and the pool stage writes
``paths.pool`` so too. :class:`KeyBlocks` reads both a block of whole queries at a time
(:func:`relgrade.io.batches.iter_query_blocks`), makes each block's key
(:func:`relgrade.protocol.key.key_table`) and what each of its grades was made on
(:meth:`relgrade.experiment.made_on.MadeOnNow.table`): memory holds one block and the
corpus's hashes as arrays, never the key. It can be iterated again (the key stage hashes
the key in one pass and writes it in a second).

Where that does not hold (a table out of query order, a block that breaks a rule of the
key, a pair whose chunk or query is unknown), iteration raises, and the caller builds the
key whole, which words the error as it always did.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import pandas as pd
import pyarrow as pa

from relgrade.errors import InputError
from relgrade.experiment.made_on import MadeOnNow
from relgrade.io.batches import iter_query_blocks
from relgrade.protocol.key import key_table
from relgrade.protocol.key_blocks import with_pool_rows

#: The grades' columns the key reads.
GRADE_COLUMNS = ["query_id", "chunk_id", "grader", "round", "grade"]


class NotInBlocks(Exception):
    """The key cannot be made a block at a time here (the whole path decides)."""


class KeyBlock(NamedTuple):
    """One block of whole queries of the key.

    Attributes
    ----------
    table : pyarrow.Table
        The block's key: ``query_id``, ``chunk_id`` (large_string), ``grade`` (int64),
        sorted, without the dropped queries.
    made_on : pandas.DataFrame
        What each of its pairs' grade was made on (``query_id``, ``chunk_id``,
        ``content_sha256``, ``intent_sha256``, ``rubric_version``, ``rubric_sha256``).
    dropped : list of str
        The block's queries dropped for want of a relevant grade, sorted.
    """

    table: pa.Table
    made_on: pd.DataFrame
    dropped: list


class KeyBlocks:
    """The key of an experiment's grades and pool, made a block of whole queries at a time.

    Build it with :meth:`open`; iterate it (as often as needed) for the key's blocks in
    ascending query order.

    Raises
    ------
    InputError or NotInBlocks
        While iterating: a table is unreadable or out of query order, a block breaks a
        rule of :func:`relgrade.protocol.key.build_key`, or a pair's chunk or query is
        unknown. The whole path then decides (and words any error).
    """

    def __init__(self, ex, made_on: MadeOnNow):
        self._grades, self._pool = ex.path("grades"), ex.path("pool")
        self._made_on = made_on
        p = ex.params
        self._rules = {"key_grader": p.need("grading.key_grader"),
                       "round": p.grading.round,
                       "relevant_min": p.need("scale").relevant_min}

    @classmethod
    def open(cls, ex) -> "KeyBlocks | None":
        """The experiment's key in blocks, or None when it must be made whole: the grades
        or the pool not a Parquet file, or the corpus and intents not readable as
        :class:`MadeOnNow` (or the rubric missing: the whole path words that)."""
        if any(ex.path(name).suffix.lower() != ".parquet" for name in ("grades", "pool")):
            return None
        try:
            made_on = MadeOnNow.load(ex)
        except InputError:
            return None
        return None if made_on is None else cls(ex, made_on)

    def __iter__(self) -> Iterator[KeyBlock]:
        grades = iter_query_blocks(self._grades, GRADE_COLUMNS, writer="the grades stage")
        pool = iter_query_blocks(self._pool, ["query_id", "chunk_id"], writer="the pool stage")
        for g, p in with_pool_rows(grades, pool):
            table, dropped = key_table(g, pool=p, **self._rules)
            made = self._made_on.table(table.select(["query_id", "chunk_id"]).to_pandas())
            if made is None:
                raise NotInBlocks("a key pair whose chunk or query is unknown")
            yield KeyBlock(table, made, dropped)
