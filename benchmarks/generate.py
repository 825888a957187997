"""Write the benchmark workloads: seeded synthetic runs and qrels, as TREC text and Parquet.

    python benchmarks/generate.py --seed 7 --out benchmarks/data

Two workloads, each arm's run in both formats:

* ``pooling/``: 5,000 queries x 10 arms x depth 100 (5M run rows);
* ``metrics/``: 10,000 queries x 10 arms x depth 100 (10M run rows) and qrels with 20
  graded chunks per query (grades 0-2), written as ``qrels.trec`` and ``qrels.parquet``.

Each query has a fixed candidate set of 400 chunks drawn from a 2^21-chunk corpus; its first
20 candidates are graded. An arm scores every candidate as quality x latent grade + normal
noise, rounds scores to 3 decimals (so ties occur, as with BM25) and keeps the top 100. Each
arm leaves out about 0.5% of the queries. Query ids are decimal numbers ("1".."10000"), so
their file order is not their byte order; chunk ids look like ``doc1234567``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from relgrade.io.files import write_parquet
from relgrade.io.trec import write_trec_qrels, write_trec_run

CORPUS_BITS = 21
CANDIDATES = 400
GRADED = 20
GRADE_P = (0.5, 0.3, 0.2)


def candidates(rng: np.random.Generator, n_queries: int) -> np.ndarray:
    """Distinct chunk numbers per query, shape (n_queries, CANDIDATES), int64.

    (start + j * stride) mod 2^21 with an odd stride visits 2^21 distinct values before it
    repeats, so every row is free of duplicates without a per-query loop.
    """
    n = 1 << CORPUS_BITS
    start = rng.integers(0, n, size=(n_queries, 1))
    stride = 2 * rng.integers(1, n // 2, size=(n_queries, 1)) + 1
    j = np.arange(CANDIDATES)[None, :]
    return (start + j * stride) % n


def arm_run(rng: np.random.Generator, cand: np.ndarray, latent: np.ndarray, quality: float,
            depth: int, query_ids: np.ndarray) -> pd.DataFrame:
    """One arm's run: the top ``depth`` candidates of each answered query by noisy score."""
    n_queries = cand.shape[0]
    score = np.round(quality * latent + rng.normal(size=cand.shape), 3)
    top = np.argsort(-score, axis=1, kind="stable")[:, :depth]
    chunk = np.take_along_axis(cand, top, axis=1)
    top_score = np.take_along_axis(score, top, axis=1)
    answered = rng.random(n_queries) >= 0.005
    q = np.repeat(np.flatnonzero(answered), depth)
    return pd.DataFrame({
        "query_id": pd.Series(query_ids[q], dtype="str"),
        "chunk_id": pd.Series(np.char.add("doc", chunk[answered].ravel().astype(str)),
                              dtype="str"),
        "rank": np.tile(np.arange(1, depth + 1, dtype=np.int64), int(answered.sum())),
        "score": top_score[answered].ravel(),
    })


def workload(rng: np.random.Generator, out: Path, n_queries: int, n_arms: int, depth: int,
             with_qrels: bool) -> int:
    """Write one workload; return the number of run rows written."""
    query_ids = np.array([str(i) for i in range(1, n_queries + 1)], dtype=object)
    cand = candidates(rng, n_queries)
    latent = np.zeros(cand.shape)
    grades = rng.choice(len(GRADE_P), p=GRADE_P, size=(n_queries, GRADED))
    latent[:, :GRADED] = grades
    if with_qrels:
        qrels = pd.DataFrame({
            "query_id": pd.Series(np.repeat(query_ids, GRADED), dtype="str"),
            "chunk_id": pd.Series(np.char.add("doc", cand[:, :GRADED].ravel().astype(str)),
                                  dtype="str"),
            "grade": grades.ravel().astype(np.int64),
        })
        write_trec_qrels(out / "qrels.trec", qrels)
        write_parquet(out / "qrels.parquet", qrels)
    rows = 0
    for a in range(n_arms):
        name = f"arm{a + 1:02d}"
        quality = 0.3 + 1.2 * a / max(n_arms - 1, 1)
        run = arm_run(rng, cand, latent, quality, depth, query_ids)
        write_trec_run(out / "runs" / f"{name}.trec", run, tag=name)
        write_parquet(out / "runs" / f"{name}.parquet", run)
        rows += len(run)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/data"))
    ap.add_argument("--only", choices=["pooling", "metrics"], default=None)
    args = ap.parse_args(argv)
    plan = [("pooling", 5_000, 10, 100, False), ("metrics", 10_000, 10, 100, True)]
    for i, (name, n_queries, n_arms, depth, with_qrels) in enumerate(plan):
        if args.only not in (None, name):
            continue
        # each workload draws from its own stream, so --only writes the same files
        rng = np.random.default_rng([args.seed, i])
        t = time.perf_counter()
        rows = workload(rng, args.out / name, n_queries, n_arms, depth, with_qrels)
        print(f"{name}: {rows:,} run rows in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
