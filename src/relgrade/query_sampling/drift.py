"""Query-set drift: how far a current query log has moved from the log a query set stands for.

A sampled query set stands for the traffic of the log it was drawn from (the experiment's
``queries.log``, the *reference*): its ``group`` is each query's stratum there and its
weights add up, stratum by stratum, to that stratum's traffic. :func:`drift` lays a current
log's traffic over the reference's strata, by query text:

- a current query that was in the reference's head counts for ``head``, and so on;
- a current query absent from the reference log counts for ``new``.

The set's side is its weight share per group (``new`` is 0: the set holds no query the
reference lacks). Both sides are distributions over ``head, torso, tail, new``; their
distance is the **total variation distance** ``TV = 1/2 sum |p_s - q_s|``: the share of the
traffic that would have to change stratum for the set's shares to describe the current log
(Levin, Peres & Wilmer, *Markov Chains and Mixing Times*, 2009, §4.1). A tail whose share
grows from 20% to 40% of the traffic, the other strata shrinking, has TV = 0.20. The
Jensen–Shannon divergence (base 2, in [0, 1]; Lin, IEEE Trans. Inf. Theory 37(1), 1991) is
reported beside it.

The current log is one sample of traffic: the interval of TV is a seeded percentile bootstrap
over its issued queries (each resample draws as many issued queries as the log holds, with
replacement; only their buckets' counts matter, so a resample is one multinomial draw). The
set's side is fixed: it is the set's own definition, not an estimate.

The current log is also cut by the sampler's own rule (:func:`relgrade.query_sampling.strata`,
the same shares); its head queries that are not in the set are the **new frequent queries**.

Recommended refresh slice (the rule of :func:`recommended_slice`): when TV exceeds the
threshold, replace ``ceil(TV * n)`` of the set's ``n`` queries (at least one, at most
``n - 1``), the share of the traffic that moved; otherwise none beyond the scheduled refresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.query_sampling import STRATA, query_id

#: The buckets of the two distributions: the reference strata and ``new``.
BUCKETS = (*STRATA, "new")

#: What the bootstrap's generator is seeded for: ``derive_seed(seed, SEED_PURPOSE)``.
SEED_PURPOSE = "queries-drift"


def total_variation(p, q) -> float:
    """Total variation distance between two distributions on the same buckets.

    Parameters
    ----------
    p, q : array-like of shape (n_buckets,), float
        Probabilities, each summing to 1.

    Returns
    -------
    float
        :math:`\\frac12 \\sum_s |p_s - q_s|`, in [0, 1].

    Examples
    --------
    >>> total_variation([0.5, 0.3, 0.2, 0.0], [0.4, 0.2, 0.4, 0.0])
    0.2
    """
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    return float(np.round(0.5 * np.abs(p - q).sum(axis=-1), 15))


def jensen_shannon(p, q) -> float:
    """Jensen–Shannon divergence, base 2, between two distributions on the same buckets.

    Parameters
    ----------
    p, q : array-like of shape (n_buckets,), float
        Probabilities, each summing to 1 (zeros allowed).

    Returns
    -------
    float
        :math:`\\frac12 KL(p \\| m) + \\frac12 KL(q \\| m)` with :math:`m = (p + q) / 2` and
        :math:`0 \\log 0 = 0`, in [0, 1] (Lin 1991). Its square root is what
        ``scipy.spatial.distance.jensenshannon(p, q, base=2)`` returns.

    Examples
    --------
    >>> jensen_shannon([1.0, 0.0], [0.0, 1.0])
    1.0
    """
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    m = (p + q) / 2

    def kl(a):
        on = a > 0
        return float((a[on] * np.log2(a[on] / m[on])).sum())

    return max(0.0, 0.5 * kl(p) + 0.5 * kl(q))


def recommended_slice(tv: float, n: int, *, threshold: float) -> int:
    """How many of the set's queries a refresh should replace.

    Parameters
    ----------
    tv : float
        The total variation distance between the set's and the log's strata, in [0, 1].
    n : int
        The set's size.
    threshold : float
        params ``drift.max_shift``: the distance tolerated without a refresh.

    Returns
    -------
    int
        0 when ``tv <= threshold``; else ``ceil(tv * n)`` clipped to ``[1, n - 1]`` (a
        refresh keeps at least one query, so the old and the new set overlap). With
        ``n = 1`` always 0.

    Examples
    --------
    >>> recommended_slice(0.2, 12, threshold=0.1), recommended_slice(0.05, 12, threshold=0.1)
    (3, 0)
    """
    if tv <= threshold or n < 2:
        return 0
    return int(min(n - 1, max(1, math.ceil(round(tv * n, 9)))))


@dataclass(frozen=True)
class Drift:
    """A query set against a current log.

    Attributes
    ----------
    shares : list of dict
        One row per bucket of :data:`BUCKETS`: ``bucket``, ``set`` (the set's weight share),
        ``log`` (the current log's traffic share on the bucket's queries), ``shift``
        (log − set), ``log_queries`` (distinct current queries in the bucket).
    log_strata : list of dict
        The current log cut by the sampler: ``stratum``, ``queries``, ``traffic``, ``share``.
    total_variation, jensen_shannon : float
        Distances between the set's and the log's shares.
    interval : (float, float)
        Percentile bootstrap interval of the total variation at ``level``.
    level : float
    bootstrap : int
        Resamples drawn.
    seed, child_seed : int
        The experiment seed and ``derive_seed(seed, SEED_PURPOSE)``, the generator's seed.
    threshold : float
        params ``drift.max_shift``.
    flagged : bool
        ``total_variation > threshold``.
    new_frequent : list of dict
        The current log's head queries not in the set, most frequent first: ``query``,
        ``query_id``, ``count``, ``share``, ``reference`` (its reference stratum or ``new``).
    set_size : int
    slice_queries : int
        :func:`recommended_slice`.
    slice_share : float
        ``slice_queries / set_size``.
    issued, distinct : int
        The current log's traffic and distinct queries.
    """

    shares: list
    log_strata: list
    total_variation: float
    jensen_shannon: float
    interval: tuple
    level: float
    bootstrap: int
    seed: int
    child_seed: int
    threshold: float
    flagged: bool
    new_frequent: list
    set_size: int
    slice_queries: int
    slice_share: float
    issued: int
    distinct: int

    def to_dict(self) -> dict:
        """JSON-ready, the same field names (``interval`` as a list)."""
        return {"shares": [dict(r) for r in self.shares],
                "log_strata": [dict(r) for r in self.log_strata],
                "total_variation": self.total_variation, "jensen_shannon": self.jensen_shannon,
                "interval": list(self.interval), "level": self.level,
                "bootstrap": self.bootstrap, "seed": self.seed, "child_seed": self.child_seed,
                "seed_purpose": SEED_PURPOSE, "threshold": self.threshold,
                "flagged": self.flagged, "new_frequent": [dict(r) for r in self.new_frequent],
                "set_size": self.set_size, "slice_queries": self.slice_queries,
                "slice_share": self.slice_share, "issued": self.issued,
                "distinct": self.distinct}


def _set_shares(query_set: pd.DataFrame) -> np.ndarray:
    missing = [c for c in ("query", "group", "weight") if c not in query_set.columns]
    if missing:
        raise InputError(f"the query set has no {', '.join(missing)} column: drift needs a set "
                         "sampled from a query log (`relgrade queries sample`, stage sample)",
                         found="columns " + ", ".join(map(str, query_set.columns)))
    if len(query_set) == 0:
        raise InputError("the query set is empty")
    groups = query_set["group"].astype(str)
    unknown = sorted(set(groups) - set(STRATA))
    if unknown:
        raise InputError(f"the query set's group is not one of {', '.join(STRATA)}: drift "
                         "needs a set sampled from a query log", found=repr(unknown[0]))
    weight = query_set["weight"].astype(np.float64)
    by = weight.groupby(groups).sum().reindex(list(STRATA), fill_value=0.0)
    return np.append(by.to_numpy() / by.sum(), 0.0)


def drift(query_set: pd.DataFrame, *, reference: pd.DataFrame, current: pd.DataFrame,
          rng: np.random.Generator, seed: int, child_seed: int, threshold: float = 0.1,
          bootstrap: int = 2000, level: float = 0.95) -> Drift:
    """Compare a sampled query set with a current query log.

    Parameters
    ----------
    query_set : pandas.DataFrame of shape (n, >= 3)
        The experiment's query set: ``query`` (normalised text), ``group`` (a stratum of
        :data:`relgrade.query_sampling.STRATA`), ``weight`` (float > 0); ``query_id`` when
        present is reported for the new frequent queries.
    reference : pandas.DataFrame
        :func:`relgrade.query_sampling.strata` of the log the set was drawn from.
    current : pandas.DataFrame
        :func:`relgrade.query_sampling.strata` of the current log (same shares).
    rng : numpy.random.Generator
        The bootstrap's draws.
    seed, child_seed : int
        Recorded: the experiment seed and the generator's seed.
    threshold : float, default 0.1
        The total variation tolerated (params ``drift.max_shift``), in (0, 1).
    bootstrap : int, default 2000
        Resamples of the current log's issued queries, >= 1.
    level : float, default 0.95
        The interval's coverage, in (0, 1).

    Returns
    -------
    Drift

    Raises
    ------
    InputError
        The set lacks ``query``, ``group`` or ``weight``, is empty or has a group that is
        not a stratum; the current log holds no query.

    Notes
    -----
    With :math:`p` the set's weight shares over ``head, torso, tail, new`` and :math:`q`
    the current traffic shares over the same buckets (a query's bucket is its stratum in
    ``reference``, ``new`` when absent), TV = :math:`\\frac12\\sum|p_s-q_s|`. Bootstrap:
    :math:`q^{*} = \\mathrm{Multinomial}(T, q) / T` with :math:`T` the current issued
    queries, B times; the interval is the :math:`(1 \\pm \\text{level})/2` quantiles of
    :math:`TV(p, q^{*})` (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
    ch. 13).
    """
    if len(current) == 0:
        raise InputError("the current query log holds no query",
                         fix="Give a log with at least one query")
    p = _set_shares(query_set)
    ref = dict(zip(reference["query"], reference["stratum"]))
    bucket = current["query"].map(ref).fillna("new")
    counts = current["count"].astype(np.int64)
    by = counts.groupby(bucket).sum().reindex(list(BUCKETS), fill_value=0)
    distinct = bucket.value_counts().reindex(list(BUCKETS), fill_value=0)
    total = int(by.sum())
    q = by.to_numpy(dtype=np.float64) / total
    tv, js = total_variation(p, q), jensen_shannon(p, q)
    draws = rng.multinomial(total, q, size=int(bootstrap)) / total
    tvs = np.round(0.5 * np.abs(draws - p).sum(axis=1), 15)
    alpha = (1 - level) / 2
    low, high = np.quantile(tvs, [alpha, 1 - alpha])
    shares = [{"bucket": b, "set": float(p[i]), "log": float(q[i]),
               "shift": float(q[i] - p[i]), "log_queries": int(distinct[b])}
              for i, b in enumerate(BUCKETS)]
    strata_rows = []
    for s in STRATA:
        mine = current["stratum"] == s
        strata_rows.append({"stratum": s, "queries": int(mine.sum()),
                            "traffic": int(counts[mine].sum()),
                            "share": float(counts[mine].sum() / total)})
    in_set = set(query_set["query"].astype(str))
    ids = (dict(zip(query_set["query"].astype(str), query_set["query_id"].astype(str)))
           if "query_id" in query_set.columns else {})
    head = current[(current["stratum"] == "head") & ~current["query"].isin(in_set)]
    new_frequent = [{"query": str(r.query), "query_id": ids.get(r.query, query_id(r.query)),
                     "count": int(r.count), "share": float(r.count / total),
                     "reference": str(ref.get(r.query, "new"))}
                    for r in head.itertuples(index=False)]
    n = len(query_set)
    k = recommended_slice(tv, n, threshold=threshold)
    return Drift(shares=shares, log_strata=strata_rows, total_variation=tv,
                 jensen_shannon=js, interval=(float(low), float(high)), level=float(level),
                 bootstrap=int(bootstrap), seed=int(seed), child_seed=int(child_seed),
                 threshold=float(threshold), flagged=bool(tv > threshold),
                 new_frequent=new_frequent, set_size=n, slice_queries=k,
                 slice_share=k / n, issued=total, distinct=int(len(current)))
