#!/usr/bin/env python3
"""SIMULATED person of experiments/ppi-sim: person-h, the auditor, grading the human sample.

relgrade runs it as a command grader (`relgrade grade run --grader person-h`): one batch
request as JSON on stdin, one JSON grade row per chunk on stdout. It grades the known truth
(simgrade.py: the default experiment's frozen key; a pair not in it is truly 0) with the
slips of a careful person, one grade at most, about as often up as down on this pool:

- a true 0 is graded 1 with probability ``--up0``;
- a true 1 is graded 0 with probability ``--down1`` and 2 with probability ``--up1``;
- a true 2 is graded 1 with probability ``--down2``.

With the defaults and ``--seed 3`` its quadratic weighted kappa against the truth on the
521 pool pairs is 0.817 and its mean grade minus the truth +0.025. Each pair's draws are
sha256 of the seed, a tag and the pair, so the grades do not depend on batching or order.
"""

import argparse
import json
import sys

from simgrade import confuse, draw, emit, truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--up0", type=float, default=0.08)
    ap.add_argument("--down1", type=float, default=0.25)
    ap.add_argument("--up1", type=float, default=0.10)
    ap.add_argument("--down2", type=float, default=0.25)
    args = ap.parse_args()
    known = truth()
    req = json.loads(sys.stdin.read())
    qid = req["query_id"]
    for c in req["chunks"]:
        cid = c["chunk_id"]
        g = confuse(known.get((qid, cid), 0), draw(args.seed, "noise", qid, cid),
                    draw(args.seed, "way", qid, cid), up={0: args.up0, 1: args.up1},
                    down={1: args.down1, 2: args.down2})
        emit(qid, cid, g, f"simulated careful reading gives grade {g}")


if __name__ == "__main__":
    main()
