"""The pool stage's per-arm work on Apache Spark: the same checks and the same cut as the
local engine, on runs Spark reads where they lie.

Spark reads every arm's TREC run as text and, in one SQL job, parses the lines, checks every
row (a finite score, no U+001F in an id, no chunk twice for one query, a known query, a
known chunk) and keeps the rows that can reach each list's canonical top ``depth``
(``rank() <= depth`` over the tie rule's key, which keeps exactly the rows
:func:`relgrade.protocol.pool.arm_candidates` keeps). Only those rows come back to Python,
where :func:`relgrade.protocol.pool.pool_candidates` pools them as it pools the local
engine's, so the pool, provenance, manifest and statistics are the same bytes.

A line is parsed by Spark only in the plain layout: six fields of non-whitespace separated by
one space (or one tab) throughout the line, an unsigned decimal rank and a decimal score.
Whenever a run holds anything else (another layout, a byte-order mark, a blank line, a bad
row) or a check fails, :func:`arm_candidates` returns None and the caller pools on the local
engine, which accepts or refuses the runs with the reference rules and messages. PySpark is
an optional extra (``pip install 'relgrade[spark]'``) and needs Java 17+.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from relgrade.errors import InputError, RelgradeError

#: The master a session uses unless told otherwise: local mode on two cores.
DEFAULT_MASTER = "local[2]"

# one plain TREC line: query, Q0, chunk, rank, score, tag; one separator, used throughout
_LINE = (r"^([^\s\x{FEFF}]\S*)([ \t])(\S+)\2(\S+)\2([0-9]+)\2"
         r"([-+]?[0-9]*[.]?[0-9]+(?:[eE][-+]?[0-9]+)?)\2(\S+)$")

_FIELDS = {"query_id": 1, "chunk_id": 4, "rank_text": 5, "score_text": 6}

# per arm: rows, and rows breaking a rule (unparsed, non-finite, U+001F, duplicate, unknown)
_PROBLEMS = """
SELECT p.arm, count(*) AS rows,
       count_if(NOT p.ok OR p.rank IS NULL OR p.score IS NULL OR isnan(p.score)
                OR abs(p.score) = CAST('Infinity' AS DOUBLE)
                OR (p.score = 0 AND p.score_text LIKE '-%')
                OR instr(p.query_id, char(31)) > 0 OR instr(p.chunk_id, char(31)) > 0
                {unknown}) AS bad
FROM relgrade_parsed AS p {joins}
GROUP BY p.arm
"""

_DUPLICATES = """
SELECT DISTINCT arm FROM relgrade_parsed WHERE ok
GROUP BY arm, query_id, chunk_id HAVING count(*) > 1
"""

_CANDIDATES = """
SELECT arm, query_id, chunk_id, rank, score FROM (
  SELECT *, rank() OVER (PARTITION BY arm, query_id ORDER BY {key}) AS cut
  FROM relgrade_parsed)
WHERE cut <= {depth}
"""


def session(master: str = DEFAULT_MASTER, *, app_name: str = "relgrade-pool"):
    """A SparkSession for the pool (the active one when it exists).

    Parameters
    ----------
    master : str, default "local[2]"
        Spark's master URL: ``local[N]`` for local mode, ``spark://host:7077``, ``yarn``,
        ``k8s://...`` for a cluster (params ``pool.spark_master``).
    app_name : str
        The application's name in Spark's UI.

    Returns
    -------
    pyspark.sql.SparkSession

    Raises
    ------
    RelgradeError
        PySpark is not installed, or Spark cannot start (no Java, a master that does not
        answer); raised before anything is read or written.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise RelgradeError("the Spark engine needs PySpark: pip install 'relgrade[spark]' "
                            "(and Java 17+, e.g. Debian's default-jre-headless)") from None
    try:
        spark = (SparkSession.builder.master(master).appName(app_name)
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "8")
                 .config("spark.sql.session.timeZone", "UTC")
                 .getOrCreate())
    except Exception as e:  # py4j and pyspark raise several unrelated types here
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RelgradeError(f"Spark could not start (master {master}): {first}. Check that "
                            "Java 17+ is installed and JAVA_HOME, if set, points at it, "
                            "and that the master is reachable") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def parse_runs(spark, paths, *, view: str = "relgrade_parsed") -> bool:
    """Register Spark's parse of TREC runs as the temporary view ``view``.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        From :func:`session`.
    paths : sequence of path or URL
        The runs, at least one; run ``i`` is ``arm = i`` in the view.
    view : str, default "relgrade_parsed"
        The view's name.

    Returns
    -------
    bool
        False when Spark cannot read a run (missing, unreadable): nothing is registered.
        Otherwise True, and ``view`` holds one row per line of every run (lazily): ``arm``
        (int), ``ok`` (the line is in the plain layout), ``query_id``, ``chunk_id``,
        ``score_text`` (str; "" when not ``ok``), ``rank`` (bigint) and ``score`` (double),
        null when the field does not parse.
    """
    from pyspark.sql import functions as F

    try:
        lines = None
        for i, path in enumerate(paths):
            text = spark.read.text(str(path)).selectExpr(f"{i} AS arm", "value")
            lines = text if lines is None else lines.unionAll(text)
    except Exception:  # a missing or unreadable run: the local engine names it
        return False
    # the pattern goes to Spark as a value, not inside SQL text (no escapes to undo)
    fields = [F.regexp_extract("value", _LINE, k).alias(name) for name, k in _FIELDS.items()]
    (lines.select("arm", F.col("value").rlike(_LINE).alias("ok"), *fields)
     .selectExpr("arm", "ok", "query_id", "chunk_id", "score_text",
                 "try_cast(rank_text AS BIGINT) AS rank",
                 "try_cast(score_text AS DOUBLE) AS score")
     .createOrReplaceTempView(view))
    return True


