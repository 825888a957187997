"""Stage `pool`: every arm's run → the pool, its private provenance, manifest and statistics.

Each arm in params `arms` is read from `paths.runs/ARM.trec`, checked (finite scores, no
chunk twice for a query, every row's query and chunk known) and cut to the rows that can
reach the pooled ranks, one pass per arm (arms in parallel threads): a TREC run through the
compiled scan, its ids looked up in compiled tables of the known ids
(:class:`relgrade.io.trec_scan.KnownIds`); any other run into Arrow, its ids checked in one
DuckDB query (:mod:`relgrade.tables.pooling`). The candidates are then ranked canonically
(`runs.ties`) and pooled. With params ``pool.engine: spark`` the reading, checks and cut run on Spark
(:mod:`relgrade.tables.spark`) and the same rows are pooled; a run Spark leaves to the
reference rules (another layout, a bad row) is pooled on the local engine.

On the local engine, TREC runs whose query ids come in ascending byte order are first
pooled a block of queries at a time (:func:`pool_in_blocks`: memory bounded by a block and
a row group, not by the runs); any run that path does not take, or in which it finds a
fault, is pooled whole as above, with the same outputs and messages.
"""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.errors import InputError
from relgrade.io.files import ParquetBlocks, read_column, write_arrow_parquet, write_json
from relgrade.io.runtable import read_run_table
from relgrade.io.runs import run_lines
from relgrade.protocol import pool
from relgrade.ranking import arrow_array, validate_run
from relgrade.rng import stage_rng


def run(ex):
    if ex.params.grading.mode == "ppi":
        # the seed is the human sample's too: a change the audit stage would refuse is
        # refused here, before the pool or its manifest is rewritten
        from relgrade.pipeline.stages.audit import refuse_moved_sample

        refuse_moved_sample(ex)
    cfg, ties, seed = ex.params.need("pool"), ex.params.runs.ties, ex.params.need("seed")
    arms = ex.params.need("arms")
    paths = {str(arm): ex.path("runs") / f"{arm}.trec" for arm in arms}
    options = {"depth": cfg.depth, "tail_sample": cfg.tail_sample,
               "tail_depth": cfg.tail_depth, "ties": ties, "rng": stage_rng(seed, "pool")}
    stacked = None
    if cfg.engine == "spark":
        from relgrade.tables import spark

        stacked = spark.arm_candidates(
            spark.session(cfg.spark_master or spark.DEFAULT_MASTER), paths,
            depth=(cfg.tail_depth or cfg.depth) if cfg.tail_sample else cfg.depth,
            ties=ties, queries=ex.path("queries"), chunks=ex.path("chunks"))
    if stacked is not None:
        table, provenance, stats = pool.pool_tables(stacked, **options)
    else:
        # the local engine, also whenever Spark met a run it leaves to the reference rules
        queries, chunks = known_ids(ex)
        # the known ids as compiled tables, made once for either way
        known = _known_tables(queries, chunks) \
            if any(_scannable(p) for p in paths.values()) else None
        if pool_in_blocks(ex, paths, known=known, seed=seed, arms=arms, **options):
            return
        # the tail sample's draws start again: the block path may have drawn some
        options["rng"] = stage_rng(seed, "pool")
        table, provenance, stats = pool_files(paths, queries=queries, chunks=chunks,
                                              known=known, **options)
    write_arrow_parquet(ex.path("pool"), table)
    write_arrow_parquet(ex.path("provenance"), provenance)
    write_json(ex.path("pool_manifest"), pool.pool_manifest(
        table, seed=seed, depth=cfg.depth, tail_sample=cfg.tail_sample,
        tail_depth=cfg.tail_depth, arms=list(arms)))
    write_json(ex.path("pool_stats"), stats)


def known_ids(ex):
    """The query ids of params ``paths.queries`` and the chunk ids of ``paths.chunks``, as
    two ``pyarrow.ChunkedArray`` of str (only that column is read from a Parquet file):
    every run row must name known ones."""
    return tuple(read_column(ex.path(name), col)
                 for name, col in (("queries", "query_id"), ("chunks", "chunk_id")))


