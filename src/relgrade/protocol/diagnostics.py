"""Grading diagnostics: position bias and leniency drift, per grader.

Agreement (:mod:`relgrade.protocol.agreement`) says whether two graders agree; these say
*how* one grader's grades move with things that should not move them:

* :func:`position_bias`: the mean grade at each display position. The display order is a
  seeded shuffle, so without bias the expected mean grade is the same at every position; a
  fall across positions is the footprint of position bias or fatigue (lost in the middle).
* :func:`leniency_drift`: the mean grade over consecutive stretches of a grader's sequence
  of grades; a climb or a sink is a grader growing generous or harsh over a long pool.
* :func:`grading_diagnostics`: both summarised per grader in a small JSON-ready dict, as
  the agreement stage writes it, each slope with a confidence interval clustered by query
  (:func:`slope_interval`) and a flag when the interval excludes 0.

Grading order is the order in which a grader gave its grades: the ``sequence`` column of
the grades table, which is the row's line in the grader's file (``relgrade grade run``,
``relgrade serve`` and ``relgrade grade import`` append each saved batch in turn), never the
table's own row order, which is sorted by pair.

Every function takes the long grades table (:data:`relgrade.schema.GRADES`) and, for
position bias, the display positions (:data:`relgrade.schema.ORDERS`); none modifies its
inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.errors import InputError
from relgrade.ranking import arrow_ids, codes_in, id_codes
from relgrade.schema import PAIR, normalised_grades, require


def slope_interval(x, y, groups, *, level: float = 0.95, intercept: bool = True) -> dict:
    """Least-squares slope of ``y`` on ``x`` with a confidence interval clustered by group.

    Parameters
    ----------
    x, y : array-like of shape (n,), float
        Regressor (display position, or place in the grading sequence) and grade; ``x``
        may be a :class:`Span` (the places in a sequence, made a block at a time).
    groups : array-like of shape (n,)
        Cluster of each observation (the query): grades of one query are not independent.
    level : float, default 0.95
        Confidence level in (0, 1).
    intercept : bool, default True
        Fit ``y = a + b x``; ``False`` fits ``y = b x`` (for data already centred per
        query, the within-query slope).

    Returns
    -------
    dict
        ``slope`` (float or None: ``x`` does not vary), ``low``, ``high`` (float or None:
        fewer than two clusters), ``excludes_zero`` (bool or None).

    Raises
    ------
    InputError
        ``level`` outside (0, 1) or arrays of unequal length.

    Notes
    -----
    The variance is the cluster-robust sandwich ``c (X'X)^-1 (sum_g X_g' e_g e_g' X_g)
    (X'X)^-1`` with ``c = G/(G-1) * (n-1)/(n-k)`` and a t quantile with ``G - 1`` degrees
    of freedom (Liang & Zeger 1986; Cameron & Miller 2015): the same as statsmodels' OLS
    with ``cov_type="cluster"`` and ``use_t=True``.

    References
    ----------
    K.-Y. Liang and S. L. Zeger, "Longitudinal data analysis using generalized linear
    models", Biometrika 73(1), 1986. A. C. Cameron and D. L. Miller, "A practitioner's guide
    to cluster-robust inference", Journal of Human Resources 50(2), 2015.
    """
    from scipy.stats import t as t_dist

    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError("the confidence level must lie in (0, 1)", found=repr(level))
    x = x if isinstance(x, Span) else np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    g = np.asarray(groups)
    if not (x.shape == y.shape == g.shape):
        raise InputError("slope inputs must have one value per grade",
                         found=f"{x.size}, {y.size} and {g.size} values")
    none = {"slope": None, "low": None, "high": None, "excludes_zero": None}
    n = x.size
    k = 2 if intercept else 1
    if n <= k:
        return none
    # X'X over the whole design matrix at once (numpy hands X.T @ X to BLAS as one
    # product: its sum's order is BLAS's); the matrix is freed right after
    X = _whole_design(x, intercept)
    xtx = X.T @ X
    del X
    if abs(np.linalg.det(xtx)) < 1e-12 * max(1.0, float(np.abs(xtx).max())) ** k:
        return none
    bread = np.linalg.inv(xtx)
    # (X'X)^-1 X' has one column per row of X, each the product of bread with that row
    # alone: made from the design's rows a block at a time, the same products as the
    # whole product's; its product with y is one BLAS sum over every row, as before
    hat = np.empty((k, n))
    for start in range(0, n, _DESIGN_ROWS):
        rows = slice(start, start + _DESIGN_ROWS)
        hat[:, rows] = bread @ _design(x[rows], intercept).T
    beta = hat @ y
    del hat
    slope = float(beta[-1])
    codes = _group_codes(g)
    n_groups = int(codes.max()) + 1
    if n_groups < 2:
        return {**none, "slope": slope}
    score = np.zeros((n_groups, k))
    # np.add.at adds row after row, so a block of rows at a time makes each group's sum
    # the same additions in the same order, without a product array of every row; each
    # fitted value is the product of one row of X with beta, the same a block at a time
    for start in range(0, n, _DESIGN_ROWS):
        rows = slice(start, start + _DESIGN_ROWS)
        design = _design(x[rows], intercept)
        resid = design @ beta
        np.subtract(y[rows], resid, out=resid)
        np.add.at(score, codes[rows], design * resid[:, None])
    del design, resid
    c = n_groups / (n_groups - 1) * (n - 1) / (n - k)
    var = c * (bread @ (score.T @ score) @ bread)[-1, -1]
    half = float(t_dist.ppf((1 + level) / 2, n_groups - 1) * np.sqrt(max(var, 0.0)))
    low, high = slope - half, slope + half
    return {"slope": slope, "low": low, "high": high,
            "excludes_zero": bool(low > 0 or high < 0)}


#: Rows of the design matrix made at once by :func:`slope_interval` (after X'X): a
#: multiple of every BLAS kernel's unroll, so the last block's tail is the whole product's.
_DESIGN_ROWS = 1 << 16


def _design(x: np.ndarray, intercept: bool) -> np.ndarray:
    """The design matrix of ``x`` (float64, shape (n,)): ``np.column_stack([ones, x])``
    (shape (n, 2), C order) with ``intercept``, else ``x[:, None]`` (a view)."""
    if not intercept:
        return x[:, None]
    X = np.empty((x.size, 2))
    X[:, 0] = 1.0
    X[:, 1] = x
    return X


def _whole_design(x, intercept: bool) -> np.ndarray:
    """:func:`_design` of every row of ``x`` (an array or a :class:`Span`, filled a block
    at a time: no whole copy of a span beside the matrix)."""
    if not isinstance(x, Span):
        return _design(x, intercept)
    if not intercept:
        return x[0:x.size][:, None]
    X = np.empty((x.size, 2))
    X[:, 0] = 1.0
    for start in range(0, x.size, _DESIGN_ROWS):
        X[start:start + _DESIGN_ROWS, 1] = x[start:start + _DESIGN_ROWS]
    return X


@dataclass(frozen=True)
class Span:
    """The places 0..n-1 of a sequence scaled to [0, 1], ``arange(n) / (n - 1)``
    (``arange(n)`` for n <= 1), float64, made for the rows asked for: a regressor of
    :func:`slope_interval` without its whole array.

    Attributes
    ----------
    n : int
        How many places.
    """

    n: int

    @property
    def size(self) -> int:
        return self.n

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def __getitem__(self, rows: slice) -> np.ndarray:
        """The places of ``rows`` (a slice of step 1), float64: each the same division as
        the whole array's.

        Raises
        ------
        ValueError
            ``rows`` has another step.
        """
        start, stop, step = rows.indices(self.n)
        if step != 1:
            raise ValueError("a span is read by slices of step 1")
        part = np.arange(start, stop, dtype=float)
        if self.n > 1:
            part /= self.n - 1
        return part


def _group_codes(groups: np.ndarray) -> np.ndarray:
    """``np.unique(groups, return_inverse=True)[1]``: each value's rank among the distinct
    values; for whole numbers of a narrow range by a table over the range (no sorted copy
    of the values), as int32."""
    if groups.dtype.kind in "iu" and groups.size:
        low, high = int(groups.min()), int(groups.max())
        if high - low < max(4 * groups.size, 1 << 16):
            at = (groups - low).astype(np.int32, copy=False) if low else groups
            present = np.zeros(high - low + 1, dtype=bool)
            present[at] = True
            rank = np.cumsum(present, dtype=np.int32) - 1
            return rank[at]
    return np.unique(groups, return_inverse=True)[1].reshape(-1)


def position_bias(grades: pd.DataFrame, positions: pd.DataFrame) -> pd.DataFrame:
    """Mean grade by displayed position, per grader.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``; ``role``
        and ``round`` are used for the join when ``positions`` has them too).
    positions : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``position`` (0-based display order), optionally
        ``role`` and ``round`` (the orders table: each role sees its own order).

    Returns
    -------
    pandas.DataFrame
        Columns ``grader`` (str), ``position`` (int64), ``grades`` (int64, how many grades
        were shown there), ``mean_grade`` (float64); sorted by grader, position. Grades
        without a known position are left out.

    Raises
    ------
    InputError
        A column is missing, or ``positions`` lists one pair twice for the same role and
        round.

    Notes
    -----
    A mean grade that falls (or rises) with the position at which a chunk was shown is the
    footprint of position bias or fatigue (lost in the middle); the display order is a
    seeded shuffle, so without bias the expected mean grade is the same at every position.
    """
    joined = _with_positions(grades, positions)
    out = (joined.groupby(["grader", "position"], sort=True)["grade"]
           .agg(grades="size", mean_grade="mean").reset_index())
    return out.astype({"grader": str, "position": np.int64, "grades": np.int64,
                       "mean_grade": np.float64})


def _with_positions(grades: pd.DataFrame, positions: pd.DataFrame) -> pd.DataFrame:
    g = normalised_grades(grades)
    g = g[g["grade"].notna()]
    require(positions, ["query_id", "chunk_id", "position"], what="the position table")
    keys = list(PAIR) + [col for col in ("role", "round")
                         if col in positions.columns and col in g.columns]
    g = g[keys + [c for c in ("grader", "grade") if c not in keys]]  # what the join serves
    # each display row's key (pair, role, round) as one int64 over the position table's
    # distinct values, so the join and the check for a pair listed twice hash integers
    # rather than strings row by row; a grade row whose key is not there gets -1
    shown = np.zeros(len(positions), dtype=np.int64)
    graded = np.zeros(len(g), dtype=np.int64)
    for col in keys:
        if col == "round":
            mine = positions[col].astype(np.int64).to_numpy()
            theirs = g[col].astype(np.int64).to_numpy()
            codes, values = pd.factorize(mine)
            found = pd.Index(values).get_indexer(theirs)
        else:
            mine = arrow_ids(positions[col].astype(str))
            distinct = pa.chunked_array([pc.unique(mine.combine_chunks())])
            codes = codes_in(mine, distinct)
            found = codes_in(arrow_ids(g[col].astype(str)), distinct)
            values = distinct
        width = max(len(values), 1)
        shown = shown * width + codes
        graded = np.where((graded >= 0) & (found >= 0), graded * width + found, -1)
    _, first, counts = np.unique(shown, return_inverse=True, return_counts=True)
    dup = counts[first] > 1
    if dup.any():
        at = int(np.flatnonzero(dup)[0])
        raise InputError("the position table lists one pair twice",
                         item=f"pair ({positions['query_id'].astype(str).iat[at]}, "
                              f"{positions['chunk_id'].astype(str).iat[at]})")
    where = pd.Index(shown).get_indexer(graded)  # the display row of each grade, or -1
    hit = np.flatnonzero(where >= 0)  # in the grades' order, as an inner merge keeps it
    joined = g.iloc[hit].reset_index(drop=True)
    for col in keys:  # the key columns as the merge typed them
        joined[col] = joined[col].astype(np.int64 if col == "round" else str)
    joined["position"] = positions["position"].to_numpy()[where[hit]]
    joined["grade"] = joined["grade"].astype(np.int64)
    joined["position"] = joined["position"].astype(np.int64)
    return joined


def leniency_drift(grades: pd.DataFrame, *, order: str = "sequence", bins: int = 5
                   ) -> pd.DataFrame:
    """Mean grade by stretch of a grader's grading sequence, to show drift over time.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table with a column named by ``order`` that numbers each grader's
        grades in the order they were given.
    order : str, default "sequence"
        The column holding the order of grading within a grader.
    bins : int, default 5
        How many consecutive, equally long stretches each grader's sequence is cut into.

    Returns
    -------
    pandas.DataFrame
        Columns ``grader`` (str), ``bin`` (int64, 1 = first stretch), ``grades`` (int64),
        ``mean_grade`` (float64); sorted by grader, bin.

    Raises
    ------
    InputError
        ``order`` is not a column, or ``bins`` is not a positive integer.

    Notes
    -----
    Grade ``r`` (0-based rank in the grader's sequence of ``n``) falls in bin
    ``floor(r * bins / n) + 1``. A mean grade that climbs or sinks across the bins is
    leniency drift: over a long pool a grader grows generous or harsh.
    """
    if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or bins < 1:
        raise InputError("bins must be a positive integer", found=repr(bins))
    g = normalised_grades(grades)
    require(g, [order], what="the grades table")
    g = g[g["grade"].notna()].copy()
    g["_rank"] = g.groupby("grader")[order].rank(method="first") - 1
    n = g.groupby("grader")["grade"].transform("size")
    g["bin"] = (g["_rank"] * bins // n).astype(np.int64) + 1
    g["grade"] = g["grade"].astype(np.int64)
    out = (g.groupby(["grader", "bin"], sort=True)["grade"]
           .agg(grades="size", mean_grade="mean").reset_index())
    return out.astype({"grader": str, "bin": np.int64, "grades": np.int64,
                       "mean_grade": np.float64})


def _clusters(query_ids: pd.Series) -> np.ndarray:
    """The queries as int64 codes in their ids' code point order (Python's str order), the
    order :func:`slope_interval` sorts its groups in: the same clusters, summed in the same
    order, as the ids themselves, without an object array of one str per grade."""
    return id_codes(query_ids)[0]


def _within(values: pd.Series, keys: list[pd.Series]) -> np.ndarray:
    """Values centred on their display's mean (one display = query, role, round)."""
    return (values - values.groupby(keys).transform("mean")).to_numpy(float)


def grading_diagnostics(grades: pd.DataFrame, positions: pd.DataFrame | None = None, *,
                        order: str = "sequence", bins: int = 5, level: float = 0.95,
                        graders: Sequence[str] | None = None) -> dict:
    """Position bias and leniency drift of every grader, slopes with intervals and flags.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``; ``role``,
        ``round`` and ``order`` when present), any number of graders (key grader, auditor,
        raters).
    positions : pandas.DataFrame, optional
        The display positions (see :func:`position_bias`); without it position bias is
        not computed.
    order : str, default "sequence"
        The grades table's order-of-grading column (see :func:`leniency_drift`); when it is
        absent drift is not computed.
    bins : int, default 5
        Stretches of the grading sequence for the drift table.
    level : float, default 0.95
        Confidence level of the slopes' intervals.
    graders : sequence of str, optional
        Graders to list even without a grade (params ``graders``): each gets
        ``{"grades": 0}`` and a note.

    Returns
    -------
    dict
        ``graders``: grader → ``{"role": str (when the table has roles), "grades": n,
        "position_slope", "position_interval": [low, high], "position_flag",
        "mean_by_third": {"first", "middle", "last"}, "drift_slope", "drift_interval",
        "drift_flag", "mean_by_stretch": {"1": mean, ...}}`` (only the parts whose input is
        there; slopes and interval ends float or None, flags bool or None);
        ``level`` (float); ``interval`` (str, how the intervals are made); ``flags`` (list
        of str, one per slope whose interval excludes 0); ``notes`` (list of str, what could
        not be computed). The full table by display position is :func:`position_bias`.

    Raises
    ------
    InputError
        As :func:`position_bias` and :func:`leniency_drift`, or ``level`` outside (0, 1).

    Notes
    -----
    ``position_slope`` is the within-display least-squares change in grade per display
    position: grade and position are centred on each display's mean (one display = one
    query for one role and round) before fitting, so a query whose larger pool puts chunks
    at later positions does not pass its overall grade level off as position bias.
    ``mean_by_third`` cuts each display into thirds: a chunk at 0-based position ``p`` of
    ``n`` is in third ``floor(3 p / n)``; a lower middle third is the lost-in-the-middle
    footprint. ``drift_slope`` is the least-squares change in grade from a grader's first
    grade (0) to its last (1), in grading order (``order``); queries are graded one after
    another, so a drift interval is as wide as the spread between queries allows. Both
    intervals are clustered by query (:func:`slope_interval`); a flag is raised when the
    interval excludes 0.
    """
    g = normalised_grades(grades)
    # only the columns read below: a reason or other text column is never copied
    g = g[[c for c in g.columns if c in (*PAIR, "grader", "grade", "role", "round", order)]]
    g = g[g["grade"].notna()]
    codes = GradeCodes.of_table(g, order=order)
    del g
    if positions is not None and not isinstance(positions, PositionCodes):
        positions = PositionCodes.of_table(positions)
    return diagnose(codes, positions, bins=bins, level=level, graders=graders, order=order)


@dataclass(frozen=True)
class GradeCodes:
    """The columns of a long grades table the diagnostics read, one compact array each.

    A table of millions of grades held as ids would cost a string per row and column; here
    each id column is an integer code into its distinct values, so a caller can build it
    from a file a column at a time (the agreement stage) and the diagnostics hold a few
    bytes per grade.

    Attributes
    ----------
    grader : ndarray of int, shape (n,)
        Each row's grader as its position in ``graders``.
    graders : tuple of str
        The distinct graders in code point order.
    query : ndarray of int, shape (n,)
        Each row's query as its position in ``queries``: codes in the ids' code point
        order, the order :func:`slope_interval` sorts its clusters in.
    queries : pyarrow.Array of large_string
        The distinct query ids in code point order.
    chunk : ndarray of int, shape (n,)
        Each row's chunk as its position in ``chunks``.
    chunks : pyarrow.Array of large_string
        The distinct chunk ids, in any order.
    grade : ndarray, shape (n,)
        The grades (int or float dtype).
    graded : ndarray of bool, shape (n,), or None
        Which rows hold a grade; None when every row does. Rows without one are left out
        of every diagnostic.
    role, roles : ndarray of int, shape (n,), and tuple of str; or None
        Each row's role as its position in ``roles`` (distinct roles, as str); None when
        the table has no ``role`` column.
    round : ndarray, shape (n,), or None
        The grading round of each row; None when the table has no ``round`` column.
    sequence : ndarray, shape (n,), or None
        The order-of-grading column (see :func:`leniency_drift`); None when absent.
    """

    grader: np.ndarray
    graders: tuple
    query: np.ndarray
    queries: pa.Array
    chunk: np.ndarray
    chunks: pa.Array
    grade: np.ndarray
    graded: np.ndarray | None = None
    role: np.ndarray | None = None
    roles: tuple | None = None
    round: np.ndarray | None = None
    sequence: np.ndarray | None = None

    @classmethod
    def of_table(cls, grades: pd.DataFrame, *, order: str = "sequence") -> "GradeCodes":
        """The codes of a long grades table (``query_id``, ``chunk_id``, ``grader``,
        ``grade``; ``role``, ``round`` and ``order`` when present); ids are read as str.

        Raises
        ------
        InputError
            A column of :data:`relgrade.schema.RATINGS` is missing.
        """
        require(grades, ["query_id", "chunk_id", "grader", "grade"], what="the grades table")
        names, grader = np.unique(grades["grader"].astype(str).to_numpy(dtype=object),
                                  return_inverse=True)
        query, queries = id_codes(grades["query_id"].astype(str))
        chunk, chunks = id_codes(grades["chunk_id"].astype(str))
        graded = grades["grade"].notna().to_numpy(dtype=bool)
        role = roles = None
        if "role" in grades.columns:
            role, distinct = id_codes(grades["role"].astype(str))
            roles = tuple(distinct.to_pylist())
        return cls(grader=grader.astype(np.int64), graders=tuple(str(n) for n in names),
                   query=query, queries=queries, chunk=chunk, chunks=chunks,
                   grade=grades["grade"].to_numpy(),
                   graded=None if graded.all() else graded, role=role, roles=roles,
                   round=grades["round"].to_numpy() if "round" in grades.columns else None,
                   sequence=grades[order].to_numpy() if order in grades.columns else None)

    def __len__(self) -> int:
        return len(self.grader)

    def rows(self, keep: np.ndarray) -> "GradeCodes":
        """The codes of the rows ``keep`` (bool mask or positions), in table order; the
        distinct values are shared, not copied."""
        def take(a):
            return None if a is None else a[keep]

        return replace(self, grader=self.grader[keep], query=self.query[keep],
                       chunk=self.chunk[keep], grade=self.grade[keep], graded=take(self.graded),
                       role=take(self.role), round=take(self.round),
                       sequence=take(self.sequence))

    def with_grades(self) -> "GradeCodes":
        """The rows that hold a grade (all of them when :attr:`graded` is None)."""
        return self if self.graded is None else replace(self.rows(self.graded), graded=None)

    def of_round(self, round: int) -> "GradeCodes":
        """The rows of grading round ``round`` (a round that is not a number matches none,
        as ``pandas.to_numeric(errors="coerce")`` reads it).

        Raises
        ------
        InputError
            The table has no ``round`` column.
        """
        if self.round is None:
            raise InputError("the grades table has no round column",
                             fix="Pass the long grades table (it has a `round` column)")
        values = self.round
        if values.dtype.kind not in "iuf":
            values = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy()
        mine = values == int(round)
        if mine.all():  # one round (the common case): the same rows, not a copy
            return self
        return self.rows(np.flatnonzero(mine))

    def grader_names(self) -> set[str]:
        """The graders that hold at least one row."""
        return {self.graders[i] for i in np.unique(self.grader)}


@dataclass(frozen=True)
class PositionCodes:
    """The display positions (the orders table) as compact arrays: ids as integer codes
    into their distinct values, as :class:`GradeCodes` holds a grades table.

    Attributes
    ----------
    query, chunk : ndarray of int, shape (n,)
        Each row's ids as positions in ``queries`` and ``chunks``.
    queries, chunks : pyarrow.Array of large_string
        Distinct ids, in any order.
    position : ndarray of int, shape (n,)
        0-based display position.
    role, roles : ndarray of int and tuple of str, or None
        Each row's role as its position in ``roles``; None without a ``role`` column.
    round : ndarray, shape (n,), or None
        The round of each row; None without a ``round`` column.
    """

    query: np.ndarray
    queries: pa.Array
    chunk: np.ndarray
    chunks: pa.Array
    position: np.ndarray
    role: np.ndarray | None = None
    roles: tuple | None = None
    round: np.ndarray | None = None

    @classmethod
    def of_table(cls, positions: pd.DataFrame) -> "PositionCodes":
        """The codes of a position table (``query_id``, ``chunk_id``, ``position``;
        ``role`` and ``round`` when present); ids are read as str.

        Raises
        ------
        InputError
            A column is missing.
        """
        require(positions, ["query_id", "chunk_id", "position"], what="the position table")
        query, queries = id_codes(positions["query_id"].astype(str))
        chunk, chunks = id_codes(positions["chunk_id"].astype(str))
        role = roles = None
        if "role" in positions.columns:
            role, distinct = id_codes(positions["role"].astype(str))
            roles = tuple(distinct.to_pylist())
        return cls(query=query, queries=queries, chunk=chunk, chunks=chunks,
                   position=positions["position"].to_numpy(), role=role, roles=roles,
                   round=positions["round"].to_numpy() if "round" in positions.columns
                   else None)


def _combined(parts: list[tuple]) -> np.ndarray:
    """One int64 per row from several codes (code, width): equal exactly when every code
    is; -1 where any code is -1. A code may be given as a function that makes it, so only
    one part is held at a time."""
    out = bad = None
    for codes, width in parts:
        codes = codes() if callable(codes) else codes
        if out is None:
            out = np.zeros(len(codes), dtype=np.int64)
            bad = np.zeros(len(out), dtype=bool)
        out *= max(width, 1)
        out += codes
        bad |= codes < 0
    out[bad] = -1
    return out


def _positions_of(codes: GradeCodes, positions: PositionCodes
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Each grade row's display row, its position, its display (query, role, round) and
    that display's size.

    Returns
    -------
    hit : ndarray of int64
        The rows of ``codes`` shown at a known position, in table order.
    position : ndarray of int64, shape (len(hit),)
    display : ndarray of int64, shape (len(hit),)
        A code per display (one query for one role and round, as the join reads them).
    size : ndarray of int64, shape (len(hit),)
        How many chunks that display shows.

    Raises
    ------
    InputError
        The position table lists one pair twice for the same role and round.
    """
    use_role = codes.role is not None and positions.role is not None
    use_round = codes.round is not None and positions.round is not None
    # the position table's own codes: a pair listed twice, and the displays' sizes
    mine = [(positions.query, len(positions.queries)), (positions.chunk, len(positions.chunks))]
    # the grades' codes in the position table's values, made one part at a time
    query_at = np.asarray(codes_in(pa.chunked_array([codes.queries]),
                                   pa.chunked_array([positions.queries])), dtype=np.int64)
    chunk_at = np.asarray(codes_in(pa.chunked_array([codes.chunks]),
                                   pa.chunked_array([positions.chunks])), dtype=np.int64)
    theirs = [(lambda: query_at[codes.query], len(positions.queries)),
              (lambda: chunk_at[codes.chunk], len(positions.chunks))]
    shown = [(positions.query, len(positions.queries))]
    if use_role:
        role_at = pd.Index(list(positions.roles)).get_indexer(list(codes.roles))
        mine.append((positions.role, len(positions.roles)))
        theirs.append((lambda: role_at[codes.role], len(positions.roles)))
        shown.append((positions.role, len(positions.roles)))
    if use_round:
        rounds, round_code = np.unique(positions.round.astype(np.int64), return_inverse=True)

        def round_at():
            graded_round = codes.round.astype(np.int64)
            at = np.searchsorted(rounds, graded_round)
            found = (at < len(rounds)) & (rounds[np.minimum(at, len(rounds) - 1)]
                                          == graded_round if len(rounds) else False)
            return np.where(found, at, -1)

        mine.append((round_code, len(rounds)))
        theirs.append((round_at, len(rounds)))
        shown.append((round_code, len(rounds)))
    key = _combined(mine)
    order = np.argsort(key, kind="stable")
    key = key[order]
    same = key[1:] == key[:-1]
    if same.any():
        twice = np.zeros(len(key), dtype=bool)
        twice[1:] |= same
        twice[:-1] |= same
        at = int(order[twice].min())
        raise InputError("the position table lists one pair twice",
                         item=f"pair ({positions.queries[positions.query[at]].as_py()}, "
                              f"{positions.chunks[positions.chunk[at]].as_py()})")
    del same
    wanted = _combined(theirs)
    at = np.minimum(np.searchsorted(key, wanted), max(len(key) - 1, 0))
    hit = np.flatnonzero((wanted >= 0) & (key[at] == wanted)) if len(key) else \
        np.zeros(0, dtype=np.int64)
    row = order[at[hit]]
    del key, order, wanted, at
    display_of_row = _combined(shown)
    if np.prod([float(max(w, 1)) for _, w in shown]) > max(4 * len(display_of_row), 1 << 20):
        # too many possible displays to count by code: number the ones there are
        display_of_row = np.unique(display_of_row, return_inverse=True)[1].reshape(-1)
    sizes = np.bincount(display_of_row)
    display = display_of_row[row]
    del display_of_row
    return (hit, positions.position[row].astype(np.int64), display.astype(np.int64),
            sizes[display].astype(np.int64))


@dataclass(frozen=True)
class Shown:
    """One grader's grades shown at a known display position, as the position-bias fit
    reads them, in table order: whole numbers and their displays' means, centred when the
    fit needs them (:meth:`centred`), a few bytes a grade until then.

    Attributes
    ----------
    position, grade : ndarray of int, shape (n,)
        Display position and grade (whole numbers).
    display : ndarray of int32, shape (n,)
        Each grade's display (one query for one role and round) as a position in the means.
    position_mean, grade_mean : ndarray of float64, shape (n_displays,)
        Each display's mean position and grade over these rows (pandas' group mean).
    display_query : ndarray of int, shape (n_displays,)
        Each display's query as a code that sorts as the ids do (a display is one
        query's): :attr:`query` per grade, the fit's clusters, made when the fit needs it.
    thirds : ndarray of int64, shape (2, 3)
        The sum (row 0) and the number (row 1) of the grades in each third of their display.
    """

    position: np.ndarray
    grade: np.ndarray
    display: np.ndarray
    position_mean: np.ndarray
    grade_mean: np.ndarray
    display_query: np.ndarray
    thirds: np.ndarray

    @property
    def query(self) -> np.ndarray:
        """The query code of each grade, shape (n,): its display's."""
        return self.display_query[self.display]

    @classmethod
    def of_rows(cls, position: np.ndarray, grade: np.ndarray, display: np.ndarray,
                size: np.ndarray, query: np.ndarray) -> "Shown":
        """The fit's inputs of a grader's shown grades: ``position`` (int), ``grade``
        (whole numbers, int), ``display`` (a code per display), ``size`` (that display's
        number of chunks) and ``query`` (cluster codes), shape (n,) each, in table order.
        Every display's rows must all be here (the centring means are the display's)."""
        third = np.clip(3 * position // np.maximum(size, 1), 0, 2)
        thirds = np.zeros((2, 3), dtype=np.int64)
        np.add.at(thirds[0], third, grade.astype(np.int64))
        np.add.at(thirds[1], third, 1)
        at, _ = pd.factorize(display)
        # pandas' group means (those s.groupby(d).transform("mean") broadcasts)
        means = [pd.Series(v.astype(float)).groupby(at).mean().to_numpy(float)
                 for v in (position, grade)]
        # one query a display: kept per display, not per grade
        display_query = np.zeros(len(means[0]), dtype=query.dtype)
        display_query[at] = query
        return cls(position=_narrow(position), grade=_narrow(grade),
                   display=at.astype(np.int32), position_mean=means[0], grade_mean=means[1],
                   display_query=display_query, thirds=thirds)

    @classmethod
    def joined(cls, parts: Sequence["Shown"]) -> "Shown":
        """Parts of one grader's rows (whole displays each), stacked in order."""
        offsets = np.cumsum([0] + [len(p.position_mean) for p in parts[:-1]])
        return cls(position=np.concatenate([p.position for p in parts]),
                   grade=np.concatenate([p.grade for p in parts]),
                   display=np.concatenate([p.display + np.int32(o)
                                           for p, o in zip(parts, offsets)]),
                   position_mean=np.concatenate([p.position_mean for p in parts]),
                   grade_mean=np.concatenate([p.grade_mean for p in parts]),
                   display_query=np.concatenate([p.display_query for p in parts]),
                   thirds=np.sum([p.thirds for p in parts], axis=0, dtype=np.int64))

    def centred(self) -> tuple[np.ndarray, np.ndarray]:
        """Position and grade centred on their display's mean, float64, shape (n,) each:
        ``value - mean``, the subtraction pandas' ``s - s.groupby(d).transform("mean")``
        makes."""
        return (self.position.astype(float) - self.position_mean[self.display],
                self.grade.astype(float) - self.grade_mean[self.display])


def _narrow(values: np.ndarray) -> np.ndarray:
    """Whole numbers in the narrowest of int8, int16, int32 that holds them (same values)."""
    if values.dtype.kind in "iu" and len(values):
        low, high = int(values.min()), int(values.max())
        for dtype in (np.int8, np.int16, np.int32):
            info = np.iinfo(dtype)
            if info.min <= low and high <= info.max:
                return values.astype(dtype)
    return values


@dataclass(frozen=True)
class GraderRows:
    """One grader's graded rows of a round, as :func:`diagnose_rows` reads them.

    Attributes
    ----------
    name : str
    role : str or None
        The role of its first graded row (table order); None without a ``role`` column.
    count : int
        How many rows hold a grade.
    shown : Shown or None
        Its grades shown at a known display position; None when none is (or no display
        positions were given).
    sequence : ndarray of int, shape (count,), or None
        The order-of-grading column of its graded rows, in table order; None when absent.
    grade : ndarray, shape (count,), or None
        Their grades (int or float dtype); None with ``sequence``.
    query : ndarray of int, shape (count,), or None
        Their queries as codes that sort as the ids do; None with ``sequence``.
    """

    name: str
    role: str | None
    count: int
    shown: Shown | None = None
    sequence: np.ndarray | None = None
    grade: np.ndarray | None = None
    query: np.ndarray | None = None


@dataclass(frozen=True)
class RoundRows:
    """A round's grades as the diagnostics and the audit's notes read them, grader by
    grader: what a caller that reads the grades table a block of queries at a time builds
    (the agreement stage), in place of :class:`GradeCodes`.

    Attributes
    ----------
    in_round : frozenset of str
        The graders holding a row of the round (with or without a grade).
    graders : tuple of GraderRows
        Every grader with a grade in the round, in name order.
    positions : bool
        Whether display positions were joined (position bias is computed).
    sequence : bool
        Whether the table has the order-of-grading column (drift is computed).
    """

    in_round: frozenset
    graders: tuple
    positions: bool
    sequence: bool


def _round_rows(codes: GradeCodes, positions: PositionCodes | None) -> RoundRows:
    """:class:`RoundRows` of a round's grades held as codes (every graded row)."""
    in_round = frozenset(codes.grader_names())
    codes = codes.with_grades()
    grade = codes.grade.astype(float)
    shown: dict[int, Shown] = {}
    if positions is not None:
        hit, position, display, size = _positions_of(codes, positions)
        # the join's grades are whole numbers, as the display table's merge typed them
        whole = grade[hit].astype(np.int64)
        who = codes.grader[hit]
        for i in np.unique(who):
            mine = np.flatnonzero(who == i)
            shown[int(i)] = Shown.of_rows(position[mine], whole[mine], display[mine],
                                          size[mine], codes.query[hit[mine]])
        del hit, position, display, size, whole, who
    rows = []
    for i in np.unique(codes.grader):  # graders in name order
        mine = np.flatnonzero(codes.grader == i)
        has = codes.sequence is not None
        rows.append(GraderRows(
            name=codes.graders[i],
            role=str(codes.roles[codes.role[mine[0]]]) if codes.role is not None else None,
            count=len(mine), shown=shown.get(int(i)),
            sequence=codes.sequence[mine] if has else None,
            grade=codes.grade[mine] if has else None,
            query=codes.query[mine] if has else None))
    return RoundRows(in_round=in_round, graders=tuple(rows), positions=positions is not None,
                     sequence=codes.sequence is not None)


def diagnose(codes: GradeCodes, positions: PositionCodes | None = None, *, bins: int = 5,
             level: float = 0.95, graders: Sequence[str] | None = None,
             order: str = "sequence") -> dict:
    """:func:`grading_diagnostics` of a grades table held as codes.

    Parameters
    ----------
    codes : GradeCodes
        The grades (any number of graders); rows without a grade are left out.
    positions : PositionCodes, optional
        The display positions; without them position bias is not computed.
    bins, level, graders
        As :func:`grading_diagnostics`.
    order : str, default "sequence"
        The name of the order-of-grading column, for the notes.

    Returns
    -------
    dict
        As :func:`grading_diagnostics`: the same values, computed in the same order.

    Raises
    ------
    InputError
        ``bins`` is not a positive integer (when drift is computed), ``level`` outside
        (0, 1), or the position table lists one pair twice.
    """
    return diagnose_rows(_round_rows(codes, positions), bins=bins, level=level,
                         graders=graders, order=order)


def _has_repeats(ordered: np.ndarray) -> bool:
    """Whether sorted values (NaNs last, as numpy sorts them) hold a value twice, NaNs
    counted as one value: ``len(np.unique(values)) < len(values)``, without a hash set of
    every value (numpy's unique of integers allocates one per value, and the freed heap
    stays with the process)."""
    if ordered.size < 2:
        return False
    if bool((ordered[1:] == ordered[:-1]).any()):
        return True
    return ordered.dtype.kind in "fc" and bool(np.isnan(ordered[-2:]).all())


def _stretch_sums(grade: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Per stretch of the grading order, the sum of the whole grades (``trunc``) and
    their number: the grade at place j of n is in stretch ``floor(j * bins / n)`` (float
    arithmetic). ``grade``: float, shape (n,), in grading order; returns float64 sums and
    int64 counts, shape (number of stretches,).

    Made a block of places at a time: each place's stretch is its own product, and the
    sums are of whole numbers, exact in any order below 2**53 (pandas' group mean's bits).
    """
    n = grade.size
    sums = np.zeros(0)
    counts = np.zeros(0, dtype=np.int64)
    for start in range(0, n, _DESIGN_ROWS):
        place = np.arange(start, min(start + _DESIGN_ROWS, n), dtype=float)
        stretch = (place * bins // n).astype(np.int64)
        part = np.bincount(stretch, weights=np.trunc(grade[start:start + _DESIGN_ROWS]))
        many = np.bincount(stretch)
        if len(part) > len(sums):
            sums = np.concatenate([sums, np.zeros(len(part) - len(sums))])
            counts = np.concatenate([counts, np.zeros(len(many) - len(counts), np.int64)])
        sums[:len(part)] += part
        counts[:len(many)] += many
    return sums, counts


def diagnose_rows(rows: RoundRows, *, bins: int = 5, level: float = 0.95,
                  graders: Sequence[str] | None = None, order: str = "sequence") -> dict:
    """:func:`grading_diagnostics` of a round's grades held grader by grader.

    Parameters
    ----------
    rows : RoundRows
    bins, level, graders, order
        As :func:`diagnose`.

    Returns
    -------
    dict
        As :func:`grading_diagnostics`.

    Raises
    ------
    InputError
        ``bins`` is not a positive integer (when drift is computed) or ``level`` outside
        (0, 1).

    Notes
    -----
    Each slope is fitted on the grader's whole arrays in table order (the least-squares
    sums are BLAS products, whose last bits depend on the order and blocking of the sum).
    The means by third are sums of whole numbers divided by counts: exact in any order
    below 2**53, so parts may be summed separately and give pandas' group mean's bits.
    """
    out: dict = {}
    notes: list[str] = []
    flags: list[str] = []
    mine = {r.name: r for r in rows.graders}
    for grader in sorted(set(mine) | {str(x) for x in (graders or [])}):
        r = mine.get(grader)
        out[grader] = {}
        if r is not None and r.role is not None:
            out[grader]["role"] = r.role
        out[grader]["grades"] = r.count if r is not None else 0
        if r is None:
            notes.append(f"{grader} has no grades: nothing to diagnose")

    def record(grader, what, fit):
        out[grader][f"{what}_slope"] = fit["slope"]
        out[grader][f"{what}_interval"] = ([fit["low"], fit["high"]]
                                           if fit["low"] is not None else None)
        out[grader][f"{what}_flag"] = fit["excludes_zero"]
        if fit["excludes_zero"]:
            word = "position bias" if what == "position" else "leniency drift"
            flags.append(f"{grader}: {word}: slope {fit['slope']:+.3f} per "
                         f"{'display position' if what == 'position' else 'whole sequence'}"
                         f", interval [{fit['low']:+.3f}, {fit['high']:+.3f}] excludes 0")

    if rows.positions:
        for r in rows.graders:  # graders in name order
            if r.shown is None:
                continue
            x, y = r.shown.centred()
            query = r.shown.query
            fit = slope_interval(x, y, query, level=level, intercept=False)
            del x, y, query
            record(r.name, "position", fit)
            sums, counts = r.shown.thirds
            out[r.name]["mean_by_third"] = {
                name: float(sums[t]) / int(counts[t])
                for t, name in enumerate(("first", "middle", "last")) if counts[t]}
    else:
        notes.append("position bias not computed: no display positions were given")
    if rows.sequence:
        if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or bins < 1:
            raise InputError("bins must be a positive integer", found=repr(bins))
        for r in rows.graders:  # graders in name order
            name, sequence, n = r.name, r.sequence, r.count
            ranked = np.argsort(sequence, kind="stable")  # ties in table order
            if _has_repeats(sequence[ranked]):
                notes.append(f"{name}: its `{order}` values repeat (grades of two files "
                             "merged in one round): ties are read in table order")
            # the grades in grading order: the fit's y, and the stretches' whole grades
            grade = r.grade[ranked].astype(float)
            query = r.query[ranked]
            del ranked
            # the grade at place j of n is in stretch floor(j * bins / n) + 1; each mean is a
            # sum of whole numbers over a count: exact in any order (pandas' group mean)
            sums, counts = _stretch_sums(grade, bins)
            # the place in the sequence from 0 to 1, made a block at a time in the fit
            fit = slope_interval(Span(n), grade, query, level=level)
            del grade, query
            record(name, "drift", fit)
            out[name]["mean_by_stretch"] = {str(b + 1): float(sums[b]) / int(counts[b])
                                           for b in range(len(counts)) if counts[b]}
    else:
        notes.append(f"leniency drift not computed: the grades table has no `{order}` column "
                     "recording the order of grading")
    return {"graders": out, "level": float(level),
            "interval": "least-squares slope, cluster-robust by query (CR1), t with "
                        "queries - 1 degrees of freedom",
            "flags": flags, "notes": notes}
