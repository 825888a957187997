"""Coverage of the propensity intervals over seeded simulations (not a timing benchmark).

    python benchmarks/coverage_clicks.py --sims 60            # writes benchmarks/out/coverage_clicks.json

Each simulation draws a fresh log under the position-based model with p(k) = 1/k, shaped like
bench_clicks.py's 20M log but smaller (SESSIONS sessions, QUERIES queries of CANDIDATES
chunks, three rankers differing by adjacent swaps with probability 0.3, a FairPairs slice), and
estimates the curve by randomization and by harvesting with 95% percentile intervals. The
script counts, per method and position, how often the interval holds the true 1/k, and how
often a simulation misses at least one position; it also records the mean relative error of
each position (the estimator's bias, which an interval cannot absorb once the log is large).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from relgrade.clicks import ClickLog, simulate
from relgrade.clicks import propensity as PR

SESSIONS = 100_000
QUERIES = 1_000
CANDIDATES = 20
POSITIONS = 10
RANKERS = 3
RANDOMIZED_SHARE = 0.05
N_BOOT = 400


def simulated_log(seed: int, sessions: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, POSITIONS + 1)
    relevance = rng.uniform(0.05, 0.9, size=(QUERIES, CANDIDATES))
    lists = simulate.ranker_lists(rng, queries=QUERIES, chunks=CANDIDATES, positions=POSITIONS,
                                  rankers=RANKERS)
    q = rng.integers(0, QUERIES, sessions)
    rk = rng.integers(0, RANKERS, sessions)
    shown, flagged = simulate.fair_pairs(lists[q, rk], rng, share=RANDOMIZED_SHARE)
    clicked = rng.random((sessions, POSITIONS)) < p[None, :] * relevance[q[:, None], shown]
    return pd.DataFrame({
        "session_id": np.repeat(np.arange(sessions), POSITIONS).astype(str),
        "query_id": np.repeat(q, POSITIONS).astype(str),
        "chunk_id": (np.repeat(q, POSITIONS) * CANDIDATES + shown.ravel()).astype(str),
        "position": np.tile(np.arange(1, POSITIONS + 1), sessions),
        "clicked": clicked.ravel().astype(np.int64),
        "ranker": np.repeat(rk, POSITIONS).astype(str),
        "randomized": flagged.ravel(),
    })


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=60)
    ap.add_argument("--sessions", type=int, default=SESSIONS)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/coverage_clicks.json"))
    args = ap.parse_args(argv)
    truth = 1.0 / np.arange(1, POSITIONS + 1)
    result = {}
    for method in PR.METHODS:
        covered = np.zeros(POSITIONS, dtype=int)
        any_miss = 0
        rel_err = np.zeros(POSITIONS)
        width = np.zeros(POSITIONS)
        for s in range(args.sims):
            log = ClickLog.from_frame(simulated_log(1000 + s, args.sessions))
            curve = PR.estimate(log, method=method, rng=np.random.default_rng(s),
                                max_position=POSITIONS, n_boot=N_BOOT, level=0.95)
            t = curve.table
            hit = (t["ci_low"] <= truth) & (truth <= t["ci_high"])
            covered += hit.to_numpy()
            any_miss += not hit[1:].all()
            rel_err += (t["propensity"].to_numpy() / truth - 1)
            width += (t["ci_high"] - t["ci_low"]).to_numpy()
        result[method] = {
            "coverage": (covered / args.sims).round(3).tolist(),
            "simulations_missing_any_position": any_miss,
            "mean_relative_error": (rel_err / args.sims).round(4).tolist(),
            "mean_interval_width": (width / args.sims).round(4).tolist(),
        }
        print(method, result[method])
    doc = {"sims": args.sims, "sessions": args.sessions, "queries": QUERIES,
           "candidates": CANDIDATES, "positions": POSITIONS, "rankers": RANKERS,
           "randomized_share": RANDOMIZED_SHARE, "n_boot": N_BOOT, "level": 0.95,
           "result": result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
