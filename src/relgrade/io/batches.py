"""Tables read in bounded batches, and files written from a stream of byte chunks.

For the stages whose inputs grow with the experiment (the publish stage reads the key and
every private text): memory holds one batch, never the whole table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: Rows per batch read.
BATCH_ROWS = 1 << 16
#: Bytes of a JSON Lines file parsed per block.
BLOCK_BYTES = 1 << 22


def iter_table_batches(path, columns: list[str], *,
                       rows: int = BATCH_ROWS) -> Iterator[pd.DataFrame]:
    """The columns ``columns`` of a ``.parquet``, ``.jsonl`` or ``.tsv`` table, in batches.

    Parameters
    ----------
    path : str or os.PathLike
        The table (format by extension, as :func:`relgrade.io.files.read_table`).
    columns : list of str
        Columns to read, in this order.
    rows : int, optional
        At most this many rows per batch (Parquet; a JSON Lines or TSV table is read whole,
        as one batch: those formats are used for small tables only).

    Yields
    ------
    pandas.DataFrame
        Columns ``columns``, dtypes as stored; together all the table's rows in order.

    Raises
    ------
    InputError
        The file is missing or unreadable, or lacks a column of ``columns``.
    """
    path = Path(path)
    if path.suffix.lower() != ".parquet":
        from relgrade.io.files import read_table

        yield read_table(path, columns=columns)[columns]
        return
    pf = _parquet_file(path, columns)
    for batch in pf.iter_batches(batch_size=rows, columns=columns):
        yield batch.to_pandas()[columns]


def iter_key_batches(path, *, block_bytes: int = BLOCK_BYTES) -> Iterator[pd.DataFrame]:
    """A key in its JSON Lines form (``{"query_id", "chunk_id", "grade"}`` per line), in
    batches of about ``block_bytes`` bytes of the file.

    Yields
    ------
    pandas.DataFrame
        Columns ``query_id`` (str), ``chunk_id`` (str), ``grade`` (int64), the file's rows in
        its order.

    Raises
    ------
    InputError
        The file is missing, or a line is not a key row (a field missing or of another type).
    """
    import pyarrow as pa
    import pyarrow.json as pj

    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=path)
    schema = pa.schema([("query_id", pa.string()), ("chunk_id", pa.string()),
                        ("grade", pa.int64())])
    options = dict(read_options=pj.ReadOptions(block_size=block_bytes, use_threads=False),
                   parse_options=pj.ParseOptions(explicit_schema=schema,
                                                 unexpected_field_behavior="error"))
    try:
        # each block of whole lines parsed on its own: Arrow's streaming reader reads the
        # whole file ahead of the batches it hands out
        for block in line_blocks(path, block_bytes):
            table = pj.read_json(pa.BufferReader(block), **options)
            if any(col.null_count for col in table.columns):
                raise InputError("a key row lacks query_id, chunk_id or grade", path=path,
                                 fix="Rerun the key stage")
            for batch in table.to_batches():
                yield batch.to_pandas()
            del table
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    else:
        return
    try:  # a file Arrow refuses: refused in the streaming reader's own words
        reader = pj.open_json(path, **options)
        for batch in reader:
            if any(col.null_count for col in batch.columns):
                raise InputError("a key row lacks query_id, chunk_id or grade", path=path,
                                 fix="Rerun the key stage")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise InputError("not a key in JSON Lines form", path=path, found=str(e),
                         fix="Rerun the key stage") from None
    raise InputError("not a key in JSON Lines form", path=path,
                     fix="Rerun the key stage")


def line_blocks(path, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """A text file's bytes in blocks of whole lines, about ``block_bytes`` each (a line
    longer than that is one block; the last block may lack its final newline).

    Parameters
    ----------
    path : str or os.PathLike
    block_bytes : int, optional

    Yields
    ------
    bytes
        Together every byte of the file, in order; memory holds about two blocks.

    Raises
    ------
    InputError
        The file is missing or unreadable.
    """
    try:
        with open(path, "rb") as f:
            carry = b""
            while True:
                data = f.read(block_bytes)
                if not data:
                    break
                data = carry + data
                end = data.rfind(b"\n") + 1
                if end == 0:  # no line ends here yet
                    carry = data
                    continue
                carry = data[end:]
                yield data[:end]
            if carry:
                yield carry
    except OSError as e:
        raise InputError("cannot read the file", path=path, found=str(e)) from None


def write_chunks(path, chunks: Iterable[bytes]) -> int:
    """Write the byte chunks to ``path`` as they come (no chunk is kept after it is written).

    Use inside :func:`relgrade.io.files.atomic_dir`: the folder, not the file, is swapped in.

    Returns
    -------
    int
        Bytes written.
    """
    n = 0
    with open(path, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
            n += len(chunk)
    return n


def _parquet_file(path: Path, columns: list[str]):
    """The open Parquet file at ``path``, its columns ``columns`` checked (the errors of
    :func:`iter_table_batches`)."""
    import pyarrow.parquet as pq

    if not path.exists():
        raise InputError("file not found", path=path)
    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a corrupt file
        raise InputError("not a readable Parquet file", path=path, found=str(e)) from None
    missing = [c for c in columns if c not in pf.schema_arrow.names]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=path,
                         found="columns " + ", ".join(pf.schema_arrow.names))
    return pf


def _as_text(column):
    """An Arrow column as large_string (a dictionary decoded, a number spelled as ``str``
    spells it)."""
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    return column.cast(pa.large_string())


def query_rows(path, columns: list[str], query_ids, *,
               rows: int = BATCH_ROWS) -> pd.DataFrame:
    """The rows of a table whose ``query_id`` is one of ``query_ids`` (compared as text),
    read a batch at a time: :func:`rows_where_in` with ``column="query_id"``; the same
    arguments, result and errors."""
    return rows_where_in(path, columns, "query_id", query_ids, rows=rows)


def rows_where_in(path, columns: list[str], column: str, values, *,
                  rows: int = BATCH_ROWS) -> pd.DataFrame:
    """The rows of a table whose ``column`` is one of ``values``, read a batch at a time:
    memory holds one batch and the rows kept, never the whole table.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet`` table (a ``.jsonl`` or ``.tsv`` table is read whole by
        :func:`relgrade.io.files.read_table`, then cut).
    columns : list of str
        Columns to return, in this order; ``column`` among them.
    column : str
        The column tested.
    values : iterable of str
        The values whose rows are kept (compared as text: ``str(value)``).
    rows : int, optional
        Rows per batch read.

    Returns
    -------
    pandas.DataFrame of shape (n_kept, len(columns))
        The kept rows in the file's order, index 0..n_kept-1, dtypes as a whole read of the
        same columns gives them.

    Raises
    ------
    InputError
        The file is missing or unreadable, or lacks a column of ``columns``.
    """
    import pyarrow as pa

    path = Path(path)
    if path.suffix.lower() != ".parquet":
        from relgrade.io.files import read_table

        wanted = sorted({str(q) for q in values})
        df = read_table(path, columns=columns)[columns]
        return df[df[column].astype(str).isin(wanted)].reset_index(drop=True)
    pf = _parquet_file(path, columns)
    kept = list(_kept_batches(pf, columns, column, values, rows))
    schema = kept[0].schema if kept else pf.schema_arrow
    table = pa.Table.from_batches(kept, schema=schema) if kept else \
        schema.empty_table().select(columns)
    return table.to_pandas()[columns]


def iter_rows_where_in(path, columns: list[str], column: str, values, *,
                       rows: int = BATCH_ROWS) -> Iterator[pd.DataFrame]:
    """:func:`rows_where_in` a batch at a time: memory holds one batch and its kept rows.

    Parameters
    ----------
    path, columns, column, values, rows
        As :func:`rows_where_in`.

    Returns
    -------
    iterator of pandas.DataFrame of shape (n_kept_in_batch, len(columns))
        The kept rows of one batch (batches that keep none are skipped), in the file's
        order; a ``.jsonl`` or ``.tsv`` table's kept rows as one frame.

    Raises
    ------
    InputError
        As :func:`rows_where_in`, on the call (the file is opened and its columns checked
        before the first batch is asked for).
    """
    path = Path(path)
    if path.suffix.lower() != ".parquet":
        return iter([rows_where_in(path, columns, column, values, rows=rows)])
    pf = _parquet_file(path, columns)
    return (batch.to_pandas()[columns]
            for batch in _kept_batches(pf, columns, column, values, rows) if batch.num_rows)


def _kept_batches(pf, columns: list[str], column: str, values, rows: int):
    """Per batch of ``pf``, its rows whose ``column`` as text is in ``values`` (an Arrow
    batch, possibly empty)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    value_set = pa.array(sorted({str(q) for q in values}), type=pa.large_string())
    for batch in pf.iter_batches(batch_size=rows, columns=columns):
        mask = pc.is_in(_as_text(batch.column(columns.index(column))), value_set=value_set)
        yield batch.filter(mask)


