"""Reading a run file straight into an Arrow table, for pooling.

:func:`relgrade.io.runs.read_run` returns a pandas DataFrame, which every reader of a run
accepts. Pooling needs only each ranked list's first rows, so it reads a run once into
Arrow (no pandas conversion of five million ids) and cuts it there
(:func:`relgrade.protocol.pool.arm_candidates`). The result is the same table
``read_run`` would give, in Arrow form: a file that the fast parsers here do not accept as
it is (an unusual whitespace layout, a bad line, integer ids in Parquet, JSON Lines) is read
by ``read_run`` itself, so it is accepted or refused exactly as there, with the same
message naming the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from relgrade.errors import InputError
from relgrade.io.sniff import field_separator, read_head
from relgrade.ranking import numpy_values
from relgrade.schema import RUN

#: The Arrow schema of a run table: ids as large_string (the type pandas keeps them in).
RUN_SCHEMA = pa.schema([("query_id", pa.large_string()), ("chunk_id", pa.large_string()),
                        ("rank", pa.int64()), ("score", pa.float64())])

# the TREC fields, by position: name and whether relgrade keeps it
_TREC_FIELDS = ["query_id", "q0", "chunk_id", "rank", "score", "tag"]


def read_run_table(path) -> pa.Table:
    """Read a run file into an Arrow table, choosing the format by its extension.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet`` file with the columns ``query_id``, ``chunk_id``, ``rank``,
        ``score``; a ``.jsonl``/``.ndjson`` file; or a TREC run (any other extension), as
        :func:`relgrade.io.runs.read_run` reads them.

    Returns
    -------
    pyarrow.Table of shape (n_rows, 4)
        :data:`RUN_SCHEMA`: ``query_id`` and ``chunk_id`` (large_string), ``rank`` (int64),
        ``score`` (float64), one row per run row, in file order; the same values as
        ``read_run(path)[RUN]``. An ``arm`` column in the file is not returned.

    Raises
    ------
    InputError
        As :func:`relgrade.io.runs.read_run`: the file is missing or unreadable, a column is
        missing, an id is missing or not a string or integer, a rank is not an integer, a
        score is not a number; TREC and JSON Lines errors name the line.

    Notes
    -----
    A TREC file whose fields are separated by single spaces (or single tabs, decided by its
    first line) is parsed by Arrow's CSV reader in C++, one thread per file (the pool
    stage reads the arms in parallel). The parse is refused, and the file read by
    ``read_run``, when a field is empty (a doubled or leading separator, a blank line),
    holds the other separator, a vertical tab or a form feed, a line does not have six
    fields, a rank or score does not parse, or a score is not finite. A Parquet file is
    read by ``pyarrow.parquet`` when its ids are strings without nulls, its rank an integer
    type without nulls and its score float64; otherwise by ``read_run``.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    table = None
    if suffix == ".parquet":
        table = _parquet_table(path)
    elif suffix not in (".jsonl", ".ndjson"):
        table = trec_table(path)
    if table is not None:
        return table
    from relgrade.io.runs import read_run

    df = read_run(path)
    return pa.Table.from_pandas(df[RUN], preserve_index=False).cast(RUN_SCHEMA)


def _parquet_table(path: Path) -> pa.Table | None:
    import pyarrow.parquet as pq

    if not path.exists():
        raise InputError("file not found", path=path)
    try:
        table = pq.read_table(path, columns=[c for c in RUN], use_threads=False)
    except Exception:  # a missing column or a corrupt file: read_run names it
        return None
    for name in ("query_id", "chunk_id"):
        col = table[name]
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) \
                or col.null_count:
            return None
    if not pa.types.is_integer(table["rank"].type) or table["rank"].null_count:
        return None
    if not pa.types.is_float64(table["score"].type):
        return None
    return table.cast(RUN_SCHEMA)


