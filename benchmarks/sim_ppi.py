"""Known-truth simulation of prediction-powered evaluation, the judge audit and the budget curve.

Each replicate builds an experiment whose truth is known: ``n_queries`` queries with
``n_docs`` candidate chunks each; a chunk has a latent relevance ``r`` and its true grade is
``r`` cut at 0.5 and 1.5 (0-2 scale). Eight arms rank the candidates by
``beta_arm * r + N(0, 1)``; arm ``a3`` (family ``acme``, the model grader's) adds ``gamma`` to
chunks written in the family's style, its twin ``a4`` adds the same to an unrelated attribute
of the same prevalence, so ``a3`` and ``a4`` are truly equal. The pool is the union of the
arms' top 10.

* people grade ``r + N(0, human_sd)`` cut the same way (weighted kappa about 0.8 against
  the truth);
* the model grades ``r + N(0, model_sd)`` cut the same way, then raises the grade by one
  (at most to 2) with probability ``leniency + affinity * style``: +0.3 grade leniency and
  +0.2 grade for chunks in the family's style before the ceiling at 2 (weighted kappa
  0.45-0.51 against the truth, depending on the draw; see benchmarks/README.md).
* with ``--favoured P`` two more arms, a8 and a9, are truly equal but the model favours a8
  (``Setting.favoured``): the judge-favoured truly-equal pair whose differences the model
  barely tracks.

The estimand of an arm is its expected nDCG@10 under the human key (what grading every query
by people estimates); it is computed once by Monte Carlo over ``truth_queries`` queries, and
the twins' values are set equal (they are by symmetry). Every interval comes from the
library's :func:`relgrade.evaluation.ppi_table.estimate_rows`, for each interval kind
(``jackknife``, the default, ``regression``, ``t`` and ``normal``, ppi-python's). Run::

    python benchmarks/sim_ppi.py --replicates 500 --seed 20261201
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score

from relgrade.evaluation.budget import FRACTIONS, budget_curve
from relgrade.evaluation.judge_audit import judge_audit
from relgrade.evaluation.pooled import ndcg_at_k
from relgrade.evaluation.ppi import holm, human_sample, ppi_mean_rows
from relgrade.evaluation.ppi_table import INTERVALS, estimate_rows
from relgrade.rng import derive_seed

ARMS = ("a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7")
BETA = np.array([1.8, 1.4, 1.1, 0.8, 0.8, 0.6, 0.4, 0.2])
FAMILIES = {"a3": "acme", "a4": "other"}
AFFINITY_ARM, TWIN_ARM = 3, 4
#: The judge-favoured truly-equal pair added by ``Setting.favoured > 0`` (arms a8 and a9).
FAVOURED_ARMS = ("a8", "a9")
FAVOURED_ARM, FAVOURED_TWIN = 8, 9


def arms_of(setting: "Setting") -> tuple[str, ...]:
    """The arms of a setting: a0-a7, plus a8 and a9 when ``setting.favoured > 0``."""
    return ARMS + FAVOURED_ARMS if setting.favoured > 0 else ARMS


def null_pairs(setting: "Setting", ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Mask of the truly equal pairs among the pairs ``(ia, ib)``: a3/a4, and a8/a9."""
    null = (ia == AFFINITY_ARM) & (ib == TWIN_ARM)
    if setting.favoured > 0:
        null |= (ia == FAVOURED_ARM) & (ib == FAVOURED_TWIN)
    return null

#: Bins of the model's R^2 against people (per arm or difference) for the width table.
R2_BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0)


def p_values(block: dict, interval: str) -> np.ndarray:
    """Two-sided p-values of ``estimate = 0`` from one estimator's block of ``estimate_rows``."""
    est, se = block["estimate"], block["se"]
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(est) / np.where(se > 0, se, 1.0)
    p = 2.0 * (sps.norm.sf(z) if interval == "normal" else sps.t.sf(z, block["df"]))
    return np.where(se > 0, p, np.where(est == 0, 1.0, 0.0))


