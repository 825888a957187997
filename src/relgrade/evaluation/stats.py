"""Statistics over queries: bootstrap intervals, paired tests, effect size and power.

Every function here takes per-query values as numpy arrays: shape ``(n_queries,)`` for one
arm or one paired difference, ``(n_arms, n_queries)`` for several arms resampled together.
The query is the unit of resampling throughout (Efron & Tibshirani 1993; Sakai 2014).

Randomness
----------
Every random draw comes from a :class:`numpy.random.Generator` passed in by the caller,
built from params ``seed`` with :func:`relgrade.rng.comparison_rng`, whose sha256 byte
string names the purpose, so a number never depends on the order calls are made in or on how
many workers make them. :mod:`relgrade.evaluation.compare` does not draw per comparison: it
reads every comparison's resamples off one shared plan
(:mod:`relgrade.evaluation.resample`) and hands them to the functions here that take
resamples (:func:`interval_from_resamples`, :func:`bootstrap_p_value`).

How draws are laid out (a test pins this, so a change here is a change of the results):

* bootstrap: the query indices of each resample are ``rng.integers(0, n, size=n,
  dtype=np.int64)``, one resample after the other (the same stream scipy.stats.bootstrap
  draws). They are drawn in blocks of rows to bound memory; numpy draws the same stream
  whatever the block size.
* sign-flip permutations: each permutation takes ``ceil(n / 32)`` words of
  ``rng.integers(0, 2**32, dtype=np.uint32)``; query ``j`` changes sign when bit ``j % 32`` of
  word ``j // 32`` is set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import special
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import _resample

#: Elements (resamples x queries) drawn per block: 2**18 indices and their values take
#: 4 MB, small enough to stay in cache between drawing and gathering.
BLOCK_ELEMENTS = 1 << 18

#: 32-bit words drawn per block by the compiled bootstrap: 256 KB, reused by the allocator
#: (blocks of 1 MB and more cost a page fault per 4 KB, a third more CPU in all).
FAST_BLOCK_WORDS = 1 << 16

#: Queries with a non-zero difference up to which the sign-flip test enumerates every flip.
EXACT_MAX_N = 20

#: Relative tolerance under which a permuted statistic counts as tied with the observed one.
TIE_RTOL = 1e-9

#: Differences whose spread is at most this share of their size count as constant.
RTOL_CONSTANT = 1e-12


# --- input checks --------------------------------------------------------------------

def _as_values(values, what: str = "per-query values") -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim not in (1, 2):
        raise InputError(f"{what} must have shape (n_queries,) or (n_arms, n_queries)",
                         found=f"shape {v.shape}")
    if v.shape[-1] == 0:
        raise InputError(f"{what}: no queries", fix="check that the key and the runs share queries")
    if not np.isfinite(v).all():
        bad = int(np.flatnonzero(~np.isfinite(v).reshape(-1, v.shape[-1]).all(axis=0))[0])
        raise InputError(f"{what} must be finite numbers", item=f"query #{bad}",
                         found="NaN or infinity")
    return v


def _as_weights(weights, n: int) -> np.ndarray | None:
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,):
        raise InputError("query weights must have one value per query",
                         found=f"shape {w.shape} for {n} queries")
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise InputError("query weights must be finite and greater than 0",
                         found=f"min {np.nanmin(w)}")
    return w


# --- bootstrap -----------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """A bootstrap confidence interval for a (weighted) mean over queries.

    Attributes
    ----------
    estimate : float
        The mean over the observed queries.
    low, high : float
        The interval's bounds; ``low <= estimate <= high`` is not guaranteed for BCa.
    se : float
        Bootstrap standard error: the standard deviation (ddof 1) of the resampled means.
    level : float
        Confidence level, e.g. 0.95.
    method : str
        The method actually used: ``"bca"``, ``"percentile"`` or ``"degenerate"``.
    n : int
        Queries.
    n_resamples : int
        Bootstrap resamples drawn (0 when the data were degenerate).
    notes : tuple of str
        Why a fallback was taken, or what makes the interval special.
    clipped : bool
        The bounds were cut to the range the quantity can take (:func:`clip_to_range`).
    """

    estimate: float
    low: float
    high: float
    se: float
    level: float
    method: str
    n: int
    n_resamples: int
    notes: tuple = field(default_factory=tuple)
    clipped: bool = False

    def excludes_zero(self) -> bool:
        """True when the whole interval lies strictly on one side of 0."""
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict:
        """A JSON-ready dict (floats as Python floats, notes as a list)."""
        return {"estimate": float(self.estimate), "low": float(self.low),
                "high": float(self.high), "se": float(self.se), "level": float(self.level),
                "method": self.method, "n": int(self.n), "n_resamples": int(self.n_resamples),
                "notes": list(self.notes), "clipped": bool(self.clipped)}


def clip_to_range(ci: Interval, bounds) -> Interval:
    """``ci`` with its bounds cut to ``bounds``, the range its quantity can take.

    A mean of a measure whose per-query value lies in [0, 1] (nDCG, recall, RR ...) lies in
    [0, 1], and a difference of two such means in [-1, 1]; an interval reaching past that
    range claims values the quantity cannot take. The cut interval covers the truth whenever
    the uncut one does, so its coverage is the uncut interval's.

    Parameters
    ----------
    ci : Interval
    bounds : (float, float) or None
        The range (None: no range, ``ci`` returned as it is).

    Returns
    -------
    Interval
        ``ci`` itself when it lies within ``bounds``; else a copy with the bounds cut,
        ``clipped`` True and a note saying so.

    Examples
    --------
    >>> ci = Interval(0.9, 0.79, 1.012, 0.05, 0.95, "t", 12, 0)
    >>> c = clip_to_range(ci, (-1.0, 1.0))
    >>> c.low, c.high, c.clipped
    (0.79, 1.0, True)
    >>> clip_to_range(ci, None) is ci
    True
    """
    if bounds is None:
        return ci
    lo, hi = float(bounds[0]), float(bounds[1])
    low, high = max(ci.low, lo), min(ci.high, hi)
    if (low, high) == (ci.low, ci.high):
        return ci
    return replace(ci, low=low, high=high, clipped=True,
                   notes=ci.notes + (f"clipped to [{lo:g}, {hi:g}], the range the quantity "
                                     "can take (its coverage is the unclipped interval's)",))


def _block_rows(n: int, m: int = 1) -> int:
    return max(1, BLOCK_ELEMENTS // (n * m))


def bootstrap_means(values, *, rng: np.random.Generator, n_resamples: int,
                    weights=None) -> np.ndarray:
    """Means of bootstrap resamples of queries, drawn in memory-bounded blocks.

    Parameters
    ----------
    values : array-like of shape (n_queries,) or (n_arms, n_queries), float
        Per-query values; with two dimensions every arm is resampled with the same query
        indices (a paired resample).
    rng : numpy.random.Generator
        Source of the resample indices (see the module docstring for their layout).
    n_resamples : int
        Resamples to draw, at least 1.
    weights : array-like of shape (n_queries,), float, optional
        Positive traffic weights; the mean of a resample is then
        ``sum(w[i] * v[i]) / sum(w[i])`` over its indices ``i``.

    Returns
    -------
    numpy.ndarray of shape (n_resamples,) or (n_resamples, n_arms), float64
        Resample means, in draw order.

    Raises
    ------
    InputError
        ``values`` is empty, not finite, or of the wrong shape; a weight is not positive.

    Notes
    -----
    The numbers are those of drawing an index matrix of shape ``(rows, n_queries)`` per
    block, gathering the values and summing each row with numpy. With a PCG64 generator and
    at least ``_resample.COMPILED_MIN_ELEMENTS`` resampled values that is done in one compiled
    pass per resample (:mod:`relgrade.evaluation._resample`: the same words, indices and
    pairwise sums, no index matrix), about a third less CPU; otherwise numpy's path
    (:func:`_bootstrap_blocks`) is taken, with the same result.
    """
    v = _as_values(values)
    if int(n_resamples) < 1:
        raise InputError("bootstrap needs at least one resample", found=str(n_resamples))
    one = v.ndim == 1
    v2 = v[None, :] if one else v
    m, n = v2.shape
    w = _as_weights(weights, n)
    num_src = v2 if w is None else v2 * w[None, :]
    if _resample.available(rng, n, elements=int(n_resamples) * n * m):
        out = _resample.bootstrap_rows(num_src, w, rng, int(n_resamples),
                                       max(1, FAST_BLOCK_WORDS // n))
    else:
        out = _bootstrap_blocks(num_src, w, rng, int(n_resamples))
    return out[:, 0] if one else out


def _bootstrap_blocks(num_src: np.ndarray, w: np.ndarray | None, rng: np.random.Generator,
                      n_resamples: int) -> np.ndarray:
    """numpy's path of :func:`bootstrap_means`: shape (n_resamples, m), float64."""
    m, n = num_src.shape
    out = np.empty((n_resamples, m))
    rows = _block_rows(n)
    for start in range(0, n_resamples, rows):
        r = min(rows, n_resamples - start)
        idx = rng.integers(0, n, size=(r, n), dtype=np.int64)
        den = float(n) if w is None else w[idx].sum(axis=1)
        for i in range(m):
            out[start:start + r, i] = num_src[i][idx].sum(axis=1) / den
    return out


