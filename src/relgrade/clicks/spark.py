"""The click SQL on Apache Spark: the same propensities and pairs as DuckDB, on a cluster.

Every query DuckDB runs has a Spark SQL twin in ``relgrade/clicks/sql/spark/``; what comes
back to Python is the same small aggregates (session patterns, per-query link sums, counts
per position), handed to the same estimators (:func:`relgrade.clicks.propensity.from_patterns`,
:func:`~relgrade.clicks.propensity.from_links`), so the two engines give the same curve,
intervals included, up to float rounding in the harvesting sums. The pairs are written by
Spark as a folder of Parquet part files, in the same order as DuckDB's single file.

Spark reads the log itself, so the path must be one every executor can read: a local path
in local mode, a shared file system or object store (``hdfs://``, ``s3a://``, ...) on a
cluster. PySpark is an optional extra (``pip install 'relgrade[spark]'``) and needs Java 17+.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from relgrade.clicks.log import LOG_COLUMNS, LOG_RULES, require_columns, session_error
from relgrade.clicks.pairs import WEIGHTS_VIEW
from relgrade.clicks.propensity import (
    PropensityCurve,
    from_links,
    from_patterns,
    unpaired_randomized_error,
)
from relgrade.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

#: The master a session uses unless told otherwise: local mode on two cores.
DEFAULT_MASTER = "local[2]"


def sql(name: str) -> str:
    """The text of ``relgrade/clicks/sql/spark/NAME.sql``."""
    return resources.files("relgrade.clicks").joinpath("sql", "spark", f"{name}.sql") \
        .read_text("utf-8")


def session(master: str = DEFAULT_MASTER, *, app_name: str = "relgrade-clicks"):
    """A SparkSession for the click SQL (the active one when it exists).

    Parameters
    ----------
    master : str, default "local[2]"
        Spark's master URL: ``local[N]`` for local mode, ``spark://host:7077``,
        ``yarn``, ``k8s://...`` for a cluster.
    app_name : str
        The application's name in Spark's UI.

    Returns
    -------
    pyspark.sql.SparkSession

    Raises
    ------
    RelgradeError
        PySpark is not installed, or Spark cannot start (no Java, ``JAVA_HOME`` pointing
        nowhere, a master that does not answer); raised before anything is read or written.
    """
    # Imported here: relgrade.tables.spark imports pyarrow, which a DuckDB click command,
    # importing this module through the engines, does not need (about 47 MiB resident).
    from relgrade.tables.spark import session as spark_session

    return spark_session(master, app_name=app_name)


def _expression(column: str, family: str) -> str | None:
    """The typed Spark SQL expression for one log column of Spark type ``family``."""
    c = f"`{column}`"
    integer = family in ("tinyint", "smallint", "int", "bigint")
    real = family in ("float", "double") or family.startswith("decimal")
    if column in ("session_id", "query_id", "chunk_id", "ranker"):
        if family == "string":
            return f"NULLIF({c}, '')"
        return f"CAST({c} AS STRING)" if integer else None
    if column == "position":
        if integer:
            return f"CASE WHEN {c} >= 1 THEN CAST({c} AS BIGINT) END"
        if real:
            return (f"CASE WHEN {c} >= 1 AND {c} = floor({c}) AND {c} < 9e18 "
                    f"THEN CAST({c} AS BIGINT) END")
        if family == "string":
            return (f"CASE WHEN trim({c}) RLIKE '^[0-9]{{1,18}}$' "
                    f"AND try_cast(trim({c}) AS BIGINT) >= 1 "
                    f"THEN try_cast(trim({c}) AS BIGINT) END")
        return None
    if column == "clicked":
        if family == "boolean":
            return f"CAST({c} AS INT)"
        if integer or real:
            return f"CASE WHEN {c} IN (0, 1) THEN CAST({c} AS INT) END"
        if family == "string":
            return (f"CASE lower(trim({c})) WHEN '1' THEN 1 WHEN '0' THEN 0 "
                    f"WHEN 'true' THEN 1 WHEN 'false' THEN 0 END")
        return None
    if column == "randomized":
        if family == "boolean":
            return c
        if integer or real:
            return f"CASE WHEN {c} IN (0, 1) THEN {c} = 1 END"
        if family == "string":
            return (f"CASE lower(trim({c})) WHEN 'true' THEN true WHEN 'false' THEN false "
                    f"WHEN '1' THEN true WHEN '0' THEN false END")
        return None
    raise ValueError(column)


@dataclass(frozen=True)
class SparkLog:
    """A validated impression log, open on a SparkSession as the temp view ``relgrade_clicks_log``.

    Attributes
    ----------
    spark : pyspark.sql.SparkSession
        The session the views live on.
    source : str
        What the log was read from (a path Spark can read), for error messages.
    rows, sessions : int
        Impressions and distinct sessions.
    """

    spark: object
    source: str
    rows: int
    sessions: int

    @classmethod
    def from_dataframe(cls, spark, frame, *, source: str) -> "SparkLog":
        """Validate a Spark DataFrame as an impression log (the rules of ``ClickLog``).

        Parameters
        ----------
        spark : pyspark.sql.SparkSession
        frame : pyspark.sql.DataFrame
            With at least the columns of :data:`relgrade.clicks.LOG_COLUMNS`.
        source : str
            For error messages.

        Returns
        -------
        SparkLog

        Raises
        ------
        InputError
            The same rules, and the same messages, as
            :meth:`relgrade.clicks.ClickLog.from_relation`.
        """
        columns = list(frame.columns)
        require_columns(columns, source)
        types = dict(frame.dtypes)
        expressions = {}
        for column in LOG_COLUMNS:
            expression = _expression(column, types[column])
            if expression is None:
                raise InputError(f"column {column} cannot be stored as {types[column]}",
                                 path=source, fix=LOG_RULES[column])
            expressions[column] = expression
        frame.createOrReplaceTempView("relgrade_clicks_raw")
        spark.sql(sql("log_view").format(**expressions))
        counts = spark.sql(sql("check_rows")).collect()[0].asDict()
        if counts["rows"] == 0:
            raise InputError("the log has no rows", path=source)
        for column in LOG_COLUMNS:
            if counts[column]:
                row = spark.sql(sql("bad_value").format(
                    column=f"`{column}`", expression=expressions[column])).collect()[0]
                where = f"session {row['session_id']}" if row["session_id"] not in (None, "") \
                    else "a row"
                if column != "position" and row["position"] is not None:
                    where += f", position {row['position']}"
                found = row["found"]
                raise InputError(LOG_RULES[column], path=source, item=where,
                                 found="an empty value" if found in (None, "") else found,
                                 fix=f"{counts[column]:,} row(s) break this rule")
        first = spark.sql(sql("check_sessions")).collect()[0].asDict()
        for rule in ("repeated_position", "repeated_chunk", "several_queries",
                     "several_rankers"):
            if first[rule] is not None:
                rows = spark.sql(sql("session_rows"),
                                 args={"session_id": first[rule]}).toPandas()
                raise session_error(rows, source, rule, first[rule])
        return cls(spark=spark, source=str(source), rows=int(counts["rows"]),
                   sessions=int(first["sessions"]))


def read_log(spark, path) -> object:
    """The log at ``path`` as a Spark DataFrame (Parquet file or folder, or CSV with a header).

    Raises
    ------
    InputError
        The extension is neither ``.parquet`` nor ``.csv`` / ``.csv.gz`` and the path is not
        a folder, or Spark cannot read it.
    """
    text = str(path)
    name = text.rstrip("/").lower()
    try:
        if name.endswith((".csv", ".csv.gz")):
            return spark.read.option("header", "true").csv(text)
        if name.endswith(".parquet") or "." not in name.rsplit("/", 1)[-1]:
            return spark.read.parquet(text)
    except Exception as e:  # AnalysisException: path missing, no Parquet files
        first = str(e).strip().splitlines()[0]
        raise InputError("Spark could not read the log", path=text, found=first) from None
    raise InputError("unknown log format (use .parquet, a folder of .parquet files, or .csv)",
                     path=text)


def open_log(spark, path) -> SparkLog:
    """Read and validate the log at ``path`` (see :func:`read_log`, :class:`SparkLog`)."""
    return SparkLog.from_dataframe(spark, read_log(spark, path), source=str(path))


def randomization(log: SparkLog, *, rng: np.random.Generator, max_position: int = 10,
                  n_boot: int = 1000, level: float = 0.95) -> PropensityCurve:
    """:func:`relgrade.clicks.propensity.randomization`, its SQL run on Spark.

    Raises
    ------
    InputError
        As the DuckDB version: flagged rows that are not adjacent pairs, naming the session.
    """
    spark = log.spark
    spark.sql(sql("randomized_pairs"))
    bad = spark.sql(sql("randomized_check")).collect()
    if bad:
        raise unpaired_randomized_error(tuple(bad[0]), source=log.source)
    rows = spark.sql(sql("randomization"), args={"max_position": int(max_position)}).collect()
    # DuckDB's order: lists compared element by element, a prefix first.
    patterns = sorted(((list(r[0]), list(r[1]), list(r[2]), int(r[3])) for r in rows),
                      key=lambda p: (p[0], p[1], p[2]))
    return from_patterns(patterns, rng=rng, max_position=max_position, n_boot=n_boot,
                         level=level)


def harvesting(log: SparkLog, *, rng: np.random.Generator, max_position: int = 10,
               n_boot: int = 1000, level: float = 0.95) -> PropensityCurve:
    """:func:`relgrade.clicks.propensity.harvesting`, its SQL run on Spark."""
    rows = log.spark.sql(sql("harvesting"), args={"max_position": int(max_position)}).toPandas()
    rows = rows.sort_values(["query_id", "k"], ignore_index=True)
    return from_links(rows, rng=rng, max_position=max_position, n_boot=n_boot, level=level)


def estimate(log: SparkLog, *, method: str, rng: np.random.Generator, max_position: int = 10,
             n_boot: int = 1000, level: float = 0.95) -> PropensityCurve:
    """:func:`randomization` or :func:`harvesting`, by name (see
    :func:`relgrade.clicks.propensity.estimate`)."""
    if method not in ("randomization", "harvesting"):
        raise InputError("unknown propensity method", found=method,
                         fix="Use randomization or harvesting")
    fn = randomization if method == "randomization" else harvesting
    return fn(log, rng=rng, max_position=max_position, n_boot=n_boot, level=level)


def skip_above(log: SparkLog, weights):
    """:func:`relgrade.clicks.pairs.skip_above` as a lazy Spark DataFrame.

    Parameters
    ----------
    log : SparkLog
        The impression log.
    weights : pandas.DataFrame or dict of str to numpy.ndarray
        From :func:`relgrade.clicks.pairs.ips_weights` or
        :func:`relgrade.clicks.pairs.weight_columns`: ``position``, ``weight``.

    Returns
    -------
    pyspark.sql.DataFrame
        Columns ``query_id``, ``preferred_chunk_id``, ``other_chunk_id``, ``weight``,
        ``session_id``, globally ordered as DuckDB's; write it with ``.write.parquet``.
    """
    import pandas as pd

    table = pd.DataFrame({"position": np.asarray(weights["position"], dtype=np.int64),
                          "weight": np.asarray(weights["weight"], dtype=np.float64)})
    log.spark.createDataFrame(table).createOrReplaceTempView(WEIGHTS_VIEW)
    return log.spark.sql(sql("skip_above"))


def clicks_by_position(log: SparkLog) -> pd.DataFrame:
    """Impressions and clicks per position (``position``, ``shown``, ``clicks``)."""
    return log.spark.sql(sql("clicks_by_position")).toPandas().astype(
        {"position": "int64", "shown": "int64", "clicks": "int64"})
