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
import re

import numpy as np
import pandas as pd

from relgrade.canonical import canonical_json, sha256_bytes
from relgrade.errors import InputError
from relgrade.schema import AUDIT


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


def unique_share_blocks(blocks) -> pd.Series:
    """:func:`unique_share` of a provenance table given as blocks of whole queries.

    Parameters
    ----------
    blocks : iterable of pandas.DataFrame
        The provenance's rows (``query_id``, ``chunk_id``, ``arm``, ``source``), every row of
        a query in one block (:func:`relgrade.io.batches.iter_query_blocks`).

    Returns
    -------
    pandas.Series of float64, indexed by query_id (sorted)
        Equal to :func:`unique_share` of the blocks stacked: each query's share is computed
        from its own rows alone, so block by block gives the same values.

    Examples
    --------
    >>> a = pd.DataFrame({"query_id": ["q"] * 3, "chunk_id": ["a", "a", "b"],
    ...                   "arm": ["x", "y", "x"], "source": ["depth"] * 3})
    >>> b = pd.DataFrame({"query_id": ["r"] * 3, "chunk_id": ["c", "c", "c"],
    ...                   "arm": ["x", "y", "z"], "source": ["depth"] * 3})
    >>> unique_share_blocks([a, b]).to_dict()
    {'q': 1.0, 'r': 0.0}
    """
    parts = [unique_share(block) for block in blocks]
    parts = [p for p in parts if len(p)]
    if not parts:
        return unique_share(pd.DataFrame({"query_id": [], "chunk_id": [], "arm": [],
                                          "source": []}))
    return pd.concat(parts).astype(np.float64).sort_index()


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


