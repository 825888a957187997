"""Pooling: the chunks every arm ranks highly, per query, stripped of where they came from.

The pool of a query is the deduplicated union of every arm's top-``depth`` chunks (TREC-style
pooling, Spärck Jones & van Rijsbergen 1975; Voorhees & Harman 2005), optionally with a
seeded uniform random sample of ``tail_sample`` further chunks drawn from those ranked
``depth+1 .. tail_depth`` by any arm, so the grades also say something about what every arm
ranks low. Each pooled pair records its ``inclusion_prob``: 1.0 for the top-depth pool and
``min(k, n) / n`` for a tail chunk (``k`` = ``tail_sample``, ``n`` = the query's tail
candidates), which is what a sampled-pool estimator (inverse-probability weighting, as in
infAP, Yilmaz & Aslam 2006) divides by.

Which arm found which chunk at which rank (the *provenance*) is kept in a separate private
table: the pool itself holds only ``query_id``, ``chunk_id`` and ``inclusion_prob``, sorted
by (query_id, chunk_id), so nothing in it reveals an arm, a rank, a score or how many arms
found a chunk.

The work is vectorised: ids are factorised once into sorted integer codes and every step
(deduplication, sampling, statistics) runs on integer arrays, with no Python loop per query.
"""

from __future__ import annotations

import hashlib
import numbers
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.canonical import canonical_json, sha256_bytes
from relgrade.errors import InputError
from relgrade.ranking import (arrow_array, arrow_ids, arrow_strings, holds_separator,
                              id_codes, numpy_values, pair_hashes, ranks_in_sorted,
                              validate_run)
from relgrade.schema import RUNS

if TYPE_CHECKING:
    import pandas as pd

# the pool is built as Arrow tables (:func:`pool_tables`), which the pool stage writes as
# they are (:func:`relgrade.io.files.write_arrow_parquet`); the functions that return
# pandas DataFrames convert them at the end


def _int_param(value, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}",
                         item=name, found=repr(value))
    return int(value)


def top_candidates(run: pd.DataFrame, depth: int, *, ties: str = "score") -> pd.DataFrame:
    """The rows of each ranked list that can reach its canonical top ``depth``.

    A cheap cut before :func:`relgrade.ranking.canonical_ranking`, so a deep run is not sorted
    in full just to pool its first ranks.

    Parameters
    ----------
    run : pandas.DataFrame of shape (n_rows, >= 4)
        A validated run: ``query_id``, ``chunk_id``, ``rank``, ``score`` (and ``arm`` when
        stacked; each (arm, query) is then its own ranked list). Not modified.
    depth : int
        The deepest canonical rank needed (``pool.depth``, or ``pool.tail_depth`` with a
        tail sample).
    ties : {"score", "rank"}, default "score"
        The tie rule the run will be ranked with (params ``runs.ties``).

    Returns
    -------
    pandas.DataFrame
        The rows of ``run`` (same columns, original row order and index) whose sort key is
        at least as good as the ``depth``-th best key of their ranked list: score at least
        the ``depth``-th highest score (``ties="score"``), or rank at most the ``depth``-th
        lowest rank (``ties="rank"``). Lists shorter than ``depth`` are kept whole.

    Raises
    ------
    InputError
        ``ties`` is neither ``"score"`` nor ``"rank"``; ``depth`` is not a positive integer.

    Notes
    -----
    The canonical order sorts each list by that key first (score descending, or rank
    ascending) and only then breaks ties, so the kept rows are exactly a prefix of the
    canonical order, ties at the cut included. Ranking the kept rows therefore gives every
    row the same canonical rank as ranking the whole run, for all ranks up to ``depth``.
    A run already in canonical order (as TREC runs usually are) is cut in linear time;
    otherwise one ``numpy.lexsort`` over numeric keys does it.
    """
    if ties not in ("score", "rank"):
        raise InputError("runs.ties must be `score` or `rank`",
                         item="runs.ties", found=repr(ties))
    depth = _int_param(depth, "pool depth", minimum=1)
    n = len(run)
    if n == 0:
        return run
    group = pc.dictionary_encode(arrow_ids(run["query_id"]).combine_chunks()).indices.to_numpy(
        zero_copy_only=False).astype(np.int64)
    if "arm" in run.columns:
        arm = pc.dictionary_encode(arrow_ids(run["arm"]).combine_chunks()).indices.to_numpy(
            zero_copy_only=False).astype(np.int64)
        group = arm * (int(group.max()) + 1) + group
    if ties == "score":
        key = -run["score"].to_numpy(dtype=np.float64)
    else:
        key = run["rank"].to_numpy().astype(np.float64)
    return run[_cut_mask(group, key, depth)]


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: a query code times it is a bijection of uint64


class IdSet:
    """Known ids (a query set, a corpus's chunk ids), prepared once for many membership
    checks.

    ``pyarrow.compute.is_in`` builds a hash table of its value set on every call: checking
    ten runs against a corpus of two million chunks built it ten times, which cost more
    than the rest of pooling. Here the ids are hashed once (64-bit,
    :func:`relgrade.ranking.pair_hashes`) and sorted; a check hashes the values, finds each
    hash by binary search and compares the ids themselves where the hashes match, so a hash
    collision can never pass an unknown id. Against two million known chunk ids, a run of
    500,000 rows is checked in 60-90 ms of CPU, where ``is_in`` took 550 ms or more.

    Parameters
    ----------
    ids : array-like of str, pyarrow array or pandas Series, shape (n,)
        The known ids (repeats allowed, and kept: ``len`` counts them).

    Attributes
    ----------
    ids : pyarrow.Array of large_string
        The known ids, as given.

    Examples
    --------
    >>> known = IdSet(["c1", "c2"])
    >>> known.holds_all(pa.array(["c2", "c1", "c2"])), known.holds_all(pa.array(["c3"]))
    (True, False)
    """

    def __init__(self, ids):
        # repeated ids do no harm (a lookup finds one of them), so none are removed
        self.ids = arrow_ids(ids).combine_chunks()
        hashes = text_hashes(self.ids)
        self._order = np.argsort(hashes)
        self._hashes = hashes[self._order]

    def __len__(self) -> int:
        return len(self.ids)

    def holds_all(self, values, *, hashes: np.ndarray | None = None) -> bool:
        """Whether every one of ``values`` (string array, shape (n,)) is a known id;
        ``hashes``: their :func:`text_hashes`, when the caller has them already."""
        arr = arrow_ids(values)
        if len(arr) == 0:
            return True
        if len(self.ids) == 0:
            return False
        h = text_hashes(arr) if hashes is None else hashes
        # searching sorted hashes walks the known ones in order (the same lookups in row
        # order cost ten times as much: each is a cache miss)
        order = np.argsort(h)
        h = h[order]
        at = np.minimum(np.searchsorted(self._hashes, h), len(self._hashes) - 1)
        if not (self._hashes[at] == h).all():
            return False
        return bool(pc.all(pc.equal(arr.take(pa.array(order)),
                                    self.ids.take(pa.array(self._order[at])))).as_py())


