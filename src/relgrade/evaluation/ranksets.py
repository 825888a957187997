"""Rank-sets: each arm's rank interval with simultaneous coverage, from per-query values.

Arms are ranked by a mean over queries; two arms whose means differ by less than the noise
of the query sample cannot be told apart, so a point rank claims more than the data show.
A rank-set gives each arm an interval of ranks ``[rank_low, rank_high]`` such that, with
probability at least ``level``, *every* arm's true rank lies in its interval at once.

The construction (simultaneous confidence intervals for all pairwise differences, then
counting): with ``K`` arms and the ``K (K - 1) / 2`` differences ``mu_i - mu_j``,

* bootstrap the query sample ``B`` times and recompute every arm's estimate;
* standardise every pair's bootstrap deviation by that pair's bootstrap standard error
  and take the maximum over the pairs of its absolute value (max-t); its ``level``
  quantile ``c`` makes ``d_ij -/+ c * se_ij`` hold for all pairs together;
* arm ``j`` is *surely better* than arm ``i`` when the interval of ``mu_j - mu_i`` lies
  above 0; then ``rank_low_i = 1 + #{j surely better than i}`` and
  ``rank_high_i = K - #{j surely worse than i}`` (rank 1 the best).

When all the intervals cover, every "surely better" is true, so every arm's true rank lies
in its set (with true ties, every rank the tied group can take): the sets inherit the
simultaneous coverage of the intervals. In ppi mode the estimates are PPI++ means (one
``lambda`` shared by the arms, re-tuned on every resample) and the bootstrap resamples the
human sample and all model-graded queries independently, as ppi-python's bootstrap does.

References
----------
S. Chatzi, E. Straitouri and M. Gomez-Rodriguez, "Prediction-powered ranking of large
language models", NeurIPS 2024 (rank-sets from simultaneous pairwise comparisons, with
PPI). D. N. Politis, J. P. Romano and M. Wolf, *Subsampling*, Springer 1999, and
J. P. Romano and M. Wolf, "Exact and approximate stepdown methods for multiple hypothesis
testing", JASA 100 (2005): 94-108 (max-t bootstrap for simultaneous intervals).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation.ppi import tune_lambda_shared


@dataclass(frozen=True)
class RankSets:
    """Rank intervals of ``K`` arms with simultaneous coverage.

    Attributes
    ----------
    estimate : numpy.ndarray of shape (K,), float64
        Each arm's estimate (the mean over queries, or its PPI++ estimate).
    rank_low, rank_high : numpy.ndarray of shape (K,), int64
        The rank interval of each arm, ``1 <= rank_low <= rank_high <= K`` (1 the best).
    better : numpy.ndarray of shape (K, K), bool
        ``better[i, j]``: arm ``i`` is surely better than arm ``j`` (its simultaneous
        interval of ``mu_i - mu_j`` lies above 0, or below 0 when lower is better).
    critical : float
        The max-t quantile ``c`` (the half-widths are ``c`` times each pair's bootstrap
        standard error).
    level : float
        The simultaneous coverage level.
    n_resamples : int
        Bootstrap resamples behind ``critical``.
    higher_is_better : bool
        Whether rank 1 went to the highest estimate.
    """

    estimate: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    better: np.ndarray
    critical: float
    level: float
    n_resamples: int
    higher_is_better: bool = True

    def tied_groups(self) -> list[list[int]]:
        """Arms (positions) in runs that cannot be told apart, best run first.

        Arms are ordered by estimate (best first, ties by position); a new group starts at an
        arm that every arm of the current group is surely better than. So within a group
        each arm is not surely worse than some arm before it: the group's ranks cannot be
        told apart in that order.
        """
        sign = -1.0 if self.higher_is_better else 1.0
        order = sorted(range(self.estimate.size), key=lambda i: (sign * self.estimate[i], i))
        groups: list[list[int]] = []
        for i in order:
            if groups and not all(self.better[j, i] for j in groups[-1]):
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups

    def to_dict(self, arms) -> dict:
        """JSON-ready: ``{"level", "n_resamples", "critical", "arms": {arm: {"estimate",
        "rank_low", "rank_high"}}, "tied_groups": [[arm, ...], ...]}``."""
        names = [str(a) for a in arms]
        return {"level": float(self.level), "n_resamples": int(self.n_resamples),
                "critical": float(self.critical),
                "arms": {a: {"estimate": float(self.estimate[i]),
                             "rank_low": int(self.rank_low[i]),
                             "rank_high": int(self.rank_high[i])}
                         for i, a in enumerate(names)},
                "tied_groups": [[names[i] for i in g] for g in self.tied_groups()]}


#: How the sets are built, in words (recorded beside them).
METHOD = ("simultaneous max-t bootstrap intervals of every pairwise difference of the arms' "
          "means; rank_low = 1 + arms surely better, rank_high = arms - arms surely worse")

#: The same in ppi mode.
METHOD_PPI = ("simultaneous max-t bootstrap intervals of every pairwise difference of the "
              "arms' PPI++ estimates (one lambda shared by the arms, re-tuned on every "
              "resample; the human sample and all model-graded queries resampled "
              "independently); rank_low = 1 + arms surely better, rank_high = arms - arms "
              "surely worse")

#: Elements (arms x resamples x queries) one block of the bootstrap gathers at most.
BLOCK_ELEMENTS = 1 << 22


def resample_blocks(n_resamples: int, per_resample: int):
    """Sizes of consecutive blocks of resamples, each under :data:`BLOCK_ELEMENTS` elements.

    Parameters
    ----------
    n_resamples : int
        Resamples in all.
    per_resample : int
        Elements one resample gathers (arms times queries).

    Returns
    -------
    list of int
        Block sizes summing to ``n_resamples``; they depend on the two arguments only.
    """
    step = max(1, BLOCK_ELEMENTS // max(1, per_resample))
    return [min(step, n_resamples - i) for i in range(0, n_resamples, step)]


def check_resampling(level, n_resamples) -> tuple[float, int]:
    """``level`` and ``n_resamples`` as a float and an int.

    Raises
    ------
    InputError
        ``level`` outside (0, 1), or fewer than 100 resamples.
    """
    lv = float(level)
    if not 0.0 < lv < 1.0:
        raise InputError("the rank-sets' level must lie in (0, 1)", found=str(level))
    b = int(n_resamples)
    if b < 100:
        raise InputError("rank-sets need at least 100 bootstrap resamples", found=str(b),
                         fix="raise metrics.bootstrap")
    return lv, b


def _matrix(values, what: str, minimum: int) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise InputError(f"{what} must be a table of shape (arms, queries)",
                         found=f"shape {v.shape}")
    if v.shape[1] < minimum:
        raise InputError(f"{what} needs at least {minimum} queries", found=str(v.shape[1]))
    if not np.isfinite(v).all():
        raise InputError(f"{what} must be finite numbers", found="NaN or infinity",
                         fix="score every arm on every query before ranking")
    return v


def from_bootstrap(estimate, boot, *, level: float = 0.95,
                   higher_is_better: bool = True) -> RankSets:
    """Rank-sets from point estimates and their bootstrap replicates (max-t over all pairs).

    Parameters
    ----------
    estimate : array-like of shape (K,), float
        Each arm's estimate.
    boot : array-like of shape (B, K), float
        The estimates recomputed on ``B`` resamples (the same resample for every arm, so
        that the pairing of the arms is kept).
    level : float, default 0.95
        Simultaneous coverage level.
    higher_is_better : bool, default True
        Whether rank 1 goes to the highest estimate.

    Returns
    -------
    RankSets

    Notes
    -----
    For each pair ``i < j``: ``d = est_i - est_j``, ``d*_b = boot_bi - boot_bj``,
    ``se = sd_b(d*_b)`` (ddof 1); ``T_b = max over pairs with se > 0 of |d*_b - d| / se``;
    ``c`` = the ``level`` quantile of ``T_b`` (``numpy.quantile``, method ``"higher"``, so the
    empirical coverage of the resamples is at least ``level``). A pair with ``se == 0`` (the
    arms equal on every resample) is surely different only when ``d != 0``.
    """
    est = np.asarray(estimate, dtype=np.float64)
    b = np.asarray(boot, dtype=np.float64)
    k = est.size
    if b.ndim != 2 or b.shape[1] != k:
        raise InputError("bootstrap replicates need shape (resamples, arms)",
                         found=f"{b.shape} for {k} arms")
    if not (np.isfinite(est).all() and np.isfinite(b).all()):
        raise InputError("estimates must be finite numbers", found="NaN or infinity")
    lv = float(level)
    if not 0.0 < lv < 1.0:
        raise InputError("the rank-sets' level must lie in (0, 1)", found=str(level))
    sign = 1.0 if higher_is_better else -1.0
    better = np.zeros((k, k), dtype=bool)
    critical = 0.0
    if k >= 2:
        ia, ib = (np.array(x, dtype=np.int64) for x in zip(*itertools.combinations(range(k), 2)))
        d = est[ia] - est[ib]
        dstar = b[:, ia] - b[:, ib]
        se = dstar.std(axis=0, ddof=1)
        live = se > 0
        if live.any():
            t = np.abs(dstar[:, live] - d[live]) / se[live]
            critical = float(np.quantile(t.max(axis=1), lv, method="higher"))
        half = critical * se
        low, high = d - half, d + half
        # a pair of arms equal on every resample: surely different only if d != 0
        low = np.where(live, low, d)
        high = np.where(live, high, d)
        a_better = sign * np.where(sign > 0, low, high) > 0
        b_better = sign * np.where(sign > 0, high, low) < 0
        better[ia[a_better], ib[a_better]] = True
        better[ib[b_better], ia[b_better]] = True
    rank_low = 1 + better.sum(axis=0)      # arms surely better than this one
    rank_high = k - better.sum(axis=1)     # arms surely worse than this one
    return RankSets(estimate=est, rank_low=rank_low.astype(np.int64),
                    rank_high=rank_high.astype(np.int64), better=better, critical=critical,
                    level=lv, n_resamples=int(b.shape[0]),
                    higher_is_better=bool(higher_is_better))


def rank_sets(values, *, rng: np.random.Generator, level: float = 0.95,
              n_resamples: int = 1000, higher_is_better: bool = True,
              weights=None) -> RankSets:
    """Rank-sets of arms from their per-query values on the same queries.

    Parameters
    ----------
    values : array-like of shape (K, Q), float
        Per-query metric of each arm (rows) on the same ``Q >= 2`` queries (columns); the
        estimate of an arm is its row mean.
    rng : numpy.random.Generator
        Source of the bootstrap: ``rng.integers(0, Q, size=(rows, Q))`` for consecutive
        blocks of resamples (the block size depends only on ``K`` and ``Q``).
    level : float, default 0.95
        Simultaneous coverage of the rank intervals.
    n_resamples : int, default 1000
        Bootstrap resamples of the queries (at least 100).
    higher_is_better : bool, default True
        Whether rank 1 goes to the highest mean.
    weights : array-like of shape (Q,), float, optional
        Traffic weight per query (positive): every mean, on the sample and on each resample,
        is then ``sum(w * v) / sum(w)``.

    Returns
    -------
    RankSets
        See :func:`from_bootstrap`.

    Raises
    ------
    InputError
        A table that is not 2-D, fewer than 2 queries, a value that is not finite, weights
        that are not positive finite numbers (one per query), a level outside (0, 1) or
        fewer than 100 resamples.

    Examples
    --------
    >>> v = np.array([[0.9, 0.8, 0.9, 0.8], [0.5, 0.4, 0.5, 0.4], [0.1, 0.0, 0.1, 0.0]])
    >>> r = rank_sets(v, rng=np.random.default_rng(0))
    >>> r.rank_low.tolist(), r.rank_high.tolist()
    ([1, 2, 3], [1, 2, 3])
    """
    v = _matrix(values, "per-query values", 2)
    lv, b = check_resampling(level, n_resamples)
    q = v.shape[1]
    if weights is None:
        boot = np.concatenate([v[:, rng.integers(0, q, size=(rows, q))].mean(axis=2).T
                               for rows in resample_blocks(b, v.shape[0] * q)])    # (B, K)
        return from_bootstrap(v.mean(axis=1), boot, level=lv,
                              higher_is_better=higher_is_better)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (q,) or not (np.isfinite(w).all() and (w > 0).all()):
        raise InputError("query weights must be positive finite numbers, one per query",
                         found=f"shape {w.shape}")
    blocks = []
    for rows in resample_blocks(b, v.shape[0] * q):
        idx = rng.integers(0, q, size=(rows, q))
        wi = w[idx]                                                    # (rows, Q)
        blocks.append(((v[:, idx] * wi).sum(axis=2) / wi.sum(axis=1)).T)
    est = (v * w).sum(axis=1) / w.sum()
    return from_bootstrap(est, np.concatenate(blocks), level=lv,
                          higher_is_better=higher_is_better)


def ppi_rank_sets(human, model_sample, model_all, *, rng: np.random.Generator,
                  level: float = 0.95, n_resamples: int = 1000,
                  higher_is_better: bool = True) -> RankSets:
    """Rank-sets of arms from PPI++ estimates (a model key on every query, people on a sample).

    Parameters
    ----------
    human, model_sample : array-like of shape (K, n), float
        Each arm's per-query values on the ``n >= 3`` human-sample queries, under the human
        key and under the model key (same queries, same order).
    model_all : array-like of shape (K, N), float
        Each arm's per-query values under the model key on every query.
    rng : numpy.random.Generator
        Source of the bootstrap: for consecutive blocks of resamples (the block size depends
        only on ``K``, ``n`` and ``N``), ``rng.integers(0, n, size=(rows, n))``, then
        ``rng.integers(0, N, size=(rows, N))``.
    level, n_resamples, higher_is_better
        As in :func:`rank_sets`.

    Returns
    -------
    RankSets
        ``estimate`` is each arm's PPI++ estimate
        ``lam * mean(F) + mean(Y - lam * Yhat)`` with the arms' shared ``lam``
        (:func:`relgrade.evaluation.ppi.tune_lambda_shared`, as the ``jackknife``
        interval's arms).

    Raises
    ------
    InputError
        Shapes that disagree, fewer than 3 sample queries, a value that is not finite, a
        level outside (0, 1) or fewer than 100 resamples.

    Notes
    -----
    Each resample draws ``n`` sample queries and, independently, ``N`` model-graded
    queries with replacement, re-tunes the shared ``lambda`` on the resampled sample (so
    its tuning is counted) and recomputes every arm's estimate; the rank-sets follow by
    :func:`from_bootstrap`. The two parts are resampled independently, as the PPI++
    variance treats them (ppi-python's ``ppi_mean_ci`` and its bootstrap).
    """
    y = _matrix(human, "human-key values on the sample", 3)
    yhat = _matrix(model_sample, "model-key values on the sample", 3)
    f = _matrix(model_all, "model-key values on all queries", 3)
    if y.shape != yhat.shape or f.shape[0] != y.shape[0] or f.shape[1] < y.shape[1]:
        raise InputError("per-arm values need shapes (K, n), (K, n) and (K, N) with N >= n",
                         found=f"{y.shape}, {yhat.shape}, {f.shape}")
    lv, b = check_resampling(level, n_resamples)
    n, big_n = y.shape[1], f.shape[1]
    lam = tune_lambda_shared(y, yhat, f)
    est = lam * f.mean(axis=1) + (y - lam * yhat).mean(axis=1)
    boot = np.concatenate([_ppi_block(y, yhat, f, rng, rows)
                           for rows in resample_blocks(b, y.shape[0] * (n + big_n))])
    return from_bootstrap(est, boot, level=lv, higher_is_better=higher_is_better)


def _ppi_block(y, yhat, f, rng, rows: int) -> np.ndarray:
    """PPI++ estimates of every arm on ``rows`` resamples, shape (rows, K)."""
    n, big_n = y.shape[1], f.shape[1]
    si = rng.integers(0, n, size=(rows, n))
    fi = rng.integers(0, big_n, size=(rows, big_n))
    ys, xs = y[:, si], yhat[:, si]                                    # (K, B, n)
    fs = f[:, fi]                                                     # (K, B, N)
    fs_mean = fs.mean(axis=2)                                         # (K, B)
    lam_b = resampled_lambda(ys, xs, fs, fs_mean)
    return (lam_b * fs_mean + (ys - lam_b[None, :, None] * xs).mean(axis=2)).T    # (B, K)


def resampled_lambda(ys, xs, fs, fs_mean) -> np.ndarray:
    """The PPI++ weight shared by ``K`` rows, re-tuned on each of ``B`` resamples at once.

    :func:`relgrade.evaluation.ppi.tune_lambda_shared` vectorised over resamples (PPI++'s
    power tuning of one ``lambda`` for a vector estimand, Angelopoulos, Duchi and Zrnic
    2023, section 6).

    Parameters
    ----------
    ys, xs : numpy.ndarray of shape (K, B, n), float64
        Per row and resample, the human-key and model-key values on the resampled sample.
    fs : numpy.ndarray of shape (K, B, N), float64
        Per row and resample, the model-key values on the resampled model-graded queries.
    fs_mean : numpy.ndarray of shape (K, B), float64
        ``fs.mean(axis=2)`` (the caller needs it too).

    Returns
    -------
    numpy.ndarray of shape (B,), float64
        ``clip(sum_r cov(Y_r, Yhat_r) / ((1 + n/N) * sum_r var(Yhat_r u F_r)), 0, 1)`` per
        resample; 0 where every row's model-key values are constant.
    """
    n, big_n = ys.shape[2], fs.shape[2]
    cov = ((ys - ys.mean(axis=2, keepdims=True))
           * (xs - xs.mean(axis=2, keepdims=True))).mean(axis=2).sum(axis=0)       # (B,)
    tot = n + big_n
    s1 = xs.sum(axis=2) + fs_mean * big_n
    s2 = (xs ** 2).sum(axis=2) + (fs ** 2).sum(axis=2)
    var = ((s2 - s1 ** 2 / tot) / (tot - 1)).sum(axis=0)                           # (B,)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam_b = np.where(var > 0, cov / ((1.0 + n / big_n) * np.where(var > 0, var, 1.0)),
                         0.0)
    return np.clip(lam_b, 0.0, 1.0)


def table_rank_sets(per_query: pd.DataFrame, *, measure: str, rng: np.random.Generator,
                    level: float = 0.95, n_resamples: int = 1000, weights=None) -> dict:
    """Rank-sets of the arms of a long per-query table, for one measure, JSON-ready.

    Parameters
    ----------
    per_query : pandas.DataFrame
        Columns ``arm``, ``query_id``, ``measure``, ``value`` (the metrics stage's per-query
        files stacked); every arm needs a value for every query of ``measure``. Not modified.
    measure : str
        The measure ranked (higher is better).
    rng, level, n_resamples
        As in :func:`rank_sets`.
    weights : mapping of query id -> float, optional
        Traffic weight per query.

    Returns
    -------
    dict
        ``{"measure", "method", "queries"}`` and :meth:`RankSets.to_dict` over the arms in
        sorted order.

    Raises
    ------
    InputError
        A missing value (an arm without a query another arm has), a query without a
        weight, or as :func:`rank_sets`.
    """
    sub = per_query[per_query["measure"].astype(str) == measure]
    wide = sub.pivot_table(index=sub["arm"].astype(str), columns=sub["query_id"].astype(str),
                           values="value", aggfunc="first").sort_index().sort_index(axis=1)
    if wide.isna().to_numpy().any():
        arm = wide.index[wide.isna().any(axis=1)][0]
        raise InputError("per-query values missing", item=f"arm {arm}, measure {measure}",
                         fix="every arm needs a value for every query of a measure")
    return matrix_rank_sets(wide.to_numpy(dtype=np.float64), arms=list(wide.index),
                            query_ids=list(wide.columns), measure=measure, rng=rng,
                            level=level, n_resamples=n_resamples, weights=weights)


def matrix_rank_sets(values, *, arms, query_ids, measure: str, rng: np.random.Generator,
                     level: float = 0.95, n_resamples: int = 1000, weights=None) -> dict:
    """:func:`table_rank_sets` of one measure's values already laid out as a matrix.

    Parameters
    ----------
    values : numpy.ndarray of shape (K, Q), float64
        Arm ``k``'s value on query ``q`` (arms sorted, queries in code point order, as
        :func:`relgrade.evaluation.compare.compare_arms` holds them).
    arms : sequence of str, length K
    query_ids : sequence of str, length Q
    measure, rng, level, n_resamples, weights
        As in :func:`table_rank_sets`.

    Returns
    -------
    dict
        As :func:`table_rank_sets`.

    Raises
    ------
    InputError
        A query without a weight, or as :func:`rank_sets`.
    """
    w = None
    if weights is not None:
        ws = pd.Series(weights, dtype=np.float64)
        ws.index = ws.index.astype(str)
        missing = [q for q in query_ids if q not in ws.index]
        if missing:
            raise InputError("a query has no traffic weight", item=f"query {missing[0]}")
        w = ws.reindex(query_ids).to_numpy()
    r = rank_sets(values, rng=rng, level=level, n_resamples=n_resamples, weights=w)
    return {"measure": measure, "method": METHOD, "queries": int(len(query_ids))} | \
        r.to_dict(list(arms))
