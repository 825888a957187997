"""Known-truth simulation of rank-sets: simultaneous coverage and set size, human-only vs PPI.

The world is ``benchmarks/sim_ppi.py``'s main setting: 200 queries, eight arms whose true
nDCG@10 under the human key is known (a3 and a4 truly equal, so their true ranks are 4 and 5
in either order), people on a 10% sample, a lenient model grader with a family affinity on
every query. Each replicate computes three rank-sets of the eight arms
(:mod:`relgrade.evaluation.ranksets`, 95% simultaneous level):

* ``full human`` — every query graded by people (a human-key experiment):
  :func:`rank_sets` on the 200 queries;
* ``human-only`` — only the 20 human-sample queries: :func:`rank_sets` on them;
* ``ppi`` — PPI++ on the sample plus the model's grades on all 200:
  :func:`ppi_rank_sets`.

A replicate covers when every arm's set holds every rank its true mean can take (for the
twins, both 4 and 5). Run::

    python benchmarks/sim_ranksets.py --replicates 1000 --seed 20261206
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sim_ppi  # noqa: E402  (the world of the PPI simulation)

from relgrade.evaluation.pooled import ndcg_at_k  # noqa: E402
from relgrade.evaluation.ppi import human_sample  # noqa: E402
from relgrade.evaluation.ranksets import ppi_rank_sets, rank_sets  # noqa: E402
from relgrade.rng import derive_seed  # noqa: E402

KINDS = ("full human", "human-only", "ppi")


def true_rank_range(truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per arm, the best and worst rank its true mean can take (ties span their ranks)."""
    low = 1 + (truth[None, :] > truth[:, None]).sum(axis=1)
    high = truth.size - (truth[None, :] < truth[:, None]).sum(axis=1)
    return low, high


def replicate(setting, truth, rng, *, resamples: int, level: float) -> dict:
    """One replicate: the three rank-sets, whether each covers, and their sizes."""
    e = sim_ppi.simulate(setting, rng)
    h = ndcg_at_k(e["human"], e["ranked"], k=10)
    m = ndcg_at_k(e["model"], e["ranked"], k=10)
    s = human_sample(h.shape[1], fraction=setting.human_fraction, rng=rng)
    sets = {"full human": rank_sets(h, rng=rng, level=level, n_resamples=resamples),
            "human-only": rank_sets(h[:, s], rng=rng, level=level, n_resamples=resamples),
            "ppi": ppi_rank_sets(h[:, s], m[:, s], m, rng=rng, level=level,
                                 n_resamples=resamples)}
    lo, hi = true_rank_range(truth)
    out = {}
    for kind, r in sets.items():
        out[f"{kind} covers"] = bool(((r.rank_low <= lo) & (r.rank_high >= hi)).all())
        out[f"{kind} size"] = (r.rank_high - r.rank_low + 1).astype(float)
        out[f"{kind} groups"] = len(r.tied_groups())
    return out


def run(*, replicates: int, seed: int, resamples: int = 1000, level: float = 0.95) -> dict:
    """The summary over ``replicates`` replicates from ``seed``."""
    setting = sim_ppi.Setting()
    truth = sim_ppi.true_means(setting, seed)
    results = []
    for i in range(replicates):
        rng = np.random.default_rng(derive_seed(seed, "sim-ranksets", "replicate", i))
        results.append(replicate(setting, truth, rng, resamples=resamples, level=level))
    s = {"truth": truth}
    cover_se = {}
    for kind in KINDS:
        c = np.array([r[f"{kind} covers"] for r in results], dtype=float)
        size = np.stack([r[f"{kind} size"] for r in results])
        s[f"{kind}: simultaneous coverage"] = float(c.mean())
        cover_se[kind] = float(c.std(ddof=1) / np.sqrt(c.size)) if c.size > 1 else float("nan")
        s[f"{kind}: Monte Carlo s.e. of coverage"] = cover_se[kind]
        s[f"{kind}: mean set size"] = float(size.mean())
        s[f"{kind}: mean set size per arm"] = " ".join(f"{x:.2f}" for x in size.mean(axis=0))
        s[f"{kind}: mean number of tied groups"] = float(
            np.mean([r[f"{kind} groups"] for r in results]))
    return s


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args(argv)
    t0 = time.process_time()
    s = run(replicates=args.replicates, seed=args.seed, resamples=args.resamples)
    cpu = time.process_time() - t0
    print(f"replicates {args.replicates}, seed {args.seed}, resamples {args.resamples}, "
          f"CPU seconds {cpu:.1f}")
    print("true nDCG@10 per arm: " + " ".join(f"{a}={v:.4f}"
                                              for a, v in zip(sim_ppi.ARMS, s.pop("truth"))))
    for key, v in s.items():
        print(f"{key}: {v:.4f}" if isinstance(v, float) else f"{key}: {v}")
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime: {load}; cores {os.cpu_count()}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
