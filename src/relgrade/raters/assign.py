"""Which rater grades which pair: a balanced, seeded assignment with gold hidden in each queue.

With ``grading.mode: raters`` every pool pair is graded by ``raters.per_pair`` different
raters, gold pairs exactly as often as any other: a gold pair is a pool pair whose grade is
known, so it is dealt like the rest and a rater who compares queues with others (how many
raters had a pair) learns nothing about which pairs are gold. :func:`select_gold` draws the
gold questions (a seeded share ``gold.fraction`` of the pool, from the pool pairs with a
known grade); :func:`assign_pairs` deals them first and then the other pairs, so that every
rater gets the same number of pairs and of gold questions, give or take one, and never the
same pair twice; :func:`rater_queues` flags the gold rows; :func:`rater_orders` lays each
rater's queue out per query in a seeded shuffle, the same rule for gold and work pairs, so
nothing in a packet tells them apart.

The queue table is private, like provenance: its ``gold`` column says which rows are gold
questions and must never reach a rater.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.raters.gold import check_gold
from relgrade.rng import order_seed, rng_for
from relgrade.schema import ORDERS, PAIR

#: Columns of :func:`assign_pairs`' result.
ASSIGNMENT = ["grader", "query_id", "chunk_id"]

#: Columns of :func:`rater_queues`' result (private: ``work`` and ``gold``).
QUEUE = ["grader", "query_id", "chunk_id", "work", "gold"]

#: Columns of :func:`rater_orders`' result: the orders table's, with the rater and the two
#: private flags.
RATER_ORDERS = ["grader", *ORDERS, "work", "gold"]

#: The role slot a rater's display orders are drawn in (see :func:`rater_orders`).
RATER_SLOT = "rater:"


def _raters(raters: Iterable[str]) -> list[str]:
    names = [str(r) for r in raters]
    seen = set()
    for name in names:
        if name in seen:
            raise InputError("a rater is listed twice", item=name,
                             fix="Name each rater once")
        seen.add(name)
    return sorted(names)


def assign_pairs(pool: pd.DataFrame, raters: Sequence[str], *, per_pair: int,
                 rng: np.random.Generator, first: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each pool pair given to ``per_pair`` different raters, with balanced loads.

    Parameters
    ----------
    pool : pandas.DataFrame of shape (n_pairs, >= 2)
        The pool: ``query_id``, ``chunk_id`` (other columns are ignored). Not modified.
    raters : sequence of str
        The raters (graders with role ``rater``), each named once.
    per_pair : int >= 1
        Raters per pair (params ``raters.per_pair``), at most ``len(raters)``.
    rng : numpy.random.Generator
        Draws the order pairs are dealt in and breaks ties between equally loaded raters;
        build it from params ``seed``.
    first : pandas.DataFrame, optional
        ``query_id``, ``chunk_id``: pool pairs dealt before all others (the gold questions,
        :func:`select_gold`), so that they too are spread evenly over the raters. Each of
        them still goes to exactly ``per_pair`` raters.

    Returns
    -------
    pandas.DataFrame of shape (n_pairs * per_pair, 3)
        Columns :data:`ASSIGNMENT` (str), sorted by (grader, query_id, chunk_id).

    Raises
    ------
    InputError
        A rater is named twice; ``per_pair`` is not a whole number from 1 to the number of
        raters; a pair is twice in the pool; a pair of ``first`` is not in the pool.
    TypeError
        ``rng`` is not a ``numpy.random.Generator``.

    Notes
    -----
    Pairs are dealt in a seeded random order; each goes to the ``per_pair`` raters with the
    fewest pairs so far, ties broken by a fresh random key per pair. Dealing to the least
    loaded keeps every two raters' loads within one pair of each other after every step (the
    greedy rule never raises a most loaded rater while a less loaded one is left out), so
    loads are ``floor(n * per_pair / R)`` or one more. With ``first`` (``m`` pairs) those
    pairs are dealt first, each group in its own seeded order: when the last of them is dealt
    every rater's load is its count of them, so each rater gets ``floor(m * per_pair / R)``
    of them or one more, and the total loads stay balanced as before. Without ``first`` the
    deal is the same as with an empty ``first``.

    Examples
    --------
    >>> pool = pd.DataFrame({"query_id": ["q"] * 4, "chunk_id": list("abcd")})
    >>> a = assign_pairs(pool, ["r1", "r2", "r3"], per_pair=3, rng=np.random.default_rng(1))
    >>> a.groupby("grader").size().tolist()
    [4, 4, 4]
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator built from a seed in params")
    names = _raters(raters)
    if isinstance(per_pair, bool) or not isinstance(per_pair, (int, np.integer)) \
            or not 1 <= per_pair <= len(names):
        raise InputError("raters.per_pair must be a whole number from 1 to the number of "
                         "raters", item="raters.per_pair",
                         found=f"{per_pair!r} with {len(names)} raters")
    pairs = pool[PAIR].astype(str).drop_duplicates().sort_values(PAIR, kind="stable")
    if len(pairs) != len(pool):
        dup = pool[PAIR].astype(str)
        first = dup[dup.duplicated(keep=False)].iloc[0]
        raise InputError("a pair is twice in the pool",
                         item=f"pair ({first['query_id']}, {first['chunk_id']})")
    keys = list(zip(pairs["query_id"], pairs["chunk_id"]))
    head = set() if first is None else set(zip(first["query_id"].astype(str),
                                               first["chunk_id"].astype(str)))
    unknown = sorted(head - set(keys))
    if unknown:
        raise InputError("a pair to deal first is not in the pool",
                         item=f"pair ({unknown[0][0]}, {unknown[0][1]})")
    if head:
        lead = [i for i, k in enumerate(keys) if k in head]
        rest = [i for i, k in enumerate(keys) if k not in head]
        order = [lead[int(j)] for j in rng.permutation(len(lead))] \
            + [rest[int(j)] for j in rng.permutation(len(rest))]
    else:
        order = rng.permutation(len(keys))
    load = np.zeros(len(names), dtype=np.int64)
    rows = []
    for i in order:
        tie = rng.random(len(names))
        chosen = np.lexsort((tie, load))[:per_pair]
        load[chosen] += 1
        q, c = keys[int(i)]
        rows += [(names[j], q, c) for j in sorted(chosen)]
    out = pd.DataFrame(rows, columns=ASSIGNMENT, dtype=str)
    return out.sort_values(ASSIGNMENT, kind="stable").reset_index(drop=True)


def check_assignment(assignment: pd.DataFrame) -> pd.DataFrame:
    """Refuse an assignment that lists a rater twice for one pair.

    Parameters
    ----------
    assignment : pandas.DataFrame of shape (n_rows, >= 3)
        Columns ``grader``, ``query_id``, ``chunk_id``.

    Returns
    -------
    pandas.DataFrame
        ``assignment`` unchanged.

    Raises
    ------
    InputError
        A (rater, pair) is listed twice; the error names both.
    """
    dup = assignment.duplicated(ASSIGNMENT, keep=False)
    if dup.any():
        row = assignment[dup].iloc[0]
        raise InputError("a rater is listed twice for one pair",
                         item=f"{row['grader']}: pair ({row['query_id']}, {row['chunk_id']})",
                         fix="Give each pair to each rater at most once")
    return assignment


def check_panel_gold(gold: pd.DataFrame, *, pool: pd.DataFrame | None, scale: Iterable[int],
                     path=None) -> pd.DataFrame:
    """The gold table checked against the pool and the scale.

    Parameters
    ----------
    gold : pandas.DataFrame of shape (n_gold, >= 3)
        ``query_id``, ``chunk_id``, ``grade``: pool pairs whose grade is known.
    pool : pandas.DataFrame or None
        The pool (``query_id``, ``chunk_id``); None before the pool exists (``relgrade
        init``): every other rule is checked, the pool's is left to the packets stage.
    scale : iterable of int
        The grade scale (params ``scale.grades``).
    path : str or os.PathLike, optional
        The gold file, named in errors.

    Returns
    -------
    pandas.DataFrame of shape (n_gold, 3)
        As :func:`relgrade.raters.gold.check_gold`.

    Raises
    ------
    InputError
        As :func:`~relgrade.raters.gold.check_gold`; a gold pair is not in the pool; a gold
        grade is off the scale. Each error names the file and the pair.
    """
    try:
        known = check_gold(gold)
    except InputError as e:
        raise InputError(e.rule, path=path, item=e.item, found=e.found, fix=e.fix) from None
    in_pool = None if pool is None else set(zip(pool["query_id"].astype(str),
                                                pool["chunk_id"].astype(str)))
    for q, c, g in zip(known["query_id"], known["chunk_id"], known["grade"]):
        if in_pool is not None and (q, c) not in in_pool:
            raise InputError("a gold pair is not in the pool", path=path,
                             item=f"pair ({q}, {c})",
                             fix="Gold questions are pool pairs with a known grade")
    labels = sorted(int(s) for s in scale)
    off = ~known["grade"].isin(labels)
    if off.any():
        row = known[off].iloc[0]
        raise InputError(f"a gold grade is off the scale {', '.join(map(str, labels))}",
                         path=path, item=f"pair ({row['query_id']}, {row['chunk_id']})",
                         found=int(row["grade"]))
    return known


def gold_count(n_pairs: int, fraction: float) -> int:
    """How many pool pairs :func:`select_gold` takes as gold: ``round(fraction * n_pairs)``.

    Halves round up.

    >>> gold_count(58, 0.4), gold_count(5, 0.1), gold_count(10, 0.25)
    (23, 1, 3)
    """
    return int(math.floor(float(fraction) * int(n_pairs) + 0.5))


def select_gold(gold: pd.DataFrame, *, pool: pd.DataFrame, fraction: float,
                rng: np.random.Generator) -> pd.DataFrame:
    """The gold questions of a panel: a seeded share ``fraction`` of the pool, of known grade.

    Parameters
    ----------
    gold : pandas.DataFrame of shape (n_gold, 3)
        The gold table (``query_id``, ``chunk_id``, ``grade``), checked against the pool
        (:func:`check_panel_gold`). Not modified.
    pool : pandas.DataFrame of shape (n_pairs, >= 2)
        The pool (``query_id``, ``chunk_id``).
    fraction : float in [0, 1)
        The share of the pool, and so of every rater's queue, that is gold (params
        ``gold.fraction``).
    rng : numpy.random.Generator
        Draws the gold questions when the gold table holds more pool pairs than needed.

    Returns
    -------
    pandas.DataFrame of shape (gold_count(n_pairs, fraction), 3)
        The rows of ``gold`` used as gold questions, sorted by (query_id, chunk_id).

    Raises
    ------
    InputError
        ``fraction`` is outside [0, 1); the gold table holds fewer pool pairs than the share
        needs (the error gives both counts and the fix).
    TypeError
        ``rng`` is not a ``numpy.random.Generator``.

    Notes
    -----
    Gold questions are pool pairs, each graded by ``raters.per_pair`` raters like every other
    pool pair (:func:`assign_pairs`), so the share of gold in a queue of :math:`n_r` pairs is
    that of the pool, :math:`m / n` with :math:`m` = :func:`gold_count`, give or take the one
    pair by which loads differ. The :math:`m` pairs are drawn without replacement from the gold
    pairs of the pool taken in (query_id, chunk_id) order, so the gold file's row order does
    not matter; with exactly :math:`m` of them all are taken and ``rng`` is not used.

    Examples
    --------
    >>> pool = pd.DataFrame({"query_id": ["q"] * 10, "chunk_id": list("abcdefghij")})
    >>> gold = pd.DataFrame({"query_id": ["q"] * 4, "chunk_id": list("abcd"),
    ...                      "grade": [2, 0, 1, 0]})
    >>> len(select_gold(gold, pool=pool, fraction=0.2, rng=np.random.default_rng(0)))
    2
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator built from a seed in params")
    fraction = float(fraction)
    if not (0.0 <= fraction < 1.0) or not math.isfinite(fraction):
        raise InputError("the gold share must be at least 0 and below 1", item="gold.fraction",
                         found=repr(fraction))
    known = check_gold(gold)
    n_pairs = len(pool[PAIR].astype(str).drop_duplicates())
    need = gold_count(n_pairs, fraction)
    if need > len(known):
        raise InputError("too few gold pairs for the share asked", item="gold.fraction",
                         found=f"{len(known)} gold pairs in the pool, {need} needed for a "
                               f"share of {fraction:g} of its {n_pairs} pairs",
                         fix="Add gold pairs to the gold file or lower gold.fraction")
    if need == len(known):
        return known
    picked = sorted(int(i) for i in rng.choice(len(known), size=need, replace=False))
    return known.iloc[picked].reset_index(drop=True)