def jackknife_means(values, weights=None) -> np.ndarray:
    """Leave-one-query-out means, in closed form.

    Parameters
    ----------
    values : array-like of shape (n_queries,) or (n_arms, n_queries), float
    weights : array-like of shape (n_queries,), optional

    Returns
    -------
    numpy.ndarray of the same shape as ``values``
        Entry ``i`` is the (weighted) mean without query ``i``:
        ``(S - w_i v_i) / (W - w_i)`` with ``S = sum(w v)``, ``W = sum(w)`` (``w = 1``
        unweighted). With one query the result is the value itself.
    """
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[-1]
    if n < 2:
        return v.copy()
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    s = (v * w).sum(axis=-1, keepdims=True)
    return (s - v * w) / (w.sum() - w)


def weighted_mean(values, weights=None) -> float | np.ndarray:
    """Mean over the last axis, weighted by ``weights`` when given."""
    v = np.asarray(values, dtype=np.float64)
    if weights is None:
        return v.mean(axis=-1)
    w = np.asarray(weights, dtype=np.float64)
    return (v * w).sum(axis=-1) / w.sum()


def _percentile_of(boot: np.ndarray, x: float) -> float:
    """Share of ``boot`` below ``x``, ties counted half (as scipy.stats.bootstrap does)."""
    return float(((boot < x).sum() + (boot <= x).sum()) / (2.0 * boot.size))


