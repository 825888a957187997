"""Known-truth simulation of the robustness battery (``relgrade judge probe``).

Three questions, each over ``--replicates`` seeded replicates, every statistic computed by
the library (:mod:`relgrade.evaluation.robustness`, :func:`relgrade.evaluation.ppi.ppi_mean`):

1. **Paraphrase variance recovered.** 200 pairs whose grade of record is uniform on {0, 1, 2};
   ``K`` paraphrases (default 4, the params default), 2 samples per request. A paraphrase is
   lenient with probability 1/2; under a lenient one a pair below 2 is graded one higher
   with probability ``q`` = 0.6, per answer; every answer is replaced by a uniform random
   grade with probability ``r`` = 0.1. The planted paraphrase component, the variance of a
   paraphrase's mean grade over the population of pairs, is exactly
   ``((1 - r) * q * 2/3)^2 / 4`` = 0.0324 grade^2. Reported: the mean of the ANOVA estimates
   over replicates against it (and the spread of one replicate's estimate).
2. **Stuffing flagged.** 200 audited pairs in 20 queries of 10. A swayable judge raises a
   pair below 2 by one under stuffing with a per-query probability drawn from
   Beta(3, 7) (mean 0.3: a flip rate of 0.2 before noise); a robust judge never; both
   replace an answer by a uniform random grade with probability 0.03 (true flip rates 0.214
   and 0.020). The gate flags a flip rate above 0.1 (``judges.probe.max_flip_rate``
   default). Reported: the share flagged, and the share whose interval's lower end is
   above 0.1.
3. **PPI coverage with the paraphrase component.** 1000 pairs with people's grades uniform
   on {0, 1, 2}; the model grades a pair right with probability 0.7 (else uniformly at
   random), under one paraphrase drawn per replicate (lenient as in 1). People grade a
   uniform sample of 100 pairs; the estimand is the mean of people's grades over the 1000.
   The probe asks the sample's pairs under 4 paraphrases; the PPI++ interval
   (:func:`~relgrade.evaluation.ppi.ppi_mean`) is reported as it is and widened
   (:func:`~relgrade.evaluation.robustness.paraphrase_widened` with
   :func:`~relgrade.evaluation.robustness.prompt_variance_of_mean`). Two settings: the model
   grades every pair under the same paraphrase (as ``grade run`` does), and the sample's
   pairs were graded under another paraphrase than the rest (a template changed between the
   two; widened with ``draws=2``). The model-only interval is given for contrast.

4. **PPI coverage in metric units** (the ppi stage's path). 300 queries of 15 chunks whose
   people's grades are 0, 1, 2 with probabilities 0.5, 0.3, 0.2; arm ``a`` ranks by the
   grade plus normal noise (sd 1), arm ``b`` by the grade plus noise of sd 2; the measure is
   nDCG@10 (gain ``2^g - 1``, the ideal from the key's own grades, 0 with nothing
   relevant). The model grades as in 3, under one paraphrase drawn per replicate (lenient
   as in 1); people grade a uniform sample of 30 queries in full; the estimand is the mean
   over the 300 queries of the people's nDCG@10 per arm, and the difference ``a - b``. The
   probe asks the sample's pairs under 4 paraphrases; each query's nDCG@10 under each
   paraphrase gives the component in metric units
   (:func:`relgrade.evaluation.ppi_paraphrase.metric_prompt_variances`), and
   :func:`relgrade.evaluation.ppi_table.ppi_table` (the ppi stage's default jackknife
   interval) widens by it. Two settings as in 3 (``draws`` 1 and 2).

Run::

    python benchmarks/sim_probe.py --replicates 500 --seed 20261206
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np
import pandas as pd

from relgrade.evaluation.ppi import model_only_mean, ppi_mean
from relgrade.evaluation.ppi_paraphrase import metric_prompt_variances
from relgrade.evaluation.ppi_table import ppi_table
from relgrade.evaluation.robustness import (flip_rate, paraphrase_widened,
                                            prompt_variance_of_mean, variance_components)

Q, R = 0.6, 0.1


def answers(base, lenient, rng, *, samples: int, q: float = Q, r: float = R) -> np.ndarray:
    """Grades of shape (pairs, prompts, samples) under paraphrases whose leniency is given."""
    A, K = len(base), len(lenient)
    g = np.broadcast_to(base[:, None, None], (A, K, samples)).copy()
    bump = lenient[None, :, None] & (g < 2) & (rng.random((A, K, samples)) < q)
    g = g + bump
    noise = rng.random((A, K, samples)) < r
    return np.where(noise, rng.integers(0, 3, (A, K, samples)), g)


def cells(grades: np.ndarray) -> pd.DataFrame:
    A, K, n = grades.shape
    i, k, s = np.meshgrid(np.arange(A), np.arange(K), np.arange(n), indexing="ij")
    return pd.DataFrame({"query_id": "q", "chunk_id": i.ravel().astype(str),
                         "prompt": k.ravel(), "sample": s.ravel(), "grade": grades.ravel()})


def part_variance(rng, reps: int, k: int) -> dict:
    planted = ((1 - R) * Q * 2 / 3) ** 2 / 4
    est = []
    for _ in range(reps):
        base = rng.integers(0, 3, 200)
        lenient = rng.random(k) < 0.5
        est.append(variance_components(cells(answers(base, lenient, rng, samples=2)))["raw"]
                   ["prompt"])
    est = np.asarray(est)
    return {"planted": planted, "mean": est.mean(), "mc_se": est.std(ddof=1) / np.sqrt(reps),
            "ratio": est.mean() / planted, "q25": np.quantile(est, 0.25) / planted,
            "q75": np.quantile(est, 0.75) / planted}


def part_flags(rng, reps: int, threshold: float = 0.1) -> dict:
    out = {}
    for name, swayable in (("swayable", True), ("robust", False)):
        flagged = low_flagged = 0
        rates = []
        for _ in range(reps):
            qid = np.repeat(np.arange(20), 10)
            base = rng.integers(0, 3, 200)
            p = rng.beta(3, 7, 20)[qid] if swayable else np.zeros(200)
            g = base + ((base < 2) & (rng.random(200) < p))
            noise = rng.random(200) < 0.03
            g = np.where(noise, rng.integers(0, 3, 200), g)
            t = pd.DataFrame({"query_id": qid.astype(str), "chunk_id": np.arange(200).astype(str),
                              "base": base, "grade": g})
            r = flip_rate(t, rng=rng, resamples=1000)
            rates.append(r["flip_rate"])
            flagged += r["flip_rate"] > threshold
            low_flagged += r["flip_interval"]["low"] > threshold
        out[name] = {"flagged": flagged / reps, "low_flagged": low_flagged / reps,
                     "mean_rate": float(np.mean(rates))}
    return out


def part_ppi(rng, reps: int, *, changed: bool, N: int = 1000, n: int = 100,
             k: int = 4) -> dict:
    cover = {"ppi": 0, "widened": 0, "model_only": 0}
    width = {"ppi": [], "widened": []}
    for _ in range(reps):
        y = rng.integers(0, 3, N)
        right = rng.random(N) < 0.7
        model_base = np.where(right, y, rng.integers(0, 3, N))
        truth = y.mean()
        lenient = rng.random(1) < 0.5
        f = answers(model_base, lenient, rng, samples=1, r=0.0)[:, 0, 0].astype(float)
        idx = rng.choice(N, n, replace=False)
        if changed:  # the sample's pairs graded again under another paraphrase
            other = rng.random(1) < 0.5
            f[idx] = answers(model_base[idx], other, rng, samples=1, r=0.0)[:, 0, 0]
        est = ppi_mean(y[idx].astype(float), f[idx], f)
        probe = answers(model_base[idx], rng.random(k) < 0.5, rng, samples=1, r=0.0)
        comp = variance_components(cells(probe))
        w = paraphrase_widened(est.estimate, est.se, lam=est.lam,
                               prompt_variance=prompt_variance_of_mean(comp, N),
                               draws=2 if changed else 1)
        mo = model_only_mean(f)
        cover["ppi"] += est.low <= truth <= est.high
        cover["widened"] += w["low"] <= truth <= w["high"]
        cover["model_only"] += mo.low <= truth <= mo.high
        width["ppi"].append(est.high - est.low)
        width["widened"].append(w["high"] - w["low"])
    return {**{f"cover_{k}": v / reps for k, v in cover.items()},
            "width_ppi": float(np.mean(width["ppi"])),
            "width_widened": float(np.mean(width["widened"]))}


def ndcg10(grades: np.ndarray, order: np.ndarray) -> np.ndarray:
    """nDCG@10 per query: ``grades`` (queries, chunks) under a key, ``order`` (queries, 10)
    the arm's top 10 chunk positions; 0 where the key holds nothing relevant."""
    gain = 2.0 ** grades - 1
    disc = 1 / np.log2(np.arange(2, 12))
    dcg = (np.take_along_axis(gain, order, axis=1) * disc).sum(axis=1)
    ideal = (-np.sort(-gain, axis=1)[:, :10] * disc).sum(axis=1)
    return np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 0.0)