def rater_queues(assignment: pd.DataFrame, gold: pd.DataFrame | None) -> pd.DataFrame:
    """Every rater's queue: the pairs assigned to them, the gold questions among them flagged.

    Parameters
    ----------
    assignment : pandas.DataFrame
        :func:`assign_pairs`' table.
    gold : pandas.DataFrame or None
        The gold questions (``query_id``, ``chunk_id``; :func:`select_gold`); None: no gold.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 5)
        Columns :data:`QUEUE`: ``grader``, ``query_id``, ``chunk_id`` (str), ``work``
        (bool: the rater's grade may enter the aggregate; True on every row, as every
        queued pair is a pool pair dealt like the rest) and ``gold`` (bool: the pair is a
        gold question). Sorted by (grader, query_id, chunk_id). **Private.**

    Raises
    ------
    InputError
        As :func:`check_assignment`.

    Notes
    -----
    No pair is added to a queue beyond its assignment: a gold question is in as many queues
    (``raters.per_pair``) as a work pair, so counting in how many raters' queues a pair
    appears does not find the gold. A rater's grade of a gold pair is both a gold answer
    (scored against the known grade) and one of the pair's ``per_pair`` grades.
    """
    check_assignment(assignment)
    out = assignment[ASSIGNMENT].astype(str).assign(work=True, gold=False)
    if gold is not None and len(gold):
        known = set(zip(gold["query_id"].astype(str), gold["chunk_id"].astype(str)))
        out["gold"] = [(q, c) in known for q, c in zip(out["query_id"], out["chunk_id"])]
    return out[QUEUE].sort_values(QUEUE[:3], kind="stable").reset_index(drop=True)


