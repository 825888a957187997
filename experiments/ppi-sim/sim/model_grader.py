#!/usr/bin/env python3
"""SIMULATED model grader of experiments/ppi-sim: a seeded, lenient stand-in for an LLM.

relgrade runs it as a command grader (`relgrade grade run --grader model-m`): one batch
request as JSON on stdin, one JSON grade row per chunk on stdout. It grades every pool pair
from the known truth (simgrade.py: the default experiment's frozen key; a pair not in it is
truly 0) and errs on purpose, in two steps:

1. noise, one grade at most: a true 0 becomes 1 with probability ``--up0``; a true 1 becomes
   0 with ``--down1`` or 2 with ``--up1``; a true 2 becomes 1 with ``--down2``;
2. leniency: the grade rises by one (at most to 2) with probability ``--leniency``, plus
   ``--affinity`` for a pair the arm of its own family retrieved (``--family-arm``, tfidf:
   the pairs in that arm's top ``--depth`` in data/runs/ARM.trec, ranked by score, then
   chunk id descending, as the pool ranks them).

With the defaults and ``--seed 7``, on the 521 pool pairs: quadratic weighted kappa 0.465
against the truth, mean grade minus the truth +0.33 on pairs tfidf did not retrieve and
+0.48 on those it did. Reading the run is the simulation's device for a family affinity; a
real grader sees only its packet. Each pair's draws are sha256 of the seed, a tag and the
pair, so the grades do not depend on batching or order.
"""

import argparse
import json
import sys
from collections import defaultdict

from simgrade import HERE, confuse, draw, emit, truth


def top_pairs(arm: str, depth: int) -> set:
    """The (query_id, chunk_id) pairs in ``arm``'s top ``depth`` of its TREC run."""
    ranked = defaultdict(list)
    run = HERE.parent / "data" / "runs" / f"{arm}.trec"
    for line in run.read_text(encoding="utf-8").splitlines():
        qid, _, cid, _, score, _ = line.split()
        ranked[qid].append((float(score), cid))
    out = set()
    for qid, rows in ranked.items():
        for _, cid in sorted(rows, reverse=True)[:depth]:
            out.add((qid, cid))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--up0", type=float, default=0.15)
    ap.add_argument("--down1", type=float, default=0.40)
    ap.add_argument("--up1", type=float, default=0.20)
    ap.add_argument("--down2", type=float, default=0.50)
    ap.add_argument("--leniency", type=float, default=0.3)
    ap.add_argument("--affinity", type=float, default=0.2)
    ap.add_argument("--family-arm", default="tfidf")
    ap.add_argument("--depth", type=int, default=10)
    args = ap.parse_args()
    known = truth()
    favoured = top_pairs(args.family_arm, args.depth)
    req = json.loads(sys.stdin.read())
    qid = req["query_id"]
    for c in req["chunks"]:
        cid = c["chunk_id"]
        g = confuse(known.get((qid, cid), 0), draw(args.seed, "noise", qid, cid),
                    draw(args.seed, "way", qid, cid), up={0: args.up0, 1: args.up1},
                    down={1: args.down1, 2: args.down2})
        bump = args.leniency + (args.affinity if (qid, cid) in favoured else 0.0)
        if draw(args.seed, "lenient", qid, cid) < bump:
            g = min(2, g + 1)
        emit(qid, cid, g, f"simulated model reading gives grade {g}")


if __name__ == "__main__":
    main()
