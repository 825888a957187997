"""Coverage of relgrade's intervals and error rates of its verdict test, against known truth.

Three studies, each over simulated populations whose true value is known:

1. **Agreement** (``--part agreement``): audits of 10 queries (10 to 25 judged pairs each,
   grades 0-2, three graders) drawn from a population in which each query has its own
   disagreement rate ``r_q ~ Beta`` with mean 0.25 and concentration ``inf`` (constant),
   30 (mild), 6 (moderate) or 1.5 (strong variation). The truth of each statistic is its
   value on 20,000 population queries pooled. Every interval comes from relgrade's own
   code (:mod:`relgrade.protocol.reliability`): resampling pairs (``unit=pair``, the old
   way) and the query as the unit (``unit=query``: the jackknife t over queries on
   Fisher's z / the arcsine root; ``--units query`` runs this column alone).
   ``--part agreement-candidates`` compares, on the same audits and vectorised over the
   resamples, the clustered candidates: the expanded percentile interval (Hesterberg
   2015), the jackknife t over queries and the studentized cluster bootstrap (a jackknife
   over the drawn queries inside each resample), each raw and on the transformed scale;
   ``--part agreement-widths`` their median widths.
2. **Paired differences and per-arm means** (``--part paired``): per-query differences
   of mean exactly 0 from a symmetric population (normal, sd 0.1), a skewed one (a quarter
   of the queries win about 0.12, the rest lose about 0.04; skewness 1.9), each also with
   half the queries tied at 0 (skewness 2.7 for the skewed one), a strongly skewed one
   ("rare wins": one query in ten wins about 0.3, the rest lose about 0.033; skewness 4.4),
   and an arm's per-query values (30% exactly 0, the rest Beta(2, 3)); sizes 10, 12, 36,
   100, 500 (500 with half the replicates). Candidate intervals, computed vectorised over replicates with the formulas relgrade
   uses: Student t on the per-query values, percentile, BCa, expanded percentile
   (Hesterberg 2015), studentized bootstrap (bootstrap-t) and Hall's (1992)
   skewness-corrected t (Johnson 1978 made monotone); plus relgrade's own
   :func:`relgrade.evaluation.stats.difference_interval` (the rule it ships). Then the
   candidates for the cells that rule misses (deterministic, so the columns before them
   reproduce on the same seeds): the empirical-likelihood interval (Owen 1988) and its
   Bartlett-corrected form (DiCiccio, Hall & Romano 1991); ties as a known atom at 0 (the
   non-zero values' t or corrected-EL interval times the Clopper-Pearson interval of their
   share, each at 1 - alpha/2); and the betting interval for values in [-1, 1]
   (Waudby-Smith & Ramdas 2024); with a second table of median widths.
   ``--new-only`` computes t, relgrade's rule and these candidates alone on the same
   samples. ``--part paired-shift``: the same intervals at a true mean of +0.04 (share excluding 0,
   median width) at 12, 36 and 100 queries.
3. **Verdict test** (``--part tests``): false rejection at level 0.05 on the mean-zero
   difference populations, and power at a true shift of +0.04, of the sign-flip test (the
   old verdict test), the paired t test, Hall's skewness-corrected t test, and relgrade's
   :func:`relgrade.evaluation.stats.mean_test` (t below 30 queries off the mode, the
   symmetric bootstrap-t test from there).

Run niced on one core, e.g.::

    nice -n 19 python benchmarks/coverage_intervals.py --part all --replicates 1000

Output: one markdown table per study on stdout (copied into benchmarks/README.md), with the
binomial standard error of a coverage at the replicate count.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import special
from scipy import stats as sps

from relgrade.evaluation import stats
from relgrade.protocol import reliability

LEVEL = 0.95
SIZES = (10, 12, 36, 100, 500)


# --- 1. agreement --------------------------------------------------------------------

SETTINGS = {"constant": None, "mild": 30.0, "moderate": 6.0, "strong": 1.5}
GRADE_P = np.array([0.55, 0.25, 0.20])


def _rater(truth: np.ndarray, rate: np.ndarray, rng) -> np.ndarray:
    """A rater who disagrees with ``truth`` at the pair's rate: one step mostly, two at 20%."""
    off = rng.random(truth.size) < rate
    step = np.where(rng.random(truth.size) < 0.2, 2, 1)
    up = np.where(truth == 0, 1, np.where(truth == 2, -1, rng.choice([-1, 1], truth.size)))
    moved = np.clip(truth + up * step, 0, 2)
    moved = np.where(moved == truth, truth + up, moved)
    return np.where(off, moved, truth)


def _audit(n_queries: int, conc: float | None, rng):
    sizes = rng.integers(10, 26, n_queries)
    rate = np.full(n_queries, 0.25) if conc is None else rng.beta(0.25 * conc, 0.75 * conc,
                                                                  n_queries)
    q = np.repeat(np.arange(n_queries), sizes)
    r = rate[q]
    truth = rng.choice(3, q.size, p=GRADE_P)
    a = _rater(truth, r / 2, rng)
    b = _rater(truth, r / 2, rng)
    c = _rater(truth, r / 2, rng)
    return q, a, b, c


