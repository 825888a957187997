"""Known-truth simulation of the targeted re-check (relgrade.protocol.recheck).

Each replicate builds one frame of ``n_queries`` x ``per_query`` pairs a model judge graded.
People's grade of each pair (0-2) is drawn from ``--human-shares``; the judge before the
identity change gives people's grade with probability ``--agree`` and a neighbouring grade
otherwise (the lower or the higher one, evenly; at the ends the only neighbour). The judge
after the change raises each grade below 2 by one with the probability that moves its mean
grade by ``--shift`` (0.2 grade by default), pair by pair from the same draw.

Measured, per replicate:

* **power**: both identities are re-checked as relgrade plans it (the judge's grades as
  strata, the size from ``judges.recheck.kappa_halfwidth`` with the planning agreement
  ``--agree`` and the floor and ceiling, Neyman allocation, a seeded draw per identity),
  people grade the drawn pairs, and the stratified leniency of each is compared
  (:func:`relgrade.protocol.recheck.leniency_shift`): caught when the interval of the
  difference excludes 0. ``--shift 0`` gives the false-alarm rate. The share of the frame
  people graded is reported (per identity).
* **stratified vs uniform**: at the re-check's size, the spread (standard deviation over
  replicates) of the weighted kappa of the new judge from the stratified design, and from
  a uniform sample of the same size whose kappa is scikit-learn's
  ``cohen_kappa_score(weights="quadratic")``; the pairs a uniform sample needs for the same
  interval width is ``n * sd_uniform^2 / sd_stratified^2``, and it is checked by drawing
  uniform samples of that size. The stratified interval's coverage of the frame's own
  kappa (the estimand) is reported too.

Run::

    python benchmarks/sim_recheck.py --replicates 500 --seed 20261206
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score

from relgrade.protocol.recheck import (draw_recheck, leniency_shift, plan_recheck,
                                       planning_table, stratified_calibration)

SCALE = [0, 1, 2]


def judge_before(h, agree, rng):
    """People's grade with probability ``agree``, else a neighbouring grade."""
    m = h.copy()
    off = rng.random(h.size) >= agree
    step = np.where(rng.random(h.size) < 0.5, -1, 1)
    step = np.where(h == 0, 1, np.where(h == 2, -1, step))
    m[off] = h[off] + step[off]
    return m


def judge_after(m, shift, rng):
    """Raise each grade below 2 by one with the probability that moves the mean by
    ``shift`` (given the frame's share of grades below 2)."""
    below = m < 2
    q = min(1.0, shift / max(below.mean(), 1e-12))
    up = below & (rng.random(m.size) < q)
    return m + up