def _csv_options(delim: bytes, block_size: int) -> dict:
    """Arrow's CSV reader options for TREC run lines split on ``delim``: the six fields
    typed (ids as large strings), no quoting, escaping, nulls or booleans, blank lines kept
    (so the rules see them), one thread, ``block_size`` bytes a block."""
    import pyarrow.csv as pacsv  # only a TREC text run needs the CSV reader

    types = {"query_id": pa.large_string(), "q0": pa.string(), "chunk_id": pa.large_string(),
             "rank": pa.int64(), "score": pa.float64(), "tag": pa.string()}
    return dict(
        read_options=pacsv.ReadOptions(column_names=_TREC_FIELDS, use_threads=False,
                                       block_size=block_size),
        parse_options=pacsv.ParseOptions(delimiter=delim.decode(), quote_char=False,
                                         double_quote=False, escape_char=False,
                                         ignore_empty_lines=False),
        convert_options=pacsv.ConvertOptions(column_types=types, null_values=[],
                                             true_values=[], false_values=[],
                                             strings_can_be_null=False))


def trec_table(path) -> pa.Table | None:
    """A TREC run parsed by Arrow's CSV reader (one thread), or None when the file is not
    one it takes as it is (see :func:`read_run_table`'s notes; None leaves the file to
    :func:`relgrade.io.runs.read_run`, which names a bad line).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    pyarrow.Table of :data:`RUN_SCHEMA`, or None
    """
    import pyarrow.csv as pacsv

    path = Path(path)
    separator = field_separator(read_head(path))
    if separator is None:
        return None
    delim, needles = separator
    try:
        table = pacsv.read_csv(str(path), **_csv_options(delim, 1 << 24))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    for name in ("query_id", "q0", "chunk_id", "tag"):
        if empty_or_holds(table[name], needles):
            return None
    if not np.isfinite(numpy_values(table["score"])).all():
        return None  # read_run names the line
    return table.select(RUN)


def empty_or_holds(col: pa.ChunkedArray, needles: tuple[bytes, ...]) -> bool:
    """True when a value of a string column is empty or holds one of ``needles``."""
    width = np.int64 if pa.types.is_large_string(col.type) else np.int32
    for chunk in col.chunks:
        if len(chunk) == 0:
            continue
        offsets = np.frombuffer(chunk.buffers()[1], dtype=width)[
            chunk.offset: chunk.offset + len(chunk) + 1]
        if np.any(offsets[1:] == offsets[:-1]):
            return True
        text = memoryview(chunk.buffers()[2])[offsets[0]: offsets[-1]].tobytes()
        if any(n in text for n in needles):
            return True
    return False


class RunNotInBlocks(Exception):
    """A run :func:`trec_query_blocks` cannot hand over a block of queries at a time: not a
    TREC file its streaming parse takes as it is, or its rows not in ascending ``query_id``
    order. Not an error of the run: the caller reads it whole (:func:`read_run_table` or
    :func:`relgrade.io.runs.read_run`), which accepts or refuses it with the usual message."""