def _agreement_stats(a, b, c):
    lab = [0, 1, 2]
    counts = np.stack([(np.stack([a, b, c], 1) == g).sum(1) for g in lab], 1)
    return {
        "weighted_kappa": reliability.cohen_kappa_point(a, b, labels=lab, weights="quadratic"),
        "binary_kappa": reliability.cohen_kappa_point((a >= 1) * 1, (b >= 1) * 1, labels=[0, 1]),
        "kappa": reliability.cohen_kappa_point(a, b, labels=lab),
        "disagreement": float(np.mean(a != b)),
        "two_step_disagreement": float(np.mean(np.abs(a - b) >= 2)),
        "fleiss_kappa": reliability.fleiss_kappa_point(counts),
        "krippendorff_alpha": reliability.krippendorff_alpha_point(
            np.stack([a, b, c], 1).astype(float), values=lab),
    }


def _agreement_intervals(q, a, b, c, clusters, rng_seed, resamples):
    lab = [0, 1, 2]
    kw = {"resamples": resamples, "level": LEVEL, "clusters": clusters}
    counts = np.stack([(np.stack([a, b, c], 1) == g).sum(1) for g in lab], 1)
    steps = np.abs(a - b)

    def g():
        return np.random.default_rng(rng_seed)

    return {
        "weighted_kappa": reliability.cohen_kappa_interval(a, b, labels=lab, weights="quadratic",
                                                           rng=g(), **kw),
        "binary_kappa": reliability.cohen_kappa_interval((a >= 1) * 1, (b >= 1) * 1,
                                                         labels=[0, 1], rng=g(), **kw),
        "kappa": reliability.cohen_kappa_interval(a, b, labels=lab, rng=g(), **kw),
        "disagreement": reliability.share_interval(steps >= 1, rng=g(), **kw),
        "two_step_disagreement": reliability.share_interval(steps >= 2, rng=g(), **kw),
        "fleiss_kappa": reliability.fleiss_kappa_interval(counts, rng=g(), **kw),
        "krippendorff_alpha": reliability.krippendorff_alpha_interval(
            np.stack([a, b, c], 1).astype(float), values=lab, rng=g(),
            resamples=resamples, confidence=LEVEL, clusters=clusters),
    }


def agreement_study(replicates: int, resamples: int, n_queries: int, seed: int,
                    units=("pair", "query")) -> list[str]:
    heads = {"pair": "pairs (old)", "query": "queries (relgrade)"}
    lines = [f"Agreement, {n_queries} audited queries, {replicates} replicates, "
             f"{resamples} resamples, nominal {LEVEL:.0%}: coverage % (truth on the "
             "optimistic side %)", "",
             "| setting | statistic | " + " | ".join(heads[u] for u in units) + " |",
             "|---|---|" + "---|" * len(units)]
    for name, conc in SETTINGS.items():
        rng = np.random.default_rng([seed, list(SETTINGS).index(name)])
        q, a, b, c = _audit(20_000, conc, rng)
        truth = _agreement_stats(a, b, c)
        hit = {u: {k: 0 for k in truth} for u in units}
        below = {u: {k: 0 for k in truth} for u in units}
        for r in range(replicates):
            q, a, b, c = _audit(n_queries, conc, rng)
            for unit, clusters in (("pair", None), ("query", q)):
                if unit not in units:
                    continue
                iv = _agreement_intervals(q, a, b, c, clusters, r, resamples)
                for k, v in iv.items():
                    if v.low is None:
                        continue
                    hit[unit][k] += v.low <= truth[k] <= v.high
                    # a kappa's optimistic error: truth below the interval; a
                    # disagreement's: truth above it
                    if k.endswith("disagreement"):
                        below[unit][k] += truth[k] > v.high
                    else:
                        below[unit][k] += truth[k] < v.low
        for k in truth:
            cells = [f"{100 * hit[u][k] / replicates:.1f} ({100 * below[u][k] / replicates:.1f})"
                     for u in units]
            lines.append(f"| {name} | {k} | " + " | ".join(cells) + " |")
    return lines


def _unit_tables(q, a, b, c):
    """Per-query sufficient tables of each statistic and its function of sums:
    {name: (per_query (n, m), stat(sums (B, m)) -> (B,), transform, inverse)}."""
    lab = [0, 1, 2]
    wq = reliability._disagreement_weights(3, "quadratic")
    w0 = reliability._disagreement_weights(3, None)
    w2 = reliability._disagreement_weights(2, None)
    steps = np.abs(a - b).astype(float)
    counts = np.stack([(np.stack([a, b, c], 1) == g).sum(1) for g in lab], 1).astype(float)
    coinc = reliability._coincidences(np.stack([a, b, c], 1).astype(float),
                                      np.array(lab, float))
    v = np.array(lab, float)
    z = (np.arctanh, np.tanh)                       # Fisher z for kappa-like statistics
    asn = (lambda p: np.arcsin(np.sqrt(np.clip(p, 0, 1))),
           lambda y: np.sin(np.clip(y, 0, np.pi / 2)) ** 2)

    def share(t):
        with np.errstate(all="ignore"):
            return t[:, 0] / t[:, 1]

    def sums(per_item):
        return reliability.cluster_sums(per_item, q)

    cell = reliability._cell_table(a, b, lab)
    bcell = reliability._cell_table((a >= 1) * 1, (b >= 1) * 1, [0, 1])
    return {
        "weighted_kappa": (sums(cell), lambda t: reliability._kappa_of_tables(t, wq), z),
        "binary_kappa": (sums(bcell), lambda t: reliability._kappa_of_tables(t, w2), z),
        "kappa": (sums(cell), lambda t: reliability._kappa_of_tables(t, w0), z),
        "disagreement": (sums(np.column_stack([steps >= 1, np.ones(steps.size)]) * 1.0),
                         share, asn),
        "two_step_disagreement": (sums(np.column_stack([steps >= 2, np.ones(steps.size)])
                                       * 1.0), share, asn),
        "fleiss_kappa": (sums(reliability._fleiss_per_item(counts)),
                         reliability._fleiss_of_sums, z),
        "krippendorff_alpha": (sums(coinc),
                               lambda s: reliability._alpha_of_sums(s, "ordinal", v), z),
    }