def interval_from_resamples(boot, estimate: float, *, level: float = 0.95,
                            method: str = "bca", jackknife=None,
                            n: int | None = None) -> Interval:
    """A confidence interval from bootstrap resample means.

    Parameters
    ----------
    boot : array-like of shape (n_resamples,), float
        Resampled means (from :func:`bootstrap_means`).
    estimate : float
        The mean over the observed queries.
    level : float, default 0.95
        Confidence level in (0, 1).
    method : {"bca", "percentile"}, default "bca"
        ``"percentile"`` takes the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of
        ``boot``; ``"bca"`` adjusts those two levels for bias and skew.
    jackknife : array-like of shape (n_queries,), float, optional
        Leave-one-out means (from :func:`jackknife_means`); required for ``"bca"``.
    n : int, optional
        Queries behind the estimate (default: the length of ``jackknife``).

    Returns
    -------
    Interval
        With ``method`` set to what was used. BCa falls back to the percentile interval,
        with a note, when its bias correction or acceleration is undefined (every resample
        on one side of the estimate, or no spread among the jackknife means).

    Raises
    ------
    InputError
        ``level`` outside (0, 1) or an unknown ``method``.

    Notes
    -----
    Quantiles use numpy's default (linear interpolation between order statistics).
    BCa (Efron 1987, "Better bootstrap confidence intervals", JASA 82:171-185):
    ``z0 = Phi^-1(share of resamples below the estimate)`` (ties count half),
    ``a = sum((J - J_i)^3) / (6 * sum((J - J_i)^2)^1.5)`` with ``J_i`` the jackknife means
    and ``J`` their mean, and the interval takes the quantiles at
    ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` for ``z = Phi^-1((1 -+ level) / 2)``.
    This is the form scipy.stats.bootstrap uses.
    """
    boot = np.asarray(boot, dtype=np.float64)
    if not 0 < level < 1:
        raise InputError("confidence level must lie between 0 and 1", found=str(level))
    if method not in ("bca", "percentile"):
        raise InputError("unknown interval method (use bca or percentile)", found=method)
    alpha = (1 - level) / 2
    se = float(boot.std(ddof=1)) if boot.size > 1 else 0.0
    notes: list[str] = []
    probs = np.array([alpha, 1 - alpha])
    used = method
    if method == "bca":
        if jackknife is None:
            raise InputError("BCa needs the jackknife means")
        p0 = _percentile_of(boot, estimate)
        jk = np.asarray(jackknife, dtype=np.float64)
        dev = jk.mean() - jk
        den = 6.0 * float((dev ** 2).sum()) ** 1.5
        if p0 <= 0.0 or p0 >= 1.0:
            notes.append("BCa bias correction undefined (every resample on one side of the "
                         "estimate); percentile interval used")
            used = "percentile"
        elif den == 0.0:
            notes.append("BCa acceleration undefined (no spread among leave-one-out means); "
                         "percentile interval used")
            used = "percentile"
        else:
            z0 = special.ndtri(p0)
            a = float((dev ** 3).sum()) / den
            z = special.ndtri(probs)
            adj = special.ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))
            if not np.isfinite(adj).all():
                notes.append("BCa levels not finite; percentile interval used")
                used = "percentile"
            else:
                probs = adj
    low, high = np.quantile(boot, probs)
    if n is None:
        n = int(np.shape(jackknife)[-1]) if jackknife is not None else 0
    return Interval(float(estimate), float(low), float(high), se, float(level), used,
                    int(n), int(boot.size), tuple(notes))


def degenerate_interval(value: float, n: int, level: float) -> Interval:
    """The interval of ``n`` queries that all have ``value``: ``[value, value]``, SE 0, a note."""
    return Interval(float(value), float(value), float(value), 0.0, float(level),
                    "degenerate", int(n), 0,
                    (f"degenerate: all {n} queries have the same value {value:g}, so every "
                     "resample does; the interval has zero width and the standard error is 0",))


def bootstrap_ci(values, *, rng: np.random.Generator, n_resamples: int = 10_000,
                 level: float = 0.95, method: str = "bca", weights=None) -> Interval:
    """Bootstrap confidence interval for the (weighted) mean of per-query values.

    Parameters
    ----------
    values : array-like of shape (n_queries,), float
        One value per query (an arm's nDCG@10 per query, or a paired difference).
    rng : numpy.random.Generator
        Source of the resamples.
    n_resamples : int, default 10000
        Bootstrap resamples (params ``metrics.bootstrap``).
    level : float, default 0.95
        Confidence level (params ``metrics.level``).
    method : {"bca", "percentile"}, default "bca"
        See :func:`interval_from_resamples`.
    weights : array-like of shape (n_queries,), float, optional
        Positive traffic weights: the estimate and every resample are weighted means.

    Returns
    -------
    Interval
        When every query has the same value the interval is ``[v, v]`` with standard error
        0, method ``"degenerate"`` and a note; nothing is drawn.

    Raises
    ------
    InputError
        No queries, a value that is not finite, a weight that is not positive.

    Notes
    -----
    The percentile and BCa intervals of Efron (1987); see :func:`interval_from_resamples`.

    Examples
    --------
    >>> ci = bootstrap_ci([1.0] * 10, rng=np.random.default_rng(0))
    >>> (ci.low, ci.high, ci.se, ci.method)
    (1.0, 1.0, 0.0, 'degenerate')
    """
    v = _as_values(values)
    if v.ndim != 1:
        raise InputError("bootstrap_ci takes one value per query", found=f"shape {v.shape}")
    w = _as_weights(weights, v.size)
    est = float(weighted_mean(v, w))
    if v.min() == v.max():
        return degenerate_interval(float(v[0]), v.size, level)
    boot = bootstrap_means(v, rng=rng, n_resamples=n_resamples, weights=w)
    return interval_from_resamples(boot, est, level=level, method=method,
                                   jackknife=jackknife_means(v, w))


# --- the interval and the test by rule --------------------------------------------

#: Queries off the most common value from which :func:`difference_interval` and
#: :func:`mean_test` take the studentized bootstrap instead of Student's t (the rule's
#: threshold; benchmarks/coverage_intervals.py measures both sides of it).
BOOTSTRAP_T_MIN = 30

#: The interval methods a comparison can be asked for (params ``metrics.interval``).
METHODS = ("auto", "t", "bootstrap-t", "bca", "percentile")

#: The sentence every interval chosen by the rule carries.
RULE_NOTE = ("interval by relgrade's rule: Student t on the per-query values below "
             f"{BOOTSTRAP_T_MIN} queries off the most common value, the studentized bootstrap "
             "from there (benchmarks/README.md gives its measured coverage)")


