#!/usr/bin/env python3
"""A simulated grader, run by `relgrade grade run` as a command grader: python rater.py NAME.

It reads one batch request on stdin and writes one grade row per chunk. Its grade of a pair
is drawn from its confusion-matrix row of the pair's true grade (crowd.yaml, truth.tsv: a
pair not in truth.tsv is truth 0), with a generator seeded from sha256(seed, NAME, query id,
chunk id): the same grader gives the same pair the same grade in every run and in any batch.
It never sees which pairs are gold.
"""
import csv
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent


def truth_table():
    with open(HERE.parent / "data" / "input" / "truth.tsv", encoding="utf-8") as f:
        return {(r["query_id"], r["chunk_id"]): int(r["grade"])
                for r in csv.DictReader(f, delimiter="\t")}


def simulated_grade(seed, name, query_id, chunk_id, true, matrix):
    digest = hashlib.sha256(f"{seed}|{name}|{query_id}|{chunk_id}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    return int(rng.choice(len(matrix[true]), p=matrix[true]))


def main():
    name = sys.argv[1]
    crowd = yaml.safe_load((HERE / "crowd.yaml").read_text(encoding="utf-8"))
    matrix = crowd["graders"][name]
    truth = truth_table()
    req = json.loads(sys.stdin.read())
    for c in req["chunks"]:
        true = truth.get((req["query_id"], c["chunk_id"]), 0)
        grade = simulated_grade(crowd["seed"], name, req["query_id"], c["chunk_id"], true,
                                matrix)
        print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                          "reason": f"simulated grader {name}: grade drawn from its confusion row",
                          "grade": grade}))


if __name__ == "__main__":
    main()