@dataclass(frozen=True)
class Setting:
    """Parameters of one simulated world."""

    n_queries: int = 200
    n_docs: int = 50
    depth: int = 10
    human_sd: float = 0.3
    model_sd: float = 0.3
    leniency: float = 0.3
    affinity: float = 0.2
    gamma: float = 4.0
    style_share: float = 0.3
    human_fraction: float = 0.1
    #: > 0 adds the judge-favoured truly-equal pair a8/a9: two arms of equal quality
    #: (``beta`` 1.1) that share most of their ranking noise and differ only in which
    #: unrelated chunks they promote (``favoured_gamma``); on half the queries (the judge
    #: family's topics) the model grades 2, with this probability, the chunks of a8's kind
    #: (its family's style). People see no difference between a8 and a9; the model sees a8
    #: ahead, and its per-query differences of the pair track people's less than those of
    #: the other pairs (R^2 about 0.1 against 0.2).
    favoured: float = 0.0
    favoured_gamma: float = 1.0


def simulate(setting: Setting, rng: np.random.Generator, n_queries: int | None = None) -> dict:
    """One experiment: truth, human and model grade matrices and the arms' rankings.

    Returns a dict with ``truth``, ``human``, ``model`` of shape (n_queries, n_docs) (NaN for
    chunks outside the pool), ``ranked`` of shape (n_arms, n_queries, depth) (chunk index)
    and ``style`` (n_queries, n_docs) bool.
    """
    s = setting
    q = s.n_queries if n_queries is None else n_queries
    mu = rng.normal(-0.3, 0.5, (q, 1))
    r = mu + rng.normal(0.0, 0.8, (q, s.n_docs))
    style = rng.random((q, s.n_docs)) < s.style_share
    other = rng.random((q, s.n_docs)) < s.style_share
    scores = BETA[:, None, None] * r[None] + rng.normal(0.0, 1.0, (len(ARMS), q, s.n_docs))
    scores[AFFINITY_ARM] += s.gamma * style
    scores[TWIN_ARM] += s.gamma * other
    human_noise = rng.normal(0.0, s.human_sd, r.shape)
    bump = rng.random(r.shape) < s.leniency + s.affinity * style
    model_noise = rng.normal(0.0, s.model_sd, r.shape)
    top = np.zeros(r.shape, dtype=bool)
    if s.favoured > 0:
        # drawn after every draw of the eight-arm world, so that world is unchanged
        shared = rng.normal(0.0, 1.0, (q, s.n_docs))
        own = rng.normal(0.0, 0.3, (2, q, s.n_docs))
        kind = rng.random((2, q, s.n_docs)) < s.style_share
        pair = 1.1 * r[None] + shared[None] + own + s.favoured_gamma * kind
        scores = np.concatenate([scores, pair])
        topic = rng.random((q, 1)) < 0.5      # queries on the judge family's topics
        top = kind[0] & topic & (rng.random(r.shape) < s.favoured)
    ranked = np.argsort(-scores, axis=2, kind="stable")[:, :, :s.depth]
    in_pool = np.zeros((q, s.n_docs), dtype=bool)
    rows = np.broadcast_to(np.arange(q)[None, :, None], ranked.shape)
    in_pool[rows, ranked] = True

    def cut(x):
        return np.where(in_pool, np.digitize(x, [0.5, 1.5]).astype(np.float64), np.nan)

    truth = cut(r)
    human = cut(r + human_noise)
    model = np.where(top & in_pool, 2.0, np.minimum(cut(r + model_noise) + bump, 2.0))
    return {"truth": truth, "human": human, "model": model, "ranked": ranked, "style": style}


