"""A depth-k pool as dense arrays, and nDCG@k over it for many keys at numpy speed.

The prediction-powered estimates, the judge audit and the judging-budget curve score the
same arms under several keys (model, human, partial) many times. They share one array form:

* ``ranked`` — int64 of shape ``(n_arms, n_queries, k)``: the pool column of the chunk each
  arm ranks at ``1..k`` on each query; ``-1`` where the arm returned fewer than ``k``;
* a grade matrix — float64 of shape ``(n_queries, pool_width)``: the grade of each pool
  column under one key; NaN for an ungraded pair (and for the padding after a query's pool).

:func:`pool_arrays` builds ``ranked`` from a run table and :func:`grade_matrix` a grade
matrix from a qrels-shaped table; :func:`ndcg_at_k` scores every arm on every query.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.ranking import top_k
from relgrade.schema import QRELS, RUNS


@dataclass(frozen=True)
class PoolArrays:
    """The union of the arms' top ``k`` per query, as arrays.

    Attributes
    ----------
    query_ids : tuple of str
        Queries, sorted; position = row of every array.
    arms : tuple of str
        Arms, sorted; position = first axis of ``ranked``.
    chunk_ids : tuple of tuple of str
        Per query, the chunk of each pool column, in order of first retrieval (arm order, then
        rank).
    ranked : numpy.ndarray of shape (n_arms, n_queries, k), int64
        Pool column at each rank; -1 past the end of a short list.
    """

    query_ids: tuple
    arms: tuple
    chunk_ids: tuple
    ranked: np.ndarray

    @property
    def width(self) -> int:
        """Columns of a grade matrix: the largest pool of one query."""
        return max((len(c) for c in self.chunk_ids), default=0)


def pool_arrays(runs: pd.DataFrame, *, k: int = 10) -> PoolArrays:
    """The depth-``k`` pool of stacked runs as :class:`PoolArrays`.

    Parameters
    ----------
    runs : pandas.DataFrame
        Columns ``arm``, ``query_id``, ``chunk_id``, ``rank``, ``score`` (schema ``RUNS``);
        each arm's list is ordered by :func:`relgrade.ranking.top_k`. Not modified.
    k : int, default 10
        Depth of the pool and of the measure.

    Returns
    -------
    PoolArrays

    Raises
    ------
    InputError
        A column is missing or ``k < 1``.
    """
    missing = [c for c in RUNS if c not in runs.columns]
    if missing:
        raise InputError("runs table lacks columns", found=", ".join(missing))
    arms = tuple(sorted(map(str, runs["arm"].unique())))
    queries = tuple(sorted(map(str, runs["query_id"].unique())))
    qpos = {q: i for i, q in enumerate(queries)}
    columns: list[dict] = [{} for _ in queries]
    ranked = np.full((len(arms), len(queries), int(k)), -1, dtype=np.int64)
    for a, arm in enumerate(arms):
        top = top_k(runs[runs["arm"].astype(str) == arm].drop(columns="arm"), k)
        for q, c, r in zip(top["query_id"].astype(str), top["chunk_id"].astype(str),
                           top["rank"].to_numpy()):
            col = columns[qpos[q]].setdefault(c, len(columns[qpos[q]]))
            ranked[a, qpos[q], int(r) - 1] = col
    return PoolArrays(query_ids=queries, arms=arms,
                      chunk_ids=tuple(tuple(c) for c in columns), ranked=ranked)


def grade_matrix(pool: PoolArrays, grades: pd.DataFrame) -> np.ndarray:
    """The grades of one key on the pool's columns.

    Parameters
    ----------
    pool : PoolArrays
    grades : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``grade`` (schema ``QRELS``), at most one row per
        pair; pairs outside the pool are ignored.

    Returns
    -------
    numpy.ndarray of shape (n_queries, pool.width), float64
        NaN where the pair has no grade.
    """
    missing = [c for c in QRELS if c not in grades.columns]
    if missing:
        raise InputError("grades table lacks columns", found=", ".join(missing))
    if grades.duplicated(["query_id", "chunk_id"]).any():
        raise InputError("one grade per (query, chunk) pair is needed for a key",
                         found="a repeated pair")
    lookup = {(str(q), str(c)): float(g) for q, c, g in
              zip(grades["query_id"], grades["chunk_id"], grades["grade"])}
    out = np.full((len(pool.query_ids), pool.width), np.nan)
    for i, (q, chunks) in enumerate(zip(pool.query_ids, pool.chunk_ids)):
        for j, c in enumerate(chunks):
            out[i, j] = lookup.get((q, c), np.nan)
    return out


def ndcg_at_k(grades: np.ndarray, ranked: np.ndarray, *, k: int = 10) -> np.ndarray:
    """nDCG@k of every arm on every query under one key.

    Parameters
    ----------
    grades : numpy.ndarray of shape (n_queries, pool_width), float
        The key's grades of the pool columns; NaN = not graded (gain 0).
    ranked : numpy.ndarray of shape (n_arms, n_queries, depth), int
        Pool columns at ranks ``1..depth``, -1 for an empty rank; ``depth >= k``.
    k : int, default 10
        The cutoff.

    Returns
    -------
    numpy.ndarray of shape (n_arms, n_queries), float64
        In [0, 1]. A query with no graded chunk of grade > 0 scores 0 for every arm.

    Notes
    -----
    ``DCG@k = sum_{r=1..k} (2^g_r - 1) / log2(r + 1)``; the ideal DCG sorts the gains of
    every graded pool column of the query. Unlike :func:`relgrade.evaluation.metrics.per_query`,
    which leaves such queries out, a query without a relevant chunk scores 0 here: the
    prediction-powered estimate needs a value on every query under every key, and whether a
    query has a relevant chunk differs between keys.

    Examples
    --------
    >>> g = np.array([[2.0, 0.0, 1.0]])
    >>> r = np.array([[[1, 0, 2]]])    # one arm: the 0, then the 2, then the 1
    >>> dcg = 3 / np.log2(3) + 1 / np.log2(4)
    >>> idcg = 3 / np.log2(2) + 1 / np.log2(3)
    >>> bool(np.isclose(ndcg_at_k(g, r, k=3)[0, 0], dcg / idcg))
    True
    """
    g = np.asarray(grades, dtype=np.float64)
    r = np.asarray(ranked)
    if g.ndim != 2 or r.ndim != 3 or r.shape[1] != g.shape[0] or r.shape[2] < k:
        raise InputError("grades must have shape (n_queries, width) and ranked "
                         "(n_arms, n_queries, depth >= k)",
                         found=f"grades {g.shape}, ranked {r.shape}, k={k}")
    gain = np.where(np.isnan(g), 0.0, np.exp2(np.nan_to_num(g)) - 1.0)
    padded = np.concatenate([gain, np.zeros((g.shape[0], 1))], axis=1)
    cols = np.where(r[:, :, :k] < 0, g.shape[1], r[:, :, :k])
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = (padded[np.arange(g.shape[0])[None, :, None], cols] * disc).sum(axis=2)
    best = -np.sort(-gain, axis=1)[:, :k]
    idcg = (best * disc[:best.shape[1]]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1.0), 0.0)
    return out
