"""Known-truth simulation of the anytime stopping rule for human grading.

Each replicate draws a population of ``queries`` queries (the pooled queries of an experiment).
A query has a difficulty ``u ~ Beta(2, 2)``; the baseline arm's value is ``u + e_0`` and arm
``j``'s is ``u + effect_j + e_j``, ``e ~ N(0, sd)``, each cut to [0, 1] (a per-query measure
such as nDCG@10 under the human key). The estimand of comparison ``j`` is the population's mean
of arm ``j`` minus baseline (what people grading every query would give).

People grade a uniform sample of ``sample`` queries (the fixed plan: the ppi human sample) in
a seeded random order. Two analyses of the same replicate:

* **fixed sample**: all ``sample`` queries, Holm over paired t-tests (the human-only verdicts);
* **anytime**: :func:`relgrade.evaluation.anytime.run_stop`, the hedged betting confidence
  sequence (sampling without replacement from the population) per comparison, Holm over the
  anytime p-values, equivalence when the simultaneous sequence lies within ``margin``; the
  rule looks after every ``batch`` queries and stops once every verdict is settled.

Reported: coverage of each comparison's sequence (level ``level``) at the stopping time and
of all of them at once; false verdicts (a truly equal or reversed pair called significant, an
equivalence claimed for a difference beyond the margin); the queries graded at the stop as a
share of the fixed sample; and how often each verdict is the fixed sample's (significant with
the same sign, or not significant). Run::

    python benchmarks/sim_anytime.py --replicates 500 --seed 20261206
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time

import numpy as np
from scipy import stats as sps

from relgrade.evaluation.anytime import run_stop
from relgrade.evaluation.ppi import holm
from relgrade.rng import derive_seed


def population(rng: np.random.Generator, *, queries: int, effects, sd: float) -> np.ndarray:
    """Per-query values, shape (1 + k, queries): the baseline, then each arm."""
    u = rng.beta(2.0, 2.0, size=queries)
    base = np.clip(u + rng.normal(0.0, sd, size=queries), 0.0, 1.0)
    arms = [np.clip(u + e + rng.normal(0.0, sd, size=queries), 0.0, 1.0) for e in effects]
    return np.vstack([base] + arms)


def fixed_verdicts(d: np.ndarray, alpha: float) -> np.ndarray:
    """+1 / -1 significant (sign of the mean), 0 not: Holm over paired t-tests, (k, n) input."""
    p = np.array([sps.ttest_1samp(row, 0.0).pvalue for row in d])
    _, reject = holm(p, alpha=alpha)
    return np.where(reject, np.sign(d.mean(axis=1)), 0).astype(int)


def replicate(rng: np.random.Generator, args) -> dict:
    values = population(rng, queries=args.queries, effects=args.effects, sd=args.sd)
    diffs_all = values[1:] - values[0]
    truth = diffs_all.mean(axis=1)
    order = rng.permutation(args.queries)[: args.sample]
    d = diffs_all[:, order]
    alpha = 1.0 - args.level
    fixed = fixed_verdicts(d, alpha)
    r = run_stop(d, level=args.level, margin=args.margin, batch=args.batch,
                 population=args.queries)
    i = r.stopped_at - 1
    low = np.array([c.low[i] for c in r.cs])
    high = np.array([c.high[i] for c in r.cs])
    slow = np.array([c.low[i] for c in r.cs_simultaneous])
    shigh = np.array([c.high[i] for c in r.cs_simultaneous])
    mean = np.array([c.mean[i] for c in r.cs])
    s = r.settlement
    anytime = np.where(s.significant, np.sign(mean), 0).astype(int)
    covered = (low <= truth) & (truth <= high)
    false_sig = np.any(s.significant & (np.sign(mean) != np.sign(truth)))
    false_eq = np.any(s.equivalent & (np.abs(truth) > args.margin))
    return {"stopped_at": r.stopped_at, "settled": r.settled, "covered": covered,
            "covered_all": bool(np.all((slow <= truth) & (truth <= shigh))),
            "false_sig": bool(false_sig), "false_eq": bool(false_eq),
            "agree": anytime == fixed, "agree_all": bool(np.all(anytime == fixed)),
            "fixed_sig": fixed != 0, "anytime_sig": anytime != 0, "truth": truth}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--queries", type=int, default=1000, help="pooled queries (population)")
    ap.add_argument("--sample", type=int, default=200, help="the fixed human sample")
    ap.add_argument("--effects", type=float, nargs="+", default=[0.15, 0.10, 0.0])
    ap.add_argument("--sd", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--level", type=float, default=0.95)
    args = ap.parse_args(argv)
    # statsmodels' multipletests calls gc.collect() on every family; no number depends on it.
    gc.collect = lambda generation=2: 0
    t0 = time.process_time()
    res = [replicate(np.random.default_rng(derive_seed(args.seed, "sim-anytime", i)), args)
           for i in range(args.replicates)]
    cpu = time.process_time() - t0
    n = len(res)
    stop = np.array([r["stopped_at"] for r in res])
    cov = np.array([r["covered"] for r in res])
    agree = np.array([r["agree"] for r in res])
    truth = np.mean([r["truth"] for r in res], axis=0)
    print(f"settings: queries {args.queries}, sample {args.sample}, effects {args.effects}, "
          f"sd {args.sd}, batch {args.batch}, margin {args.margin}, level {args.level}")
    print(f"replicates {n}, seed {args.seed}, CPU seconds {cpu:.1f}")
    print("mean true difference per comparison: " + " ".join(f"{t:+.4f}" for t in truth))
    print(f"settled before the whole sample: {np.mean([r['settled'] for r in res]):.3f}")
    print(f"queries graded at the stop: mean {stop.mean():.1f} of {args.sample} "
          f"({stop.mean() / args.sample:.3f}), median {np.median(stop):.0f}, "
          f"min {stop.min()}, max {stop.max()}")
    print("coverage of each sequence at the stop: "
          + " ".join(f"{c:.3f}" for c in cov.mean(axis=0))
          + f"; all at once (simultaneous level): {np.mean([r['covered_all'] for r in res]):.3f}")
    print(f"family-wise false significance (wrong sign or a null called different): "
          f"{np.mean([r['false_sig'] for r in res]):.3f}")
    print(f"false equivalence (|truth| > margin): {np.mean([r['false_eq'] for r in res]):.3f}")
    print("verdict agrees with the fixed sample's, per comparison: "
          + " ".join(f"{a:.3f}" for a in agree.mean(axis=0))
          + f"; every verdict: {np.mean([r['agree_all'] for r in res]):.3f}")
    print("significant, fixed sample: "
          + " ".join(f"{a:.3f}" for a in np.mean([r["fixed_sig"] for r in res], axis=0))
          + "; anytime: "
          + " ".join(f"{a:.3f}" for a in np.mean([r["anytime_sig"] for r in res], axis=0)))
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime: {load}; cores {os.cpu_count()}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
