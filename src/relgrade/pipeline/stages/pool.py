"""Stage `pool`: every arm's run → the pool, its private provenance, manifest and statistics.

Each arm in params `arms` is read from `paths.runs/ARM.trec` straight into Arrow, checked
against the known query and chunk ids and cut to the rows that can reach the pooled ranks, in
one pass per arm (arms in parallel threads); those rows are then ranked canonically
(`runs.ties`) and pooled.
"""

import os
from concurrent.futures import ThreadPoolExecutor

from relgrade.io.files import read_table, write_json, write_parquet
from relgrade.io.runtable import read_run_table
from relgrade.protocol import pool
from relgrade.rng import stage_rng


def run(ex):
    cfg, ties, seed = ex.params.need("pool"), ex.params.runs.ties, ex.params.need("seed")
    arms = ex.params.need("arms")
    queries, chunks = known_ids(ex)
    table, provenance, stats = pool_files(
        {str(arm): ex.path("runs") / f"{arm}.trec" for arm in arms}, depth=cfg.depth,
        tail_sample=cfg.tail_sample, tail_depth=cfg.tail_depth, ties=ties,
        rng=stage_rng(seed, "pool"), queries=queries, chunks=chunks)
    write_parquet(ex.path("pool"), table)
    write_parquet(ex.path("provenance"), provenance)
    write_json(ex.path("pool_manifest"), pool.pool_manifest(
        table, seed=seed, depth=cfg.depth, tail_sample=cfg.tail_sample,
        tail_depth=cfg.tail_depth, arms=list(arms)))
    write_json(ex.path("pool_stats"), stats)


def known_ids(ex):
    """The query ids of params ``paths.queries`` and the chunk ids of ``paths.chunks``, as
    two :class:`relgrade.protocol.pool.IdSet`: every run row must name known ones."""
    return tuple(pool.IdSet(read_table(ex.path(name), columns=[col])[col])
                 for name, col in (("queries", "query_id"), ("chunks", "chunk_id")))


def pool_files(paths, *, depth: int, tail_sample: int = 0, tail_depth: int | None = None,
               ties: str = "score", rng=None, queries=None, chunks=None):
    """Pool run files: each read into Arrow, checked and cut (one thread per core), then the
    candidates ranked and pooled.

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
    queries, chunks : relgrade.protocol.pool.IdSet, optional
        The known query and chunk ids; a run naming another id is refused.

    Returns
    -------
    pool, provenance, stats
        As :func:`relgrade.protocol.pool.build_pool`.

    Raises
    ------
    InputError
        A run file is missing or unreadable, or a run breaks a rule of
        :func:`relgrade.ranking.validate_run` (naming the file, the query and the chunk).
    """
    deepest = (tail_depth or depth) if tail_sample else depth

    def load(item):
        arm, path = item
        return pool.arm_candidates(read_run_table(path), deepest, ties=ties, path=path,
                                   queries=queries, chunks=chunks)

    # one thread per core: more threads parse more files at once, which costs memory and
    # system time (page faults) without finishing sooner
    threads = max(1, min(len(paths), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=threads) as workers:
        stacked = dict(zip(paths, workers.map(load, paths.items())))
    return pool.pool_candidates(stacked, depth=depth, ties=ties, tail_sample=tail_sample,
                                tail_depth=tail_depth, rng=rng)
