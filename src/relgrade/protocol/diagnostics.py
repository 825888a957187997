"""Grading diagnostics: position bias and leniency drift, per grader.

Agreement (:mod:`relgrade.protocol.agreement`) says whether two graders agree; these say
*how* one grader's grades move with things that should not move them:

* :func:`position_bias`: the mean grade at each display position. The display order is a
  seeded shuffle, so without bias the expected mean grade is the same at every position; a
  fall across positions is the footprint of position bias or fatigue (lost in the middle).
* :func:`leniency_drift`: the mean grade over consecutive stretches of a grader's sequence
  of grades; a climb or a sink is a grader growing generous or harsh over a long pool.
* :func:`grading_diagnostics`: both summarised per grader in a small JSON-ready dict, as
  the agreement stage writes it.

Every function takes the long grades table (:data:`relgrade.schema.GRADES`) and, for
position bias, the display positions (:data:`relgrade.schema.ORDERS`); none modifies its
inputs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.schema import PAIR, normalised_grades, require


def _slope(x: np.ndarray, y: np.ndarray) -> float | None:
    """Least-squares slope of y on x, or None when x does not vary."""
    if x.size < 2:
        return None
    dx = x - x.mean()
    var = float((dx * dx).sum())
    if var == 0.0:
        return None
    return float((dx * (y - y.mean())).sum() / var)


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
    p = positions.copy()
    p["query_id"] = p["query_id"].astype(str)
    p["chunk_id"] = p["chunk_id"].astype(str)
    keys = list(PAIR)
    for col in ("role", "round"):
        if col in p.columns and col in g.columns:
            keys.append(col)
            if col == "round":
                p[col] = p[col].astype(np.int64)
                g[col] = g[col].astype(np.int64)
            else:
                p[col] = p[col].astype(str)
                g[col] = g[col].astype(str)
    p = p[keys + ["position"]]
    dup = p.duplicated(keys, keep=False)
    if dup.any():
        first = p[dup].iloc[0]
        raise InputError("the position table lists one pair twice",
                         item=f"pair ({first['query_id']}, {first['chunk_id']})")
    joined = g.merge(p, on=keys, how="inner")
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


def grading_diagnostics(grades: pd.DataFrame, positions: pd.DataFrame | None = None, *,
                        order: str = "sequence", bins: int = 5) -> dict:
    """Position bias and leniency drift per grader, as a small JSON-ready dict.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table.
    positions : pandas.DataFrame, optional
        The display positions (see :func:`position_bias`); without it position bias is
        not computed.
    order : str, default "sequence"
        The grades table's order-of-grading column (see :func:`leniency_drift`); when it is
        absent drift is not computed.
    bins : int, default 5
        Stretches of the grading sequence for the drift table.

    Returns
    -------
    dict
        grader → ``{"grades": n, "position_slope": float or None, "mean_by_third":
        {"first": mean, "middle": mean, "last": mean}, "drift_slope": float or None,
        "mean_by_stretch": {"1": mean, ...}}`` (only the parts whose input is there), plus
        ``"notes"`` (list of str) saying what could not be computed. The full table by
        display position is :func:`position_bias`; this summary stays small enough for
        ``dvc metrics show``.

    Notes
    -----
    ``position_slope`` is the least-squares change in grade per display position.
    ``mean_by_third`` cuts each query's display order (per role and round) into thirds: a
    chunk at 0-based position ``p`` of ``n`` is in third ``floor(3 p / n)``; a lower mean in
    the middle third is the lost-in-the-middle footprint. ``drift_slope`` is the
    least-squares change in grade from the first grade of the sequence (0) to the last (1),
    i.e. how much more generous the grader was at the end.
    """
    g = normalised_grades(grades)
    g = g[g["grade"].notna()]
    out: dict = {}
    notes: list[str] = []
    for grader in sorted(g["grader"].unique()):
        out[grader] = {"grades": int((g["grader"] == grader).sum())}
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
            out[grader]["position_slope"] = _slope(part["position"].to_numpy(float),
                                                   part["grade"].to_numpy(float))
            means = part.groupby("_third")["grade"].mean()
            out[grader]["mean_by_third"] = {t: float(means[t]) for t in
                                            ("first", "middle", "last") if t in means.index}
    else:
        notes.append("position bias not computed: no display positions were given")
    if order in g.columns:
        table = leniency_drift(g, order=order, bins=bins)
        for grader, part in g.groupby("grader", sort=True):
            rank = part[order].rank(method="first").to_numpy(float) - 1
            span = rank / (len(rank) - 1) if len(rank) > 1 else rank
            out[grader]["drift_slope"] = _slope(span, part["grade"].to_numpy(float))
            rows = table[table["grader"] == grader]
            out[grader]["mean_by_stretch"] = {str(int(b)): float(m) for b, m in
                                              zip(rows["bin"], rows["mean_grade"])}
    else:
        notes.append(f"leniency drift not computed: the grades table has no `{order}` column "
                     "recording the order of grading")
    out["notes"] = notes
    return out
