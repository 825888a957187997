"""Where the click SQL runs: the engine that reads a log where it lies.

The DuckDB engine reads a Parquet file, a folder of Parquet files or a CSV file with a
header row straight from disk (DuckDB's own readers, so the log need not fit in memory) and
opens it as a validated :class:`~relgrade.clicks.log.ClickLog`. Reading happens inside the
engine because an engine that runs on a cluster must read the data where its workers can
reach it; relgrade never opens the log in Python.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb

from relgrade.clicks.log import ClickLog, connect
from relgrade.errors import InputError

#: The engines relgrade runs click SQL on.
ENGINES = ("duckdb",)


def duckdb_relation(con: duckdb.DuckDBPyConnection, path) -> duckdb.DuckDBPyRelation:
    """The log at ``path`` as a lazy DuckDB relation (nothing is read until a query runs).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        The connection to read on.
    path : str or os.PathLike
        A ``.parquet`` file, a folder of ``.parquet`` files (read by column name), or a
        ``.csv`` / ``.csv.gz`` file with a header row (every column read as text, typed by
        :class:`ClickLog`).

    Returns
    -------
    duckdb.DuckDBPyRelation

    Raises
    ------
    InputError
        The path does not exist, a folder holds no ``.parquet`` file, or the extension is
        none of the above.
    """
    path = Path(path)
    name = path.name.lower()
    if path.is_dir():
        files = sorted(str(p) for p in path.glob("*.parquet"))
        if not files:
            raise InputError("folder holds no .parquet file", path=path)
        return con.read_parquet(files, union_by_name=True)
    if not path.exists():
        raise InputError("file not found", path=path)
    if name.endswith(".parquet"):
        return con.read_parquet(str(path))
    if name.endswith((".csv", ".csv.gz")):
        return con.read_csv(str(path), header=True, all_varchar=True, delimiter=",")
    raise InputError("unknown log format (use .parquet, a folder of .parquet files, or .csv)",
                     path=path, found=path.suffix or "no extension")


def open_log(path, *, memory_limit: str | None = None) -> ClickLog:
    """Open and validate the log at ``path`` on a new DuckDB connection.

    Parameters
    ----------
    path : str or os.PathLike
        As :func:`duckdb_relation`.
    memory_limit : str, optional
        DuckDB's memory limit (see :func:`relgrade.clicks.log.connect`).

    Returns
    -------
    ClickLog

    Raises
    ------
    InputError
        As :func:`duckdb_relation` and :meth:`ClickLog.from_relation`.
    """
    con = connect(memory_limit=memory_limit)
    return ClickLog.from_relation(con, duckdb_relation(con, path), source=Path(path).as_posix())


@contextlib.contextmanager
def duckdb_errors(path):
    """DuckDB's errors about the log or about memory, as relgrade errors naming the log.

    Raises
    ------
    InputError
        In place of DuckDB's out-of-memory, I/O, invalid-input and conversion errors.
    """
    try:
        yield
    except duckdb.OutOfMemoryException as e:
        raise InputError("DuckDB ran out of memory", path=path,
                         found=str(e).strip().splitlines()[0],
                         fix="Raise the memory limit (--memory-limit; clicks.memory_limit in params), or run where DuckDB's temporary folder "
                             "(.tmp in the working directory) has room to spill") from None
    except (duckdb.IOException, duckdb.InvalidInputException, duckdb.ConversionException) as e:
        raise InputError("DuckDB could not read the log", path=path,
                         found=str(e).strip().splitlines()[0]) from None
