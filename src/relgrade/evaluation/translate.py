"""Translating numbers between two keys: every arm scored under the previous and the current key.

When a new frozen key replaces one that metrics used (a deeper or wider pool, a new query
set, a new round), the numbers published under the old key are not comparable with the new
ones: the pool, the queries or the grades differ. For one cycle both keys are kept, and
:func:`translate` scores every arm's run under each, on one measure, so a reader can see
how far each arm's number moved (the shift, current − previous) and whether the arms' order
changed (Kendall's tau-b between the two scorings, :func:`kendall_tau_b`).

Each key is scored as the metrics stage scores it: every query of the key, a query the run
does not answer scores 0, a query with nothing relevant in that key is left out
(:func:`relgrade.evaluation.metrics.per_query` with ``on_missing_query="zero"``), and the
arm's number is the mean over those queries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation import metrics

#: What each key's side of the translation names, copied from its record.
KEY_FIELDS = ("key_sha256", "pool_version", "rubric_version", "round")


def kendall_tau_b(x: Mapping[str, float], y: Mapping[str, float]) -> float | None:
    """Kendall's tau-b between two scorings of the same items, by counting pairs.

    Parameters
    ----------
    x, y : mapping of str to float
        Item → score under each scoring; only items in both, with finite scores, count.

    Returns
    -------
    float or None
        ``(C - D) / sqrt((P - Tx) (P - Ty))`` in [-1, 1], where over the P pairs of items C
        counts the pairs both scorings order the same way, D the pairs they order oppositely,
        Tx the pairs tied under ``x`` and Ty those tied under ``y`` (Kendall 1945, "The
        treatment of ties in ranking problems"; what ``scipy.stats.kendalltau`` computes by
        default). None when it is undefined: fewer than 2 items, or one scoring gives every
        item the same score.

    Examples
    --------
    >>> kendall_tau_b({"a": 0.5, "b": 0.4, "c": 0.3}, {"a": 0.6, "b": 0.2, "c": 0.3})
    0.3333333333333333
    """
    items = sorted(i for i in set(x) & set(y) if _finite(x[i]) and _finite(y[i]))
    concordant = discordant = tied_x = tied_y = pairs = 0
    for n, a in enumerate(items):
        for b in items[n + 1:]:
            pairs += 1
            dx, dy = x[a] - x[b], y[a] - y[b]
            tied_x += dx == 0
            tied_y += dy == 0
            if dx * dy > 0:
                concordant += 1
            elif dx * dy < 0:
                discordant += 1
    if pairs == 0 or tied_x == pairs or tied_y == pairs:
        return None
    return (concordant - discordant) / math.sqrt((pairs - tied_x) * (pairs - tied_y))


def _finite(v) -> bool:
    return v is not None and math.isfinite(float(v))


def _order(scores: Mapping[str, float | None]) -> list[str]:
    """Arms best first (score descending, ties by name); arms without a score last, by name."""
    scored = sorted((a for a, v in scores.items() if _finite(v)), key=lambda a: (-scores[a], a))
    return scored + sorted(a for a, v in scores.items() if not _finite(v))


@dataclass(frozen=True)
class Translation:
    """Every arm under the previous and the current key, on one measure.

    Attributes
    ----------
    measure : str
        The measure scored, as named by the caller.
    previous, current : dict
        Each key's ``key_sha256``, ``pool_version``, ``rubric_version``, ``round`` (from its
        record; None when not given) and ``queries`` (int: queries the measure averages
        over under that key).
    queries_shared : int
        Queries scored under both keys.
    arms : list of dict
        Per arm, in the current key's order: ``arm``, ``previous``, ``current`` (float
        means, None when no query is scored), ``shift`` (current − previous, None when
        either is None), ``rank_previous``, ``rank_current`` (1 = best).
    order_previous, order_current : list of str
        The arms best first under each key (score descending, ties by arm name).
    kendall_tau : float or None
        :func:`kendall_tau_b` between the two scorings, over the arms both keys judged
        (every arm but those of ``arms_new``).
    order_changed : bool
        The two orders of the arms both keys judged differ.
    arms_new : list of str
        The arms new to the previous key (sorted): it lacks some pair of their pools, which
        count as not relevant under it; empty when every arm is judged by both keys.
    """

    measure: str
    previous: dict
    current: dict
    queries_shared: int
    arms: list
    order_previous: list
    order_current: list
    kendall_tau: float | None
    order_changed: bool
    arms_new: list = ()

    def to_dict(self) -> dict:
        """The translation as plain JSON-ready values (same field names; ``arms_new`` only
        when some arm is new to the previous key)."""
        out = {"measure": self.measure, "previous": dict(self.previous),
               "current": dict(self.current), "queries_shared": self.queries_shared,
               "arms": [dict(r) for r in self.arms], "order_previous": list(self.order_previous),
               "order_current": list(self.order_current), "kendall_tau": self.kendall_tau,
               "order_changed": self.order_changed}
        if self.arms_new:
            out["arms_new"] = list(self.arms_new)
        return out


def pooled_depth(runs: Mapping[str, pd.DataFrame], key: pd.DataFrame, *,
                 ties: str = "score") -> int:
    """The deepest rank to which a key holds every arm's pairs: the depth of the pool it was
    made from, read from the key itself (on its queries).

    Parameters
    ----------
    runs : mapping of str to pandas.DataFrame
        Arm → its run (``query_id``, ``chunk_id``, ``rank``, ``score``).
    key : pandas.DataFrame
        Qrels (``query_id``, ``chunk_id``, ``grade``).
    ties : {"score", "rank"}, default "score"
        params ``runs.ties``.

    Returns
    -------
    int
        ``d`` ≥ 0: every arm's top ``d`` on the key's queries is in the key, and some arm's
        pair at rank ``d + 1`` is not (its deepest rank when every pair is in the key).

    Examples
    --------
    >>> run = pd.DataFrame({"query_id": ["q1", "q1", "q1"], "chunk_id": ["a", "b", "c"],
    ...                     "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0]})
    >>> key = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"], "grade": [1, 0]})
    >>> pooled_depth({"x": run}, key)
    2
    """
    from relgrade.ranking import canonical_ranking

    held = set(zip(key["query_id"].astype(str), key["chunk_id"].astype(str)))
    queries = {q for q, _ in held}
    depth = None
    deepest = 0
    for arm in runs:
        ranked = canonical_ranking(runs[arm], ties=ties)
        ranked = ranked[ranked["query_id"].astype(str).isin(queries)]
        if ranked.empty:
            continue
        deepest = max(deepest, int(ranked["rank"].max()))
        lacks = [p not in held for p in zip(ranked["query_id"].astype(str),
                                            ranked["chunk_id"].astype(str))]
        if any(lacks):
            first = int(ranked["rank"].to_numpy()[lacks].min()) - 1
            depth = first if depth is None else min(depth, first)
    return deepest if depth is None else depth


def new_to_key(runs: Mapping[str, pd.DataFrame], key: pd.DataFrame, *, depth: int,
               ties: str = "score") -> list[str]:
    """The arms a key did not judge: some pair of their top ``depth`` on the key's queries is
    not in the key (an arm added to the pool after it froze), while another arm's are all in
    it. When no arm's are (a pool made deeper since, say), no arm is singled out.

    Parameters
    ----------
    runs : mapping of str to pandas.DataFrame
        Arm → its run (``query_id``, ``chunk_id``, ``rank``, ``score``).
    key : pandas.DataFrame
        Qrels (``query_id``, ``chunk_id``, ``grade``).
    depth : int
        The pool depth to check to (:func:`pooled_depth`); below 1, no arm is new.
    ties : {"score", "rank"}, default "score"
        params ``runs.ties``.

    Returns
    -------
    list of str
        The arms, sorted; empty when the key holds every arm's pooled pairs, or no arm's.

    Examples
    --------
    >>> run = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"],
    ...                     "rank": [1, 2], "score": [2.0, 1.0]})
    >>> key = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grade": [1]})
    >>> old = run.assign(chunk_id=["a", "c"])
    >>> new_to_key({"x": run, "y": old}, key, depth=1)
    []
    >>> new_to_key({"x": run, "y": old}, key, depth=2)  # each lacks one: none singled out
    []
    >>> key2 = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "c"], "grade": [1, 0]})
    >>> new_to_key({"x": run, "y": old}, key2, depth=2)
    ['x']
    """
    from relgrade.ranking import top_k

    if depth < 1:
        return []
    held = set(zip(key["query_id"].astype(str), key["chunk_id"].astype(str)))
    queries = {q for q, _ in held}
    lacking = []
    for arm in sorted(runs, key=str):
        top = top_k(runs[arm], depth, ties=ties)
        on = top["query_id"].astype(str).isin(queries)
        pairs = zip(top.loc[on, "query_id"].astype(str), top.loc[on, "chunk_id"].astype(str))
        if any(p not in held for p in pairs):
            lacking.append(str(arm))
    return lacking if len(lacking) < len(runs) else []


def _score(key: pd.DataFrame, stacked: pd.DataFrame, arms, measure: str, *, relevant_min: int,
           ties: str, which: str) -> tuple[dict, set]:
    try:
        table = metrics.per_query(qrels=key, run=stacked, measures=[measure],
                                  on_missing_query="zero", ties=ties, relevant_min=relevant_min)
    except InputError as e:
        if e.item is not None or e.path is not None:
            raise
        # name which of the two keys broke the rule
        raise InputError(e.rule, item=f"the {which} key", found=e.found, fix=e.fix) from None
    means = metrics.mean(table)
    scores = {a: None for a in arms}
    for (arm, _), v in means.items():
        scores[str(arm)] = float(v)
    return scores, set(table["query_id"].astype(str))


def translate(*, runs: Mapping[str, pd.DataFrame], previous: pd.DataFrame,
              current: pd.DataFrame, measure: str, relevant_min: int = 1, ties: str = "score",
              previous_record: Mapping | None = None,
              current_record: Mapping | None = None, depth: int | None = None) -> Translation:
    """Score every arm's run under two keys and compare.

    Parameters
    ----------
    runs : mapping of str to pandas.DataFrame
        Arm → its run (``query_id``, ``chunk_id``, ``rank``, ``score``), at least one arm.
    previous, current : pandas.DataFrame
        The replaced key and the key now frozen (qrels: ``query_id``, ``chunk_id``,
        ``grade``).
    measure : str
        The measure to translate (params ``metrics.primary``).
    relevant_min : int, default 1
        params ``scale.relevant_min``.
    ties : {"score", "rank"}, default "score"
        params ``runs.ties``.
    previous_record, current_record : mapping, optional
        The two keys' records; their ``key_sha256``, ``pool_version``, ``rubric_version``
        and ``round`` are copied.
    depth : int, optional
        The current pool's depth (:func:`pooled_depth` of the current key): the arms with a
        pair of their top ``depth`` the previous key lacks (:func:`new_to_key`) are left out
        of Kendall's tau and of ``order_changed``, their previous number being that of pairs
        never judged. None: every arm counts.

    Returns
    -------
    Translation

    Raises
    ------
    InputError
        No run is given; or as :func:`relgrade.evaluation.metrics.per_query` (a column
        missing, a grade not an integer, a measure that does not parse, ...), naming "the
        previous key" or "the current key" when the error names no file or id.

    Examples
    --------
    >>> run = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"],
    ...                     "rank": [1, 2], "score": [2.0, 1.0]})
    >>> old = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grade": [1]})
    >>> new = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"], "grade": [0, 1]})
    >>> t = translate(runs={"x": run}, previous=old, current=new, measure="RR@10")
    >>> t.arms[0]["previous"], t.arms[0]["current"], t.arms[0]["shift"]
    (1.0, 0.5, -0.5)
    """
    if not runs:
        raise InputError("no run to translate: the experiment declares no arm",
                         item="arms", fix="declare an arm in params `arms`")
    arms = sorted(str(a) for a in runs)
    stacked = pd.concat([runs[a].assign(arm=str(a)) for a in runs], ignore_index=True)
    before, q_before = _score(previous, stacked, arms, measure, relevant_min=relevant_min,
                              ties=ties, which="previous")
    after, q_after = _score(current, stacked, arms, measure, relevant_min=relevant_min,
                            ties=ties, which="current")
    order_before, order_after = _order(before), _order(after)
    rank_before = {a: i + 1 for i, a in enumerate(order_before)}
    rank_after = {a: i + 1 for i, a in enumerate(order_after)}
    rows = [{"arm": a, "previous": before[a], "current": after[a],
             "shift": (after[a] - before[a]
                       if _finite(before[a]) and _finite(after[a]) else None),
             "rank_previous": rank_before[a], "rank_current": rank_after[a]}
            for a in order_after]

    def side(record, queries):
        record = record or {}
        return {**{k: record.get(k) for k in KEY_FIELDS}, "queries": len(queries)}

    # an arm the previous key never judged scores its unjudged pairs as not relevant there:
    # its move says nothing of whether the keys order the arms alike
    fresh = [] if depth is None else new_to_key(runs, previous, depth=depth, ties=ties)
    both = [a for a in arms if a not in fresh]
    return Translation(measure=str(measure), previous=side(previous_record, q_before),
                       current=side(current_record, q_after),
                       queries_shared=len(q_before & q_after), arms=rows,
                       order_previous=order_before, order_current=order_after,
                       kendall_tau=kendall_tau_b({a: before[a] for a in both},
                                                 {a: after[a] for a in both}),
                       order_changed=([a for a in order_before if a in both]
                                      != [a for a in order_after if a in both]),
                       arms_new=fresh)


#: What a decision file without ``estimator`` holds: the frozen key's own mean.
KEY_MEAN = "the key's mean"


def diff_decisions(old: Mapping[str, Mapping], new: Mapping[str, Mapping],
                   sides: tuple[str, str] = ("old", "new")) -> dict:
    """Two sets of per-arm decision files compared, and whether their numbers are comparable.

    Parameters
    ----------
    old, new : mapping of str to mapping
        Arm → its decision file (``measure``, ``mean``, ``pool_version``, ``key``, ...; see
        :func:`relgrade.evaluation.decision.arm_summaries`), e.g. at two git revisions; an
        empty mapping: no decision file on that side.
    sides : (str, str), default ("old", "new")
        What each side is called in ``reason`` (e.g. ``("HEAD~1", "HEAD")``).

    Returns
    -------
    dict
        ``comparable`` (bool: both sides hold decision files, and every file on both sides
        names one and the same pool version, measure and estimator, the estimator of the
        differences included: ``delta_estimator``, e.g. the anytime stopping rule's),
        ``reason`` (str: why
        not, e.g. ``"not comparable: pool p-aaa vs p-bbb"``, ``"not comparable: estimator
        the key's mean vs ppi++"`` or ``"not comparable: no decision files at HEAD~1"``, or
        ``""``), ``pools``, ``keys`` and ``estimators`` (``(old, new)``, each the sorted
        values joined by ", ", "none" when no file names a pool or key, :data:`KEY_MEAN`
        when none names an estimator: files written outside ppi mode) and ``arms``: rows
        ``{"arm", "measure", "old", "new", "change"}`` (means; None where an arm has no file
        or no mean; ``change`` = new − old when both are numbers), arms by name.

    Examples
    --------
    >>> a = {"bm25": {"measure": "R@10", "mean": 0.5, "pool_version": "p-1", "key": "aa"}}
    >>> b = {"bm25": {"measure": "R@10", "mean": 0.6, "pool_version": "p-2", "key": "bb"}}
    >>> diff_decisions(a, b)["reason"]
    'not comparable: pool p-1 vs p-2'
    >>> diff_decisions({}, b, sides=("HEAD~1", "HEAD"))["reason"]
    'not comparable: no decision files at HEAD~1'
    >>> c = {"bm25": {"measure": "R@10", "mean": 0.5, "pool_version": "p-1",
    ...               "estimator": "ppi++"}}
    >>> d = {"bm25": c["bm25"], "tfidf": c["bm25"] | {"delta_estimator": "anytime"}}
    >>> diff_decisions(c | {"tfidf": c["bm25"]}, d)["reason"]
    'not comparable: estimator ppi++ vs ppi++; delta anytime'
    """
    def values(files, field):
        return sorted({str(f.get(field)) for f in files.values() if f.get(field) is not None})

    def joined(vals, none="none"):
        return ", ".join(vals) or none

    pools = (values(old, "pool_version"), values(new, "pool_version"))
    keys = (values(old, "key"), values(new, "key"))
    measures = (values(old, "measure"), values(new, "measure"))
    def made_by(files):
        # the estimator of the means, and of the differences when another made them (the
        # anytime stopping rule's): ["ppi++; delta anytime"]
        means = values(files, "estimator")
        deltas = values(files, "delta_estimator")
        if not means:
            return []
        return [", ".join(means) + (f"; delta {', '.join(deltas)}" if deltas else "")]

    estimators = (made_by(old), made_by(new))
    unstamped = [a for files in (old, new) for a, f in files.items()
                 if f.get("pool_version") is None]
    empty = list(dict.fromkeys(name for files, name in zip((old, new), sides) if not files))
    if empty:
        reason = "not comparable: no decision files at " + " or at ".join(empty)
    elif unstamped:
        reason = (f"comparability unknown: the decision file of {sorted(set(unstamped))[0]} "
                  "names no pool version (written before relgrade recorded it)")
    elif len(pools[0]) > 1 or len(pools[1]) > 1 or pools[0] != pools[1]:
        reason = f"not comparable: pool {joined(pools[0])} vs {joined(pools[1])}"
    elif measures[0] != measures[1]:
        reason = f"not comparable: measure {joined(measures[0])} vs {joined(measures[1])}"
    elif estimators[0] != estimators[1]:
        reason = (f"not comparable: estimator {joined(estimators[0], KEY_MEAN)} vs "
                  f"{joined(estimators[1], KEY_MEAN)}")
    else:
        reason = ""
    rows = []
    for arm in sorted(set(old) | set(new)):
        a, b = old.get(arm) or {}, new.get(arm) or {}
        x, y = a.get("mean"), b.get("mean")
        rows.append({"arm": arm, "measure": b.get("measure", a.get("measure")), "old": x,
                     "new": y, "change": y - x if _finite(x) and _finite(y) else None})
    return {"comparable": not reason, "reason": reason,
            "estimators": (joined(estimators[0], KEY_MEAN), joined(estimators[1], KEY_MEAN)),
            "pools": (joined(pools[0]), joined(pools[1])),
            "keys": (joined(keys[0]), joined(keys[1])), "arms": rows}