def true_means(setting: Setting, seed: int, truth_queries: int = 20_000) -> np.ndarray:
    """Expected nDCG@10 of each arm under the human key, by Monte Carlo (twins averaged)."""
    rng = np.random.default_rng(derive_seed(seed, "sim-ppi", "truth"))
    sums, done = np.zeros(len(arms_of(setting))), 0
    while done < truth_queries:
        e = simulate(setting, rng, n_queries=2000)
        sums += ndcg_at_k(e["human"], e["ranked"], k=10).sum(axis=1)
        done += 2000
    out = sums / done
    out[[AFFINITY_ARM, TWIN_ARM]] = out[[AFFINITY_ARM, TWIN_ARM]].mean()
    if setting.favoured > 0:
        out[[FAVOURED_ARM, FAVOURED_TWIN]] = out[[FAVOURED_ARM, FAVOURED_TWIN]].mean()
    return out


def kappas(e: dict) -> tuple[float, float]:
    """Quadratic weighted kappa of people and of the model against the truth, on pool pairs."""
    ok = ~np.isnan(e["truth"])
    t = e["truth"][ok].astype(int)
    return (cohen_kappa_score(t, e["human"][ok].astype(int), weights="quadratic"),
            cohen_kappa_score(t, e["model"][ok].astype(int), weights="quadratic"))


def replicate(setting: Setting, truth: np.ndarray, rng: np.random.Generator, *,
              budget: bool = True, audit_resamples: int = 200, strategies=None,
              fractions=FRACTIONS) -> dict:
    """One replicate: estimates, coverage, Holm verdicts, audit and (optionally) the curve."""
    e = simulate(setting, rng)
    h = ndcg_at_k(e["human"], e["ranked"], k=10)
    m = ndcg_at_k(e["model"], e["ranked"], k=10)
    n_q = h.shape[1]
    sample = human_sample(n_q, fraction=setting.human_fraction, rng=rng)
    out = {}
    arms = arms_of(setting)
    pairs = list(itertools.combinations(range(len(arms)), 2))
    ia, ib = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    d_truth = truth[ia] - truth[ib]
    null = null_pairs(setting, ia, ib)
    twins = (ia == AFFINITY_ARM) & (ib == TWIN_ARM)
    fav = (ia == FAVOURED_ARM) & (ib == FAVOURED_TWIN)
    for label, (tgt, hh, mm) in {"arm": (truth, h, m),
                                 "diff": (d_truth, h[ia] - h[ib], m[ia] - m[ib])}.items():
        finite = hh.mean(axis=1)
        for kind in INTERVALS:
            est = estimate_rows(hh[:, sample], mm[:, sample], mm, level=0.95, interval=kind,
                                tuning="per-row" if label == "diff" else "shared")
            for meth, b in est.items():
                out[f"{label}_cover_{kind}_{meth}"] = (b["low"] <= tgt) & (tgt <= b["high"])
                out[f"{label}_cover_finite_{kind}_{meth}"] = ((b["low"] <= finite)
                                                              & (finite <= b["high"]))
                out[f"{label}_width_{kind}_{meth}"] = b["high"] - b["low"]
                out[f"{label}_error_{kind}_{meth}"] = (b["estimate"] - tgt) / np.where(
                    b["se"] > 0, b["se"], np.nan)
            if label == "diff":
                for meth, b in est.items():
                    _, reject = holm(p_values(b, kind), alpha=0.05)
                    out[f"false_sig_{kind}_{meth}"] = bool(reject[twins].any())
                    wrong = reject & (np.sign(b["estimate"]) != np.sign(d_truth)) & ~null
                    out[f"sign_error_{kind}_{meth}"] = bool(wrong.any())
                    # family-wise: a truly equal pair called different, or a sign error
                    out[f"fwer_{kind}_{meth}"] = bool(reject[null].any() or wrong.any())
                    if fav.any():
                        j = int(np.flatnonzero(fav)[0])
                        out[f"fav_sig_{kind}_{meth}"] = bool(reject[j])
                        out[f"fav_cover0_{kind}_{meth}"] = bool(b["low"][j] <= 0 <= b["high"][j])
                        out[f"fav_capped_{kind}_{meth}"] = bool(b["capped"][j])
                        out[f"fav_lambda_{kind}_{meth}"] = float(b["lambda"][j])
        # classic PPI (lambda = 1) with the t interval, for comparison
        th1, se1, _ = ppi_mean_rows(hh[:, sample], mm[:, sample], mm, lam=1.0, ddof=1)
        half = float(sps.t.ppf(0.975, sample.size - 1)) * se1
        out[f"{label}_cover_t_ppi"] = np.abs(th1 - tgt) <= half
        out[f"{label}_width_t_ppi"] = 2.0 * half
        out[f"{label}_r2"] = np.array([np.corrcoef(a, b)[0, 1] ** 2 for a, b in zip(hh, mm)])
    audit = judge_audit(e["human"], e["model"], e["ranked"], sample=sample, arms=arms,
                        families=FAMILIES, model_family="acme", k=10, rng=rng,
                        n_resamples=audit_resamples)
    out["audit_affinity"] = ARMS[AFFINITY_ARM] in audit.affinity_arms
    out["audit_spread_flag"] = audit.spread_flag
    out["audit_leniency"] = np.array([x.mean for x in audit.leniency])
    out["audit_tau"] = audit.order[0].value
    if budget:
        curve = budget_curve(e["human"], e["ranked"], model_grades=e["model"], rng=rng, k=10,
                             fractions=fractions, strategies=strategies)
        out["curve"] = curve
    return out


