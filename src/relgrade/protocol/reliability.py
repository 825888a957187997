"""Confidence intervals for agreement statistics, with the query as the unit.

A kappa computed on 200 audited pairs of 10 queries is an estimate; how far it could move
with another sample decides whether it clears a band (see :mod:`relgrade.protocol.bands`).
The audit samples *queries*, and how often two graders disagree varies from query to query
(an ambiguous intent splits them on most of its pairs), so the pairs of one query are not
independent draws. Each function here therefore treats the sampling unit as the unit:
given ``clusters`` (one query id per judged pair), every pair of a query stays with it.

The interval is the delete-one-query *jackknife t* interval on a transformed scale
(:func:`jackknife_t`): the statistic is recomputed without each query in turn, their
spread gives the jackknife standard error (Efron & Tibshirani 1993, ch. 11), and the
interval is ``theta -/+ t_{g - 1} * se`` with ``g`` the number of queries, built on Fisher's
z (``atanh``) for kappas and alpha and on the arcsine root for the disagreement shares, and
mapped back, so its ends stay inside the statistic's range and follow its skew near the
bounds. benchmarks/coverage_intervals.py measures it with 10 audited queries, 1,000
replicates per setting: 95% nominal covers 93.4-96.1% for the kappas, alpha and the
disagreement however much the disagreement rate varies between queries (94.2-95.2% when it
is constant) and 97.3-98.5% for the rare two-step disagreement, where the cluster
bootstrap's expanded percentile interval (Hesterberg 2015) it replaced covered 90.3-94.9%
and resampling pairs 52-69% under strong variation (see benchmarks/README.md). When the statistic or a
leave-one-query-out value is undefined or infinite on that scale (a query without which
every pair got one grade; a kappa of exactly 1), the interval falls back to that cluster
bootstrap: whole queries drawn with replacement ``resamples`` times from a seeded
:class:`numpy.random.Generator` (Davison & Hinkley 1997, sec. 3.8; Field & Welsh 2007) and
the quantiles read at ``Phi(-/+ sqrt(g / (g - 1)) * t_{g-1, (1 + level) / 2})``; the
interval's ``method`` says which was used.
Without ``clusters`` every item is its own unit (judged pairs independent), the items are
resampled and the plain percentile interval is returned (Efron & Tibshirani 1993, ch. 13).

The statistics are recomputed from per-item sufficient tables, so one resample is a
weighted sum, not a new pass over the grades:

* Cohen's kappa (unweighted, linear or quadratic weights) from the per-pair cell of the
  two raters' confusion matrix;
* Fleiss' kappa from the per-pair rating counts;
* Krippendorff's alpha from the per-pair coincidence matrices (any level of measurement).

A resample on which the statistic is undefined (chance agreement 1, no disagreement
expected) is counted and left out of the percentiles, never read as 0.

R. A. Fisher, "On the probable error of a coefficient of correlation deduced from a small
sample", Metron 1, 1921 (the z scale). The arcsine root is the variance-stabilising scale of
a proportion (Anscombe 1948).

References
----------
B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993.
J. Cohen, "Weighted kappa", Psychological Bulletin 70(4), 1968.
J. L. Fleiss, "Measuring nominal scale agreement among many raters", Psychological
Bulletin 76(5), 1971.
A. C. Davison and D. V. Hinkley, *Bootstrap Methods and their Application*, Cambridge, 1997.
C. A. Field and A. H. Welsh, "Bootstrapping clustered data", JRSS B 69(3), 2007.
T. C. Hesterberg, "What teachers should know about the bootstrap", The American
Statistician 69(4), 2015.
K. Krippendorff, "Computing Krippendorff's Alpha-Reliability", University of Pennsylvania,
2011.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from relgrade.errors import InputError

#: How many resamples are drawn at once (bounds memory at ``block * n_items`` integers).
_BLOCK = 256

#: Levels of measurement of Krippendorff's alpha this module computes.
LEVELS = ("nominal", "ordinal", "interval", "ratio")


#: The resampling unit recorded with a clustered interval, and with one over items.
UNIT_QUERY = "query"
UNIT_PAIR = "pair"


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval of one statistic.

    Attributes
    ----------
    low, high : float or None
        The interval's ends: the jackknife t interval's (clustered), else quantiles of the
        defined resample values (see :func:`quantile_levels`); ``None`` when no resample
        is defined, and when there is a single query (no between-query spread to read).
    resamples : int
        Resamples drawn (0 for a jackknife t interval, which draws none).
    undefined : int
        Resamples on which the statistic is undefined, left out of the quantiles.
    unit : str
        What was resampled: ``"query"`` (whole queries, their pairs kept together) or
        ``"pair"`` (judged pairs, each on its own).
    units : int
        How many units there were to resample.
    method : str
        ``"jackknife-t"`` (clustered), ``"expanded-percentile"`` (clustered, when the
        jackknife is undefined) or ``"percentile"`` (pairs).
    """

    low: float | None
    high: float | None
    resamples: int
    undefined: int
    unit: str = UNIT_PAIR
    units: int = 0
    method: str = "percentile"

    def to_dict(self) -> dict:
        """``{"low", "high", "undefined_resamples", "resample_unit", "units", "method"}``,
        JSON-ready."""
        return {"low": self.low, "high": self.high, "undefined_resamples": self.undefined,
                "resample_unit": self.unit, "units": int(self.units), "method": self.method}


