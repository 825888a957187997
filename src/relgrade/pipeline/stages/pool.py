"""Stage `pool`: every arm's run → the pool, its private provenance, manifest and statistics.

Each arm in params `arms` is read from `paths.runs/ARM.trec` and checked against the known
query and chunk ids; the rows that can reach the pooled ranks are then ranked canonically
(`runs.ties`) and pooled. Arms are read in parallel threads.
"""

from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from relgrade import ranking as runs
from relgrade.io.files import read_table, write_json, write_parquet
from relgrade.io.runs import read_run
from relgrade.protocol import pool
from relgrade.rng import stage_rng


def run(ex):
    cfg, ties, seed = ex.params.need("pool"), ex.params.runs.ties, ex.params.need("seed")
    arms = ex.params.need("arms")
    deepest = (cfg.tail_depth or cfg.depth) if cfg.tail_sample else cfg.depth
    queries = read_table(ex.path("queries"), columns=["query_id"])["query_id"]
    chunks = read_table(ex.path("chunks"), columns=["chunk_id"])["chunk_id"]

    def load(arm):
        path = ex.path("runs") / f"{arm}.trec"
        run = read_run(path)
        runs.validate_run(run, path=path, queries=queries, chunks=chunks)
        return pool.top_candidates(run, deepest, ties=ties).assign(arm=str(arm))

    with ThreadPoolExecutor() as workers:
        stacked = list(workers.map(load, arms))
    table, provenance, stats = pool.build_pool(
        runs.canonical_ranking(pd.concat(stacked, ignore_index=True), ties=ties),
        depth=cfg.depth, tail_sample=cfg.tail_sample, tail_depth=cfg.tail_depth,
        rng=stage_rng(seed, "pool"))
    write_parquet(ex.path("pool"), table)
    write_parquet(ex.path("provenance"), provenance)
    write_json(ex.path("pool_manifest"), pool.pool_manifest(
        table, seed=seed, depth=cfg.depth, tail_sample=cfg.tail_sample,
        tail_depth=cfg.tail_depth, arms=list(arms)))
    write_json(ex.path("pool_stats"), stats)

