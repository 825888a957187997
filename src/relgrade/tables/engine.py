"""DuckDB connections for relgrade's table queries."""

from __future__ import annotations

from pathlib import Path

import duckdb

from relgrade.errors import InputError


def connect(*, threads: int | None = None, memory_limit: str | None = None,
            temp_dir=None) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection, set up for relgrade's queries.

    Parameters
    ----------
    threads : int, optional
        Worker threads DuckDB may use (>= 1); DuckDB's default (one per core) when None.
    memory_limit : str, optional
        DuckDB's memory limit, e.g. ``"4GB"``; DuckDB's default (80% of RAM) when None.
    temp_dir : str or os.PathLike, optional
        The folder DuckDB spills to past ``memory_limit``; DuckDB's default when None.

    Returns
    -------
    duckdb.DuckDBPyConnection
        With ``preserve_insertion_order`` off: every query whose row order matters says
        ``ORDER BY``. The caller closes it (``with connect() as con:``).

    Raises
    ------
    InputError
        ``threads`` is not an integer >= 1, or DuckDB refuses ``memory_limit`` or
        ``temp_dir`` (naming the value and DuckDB's reason).
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise InputError("threads must be an integer >= 1", found=repr(threads))
    con = duckdb.connect(config={"preserve_insertion_order": False})
    settings = [("threads", threads, "a thread count"),
                ("memory_limit", memory_limit, "a memory limit DuckDB accepts (e.g. 4GB)"),
                ("temp_directory", None if temp_dir is None else str(Path(temp_dir)),
                 "a temporary folder DuckDB accepts")]
    for name, value, what in settings:
        if value is None:
            continue
        try:
            con.execute(f"SET {name} = $value", {"value": value})
        except duckdb.Error as e:
            con.close()
            raise InputError(f"not {what}", found=str(value),
                             fix=str(e).strip().splitlines()[0]) from None
    return con
