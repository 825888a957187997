"""Where the click SQL runs: DuckDB or Spark, behind one interface.

An engine opens the log where it lies and runs the click SQL on it: ``open_log(path)``,
``propensity(log, method=..., rng=..., ...)``, ``write_pairs(log, weights, out)`` and
``clicks_by_position(log)``, with ``pairs_layout`` saying whether the pairs are one Parquet
file (DuckDB) or a folder of part files (Spark). :func:`get` picks one by name.

The DuckDB engine reads a Parquet file, a folder of Parquet files or a CSV file with a
header row straight from disk (DuckDB's own readers, so the log need not fit in memory) and
opens it as a validated :class:`~relgrade.clicks.log.ClickLog`. Reading happens inside the
engine because an engine that runs on a cluster must read the data where its workers can
reach it; relgrade never opens the log in Python.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import duckdb

from relgrade.clicks import pairs, propensity, spark
from relgrade.clicks.log import DEFAULT_THREADS, ClickLog, connect
from relgrade.errors import InputError

#: The engines relgrade runs click SQL on.
ENGINES = ("duckdb", "spark")


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
        files = parquet_files(path)
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


def parquet_files(path) -> list[str] | None:
    """The Parquet files :func:`duckdb_relation` reads for ``path`` (None: not Parquet).

    Parameters
    ----------
    path : str or os.PathLike
        As :func:`duckdb_relation`.

    Returns
    -------
    list of str or None
        The file itself, or a folder's ``.parquet`` files sorted by name; None for a CSV
        file, or a path that is neither.
    """
    path = Path(path)
    if path.is_dir():
        return sorted(str(p) for p in path.glob("*.parquet")) or None
    return [str(path)] if path.name.lower().endswith(".parquet") else None


def open_log(path, *, memory_limit: str | None = None,
             threads: int | None = DEFAULT_THREADS, weights=None) -> ClickLog:
    """Open and validate the log at ``path`` on a new DuckDB connection.

    Parameters
    ----------
    path : str or os.PathLike
        As :func:`duckdb_relation`.
    memory_limit : str, optional
        DuckDB's memory limit (see :func:`relgrade.clicks.log.connect`).
    threads : int or None, default :data:`relgrade.clicks.log.DEFAULT_THREADS`
        DuckDB's worker threads (see :func:`relgrade.clicks.log.connect`).
    weights : dict of str to numpy.ndarray or pandas.DataFrame, optional
        The IPS weights the pairs will be made with (:func:`relgrade.clicks.pairs.
        weight_columns`): a log the compiled pass settles then gets its pairs in the same
        pass (:attr:`ClickLog.compiled_pairs`), which :meth:`DuckDBEngine.write_pairs`
        writes.

    Returns
    -------
    ClickLog

    Raises
    ------
    InputError
        As :func:`duckdb_relation` and :meth:`ClickLog.from_relation`.
    """
    con = connect(memory_limit=memory_limit, threads=threads)
    relation = duckdb_relation(con, path)
    return ClickLog.from_relation(con, relation, source=Path(path).as_posix(),
                                  files=parquet_files(path),
                                  pair_weights=pairs.compiled_weights(weights))


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
                         fix="Raise --memory-limit, or run where DuckDB's temporary folder "
                             "(.tmp in the working directory) has room to spill") from None
    except (duckdb.IOException, duckdb.InvalidInputException, duckdb.ConversionException) as e:
        raise InputError("DuckDB could not read the log", path=path,
                         found=str(e).strip().splitlines()[0]) from None


@dataclass(frozen=True)
class DuckDBEngine:
    """Click SQL on embedded DuckDB: one process, logs larger than memory spill to disk.

    Attributes
    ----------
    memory_limit : str or None
        DuckDB's memory limit (e.g. ``"4GB"``); DuckDB's default when None.
    threads : int or None
        DuckDB's worker threads (:data:`relgrade.clicks.log.DEFAULT_THREADS` unless given;
        None: one per core).
    """

    memory_limit: str | None = None
    threads: int | None = DEFAULT_THREADS
    name: str = "duckdb"
    #: The pairs are one Parquet file.
    pairs_layout: str = "file"

    def open_log(self, path, *, weights=None) -> ClickLog:
        """:func:`open_log` with this engine's memory limit and threads (``weights``: the
        pairs' IPS weights, when the log is opened to write them)."""
        return open_log(path, memory_limit=self.memory_limit, threads=self.threads,
                        weights=weights)

    def errors(self, path):
        """:func:`duckdb_errors` for ``path``."""
        return duckdb_errors(path)

    def propensity(self, log: ClickLog, **kw):
        """:func:`relgrade.clicks.propensity.estimate` (keywords as there)."""
        return propensity.estimate(log, **kw)

    def write_pairs(self, log: ClickLog, weights, out) -> int:
        """Write :func:`relgrade.clicks.pairs.skip_above` to the file ``out``; the count.

        The pairs the compiled pass made while opening the log (:attr:`ClickLog.
        compiled_pairs`, for these same weights) are written by
        :func:`relgrade.clicks.pairs.write_compiled`, the same bytes as the SQL's.
        """
        made = pairs.compiled_for(log, weights)
        if made is not None:
            return pairs.write_compiled(log, made, out)
        pairs.skip_above(log, weights).write_parquet(str(out))
        return int(log.con.execute("SELECT count(*) FROM read_parquet($p)",
                                   {"p": str(out)}).fetchall()[0][0])

    def clicks_by_position(self, log: ClickLog):
        """Impressions and clicks per position (``position``, ``shown``, ``clicks``), as
        :func:`relgrade.clicks.pairs.position_counts`' numpy columns."""
        return pairs.position_counts(log)


