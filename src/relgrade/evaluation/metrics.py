"""Per-query and mean evaluation measures of a run against qrels (the frozen key).

Every value is computed with numpy over the run's canonical ranking
(:func:`relgrade.ranking.canonical_order`): query ids become integer codes through one Arrow
hash lookup, only the rows some measure reads (the top max-cutoff of each list) look up
their grade (one hash lookup of "query, chunk" keys in the qrels), and per-query sums are
``numpy.bincount`` calls. No Python loop runs per query or per row. Uncut RR reads that
top too; only the queries whose top holds nothing relevant look further, without a sort: the
first relevant chunk's rank is 1 + the rows ahead of it in canonical order.

The rules, each pinned by a test:

* the ideal DCG comes from every graded chunk of the query in the qrels, retrieved or not;
* a chunk without a grade has gain 0 and is not relevant (it counts against Judged@k);
* a query in the qrels that the run does not answer scores 0 (``on_missing_query="zero"``,
  the protocol's rule) or is left out (``"skip"``, trec_eval's behaviour);
* a query in the run but not in the qrels is ignored;
* a query with nothing relevant in the qrels is undefined for nDCG, R, RR and P: it has no
  row in the per-query table, so it never enters a mean, and :func:`excluded_queries` lists
  it;
* a cutoff cuts: RR@10 is 0 when the first relevant chunk is at rank 11.

Runs and qrels may be pandas DataFrames or pyarrow Tables; :func:`per_query_table` and
:func:`measure_means` keep the whole computation on numpy and Arrow columns, so a process
that reads its inputs into Arrow (``relgrade evaluate``) never imports pandas (0.26 CPU-s
and some 40 MiB). pandas is imported where a DataFrame is built for a caller.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.errors import InputError
from relgrade.evaluation.measures import SPECS, Measure, parse_measure
from relgrade.ranking import (
    ID_SEPARATOR,
    TIES,
    RunCodes,
    arrow_array,
    arrow_ids,
    arrow_strings,
    canonical_order,
    check_codes,
    codes_in,
    column_names,
    float_values,
    holds_separator,
    numpy_values,
    pair_hashes,
    pair_hashes_of,
    pair_keys,
    ranks_in_sorted,
)
from relgrade.schema import QRELS, RUN

if TYPE_CHECKING:
    import pandas as pd

ON_MISSING = ("zero", "skip")
#: Bits in uncut RR's prefilter of pair hashes (a power of two; 1 MiB of bools).
_BIT_TABLE = 1 << 20
#: How deep uncut RR looks before ranking whole lists when no cut measure sets the depth.
DEEP_RR_DEPTH = 10
NO_RELEVANT = ("exclude", "zero")


# --- 64-bit hashes, looked up ----------------------------------------------------------

class _HashIndex:
    """Positions of uint64 hashes, found through their sorted copy.

    The hashes are spread evenly over 64 bits (:func:`relgrade.ranking.pair_hashes`), so
    their top bits tell, within a few rows, where a value sits in the sorted copy: a
    lookup reads one bucket (the sorted rows whose top bits are the value's) instead of
    searching the whole copy. What ``pandas.Index(values).get_indexer`` gives, without
    pandas.
    """

    def __init__(self, values: np.ndarray):
        values = np.asarray(values, dtype=np.uint64)
        # equal hashes are asked for only when they are unique (get_indexer) or only
        # whether present (holds): their order among themselves does not matter
        self.order = np.argsort(values)
        self.sorted = values[self.order]
        n = len(values)
        self.is_unique = not bool((self.sorted[1:] == self.sorted[:-1]).any())
        bits = max(int(2 * n).bit_length(), 1)  # at least 2 buckets per value
        self.shift = np.uint64(64 - bits)
        # bucket b holds the sorted rows start[b] .. start[b + 1] - 1
        self.start = np.zeros((1 << bits) + 1, dtype=np.int64)
        np.cumsum(np.bincount((self.sorted >> self.shift).astype(np.intp),
                              minlength=1 << bits), out=self.start[1:])

    def get_indexer(self, values: np.ndarray) -> np.ndarray:
        """The position of each value among the hashes, -1 when absent (intp, shape of
        ``values``; for hashes that are not unique, the position of one of the equal
        ones)."""
        values = np.asarray(values, dtype=np.uint64)
        out = np.full(len(values), -1, dtype=np.intp)
        bucket = (values >> self.shift).astype(np.intp)
        pos, end = self.start[bucket], self.start[bucket + 1]
        live = np.flatnonzero(pos < end)
        pos, end = pos[live], end[live]
        while len(live):
            hit = self.sorted[pos] == values[live]
            out[live[hit]] = self.order[pos[hit]]
            more = ~hit & (pos + 1 < end)
            live, pos, end = live[more], pos[more] + 1, end[more]
        return out

    def holds(self, values: np.ndarray) -> np.ndarray:
        """Whether each value is one of the hashes (bool, shape of ``values``)."""
        return self.get_indexer(values) >= 0


def _first_repeat(codes: np.ndarray) -> int | None:
    """The first row (in row order) whose code an earlier row holds, or None."""
    order = np.argsort(codes, kind="stable")
    later = np.flatnonzero(codes[order][1:] == codes[order][:-1])
    return int(order[later + 1].min()) if len(later) else None


# --- the qrels, indexed once ---------------------------------------------------------

@dataclass(frozen=True, eq=False)
class KeyIndex:
    """Qrels prepared for scoring: query codes in byte order, pair keys, grades.

    Build it with :func:`index_qrels` and pass it as ``qrels=`` to :func:`per_query` to
    score many runs against one key without indexing the key again.
    """

    query_ids: pa.ChunkedArray  # distinct query ids, sorted; position = query code
    q: np.ndarray               # query code of each qrels row, int64
    grade: np.ndarray           # grade of each qrels row, int64
    pairs: pa.ChunkedArray      # "query\x1fchunk" of each qrels row
    chunk_ids: pa.ChunkedArray  # chunk id of each qrels row
    pair_hash: np.ndarray       # ranking.pair_hashes(q, chunk_ids), uint64
    ideal_q: np.ndarray         # query codes of the rows sorted by (query, grade desc)
    ideal_pos: np.ndarray       # 1-based position of each of those rows within its query
    ideal_grade: np.ndarray     # their grades
    memo: dict = field(default_factory=dict, repr=False)  # per-key sums, computed once

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def num_relevant(self, rel: int) -> np.ndarray:
        """Per query code: how many graded chunks have grade >= rel (float64)."""
        if ("nrel", rel) not in self.memo:
            self.memo[("nrel", rel)] = np.bincount(self.q, weights=self.grade >= rel,
                                                   minlength=self.n_queries)
        return self.memo[("nrel", rel)]

    def num_nonrelevant(self, rel: int) -> np.ndarray:
        """Per query code: how many chunks are judged non-relevant, 0 <= grade < rel (float64)."""
        if ("nnonrel", rel) not in self.memo:
            self.memo[("nnonrel", rel)] = np.bincount(
                self.q, weights=(self.grade >= 0) & (self.grade < rel), minlength=self.n_queries)
        return self.memo[("nnonrel", rel)]

    def pair_lookup(self) -> _HashIndex | None:
        """The qrels rows' pair hashes indexed for lookup (built once per key), or None when
        two rows' pairs hash alike."""
        if "pairs" not in self.memo:
            index = _HashIndex(self.pair_hash)
            self.memo["pairs"] = index if index.is_unique else None
        return self.memo["pairs"]

    def max_grade(self) -> np.ndarray:
        """Per query code: its highest grade in the qrels, at least 0 (float64)."""
        if "maxgrade" not in self.memo:
            top = np.zeros(self.n_queries)
            np.maximum.at(top, self.q, np.maximum(self.grade, 0).astype(np.float64))
            self.memo["maxgrade"] = top
        return self.memo["maxgrade"]

    def ideal_dcg(self, cutoff: int | None, dcg: str, gains=None) -> np.ndarray:
        """Per query code: DCG of all its graded chunks sorted by gain, cut at ``cutoff``."""
        if ("idcg", cutoff, dcg, gains) in self.memo:
            return self.memo[("idcg", cutoff, dcg, gains)]
        if gains is None:
            gain, q, ideal_pos = _gain(self.ideal_grade, dcg), self.ideal_q, self.ideal_pos
        else:  # an explicit gain map need not grow with the grade: sort by gain
            gain = _gain(self.grade, dcg, gains)
            order = np.lexsort((-gain, self.q))
            gain, q = gain[order], self.q[order]
            ideal_pos = ranks_in_sorted(q)
        if cutoff is not None:
            gain = np.where(ideal_pos <= cutoff, gain, 0.0)
        ideal = np.bincount(q, weights=np.maximum(gain, 0.0) / np.log2(ideal_pos + 1.0),
                            minlength=self.n_queries)
        self.memo[("idcg", cutoff, dcg, gains)] = ideal
        return ideal


def index_qrels(qrels, *, pairs_checked: bool = False) -> KeyIndex:
    """Check qrels and index them for :func:`per_query`.

    Parameters
    ----------
    qrels : pandas.DataFrame, pyarrow.Table or KeyIndex
        Columns ``query_id``, ``chunk_id``, ``grade`` (integer), shape (n_pairs, 3). A
        KeyIndex is returned as it is.
    pairs_checked : bool, default False
        The caller has refused a pair graded twice already (qrels from
        :func:`relgrade.io.judgments.read_judgments`, which names both lines), so the pairs
        are not coded and counted again. The index is the same.

    Returns
    -------
    KeyIndex

    Raises
    ------
    InputError
        A column is missing, a grade is not an integer, an id is missing or holds the
        unit-separator character U+001F, or one (query, chunk) pair is graded twice (naming
        the query and the chunk; not looked for with ``pairs_checked``).
    """
    if isinstance(qrels, KeyIndex):
        return qrels
    names = column_names(qrels)
    missing = [c for c in QRELS if c not in names]
    if missing:
        raise InputError("qrels need the columns query_id, chunk_id, grade",
                         found="no " + ", ".join(missing))
    if isinstance(qrels, pa.Table) and pa.types.is_integer(qrels["grade"].type) and \
            not qrels["grade"].null_count:
        grade = numpy_values(qrels["grade"]).astype(np.int64)
    else:
        if isinstance(qrels, pa.Table):
            qrels = qrels.select(QRELS).to_pandas()  # the check below words the error
        grade = _integer_grades(qrels)
    qids = _checked_ids(qrels["query_id"], "query_id")
    cids = _checked_ids(qrels["chunk_id"], "chunk_id")
    query_ids = pc.unique(qids)
    query_ids = query_ids.take(pc.array_sort_indices(query_ids))
    q = codes_in(qids, pa.chunked_array([query_ids]))
    if not pairs_checked:
        _check_pairs_once(q, qids, cids)
    pairs = pair_keys(qids, cids)
    ideal = np.lexsort((-grade, q))
    return KeyIndex(query_ids=pa.chunked_array([query_ids]), q=q, grade=grade, pairs=pairs,
                    chunk_ids=cids, pair_hash=pair_hashes(q, cids),
                    ideal_q=q[ideal], ideal_pos=ranks_in_sorted(q[ideal]),
                    ideal_grade=grade[ideal])


def _integer_grades(qrels: pd.DataFrame) -> np.ndarray:
    """A DataFrame's grade column as int64; InputError naming the first pair whose grade is
    not an integer."""
    import pandas as pd

    grade = pd.to_numeric(qrels["grade"], errors="coerce")
    bad = (grade.isna() | (grade != np.round(grade))).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("a grade must be an integer",
                         item=f"query {qrels['query_id'].iat[row]}, "
                              f"chunk {qrels['chunk_id'].iat[row]}",
                         found=repr(qrels["grade"].iat[row]))
    return grade.to_numpy().astype(np.int64)


def _check_pairs_once(q: np.ndarray, qids: pa.ChunkedArray, cids: pa.ChunkedArray) -> None:
    """Raise InputError naming the first (query, chunk) pair graded twice, if any."""
    # one int64 code per (query, chunk): sorted, equal neighbours are a pair graded twice
    chunk_codes = pc.dictionary_encode(cids.combine_chunks())
    pair_code = q.astype(np.int64) * max(len(chunk_codes.dictionary), 1) + \
        numpy_values(chunk_codes.indices)
    row = _first_repeat(pair_code)
    if row is not None:
        raise InputError("one (query, chunk) pair is graded twice in the qrels",
                         item=f"query {qids[row].as_py()}, chunk {cids[row].as_py()}",
                         fix="Keep one grade per pair")


def _checked_ids(values, name: str, *, separator: bool = True) -> pa.ChunkedArray:
    arr = arrow_ids(values)
    if arr.null_count:
        raise InputError(f"{name} is missing in a row")
    if separator and holds_separator(arr):
        raise InputError(f"{name} holds the control character U+001F")
    return arr


def _gain(grade: np.ndarray, dcg: str, gains=None) -> np.ndarray:
    """Gain of each grade: the grade or 2^grade - 1, an explicit map first; negative grades 0."""
    g = np.maximum(grade, 0).astype(np.float64)
    g = np.exp2(g) - 1.0 if dcg == "exp-log2" else g
    for level, value in gains or ():
        g[grade == level] = value
    return g


@dataclass(frozen=True, eq=False)
class Inclusion:
    """Each qrels row's place in a sampled pool: :func:`inclusion_at` builds it.

    Arrays of shape (n_qrels_rows,), aligned with the KeyIndex's rows; rows graded below 0
    (pooled, not judged) hold NaN, -1 and NaN.
    """

    prob: np.ndarray     # inclusion probability pi, float64
    stratum: np.ndarray  # stratum code, int64 (one code per query and stratum)
    same: np.ndarray     # 1 / pi of another judged chunk of the same stratum, given this one
    #                      was drawn: (k/pi - 1) / (k - 1), k the stratum's judged chunks


def _score_run(key: KeyIndex, run, measures: list[Measure], on_missing: str,
               ties: str, no_relevant: str = "exclude", incl: Inclusion | None = None,
               codes: RunCodes | None = None):
    """Per measure: (values, counted) arrays over the key's queries.

    ``incl``: the qrels rows' inclusion probabilities (:func:`inclusion_at`), for the
    inferred measures. ``codes``: :func:`relgrade.ranking.run_codes` of the run, whose
    query codes and chunk hashes the qrels join reuses.
    """
    names = column_names(run)
    missing = [c for c in RUN if c not in names]
    if missing:
        raise InputError("a run needs the columns query_id, chunk_id, rank, score",
                         found="no " + ", ".join(missing))
    run_qids = _checked_ids(run["query_id"], "query_id", separator=False)
    chunk_ids = _checked_ids(run["chunk_id"], "chunk_id", separator=False)
    if chunk_ids.num_chunks > 1:
        # one contiguous array: each later take of a few rows would otherwise concatenate
        # every chunk again (Arrow's take on a chunked array)
        chunk_ids = pa.chunked_array([chunk_ids.combine_chunks()])
    if codes is not None:
        # each distinct query id is looked up once, not each row's
        rq = codes_in(pa.chunked_array([codes.queries]), key.query_ids)[codes.query]
        chunk_hash = codes.chunk_hash
    else:
        rq = codes_in(run_qids, key.query_ids)
        chunk_hash = None
    score = float_values(run["score"])
    rank = None
    if ties == "rank":
        rank = numpy_values(run["rank"]) if isinstance(run, pa.Table) else \
            run["rank"].to_numpy()
    keep = rq >= 0  # queries outside the qrels are ignored
    if not keep.all():
        rows = np.flatnonzero(keep)
        rq, score = rq[rows], score[rows]
        chunk_ids = chunk_ids.take(arrow_array(rows))
        run_qids = run_qids.take(arrow_array(rows))
        rank = rank[rows] if rank is not None else None
        chunk_hash = chunk_hash[rows] if chunk_hash is not None else None
    bad = ~np.isfinite(score)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("score must be a finite number",
                         item=f"query {run_qids[row]}, chunk {chunk_ids[row]}",
                         found=repr(float(score[row])))

    # uncut RR needs a deeper look only where the top `depth` holds nothing relevant: it
    # reads the top rows like a cut measure, and _deep_rr ranks the other queries' lists
    depth, deep = _reads(measures)
    cut = lists = None
    if depth is not None:
        # only rows that can reach the top `depth` of their list are ranked: a prefix of the
        # canonical order, ties at the cut included, so their ranks are the full run's
        cut, lists = _top_rows(rq, score if ties == "score" else rank, depth, ties)
    if lists is not None:  # one block per list: its length is the list's
        starts, lengths = lists
        n_ret = np.zeros(key.n_queries, dtype=np.int64)
        n_ret[rq[starts]] = lengths
    else:
        n_ret = np.bincount(rq, minlength=key.n_queries)
    full = (rq, score, rank, chunk_ids, run_qids, chunk_hash, lists) if deep else None
    # the query ids are read only to name a chunk listed twice: taken when that happens
    qid_rows = cut
    if cut is not None:
        rq, score = rq[cut], score[cut]
        rank = rank[cut] if rank is not None else None
        chunk_ids = chunk_ids.take(arrow_array(cut))
        chunk_hash = chunk_hash[cut] if chunk_hash is not None else None
    order = canonical_order(rq, score, chunk_ids, rank=rank, ties=ties, depth=depth)
    qs = rq[order]
    pos = ranks_in_sorted(qs)
    # only the rows some measure reads: the top max-cutoff of each list
    if len(pos) and depth is not None and depth < pos.max():
        top = np.flatnonzero(pos <= depth)
        order, qs, pos = order[top], qs[top], pos[top]
    at = _key_rows(key, qs, order, chunk_ids, run_qids,
                   chunk_hash[order] if chunk_hash is not None else None,
                   qid_order=qid_rows[order] if qid_rows is not None else None,
                   distinct=codes is not None and codes.distinct)
    del chunk_ids, run_qids, rq, score, rank, chunk_hash
    hit = np.flatnonzero(at >= 0)
    judged = np.zeros(len(pos), dtype=bool)
    judged[at[hit]] = True
    grade = np.zeros(len(pos), dtype=key.grade.dtype)
    grade[at[hit]] = key.grade[hit]
    sampled = None
    if incl is not None:  # the ranked rows' place in the sample: (pi, stratum, same)
        sampled = (np.ones(len(pos)), np.full(len(pos), -1, dtype=np.int64),
                   np.ones(len(pos)))
        for mine, theirs in zip(sampled, (incl.prob, incl.stratum, incl.same)):
            mine[at[hit]] = theirs[hit]
    del at, hit

    rows = _Rows(key=key, qs=qs, pos=pos, grade=grade, judged=judged, n_ret=n_ret,
                 sampled=sampled, incl=incl)
    return _values(rows, measures, on_missing, no_relevant,
                   {m: functools.partial(_deep_rr, rows, m, depth, full, ties) for m in deep})


def _values(rows: _Rows, measures: list[Measure], on_missing: str, no_relevant: str,
            special: dict | None = None) -> dict:
    """Per measure: (values, counted) arrays over the key's queries, from ranked rows.

    ``special``: measure -> a callable computing its values another way (uncut RR's
    deeper look).
    """
    key = rows.key
    answered = rows.n_ret > 0
    out = {}
    for m in measures:
        if special and m in special:
            value = special[m]()
        else:
            value = _COMPUTE[m.name](rows, m)
        if m.needs_relevant and no_relevant == "exclude":
            defined = key.num_relevant(m.level) > 0
        else:
            defined = np.ones(key.n_queries, dtype=bool)
        counted = defined & answered if on_missing == "skip" else defined
        out[str(m)] = (value, counted)
    return out


def _reads(measures: list[Measure]) -> tuple[int | None, list[Measure]]:
    """How deep the measures read each ranked list (None: whole lists), and the uncut RR
    measures that look past that depth only where it holds nothing relevant."""
    deep = [m for m in measures if m.name == "RR" and m.cutoff is None]
    depths = [_depth(m) for m in measures if not (m.name == "RR" and m.cutoff is None)]
    depth = None if None in depths else max(depths, default=DEEP_RR_DEPTH)
    return depth, (deep if depth is not None else [])


def _key_rows(key: KeyIndex, qs: np.ndarray, order: np.ndarray, chunk_ids: pa.ChunkedArray,
              run_qids: pa.ChunkedArray, chunk_hash: np.ndarray | None = None, *,
              qid_order: np.ndarray | None = None, distinct: bool = False) -> np.ndarray:
    """For each qrels row, the ranked row of the same (query, chunk), -1 when none.

    ``order`` picks the ranked rows (in canonical order, query codes ``qs``) out of the
    run's ``chunk_ids`` and ``run_qids``; ``qid_order``, when given, picks the same rows
    out of ``run_qids`` instead (the query ids of a run whose chunk ids were cut to its top
    rows). ``chunk_hash``, when given, holds those rows' chunk id hashes. ``distinct``:
    the run's pairs are proven distinct (:attr:`relgrade.ranking.RunCodes.distinct`), so
    the ranked rows are looked up among the qrels' pairs rather than the other way round.
    Raises InputError when a chunk is listed twice for one query among those rows.
    """
    rows = arrow_array(order)
    top_chunks = _checked_ids(chunk_ids.take(rows), "chunk_id")  # no U+001F in a pair key
    at = _grade_rows(key, qs, top_chunks, chunk_hash, distinct=distinct)
    if at is None:  # two ranked pairs hash alike: look the pairs up as text
        top_pairs = pair_keys(run_qids.take(rows if qid_order is None else
                                            arrow_array(qid_order)), top_chunks)
        # a ranked pair seen twice is a chunk listed twice for one query
        encoded = pc.dictionary_encode(top_pairs.combine_chunks())
        if len(encoded.dictionary) < len(encoded):
            _check_no_duplicates(numpy_values(encoded.indices), encoded.dictionary)
        del encoded
        # the ranked pairs are distinct and so are the key's: look each key pair up among
        # the ranked ones (hashing the shorter side), and give its grade to the row it names
        at = codes_in(key.pairs, top_pairs)
    return at


def _deep_rr(r: _Rows, m: Measure, depth: int, full: tuple, ties: str) -> np.ndarray:
    """Uncut RR when ``r`` holds only the top ``depth`` rows of each list.

    A query whose top ``depth`` holds a relevant chunk has its RR there (:func:`_rr`). Only
    the other queries that retrieved more than ``depth`` chunks and have something relevant
    in the qrels look deeper, and no list is sorted: their rows whose chunk id is one of
    those queries' relevant chunks are matched to the qrels by pair hash (each match then
    compared as text; as text only when two qrels pairs hash alike), the best of them in
    canonical order is the
    first relevant one, and its rank is 1 + the rows of its list that come before it in
    canonical order (a higher score, or an equal score and a chunk id greater as bytes;
    with ``ties="rank"`` the rank column first). ``full``: the run's (query codes, scores,
    ranks or None, chunk ids, query ids, chunk hashes or None, the lists' blocks or None:
    :func:`_top_rows`), every row of the key's queries. The values equal
    :func:`_rr` over the whole ranked run.
    """
    value = _rr(r, m)
    rq, score, rank, chunk_ids, run_qids, chunk_hash, lists = full
    key = r.key
    need = (value == 0) & (r.n_ret > depth) & (key.num_relevant(m.rel) > 0)
    if not need.any():
        return value
    if lists is not None:  # each list one block: its rows are index arithmetic
        starts, lengths = lists
        needed = np.flatnonzero(need[rq[starts]])
        sub = _ranges(starts[needed], lengths[needed])
        del needed
    else:
        sub = np.flatnonzero(need[rq])
    wanted = np.flatnonzero(need[key.q] & (key.grade >= m.rel))  # qrels rows
    table = _HashIndex(key.pair_hash[wanted])
    if chunk_hash is not None:
        # the run's chunk ids are hashed already: every row of those lists is a candidate;
        # a bit table of the wanted pairs' low hash bits drops nearly all of them before
        # the hash table is asked
        hashes = pair_hashes_of(rq[sub], chunk_hash[sub])
        bits = np.zeros(_BIT_TABLE, dtype=bool)
        bits[key.pair_hash[wanted] & np.uint64(_BIT_TABLE - 1)] = True
        kept = np.flatnonzero(bits[hashes & np.uint64(_BIT_TABLE - 1)])
        maybe, hashes = sub[kept], hashes[kept]
        del bits, kept
    else:
        # a row can be relevant only when its chunk id is one of those queries' relevant
        # chunks
        maybe = numpy_values(pc.is_in(
            chunk_ids, value_set=pc.unique(key.chunk_ids.take(arrow_array(wanted)))))
        maybe = np.flatnonzero(maybe & need[rq])
        hashes = pair_hashes(rq[maybe], chunk_ids.take(arrow_array(maybe)))
    if table.is_unique:
        at = table.get_indexer(hashes)
        cand = np.flatnonzero(at >= 0)
        at, cand = wanted[at[cand]], maybe[cand]
        # a hash match is the pair only when the text says so
        same = (key.q[at] == rq[cand]) & numpy_values(pc.equal(
            key.chunk_ids.take(arrow_array(at)), chunk_ids.take(arrow_array(cand))))
        cand = cand[same]
    else:  # two qrels pairs hash alike: match the pairs as text
        cand = maybe[table.holds(hashes)]
        at = codes_in(pair_keys(run_qids.take(arrow_array(cand)),
                                chunk_ids.take(arrow_array(cand))), key.pairs)
        cand = cand[(at >= 0) & (key.grade[np.maximum(at, 0)] >= m.rel)]
    del maybe, table, hashes
    if not len(cand):
        return value
    cand_chunks = chunk_ids.take(arrow_array(cand))
    order = canonical_order(rq[cand], score[cand], cand_chunks,
                            rank=rank[cand] if rank is not None else None, ties=ties)
    cq = rq[cand][order]
    first = np.r_[True, cq[1:] != cq[:-1]]
    best = cand[order[first]]                 # each query's first relevant row
    if lists is not None:
        # the blocks of the lists that hold a relevant chunk, in file order, and the rows
        # of each: index arithmetic
        starts, lengths = lists
        block = np.searchsorted(starts, best, side="right") - 1
        by_row = np.argsort(block)
        sub = _ranges(starts[block[by_row]], lengths[block[by_row]])
        b = np.repeat(by_row, lengths[block[by_row]])
        del block, by_row
    else:
        slot = np.full(key.n_queries, -1, dtype=np.int64)
        slot[rq[best]] = np.arange(len(best))
        b = slot[rq[sub]]
        holds = b >= 0
        sub, b = sub[holds], b[holds]         # the lists that hold a relevant chunk
        del holds
    s, bs = score[sub], score[best][b]
    if ties == "rank":
        k, bk = rank[sub], rank[best][b]
        before = (k < bk) | ((k == bk) & (s > bs))
        tied = (k == bk) & (s == bs)
    else:
        before = s > bs
        tied = s == bs
    tied_rows = np.flatnonzero(tied)
    # equal keys: a chunk id greater as bytes comes first (trec_eval's strcmp, descending)
    greater = numpy_values(pc.greater(chunk_ids.take(arrow_array(sub[tied_rows])),
                                      chunk_ids.take(arrow_array(best[b[tied_rows]]))))
    before[tied_rows[greater]] = True
    ahead = np.bincount(rq[sub[before]], minlength=key.n_queries)
    value[rq[best]] = 1.0 / (ahead[rq[best]] + 1)
    return value


def _grade_rows(key: KeyIndex, qs: np.ndarray, chunks: pa.ChunkedArray,
                chunk_hash: np.ndarray | None = None, *,
                distinct: bool = False) -> np.ndarray | None:
    """For each qrels row, the ranked row of the same (query, chunk), -1 when none.

    The join runs on 64-bit pair hashes (no per-row string is built; ``chunk_hash``: the
    chunks' text hashes, when made already); every matched pair is then compared as text.
    None when two ranked rows hash alike (with ``distinct``: alike and like a qrels pair)
    or a match is false: the caller then joins on the text itself (and finds any chunk
    listed twice). ``distinct``: the ranked pairs are known to be distinct, so no index of
    them is built: each is looked up in the key's own (:meth:`KeyIndex.pair_lookup`), one
    index for every run scored against the key; the result is the same.
    """
    hashes = pair_hashes(qs, chunks) if chunk_hash is None else pair_hashes_of(qs, chunk_hash)
    lookup = key.pair_lookup() if distinct else None
    if lookup is not None:
        # each ranked row's qrels row; a qrels row named by two ranked rows means two
        # ranked pairs hash alike
        of_row = lookup.get_indexer(hashes)
        named = np.flatnonzero(of_row >= 0)
        at = np.full(len(key.pair_hash), -1, dtype=np.intp)
        at[of_row[named]] = named
        if (at[of_row[named]] != named).any():
            return None
    else:
        ranked = _HashIndex(hashes)
        if not ranked.is_unique:
            return None
        at = ranked.get_indexer(key.pair_hash)
    hit = np.flatnonzero(at >= 0)
    rows = arrow_array(at[hit].astype(np.int64))
    same = (key.q[hit] == qs[at[hit]]) & numpy_values(pc.equal(
        key.chunk_ids.take(arrow_array(hit)), chunks.take(rows)))
    if not same.all():
        return None
    return at


def _top_rows(group: np.ndarray, sort_key: np.ndarray, depth: int,
              ties: str) -> tuple[np.ndarray | None, tuple | None]:
    """Rows that can reach the top ``depth`` of their ranked list (None: keep all), and the
    lists' blocks ((first row, length) int64 arrays, one per list; None when the lists are
    not one ordered block each).

    ``sort_key`` is the score (higher first, ``ties="score"``) or the rank (lower first).
    When every list is one contiguous block already ordered by that key (as run files are
    written), the rows kept are each list's first ``depth`` and those after them that tie
    with the ``depth``-th: exactly a prefix of the canonical order, so ranking them gives
    every row the rank it has in the whole run, down to ``depth``. Otherwise None.
    """
    n = len(group)
    if n == 0:
        return None, None
    same = group[1:] == group[:-1]
    if ties == "score":
        ordered = sort_key[1:] <= sort_key[:-1]
    else:
        ordered = sort_key[1:] >= sort_key[:-1]
    ordered |= ~same
    if not ordered.all():
        return None, None
    del ordered
    starts = np.flatnonzero(np.r_[True, ~same])
    lengths = np.diff(np.r_[starts, n])
    if len(np.unique(group[starts])) != len(starts):
        return None, None  # a list is split over several blocks
    if lengths.max() <= depth:
        return None, (starts, lengths)  # nothing to cut
    # each list keeps its first `depth` rows and, when its depth-th row ties with the next
    # one, the rest of that run of equal keys: index arithmetic on the blocks, not a pass
    # over every row (a row-wise pass runs only when some list ties at its cut)
    kept = np.minimum(lengths, depth)
    long_enough = np.flatnonzero(lengths > depth)
    cut = starts[long_enough] + (depth - 1)  # each long list's depth-th row
    tied = sort_key[cut + 1] == sort_key[cut]
    if tied.any():
        # the rows below the cut of a list that ties there: those equal to its depth-th
        # row's key are a prefix of them (the list is ordered), so they are counted
        at = long_enough[tied]
        below = lengths[at] - depth
        rows = _ranges(cut[tied] + 1, below)
        equal = sort_key[rows] == np.repeat(sort_key[cut[tied]], below)
        kept[at] += np.bincount(np.repeat(np.arange(len(at)), below)[equal],
                                minlength=len(at))
        del rows, equal
    return _ranges(starts, kept), (starts, lengths)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The rows of blocks: ``starts[i] .. starts[i] + lengths[i] - 1`` for each i, in turn
    (int64, shape (lengths.sum(),))."""
    offset = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - offset, lengths)


def _check_no_duplicates(codes: np.ndarray, dictionary: pa.Array) -> None:
    """Raise on the first pair code that occurs twice (codes of "query\x1fchunk" keys)."""
    seen = np.bincount(codes, minlength=len(dictionary))
    if seen.max(initial=0) > 1:
        first = codes[np.flatnonzero(seen[codes] > 1)[0]]
        qid, cid = dictionary[int(first)].as_py().split(ID_SEPARATOR, 1)
        raise InputError("a chunk is listed twice for one query",
                         item=f"query {qid}, chunk {cid}",
                         fix="List each chunk at most once per query")


# --- the measures, each over the ranked rows of one run ------------------------------

INFAP_EPSILON = 1e-5  # trec_eval's guard against 0/0 in infAP (trec_eval.h)


@dataclass(frozen=True, eq=False)
class _Rows:
    """The ranked rows a run's measures read, in canonical order (query code, then rank)."""

    key: KeyIndex
    qs: np.ndarray      # query code of each row
    pos: np.ndarray     # 1-based canonical rank within the query
    grade: np.ndarray   # the qrels grade, 0 when the pair is not in the qrels
    judged: np.ndarray  # the pair is in the qrels (any grade), bool
    n_ret: np.ndarray   # per query code: rows the run retrieved (the whole list)
    sampled: tuple | None = None     # per row: Inclusion's (prob, stratum, same) or 1, -1, 1
    incl: Inclusion | None = None    # the qrels rows' inclusion probabilities

    @property
    def nq(self) -> int:
        return self.key.n_queries

    def sum(self, weights) -> np.ndarray:
        """Per query code: the sum of a per-row quantity (float64)."""
        if weights.dtype == bool:  # a count: bincount of the rows that hold, no weights
            return np.bincount(self.qs[weights], minlength=self.nq).astype(np.float64)
        return np.bincount(self.qs, weights=weights, minlength=self.nq)

    @functools.cached_property
    def lists(self) -> tuple[np.ndarray, np.ndarray]:
        """First row and length of each query's block of rows."""
        starts = np.flatnonzero(np.r_[True, self.qs[1:] != self.qs[:-1]]) if len(self.qs) \
            else np.zeros(0, dtype=np.int64)
        return starts, np.diff(np.r_[starts, len(self.qs)])

    def cum(self, x: np.ndarray) -> np.ndarray:
        """Within each query's rows, the running sum of x up to and including the row."""
        return _cum(self.qs, x, self.lists)

    def within(self, m: Measure) -> np.ndarray:
        return self.pos <= m.cutoff if m.cutoff is not None else np.ones(len(self.pos), bool)

    def relevant(self, rel: int) -> np.ndarray:
        return self.judged & (self.grade >= rel)

    def condensed(self) -> _Rows:
        """The rows of judged chunks only (grade >= 0), re-ranked 1..n (Sakai 2007)."""
        keep = self.judged & (self.grade >= 0)
        qs = self.qs[keep]
        return _Rows(key=self.key, qs=qs, pos=ranks_in_sorted(qs), grade=self.grade[keep],
                     judged=self.judged[keep], n_ret=np.bincount(qs, minlength=self.nq))


def _cum(qs: np.ndarray, x: np.ndarray, lists=None) -> np.ndarray:
    """Within each query's rows (adjacent), the running sum of x up to and including the row.

    ``lists``: (first row, length) of each query's block, when the caller has them.
    """
    c = np.cumsum(x, dtype=np.float64)
    if not len(c):
        return c
    if lists is None:
        starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
        lists = starts, np.diff(np.r_[starts, len(qs)])
    starts, lengths = lists
    base = c[starts] - x[starts]
    return c - np.repeat(base, lengths)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.zeros(len(a)), where=b > 0)