AGREEMENT_METHODS = ("expanded percentile", "jackknife t", "jackknife t, transformed",
                     "bootstrap-t", "bootstrap-t, transformed")


def _jack_se(theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Delete-one-unit jackknife SE of each row: theta (B, n) the statistic without one
    drawn copy of unit j, w (B, n) its multiplicity (units drawn w_j times)."""
    n = w.sum(1)
    with np.errstate(all="ignore"):
        tw = np.where(w > 0, theta, 0.0)
        mean = (w * tw).sum(1) / n
        var = (n - 1) / n * (w * (tw - mean[:, None]) ** 2).sum(1)
    return np.sqrt(var)


def cluster_candidates(per_unit: np.ndarray, stat, transform, rng, b: int) -> dict:
    """Candidate intervals of ``stat`` over ``per_unit`` (n units, m sums):
    {method: (low, high)} (None when undefined)."""
    n, m = per_unit.shape
    total = per_unit.sum(0)
    est = stat(total[None])[0]
    jk = stat(total[None] - per_unit)
    w = reliability._weights(n, rng, b).astype(float)
    s = w @ per_unit
    th = stat(s)
    thj = stat((s[:, None, :] - per_unit[None]).reshape(-1, m)).reshape(b, n)
    one = np.ones((1, n))
    tq = float(sps.t.ppf((1 + LEVEL) / 2, n - 1))
    out = {}
    ok = np.isfinite(th)
    lv = reliability.quantile_levels(LEVEL, n, expanded=True)
    out["expanded percentile"] = tuple(np.quantile(th[ok], lv)) if ok.any() else None
    a2 = (1 - LEVEL) / 2
    for suffix, (f, finv) in (("", (lambda x: x, lambda y: y)), (", transformed", transform)):
        with np.errstate(all="ignore"):
            e, j, t, tj = f(est), f(jk), f(th), f(thj)
        if not np.isfinite(e) or not np.all(np.isfinite(j)):
            out["jackknife t" + suffix] = None
            out["bootstrap-t" + suffix] = None
            continue
        se = _jack_se(j[None], one)[0]
        out["jackknife t" + suffix] = (finv(e - tq * se), finv(e + tq * se))
        sej = _jack_se(np.where(w > 0, tj, 0.0), w)
        with np.errstate(all="ignore"):
            ts = (t - e) / sej
        good = np.isfinite(ts) & np.isfinite(t) & np.all(np.isfinite(np.where(w > 0, tj, 0.0)), 1)
        if se == 0 or good.sum() < 0.5 * b:
            out["bootstrap-t" + suffix] = None
            continue
        lo_q, hi_q = np.quantile(ts[good], [a2, 1 - a2])
        out["bootstrap-t" + suffix] = (finv(e - hi_q * se), finv(e - lo_q * se))
    return out


def agreement_candidates_study(replicates: int, resamples: int, n_queries: int,
                               seed: int) -> list[str]:
    """Coverage of candidate clustered intervals, vectorised over resamples."""
    lines = [f"Agreement candidates, {n_queries} audited queries, {replicates} replicates, "
             f"{resamples} resamples, nominal {LEVEL:.0%}: coverage % (optimistic miss %); "
             "'-' counts an undefined interval as a miss", "",
             "| setting | statistic | " + " | ".join(AGREEMENT_METHODS) + " |",
             "|---|---|" + "---|" * len(AGREEMENT_METHODS)]
    for name, conc in SETTINGS.items():
        rng = np.random.default_rng([seed, list(SETTINGS).index(name)])
        q, a, b, c = _audit(20_000, conc, rng)
        truth = _agreement_stats(a, b, c)
        hit = {k: dict.fromkeys(AGREEMENT_METHODS, 0) for k in truth}
        opt = {k: dict.fromkeys(AGREEMENT_METHODS, 0) for k in truth}
        for r in range(replicates):
            q, a, b, c = _audit(n_queries, conc, rng)
            for k, (pu, stat, tr) in _unit_tables(q, a, b, c).items():
                iv = cluster_candidates(pu, stat, tr, np.random.default_rng([seed, r]),
                                        resamples)
                for meth, v in iv.items():
                    if v is None:
                        continue
                    lo, hi = min(v), max(v)
                    hit[k][meth] += lo <= truth[k] <= hi
                    opt[k][meth] += (truth[k] > hi) if k.endswith("disagreement") \
                        else (truth[k] < lo)
        for k in truth:
            cells = [f"{100 * hit[k][m_] / replicates:.1f} ({100 * opt[k][m_] / replicates:.1f})"
                     for m_ in AGREEMENT_METHODS]
            lines.append(f"| {name} | {k} | " + " | ".join(cells) + " |")
        print("\n".join(lines[-len(truth):]), flush=True)
    return lines


def agreement_width_study(replicates: int, resamples: int, n_queries: int,
                          seed: int) -> list[str]:
    """Median widths of the expanded percentile and the transformed jackknife t intervals
    on the first ``replicates`` audits of the agreement study (constant and strong)."""
    lines = [f"Agreement interval widths, {n_queries} audited queries, first {replicates} "
             "replicates, median width", "",
             "| setting | statistic | expanded percentile | jackknife t, transformed |",
             "|---|---|---|---|"]
    for name in ("constant", "strong"):
        conc = SETTINGS[name]
        rng = np.random.default_rng([seed, list(SETTINGS).index(name)])
        _audit(20_000, conc, rng)
        wide = {}
        for r in range(replicates):
            q, a, b, c = _audit(n_queries, conc, rng)
            for k, (pu, stat, tr) in _unit_tables(q, a, b, c).items():
                n = pu.shape[0]
                w = reliability._weights(n, np.random.default_rng([seed, r]), resamples)
                th = stat(w.astype(float) @ pu)
                th = th[np.isfinite(th)]
                lo, hi = np.quantile(th, reliability.quantile_levels(LEVEL, n, expanded=True))
                f = reliability.fisher_z if tr[0] is np.arctanh else reliability.arcsine_root
                ends = reliability.jackknife_t(pu, stat, level=LEVEL, transform=f)
                if ends is not None:
                    wide.setdefault(k, []).append((hi - lo, ends[1] - ends[0]))
        for k, v in wide.items():
            e, j = np.median(np.array(v), axis=0)
            lines.append(f"| {name} | {k} | {e:.3f} | {j:.3f} |")
    return lines


# --- 2. paired differences -----------------------------------------------------------

def _skewed(rng, shape, win_rate=0.25, win=0.12):
    """Mean-zero differences: a share ``win_rate`` of queries wins about ``win``, the
    rest lose about ``win * win_rate / (1 - win_rate)`` (Gamma(2, 0.5) magnitudes)."""
    w = rng.random(shape) < win_rate
    g = rng.gamma(2.0, 0.5, shape)
    return np.where(w, win * g, -(win * win_rate / (1 - win_rate)) * g)


def population(name: str, rng, shape) -> np.ndarray:
    """Draws of one population; every difference population has mean exactly 0."""
    if name == "symmetric":
        return rng.normal(0.0, 0.1, shape)
    if name == "skewed":
        return _skewed(rng, shape)
    if name == "symmetric, 50% ties":
        return np.where(rng.random(shape) < 0.5, 0.0, rng.normal(0.0, 0.14, shape))
    if name == "skewed, 50% ties":
        return np.where(rng.random(shape) < 0.5, 0.0, _skewed(rng, shape))
    if name == "skewed, rare wins":
        return _skewed(rng, shape, win_rate=0.1, win=0.3)
    if name == "arm: 30% zeros":
        return np.where(rng.random(shape) < 0.3, 0.0, rng.beta(2.0, 3.0, shape))
    raise ValueError(name)


TRUE_MEAN = {"arm: 30% zeros": 0.7 * 0.4}
POPULATIONS = ("symmetric", "skewed", "symmetric, 50% ties", "skewed, 50% ties",
               "arm: 30% zeros", "skewed, rare wins")


def _boot(x: np.ndarray, rng, b: int):
    """Bootstrap means and SDs of each row of x (R, n): shapes (R, b)."""
    r, n = x.shape
    means = np.empty((r, b))
    sds = np.empty((r, b))
    rows = max(1, (1 << 22) // (b * n))
    for s in range(0, r, rows):
        xs = x[s:s + rows]
        idx = rng.integers(0, n, size=(xs.shape[0], b, n))
        g = np.take_along_axis(xs[:, None, :], idx, axis=2)
        means[s:s + rows] = g.mean(axis=2)
        sds[s:s + rows] = g.std(axis=2, ddof=1)
    return means, sds


def _quantile_rows(v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Row-wise quantiles (linear) of v (R, b) at per-row probabilities p (R,)."""
    s = np.sort(v, axis=1)
    b = v.shape[1]
    h = (b - 1) * np.clip(p, 0, 1)
    lo = np.floor(h).astype(int)
    hi = np.minimum(lo + 1, b - 1)
    rows = np.arange(v.shape[0])
    return s[rows, lo] + (h - lo) * (s[rows, hi] - s[rows, lo])


def hall_rows(x: np.ndarray):
    """Hall's (1992) skewness-corrected t of each row of x (R, n) for a mean of 0:
    (statistic T_H, b, mean, se) with T_H = T + b T^2 + b^2 T^3 / 3 + b / 2,
    T = sqrt(n) mean / s, b = gamma / (3 sqrt(n)), gamma = m3 / s^3 (m3 the mean cubed
    deviation, s the ddof-1 SD)."""
    n = x.shape[1]
    m = x.mean(1)
    sd = x.std(1, ddof=1)
    m3 = ((x - m[:, None]) ** 3).mean(1)
    with np.errstate(all="ignore"):
        gamma = np.where(sd > 0, m3 / sd ** 3, 0.0)
        t = m / (sd / math.sqrt(n))
    b = gamma / (3 * math.sqrt(n))
    th = t + b * t ** 2 + b ** 2 * t ** 3 / 3 + b / 2
    return th, b, m, sd / math.sqrt(n)


def hall_inverse(y, b):
    """The T with T + b T^2 + b^2 T^3 / 3 + b / 2 = y (the transformation is monotone)."""
    y = np.asarray(y, float)
    b = np.asarray(b, float)
    with np.errstate(all="ignore"):
        inv = (np.cbrt(1 + 3 * b * (y - b / 2)) - 1) / b
    return np.where(np.abs(b) < 1e-12, y - b / 2, inv)


def hall_interval_rows(x: np.ndarray):
    n = x.shape[1]
    _, b, m, se = hall_rows(x)
    tq = sps.t.ppf((1 + LEVEL) / 2, n - 1)
    return m - se * hall_inverse(tq, b), m - se * hall_inverse(-tq, b)


def hall_p_rows(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    th = hall_rows(x)[0]
    return np.nan_to_num(2 * sps.t.sf(np.abs(th), n - 1), nan=1.0)


def candidate_intervals(x: np.ndarray, rng, b: int) -> dict:
    """Every candidate interval for each row of x (R, n): {name: (low, high)}."""
    r, n = x.shape
    m = x.mean(1)
    sd = x.std(1, ddof=1)
    se = sd / math.sqrt(n)
    tq = sps.t.ppf((1 + LEVEL) / 2, n - 1)
    out = {"t": (m - tq * se, m + tq * se)}
    bm, bs = _boot(x, rng, b)
    a2 = (1 - LEVEL) / 2
    out["percentile"] = (np.quantile(bm, a2, axis=1), np.quantile(bm, 1 - a2, axis=1))
    c = math.sqrt(n / (n - 1)) * tq
    pe = special.ndtr(np.array([-c, c]))
    out["expanded percentile"] = (np.quantile(bm, pe[0], axis=1), np.quantile(bm, pe[1], axis=1))
    # BCa as relgrade computes it (ties count half; jackknife acceleration)
    p0 = ((bm < m[:, None]).sum(1) + (bm <= m[:, None]).sum(1)) / (2.0 * b)
    jk = (x.sum(1, keepdims=True) - x) / (n - 1)
    dev = jk.mean(1, keepdims=True) - jk
    den = 6.0 * (dev ** 2).sum(1) ** 1.5
    with np.errstate(all="ignore"):
        acc = np.where(den > 0, (dev ** 3).sum(1) / den, 0.0)
        z0 = special.ndtri(np.clip(p0, 1e-12, 1 - 1e-12))
        lohi = []
        for z in special.ndtri(np.array([a2, 1 - a2])):
            lohi.append(special.ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z))))
    bad = (p0 <= 0) | (p0 >= 1) | (den == 0)
    lo_p = np.where(bad, a2, lohi[0])
    hi_p = np.where(bad, 1 - a2, lohi[1])
    out["BCa"] = (_quantile_rows(bm, lo_p), _quantile_rows(bm, hi_p))
    # studentized bootstrap: t* = (m* - m) / (s* / sqrt(n))
    with np.errstate(all="ignore"):
        ts = (bm - m[:, None]) / (bs / math.sqrt(n))
    ts = np.where(np.isnan(ts), 0.0, ts)
    q_lo = np.quantile(ts, a2, axis=1)
    q_hi = np.quantile(ts, 1 - a2, axis=1)
    out["bootstrap-t"] = (m - q_hi * se, m - q_lo * se)
    out["Hall t"] = hall_interval_rows(x)
    return out