@dataclass(frozen=True)
class SparkEngine:
    """Click SQL on Apache Spark (:mod:`relgrade.clicks.spark`): local mode or a cluster.

    Attributes
    ----------
    master : str
        Spark's master URL (``local[2]``, ``spark://host:7077``, ``yarn``, ...).
    """

    master: str = "local[2]"
    name: str = "spark"
    #: The pairs are a folder of Parquet part files.
    pairs_layout: str = "folder"

    def open_log(self, path, *, weights=None):
        """Start (or reuse) the session, then read and validate the log there (``weights``
        is accepted as by the DuckDB engine and not used: Spark makes the pairs in SQL)."""
        return spark.open_log(spark.session(self.master), path)

    def errors(self, path):
        """Spark's errors are mapped where they are raised: no wrapping needed."""
        return contextlib.nullcontext()

    def propensity(self, log, **kw):
        """:func:`relgrade.clicks.spark.estimate` (keywords as the DuckDB engine's)."""
        return spark.estimate(log, **kw)

    def write_pairs(self, log, weights, out) -> int:
        """Write the pairs as Parquet part files into the folder ``out``; the count."""
        spark.skip_above(log, weights).write.mode("overwrite").parquet(str(out))
        return int(log.spark.read.parquet(str(out)).count())

    def clicks_by_position(self, log):
        """Impressions and clicks per position (``position``, ``shown``, ``clicks``), as
        numpy columns of int64 like the DuckDB engine's."""
        table = spark.clicks_by_position(log)
        return {c: table[c].to_numpy(dtype="int64") for c in ("position", "shown", "clicks")}


def get(name: str, *, memory_limit: str | None = None, spark_master: str | None = None,
        threads: int | None = DEFAULT_THREADS):
    """The engine called ``name``.

    Parameters
    ----------
    name : {"duckdb", "spark"}
    memory_limit : str, optional
        DuckDB's memory limit (DuckDB only).
    threads : int or None, default :data:`relgrade.clicks.log.DEFAULT_THREADS`
        DuckDB's worker threads (DuckDB only; None: one per core).
    spark_master : str, optional
        Spark's master URL (Spark only; ``local[2]`` when None).

    Returns
    -------
    DuckDBEngine or SparkEngine

    Raises
    ------
    InputError
        ``name`` is not an engine.
    """
    if name == "duckdb":
        return DuckDBEngine(memory_limit=memory_limit, threads=threads)
    if name == "spark":
        return SparkEngine(master=spark_master or spark.DEFAULT_MASTER)
    raise InputError("unknown click engine", found=name, fix="Use duckdb or spark")