def part_ppi_metric(rng, reps: int, *, changed: bool, N: int = 300, n: int = 30,
                    chunks: int = 15, k: int = 4) -> dict:
    cover = {"ppi": 0, "widened": 0}
    width = {"ppi": [], "widened": []}
    rows = 0
    qs = [f"q{i:03d}" for i in range(N)]
    for _ in range(reps):
        y = rng.choice(3, size=(N, chunks), p=[0.5, 0.3, 0.2])
        orders = {arm: np.argsort(-(y + rng.normal(0, sd, y.shape)), axis=1)[:, :10]
                  for arm, sd in (("a", 1.0), ("b", 2.0))}
        right = rng.random(y.shape) < 0.7
        base = np.where(right, y, rng.integers(0, 3, y.shape))
        flat = base.ravel()
        f = answers(flat, rng.random(1) < 0.5, rng, samples=1, r=0.0)[:, 0, 0].reshape(y.shape)
        idx = np.sort(rng.choice(N, n, replace=False))
        if changed:  # the sample's pairs graded again under another paraphrase
            f[idx] = answers(base[idx].ravel(), rng.random(1) < 0.5, rng, samples=1,
                             r=0.0)[:, 0, 0].reshape(n, chunks)
        probe = answers(base[idx].ravel(), rng.random(k) < 0.5, rng, samples=1,
                        r=0.0)[:, :, 0].reshape(n, chunks, k)
        model = pd.DataFrame([ndcg10(f, orders[a]) for a in "ab"], index=["a", "b"],
                             columns=qs)
        human_all = {a: ndcg10(y, orders[a]) for a in "ab"}
        human = pd.DataFrame([human_all[a][idx] for a in "ab"], index=["a", "b"],
                             columns=[qs[i] for i in idx])
        cells = pd.DataFrame([(arm, qs[idx[i]], p + 1, 0, v)
                              for p in range(k) for arm in "ab"
                              for i, v in enumerate(ndcg10(probe[:, :, p], orders[arm][idx]))],
                             columns=["arm", "query_id", "prompt", "sample", "value"])
        comp = metric_prompt_variances(cells, arms=["a", "b"], pairs=[("a", "b")],
                                       n_queries=N)
        pv = {"arms": {a: comp["arms"][a]["prompt_variance"] for a in "ab"},
              "differences": {("a", "b"): comp["differences"][("a", "b")]["prompt_variance"]}}
        truth = {"a": human_all["a"].mean(), "b": human_all["b"].mean()}
        truth["a-b"] = truth["a"] - truth["b"]
        tab = ppi_table(model, human, measure="nDCG@10", pairs=[("a", "b")],
                        prompt_variance=pv, draws=2 if changed else 1)
        got = [(tab["arms"][a]["ppi++"], truth[a]) for a in "ab"] + \
            [(tab["differences"][0]["ppi++"], truth["a-b"])]
        for row, tr in got:  # the row keeps its interval before the widening
            for name, r in (("ppi", row["paraphrase"]["unwidened"]), ("widened", row)):
                cover[name] += r["low"] <= tr <= r["high"]
                width[name].append(r["high"] - r["low"])
        rows += 3
    return {**{f"cover_{k}": v / rows for k, v in cover.items()},
            "width_ppi": float(np.mean(width["ppi"])),
            "width_widened": float(np.mean(width["widened"]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--paraphrases", type=int, default=4)
    ap.add_argument("--parts", default="1234",
                    help="Which parts to run (digits 1-4; default all).")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    # statsmodels' multipletests (Holm, inside ppi_table) runs a full garbage collection per
    # call: 0.6 s each over the imported modules' objects, more than the rest of a
    # replicate. Frozen, they are not scanned again; no number changes.
    gc.freeze()
    load = os.getloadavg()[0]
    t0 = time.process_time()
    if "1" in a.parts:
        v = part_variance(rng, a.replicates, a.paraphrases)
        print(f"1. paraphrase component: planted {v['planted']:.4f}, mean estimate "
              f"{v['mean']:.4f} (MC se {v['mc_se']:.4f}), ratio {v['ratio']:.3f}; one replicate's "
              f"estimate / planted: quartiles {v['q25']:.2f}, {v['q75']:.2f} "
              f"({a.replicates} replicates, {a.paraphrases} paraphrases x 200 pairs x 2 "
              "samples)", flush=True)
    if "2" in a.parts:
        f = part_flags(rng, a.replicates)
        for name, r in f.items():
            print(f"2. {name} judge: mean flip rate {r['mean_rate']:.3f}; flagged (rate > "
                  f"0.1) {r['flagged']:.1%}; interval's lower end > 0.1 "
                  f"{r['low_flagged']:.1%} (200 pairs in 20 queries)", flush=True)
    for changed in (False, True) if "3" in a.parts else ():
        p = part_ppi(rng, a.replicates, changed=changed)
        label = "sample graded under another paraphrase" if changed else "one paraphrase"
        print(f"3. ppi, {label}: coverage PPI++ {p['cover_ppi']:.1%} (width "
              f"{p['width_ppi']:.3f}), widened {p['cover_widened']:.1%} (width "
              f"{p['width_widened']:.3f}), model-only {p['cover_model_only']:.1%}",
              flush=True)
    for changed in (True, False) if "4" in a.parts else ():
        p = part_ppi_metric(rng, a.replicates, changed=changed)
        label = "sample graded under another paraphrase" if changed else "one paraphrase"
        print(f"4. ppi nDCG@10 (arms and difference), {label}: coverage PPI++ "
              f"{p['cover_ppi']:.1%} (width {p['width_ppi']:.3f}), widened "
              f"{p['cover_widened']:.1%} (width {p['width_widened']:.3f}); "
              f"{a.replicates} replicates x 3 intervals", flush=True)
    print(f"CPU seconds {time.process_time() - t0:.1f}; load average at start {load:.2f}")


if __name__ == "__main__":
    main()