def pool_files(paths, *, depth: int, tail_sample: int = 0, tail_depth: int | None = None,
               ties: str = "score", rng=None, queries=None, chunks=None, known=None):
    """Pool run files: each read, checked and cut (one thread per core), every row checked
    against the known ids, then the candidates ranked and pooled.

    A TREC run the compiled scan takes (:func:`relgrade.io.trec_scan.scan_trec_run`: its
    usual layout, every query's rows adjacent, no chunk twice for a query) is parsed,
    hashed and proven free of repeats in one pass, and every row's chunk id and query id is
    looked up in compiled tables of the known ids (:class:`relgrade.io.trec_scan.KnownIds`:
    by hash, then byte for byte). Any other run (another format or layout, a run the scan
    leaves to the reader, a run it cannot prove free of repeats) and every run of an
    install without the C module is read into Arrow and checked by
    :func:`relgrade.protocol.pool.arm_candidates`, its ids in one DuckDB query
    (:mod:`relgrade.tables.pooling`), as before. A run naming an unknown id, by either way,
    is refused by :func:`relgrade.ranking.validate_run`, so the message is the same.

    Parameters
    ----------
    paths : mapping of str to path
        Arm name -> its run file (TREC, Parquet or JSON Lines, see
        :func:`relgrade.io.runtable.read_run_table`).
    depth, tail_sample, tail_depth, rng
        As :func:`relgrade.protocol.pool.build_pool` (params ``pool``; ``rng`` from
        ``stage_rng(seed, "pool")``).
    ties : {"score", "rank"}, default "score"
        Params ``runs.ties``.
    queries, chunks : array-like of str, optional
        The known query and chunk ids (pyarrow arrays, pandas Series, lists); a run naming
        another id is refused.
    known : tuple, optional
        ``queries`` and ``chunks`` as compiled tables (``_known_tables``), when the caller
        made them already; made here when None.

    Returns
    -------
    pool, provenance, stats
        As :func:`relgrade.protocol.pool.pool_tables` (the pool and the provenance as
        Arrow tables, the rows and columns of :func:`relgrade.protocol.pool.build_pool`).

    Raises
    ------
    InputError
        A run file is missing or unreadable, or a run breaks a rule of
        :func:`relgrade.ranking.validate_run` (naming the file, the query and the chunk).
        When several arms are bad, the first in ``paths``' order is named, whichever rule
        it breaks.
    """
    deepest = (tail_depth or depth) if tail_sample else depth
    check_ids = queries is not None or chunks is not None
    # the known ids as compiled tables, for the runs the scan reads (None: no C module, or
    # ids it cannot hold; those runs are then read and checked as any other)
    if known is None and any(_scannable(p) for p in paths.values()):
        known = _known_tables(queries, chunks)

    def load(item):
        arm, path = item
        try:
            if known is not None:
                got = _scanned_candidates(path, deepest, ties, known)
                if got is not None:
                    return got, None
            run = read_run_table(path)
            cut = pool.arm_candidates(run, deepest, ties=ties, path=path,
                                      lines=run_lines(path))
        except InputError as e:  # raised below, in the arms' order
            return None, e
        # the cut keeps every query's first row, so its query ids are the run's
        return (run["chunk_id"] if check_ids else None, cut, None), None

    # one thread per core: more threads parse more files at once, which costs memory and
    # system time (page faults) without finishing sooner
    threads = max(1, min(len(paths), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=threads) as workers:
        loaded = list(workers.map(load, paths.items()))
    # the arms before the first one that failed its own checks: one of them may name an
    # unknown id, and it comes first
    first_bad = next((i for i, (_, error) in enumerate(loaded) if error is not None),
                     len(loaded))
    # the scanned arms were checked against the known ids as they were read; the others
    # are checked in one DuckDB query
    unknown = {i for i, (got, _) in enumerate(loaded[:first_bad]) if got[2] is False}
    read = [i for i, (got, _) in enumerate(loaded[:first_bad]) if got[2] is None]
    if check_ids and read:
        from relgrade.tables.engine import connect
        from relgrade.tables.pooling import runs_naming_unknown_ids

        with connect() as con:
            unknown |= {read[j] for j in runs_naming_unknown_ids(
                con, query_ids=[loaded[i][0][1]["query_id"] for i in read],
                chunk_ids=[loaded[i][0][0] for i in read], queries=queries,
                chunks=chunks)}
    for i, ((arm, path), (got, error)) in enumerate(zip(paths.items(), loaded)):
        if error is not None:
            raise error
        if i in unknown:
            # the reference check names the first bad row, as every other reader of a run
            # sees it
            validate_run(read_run_table(path).to_pandas(), path=path, queries=queries,
                         chunks=chunks, lines=run_lines(path))
    stacked = {arm: got[1] for arm, (got, _) in zip(paths, loaded)}
    del loaded
    return pool.pool_tables(stacked, depth=depth, ties=ties, tail_sample=tail_sample,
                            tail_depth=tail_depth, rng=rng)


def _scannable(path) -> bool:
    """Whether ``path`` is read as a TREC run (any extension but JSON Lines and Parquet)."""
    return Path(path).suffix.lower() not in (".jsonl", ".ndjson", ".parquet")


def _known_tables(queries, chunks):
    """The known query and chunk ids as :class:`relgrade.io.trec_scan.KnownIds` (None
    where not given), or None when the C module is missing or a table cannot be made."""
    from relgrade.io.trec_scan import KnownIds, _kernels
    from relgrade.ranking import arrow_ids

    if _kernels() is None:
        return None
    tables = []
    for ids in (queries, chunks):
        if ids is None:
            tables.append(None)
            continue
        table = KnownIds.build(arrow_ids(ids))
        if table is None:
            return None
        tables.append(table)
    return tuple(tables)


def _scanned_candidates(path, deepest: int, ties: str, known):
    """One TREC run through the compiled scan: ``(None, cut, ids_known)``, where ``cut`` is
    :func:`relgrade.protocol.pool.arm_candidates`' table of the same run and
    ``ids_known`` whether every row names a known query and chunk (None: no id given to
    check); None when the run is not the scan's to pool (the caller reads it as before):
    not a TREC file, a line the scan does not take, or no proof that no chunk is listed
    twice for one query."""
    from relgrade.io.runcolumns import scanned_table
    from relgrade.io.trec_scan import scan_trec_run, scanned_ids_known

    if not _scannable(path):
        return None
    scanned = scan_trec_run(path)
    if scanned is None:
        return None
    table, codes = scanned_table(scanned)
    if not codes.distinct:
        return None  # a query in several blocks, or a chunk hash twice in one: the reader
    queries, chunks = known
    ids_known = None
    if queries is not None or chunks is not None:
        ids_known = scanned_ids_known(scanned, queries=queries, chunks=chunks)
    keep = pool.candidate_mask(codes.query, scanned.score, scanned.rank, deepest, ties=ties)
    return None, table.filter(arrow_array(keep)), ids_known


def pool_in_blocks(ex, paths, *, known, seed: int, arms, depth: int, tail_sample: int = 0,
                   tail_depth: int | None = None, ties: str = "score", rng=None) -> bool:
    """Pool TREC runs whose queries come in order, a block of queries at a time, and write
    the pool, provenance, manifest and statistics; False (nothing written) for runs that
    are not for this path, which the caller then pools whole.

    Each run is read through :func:`relgrade.io.trec_scan.scan_trec_blocks`, each block's
    rows checked as :func:`pool_files` checks a scanned run (no chunk twice for a query,
    every id known) and cut; the arms' blocks are merged by query, pooled by
    :class:`relgrade.protocol.pool.PoolBlocks` and written a row group at a time
    (:class:`relgrade.io.files.ParquetBlocks`), so the process holds one block of each
    run, one row group of each output and compact per-query statistics, never the runs
    or the pool. The files written are byte for byte those of :func:`pool_files`'s
    tables.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        Its ``pool``, ``provenance``, ``pool_manifest`` and ``pool_stats`` are written.
    paths : mapping of str to path
        Arm name -> its run file.
    known : tuple or None
        The query set's and the corpus's ids as compiled tables (``_known_tables`` of
        :func:`known_ids`); None (no C module): False.
    seed, arms
        Params ``seed`` and ``arms``, for the manifest.
    depth, tail_sample, tail_depth, ties, rng
        As :func:`pool_files`.

    Returns
    -------
    bool
        True when every output was written. False, with nothing written, when a run is
        not a TREC file the scan takes whole, its queries' ids are not in strictly
        ascending byte order (each query's rows one block), a block may list a chunk
        twice for a query, a row names an unknown id, or a param is out of range: the
        whole-run path then pools, or refuses with its own message.
    """
    deepest = (tail_depth or depth) if tail_sample else depth
    if known is None or not all(_scannable(p) for p in paths.values()):
        return False
    try:
        builder = pool.PoolBlocks(list(paths), depth=depth, ties=ties,
                                  tail_sample=tail_sample, tail_depth=tail_depth, rng=rng)
    except InputError:
        return False
    outputs = [ex.path("pool"), ex.path("provenance")]
    # the folders the writers make, removed again when the run is left to the whole path
    made = [f for f in dict.fromkeys(a for o in outputs for a in reversed(Path(o).parents))
            if not f.exists()]
    writers = []

    def abort():
        for w in writers:
            w.abort()
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass

    try:
        writers.extend(ParquetBlocks(o) for o in outputs)
        for block in _merged_blocks(paths, deepest, ties, known):
            if block is None:
                abort()
                return False
            for writer, table in zip(writers, builder.add(block)):
                writer.write(table)
    except InputError:
        # a folder that cannot be written, a param out of range: the whole path says so,
        # after any bad run
        abort()
        return False
    except BaseException:
        abort()
        raise
    for w in writers:
        w.close()
    write_json(ex.path("pool_manifest"), builder.manifest(
        seed=seed, depth=depth, tail_sample=tail_sample, tail_depth=tail_depth,
        arms=list(arms)))
    write_json(ex.path("pool_stats"), builder.stats())
    return True


#: Candidate rows the block path gathers before it pools a block (more when one arm's
#: block of the file holds more): fewer, larger blocks cost less per row, and the memory
#: they take does not grow with the runs.
BLOCK_ROWS = 1 << 18


def _merged_blocks(paths, deepest: int, ties: str, known):
    """The arms' candidate rows a block of queries at a time, in query order: dicts of arm
    -> Arrow table (every arm, in ``paths``' order), from :func:`_arm_blocks`; a None
    (and nothing after it) when a run is not for :func:`pool_in_blocks`. A block holds
    every query up to the least of the last queries the unfinished arms have read, with
    at least :data:`BLOCK_ROWS` rows read (or every row left)."""
    names = list(paths)
    streams = [_arm_blocks(paths[a], deepest, ties, known) for a in names]
    held: list[list] = [[] for _ in names]  # each arm's blocks read and not yet pooled
    done = [False] * len(names)
    empty: list = [None] * len(names)

    def read(i) -> bool:
        got = next(streams[i], False)
        if got is None or (got is False and empty[i] is None):
            return False  # not for this path (or a run without a row)
        if got is False:
            done[i] = True
        else:
            held[i].append(got)
            empty[i] = got[2].slice(0, 0)
        return True

    def last(i):
        return held[i][-1][0][len(held[i][-1][0]) - 1]

    while True:
        for i in range(len(names)):
            if not held[i] and not done[i] and not read(i):
                yield None
                return
        # more rows: the next block of the arm whose last query read is least
        while sum(b[2].num_rows for h in held for b in h) < BLOCK_ROWS:
            live = [i for i in range(len(names)) if not done[i]]
            if not live:
                break
            if not read(min(live, key=lambda i: last(i).as_py())):
                yield None
                return
        if not any(held):
            return
        # the queries up to the least of the last ones the unfinished arms hold are whole
        ends = [last(i) for i in range(len(names)) if held[i] and not done[i]]
        bound = min(ends, key=lambda q: q.as_py()) if ends else None
        block = {}
        for i, name in enumerate(names):
            parts, rest = [], []
            for qids, starts, table in held[i]:
                n = len(qids) if bound is None else int(
                    pc.sum(pc.less_equal(qids, bound)).as_py() or 0)
                parts.append(table.slice(0, int(starts[n])))
                if n < len(qids):
                    rest.append((qids.slice(n), starts[n:] - starts[n],
                                 table.slice(int(starts[n]))))
            held[i] = rest
            block[name] = (parts[0] if len(parts) == 1 else pa.concat_tables(parts)) \
                if parts else empty[i]
        yield block


def _arm_blocks(path, deepest: int, ties: str, known):
    """One TREC run's candidate rows a block of whole queries at a time:
    ``(query_ids, starts, table)``, the block's query ids (large_string, strictly
    ascending, each after the blocks' before), the first row of each in ``table`` (and
    its end), and the cut rows (:func:`relgrade.protocol.pool.candidate_mask`); None,
    and nothing after it, when the run is not for :func:`pool_in_blocks`."""
    from relgrade.io.runcolumns import scanned_table
    from relgrade.io.trec_scan import scan_trec_blocks, scanned_ids_known

    queries, chunks = known
    last = None
    for scanned in scan_trec_blocks(path):
        if scanned is None:
            yield None
            return
        table, codes = scanned_table(scanned)
        qids = codes.queries
        ascending = len(qids) < 2 or pc.all(pc.less(qids.slice(0, len(qids) - 1),
                                                    qids.slice(1))).as_py()
        if (not codes.distinct or not ascending
                or (last is not None and not pc.greater(qids[0], last).as_py())
                or not scanned_ids_known(scanned, queries=queries, chunks=chunks)):
            yield None
            return
        last = qids[len(qids) - 1]
        keep = pool.candidate_mask(codes.query, scanned.score, scanned.rank, deepest,
                                   ties=ties)
        starts = np.r_[0, np.cumsum(np.bincount(codes.query[keep], minlength=len(qids)))]
        del scanned, codes
        yield qids, starts, table.filter(arrow_array(keep))