def redeal(queues: pd.DataFrame, open_rows: pd.DataFrame, *,
           rng: np.random.Generator) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The queues with the open pairs of removed raters dealt once more, to raters who stay.

    A rater removed on gold while grading stops there; the pairs of their queue they have
    not graded (``open_rows``) go each to one rater who stays and does not hold the pair
    yet: the one with the fewest queued pairs so far, ties broken by one seeded order of
    the raters. The removed raters' own rows stay in the table (their gold answers are
    what removed them; the aggregate stage reads them to remove them again, and discards
    their grades as before).

    Parameters
    ----------
    queues : pandas.DataFrame
        :func:`rater_queues`' table (:data:`QUEUE`). Not modified.
    open_rows : pandas.DataFrame
        ``grader``, ``query_id``, ``chunk_id``: the removed raters' rows of ``queues`` to
        deal again. Their graders count as removed: none of them is dealt a pair.
    rng : numpy.random.Generator
        Breaks ties between equally loaded raters (one permutation of the raters' names).

    Returns
    -------
    queues : pandas.DataFrame
        :data:`QUEUE`, the rows added with ``work`` True and ``gold`` as the pair's (a
        gold question stays one for whoever answers it), sorted as :func:`rater_queues`
        sorts.
    short : list of (str, str)
        The pairs no staying rater could take (each already held it), sorted.

    Notes
    -----
    Rows are dealt in order of (grader, query id, chunk id); the loads counted are the
    staying raters' rows, the dealt ones included. The same inputs and generator state
    give the same table.

    Examples
    --------
    >>> q = rater_queues(pd.DataFrame({"grader": ["a", "b", "a", "c"],
    ...                                "query_id": ["q1"] * 4,
    ...                                "chunk_id": ["c1", "c1", "c2", "c2"]}), None)
    >>> todo = pd.DataFrame({"grader": ["a", "a"], "query_id": ["q1", "q1"],
    ...                      "chunk_id": ["c1", "c2"]})
    >>> out, short = redeal(q, todo, rng=np.random.default_rng(0))
    >>> sorted(zip(out["grader"], out["chunk_id"]))
    [('a', 'c1'), ('a', 'c2'), ('b', 'c1'), ('b', 'c2'), ('c', 'c1'), ('c', 'c2')]
    >>> short
    []
    """
    q = queues[QUEUE].copy()
    q["grader"] = q["grader"].astype(str)
    todo = open_rows[ASSIGNMENT].astype(str).drop_duplicates() \
        .sort_values(ASSIGNMENT, kind="stable")
    gone = set(todo["grader"])
    if not len(todo):
        return q.sort_values(QUEUE[:3], kind="stable").reset_index(drop=True), []
    stay = [r for r in sorted(q["grader"].unique()) if r not in gone]
    tie = {r: int(i) for r, i in zip(stay, rng.permutation(len(stay)))}
    load = {r: 0 for r in stay}
    held: dict[tuple[str, str], set[str]] = {}
    for g, qid, cid in zip(q["grader"], q["query_id"].astype(str), q["chunk_id"].astype(str)):
        held.setdefault((qid, cid), set()).add(g)
        if g in load:
            load[g] += 1
    gold_of = {(str(a), str(b)): bool(o) for a, b, o in
               zip(q["query_id"], q["chunk_id"], q["gold"])}
    added, short = [], []
    for g, qid, cid in zip(todo["grader"], todo["query_id"], todo["chunk_id"]):
        if (qid, cid) not in held or g not in held[(qid, cid)]:
            raise InputError("a row to deal again is not in the queues",
                             item=f"{g}: pair ({qid}, {cid})")
        free = [r for r in stay if r not in held[(qid, cid)]]
        if not free:
            short.append((qid, cid))
            continue
        to = min(free, key=lambda r: (load[r], tie[r]))
        held[(qid, cid)].add(to)
        load[to] += 1
        added.append((to, qid, cid, True, gold_of[(qid, cid)]))
    out = pd.concat([q, pd.DataFrame(added, columns=QUEUE)], ignore_index=True) if added else q
    out["work"] = out["work"].astype(bool)
    out["gold"] = out["gold"].astype(bool)
    return out.sort_values(QUEUE[:3], kind="stable").reset_index(drop=True), sorted(set(short))


def rater_orders(queues: pd.DataFrame, *, seed: int, round: int,  # noqa: A002
                 batch_size: int) -> pd.DataFrame:
    """Each rater's display order per query, gold and work pairs shuffled together.

    Parameters
    ----------
    queues : pandas.DataFrame
        :func:`rater_queues`' table.
    seed : int
        The experiment seed (params ``seed``).
    round : int >= 1
        The grading round.
    batch_size : int from 1 to 5
        Chunks per batch.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 10)
        Columns :data:`RATER_ORDERS`: the rater, the orders table's columns (``role``
        ``"rater"``) and the private ``work`` / ``gold`` flags; sorted by (grader,
        query_id, position).

    Notes
    -----
    A rater's chunks of one query are sorted by id (code-point order) and permuted with
    ``rng_for(seed, query_id, "rater:" + name, round)`` (:func:`relgrade.rng.rng_for`): the
    order depends only on the set of chunk ids, never on which of them are gold, and it is
    rebuilt exactly from the recorded ``order_seed``.
    """
    _check_batch_size(batch_size)
    cols = {c: [] for c in RATER_ORDERS}
    flags = {(g, q, c): (w, o) for g, q, c, w, o in
             zip(queues["grader"], queues["query_id"], queues["chunk_id"], queues["work"],
                 queues["gold"])}
    for (grader, qid), g in queues.groupby(["grader", "query_id"], sort=True):
        ids = sorted(g["chunk_id"].astype(str))
        slot = RATER_SLOT + str(grader)
        perm = rng_for(seed, str(qid), slot, int(round)).permutation(len(ids))
        oseed = order_seed(seed, str(qid), slot, int(round))
        for pos, i in enumerate(perm):
            cid = ids[int(i)]
            w, o = flags[(grader, qid, cid)]
            cols["grader"].append(str(grader))
            cols["query_id"].append(str(qid))
            cols["chunk_id"].append(cid)
            cols["role"].append("rater")
            cols["round"].append(int(round))
            cols["position"].append(pos)
            cols["batch"].append(pos // int(batch_size))
            cols["order_seed"].append(oseed)
            cols["work"].append(bool(w))
            cols["gold"].append(bool(o))
    out = pd.DataFrame(cols)
    for c in ("round", "position", "batch", "order_seed"):
        out[c] = out[c].astype(np.int64)
    for c in ("work", "gold"):
        out[c] = out[c].astype(bool)
    return out[RATER_ORDERS]


def _check_batch_size(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or not 1 <= batch_size <= 5:
        raise InputError("grading.batch_size must be an integer from 1 to 5",
                         item="grading.batch_size", found=repr(batch_size))


def expected_load(n_pairs: int, n_raters: int, per_pair: int) -> tuple[int, int]:
    """The least and most work pairs a rater gets from :func:`assign_pairs`.

    >>> expected_load(10, 4, 3)
    (7, 8)
    """
    total = n_pairs * per_pair
    return total // n_raters, math.ceil(total / n_raters)


def queue_orders(pairs: pd.DataFrame, *, role: str, seed: int, round: int,  # noqa: A002
                 batch_size: int) -> pd.DataFrame:
    """Display orders of a queue of pairs for one role (the expert's adjudication queue).

    Parameters
    ----------
    pairs : pandas.DataFrame
        ``query_id``, ``chunk_id``: the pairs to show.
    role : str
        The role whose orders these are (e.g. ``"expert"``): it names the order slot.
    seed, round, batch_size
        As for :func:`rater_orders`.

    Returns
    -------
    pandas.DataFrame
        :data:`relgrade.schema.ORDERS`, sorted by (query_id, position); each query's chunks
        sorted by id and permuted with ``rng_for(seed, query_id, role, round)``.
    """
    _check_batch_size(batch_size)
    q = pairs[PAIR].astype(str)
    cols = {c: [] for c in ORDERS}
    for qid, g in q.groupby("query_id", sort=True):
        ids = sorted(g["chunk_id"])
        perm = rng_for(seed, qid, role, int(round)).permutation(len(ids))
        for pos, i in enumerate(perm):
            cols["query_id"].append(qid)
            cols["chunk_id"].append(ids[int(i)])
            cols["role"].append(role)
            cols["round"].append(int(round))
            cols["position"].append(pos)
            cols["batch"].append(pos // int(batch_size))
            cols["order_seed"].append(order_seed(seed, qid, role, int(round)))
    frame = pd.DataFrame(cols)
    for c in ("round", "position", "batch", "order_seed"):
        frame[c] = frame[c].astype(np.int64)
    return frame[ORDERS]