def relgrade_intervals(x: np.ndarray, seed: int, b: int):
    lows, highs = np.empty(len(x)), np.empty(len(x))
    for i, row in enumerate(x):
        ci = stats.difference_interval(row, rng=np.random.default_rng([seed, i]),
                                       n_resamples=b, level=LEVEL)
        lows[i], highs[i] = ci.low, ci.high
    return lows, highs


# --- 2b. candidates for the missed cells: empirical likelihood, ties as an atom, betting --

def _masked_moments(x: np.ndarray, mask: np.ndarray):
    """Count, mean and central moments 2-4 (divisor k) of each row's masked values."""
    k = mask.sum(1)
    with np.errstate(all="ignore"):
        m = np.where(mask, x, 0.0).sum(1) / k
        d = np.where(mask, x - m[:, None], 0.0)
        return k, m, (d ** 2).sum(1) / k, (d ** 3).sum(1) / k, (d ** 4).sum(1) / k


def _el_multiplier(x: np.ndarray, mu: np.ndarray, mask: np.ndarray, iters: int = 60):
    """Statistic ``-2 log R(mu)`` (R,), multiplier ``lam`` (R,) and ``inside`` (R,) bool."""
    z = np.where(mask, x - mu[:, None], 0.0)
    zmax = np.where(mask, z, -np.inf).max(1)
    zmin = np.where(mask, z, np.inf).min(1)
    inside = (zmin < 0) & (zmax > 0)
    with np.errstate(all="ignore"):
        lo = np.where(inside, -1.0 / zmax, 0.0)
        hi = np.where(inside, -1.0 / zmin, 0.0)
    lam = np.zeros(len(x))
    for _ in range(iters):
        den = 1.0 + lam[:, None] * z
        g = (z / den).sum(1)
        if np.all(~inside | (np.abs(g) <= 1e-11 * (1.0 + np.abs(z).sum(1)))):
            break
        dg = -(z ** 2 / den ** 2).sum(1)
        lo = np.where(g > 0, lam, lo)     # g decreases in lam: the root lies above lam
        hi = np.where(g > 0, hi, lam)
        with np.errstate(all="ignore"):
            step = lam - g / dg
        ok = (step > lo) & (step < hi) & np.isfinite(step)
        lam = np.where(ok, step, 0.5 * (lo + hi))
        lam = np.where(inside, lam, 0.0)
    with np.errstate(all="ignore"):
        s = 2.0 * np.log1p(np.where(mask, lam[:, None] * z, 0.0)).sum(1)
    return np.where(inside, s, np.inf), lam, inside


