"""A Parquet table read a column at a time, as compact arrays, or a few of its rows.

:func:`relgrade.io.files.read_table` turns a whole Parquet file into a DataFrame: every
id a string per row. A stage that needs a pool-sized table's ids only to group, join or
count them reads them here instead, one column at a time, as integer codes into the
column's distinct values (Arrow's dictionary decoding: no string is made per row), and
the few rows it needs whole (an audit sample's, say) in bounded batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from relgrade.errors import InputError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

#: Rows per batch when a few rows are picked out of the file (:meth:`ParquetColumns.rows`).
BATCH_ROWS = 1 << 16


class ParquetColumns:
    """A Parquet file whose columns are read one at a time.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Raises
    ------
    InputError
        The file is missing or is not readable Parquet (the messages of
        :func:`relgrade.io.files.read_parquet`).
    """

    def __init__(self, path):
        import pyarrow.parquet as pq

        self.path = Path(path)
        if not self.path.exists():
            raise InputError("file not found", path=self.path)
        try:
            self.schema = pq.read_schema(self.path)
        except Exception as e:  # pyarrow raises several types for a corrupt file
            raise InputError("not a readable Parquet file", path=self.path,
                             found=str(e)) from None
        #: The table's columns, in file order (pandas' index columns left out).
        self.names = [n for n in self.schema.names if not n.startswith("__index_level_")]

    def require(self, columns) -> None:
        """Refuse the file when it lacks any of ``columns`` (the message of
        :func:`relgrade.io.files.read_table`'s check).

        Raises
        ------
        InputError
            A column is missing.
        """
        missing = [c for c in columns if c not in self.names]
        if missing:
            raise InputError(f"missing column(s) {', '.join(missing)}", path=self.path,
                             found="columns " + ", ".join(map(str, self.names)))

    def _read(self, column: str, **kwargs) -> "pa.ChunkedArray":
        import pyarrow.parquet as pq

        try:
            with pq.ParquetFile(self.path, **kwargs) as f:
                return f.read(columns=[column])[column]
        except Exception as e:  # pyarrow raises several types for a corrupt file
            raise InputError("not a readable Parquet file", path=self.path,
                             found=str(e)) from None

    @staticmethod
    def _release() -> None:
        """Hand Arrow's freed read buffers back to the system (its pool keeps them)."""
        import pyarrow as pa

        pa.default_memory_pool().release_unused()

    def values(self, column: str) -> np.ndarray:
        """A numeric column as a numpy array, shape (n_rows,) (float with NaN where a value
        is missing).

        Raises
        ------
        InputError
            The file cannot be read.
        """
        values = self._read(column).to_numpy()
        self._release()
        return values

    def id_codes(self, column: str) -> "tuple[np.ndarray, pa.Array] | None":
        """A text column as integer codes whose order is the values' byte order (Python's
        ``str`` order), and its distinct values.

        Returns
        -------
        codes : ndarray of int32, shape (n_rows,)
            ``uniques[codes[i]]`` is row ``i``'s value.
        uniques : pyarrow.Array of large_string
            The distinct values, sorted.
        None
            When a value is missing (null): the caller reads the column as text.

        Raises
        ------
        InputError
            The file cannot be read.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        col = self._read(column, read_dictionary=[column])
        if col.null_count:
            return None
        if not pa.types.is_dictionary(col.type):  # not text: no codes
            return None
        col = pa.Table.from_arrays([col], names=[column]).unify_dictionaries()[column]
        if col.num_chunks == 0:
            return np.zeros(0, dtype=np.int32), pa.array([], type=pa.large_string())
        dictionary = col.chunk(0).dictionary.cast(pa.large_string())
        order = pc.array_sort_indices(dictionary).to_numpy()
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        codes = np.empty(len(col), dtype=np.int32)
        at = 0
        for chunk in col.chunks:
            codes[at:at + len(chunk)] = rank[chunk.indices.to_numpy(zero_copy_only=False)]
            at += len(chunk)
        del col
        self._release()
        return codes, dictionary.take(pa.array(order))

    def rows(self, keep: np.ndarray) -> "pd.DataFrame":
        """The rows ``keep`` of the table, every column, as
        :func:`relgrade.io.files.read_table` reads them, read a batch of
        :data:`BATCH_ROWS` rows at a time (only the kept rows are held).

        Parameters
        ----------
        keep : ndarray of bool, shape (n_rows,)

        Returns
        -------
        pandas.DataFrame
            The kept rows in file order, index 0..n_kept-1.

        Raises
        ------
        InputError
            The file cannot be read.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        parts, at = [], 0
        try:
            with pq.ParquetFile(self.path) as f:
                for batch in f.iter_batches(batch_size=BATCH_ROWS, columns=self.names):
                    mine = np.flatnonzero(keep[at:at + batch.num_rows])
                    at += batch.num_rows
                    if len(mine):
                        parts.append(batch.take(pa.array(mine)))
                schema = f.schema_arrow
                table = (pa.Table.from_batches(parts) if parts
                         else schema.empty_table().select(self.names))
                # pandas' own metadata, so the columns come back as read_table types them
                table = table.replace_schema_metadata(schema.metadata)
            del parts
            self._release()
        except Exception as e:  # pyarrow raises several types for a corrupt file
            raise InputError("not a readable Parquet file", path=self.path,
                             found=str(e)) from None
        return table.to_pandas().reset_index(drop=True)