def width_by_r2(results: list[dict], label: str, kind: str, n: int, n_all: int) -> pd.DataFrame:
    """Mean width ratio PPI++ / human-only per bin of the model's R^2 against people.

    Beside the measured ratio: ``sqrt(1 - R2 * N / (N + n))`` at the bin's mean R^2, the
    ratio of the plug-in standard errors at the variance-minimising lambda (the best PPI++
    can do with this model), and ``sqrt(1 - (1 - n/N) * R2)``, the same for the exact
    variance of a sample drawn from the ``N`` queries.
    """
    r2 = np.concatenate([r[f"{label}_r2"] for r in results])
    ratio = np.concatenate([r[f"{label}_width_{kind}_ppi++"] / r[f"{label}_width_{kind}_human-only"]
                            for r in results])
    rows = []
    for lo, hi in zip(R2_BINS[:-1], R2_BINS[1:]):
        sel = (r2 >= lo) & (r2 < hi)
        if not sel.any():
            continue
        mean_r2 = float(r2[sel].mean())
        rows.append({"R2 bin": f"[{lo:.1f}, {hi:.1f})", "cases": int(sel.sum()),
                     "mean R2": mean_r2, "measured": float(ratio[sel].mean()),
                     "share > 1": float((ratio[sel] > 1 + 1e-12).mean()),
                     "best, plug-in": math.sqrt(1 - mean_r2 * n_all / (n_all + n)),
                     "best, exact": math.sqrt(1 - (1 - n / n_all) * mean_r2)})
    return pd.DataFrame(rows)