def choose_audit(provenance: pd.DataFrame | None, queries: pd.DataFrame, *, fraction: float,
                 min_queries: int, rng: np.random.Generator,
                 share: pd.Series | None = None) -> pd.DataFrame:
    """Choose the audit queries: balanced over groups, where the arms differ most.

    Parameters
    ----------
    provenance : pandas.DataFrame or None
        The private provenance table (see :func:`unique_share`); None when ``share`` is
        given.
    queries : pandas.DataFrame of shape (n_queries, >= 2)
        The validated queries table: ``query_id``, ``group``.
    fraction : float
        Smallest share of the query set to audit (params ``audit.fraction``), in [0, 1].
    min_queries : int
        Smallest number of audit queries (params ``audit.min_queries``).
    rng : numpy.random.Generator
        Breaks ties in ``unique_share``; one ``rng.random()`` per pooled query, drawn in
        ``query_id`` order.
    share : pandas.Series of float64, optional
        :func:`unique_share` of the provenance, when it was computed already (a block of
        queries at a time: :func:`unique_share_blocks`); it replaces ``provenance``.

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
        the audit needs; a group has fewer pooled queries than its even share (item
        ``audit.min_queries``; the fix names the largest ``min_queries`` every group can
        meet, ``G`` times the smallest group's pooled queries).

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

    if share is None:
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
    smallest = min(int((eligible["group"] == g).sum()) for g in groups)
    for group in groups:
        members = eligible[eligible["group"] == group].sort_values(
            ["unique_share", "key"], ascending=[False, True], kind="stable")
        if len(members) < per_group:
            most = smallest * len(groups)  # the largest sample every group can give evenly
            lower = (f"lower audit.min_queries to {most} or less" if
                     math.ceil(round(fraction * len(qids), 9)) <= most else
                     "lower audit.fraction")
            raise InputError(f"group {group!r} has {len(members)} pooled quer"
                             f"{'y' if len(members) == 1 else 'ies'}, fewer than its even "
                             f"share of the audit ({per_group} of {per_group * len(groups)})",
                             item="audit.min_queries",
                             fix=f"Add queries to this group, or {lower}")
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
    return pd.DataFrame(chosen, columns=AUDIT)


#: Keys of an audit lock, in the order they are written and hashed (``sha256`` last).
LOCK_KEYS = ("round", "pool_version", "queries")


#: The optional key of a ppi lock that records the pooled query ids its sample was drawn from.
POOLED_KEY = "pooled_sha256"


def pooled_sha256(query_ids) -> str:
    """The sha256 of a set of pooled query ids, as a ppi lock records it (``pooled_sha256``).

    Parameters
    ----------
    query_ids : iterable of str
        The pooled query ids (any order; repeats count once).

    Returns
    -------
    str
        64 lowercase hex digits over the UTF-8 bytes of the canonical JSON list of the
        sorted, distinct ids (``["q1","q2"]``).

    Examples
    --------
    >>> pooled_sha256(["q2", "q1", "q2"]) == sha256_bytes(b'["q1","q2"]')
    True
    """
    ids = sorted({str(q) for q in query_ids})
    return sha256_bytes(canonical_json(ids).encode("utf-8"))


def lock_sha256(lock: dict) -> str:
    """The sha256 of an audit lock's content.

    Returns
    -------
    str
        64 lowercase hex digits over the UTF-8 bytes of relgrade's canonical JSON
        (:func:`relgrade.canonical.canonical_json`) of ``{"round", "pool_version",
        "queries"}`` in that order, each query row in :data:`AUDIT` order, followed by
        ``pooled_sha256`` when the lock records it (a ppi lock drawn since it is recorded;
        a lock without it hashes as before).
    """
    body = {"round": int(lock["round"]), "pool_version": str(lock["pool_version"]),
            "queries": [{c: q.get(c) for c in AUDIT} for q in lock["queries"]]}
    if POOLED_KEY in lock:
        body[POOLED_KEY] = str(lock[POOLED_KEY])
    return sha256_bytes(canonical_json(body).encode("utf-8"))


def lock_audit(chosen: pd.DataFrame, *, round: int, pool_version: str,
               pooled: str | None = None) -> dict:
    """The audit lock of a round: the chosen queries, why, and the pool they were drawn from.

    The protocol draws the audit sample once, before grading; a later pool change (an arm
    added, a deeper pool) adds pairs to the audited queries but never re-draws them. The lock
    is what makes that so across reruns: it is committed, and the audit stage uses it as long
    as the round is the same.

    Parameters
    ----------
    chosen : pandas.DataFrame
        :func:`choose_audit`'s table (:data:`AUDIT`).
    round : int
        The grading round the sample is drawn for (>= 1).
    pool_version : str
        The pool version whose provenance it was drawn from.
    pooled : str, optional
        :func:`pooled_sha256` of the query ids the sample was drawn from (a ppi human
        sample), recorded as ``pooled_sha256`` so the draw can be checked later.

    Returns
    -------
    dict
        ``{"round", "pool_version", "queries": [row, ...], "sha256"}`` (with
        ``"pooled_sha256"`` before ``"sha256"`` when ``pooled`` is given); ``sha256`` is
        :func:`lock_sha256` of the rest.

    Examples
    --------
    >>> chosen = pd.DataFrame([("q1", "kw", 0.5, "why")], columns=AUDIT)
    >>> lock = lock_audit(chosen, round=1, pool_version="p-000000000000")
    >>> [q["query_id"] for q in lock["queries"]], lock["sha256"] == lock_sha256(lock)
    (['q1'], True)
    """
    rows = [{"query_id": str(r.query_id), "group": str(r.group),
             "unique_share": float(r.unique_share), "reason": str(r.reason)}
            for r in chosen[AUDIT].itertuples(index=False)]
    lock = {"round": int(round), "pool_version": str(pool_version), "queries": rows}
    if pooled is not None:
        lock[POOLED_KEY] = str(pooled)
    lock["sha256"] = lock_sha256(lock)
    return lock


def check_lock(lock, *, path=None, fix: str | None = None) -> pd.DataFrame:
    """The audit table of a committed lock, after checking its form and its hash.

    Parameters
    ----------
    lock : object
        The lock as read from JSON.
    path : str or Path, optional
        The lock file, for messages.
    fix : str, optional
        How to go on, said after a refusal (``FILE`` stands for the lock); default: restore
        the lock from git, or draw a new sample with ``relgrade audit redraw``.

    Returns
    -------
    pandas.DataFrame of shape (n_audit, 4)
        :data:`AUDIT`, in the lock's order.

    Raises
    ------
    InputError
        The lock is not an object with ``round``, ``pool_version``, ``queries`` and
        ``sha256``; a query row lacks a column or repeats a query id; or ``sha256`` is not
        the hash of the content (the lock was edited by hand). The message gives the fix:
        restore the lock from git, or draw a new sample with ``relgrade audit redraw``.
    """
    fix = (fix or "Restore the lock from git (`git checkout -- FILE`), or draw a new sample for "
           "the round with `relgrade audit redraw`").replace("FILE", str(path) if path
                                                             else "the lock")
    keys = (*LOCK_KEYS, "sha256")
    if not isinstance(lock, dict) or any(k not in lock for k in keys):
        raise InputError(f"an audit lock is an object with {', '.join(keys)}", path=path,
                         fix=fix)
    if not isinstance(lock["queries"], list) or not all(
            isinstance(q, dict) and all(c in q for c in AUDIT) for q in lock["queries"]):
        raise InputError(f"each audit lock query needs {', '.join(AUDIT)}", path=path,
                         fix=fix)
    ids = [str(q["query_id"]) for q in lock["queries"]]
    if len(set(ids)) != len(ids):
        raise InputError("an audit lock lists a query twice", path=path,
                         item=next(i for i in ids if ids.count(i) > 1), fix=fix)
    if POOLED_KEY in lock and not re.fullmatch(r"[0-9a-f]{64}", str(lock[POOLED_KEY])):
        raise InputError(f"an audit lock's {POOLED_KEY} is 64 lowercase hex digits", path=path,
                         found=repr(lock[POOLED_KEY]), fix=fix)
    if lock_sha256(lock) != lock["sha256"]:
        raise InputError("the audit lock's content does not match its sha256 (edited by hand?)",
                         path=path, found=lock_sha256(lock), fix=fix)
    return pd.DataFrame(lock["queries"], columns=AUDIT)


def audit_coverage(pool: pd.DataFrame, grades: pd.DataFrame, *, audit_ids, key_grader: str,
                   auditor: str) -> dict:
    """How much of the audit sample both graders have graded.

    The gate needs every pair of every audited query graded by both the key grader and the
    auditor; agreement on a part of the sample says nothing about the rest.

    Parameters
    ----------
    pool : pandas.DataFrame of shape (n_pairs, >= 2)
        The current pool: ``query_id``, ``chunk_id``.
    grades : pandas.DataFrame of shape (n_grades, >= 3)
        The grades that count (current ones, of the round): ``query_id``, ``chunk_id``,
        ``grader``.
    audit_ids : iterable of str
        The audited query ids.
    key_grader, auditor : str
        The two graders compared.

    Returns
    -------
    dict
        ``pairs`` (pool pairs of audited queries, int), ``both`` (graded by both),
        ``key_grader_missing`` and ``auditor_missing`` (pairs each still owes),
        ``coverage`` (``both / pairs``, float, or None when the audited queries have no
        pooled pair) and ``queries_incomplete`` (sorted ids of audited queries with a pair
        missing a grade).

    Examples
    --------
    >>> pool = pd.DataFrame({"query_id": ["q", "q", "r"], "chunk_id": ["a", "b", "c"]})
    >>> grades = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "a"],
    ...                        "grader": ["g", "g", "x"]})
    >>> c = audit_coverage(pool, grades, audit_ids=["q"], key_grader="g", auditor="x")
    >>> c["pairs"], c["both"], c["auditor_missing"], c["coverage"]
    (2, 1, 1, 0.5)
    """
    return audit_coverage_blocks([pool], [grades], audit_ids=audit_ids,
                                 key_grader=key_grader, auditor=auditor)


def _audited_rows(block: pd.DataFrame, audited: pd.Index):
    """``block``'s rows of audited queries: their queries' positions in ``audited``
    (int64 array) and their chunk ids as text (Arrow large_string)."""
    import pyarrow as pa

    where = audited.get_indexer(block["query_id"].astype(str))
    keep = where >= 0
    # the text columns handed to Arrow as they are (no Python string made per row)
    chunks = pa.array(block["chunk_id"].astype(str)[keep], type=pa.large_string())
    return where[keep].astype(np.int64), chunks


def _pair_codes(parts, dictionary, width: int) -> np.ndarray:
    """Int64 codes ``query position * width + chunk position in dictionary`` of the rows of
    ``parts`` (pairs of :func:`_audited_rows`); rows whose chunk is not in ``dictionary``
    (not a pooled pair) left out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not parts:
        return np.empty(0, dtype=np.int64)
    queries = np.concatenate([q for q, _ in parts])
    chunks = pc.index_in(pa.chunked_array([c for _, c in parts], type=pa.large_string()),
                         value_set=dictionary)
    pooled = ~chunks.is_null().to_numpy(zero_copy_only=False)
    positions = chunks.fill_null(0).to_numpy().astype(np.int64)
    return (queries * width + positions)[pooled]


