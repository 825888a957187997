"""Gold questions: pairs with a known grade, hidden in each rater's queue.

When several raters grade the same pairs, some of them grade carelessly (fast, always the
same grade, or against the rubric). Gold questions find them: pairs whose grade is already
known (from an expert, or from a frozen key) are mixed into every rater's work queue at a
small share, about one pair in ten, and look exactly like the rest. Each rater's grades on the
gold pairs give an accuracy; a rater below the threshold is removed and every grade they gave
is discarded before aggregation (:mod:`relgrade.raters.aggregate`).

The gold table has the key's columns: ``query_id``, ``chunk_id`` (str) and ``grade`` (int),
one row per pair. A rater with fewer gold answers than ``min_gold`` has too few to judge; they
are kept and reported, never dropped in silence.

Which pairs of a queue are gold is private: the ``gold`` column of :func:`seed_gold`'s queue
is for relgrade, never for the rater (drop it before the queue leaves relgrade).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.raters.aggregate import check_ratings
from relgrade.schema import PAIR, QRELS

#: Columns of the queue built by :func:`seed_gold` (``grader`` only for per-rater queues).
QUEUE_COLUMNS = ["grader", "query_id", "chunk_id", "position", "gold"]

#: Columns of the table returned by :func:`gold_accuracy`.
ACCURACY_COLUMNS = ["grader", "gold_pairs", "correct", "accuracy", "within_one"]

#: Columns of the decisions table returned by :func:`remove_raters`.
DECISION_COLUMNS = ["grader", "gold_pairs", "accuracy", "removed", "reason"]


def check_gold(gold: pd.DataFrame) -> pd.DataFrame:
    """The gold table, checked: string ids, integer grades, one row per pair.

    Parameters
    ----------
    gold : pandas.DataFrame of shape (n_gold, >= 3)
        Columns ``query_id``, ``chunk_id`` and ``grade`` (the known grade). Not modified.

    Returns
    -------
    pandas.DataFrame of shape (n_gold, 3)
        Columns ``query_id``, ``chunk_id`` (str), ``grade`` (int64), sorted by
        (query_id, chunk_id).

    Raises
    ------
    InputError
        A column is missing, an id is empty, a grade is missing or not a whole number, or a
        pair is listed twice (the error names the pair).
    """
    missing = [c for c in QRELS if c not in gold.columns]
    if missing:
        raise InputError(f"the gold table lacks column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, gold.columns)))
    out = pd.DataFrame({"query_id": gold["query_id"].astype(str).to_numpy(),
                        "chunk_id": gold["chunk_id"].astype(str).to_numpy()})
    for col in PAIR:
        empty = out[col].str.strip() == ""
        if empty.any():
            raise InputError(f"the gold table has an empty {col}",
                             item=f"row {int(np.flatnonzero(empty.to_numpy())[0]) + 1}")
    grades = pd.to_numeric(gold["grade"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(grades) | (grades != np.round(grades))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError("a gold grade must be a whole number",
                         item=f"pair ({out.at[i, 'query_id']}, {out.at[i, 'chunk_id']})",
                         found=repr(gold["grade"].iloc[i]))
    out["grade"] = grades.astype(np.int64)
    dup = out.duplicated(PAIR, keep=False)
    if dup.any():
        first = out[dup].iloc[0]
        raise InputError("the gold table lists a pair twice",
                         item=f"pair ({first['query_id']}, {first['chunk_id']})",
                         fix="Keep one known grade per pair")
    return out.sort_values(PAIR, kind="stable").reset_index(drop=True)


def _queues(pool: pd.DataFrame, graders) -> dict[str | None, pd.DataFrame]:
    """Work pairs per queue: by the pool's ``grader`` column, per given grader, or one."""
    missing = [c for c in PAIR if c not in pool.columns]
    if missing:
        raise InputError(f"the pool lacks column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, pool.columns)))
    work = pd.DataFrame({c: pool[c].astype(str).to_numpy() for c in PAIR})
    if "grader" in pool.columns:
        if graders is not None:
            raise InputError("pass graders= or a pool with a grader column, not both",
                             item="seed_gold")
        work["grader"] = pool["grader"].astype(str).to_numpy()
        names = sorted(work["grader"].unique())
        queues = {g: work.loc[work["grader"] == g, PAIR] for g in names}
    elif graders is not None:
        names = sorted({str(g) for g in graders})
        if not names:
            raise InputError("graders= names no grader", item="seed_gold")
        queues = {g: work for g in names}
    else:
        queues = {None: work}
    for name, q in queues.items():
        dup = q.duplicated(PAIR, keep=False)
        if dup.any():
            first = q[dup].iloc[0]
            raise InputError("a pair is twice in one queue",
                             item=(f"{name}: " if name else "")
                             + f"pair ({first['query_id']}, {first['chunk_id']})")
    return queues


def seed_gold(pool: pd.DataFrame, gold: pd.DataFrame, *, share: float = 0.10,
              rng: np.random.Generator, graders=None) -> pd.DataFrame:
    """Each rater's work queue with gold pairs mixed in at about ``share``, in seeded order.

    Parameters
    ----------
    pool : pandas.DataFrame of shape (n_pairs, >= 2)
        The work: ``query_id``, ``chunk_id`` (str) and optionally ``grader`` (str), the rater
        whose queue the pair is in. Without a ``grader`` column every rater in ``graders``
        gets the whole pool (several raters per pair); with neither there is one queue.
        Not modified.
    gold : pandas.DataFrame of shape (n_gold, 3)
        The gold table: ``query_id``, ``chunk_id``, ``grade`` (see :func:`check_gold`).
    share : float in [0, 1), default 0.10
        The share of each queue that should be gold, after seeding.
    rng : numpy.random.Generator
        Draws the gold pairs and the queue order; build it from a seed in params.
    graders : iterable of str, optional
        The raters, when the pool has no ``grader`` column.

    Returns
    -------
    pandas.DataFrame of shape (n_queue_rows, 5) or (n_queue_rows, 4)
        Columns :data:`QUEUE_COLUMNS`: ``grader`` (str; absent for a single queue),
        ``query_id``, ``chunk_id`` (str), ``position`` (int64, 0-based place in the
        rater's queue) and ``gold`` (bool, **private**: whether the pair is a gold pair).
        Sorted by (grader, position). A gold pair looks like any other row in every column
        but ``gold``; the order is a seeded shuffle of the whole queue, so gold pairs are
        not grouped or placed at the end.

    Raises
    ------
    InputError
        ``share`` outside [0, 1); a column is missing; a pair twice in one queue; a bad
        gold table (see :func:`check_gold`); fewer gold pairs outside a queue than that
        queue needs (the error names the rater and both counts).
    TypeError
        ``rng`` is not a ``numpy.random.Generator``.

    Notes
    -----
    For a queue of :math:`n` work pairs of which :math:`p` are already gold pairs, the number
    of gold pairs added is

    .. math:: k = \\max\\left(0, \\operatorname{round}\\left(\\frac{s n - p}{1 - s}\\right)\\right)

    so that :math:`(p + k) / (n + k) \\approx s`, the share ``s`` of the seeded queue that is
    gold (halves round up). The :math:`k` pairs are drawn without replacement from the gold
    pairs not in the queue (taken in (query_id, chunk_id) order, so the gold table's row
    order does not matter), independently per rater, so raters get different gold pairs.
    Raters are served in name order from the one generator. The practice of hiding known
    answers among the work follows crowd-sourcing quality control (e.g. Oleson et al.,
    "Programmatic gold", HCOMP 2011).

    A gold pair added here sits in more queues than the work pairs when the queues share
    their work (several raters per pair): raters who compare queues find it. A rater panel
    (``grading.mode: raters``) therefore does not add gold beyond the work: its gold
    questions are pool pairs dealt to ``raters.per_pair`` raters like any other
    (:func:`relgrade.raters.assign.select_gold`, :func:`relgrade.raters.assign.assign_pairs`).

    Examples
    --------
    >>> pool = pd.DataFrame({"query_id": ["q1"] * 9, "chunk_id": list("abcdefghi")})
    >>> gold = pd.DataFrame({"query_id": ["q9", "q9"], "chunk_id": ["x", "y"],
    ...                      "grade": [2, 0]})
    >>> queue = seed_gold(pool, gold, share=0.1, rng=np.random.default_rng(7))
    >>> len(queue), int(queue["gold"].sum())
    (10, 1)
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator built from a seed in params")
    share = float(share)
    if not (0.0 <= share < 1.0) or not math.isfinite(share):
        raise InputError("the gold share must be at least 0 and below 1", item="share",
                         found=repr(share))
    known = check_gold(gold)
    gold_keys = list(zip(known["query_id"], known["chunk_id"]))
    gold_set = set(gold_keys)
    parts = []
    for name, work in _queues(pool, graders).items():
        pairs = list(zip(work["query_id"], work["chunk_id"]))
        in_queue = set(pairs)
        present = sum(p in gold_set for p in pairs)
        k = max(0, math.floor((share * len(pairs) - present) / (1.0 - share) + 0.5))
        candidates = [p for p in gold_keys if p not in in_queue]
        if k > len(candidates):
            raise InputError("too few gold pairs for the share asked",
                             item=name if name is not None else "queue",
                             found=f"{len(candidates)} gold pairs outside the queue, "
                                   f"{k} needed for a share of {share:g}",
                             fix="Add gold pairs or lower the share")
        picked = rng.choice(len(candidates), size=k, replace=False) if k else []
        rows = pairs + [candidates[i] for i in sorted(int(i) for i in picked)]
        order = rng.permutation(len(rows))
        position = np.empty(len(rows), dtype=np.int64)
        position[order] = np.arange(len(rows), dtype=np.int64)
        part = pd.DataFrame({
            "query_id": pd.Series([r[0] for r in rows], dtype=str),
            "chunk_id": pd.Series([r[1] for r in rows], dtype=str),
            "position": position,
            "gold": np.array([r in gold_set for r in rows], dtype=bool),
        })
        if name is not None:
            part.insert(0, "grader", name)
        parts.append(part.sort_values("position", kind="stable"))
    columns = QUEUE_COLUMNS if graders is not None or "grader" in pool.columns \
        else QUEUE_COLUMNS[1:]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.concat(parts, ignore_index=True)[columns]


def gold_accuracy(grades: pd.DataFrame, gold: pd.DataFrame, *,
                  repeats: bool = False) -> pd.DataFrame:
    """Each rater's accuracy on the gold pairs they graded.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The long grades table: ``query_id``, ``chunk_id``, ``grader``, ``grade``; one grade
        per pair and grader (select one round first). Null grades count as not graded.
        Not modified.
    gold : pandas.DataFrame of shape (n_gold, 3)
        The gold table (see :func:`check_gold`).
    repeats : bool, default False
        Accept a rater's repeated grades of one pair, each an answer on the gold pair
        (:func:`relgrade.raters.aggregate.check_ratings`).

    Returns
    -------
    pandas.DataFrame of shape (n_graders, 5)
        Columns :data:`ACCURACY_COLUMNS`, one row per grader of ``grades`` sorted by name:
        ``gold_pairs`` (int64, gold pairs the rater graded), ``correct`` (int64, exact
        matches), ``accuracy`` = correct / gold_pairs and ``within_one`` = the share of
        gold answers at most one grade from the known grade (float64 in [0, 1]; NaN when
        the rater graded no gold pair: undefined, not 0).

    Raises
    ------
    InputError
        As :func:`relgrade.raters.aggregate.check_ratings` and :func:`check_gold`.

    Notes
    -----
    Accuracy is exact agreement with the known grade, the usual gold-question score of
    crowd-sourcing; ``within_one`` shows whether a rater's misses are near misses (1 for 2)
    or opposite grades (0 for 2).

    Examples
    --------
    >>> g = pd.DataFrame({"query_id": ["q", "q", "q", "q"], "chunk_id": ["a", "b", "a", "b"],
    ...                   "grader": ["r1", "r1", "r2", "r2"], "grade": [2, 0, 0, 1]})
    >>> gold = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [2, 0]})
    >>> gold_accuracy(g, gold)[["grader", "correct", "accuracy", "within_one"]].values.tolist()
    [['r1', 2, 1.0, 1.0], ['r2', 0, 0.0, 0.5]]
    """
    rated = check_ratings(grades, repeats=repeats)
    known = check_gold(gold).rename(columns={"grade": "gold_grade"})
    joined = rated.merge(known, on=PAIR, how="inner")
    diff = (joined["grade"] - joined["gold_grade"]).abs()
    per = pd.DataFrame({"grader": joined["grader"], "correct": (diff == 0).astype(np.int64),
                        "near": (diff <= 1).astype(np.int64)})
    stats = per.groupby("grader", sort=True).agg(gold_pairs=("correct", "size"),
                                                 correct=("correct", "sum"),
                                                 near=("near", "sum"))
    names = sorted(rated["grader"].unique())
    stats = stats.reindex(names, fill_value=0)
    n = stats["gold_pairs"].to_numpy(dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(n > 0, stats["correct"].to_numpy() / np.maximum(n, 1), np.nan)
        within = np.where(n > 0, stats["near"].to_numpy() / np.maximum(n, 1), np.nan)
    return pd.DataFrame({
        "grader": pd.Series(names, dtype=str),
        "gold_pairs": n,
        "correct": stats["correct"].to_numpy(dtype=np.int64),
        "accuracy": accuracy.astype(float),
        "within_one": within.astype(float),
    })[ACCURACY_COLUMNS]


def remove_raters(grades: pd.DataFrame, accuracy: pd.DataFrame, *, threshold: float,
                  min_gold: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Discard every grade of a rater whose gold accuracy is below ``threshold``.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``, any other
        columns kept as they are). Not modified.
    accuracy : pandas.DataFrame
        As returned by :func:`gold_accuracy` (``grader``, ``gold_pairs``, ``accuracy``); a
        rater of ``grades`` missing from it counts as having no gold answers.
    threshold : float in [0, 1]
        The lowest gold accuracy a rater may have and stay.
    min_gold : int >= 0
        The fewest gold answers on which an accuracy is trusted.

    Returns
    -------
    kept_grades : pandas.DataFrame
        The rows of ``grades`` from raters that stay, in their original order (index reset).
    decisions : pandas.DataFrame of shape (n_reported, 5)
        Columns :data:`DECISION_COLUMNS`, one row per rater that is removed (``removed``
        True) or kept with too few gold answers to judge (``removed`` False), sorted by
        rater; ``reason`` says which and why. Raters kept on a good accuracy are not listed.

    Raises
    ------
    InputError
        ``threshold`` outside [0, 1]; ``min_gold`` not a non-negative integer; the grades
        table or the accuracy table lacks a column.

    Notes
    -----
    A rater is removed when ``gold_pairs >= min_gold`` and ``accuracy < threshold``. A rater
    with fewer than ``min_gold`` gold answers (or none at all, whatever ``min_gold``) is kept
    and flagged: their accuracy rests on too few pairs to remove them, and dropping them
    unseen would lose grades.

    Examples
    --------
    >>> acc = pd.DataFrame({"grader": ["r1", "r2", "r3"], "gold_pairs": [5, 5, 2],
    ...                     "accuracy": [0.8, 0.4, 0.0]})
    >>> g = pd.DataFrame({"query_id": ["q"] * 3, "chunk_id": ["a"] * 3,
    ...                   "grader": ["r1", "r2", "r3"], "grade": [1, 2, 0]})
    >>> kept, decisions = remove_raters(g, acc, threshold=0.7, min_gold=5)
    >>> kept["grader"].tolist(), decisions["removed"].tolist()
    (['r1', 'r3'], [True, False])
    """
    threshold = float(threshold)
    if not (0.0 <= threshold <= 1.0):
        raise InputError("the gold accuracy threshold must be between 0 and 1",
                         item="threshold", found=repr(threshold))
    if isinstance(min_gold, bool) or not isinstance(min_gold, (int, np.integer)) \
            or min_gold < 0:
        raise InputError("min_gold must be a whole number of at least 0", item="min_gold",
                         found=repr(min_gold))
    if "grader" not in grades.columns:
        raise InputError("the grades table lacks column(s) grader",
                         found="columns " + ", ".join(map(str, grades.columns)))
    missing = [c for c in ("grader", "gold_pairs", "accuracy") if c not in accuracy.columns]
    if missing:
        raise InputError(f"the accuracy table lacks column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, accuracy.columns)))
    table = {str(g): (int(n), float(a)) for g, n, a in
             zip(accuracy["grader"], accuracy["gold_pairs"], accuracy["accuracy"])}
    who = grades["grader"].astype(str)
    rows = []
    for name in sorted(who.unique()):
        n, acc = table.get(name, (0, math.nan))
        if n < min_gold or n == 0:
            answers = "1 gold answer" if n == 1 else f"{n} gold answers"
            rows.append((name, n, acc, False,
                         f"kept, flagged: only {answers}, fewer than min_gold {min_gold}; "
                         "accuracy not judged"))
        elif acc < threshold:
            rows.append((name, n, acc, True,
                         f"removed: gold accuracy {acc:.4f} below {threshold:g} "
                         f"on {n} gold answers; all their grades discarded"))
    decisions = pd.DataFrame({
        "grader": pd.Series([r[0] for r in rows], dtype=str),
        "gold_pairs": pd.Series([r[1] for r in rows], dtype=np.int64),
        "accuracy": pd.Series([r[2] for r in rows], dtype=float),
        "removed": pd.Series([r[3] for r in rows], dtype=bool),
        "reason": pd.Series([r[4] for r in rows], dtype=str),
    })
    dropped = set(decisions.loc[decisions["removed"], "grader"])
    kept = grades[~who.isin(dropped).to_numpy()].reset_index(drop=True)
    return kept, decisions
