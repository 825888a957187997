#!/usr/bin/env python3
"""Write the simulated crowd experiment's gold file from its pool and the truth.

Gold questions are pool pairs whose grade is known before the raters start; in a real
panel they come from an earlier frozen key or from adjudication. Here they are
round(`gold.fraction` x pool pairs) pool pairs (params.yaml beside sim/; 0.40 of the 160 pool
pairs: 64) drawn with a fixed seed, graded by the simulation's truth (data/input/truth.tsv,
a pair not listed there is 0).
The gold file is private: it is written to data/private/gold.tsv, which git ignores and
DVC tracks (`dvc add`), so no rater reading the repository finds the answers.
Run after `dvc repro experiments/crowd-sim/dvc.yaml:pool`: python sim/make_gold.py
"""
import csv
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
SEED = 20261201


def n_gold(n_pairs: int) -> int:
    """How many gold pairs params ``gold.fraction`` asks of a pool of ``n_pairs`` pairs."""
    params = yaml.safe_load((HERE.parent / "params.yaml").read_text(encoding="utf-8"))
    return int(round(float(params["gold"]["fraction"]) * n_pairs))


def main():
    pool = pd.read_parquet(DATA / "pool" / "pool.parquet", columns=["query_id", "chunk_id"])
    pool = pool.sort_values(["query_id", "chunk_id"]).reset_index(drop=True)
    truth = pd.read_csv(DATA / "input" / "truth.tsv", sep="\t", dtype={"grade": int})
    graded = pool.merge(truth, how="left", on=["query_id", "chunk_id"]).fillna({"grade": 0})
    pick = np.random.default_rng(SEED).choice(len(graded), size=n_gold(len(graded)), replace=False)
    gold = graded.iloc[sorted(pick)]
    out = DATA / "private" / "gold.tsv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "chunk_id", "grade"])
        for q, c, g in zip(gold["query_id"], gold["chunk_id"], gold["grade"]):
            w.writerow([q, c, int(g)])


if __name__ == "__main__":
    main()