def off_mode(values) -> int:
    """Queries whose value differs from the most common one (ties at 0 for differences).

    Parameters
    ----------
    values : array-like of shape (n_queries,), float

    Returns
    -------
    int
        ``n - max multiplicity``; ``n - 1`` for values that are all distinct, 0 for
        constant values. For paired differences with many ties at 0, the non-zero ones.

    Examples
    --------
    >>> off_mode([0.0, 0.0, 0.0, 0.1, -0.2, 0.1])
    3
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        return 0
    _, counts = np.unique(v, return_counts=True)
    return int(v.size - counts.max())


def nonzero(values) -> int:
    """How many values are not 0 (paired differences that carry information)."""
    return int(np.count_nonzero(np.asarray(values, dtype=np.float64)))


def standard_error(values, weights=None) -> float | np.ndarray:
    """Standard error of the (weighted) mean over the last axis.

    Parameters
    ----------
    values : array-like of shape (n_queries,) or (m, n_queries), float
    weights : array-like of shape (n_queries,), optional

    Returns
    -------
    float or numpy.ndarray of shape (m,)
        Unweighted, ``sd(v, ddof=1) / sqrt(n)``. Weighted, the linearised (ratio-estimator)
        standard error ``sqrt(n / (n - 1) * sum(w_i^2 (v_i - m)^2)) / sum(w)`` (Cochran
        1977, sec. 6.4), which is the unweighted one when every weight is equal. 0 for
        ``n < 2``.
    """
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[-1]
    if n < 2:
        return np.zeros(v.shape[:-1]) if v.ndim > 1 else 0.0
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    m = weighted_mean(v, w)
    dev = v - (m[..., None] if v.ndim > 1 else m)
    out = np.sqrt(n / (n - 1) * (w * w * dev * dev).sum(axis=-1)) / w.sum()
    return out if v.ndim > 1 else float(out)


def _studentized_sources(v2: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """Rows whose resampled (weighted) means give each resample's mean and standard error:
    ``[v, v^2]`` unweighted, ``[v, w v^2, w v, w, 1/w]`` weighted, per row of ``v2``."""
    if w is None:
        return np.vstack([v2, v2 * v2])
    return np.vstack([v2, v2 * v2 * w, v2 * w, np.broadcast_to(w, v2.shape),
                      np.broadcast_to(1.0 / w, v2.shape)])


def _studentized_from(means: np.ndarray, m: int, n: int, weighted: bool):
    """Split resampled means of :func:`_studentized_sources` rows into (means, se), each
    of shape (B, m)."""
    mu = means[:, :m]
    with np.errstate(all="ignore"):
        if not weighted:
            var = (means[:, m:2 * m] - mu * mu) * n / (n - 1) / n
        else:
            a, b, c, inv = (means[:, k * m:(k + 1) * m] for k in (1, 2, 3, 4))
            total_w = n / inv
            var = (a - 2 * mu * b + mu * mu * c) / total_w * n / (n - 1)
    return mu, np.sqrt(np.maximum(var, 0.0))


def studentized_resamples(values, *, rng: np.random.Generator, n_resamples: int,
                          weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap means with the t statistic of each resample (the studentized bootstrap).

    Parameters
    ----------
    values : array-like of shape (n_queries,) or (m, n_queries), float
        Per-query values; rows resampled with the same query indices.
    rng : numpy.random.Generator
        Source of the resamples: the same index stream as :func:`bootstrap_means`, so
        the resampled means are those :func:`bootstrap_means` draws.
    n_resamples : int
        Resamples, at least 1.
    weights : array-like of shape (n_queries,), optional
        Traffic weights (see :func:`standard_error`).

    Returns
    -------
    means : numpy.ndarray of shape (n_resamples,) or (n_resamples, m)
        Resampled (weighted) means.
    t : numpy.ndarray of the same shape
        ``(mean* - mean) / se*`` with ``se*`` :func:`standard_error` of the resample;
        ``+-inf`` when a resample has no spread but moved the mean, 0 when neither.

    Notes
    -----
    Efron & Tibshirani (1993), ch. 12.5 (bootstrap-t); Hall (1992), *The Bootstrap and
    Edgeworth Expansion*, sec. 3.5: its coverage error is O(1/n) two-sided-and-one-sided,
    against O(1/sqrt(n)) one-sided for the percentile and t intervals under skew.
    """
    v = _as_values(values)
    one = v.ndim == 1
    v2 = v[None, :] if one else v
    m, n = v2.shape
    w = _as_weights(weights, n)
    means = bootstrap_means(_studentized_sources(v2, w), rng=rng, n_resamples=n_resamples,
                            weights=w)
    mu, se = _studentized_from(means, m, n, w is not None)
    est = np.atleast_1d(weighted_mean(v2, w))
    with np.errstate(all="ignore"):
        t = (mu - est[None, :]) / se
    t[(se == 0) & (mu == est[None, :])] = 0.0
    return (mu[:, 0], t[:, 0]) if one else (mu, t)


def rule_method(values) -> str:
    """The method relgrade's rule takes for these per-query values: ``"t"`` or
    ``"bootstrap-t"`` (see :data:`BOOTSTRAP_T_MIN`)."""
    return "bootstrap-t" if off_mode(values) >= BOOTSTRAP_T_MIN else "t"


def t_interval(values, *, level: float = 0.95, weights=None) -> Interval:
    """Student's t interval of the (weighted) mean of per-query values.

    Parameters
    ----------
    values : array-like of shape (n_queries,), float, n >= 2
    level : float, default 0.95
    weights : array-like of shape (n_queries,), optional
        Traffic weights: the estimate is the weighted mean and the standard error the
        linearised one (:func:`standard_error`).

    Returns
    -------
    Interval
        ``mean -+ t_{n-1, (1 + level) / 2} * se``, method ``"t"``, ``n_resamples`` 0. With
        equal weights it is ``scipy.stats.t.interval(level, n - 1, mean, sem)``.

    Raises
    ------
    InputError
        Fewer than 2 queries, a value that is not finite, a weight that is not positive,
        ``level`` outside (0, 1).
    """
    v = _as_values(values)
    if v.ndim != 1 or v.size < 2:
        raise InputError("a t interval needs one value per query and at least 2 queries",
                         found=f"shape {v.shape}")
    if not 0 < level < 1:
        raise InputError("confidence level must lie between 0 and 1", found=str(level))
    w = _as_weights(weights, v.size)
    est = float(weighted_mean(v, w))
    se = float(standard_error(v, w))
    q = float(sps.t.ppf((1 + level) / 2, v.size - 1))
    return Interval(est, est - q * se, est + q * se, se, float(level), "t", int(v.size), 0)


