"""The ``bm25f`` arm: BM25 over two fields, the chunk's header weighted above its text."""

from __future__ import annotations

from relgrade.retrieve.bm25 import B, K1, BM25Scorer
from relgrade.retrieve.tokenize import tokenize


class BM25FScorer(BM25Scorer):
    """BM25F scores of every chunk for a query: header terms count ``header_weight`` times.

    Parameters
    ----------
    headers : sequence of str, length n_docs
        Each chunk's header (file, enclosing class or section, symbol).
    texts : sequence of str, length n_docs
        Each chunk's text, aligned with ``headers``.
    header_weight : int, default 3
        How many times a header term counts (>= 1). With 1 the scores equal
        :class:`relgrade.retrieve.bm25.BM25Scorer`'s over header + text.
    k1 : float, default 1.2
        Term-frequency saturation.
    b : float, default 0.75
        Length normalisation.

    Raises
    ------
    ValueError
        ``header_weight`` is not an integer >= 1, or the two sequences differ in length.

    Notes
    -----
    The simple BM25F of Robertson, Zaragoza & Taylor ("Simple BM25 extension to multiple
    weighted fields", CIKM 2004): field term frequencies are weighted and summed *before*
    the saturation, and so are the field lengths::

        tf̃_{t,d} = w · tf_{t,header(d)} + tf_{t,text(d)}
        |d̃|      = w · |header(d)| + |text(d)|
        score(q, d) = Σ_{t ∈ set(q)} ln(1 + (N − df_t + 0.5) / (df_t + 0.5))
                                     · tf̃_{t,d} / (tf̃_{t,d} + k1 · (1 − b + b · |d̃| / avgdl̃))

    with ``avgdl̃`` the mean of ``|d̃|`` and ``df_t`` the number of chunks holding ``t`` in
    either field, all over :func:`relgrade.retrieve.tokenize.tokenize`'s terms. With an
    integer ``w`` this is Lucene's BM25 (bm25s' ``lucene`` method, as in the ``bm25`` arm)
    over a document holding the header's terms ``w`` times and the text's once, which is how
    it is computed. Each distinct query term counts once; scores are float64.

    Examples
    --------
    >>> s = BM25FScorer(["def parse", "def main"], ["x", "parse args"], header_weight=2)
    >>> [round(float(v), 4) for v in s.scores("parse")]
    [0.1207, 0.0766]
    """

    def __init__(self, headers, texts, *, header_weight: int = 3, k1: float = K1,
                 b: float = B):
        import bm25s

        if (isinstance(header_weight, bool) or not isinstance(header_weight, int)
                or header_weight < 1):
            raise ValueError(f"header_weight must be an integer >= 1, not {header_weight!r}")
        headers, texts = list(headers), list(texts)
        if len(headers) != len(texts):
            raise ValueError(f"{len(headers)} headers for {len(texts)} texts")
        # the weighted fields make one document each; scores() is then BM25Scorer's own
        self._index = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
        self._index.index([tokenize(h) * header_weight + tokenize(t)
                           for h, t in zip(headers, texts)], show_progress=False)
        self.n_docs = len(headers)
