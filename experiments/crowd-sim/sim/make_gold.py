#!/usr/bin/env python3
"""Write the simulated crowd experiment's gold file from its pool and the truth.

Gold questions are pool pairs whose grade is known before the raters start; in a real
panel they come from an earlier frozen key or from adjudication. Here they are 23 pool
pairs drawn with a fixed seed, graded by the simulation's truth (data/input/truth.tsv): as
many as `gold.fraction` 0.40 of the 58 pool pairs asks for (round(0.4 * 58) = 23).
The gold file is private: it is written to data/private/gold.tsv, which git ignores and
DVC tracks (`dvc add`), so no rater reading the repository finds the answers.
Run after `dvc repro experiments/crowd-sim/dvc.yaml:pool`: python sim/make_gold.py
"""
import csv
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
N_GOLD, SEED = 23, 20261201


def main():
    pool = pd.read_parquet(DATA / "pool" / "pool.parquet", columns=["query_id", "chunk_id"])
    pool = pool.sort_values(["query_id", "chunk_id"]).reset_index(drop=True)
    truth = pd.read_csv(DATA / "input" / "truth.tsv", sep="\t", dtype={"grade": int})
    graded = pool.merge(truth, how="left", on=["query_id", "chunk_id"]).fillna({"grade": 0})
    pick = np.random.default_rng(SEED).choice(len(graded), size=N_GOLD, replace=False)
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