def _depth(m: Measure) -> int | None:
    """How deep into each ranked list the measure reads; None: the whole list."""
    if SPECS[m.name]["at"] in ("cutoff", "required") and not m.judged_only:
        return m.cutoff
    return None


def _ndcg(r: _Rows, m: Measure) -> np.ndarray:
    rows = r.condensed() if m.judged_only else r
    # gain times 1 / log2(rank + 1), in that order, as the protocol's stored values were made
    discount = 1.0 / np.log2(rows.pos + 1.0)
    dcg = rows.sum(np.where(rows.within(m), _gain(rows.grade, m.dcg, m.gains) * discount, 0.0))
    return _divide(dcg, r.key.ideal_dcg(m.cutoff, m.dcg, m.gains))


def _ap(r: _Rows, m: Measure) -> np.ndarray:
    rows = r.condensed() if m.judged_only else r
    relevant = rows.relevant(m.rel) & rows.within(m)
    precision = rows.cum(relevant) / rows.pos
    return _divide(rows.sum(np.where(relevant, precision, 0.0)), r.key.num_relevant(m.rel))


def _precision(r: _Rows, m: Measure) -> np.ndarray:
    hits = r.sum(r.relevant(m.rel) & r.within(m))
    denom = np.full(r.nq, float(m.cutoff)) if m.cutoff is not None else r.n_ret
    return _divide(hits, denom.astype(np.float64))