def quantile_levels(level: float, units: int, *, expanded: bool) -> tuple[float, float]:
    """The two quantile levels an interval reads from its resamples.

    Parameters
    ----------
    level : float
        Confidence level in (0, 1).
    units : int
        Independent units resampled (queries).
    expanded : bool
        The expanded percentile interval (Hesterberg 2015) when True, else the plain one.

    Returns
    -------
    tuple of float
        Plain: ``((1 - level) / 2, (1 + level) / 2)``. Expanded, for ``units >= 2``:
        ``(Phi(-c), Phi(c))`` with ``c = sqrt(units / (units - 1)) * t_{units - 1,
        (1 + level) / 2}``; with one unit the plain levels (no spread to expand).

    Examples
    --------
    >>> [round(x, 4) for x in quantile_levels(0.95, 10, expanded=True)]
    [0.0086, 0.9914]
    """
    if not expanded or units < 2:
        return (1 - level) / 2, (1 + level) / 2
    from scipy import special
    from scipy import stats as sps

    c = math.sqrt(units / (units - 1)) * float(sps.t.ppf((1 + level) / 2, units - 1))
    return float(special.ndtr(-c)), float(special.ndtr(c))


@dataclass(frozen=True)
class Resampling:
    """How agreement intervals are drawn: the seed, the resample count and the level.

    Attributes
    ----------
    seed : int
        The seed of every interval's generator, ``numpy.random.default_rng(seed)``: each
        statistic is resampled from a fresh generator with this seed, so statistics over
        the same items see the same resamples. A stage derives it from params ``seed``
        (see :func:`relgrade.rng.derive_seed`) and records it.
    resamples : int
        Bootstrap resamples, >= 1 (params ``agreement.bootstrap``).
    level : float
        Confidence level in (0, 1) (params ``agreement.level``).
    """

    seed: int
    resamples: int
    level: float

    def __post_init__(self):
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or self.seed < 0:
            raise InputError("the bootstrap seed must be a non-negative integer",
                             found=repr(self.seed))
        _check(self.resamples, self.level)

    def rng(self) -> np.random.Generator:
        """A fresh generator for one statistic's resamples."""
        return np.random.default_rng(int(self.seed))

    def to_dict(self) -> dict:
        """What to record beside the intervals: seed, resamples (the fallback's), level,
        method, unit."""
        return {"seed": int(self.seed), "resamples": int(self.resamples),
                "level": float(self.level), "method": METHOD_CLUSTERED,
                "resample_unit": UNIT_QUERY,
                "unit": "query: the audited queries are the units (left out one at a time "
                        "by the jackknife, drawn with replacement by the fallback "
                        "bootstrap), the judged pairs of a query kept together"}


def _check(resamples: int, level: float) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) \
            or resamples < 1:
        raise InputError("the number of bootstrap resamples must be a positive integer",
                         found=repr(resamples))
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError("the confidence level must lie in (0, 1)", found=repr(level))


def _weights(n_items: int, rng: np.random.Generator, size: int) -> np.ndarray:
    """Multiplicities of each item in ``size`` resamples: shape (size, n_items), int64."""
    idx = rng.integers(0, n_items, size=(size, n_items))
    flat = idx + (np.arange(size) * n_items)[:, None]
    return np.bincount(flat.ravel(), minlength=size * n_items).reshape(size, n_items)