def _bootstrap_t_interval(est: float, se: float, t: np.ndarray, level: float, n: int,
                          boot_means: np.ndarray) -> Interval:
    alpha = (1 - level) / 2
    finite = t[np.isfinite(t)]
    notes: tuple = ()
    if finite.size < t.size:
        notes = (f"{t.size - finite.size} of {t.size} resamples had no spread but a moved "
                 "mean (t infinite) and are left out of the t quantiles",)
    lo_q, hi_q = np.quantile(finite, [alpha, 1 - alpha])
    return Interval(est, float(est - hi_q * se), float(est - lo_q * se),
                    float(boot_means.std(ddof=1)), float(level), "bootstrap-t", int(n),
                    int(t.size), notes)


def difference_interval(values, *, rng: np.random.Generator, n_resamples: int = 10_000,
                        level: float = 0.95, weights=None, method: str = "auto") -> Interval:
    """The interval relgrade reports for a mean over queries, by its rule or by name.

    Parameters
    ----------
    values : array-like of shape (n_queries,), float
        Paired differences (or one arm's per-query values).
    rng : numpy.random.Generator
        Source of the resamples (unused by the t interval).
    n_resamples : int, default 10000
        Bootstrap resamples (params ``metrics.bootstrap``).
    level : float, default 0.95
    weights : array-like of shape (n_queries,), optional
    method : {"auto", "t", "bootstrap-t", "bca", "percentile"}, default "auto"
        ``"auto"`` is the rule: :func:`t_interval` while fewer than
        :data:`BOOTSTRAP_T_MIN` queries are off the most common value (:func:`off_mode`:
        the non-zero differences when ties sit at 0), else the studentized bootstrap
        ``[m - q_{1-a} se, m - q_a se]`` with ``q`` the quantiles of the resamples' t
        (:func:`studentized_resamples`).

    Returns
    -------
    Interval
        With ``method`` the one used (``"degenerate"`` for constant values); under the
        rule it carries :data:`RULE_NOTE`. ``se`` is the analytic standard error for
        ``"t"``, the resampled means' SD otherwise.

    Raises
    ------
    InputError
        As :func:`bootstrap_ci`, or an unknown ``method``.

    Notes
    -----
    Why this rule: benchmarks/coverage_intervals.py (results in benchmarks/README.md)
    measured, at nominal 95% over 1,000 samples per cell, BCa covering 84-92% of symmetric
    differences at 10-12 queries (with or without half of them tied at 0) while t holds
    95-98% there; with skewed differences from about 36 queries on, the studentized
    bootstrap covers closest to nominal (Hall 1992; Efron & Tibshirani 1993, ch. 12.5), but with few distinct
    values its resampled t is unstable, hence the threshold on the queries off the mode.
    """
    if method not in METHODS:
        raise InputError("unknown interval method", found=repr(method),
                         fix="use " + ", ".join(METHODS))
    v = _as_values(values)
    if v.ndim != 1:
        raise InputError("difference_interval takes one value per query",
                         found=f"shape {v.shape}")
    w = _as_weights(weights, v.size)
    if v.min() == v.max():
        return degenerate_interval(float(v[0]), v.size, level)
    used = rule_method(v) if method == "auto" else method
    notes = (RULE_NOTE,) if method == "auto" else ()
    if used == "t":
        ci = t_interval(v, level=level, weights=w)
    elif used == "bootstrap-t":
        boot, t = studentized_resamples(v, rng=rng, n_resamples=n_resamples, weights=w)
        ci = _bootstrap_t_interval(float(weighted_mean(v, w)), float(standard_error(v, w)),
                                   t, level, v.size, boot)
    else:
        ci = bootstrap_ci(v, rng=rng, n_resamples=n_resamples, level=level, method=used,
                          weights=w)
    return replace(ci, notes=notes + ci.notes)


@dataclass(frozen=True)
class MeanTest:
    """A two-sided test of "the mean difference over queries is 0".

    Attributes
    ----------
    p : float
        Two-sided p-value in (0, 1].
    method : str
        ``"t"`` (Student's t on the per-query differences), ``"bootstrap-t"``
        (symmetric studentized bootstrap), ``"exact-sign-flip"`` (constant non-zero
        differences) or ``"none"`` (every difference 0).
    statistic : float or None
        The t statistic (None when infinite).
    n_resamples : int
        Bootstrap resamples behind ``p`` (0 for ``"t"``).
    notes : tuple of str
    """

    p: float
    method: str
    statistic: float | None
    n_resamples: int = 0
    notes: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"p": float(self.p), "method": self.method, "statistic": self.statistic,
                "n_resamples": int(self.n_resamples), "notes": list(self.notes)}


