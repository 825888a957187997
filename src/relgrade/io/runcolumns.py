"""A run read for scoring, on Arrow columns: what ``relgrade evaluate`` reads.

:func:`read_run_columns` is :func:`relgrade.io.trec_scan.read_run_coded` without pandas: a
TREC run becomes an Arrow table and its :class:`relgrade.ranking.RunCodes`, from the compiled
scan's buffers or from Arrow's CSV reader (:func:`relgrade.io.runtable.read_run_table`'s
parse); any other file is read by :func:`relgrade.io.runs.read_run` as before. The pool
stage uses :func:`scanned_table` for the runs it scans, so this module, the scan and its C
source are among that stage's code deps (and no other stage's).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.io.runtable import trec_table
from relgrade.ranking import RunCodes, arrow_array, numpy_values, run_codes
from relgrade.schema import RUN


def read_run_columns(path, *, scan: bool = True) -> tuple:
    """Read one run for scoring and code its ids once, on Arrow columns where the file
    allows: :func:`relgrade.io.trec_scan.read_run_coded` without pandas.

    Parameters
    ----------
    path : str or os.PathLike
        A run file, as for :func:`relgrade.io.runs.read_run`.
    scan : bool, default True
        Try the compiled scan (:func:`relgrade.io.trec_scan.scan_trec_run`) first on a
        TREC file; see :func:`relgrade.io.trec_scan.worth_scanning`.

    Returns
    -------
    (pyarrow.Table or pandas.DataFrame, RunCodes or None)
        A TREC file that the scan or Arrow's CSV reader takes: :data:`relgrade.io.runtable.RUN_SCHEMA`'s table
        (the values of ``read_run(path)``) and :func:`relgrade.ranking.run_codes` of it
        (from the scan: with its proof of distinct pairs, as
        :func:`relgrade.io.trec_scan.coded_run` gives). Any other file (JSON Lines,
        Parquet, another TREC layout, fields after the sixth): ``read_run``'s DataFrame,
        with its ``attrs``, and its codes; None for a file with an ``arm`` column.

    Raises
    ------
    InputError
        As :func:`relgrade.io.runs.read_run` and :func:`relgrade.ranking.run_codes`.
    """
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".parquet"):
        if scan:
            from relgrade.io.trec_scan import scan_trec_run

            scanned = scan_trec_run(path)
            if scanned is not None:
                return scanned_table(scanned)
        table = trec_table(path)
        if table is not None:
            return table, run_codes(table, path=path)
    from relgrade.io.runs import read_run

    run = read_run(path)
    return run, (run_codes(run, path=path) if set(run.columns) == set(RUN) else None)


def scanned_table(scanned) -> tuple[pa.Table, RunCodes]:
    """A scanned TREC run as an Arrow table and its codes.

    Parameters
    ----------
    scanned : relgrade.io.trec_scan.ScannedRun

    Returns
    -------
    (pyarrow.Table, RunCodes)
        :data:`relgrade.io.runtable.RUN_SCHEMA`'s table of the file's rows (ids and numbers
        from the scan's buffers, not copied) and its codes (``distinct`` when every query's
        rows are one block holding no chunk hash twice);
        :func:`relgrade.io.trec_scan.coded_run` is this table as a DataFrame.
    """
    n = scanned.n_rows
    qids = pa.LargeStringArray.from_buffers(n, pa.py_buffer(scanned.query_offsets),
                                            pa.py_buffer(scanned.query_bytes))
    cids = pa.LargeStringArray.from_buffers(n, pa.py_buffer(scanned.chunk_offsets),
                                            pa.py_buffer(scanned.chunk_bytes))
    # run_codes' coding: the first row of each block of equal ids dictionary-encoded, its
    # code repeated over the block (first seen, first coded)
    heads = np.asarray(scanned.heads, dtype=np.int64)
    encoded = pc.dictionary_encode(qids.take(arrow_array(heads)))
    query = np.repeat(numpy_values(encoded.indices).astype(np.int64), np.diff(np.r_[heads, n]))
    one_block_each = len(encoded.dictionary) == len(heads)
    codes = RunCodes(query=query, queries=encoded.dictionary.cast(pa.large_string()),
                     chunk_hash=scanned.chunk_hash,
                     distinct=one_block_each and not scanned.repeated_hash)
    table = pa.table({"query_id": qids, "chunk_id": cids, "rank": arrow_array(scanned.rank),
                      "score": arrow_array(scanned.score)})
    return table, codes
