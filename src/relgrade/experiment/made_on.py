"""What a grade of any pair is made on today, held as arrays: the corpus's content hashes and
the intents' hashes by id code, not a dict entry (and Python strings) per chunk.

:meth:`relgrade.experiment.files.Experiment.made_on_now` reads the whole chunks table (ids,
headers and texts) into pandas and keeps one Series entry per chunk. :class:`MadeOnNow`
reads the chunks table a Parquet batch at a time, hashes each batch's chunks exactly as
:func:`relgrade.protocol.bank.content_sha256` does, and keeps the ids as one Arrow column
with their 64-bit hashes (:class:`relgrade.protocol.grade_blocks.IdCodes`) and each
content hash as 32 raw bytes: about 70 bytes a chunk.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from relgrade.io import files as io
from relgrade.protocol.bank import content_sha256, intent_sha256
from relgrade.protocol.grade_blocks import IdCodes
from relgrade.ranking import arrow_ids

#: Chunks hashed at a time while the corpus is read.
_BATCH = 8192
#: Bytes of the chunks file read at a time: the reader streams a column chunk's pages
#: through a buffer this size instead of holding the whole row group's column chunks.
_BUFFER = 1 << 16


def _raw(hexes) -> np.ndarray:
    """64-hex-digit strings as raw digests (uint8, shape (n, 32))."""
    return np.frombuffer(bytes.fromhex("".join(hexes)), dtype=np.uint8).reshape(-1, 32)


def _hexes(raw: np.ndarray) -> np.ndarray:
    """Raw digests (uint8, shape (n, 32)) as 64-hex-digit strings (object, shape (n,))."""
    text = raw.tobytes().hex()
    return np.array([text[i: i + 64] for i in range(0, len(text), 64)], dtype=object)


class MadeOnNow:
    """What a grade of any pair is made on today (:meth:`Experiment.made_on_now`), as arrays.

    Build it with :meth:`load`. Calling it with a grade row gives what ``made_on_now``'s
    function gives; :meth:`for_rows` looks up a block of rows at once (what
    :meth:`relgrade.graders.store.GradeStore.import_rows` uses for each block).

    Parameters
    ----------
    chunks : IdCodes
        The corpus's chunk ids.
    content : numpy.ndarray of uint8, shape (n_chunks, 32)
        Row ``i``: the raw sha256 of chunk ``i`` as a grader sees it
        (:func:`relgrade.protocol.bank.content_sha256`).
    queries : IdCodes
        The frozen intents' query ids.
    intents : numpy.ndarray of uint8, shape (n_queries, 32)
        Row ``i``: the raw sha256 of query ``i``'s intent line
        (:func:`relgrade.protocol.bank.intent_sha256`).
    rubric : dict
        ``rubric_version``, ``rubric_sha256`` (str).
    """

    def __init__(self, *, chunks: IdCodes, content: np.ndarray, queries: IdCodes,
                 intents: np.ndarray, rubric: dict):
        self.chunks, self.content = chunks, content
        self.queries, self.intents = queries, intents
        self.rubric = dict(rubric)

    @classmethod
    def load(cls, ex) -> "MadeOnNow | None":
        """The experiment's corpus, intents and rubric as :class:`MadeOnNow`.

        Parameters
        ----------
        ex : relgrade.experiment.files.Experiment

        Returns
        -------
        MadeOnNow or None
            None when ``made_on_now`` must answer instead: a table missing (it words that
            refusal), a chunks table that is not Parquet, an id column that is not strings,
            an id given twice, or a missing id, header or text.

        Raises
        ------
        InputError
            The rubric file is missing (as :meth:`Experiment.rubric_sha256`).
        """
        chunks_path, intents_path = ex.path("chunks"), ex.path("intents")
        if not (chunks_path.is_file() and intents_path.exists()) or \
                chunks_path.suffix.lower() != ".parquet":
            return None
        columns = ["chunk_id", "header", "text"]
        try:
            # streamed a batch at a time: the corpus is one row group of every chunk, which
            # the default reader (whole column chunks, 64k-row batches) decodes at about
            # 250 bytes a chunk at once
            f = pq.ParquetFile(chunks_path, pre_buffer=False, buffer_size=_BUFFER)
        except (OSError, pa.ArrowException):
            return None
        with f:
            if not all(c in f.schema_arrow.names for c in columns) or \
                    not all(pa.types.is_string(f.schema_arrow.field(c).type) or
                            pa.types.is_large_string(f.schema_arrow.field(c).type)
                            for c in columns):
                return None
            ids, digests = [], []
            for batch in f.iter_batches(batch_size=_BATCH, columns=columns, use_threads=False):
                if any(batch.column(c).null_count for c in columns):
                    return None
                frame = pd.DataFrame({c: batch.column(c).to_pylist() for c in columns})
                digests.append(_raw(content_sha256(frame).tolist()))
                ids.append(arrow_ids(batch.column("chunk_id")))
                del frame
        chunk_ids = pa.chunked_array([c for a in ids for c in a.chunks], pa.large_string()) \
            if ids else pa.chunked_array([], pa.large_string())
        chunks = IdCodes(chunk_ids)
        del ids, chunk_ids
        intents = io.read_table(intents_path, only=True, columns=["query_id", "intent"])
        hashed = intent_sha256(intents)
        queries = IdCodes(pa.array(hashed.index.tolist(), pa.large_string()))
        if not (chunks.unique and queries.unique):
            return None
        content = np.concatenate(digests) if digests else np.zeros((0, 32), np.uint8)
        rubric = {"rubric_version": str(ex.params.grading.rubric_version),
                  "rubric_sha256": ex.rubric_sha256()}
        return cls(chunks=chunks, content=content, queries=queries,
                   intents=_raw(hashed.tolist()), rubric=rubric)

    def for_rows(self, rows: list[dict]):
        """What each of ``rows`` (grade rows, dicts with ``query_id``, ``chunk_id``) is made
        on, looked up at once; the function of a row that ``made_on_now`` would give for
        them (None for a pair whose chunk or query is unknown)."""
        if not rows:
            return self
        qid = pa.array([str(r["query_id"]) for r in rows], pa.large_string())
        cid = pa.array([str(r["chunk_id"]) for r in rows], pa.large_string())
        q, c = self.queries.codes(qid), self.chunks.codes(cid)
        known = (q >= 0) & (c >= 0)
        content = self.content[c[known]].tobytes().hex()
        intent = self.intents[q[known]].tobytes().hex()
        table, k = {}, 0
        for r, ok in zip(rows, known.tolist()):
            if ok:
                table[(str(r["query_id"]), str(r["chunk_id"]))] = {
                    "content_sha256": content[64 * k: 64 * k + 64],
                    "intent_sha256": intent[64 * k: 64 * k + 64], **self.rubric}
                k += 1
        return lambda row: table.get((str(row["query_id"]), str(row["chunk_id"])))

    def table(self, pairs: pd.DataFrame) -> pd.DataFrame | None:
        """What each pair of ``pairs`` is made on, as
        :meth:`relgrade.experiment.files.Experiment.made_on_now_table` gives it for pairs
        it knows, without the corpus read whole.

        Parameters
        ----------
        pairs : pandas.DataFrame of shape (n_pairs, >= 2)
            ``query_id``, ``chunk_id`` (text, as ``str`` gives it).

        Returns
        -------
        pandas.DataFrame of shape (n_pairs, 6) or None
            ``query_id``, ``chunk_id`` as given, then ``content_sha256``,
            ``intent_sha256``, ``rubric_version``, ``rubric_sha256`` (str); None when a
            pair's chunk or query is unknown (``made_on_now_table`` then says what it
            writes for it).
        """
        qid = pa.array(pairs["query_id"].astype(str), pa.large_string())
        cid = pa.array(pairs["chunk_id"].astype(str), pa.large_string())
        q, c = self.queries.codes(qid), self.chunks.codes(cid)
        if (q < 0).any() or (c < 0).any():
            return None
        out = pd.DataFrame({"query_id": pairs["query_id"].to_numpy(),
                            "chunk_id": pairs["chunk_id"].to_numpy()})
        out["content_sha256"] = _hexes(self.content[c])
        out["intent_sha256"] = _hexes(self.intents[q])
        for name, value in self.rubric.items():
            out[name] = value
        return out

    def series_for(self, query_ids, chunk_ids) -> dict:
        """Today's hashes of some queries and chunks as
        :func:`relgrade.pipeline.judgments.current_now` gives them for all.

        Parameters
        ----------
        query_ids, chunk_ids : array-like of str
            Distinct ids (a block of the bank's rows' ids).

        Returns
        -------
        dict
            ``content``: pandas.Series of str (64 hex digits) indexed by chunk id, and
            ``intents`` by query id, for the ids known today only (an id left out is a
            chunk gone, or a query without an intent line).
        """
        out = {}
        for name, ids, known, raw in (("content", chunk_ids, self.chunks, self.content),
                                      ("intents", query_ids, self.queries, self.intents)):
            arr = pa.array([str(v) for v in ids], pa.large_string())
            at = known.codes(arr)
            hit = at >= 0
            out[name] = pd.Series(_hexes(raw[at[hit]]) if hit.any() else
                                  np.zeros(0, dtype=object),
                                  index=pd.Index(np.asarray(arr.to_pylist(), dtype=object)[hit],
                                                 dtype=object), dtype=object)
        return out

    def __call__(self, row: dict) -> dict | None:
        """What grade row ``row`` is made on (``content_sha256``, ``intent_sha256``,
        ``rubric_version``, ``rubric_sha256``), or None for a chunk or query unknown."""
        return self.for_rows([row])(row)
