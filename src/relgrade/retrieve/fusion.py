"""The ``rrf`` arm: reciprocal rank fusion of other arms' runs."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.ranking import canonical_ranking, round_scores, top_k
from relgrade.schema import PAIR, RUN

#: the constant of Cormack, Clarke & Büttcher (2009)
K = 60


def rrf(runs: Mapping[str, pd.DataFrame], *, k: float = K, depth: int,
        ties: str = "score") -> pd.DataFrame:
    """Fuse runs by reciprocal rank.

    Parameters
    ----------
    runs : mapping of str to pandas.DataFrame
        Arm name → run (columns ``query_id``, ``chunk_id``, ``rank``, ``score``). Each is
        read in its canonical ranking (:func:`relgrade.ranking.canonical_ranking` with
        ``ties``), so its ``rank`` column is 1..n per query whatever the file said.
        Not modified.
    k : float, default 60
        The smoothing constant; larger ``k`` flattens the difference between top ranks.
    depth : int
        How many fused chunks to keep per query.
    ties : {"score", "rank"}, default "score"
        How each input run is ordered before its ranks are read.

    Returns
    -------
    pandas.DataFrame
        The fused run: ``query_id`` (str), ``chunk_id`` (str), ``rank`` (int64, 1..n per
        query, n ≤ depth), ``score`` (float64, the fused score), in canonical order (score
        descending, then chunk id descending).

    Raises
    ------
    InputError
        No run given, ``k`` negative, or ``depth`` below 1.

    Notes
    -----
    For a chunk ``d`` and query ``q``::

        RRF(q, d) = Σ_{arms a that ranked d for q} 1 / (k + rank_a(q, d))

    Cormack, Clarke & Büttcher, "Reciprocal rank fusion outperforms Condorcet and individual
    rank learning methods", SIGIR 2009. An arm that did not rank ``d`` adds nothing. The
    terms are added in the order of ``runs`` sorted by arm name, so the float sum does not
    depend on the mapping's order.

    Examples
    --------
    >>> a = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["x", "y"], "rank": [1, 2],
    ...                   "score": [2.0, 1.0]})
    >>> b = pd.DataFrame({"query_id": ["q"], "chunk_id": ["y"], "rank": [1], "score": [5.0]})
    >>> rrf({"a": a, "b": b}, k=60, depth=10)["chunk_id"].tolist()
    ['y', 'x']
    """
    if not runs:
        raise InputError("reciprocal rank fusion needs at least one run")
    if k < 0:
        raise InputError("the RRF constant k must not be negative", found=k)
    if int(depth) < 1:
        raise InputError("depth must be at least 1", found=depth)
    parts = []
    for name in sorted(runs):
        ranked = canonical_ranking(runs[name][RUN],
                                   ties=ties)
        parts.append(pd.DataFrame({
            "query_id": ranked["query_id"].astype("str"),
            "chunk_id": ranked["chunk_id"].astype("str"),
            "score": 1.0 / (k + ranked["rank"].to_numpy(dtype=np.float64)),
        }))
    stacked = pd.concat(parts, ignore_index=True)
    fused = (stacked.groupby(PAIR, sort=True, as_index=False)["score"]
             .sum())
    fused["score"] = round_scores(fused["score"].to_numpy())
    fused["rank"] = np.int64(0)
    fused = fused[RUN]
    if len(fused) == 0:
        return fused.astype({"rank": "int64", "score": "float64"})
    return top_k(fused, int(depth), ties="score")
