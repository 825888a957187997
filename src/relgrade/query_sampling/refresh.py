"""Refreshing a slice of a sampled query set from a current query log.

A query set is kept for a long time so that numbers stay comparable; on a schedule, or when
:mod:`relgrade.query_sampling.drift` flags the set, a **slice** of it is replaced
(:func:`refresh`):

1. The slice is ``round(share * n)`` of the set's ``n`` queries (at least 1, at most
   ``n - 1``: old and new sets always overlap).
2. Retired first are the set's queries the current log no longer holds (they stand for no
   traffic now); the rest of the slice is a seeded uniform draw without replacement from the
   set's other queries. When more queries are gone than the slice holds, all of them are
   retired and the slice grows to match (the result says so).
3. As many new queries are drawn from the current log, stratum by stratum, among the
   queries not in the set, by the sampler itself
   (:func:`relgrade.query_sampling.sample_queries`, πps within a stratum): each retired
   query is replaced by one from its stratum in the current log (its previous group when
   the log lost it). A stratum with too few new queries gives what it has; the rest come
   from the other strata, as :func:`relgrade.query_sampling.allocate` spreads them.
4. The whole refreshed set is weighted against the current log (traffic drifts even where
   the queries do not): each query's ``group`` is its current stratum, and within a stratum
   the sampler's rule is applied to the set's members there (:func:`stratum_weights`), so the
   weights of a stratum add up to its current traffic.

Queries that stay keep their ids (ids hash the query text), and with them their intents,
pool pairs and grades.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.query_sampling import (SAMPLE_COLUMNS, STRATA, STRATA_COLUMNS, _ids,
                                     inclusion_probabilities, normalize_query, sample_queries)

#: What the refresh's generator is seeded for: ``derive_seed(seed, SEED_PURPOSE)``.
SEED_PURPOSE = "queries-refresh"


def slice_size(share: float, n: int, *, what: str = "refresh share") -> int:
    """How many of ``n`` queries a refresh of ``share`` replaces.

    Parameters
    ----------
    share : float
        The share of the set to replace, strictly between 0 and 1.
    n : int
        The set's size, >= 2.
    what : str, default "refresh share"
        The name given to ``share`` in errors (an option or a params key).

    Returns
    -------
    int
        ``floor(share * n + 1/2)`` clipped to ``[1, n - 1]``.

    Raises
    ------
    InputError
        ``share`` is not a number in (0, 1), or ``n < 2`` (nothing could be kept).

    Examples
    --------
    >>> slice_size(0.25, 12), slice_size(0.01, 12), slice_size(0.99, 12)
    (3, 1, 11)
    """
    if isinstance(share, bool) or not isinstance(share, (int, float)) \
            or not math.isfinite(float(share)) or not 0 < share < 1:
        raise InputError(f"{what} must be greater than 0 and less than 1", found=repr(share),
                         fix="give the share of the query set to replace, e.g. 0.25")
    if n < 2:
        raise InputError("a query set of fewer than 2 queries cannot be refreshed in part",
                         found=f"{n} queries")
    return int(min(n - 1, max(1, math.floor(share * n + 0.5))))


def stratum_weights(counts, members) -> np.ndarray:
    """Traffic weights of a stratum's members, by the sampler's rule.

    Parameters
    ----------
    counts : array-like of shape (n_stratum,), int
        Every query of the stratum's count (>= 1).
    members : array-like of shape (m,), int
        Positions in ``counts`` of the set's queries in this stratum, distinct, m >= 1.

    Returns
    -------
    numpy.ndarray of shape (m,), float64
        A member certain under πps with ``m`` draws
        (:func:`relgrade.query_sampling.inclusion_probabilities` is 1) weighs its own count;
        the other members share the rest of the stratum's traffic equally. When every member
        is certain, what traffic is left is spread equally over all of them. The weights sum
        to the stratum's traffic; for a sample the sampler drew they are the sampler's own
        weights.

    Examples
    --------
    >>> stratum_weights([6, 2, 1, 1], [0, 2]).tolist()
    [6.0, 4.0]
    """
    c = np.asarray(counts, dtype=np.int64)
    idx = np.asarray(members, dtype=np.int64)
    pi = inclusion_probabilities(c, len(idx))
    certain = pi[idx] == 1.0
    w = np.zeros(len(idx), dtype=np.float64)
    w[certain] = c[idx[certain]]
    rest = float(c.sum()) - float(w[certain].sum())
    if (~certain).any():
        w[~certain] = rest / int((~certain).sum())
    else:
        w += rest / len(idx)
    return w


@dataclass(frozen=True)
class Refresh:
    """A refreshed query set and what changed.

    Attributes
    ----------
    table : pandas.DataFrame of shape (n, 5)
        :data:`relgrade.query_sampling.SAMPLE_COLUMNS`, weighted against the current log,
        ordered like the sampler's (stratum, count descending, query).
    share : float
        The share asked for.
    slice : int
        :func:`slice_size` of it.
    replaced : int
        Queries replaced (``slice``, or more when more queries left the log).
    retired, added : list of str
        Query ids of the set retired and of the queries drawn, sorted.
    gone : list of str
        Retired query ids the current log no longer holds.
    kept : int
        Queries of the previous set that stay.
    unrepresented : list of str
        Current strata with traffic and no query in the refreshed set (their traffic is not
        in the weights).
    """

    table: pd.DataFrame
    share: float
    slice: int
    replaced: int
    retired: list
    added: list
    gone: list
    kept: int
    unrepresented: list

    def to_dict(self) -> dict:
        """Everything but the table, JSON-ready (the manifest's ``refresh`` block)."""
        return {"share": self.share, "slice": self.slice, "replaced": self.replaced,
                "kept": self.kept, "retired": list(self.retired), "added": list(self.added),
                "gone": list(self.gone), "unrepresented": list(self.unrepresented)}


def refresh(previous: pd.DataFrame, counts: pd.DataFrame, *, share: float,
            rng: np.random.Generator, what: str = "refresh share") -> Refresh:
    """Replace a slice of a query set with queries drawn from a current log.

    Parameters
    ----------
    previous : pandas.DataFrame of shape (n, >= 2)
        The set being refreshed: ``query_id`` and ``query``, and ``group`` (its stratum when
        drawn; used for a retired query the current log lost); other columns are ignored.
    counts : pandas.DataFrame
        :func:`relgrade.query_sampling.strata` of the current log.
    share : float
        The share of the set to replace, in (0, 1) (:func:`slice_size`).
    rng : numpy.random.Generator
        The retirement draw, then the sampler's draws.
    what : str, default "refresh share"
        The name of ``share`` in errors.

    Returns
    -------
    Refresh

    Raises
    ------
    InputError
        ``share`` outside (0, 1); the set has fewer than 2 queries or lacks ``query``; a
        query of the set appears twice; the current log holds fewer new queries than the
        slice.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator")
    if "query" not in previous.columns:
        raise InputError("the query set to refresh has no `query` column",
                         found="columns " + ", ".join(map(str, previous.columns)))
    texts = [normalize_query(str(t)) for t in previous["query"].tolist()]
    if len(set(texts)) != len(texts):
        raise InputError("a query appears twice in the query set to refresh")
    n = len(texts)
    m = slice_size(share, n, what=what)
    missing = [c for c in STRATA_COLUMNS if c not in counts.columns]
    if missing or len(counts) == 0:
        raise InputError("the current query log holds no query",
                         fix="Give a log with at least one query")
    now = dict(zip(counts["query"], counts["count"]))
    gone = sorted(t for t in texts if t not in now)
    present = sorted(t for t in texts if t in now)
    if len(gone) >= m:
        retired = set(gone)
    else:
        drawn = rng.choice(len(present), size=m - len(gone), replace=False)
        retired = set(gone) | {present[i] for i in drawn}
    replaced = len(retired)
    kept = [t for t in texts if t not in retired]
    candidates = counts[~counts["query"].isin(set(texts))].reset_index(drop=True)
    if len(candidates) < replaced:
        raise InputError(f"the current query log holds {len(candidates)} queries that are not "
                         f"in the set, fewer than the {replaced} to replace",
                         fix="lower the refresh share, or refresh from a larger log")
    stratum_now = dict(zip(counts["query"], counts["stratum"]))
    group_then = (dict(zip(texts, previous["group"].astype(str)))
                  if "group" in previous.columns else {})
    quota = {s: 0 for s in STRATA}
    for t in retired:
        s = stratum_now.get(t, group_then.get(t))
        quota[s if s in quota else STRATA[-1]] += 1
    drawn = sample_queries(candidates, n=replaced, allocation=_fill(quota, candidates),
                           rng=rng)
    members = set(kept) | set(drawn["query"])
    table = counts.reset_index(drop=True)
    rows, weights = [], []
    unrepresented = []
    for s in STRATA:
        where = np.flatnonzero(table["stratum"].to_numpy() == s)
        mine = [i for i, pos in enumerate(where) if table.at[int(pos), "query"] in members]
        if not mine:
            if len(where):
                unrepresented.append(s)
            continue
        w = stratum_weights(table["count"].to_numpy()[where], mine)
        rows.extend(int(where[i]) for i in mine)
        weights.extend(w.tolist())
    out = pd.DataFrame({"query": table["query"].to_numpy(dtype=object)[rows],
                        "group": table["stratum"].to_numpy(dtype=object)[rows],
                        "weight": np.asarray(weights, dtype=np.float64),
                        "count": table["count"].to_numpy()[rows].astype(np.int64)})
    out["_s"] = out["group"].map(STRATA.index)
    out = out.sort_values(["_s", "count", "query"], ascending=[True, False, True],
                          kind="stable", ignore_index=True).drop(columns="_s")
    out.insert(0, "query_id", _ids(out["query"].tolist()))
    ids_before = dict(zip(texts, previous["query_id"].astype(str) if "query_id" in previous
                          else _ids(texts)))
    ids_after = dict(zip(out["query"], out["query_id"]))
    return Refresh(table=out[SAMPLE_COLUMNS], share=float(share), slice=m, replaced=replaced,
                   retired=sorted(ids_before[t] for t in retired),
                   added=sorted(ids_after[t] for t in drawn["query"]),
                   gone=sorted(ids_before[t] for t in gone), kept=len(kept),
                   unrepresented=unrepresented)


def _fill(quota: dict, candidates: pd.DataFrame) -> dict:
    """The slice's share per stratum: ``quota``, with what a stratum cannot give (too few new
    queries) moved to the strata that can, most frequent first."""
    have = candidates["stratum"].value_counts().to_dict()
    out = {s: min(quota[s], int(have.get(s, 0))) for s in STRATA}
    short = sum(quota.values()) - sum(out.values())
    for s in STRATA:
        extra = min(short, int(have.get(s, 0)) - out[s])
        out[s] += extra
        short -= extra
    return out
