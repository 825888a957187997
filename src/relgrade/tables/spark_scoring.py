"""``relgrade evaluate``'s reading, checks, joins and ranking on Apache Spark.

Spark reads the qrels and every run as text where they lie and, in SQL, parses the lines,
checks every row (the rules of the local engine: a plain layout, an integer grade on the
scale, no pair graded twice, no id holding whitespace or U+001F, no comment line; a finite
score, no chunk twice for one query), ranks each list in canonical order (score
descending, then chunk id descending as bytes; with ``ties="rank"`` the rank column first)
and joins the ranked rows to the qrels. Only what the measures read comes back to Python,
as Arrow: each list's rows down to the deepest cutoff (and, for uncut reciprocal rank, the
first relevant row wherever it lies), with their canonical rank, grade and list length,
and the qrels themselves. :func:`relgrade.evaluation.metrics.per_query_ranked` scores them
with the local engine's measure code, so every value is the local engine's.

Whenever an input holds anything else (another layout or format, a byte-order mark, a
blank line, CRLF line ends, fields after the sixth, a bad row) or a check fails,
:func:`ranked_rows` returns None and the caller scores on the local engine, whose rules and
messages accept or refuse the input. Sessions come from :func:`relgrade.tables.spark.session`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from relgrade.errors import InputError
from relgrade.tables.spark import parse_runs, run_problems

# one plain TREC qrels line: query, iteration, chunk, integer grade; one separator throughout
_QRELS_LINE = r"^([^\s\x{FEFF}]\S*)([ \t])(\S+)\2(\S+)\2(-?[0-9]{1,18})$"
_QRELS_FIELDS = {"query_id": 1, "chunk_id": 4, "grade_text": 5}
# characters Python's str.isspace() calls whitespace that Java's \S does not exclude (the
# local reader refuses an id holding one), and U+001F, relgrade's pair-key separator
_ODD_SPACE = (r"[\x{1C}-\x{1F}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}"
              r"\x{202F}\x{205F}\x{3000}]")

_QRELS_PROBLEMS = """
SELECT count(*) AS rows,
       count_if(NOT ok OR grade IS NULL OR query_id LIKE '#%' OR query_id LIKE '{{%'
                {scale}) AS bad,
       count_if(odd) AS odd
FROM relgrade_qrels_parsed
"""

_QRELS_TWICE = """
SELECT 1 FROM relgrade_qrels_parsed GROUP BY query_id, chunk_id HAVING count(*) > 1 LIMIT 1
"""

_COVERAGE = """
SELECT p.arm,
       count(DISTINCT CASE WHEN k.query_id IS NOT NULL THEN p.query_id END) AS answered,
       count(DISTINCT CASE WHEN k.query_id IS NULL THEN p.query_id END) AS unknown,
       min(CASE WHEN k.query_id IS NULL THEN p.query_id END) AS first_unknown
FROM relgrade_parsed AS p LEFT JOIN relgrade_qrels_queries AS k ON p.query_id = k.query_id
GROUP BY p.arm
"""

_RANKED = """
WITH ranked AS (
  SELECT p.arm, p.query_id, p.chunk_id,
         row_number() OVER (PARTITION BY p.arm, p.query_id ORDER BY {key}) AS pos,
         count(*) OVER (PARTITION BY p.arm, p.query_id) AS n_ret
  FROM relgrade_parsed AS p LEFT SEMI JOIN relgrade_qrels_queries AS k
    ON p.query_id = k.query_id),
graded AS (
  SELECT r.arm, r.query_id, r.pos, r.n_ret, g.grade
  FROM ranked AS r LEFT JOIN relgrade_qrels AS g
    ON r.query_id = g.query_id AND r.chunk_id = g.chunk_id),
marked AS (SELECT *{firsts} FROM graded)
SELECT arm, query_id, pos, grade, n_ret FROM marked {keep}
"""

_ORDER = {"score": "p.score DESC, p.chunk_id DESC",
          "rank": "p.rank ASC, p.score DESC, p.chunk_id DESC"}


@dataclass(frozen=True)
class RankedRun:
    """One run's ranked rows and coverage, as Spark computed them.

    ``rows``: ``query_id`` (large_string), ``pos``, ``grade`` (null: ungraded), ``n_ret``
    (int64), the rows :func:`relgrade.evaluation.metrics.ranked_reads` names, any order.
    ``answered``: qrels queries the run answers. ``unknown``: how many distinct run queries
    the qrels lack, and the first of them in byte order (None when none).
    """

    rows: pa.Table
    answered: int
    unknown: tuple[int, str | None]


@dataclass(frozen=True)
class RankedRuns:
    """The qrels (``query_id``, ``chunk_id`` large_string, ``grade`` int64, in file order)
    and each run's :class:`RankedRun`, in the order the runs were given."""

    qrels: pa.Table
    runs: list[RankedRun]


_OTHER_FORMATS = (".jsonl", ".ndjson", ".parquet")


def _suffix(path) -> str:
    name = str(path).rstrip("/").rsplit("/", 1)[-1]
    return ("." + name.rsplit(".", 1)[1]).lower() if "." in name else ""