def trec_query_blocks(path, *, block_bytes: int = 1 << 22) -> Iterator[pa.Table]:
    """A TREC run whose rows are in ascending ``query_id`` order, a block of whole queries at
    a time: memory holds about one block of the file's bytes as Arrow columns.

    Parameters
    ----------
    path : str or os.PathLike
        A TREC run (any extension but ``.parquet``, ``.jsonl``, ``.ndjson``).
    block_bytes : int, optional
        Bytes of the file parsed per block.

    Yields
    ------
    pyarrow.Table of :data:`RUN_SCHEMA`
        The rows of some queries, every row of each, in file order; together every row of
        the file, the same values :func:`trec_table` gives.

    Raises
    ------
    RunNotInBlocks
        Before or after some blocks were yielded: the file is not one :func:`trec_table`'s
        parser takes as it is (see :func:`read_run_table`'s notes), or a row's ``query_id``
        sorts before the one above it (ids compared by their UTF-8 bytes, which is code point
        order). TREC writers promise no order: the caller then reads the run whole.
    """
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    path = Path(path)
    if path.suffix.lower() in (".parquet", ".jsonl", ".ndjson") or not path.exists():
        raise RunNotInBlocks(str(path))
    separator = field_separator(read_head(path))
    if separator is None:
        raise RunNotInBlocks(str(path))
    delim, needles = separator
    from relgrade.io.batches import line_blocks

    options = _csv_options(delim, block_bytes)
    carry, previous = None, None
    # each block of whole lines parsed on its own: Arrow's streaming reader reads the whole
    # file ahead of the batches it hands out
    for data in line_blocks(path, block_bytes):
        try:
            batch = pacsv.read_csv(pa.BufferReader(data), **options)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            raise RunNotInBlocks(str(path)) from None
        del data
        if not batch.num_rows:
            continue
        table = batch
        for name in ("query_id", "q0", "chunk_id", "tag"):
            if empty_or_holds(table[name], needles):
                raise RunNotInBlocks(str(path))
        if not np.isfinite(numpy_values(table["score"])).all():
            raise RunNotInBlocks(str(path))
        q = table["query_id"].combine_chunks()
        if previous is not None and q[0].as_py() < previous:
            raise RunNotInBlocks(str(path))
        if len(q) > 1 and pc.any(pc.less(q.slice(1), q.slice(0, len(q) - 1))).as_py():
            raise RunNotInBlocks(str(path))
        previous = q[len(q) - 1].as_py()
        table = table.select(RUN)
        if carry is not None:
            table = pa.concat_tables([carry, table])
            q = table["query_id"].combine_chunks()
        # the last query may go on in the next block: its rows wait for it
        start = int(pc.index(q, previous).as_py())
        if start:
            yield table.slice(0, start)
        carry = table.slice(start)
    if carry is not None:
        yield carry


class RunCursor:
    """A run's blocks of whole queries (:func:`trec_query_blocks`) handed out up to a query
    id at a time: the rows of another table's block of queries, read as they are asked for.

    Parameters
    ----------
    blocks : iterable of pyarrow.Table
        A run's rows in ascending ``query_id`` order (:data:`RUN_SCHEMA`).

    Examples
    --------
    >>> t = pa.table({"query_id": pa.array(["a", "b", "c"], pa.large_string()),
    ...               "chunk_id": pa.array(["x", "y", "z"], pa.large_string()),
    ...               "rank": [1, 1, 1], "score": [1.0, 1.0, 1.0]})
    >>> cursor = RunCursor([t.slice(0, 2), t.slice(2)])
    >>> cursor.upto("b")["query_id"].to_pylist(), cursor.rest()["query_id"].to_pylist()
    (['a', 'b'], ['c'])
    """

    def __init__(self, blocks):
        self._blocks = iter(blocks)
        self._pending = None
        self.rows = 0  # rows handed out so far

    def upto(self, last: str) -> pa.Table:
        """The rows not yet handed out whose ``query_id`` sorts at or before ``last`` (code
        point order), in file order; an empty table when there are none."""
        import pyarrow.compute as pc

        parts = []
        while True:
            if self._pending is None:
                self._pending = next(self._blocks, None)
                if self._pending is None:
                    break
            block = self._pending
            upto = int(pc.sum(pc.less_equal(block["query_id"], last)).as_py() or 0)
            if upto == len(block):
                parts.append(block)
                self._pending = None
                continue
            if upto:
                parts.append(block.slice(0, upto))
                self._pending = block.slice(upto)
            break
        return self._stacked(parts)

    def rest(self) -> pa.Table:
        """Every row not yet handed out."""
        parts = [] if self._pending is None else [self._pending]
        self._pending = None
        parts.extend(self._blocks)
        return self._stacked(parts)

    def _stacked(self, parts) -> pa.Table:
        table = pa.concat_tables(parts) if parts else RUN_SCHEMA.empty_table()
        self.rows += len(table)
        return table
