"""Tables read in bounded batches, and files written from a stream of byte chunks.

For the stages whose inputs grow with the experiment (the publish stage reads the key and
every private text): memory holds one batch, never the whole table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

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
    try:
        reader = pj.open_json(
            path, read_options=pj.ReadOptions(block_size=block_bytes, use_threads=False),
            parse_options=pj.ParseOptions(explicit_schema=schema,
                                          unexpected_field_behavior="error"))
        for batch in reader:
            if any(col.null_count for col in batch.columns):
                raise InputError("a key row lacks query_id, chunk_id or grade", path=path,
                                 fix="Rerun the key stage")
            yield batch.to_pandas()
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise InputError("not a key in JSON Lines form", path=path, found=str(e),
                         fix="Rerun the key stage") from None


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