def el_statistic(x: np.ndarray, mu: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Owen's (1988) empirical log-likelihood ratio statistic ``-2 log R(mu)`` of each row's
    mean: ``2 sum_i log(1 + lam (x_i - mu))`` with ``lam`` the root of
    ``sum_i (x_i - mu) / (1 + lam (x_i - mu)) = 0`` (Newton safeguarded by bisection on the
    bracket where every ``1 + lam z_i > 0``).

    x : (R, n) float; mu : (R,) float; mask : (R, n) bool, the values that count (all
    by default). Returns (R,) float, ``inf`` where ``mu`` is not strictly inside the
    masked values' range (the empirical likelihood is 0 there).
    """
    mask = np.ones(x.shape, bool) if mask is None else mask
    return _el_multiplier(x, mu, mask)[0]


def el_interval_rows(x: np.ndarray, thresholds: np.ndarray, mask: np.ndarray | None = None,
                     iters: int = 30, tol: float = 1e-11):
    """The empirical-likelihood interval ``{mu: -2 log R(mu) <= c}`` of each row's mean
    (Owen 1988; it lies inside the values' range): (low, high), each (R,). Each end is the
    root of ``-2 log R(mu) = c`` between the mean and the extreme value (the statistic
    rises monotonically away from the mean), by Newton's method on its derivative
    ``d(-2 log R)/d mu = -2 k lam`` (k the values counted; Owen 2001, ch. 3) safeguarded
    by bisection. ``thresholds`` (R,) is ``c`` per row (e.g. ``chi2_1(0.95)``)."""
    mask = np.ones(x.shape, bool) if mask is None else mask
    k, m, m2, *_ = _masked_moments(x, mask)
    ends = []
    for sign, far in ((-1, np.where(mask, x, np.inf).min(1)),
                      (1, np.where(mask, x, -np.inf).max(1))):
        a, b = m.copy(), far.copy()
        mu = m + sign * np.sqrt(thresholds * m2 / k)     # the normal-theory end
        mu = np.where((mu - a) * (mu - b) < 0, mu, 0.5 * (a + b))
        for _ in range(iters):
            stat, lam, _ = _el_multiplier(x, mu, mask)
            over = stat > thresholds
            a, b = np.where(over, a, mu), np.where(over, mu, b)
            with np.errstate(all="ignore"):
                step = mu - (stat - thresholds) / (-2.0 * k * lam)
            ok = np.isfinite(step) & ((step - a) * (step - b) <= 0)
            new = np.where(ok, step, 0.5 * (a + b))
            done = np.abs(new - mu) <= tol * (1.0 + np.abs(mu))
            mu = new
            if np.all(done):
                break
        ends.append(mu)
    return ends[0], ends[1]


def bartlett_factor(x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """DiCiccio, Hall & Romano's (1991) Bartlett factor ``1 + a / n`` of each row, with
    ``a = mu4 / (2 mu2^2) - mu3^2 / (3 mu2^3)`` from the sample central moments; the
    corrected interval is ``{mu: -2 log R(mu) <= chi2_1(level) (1 + a / n)}``."""
    mask = np.ones(x.shape, bool) if mask is None else mask
    k, _, m2, m3, m4 = _masked_moments(x, mask)
    with np.errstate(all="ignore"):
        a = m4 / (2 * m2 ** 2) - m3 ** 2 / (3 * m2 ** 3)
    return 1.0 + np.nan_to_num(a, nan=0.0) / k


def el_rows(x: np.ndarray, level: float = LEVEL, bartlett: bool = False,
            mask: np.ndarray | None = None):
    """The (Bartlett-corrected) empirical-likelihood interval of each row's mean."""
    c = np.full(len(x), sps.chi2.ppf(level, 1))
    if bartlett:
        c = c * bartlett_factor(x, mask)
    return el_interval_rows(x, c, mask)


def atom_rows(x: np.ndarray, inner: str, level: float = LEVEL):
    """Ties as a known atom at 0: ``mean = p * mu`` with ``p`` the share of non-zero
    queries and ``mu`` the non-zero values' mean. Each part gets an interval at
    ``1 - alpha / 2`` (Bonferroni, so the pair covers jointly at >= ``level`` when each
    part does): Clopper & Pearson (1934) for ``p`` from the k non-zero of n, Student t
    (``inner="t"``) or the Bartlett-corrected empirical likelihood (``inner="el"``) for
    ``mu`` on the k non-zero values; the mean's interval is the product set's range
    ``[min(p_lo mu_lo, p_hi mu_lo), max(p_lo mu_hi, p_hi mu_hi)]``. Fewer than 2 non-zero
    values: ``mu`` in [-1, 1] (the differences' bound). Returns (low, high), each (R,)."""
    n = x.shape[1]
    inner_level = 1 - (1 - level) / 2
    mask = x != 0
    k, m, m2, *_ = _masked_moments(x, mask)
    alpha = 1 - inner_level
    with np.errstate(all="ignore"):
        p_lo = np.where(k > 0, sps.beta.ppf(alpha / 2, k, n - k + 1), 0.0)
        p_hi = np.where(k < n, sps.beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    few = k < 2
    if inner == "t":
        kk = np.maximum(k, 2)
        with np.errstate(all="ignore"):
            se = np.sqrt(m2 * k / (kk - 1) / kk)
        q = sps.t.ppf((1 + inner_level) / 2, kk - 1)
        mu_lo, mu_hi = m - q * se, m + q * se
    else:
        safe = np.where(few[:, None], np.array([-1.0, 1.0] + [0.0] * (n - 2))[None], x)
        smask = np.where(few[:, None], np.arange(n)[None] < 2, mask)
        mu_lo, mu_hi = el_rows(safe, inner_level, bartlett=True, mask=smask)
    mu_lo = np.where(few, -1.0, mu_lo)
    mu_hi = np.where(few, 1.0, mu_hi)
    low = np.minimum(p_lo * mu_lo, p_hi * mu_lo)
    high = np.maximum(p_lo * mu_hi, p_hi * mu_hi)
    return low, high


def betting_rows(x: np.ndarray, level: float = LEVEL, bound: float = 1.0,
                 c: float = 0.5, iters: int = 40):
    """Waudby-Smith & Ramdas's (2024, JRSS-B 86(1)) hedged-capital confidence interval
    for the mean of values in ``[-bound, bound]``, valid at every n (no asymptotics), with
    predictable plug-in bets tuned to a fixed n: rescaled to ``y = (x + bound) / (2 bound)``
    in [0, 1], the set of ``m`` with ``max(K+(m) / 2, K-(m) / 2) < 1 / alpha`` (theta 1/2),
    ``K+- = prod_i (1 +- lam_i+-(m) (y_i - m))``, bets
    ``lam_i = sqrt(2 log(2 / alpha) / (n sigma2_{i-1}))`` truncated at ``c / m``
    (``c / (1 - m)`` for K-), ``sigma2_i = (1/4 + sum_{j<=i} (y_j - mu_j)^2) / (i + 1)``,
    ``mu_i = (1/2 + sum_{j<=i} y_j) / (i + 1)``; the values in the order given.
    Each end by bisection between the mean and the bound.
    Returns (low, high) on the scale of x, each (R,)."""
    r, n = x.shape
    alpha = 1 - level
    y = (x + bound) / (2 * bound)
    i = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(y, 1)) / (i + 1)
    s2 = (0.25 + np.cumsum((y - mu) ** 2, 1)) / (i + 1)
    s2_prev = np.concatenate([np.full((r, 1), 0.25), s2[:, :-1]], 1)
    lam = np.sqrt(2 * math.log(2 / alpha) / (n * s2_prev))
    ybar = y.mean(1)

    def rejects(m):
        with np.errstate(all="ignore"):
            lp = np.minimum(lam, c / m[:, None])
            lm = np.minimum(lam, c / (1 - m[:, None]))
            kp = np.log1p(lp * (y - m[:, None])).sum(1)
            km = np.log1p(-lm * (y - m[:, None])).sum(1)
        return np.maximum(kp, km) + math.log(0.5) >= math.log(1 / alpha)

    ends = []
    for far in (np.zeros(r), np.ones(r)):
        a, b = ybar.copy(), far
        for _ in range(iters):
            mid = 0.5 * (a + b)
            out = rejects(mid)
            a, b = np.where(out, a, mid), np.where(out, mid, b)
        ends.append(2 * bound * 0.5 * (a + b) - bound)
    return ends[0], ends[1]


def new_candidate_intervals(x: np.ndarray) -> dict:
    """The candidates for the missed cells on each row of x (R, n): {name: (low, high)};
    deterministic (no resampling), so the other columns' random streams are untouched."""
    return {"EL": el_rows(x), "EL Bartlett": el_rows(x, bartlett=True),
            "atom t": atom_rows(x, "t"), "atom EL-B": atom_rows(x, "el"),
            "betting": betting_rows(x)}


NEW_NAMES = ("EL", "EL Bartlett", "atom t", "atom EL-B", "betting")


def paired_study(replicates: int, resamples: int, seed: int, sizes=SIZES,
                 new_only: bool = False) -> list[str]:
    """Coverage and median widths of every candidate; ``new_only`` computes t, relgrade's
    rule and the new candidates alone (the same samples and the same values: the
    resampling columns in between draw after the samples are made)."""
    names = ["t", "percentile", "BCa", "expanded percentile", "bootstrap-t", "Hall t",
             "relgrade", *NEW_NAMES]
    if new_only:
        names = ["t", "relgrade", *NEW_NAMES]
    lines = [f"Paired differences and arm means, {replicates} replicates, {resamples} "
             f"resamples, nominal {LEVEL:.0%}: coverage %", "",
             "| population | n | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    wide = ["", "Median width of the same intervals", "",
            "| population | n | t | relgrade | " + " | ".join(NEW_NAMES) + " |",
            "|---|---|---|---|" + "---|" * len(NEW_NAMES)]
    for pi, pop in enumerate(POPULATIONS):
        for n in sizes:
            rng = np.random.default_rng([seed, pi, n])
            reps = replicates if n < 500 else max(replicates // 2, 500)
            x = population(pop, rng, (reps, n))
            truth = TRUE_MEAN.get(pop, 0.0)
            if new_only:
                m, se = x.mean(1), x.std(1, ddof=1) / math.sqrt(n)
                tq = sps.t.ppf((1 + LEVEL) / 2, n - 1)
                iv = {"t": (m - tq * se, m + tq * se)}
            else:
                iv = candidate_intervals(x, rng, resamples)
            iv["relgrade"] = relgrade_intervals(x, seed + n, resamples)
            iv.update(new_candidate_intervals(x))
            cov = [100 * np.mean((lo <= truth) & (truth <= hi)) for lo, hi in
                   (iv[k] for k in names)]
            lines.append(f"| {pop} | {n} | " + " | ".join(f"{c:.1f}" for c in cov) + " |")
            wd = [np.median(iv[k][1] - iv[k][0]) for k in ("t", "relgrade", *NEW_NAMES)]
            wide.append(f"| {pop} | {n} | " + " | ".join(f"{w:.3f}" for w in wd) + " |")
            print(lines[-1], flush=True)
    return lines + wide


def shift_study(replicates: int, resamples: int, seed: int, shift: float = 0.04,
                sizes=(12, 36, 100)) -> list[str]:
    """At a true mean ``shift`` on every difference population: the share of intervals
    that exclude 0 (the interval's power) and their median width, for relgrade's rule,
    t and the new candidates."""
    names = ("t", "relgrade", *NEW_NAMES)
    lines = [f"Paired differences shifted by {shift:+.2f}, {replicates} replicates, "
             f"{resamples} resamples: intervals excluding 0 % (median width)", "",
             "| population | n | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    for pi, pop in enumerate(p for p in POPULATIONS if not p.startswith("arm")):
        for n in sizes:
            rng = np.random.default_rng([seed, pi, n, int(shift * 100)])
            x = population(pop, rng, (replicates, n)) + shift
            m, se = x.mean(1), x.std(1, ddof=1) / math.sqrt(n)
            tq = sps.t.ppf((1 + LEVEL) / 2, n - 1)
            iv = {"t": (m - tq * se, m + tq * se),
                  "relgrade": relgrade_intervals(x, seed + n, resamples)}
            iv.update(new_candidate_intervals(x))
            cells = [f"{100 * np.mean((lo > 0) | (hi < 0)):.1f} ({np.median(hi - lo):.3f})"
                     for lo, hi in (iv[k] for k in names)]
            lines.append(f"| {pop} | {n} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    return lines


# --- 3. verdict test -----------------------------------------------------------------

def _sign_flip_p(x: np.ndarray, rng, flips: int, studentized: bool) -> np.ndarray:
    """Monte Carlo sign-flip p-values of each row of x (R, n)."""
    r, n = x.shape
    p = np.empty(r)
    for i in range(r):
        s = rng.choice([-1.0, 1.0], size=(flips, n))
        y = s * x[i]
        if studentized:
            with np.errstate(all="ignore"):
                obs = abs(x[i].mean() / x[i].std(ddof=1))
                t = np.abs(y.mean(1) / y.std(1, ddof=1))
            t = np.nan_to_num(t, nan=0.0)
            obs = 0.0 if not np.isfinite(obs) else obs
            b = (t >= obs * (1 - 1e-9)).sum()
        else:
            obs = abs(x[i].sum())
            b = (np.abs(y.sum(1)) >= obs * (1 - 1e-9)).sum()
        p[i] = (b + 1) / (flips + 1)
    return p


def test_study(replicates: int, flips: int, seed: int, sizes=(12, 36, 100)) -> list[str]:
    lines = [f"Verdict test at 0.05, {replicates} replicates, {flips} sign patterns: "
             "rejection %", "",
             "| population | shift | n | sign-flip (old) | paired t | Hall t | "
             "relgrade mean test |",
             "|---|---|---|---|---|---|---|"]
    for pi, pop in enumerate(p for p in POPULATIONS if not p.startswith("arm")):
        for shift in (0.0, 0.04):
            for n in sizes:
                rng = np.random.default_rng([seed, pi, n, int(shift * 100)])
                x = population(pop, rng, (replicates, n)) + shift
                old = _sign_flip_p(x, rng, flips, studentized=False)
                with np.errstate(all="ignore"):
                    tp = sps.ttest_1samp(x, 0.0, axis=1).pvalue
                tp = np.nan_to_num(tp, nan=1.0)
                new = np.array([stats.mean_test(row, rng=np.random.default_rng([seed, i]),
                                                n_permutations=flips).p
                                for i, row in enumerate(x)])
                hp = hall_p_rows(x)
                lines.append(f"| {pop} | {shift:+.2f} | {n} | {100 * np.mean(old <= .05):.1f} "
                             f"| {100 * np.mean(tp <= .05):.1f} "
                             f"| {100 * np.mean(hp <= .05):.1f} "
                             f"| {100 * np.mean(new <= .05):.1f} |")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("agreement", "agreement-candidates", "agreement-widths",
                                       "paired", "paired-shift", "tests", "all"),
                    default="all")
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--flips", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--units", choices=("both", "query"), default="both",
                    help="agreement part: both resampling units, or queries only")
    ap.add_argument("--new-only", action="store_true",
                    help="paired part: t, relgrade's rule and the new candidates alone")
    args = ap.parse_args(argv)
    t0 = time.process_time()
    parts = ("agreement", "paired", "tests") if args.part == "all" else (args.part,)
    for part in parts:
        t = time.process_time()
        if part == "agreement":
            lines = agreement_study(args.replicates, args.resamples, 10, args.seed,
                                    ("pair", "query") if args.units == "both" else ("query",))
        elif part == "agreement-widths":
            lines = agreement_width_study(args.replicates, args.resamples, 10, args.seed)
        elif part == "agreement-candidates":
            lines = agreement_candidates_study(args.replicates, args.resamples, 10, args.seed)
        elif part == "paired":
            lines = paired_study(args.replicates, args.resamples, args.seed,
                                 new_only=args.new_only)
        elif part == "paired-shift":
            lines = shift_study(args.replicates, args.resamples, args.seed)
        else:
            lines = test_study(args.replicates, args.flips, args.seed)
        print("\n".join(lines))
        print(f"\n({part}: {time.process_time() - t:.0f} CPU-s)\n", flush=True)
    print(f"total {time.process_time() - t0:.0f} CPU-s")


if __name__ == "__main__":
    main()