def recheck(frame_ids, judge, human, plan_args, rng):
    frame = frame_ids.assign(grade=judge)
    counts = {g: int((judge == g).sum()) for g in SCALE}
    plan = plan_recheck(counts, **plan_args)
    drawn = draw_recheck(frame, plan, rng=rng)
    idx = drawn["row"].to_numpy() if "row" in drawn else None
    pos = frame_ids.reset_index().merge(drawn, on=["query_id", "chunk_id"])["index"].to_numpy()
    graded = drawn.assign(model=judge[pos], human=human[pos])
    est = stratified_calibration(graded, plan.shares, scale=SCALE, relevant_min=1,
                                 level=plan_args["level"])
    del idx
    return plan, est


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--n-queries", type=int, default=50)
    ap.add_argument("--per-query", type=int, default=40)
    ap.add_argument("--human-shares", type=float, nargs=3, default=[0.7, 0.2, 0.1])
    ap.add_argument("--agree", type=float, default=0.75)
    ap.add_argument("--shift", type=float, default=0.2)
    ap.add_argument("--halfwidth", type=float, default=0.1)
    ap.add_argument("--min-pairs", type=int, default=50)
    ap.add_argument("--max-pairs", type=int, default=400)
    ap.add_argument("--level", type=float, default=0.95)
    a = ap.parse_args()
    t0 = time.process_time()
    n = a.n_queries * a.per_query
    ids = pd.DataFrame({"query_id": [f"q{i // a.per_query:03d}" for i in range(n)],
                        "chunk_id": [f"c{i:05d}" for i in range(n)]})
    plan_args = dict(scale=SCALE, relevant_min=1, planning=planning_table(SCALE, agreement=a.agree),
                     halfwidth=a.halfwidth, level=a.level, min_pairs=a.min_pairs,
                     max_pairs=a.max_pairs)
    root = np.random.SeedSequence(a.seed)
    caught, fracs, sizes, strat_k, unif_k, covered, widths, true_k = [], [], [], [], [], [], [], []
    shifts = []
    for child in root.spawn(a.replicates):
        rng = np.random.default_rng(child)
        h = rng.choice(3, size=n, p=np.asarray(a.human_shares) / sum(a.human_shares))
        m1 = judge_before(h, a.agree, rng)
        m2 = judge_after(m1, a.shift, rng)
        shifts.append(float((m2 - m1).mean()))
        p1, e1 = recheck(ids, m1, h, plan_args, rng)
        p2, e2 = recheck(ids, m2, h, plan_args, rng)
        s = leniency_shift(e2["leniency"], e1["leniency"], level=a.level)
        caught.append(bool(s and s["shifted"]))
        fracs += [p1.size / n, p2.size / n]
        sizes.append(p2.size)
        k_true = cohen_kappa_score(m2, h, weights="quadratic")
        true_k.append(k_true)
        wk = e2["weighted_kappa"]
        strat_k.append(wk["value"])
        widths.append(wk["high"] - wk["low"])
        covered.append(wk["low"] <= k_true <= wk["high"])
        u = rng.choice(n, size=p2.size, replace=False)
        unif_k.append(cohen_kappa_score(m2[u], h[u], weights="quadratic"))
    strat_dev = np.asarray(strat_k) - np.asarray(true_k)
    unif_dev = np.asarray(unif_k) - np.asarray(true_k)
    sd_s, sd_u = float(strat_dev.std(ddof=1)), float(unif_dev.std(ddof=1))
    size = int(np.median(sizes))
    need_u = math.ceil(size * sd_u ** 2 / sd_s ** 2)
    # check: uniform samples of that size reach the stratified spread
    check = []
    for child in np.random.SeedSequence(a.seed + 1).spawn(a.replicates):
        rng = np.random.default_rng(child)
        h = rng.choice(3, size=n, p=np.asarray(a.human_shares) / sum(a.human_shares))
        m2 = judge_after(judge_before(h, a.agree, rng), a.shift, rng)
        u = rng.choice(n, size=min(need_u, n), replace=False)
        check.append(cohen_kappa_score(m2[u], h[u], weights="quadratic")
                     - cohen_kappa_score(m2, h, weights="quadratic"))
    cpu = time.process_time() - t0
    z = 1.959963984540054
    print(f"frame {n} pairs ({a.n_queries} queries x {a.per_query}); people's shares "
          f"{a.human_shares}; judge agrees {a.agree}; shift {a.shift} (realised mean "
          f"{np.mean(shifts):.3f}); replicates {a.replicates}; seed {a.seed}")
    print(f"re-check size: median {size}, range {min(sizes)}-{max(sizes)}; people graded "
          f"{100 * np.mean(fracs):.1f}% of the frame per identity (max {100 * max(fracs):.1f}%)")
    print(f"shift caught: {100 * np.mean(caught):.1f}% "
          f"(95% binomial half-width {100 * 1.96 * math.sqrt(np.mean(caught) * (1 - np.mean(caught)) / len(caught)):.1f})")
    print(f"weighted kappa, stratified: sd {sd_s:.4f}, mean reported width "
          f"{np.mean(widths):.4f} (planned {2 * a.halfwidth:.3f}), coverage of the frame's "
          f"kappa {100 * np.mean(covered):.1f}%, mean error {strat_dev.mean():+.4f}")
    print(f"weighted kappa, uniform at {size}: sd {sd_u:.4f} (width {2 * z * sd_u:.4f}); "
          f"uniform needs {need_u} pairs for the stratified spread: the stratified re-check "
          f"needs {100 * (1 - size / need_u):.1f}% fewer")
    print(f"check: uniform at {need_u}: sd {np.std(check, ddof=1):.4f} "
          f"(stratified at {size}: {sd_s:.4f})")
    print(f"CPU seconds: {cpu:.1f}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