def distinct_text(path, column: str, *, rows: int = BATCH_ROWS):
    """The distinct values of one column of a table, as text, read a batch at a time: memory
    holds one batch and the distinct values, never the whole column.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet`` table (a ``.jsonl`` or ``.tsv`` table is read whole).
    column : str
        The column.
    rows : int, optional
        Rows per batch read.

    Returns
    -------
    pyarrow.Array of large_string
        Each distinct value once (``str(value)`` of a number), in no set order; a null is
        not a value.

    Raises
    ------
    InputError
        The file is missing or unreadable, or lacks ``column``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    path = Path(path)
    if path.suffix.lower() != ".parquet":
        from relgrade.io.files import read_table

        values = read_table(path, columns=[column])[column].astype(str).unique()
        return pa.array(list(values), type=pa.large_string())
    pf = _parquet_file(path, [column])
    seen = pa.array([], type=pa.large_string())
    for batch in pf.iter_batches(batch_size=rows, columns=[column]):
        values = pc.unique(_as_text(batch.column(0)).drop_null())
        seen = pc.unique(pa.concat_arrays([seen, values]))
    return seen


class QueryOrderError(InputError):
    """A table read by :func:`iter_query_blocks` is not in ``query_id`` order."""


def iter_query_blocks(path, columns: list[str], *, rows: int = BATCH_ROWS,
                      writer: str = "its writer") -> Iterator[pd.DataFrame]:
    """A table ordered by ``query_id`` read a block of whole queries at a time: every row of
    a query is in one block, and memory holds about one batch of rows (more only while one
    query's rows span several batches).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet`` table whose rows are in ``query_id`` order (text compared by code
        point, which is UTF-8 byte order; a ``.jsonl`` or ``.tsv`` table is read whole, as
        one block, and checked the same way).
    columns : list of str
        Columns to read, in this order; ``query_id`` among them.
    rows : int, optional
        Rows per batch read.
    writer : str, optional
        The stage that writes the file in that order, named in the error's fix.

    Yields
    ------
    pandas.DataFrame
        Columns ``columns`` (dtypes as stored), index from 0 in each block; the blocks
        hold together all the table's rows, in order.

    Raises
    ------
    InputError
        The file is missing or unreadable, or lacks a column of ``columns``.
    QueryOrderError
        A row's ``query_id`` sorts before the one of the row above it (naming the 1-based
        row and both ids). Blocks before the bad row have been yielded by then.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    path = Path(path)
    at = columns.index("query_id")

    def disorder(q, first_row, previous):
        """The 1-based row of the first id of ``q`` below the one above it, or None."""
        if previous is not None and len(q) and q[0].as_py() < previous:
            return first_row, previous, q[0].as_py()
        if len(q) > 1:
            down = pc.less(q.slice(1), q.slice(0, len(q) - 1))
            if pc.any(down).as_py():
                i = int(pc.index(down, True).as_py())
                return first_row + i + 1, q[i].as_py(), q[i + 1].as_py()
        return None

    def refuse(found):
        _refuse_order(path, writer, *found)

    if path.suffix.lower() != ".parquet":
        from relgrade.io.files import read_table

        df = read_table(path, columns=columns)[columns]
        found = disorder(pa.array(df["query_id"].astype(str), type=pa.large_string()), 1, None)
        if found is not None:
            refuse(found)
        yield df
        return
    pf = _parquet_file(path, columns)
    carry, previous, seen = None, None, 0
    for batch in pf.iter_batches(batch_size=rows, columns=columns):
        if not batch.num_rows:
            continue
        q = _as_text(batch.column(at))
        found = disorder(q, seen + 1, previous)
        if found is not None:
            refuse(found)
        seen += batch.num_rows
        previous = q[len(q) - 1].as_py()
        table = pa.Table.from_batches([batch])
        if carry is not None:
            table = pa.concat_tables([carry, table])
            q = _as_text(table.column(at))
        # the last query may go on in the next batch: its rows wait for it
        start = int(pc.index(q, previous).as_py())
        if start:
            yield table.slice(0, start).to_pandas()[columns]
        carry = table.slice(start)
    if carry is not None:
        yield carry.to_pandas()[columns]