def _parse_qrels(spark, path) -> bool:
    from pyspark.sql import functions as F

    try:
        lines = spark.read.text(str(path))
    except Exception:  # a missing or unreadable file: the local engine names it
        return False
    fields = [F.regexp_extract("value", _QRELS_LINE, k).alias(name)
              for name, k in _QRELS_FIELDS.items()]
    (lines.select(F.col("value").rlike(_QRELS_LINE).alias("ok"), *fields)
     .select("ok", "query_id", "chunk_id",
             F.expr("try_cast(grade_text AS BIGINT)").alias("grade"),
             (F.col("query_id").rlike(_ODD_SPACE) | F.col("chunk_id").rlike(_ODD_SPACE))
             .alias("odd"))
     .createOrReplaceTempView("relgrade_qrels_parsed"))
    return True


def ranked_rows(spark, qrels_path, run_paths: Sequence, *, ties: str = "score",
                depth: int | None, levels: Iterable[int] = (),
                scale: Iterable[int] | None = None) -> RankedRuns | None:
    """The qrels and every run's ranked rows, read, checked, ranked and joined by Spark;
    None when the local engine must decide.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        From :func:`relgrade.tables.spark.session`.
    qrels_path : path or URL
        TREC qrels (``qid iter docid rel``), a path every Spark executor can read.
    run_paths : sequence of path or URL
        TREC runs (``qid Q0 docid rank score tag``), at least one.
    ties : {"score", "rank"}, default "score"
        The canonical order's key (``relgrade evaluate --ties``).
    depth : int or None
        Rows at canonical rank <= depth come back; None: every row
        (:func:`relgrade.evaluation.metrics.ranked_reads`).
    levels : iterable of int
        For each level, each list's first row graded >= level comes back too.
    scale : iterable of int, optional
        The allowed grades; None accepts every integer.

    Returns
    -------
    RankedRuns or None
        None when the qrels or a run holds a line outside the plain layout (a single space
        or tab between fields throughout, six fields for a run and four for qrels, decimal
        rank and score, integer grade) or a row breaking a rule, when a file cannot be read
        by Spark or is empty: the caller then scores on the local engine, which names the
        file, the line and the rule when it refuses.

    Raises
    ------
    InputError
        ``ties`` is neither ``"score"`` nor ``"rank"``, ``depth`` is not None or an
        integer >= 1, or no run is given.
    """
    if ties not in _ORDER:
        raise InputError("ties must be `score` or `rank`", found=repr(ties))
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                              or depth < 1):
        raise InputError("depth must be None or an integer >= 1", found=repr(depth))
    paths = list(run_paths)
    if not paths:
        raise InputError("no run given", fix="Give at least one run")
    # the local engine reads these by their extension, as JSON Lines or Parquet
    if any(_suffix(p) in _OTHER_FORMATS for p in [qrels_path, *paths]):
        return None
    if not _parse_qrels(spark, qrels_path) or not parse_runs(spark, paths):
        return None
    allowed = sorted({int(g) for g in scale}) if scale is not None else None
    scale_sql = (f"OR grade NOT IN ({', '.join(map(str, allowed))})" if allowed
                 else "OR TRUE" if allowed is not None else "")
    counts = spark.sql(_QRELS_PROBLEMS.format(scale=scale_sql)).collect()[0]
    if not counts["rows"] or counts["bad"] or counts["odd"]:
        return None
    if spark.sql(_QRELS_TWICE).collect() or run_problems(spark, len(paths)):
        return None
    qrels = spark.sql("SELECT query_id, chunk_id, grade FROM relgrade_qrels_parsed")
    qrels.createOrReplaceTempView("relgrade_qrels")
    spark.sql("SELECT DISTINCT query_id FROM relgrade_qrels").createOrReplaceTempView(
        "relgrade_qrels_queries")
    coverage = {int(row["arm"]): (int(row["answered"]), int(row["unknown"]),
                                  row["first_unknown"])
                for row in spark.sql(_COVERAGE).collect()}
    levels = sorted({int(v) for v in levels})
    firsts = "".join(f", min(CASE WHEN grade >= {v} THEN pos END) OVER "
                     f"(PARTITION BY arm, query_id) AS first_{i}"
                     for i, v in enumerate(levels))
    keep = [f"pos <= {int(depth)}"] if depth is not None else []
    keep += [f"pos = first_{i}" for i in range(len(levels))]
    keep = ("WHERE " + " OR ".join(keep)) if depth is not None else ""
    ranked = spark.sql(_RANKED.format(key=_ORDER[ties], firsts=firsts, keep=keep)).toArrow()
    key_table = qrels.toArrow()
    key_table = key_table.cast(pa.schema([("query_id", pa.large_string()),
                                          ("chunk_id", pa.large_string()),
                                          ("grade", pa.int64())]))
    schema = pa.schema([("query_id", pa.large_string()), ("pos", pa.int64()),
                        ("grade", pa.int64()), ("n_ret", pa.int64())])
    arm = ranked["arm"].to_numpy()
    rows = ranked.select(["query_id", "pos", "grade", "n_ret"]).cast(schema)
    runs = []
    for i in range(len(paths)):
        answered, unknown, first = coverage.get(i, (0, 0, None))
        runs.append(RankedRun(rows=rows.filter(pa.array(arm == i)), answered=answered,
                              unknown=(unknown, first)))
    return RankedRuns(qrels=key_table, runs=runs)
