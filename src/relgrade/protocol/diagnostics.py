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
        Regressor (display position, or place in the grading sequence) and grade.
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
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    g = np.asarray(groups)
    if not (x.shape == y.shape == g.shape):
        raise InputError("slope inputs must have one value per grade",
                         found=f"{x.size}, {y.size} and {g.size} values")
    none = {"slope": None, "low": None, "high": None, "excludes_zero": None}
    X = np.column_stack([np.ones_like(x), x]) if intercept else x[:, None]
    k = X.shape[1]
    if x.size <= k:
        return none
    xtx = X.T @ X
    if abs(np.linalg.det(xtx)) < 1e-12 * max(1.0, float(np.abs(xtx).max())) ** k:
        return none
    bread = np.linalg.inv(xtx)
    beta = bread @ X.T @ y
    slope = float(beta[-1])
    _, codes = np.unique(g, return_inverse=True)
    n_groups = int(codes.max()) + 1
    if n_groups < 2:
        return {**none, "slope": slope}
    score = np.zeros((n_groups, k))
    np.add.at(score, codes, X * (y - X @ beta)[:, None])
    n = x.size
    c = n_groups / (n_groups - 1) * (n - 1) / (n - k)
    var = c * (bread @ (score.T @ score) @ bread)[-1, -1]
    half = float(t_dist.ppf((1 + level) / 2, n_groups - 1) * np.sqrt(max(var, 0.0)))
    low, high = slope - half, slope + half
    return {"slope": slope, "low": low, "high": high,
            "excludes_zero": bool(low > 0 or high < 0)}


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
    out: dict = {}
    notes: list[str] = []
    flags: list[str] = []
    for grader in sorted(set(g["grader"].unique()) | {str(x) for x in (graders or [])}):
        mine = g[g["grader"] == grader]
        out[grader] = {}
        if "role" in g.columns and len(mine):
            out[grader]["role"] = str(mine["role"].iat[0])
        out[grader]["grades"] = int(len(mine))
        if not len(mine):
            notes.append(f"{grader} has no grades: nothing to diagnose")
    g = g.assign(grade=g["grade"].astype(float))

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

    if positions is not None:
        joined = _with_positions(g, positions)
        shown = [c for c in ("query_id", "role", "round") if c in joined.columns
                 and (c == "query_id" or c in positions.columns)]
        sizes = positions.assign(query_id=positions["query_id"].astype(str))
        if "role" in shown:
            sizes = sizes.assign(role=sizes["role"].astype(str))
        if "round" in shown:
            sizes = sizes.assign(round=sizes["round"].astype(np.int64))
        sizes = sizes.groupby(shown).size().rename("_n").reset_index()
        joined = joined.merge(sizes, on=shown, how="left")
        third = (3 * joined["position"] // joined["_n"]).clip(0, 2)
        joined["_third"] = third.map({0: "first", 1: "middle", 2: "last"})
        for grader, part in joined.groupby("grader", sort=True):
            keys = [part[c] for c in shown]
            fit = slope_interval(_within(part["position"].astype(float), keys),
                                 _within(part["grade"].astype(float), keys),
                                 _clusters(part["query_id"]), level=level, intercept=False)
            record(grader, "position", fit)
            means = part.groupby("_third")["grade"].mean()
            out[grader]["mean_by_third"] = {t: float(means[t]) for t in
                                            ("first", "middle", "last") if t in means.index}
    else:
        notes.append("position bias not computed: no display positions were given")
    if order in g.columns:
        table = leniency_drift(g, order=order, bins=bins)
        for grader, part in g.groupby("grader", sort=True):
            if part[order].duplicated().any():
                notes.append(f"{grader}: its `{order}` values repeat (grades of two files "
                             "merged in one round): ties are read in table order")
            part = part.sort_values(order, kind="stable")
            rank = np.arange(len(part), dtype=float)
            span = rank / (len(rank) - 1) if len(rank) > 1 else rank
            fit = slope_interval(span, part["grade"].to_numpy(float),
                                 _clusters(part["query_id"]), level=level)
            record(grader, "drift", fit)
            rows = table[table["grader"] == grader]
            out[grader]["mean_by_stretch"] = {str(int(b)): float(m) for b, m in
                                              zip(rows["bin"], rows["mean_grade"])}
    else:
        notes.append(f"leniency drift not computed: the grades table has no `{order}` column "
                     "recording the order of grading")
    return {"graders": out, "level": float(level),
            "interval": "least-squares slope, cluster-robust by query (CR1), t with "
                        "queries - 1 degrees of freedom",
            "flags": flags, "notes": notes}