def mean_test(differences, *, rng: np.random.Generator, n_permutations: int = 10_000,
              weights=None, method: str = "auto") -> MeanTest:
    """Two-sided test whose null is the stated one: the mean difference is 0.

    Parameters
    ----------
    differences : array-like of shape (n_queries,), float
        Per-query differences ``a - b``.
    rng : numpy.random.Generator
        Source of the bootstrap resamples (unused by the t test).
    n_permutations : int, default 10000
        Bootstrap resamples of the studentized test (params ``metrics.permutations``).
    weights : array-like of shape (n_queries,), optional
        Traffic weights (weighted mean, linearised standard error).
    method : {"auto", "t", "bootstrap-t"}, default "auto"
        ``"auto"``: the same rule as :func:`difference_interval`, so the test and the
        interval agree: Student's t below :data:`BOOTSTRAP_T_MIN` queries off the most
        common difference (:func:`off_mode`)
        (``p = 2 * sf_{t, n-1}(|m / se|)``, as ``scipy.stats.ttest_1samp``), else the
        symmetric bootstrap-t test ``p = (b + 1) / (B + 1)`` with ``b`` the resamples whose
        ``|t*| = |(m* - m) / se*|`` reaches ``|m / se|`` (Efron & Tibshirani 1993,
        sec. 16.4; Hall 1992, sec. 3.12).

    Returns
    -------
    MeanTest
        Every difference 0: ``p = 1``. Constant non-zero differences (no spread, t
        infinite): the exact sign-flip p-value ``2 / 2**n`` with a note.

    Raises
    ------
    InputError
        Differences empty or not finite, a weight not positive, an unknown ``method``.

    Notes
    -----
    The sign-flip randomization test (:func:`sign_flip_test`) tests that each difference
    is symmetric about 0; with skewed differences of mean 0 (rare large wins, many small
    losses) it rejects far more often than its level (benchmarks/README.md). Studentizing
    the sign-flip statistic does not help: ``sum(d_i^2)`` is the same under every sign
    pattern, so ``|t|`` orders the patterns as ``|sum(d)|`` does.

    Examples
    --------
    >>> d = np.array([0.1, -0.05, 0.2, 0.0, 0.15])
    >>> t = mean_test(d, rng=np.random.default_rng(0))
    >>> t.method, round(t.p, 4)
    ('t', 0.1596)
    """
    if method not in ("auto", "t", "bootstrap-t"):
        raise InputError("unknown mean test", found=repr(method),
                         fix="use auto, t or bootstrap-t")
    d = _as_values(differences, "paired differences")
    if d.ndim != 1:
        raise InputError("mean_test takes one difference per query", found=f"shape {d.shape}")
    w = _as_weights(weights, d.size)
    n = d.size
    if not d.any():
        return MeanTest(1.0, "none", 0.0, 0, ("no difference on any query",))
    if n < 2 or _constant(d):
        return MeanTest(2.0 ** (1 - n), "exact-sign-flip", None, 0,
                        (f"every query differs by {float(d.mean()):g}: no spread, the t "
                         "statistic is infinite; p is the exact sign-flip p-value 2/2^n",))
    used = rule_method(d) if method == "auto" else method
    est = float(weighted_mean(d, w))
    se = float(standard_error(d, w))
    t_obs = est / se
    if used == "t":
        p = float(2 * sps.t.sf(abs(t_obs), n - 1))
        return MeanTest(min(1.0, p), "t", t_obs, 0)
    _, t = studentized_resamples(d, rng=rng, n_resamples=n_permutations, weights=w)
    b = int((np.abs(t) >= abs(t_obs) * (1 - TIE_RTOL)).sum())
    return MeanTest((b + 1) / (t.size + 1), "bootstrap-t", t_obs, int(t.size))


def bootstrap_p_value(boot, estimate: float) -> float:
    """Two-sided bootstrap p-value for "the mean is 0", never 0.

    Parameters
    ----------
    boot : array-like of shape (n_resamples,), float
        Resampled means of the paired differences.
    estimate : float
        Observed mean difference.

    Returns
    -------
    float
        ``(b + 1) / (B + 1)`` with ``b = #{|boot - estimate| >= |estimate|}``: the resamples,
        shifted to have mean 0 under the null, that lie at least as far from 0 as the
        observed difference (Efron & Tibshirani 1993, sec. 16.4; Sakai 2006).
    """
    boot = np.asarray(boot, dtype=np.float64)
    tol = TIE_RTOL * max(abs(estimate), 1e-300)
    b = int((np.abs(boot - estimate) >= abs(estimate) - tol).sum())
    return (b + 1) / (boot.size + 1)


# --- paired randomization test -------------------------------------------------------

@dataclass(frozen=True)
class SignFlip:
    """Result of a paired sign-flip randomization test.

    Attributes
    ----------
    p : float
        Two-sided p-value, in (0, 1].
    method : str
        ``"exact"`` (every sign pattern enumerated) or ``"monte-carlo"``.
    n_permutations : int
        Sign patterns counted (``2**k`` when exact, with ``k`` the non-zero differences).
    extreme : int
        Patterns at least as extreme as the observed one.
    """

    p: float
    method: str
    n_permutations: int
    extreme: int

    def to_dict(self) -> dict:
        return {"p": float(self.p), "method": self.method,
                "n_permutations": int(self.n_permutations), "extreme": int(self.extreme)}