def whole_query_blocks(frames: Iterable[pd.DataFrame], *, path,
                       writer: str = "its writer") -> Iterator[pd.DataFrame]:
    """Batches of a table in ``query_id`` order regrouped into blocks of whole queries (the
    rows of the last query of a batch wait for the next batch), the order checked as they
    come.

    Parameters
    ----------
    frames : iterable of pandas.DataFrame
        The table's rows in order, in batches (e.g. :func:`iter_key_batches`), each with a
        ``query_id`` column.
    path : str or os.PathLike
        The file the batches come from, named in the error.
    writer : str, optional
        The stage that writes the file in that order, named in the error's fix.

    Yields
    ------
    pandas.DataFrame
        The rows of some queries, every row of each, index from 0; in order.

    Raises
    ------
    QueryOrderError
        As :func:`iter_query_blocks`.
    """
    carry, previous, seen = None, None, 0
    for df in frames:
        if not len(df):
            continue
        q = df["query_id"].astype(str).to_numpy(dtype=object)
        if previous is not None and q[0] < previous:
            _refuse_order(path, writer, seen + 1, previous, q[0])
        down = np.flatnonzero(q[1:] < q[:-1]) if len(q) > 1 else []
        if len(down):
            i = int(down[0])
            _refuse_order(path, writer, seen + i + 2, q[i], q[i + 1])
        seen += len(df)
        previous = q[-1]
        if carry is not None:
            df = pd.concat([carry, df], ignore_index=True)
            q = df["query_id"].astype(str).to_numpy(dtype=object)
        start = int(np.argmax(q == previous))
        if start:
            yield df.iloc[:start].reset_index(drop=True)
        carry = df.iloc[start:]
    if carry is not None:
        yield carry.reset_index(drop=True)


def _refuse_order(path, writer: str, row: int, above: str, below: str):
    raise QueryOrderError("rows are not in query_id order", path=path, item=f"row {row}",
                          found=f"query {below!r} after query {above!r}",
                          fix=f"Write the table again with {writer}, which orders its rows "
                              "by query_id")
