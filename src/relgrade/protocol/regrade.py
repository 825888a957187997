"""Partial regrade: a round that regrades only the pairs graded relevant in the round before.

The protocol's answer to a failed weighted kappa whose disagreements are 1-vs-2 splits is
not a full regrade but a second look at the pairs someone found relevant: with params
``grading.regrade: relevant``, round N's packets hold only the pairs that the key grader or
the auditor graded at or above ``relevant_min`` in round N-1 (fresh display orders, for the
key grader on every such pair and for the auditor on those of the audited queries), plus any
pool pair that has no grade yet. Everything else keeps its round N-1 grade: the 0s stand.

Agreement, the gate and the key then read the **merged** grades: per grader and pair, the
grade of the latest round of the chain that graded it. The chain of round N is N itself and,
while a round is a partial regrade, the round before it, so a partial round 3 after a partial
round 2 merges rounds 1, 2 and 3.

Everything here works on tables; which rounds were partial is read from the grade files'
sidecars by :mod:`relgrade.experiment`.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

from relgrade.schema import require

#: Params ``grading.regrade``: a full blind regrade, or the relevant pairs only.
ALL, RELEVANT = "all", "relevant"


def round_chain(round: int, modes: Mapping[int, str]) -> list[int]:
    """The rounds whose grades merge into round ``round``, oldest first.

    Parameters
    ----------
    round : int
        The current round (params ``grading.round``, >= 1).
    modes : mapping of int to str
        Each round's regrade mode (``"all"`` or ``"relevant"``); a round missing here is
        ``"all"`` (a full round, the default).

    Returns
    -------
    list of int
        ``[round]`` for a full round; else the rounds back to the last full one.

    Examples
    --------
    >>> round_chain(3, {3: "relevant", 2: "relevant"})
    [1, 2, 3]
    >>> round_chain(3, {3: "relevant"})
    [2, 3]
    >>> round_chain(2, {})
    [2]
    """
    chain = [int(round)]
    r = int(round)
    while r > 1 and modes.get(r, ALL) == RELEVANT:
        r -= 1
        chain.append(r)
    return sorted(chain)


def scope(previous: pd.DataFrame, pool: pd.DataFrame, *, graders: Iterable[str],
          relevant_min: int) -> pd.DataFrame:
    """The pool pairs a partial round regrades: graded relevant by any of ``graders`` before.

    Parameters
    ----------
    previous : pandas.DataFrame
        The merged grades of the rounds before (``query_id``, ``chunk_id``, ``grader``,
        ``grade``; one current grade per grader and pair).
    pool : pandas.DataFrame
        The current pool (``query_id``, ``chunk_id``).
    graders : iterable of str
        Whose grades count: the key grader and the auditor. A pair either of them found
        relevant is regraded by both (on audited queries), so the merged audit compares
        grades of the same round wherever a 1-vs-2 or 0-vs-1 split could hide.
    relevant_min : int
        Params ``scale.relevant_min``.

    Returns
    -------
    pandas.DataFrame of shape (n_pairs, 2)
        ``query_id``, ``chunk_id`` (str), in the pool's order.

    Examples
    --------
    >>> prev = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "b"],
    ...                      "grader": ["g", "g", "x"], "grade": [0, 0, 1]})
    >>> pool = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "c"]})
    >>> scope(prev, pool, graders=["g", "x"], relevant_min=1)
      query_id chunk_id
    1        q        b
    """
    require(previous, ["query_id", "chunk_id", "grader", "grade"], what="the earlier grades")
    names = {str(g) for g in graders}
    hot = previous[previous["grader"].astype(str).isin(names)
                   & (previous["grade"].astype(int) >= int(relevant_min))]
    wanted = set(zip(hot["query_id"].astype(str), hot["chunk_id"].astype(str)))
    pairs = pool[["query_id", "chunk_id"]].astype(str)
    keep = [(q, c) in wanted for q, c in zip(pairs["query_id"], pairs["chunk_id"])]
    return pairs[pd.Series(keep, index=pairs.index, dtype=bool)]


def superseded(bank: pd.DataFrame, pairs: pd.DataFrame, *, round: int) -> pd.Series:
    """Which bank rows a partial round replaces: earlier rounds' grades of its pairs.

    Parameters
    ----------
    bank : pandas.DataFrame
        Judgment-bank rows (``query_id``, ``chunk_id``, ``round``).
    pairs : pandas.DataFrame
        The round's scope (:func:`scope`).
    round : int
        The partial round.

    Returns
    -------
    pandas.Series of bool, aligned with ``bank``
        True for a row of a scope pair from a round before ``round``: it must not stand in
        for the regrade, so the pair stays pending until this round grades it.

    Examples
    --------
    >>> bank = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "b"],
    ...                      "round": [1, 1, 2]})
    >>> superseded(bank, pd.DataFrame({"query_id": ["q"], "chunk_id": ["b"]}), round=2).tolist()
    [False, True, False]
    """
    wanted = set(zip(pairs["query_id"].astype(str), pairs["chunk_id"].astype(str)))
    hit = [(q, c) in wanted for q, c in zip(bank["query_id"].astype(str),
                                             bank["chunk_id"].astype(str))]
    return pd.Series(hit, index=bank.index, dtype=bool) & (bank["round"].astype(int) < int(round))