def _sign_tables(x: np.ndarray) -> np.ndarray:
    """Sum of x over each byte of 8 queries under every one of the 256 sign patterns."""
    n_words = -(-x.size // 32)
    padded = np.zeros(n_words * 32)
    padded[: x.size] = x
    blocks = padded.reshape(-1, 8)                       # (P, 8): byte p holds queries 8p..8p+7
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
    signs = 1.0 - 2.0 * bits                             # (256, 8): bit set means flipped
    table = np.zeros((blocks.shape[0], 256))
    for k in range(8):                                   # no BLAS: no helper threads spinning
        table += blocks[:, k:k + 1] * signs[None, :, k]
    return table                                         # (P, 256)


def sign_flip_test(differences, *, rng: np.random.Generator, n_permutations: int = 10_000,
                   weights=None, exact_max_n: int = EXACT_MAX_N) -> SignFlip:
    """Paired randomization test: flip the sign of each query's difference at random.

    Parameters
    ----------
    differences : array-like of shape (n_queries,), float
        Per-query differences ``a - b`` between two arms.
    rng : numpy.random.Generator
        Source of the random sign patterns (unused when the test is exact).
    n_permutations : int, default 10000
        Random sign patterns for the Monte Carlo test.
    weights : array-like of shape (n_queries,), float, optional
        Positive traffic weights; the statistic is then ``sum(w d s)``.
    exact_max_n : int, default 20
        Enumerate all ``2**k`` patterns when ``k``, the number of non-zero differences, is at
        most this.

    Returns
    -------
    SignFlip
        Exact: ``p = c / 2**k`` where ``c`` counts the patterns with ``|sum(w d s)| >=
        |sum(w d)|``; the observed pattern and its mirror always count, so ``p >= 2 / 2**k``.
        Monte Carlo: ``p = (b + 1) / (B + 1)`` (Phipson & Smyth 2010), never 0.

    Raises
    ------
    InputError
        Differences empty or not finite, weights not positive.

    Notes
    -----
    Under the null hypothesis that the two arms are exchangeable on every query, each
    difference is as likely to have either sign (Fisher's randomization test for paired
    data; Smucker, Allan & Carterette 2007, CIKM). Queries whose difference is 0 change
    nothing under a flip and double the numerator and the denominator alike, so they are left
    out of the enumeration. A permuted statistic within ``TIE_RTOL`` (relative to
    ``sum(|w d|)``) of the observed one counts as a tie, i.e. as extreme. Monte Carlo sums
    are computed per 8-query byte from a 256-entry table, so each pattern costs ``n / 8``
    lookups.

    Examples
    --------
    >>> a = np.array([0.5, 0.25, 0.75, 0.125, 0.375])
    >>> sign_flip_test(a - (a + 0.0625), rng=np.random.default_rng(0)).p
    0.0625
    """
    d = _as_values(differences, "paired differences")
    if d.ndim != 1:
        raise InputError("sign_flip_test takes one difference per query", found=f"shape {d.shape}")
    w = _as_weights(weights, d.size)
    x = d if w is None else d * w
    x = x[x != 0.0]
    if x.size == 0:
        return SignFlip(1.0, "exact", 1, 1)
    tol = TIE_RTOL * float(np.abs(x).sum())
    if x.size <= exact_max_n:
        sums = np.zeros(1)
        for xi in x:
            sums = np.concatenate([sums + xi, sums - xi])
        observed = abs(float(x.sum()))
        c = int((np.abs(sums) >= observed - tol).sum())
        return SignFlip(c / sums.size, "exact", int(sums.size), c)
    table = _sign_tables(x)
    n_bytes = table.shape[0]
    flat = table.ravel()
    offsets = (np.arange(n_bytes, dtype=np.intp) * 256)[None, :]
    observed = abs(float(table[:, 0].sum()))
    n_words = n_bytes // 4
    rows = _block_rows(n_bytes)
    b = 0
    kernels = _resample.kernels_for(int(n_permutations) * n_bytes)
    for start in range(0, int(n_permutations), rows):
        r = min(rows, int(n_permutations) - start)
        words = rng.integers(0, 2 ** 32, size=(r, n_words), dtype=np.uint32)
        byte = words.astype("<u4", copy=False).view(np.uint8).reshape(r, n_bytes)
        if kernels is not None:  # the same lookups and pairwise sums, compiled
            b += int(kernels[2](byte, table, observed - tol))
            continue
        s = np.take(flat, byte.astype(np.intp) + offsets).sum(axis=1)
        b += int((np.abs(s) >= observed - tol).sum())
    return SignFlip((b + 1) / (int(n_permutations) + 1), "monte-carlo", int(n_permutations), b)


# --- t test, effect size ------------------------------------------------------------

@dataclass(frozen=True)
class TTest:
    """A paired t test.

    Attributes
    ----------
    t : float or None
        The t statistic; ``None`` when it is infinite (every query moved by the same non-zero
        amount), see ``infinite`` and ``notes``.
    df : int
        Degrees of freedom, ``n - 1``.
    p : float or None
        Two-sided p-value; ``None`` when ``t`` is infinite or ``n < 2``.
    infinite : bool
        True when the differences have zero variance and a non-zero mean.
    notes : tuple of str
    """

    t: float | None
    df: int
    p: float | None
    infinite: bool = False
    notes: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"t": self.t, "df": self.df, "p": self.p, "infinite": self.infinite,
                "notes": list(self.notes)}


def _constant(d: np.ndarray) -> bool:
    """True when the values are equal up to floating-point rounding of their size."""
    return float(d.max() - d.min()) <= RTOL_CONSTANT * float(np.abs(d).max())


def paired_t_test(a, b) -> TTest:
    """Paired two-sided t test of ``mean(a - b) = 0`` (scipy.stats.ttest_rel).

    Parameters
    ----------
    a, b : array-like of shape (n_queries,), float
        Per-query values of two arms on the same queries, in the same order.

    Returns
    -------
    TTest
        Zero variance is handled before scipy: all differences 0 gives ``t = 0, p = 1``;
        a constant non-zero difference gives ``infinite=True`` with ``t`` and ``p`` set to
        None and a note, because no finite t or meaningful p exists. Differences whose
        spread is within rounding (``max - min <= 1e-12 * max|d|``, as in ``(a + 0.05) -
        a``) count as constant.

    Raises
    ------
    InputError
        Shapes differ, or a value is not finite.

    Notes
    -----
    ``t = mean(d) / (sd(d) / sqrt(n))``, ``sd`` with ``ddof=1``, ``df = n - 1`` (Student
    1908); the normality it assumes is mild for means over hundreds of queries (Sakai 2014).
    """
    a = _as_values(a)
    b = _as_values(b)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError("paired values must have the same shape (n_queries,)",
                         found=f"{a.shape} and {b.shape}")
    d = a - b
    n = d.size
    if n < 2:
        return TTest(None, 0, None, False, ("t test needs at least 2 queries",))
    if _constant(d):
        if not d.any():
            return TTest(0.0, n - 1, 1.0, False, ("no difference on any query",))
        return TTest(None, n - 1, None, True,
                     (f"t statistic infinite: every query differs by {float(d.mean()):g}, so "
                      "the differences have no variance and the t test does not apply; rely "
                      "on the randomization test",))
    res = sps.ttest_rel(a, b)
    return TTest(float(res.statistic), n - 1, float(res.pvalue))


def cohens_dz(differences) -> float | None:
    """Cohen's d_z for paired data: ``mean(d) / sd(d)`` (ddof 1).

    Parameters
    ----------
    differences : array-like of shape (n_queries,), float

    Returns
    -------
    float or None
        0.0 when every difference is 0; None when the differences are constant and non-zero
        (the ratio is infinite; constant up to rounding counts) or there is a single query.

    Notes
    -----
    Cohen (1988), *Statistical Power Analysis for the Behavioral Sciences*, sec. 2.3;
    ``d_z = t / sqrt(n)`` for the paired t statistic.
    """
    d = _as_values(differences, "paired differences")
    if d.size < 2:
        return None
    if _constant(d):
        return 0.0 if not d.any() else None
    return float(d.mean()) / float(d.std(ddof=1))


