"""A targeted re-check of a model judge: people grade a sample stratified by the judge's grade.

When a model grader's judge identity changes (a new model, prompt template, rubric or
declared setting), or its calibration is missing or stale, its agreement with people must be
measured again. Grading a uniform sample of the pool wastes people's time on the grade the
judge gives most (usually 0); the **re-check** instead samples the pairs the judge graded
*stratified by the judge's own grade* and weights each stratum back by its share of the
judge's grades, which are known for every pair (Merlo et al., CIKM 2025: stratifying the
validation of an LLM's labels by the LLM's label).

Three pieces, tables in and dicts out:

* :func:`plan_recheck` - the size of the sample for a stated half-width of the weighted
  kappa's interval, and its split over the strata (Neyman allocation), from a planning
  table of what people would answer in each stratum;
* :func:`draw_recheck` - the seeded stratified draw from the judge's graded pairs;
* :func:`stratified_calibration` - the stratified estimate of the population's
  (judge, people) table, the weighted and binary kappa and the leniency computed from it,
  with delta-method intervals.

The estimator
-------------
Stratum ``s`` (the judge's grade) holds the share ``w_s`` of the frame's pairs; ``n_s`` of
them are drawn at random without replacement and graded by people. Within the stratum the
sample's table of (judge grade ``a``, people's grade ``b``) proportions ``c_s(a, b)``
estimates the stratum's, and the population table is estimated by

    p(a, b) = sum_s w_s c_s(a, b)

(the stratified estimator of a proportion, Cochran 1977, sec. 5.3 and 5A). Weighted kappa
(quadratic agreement weights ``1 - (a - b)^2 / (K - 1)^2`` over a scale of ``K`` grades, Cohen
1968), binary kappa (grades ``>= relevant_min`` as relevant) and the leniency
``sum p(a, b) (a - b)`` are functions of ``p``; their variances are the delta method's

    Var = sum_s w_s^2 / n_s * g' S_s g,   S_s = (diag(c_s) - c_s c_s') * n_s / (n_s - 1)

with ``g`` the gradient of the statistic in ``p`` (Fleiss, Cohen & Everitt 1969 for kappa's
large-sample variance; Cochran 1977, eq. 5.7 for the stratified sum). The finite population
correction is left out, which can only widen the interval. The intervals are normal,
``value -/+ z se``, kappas clipped to [-1, 1]; ``benchmarks/sim_recheck.py`` measures their
coverage.

The sample-size rule
--------------------
Under a planning table ``c_s`` (the judge's newest recorded confusion with people, each
row smoothed by adding 0.5 to every cell; without one, people agree with the judge's grade
with probability ``planning_agreement`` and spread the rest evenly), let
``v_s = g' S_s g`` per pair. Neyman allocation ``n_s = n w_s sqrt(v_s) / sum_t w_t sqrt(v_t)``
minimises the variance for a total ``n`` (Neyman 1934; Cochran 1977, eq. 5.26) and gives
``Var = (sum_s w_s sqrt(v_s))^2 / n``, so the interval's half-width ``z sqrt(Var)`` reaches
``h`` at

    n = ceil(z^2 (sum_s w_s sqrt(v_s))^2 / h^2),

then held within ``[min_pairs, max_pairs]`` and within the frame's size; every stratum
with pairs gets at least 2 (so its variance can be estimated) and at most all of its pairs.

References
----------
L. Merlo et al., "Validating LLM labels with few human judgments", CIKM 2025.
W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley, 1977.
J. Neyman, "On the two different aspects of the representative method", JRSS 97(4), 1934.
J. Cohen, "Weighted kappa", Psychological Bulletin 70(4), 1968.
J. L. Fleiss, J. Cohen and B. S. Everitt, "Large sample standard errors of kappa and
weighted kappa", Psychological Bulletin 72(5), 1969.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: Columns of the frame a re-check is drawn from: the judge's grade of each pair.
FRAME = ["query_id", "chunk_id", "grade"]

#: Columns of a graded re-check: the stratum it was drawn from, the judge's and people's grade.
GRADED = ["query_id", "chunk_id", "stratum", "model", "human"]


def _weights(k: int) -> np.ndarray:
    """Quadratic agreement weights over ``k`` ordered grades, shape (k, k)."""
    if k < 2:
        return np.ones((1, 1))
    i = np.arange(k, dtype=np.float64)
    return 1.0 - (i[:, None] - i[None, :]) ** 2 / (k - 1) ** 2


def kappa_and_gradient(p: np.ndarray, weights: np.ndarray) -> tuple[float | None, np.ndarray]:
    """Weighted kappa of a joint table and its gradient in the table's cells.

    Parameters
    ----------
    p : ndarray of shape (k, k), float
        Joint proportions (rows the judge's grade, columns people's), summing to 1.
    weights : ndarray of shape (k, k), float
        Agreement weights (1 on the diagonal).

    Returns
    -------
    (float or None, ndarray of shape (k, k))
        ``kappa = (po - pe) / (1 - pe)`` with ``po = sum w p`` and
        ``pe = sum w p_row p_col``, and ``d kappa / d p(a, b)``; kappa None (gradient
        zeros) when ``pe`` is 1 (one grade only: kappa is undefined).

    Examples
    --------
    >>> k, g = kappa_and_gradient(np.array([[0.4, 0.1], [0.1, 0.4]]), np.eye(2))
    >>> round(k, 6)
    0.6
    """
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    po = float((weights * p).sum())
    pe = float(rows @ weights @ cols)
    if 1.0 - pe <= 1e-12:
        return None, np.zeros_like(p)
    dpe = (weights @ cols)[:, None] + (weights.T @ rows)[None, :]
    grad = (weights * (1.0 - pe) - dpe * (1.0 - po)) / (1.0 - pe) ** 2
    return (po - pe) / (1.0 - pe), grad


def _binary(p: np.ndarray, scale: Sequence[int], relevant_min: int):
    """The 2x2 table of ``p`` with grades >= ``relevant_min`` as relevant, and the map of
    each cell of ``p`` to its binary cell."""
    rel = np.asarray(scale) >= relevant_min
    idx = rel.astype(int)
    b = np.zeros((2, 2))
    np.add.at(b, (idx[:, None].repeat(len(scale), 1), idx[None, :].repeat(len(scale), 0)), p)
    return b, idx


def statistics(p: np.ndarray, *, scale: Sequence[int], relevant_min: int) -> dict:
    """Weighted kappa, binary kappa and leniency of a joint table, with gradients.

    Parameters
    ----------
    p : ndarray of shape (k, k), float
        Joint proportions over ``scale`` (rows the judge's grade, columns people's).
    scale : sequence of int
    relevant_min : int

    Returns
    -------
    dict
        ``name -> (value or None, gradient ndarray (k, k))`` for ``weighted_kappa``,
        ``binary_kappa`` and ``leniency`` (mean judge grade minus people's, in grades).
    """
    k = len(scale)
    s = np.asarray(scale, dtype=np.float64)
    wk = kappa_and_gradient(p, _weights(k))
    b, idx = _binary(p, scale, relevant_min)
    bk, bg = kappa_and_gradient(b, np.eye(2))
    diff = s[:, None] - s[None, :]
    return {"weighted_kappa": wk, "binary_kappa": (bk, bg[idx[:, None], idx[None, :]]),
            "leniency": (float((p * diff).sum()), diff)}


def _cell_variance(c: np.ndarray, g: np.ndarray) -> float:
    """``g' (diag(c) - c c') g`` for one stratum's cell proportions ``c``."""
    cf, gf = c.ravel(), g.ravel()
    return max(float(cf @ gf ** 2 - (cf @ gf) ** 2), 0.0)


