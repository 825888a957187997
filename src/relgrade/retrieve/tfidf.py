"""The ``tfidf`` arm: TF-IDF vectors (scikit-learn) and cosine similarity over header + text."""

from __future__ import annotations

import numpy as np

from relgrade.retrieve.tokenize import tokenize


class TfidfScorer:
    """Cosine similarity between a query's and every chunk's TF-IDF vector.

    Parameters
    ----------
    docs : sequence of str, length n_docs
        One text per chunk (its header, a newline, its text).

    Notes
    -----
    scikit-learn's ``TfidfVectorizer`` with :func:`tokenize` and its defaults: raw term
    counts, smoothed idf ``idf_t = ln((1 + N) / (1 + df_t)) + 1`` fitted on the chunks, rows
    L2-normalised. A query is vectorised with the same vocabulary and idf (terms outside it
    are ignored), so the score is the cosine::

        score(q, d) = (v_q · v_d) / (‖v_q‖ ‖v_d‖) = v̂_q · v̂_d

    computed as a linear kernel on the normalised rows (Salton & Buckley 1988). A query
    with no known term scores 0 everywhere.
    """

    def __init__(self, docs):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._vectorizer = TfidfVectorizer(tokenizer=tokenize, lowercase=False,
                                           token_pattern=None, norm="l2", dtype=np.float64)
        self._docs = self._vectorizer.fit_transform(list(docs))
        self.n_docs = self._docs.shape[0]

    def scores(self, query: str) -> np.ndarray:
        """Cosine of every chunk with ``query``, ndarray of float64, shape (n_docs,)."""
        from sklearn.metrics.pairwise import linear_kernel

        q = self._vectorizer.transform([query])
        return np.asarray(linear_kernel(q, self._docs)[0], dtype=np.float64)
