"""Agreement intervals: time of the bootstrap intervals relgrade adds to the agreement stage.

    python benchmarks/bench_agreement.py [--pairs 173 5000] [--raters 5] [--resamples 2000]

Workloads (seeded): the audit's two graders on ``--pairs`` pairs (weighted, binary and
unweighted Cohen's kappa intervals: ``agreement.audit_intervals``), and ``--raters`` raters
on the same number of pairs (``agreement.many_rater_agreement``: Fleiss' kappa and
Krippendorff's alpha at four levels, intervals for Fleiss and ordinal alpha). Each is run
three times; the table gives the median wall time and the peak RSS of the process. As a
side-by-side anchor, one pass of the ``krippendorff`` package's ``alpha`` per resample (the
loop a plain implementation would run) is timed on 200 resamples and scaled.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import numpy as np
import pandas as pd

from relgrade.protocol import agreement as ag
from relgrade.protocol.reliability import Resampling


def ratings(n_pairs: int, raters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n_pairs)
    return np.where(rng.random((n_pairs, raters)) < 0.7, truth[:, None],
                    rng.integers(0, 3, (n_pairs, raters)))


def long(data: np.ndarray) -> pd.DataFrame:
    n, r = data.shape
    return pd.DataFrame({"query_id": np.repeat([f"q{i // 15}" for i in range(n)], r),
                         "chunk_id": np.repeat([f"c{i}" for i in range(n)], r),
                         "grader": np.tile([f"r{j}" for j in range(r)], n),
                         "grade": data.ravel()})


def timed(fn, rounds=3) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, nargs="+", default=[173, 5000])
    ap.add_argument("--raters", type=int, default=5)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    import krippendorff

    print(f"load average {os.getloadavg()[0]:.1f}; {args.resamples} resamples")
    print("pairs  audit (3 kappas)  many raters (Fleiss + alpha)  krippendorff loop (est.)")
    for n in args.pairs:
        two = ratings(n, 2, 1)
        spec = Resampling(seed=7, resamples=args.resamples, level=0.95)
        t_audit = timed(lambda: ag.audit_intervals(two[:, 0], two[:, 1], scale=[0, 1, 2],
                                                   relevant_min=1, resampling=spec))
        many = long(ratings(n, args.raters, 2))
        t_many = timed(lambda: ag.many_rater_agreement(many, [0, 1, 2], seed=7,
                                                       resamples=args.resamples, level=0.95))
        data = ratings(n, args.raters, 2).astype(float)
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        for _ in range(200):
            idx = rng.integers(0, n, n)
            krippendorff.alpha(reliability_data=data[idx].T, value_domain=[0, 1, 2],
                               level_of_measurement="ordinal")
        t_loop = (time.perf_counter() - t0) / 200 * args.resamples
        print(f"{n:>5}  {t_audit:>15.3f}s  {t_many:>27.3f}s  {t_loop:>23.2f}s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
