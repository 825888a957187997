#!/usr/bin/env python3
"""SIMULATED triage model grader of experiments/triage-sim: a seeded stand-in for an LLM.

relgrade runs it as a command grader (`relgrade grade run --grader model-t`): one batch
request as JSON on stdin, one JSON grade row per chunk on stdout. It grades from the known
truth in data/input/truth.jsonl (a pair not listed there is truly 0) and errs on purpose:

- a truly relevant pair (truth >= 1) is graded 0 with probability ``--miss``;
- a truly irrelevant pair is graded 1 with probability ``--false-alarm``;
- otherwise it gives the true grade.

Each pair's draw is ``sha256(seed, query_id, chunk_id)`` read as a number in [0, 1), so the
grades do not depend on batching, order or worker count, and ``--seed`` reproduces them.
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

TRUTH = Path(__file__).resolve().parent / "data" / "input" / "truth.jsonl"


def draw(seed: int, query_id: str, chunk_id: str) -> float:
    """The pair's uniform draw in [0, 1), from sha256 of the seed and the pair."""
    digest = hashlib.sha256(json.dumps([seed, query_id, chunk_id]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def grade(truth: int, u: float, *, miss: float, false_alarm: float) -> int:
    """The simulated model's grade of a pair with true grade ``truth`` and draw ``u``."""
    if truth >= 1:
        return 0 if u < miss else truth
    return 1 if u < false_alarm else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--miss", type=float, required=True)
    ap.add_argument("--false-alarm", type=float, required=True)
    args = ap.parse_args()
    truth = {}
    for line in TRUTH.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        truth[(row["query_id"], row["chunk_id"])] = int(row["grade"])
    req = json.loads(sys.stdin.read())
    qid = req["query_id"]
    for c in req["chunks"]:
        t = truth.get((qid, c["chunk_id"]), 0)
        g = grade(t, draw(args.seed, qid, c["chunk_id"]), miss=args.miss,
                  false_alarm=args.false_alarm)
        print(json.dumps({"query_id": qid, "chunk_id": c["chunk_id"],
                          "reason": f"simulated model grade {g}", "grade": g}))


if __name__ == "__main__":
    main()