def _distinct(codes: np.ndarray) -> np.ndarray:
    """The distinct values of an int64 array, ascending (a sort and a neighbour test: on
    hundreds of thousands of codes far cheaper than :func:`numpy.unique`'s hash path)."""
    ordered = np.sort(codes)
    if not ordered.size:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def _found(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Bool array of ``values``' shape: which of ``values`` (distinct, ascending) occur in
    ``codes``; :func:`numpy.isin` by a binary search of each code."""
    hit = np.zeros(values.size, dtype=bool)
    if values.size and codes.size:
        at = np.searchsorted(values, codes)
        inside = at < values.size
        at, codes = at[inside], codes[inside]
        hit[at[values[at] == codes]] = True
    return hit


def audit_coverage_blocks(pool_blocks, grade_blocks, *, audit_ids, key_grader: str,
                          auditor: str) -> dict:
    """:func:`audit_coverage` over the pool and the grades given a block of rows at a time.

    Memory holds one block and, across blocks, the audited queries' rows alone, each as a
    query position (int64) and its chunk id in an Arrow string array, never as Python
    tuples or strings: the coverage of a tenth of a 4M-pair pool stays small.

    Parameters
    ----------
    pool_blocks : iterable of pandas.DataFrame
        The current pool, in any number of blocks: ``query_id``, ``chunk_id`` (as in
        :func:`audit_coverage`; a block may hold rows of any query).
    grade_blocks : iterable of pandas.DataFrame
        The grades that count, in blocks: ``query_id``, ``chunk_id``, ``grader``. Read only
        after ``pool_blocks`` is exhausted.
    audit_ids : iterable of str
        The audited query ids.
    key_grader, auditor : str
        The two graders compared.

    Returns
    -------
    dict
        As :func:`audit_coverage` of the blocks' concatenations (the same values: a pair is
        its query's id and its chunk's id as text, wherever its rows fall).

    Examples
    --------
    >>> pool = [pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"]}),
    ...         pd.DataFrame({"query_id": ["q", "r"], "chunk_id": ["b", "c"]})]
    >>> grades = [pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
    ...                         "grader": ["g", "g"]}),
    ...           pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"], "grader": ["x"]})]
    >>> c = audit_coverage_blocks(pool, grades, audit_ids=["q"], key_grader="g", auditor="x")
    >>> c["pairs"], c["both"], c["auditor_missing"], c["queries_incomplete"]
    (2, 1, 1, ['q'])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    audited = pd.Index(sorted({str(q) for q in audit_ids}), dtype=object)
    pooled = [_audited_rows(block, audited) for block in pool_blocks]
    # chunk ids coded by position among the audited pairs' chunks: a grade of a chunk not
    # among them is no pooled pair of an audited query and cannot count
    dictionary = pc.unique(pa.chunked_array([c for _, c in pooled], type=pa.large_string()))
    width = max(len(dictionary), 1)
    pairs = _distinct(_pair_codes(pooled, dictionary, width))
    del pooled
    graded = {key_grader: [], auditor: []}
    for block in grade_blocks:
        by = block["grader"].astype(str)
        for name, parts in graded.items():
            parts.append(_audited_rows(block.loc[by == name], audited))
    by_key = _found(pairs, _pair_codes(graded[key_grader], dictionary, width))
    by_auditor = _found(pairs, _pair_codes(graded[auditor], dictionary, width))
    both = by_key & by_auditor
    # positions ascend as the sorted ids do: the unique positions are the ids in sorted order
    incomplete = audited.to_numpy()[_distinct(pairs[~both] // width)].tolist()
    n, n_both = int(pairs.size), int(both.sum())
    return {"pairs": n, "both": n_both,
            "key_grader_missing": int((~by_key).sum()),
            "auditor_missing": int((~by_auditor).sum()),
            "coverage": (n_both / n) if n else None,
            "queries_incomplete": incomplete}


def audit_for_round(lock, draw, *, round: int, pool_version: str, path=None,
                    pooled=None) -> tuple[pd.DataFrame, dict, bool]:
    """The audit sample of ``round``: the committed lock's when it is this round's, else a draw.

    The sample is drawn once per round and then locked: while the lock's round equals the
    params' ``grading.round`` it is used as it is, whatever the pool has become since (the
    audited queries keep their places; their new pairs join the auditor's work). A lock of
    another round, or no lock, means a new draw and a new lock.

    Parameters
    ----------
    lock : object or None
        The committed lock as read from JSON, or None when there is none.
    draw : callable
        ``draw() -> pandas.DataFrame`` (:func:`choose_audit` with its inputs bound); called
        only when a new sample is needed.
    round : int
        params ``grading.round``.
    pool_version : str
        The current pool's version, recorded in a new lock.
    path : str or Path, optional
        The lock file, for messages.
    pooled : callable, optional
        ``pooled() -> str``, the :func:`pooled_sha256` a new lock records (called only
        when one is drawn); without it a new lock records none.

    Returns
    -------
    (table, lock, drawn) : tuple
        The audit table (:data:`AUDIT`), the lock in force, and whether it was drawn now
        (so the caller writes the lock only then, leaving a locked file untouched).

    Raises
    ------
    InputError
        The lock fails :func:`check_lock` (edited by hand, malformed), whatever its round:
        a broken lock is never silently replaced.

    Examples
    --------
    >>> chosen = pd.DataFrame([("q1", "kw", 0.5, "why")], columns=AUDIT)
    >>> old = lock_audit(chosen, round=1, pool_version="p-1")
    >>> other = pd.DataFrame([("q2", "kw", 0.4, "why")], columns=AUDIT)
    >>> t, lock, drawn = audit_for_round(old, lambda: other, round=1, pool_version="p-2")
    >>> list(t["query_id"]), lock["pool_version"], drawn
    (['q1'], 'p-1', False)
    >>> t, lock, drawn = audit_for_round(old, lambda: other, round=2, pool_version="p-2")
    >>> list(t["query_id"]), lock["round"], drawn
    (['q2'], 2, True)
    """
    if lock is not None:
        table = check_lock(lock, path=path)
        if int(lock["round"]) == int(round):
            return table, lock, False
    new = lock_audit(draw(), round=round, pool_version=pool_version,
                     pooled=pooled() if pooled is not None else None)
    return check_lock(new, path=path), new, True
