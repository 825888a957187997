"""Known-truth simulation of a new arm on a frozen key: holes filled by a model, corrected.

Each replicate builds an experiment whose truth is known: ``n_queries`` queries with
``n_docs`` candidate chunks each; a chunk has a latent relevance ``r = u_q + e`` (a query
effect ``u_q ~ N(0, 0.5)``, ``e ~ N(0, 1)``) and its grade is ``r`` cut at 0.5, 1.2 and 1.9
(0-3 scale). People grade the true grade (the estimand is the arm's mean nDCG@10 under
people's grades on the experiment's queries). Three old arms rank the candidates by
``beta * r + N(0, 1)`` (``beta`` 1.5, 1.0, 0.7); the pool is the union of their top 10 and
the frozen key grades it. The new arm ranks by ``1.2 * r + 0.9 * z + N(0, 1)`` with ``z`` a
chunk attribute the old arms ignore, so a share of its top 10 are holes.

The model grader is lenient: it raises a grade below 3 by one with probability ``p`` and
otherwise grades as people do. ``p`` is set per replicate so that its expected bias
(model - human, in grades) is ``bias_old`` on the pool's pairs and ``bias_new`` on the new
arm's holes (``p = bias / share of pairs below grade 3``).

The model grades every hole; people grade every hole of a seeded uniform sample of
``fraction`` of the queries with holes, and the model also grades the pool's pairs of those
queries (the transport check's old side). The rank-sets of the old arms and the new arm
(``new_arm_rank_sets``, 1,000 resamples) are checked against the true ranks of the old arms'
means and the new arm's true mean. Every estimate comes from the library
(:mod:`relgrade.evaluation.holes`). Run::

    python benchmarks/sim_holes.py --replicates 500 --seed 20261206
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import numpy as np

from relgrade.evaluation.holes import (new_arm_comparisons, new_arm_estimate, new_arm_rank_sets,
                                       sample_hole_queries, transport_check)
from relgrade.evaluation.pooled import ndcg_at_k

OLD_BETA = (1.5, 1.0, 0.7)
CUTS = (0.5, 1.2, 1.9)
K = 10


def replicate(rng: np.random.Generator, *, n_queries: int, n_docs: int, fraction: float,
              bias_old: float, bias_new: float, alpha: float, tolerance: float,
              rank_resamples: int = 1000) -> dict:
    """One experiment: the new arm's estimates, its comparisons and the transport verdict."""
    r = rng.normal(0.0, 0.5, (n_queries, 1)) + rng.normal(0.0, 1.0, (n_queries, n_docs))
    grade = np.digitize(r, CUTS).astype(np.float64)
    z = rng.normal(0.0, 1.0, (n_queries, n_docs))
    old_top = np.stack([np.argsort(-(b * r + rng.normal(0, 1, r.shape)), axis=1)[:, :K]
                        for b in OLD_BETA])
    new_top = np.argsort(-(1.2 * r + 0.9 * z + rng.normal(0, 1, r.shape)), axis=1)[:, :K]
    rows = np.arange(n_queries)[:, None]
    pooled = np.zeros(r.shape, dtype=bool)
    for top in old_top:
        pooled[rows, top] = True
    hole = np.zeros(r.shape, dtype=bool)
    hole[rows, new_top] = ~pooled[rows, new_top]
    # the lenient model grader: +1 with probability p below grade 3
    below = grade < 3
    p_old = min(1.0, bias_old / max(below[pooled].mean(), 1e-9))
    p_new = min(1.0, bias_new / max(below[hole].mean(), 1e-9))
    up = rng.random(r.shape) < np.where(hole, p_new, p_old)
    model = np.where(below & up, grade + 1.0, grade)
    key = np.where(pooled, grade, np.nan)
    # the new arm under the key + model-filled holes, and under people's grades of the holes
    filled_g = np.where(hole, model, key)
    human_g = np.where(hole, grade, key)
    new_rank = new_top[None, :, :]
    filled = ndcg_at_k(filled_g, new_rank, k=K)[0]
    truth_q = ndcg_at_k(human_g, new_rank, k=K)[0]
    old_vals = ndcg_at_k(key, old_top, k=K)
    holes = hole.sum(axis=1)
    pairs = np.full(n_queries, K)
    sample = sample_hole_queries(holes, fraction=fraction, rng=rng)
    est = new_arm_estimate(filled=filled, holes=holes, pairs=pairs, sample=sample,
                           human=truth_q[sample])
    comp = new_arm_comparisons("new", filled=filled, holes=holes, pairs=pairs, sample=sample,
                               human=truth_q[sample],
                               old={f"o{i}": old_vals[i] for i in range(len(OLD_BETA))})
    ranks = new_arm_rank_sets(filled=filled, holes=holes, pairs=pairs, sample=sample,
                              human=truth_q[sample], rng=rng, n_resamples=rank_resamples,
                              old={f"o{i}": old_vals[i] for i in range(len(OLD_BETA))})
    sq = np.zeros(n_queries, dtype=bool)
    sq[sample] = True
    old_pairs = pooled & sq[:, None]
    new_pairs = hole & sq[:, None]
    qid = np.broadcast_to(rows, r.shape)
    tc = transport_check(old_model=model[old_pairs], old_human=grade[old_pairs],
                         old_query=qid[old_pairs], new_model=model[new_pairs],
                         new_human=grade[new_pairs], new_query=qid[new_pairs],
                         alpha=alpha, tolerance=tolerance)
    truth = float(truth_q.mean())
    diff_truth = truth - old_vals.mean(axis=1)
    ppi, naive = est["ppi++"], est["model-only"]
    # true ranks (1 the best) of the old arms' means and the new arm's true mean
    true_vals = np.append(old_vals.mean(axis=1), truth)
    true_rank = 1 + (true_vals[None, :] > true_vals[:, None]).sum(axis=1)
    return {"truth": truth, "ppi_cover": ppi.covers(truth), "naive_cover": naive.covers(truth),
            "ppi_err": ppi.estimate - truth, "naive_err": naive.estimate - truth,
            "ppi_width": ppi.high - ppi.low, "ppi_capped": ppi.capped,
            "diff_cover": [bool(lo <= t <= hi) for lo, hi, t in
                           zip(comp["low"], comp["high"], diff_truth)],
            "hole_rate": float(holes.sum() / pairs.sum()),
            "holes_graded": float(hole[sample].sum() / hole.sum()), "n": int(sample.size),
            "rank_cover": bool(((ranks.rank_low <= true_rank)
                                 & (true_rank <= ranks.rank_high)).all()),
            "rank_size_new": int(ranks.rank_high[-1] - ranks.rank_low[-1] + 1),
            "rank_size_mean": float((ranks.rank_high - ranks.rank_low + 1).mean()),
            "refuse": tc.refuse, "bias_diff_seen": tc.difference,
            "bias_diff_pop": float((model - grade)[hole].mean()
                                   - (model - grade)[pooled].mean())}