def text_hashes(ids) -> np.ndarray:
    """A 64-bit hash (uint64, shape (n,)) of each string's UTF-8 bytes; equal strings hash
    alike (:func:`relgrade.ranking.pair_hashes` with code 0)."""
    return pair_hashes(None, arrow_ids(ids))


def arm_candidates(run: pa.Table, depth: int, *, ties: str = "score", path=None,
                   queries: IdSet | None = None, chunks: IdSet | None = None,
                   lines=None) -> pa.Table:
    """Check one arm's run and keep the rows that can reach its canonical top ``depth``.

    The pool stage's per-arm step, on the Arrow table
    :func:`relgrade.io.runtable.read_run_table` returns: every row is checked as
    :func:`relgrade.ranking.validate_run` checks it, in the same pass that finds the rows
    :func:`top_candidates` keeps.

    Parameters
    ----------
    run : pyarrow.Table of shape (n_rows, 4)
        ``query_id``, ``chunk_id`` (string), ``rank`` (int64), ``score`` (float64): one
        arm's run, any row order. Not modified.
    depth : int
        The deepest canonical rank needed (``pool.depth``, or ``pool.tail_depth`` with a
        tail sample), >= 1.
    ties : {"score", "rank"}, default "score"
        The tie rule the rows will be ranked with (params ``runs.ties``).
    path : str or os.PathLike, optional
        The run's file, named in errors.
    queries, chunks : IdSet, optional
        The known query ids / chunk ids (the query set, the corpus); a row naming another
        id is an error.
    lines : object, optional
        Where ``run``'s rows sit in ``path`` (:func:`relgrade.io.runs.run_lines`), passed
        to :func:`relgrade.ranking.validate_run` to name the lines of a chunk listed twice.

    Returns
    -------
    pyarrow.Table
        The rows of ``run`` (same columns, file order) that :func:`top_candidates` keeps:
        score at least the ``depth``-th highest of their query (``ties="score"``), or rank
        at most the ``depth``-th lowest (``ties="rank"``), ties at the cut included.

    Raises
    ------
    InputError
        Exactly as :func:`relgrade.ranking.validate_run` (empty run, non-finite score, an
        id holding U+001F, a chunk listed twice for one query, an unknown query or chunk,
        each naming ``path``, the query and the chunk); ``ties`` or ``depth`` out of range.

    Notes
    -----
    Query ids are dictionary-encoded once (Arrow's hash table); the codes serve the cut,
    the duplicate check and the unknown-query check (run on the distinct ids only). The
    duplicate check sorts a key of each (query, chunk) pair (the query code over the chunk
    id's :func:`text_hashes`, :func:`_pairs_may_repeat`), and the same chunk hashes are
    looked up in ``chunks`` (:meth:`IdSet.holds_all`); whenever a check fails, or two keys
    tie, the run goes through :func:`relgrade.ranking.validate_run`, which compares the
    real ids and raises its own error, so the message is the same whichever path finds it.
    """
    if ties not in ("score", "rank"):
        raise InputError("runs.ties must be `score` or `rank`",
                         item="runs.ties", found=repr(ties))
    depth = _int_param(depth, "pool depth", minimum=1)
    if run.num_rows == 0:
        raise InputError("the run is empty", path=path,
                         fix="Give every arm at least one ranked chunk")
    query = run["query_id"].combine_chunks()
    chunk = run["chunk_id"]
    encoded = pc.dictionary_encode(query)
    group = numpy_values(encoded.indices)
    score = numpy_values(run["score"])
    suspect = (run["score"].null_count > 0 or not np.isfinite(score).all()
               or holds_separator(arrow_ids(encoded.dictionary))
               or holds_separator(arrow_ids(chunk)))
    text = None
    if not suspect:
        # one hash of each chunk id serves the duplicate check (under the query code: equal
        # pairs key alike) and the corpus check
        text = text_hashes(chunk)
        suspect = _pairs_may_repeat(group, text, len(encoded.dictionary))
    if not suspect and queries is not None:
        suspect = not queries.holds_all(encoded.dictionary)
    if not suspect and chunks is not None:
        suspect = not chunks.holds_all(chunk, hashes=text)
    del text
    if suspect:
        # the reference check names the first bad row, as every other reader of a run sees it
        validate_run(run.to_pandas(), path=path,
                     queries=None if queries is None else queries.ids,
                     chunks=None if chunks is None else chunks.ids, lines=lines)
    key = -score if ties == "score" else numpy_values(run["rank"]).astype(np.float64)
    return run.filter(arrow_array(_cut_mask(group, key, depth)))


def candidate_mask(group: np.ndarray, score: np.ndarray, rank: np.ndarray, depth: int, *,
                   ties: str = "score") -> np.ndarray:
    """The rows of an already checked run that can reach its canonical top ``depth``: the
    cut of :func:`arm_candidates`, on columns a caller holds already (the pool stage's
    compiled scan of a TREC run).

    Parameters
    ----------
    group : ndarray of int, shape (n_rows,)
        Each row's ranked list (query) code; equal codes, one list.
    score : ndarray of float64, shape (n_rows,)
        Finite scores.
    rank : ndarray of int64, shape (n_rows,)
    depth : int
        The deepest canonical rank needed, >= 1.
    ties : {"score", "rank"}, default "score"

    Returns
    -------
    ndarray of bool, shape (n_rows,)
        True for the rows :func:`arm_candidates` keeps of the same run: score at least the
        ``depth``-th highest of their list (``ties="score"``), or rank at most the
        ``depth``-th lowest (``ties="rank"``), ties at the cut included.

    Raises
    ------
    InputError
        ``ties`` is neither ``"score"`` nor ``"rank"``; ``depth`` is not a positive integer.
    """
    if ties not in ("score", "rank"):
        raise InputError("runs.ties must be `score` or `rank`",
                         item="runs.ties", found=repr(ties))
    depth = _int_param(depth, "pool depth", minimum=1)
    key = -score if ties == "score" else np.asarray(rank).astype(np.float64)
    return _cut_mask(group, key, depth)


#: Bits of a pair key that hold the query code in :func:`_pairs_may_repeat`; the other 40
#: hold the top bits of the chunk id's hash.
_QUERY_BITS = 24