def summarise(results: list[dict], setting: Setting) -> dict:
    """The issue's acceptance numbers from a list of replicates."""
    def rate(key):
        return np.mean(np.stack([r[key] for r in results]), axis=0)

    s = {}
    n = max(2, int(round(setting.human_fraction * setting.n_queries)))
    for label in ("arm", "diff"):
        r2 = np.stack([r[f"{label}_r2"] for r in results])
        hi = r2 >= 0.3
        s[f"{label} mean R2 model vs people"] = float(r2.mean())
        s[f"{label} share of cases with R2 >= 0.3"] = float(hi.mean())
        for kind in INTERVALS:
            for meth in ("ppi++", "human-only", "model-only"):
                c = rate(f"{label}_cover_{kind}_{meth}")
                s[f"{label} coverage {kind} {meth} (mean)"] = float(c.mean())
                s[f"{label} coverage {kind} {meth} (min over {label}s)"] = float(c.min())
            s[f"{label} coverage of the full-human mean {kind} ppi++ (mean)"] = float(
                rate(f"{label}_cover_finite_{kind}_ppi++").mean())
            z = np.stack([r[f"{label}_error_{kind}_ppi++"] for r in results])
            s[f"{label} sd of (estimate - truth) / se, {kind} ppi++"] = float(np.nanstd(z))
            w = np.stack([r[f"{label}_width_{kind}_ppi++"] for r in results])
            wh = np.stack([r[f"{label}_width_{kind}_human-only"] for r in results])
            ratio = w / wh
            s[f"{label} width ppi++/human-only {kind} mean"] = float(ratio.mean())
            s[f"{label} width ppi++/human-only {kind} max"] = float(ratio.max())
            s[f"{label} width ppi++/human-only {kind} share > 1"] = float(
                (ratio > 1 + 1e-12).mean())
            s[f"{label} width ratio {kind} mean when R2 >= 0.3"] = (
                float(ratio[hi].mean()) if hi.any() else float("nan"))
            s[f"width by R2, {label}, {kind}"] = width_by_r2(results, label, kind, n,
                                                            setting.n_queries)
        c = rate(f"{label}_cover_t_ppi")
        s[f"{label} coverage t ppi (lambda 1) (mean)"] = float(c.mean())
        w1 = np.stack([r[f"{label}_width_t_ppi"] for r in results])
        wh = np.stack([r[f"{label}_width_t_human-only"] for r in results])
        s[f"{label} width ppi (lambda 1)/human-only t mean"] = float((w1 / wh).mean())
    for kind in INTERVALS:
        for meth in ("ppi++", "human-only", "model-only"):
            s[f"false significance a3 vs a4 after Holm, {kind} {meth}"] = float(
                rate(f"false_sig_{kind}_{meth}"))
            s[f"sign errors on unequal pairs after Holm, {kind} {meth}"] = float(
                rate(f"sign_error_{kind}_{meth}"))
            s[f"family-wise false significance after Holm (equal pair called different "
              f"or sign error), {kind} {meth}"] = float(rate(f"fwer_{kind}_{meth}"))
            if setting.favoured > 0:
                s[f"favoured pair a8/a9: significant after Holm, {kind} {meth}"] = float(
                    rate(f"fav_sig_{kind}_{meth}"))
                s[f"favoured pair a8/a9: interval covers 0, {kind} {meth}"] = float(
                    rate(f"fav_cover0_{kind}_{meth}"))
        if setting.favoured > 0:
            s[f"favoured pair a8/a9: capped, {kind} ppi++"] = float(
                rate(f"fav_capped_{kind}_ppi++"))
            s[f"favoured pair a8/a9: mean lambda, {kind} ppi++"] = float(
                rate(f"fav_lambda_{kind}_ppi++"))
    if setting.favoured > 0:
        arms = arms_of(setting)
        pairs = list(itertools.combinations(range(len(arms)), 2))
        j = pairs.index((FAVOURED_ARM, FAVOURED_TWIN))
        s["favoured pair a8/a9: mean R2 model vs people"] = float(
            np.mean([r["diff_r2"][j] for r in results]))
    s["audit flags family affinity of a3"] = float(rate("audit_affinity"))
    s["audit spread flag"] = float(rate("audit_spread_flag"))
    s["mean leniency per arm"] = " ".join(f"{x:.3f}" for x in rate("audit_leniency"))
    curves = [r["curve"] for r in results if "curve" in r]
    if curves:
        all_curves = pd.concat(curves)
        grouped = all_curves.groupby(["strategy", "budget"])
        c = grouped.mean(numeric_only=True)
        c["tau_mc_se"] = grouped["kendall_tau"].std() / math.sqrt(len(curves))
        c["share_tau_ge_0.9"] = grouped["kendall_tau"].apply(lambda t: float((t >= 0.9).mean()))
        s["curve"] = c
        for strategy in c.index.get_level_values("strategy").unique():
            sub = c.loc[strategy]
            ok = sub[sub["kendall_tau"] >= 0.9]
            s[f"smallest judged fraction with mean tau >= 0.9, {strategy}"] = (
                float(ok["judged_fraction"].iloc[0]) if len(ok) else float("nan"))
    return s


