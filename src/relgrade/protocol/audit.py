"""The audit sample: the queries set aside, before any grading, for a second blind grader.

The protocol asks for at least ``fraction`` of the queries and at least ``min_queries`` of
them, split evenly across query groups, chosen where the arms disagree most: queries whose
pooled chunks were mostly found by only one or two arms. That is where edge cases cluster,
so agreement measured there is a hard test rather than an easy one. The choice is made from
pool provenance alone (protocol invariant 4) and is reproducible from the seed.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: Columns of the audit table (one JSON Lines row per audit query, params ``paths.audit``).
AUDIT_COLUMNS = ["query_id", "group", "unique_share", "reason"]


def unique_share(provenance: pd.DataFrame) -> pd.Series:
    """Per query, the share of its top-depth pool found by only one or two arms.

    Parameters
    ----------
    provenance : pandas.DataFrame of shape (n_rows, >= 4)
        The private provenance table (:func:`relgrade.protocol.pool.build_pool`): ``query_id``,
        ``chunk_id``, ``arm``, ``source``.

    Returns
    -------
    pandas.Series of float64, indexed by query_id (sorted)
        ``#{chunks found by 1 or 2 arms} / #{chunks found by any arm}``, counting only rows
        with ``source == "depth"`` (a tail sample is random and says nothing about where
        the arms differ). Queries with no top-depth chunk are absent.

    Examples
    --------
    >>> prov = pd.DataFrame({"query_id": ["q"] * 4, "chunk_id": ["a", "a", "a", "b"],
    ...                      "arm": ["x", "y", "z", "x"], "source": ["depth"] * 4})
    >>> float(unique_share(prov)["q"])
    0.5
    """
    depth = provenance.loc[provenance["source"] == "depth", ["query_id", "chunk_id", "arm"]]
    arms = depth.drop_duplicates().groupby(["query_id", "chunk_id"], sort=False).size()
    few = (arms <= 2).groupby(level="query_id").mean()
    few.index = few.index.astype(str)
    return few.astype(np.float64).sort_index()


def _check(value, name, *, minimum, integer):
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real)
    if ok and integer:
        ok = isinstance(value, numbers.Integral)
    if not ok or not math.isfinite(value) or value < minimum or (not integer and value > 1):
        rng = f">= {minimum}" if integer else "between 0 and 1"
        raise InputError(f"{name} must be {'an integer' if integer else 'a number'} {rng}",
                         item=name, found=repr(value))


def audit_size(n_queries: int, n_groups: int, *, fraction: float, min_queries: int) -> tuple[int, int]:
    """How many audit queries: the minimum, and the per-group share that meets it evenly.

    Returns
    -------
    (needed, per_group) : tuple of int
        ``needed = max(ceil(fraction * n_queries), min_queries)`` and
        ``per_group = ceil(needed / n_groups)``; ``per_group * n_groups >= needed``.

    Examples
    --------
    >>> audit_size(18, 2, fraction=0.10, min_queries=10)
    (10, 5)
    >>> audit_size(250, 3, fraction=0.10, min_queries=10)
    (25, 9)
    """
    # Round before ceil so 0.1 * 30 (3.0000000000000004 in floating point) asks for 3.
    needed = max(math.ceil(round(fraction * n_queries, 9)), int(min_queries))
    per_group = math.ceil(needed / n_groups) if n_groups else 0
    return needed, per_group


def choose_audit(provenance: pd.DataFrame, queries: pd.DataFrame, *, fraction: float,
                 min_queries: int, rng: np.random.Generator) -> pd.DataFrame:
    """Choose the audit queries: balanced over groups, where the arms differ most.

    Parameters
    ----------
    provenance : pandas.DataFrame
        The private provenance table (see :func:`unique_share`).
    queries : pandas.DataFrame of shape (n_queries, >= 2)
        The validated queries table: ``query_id``, ``group``.
    fraction : float
        Smallest share of the query set to audit (params ``audit.fraction``), in [0, 1].
    min_queries : int
        Smallest number of audit queries (params ``audit.min_queries``).
    rng : numpy.random.Generator
        Breaks ties in ``unique_share``; one ``rng.random()`` per pooled query, drawn in
        ``query_id`` order.

    Returns
    -------
    pandas.DataFrame of shape (per_group * n_groups, 4)
        ``query_id``, ``group``, ``unique_share`` (float64 in [0, 1]) and ``reason`` (why
        it was chosen, in words), ordered by group (first appearance in ``queries``) and
        rank within the group.

    Raises
    ------
    InputError
        ``fraction`` or ``min_queries`` is out of range; the pool covers fewer queries than
        the audit needs; a group has fewer pooled queries than its even share.

    Notes
    -----
    ``needed = max(ceil(fraction * N), min_queries)`` with ``N`` the number of queries in
    the query set, and each of the ``G`` groups gives ``ceil(needed / G)`` queries, so the
    sample is at least ``needed`` and exactly even. Within a group, queries are ranked by
    :func:`unique_share` (highest first); equal shares are ordered by the seeded random
    key, so the choice among tied queries is random but reproducible. Only queries with
    at least one pooled chunk are eligible. The rule is the protocol's (seed section 5).
    """
    _check(fraction, "audit.fraction", minimum=0, integer=False)
    _check(min_queries, "audit.min_queries", minimum=1, integer=True)
    qids = queries["query_id"].astype(str)
    group_of = dict(zip(qids, queries["group"].astype(str)))
    groups = list(dict.fromkeys(queries["group"].astype(str)))
    needed, per_group = audit_size(len(qids), len(groups), fraction=fraction,
                                   min_queries=min_queries)

    share = unique_share(provenance)
    unknown = sorted(set(share.index) - set(group_of))
    if unknown:
        raise InputError("provenance names a query that is not in the query set",
                         item=unknown[0])
    eligible = pd.DataFrame({"query_id": share.index.to_numpy(dtype=object),
                             "unique_share": share.to_numpy()})
    eligible["group"] = eligible["query_id"].map(group_of)
    eligible["key"] = rng.random(len(eligible))          # drawn in sorted query_id order
    if len(eligible) < needed:
        raise InputError(f"too few queries for the audit: it needs {needed} "
                         f"(max of ceil({fraction} x {len(qids)}) and {min_queries}), "
                         f"the pool has {len(eligible)}",
                         item="audit.min_queries",
                         fix="Add queries, or lower audit.min_queries / audit.fraction")

    chosen = []
    for group in groups:
        members = eligible[eligible["group"] == group].sort_values(
            ["unique_share", "key"], ascending=[False, True], kind="stable")
        if len(members) < per_group:
            raise InputError(f"group {group!r} has {len(members)} pooled quer"
                             f"{'y' if len(members) == 1 else 'ies'}, fewer than its even "
                             f"share of the audit ({per_group} of {per_group * len(groups)})",
                             item=f"group {group}",
                             fix="Add queries to this group, or lower audit.min_queries")
        shares = members["unique_share"].to_numpy()
        for rank, (qid, value) in enumerate(zip(members["query_id"][:per_group],
                                                shares[:per_group]), start=1):
            ties = int(np.sum(shares == value)) - 1
            reason = (f"group {group}, rank {rank} of {len(members)} by share of chunks "
                      f"found by one or two arms ({value:.2f})")
            if ties and np.sum(shares[per_group:] == value):
                reason += f"; tied with {ties} other quer{'y' if ties == 1 else 'ies'}, " \
                          "order set by the seed"
            chosen.append((qid, group, float(value), reason))
    return pd.DataFrame(chosen, columns=AUDIT_COLUMNS)
