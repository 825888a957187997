"""A new arm on a frozen key: its holes filled by a model grader, corrected by a human sample.

When an arm joins after the key froze, its retrieved pairs split in two: the pairs the frozen
key graded (people's grades, used as they are) and its *holes*, the pairs the key never saw.
A model grader grades every hole; people grade every hole of a seeded uniform sample of the
queries that have holes. This module works on the new arm's per-query metric values only:

* ``filled`` — shape ``(N,)``: the metric on every query, the key's grades for judged pairs
  and the model grader's grades for holes;
* ``holes`` and ``pairs`` — shape ``(N,)``: per query, the new arm's holes and its pairs
  within the measure's cutoff (the hole rate is ``sum(holes) / sum(pairs)``);
* ``sample`` — shape ``(n,)``: positions of the sampled queries, each with at least one hole;
* ``human`` — shape ``(n,)``: on those queries, the metric with the holes' human grades.

:func:`find_holes` lists the holes of a run against the key and :func:`fill_holes` adds
their grades to the key's rows, so the per-query values come from
:func:`relgrade.evaluation.metrics.per_query` as any arm's. A query without holes is scored
exactly on the key. The queries with holes are a stratum of
their own, estimated by PPI++ from the human sample drawn in that stratum only
(:func:`relgrade.evaluation.ppi_table.estimate_rows`, its ``jackknife`` interval: one
``lambda`` tuned on the sample and re-tuned per deleted query, Student's t on ``n - 1``
degrees of freedom, the half-width capped at the human-only one). The two strata are
combined by their sizes (:func:`new_arm_estimate`). Differences of the new arm and an old arm
are the same estimator applied to per-query differences (:func:`new_arm_comparisons`); the
old arm's per-query values come from the frozen key and are exact on every query.

:func:`transport_check` compares the model grader's bias (model grade minus human grade) on
the old arms' human-graded pairs with its bias on the new arm's sampled holes, and refuses
the level claim when they differ.

References
----------
H. Oosterhuis, R. Jagerman, Z. Qin, X. Wang and M. Bendersky, "Reliable confidence intervals
for information retrieval evaluation using generative A.I.", KDD 2024: prediction-powered
intervals of IR metrics with model-generated relevance labels corrected by a human sample.
A. N. Angelopoulos, J. C. Duchi and T. Zrnic, "PPI++: Efficient prediction-powered
inference", arXiv:2311.01453 (2023).
W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley 1977, chapter 5 (stratified sampling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation import ranksets
from relgrade.evaluation.ppi import holm, human_sample
from relgrade.evaluation.ppi_table import estimate_rows, zero_se_tolerance
from relgrade.ranking import top_k
from relgrade.schema import KEY, PAIR, RUN, require

#: The estimates of a new arm, in the order reports list them: the corrected one and the
#: model-only one (holes filled by the model grader, no correction).
METHODS = ("ppi++", "model-only")

#: The transport rule in words (recorded beside each verdict).
TRANSPORT_RULE = ("refuse the level claim when the model grader's bias (model grade - human "
                  "grade) on the new arm's sampled holes differs from its bias on the old "
                  "arms' human-graded pairs by more than the tolerance in grades, and the "
                  "difference is significant at the transport alpha (Welch t test, "
                  "standard errors clustered by query)")


@dataclass(frozen=True)
class HoleEstimate:
    """The estimate of a new arm's mean (or of its difference with an old arm).

    Attributes
    ----------
    estimate, se : float
        The point estimate and its standard error.
    low, high : float
        ``estimate -/+ t_{df, 1 - alpha/2} * se``.
    df : int
        Degrees of freedom of the quantile.
    lam : float or None
        PPI++'s weight of the model term in the stratum with holes; ``None`` for model-only.
    capped : bool
        True when the stratum's PPI++ standard error was held to its human-only one.
    n : int
        Sampled queries whose holes people graded (0 for model-only).
    n_hole_queries : int
        Queries with at least one hole.
    N : int
        Queries.
    method : str
        One of :data:`METHODS`.
    level : float
        Confidence level.
    """

    estimate: float
    se: float
    low: float
    high: float
    df: int
    lam: float | None
    capped: bool
    n: int
    n_hole_queries: int
    N: int
    method: str
    level: float = 0.95

    def covers(self, value: float) -> bool:
        """True when ``low <= value <= high``."""
        return self.low <= value <= self.high

    def p_value(self, tol: float = 0.0) -> float:
        """Two-sided Student's t p-value of ``estimate = 0`` on :attr:`df` degrees of freedom.

        Parameters
        ----------
        tol : float, default 0.0
            A standard error and an estimate at or below ``tol`` count as 0 (floating-point
            noise; :func:`relgrade.evaluation.ppi_table.zero_se_tolerance` gives it).

        Returns
        -------
        float
            With ``se <= tol`` it is 1.0 for an estimate within ``tol`` of 0, else 0.0.
        """
        if not self.se > tol:
            return 1.0 if abs(self.estimate) <= tol else 0.0
        from scipy import stats as sps
        return float(2.0 * sps.t.sf(abs(self.estimate) / self.se, self.df))

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {"method": self.method, "estimate": float(self.estimate), "se": float(self.se),
                "low": float(self.low), "high": float(self.high), "df": int(self.df),
                "lambda": None if self.lam is None else float(self.lam),
                "capped": bool(self.capped), "n": int(self.n),
                "hole_queries": int(self.n_hole_queries), "N": int(self.N),
                "level": float(self.level)}


@dataclass(frozen=True)
class TransportCheck:
    """Whether the model grader's bias on the old arms' pairs holds on the new arm's holes.

    Attributes
    ----------
    bias_old, bias_new : float
        Mean of (model grade - human grade) over the old arms' pairs graded by both, and over
        the new arm's sampled holes, in grades.
    difference : float
        ``bias_new - bias_old``.
    se : float
        Its standard error (each side clustered by query).
    df : float
        Welch-Satterthwaite degrees of freedom (each side's clusters minus one).
    p : float
        Two-sided p-value of ``difference = 0``.
    low, high : float
        The ``1 - alpha`` interval of the difference.
    pairs_old, pairs_new, queries_old, queries_new : int
        Pairs and queries behind each side.
    alpha, tolerance : float
        The rule's level and tolerance (in grades).
    refuse : bool
        True when ``p < alpha`` and ``|difference| > tolerance``: the level claim is refused.
    """

    bias_old: float
    bias_new: float
    difference: float
    se: float
    df: float
    p: float
    low: float
    high: float
    pairs_old: int
    pairs_new: int
    queries_old: int
    queries_new: int
    alpha: float
    tolerance: float
    refuse: bool

    def to_dict(self) -> dict:
        """A JSON-ready dict, the rule in words under ``"rule"``."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k, v in out.items():
            out[k] = bool(v) if k == "refuse" else (
                int(v) if k.startswith(("pairs_", "queries_")) else float(v))
        out["rule"] = TRANSPORT_RULE
        return out


# --- input checks --------------------------------------------------------------------

def _vector(values, what: str, *, dtype=np.float64) -> np.ndarray:
    v = np.asarray(values, dtype=dtype)
    if v.ndim != 1:
        raise InputError(f"{what} must be a one-dimensional array", found=f"shape {v.shape}")
    if dtype is np.float64 and not np.isfinite(v).all():
        bad = int(np.flatnonzero(~np.isfinite(v))[0])
        raise InputError(f"{what} must be finite numbers", item=f"#{bad}",
                         found="NaN or infinity")
    return v


def _old_vector(old: Mapping[str, np.ndarray], name: str, size: int) -> np.ndarray:
    """Old arm ``name``'s per-query values, checked to be ``size`` finite numbers."""
    o = _vector(old[name], f"old arm {name}'s per-query values")
    if o.size != size:
        raise InputError("an old arm needs one value per query of the new arm",
                         item=str(name), found=f"{o.size} values, {size} queries")
    return o


def _counts(values, what: str, size: int) -> np.ndarray:
    v = np.asarray(values)
    if v.ndim != 1 or v.size != size:
        raise InputError(f"{what} needs one count per query", found=f"shape {v.shape}, "
                         f"{size} queries")
    if not np.issubdtype(v.dtype, np.integer):
        if not (np.isfinite(v.astype(np.float64)).all() and (v == np.round(v)).all()):
            raise InputError(f"{what} must be whole numbers", found=str(v.dtype))
    v = v.astype(np.int64)
    if (v < 0).any():
        raise InputError(f"{what} must not be negative", item=f"query #{int(np.argmax(v < 0))}",
                         found=str(int(v.min())))
    return v


def _design(filled, holes, pairs, sample, human):
    f = _vector(filled, "the new arm's per-query values with holes filled")
    big_n = f.size
    h = _counts(holes, "the holes", big_n)
    p = _counts(pairs, "the new arm's pairs", big_n)
    if (h > p).any():
        q = int(np.argmax(h > p))
        raise InputError("a query has more holes than pairs", item=f"query #{q}",
                         found=f"{int(h[q])} holes, {int(p[q])} pairs")
    s = np.asarray(sample)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer):
        raise InputError("the sample must be a one-dimensional array of query positions",
                         found=f"{s.dtype}, shape {s.shape}")
    y = _vector(human, "the human-graded per-query values")
    if y.size != s.size:
        raise InputError("the sample needs one human-graded value per sampled query",
                         found=f"{s.size} queries, {y.size} values")
    if s.size and (s.min() < 0 or s.max() >= big_n):
        raise InputError("a sampled query position lies outside the queries",
                         found=f"{int(s.min())}..{int(s.max())} of {big_n}")
    if np.unique(s).size != s.size:
        raise InputError("a query is sampled twice", found=f"{s.size - np.unique(s).size} "
                         "repeated positions")
    if s.size and (h[s] == 0).any():
        q = int(s[np.argmax(h[s] == 0)])
        raise InputError("the human sample must hold queries with holes only",
                         item=f"query #{q}", found="0 holes",
                         fix="draw the sample with sample_hole_queries")
    return f, h, p, s.astype(np.int64), y


