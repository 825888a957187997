"""The pool stage's checks of run rows against the known ids, as one DuckDB query.

Every run row must name a query of the query set and a chunk of the corpus
(:func:`relgrade.ranking.validate_run`). Checking ten runs of 500,000 rows each against a
corpus of two million chunks is one anti-join here: DuckDB builds one hash table of the
known ids and probes it with every row of every run, in parallel, straight from the Arrow
buffers (no copy, no Python object per row). Which row is bad, and the message, is left to
:func:`relgrade.ranking.validate_run`, run on the few runs this query names.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from relgrade.ranking import arrow_ids


def runs_naming_unknown_ids(con: duckdb.DuckDBPyConnection, *, query_ids: Sequence,
                            chunk_ids: Sequence, queries=None, chunks=None) -> list[int]:
    """Which runs name a query id not in ``queries`` or a chunk id not in ``chunks``.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Where the query runs (:func:`relgrade.tables.engine.connect`); views named
        ``relgrade_*`` are registered on it and removed again.
    query_ids, chunk_ids : sequence of array-like of str, one per run (same length)
        Run ``i``'s query ids and chunk ids (pyarrow arrays or anything
        :func:`relgrade.ranking.arrow_ids` takes; repeats allowed, so the query ids of a
        run's top rows serve as well as every row's). Not modified.
    queries, chunks : array-like of str, optional
        The known query ids and chunk ids; a check is skipped when None.

    Returns
    -------
    list of int
        The positions (ascending) of the runs with at least one query id not in
        ``queries`` or chunk id not in ``chunks``; empty when every id is known. Ids
        compare as exact strings (byte for byte).

    Raises
    ------
    ValueError
        ``query_ids`` and ``chunk_ids`` differ in length.
    """
    if len(query_ids) != len(chunk_ids):
        raise ValueError("one query id array and one chunk id array per run")
    checks = [(col, known, ids) for col, known, ids in (("query_id", queries, query_ids),
                                                        ("chunk_id", chunks, chunk_ids))
              if known is not None]
    if not len(query_ids) or not checks:
        return []
    names = []
    try:
        parts = []
        for col, known, ids in checks:
            stacked = []
            for i, values in enumerate(ids):
                names.append(f"relgrade_{col}_{i}")
                con.register(names[-1], pa.table({col: arrow_ids(values)}))
                stacked.append(f"SELECT {i} AS run, {col} FROM {names[-1]}")
            names.append(f"relgrade_known_{col}")
            con.register(names[-1], pa.table({col: arrow_ids(known)}))
            parts.append(f"SELECT DISTINCT r.run FROM ({' UNION ALL '.join(stacked)}) AS r "
                         f"ANTI JOIN {names[-1]} AS k ON r.{col} = k.{col}")
        return sorted(int(row[0]) for row in con.execute(" UNION ".join(parts)).fetchall())
    finally:
        for name in names:
            con.unregister(name)
