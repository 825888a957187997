"""The judging-budget curve: what would have been decided with fewer human judgments.

For an experiment whose depth-k pool people graded in full (and, for the prediction-powered
rows, a model graded too), :func:`budget_curve` replays the decision with a share of the
human judgments:

* ``uniform`` — a seeded uniform sample of queries, graded in full; arms scored on them alone;
* ``ppi`` — the same query sample, plus model grades on every pair: PPI++ estimates
  (:mod:`relgrade.evaluation.ppi`);
* ``maxmean`` and ``mtf`` — no model; on every query people judge pool pairs in a bandit
  order (:func:`bandit_order`) until the budget is spent; unjudged pairs count as not
  relevant (gain 0).

At each budget it reports Kendall's tau-b of the arm order against the full-judgment order,
tau-b among the top half of the arms and the share of Holm verdicts preserved. The measure is
nDCG@k (:func:`relgrade.evaluation.pooled.ndcg_at_k`).
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation.judge_audit import kendall_tau_b
from relgrade.evaluation.pooled import ndcg_at_k
from relgrade.evaluation.ppi import holm, human_sample, normal_p_values, ppi_mean_rows
from relgrade.evaluation.ppi_table import zero_se_tolerance

#: The replays :func:`budget_curve` knows.
STRATEGIES = ("uniform", "ppi", "maxmean", "mtf")

#: Budgets (shares of the full pool's judgments) of the default curve.
FRACTIONS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)

#: Columns of the table :func:`budget_curve` returns.
COLUMNS = ["strategy", "budget", "judgments", "judged_fraction", "annotator_hours", "queries",
           "kendall_tau", "top_half_tau", "verdicts_preserved"]


def _query_order(lists: list[list[int]], relevant: np.ndarray, method: str) -> list[int]:
    """One query's pool columns in the order a bandit over the arms asks for them."""
    n_arms = len(lists)
    pointer = [0] * n_arms
    judged: set[int] = set()
    rel, pulls, priority = [0] * n_arms, [0] * n_arms, [0] * n_arms
    order: list[int] = []
    while True:
        best, best_score = -1, -math.inf
        for a in range(n_arms):
            lst = lists[a]
            while pointer[a] < len(lst) and lst[pointer[a]] in judged:
                pointer[a] += 1
            if pointer[a] == len(lst):
                continue
            score = ((rel[a] + 1.0) / (pulls[a] + 2.0)) if method == "maxmean" else priority[a]
            if score > best_score:
                best, best_score = a, score
        if best < 0:
            return order
        col = lists[best][pointer[best]]
        judged.add(col)
        order.append(col)
        hit = bool(relevant[col])
        pulls[best] += 1
        rel[best] += hit
        if not hit:
            priority[best] -= 1


def bandit_order(grades, ranked, *, method: str = "maxmean", k: int = 10,
                 relevant_min: int = 1) -> np.ndarray:
    """Per query, the pool pairs in the order a multi-armed bandit over the arms judges them.

    Parameters
    ----------
    grades : array-like of shape (n_queries, pool_width), float
        The grades the judges would give (revealed one at a time as the bandit pulls); NaN
        for padding after a query's pool.
    ranked : array-like of shape (n_arms, n_queries, depth), int
        Pool columns at ranks ``1..depth``, -1 for none.
    method : {"maxmean", "mtf"}, default "maxmean"
        ``"maxmean"``: pull the arm with the largest posterior mean relevance
        ``(relevant + 1) / (judged + 2)`` (a Beta(1, 1) prior) of its own judged pairs.
        ``"mtf"`` (move to front): every arm starts at priority 0, the arm with the highest
        priority is pulled and loses 1 each time it yields a non-relevant pair.
    k : int, default 10
        Ranks of each arm in the pool.
    relevant_min : int, default 1
        Lowest grade the bandit counts as a reward.

    Returns
    -------
    numpy.ndarray of shape (n_queries, pool_width), int64
        Row ``q``: the pool columns of query ``q`` in judging order, then -1.

    Notes
    -----
    A pull judges the arm's highest-ranked pair not yet judged; pairs another arm already
    brought in are skipped without changing either arm's statistics. Ties between arms go
    to the arm listed first, so the order is deterministic. Per query, as in the papers,
    which spend a per-query budget.

    References
    ----------
    D. E. Losada, J. Parapar and A. Barreiro, "Feeling lucky? Multi-armed bandits for
    ordering judgements in pooling-based evaluation", ACM SAC 2016, 1027-1034.
    D. E. Losada, J. Parapar and A. Barreiro, "Multi-armed bandits for adjudicating
    documents in pooling-based evaluation of information retrieval systems", Information
    Processing & Management 53(5) (2017): 1005-1025.
    G. V. Cormack, C. R. Palmer and C. L. A. Clarke, "Efficient construction of large test
    collections", SIGIR 1998 (move-to-front).
    """
    if method not in ("maxmean", "mtf"):
        raise InputError("unknown bandit; use maxmean or mtf", found=repr(method))
    g = np.asarray(grades, dtype=np.float64)
    r = np.asarray(ranked)[:, :, :k]
    relevant = np.nan_to_num(g, nan=-1.0) >= relevant_min
    out = np.full(g.shape, -1, dtype=np.int64)
    for q in range(g.shape[0]):
        lists = [[int(c) for c in r[a, q] if c >= 0] for a in range(r.shape[0])]
        order = _query_order(lists, relevant[q], method)
        out[q, :len(order)] = order
    return out