def _recall(r: _Rows, m: Measure) -> np.ndarray:
    return _divide(r.sum(r.relevant(m.rel) & r.within(m)), r.key.num_relevant(m.rel))


def _rr(r: _Rows, m: Measure) -> np.ndarray:
    # rows are in canonical order, so a query's first relevant row is its best
    relevant = r.relevant(m.rel) & r.within(m)
    q_rel = r.qs[relevant]
    first = np.ones(len(q_rel), dtype=bool)
    first[1:] = q_rel[1:] != q_rel[:-1]
    value = np.zeros(r.nq)
    value[q_rel[first]] = 1.0 / r.pos[relevant][first]
    return value


def _rprec(r: _Rows, m: Measure) -> np.ndarray:
    n_rel = r.key.num_relevant(m.rel)
    return _divide(r.sum(r.relevant(m.rel) & (r.pos <= n_rel[r.qs])), n_rel)


def _success(r: _Rows, m: Measure) -> np.ndarray:
    return (r.sum(r.relevant(m.rel) & r.within(m)) > 0).astype(np.float64)


def _bpref(r: _Rows, m: Measure) -> np.ndarray:
    relevant = r.relevant(m.rel)
    nonrel = r.judged & (r.grade >= 0) & (r.grade < m.rel)
    n_rel = r.key.num_relevant(m.rel)
    n_nonrel = r.key.num_nonrelevant(m.rel)
    above = r.cum(nonrel)  # a relevant row is never counted in its own `above`
    cap = n_rel[r.qs]
    frac = _divide(np.minimum(above, cap), np.minimum(n_nonrel, n_rel)[r.qs])
    term = np.where(above > 0, 1.0 - frac, 1.0)
    return _divide(r.sum(np.where(relevant, term, 0.0)), n_rel)