def _pairs_may_repeat(group: np.ndarray, text: np.ndarray, n_groups: int) -> bool:
    """Whether two rows may name the same (query, chunk) pair: True when two rows of one
    query have chunk hashes that tie (a chunk listed twice, or a hash collision, which the
    caller's exact check tells apart); False proves that no pair repeats.

    ``group`` (int, shape (n,)): each row's query code, below ``n_groups``; ``text``
    (uint64, shape (n,)): each row's :func:`text_hashes` of its chunk id.

    With at most 2^24 queries, each pair's key is the query code over the hash's top 40
    bits, and the keys are sorted by a stable sort (timsort): the codes number queries in
    the order they first appear, so a run whose queries' rows are adjacent, as TREC runs
    are written, has its keys sorted already block by block, and
    only each query's own rows are ordered, at about a third of the cost of sorting 64-bit
    hashes. Two chunks of one query tie on 40 bits with probability about ``m^2 / 2^41``
    for ``m`` rows of the query; a tie only sends the run to the exact check.
    """
    with np.errstate(over="ignore"):
        # the keys made and sorted in one array of their own (no copy per step)
        keys = group.astype(np.uint64)
        if n_groups <= 1 << _QUERY_BITS:
            np.left_shift(keys, np.uint64(64 - _QUERY_BITS), out=keys)
            np.bitwise_or(keys, text >> np.uint64(_QUERY_BITS), out=keys)
            keys.sort(kind="stable")
        else:
            np.multiply(keys, _MIX, out=keys)
            np.bitwise_xor(keys, text, out=keys)
            keys.sort()
    return bool((keys[1:] == keys[:-1]).any())


def pool_candidates(candidates, *, depth: int, ties: str = "score", tail_sample: int = 0,
                    tail_depth: int | None = None,
                    rng: np.random.Generator | None = None
                    ) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Rank every arm's candidate rows canonically and pool them, as pandas DataFrames.

    :func:`pool_tables` with the pool and the provenance converted to pandas
    (``pyarrow.Table.to_pandas``: ids of dtype ``str``, a fresh 0..n-1 index); the
    parameters, errors and values are those of :func:`pool_tables`.

    Returns
    -------
    pool, provenance, stats
        Exactly what ``build_pool(canonical_ranking(stacked, ties=ties), ...)`` returns for
        the stacked candidates (see :func:`build_pool`).
    """
    pool, provenance, stats = pool_tables(candidates, depth=depth, ties=ties,
                                          tail_sample=tail_sample, tail_depth=tail_depth,
                                          rng=rng)
    return pool.to_pandas(), provenance.to_pandas(), stats


def pool_tables(candidates, *, depth: int, ties: str = "score", tail_sample: int = 0,
                tail_depth: int | None = None, rng: np.random.Generator | None = None
                ) -> tuple[pa.Table, pa.Table, dict]:
    """Rank every arm's candidate rows canonically and pool them: the pool stage's last step.

    Parameters
    ----------
    candidates : mapping of str to pyarrow.Table
        Arm name -> that arm's rows from :func:`arm_candidates` (cut at ``tail_depth`` with
        a tail sample, else at ``depth``), in any row order. Not modified.
    depth, tail_sample, tail_depth, rng
        As :func:`build_pool`.
    ties : {"score", "rank"}, default "score"
        The tie rule of :func:`relgrade.ranking.canonical_ranking` (params ``runs.ties``).

    Returns
    -------
    pool : pyarrow.Table of shape (n_pairs, 3)
        ``query_id``, ``chunk_id`` (large_string), ``inclusion_prob`` (float64): the rows
        of :func:`build_pool`'s pool, same order.
    provenance : pyarrow.Table of shape (n_found, 6)
        ``query_id``, ``chunk_id``, ``arm`` (large_string), ``rank`` (int64), ``score``
        (float64), ``source`` (large_string): :func:`build_pool`'s columns and rows.
    stats : dict
        As :func:`build_pool`.

    Raises
    ------
    InputError
        As :func:`build_pool`; ``ties`` is neither ``"score"`` nor ``"rank"``.

    Notes
    -----
    The ids are coded once in byte order (the query ids by
    :func:`relgrade.ranking.id_codes`, the chunk ids by :func:`short_id_codes`, which
    gives the same codes), and the canonical order is
    :func:`relgrade.ranking.canonical_order` on those codes, so no pandas frame of the
    candidates is built.
    """
    if ties not in ("score", "rank"):
        raise InputError("ties must be `score` or `rank`", found=repr(ties))
    depth, tail_sample, tail_depth = _pool_params(depth, tail_sample, tail_depth, rng)
    pool, provenance, parts, arm_ids = _pooled_block(
        candidates, id_codes([str(a) for a in candidates]), depth=depth, ties=ties,
        tail_sample=tail_sample, tail_depth=tail_depth, rng=rng)
    return pool, provenance, _stats_of([parts], arm_ids.to_pylist())


def _pooled_block(candidates, arm_coding, *, depth, ties, tail_sample, tail_depth, rng):
    """:func:`pool_tables` of ``candidates`` (params checked), with the statistics as
    :func:`_stat_parts`: ``(pool, provenance, parts, arm_ids)``. ``arm_coding`` is
    :func:`relgrade.ranking.id_codes` of the arm names, in ``candidates``' order."""
    tables = [candidates[a] for a in candidates]
    sizes = np.array([t.num_rows for t in tables], dtype=np.int64)
    arm_codes, arm_ids = arm_coding
    ac = np.repeat(arm_codes, sizes)
    qc, qu = id_codes(pa.chunked_array([c for t in tables for c in t["query_id"].chunks],
                                       type=pa.large_string()))
    chunk = pa.chunked_array([c for t in tables for c in t["chunk_id"].chunks],
                             type=pa.large_string())
    cc, cu = short_id_codes(chunk)
    score = np.concatenate([numpy_values(t["score"]) for t in tables]) if tables \
        else np.empty(0)
    raw_rank = np.concatenate([numpy_values(t["rank"]) for t in tables]) if tables \
        else np.empty(0, dtype=np.int64)
    rank = _canonical_ranks(ac * max(len(qu), 1) + qc, score, cc, len(cu),
                            rank=raw_rank if ties == "rank" else None)
    pool, provenance, parts = _pool_code_parts(
        qc, qu, cc, cu, ac, arm_ids, rank, score, depth=depth, tail_sample=tail_sample,
        tail_depth=tail_depth, rng=rng)
    return pool, provenance, parts, arm_ids