def _verdicts(est, se, alpha: float, *values) -> np.ndarray:
    """-1, 0 or +1 per comparison: the sign of a Holm-significant difference, else 0.

    ``values`` are the arms' per-query values entering each row (each of shape (m, k)): a
    standard error and an estimate within float noise of them count as 0, as in the ppi
    table (:func:`~relgrade.evaluation.ppi_table.zero_se_tolerance`)."""
    tol = zero_se_tolerance(*values)
    _, reject = holm(normal_p_values(est, se, tol), alpha=alpha)
    return np.where(reject, np.sign(est), 0.0)


def budget_curve(human_grades, ranked, *, rng: np.random.Generator, model_grades=None,
                 fractions: Sequence[float] = FRACTIONS, strategies: Sequence[str] | None = None,
                 k: int = 10, alpha: float = 0.05, seconds_per_judgment: float = 30.0,
                 pairs=None) -> pd.DataFrame:
    """Kendall tau, top-half tau and preserved Holm verdicts at each human-judgment budget.

    Parameters
    ----------
    human_grades : array-like of shape (n_queries, pool_width), float
        Every pool pair's human grade (the full judgments); NaN only for padding.
    ranked : array-like of shape (n_arms, n_queries, depth), int
        Pool columns at ranks ``1..depth``, -1 for none; ``depth >= k``.
    rng : numpy.random.Generator
        Source of the query samples of ``uniform`` and ``ppi`` (one
        :func:`relgrade.evaluation.ppi.human_sample` per budget, shared by both).
    model_grades : array-like of shape (n_queries, pool_width), float, optional
        The model grader's grades; required for ``ppi``.
    fractions : sequence of float in (0, 1]
        Budgets as shares of the full pool's human judgments.
    strategies : sequence of str, optional
        Subset of :data:`STRATEGIES`; default all that the inputs allow.
    k : int, default 10
        Depth of the pool and cutoff of nDCG.
    alpha : float, default 0.05
        Family-wise error rate of the Holm verdicts.
    seconds_per_judgment : float, default 30
        Human time per judgment (params ``cost.seconds_per_judgment``).
    pairs : sequence of (int, int), optional
        The arm comparisons of the Holm family; default every pair of arms.

    Returns
    -------
    pandas.DataFrame
        Long table, one row per strategy and budget, columns :data:`COLUMNS`:
        ``strategy``; ``budget`` (the requested share); ``judgments`` (human judgments
        spent); ``judged_fraction`` (``judgments`` over the pool's pairs);
        ``annotator_hours`` (``judgments * seconds_per_judgment / 3600``); ``queries`` (queries
        with human judgments); ``kendall_tau`` (tau-b of the arms' estimates against their
        full-judgment means); ``top_half_tau`` (the same over the ``ceil(n_arms / 2)`` arms
        best under full judgments); ``verdicts_preserved`` (share of comparisons whose Holm
        verdict, better / worse / no difference, equals the full-judgment verdict).

    Notes
    -----
    The full-judgment reference scores every arm on every query with all human grades.
    Verdicts come from normal tests of the per-query differences (the human-only estimate
    of :mod:`relgrade.evaluation.ppi` on the queries judged; PPI++ for ``ppi``) with Holm
    over the family. ``uniform`` and ``ppi`` spend a budget by queries
    (``round(budget * n_queries)``, at least 2), so ``judged_fraction`` is close to, not
    equal to, ``budget``; the query samples are nested (the first queries of one seeded
    order), so a larger budget never spends fewer judgments; the bandits spend
    ``ceil(budget * pool size)`` judgments on every
    query.
    """
    h = np.asarray(human_grades, dtype=np.float64)
    r = np.asarray(ranked)
    if h.ndim != 2 or r.ndim != 3 or r.shape[1] != h.shape[0] or r.shape[2] < k:
        raise InputError("human grades must have shape (n_queries, width) and ranked "
                         "(n_arms, n_queries, depth >= k)", found=f"{h.shape}, {r.shape}")
    m = None if model_grades is None else np.asarray(model_grades, dtype=np.float64)
    if m is not None and m.shape != h.shape:
        raise InputError("model grades need the shape of the human grades",
                         found=f"{m.shape} and {h.shape}")
    if strategies is None:
        strategies = [s for s in STRATEGIES if s != "ppi" or m is not None]
    for s in strategies:
        if s not in STRATEGIES:
            raise InputError(f"unknown strategy; use {', '.join(STRATEGIES)}", found=repr(s))
    if "ppi" in strategies and m is None:
        raise InputError("the ppi strategy needs model grades", fix="pass model_grades=")
    n_arms, n_q = r.shape[0], h.shape[0]
    if n_arms < 2:
        raise InputError("a budget curve needs at least 2 arms", found=str(n_arms))
    pool_size = (~np.isnan(h)).sum(axis=1)
    total = int(pool_size.sum())
    pairs = list(itertools.combinations(range(n_arms), 2)) if pairs is None else list(pairs)
    ia = np.array([p[0] for p in pairs], dtype=np.int64)
    ib = np.array([p[1] for p in pairs], dtype=np.int64)

    full = ndcg_at_k(h, r, k=k)                                  # (n_arms, n_q)
    full_mean = full.mean(axis=1)
    top = np.argsort(-full_mean, kind="stable")[:max(2, math.ceil(n_arms / 2))]
    d_full = full[ia] - full[ib]
    ref = _verdicts(d_full.mean(axis=1), d_full.std(axis=1) / math.sqrt(n_q), alpha,
                    full[ia], full[ib])
    model = None if m is None else ndcg_at_k(m, r, k=k)
    orders = {s: bandit_order(h, r, method=s, k=k) for s in ("maxmean", "mtf") if s in strategies}

    rows = []

    def add(strategy, budget, judgments, queries, est, verdicts):
        rows.append({"strategy": strategy, "budget": float(budget), "judgments": int(judgments),
                     "judged_fraction": judgments / total,
                     "annotator_hours": judgments * float(seconds_per_judgment) / 3600.0,
                     "queries": int(queries),
                     "kendall_tau": float(kendall_tau_b(est, full_mean)),
                     "top_half_tau": float(kendall_tau_b(est[top], full_mean[top])),
                     "verdicts_preserved": float((verdicts == ref).mean()) if len(ref) else 1.0})

    # one seeded order of the queries, each budget its first round(budget * n_q) (at least
    # 2): the samples are nested, so the judgments spent rise with the budget
    query_order = rng.permutation(n_q)
    for budget in fractions:
        size = human_sample(n_q, fraction=budget, rng=np.random.default_rng(0)).size
        sample = np.sort(query_order[:size])
        spent = int(pool_size[sample].sum())
        if "uniform" in strategies:
            v = full[:, sample]
            d = v[ia] - v[ib]
            add("uniform", budget, spent, sample.size, v.mean(axis=1),
                _verdicts(d.mean(axis=1), d.std(axis=1) / math.sqrt(sample.size), alpha,
                          v[ia], v[ib]))
        if "ppi" in strategies:
            est, _, _ = ppi_mean_rows(full[:, sample], model[:, sample], model)
            d_est, d_se, _ = ppi_mean_rows(full[ia][:, sample] - full[ib][:, sample],
                                           model[ia][:, sample] - model[ib][:, sample],
                                           model[ia] - model[ib])
            add("ppi", budget, spent, sample.size, est,
                _verdicts(d_est, d_se, alpha, full[ia][:, sample], full[ib][:, sample],
                          model[ia], model[ib]))
        for s, order in orders.items():
            take = np.ceil(budget * pool_size).astype(np.int64)
            judged = np.arange(order.shape[1])[None, :] < take[:, None]
            partial = np.full(h.shape, np.nan)
            qs, pos = np.nonzero(judged & (order >= 0))
            partial[qs, order[qs, pos]] = h[qs, order[qs, pos]]
            v = ndcg_at_k(partial, r, k=k)
            d = v[ia] - v[ib]
            add(s, budget, int(np.minimum(take, pool_size).sum()), n_q, v.mean(axis=1),
                _verdicts(d.mean(axis=1), d.std(axis=1) / math.sqrt(n_q), alpha,
                          v[ia], v[ib]))
    return pd.DataFrame(rows, columns=COLUMNS)