# --- power ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Power:
    """How much a query set can detect.

    Attributes
    ----------
    n : int
        Queries now.
    se : float
        Bootstrap standard error of the mean (difference) at ``n`` queries.
    reference : float
        The mean the relative change is taken of.
    relative_change : float
        Relative change to detect (params ``metrics.min_relative_change``).
    target : float
        ``relative_change * |reference|``: the absolute difference to detect.
    detectable : float or None
        Smallest true difference detected with probability ``power`` at ``n`` queries;
        None when the spread rests on too few non-zero differences.
    power_now : float or None
        Probability of detecting ``target`` at ``n`` queries.
    n_needed : int or None
        Queries needed to detect ``target`` with probability ``power``; None (with a note)
        when undefined.
    power, alpha : float
    notes : tuple of str
    """

    n: int
    se: float
    reference: float
    relative_change: float
    target: float
    detectable: float | None
    power_now: float | None
    n_needed: int | None
    power: float
    alpha: float
    notes: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"n": self.n, "se": self.se, "reference": self.reference,
                "relative_change": self.relative_change, "target": self.target,
                "detectable": self.detectable, "power_now": self.power_now,
                "n_needed": self.n_needed, "power": self.power, "alpha": self.alpha,
                "notes": list(self.notes)}


#: The start of the note a power estimate carries when its spread rests on too few
#: non-zero differences (the report's "cannot yet tell" sentence reads it).
THIN_SPREAD = "the set cannot yet tell"


def power_analysis(*, se: float, n: int, reference: float, relative_change: float = 0.02,
                   power: float = 0.8, alpha: float = 0.05, nonzero: int | None = None,
                   min_nonzero: int = 0) -> Power:
    """Queries needed to detect a relative change, from the bootstrap standard error at n.

    Parameters
    ----------
    se : float
        Bootstrap standard error of the mean paired difference (or, before a second arm
        exists, of the arm's mean) at ``n`` queries.
    n : int
        Queries the standard error was measured on.
    reference : float
        The mean the change is relative to (the baseline arm's mean).
    relative_change : float, default 0.02
        The change to detect, as a share of ``reference`` (params
        ``metrics.min_relative_change``).
    power : float, default 0.8
        Probability of detecting it (params ``metrics.power``).
    alpha : float, default 0.05
        Two-sided significance level (params ``metrics.alpha``).
    nonzero : int, optional
        Non-zero differences (queries off the most common value, for an arm) the standard
        error rests on.
    min_nonzero : int, default 0
        Below this many (params ``metrics.power_min_nonzero``) no power, detectable
        difference or query count is given: ``detectable``, ``power_now`` and ``n_needed``
        are None and a note starting with :data:`THIN_SPREAD` says why. A spread read off
        2 non-zero differences of 12 says little about the next query set.

    Returns
    -------
    Power

    Raises
    ------
    InputError
        ``power`` or ``alpha`` outside (0, 1), ``n < 1``, ``se < 0`` or ``relative_change <= 0``.

    Notes
    -----
    The standard error of a mean over queries shrinks as ``1 / sqrt(n)``, so at ``m``
    queries it is ``se * sqrt(n / m)``. A two-sided z test at level ``alpha`` detects a true
    difference ``delta`` with probability about ``Phi(delta / se_m - z_{1-alpha/2})``.
    Hence, with ``z = z_{1-alpha/2} + z_{power}``:

    * detectable difference at ``n``: ``z * se``;
    * queries needed for ``target = relative_change * |reference|``:
      ``m = ceil(n * (z * se / target)^2)``.

    This is the normal-approximation sample-size formula for a paired test (Cohen 1988,
    ch. 2; Sakai 2016, "Topic set size design", Inf. Retrieval J. 19:256-283), fed with the
    measured bootstrap standard error instead of an assumed variance.

    Examples
    --------
    >>> p = power_analysis(se=0.01, n=100, reference=0.5, relative_change=0.02)
    >>> p.n_needed  # 100 * ((1.959964 + 0.841621) * 0.01 / 0.01) ** 2 = 784.9
    785
    """
    if not (0 < power < 1 and 0 < alpha < 1):
        raise InputError("power and alpha must lie between 0 and 1",
                         found=f"power {power}, alpha {alpha}")
    if int(n) < 1 or se < 0 or not math.isfinite(se):
        raise InputError("power needs n >= 1 and a finite standard error >= 0",
                         found=f"n {n}, se {se}")
    if relative_change <= 0:
        raise InputError("the relative change to detect must be greater than 0",
                         found=str(relative_change))
    z_a = float(special.ndtri(1 - alpha / 2))
    z = z_a + float(special.ndtri(power))
    target = relative_change * abs(reference)
    notes: list[str] = []
    if nonzero is not None and int(nonzero) < int(min_nonzero):
        notes.append(f"{THIN_SPREAD} how many queries a {relative_change:.0%} change needs: "
                     f"the spread rests on {int(nonzero)} non-zero difference"
                     f"{'' if int(nonzero) == 1 else 's'} of {int(n)} queries, fewer than "
                     f"metrics.power_min_nonzero ({int(min_nonzero)})")
        return Power(int(n), float(se), float(reference), float(relative_change),
                     float(target), None, None, None, float(power), float(alpha),
                     tuple(notes))
    detectable = z * se
    power_now: float | None
    n_needed: int | None
    if target == 0.0:
        notes.append("reference mean is 0, so a relative change is 0: query count undefined")
        power_now, n_needed = None, None
    elif se == 0.0:
        notes.append("standard error is 0 (no spread across queries): query count undefined; "
                     "a set this uniform cannot tell how much more data it needs")
        power_now, n_needed = None, None
    else:
        power_now = float(special.ndtr(target / se - z_a))
        n_needed = int(math.ceil(n * (z * se / target) ** 2 - 1e-9))
    return Power(int(n), float(se), float(reference), float(relative_change), float(target),
                 float(detectable), power_now, n_needed, float(power), float(alpha),
                 tuple(notes))