def shares(frame: pd.DataFrame, scale: Sequence[int]) -> np.ndarray:
    """Each grade's share of the judge's grades in ``frame`` (column ``grade``), shape
    (len(scale),), summing to 1.

    Raises
    ------
    InputError
        The frame is empty or holds a grade outside ``scale``.
    """
    if frame.empty:
        raise InputError("a re-check is drawn from the judge's graded pairs", found="0 pairs")
    g = frame["grade"].astype("int64").to_numpy()
    bad = sorted(set(g.tolist()) - set(scale))
    if bad:
        raise InputError("a judge's grade is outside the scale", found=str(bad[0]))
    counts = np.array([(g == v).sum() for v in scale], dtype=np.float64)
    return counts / counts.sum()


def planning_table(scale: Sequence[int], *, confusion: Sequence[Sequence[int]] | None = None,
                   agreement: float = 0.7) -> np.ndarray:
    """What people are planned to answer in each stratum: rows the judge's grade, each row
    the planned distribution of people's grade, shape (k, k).

    Parameters
    ----------
    scale : sequence of int
    confusion : k x k counts, optional
        A recorded confusion of the judge with people (rows the judge's grade); each row
        gets 0.5 added to every cell, then is normalised.
    agreement : float, default 0.7
        Without ``confusion``: people give the judge's grade with this probability and the
        other grades evenly the rest.

    Examples
    --------
    >>> planning_table([0, 1], agreement=0.75).tolist()
    [[0.75, 0.25], [0.25, 0.75]]
    """
    k = len(scale)
    if confusion is not None:
        c = np.asarray(confusion, dtype=np.float64)
        if c.shape != (k, k):
            raise InputError("a planning confusion must be k x k over the scale",
                             found=str(c.shape))
        c = c + 0.5
        return c / c.sum(axis=1, keepdims=True)
    if not 0 < agreement < 1:
        raise InputError("the planning agreement must lie in (0, 1)", found=str(agreement))
    if k == 1:
        return np.ones((1, 1))
    out = np.full((k, k), (1.0 - agreement) / (k - 1))
    np.fill_diagonal(out, agreement)
    return out