class PoolBlocks:
    """The pool built a block of queries at a time: :func:`pool_tables` of every arm's
    candidates, cut into blocks of whole queries handed over in query order, so that only
    one block's rows are held at once.

    Each :meth:`add` returns the block's pool and provenance rows, which, stacked in the
    order they come, are :func:`pool_tables`' tables of all the blocks' candidates at once;
    :meth:`stats` and :meth:`manifest` are its statistics and :func:`pool_manifest` of its
    pool, from what each block leaves (counts, a running sha256, each query's Jaccard).

    Parameters
    ----------
    arms : sequence of str
        The arms, in the order :func:`pool_tables` would be given them.
    depth, ties, tail_sample, tail_depth, rng
        As :func:`pool_tables`; the tail sample's keys are drawn block after block, in
        (query_id, chunk_id) order, as one draw over all of them.

    Raises
    ------
    InputError
        As :func:`pool_tables`, for the params.

    Examples
    --------
    >>> blocks = PoolBlocks(["a"], depth=1)
    >>> def rows(q, c):
    ...     return {"a": pa.table({"query_id": arrow_strings([q]),
    ...                            "chunk_id": arrow_strings([c]),
    ...                            "rank": arrow_array(np.array([1])),
    ...                            "score": arrow_array(np.array([1.0]))})}
    >>> [blocks.add(rows(q, "c"))[0].num_rows for q in ("q1", "q2")]
    [1, 1]
    >>> blocks.stats()["pairs"], blocks.manifest(seed=1, depth=1, tail_sample=0,
    ...                                          tail_depth=None, arms=["a"])["queries"]
    (2, 2)
    """

    def __init__(self, arms, *, depth: int, ties: str = "score", tail_sample: int = 0,
                 tail_depth: int | None = None, rng: np.random.Generator | None = None):
        if ties not in ("score", "rank"):
            raise InputError("ties must be `score` or `rank`", found=repr(ties))
        self._params = dict(zip(("depth", "tail_sample", "tail_depth"), _pool_params(
            depth, tail_sample, tail_depth, rng)), ties=ties, rng=rng)
        self.arms = [str(a) for a in arms]
        self._arm_coding = id_codes(self.arms)
        self._parts: list[dict] = []
        self._digest = hashlib.sha256()
        self._pairs = self._queries = 0
        # the previous block's last query id, an Arrow scalar: compared with another
        # scalar, a Python str would be converted by pyarrow, which imports pandas (about
        # 0.3 CPU-s of the stage's process; benchmarks/README.md, "Pooling")
        self._last: pa.Scalar | None = None

    def add(self, candidates) -> tuple[pa.Table, pa.Table]:
        """Pool one block of queries.

        Parameters
        ----------
        candidates : mapping of str to pyarrow.Table
            Every arm of ``arms``, in that order -> its candidate rows for this block's
            queries (:func:`pool_tables`' tables; an arm without a row here: an empty
            table of the same columns). Every query of the block sorts after every query
            of the blocks before it (UTF-8 byte order), and no later block holds it.

        Returns
        -------
        pool, provenance : pyarrow.Table
            This block's rows of :func:`pool_tables`' pool and provenance.

        Raises
        ------
        InputError
            As :func:`pool_tables`.
        ValueError
            ``candidates`` names other arms, or a query of the block does not sort after
            the previous block's queries.
        """
        if [str(a) for a in candidates] != self.arms:
            raise ValueError(f"a block's arms {list(candidates)} are not {self.arms}")
        pool, provenance, parts, _ = _pooled_block(candidates, self._arm_coding,
                                                   **self._params)
        if pool.num_rows:
            q = arrow_ids(pool["query_id"])
            if self._last is not None and not pc.greater(q[0], self._last).as_py():
                raise ValueError(f"block of query {q[0].as_py()} after query "
                                 f"{self._last.as_py()}")
            self._last = q[pool.num_rows - 1]
            self._digest.update(pool_bytes(pool))
            self._pairs += pool.num_rows
            self._queries += int(pc.count_distinct(q).as_py())
        self._parts.append(parts)
        return pool, provenance

    def stats(self) -> dict:
        """The pool statistics of every block so far (as :func:`pool_tables`)."""
        return _stats_of(self._parts, self._arm_coding[1].to_pylist())

    def manifest(self, *, seed: int, depth: int, tail_sample: int, tail_depth: int | None,
                 arms) -> dict:
        """:func:`pool_manifest` of the pool of every block so far."""
        return _manifest("p-" + self._digest.hexdigest()[:12], pairs=self._pairs,
                         queries=self._queries, seed=seed, depth=depth,
                         tail_sample=tail_sample, tail_depth=tail_depth, arms=arms)


#: The longest ids :func:`short_id_codes` codes by numbers (two 8-byte words hold 15 bytes
#: and the length).
SHORT_ID_BYTES = 15
# _KEEP_BYTES[k]: a big-endian word's first k bytes (k = 0 .. 8)
_KEEP_BYTES = np.array([((1 << 64) - 1) ^ ((1 << (64 - 8 * k)) - 1) for k in range(9)],
                       dtype=np.uint64)


