"""Retrieval arms: each turns the chunks and the queries into a run.

Arm kinds (params ``arms.NAME.kind``):

- ``bm25``: :class:`relgrade.retrieve.bm25.BM25Scorer` (optional ``k1``, ``b``);
- ``bm25f``: :class:`relgrade.retrieve.bm25f.BM25FScorer`, the header's terms counted
  ``header_weight`` times (default 3; optional ``k1``, ``b``);
- ``tfidf``: :class:`relgrade.retrieve.tfidf.TfidfScorer`;
- ``rrf``: :func:`relgrade.retrieve.fusion.rrf` of the arms listed in ``fuse``, computed
  here from the same chunks and queries (a ``file`` arm's run is passed in, as read) (optional ``k``, default 60; optional
  ``fuse_depth``, else each fused arm's own ``depth``);
- ``embed``: :class:`relgrade.retrieve.embed.EmbedScorer` (the optional ``embed`` extra);
- ``file``: an external run at ``source``, checked and rewritten by :func:`external_run`.

Every arm's run is in canonical order (score descending, ties by chunk id descending, as
trec_eval reads a run), ranks 1..n per query with n ≤ ``depth``. A query that no chunk
matches (all of its terms unknown to the corpus) is absent from the lexical arms' runs;
metrics score it 0 for that arm.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.ranking import SCORE_DIGITS, round_scores, top_k, validate_run
from relgrade.schema import RUN

KINDS = ("bm25", "bm25f", "tfidf", "rrf", "embed", "file")
#: kinds computed in-process
SCORED = ("bm25", "bm25f", "tfidf", "embed")
#: kinds an ``rrf`` arm can fuse: the computed ones and external runs
FUSABLE = (*SCORED, "file")


def run_arm(name: str, arms: dict, *, chunks: pd.DataFrame, queries: pd.DataFrame,
            source=None, external: dict | None = None, ties: str = "score") -> pd.DataFrame:
    """Compute the run of a computed arm (every kind but ``file``).

    Parameters
    ----------
    name : str
        The arm, a key of ``arms``.
    arms : dict
        The params ``arms`` section: arm name → its settings (``kind``, ``depth``, ...).
    chunks : pandas.DataFrame
        The chunks table (``chunk_id``, ``header``, ``text``, ...), shape (n_chunks, ...).
    queries : pandas.DataFrame
        The queries table (``query_id``, ``query``, ...), shape (n_queries, ...).
    source : str or Path, optional
        The file the arm's settings came from, named in errors about them.
    external : dict of str to pandas.DataFrame, optional
        The runs of the ``file`` arms an ``rrf`` arm fuses, by arm name, as read (already
        checked against the corpus and queries, see :func:`external_run`); each is cut to
        its canonical top ``fuse_depth`` (else the file arm's ``depth``) before fusion.
    ties : {"score", "rank"}, default "score"
        How an external run is ordered before it is cut (params ``runs.ties``).

    Returns
    -------
    pandas.DataFrame
        The run: ``query_id`` (str), ``chunk_id`` (str), ``rank`` (int64), ``score``
        (float64), canonical order, at most ``depth`` rows per query.

    Raises
    ------
    InputError
        The arm is not in ``arms``; its kind is unknown or ``file``; ``depth`` is not a
        positive integer; an ``rrf`` arm fuses nothing, fuses an unknown arm or another
        ``rrf`` arm, or fuses a ``file`` arm whose run is not in ``external``; the ``embed``
        extra is missing.
    """
    config = _config(name, arms, source)
    kind = config["kind"]
    depth = _depth(name, config, source)
    if kind == "file":
        raise InputError("a `file` arm is read from its source, not computed",
                         path=source, item=f"arms.{name}")
    if kind == "rrf":
        fuse = config.get("fuse")
        if not isinstance(fuse, list) or not fuse:
            raise InputError("an rrf arm needs a non-empty list `fuse` of arm names",
                             path=source, item=f"arms.{name}", found=repr(fuse))
        components = {}
        for other in fuse:
            other_config = _config(str(other), arms, source)
            if other_config["kind"] not in FUSABLE:
                raise InputError(f"an rrf arm fuses arms of kind {', '.join(FUSABLE)}",
                                 path=source, item=f"arms.{name}.fuse",
                                 found=f"{other} of kind {other_config['kind']}")
            sub_depth = config.get("fuse_depth", _depth(str(other), other_config, source))
            if other_config["kind"] == "file":
                if not external or str(other) not in external:
                    raise InputError("the run of a fused file arm was not given",
                                     path=source, item=f"arms.{name}.fuse", found=str(other))
                components[str(other)] = top_k(external[str(other)][RUN], int(sub_depth),
                                               ties=ties)
                continue
            components[str(other)] = search(_scorer(other_config, chunks), chunks=chunks,
                                            queries=queries, depth=int(sub_depth),
                                            positive_only=other_config["kind"] != "embed")
        from relgrade.retrieve.fusion import K, rrf

        k = config.get("k", K)
        if isinstance(k, bool) or not isinstance(k, (int, float)) or k < 0:
            raise InputError("the rrf constant `k` must be a non-negative number",
                             path=source, item=f"arms.{name}.k", found=repr(k))
        return rrf(components, k=k, depth=depth, ties=ties)
    return search(_scorer(config, chunks), chunks=chunks, queries=queries, depth=depth,
                  positive_only=kind != "embed")


def external_run(run: pd.DataFrame, *, depth: int, ties: str = "score", path=None,
                 queries=None, chunks=None, lines=None) -> pd.DataFrame:
    """Check an external run and return its canonical top ``depth`` per query.

    Parameters
    ----------
    run : pandas.DataFrame
        As read by :func:`relgrade.io.runs.read_run`. Not modified.
    depth : int
        Rows kept per query.
    ties : {"score", "rank"}, default "score"
        The canonical ranking's tie rule (params ``runs.ties``).
    path : str or Path, optional
        The run file, named in errors.
    queries, chunks : iterable of str, optional
        Known query ids and chunk ids.
    lines : relgrade.io.runs.RunLines, optional
        Where ``run``'s rows sit in ``path`` (:func:`relgrade.io.runs.run_lines`): a chunk
        listed twice is then named by its lines, not its ranks.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``rank`` (1..n), ``score``, canonical order.

    Raises
    ------
    InputError
        As :func:`relgrade.ranking.validate_run` (empty run, duplicate chunk for a query,
        non-finite score, unknown query or chunk id).
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError("`depth` must be a positive integer", found=repr(depth))
    validate_run(run, path=path, queries=queries, chunks=chunks, lines=lines)
    return top_k(run[RUN], depth, ties=ties)


def search(scorer, *, chunks: pd.DataFrame, queries: pd.DataFrame, depth: int,
           positive_only: bool = True) -> pd.DataFrame:
    """Rank the chunks for every query by a scorer's scores; keep the top ``depth``.

    Parameters
    ----------
    scorer : object
        Has ``scores(query: str) -> ndarray of float64, shape (n_chunks,)``, aligned with
        the rows of ``chunks``.
    chunks : pandas.DataFrame
        Column ``chunk_id``, shape (n_chunks, ...).
    queries : pandas.DataFrame
        Columns ``query_id`` and ``query``.
    depth : int
        At most this many chunks per query.
    positive_only : bool, default True
        Leave out chunks scoring 0 or less (for lexical scores: no query term in common).

    Returns
    -------
    pandas.DataFrame
        The run, canonical order (score descending, chunk id descending on ties), ranks
        1..n per query; queries in the order of their ids.
    """
    ids = chunks["chunk_id"].astype("str").to_numpy()
    rows_q, rows_c, rows_s = [], [], []
    for qid, text in zip(queries["query_id"].astype("str"), queries["query"].astype("str")):
        s = np.asarray(scorer.scores(text), dtype=np.float64)
        keep = np.flatnonzero(s > 0) if positive_only else np.arange(len(s))
        if len(keep) > depth:
            # every chunk that may tie with the depth-th score once rounded stays a candidate
            cut = np.partition(s[keep], len(keep) - depth)[len(keep) - depth]
            keep = keep[s[keep] >= cut - abs(cut) * 10.0 ** (1 - SCORE_DIGITS)]
        rows_q.append(np.full(len(keep), qid, dtype=object))
        rows_c.append(ids[keep])
        rows_s.append(round_scores(s[keep]))
    run = pd.DataFrame({
        "query_id": pd.Series(np.concatenate(rows_q) if rows_q else [], dtype="str"),
        "chunk_id": pd.Series(np.concatenate(rows_c) if rows_c else [], dtype="str"),
        "rank": np.int64(0),
        "score": np.concatenate(rows_s) if rows_s else np.zeros(0),
    })
    run["rank"] = run["rank"].astype("int64")
    if len(run) == 0:
        return run
    return top_k(run, int(depth), ties="score")


def chunk_texts(chunks: pd.DataFrame) -> list[str]:
    """What the arms index for each chunk: its header, a newline, its text."""
    return (chunks["header"].astype("str") + "\n" + chunks["text"].astype("str")).tolist()


def _scorer(config: dict, chunks: pd.DataFrame):
    docs = chunk_texts(chunks)
    kind = config["kind"]
    if kind == "bm25":
        from relgrade.retrieve.bm25 import K1, B, BM25Scorer

        return BM25Scorer(docs, k1=float(config.get("k1", K1)), b=float(config.get("b", B)))
    if kind == "bm25f":
        from relgrade.retrieve.bm25 import K1, B
        from relgrade.retrieve.bm25f import BM25FScorer

        return BM25FScorer(chunks["header"].astype("str").tolist(),
                           chunks["text"].astype("str").tolist(),
                           header_weight=int(config.get("header_weight", 3)),
                           k1=float(config.get("k1", K1)), b=float(config.get("b", B)))
    if kind == "tfidf":
        from relgrade.retrieve.tfidf import TfidfScorer

        return TfidfScorer(docs)
    from relgrade.retrieve.embed import EmbedScorer

    return EmbedScorer(docs)


def arm_config(name: str, arms: dict, source=None) -> dict:
    """An arm's settings, checked.

    Parameters
    ----------
    name : str
        The arm.
    arms : dict
        The params ``arms`` section.
    source : str or Path, optional
        Named in errors.

    Returns
    -------
    dict
        The arm's settings as given (not copied): ``kind`` one of :data:`KINDS`, ``depth`` a
        positive integer, and for ``file`` arms ``source`` a non-empty string.

    Raises
    ------
    InputError
        The arm is missing, or one of those settings is.
    """
    config = _config(name, arms, source)
    _depth(name, config, source)
    if config["kind"] == "file":
        source = config.get("source")
        if not isinstance(source, str) or not source.strip():
            raise InputError("a `file` arm needs `source`, the path of its run",
                             path=source, item=f"arms.{name}.source", found=repr(source))
    return config


def _config(name: str, arms, source) -> dict:
    if not isinstance(arms, dict) or name not in arms:
        raise InputError("no such arm in params `arms`", path=source, item=name,
                         found=", ".join(sorted(arms)) if isinstance(arms, dict) else None)
    config = arms[name]
    if not isinstance(config, dict) or config.get("kind") not in KINDS:
        kind = config.get("kind") if isinstance(config, dict) else config
        raise InputError(f"unknown arm kind (use {', '.join(KINDS)})", path=source,
                         item=f"arms.{name}.kind", found=repr(kind))
    return config


def _depth(name: str, config: dict, source) -> int:
    depth = config.get("depth")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError("`depth` must be a positive integer", path=source,
                         item=f"arms.{name}.depth", found=repr(depth))
    return depth


__all__ = ["KINDS", "arm_config", "run_arm", "external_run", "search", "chunk_texts"]
