"""The ``bm25`` arm: Okapi BM25 (Lucene's variant) with bm25s over header + text."""

from __future__ import annotations

import numpy as np

from relgrade.retrieve.tokenize import tokenize

#: Lucene's BM25Similarity defaults
K1 = 1.2
B = 0.75


class BM25Scorer:
    """BM25 scores of every chunk for a query, from an index built once over the chunks.

    Parameters
    ----------
    docs : sequence of str, length n_docs
        One text per chunk (its header, a newline, its text).
    k1 : float, default 1.2
        Term-frequency saturation.
    b : float, default 0.75
        Length normalisation.

    Notes
    -----
    The score of document ``d`` for query ``q`` is (Lucene's BM25, as bm25s' ``lucene``
    method computes it; Kamphuis, de Vries, Boytsov & Lin, ECIR 2020, Table 1)::

        score(q, d) = Σ_{t ∈ set(q)} ln(1 + (N − df_t + 0.5) / (df_t + 0.5))
                                     · tf_{t,d} / (tf_{t,d} + k1 · (1 − b + b · |d| / avgdl))

    with ``N`` the number of chunks, ``df_t`` the number of chunks holding ``t``, ``|d|`` the
    chunk's token count and ``avgdl`` the mean token count, all over :func:`tokenize`'s
    terms. Each distinct query term counts once. Scores are computed in float64.
    """

    def __init__(self, docs, *, k1: float = K1, b: float = B):
        import bm25s

        self._index = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
        self._index.index([tokenize(d) for d in docs], show_progress=False)
        self.n_docs = len(docs)

    def scores(self, query: str) -> np.ndarray:
        """Scores of every chunk for ``query``, ndarray of float64, shape (n_docs,)."""
        terms = list(dict.fromkeys(tokenize(query)))  # distinct, in order
        ids = self._index.get_tokens_ids(terms)
        if not ids:
            return np.zeros(self.n_docs, dtype=np.float64)
        return np.asarray(self._index.get_scores(ids), dtype=np.float64)
