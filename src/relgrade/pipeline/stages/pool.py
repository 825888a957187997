"""Stage `pool`: every arm's run → the pool, its private provenance, manifest and statistics.

Each arm in params `arms` is read from `paths.runs/ARM.trec` straight into Arrow, checked
against the known query and chunk ids and cut to the rows that can reach the pooled ranks, in
one pass per arm (arms in parallel threads); those rows are then ranked canonically
(`runs.ties`) and pooled.
"""

from concurrent.futures import ThreadPoolExecutor

import pyarrow.compute as pc

from relgrade.io.files import read_table, write_json, write_parquet
from relgrade.io.runtable import read_run_table
from relgrade.protocol import pool
from relgrade.ranking import arrow_ids
from relgrade.rng import stage_rng


def run(ex):
    cfg, ties, seed = ex.params.need("pool"), ex.params.runs.ties, ex.params.need("seed")
    arms = ex.params.need("arms")
    deepest = (cfg.tail_depth or cfg.depth) if cfg.tail_sample else cfg.depth
    queries, chunks = (pc.unique(arrow_ids(read_table(ex.path(name), columns=[col])[col])
                                 .combine_chunks())
                       for name, col in (("queries", "query_id"), ("chunks", "chunk_id")))

    def load(arm):
        path = ex.path("runs") / f"{arm}.trec"
        return pool.arm_candidates(read_run_table(path), deepest, ties=ties, path=path,
                                   queries=queries, chunks=chunks)

    with ThreadPoolExecutor() as workers:
        stacked = dict(zip((str(a) for a in arms), workers.map(load, arms)))
    table, provenance, stats = pool.pool_candidates(
        stacked, depth=cfg.depth, ties=ties, tail_sample=cfg.tail_sample,
        tail_depth=cfg.tail_depth, rng=stage_rng(seed, "pool"))
    write_parquet(ex.path("pool"), table)
    write_parquet(ex.path("provenance"), provenance)
    write_json(ex.path("pool_manifest"), pool.pool_manifest(
        table, seed=seed, depth=cfg.depth, tail_sample=cfg.tail_sample,
        tail_depth=cfg.tail_depth, arms=list(arms)))
    write_json(ex.path("pool_stats"), stats)

