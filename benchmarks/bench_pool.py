"""Pooling speed, side by side: relgrade, DuckDB and plain pandas on workload (a).

    python benchmarks/generate.py --seed 7 --only pooling
    python benchmarks/bench_pool.py [--data benchmarks/data/pooling] [--depth 10] [--repeat 5]

Workload (a) is 5,000 queries x 10 arms x depth 100 (about 5M run rows), one run per arm as
TREC text and as Parquet. The pool is every arm's top ``--depth`` per query, deduplicated,
ranked the trec_eval way (score descending, then chunk id descending). Every contender's
pool must hold the same pairs; the script stops if they differ.

Contenders (wall clock, best of ``--repeat`` rounds; the rounds interleave the contenders so
a busy machine slows them alike):

* relgrade, Parquet: what ``stages/pool.py`` does after reading the id tables: per arm (in
  threads) ``read_run`` and ``pool.top_candidates``; then ``runs.canonical_ranking`` of
  the stacked candidates and ``pool.build_pool`` (pool, provenance and statistics);
* relgrade, Parquet + validation: the same with ``runs.validate_run`` on every full run
  (duplicates and non-finite scores; the stage also checks ids against queries and chunks);
* relgrade, TREC end to end: as the previous, reading the TREC files;
* DuckDB, Parquet / TREC: ``row_number() OVER (PARTITION BY arm, query ORDER BY score DESC,
  chunk_id DESC) <= depth`` with ``QUALIFY``, then ``DISTINCT``, fetched as a DataFrame;
* pandas, Parquet: ``read_parquet``, ``concat``, ``sort_values`` on the four keys,
  ``groupby(...).head(depth)``, ``drop_duplicates``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from relgrade import ranking as runs
from relgrade.io.runs import read_run
from relgrade.protocol import pool


def relgrade_pool(folder: Path, arms: list[str], suffix: str, depth: int, *,
                  validate: bool) -> pd.DataFrame:
    def load(arm):
        run = read_run(folder / f"{arm}{suffix}")
        if validate:
            runs.validate_run(run, path=folder / f"{arm}{suffix}")
        return pool.top_candidates(run, depth).assign(arm=arm)

    with ThreadPoolExecutor() as workers:
        stacked = list(workers.map(load, arms))
    ranked = runs.canonical_ranking(pd.concat(stacked, ignore_index=True))
    return pool.build_pool(ranked, depth=depth)[0]


def relgrade_steps(folder: Path, arms: list[str], depth: int) -> dict[str, float]:
    """Seconds per step of the Parquet path, single-threaded, for the breakdown."""
    out = {}
    t = time.perf_counter()
    read = [read_run(folder / f"{a}.parquet") for a in arms]
    out["read_run (10 Parquet files)"] = time.perf_counter() - t
    t = time.perf_counter()
    for r in read:
        runs.validate_run(r)
    out["validate_run (5M rows)"] = time.perf_counter() - t
    t = time.perf_counter()
    cut = [pool.top_candidates(r, depth).assign(arm=a) for r, a in zip(read, arms)]
    stacked = pd.concat(cut, ignore_index=True)
    out[f"top_candidates + concat ({len(stacked):,} rows kept)"] = time.perf_counter() - t
    t = time.perf_counter()
    ranked = runs.canonical_ranking(stacked)
    out["canonical_ranking of the kept rows"] = time.perf_counter() - t
    t = time.perf_counter()
    table = pool.build_pool(ranked, depth=depth)[0]
    out["build_pool (pool, provenance, stats)"] = time.perf_counter() - t
    t = time.perf_counter()
    pool.pool_version(table)
    out["pool_version (sha256 of canonical JSONL)"] = time.perf_counter() - t
    return out


DUCKDB_SQL = """
SELECT DISTINCT query_id, chunk_id FROM ({source})
QUALIFY row_number() OVER (PARTITION BY arm, query_id
                           ORDER BY score DESC, chunk_id DESC) <= {depth}
"""


def duckdb_pool(folder: Path, depth: int, fmt: str) -> pd.DataFrame:
    import duckdb

    if fmt == "parquet":
        source = (f"SELECT regexp_extract(filename, '([^/]+)[.]parquet$', 1) AS arm, query_id, "
                  f"chunk_id, score FROM read_parquet('{folder}/*.parquet', filename = true)")
    else:
        source = (f"SELECT column5 AS arm, column0 AS query_id, column2 AS chunk_id, "
                  f"column4 AS score FROM read_csv('{folder}/*.trec', delim = ' ', "
                  f"header = false, columns = {{'column0': 'VARCHAR', 'column1': 'VARCHAR', "
                  f"'column2': 'VARCHAR', 'column3': 'BIGINT', 'column4': 'DOUBLE', "
                  f"'column5': 'VARCHAR'}})")
    with duckdb.connect() as con:
        return con.execute(DUCKDB_SQL.format(source=source, depth=depth)).df()


def pandas_pool(folder: Path, arms: list[str], depth: int) -> pd.DataFrame:
    df = pd.concat([pd.read_parquet(folder / f"{a}.parquet").assign(arm=a) for a in arms],
                   ignore_index=True)
    df = df.sort_values(["arm", "query_id", "score", "chunk_id"],
                        ascending=[True, True, False, False])
    top = df.groupby(["arm", "query_id"], sort=False).head(depth)
    return top[["query_id", "chunk_id"]].drop_duplicates()


def pairs(df: pd.DataFrame) -> set:
    return set(zip(df["query_id"].astype(str), df["chunk_id"].astype(str)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/pooling"))
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    folder = args.data / "runs"
    arms = sorted(p.stem for p in folder.glob("*.parquet"))
    if not arms:
        print(f"no runs in {folder}: run benchmarks/generate.py first", file=sys.stderr)
        return 1
    rows = sum(len(pd.read_parquet(folder / f"{a}.parquet", columns=["rank"])) for a in arms)

    contenders = {
        "relgrade, Parquet": lambda: relgrade_pool(folder, arms, ".parquet", args.depth,
                                                    validate=False),
        "relgrade, Parquet + validation": lambda: relgrade_pool(folder, arms, ".parquet",
                                                                 args.depth, validate=True),
        "relgrade, TREC end to end": lambda: relgrade_pool(folder, arms, ".trec", args.depth,
                                                            validate=True),
        "DuckDB, Parquet": lambda: duckdb_pool(folder, args.depth, "parquet"),
        "DuckDB, TREC": lambda: duckdb_pool(folder, args.depth, "trec"),
        "pandas, Parquet": lambda: pandas_pool(folder, arms, args.depth),
    }
    times = {name: [] for name in contenders}
    reference = None
    for _ in range(args.repeat):
        for name, fn in contenders.items():
            t = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - t)
            got = pairs(result)
            if reference is None:
                reference = got
            elif got != reference:
                print(f"{name}: pool differs ({len(got):,} vs {len(reference):,} pairs)",
                      file=sys.stderr)
                return 1

    duck = min(times["DuckDB, Parquet"])
    print(f"workload (a): {len(arms)} arms, {rows:,} run rows, depth {args.depth}, "
          f"{len(reference):,} pooled pairs; best of {args.repeat}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}")
    print(f"{'contender':34} {'best s':>7} {'median s':>9} {'x DuckDB':>9}")
    for name, ts in times.items():
        print(f"{name:34} {min(ts):7.2f} {np.median(ts):9.2f} {min(ts) / duck:9.2f}")
    print("\nrelgrade, Parquet, step by step (one thread, one round):")
    for step, seconds in relgrade_steps(folder, arms, args.depth).items():
        print(f"  {step:48} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