def run_problems(spark, n_runs: int, *, joins: str = "", unknown: str = "") -> bool:
    """Whether a run parsed by :func:`parse_runs` is empty, holds a line outside the plain
    layout or a row breaking a rule (unparsed rank or score, a score not finite or written
    as negative zero, U+001F in an id, a chunk twice for one query; with ``joins`` and
    ``unknown``, SQL fragments over ``relgrade_parsed AS p``, an unknown id too).

    Returns
    -------
    bool
        True when any of the ``n_runs`` runs does: the local engine must decide.
    """
    counts = spark.sql(_PROBLEMS.format(unknown=unknown, joins=joins)).collect()
    found = {int(row["arm"]): (int(row["rows"]), int(row["bad"])) for row in counts}
    if any(found.get(i, (0, 0))[0] == 0 or found[i][1] for i in range(n_runs)):
        return True
    return bool(spark.sql(_DUPLICATES).collect())


def _known(spark, path, column: str):
    """Spark's view of a known-id column, or None when the local engine must read it (not
    Parquet, or the column is not text)."""
    from pyspark.sql.types import StringType

    if Path(str(path)).suffix.lower() != ".parquet":
        return None
    try:
        frame = spark.read.parquet(str(path))
    except Exception:  # missing or unreadable: the local engine names it
        return None
    if column not in frame.columns or not isinstance(frame.schema[column].dataType,
                                                     StringType):
        return None
    return frame.select(column)


def arm_candidates(spark, paths: Mapping[str, object], *, depth: int, ties: str = "score",
                   queries=None, chunks=None) -> dict[str, pa.Table] | None:
    """Every arm's checked candidate rows, computed by Spark; None when the local engine
    must decide.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        From :func:`session`.
    paths : mapping of str to path or URL
        Arm name -> its TREC run, a path every Spark executor can read (local in local
        mode; ``hdfs://``, ``s3a://`` ... on a cluster).
    depth : int
        The deepest canonical rank needed (``pool.depth``, or ``pool.tail_depth`` with a
        tail sample), >= 1.
    ties : {"score", "rank"}, default "score"
        Params ``runs.ties``.
    queries, chunks : path or URL, optional
        Parquet files whose ``query_id`` / ``chunk_id`` column holds the known ids; a check
        is skipped when None.

    Returns
    -------
    dict of str to pyarrow.Table, or None
        Arm -> its rows that can reach the canonical top ``depth`` (``query_id``,
        ``chunk_id`` large_string, ``rank`` int64, ``score`` float64; any row order): the
        rows :func:`relgrade.protocol.pool.arm_candidates` keeps from the same file. None
        when any run holds a line outside the plain layout or a row breaking a rule, when
        a run or an id file cannot be read by Spark, or when a known-id file is not Parquet
        with a text column: the caller then pools on the local engine, whose rules and
        messages decide.

    Raises
    ------
    InputError
        ``ties`` is neither ``"score"`` nor ``"rank"``, or ``depth`` is not an integer >= 1.
    """
    if ties not in ("score", "rank"):
        raise InputError("runs.ties must be `score` or `rank`", item="runs.ties",
                         found=repr(ties))
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError("pool depth must be an integer >= 1", item="pool depth",
                         found=repr(depth))
    names = list(paths)
    if not names:
        return {}
    if not parse_runs(spark, [paths[arm] for arm in names]):
        return None
    joins, unknown = [], []
    for name, path, col in (("q", queries, "query_id"), ("c", chunks, "chunk_id")):
        if path is None:
            continue
        known = _known(spark, path, col)
        if known is None:
            return None
        view = f"relgrade_known_{col}"
        known.distinct().createOrReplaceTempView(view)
        joins.append(f"LEFT JOIN {view} AS {name} ON p.{col} = {name}.{col}")
        unknown.append(f"OR {name}.{col} IS NULL")
    if run_problems(spark, len(names), unknown=" ".join(unknown), joins=" ".join(joins)):
        return None
    key = "score DESC" if ties == "score" else "rank ASC"
    kept = spark.sql(_CANDIDATES.format(key=key, depth=int(depth))).toArrow()
    schema = pa.schema([("query_id", pa.large_string()), ("chunk_id", pa.large_string()),
                        ("rank", pa.int64()), ("score", pa.float64())])
    arm = kept["arm"].to_numpy()
    rows = kept.select(["query_id", "chunk_id", "rank", "score"]).cast(schema)
    return {name: rows.filter(pa.array(arm == i)) for i, name in enumerate(names)}
