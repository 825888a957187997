"""The data contract: every long table relgrade reads or writes, its columns stated once.

relgrade passes long tables (pandas DataFrames, one row per observation) between its steps.
Each table below is named by a constant listing its columns in the order relgrade writes
them; code that builds, checks or selects a table uses the constant, never a copy of the
list. Ids (``query_id``, ``chunk_id``, ``grader``, ``arm``, ``session_id``) are always
``str``: a numeric id in an input file is read as its decimal text (see :func:`as_id`).

Tables
------
CHUNKS
    The corpus in chunks, one row per chunk: ``chunk_id`` (str), ``header`` (str), ``text``
    (str), ``source`` (str, the file it came from), ``line_start``, ``line_end`` (int64).
QUERIES
    The validated query set, one row per query, sorted by ``query_id``: ``query_id``,
    ``query``, ``group`` (str, one of params ``queries.groups``), ``weight`` (float64 > 0).
INTENTS
    The locked intent line of each query: ``query_id``, ``query``, ``intent`` (str).
RUN
    One arm's ranking, one row per (query, chunk): ``query_id``, ``chunk_id`` (str),
    ``rank`` (int64, 1 = top), ``score`` (float64, higher is better).
RUNS
    Several arms' runs stacked: ``arm`` (str) followed by the columns of RUN.
QRELS
    Relevance judgments, one row per (query, chunk): ``query_id``, ``chunk_id`` (str),
    ``grade`` (int64 on the grade scale). KEY, the frozen key, and a gold table have these
    columns.
GRADE_KEYS, ROW_COLUMNS
    One grader's validated grade rows: ``query_id``, ``chunk_id``, ``reason`` (str),
    ``grade`` (int64). The reason comes before the grade; a JSON grade row lists exactly
    these keys in this order.
GRADES
    The long grades table, one row per (query, chunk, grader, round): ``query_id``,
    ``chunk_id``, ``grader``, ``role`` (one of ROLES), ``round`` (int64 >= 1), ``grade``
    (int64), ``reason`` (str), ``sequence`` (int64, 0-based place of the row in its
    grader's file: the order of grading).
RATINGS
    The columns every rater-level computation needs from GRADES: ``query_id``,
    ``chunk_id``, ``grader`` (str), ``grade`` (int).
POOL
    The graded pool, one row per (query, chunk): ``query_id``, ``chunk_id`` (str),
    ``inclusion_prob`` (float64 in (0, 1]).
PROVENANCE
    Where each pooled pair came from (private): ``query_id``, ``chunk_id``, ``arm`` (str),
    ``rank`` (int64), ``score`` (float64), ``source`` (str).
ORDERS
    The display order of every packet: ``query_id``, ``chunk_id``, ``role`` (str),
    ``round``, ``position`` (0-based), ``batch`` (int64), ``order_seed`` (int64 in
    [0, 2**63)).
PER_QUERY
    Per-query metric values of several arms: ``arm``, ``query_id``, ``group``, ``measure``
    (str), ``value`` (float64).
CLICK_LOG
    An impression log, one row per shown result: ``session_id``, ``query_id``, ``chunk_id``
    (str), ``position`` (int, 1 = top), ``clicked`` (bool), ``ranker`` (str),
    ``randomized`` (bool).

PAIR is the key of a judged pair (``query_id``, ``chunk_id``); ROLES and KINDS are the
values a grader's ``role`` and ``kind`` may take.

Checks
------
:func:`require` refuses a table that lacks columns, :func:`normalised_grades` gives a
grades table string ids, :func:`check_scale` checks a grade scale, :func:`as_id` and
:func:`is_missing` read one id cell. Each raises :class:`relgrade.errors.InputError`.

This module imports nothing from relgrade except :mod:`relgrade.errors`.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from relgrade.errors import InputError

#: The key of a judged pair.
PAIR = ["query_id", "chunk_id"]

#: Columns of the chunks table (params ``paths.chunks``).
CHUNKS = ["chunk_id", "header", "text", "source", "line_start", "line_end"]

#: Columns of the validated queries table (params ``paths.queries``).
QUERIES = ["query_id", "query", "group", "weight"]

#: Columns of the intents table (params ``paths.intents``).
INTENTS = ["query_id", "query", "intent"]

#: Columns of one arm's run.
RUN = ["query_id", "chunk_id", "rank", "score"]

#: Columns of several arms' runs stacked.
RUNS = ["arm", *RUN]

#: Columns of qrels: relevance judgments of (query, chunk) pairs.
QRELS = ["query_id", "chunk_id", "grade"]

#: Columns of the frozen key (params ``paths.key``): qrels.
KEY = QRELS

#: The keys of a grade row, in the order a row must list them.
GRADE_KEYS = ("query_id", "chunk_id", "reason", "grade")

#: Columns of one grader's validated grade rows.
ROW_COLUMNS = list(GRADE_KEYS)

#: Columns of the long grades table (params ``paths.grades``).
GRADES = ["query_id", "chunk_id", "grader", "role", "round", "grade", "reason", "sequence"]

#: Columns a table of ratings (several raters per pair) must have.
RATINGS = ["query_id", "chunk_id", "grader", "grade"]

#: Columns of the pool table (params ``paths.pool``).
POOL = ["query_id", "chunk_id", "inclusion_prob"]

#: Columns of the private provenance table (params ``paths.provenance``).
PROVENANCE = ["query_id", "chunk_id", "arm", "rank", "score", "source"]

#: Columns of the orders table (params ``paths.orders``).
ORDERS = ["query_id", "chunk_id", "role", "round", "position", "batch", "order_seed"]

#: Columns of the per-query metric values of several arms.
PER_QUERY = ["arm", "query_id", "group", "measure", "value"]

#: Columns every impression log must have, in the documented order.
CLICK_LOG = ("session_id", "query_id", "chunk_id", "position", "clicked", "ranker",
             "randomized")

#: What a grade was made on, beside the grade row: the judgment bank's currency rule.
MADE_ON = ["content_sha256", "intent_sha256", "rubric_version", "rubric_sha256"]

#: The judgment bank: one row per recorded grade, with what it was made on.
BANK = ["query_id", "chunk_id", "grader", "round", "grade", "reason", *MADE_ON, "graded_at"]

#: The audit sample: one row per audited query and why it was chosen (params ``paths.audit``).
AUDIT = ["query_id", "group", "unique_share", "reason"]

#: Pending work: a pool pair a grader still owes, and why (new, stale or audit).
PENDING = ["grader", "query_id", "chunk_id", "why"]

#: The triage queue (``grading.mode: triage``): every pair the model graded, its stratum
#: (``relevant``: model grade >= relevant_min; ``zero``: below), whether people grade it and
#: the probability it had of being chosen for them.
TRIAGE_QUEUE = ["query_id", "chunk_id", "model_grade", "stratum", "selected",
                "inclusion_probability"]

#: A triage key: the grade of every pair and who gave it (``people`` or ``model``).
TRIAGE_KEY = ["query_id", "chunk_id", "grade", "source", "grader"]

#: Grading roles, in the order their display orders are drawn within a round.
ROLES = ("grader", "auditor")

#: The role of the model grader that grades every pool pair in triage mode
#: (``grading.mode: triage``); its packets and orders sit beside the ROLES' ones.
TRIAGE_ROLE = "triage"

#: The roles of a rater panel (``grading.mode: raters``): a ``rater`` grades the pairs
#: assigned to them (gold pairs hidden among them); an ``expert`` grades the adjudication
#: queue. Their display orders are drawn per grader, apart from :data:`ROLES`' slots, so
#: declaring them changes no grader's or auditor's order.
PANEL_ROLES = ("rater", "expert")

#: Every role a grader may have in params ``graders``.
GRADER_ROLES = ROLES + PANEL_ROLES

#: Kinds of grader.
KINDS = ("model", "human", "import")


def require(df: pd.DataFrame, columns: Sequence[str], *, what: str, path=None) -> None:
    """Refuse a table that lacks any of ``columns``.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    columns : sequence of str
        The columns it must have, e.g. :data:`RATINGS`; others may be present too.
    what : str
        The table as the message names it, e.g. ``"the grades table"``.
    path : str or os.PathLike, optional
        The file the table was read from, for the message.

    Raises
    ------
    InputError
        A column is missing; the message lists the missing ones and ``found`` the columns
        the table has.

    Examples
    --------
    >>> import pandas as pd
    >>> require(pd.DataFrame(columns=["query_id", "chunk_id"]), PAIR, what="the pool")
    """
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what} lacks column(s) {', '.join(missing)}", path=path,
                         found="columns " + ", ".join(map(str, df.columns)))


def normalised_grades(grades: pd.DataFrame) -> pd.DataFrame:
    """A copy of a grades table with its ids (``query_id``, ``chunk_id``, ``grader``) as str.

    Parameters
    ----------
    grades : pandas.DataFrame
        At least the columns :data:`RATINGS`; other columns are kept.

    Returns
    -------
    pandas.DataFrame
        A new table, same rows and columns; the input is not modified.

    Raises
    ------
    InputError
        A column of :data:`RATINGS` is missing.
    """
    require(grades, RATINGS, what="the grades table")
    g = grades.copy()
    for col in ("query_id", "chunk_id", "grader"):
        g[col] = g[col].astype(str)
    return g


def check_scale(scale: Iterable[int], relevant_min: int | None = None) -> list[int]:
    """The grade scale as a sorted list of distinct ints, checked.

    Parameters
    ----------
    scale : iterable of int
        The grades of the scale (params ``scale.grades``), e.g. ``[0, 1, 2]``.
    relevant_min : int, optional
        The lowest grade that counts as relevant (params ``scale.relevant_min``).

    Returns
    -------
    list of int
        The scale, ascending.

    Raises
    ------
    InputError
        The scale has fewer than two grades, a grade that is not an integer or a repeated
        grade; ``relevant_min`` is not a grade of the scale above its lowest grade.

    Examples
    --------
    >>> check_scale([2, 0, 1], relevant_min=1)
    [0, 1, 2]
    """
    values = list(scale)
    for g in values:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
            raise InputError("the grade scale lists integers only", item="scale.grades",
                             found=repr(g))
    ints = [int(g) for g in values]
    if len(set(ints)) != len(ints) or len(ints) < 2:
        raise InputError("the grade scale needs at least two distinct grades",
                         item="scale.grades", found=str(ints))
    ints.sort()
    if relevant_min is not None:
        if isinstance(relevant_min, bool) or not isinstance(relevant_min, (int, np.integer)) \
                or int(relevant_min) not in ints or int(relevant_min) == ints[0]:
            raise InputError("relevant_min must be a grade of the scale above its lowest grade",
                             item="scale.relevant_min", found=repr(relevant_min),
                             fix=f"Use one of {', '.join(map(str, ints[1:]))}")
    return ints


def shown(value) -> str:
    """A cell as an error message shows it: a string in double quotes, anything else repr.

    Examples
    --------
    >>> shown("q1"), shown(1.5)
    ('"q1"', '1.5')
    """
    return repr(value) if not isinstance(value, str) else f'"{value}"'


def is_missing(value) -> bool:
    """Whether a table cell holds no value (``None``, NaN, ``pd.NA``).

    Examples
    --------
    >>> import pandas as pd
    >>> is_missing(float("nan")), is_missing(pd.NA), is_missing("")
    (True, True, False)
    """
    if value is None:
        return True
    # pandas' NA can only exist once pandas is imported; a process that never imports it
    # (the click commands) does not pay for the import here.
    pandas = sys.modules.get("pandas")
    if pandas is not None and value is pandas.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def as_id(value, name: str, *, path=None, line=None) -> str:
    """An id cell as ``str``: a string or an integer (JSON ``4411`` is ``"4411"``).

    Parameters
    ----------
    value : object
        The cell.
    name : str
        The column, for the message (e.g. ``"query_id"``).
    path, line : optional
        Where the cell was read, for the message.

    Returns
    -------
    str
        The id; an integer (or an integral float, as Parquet stores an integer column with
        gaps) as its decimal text.

    Raises
    ------
    InputError
        The cell is missing, empty, a bool, or a number that is not an integer.

    Examples
    --------
    >>> as_id(4411, "chunk_id"), as_id(7.0, "query_id"), as_id("q1", "query_id")
    ('4411', '7', 'q1')
    """
    if is_missing(value):
        raise InputError(f"{name} is missing", path=path, line=line)
    if isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be a string or an integer", path=path, line=line,
                         found=shown(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        # Parquet and pandas turn an integer column with gaps into floats.
        return str(int(value))
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string or an integer", path=path, line=line,
                         found=shown(value))
    if not value.strip():
        raise InputError(f"{name} is empty", path=path, line=line)
    return value