def run(setting: dict, replicates: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = [replicate(rng, **setting) for _ in range(replicates)]
    col = {k: np.array([o[k] for o in out]) for k in out[0] if k != "diff_cover"}
    diff = np.array([o["diff_cover"] for o in out])
    return {"setting": setting, "replicates": replicates, "seed": seed,
            "ppi_coverage": float(col["ppi_cover"].mean()),
            "model_only_coverage": float(col["naive_cover"].mean()),
            "difference_coverage": float(diff.mean()),
            "ppi_bias": float(col["ppi_err"].mean()),
            "ppi_rmse": float(np.sqrt((col["ppi_err"] ** 2).mean())),
            "model_only_bias": float(col["naive_err"].mean()),
            "ppi_mean_width": float(col["ppi_width"].mean()),
            "ppi_capped": float(col["ppi_capped"].mean()),
            "hole_rate": float(col["hole_rate"].mean()),
            "holes_human_graded": float(col["holes_graded"].mean()),
            "sampled_queries": float(col["n"].mean()),
            "bias_difference_population": float(col["bias_diff_pop"].mean()),
            "transport_refused": float(col["refuse"].mean()),
            "rank_set_coverage": float(col["rank_cover"].mean()),
            "rank_set_size_new_arm": float(col["rank_size_new"].mean()),
            "rank_set_size_mean": float(col["rank_size_mean"].mean())}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--docs", type=int, default=60)
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--bias-old", type=float, default=0.5)
    ap.add_argument("--shift", type=float, action="append",
                    help="bias on the holes minus bias on the old pairs (repeatable; "
                         "default 0, +0.3 and -0.3)")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--tolerance", type=float, default=0.1)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    # statsmodels' multipletests (behind relgrade's Holm) calls gc.collect() on every
    # family; the simulation holds no reference cycles worth collecting per replicate
    gc.collect = lambda generation=2: 0
    results = []
    t0 = time.process_time()
    for shift in args.shift or [0.0, 0.3, -0.3]:
        setting = {"n_queries": args.queries, "n_docs": args.docs, "fraction": args.fraction,
                   "bias_old": args.bias_old, "bias_new": args.bias_old + shift,
                   "alpha": args.alpha, "tolerance": args.tolerance}
        res = run(setting, args.replicates, args.seed)
        results.append(res)
        print(f"shift {shift:+.2f}: coverage ppi++ {res['ppi_coverage']:.3f}, model-only "
              f"{res['model_only_coverage']:.3f}, differences {res['difference_coverage']:.3f}; "
              f"refused {res['transport_refused']:.3f} (population bias difference "
              f"{res['bias_difference_population']:+.3f}); hole rate {res['hole_rate']:.3f}, "
              f"holes graded by people {res['holes_human_graded']:.3f}, "
              f"sampled queries {res['sampled_queries']:.1f}; ppi++ bias "
              f"{res['ppi_bias']:+.4f}, width {res['ppi_mean_width']:.4f}, capped "
              f"{res['ppi_capped']:.3f}; model-only bias {res['model_only_bias']:+.4f}; "
              f"rank-sets cover {res['rank_set_coverage']:.3f}, new arm's set size "
              f"{res['rank_set_size_new_arm']:.2f}, mean size {res['rank_set_size_mean']:.2f}",
              flush=True)
    print(f"CPU seconds: {time.process_time() - t0:.1f} (load average "
          f"{os.getloadavg()[0]:.1f})", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
