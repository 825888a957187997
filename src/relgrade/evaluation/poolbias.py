"""Pool-bias checks: how much each arm's score owes to the pool it helped build.

Unjudged chunks score 0, so a key pooled from some arms penalises an arm that retrieves
differently. Three checks, all computed against the frozen key:

* **judged@k** per arm: the share of each arm's top k that has a grade (low means the arm
  is scored on chunks nobody graded);
* **leave-one-arm-out** (Zobel 1998, "How reliable are the results of large-scale
  information retrieval experiments?", SIGIR; Buckley et al. 2007): remove from the key the
  pairs only that arm brought into the pool, re-score the arm on the reduced key, and see
  how its score and its rank among the arms move. A large drop says the key favours arms
  that took part in pooling, and a new arm scored on this key would be short-changed;
* **condensed lists** (Sakai 2007, "Alternatives to bpref", SIGIR): drop unjudged chunks
  from each run before scoring, so an unjudged chunk neither scores 0 nor pushes judged
  ones down. Reported beside the standard scores, never instead of them.

Scores come from :func:`relgrade.evaluation.metrics.per_query`, the same code as the metrics stage.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation import metrics

LOO_COLUMNS = ["arm", "measure", "full", "reduced", "change", "rank_full", "rank_reduced",
               "rank_change", "removed_pairs", "removed_relevant", "queries_full",
               "queries_reduced"]


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(f"{what} lacks column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, df.columns)))


def unique_contributions(provenance: pd.DataFrame, *, depth: int) -> pd.DataFrame:
    """The pooled pairs that only one arm brought into the pool, within the pool depth.

    Parameters
    ----------
    provenance : pandas.DataFrame of shape (n_rows, >= 5)
        The private provenance table (:func:`relgrade.protocol.pool.build_pool`): ``query_id``,
        ``chunk_id``, ``arm``, ``rank``, ``source`` (``"depth"`` or ``"tail"``). Not modified.
    depth : int
        The pool depth (params ``pool.depth``).

    Returns
    -------
    pandas.DataFrame
        ``arm``, ``query_id``, ``chunk_id`` (str), sorted: a pair is listed under arm X
        when X ranked it within ``depth`` and no other arm appears in its provenance (at
        any depth, or through the tail sample).

    Raises
    ------
    InputError
        A column is missing or ``depth`` is not a positive integer.

    Examples
    --------
    >>> prov = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "a", "b"],
    ...                      "arm": ["x", "y", "x"], "rank": [1, 2, 2],
    ...                      "source": ["depth"] * 3})
    >>> unique_contributions(prov, depth=10).values.tolist()
    [['x', 'q', 'b']]
    """
    _need(provenance, ["query_id", "chunk_id", "arm", "rank", "source"], "provenance")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise InputError("pool.depth must be a positive integer",
                         found=repr(depth))
    p = provenance[["query_id", "chunk_id", "arm", "rank", "source"]].astype(
        {"query_id": str, "chunk_id": str, "arm": str})
    n_arms = p.groupby(["query_id", "chunk_id"])["arm"].nunique()
    only = n_arms[n_arms == 1].index
    inside = p[(p["source"] == "depth") & (p["rank"] <= depth)]
    inside = inside.set_index(["query_id", "chunk_id"])
    inside = inside[inside.index.isin(only)].reset_index()
    out = inside[["arm", "query_id", "chunk_id"]].drop_duplicates()
    return out.sort_values(["arm", "query_id", "chunk_id"]).reset_index(drop=True)


def _means(per_query: pd.DataFrame) -> pd.DataFrame:
    g = per_query.groupby(["arm", "measure"], sort=False)["value"]
    return pd.DataFrame({"mean": g.mean(), "queries": g.size()}).reset_index()


def _rank(score: float, others: Sequence[float]) -> int:
    """1 + the number of other arms scoring strictly higher (ties share the better rank)."""
    return 1 + int(sum(o > score for o in others))


def leave_one_arm_out(*, qrels: pd.DataFrame, runs: pd.DataFrame, provenance: pd.DataFrame,
                      depth: int, measures: Sequence[str], ties: str = "score",
                      relevant_min: int = 1) -> pd.DataFrame:
    """Re-score each arm on a key without the pairs only it contributed.

    Parameters
    ----------
    qrels : pandas.DataFrame of shape (n_pairs, 3)
        The key: ``query_id``, ``chunk_id``, ``grade``. Not modified.
    runs : pandas.DataFrame
        Stacked runs: ``arm``, ``query_id``, ``chunk_id``, ``rank``, ``score``. Not modified.
    provenance : pandas.DataFrame
        Pool provenance (see :func:`unique_contributions`).
    depth : int
        Pool depth (params ``pool.depth``).
    measures : sequence of str
        Measure names (e.g. ``["nDCG(dcg='exp-log2')@10", "R@10"]``).
    ties : {"score", "rank"}, default "score"
        Run tie rule (params ``runs.ties``).
    relevant_min : int, default 1
        Lowest relevant grade (params ``scale.relevant_min``).

    Returns
    -------
    pandas.DataFrame
        One row per (arm, measure), columns ``LOO_COLUMNS``: ``full`` and ``reduced`` mean
        scores, ``change = reduced - full``, the arm's rank among all arms on the full key
        (``rank_full``) and with its reduced score against the others' full scores
        (``rank_reduced``; 1 is best, ties share the better rank), ``rank_change =
        rank_reduced - rank_full`` (positive: it falls), pairs and relevant pairs removed,
        and the queries each mean is over.

    Raises
    ------
    InputError
        Missing columns, a bad measure name, or the errors of
        :func:`relgrade.evaluation.metrics.per_query`.

    Notes
    -----
    The other arms keep their scores on the full key: the question is where the left-out
    arm would stand had it not helped build the pool (Zobel 1998). A query left with
    nothing relevant in the reduced key is undefined there and drops out of the arm's
    reduced mean, as the protocol drops a query whose pool holds nothing relevant;
    ``queries_reduced`` shows it.
    """
    _need(runs, ["arm", "query_id", "chunk_id", "rank", "score"], "runs")
    _need(qrels, ["query_id", "chunk_id", "grade"], "key")
    measures = list(measures)
    unique = unique_contributions(provenance, depth=depth)
    full = _means(metrics.per_query(qrels=qrels, run=runs, measures=measures, ties=ties,
                                    relevant_min=relevant_min))
    full = full.set_index(["arm", "measure"])
    arms = sorted(runs["arm"].astype(str).unique())
    key = qrels.assign(query_id=qrels["query_id"].astype(str),
                       chunk_id=qrels["chunk_id"].astype(str))
    pair_index = pd.MultiIndex.from_frame(key[["query_id", "chunk_id"]])
    rows = []
    for arm in arms:
        mine = unique[unique["arm"] == arm]
        drop = pair_index.isin(pd.MultiIndex.from_frame(mine[["query_id", "chunk_id"]])) \
            if len(mine) else np.zeros(len(key), dtype=bool)
        reduced_key = key[~drop]
        removed_relevant = int((key.loc[drop, "grade"].astype(int) >= relevant_min).sum())
        run = runs[runs["arm"].astype(str) == arm].drop(columns="arm")
        red = metrics.per_query(qrels=reduced_key, run=run, measures=measures, ties=ties,
                                relevant_min=relevant_min)
        red_means = red.groupby("measure", sort=False)["value"].agg(["mean", "size"])
        for m in full.index.get_level_values("measure").unique():
            f = float(full.loc[(arm, m), "mean"]) if (arm, m) in full.index else 0.0
            r = float(red_means.loc[m, "mean"]) if m in red_means.index else 0.0
            others = [float(full.loc[(o, m), "mean"]) for o in arms
                      if o != arm and (o, m) in full.index]
            rf, rr = _rank(f, others), _rank(r, others)
            rows.append({"arm": arm, "measure": m, "full": f, "reduced": r, "change": r - f,
                         "rank_full": rf, "rank_reduced": rr, "rank_change": rr - rf,
                         "removed_pairs": int(drop.sum()), "removed_relevant": removed_relevant,
                         "queries_full": int(full.loc[(arm, m), "queries"])
                         if (arm, m) in full.index else 0,
                         "queries_reduced": int(red_means.loc[m, "size"])
                         if m in red_means.index else 0})
    return pd.DataFrame(rows, columns=LOO_COLUMNS)


def condensed_runs(runs: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """The runs with every unjudged chunk removed (Sakai 2007's condensed lists).

    Parameters
    ----------
    runs : pandas.DataFrame
        A run or stacked runs (``query_id``, ``chunk_id``, ``rank``, ``score``, optional
        ``arm``). Not modified.
    qrels : pandas.DataFrame
        The key (``query_id``, ``chunk_id``, ``grade``).

    Returns
    -------
    pandas.DataFrame
        The rows of ``runs`` whose (query_id, chunk_id) has a grade, in the same order;
        scores and ranks unchanged, so the judged chunks keep their relative order under
        either tie rule and move up into the places the unjudged ones left.
    """
    _need(runs, ["query_id", "chunk_id"], "runs")
    _need(qrels, ["query_id", "chunk_id"], "key")
    judged = pd.MultiIndex.from_arrays([qrels["query_id"].astype(str),
                                        qrels["chunk_id"].astype(str)])
    have = pd.MultiIndex.from_arrays([runs["query_id"].astype(str),
                                      runs["chunk_id"].astype(str)]).isin(judged)
    return runs[have].reset_index(drop=True)


def condensed_scores(*, qrels: pd.DataFrame, runs: pd.DataFrame, measures: Sequence[str],
                     ties: str = "score", relevant_min: int = 1) -> pd.DataFrame:
    """Each arm's mean score on its full run and on its condensed run.

    Parameters
    ----------
    qrels, runs, measures, ties, relevant_min
        As for :func:`leave_one_arm_out`; Judged@k measures are skipped (1 on a condensed
        list by construction).

    Returns
    -------
    pandas.DataFrame
        ``arm``, ``measure``, ``standard``, ``condensed``, ``difference`` (condensed -
        standard). A large positive difference means the arm's standard score is held down
        by chunks nobody graded.

    Notes
    -----
    Equivalent to trec_eval's ``-J`` (judged documents only) option; the tests check it
    against pytrec_eval with ``judged_docs_only_flag``.
    """
    _need(runs, ["arm", "query_id", "chunk_id", "rank", "score"], "runs")
    measures = [m for m in measures if not str(m).startswith("Judged")]
    std = _means(metrics.per_query(qrels=qrels, run=runs, measures=measures, ties=ties,
                                   relevant_min=relevant_min))
    con = _means(metrics.per_query(qrels=qrels, run=condensed_runs(runs, qrels),
                                   measures=measures, ties=ties, relevant_min=relevant_min))
    out = std.merge(con, on=["arm", "measure"], how="left", suffixes=("_std", "_con"))
    out = pd.DataFrame({"arm": out["arm"], "measure": out["measure"],
                        "standard": out["mean_std"], "condensed": out["mean_con"].fillna(0.0)})
    out["difference"] = out["condensed"] - out["standard"]
    return out.sort_values(["arm", "measure"], kind="stable").reset_index(drop=True)


def judged_at_k(*, qrels: pd.DataFrame, runs: pd.DataFrame, cutoffs: Sequence[int],
                ties: str = "score") -> pd.DataFrame:
    """Mean Judged@k per arm: the share of its top k that the key grades.

    Parameters
    ----------
    qrels, runs, ties
        As for :func:`leave_one_arm_out`.
    cutoffs : sequence of int
        The k values (params ``metrics.cutoffs``).

    Returns
    -------
    pandas.DataFrame
        ``arm``, ``k``, ``judged`` (mean over the key's queries of
        graded chunks in the top k / min(k, chunks retrieved); a query the arm did not
        answer counts 0), ``unjudged_share`` = 1 - judged.
    """
    names = [f"Judged@{int(k)}" for k in cutoffs]
    pq = metrics.per_query(qrels=qrels, run=runs, measures=names, ties=ties)
    means = _means(pq)
    means["k"] = means["measure"].str.split("@").str[1].astype(int)
    out = means.rename(columns={"mean": "judged"})[["arm", "k", "judged"]]
    out["unjudged_share"] = 1.0 - out["judged"]
    return out.sort_values(["arm", "k"]).reset_index(drop=True)


def pool_bias_report(*, qrels: pd.DataFrame, runs: pd.DataFrame, provenance: pd.DataFrame,
                     depth: int, measures: Sequence[str], cutoffs: Sequence[int],
                     ties: str = "score", relevant_min: int = 1) -> dict:
    """All three checks as JSON-ready lists of rows.

    Returns
    -------
    dict
        ``{"depth": int, "judged": [...], "leave_one_arm_out": [...], "condensed": [...],
        "unique_pairs": {arm: n}}``; each list holds one dict per row of
        :func:`judged_at_k`, :func:`leave_one_arm_out` and :func:`condensed_scores`.
    """
    measures = [m for m in measures if not str(m).startswith("Judged")]
    unique = unique_contributions(provenance, depth=depth)
    arms = sorted(runs["arm"].astype(str).unique())
    counts = unique.groupby("arm").size()
    return {
        "depth": int(depth),
        "unique_pairs": {a: int(counts.get(a, 0)) for a in arms},
        "judged": judged_at_k(qrels=qrels, runs=runs, cutoffs=cutoffs, ties=ties)
        .to_dict("records"),
        "leave_one_arm_out": leave_one_arm_out(
            qrels=qrels, runs=runs, provenance=provenance, depth=depth, measures=measures,
            ties=ties, relevant_min=relevant_min).to_dict("records"),
        "condensed": condensed_scores(qrels=qrels, runs=runs, measures=measures, ties=ties,
                                      relevant_min=relevant_min).to_dict("records"),
    }