def _infap(r: _Rows, m: Measure) -> np.ndarray:
    relevant = r.relevant(m.rel)
    nonrel = r.judged & (r.grade >= 0) & (r.grade < m.rel)
    pooled = r.judged & (r.grade < 0)  # in the pool, not in the judged sample
    rel_above = r.cum(relevant) - relevant
    non_above = r.cum(nonrel)
    pool_above = r.cum(pooled)
    j = r.pos - 1.0
    safe_j = np.maximum(j, 1.0)
    term = 1.0 / r.pos + (j / r.pos) * ((rel_above + non_above + pool_above) / safe_j) * (
        (rel_above + INFAP_EPSILON) / (rel_above + non_above + 2 * INFAP_EPSILON))
    term = np.where(j == 0, 1.0, term)
    return _divide(r.sum(np.where(relevant, term, 0.0)), r.key.num_relevant(m.rel))


def _weights(r: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """1 / inclusion probability of each ranked row and each qrels row (0 when unjudged)."""
    judged = r.judged & (r.grade >= 0)
    row_w = np.where(judged, 1.0 / r.sampled[0], 0.0)
    key_judged = r.key.grade >= 0
    key_w = np.where(key_judged, 1.0 / np.where(key_judged, r.incl.prob, 1.0), 0.0)
    return row_w, key_w


def _xinfap(r: _Rows, m: Measure) -> np.ndarray:
    row_w, key_w = _weights(r)
    relevant = r.relevant(m.rel)
    rel_w = np.where(relevant, row_w, 0.0)
    # estimated relevant chunks above each row: a judged one stands for 1/pi chunks of its
    # stratum, or, in the row's own stratum (drawn without replacement, one draw taken by
    # the row itself), for (k/pi - 1) / (k - 1)
    above = r.cum(rel_w) - rel_w
    extra = np.where(relevant, r.sampled[2] - row_w, 0.0)
    by = np.argsort(r.sampled[1], kind="stable")  # rank order kept within each stratum
    same = np.empty(len(extra))
    same[by] = _cum(r.sampled[1][by], extra[by]) - extra[by]
    precision = (1.0 + above + np.where(r.sampled[1] >= 0, same, 0.0)) / r.pos
    found = r.sum(np.where(relevant & r.within(m), precision * rel_w, 0.0))
    n_rel = np.bincount(r.key.q, weights=np.where(r.key.grade >= m.rel, key_w, 0.0),
                        minlength=r.nq)
    return _divide(found, n_rel)


def _infndcg(r: _Rows, m: Measure) -> np.ndarray:
    row_w, key_w = _weights(r)
    discount = 1.0 / np.log2(r.pos + 1.0)
    dcg = r.sum(np.where(r.within(m), _gain(r.grade, m.dcg) * row_w * discount, 0.0))
    return _divide(dcg, _inferred_ideal_dcg(r.key, key_w, m))


def _inferred_ideal_dcg(key: KeyIndex, key_w: np.ndarray, m: Measure) -> np.ndarray:
    """Per query: the DCG of the estimated number of chunks of each grade, best first.

    As sample_eval.pl: the estimate of each positive grade (sum of 1/pi over its judged
    chunks) is rounded half up to a whole number of chunks.
    """
    positive = key.grade > 0
    codes = key.q[positive].astype(np.int64) * (int(key.grade.max(initial=0)) + 1) + \
        key.grade[positive]
    uniq, inverse = np.unique(codes, return_inverse=True)
    count = np.floor(np.bincount(inverse, weights=key_w[positive]) + 0.5).astype(np.int64)
    grade_of = uniq % (int(key.grade.max(initial=0)) + 1)
    q_of = uniq // (int(key.grade.max(initial=0)) + 1)
    order = np.lexsort((-grade_of, q_of))  # best grade first within each query
    q_of, grade_of, count = q_of[order], grade_of[order], count[order]
    end = _cum(q_of, count.astype(np.float64)).astype(np.int64)
    start = end - count
    if m.cutoff is not None:
        start, end = np.minimum(start, m.cutoff), np.minimum(end, m.cutoff)
    # sum of 1 / log2(r + 1) for r in start+1 .. end, from one running table
    table = np.r_[0.0, np.cumsum(1.0 / np.log2(np.arange(2, end.max(initial=0) + 2.0)))]
    gain = _gain(grade_of, m.dcg)
    return np.bincount(q_of, weights=gain * (table[end] - table[start]), minlength=key.n_queries)


def _err(r: _Rows, m: Measure) -> np.ndarray:
    g = np.clip(np.where(r.judged, r.grade, 0), 0, m.max_grade).astype(np.float64)
    stop = np.where(r.within(m), (np.exp2(g) - 1.0) / 2.0 ** m.max_grade, 0.0)
    go_on = np.log1p(-stop)  # stop < 1: (2^g - 1) / 2^g_max < 1 for g <= g_max
    reach = np.exp(r.cum(go_on) - go_on)  # probability of reaching each rank
    return r.sum(reach * stop / r.pos)


def _rbp_gain(r: _Rows, m: Measure) -> np.ndarray:
    if m.rel is not None:
        return r.relevant(m.rel).astype(np.float64)
    # graded: gain = grade / the query's top grade when that is above 1 (trec_eval's rbp)
    top = np.maximum(r.key.max_grade(), 1.0)
    return np.where(r.judged, np.maximum(r.grade, 0), 0) / top[r.qs]


def _rbp(r: _Rows, m: Measure) -> np.ndarray:
    weight = (1.0 - m.p) * np.power(m.p, r.pos - 1.0)
    return r.sum(np.where(r.within(m), _rbp_gain(r, m) * weight, 0.0))


def _rbp_resid(r: _Rows, m: Measure) -> np.ndarray:
    unjudged = ~r.judged | (r.grade < 0)
    weight = (1.0 - m.p) * np.power(m.p, r.pos - 1.0)
    resid = r.sum(np.where(unjudged, weight, 0.0)) + np.power(m.p, r.n_ret.astype(np.float64))
    # as trec_eval: a list that holds no unjudged chunk has no residual (its tail p^n is
    # not counted either)
    return np.where(r.sum(unjudged) > 0, resid, 0.0)


def _num_ret(r: _Rows, m: Measure) -> np.ndarray:
    if m.rel is None:
        return r.n_ret.astype(np.float64)
    return r.sum(r.relevant(m.rel))


def _num_rel(r: _Rows, m: Measure) -> np.ndarray:
    return r.key.num_relevant(m.rel).copy()


def _judged(r: _Rows, m: Measure) -> np.ndarray:
    denom = np.minimum(r.n_ret, m.cutoff) if m.cutoff is not None else r.n_ret
    return _divide(r.sum(r.judged & r.within(m)), denom.astype(np.float64))


def _unjudged(r: _Rows, m: Measure) -> np.ndarray:
    unjudged = (~r.judged | (r.grade < 0)) & r.within(m)
    return r.sum(unjudged) / float(m.cutoff)


def _iprec(r: _Rows, m: Measure) -> np.ndarray:
    relevant = r.relevant(m.rel)
    qs = r.qs[relevant]
    found = _cum(qs, np.ones(len(qs)))  # 1, 2, ... within each query
    precision = found / r.pos[relevant]
    # interpolated: the best precision at this relevant row or any later one of its query;
    # on integer ranks of the values, offset per query so one pass keeps queries apart
    uniques, ranked = np.unique(precision, return_inverse=True)
    span = len(uniques) + 1
    best_rank = np.maximum.accumulate((ranked - qs.astype(np.int64) * span)[::-1])[::-1]
    best = uniques[best_rank + qs.astype(np.int64) * span] if len(qs) else precision
    n_found = np.bincount(qs, minlength=r.nq)
    # trec_eval (since 9.0.8): the level's rank among relevant chunks is round(level * R),
    # half away from 0 (older versions, as bundled by pytrec_eval, took int(level * R + 0.9))
    need = np.floor(m.cutoff * r.key.num_relevant(m.rel) + 0.5).astype(np.int64)
    need = np.maximum(need, 1)
    starts = np.r_[0, np.cumsum(n_found)[:-1]]
    ok = need <= n_found
    value = np.zeros(r.nq)
    value[ok] = best[(starts + need - 1)[ok]]
    return value


_COMPUTE = {"nDCG": _ndcg, "AP": _ap, "P": _precision, "R": _recall, "RR": _rr,
            "Rprec": _rprec, "Success": _success, "Bpref": _bpref, "infAP": _infap,
            "ERR": _err, "RBP": _rbp, "RBPResid": _rbp_resid, "NumRet": _num_ret,
            "NumRel": _num_rel, "Judged": _judged, "Unjudged": _unjudged, "IPrec": _iprec,
            "xinfAP": _xinfap, "infNDCG": _infndcg}


# --- public API ----------------------------------------------------------------------

def _parse_all(measures, relevant_min: int) -> list[Measure]:
    if isinstance(measures, (str, Measure)):
        measures = [measures]
    parsed = [parse_measure(m, relevant_min=relevant_min) for m in measures]
    if not parsed:
        raise InputError("no measure given", fix="Name at least one, e.g. nDCG(dcg='exp-log2')@10")
    seen = []
    for m in parsed:
        if m not in seen:
            seen.append(m)
    return seen


def _scoring_inputs(qrels, run, measures, on_missing_query: str, ties: str, no_relevant: str,
                    relevant_min: int, inclusion, codes):
    """:func:`per_query`'s and :func:`per_query_table`'s checks of their settings, and what
    both score with: the parsed measures, the qrels' :class:`KeyIndex` and the inclusion
    probabilities (None unless an inferred measure needs them). Raises as they do."""
    if on_missing_query not in ON_MISSING:
        raise InputError("on_missing_query must be `zero` or `skip`",
                         found=repr(on_missing_query))
    if ties not in TIES:
        raise InputError("ties must be `score` or `rank`", found=repr(ties))
    if no_relevant not in NO_RELEVANT:
        raise InputError("no_relevant must be `exclude` or `zero`", found=repr(no_relevant))
    parsed = _parse_all(measures, relevant_min)
    key = index_qrels(qrels)
    incl = None
    inferred = [str(m) for m in parsed if m.needs_inclusion]
    if inferred:
        if isinstance(inclusion, Inclusion):
            if inclusion.prob.shape != key.q.shape:
                raise InputError("inclusion probabilities were indexed for other qrels",
                                 fix="Pass inclusion_at(key, table) of the same KeyIndex")
            incl = inclusion
        else:
            incl = inclusion_at(key, inclusion, measure=inferred[0])
    check_codes(run, codes)
    return parsed, key, incl


def per_query(*, qrels: pd.DataFrame, run: pd.DataFrame, measures,
              on_missing_query: str = "zero", ties: str = "score",
              relevant_min: int = 1, no_relevant: str = "exclude",
              inclusion: pd.DataFrame | None = None,
              codes: RunCodes | None = None) -> pd.DataFrame:
    """Each measure's value for each query of the qrels.

    Parameters
    ----------
    qrels : pandas.DataFrame or KeyIndex
        The key: columns ``query_id``, ``chunk_id``, ``grade`` (int), one row per graded
        pair, shape (n_pairs, 3); or :func:`index_qrels` of it, to score many runs against
        one key without indexing it again. Not modified.
    run : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``rank``, ``score`` (str or categorical ids),
        shape (n_rows, 4); with an ``arm`` column each arm is scored on its own. Not modified.
    measures : str, Measure, or sequence of them
        Measure names such as ``"nDCG(dcg='exp-log2')@10"``, ``"R@10"``, ``"RR@10"``,
        ``"Judged@10"`` (see :mod:`relgrade.evaluation.measures`).
    on_missing_query : {"zero", "skip"}, default "zero"
        A query of the qrels that the run does not answer scores 0 (``"zero"``, the
        protocol's rule), or has no row (``"skip"``, as trec_eval).
    ties : {"score", "rank"}, default "score"
        How the run is ranked (see :func:`relgrade.ranking.canonical_ranking`).
    relevant_min : int, default 1
        ``rel`` of measure names that do not set it (params ``scale.relevant_min``).
    no_relevant : {"exclude", "zero"}, default "exclude"
        A query with nothing relevant in the qrels is undefined for the measures that need
        something relevant and has no row for them (``"exclude"``), or is scored like any
        other query, which gives 0 (``"zero"``, trec_eval's convention).
    inclusion : pandas.DataFrame or Inclusion, optional
        For xinfAP and infNDCG (or :func:`inclusion_at` of the same KeyIndex): ``query_id``, ``chunk_id``, ``inclusion_prob`` (float in
        (0, 1]), the probability with which each pooled pair was drawn into the judged
        sample (the pool table's column; :func:`relgrade.io.trec.read_trec_inclusion`). Every
        qrels pair with a grade >= 0 needs one; rows for pairs the qrels do not grade are
        ignored. Not modified.
    codes : RunCodes, optional
        :func:`relgrade.ranking.run_codes` of ``run`` (one arm, no ``arm`` column), as
        :func:`relgrade.ranking.validate_run` used them: the run's query ids are then
        looked up once per distinct id and its chunk ids are not hashed again; with
        ``distinct=True`` the ranked rows are looked up in the key's own pair index
        (:meth:`KeyIndex.pair_lookup`, built once per key). The table is the same.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``measure`` (str, canonical name), ``value`` (float64;
        in [0, 1] but for NumRet and NumRel, which are counts); with a stacked run, ``arm``
        first. Rows by measure in the order given, then by query id. A query undefined for
        a measure (nothing relevant in the qrels, ``no_relevant="exclude"``) has no row.

    Raises
    ------
    InputError
        A column is missing; a grade is not an integer; one (query, chunk) pair is graded
        twice; a chunk is listed twice within the rows the measures rank (naming the query
        and the chunk; uncut RR's deeper look ranks none, and
        :func:`relgrade.ranking.validate_run` checks whole lists); a score is
        not finite; a measure name does not parse; ``on_missing_query``, ``ties`` or
        ``no_relevant`` is unknown; xinfAP or infNDCG is asked for without ``inclusion``;
        an inclusion probability is not in (0, 1], a pair has two, or a judged pair has
        none (naming the query and the chunk); ``codes`` were made for another run.

    Notes
    -----
    With r_i the canonical rank of chunk i in the top k of query q, g_i its grade (0 when
    ungraded), R_q = {graded chunks of q with grade >= rel}, N_q = {chunks of q with
    0 <= grade < rel} (judged non-relevant) and n the number of chunks retrieved; a negative
    grade marks a chunk pooled but not judged (trec_eval's convention):

    * nDCG@k = DCG@k / IDCG@k, DCG@k = sum_i gain(g_i) / log2(r_i + 1), gain(g) = g
      (``dcg='log2'``, trec_eval's ``ndcg_cut``) or 2^g - 1 (``dcg='exp-log2'``, Burges et
      al. 2005, "Learning to rank using gradient descent"), or ``gains[g]``; IDCG@k is the
      DCG@k of q's graded chunks sorted by gain, descending (Jarvelin & Kekalainen 2002);
      ``judged_only``: ranks r_i counted among chunks with a grade >= 0 only (Sakai 2007);
    * AP@k = sum_{i in R_q, r_i <= k} P@r_i / |R_q| (trec_eval ``map``, ``map_cut``);
    * R@k = |top k ∩ R_q| / |R_q| (trec_eval ``recall_k``);
    * RR@k = 1 / min{r_i : i in R_q, r_i <= k}, 0 if there is none (trec_eval
      ``recip_rank`` on the run cut at k);
    * P@k = |top k ∩ R_q| / k (trec_eval ``P_k``); P without k: |R_q retrieved| / n;
    * Rprec = P@|R_q|; Success@k = 1 if top k ∩ R_q is not empty;
    * Bpref = sum_{i in R_q retrieved} (1 - min(|N_q above i|, |R_q|) / min(|N_q|, |R_q|))
      / |R_q| (Buckley & Voorhees 2004, as trec_eval ``bpref``);
    * infAP: trec_eval's ``infAP`` (Yilmaz & Aslam 2006, "Estimating average precision with
      incomplete and imperfect judgments"), the expected precision above each relevant chunk
      from the judged ones, pooled-but-unjudged chunks in proportion;
    * xinfAP@k = sum_{i in R_q sampled, r_i <= k} (1 / pi_i) P^_i / R^_q, with
      P^_i = (1 + sum_{j in R_q sampled, r_j < r_i} 1 / pi_j) / r_i and
      R^_q = sum_{i in R_q sampled} 1 / pi_i: the estimator of Yilmaz, Kanoulas & Aslam
      2008 ("A simple and efficient sampling method for estimating AP and NDCG", SIGIR;
      NIST's sample_eval.pl ``infAP``), each judged chunk standing for 1 / pi_i chunks of
      its stratum. With pi = 1 everywhere it is AP;
    * infNDCG@k = sum_{i sampled, r_i <= k} gain(g_i) / (pi_i log2(r_i + 1)) / IDCG^@k,
      IDCG^ the DCG of round(sum_{i sampled, g_i = g} 1 / pi_i) chunks of each grade
      g > 0, best first (Yilmaz, Kanoulas & Aslam 2008; sample_eval.pl ``infNDCG``, which
      also caps the ideal list at 1000 ranks). With pi = 1 everywhere it is nDCG;
    * ERR@k = sum_r (1/r) R_r prod_{j<r} (1 - R_j), R = (2^g - 1) / 2^max_grade (Chapelle et
      al. 2009; max_grade 4 as gdeval);
    * RBP(p)@k = (1 - p) sum_{r_i <= k} gain_i p^(r_i - 1), gain binary (with ``rel``) or
      g / the query's top grade (trec_eval ``rbp``; Moffat & Zobel 2008); RBPResid = p^n
      + (1 - p) sum over unjudged retrieved chunks of p^(r_i - 1), 0 when none is unjudged
      (trec_eval ``rbp_resid``);
    * IPrec@x = max of P@r_i over relevant i at or below the round(x |R_q|)-th relevant
      chunk (trec_eval 9.0.8 ``iprec_at_recall``);
    * NumRet = n (with ``rel``: |R_q retrieved|); NumRel = |R_q|;
    * Judged@k = graded chunks in the top k / min(k, n) (ir_measures);
      Unjudged@k = chunks in the top k that are ungraded or graded < 0, over k (trec_eval
      ``unj``).

    Examples
    --------
    >>> import pandas as pd
    >>> qrels = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"],
    ...                       "grade": [2, 1]})
    >>> run = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["x", "b"],
    ...                     "rank": [1, 2], "score": [2.0, 1.0]})
    >>> per_query(qrels=qrels, run=run, measures=["RR@10"])["value"].tolist()
    [0.5]
    """
    parsed, key, incl = _scoring_inputs(qrels, run, measures, on_missing_query, ties,
                                        no_relevant, relevant_min, inclusion, codes)
    if "arm" in column_names(run):
        import pandas as pd

        if isinstance(run, pa.Table):
            run = run.to_pandas()
        codes, arms = pd.factorize(run["arm"].astype("str"), sort=True)
        tables = []
        for i, arm in enumerate(arms):
            rows = np.flatnonzero(codes == i)
            table = _table(key, _score_run(key, run.take(rows), parsed, on_missing_query, ties,
                                           no_relevant, incl))
            table.insert(0, "arm", pd.Series([arm] * len(table), dtype="str"))
            tables.append(table)
        if not tables:
            return pd.DataFrame({"arm": pd.Series([], dtype="str"),
                                 **_table(key, {}).to_dict("series")})
        return pd.concat(tables, ignore_index=True)
    table = _table(key, _score_run(key, run, parsed, on_missing_query, ties, no_relevant,
                                   incl, codes))
    pa.default_memory_pool().release_unused()  # scoring's Arrow temporaries are garbage
    return table


def per_query_table(*, qrels, run: pa.Table, measures, on_missing_query: str = "zero",
                    ties: str = "score", relevant_min: int = 1, no_relevant: str = "exclude",
                    inclusion=None, codes: RunCodes | None = None) -> pa.Table:
    """:func:`per_query` of one arm's run, as an Arrow table: no pandas object is made.

    Parameters
    ----------
    qrels : pyarrow.Table, pandas.DataFrame or KeyIndex
        As for :func:`per_query`.
    run : pyarrow.Table or pandas.DataFrame
        One arm's run: ``query_id``, ``chunk_id`` (string), ``rank`` (integer), ``score``
        (float64), shape (n_rows, 4), as :func:`relgrade.io.runtable.read_run_table`
        returns it; no ``arm`` column. Not modified.
    measures, on_missing_query, ties, relevant_min, no_relevant, inclusion, codes
        As for :func:`per_query`.

    Returns
    -------
    pyarrow.Table
        ``query_id`` (large_string), ``measure`` (large_string), ``value`` (float64): the
        rows and values of :func:`per_query`'s table, in its order.

    Raises
    ------
    InputError
        As :func:`per_query`; or the run has an ``arm`` column.
    """
    if "arm" in column_names(run):
        raise InputError("per_query_table scores one arm's run, without an arm column",
                         fix="Score a stacked run with per_query")
    parsed, key, incl = _scoring_inputs(qrels, run, measures, on_missing_query, ties,
                                        no_relevant, relevant_min, inclusion, codes)
    table = _arrow_table(key, _score_run(key, run, parsed, on_missing_query, ties,
                                         no_relevant, incl, codes))
    pa.default_memory_pool().release_unused()  # scoring's Arrow temporaries are garbage
    return table


def ranked_reads(measures, *, relevant_min: int = 1) -> tuple[int | None, tuple[int, ...]]:
    """Which ranked rows the measures read: what :func:`per_query_ranked` needs.

    Parameters
    ----------
    measures : str, Measure, or sequence of them
        As for :func:`per_query`.
    relevant_min : int, default 1
        ``rel`` of measure names that do not set it.

    Returns
    -------
    depth : int or None
        Every row of a list at canonical rank <= depth is read (the largest cutoff of the
        cut measures; 10 when uncut RR is the only measure); None: whole lists.
    levels : tuple of int
        For uncut RR at each of these relevance levels (ascending), each list's first row
        graded >= level is read too, wherever it lies; empty when ``depth`` is None.

    Raises
    ------
    InputError
        A measure name does not parse, or none is given.

    Examples
    --------
    >>> ranked_reads(["nDCG@10", "R@100", "RR"])
    (100, (1,))
    >>> ranked_reads(["AP", "RR@10"])
    (None, ())
    """
    depth, deep = _reads(_parse_all(measures, relevant_min))
    return depth, tuple(sorted({int(m.rel) for m in deep}))


def per_query_ranked(*, qrels, ranked: pa.Table, measures, on_missing_query: str = "zero",
                     relevant_min: int = 1, no_relevant: str = "exclude") -> pd.DataFrame:
    """Each measure's value for each query of the qrels, from rows ranked elsewhere.

    The rows come already ranked and joined to the qrels (by an engine that reads the run
    where it lies, :mod:`relgrade.tables.spark_scoring`); the measures are computed by the
    same code as :func:`per_query`'s, so the table equals :func:`per_query`'s on the same
    run, value for value.

    Parameters
    ----------
    qrels : pandas.DataFrame or KeyIndex
        As for :func:`per_query`.
    ranked : pyarrow.Table
        One row per ranked row read, any row order, columns ``query_id`` (string),
        ``pos`` (integer: 1-based canonical rank in the query's whole list,
        :func:`relgrade.ranking.canonical_order`), ``grade`` (integer, null when the qrels
        do not grade the pair) and ``n_ret`` (integer: rows the run lists for the query).
        It holds the rows :func:`ranked_reads` names (more are harmless), each
        (query, pos) once; rows of queries outside the qrels are ignored.
    measures : str, Measure, or sequence of them
        As for :func:`per_query`; not xinfAP or infNDCG.
    on_missing_query, relevant_min, no_relevant
        As for :func:`per_query`.

    Returns
    -------
    pandas.DataFrame
        As :func:`per_query`: ``query_id``, ``measure``, ``value``.

    Raises
    ------
    InputError
        A measure does not parse or needs inclusion probabilities; a column is missing;
        ``on_missing_query`` or ``no_relevant`` is unknown; bad qrels (as
        :func:`per_query`).
    """
    if on_missing_query not in ON_MISSING:
        raise InputError("on_missing_query must be `zero` or `skip`",
                         found=repr(on_missing_query))
    if no_relevant not in NO_RELEVANT:
        raise InputError("no_relevant must be `exclude` or `zero`", found=repr(no_relevant))
    parsed = _parse_all(measures, relevant_min)
    inferred = [str(m) for m in parsed if m.needs_inclusion]
    if inferred:
        raise InputError(f"{inferred[0]} cannot be scored from ranked rows alone",
                         fix="Score it with per_query and the inclusion probabilities")
    missing = [c for c in ("query_id", "pos", "grade", "n_ret")
               if c not in ranked.column_names]
    if missing:
        raise InputError("ranked rows need the columns query_id, pos, grade, n_ret",
                         found="no " + ", ".join(missing))
    key = index_qrels(qrels)
    rq = codes_in(_checked_ids(ranked["query_id"], "query_id", separator=False),
                  key.query_ids).astype(np.int64)
    pos = ranked["pos"].to_numpy().astype(np.int64)
    keep = np.flatnonzero(rq >= 0)
    order = keep[np.lexsort((pos[keep], rq[keep]))]
    qs, pos = rq[order], pos[order]
    grade_col = ranked["grade"].take(arrow_array(order))
    judged = grade_col.is_valid().to_numpy(zero_copy_only=False)
    grade = grade_col.fill_null(0).to_numpy().astype(key.grade.dtype)
    n_ret = np.zeros(key.n_queries, dtype=np.int64)
    n_ret[qs] = ranked["n_ret"].to_numpy()[order]
    rows = _Rows(key=key, qs=qs, pos=pos, grade=grade, judged=judged, n_ret=n_ret)
    return _table(key, _values(rows, parsed, on_missing_query, no_relevant))


def _no_inclusion(name: str) -> InputError:
    return InputError(f"{name} needs the judged pairs' inclusion probabilities",
                      fix="Give the sampled pool's probabilities (relgrade evaluate "
                          "--inclusion FILE)")


def inclusion_at(key, inclusion: pd.DataFrame | None, *, path=None,
                 measure: str = "xinfAP") -> Inclusion:
    """Each qrels row's inclusion probability in the sampled pool, for xinfAP and infNDCG.

    Parameters
    ----------
    key : KeyIndex or pandas.DataFrame
        The qrels, as for :func:`per_query`.
    inclusion : pandas.DataFrame or None
        ``query_id``, ``chunk_id``, ``inclusion_prob`` (float in (0, 1]), optionally
        ``stratum``, one row per pooled pair; rows for pairs the qrels do not grade are
        ignored. Without ``stratum``, the judged pairs of one query with one probability
        are one stratum. None raises.
    path : str or os.PathLike, optional
        The file the table came from, named in errors.
    measure : str, default "xinfAP"
        The measure named when ``inclusion`` is None.

    Returns
    -------
    Inclusion
        Aligned with the KeyIndex's rows: pass it as ``inclusion=`` to :func:`per_query`
        with the same KeyIndex. Each stratum's judged count k and probability pi give its
        size k / pi; the strata are taken to be drawn without replacement (as relgrade's
        pool and TREC's stratified pools are).

    Raises
    ------
    InputError
        ``inclusion`` is None; a column is missing; a probability is not in (0, 1]; a pair
        has two probabilities; a pair the qrels grade >= 0 has none (naming the query and the
        chunk, and ``path``).
    """
    import pandas as pd

    key = index_qrels(key)
    if inclusion is None:
        raise _no_inclusion(measure)
    missing = [c for c in ("query_id", "chunk_id", "inclusion_prob")
               if c not in inclusion.columns]
    if missing:
        raise InputError("inclusion probabilities need the columns query_id, chunk_id, "
                         "inclusion_prob", path=path, found="no " + ", ".join(missing))
    prob = pd.to_numeric(inclusion["inclusion_prob"], errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan)
    qids = _checked_ids(inclusion["query_id"], "query_id")
    cids = _checked_ids(inclusion["chunk_id"], "chunk_id")
    bad = ~((prob > 0) & (prob <= 1))  # NaN fails both
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("an inclusion probability must be in (0, 1]", path=path,
                         item=f"query {qids[row]}, chunk {cids[row]}",
                         found=str(inclusion["inclusion_prob"].iat[row]))
    at = codes_in(pair_keys(qids, cids), key.pairs)
    hit = np.flatnonzero(at >= 0)
    key_prob = np.full(len(key.q), np.nan)
    key_prob[at[hit]] = prob[hit]
    twice = np.bincount(at[hit], minlength=len(key.q)) > 1
    if twice.any():
        row = int(np.flatnonzero(twice)[0])
        raise InputError("a pair has two inclusion probabilities", path=path,
                         item=f"query {key.query_ids[int(key.q[row])]}, "
                              f"chunk {key.chunk_ids[row]}", fix="Give each pair one")
    lacking = (key.grade >= 0) & np.isnan(key_prob)
    if lacking.any():
        row = int(np.flatnonzero(lacking)[0])
        raise InputError("a judged pair has no inclusion probability", path=path,
                         item=f"query {key.query_ids[int(key.q[row])]}, "
                              f"chunk {key.chunk_ids[row]}",
                         fix="List every judged pair of the qrels in the inclusion table")
    judged = np.flatnonzero(key.grade >= 0)
    if "stratum" in inclusion.columns:
        named = np.full(len(key.q), None, dtype=object)
        named[at[hit]] = inclusion["stratum"].astype("str").to_numpy()[hit]
        label = pd.Series(named[judged]).to_numpy()
    else:
        label = key_prob[judged]
    codes = pd.MultiIndex.from_arrays([key.q[judged], label]).factorize()[0]
    stratum = np.full(len(key.q), -1, dtype=np.int64)
    stratum[judged] = codes
    k = np.bincount(codes, minlength=codes.max(initial=-1) + 1)[codes].astype(np.float64)
    pi = key_prob[judged]
    same = np.full(len(key.q), np.nan)
    same[judged] = np.where(k > 1, (k / pi - 1.0) / np.maximum(k - 1.0, 1.0), 1.0 / pi)
    return Inclusion(prob=key_prob, stratum=stratum, same=same)


def _table(key: KeyIndex, scored: dict) -> pd.DataFrame:
    """:func:`_arrow_table`'s rows as a DataFrame (ids and names of pandas' ``str`` dtype)."""
    import pandas as pd

    table = _arrow_table(key, scored)
    return pd.DataFrame({"query_id": pd.Series(table["query_id"].combine_chunks(), dtype="str"),
                         "measure": pd.Series(table["measure"].combine_chunks(), dtype="str"),
                         "value": numpy_values(table["value"].combine_chunks())})


def _arrow_table(key: KeyIndex, scored: dict) -> pa.Table:
    """One row per query and measure a query is counted in (``query_id``, ``measure``
    large_string; ``value`` float64), measure by measure in ``scored``'s order."""
    sel, which, values = [], [], []
    for i, (value, counted) in enumerate(scored.values()):
        rows = np.flatnonzero(counted)
        sel.append(rows)
        which.append(np.full(len(rows), i, dtype=np.int32))
        values.append(value[rows])
    sel = np.concatenate(sel) if sel else np.zeros(0, dtype=np.int64)
    names = pa.DictionaryArray.from_arrays(
        arrow_array(np.concatenate(which) if which else np.zeros(0, dtype=np.int32)),
        arrow_strings(list(scored)))
    value = np.concatenate(values) if values else np.zeros(0)
    return pa.table({"query_id": key.query_ids.take(arrow_array(sel.astype(np.int64))),
                     "measure": names.cast(pa.large_string()),
                     "value": arrow_array(value.astype(np.float64, copy=False))})


def excluded_queries(qrels, measures, *, relevant_min: int = 1) -> dict:
    """The queries of the qrels on which each measure is undefined.

    Parameters
    ----------
    qrels : pandas.DataFrame, pyarrow.Table or KeyIndex
        Columns ``query_id``, ``chunk_id``, ``grade``.
    measures : str, Measure, or sequence of them
        As for :func:`per_query`.
    relevant_min : int, default 1
        ``rel`` of measure names that do not set it.

    Returns
    -------
    dict
        Canonical measure name → sorted list of query ids with nothing relevant in the
        qrels (for nDCG: no positive grade; for R, RR, P: no grade >= rel). Judged@k is
        defined everywhere, so its list is empty.

    Raises
    ------
    InputError
        As :func:`per_query` for bad qrels or a bad measure name.
    """
    parsed = _parse_all(measures, relevant_min)
    key = index_qrels(qrels)
    out = {}
    for m in parsed:
        if not m.needs_relevant:
            out[str(m)] = []
            continue
        none = key.num_relevant(m.level) == 0
        out[str(m)] = key.query_ids.filter(arrow_array(none)).to_pylist()
    return out


def query_coverage(qrels, run, *,
                   codes: RunCodes | None = None) -> tuple[int, tuple[int, str | None]]:
    """How many qrels queries a run answers, and which run queries the qrels lack.

    Parameters
    ----------
    qrels : pandas.DataFrame, pyarrow.Table or KeyIndex
        As for :func:`per_query`.
    run : pandas.DataFrame or pyarrow.Table
        A run with a ``query_id`` column.
    codes : RunCodes, optional
        :func:`relgrade.ranking.run_codes` of ``run``: its distinct query ids are taken
        from there instead of being found again.

    Returns
    -------
    answered : int
        Queries of the qrels with at least one run row.
    unknown : (int, str or None)
        How many distinct run queries are not in the qrels, and the first of them in byte
        order (None when there is none).
    """
    key = index_qrels(qrels)
    if codes is not None:
        check_codes(run, codes)
        ids = codes.queries
    else:
        ids = pc.unique(_checked_ids(run["query_id"], "query_id",
                                     separator=False).combine_chunks())
    inside = codes_in(pa.chunked_array([ids]), key.query_ids) >= 0
    outside = ids.filter(arrow_array(~inside))
    first = min(outside.to_pylist()) if len(outside) else None
    return int(inside.sum()), (len(outside), first)


def measure_means(table: pa.Table) -> dict:
    """Mean of each measure over its queries, from :func:`per_query_table`'s table.

    Parameters
    ----------
    table : pyarrow.Table
        ``query_id``, ``measure``, ``value`` (float64), one arm's rows.

    Returns
    -------
    dict
        Measure name -> float mean (a Python float), in the order the table first lists
        each measure; equal, bit for bit, to :func:`mean` of the same rows as a DataFrame.

    Notes
    -----
    :func:`mean` sums with pandas' grouped sum: ``numpy.add.reduceat`` over each measure's
    block when the measures' rows are in blocks of one measure each (as
    :func:`per_query_table` makes them) and no value is NaN, else pandas' compensated
    (Kahan) sum skipping NaN; the mean is that sum over the measure's row count. The same
    operations are made here, in that order.
    """
    measure = table["measure"].combine_chunks()
    n = len(measure)
    if n == 0:
        return {}
    encoded = pc.dictionary_encode(measure)
    codes = numpy_values(encoded.indices).astype(np.int64)
    names = encoded.dictionary.to_pylist()
    return _grouped_means(codes, names, float_values(table["value"]))


def _grouped_means(codes: np.ndarray, names: list, values: np.ndarray) -> dict:
    """:func:`measure_means` of rows given as measure codes (int64, into ``names``, which
    lists the measures in the order the rows first list them) and values (float64)."""
    counts = np.bincount(codes, minlength=len(names)).astype(np.float64)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    if len(starts) == len(names) and not np.isnan(values).any():
        sums = np.add.reduceat(values, starts)
    else:
        sums = np.zeros(len(names))
        comp = np.zeros(len(names))
        for c, v in zip(codes.tolist(), values.tolist()):
            if v != v:
                continue
            y = v - comp[c]
            t = sums[c] + y
            comp[c] = t - sums[c] - y
            sums[c] = t
    return {name: float(s / k) for name, s, k in zip(names, sums, counts)}


def mean(per_query: pd.DataFrame, *, weights=None) -> pd.Series:
    """Mean of each measure over its queries (MRR is the mean of RR).

    Parameters
    ----------
    per_query : pandas.DataFrame
        The table :func:`per_query` returns (``query_id``, ``measure``, ``value``; optional
        ``arm``).
    weights : mapping or pandas.Series, optional
        Traffic weight per query id (params queries' ``weight``); None: every query 1.

    Returns
    -------
    pandas.Series
        float64, indexed by measure in the order the table lists them (by (arm, measure)
        when the table has an ``arm`` column): sum_q w_q v_q / sum_q w_q.

    Raises
    ------
    InputError
        A query has no weight, or a weight is negative or not finite.
    """
    import pandas as pd

    keys = ["arm", "measure"] if "arm" in per_query.columns else ["measure"]
    values = per_query["value"].to_numpy(dtype=np.float64)
    if weights is None:
        w = np.ones(len(values))
    else:
        weights = pd.Series(weights, dtype=np.float64)
        weights.index = weights.index.astype("str")
        w = per_query["query_id"].astype("str").map(weights).to_numpy(dtype=np.float64,
                                                                       na_value=np.nan)
        if np.isnan(w).any():
            row = int(np.flatnonzero(np.isnan(w))[0])
            raise InputError("a query has no weight", item=f"query {per_query['query_id'].iat[row]}")
        if (~np.isfinite(w) | (w < 0)).any():
            raise InputError("weights must be finite and not negative")
    frame = pd.DataFrame({k: per_query[k] for k in keys})
    frame["wv"] = w * values
    frame["w"] = w
    sums = frame.groupby(keys, sort=False)[["wv", "w"]].sum()
    result = sums["wv"] / sums["w"]
    result.name = "value"
    return result.astype(np.float64)


def evaluate_arm(*, key: pd.DataFrame, run: pd.DataFrame, cutoffs, relevant_min: int = 1,
                 ties: str = "score", groups: pd.DataFrame | None = None,
                 inclusion: pd.DataFrame | None = None):
    """The protocol's measures for one arm: their means and the per-query table.

    Parameters
    ----------
    key : pandas.DataFrame
        The frozen key (qrels): ``query_id``, ``chunk_id``, ``grade``.
    run : pandas.DataFrame
        The arm's run (``query_id``, ``chunk_id``, ``rank``, ``score``).
    cutoffs : iterable of int
        params ``metrics.cutoffs``; nDCG (gain 2^g - 1), R, RR and Judged at each.
    relevant_min : int, default 1
        params ``scale.relevant_min``.
    ties : {"score", "rank"}, default "score"
        params ``runs.ties``.
    groups : pandas.DataFrame, optional
        The queries table (``query_id``, ``group``); when given, the per-query table gets
        each query's group.
    inclusion : pandas.DataFrame, optional
        A sampled pool's ``query_id``, ``chunk_id``, ``inclusion_prob`` (the pool table of a
        pool with a tail sample): then ``infNDCG(dcg='exp-log2')@k`` and ``xinfAP@k``
        (Yilmaz, Kanoulas & Aslam 2008) follow the protocol's measures at each cutoff.

    Returns
    -------
    summary : dict
        ``{"queries": n, MEASURE: mean, ...}`` in measure order, where n is the number of
        key queries the relevance measures average over (every key query with something
        relevant; a query missing from the run counts, with 0). A mean over no query is None.
    table : pandas.DataFrame
        ``query_id``, (``group``,) ``measure``, ``value``: :func:`per_query` with
        ``on_missing_query="zero"``.

    Raises
    ------
    InputError
        As :func:`per_query`; or a key query has no group in ``groups``.
    """
    from relgrade.evaluation.measures import parse_measure, protocol_measures

    measures = protocol_measures(cutoffs, relevant_min=relevant_min)
    if inclusion is not None:
        measures += [parse_measure(f"{name}@{int(k)}", relevant_min=relevant_min)
                     for k in cutoffs for name in ("infNDCG(dcg='exp-log2')", "xinfAP")]
    names = [str(m) for m in measures]
    table = per_query(qrels=key, run=run, measures=measures, on_missing_query="zero",
                      ties=ties, inclusion=inclusion)
    means = mean(table).reindex(names)
    counted = table.loc[table["measure"] == names[0], "query_id"].nunique() if names else 0
    summary = {"queries": int(counted)}
    summary.update({m: (None if v != v else float(v)) for m, v in means.items()})
    if groups is not None:
        import pandas as pd

        lookup = pd.Series(groups["group"].astype("str").to_numpy(),
                           index=groups["query_id"].astype("str").to_numpy())
        group = table["query_id"].map(lookup)
        if group.isna().any():
            q = table["query_id"][group.isna()].iloc[0]
            raise InputError("a key query is not in the queries table", item=f"query {q}")
        table.insert(1, "group", group.astype("str"))
    return summary, table


@dataclass(frozen=True)
class ArmValues:
    """One arm's per-query values held as arrays: :func:`evaluate_arm`'s table, compact.

    ``query_ids`` are the key's query ids in code point order (every block's, stacked);
    ``values[i]`` and ``counted[i]`` are measure i's value (float64) and whether the query
    has a row for it (bool), one entry per query id; ``names`` the measures' canonical names.
    """

    names: list
    query_ids: pa.ChunkedArray
    values: list
    counted: list

    def table(self) -> pa.Table:
        """The per-query table (``query_id``, ``measure`` large_string; ``value`` float64),
        the rows and values of :func:`per_query_table` of the whole key and run."""
        return _arrow_table(self, {n: (v, c) for n, v, c in
                                   zip(self.names, self.values, self.counted)})

    def measure_rows(self, i: int) -> tuple[np.ndarray, pa.Table]:
        """Measure ``i``'s rows of :meth:`table`: the query positions (int64) and the table's
        slice, made from the arrays (the whole table is never built)."""
        rows = np.flatnonzero(self.counted[i])
        return rows, pa.table({
            "query_id": self.query_ids.take(arrow_array(rows.astype(np.int64))),
            "measure": pa.array([self.names[i]] * len(rows), type=pa.large_string()),
            "value": arrow_array(self.values[i][rows].astype(np.float64, copy=False))})

    def means(self) -> dict:
        """:func:`measure_means` of :meth:`table`, bit for bit, from the arrays: measure name
        -> mean, for the measures with at least one row, in measure order."""
        present = [i for i, c in enumerate(self.counted) if c.any()]
        if not present:
            return {}
        codes = np.concatenate([np.full(int(self.counted[i].sum()), k, dtype=np.int64)
                                for k, i in enumerate(present)])
        values = np.concatenate([self.values[i][self.counted[i]].astype(np.float64, copy=False)
                                 for i in present])
        return _grouped_means(codes, [self.names[i] for i in present], values)


def score_blocks(blocks, *, measures, ties: str = "score",
                 relevant_min: int = 1) -> ArmValues:
    """:func:`per_query_table` of a key and one arm's run given a block of whole queries at
    a time, with ``on_missing_query="zero"`` and ``no_relevant="exclude"``.

    Parameters
    ----------
    blocks : iterable of (qrels, run)
        Per block, in ascending query id order (code point order, no query in two blocks):
        the key's rows of some queries (``query_id``, ``chunk_id``, ``grade``; pandas or
        Arrow) and the run's rows of the same queries, with any run rows of queries the key
        lacks (``query_id``, ``chunk_id``, ``rank``, ``score``; may be empty).
    measures : sequence of str or Measure
        As for :func:`per_query`; no inferred measure (xinfAP, infNDCG).
    ties, relevant_min
        As for :func:`per_query`.

    Returns
    -------
    ArmValues
        Per measure, each key query's value and whether it is counted: every value the
        same float a single :func:`per_query` call over the stacked blocks gives (each
        query is scored from its own rows; the per-query sums are ``numpy.bincount`` in row
        order and the running sums count whole numbers), in the same order.

    Raises
    ------
    InputError
        As :func:`per_query`, for the block it meets in; or an inferred measure is asked.
    """
    parsed = _parse_all(measures, relevant_min)
    if any(m.needs_inclusion for m in parsed):
        raise InputError("score_blocks does not take the inferred measures",
                         fix="Score the whole key with per_query and its inclusion")
    names = [str(m) for m in parsed]
    ids, values, counted = [], [[] for _ in names], [[] for _ in names]
    for qrels, run in blocks:
        parsed, key, _ = _scoring_inputs(qrels, run, parsed, "zero", ties, "exclude",
                                         relevant_min, None, None)
        scored = _score_run(key, run, parsed, "zero", ties, "exclude")
        ids.extend(c.cast(pa.large_string()) for c in key.query_ids.chunks)
        for i, (value, count) in enumerate(scored.values()):
            values[i].append(value)
            counted[i].append(count)
        del qrels, run, key, scored
        pa.default_memory_pool().release_unused()  # the block's Arrow memory, handed back
    return ArmValues(
        names=names, query_ids=pa.chunked_array(ids, type=pa.large_string()),
        values=[np.concatenate(v) if v else np.zeros(0) for v in values],
        counted=[np.concatenate(c) if c else np.zeros(0, dtype=bool) for c in counted])