def run(setting: Setting, *, replicates: int, seed: int, budget: bool = True,
        strategies=None, fractions=FRACTIONS) -> dict:
    """Run ``replicates`` replicates from ``seed``; returns the summary.

    ``strategies`` and ``fractions`` restrict the budget curve (default: every strategy at
    :data:`relgrade.evaluation.budget.FRACTIONS`). The curve draws its query samples after
    everything else of a replicate, one per fraction in order, so a restricted run gives the
    same data, sample, estimates and audit, and the same uniform and ppi points at the
    fractions that precede any change in the list.
    """
    truth = true_means(setting, seed)
    results = []
    for i in range(replicates):
        rng = np.random.default_rng(derive_seed(seed, "sim-ppi", "replicate", i))
        results.append(replicate(setting, truth, rng, budget=budget, strategies=strategies,
                                 fractions=fractions))
    summary = summarise(results, setting)
    summary["truth"] = truth
    return summary


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--model-sd", type=float, default=Setting.model_sd)
    ap.add_argument("--human-sd", type=float, default=Setting.human_sd,
                    help="people's grading noise (sd on the latent scale)")
    ap.add_argument("--leniency", type=float, default=Setting.leniency)
    ap.add_argument("--affinity", type=float, default=Setting.affinity)
    ap.add_argument("--favoured", type=float, default=Setting.favoured,
                    help="> 0 adds the judge-favoured truly-equal pair a8/a9")
    ap.add_argument("--favoured-gamma", type=float, default=Setting.favoured_gamma)
    ap.add_argument("--no-budget", action="store_true")
    ap.add_argument("--strategy", action="append", choices=("uniform", "ppi", "maxmean", "mtf"),
                    help="restrict the budget curve to these strategies (repeatable)")
    ap.add_argument("--fraction", action="append", type=float,
                    help="the budget curve's fractions (repeatable; default budget.FRACTIONS)")
    args = ap.parse_args(argv)
    # statsmodels' multipletests (behind relgrade's Holm) calls gc.collect() on every family:
    # about 98% of this script's time over thousands of families, and no number changes
    # without it. Only this benchmark process skips it.
    gc.collect = lambda generation=2: 0
    setting = Setting(model_sd=args.model_sd, human_sd=args.human_sd, leniency=args.leniency, affinity=args.affinity,
                      favoured=args.favoured, favoured_gamma=args.favoured_gamma)
    e = simulate(setting, np.random.default_rng(derive_seed(args.seed, "sim-ppi", "kappa")))
    kh, km = kappas(e)
    t0 = time.process_time()
    s = run(setting, replicates=args.replicates, seed=args.seed, budget=not args.no_budget,
            strategies=args.strategy, fractions=tuple(args.fraction or FRACTIONS))
    cpu = time.process_time() - t0
    print(f"setting: {setting}")
    print(f"replicates {args.replicates}, seed {args.seed}, CPU seconds {cpu:.1f}")
    print(f"weighted kappa (quadratic) vs truth: people {kh:.3f}, model {km:.3f}")
    print("true nDCG@10 per arm: " + " ".join(f"{a}={v:.4f}"
                                              for a, v in zip(arms_of(setting), s["truth"])))
    for key, v in s.items():
        if key in ("curve", "truth") or isinstance(v, pd.DataFrame):
            continue
        print(f"{key}: {v:.4f}" if isinstance(v, float) else f"{key}: {v}")
    for key, v in s.items():
        if key != "curve" and isinstance(v, pd.DataFrame):
            print(f"{key}:")
            print(v.round(3).to_string(index=False))
    if "curve" in s:
        print(s["curve"].round(4).to_string())
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime: {load}; cores {os.cpu_count()}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
