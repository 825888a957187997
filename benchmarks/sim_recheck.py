"""Known-truth simulation of the targeted re-check (relgrade.protocol.recheck).

Each replicate builds one frame of ``n_queries`` x ``per_query`` pairs a model judge graded.
People's grade of each pair (0-2) is drawn from ``--human-shares`` (default: the shares of
the repository's own key, data/key/key.jsonl: 0.71, 0.205, 0.085). The judge before the
identity change gives people's grade with probability ``--agree`` and a neighbouring grade
otherwise (the lower or the higher one, evenly; at the ends the only neighbour). The judge
after the change raises each grade below 2 by one with the probability that moves its mean
grade by ``--shift`` (0.2 grade by default), pair by pair from the same draw.

Measured, per replicate, with the library's own functions as relgrade runs them:

* the previous identity's calibration: its re-check, stratified by its own grades, sized by
  the rule (``judges.recheck``: ``--halfwidth``, ``--min-pairs``, ``--max-pairs``) with the
  planning agreement ``--agree``, drawn, graded by people, estimated stratified;
* the identity now: its re-check stratified by the grades the key holds (``--strata key``,
  the previous identity's, as relgrade does after an identity change; ``--strata own``: by
  the new judge's own grades of the whole frame), planned with the previous identity's
  recorded confusion, graded by the new judge and people;
* **power**: the shift is caught when the interval of the leniency difference excludes 0
  (:func:`relgrade.protocol.recheck.leniency_shift`); ``--shift 0`` gives the false-alarm
  rate; the share of the frame people graded per identity is reported;
* **stratified vs uniform**: the spread (standard deviation over replicates) of the new
  judge's weighted kappa around the frame's own kappa (the estimand) from the stratified
  re-check at its size ``n``, and from uniform samples of ``f * n`` pairs for ``f`` from 1 to
  2.5, each scored with scikit-learn's ``cohen_kappa_score(weights="quadratic")``; the
  uniform size with the stratified spread (interpolated in ``1 / sd^2`` between the
  bracketing factors, so the finite population correction is included) is what a uniform
  re-check needs for the same interval width. The stratified interval's coverage of the
  frame's kappa is reported too.

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


def recheck(frame_ids, strata, judge, human, plan_args, rng, planning):
    """One re-check as relgrade runs it: plan on the strata's counts, draw, people grade,
    the stratified estimate of ``judge`` against ``human``."""
    frame = frame_ids.assign(grade=strata)
    counts = {g: int((strata == g).sum()) for g in SCALE}
    plan = plan_recheck(counts, **plan_args, planning=planning)
    drawn = draw_recheck(frame, plan, rng=rng)
    pos = drawn["chunk_id"].str[1:].astype(int).to_numpy()
    graded = drawn.assign(model=judge[pos], human=human[pos])
    est = stratified_calibration(graded, plan.shares, scale=SCALE, relevant_min=1,
                                 level=plan_args["level"])
    return plan, est, graded


def confusion(graded):
    c = np.zeros((3, 3), dtype=int)
    np.add.at(c, (graded["model"].to_numpy(), graded["human"].to_numpy()), 1)
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--n-queries", type=int, default=50)
    ap.add_argument("--per-query", type=int, default=40)
    ap.add_argument("--human-shares", type=float, nargs=3, default=[0.71, 0.205, 0.085])
    ap.add_argument("--agree", type=float, default=0.75)
    ap.add_argument("--shift", type=float, default=0.2)
    ap.add_argument("--strata", choices=["key", "own"], default="key",
                    help="key: the new judge's re-check is stratified by the grades the key "
                         "holds (the previous identity's), as relgrade does after an identity "
                         "change; own: by the new judge's own grades of the whole frame")
    ap.add_argument("--halfwidth", type=float, default=0.1)
    ap.add_argument("--min-pairs", type=int, default=50)
    ap.add_argument("--max-pairs", type=int, default=400)
    ap.add_argument("--level", type=float, default=0.95)
    a = ap.parse_args()
    t0 = time.process_time()
    n = a.n_queries * a.per_query
    ids = pd.DataFrame({"query_id": [f"q{i // a.per_query:03d}" for i in range(n)],
                        "chunk_id": [f"c{i:05d}" for i in range(n)]})
    plan_args = dict(scale=SCALE, relevant_min=1, halfwidth=a.halfwidth, level=a.level,
                     min_pairs=a.min_pairs, max_pairs=a.max_pairs)
    shares = np.asarray(a.human_shares) / sum(a.human_shares)
    factors = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5)
    caught, fracs, sizes, strat_dev, covered, widths, shifts = [], [], [], [], [], [], []
    unif_dev = {f: [] for f in factors}
    for child in np.random.SeedSequence(a.seed).spawn(a.replicates):
        rng = np.random.default_rng(child)
        h = rng.choice(3, size=n, p=shares)
        m1 = judge_before(h, a.agree, rng)
        m2 = judge_after(m1, a.shift, rng)
        shifts.append(float((m2 - m1).mean()))
        # the previous identity's calibration: its own re-check, planned without a record
        p1, e1, g1 = recheck(ids, m1, m1, h, plan_args, rng,
                             planning_table(SCALE, agreement=a.agree))
        # the identity now: planned with the previous one's recorded confusion
        p2, e2, _ = recheck(ids, m1 if a.strata == "key" else m2, m2, h, plan_args, rng,
                            planning_table(SCALE, confusion=confusion(g1)))
        s = leniency_shift(e2["leniency"], e1["leniency"], level=a.level)
        caught.append(bool(s and s["shifted"]))
        fracs.append((p1.size / n, p2.size / n))
        sizes.append(p2.size)
        k_true = cohen_kappa_score(m2, h, weights="quadratic")
        wk = e2["weighted_kappa"]
        strat_dev.append(wk["value"] - k_true)
        widths.append(wk["high"] - wk["low"])
        covered.append(wk["low"] <= k_true <= wk["high"])
        for f in factors:
            u = rng.choice(n, size=min(n, round(f * p2.size)), replace=False)
            unif_dev[f].append(cohen_kappa_score(m2[u], h[u], weights="quadratic") - k_true)
    cpu = time.process_time() - t0
    sd_s = float(np.std(strat_dev, ddof=1))
    sd_u = {f: float(np.std(v, ddof=1)) for f, v in unif_dev.items()}
    size = float(np.mean(sizes))
    # the uniform size with the stratified spread: linear in 1/sd^2 between the bracketing
    # factors (sd falls as the sample grows; the finite population correction included)
    need = None
    fs = list(factors)
    for lo, hi in zip(fs, fs[1:]):
        if sd_u[lo] >= sd_s >= sd_u[hi]:
            x0, x1 = sd_u[lo] ** -2, sd_u[hi] ** -2
            t = (sd_s ** -2 - x0) / (x1 - x0) if x1 != x0 else 0.0
            need = (lo + t * (hi - lo)) * size
            break
    caught_p = float(np.mean(caught))
    print(f"frame {n} pairs ({a.n_queries} queries x {a.per_query}); people's shares "
          f"{[round(float(x), 3) for x in shares]}; judge agrees {a.agree}; shift {a.shift} "
          f"(realised mean {np.mean(shifts):.3f}); strata {a.strata}; replicates "
          f"{a.replicates}; seed {a.seed}")
    before, now = np.asarray(fracs).T
    print(f"re-check size (identity now): mean {size:.1f}, range {min(sizes)}-{max(sizes)}: "
          f"people graded {100 * now.mean():.1f}% of the frame (max {100 * now.max():.1f}%); "
          f"the previous identity's re-check {100 * before.mean():.1f}% "
          f"(max {100 * before.max():.1f}%)")
    print(f"shift caught: {100 * caught_p:.1f}% (binomial 95% half-width "
          f"{100 * 1.96 * math.sqrt(caught_p * (1 - caught_p) / len(caught)):.1f})")
    print(f"weighted kappa, stratified: sd {sd_s:.4f}, mean reported width "
          f"{np.mean(widths):.4f} (asked {2 * a.halfwidth:.3f}), coverage of the frame's "
          f"kappa {100 * np.mean(covered):.1f}%, mean error {np.mean(strat_dev):+.4f}")
    print("weighted kappa, uniform: " + ", ".join(
        f"x{f:g} sd {sd_u[f]:.4f}" for f in factors))
    if need is None:
        print("uniform needs more than x2.5 the pairs, or fewer than the stratified size")
    else:
        print(f"uniform needs {need:.0f} pairs for the stratified spread at {size:.0f}: the "
              f"stratified re-check needs {100 * (1 - size / need):.1f}% fewer")
    print(f"CPU seconds: {cpu:.1f}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
