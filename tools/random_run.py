#!/usr/bin/env python3
"""Write a seeded random ranking of an experiment's corpus as a `file` arm's run.

A deliberately weak retrieval system, for an experiment that needs an arm known to be worse
than its real ones: for every query of the query set, every chunk of the corpus in a
uniformly random order, the first ``depth`` kept (``depth`` of the arm in params). The order
of query Q is a permutation drawn by ``numpy.random.default_rng(derive_seed(seed,
"random-arm", ARM, Q))`` over the chunk ids sorted as text, with ``seed`` the experiment's
params ``seed`` (relgrade.rng.derive_seed), so a query's ranking depends on neither the
other queries nor the machine. Rank r gets score ``depth + 1 - r``.

It reads the corpus and query set the experiment's `corpus` and `queries` stages wrote
(params ``paths.chunks`` and ``paths.queries``), so run those stages first; it writes a TREC
run to the arm's ``source`` (a path relative to the experiment folder), which the `retrieve`
stage then reads and checks like any external run.

Usage: python tools/random_run.py EXPERIMENT_FOLDER ARM

Errors: the arm is not declared or is not ``kind: file``; a stage output is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.io.files import read_table
from relgrade.io.trec import write_trec_run
from relgrade.rng import derive_seed


def random_run(chunk_ids, query_ids, *, seed: int, arm: str, depth: int) -> pd.DataFrame:
    """The random ranking: columns query_id, chunk_id, rank (1..depth), score (float64).

    ``chunk_ids`` and ``query_ids`` are sequences of str; each query gets
    ``min(depth, len(chunk_ids))`` rows, queries in sorted order.
    """
    chunks = np.array(sorted(str(c) for c in chunk_ids), dtype=object)
    k = min(int(depth), chunks.size)
    rows = []
    for q in sorted(str(x) for x in query_ids):
        rng = np.random.default_rng(derive_seed(seed, "random-arm", arm, q))
        order = rng.permutation(chunks.size)[:k]
        for r, i in enumerate(order, start=1):
            rows.append((q, chunks[i], r, float(k + 1 - r)))
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "rank", "score"])


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: python tools/random_run.py EXPERIMENT_FOLDER ARM")
    folder, arm = Path(argv[0]), argv[1]
    ex = Experiment.load(folder / "params.yaml")
    config = ex.params.arms_dict().get(arm)
    if config is None or config["kind"] != "file":
        raise InputError("not a `file` arm of this experiment", path=ex.params.source,
                         item=f"arms.{arm}", fix="declare it with kind: file and a source")
    chunks = read_table(ex.path("chunks"), columns=["chunk_id"])
    queries = read_table(ex.path("queries"), columns=["query_id"])
    run = random_run(chunks["chunk_id"].astype(str), queries["query_id"].astype(str),
                     seed=int(ex.params.seed), arm=arm, depth=int(config["depth"]))
    out = ex.file(config["source"])
    out.parent.mkdir(parents=True, exist_ok=True)
    write_trec_run(out, run, tag=arm)
    print(f"{out}: {run.query_id.nunique()} queries, {len(run)} rows")


if __name__ == "__main__":
    main(sys.argv[1:])