def _row_patterns(per_item: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(codes, patterns)`` with ``per_item == patterns[codes]``, when every value of
    ``per_item`` is an integer small enough that any sum of its rows is exact in float64;
    else None.

    Agreement rows take a handful of distinct values (a kappa row is one-hot over the k×k
    cells, an alpha row two raters' coincidences), so a resample's sums are the counts of
    each pattern among the drawn items times the patterns: integers either way, so the same
    floats as the weights-matrix product.
    """
    if per_item.ndim != 2 or per_item.shape[0] == 0 or per_item.shape[1] == 0:
        return None
    if not np.all(np.isfinite(per_item)) or not np.all(per_item == np.rint(per_item)):
        return None
    if float(np.abs(per_item).max()) * per_item.shape[0] * 2 >= 2.0 ** 53:
        return None
    patterns, codes = np.unique(per_item, axis=0, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), patterns


def cluster_sums(per_item: np.ndarray, clusters) -> np.ndarray:
    """Rows of ``per_item`` summed per cluster, clusters in sorted order.

    Parameters
    ----------
    per_item : numpy.ndarray of shape (n_items, m), float
    clusters : array-like of shape (n_items,)
        The unit of each item (a query id).

    Returns
    -------
    numpy.ndarray of shape (n_clusters, m), float

    Raises
    ------
    InputError
        ``clusters`` does not have one entry per item.
    """
    code, n_clusters = cluster_codes(clusters, per_item.shape[0])
    out = np.zeros((n_clusters, per_item.shape[1]))
    np.add.at(out, code, per_item)
    return out


def cluster_codes(clusters, n_items: int) -> tuple[np.ndarray, int]:
    """Each item's cluster as its rank among the distinct clusters read as text (the
    order of :func:`cluster_sums`' rows), and how many clusters there are.

    Parameters
    ----------
    clusters : array-like of shape (n_items,)
        The unit of each item (a query id); a text array is read as it is (no copy).
    n_items : int

    Returns
    -------
    tuple
        ``(code, n_clusters)``: ``code`` of shape (n_items,), int64, in
        ``[0, n_clusters)``.

    Raises
    ------
    InputError
        ``clusters`` does not have ``n_items`` entries.
    """
    c = np.asarray(clusters)
    if c.dtype.kind != "U":
        c = c.astype(str)
    if c.shape != (n_items,):
        raise InputError("the clusters must name one unit per judged pair",
                         found=f"{c.size} units for {n_items} pairs")
    if not c.size:
        return np.zeros(0, dtype=np.int64), 0
    _, code = np.unique(c, return_inverse=True)
    code = code.reshape(-1).astype(np.int64, copy=False)
    return code, int(code.max()) + 1


#: The method of a clustered interval (see :func:`jackknife_t`), and its fallback.
METHOD_CLUSTERED = "jackknife-t"
METHOD_FALLBACK = "expanded-percentile"


def fisher_z(x):
    """Fisher's z, ``atanh(x)``: the scale a kappa or alpha's jackknife t interval is built on."""
    with np.errstate(all="ignore"):
        return np.arctanh(np.asarray(x, dtype=float))


def arcsine_root(p):
    """``asin(sqrt(p))``: the scale a share's jackknife t interval is built on."""
    with np.errstate(all="ignore"):
        return np.arcsin(np.sqrt(np.asarray(p, dtype=float)))


#: Each transform's inverse, mapping the interval's ends back (an arcsine-root end beyond
#: [0, pi/2] is a share end beyond [0, 1], so it is clipped there first).
_INVERSE = {fisher_z: np.tanh,
            arcsine_root: lambda y: np.sin(np.clip(y, 0.0, math.pi / 2)) ** 2}


def jackknife_t(per_unit: np.ndarray, stat, *, level: float, transform) -> tuple | None:
    """Delete-one-unit jackknife t interval of ``stat`` on a transformed scale.

    With ``g`` units (queries), ``h = transform``, ``theta_(j)`` the statistic without
    unit ``j`` and ``hbar`` the mean of ``h(theta_(j))``::

        se = sqrt((g - 1) / g * sum_j (h(theta_(j)) - hbar) ** 2)
        interval = h^-1(h(theta) -/+ t_{g - 1, (1 + level) / 2} * se)

    (Quenouille-Tukey jackknife standard error, Efron & Tibshirani 1993 ch. 11; Student's t
    on ``g - 1`` degrees of freedom as for a mean over ``g`` units; Fisher's z for kappas
    and alpha, the arcsine root for shares, so the ends stay inside the statistic's range:
    a share's ends are clipped to [0, 1].)

    Examples
    --------
    Three queries with 1, 2 and 3 disagreements in 4 pairs each: the share is 6/12; left
    out one at a time 5/8, 4/8, 3/8.

    >>> per_query = np.array([[1.0, 4.0], [2.0, 4.0], [3.0, 4.0]])
    >>> low, high = jackknife_t(per_query, lambda t: t[:, 0] / t[:, 1], level=0.9,
    ...                         transform=arcsine_root)
    >>> round(low, 4), round(high, 4)
    (0.1237, 0.8763)

    Parameters
    ----------
    per_unit : numpy.ndarray of shape (g, m), float
        Each unit's sufficient sums; ``g >= 2``.
    stat : callable
        ``stat(sums)`` for sums of shape (B, m): the statistic, shape (B,), NaN when
        undefined.
    level : float
        Confidence level in (0, 1).
    transform : {fisher_z, arcsine_root}

    Returns
    -------
    tuple of float or None
        ``(low, high)``; None when the statistic, or any unit's leave-one-out value, is
        undefined or infinite on the transformed scale (a kappa of exactly 1, say): the
        caller then falls back to the expanded percentile interval.
    """
    g = per_unit.shape[0]
    total = per_unit.sum(axis=0)
    theta = transform(stat(total[None, :]))[0]
    loo = transform(stat(total[None, :] - per_unit))
    if not np.isfinite(theta) or not np.all(np.isfinite(loo)):
        return None
    se = math.sqrt((g - 1) / g * float(((loo - loo.mean()) ** 2).sum()))
    from scipy import stats as sps
    q = float(sps.t.ppf((1 + level) / 2, g - 1))
    inv = _INVERSE[transform]
    return float(inv(theta - q * se)), float(inv(theta + q * se))


def _bootstrap(per_item: np.ndarray, stat, *, rng: np.random.Generator, resamples: int,
               level: float, clusters=None, transform=None) -> Interval:
    """Interval of ``stat(sums)`` where ``sums = weights @ per_unit``.

    With ``clusters`` the units are the clusters (their items' rows summed: every statistic
    here is a function of sums, so a query contributes all its pairs) and the interval is
    the jackknife t one on the ``transform`` scale (:func:`jackknife_t`; no resamples
    drawn), or, when that is undefined, the expanded percentile one over resampled
    queries; without, the items are resampled and the plain percentile read.
    """
    _check(resamples, level)
    if clusters is not None:
        per_item = cluster_sums(per_item, clusters)
    return _of_units(per_item, stat, rng=rng, resamples=resamples, level=level,
                     clustered=clusters is not None, transform=transform)


def _of_units(per_item: np.ndarray, stat, *, rng: np.random.Generator, resamples: int,
              level: float, clustered: bool, transform=None) -> Interval:
    """:func:`_bootstrap` of units' rows already summed per cluster (``clustered``) or of
    items; ``resamples`` and ``level`` already checked."""
    unit = UNIT_QUERY if clustered else UNIT_PAIR
    method = METHOD_CLUSTERED if clustered else "percentile"
    n = per_item.shape[0]
    if n == 0 or (clustered and n == 1):
        # one query: every resample is that query, so nothing measures how another
        # query would differ; no interval rather than one of zero width
        return Interval(None, None, int(resamples), int(resamples), unit, n, method)
    if clustered:
        ends = jackknife_t(per_item, stat, level=level, transform=transform)
        if ends is not None:
            return Interval(ends[0], ends[1], 0, 0, unit, n, method)
        method = METHOD_FALLBACK
    values = []
    done = 0
    grouped = _row_patterns(per_item)
    while done < resamples:
        size = min(_BLOCK, resamples - done)
        if grouped is None:
            w = _weights(n, rng, size).astype(float)
            values.append(stat(w @ per_item))
        else:
            # the same draws counted per row pattern: the same integer sums as
            # weights @ per_item, without the (size, n) weights matrix (which outgrew the
            # caches on large audits)
            codes, patterns = grouped
            idx = rng.integers(0, n, size=(size, n))
            k = patterns.shape[0]
            flat = codes[idx] + (np.arange(size) * k)[:, None]
            counts = np.bincount(flat.ravel(), minlength=size * k).reshape(size, k)
            values.append(stat(counts.astype(float) @ patterns))
        done += size
    v = np.concatenate(values)
    ok = v[np.isfinite(v)]
    undefined = int(v.size - ok.size)
    if ok.size == 0:
        return Interval(None, None, int(resamples), undefined, unit, n, method)
    low, high = np.quantile(ok, quantile_levels(level, n, expanded=clustered))
    return Interval(float(low), float(high), int(resamples), undefined, unit, n, method)


# --- Cohen's kappa ---------------------------------------------------------------------

def _disagreement_weights(k: int, weights: str | None) -> np.ndarray:
    i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    if weights is None:
        return (i != j).astype(float)
    if weights == "linear":
        return np.abs(i - j).astype(float)
    if weights == "quadratic":
        return ((i - j) ** 2).astype(float)
    raise InputError("unknown kappa weights", found=repr(weights),
                     fix="Use None, 'linear' or 'quadratic'")


def _kappa_of_tables(tables: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each flattened k×k table in ``tables`` (shape (B, k*k))."""
    k = w.shape[0]
    t = tables.reshape(-1, k, k)
    n = t.sum(axis=(1, 2))
    with np.errstate(all="ignore"):
        o = t / n[:, None, None]
        e = o.sum(axis=2)[:, :, None] * o.sum(axis=1)[:, None, :]
        num = (w * o).sum(axis=(1, 2))
        den = (w * e).sum(axis=(1, 2))
        out = 1.0 - num / den
    out[~(den > 0)] = np.nan
    return out


def _cells(a: np.ndarray, b: np.ndarray, labels: list[int]) -> np.ndarray:
    """Each pair's cell of the k×k table, ``index(a) * k + index(b)`` with ``index`` a
    grade's place in ``labels``: shape (n,), int64.

    Raises
    ------
    KeyError, ValueError, TypeError
        A grade is not in ``labels`` (or not a number), as ``labels.index`` by
        ``int(grade)`` raises it.
    """
    code = {g: i for i, g in enumerate(labels)}
    k = len(labels)
    lab = np.asarray(labels, dtype=np.int64)
    if len(code) == k and a.dtype.kind in "iu" and b.dtype.kind in "iu":
        # whole-number grades found in the sorted labels (no Python int per pair)
        order = np.argsort(lab, kind="stable")
        found = []
        for v in (a, b):
            at = order[np.clip(np.searchsorted(lab[order], v), 0, k - 1)] if k else v
            if not k or not np.array_equal(lab[at], v):
                break
            found.append(at.astype(np.int64))
        else:
            return found[0] * k + found[1]
    return np.array([code[int(x)] * k + code[int(y)] for x, y in zip(a, b)], dtype=np.int64)


def _cell_table(a: np.ndarray, b: np.ndarray, labels: list[int]) -> np.ndarray:
    cells = _cells(a, b, labels)
    onehot = np.zeros((len(cells), len(labels) ** 2))
    onehot[np.arange(len(cells)), cells] = 1.0
    return onehot


def _cell_counts(a: np.ndarray, b: np.ndarray, labels: list[int]) -> np.ndarray:
    """The k×k table's counts, flattened: shape (k*k,), float; the one-hot rows' sum, whose
    sums of ones are exact integers in any order."""
    return np.bincount(_cells(a, b, labels), minlength=len(labels) ** 2).astype(float)


def cohen_kappa_point(a, b, *, labels, weights: str | None = None) -> float | None:
    """Cohen's kappa of two raters' grades, from the same kernel as its interval.

    Parameters
    ----------
    a, b : array-like of shape (n_pairs,), int
        The two raters' grades of the same pairs, each in ``labels``.
    labels : sequence of int
        The grade scale, in order.
    weights : {None, "linear", "quadratic"}
        Disagreement weights ``|i - j|**p`` over the scale's positions (``None``: 0/1).

    Returns
    -------
    float or None
        ``1 - sum(w * O) / sum(w * E)`` with ``O`` the observed and ``E`` the chance
        proportions (Cohen 1968), as scikit-learn's ``cohen_kappa_score``; ``None`` when
        chance disagreement is 0 or there is no pair.
    """
    labels = [int(x) for x in labels]
    w = _disagreement_weights(len(labels), weights)
    a, b = np.asarray(a), np.asarray(b)
    if a.size == 0:
        return None
    value = _kappa_of_tables(_cell_counts(a, b, labels)[None, :], w)[0]
    return float(value) if np.isfinite(value) else None


def cohen_kappa_interval(a, b, *, labels, weights: str | None = None,
                         rng: np.random.Generator, resamples: int, level: float,
                         clusters=None) -> Interval:
    """Bootstrap interval of Cohen's kappa, resampling queries (or pairs).

    Parameters
    ----------
    a, b : array-like of shape (n_pairs,), int
        The two raters' grades of the same pairs, each in ``labels``.
    labels : sequence of int
        The grade scale (for binary kappa: ``[0, 1]`` after mapping grades to relevant).
    weights : {None, "linear", "quadratic"}
        As :func:`cohen_kappa_point`.
    rng : numpy.random.Generator
        The source of the resamples (seeded by the caller, who records the seed).
    resamples : int
        How many resamples, >= 1.
    level : float
        Confidence level in (0, 1).
    clusters : array-like of shape (n_pairs,), optional
        The query of each pair: the queries are then the units, their pairs kept
        together, and the jackknife t interval on Fisher's z returned (the expanded
        percentile one of resampled queries when that is undefined; see the module notes).
        Without it pairs are resampled one by one (plain percentile).

    Returns
    -------
    Interval

    Raises
    ------
    InputError
        ``resamples`` or ``level`` out of range, unknown ``weights``, or ``clusters`` of
        another length.
    """
    labels = [int(x) for x in labels]
    w = _disagreement_weights(len(labels), weights)
    a, b = np.asarray(a), np.asarray(b)
    if clusters is None:
        per_item = _cell_table(a, b, labels) if a.size else np.zeros((0, len(labels) ** 2))
        return _bootstrap(per_item, lambda t: _kappa_of_tables(t, w), rng=rng,
                          resamples=resamples, level=level, transform=fisher_z)
    m = len(labels) ** 2
    cells = _cells(a, b, labels) if a.size else np.zeros(0, dtype=np.int64)
    _check(resamples, level)
    # each query's cell counts: the one-hot rows' sums (np.add.at adds 1.0 at a time,
    # exact integers), without a row of k*k floats per pair
    code, n_clusters = cluster_codes(clusters, cells.size)
    per_query = np.bincount(code * m + cells, minlength=n_clusters * m)
    del code, cells
    per_query = per_query.reshape(n_clusters, m).astype(float)
    return _of_units(per_query, lambda t: _kappa_of_tables(t, w), rng=rng,
                     resamples=resamples, level=level, clustered=True, transform=fisher_z)


def share_interval(hits, *, rng: np.random.Generator, resamples: int, level: float,
                   clusters=None) -> Interval:
    """Bootstrap interval of a share of pairs (raw or two-step disagreement).

    Parameters
    ----------
    hits : array-like of shape (n_pairs,), bool
        Whether each pair counts (its grades differ; differ by two steps or more).
    rng, resamples, level, clusters
        As :func:`cohen_kappa_interval`.

    Returns
    -------
    Interval
        Of ``sum(hits) / n_pairs`` over the resampled pairs (a ratio of sums when queries
        are resampled: queries with more pairs weigh more, as in the point value).

    Raises
    ------
    InputError
        ``resamples`` or ``level`` out of range, or ``clusters`` of another length.
    """
    h = np.asarray(hits, dtype=float).reshape(-1)
    if clusters is None:
        per_item = np.column_stack([h, np.ones(h.size)]) if h.size else np.zeros((0, 2))
        with np.errstate(all="ignore"):
            return _bootstrap(per_item, lambda t: t[:, 0] / t[:, 1], rng=rng,
                              resamples=resamples, level=level, transform=arcsine_root)
    _check(resamples, level)
    # bincount adds each item's weight in item order from 0.0, as np.add.at over the
    # (hit, 1) rows does: the same sums, without the rows
    code, n_clusters = cluster_codes(clusters, h.size)
    per_query = np.empty((n_clusters, 2))
    per_query[:, 0] = np.bincount(code, weights=h, minlength=n_clusters)
    per_query[:, 1] = np.bincount(code, minlength=n_clusters)
    del code
    with np.errstate(all="ignore"):
        return _of_units(per_query, lambda t: t[:, 0] / t[:, 1], rng=rng,
                         resamples=resamples, level=level, clustered=True,
                         transform=arcsine_root)


# --- Fleiss' kappa ---------------------------------------------------------------------

def _fleiss_per_item(counts: np.ndarray) -> np.ndarray:
    """Per item: its k rating counts, its P_i and a 1 (the item count once summed)."""
    n = counts.sum(axis=1)
    with np.errstate(all="ignore"):
        p_i = ((counts * counts).sum(axis=1) - n) / (n * (n - 1))
    return np.column_stack([counts, p_i, np.ones(len(counts))])


def _fleiss_of_sums(sums: np.ndarray) -> np.ndarray:
    """Fleiss' kappa from weighted sums of :func:`_fleiss_per_item` rows, shape (B, k + 2)."""
    counts, p_sum, items = sums[:, :-2], sums[:, -2], sums[:, -1]
    with np.errstate(all="ignore"):
        p = counts / counts.sum(axis=1)[:, None]
        p_e = (p * p).sum(axis=1)
        out = (p_sum / items - p_e) / (1 - p_e)
    out[np.isclose(p_e, 1.0)] = np.nan
    return out


def _counts_array(counts) -> np.ndarray:
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2:
        raise InputError("rating counts must be a table of shape (n_items, n_grades)",
                         found=f"{table.ndim} dimension(s)")
    if len(table):
        n = table.sum(axis=1)
        if not np.all(n == n[0]) or n[0] < 2:
            raise InputError("Fleiss' kappa needs the same number (at least 2) of ratings "
                             "on every item", found=f"ratings per item from {int(n.min())} "
                             f"to {int(n.max())}", fix="Keep only the fully rated items "
                             "(relgrade.protocol.agreement.rating_counts does)")
    return table


def fleiss_kappa_point(counts) -> float | None:
    """Fleiss' kappa of a table of rating counts, from the same kernel as its interval.

    Parameters
    ----------
    counts : array-like of shape (n_items, n_grades), int
        ``counts[i, j]`` = raters who gave item ``i`` grade ``j``; every row sums to the
        same ``n >= 2``.

    Returns
    -------
    float or None
        ``(P̄ - P_e) / (1 - P_e)`` (Fleiss 1971); ``None`` without items or when every
        rating is one grade (``P_e = 1``).

    Raises
    ------
    InputError
        Rows of unequal sums or fewer than two ratings per item.
    """
    table = _counts_array(counts)
    if len(table) == 0:
        return None
    value = _fleiss_of_sums(_fleiss_per_item(table).sum(axis=0)[None, :])[0]
    return float(value) if np.isfinite(value) else None


def fleiss_kappa_interval(counts, *, rng: np.random.Generator, resamples: int,
                          level: float, clusters=None) -> Interval:
    """Bootstrap interval of Fleiss' kappa, resampling queries (or items, rows of ``counts``).

    Parameters
    ----------
    counts : array-like of shape (n_items, n_grades), int
        As :func:`fleiss_kappa_point`.
    rng : numpy.random.Generator
        The source of the resamples.
    resamples : int
        How many resamples, >= 1.
    level : float
        Confidence level in (0, 1).
    clusters : array-like of shape (n_items,), optional
        The query of each item (row): whole queries resampled, as
        :func:`cohen_kappa_interval`.

    Returns
    -------
    Interval

    Raises
    ------
    InputError
        As :func:`fleiss_kappa_point`, or ``resamples`` / ``level`` out of range.
    """
    table = _counts_array(counts)
    per_item = _fleiss_per_item(table) if len(table) else np.zeros((0, table.shape[1] + 2))
    return _bootstrap(per_item, _fleiss_of_sums, rng=rng, resamples=resamples, level=level,
                      clusters=clusters, transform=fisher_z)


# --- Krippendorff's alpha --------------------------------------------------------------

def _coincidences(data: np.ndarray, values: np.ndarray, with_keep: bool = False):
    """Per unit (row of ``data``, raters in columns, NaN = missing) with at least two values,
    its flattened k×k coincidence matrix ``(n_uc n_uk - [c = k] n_uc) / (m_u - 1)`` (and,
    with ``with_keep``, the boolean mask of the rows kept)."""
    k = len(values)
    n_uc = np.stack([(data == v).sum(axis=1) for v in values], axis=1).astype(float)
    m_u = n_uc.sum(axis=1)
    keep = m_u >= 2
    n_uc, m_u = n_uc[keep], m_u[keep]
    o = n_uc[:, :, None] * n_uc[:, None, :]
    o[:, np.arange(k), np.arange(k)] -= n_uc
    out = (o / (m_u - 1)[:, None, None]).reshape(len(n_uc), k * k)
    return (out, keep) if with_keep else out


def _delta2(level: str, values: np.ndarray, n_c: np.ndarray) -> np.ndarray:
    """Squared distances between the scale's values, shape (B, k, k) (Krippendorff 2011)."""
    v = values.astype(float)
    b, k = n_c.shape
    if level == "nominal":
        return np.broadcast_to((v[:, None] != v[None, :]).astype(float), (b, k, k))
    if level == "interval":
        return np.broadcast_to((v[:, None] - v[None, :]) ** 2, (b, k, k))
    if level == "ratio":
        s = v[:, None] + v[None, :]
        with np.errstate(all="ignore"):
            d = np.where(s == 0, 0.0, ((v[:, None] - v[None, :]) / s) ** 2)
        return np.broadcast_to(d, (b, k, k))
    # ordinal: (sum of n_g for g from c to k) - (n_c + n_k) / 2, squared.
    cum = np.concatenate([np.zeros((b, 1)), np.cumsum(n_c, axis=1)], axis=1)
    lo = np.minimum.outer(np.arange(k), np.arange(k))
    hi = np.maximum.outer(np.arange(k), np.arange(k))
    between = cum[:, hi + 1] - cum[:, lo]
    return (between - (n_c[:, :, None] + n_c[:, None, :]) / 2) ** 2


def _alpha_of_sums(sums: np.ndarray, level: str, values: np.ndarray) -> np.ndarray:
    k = len(values)
    o = sums.reshape(-1, k, k)
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    d2 = _delta2(level, values, n_c)
    with np.errstate(all="ignore"):
        d_o = (o * d2).sum(axis=(1, 2))
        d_e = (n_c[:, :, None] * n_c[:, None, :] * d2).sum(axis=(1, 2)) / (n - 1)
        out = 1.0 - d_o / d_e
    out[~(d_e > 0)] = np.nan
    return out


def _alpha_input(data, values, level: str) -> tuple[np.ndarray, np.ndarray]:
    if level not in LEVELS:
        raise InputError("unknown level of measurement for Krippendorff's alpha",
                         found=repr(level), fix=f"Use one of {', '.join(LEVELS)}")
    d = np.asarray(data, dtype=float)
    if d.ndim != 2:
        raise InputError("ratings must be a table of shape (n_items, n_raters)",
                         found=f"{d.ndim} dimension(s)")
    v = np.asarray(sorted(float(x) for x in values))
    seen = d[~np.isnan(d)]
    off = seen[~np.isin(seen, v)]
    if off.size:
        raise InputError("a rating is off the scale", found=repr(float(off[0])),
                         fix=f"Use grades in {[int(x) for x in v]}")
    return d, v


def krippendorff_alpha_point(data, *, values, level: str = "ordinal") -> float | None:
    """Krippendorff's alpha of an items × raters table, from the kernel of its interval.

    Parameters
    ----------
    data : array-like of shape (n_items, n_raters), float
        One row per judged pair, one column per rater; NaN where a rater did not grade.
    values : sequence of int
        The value domain (the grade scale); its order gives the ordinal ranks.
    level : {"nominal", "ordinal", "interval", "ratio"}, default "ordinal"

    Returns
    -------
    float or None
        ``1 - (n - 1) * sum(o_ck d_ck) / sum(n_c n_k d_ck)`` over the coincidence matrix
        of the items with two or more ratings (Krippendorff 2011), as the ``krippendorff``
        package with ``value_domain=values``; ``None`` when expected disagreement is 0.

    Raises
    ------
    InputError
        Unknown ``level``, a table that is not 2-D, or a rating off the scale.
    """
    d, v = _alpha_input(data, values, level)
    per_item = _coincidences(d, v)
    if len(per_item) == 0:
        return None
    value = _alpha_of_sums(per_item.sum(axis=0)[None, :], level, v)[0]
    return float(value) if np.isfinite(value) else None


def krippendorff_alpha_interval(data, *, values, level: str = "ordinal",
                                rng: np.random.Generator, resamples: int,
                                confidence: float, clusters=None) -> Interval:
    """Bootstrap interval of Krippendorff's alpha, resampling queries (or items).

    Parameters
    ----------
    data, values, level
        As :func:`krippendorff_alpha_point`. Only items with two or more ratings are
        resampled (the others add nothing to the coincidence matrix).
    rng : numpy.random.Generator
        The source of the resamples.
    resamples : int
        How many resamples, >= 1.
    confidence : float
        Confidence level in (0, 1).
    clusters : array-like of shape (n_items,), optional
        The query of each item (row of ``data``): whole queries resampled, as
        :func:`cohen_kappa_interval`.

    Returns
    -------
    Interval

    Raises
    ------
    InputError
        As :func:`krippendorff_alpha_point`, or ``resamples`` / ``confidence`` out of range.
    """
    d, v = _alpha_input(data, values, level)
    per_item, keep = _coincidences(d, v, with_keep=True)
    if clusters is not None:
        c = np.asarray(clusters).astype(str)
        if c.shape != (d.shape[0],):
            raise InputError("the clusters must name one unit per judged pair",
                             found=f"{c.size} units for {d.shape[0]} pairs")
        clusters = c[keep]
    return _bootstrap(per_item, lambda s: _alpha_of_sums(s, level, v), rng=rng,
                      resamples=resamples, level=confidence, clusters=clusters,
                      transform=fisher_z)