def short_id_codes(values) -> tuple[np.ndarray, pa.Array]:
    """:func:`relgrade.ranking.id_codes` of ids of at most :data:`SHORT_ID_BYTES` bytes by
    a numeric sort: the same codes and distinct ids, without Arrow's hash table and string
    sort (about 0.09 of 0.23 CPU-s for the pool stage's 498k candidate chunk ids).

    Parameters
    ----------
    values : pyarrow.ChunkedArray or pyarrow.Array of large_string, shape (n_rows,)

    Returns
    -------
    codes : ndarray of int64, shape (n_rows,)
    uniques : pyarrow.Array of large_string, shape (n_distinct,)
        Exactly what :func:`relgrade.ranking.id_codes` returns for ``values``; an empty
        array, a null, or an id of more than :data:`SHORT_ID_BYTES` bytes goes through it.

    Raises
    ------
    InputError
        An id is missing (null), as :func:`relgrade.ranking.id_codes` words it.

    Notes
    -----
    Each id's bytes, zero-padded to 15, and its length as a 16th byte are read as two
    big-endian 64-bit words; sorting the rows by (first word, second word) is sorting them
    by their bytes (a shorter id ties with a longer one on the padding only when it is its
    prefix, and then its length, the last byte, is smaller), so runs of equal words are the
    distinct ids in byte order.

    Examples
    --------
    >>> codes, uniques = short_id_codes(arrow_ids(["b", "ab", "a", "b"]))
    >>> codes.tolist(), uniques.to_pylist()
    ([2, 1, 0, 2], ['a', 'ab', 'b'])
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(arr)
    if n == 0 or arr.null_count or not pa.types.is_large_string(arr.type):
        return id_codes(values)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    lengths = np.diff(offsets)
    if int(lengths.max()) > SHORT_ID_BYTES:
        return id_codes(values)
    first, last = int(offsets[0]), int(offsets[-1])
    data = np.zeros(last - first + 16, dtype=np.uint8)  # 16 bytes past the last id
    if buffers[2] is not None:
        data[:last - first] = np.frombuffer(buffers[2], dtype=np.uint8)[first:last]
    # every byte position's next 8 bytes as a big-endian word (unaligned loads, no copy)
    word_at = np.ndarray(shape=(len(data) - 7,), dtype=">u8", buffer=data, strides=(1,))
    at = offsets[:-1] - first
    # the id's own bytes kept (its first min(length, 8), then up to 7 more), the length
    # as the last byte
    high = word_at[at].astype(np.uint64) & _KEEP_BYTES[np.minimum(lengths, 8)]
    low = word_at[at + 8].astype(np.uint64) & _KEEP_BYTES[np.clip(lengths - 8, 0, 7)]
    low |= lengths.astype(np.uint64)
    order = np.lexsort((low, high))
    high, low = high[order], low[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(high[1:], high[:-1], out=new[1:])
    new[1:] |= low[1:] != low[:-1]
    codes = np.empty(n, dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return codes, arr.take(arrow_array(order[new]))


def _canonical_ranks(group: np.ndarray, score: np.ndarray, cc: np.ndarray, n_c: int, *,
                     rank: np.ndarray | None = None) -> np.ndarray:
    """Each row's 1-based rank in :func:`relgrade.ranking.canonical_order` of its list.

    ``group`` (int, shape (n,)) codes the ranked list, ``cc`` the chunk ids in byte order
    (``n_c`` distinct), so "chunk id descending" is ``cc`` descending and the whole order is
    numeric. Without ``rank`` (ties="score"): score descending, then chunk descending; with
    it (ties="rank"): rank ascending, score descending, chunk descending. Rows of a list
    already contiguous and in key order (a run file as written) are not sorted: only the
    rows whose keys tie are, by chunk code.
    """
    n = len(group)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    neg = -np.asarray(score, dtype=np.float64)
    keys = [neg] if rank is None else [np.asarray(rank), neg]
    same = group[1:] == group[:-1]
    ok = np.ones(n - 1, dtype=bool)
    tie = np.ones(n - 1, dtype=bool)
    for k in keys:
        ok &= ~tie | (k[:-1] <= k[1:])
        tie &= k[:-1] == k[1:]
    starts = np.flatnonzero(np.r_[True, ~same])
    if np.all(ok | ~same) and len(np.unique(group[starts])) == len(starts):
        order = np.arange(n, dtype=np.int64)
        tie &= same
        if tie.any():
            # each run of tied neighbours is one segment, ordered by chunk code descending
            tied = np.zeros(n, dtype=bool)
            tied[1:] |= tie
            tied[:-1] |= tie
            pos = np.flatnonzero(tied)
            segment = np.cumsum(np.r_[True, ~tie[pos[1:] - 1]])
            within = np.argsort(segment * n_c + (n_c - 1 - cc[pos]), kind="stable")
            order[pos] = pos[within]
    else:
        order = np.lexsort((-cc, *reversed(keys), group))
    out = np.empty(n, dtype=np.int64)
    out[order] = ranks_in_sorted(group[order])
    return out


def _cut_mask(group: np.ndarray, key: np.ndarray, depth: int) -> np.ndarray:
    """Rows whose ``key`` (smaller is better) is at most the ``depth``-th smallest key of
    their list ``group``; every row of a list shorter than ``depth``. Boolean, shape (n,)."""
    n = len(group)
    # Rows already grouped by list and ordered by key: no sort needed, and no copy.
    new_list = group[1:] != group[:-1]
    starts = np.flatnonzero(np.r_[True, new_list])
    presorted = (bool(np.all((key[1:] >= key[:-1]) | new_list))
                 and len(np.unique(group[starts])) == len(starts))
    if presorted:
        g_sorted, k_sorted = group, key
    else:
        order = np.lexsort((key, group))
        g_sorted, k_sorted = group[order], key[order]
        starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    lengths = np.diff(np.r_[starts, n])
    # the depth-th best key of each list (lists shorter than depth keep every row)
    cut = np.full(len(starts), np.inf)
    long_enough = lengths >= depth
    cut[long_enough] = k_sorted[starts[long_enough] + depth - 1]
    keep_sorted = k_sorted <= np.repeat(cut, lengths)
    if presorted:
        return keep_sorted
    keep = np.zeros(n, dtype=bool)
    keep[order[keep_sorted]] = True
    return keep


def build_pool(runs: pd.DataFrame, *, depth: int, tail_sample: int = 0,
               tail_depth: int | None = None,
               rng: np.random.Generator | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Pool every arm's top-``depth`` chunks per query, plus an optional random tail sample.

    Parameters
    ----------
    runs : pandas.DataFrame of shape (n_rows, >= 5)
        Stacked runs with columns ``arm`` (str), ``query_id`` (str), ``chunk_id`` (str),
        ``rank`` (int, canonical, 1..n within each (arm, query), as
        :func:`relgrade.ranking.canonical_ranking` returns them) and ``score`` (float). Not
        modified.
    depth : int
        Pool depth: every chunk an arm ranks ``<= depth`` is pooled (params ``pool.depth``).
    tail_sample : int, default 0
        Chunks sampled per query from the tail (params ``pool.tail_sample``); 0 for none.
    tail_depth : int, optional
        Deepest rank the tail is drawn from (params ``pool.tail_depth``); required and
        ``> depth`` when ``tail_sample > 0``.
    rng : numpy.random.Generator, optional
        Source of the tail sample; required when ``tail_sample > 0``.

    Returns
    -------
    pool : pandas.DataFrame of shape (n_pairs, 3)
        ``query_id``, ``chunk_id``, ``inclusion_prob`` (float64 in (0, 1]), one row per
        pooled pair, sorted by (query_id, chunk_id) in code-point order.
    provenance : pandas.DataFrame of shape (n_found, 6)
        Private. ``query_id``, ``chunk_id``, ``arm``, ``rank`` (int64), ``score``
        (float64), ``source`` (``"depth"`` or ``"tail"``): one row per arm that ranked a
        pooled chunk within ``depth`` (source ``depth``) or, for a sampled tail chunk,
        within ``tail_depth`` (source ``tail``). Sorted by (query_id, chunk_id, arm).
    stats : dict
        ``pairs``, ``queries``, ``arms``, ``tail_pairs``, ``size`` (``min``/``mean``/``max``
        pooled chunks per query), ``overlap`` (``{arm_a: {arm_b: mean Jaccard}}`` for every
        pair of arms, ``arm_a < arm_b``), ``found_by_one`` and ``found_by_two`` (share of
        the top-depth pool found by exactly one / two arms) and ``unique`` (``{arm: number
        of pooled pairs only that arm found}``). See Notes.

    Raises
    ------
    InputError
        A column is missing; ``depth``, ``tail_sample`` or ``tail_depth`` is out of range;
        one arm lists the same chunk twice for one query within the pooled ranks.
    ValueError
        ``tail_sample > 0`` without a Generator.

    Notes
    -----
    Tail sampling draws, per query, ``k = tail_sample`` chunks uniformly without
    replacement from the ``n`` candidate chunks (ranked ``depth+1 .. tail_depth`` by at
    least one arm, not already in the top-depth pool): each candidate gets an independent
    ``rng.random()`` key, drawn in (query_id, chunk_id) order, and the ``k`` smallest keys
    per query are kept. Every candidate's inclusion probability is then ``min(k, n) / n``.
    Drawing in id order makes the sample independent of the input's row order.

    Overlap between arms ``a`` and ``b`` is the mean over queries of the Jaccard index
    ``|A ∩ B| / |A ∪ B|`` of their top-depth chunk sets, over the queries where at least
    one of the two returned a chunk. ``found_by_one`` / ``found_by_two`` and ``unique``
    count arms over the top-depth pool only (tail chunks are found below the depth).

    Examples
    --------
    >>> import pandas as pd
    >>> runs = pd.DataFrame({"arm": ["a", "a", "b"], "query_id": ["q", "q", "q"],
    ...                      "chunk_id": ["c1", "c2", "c2"], "rank": [1, 2, 1],
    ...                      "score": [2.0, 1.0, 5.0]})
    >>> pool, prov, stats = build_pool(runs, depth=1)
    >>> pool.chunk_id.tolist(), stats["found_by_one"]
    (['c1', 'c2'], 1.0)
    """
    missing = [c for c in RUNS if c not in runs.columns]
    if missing:
        raise InputError(f"runs table is missing column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, runs.columns)))
    depth, tail_sample, tail_depth = _pool_params(depth, tail_sample, tail_depth, rng)
    deepest = tail_depth if tail_sample > 0 else depth
    rank_all = runs["rank"].to_numpy()
    sub = runs.loc[rank_all <= deepest, RUNS]
    qc, qu = id_codes(sub["query_id"])
    cc, cu = id_codes(sub["chunk_id"])
    ac, au = id_codes(sub["arm"])
    pool, provenance, stats = _pool_codes(
        qc, qu, cc, cu, ac, au, sub["rank"].to_numpy(dtype=np.int64),
        sub["score"].to_numpy(dtype=np.float64), depth=depth, tail_sample=tail_sample,
        tail_depth=tail_depth, rng=rng)
    return pool.to_pandas(), provenance.to_pandas(), stats


def _pool_params(depth, tail_sample, tail_depth, rng) -> tuple[int, int, int | None]:
    """The checked pool params (see :func:`build_pool`'s Raises)."""
    depth = _int_param(depth, "pool.depth", minimum=1)
    tail_sample = _int_param(tail_sample, "pool.tail_sample", minimum=0)
    if tail_sample > 0:
        if tail_depth is None:
            raise InputError("pool.tail_depth is required when pool.tail_sample > 0",
                             item="pool.tail_depth")
        tail_depth = _int_param(tail_depth, "pool.tail_depth", minimum=depth + 1)
        if rng is None:
            raise ValueError("a numpy.random.Generator is required when tail_sample > 0")
    return depth, tail_sample, tail_depth


def _pool_codes(qc, qu, cc, cu, ac, au, rank, score, *, depth, tail_sample, tail_depth,
                rng) -> tuple[pa.Table, pa.Table, dict]:
    """:func:`build_pool` on id codes, as Arrow tables: ``qc``/``cc``/``ac`` (int64, shape (n_rows,)) index
    the byte-ordered distinct ids ``qu``/``cu``/``au`` (pyarrow arrays); ``rank`` (int64,
    canonical) and ``score`` (float64) per row; params already checked. Rows ranked below
    the deepest pooled rank are ignored."""
    pool, provenance, parts = _pool_code_parts(
        qc, qu, cc, cu, ac, au, rank, score, depth=depth, tail_sample=tail_sample,
        tail_depth=tail_depth, rng=rng)
    return pool, provenance, _stats_of([parts], au.to_pylist())


def _pool_code_parts(qc, qu, cc, cu, ac, au, rank, score, *, depth, tail_sample, tail_depth,
                     rng) -> tuple[pa.Table, pa.Table, dict]:
    """:func:`_pool_codes` with the statistics as :func:`_stat_parts`."""
    deepest = tail_depth if tail_sample > 0 else depth
    if rank.size and int(rank.max()) > deepest:
        within = rank <= deepest
        qc, cc, ac, rank, score = qc[within], cc[within], ac[within], rank[within], \
            score[within]
    n_q, n_c, n_a = len(qu), max(len(cu), 1), max(len(au), 1)
    pair = qc * n_c + cc                     # pair key in (query_id, chunk_id) order
    top = rank <= depth

    # One sort of the rows by (pair, arm) serves the duplicate check, the deduplication
    # and the provenance's order.
    key = pair * n_a + ac
    order = np.argsort(key)                  # keys are distinct once the check below passes
    sorted_key = key[order]
    dup = np.flatnonzero(sorted_key[1:] == sorted_key[:-1])
    if dup.size:
        # One arm listing a chunk twice for a query would double its vote in the stats.
        i = order[dup[0] + 1]
        raise InputError("chunk listed twice in one ranked list",
                         item=f"arm {au[int(ac[i])]}, query {qu[int(qc[i])]}, "
                              f"chunk {cu[int(cc[i])]}",
                         fix="Validate and canonically rank the run before pooling")
    top_sorted = order[top[order]]
    depth_keys, depth_counts, pair_idx = _runs_of(pair[top_sorted], index=True)

    # Tail sample: candidates ranked depth+1..tail_depth by any arm, not already pooled.
    tail_keys = np.empty(0, dtype=np.int64)
    tail_prob = np.empty(0, dtype=np.float64)
    if tail_sample > 0:
        cand, _, _ = _runs_of(pair[order[~top[order]]])
        cand = cand[~np.isin(cand, depth_keys, assume_unique=True)]
        cand_q = cand // n_c
        n_per_q = np.bincount(cand_q, minlength=n_q)
        keys = rng.random(cand.size)         # one key per candidate, in (query, chunk) order
        by = np.lexsort((keys, cand_q))      # within each query, by random key
        starts = np.concatenate(([0], np.cumsum(n_per_q)[:-1]))
        pos = np.arange(cand.size) - starts[cand_q[by]]
        tail_keys = np.sort(cand[by[pos < tail_sample]])
        n_tail = n_per_q[tail_keys // n_c]
        tail_prob = np.minimum(tail_sample, n_tail) / n_tail

    all_keys, all_prob = depth_keys, np.ones(depth_keys.size)
    if tail_keys.size:
        all_keys = np.concatenate([depth_keys, tail_keys])
        all_prob = np.concatenate([all_prob, tail_prob])
        merged = np.argsort(all_keys, kind="stable")
        all_keys, all_prob = all_keys[merged], all_prob[merged]
    pool = pa.table({
        "query_id": _ids_at(qu, all_keys // n_c),
        "chunk_id": _ids_at(cu, all_keys % n_c),
        "inclusion_prob": arrow_array(all_prob.astype(np.float64)),
    })

    # Provenance: every arm's row for a pooled pair (top-depth rows, sampled tail rows).
    chosen = top.copy()
    if tail_keys.size:
        chosen |= np.isin(pair, tail_keys)
    rows = order[chosen[order]]
    provenance = pa.table({
        "query_id": _ids_at(qu, qc[rows]),
        "chunk_id": _ids_at(cu, cc[rows]),
        "arm": _ids_at(au, ac[rows]),
        "rank": arrow_array(rank[rows].astype(np.int64)),
        "score": arrow_array(score[rows].astype(np.float64)),
        "source": arrow_strings(["tail", "depth"]).take(
            arrow_array(top[rows].view(np.int8))),
    })

    parts = _stat_parts(pool_keys=all_keys, n_c=n_c, depth_keys=depth_keys,
                        depth_counts=depth_counts, pair_idx=pair_idx,
                        top_arm=ac[top_sorted], top_query=qc[top_sorted], n_a=len(au),
                        n_q=n_q, tail_pairs=int(tail_keys.size))
    return pool, provenance, parts


def _ids_at(uniques: pa.Array, codes: np.ndarray) -> pa.Array:
    """``uniques[codes]`` as a large_string Arrow array (what
    :func:`relgrade.ranking.ids_at` gives, before pandas)."""
    return pc.cast(uniques.take(arrow_array(np.asarray(codes, dtype=np.int64))),
                   pa.large_string())


def _runs_of(sorted_keys: np.ndarray, *, index: bool = False
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Distinct values of a sorted int array, how often each occurs (``np.unique`` without
    its sort) and, with ``index``, the position of each element's value among them."""
    if sorted_keys.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return sorted_keys, empty, (empty if index else None)
    new = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    first = np.flatnonzero(new)
    where = np.cumsum(new) - 1 if index else None
    return sorted_keys[first], np.diff(np.r_[first, sorted_keys.size]), where


def _stat_parts(*, pool_keys, n_c, depth_keys, depth_counts, pair_idx, top_arm, top_query,
                n_a, n_q, tail_pairs) -> dict:
    """What the pool statistics (see :func:`build_pool`) need of one block of queries, on
    integer codes: ``pair_idx[i]`` is the position in ``depth_keys`` of top-depth row ``i``
    found by arm ``top_arm[i]`` for query ``top_query[i]`` (rows in any order).
    :func:`_stats_of` combines the parts of blocks of disjoint queries, in query order."""
    sizes = np.bincount(pool_keys // n_c, minlength=n_q)
    sizes = sizes[sizes > 0]

    # Arms that found each top-depth pair; pairs only one arm found, credited to that arm.
    found_by = depth_counts[pair_idx]
    unique = np.bincount(top_arm[found_by == 1], minlength=n_a)

    # Jaccard of two arms' top-depth sets per query, via a pair-by-arm incidence matrix of
    # the pairs found by two arms or more (no other pair is in an intersection).
    shared = depth_counts >= 2
    shared_pos = np.cumsum(shared) - 1
    rows = found_by >= 2
    incidence = np.zeros((int(shared.sum()), n_a), dtype=bool)
    incidence[shared_pos[pair_idx[rows]], top_arm[rows]] = True
    pair_query = depth_keys[shared] // n_c
    set_size = np.bincount(top_query * n_a + top_arm, minlength=n_q * n_a).reshape(n_q, n_a)
    jaccard = []
    for a, b in combinations(range(n_a), 2):
        inter = np.bincount(pair_query[incidence[:, a] & incidence[:, b]],
                            minlength=n_q).astype(np.float64)
        union = set_size[:, a] + set_size[:, b] - inter
        seen = union > 0
        jaccard.append(inter[seen] / union[seen])
    return {
        "pairs": int(pool_keys.size), "tail_pairs": tail_pairs,
        # the sizes of the queries pooled: how many, their sum (exact), least and most
        "queries": int(sizes.size), "size_sum": int(sizes.sum()),
        "size_min": int(sizes.min()) if sizes.size else None,
        "size_max": int(sizes.max()) if sizes.size else None,
        "jaccard": jaccard,  # per pair of arms, each query's Jaccard (queries in order)
        "depth_pairs": int(depth_keys.size),
        "found_by_one": int(np.count_nonzero(depth_counts == 1)),
        "found_by_two": int(np.count_nonzero(depth_counts == 2)),
        "unique": unique,
    }


def _stats_of(parts: list[dict], arms) -> dict:
    """The pool statistics (see :func:`build_pool`) of blocks of disjoint queries, from
    each block's :func:`_stat_parts` in query order: the same values as of one block of
    them all (means are sums of exact integers over counts, and the Jaccard mean is taken
    over every query's value at once, in the same order)."""
    arms = [str(a) for a in arms]
    n_a = len(arms)
    queries = sum(p["queries"] for p in parts)
    sized = [p for p in parts if p["queries"]]
    n_depth = sum(p["depth_pairs"] for p in parts)
    overlap: dict[str, dict[str, float]] = {}
    for j, (a, b) in enumerate(combinations(range(n_a), 2)):
        values = np.concatenate([p["jaccard"][j] for p in parts])
        value = float(np.mean(values)) if values.size else None
        overlap.setdefault(arms[a], {})[arms[b]] = _round(value)
    unique = np.zeros(n_a, dtype=np.int64)
    for p in parts:
        unique += p["unique"]
    return {
        "pairs": sum(p["pairs"] for p in parts),
        "queries": queries,
        "arms": n_a,
        "tail_pairs": sum(p["tail_pairs"] for p in parts),
        "size": {
            "min": min(p["size_min"] for p in sized) if sized else 0,
            "mean": _round(sum(p["size_sum"] for p in parts) / queries) if queries else 0.0,
            "max": max(p["size_max"] for p in sized) if sized else 0,
        },
        "overlap": overlap,
        "found_by_one": _round(sum(p["found_by_one"] for p in parts) / n_depth)
        if n_depth else 0.0,
        "found_by_two": _round(sum(p["found_by_two"] for p in parts) / n_depth)
        if n_depth else 0.0,
        "unique": {arm: int(u) for arm, u in zip(arms, unique)},
    }


def _round(value):
    return None if value is None else round(value, 6)


def pool_bytes(pool: pd.DataFrame | pa.Table) -> bytes:
    """The pool's canonical JSON Lines bytes, from which its version is hashed.

    Parameters
    ----------
    pool : pandas.DataFrame or pyarrow.Table
        Columns ``query_id`` and ``chunk_id`` (other columns are ignored).

    Returns
    -------
    bytes
        One line ``{"query_id":"...","chunk_id":"..."}`` per pair, sorted by (query_id,
        chunk_id) in code-point order, written as :func:`relgrade.canonical.jsonl_bytes` writes
        them (no spaces, non-ASCII as UTF-8), each ending in LF.
    """
    if len(pool) == 0:
        return b""
    q = arrow_ids(pool["query_id"]).combine_chunks()
    c = arrow_ids(pool["chunk_id"]).combine_chunks()
    if not _is_sorted(q, c):                 # a pool from build_pool is sorted already
        order = arrow_array(np.lexsort((id_codes(c)[0], id_codes(q)[0])).astype(np.int64))
        q, c = q.take(order), c.take(order)
    if not (_needs_escape(q) or _needs_escape(c)):
        # the usual ids: each line is one element-wise join, quotes included
        lines = _join('{"query_id":"', q, '","chunk_id":"', c, '"}\n')
    else:
        lines = _join('{"query_id":', _json_strings(q), ',"chunk_id":', _json_strings(c),
                      "}\n")
    return _concatenated(lines)


def _needs_escape(values: pa.Array) -> bool:
    """Whether a string holds a byte JSON escapes: '"', '\\' or a control character (in
    UTF-8 these bytes never occur inside another character)."""
    values = pc.cast(values, pa.large_string())
    if len(values) == 0 or values.buffers()[2] is None:
        return False
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        values.offset: values.offset + len(values) + 1]
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)[offsets[0]: offsets[-1]]
    return bool(((data < 0x20) | (data == 0x22) | (data == 0x5C)).any())


def _is_sorted(q: pa.Array, c: pa.Array) -> bool:
    """Whether the pairs (q[i], c[i]) are strictly increasing (UTF-8 byte order)."""
    n = len(q)
    if n < 2:
        return True
    qa, qb, ca, cb = q.slice(0, n - 1), q.slice(1), c.slice(0, n - 1), c.slice(1)
    ok = pc.or_(pc.less(qa, qb), pc.and_(pc.equal(qa, qb), pc.less(ca, cb)))
    return bool(pc.all(ok).as_py())


def _join(*parts) -> pa.Array:
    """Element-wise concatenation of Arrow string arrays and Python string constants."""
    # constants as scalars taken from an array: pa.scalar would import pandas (arrow_array)
    args = [arrow_strings([p])[0] if isinstance(p, str)
            else pc.cast(p, pa.large_string()) for p in parts]
    return pc.binary_join_element_wise(*args, arrow_strings([""])[0])


# What json.dumps escapes when ensure_ascii=False: '"', '\\' and control characters.
_NEEDS_ESCAPE = r'["\\\x00-\x1f]'


def _json_strings(values: pa.Array) -> pa.Array:
    """Each string as a JSON string literal, exactly as :func:`relgrade.canonical.canonical_json`
    writes it: quoted, and only ids that hold a quote, backslash or control character go
    through ``json.dumps``."""
    quoted = _join('"', values, '"')
    special = np.flatnonzero(pc.match_substring_regex(values, _NEEDS_ESCAPE).to_numpy(
        zero_copy_only=False))
    if special.size == 0:
        return quoted
    fixed = quoted.to_pylist()
    for i in special.tolist():
        fixed[i] = canonical_json(fixed[i][1:-1])
    return pa.array(fixed, type=quoted.type)


def _concatenated(strings: pa.Array) -> bytes:
    """The bytes of every string of an Arrow string array, end to end."""
    strings = pc.cast(strings, pa.large_string())
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[
        strings.offset:strings.offset + len(strings) + 1]
    data = strings.buffers()[2]
    return data.to_pybytes()[int(offsets[0]):int(offsets[-1])]


def pool_version(pool: pd.DataFrame | pa.Table) -> str:
    """The pool's version: ``"p-"`` + the first 12 hex digits of sha256(:func:`pool_bytes`).

    Two pools with the same pairs have the same version, whatever their row order or
    inclusion probabilities; absolute metric values are comparable only within one version.

    Examples
    --------
    >>> import pandas as pd
    >>> pool_version(pd.DataFrame({"query_id": ["q"], "chunk_id": ["c"]}))[:2]
    'p-'
    """
    return "p-" + sha256_bytes(pool_bytes(pool))[:12]


def pool_manifest(pool: pd.DataFrame | pa.Table, *, seed: int, depth: int, tail_sample: int,
                  tail_depth: int | None, arms) -> dict:
    """The pool manifest (params ``paths.pool_manifest``).

    ``pool`` is the pool table (pandas or Arrow, columns ``query_id`` and ``chunk_id``);
    the other arguments are the pool params and the arms pooled.

    Returns
    -------
    dict
        ``{"pool_version", "seed", "depth", "tail_sample", "tail_depth", "pairs",
        "queries", "arms"}``; ``arms`` is the sorted list of arm names pooled.
    """
    return _manifest(pool_version(pool), pairs=int(len(pool)),
                     queries=int(pc.count_distinct(arrow_ids(pool["query_id"])).as_py()),
                     seed=seed, depth=depth, tail_sample=tail_sample,
                     tail_depth=tail_depth, arms=arms)


def _manifest(version: str, *, pairs: int, queries: int, seed, depth, tail_sample,
              tail_depth, arms) -> dict:
    """The manifest's dict (:func:`pool_manifest`), its keys in their order."""
    return {
        "pool_version": version,
        "seed": int(seed),
        "depth": int(depth),
        "tail_sample": int(tail_sample),
        "tail_depth": None if tail_depth is None else int(tail_depth),
        "pairs": int(pairs),
        "queries": int(queries),
        "arms": sorted(str(a) for a in arms),
    }
