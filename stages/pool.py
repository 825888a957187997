"""Stage `pool`: every arm's run → the pool, its private provenance, manifest and statistics.

Each arm in params `arms` is read from `paths.runs/ARM.trec` and checked against the known
query and chunk ids; the rows that can reach the pooled ranks are then ranked canonically
(`runs.ties`) and pooled. Arms are read in parallel threads.
"""

from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from relgrade import ranking as runs
from relgrade.experiment.stage import path_of, run_stage, section
from relgrade.io.files import read_table, write_json, write_parquet
from relgrade.io.runs import read_run
from relgrade.protocol import pool
from relgrade.rng import stage_rng


def main(params):
    cfg, ties = section(params, "pool"), section(params, "runs")["ties"]
    deepest = (cfg.get("tail_depth") or cfg["depth"]) if cfg.get("tail_sample", 0) else cfg["depth"]
    queries = read_table(path_of(params, "queries"), columns=["query_id"])["query_id"]
    chunks = read_table(path_of(params, "chunks"), columns=["chunk_id"])["chunk_id"]

    def load(arm):
        path = path_of(params, "runs") / f"{arm}.trec"
        run = read_run(path)
        runs.validate_run(run, path=path, queries=queries, chunks=chunks)
        return pool.top_candidates(run, deepest, ties=ties).assign(arm=str(arm))

    with ThreadPoolExecutor() as workers:
        stacked = list(workers.map(load, section(params, "arms")))
    table, provenance, stats = pool.build_pool(
        runs.canonical_ranking(pd.concat(stacked, ignore_index=True), ties=ties),
        depth=cfg["depth"], tail_sample=cfg.get("tail_sample", 0),
        tail_depth=cfg.get("tail_depth"), rng=stage_rng(params["seed"], "pool"))
    write_parquet(path_of(params, "pool"), table)
    write_parquet(path_of(params, "provenance"), provenance)
    write_json(path_of(params, "pool_manifest"), pool.pool_manifest(
        table, seed=params["seed"], depth=cfg["depth"], tail_sample=cfg.get("tail_sample", 0),
        tail_depth=cfg.get("tail_depth"), arms=params["arms"]))
    write_json(path_of(params, "pool_stats"), stats)


if __name__ == "__main__":
    run_stage(main)