def find_holes(run: pd.DataFrame, key: pd.DataFrame, *, k: int,
               ties: str = "score") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The new arm's pairs within the cutoff that the frozen key did not grade.

    Parameters
    ----------
    run : pandas.DataFrame
        The new arm's run, columns :data:`relgrade.schema.RUN`. Not modified.
    key : pandas.DataFrame
        The frozen key, columns :data:`relgrade.schema.KEY`. Not modified.
    k : int
        The measure's cutoff: only the canonical top ``k`` of each query counts.
    ties : {"score", "rank"}, default "score"
        The tie rule (params ``runs.ties``, :func:`relgrade.ranking.top_k`).

    Returns
    -------
    holes : pandas.DataFrame
        ``query_id``, ``chunk_id``: the holes, in the run's canonical order.
    counts : pandas.DataFrame
        ``query_id``, ``pairs``, ``holes`` (int64): per query the run answers, its pairs
        within the cutoff and its holes, sorted by ``query_id``.

    Raises
    ------
    InputError
        A table without its columns, or ``k`` below 1.

    Examples
    --------
    >>> run = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2"],
    ...                     "chunk_id": ["a", "b", "c", "a"], "rank": [1, 2, 3, 1],
    ...                     "score": [3.0, 2.0, 1.0, 1.0]})
    >>> key = pd.DataFrame({"query_id": ["q1", "q2"], "chunk_id": ["a", "a"], "grade": [2, 0]})
    >>> holes, counts = find_holes(run, key, k=2)
    >>> holes.values.tolist(), counts.values.tolist()
    ([['q1', 'b']], [['q1', 2, 1], ['q2', 1, 0]])
    """
    require(run, RUN, what="the new arm's run")
    require(key, KEY, what="the frozen key")
    top = top_k(run, k, ties=ties)[PAIR]
    judged = pd.MultiIndex.from_frame(key[PAIR].astype(str))
    is_hole = ~pd.MultiIndex.from_frame(top.astype(str)).isin(judged)
    counts = (top.assign(holes=is_hole.astype(np.int64)).groupby("query_id", sort=True)
              .agg(pairs=("chunk_id", "size"), holes=("holes", "sum")).reset_index())
    counts[["pairs", "holes"]] = counts[["pairs", "holes"]].astype(np.int64)
    return top[is_hole].reset_index(drop=True), counts


def fill_holes(key: pd.DataFrame, holes: pd.DataFrame, grades: pd.DataFrame) -> pd.DataFrame:
    """The frozen key with every hole graded: the key's rows as they are, then the holes'.

    Parameters
    ----------
    key : pandas.DataFrame
        The frozen key, columns :data:`relgrade.schema.KEY`. Not modified.
    holes : pandas.DataFrame
        ``query_id``, ``chunk_id``: the holes (:func:`find_holes`).
    grades : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``grade``: one grade per hole (the model grader's, or on
        the sampled queries people's); extra rows are ignored.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`relgrade.schema.KEY`: the key's rows, then one row per hole.

    Raises
    ------
    InputError
        A hole without a grade (naming the first), a hole graded twice, or a hole that the
        key already grades.
    """
    for table, what in ((key, "the frozen key"), (grades, "the holes' grades")):
        require(table, KEY, what=what)
    require(holes, PAIR, what="the holes")
    h = holes[PAIR].astype(str)
    judged = pd.MultiIndex.from_frame(key[PAIR].astype(str))
    inside = pd.MultiIndex.from_frame(h).isin(judged)
    if inside.any():
        q, c = h[inside].iloc[0]
        raise InputError("a hole is a pair the frozen key already grades", item=f"{q} {c}",
                         fix="find the holes with find_holes against the same key")
    g = grades[KEY].astype({"query_id": str, "chunk_id": str})
    g = g[pd.MultiIndex.from_frame(g[PAIR]).isin(pd.MultiIndex.from_frame(h))]
    twice = g.duplicated(PAIR)
    if twice.any():
        q, c = g.loc[twice, PAIR].iloc[0]
        raise InputError("a hole has two grades", item=f"{q} {c}",
                         fix="keep one grade per pair (the current one)")
    merged = h.merge(g, on=PAIR, how="left")
    missing = merged["grade"].isna()
    if missing.any():
        q, c = merged.loc[missing, PAIR].iloc[0]
        raise InputError("a hole has no grade", item=f"{q} {c}",
                         found=f"{int(missing.sum())} of {len(h)} holes ungraded",
                         fix="grade every hole before scoring the new arm")
    return pd.concat([key[KEY], merged[KEY]], ignore_index=True)


def hole_rate(holes, pairs) -> float:
    """The new arm's share of pairs the frozen key did not grade.

    Parameters
    ----------
    holes, pairs : array-like of shape (N,), int
        Per query, the new arm's holes and its pairs within the cutoff.

    Returns
    -------
    float
        ``sum(holes) / sum(pairs)`` in [0, 1]; 0.0 when the arm retrieved nothing.

    Examples
    --------
    >>> hole_rate([1, 0, 3], [4, 4, 4])
    0.3333333333333333
    """
    p = _counts(pairs, "the new arm's pairs", np.asarray(pairs).size)
    h = _counts(holes, "the holes", p.size)
    total = int(p.sum())
    return 0.0 if total == 0 else float(h.sum() / total)


def sample_hole_queries(holes, *, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A seeded uniform sample of the queries with holes, for people to grade all their holes.

    Parameters
    ----------
    holes : array-like of shape (N,), int
        Holes per query.
    fraction : float
        Share of the queries with holes to sample, in (0, 1]; the sample holds
        ``max(2, round(fraction * H))`` of the ``H`` queries with holes
        (:func:`relgrade.evaluation.ppi.human_sample`), so about that share of the holes.
    rng : numpy.random.Generator
        The source of the draw (from params ``seed`` through :mod:`relgrade.rng`).

    Returns
    -------
    numpy.ndarray of shape (n,), int64
        Sorted query positions in ``[0, N)``, each with at least one hole.

    Raises
    ------
    InputError
        A fraction outside (0, 1], or a sample of fewer than 3 queries (the jackknife
        interval needs 3).

    Examples
    --------
    >>> sample_hole_queries([0, 2, 1, 0, 5, 1], fraction=1.0, rng=np.random.default_rng(1))
    array([1, 2, 4, 5])
    """
    h = _counts(holes, "the holes", np.asarray(holes).size)
    with_holes = np.flatnonzero(h > 0)
    if with_holes.size < 3:
        raise InputError("the new arm's correction needs at least 3 queries with holes",
                         found=f"{with_holes.size}",
                         fix="report the new arm on the key alone, or pool its pairs")
    picked = human_sample(with_holes.size, fraction=fraction, rng=rng)
    if picked.size < 3:
        raise InputError("the human sample of holes needs at least 3 queries (jackknife)",
                         found=f"{picked.size} of {with_holes.size} queries with holes",
                         fix="raise holes.human_fraction")
    return with_holes[picked]


def _stratified(f_rows, y_rows, h, s, *, level: float):
    """PPI++ on the stratum with holes, exact values elsewhere, rows at once."""
    big_n = h.size
    hole_q = np.flatnonzero(h > 0)
    exact_q = np.flatnonzero(h == 0)
    if s.size < 3:
        raise InputError("the new arm's correction needs at least 3 sampled queries",
                         found=f"{s.size}", fix="raise holes.human_fraction")
    rows = estimate_rows(y_rows, f_rows[:, s], f_rows[:, hole_q], level=level,
                         interval="jackknife")["ppi++"]
    w_h, w_0 = hole_q.size / big_n, exact_q.size / big_n
    est = w_h * rows["estimate"]
    var = (w_h ** 2) * rows["se"] ** 2
    if exact_q.size:
        est = est + w_0 * f_rows[:, exact_q].mean(axis=1)
    if exact_q.size > 1:
        var = var + (w_0 ** 2) * f_rows[:, exact_q].var(axis=1, ddof=1) / exact_q.size
    return est, np.sqrt(var), rows


def new_arm_estimate(*, filled, holes, pairs, sample, human,
                     level: float = 0.95) -> dict[str, HoleEstimate]:
    """The new arm's mean over queries under people's grades, its holes filled and corrected.

    Parameters
    ----------
    filled : array-like of shape (N,), float
        Per-query metric with the key's grades for judged pairs and the model grader's
        for holes.
    holes, pairs : array-like of shape (N,), int
        Per query, the new arm's holes and its pairs within the cutoff.
    sample : array-like of shape (n,), int
        Positions of the sampled queries, all with holes (:func:`sample_hole_queries`),
        ``n >= 3``.
    human : array-like of shape (n,), float
        On the sampled queries, the metric with the holes' human grades.
    level : float, default 0.95
        Confidence level.

    Returns
    -------
    dict
        ``{"ppi++": HoleEstimate, "model-only": HoleEstimate}``.

    Raises
    ------
    InputError
        Lengths that disagree, a value that is not finite, negative counts or more holes
        than pairs, a sampled query without holes or sampled twice, fewer than 3 sampled
        queries, or a level outside (0, 1).

    Notes
    -----
    With ``H`` the ``N_h`` queries with holes, ``Q0`` the ``N_0`` without, ``F`` the filled
    values and ``Y`` the human-graded ones on the sample ``S``::

        theta_H = lam * mean_H(F) + mean_S(Y - lam * F)          (PPI++ on the stratum H)
        theta   = (N_0 * mean_Q0(F) + N_h * theta_H) / N
        se^2    = (N_0/N)^2 * var(F_Q0, ddof=1) / N_0 + (N_h/N)^2 * se_H^2

    ``se_H`` is the jackknife standard error of
    :func:`relgrade.evaluation.ppi.jackknife_rows` (capped at the human-only one, as
    :func:`relgrade.evaluation.ppi_table.estimate_rows` does) and the interval takes
    Student's t on ``n - 1`` degrees of freedom, the smallest of the two strata's. The
    strata's sizes are held fixed (post-stratification). On ``Q0`` ``F`` is people's metric,
    so ``theta`` is unbiased for the mean under people's grades however biased the model
    grader is on the holes. The model-only estimate is ``mean(F)`` with
    ``sd(F, ddof=1) / sqrt(N)`` and t on ``N - 1``: it ignores the grader's bias.
    """
    if not 0.0 < float(level) < 1.0:
        raise InputError("the confidence level must lie in (0, 1)", found=str(level))
    f, h, _, s, y = _design(filled, holes, pairs, sample, human)
    est, se, rows = _stratified(f[None, :], y[None, :], h, s, level=level)
    return {"ppi++": _estimate(est[0], se[0], s.size - 1, float(rows["lambda"][0]),
                               bool(rows["capped"][0]), s.size, h, "ppi++", level),
            "model-only": _estimate(f.mean(), f.std(ddof=1) / math.sqrt(f.size), f.size - 1,
                                    None, False, 0, h, "model-only", level)}


def _estimate(est, se, df, lam, capped, n, h, method, level) -> HoleEstimate:
    from scipy import stats as sps
    half = float(sps.t.ppf(0.5 + level / 2.0, df)) * float(se)
    return HoleEstimate(estimate=float(est), se=float(se), low=float(est - half),
                        high=float(est + half), df=int(df), lam=lam, capped=capped, n=int(n),
                        n_hole_queries=int((h > 0).sum()), N=int(h.size), method=method,
                        level=float(level))


def new_arm_comparisons(new_arm: str, *, filled, holes, pairs, sample, human,
                        old: Mapping[str, np.ndarray], level: float = 0.95) -> pd.DataFrame:
    """Paired differences ``new arm - old arm`` with Holm's adjustment over the old arms.

    Parameters
    ----------
    new_arm : str
        The new arm's name (the ``arm_a`` column).
    filled, holes, pairs, sample, human
        As in :func:`new_arm_estimate`.
    old : mapping of arm -> array-like of shape (N,), float
        Each old arm's per-query metric on the frozen key, the queries in ``filled``'s order.
    level : float, default 0.95
        Level of each interval; ``1 - level`` is the family-wise error rate of the verdicts.

    Returns
    -------
    pandas.DataFrame
        One row per old arm: ``arm_a``, ``arm_b``, ``estimate`` (new - old), ``se``, ``low``,
        ``high``, ``df``, ``lambda``, ``capped``, ``n``, ``N``, ``p`` (two-sided t),
        ``p_holm``, ``significant`` (``p_holm <= 1 - level``).

    Raises
    ------
    InputError
        As :func:`new_arm_estimate`; an old arm with a value per query missing or not finite;
        a difference whose standard error is 0 while its estimate is not (the same nonzero
        value on every query: no interval or test can be formed). "0" is within
        :func:`~relgrade.evaluation.ppi_table.zero_se_tolerance` of the values entering it;
        a difference with both 0 (the arms equal on every query) gets ``p`` 1.

    Notes
    -----
    The difference ``D_q = F_q - O_q`` is a per-query value like the arm's own: exact on
    queries without holes, PPI++-corrected on the stratum with holes by the same human
    sample (``Y_q - O_q`` on the sampled queries), each difference with its own ``lambda``.
    Where the model grader tracks people, ``lambda`` near 1 lets the old arm's values on
    every query of the stratum cancel query difficulty, as in a paired test.
    """
    if not 0.0 < float(level) < 1.0:
        raise InputError("the confidence level must lie in (0, 1)", found=str(level))
    f, h, _, s, y = _design(filled, holes, pairs, sample, human)
    names = list(old)
    cols = ["arm_a", "arm_b", "estimate", "se", "low", "high", "df", "lambda", "capped", "n",
            "N", "p", "p_holm", "significant"]
    if not names:
        return pd.DataFrame(columns=cols)
    out = []
    for name in names:
        o = _old_vector(old, name, f.size)
        est, se, rows = _stratified((f - o)[None, :], (y - o[s])[None, :], h, s, level=level)
        e = _estimate(est[0], se[0], s.size - 1, float(rows["lambda"][0]),
                      bool(rows["capped"][0]), s.size, h, "ppi++", level)
        # "0" in metric units, as the ppi table's rule: a difference's float noise is that
        # of the arms' values entering it, not of the (maybe all-noise) difference itself
        tol = float(zero_se_tolerance(f[None, :], o[None, :], y[None, :])[0])
        if not e.se > tol and abs(e.estimate) > tol:
            raise InputError(
                "the standard error of a paired difference is 0 while the difference is "
                f"not: {new_arm} - {name} is {e.estimate:g} with no spread, so no interval "
                "or test can be formed from it (a p-value would claim a certainty the sample "
                "does not give)", item=f"{new_arm} - {name}",
                fix="grade the holes of more sampled queries (a larger human sample), or "
                    "compare the arms on the human key alone")
        out.append({"arm_a": new_arm, "arm_b": name, "estimate": e.estimate, "se": e.se,
                    "low": e.low, "high": e.high, "df": e.df, "lambda": e.lam,
                    "capped": e.capped, "n": e.n, "N": e.N, "p": e.p_value(tol)})
    df = pd.DataFrame(out)
    adjusted, reject = holm(df["p"].to_numpy(), alpha=1.0 - float(level))
    df["p_holm"] = adjusted
    df["significant"] = reject
    return df[cols]


def _clustered_bias(model, human, query, what: str):
    m = _vector(model, f"{what}: model grades")
    g = _vector(human, f"{what}: human grades")
    q = np.asarray(query)
    if q.ndim != 1 or not (m.size == g.size == q.size):
        raise InputError(f"{what}: model grades, human grades and query ids need one entry "
                         "per pair", found=f"{m.size}, {g.size}, {q.size}")
    _, codes = np.unique(q, return_inverse=True)
    clusters = int(codes.max()) + 1 if codes.size else 0
    if clusters < 2:
        raise InputError(f"{what}: the bias needs pairs of at least 2 queries",
                         found=f"{clusters} queries, {m.size} pairs")
    d = m - g
    bias = float(d.mean())
    sums = np.bincount(codes, weights=d, minlength=clusters)
    sizes = np.bincount(codes, minlength=clusters)
    resid = sums - bias * sizes
    var = clusters / (clusters - 1) * float((resid ** 2).sum()) / d.size ** 2
    return bias, var, d.size, clusters


def transport_check(*, old_model, old_human, old_query, new_model, new_human, new_query,
                    alpha: float = 0.05, tolerance: float = 0.1) -> TransportCheck:
    """Does the model grader's bias on the old arms' pairs hold on the new arm's holes?

    Parameters
    ----------
    old_model, old_human : array-like of shape (m_old,), float
        Model and human grades of the old arms' pairs that both graded.
    old_query : array-like of shape (m_old,)
        Their query ids (the clusters).
    new_model, new_human : array-like of shape (m_new,), float
        Model and human grades of the new arm's sampled holes.
    new_query : array-like of shape (m_new,)
        Their query ids.
    alpha : float, default 0.05
        Level of the test; the rule refuses in at most about ``alpha`` of samples when the
        biases are equal.
    tolerance : float, default 0.1
        Differences of at most this many grades never refuse, however many pairs.

    Returns
    -------
    TransportCheck

    Raises
    ------
    InputError
        Lengths that disagree, a grade that is not finite, pairs of fewer than 2 queries on
        either side, ``alpha`` outside (0, 1) or a negative tolerance.

    Notes
    -----
    Each side's bias is the mean of ``model - human`` over its pairs; its variance is the
    cluster-robust (by query) variance of a ratio mean,
    ``C / (C - 1) * sum_c (s_c - bias * m_c)^2 / M^2`` (``C`` queries, ``s_c`` the sum and
    ``m_c`` the number of differences of query ``c``, ``M`` pairs), because the pairs of a
    query share it. The test statistic is ``difference / sqrt(v_old + v_new)`` on
    Welch-Satterthwaite degrees of freedom
    ``(v_old + v_new)^2 / (v_old^2 / (C_old - 1) + v_new^2 / (C_new - 1))``. The rule is
    test-based with a floor: refuse when ``p < alpha`` and ``|difference| > tolerance``.
    Its size is at most that of the test, about ``alpha`` (Welch's degrees of freedom are an
    approximation; 4.4-5.0% refusals at ``alpha = 0.05`` with equal biases in
    ``benchmarks/sim_holes.py``, which also measures the power at a difference of 0.3 grade:
    see benchmarks/README.md). An interval-based rule (refuse when
    the interval lies beyond the tolerance) would need the difference to exceed the
    tolerance by a whole half-width, too little power with a tenth of the holes graded.
    """
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise InputError("the transport alpha must lie in (0, 1)", found=str(alpha))
    tol = float(tolerance)
    if not (math.isfinite(tol) and tol >= 0):
        raise InputError("the transport tolerance must be a grade difference >= 0",
                         found=str(tolerance))
    b_old, v_old, m_old, c_old = _clustered_bias(old_model, old_human, old_query,
                                                 "the old arms' pairs")
    b_new, v_new, m_new, c_new = _clustered_bias(new_model, new_human, new_query,
                                                 "the new arm's sampled holes")
    diff = b_new - b_old
    var = v_old + v_new
    se = math.sqrt(var)
    if var > 0:
        df = var ** 2 / (v_old ** 2 / (c_old - 1) + v_new ** 2 / (c_new - 1))
        from scipy import stats as sps
        p = float(2.0 * sps.t.sf(abs(diff) / se, df))
        half = float(sps.t.ppf(1.0 - a / 2.0, df)) * se
    else:
        df = float(c_old + c_new - 2)
        p, half = (1.0 if diff == 0 else 0.0), 0.0
    refuse = bool(p < a and abs(diff) > tol)
    return TransportCheck(bias_old=b_old, bias_new=b_new, difference=diff, se=se,
                          df=float(df), p=p, low=diff - half, high=diff + half,
                          pairs_old=m_old, pairs_new=m_new, queries_old=c_old,
                          queries_new=c_new, alpha=a, tolerance=tol, refuse=refuse)


#: How a new arm's rank-set among the old arms is built, in words (recorded beside it).
RANK_SET_METHOD = (
    "simultaneous max-t bootstrap intervals of every pairwise difference of the old arms' "
    "means on the frozen key and the new arm's PPI++ estimate on its holes; each resample "
    "draws the queries without holes and the queries with holes (paired across the arms), "
    "and independently the human sample of holes, and re-tunes the new arm's lambda; "
    "rank_low = 1 + arms surely better, rank_high = arms - arms surely worse")


def new_arm_rank_sets(*, filled, holes, pairs, sample, human,
                      old: Mapping[str, np.ndarray], rng: np.random.Generator,
                      level: float = 0.95, n_resamples: int = 1000):
    """The old arms' and the new arm's rank intervals with simultaneous coverage.

    Parameters
    ----------
    filled, holes, pairs, sample, human
        As in :func:`new_arm_estimate`.
    old : mapping of arm -> array-like of shape (N,), float
        Each old arm's per-query metric on the frozen key, the queries in ``filled``'s order
        (at least one old arm).
    rng : numpy.random.Generator
        Source of the bootstrap: for consecutive blocks of resamples (their sizes depend
        only on the shapes), ``rng.integers`` over the queries without holes, then over the
        queries with holes, then over the sample.
    level : float, default 0.95
        Simultaneous coverage of the rank intervals.
    n_resamples : int, default 1000
        Bootstrap resamples (at least 100).

    Returns
    -------
    relgrade.evaluation.ranksets.RankSets
        Over the arms in ``old``'s order, then the new arm (last); ``estimate`` is each old
        arm's mean and the new arm's PPI++ estimate (:func:`new_arm_estimate`'s).

    Raises
    ------
    InputError
        As :func:`new_arm_estimate`; no old arm, or an old arm without one finite value per
        query; a level outside (0, 1) or fewer than 100 resamples.

    Notes
    -----
    The rank-sets of :mod:`relgrade.evaluation.ranksets` (max-t over every pair of arms,
    Chatzi et al., NeurIPS 2024) with the new arm's estimator of :func:`new_arm_estimate`.
    The strata are resampled within themselves (their sizes held fixed, as the estimate
    holds them), paired across the arms so that query difficulty cancels in the
    differences; the human sample is resampled on its own, as ``ppi_rank_sets`` resamples
    ppi mode's sample, and ``lambda`` is re-tuned on each resample
    (:func:`relgrade.evaluation.ranksets.resampled_lambda` with one row) so its tuning is
    counted.
    """
    f, h, _, s, y = _design(filled, holes, pairs, sample, human)
    if s.size < 3:
        raise InputError("the new arm's rank-set needs at least 3 sampled queries",
                         found=f"{s.size}", fix="raise holes.human_fraction")
    names = list(old)
    if not names:
        raise InputError("a rank-set of a new arm needs at least one old arm", found="none")
    o = np.vstack([_old_vector(old, name, f.size) for name in names])  # (K, N)
    lv, b = ranksets.check_resampling(level, n_resamples)
    hole_q, exact_q = np.flatnonzero(h > 0), np.flatnonzero(h == 0)
    big_n, n, n_h, n_0 = f.size, s.size, hole_q.size, exact_q.size
    # the new arm's point estimate exactly as its record and decision file carry it
    theta = new_arm_estimate(filled=f, holes=h, pairs=pairs, sample=s, human=y,
                             level=lv)["ppi++"].estimate
    est = np.append(o.mean(axis=1), theta)
    o0, oh, f0, fh, fs = o[:, exact_q], o[:, hole_q], f[exact_q], f[hole_q], f[s]
    blocks = []
    for size in ranksets.resample_blocks(b, (o.shape[0] + 1) * (big_n + n)):
        i0 = rng.integers(0, n_0, size=(size, n_0)) if n_0 else None
        ih = rng.integers(0, n_h, size=(size, n_h))
        si = rng.integers(0, n, size=(size, n))
        old_sum = oh[:, ih].sum(axis=2)                                 # (K, B)
        new_exact = np.zeros(size)
        if n_0:
            old_sum = old_sum + o0[:, i0].sum(axis=2)
            new_exact = f0[i0].sum(axis=1)
        fhs, ys, xs = fh[ih], y[si], fs[si]                             # (B, N_h), (B, n)
        fh_mean = fhs.mean(axis=1)
        lam_b = ranksets.resampled_lambda(ys[None], xs[None], fhs[None], fh_mean[None])
        theta_hb = lam_b * fh_mean + (ys - lam_b[:, None] * xs).mean(axis=1)
        new = (n_h * theta_hb + new_exact) / big_n
        blocks.append(np.column_stack([old_sum.T / big_n, new]))
    return ranksets.from_bootstrap(est, np.concatenate(blocks), level=lv)