@dataclass(frozen=True)
class RecheckPlan:
    """How many pairs people re-check, per stratum.

    Attributes
    ----------
    size : int
        Pairs in the re-check (the sum of ``per_stratum``).
    per_stratum : dict of int to int
        Judge's grade -> pairs drawn from it (strata without pairs left out).
    shares : dict of int to float
        Judge's grade -> its share of the frame's pairs.
    frame : int
        Pairs in the frame (the judge's graded pairs).
    rule_size : int
        ``ceil(z^2 (sum_s w_s sqrt(v_s))^2 / h^2)`` before the floor and ceiling.
    planned_halfwidth : float
        The weighted kappa's interval half-width the plan expects at ``size`` pairs.
    """

    size: int
    per_stratum: dict
    shares: dict
    frame: int
    rule_size: int
    planned_halfwidth: float

    def as_dict(self) -> dict:
        """JSON-ready (stratum keys as strings)."""
        return {"size": self.size, "frame": self.frame, "rule_size": self.rule_size,
                "planned_halfwidth": self.planned_halfwidth,
                "per_stratum": {str(k): v for k, v in self.per_stratum.items()},
                "shares": {str(k): v for k, v in self.shares.items()}}


def plan_recheck(frame_counts: Mapping[int, int], *, scale: Sequence[int], relevant_min: int,
                 planning: np.ndarray, halfwidth: float, level: float, min_pairs: int,
                 max_pairs: int) -> RecheckPlan:
    """The re-check's size for a weighted-kappa half-width, split over the strata.

    Parameters
    ----------
    frame_counts : mapping of int to int
        Judge's grade -> how many of the frame's pairs it gave.
    scale : sequence of int
    relevant_min : int
    planning : ndarray of shape (k, k)
        :func:`planning_table`.
    halfwidth : float
        Wanted half-width of the weighted kappa's interval (params
        ``judges.recheck.kappa_halfwidth``), > 0.
    level : float
        The interval's confidence level, in (0, 1).
    min_pairs, max_pairs : int
        Floor and ceiling of the size (params), 1 <= min_pairs <= max_pairs.

    Returns
    -------
    RecheckPlan

    Raises
    ------
    InputError
        A size param is not positive, the floor exceeds the ceiling, or the frame is empty.

    Examples
    --------
    >>> plan = plan_recheck({0: 800, 1: 150, 2: 50}, scale=[0, 1, 2], relevant_min=1,
    ...                     planning=planning_table([0, 1, 2]), halfwidth=0.1, level=0.95,
    ...                     min_pairs=30, max_pairs=400)
    >>> plan.size == sum(plan.per_stratum.values()), plan.size <= 400
    (True, True)
    """
    for name, v in (("kappa_halfwidth", halfwidth), ("min_pairs", min_pairs),
                    ("max_pairs", max_pairs)):
        if not v > 0:
            raise InputError(f"judges.recheck.{name} must be > 0", found=str(v))
    if min_pairs > max_pairs:
        raise InputError("judges.recheck.min_pairs must not exceed max_pairs",
                         found=f"{min_pairs} > {max_pairs}")
    counts = np.array([int(frame_counts.get(v, 0)) for v in scale], dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        raise InputError("a re-check is drawn from the judge's graded pairs", found="0 pairs")
    w = counts / total
    # the planned population table: stratum s is the judge's grade s
    p = w[:, None] * planning
    _, grad = statistics(p, scale=scale, relevant_min=relevant_min)["weighted_kappa"]
    sd = np.zeros(len(scale))
    for s in range(len(scale)):
        c = np.zeros_like(p)
        c[s] = planning[s]
        sd[s] = math.sqrt(_cell_variance(c, grad))
    from scipy import stats as sps
    z = float(sps.norm.ppf(0.5 + level / 2))
    spread = float((w * sd).sum())
    rule = max(1, math.ceil((z * spread / halfwidth) ** 2))
    size = min(max(rule, int(min_pairs)), int(max_pairs), total)
    alloc = w * sd if spread > 0 else w.copy()
    alloc = alloc / alloc.sum()
    per = _round_allocation(size, alloc, counts)
    achieved = sum(int(v) for v in per)
    var = sum((w[s] * sd[s]) ** 2 / per[s] for s in range(len(scale)) if per[s] > 0)
    return RecheckPlan(size=achieved,
                       per_stratum={int(scale[s]): int(per[s]) for s in range(len(scale))
                                    if counts[s] > 0},
                       shares={int(scale[s]): float(w[s]) for s in range(len(scale))
                               if counts[s] > 0},
                       frame=total, rule_size=rule, planned_halfwidth=z * math.sqrt(var))


def _round_allocation(size: int, alloc: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Integer pairs per stratum summing to ``size`` (when the frame allows): at least
    min(2, N_s) in each stratum with pairs, at most N_s, the rest by largest remainder of
    ``size * alloc``."""
    floor = np.minimum(counts, 2)
    per = floor.copy()
    room = counts - per
    left = size - int(per.sum())
    while left > 0 and room.sum() > 0:
        target = alloc * size - per
        target[room <= 0] = -np.inf
        s = int(np.argmax(target))
        per[s] += 1
        room[s] -= 1
        left -= 1
    return per


def draw_recheck(frame: pd.DataFrame, plan: RecheckPlan, *,
                 rng: np.random.Generator) -> pd.DataFrame:
    """The re-check's pairs: ``plan.per_stratum[s]`` pairs drawn at random without
    replacement from the frame's pairs the judge graded ``s``.

    Parameters
    ----------
    frame : pandas.DataFrame
        Columns :data:`FRAME` (``query_id``, ``chunk_id`` str; ``grade`` int): one row per
        pair. Its row order does not matter (it is sorted by pair first).
    plan : RecheckPlan
    rng : numpy.random.Generator
        From params ``seed`` (stream ``judge-recheck``).

    Returns
    -------
    pandas.DataFrame
        ``query_id``, ``chunk_id`` (str), ``stratum`` (int64), sorted by pair.

    Raises
    ------
    InputError
        A pair appears twice in the frame, or a stratum has fewer pairs than the plan.
    """
    f = frame[FRAME].astype({"query_id": str, "chunk_id": str, "grade": "int64"})
    if f.duplicated(["query_id", "chunk_id"]).any():
        raise InputError("a re-check frame takes one grade per pair")
    f = f.sort_values(["query_id", "chunk_id"], ignore_index=True)
    parts = []
    for grade, n in sorted(plan.per_stratum.items()):
        rows = f.index[f["grade"].to_numpy() == grade].to_numpy()
        if n > rows.size:
            raise InputError("a re-check stratum holds fewer pairs than planned",
                             item=f"grade {grade}", found=f"{rows.size} < {n}")
        take = np.sort(rng.choice(rows, size=n, replace=False)) if n else rows[:0]
        parts.append(f.loc[take, ["query_id", "chunk_id"]].assign(stratum=grade))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["query_id", "chunk_id", "stratum"])
    return out.astype({"stratum": "int64"}).sort_values(["query_id", "chunk_id"],
                                                         ignore_index=True)


def stratified_calibration(graded: pd.DataFrame, strata_shares: Mapping[int, float], *,
                           scale: Sequence[int], relevant_min: int, level: float) -> dict:
    """The judge's agreement with people estimated from a graded re-check.

    Parameters
    ----------
    graded : pandas.DataFrame
        Columns :data:`GRADED`: per re-checked pair its ``stratum`` (the judge's grade the
        draw stratified by), ``model`` (the judge's grade now) and ``human`` (people's).
    strata_shares : mapping of int to float
        Stratum -> its share of the frame's pairs (:attr:`RecheckPlan.shares`); sums to 1.
    scale : sequence of int
    relevant_min : int
    level : float

    Returns
    -------
    dict
        ``weighted_kappa``, ``binary_kappa`` (``value``, ``low``, ``high``, ``se``,
        ``method`` ``"stratified-delta"``, ``resample_unit`` ``"pair"``, ``units``),
        ``leniency`` (``mean``, ``se``, ``low``, ``high``, ``pairs``, ``queries``),
        ``population`` (the estimated joint table, rows the judge's grade), ``strata``
        (stratum -> share and pairs graded), ``pairs``, ``queries``, ``notes``.
        An interval is None where a stratum with a share has fewer than 2 graded pairs.

    Raises
    ------
    InputError
        A column is missing, no pair is given, a grade is outside the scale, or a stratum
        of the re-check has no share.
    """
    missing = [c for c in GRADED if c not in graded.columns]
    if missing:
        raise InputError("a re-check estimate needs the stratum, the judge's and people's "
                         "grade of each pair", found=f"missing columns {missing}")
    if graded.empty:
        raise InputError("a re-check estimate needs at least one pair graded by people",
                         found="0 pairs")
    index = {v: i for i, v in enumerate(scale)}
    k = len(scale)
    t = graded.astype({"stratum": "int64", "model": "int64", "human": "int64"})
    for col in ("stratum", "model", "human"):
        bad = sorted(set(t[col].tolist()) - set(index))
        if bad:
            raise InputError(f"a re-check's {col} grade is outside the scale", found=str(bad[0]))
    unknown = sorted(set(t["stratum"].tolist()) - {int(s) for s in strata_shares})
    if unknown:
        raise InputError("a re-check pair's stratum has no share in the frame",
                         found=str(unknown[0]))
    tables, notes = {}, []
    for s in strata_shares:
        part = t[t["stratum"] == int(s)]
        c = np.zeros((k, k))
        np.add.at(c, (part["model"].map(index).to_numpy(dtype=int),
                      part["human"].map(index).to_numpy(dtype=int)), 1.0)
        tables[int(s)] = c
    p = np.zeros((k, k))
    for s, w in strata_shares.items():
        n = tables[int(s)].sum()
        if n == 0:
            if w > 0:
                notes.append(f"stratum {s} (share {w:.3f}) has no graded pair: its share is "
                             "left out and the estimate describes the other strata")
            continue
        p += w * tables[int(s)] / n
    if p.sum() <= 0:
        raise InputError("a re-check estimate needs at least one pair graded by people",
                         found="0 pairs in the strata")
    p = p / p.sum()
    from scipy import stats as sps
    z = float(sps.norm.ppf(0.5 + level / 2))
    stats = statistics(p, scale=scale, relevant_min=relevant_min)
    out = {}
    for name, (value, grad) in stats.items():
        var, ok = 0.0, True
        for s, w in strata_shares.items():
            c = tables[int(s)]
            n = c.sum()
            if n == 0:
                continue
            if n < 2:
                ok = False
                break
            var += w ** 2 / n * _cell_variance(c / n, grad) * n / (n - 1)
        se = math.sqrt(var) if ok and value is not None else None
        lo, hi = (None, None) if se is None else (value - z * se, value + z * se)
        if name != "leniency" and lo is not None:
            lo, hi = max(lo, -1.0), min(hi, 1.0)
        out[name] = {"value": value, "se": se, "low": lo, "high": hi}
    if any(tables[int(s)].sum() == 1 for s in strata_shares):
        notes.append("a stratum has one graded pair: no interval")
    queries = int(t["query_id"].nunique())
    kappa = {name: out[name] | {"method": "stratified-delta", "resample_unit": "pair",
                                "units": int(len(t))}
             for name in ("weighted_kappa", "binary_kappa")}
    le = out["leniency"]
    return kappa | {"leniency": {"mean": le["value"], "se": le["se"], "low": le["low"],
                                 "high": le["high"], "pairs": int(len(t)), "queries": queries},
                    "population": p.tolist(),
                    "strata": {str(s): {"share": float(w), "pairs": int(tables[int(s)].sum())}
                               for s, w in sorted(strata_shares.items())},
                    "pairs": int(len(t)), "queries": queries, "notes": notes}


def leniency_shift(new: Mapping, old: Mapping, *, level: float) -> dict | None:
    """Whether the judge's leniency moved between two measurements.

    Parameters
    ----------
    new, old : mapping
        Leniency records (``mean``, ``se``) of the identity now and of the one before.
    level : float

    Returns
    -------
    dict or None
        ``shift`` (new - old, grades), ``se`` (``sqrt(se_new^2 + se_old^2)``: the two
        samples are independent), ``low``, ``high``, ``shifted`` (the interval excludes
        0); None when either lacks a standard error.

    Examples
    --------
    >>> leniency_shift({"mean": 0.25, "se": 0.05}, {"mean": 0.0, "se": 0.05}, level=0.95)["shifted"]
    True
    """
    if new.get("se") is None or old.get("se") is None or new.get("mean") is None \
            or old.get("mean") is None:
        return None
    d = float(new["mean"]) - float(old["mean"])
    se = math.hypot(float(new["se"]), float(old["se"]))
    from scipy import stats as sps
    z = float(sps.norm.ppf(0.5 + level / 2))
    return {"shift": d, "se": se, "low": d - z * se, "high": d + z * se,
            "shifted": bool(d - z * se > 0 or d + z * se < 0)}
