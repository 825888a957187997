"""A rater panel's grades → one grade per pool pair, and the pairs an expert must resolve.

The aggregation stage of ``grading.mode: raters`` (see docs/raters.md), as table functions:

1. :func:`aggregate_panel`: split each rater's grades into work (pairs assigned to them) and
   gold answers (every grade they gave a pair whose grade is known); score every rater on
   gold (exact and within one grade); remove the raters below ``min_accuracy`` and discard
   all their grades; aggregate the kept work grades by majority vote or Dawid-Skene; send to
   the adjudication queue every pair whose kept grades lie more than ``max_spread`` apart,
   every majority tie, and every pair left with no kept rater.
2. :func:`adjudicate`: the expert's grades replace the aggregate on the queued pairs, with
   the expert's reason and the grade they replaced recorded; a queued pair the expert has not
   graded yet is pending work, and an expert grade of a pair outside the queue is set aside
   (kept in the bank, unused).

Gold answers never reach the key: the key takes the aggregate of work grades, or the
expert's grade, nothing else; the known gold grade is used only to score raters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.protocol import bank
from relgrade.raters.aggregate import check_ratings, dawid_skene, majority_grade
from relgrade.raters.gold import check_gold, gold_accuracy, remove_raters
from relgrade.schema import PAIR, PENDING

#: Columns of :attr:`PanelResult.aggregated`.
AGGREGATED = ["query_id", "chunk_id", "grade", "votes", "grades", "spread", "tie",
              "support"]

#: Columns of the adjudication queue (:attr:`PanelResult.queue`).
QUEUE = ["query_id", "chunk_id", "grades", "spread", "reason"]

#: Columns of :func:`adjudicate`'s provenance table.
PROVENANCE = ["query_id", "chunk_id", "aggregate_grade", "grade", "expert", "reason",
              "queued_because"]

#: The ``why`` of a queued pair the expert still owes (pending work).
ADJUDICATE = bank.ADJUDICATE

#: Methods of :func:`aggregate_panel`.
METHODS = ("majority", "dawid-skene")


@dataclass(frozen=True)
class PanelResult:
    """What :func:`aggregate_panel` decides.

    Attributes
    ----------
    accuracy : pandas.DataFrame
        :data:`relgrade.raters.gold.ACCURACY_COLUMNS`, one row per rater: gold answers,
        exact and within-one accuracy (NaN with no gold answer).
    decisions : pandas.DataFrame
        :data:`relgrade.raters.gold.DECISION_COLUMNS`: the raters removed (and those kept
        unjudged), with the reason.
    aggregated : pandas.DataFrame
        :data:`AGGREGATED`, one row per pool pair in (query_id, chunk_id) order: ``grade``
        (int64; -1 for a pair no kept rater graded), ``votes`` (kept raters), ``grades``
        (their grades ascending, comma-separated), ``spread`` (highest minus lowest, int64),
        ``tie`` (bool: two or more grades share the top count; majority only) and
        ``support`` (float64: the share of kept raters who gave the grade for majority, the
        posterior of the grade for Dawid-Skene).
    queue : pandas.DataFrame
        :data:`QUEUE`: the pairs for the expert, with the reason each is queued.
    confusion : dict
        rater → ``{"against_gold": [[...]], "against_aggregate": [[...]]}``: counts, rows
        the known (or aggregate) grade, columns the grade given, in scale order; for
        Dawid-Skene also ``"estimated"``, the model's confusion matrix (rows sum to 1).
    dawid_skene : dict or None
        Iterations, convergence and class priors when Dawid-Skene was used.
    """

    accuracy: pd.DataFrame
    decisions: pd.DataFrame
    aggregated: pd.DataFrame
    queue: pd.DataFrame
    confusion: dict
    dawid_skene: dict | None


def _counts(true: np.ndarray, given: np.ndarray, labels: list[int]) -> list[list[int]]:
    k = len(labels)
    index = {g: i for i, g in enumerate(labels)}
    m = np.zeros((k, k), dtype=np.int64)
    for t, g in zip(true, given):
        m[index[int(t)], index[int(g)]] += 1
    return m.tolist()


def split_panel(ratings: pd.DataFrame, queues: pd.DataFrame) -> pd.DataFrame:
    """Each rater's grades marked as work or not, refusing grades outside their queue.

    Parameters
    ----------
    ratings : pandas.DataFrame
        :func:`relgrade.raters.aggregate.check_ratings`' table of the raters' grades.
    queues : pandas.DataFrame
        The private queue table (``grader``, ``query_id``, ``chunk_id``, ``work``).

    Returns
    -------
    pandas.DataFrame
        ``ratings`` with a bool column ``work``.

    Raises
    ------
    InputError
        A rater graded a pair that is not in their queue (the error names both).
    """
    flags = {(g, q, c): bool(w) for g, q, c, w in
             zip(queues["grader"].astype(str), queues["query_id"].astype(str),
                 queues["chunk_id"].astype(str), queues["work"])}
    work = []
    for g, q, c in zip(ratings["grader"], ratings["query_id"], ratings["chunk_id"]):
        if (g, q, c) not in flags:
            raise InputError("a rater graded a pair that is not in their queue",
                             item=f"{g}: pair ({q}, {c})",
                             fix="A rater's grades count only on the pairs assigned to them")
        work.append(flags[(g, q, c)])
    return ratings.assign(work=np.array(work, dtype=bool))


def removed_on_gold(grades: pd.DataFrame, *, queues: pd.DataFrame, gold: pd.DataFrame | None,
                    min_accuracy: float, min_gold: int) -> list[str]:
    """The raters :func:`aggregate_panel` removes on their gold answers, from the same grades.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The raters' grades of pairs in their queues (``query_id``, ``chunk_id``, ``grader``,
        ``grade``), one per rater and pair. Not modified.
    queues : pandas.DataFrame
        The private queue table (:func:`relgrade.raters.assign.rater_queues`).
    gold : pandas.DataFrame or None
        The gold questions (``query_id``, ``chunk_id``, ``grade``); None or empty: nobody
        is removed.
    min_accuracy : float in [0, 1]
        Params ``gold.min_accuracy``.
    min_gold : int >= 0
        Params ``gold.min_gold``.

    Returns
    -------
    list of str
        The removed raters, sorted by name.

    Raises
    ------
    InputError
        As :func:`split_panel`, :func:`relgrade.raters.gold.gold_accuracy` and
        :func:`relgrade.raters.gold.remove_raters`.
    """
    if gold is None or not len(gold) or not len(grades):
        return []
    ratings = split_panel(check_ratings(grades), queues)
    decisions = _gold_decisions(ratings, gold, min_accuracy, min_gold)[3]
    return sorted(str(g) for g in decisions.loc[decisions["removed"], "grader"])


def _gold_decisions(ratings: pd.DataFrame, gold: pd.DataFrame | None, min_accuracy: float,
                    min_gold: int):
    """(the checked gold table or None, each rater's gold accuracy, the ratings of the raters
    kept, the removal decisions): the one rule :func:`removed_on_gold` and
    :func:`aggregate_panel` share. No gold: no rater is scored or removed."""
    if gold is not None and len(gold):
        known = check_gold(gold)
        accuracy = gold_accuracy(ratings, known)
        kept, decisions = remove_raters(ratings, accuracy, threshold=min_accuracy,
                                        min_gold=min_gold)
        return known, accuracy, kept, decisions
    accuracy = gold_accuracy(ratings, pd.DataFrame(columns=["query_id", "chunk_id", "grade"]))
    _, decisions = remove_raters(ratings.iloc[:0], accuracy, threshold=0.0, min_gold=0)
    return None, accuracy, ratings, decisions


def aggregate_panel(grades: pd.DataFrame, *, queues: pd.DataFrame, pool: pd.DataFrame,
                    gold: pd.DataFrame | None, scale: Iterable[int], method: str = "majority",
                    min_accuracy: float = 0.6, min_gold: int = 3, max_spread: int = 1,
                    tol: float = 1e-7, max_iter: int = 2000) -> PanelResult:
    """Gold scoring, rater removal, aggregation and the adjudication queue, in that order.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The raters' grades (``query_id``, ``chunk_id``, ``grader``, ``grade``), one per
        rater and pair. Not modified.
    queues : pandas.DataFrame
        The private queue table (:func:`relgrade.raters.assign.rater_queues`).
    pool : pandas.DataFrame
        The pool (``query_id``, ``chunk_id``): the pairs that need a grade.
    gold : pandas.DataFrame or None
        The gold table (``query_id``, ``chunk_id``, ``grade``), or None: no rater is scored
        or removed.
    scale : iterable of int
        The grade scale.
    method : {"majority", "dawid-skene"}
        The aggregator (params ``aggregation.method``).
    min_accuracy : float in [0, 1]
        Raters below this exact gold accuracy are removed (params ``gold.min_accuracy``).
    min_gold : int >= 0
        The fewest gold answers an accuracy needs to remove a rater (``gold.min_gold``).
    max_spread : int >= 0
        A pair whose kept grades span more than this goes to the expert
        (``adjudication.max_spread``).
    tol, max_iter
        Dawid-Skene's stopping rule (``aggregation.tol``, ``aggregation.max_iter``).

    Returns
    -------
    PanelResult

    Raises
    ------
    InputError
        Unknown ``method``; as :func:`relgrade.raters.aggregate.check_ratings`,
        :func:`split_panel` and :func:`relgrade.raters.gold.check_gold`.

    Notes
    -----
    The majority vote records the most frequent grade; a tie between two or more most
    frequent grades is never settled by a rule: the pair goes to the expert (its ``grade``
    holds the tie rule's value, :data:`relgrade.raters.aggregate.TIE_RULE`, only until the
    expert's grade replaces it). Dawid-Skene (Dawid & Skene 1979) records the most probable
    true grade under per-rater confusion matrices fitted by EM over the kept work grades.
    The spread rule applies to both.
    """
    if method not in METHODS:
        raise InputError("unknown aggregation method", item="aggregation.method",
                         found=repr(method), fix=f"Use one of {', '.join(METHODS)}")
    labels = sorted(int(s) for s in scale)
    ratings = split_panel(check_ratings(grades, scale=labels), queues)
    raters = sorted(ratings["grader"].unique())
    known, accuracy, kept_ratings, decisions = _gold_decisions(ratings, gold, min_accuracy,
                                                               min_gold)
    work = kept_ratings[kept_ratings["work"]].drop(columns="work")
    pairs = pool[PAIR].astype(str).drop_duplicates().sort_values(PAIR, kind="stable") \
        .reset_index(drop=True)
    by = {k: g["grade"].to_numpy(dtype=np.int64)
          for k, g in work.groupby(PAIR, sort=True)}
    ds_info, ds_labels, ds_conf = None, {}, None
    if method == "dawid-skene" and len(work):
        ds = dawid_skene(work, scale=labels, tol=tol, max_iter=max_iter)
        ds_labels = {(q, c): (int(g), float(p)) for q, c, g, p in
                     zip(ds.labels["query_id"], ds.labels["chunk_id"], ds.labels["grade"],
                         ds.labels["posterior"])}
        ds_info = {"iterations": ds.iterations, "converged": ds.converged,
                   "log_likelihood": ds.log_likelihood,
                   "priors": {str(k): float(v) for k, v in ds.priors.items()}}
        ds_conf = ds.confusion
    rows, queue = [], []
    for q, c in zip(pairs["query_id"], pairs["chunk_id"]):
        got = np.sort(by.get((q, c), np.zeros(0, dtype=np.int64)))
        text = ",".join(map(str, got.tolist()))
        if len(got) == 0:
            rows.append((q, c, -1, 0, "", 0, False, 0.0))
            queue.append((q, c, "", 0, "no kept rater graded it"))
            continue
        values, counts = np.unique(got, return_counts=True)
        modes = values[counts == counts.max()]
        tie = method == "majority" and len(modes) > 1
        spread = int(got.max() - got.min())
        if method == "majority":
            grade = majority_grade(modes.tolist(), labels)
            support = float((got == grade).sum() / len(got))
        else:
            grade, support = ds_labels[(q, c)]
        rows.append((q, c, grade, len(got), text, spread, tie, support))
        why = []
        if tie:
            why.append(f"majority tie between grades {', '.join(map(str, modes.tolist()))}")
        if spread > max_spread:
            why.append(f"spread {spread} > max_spread {max_spread}")
        if why:
            queue.append((q, c, text, spread, "; ".join(why)))
    aggregated = pd.DataFrame(rows, columns=AGGREGATED).astype(
        {"grade": "int64", "votes": "int64", "spread": "int64", "tie": bool,
         "support": float})
    queue_df = pd.DataFrame(queue, columns=QUEUE).astype({"spread": "int64"})
    agg_of = {(q, c): g for q, c, g in zip(aggregated["query_id"], aggregated["chunk_id"],
                                           aggregated["grade"])}
    gold_of = ({} if known is None else
               {(q, c): int(g) for q, c, g in zip(known["query_id"], known["chunk_id"],
                                                  known["grade"])})
    confusion = {}
    for r in raters:
        mine = ratings[ratings["grader"] == r]
        keys = list(zip(mine["query_id"], mine["chunk_id"]))
        on_gold = [i for i, k in enumerate(keys) if k in gold_of]
        given = mine["grade"].to_numpy()
        entry = {"against_gold": _counts(np.array([gold_of[keys[i]] for i in on_gold]),
                                         given[on_gold], labels)}
        on_work = [i for i, (k, w) in enumerate(zip(keys, mine["work"]))
                   if w and agg_of.get(k, -1) >= 0]
        entry["against_aggregate"] = _counts(np.array([agg_of[keys[i]] for i in on_work]),
                                             given[on_work], labels)
        if ds_conf is not None and r in ds_conf.index.get_level_values("grader"):
            entry["estimated"] = ds_conf.loc[r].to_numpy().round(6).tolist()
        confusion[r] = entry
    return PanelResult(accuracy=accuracy, decisions=decisions, aggregated=aggregated,
                       queue=queue_df, confusion=confusion, dawid_skene=ds_info)


def require_expert(queue: pd.DataFrame, expert: str | None, *, limit: int = 10) -> None:
    """Refuse a non-empty adjudication queue when no expert is declared.

    Raises
    ------
    InputError
        ``queue`` has pairs and ``expert`` is None: the message names the pairs (ties first)
        and the params key to set.
    """
    if expert is not None or len(queue) == 0:
        return
    ties = queue["reason"].str.contains("tie")
    order = pd.concat([queue[ties], queue[~ties]])
    named = [f"({q}, {c})" for q, c in zip(order["query_id"], order["chunk_id"])]
    more = len(named) - limit
    what = "aggregation ties and pairs" if ties.any() else "pairs"
    raise InputError(f"{what} need adjudication but no expert is declared",
                     item="adjudication.expert",
                     found=", ".join(named[:limit]) + (f" and {more} more" if more > 0 else ""),
                     fix="Declare a grader with role expert and name it in "
                         "adjudication.expert")


def queued_expert_grades(expert_grades: pd.DataFrame,
                         queue: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The expert's grades of queued pairs, and those of pairs the queue no longer holds.

    The adjudication queue follows the panel (its raters, their grades, the aggregation
    method, ``adjudication.max_spread``): when it changes, the expert's grades of pairs that
    left it stay in the judgment bank but are not used, and come back into use if the pairs
    are queued again.

    Parameters
    ----------
    expert_grades : pandas.DataFrame
        The expert's grades (``query_id``, ``chunk_id``, ...). Not modified.
    queue : pandas.DataFrame
        :attr:`PanelResult.queue` (``query_id``, ``chunk_id``, ...).

    Returns
    -------
    kept : pandas.DataFrame
        The rows of ``expert_grades`` whose pair is queued, index reset.
    aside : pandas.DataFrame
        The other rows (pairs not queued now), index reset.

    Examples
    --------
    >>> g = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [2, 0]})
    >>> kept, aside = queued_expert_grades(g, pd.DataFrame({"query_id": ["q"],
    ...                                                     "chunk_id": ["b"]}))
    >>> kept["chunk_id"].tolist(), aside["chunk_id"].tolist()
    (['b'], ['a'])
    """
    queued = set(zip(queue["query_id"].astype(str), queue["chunk_id"].astype(str)))
    keep = pd.Series([(q, c) in queued for q, c in
                      zip(expert_grades["query_id"].astype(str),
                          expert_grades["chunk_id"].astype(str))],
                     index=expert_grades.index, dtype=bool)
    return (expert_grades[keep].reset_index(drop=True),
            expert_grades[~keep].reset_index(drop=True))


def adjudicate(aggregated: pd.DataFrame, queue: pd.DataFrame, expert_grades: pd.DataFrame,
               *, expert: str | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The key grader's grades: the aggregate, with the expert's grades on queued pairs.

    Parameters
    ----------
    aggregated : pandas.DataFrame
        :attr:`PanelResult.aggregated`.
    queue : pandas.DataFrame
        :attr:`PanelResult.queue`.
    expert_grades : pandas.DataFrame
        The expert's grades (``query_id``, ``chunk_id``, ``grade``, ``reason``); may be
        empty. Grades of pairs not in ``queue`` (queued under an earlier panel or method)
        are not used (:func:`queued_expert_grades`); they are never an error.
    expert : str or None
        The expert's name (params ``adjudication.expert``).

    Returns
    -------
    grades : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``grade`` (int64), ``reason`` (str), one row per pool
        pair in (query_id, chunk_id) order; empty while ``pending`` is not.
    provenance : pandas.DataFrame
        :data:`PROVENANCE`: per adjudicated pair the aggregate it replaced, the expert's
        grade and reason, and why the pair was queued.
    pending : pandas.DataFrame
        :data:`relgrade.schema.PENDING`: queued pairs the expert has not graded
        (``why`` ``"adjudicate"``).

    Raises
    ------
    InputError
        The queue is not empty and no expert is declared (:func:`require_expert`).
    """
    require_expert(queue, expert)
    queued = {(q, c): why for q, c, why in
              zip(queue["query_id"], queue["chunk_id"], queue["reason"])}
    kept, _ = queued_expert_grades(expert_grades, queue)
    done = {(str(q), str(c)): (int(g), str(r)) for q, c, g, r in
            zip(kept["query_id"], kept["chunk_id"], kept["grade"], kept["reason"])}
    owed = [(expert, q, c, ADJUDICATE) for (q, c) in sorted(queued) if (q, c) not in done]
    pending = pd.DataFrame(owed, columns=PENDING)
    prov = [(q, c, int(a), done[(q, c)][0], expert, done[(q, c)][1], queued[(q, c)])
            for q, c, a in zip(aggregated["query_id"], aggregated["chunk_id"],
                               aggregated["grade"]) if (q, c) in done]
    provenance = pd.DataFrame(prov, columns=PROVENANCE)
    if len(pending):
        return pd.DataFrame(columns=["query_id", "chunk_id", "grade", "reason"]), \
            provenance, pending
    rows = []
    for q, c, g, v, text, tie, support in zip(
            aggregated["query_id"], aggregated["chunk_id"], aggregated["grade"],
            aggregated["votes"], aggregated["grades"], aggregated["tie"],
            aggregated["support"]):
        if (q, c) in done:
            rows.append((q, c, done[(q, c)][0], done[(q, c)][1]))
        else:
            rows.append((q, c, int(g), f"aggregate of {v} raters: {text}"))
    out = pd.DataFrame(rows, columns=["query_id", "chunk_id", "grade", "reason"])
    return out.astype({"grade": "int64"}), provenance, pending
