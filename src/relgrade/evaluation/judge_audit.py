"""The judge audit: how a model grader's grades differ from people's, arm by arm.

On the queries people graded in full (the human sample of a prediction-powered run), this
module measures

* each arm's **leniency**: the mean of (model grade - human grade) over the (query, chunk)
  pairs the arm ranked in its top ``k``, with a query-clustered interval;
* two **flags**: the spread between the most and the least lenient arm above
  ``max_spread`` (default 0.15 grade), and **family affinity**, when the model grader's
  family equals an arm's declared family and that arm is the most lenient (a grader may
  favour text that resembles its own family);
* how well the model key **orders the arms** as people do: Kendall's tau-b over all arms,
  tau-b among the top half of the arms (by the human-key mean) and the agreement on close
  pairs of arms, each with a query bootstrap interval.

Grades come as matrices over the pool columns (see :mod:`relgrade.evaluation.pooled`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from relgrade.errors import InputError
from relgrade.evaluation.pooled import ndcg_at_k

#: Default largest spread of leniency between arms, in grades, before the audit flags it.
MAX_SPREAD = 0.15

#: Default |human-key difference| below which two arms count as a close pair.
CLOSE = 0.02


@dataclass(frozen=True)
class Leniency:
    """One arm's mean (model grade - human grade) over the pairs it retrieved.

    Attributes
    ----------
    arm : str
    family : str or None
        The arm's declared family.
    mean : float
        ``sum(model - human) / pairs`` over the arm's top-k pairs on the human sample.
    se : float
        Query-clustered standard error (see :func:`arm_leniency`).
    low, high : float
        Normal interval ``mean -/+ z_{1 - alpha/2} * se``.
    pairs : int
        Pairs with both grades behind the mean.
    queries : int
        Sample queries with at least one such pair (the clusters).
    """

    arm: str
    family: str | None
    mean: float
    se: float
    low: float
    high: float
    pairs: int
    queries: int

    def to_dict(self) -> dict:
        return {"arm": self.arm, "family": self.family, "mean": float(self.mean),
                "se": float(self.se), "low": float(self.low), "high": float(self.high),
                "pairs": int(self.pairs), "queries": int(self.queries)}


@dataclass(frozen=True)
class OrderStatistic:
    """One statistic of agreement between the model-key and the human-key arm orders.

    Attributes
    ----------
    name : str
        ``"kendall_tau"``, ``"top_half_tau"`` or ``"close_pair_agreement"``.
    value : float or None
        On the observed sample; ``None`` when undefined (no close pair, or every arm tied).
    low, high : float or None
        Percentile bootstrap interval over queries.
    arms : tuple of str
        The arms it is computed over.
    pairs : int
        Pairs of arms it is computed over.
    n_resamples : int
    """

    name: str
    value: float | None
    low: float | None
    high: float | None
    arms: tuple
    pairs: int
    n_resamples: int

    def to_dict(self) -> dict:
        f = (lambda x: None if x is None else float(x))
        return {"name": self.name, "value": f(self.value), "low": f(self.low),
                "high": f(self.high), "arms": list(self.arms), "pairs": int(self.pairs),
                "n_resamples": int(self.n_resamples)}


@dataclass(frozen=True)
class JudgeAudit:
    """The judge audit of one model grader against people on the human sample.

    Attributes
    ----------
    leniency : tuple of Leniency
        One per arm, in arm order.
    spread : float
        Largest minus smallest arm leniency.
    max_spread : float
    spread_flag : bool
        ``spread > max_spread``.
    affinity_arms : tuple of str
        Arms flagged for family affinity (the model grader's family, and the largest
        leniency); empty when none.
    order : tuple of OrderStatistic
        Kendall tau, top-half tau, close-pair agreement.
    flags : tuple of str
        The flags in words, for the report.
    """

    leniency: tuple
    spread: float
    max_spread: float
    spread_flag: bool
    affinity_arms: tuple
    order: tuple
    flags: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"leniency": [x.to_dict() for x in self.leniency], "spread": float(self.spread),
                "max_spread": float(self.max_spread), "spread_flag": bool(self.spread_flag),
                "affinity_arms": list(self.affinity_arms),
                "order": [o.to_dict() for o in self.order], "flags": list(self.flags)}


# --- leniency ------------------------------------------------------------------------

def _grades(x, what: str) -> np.ndarray:
    g = np.asarray(x, dtype=np.float64)
    if g.ndim != 2:
        raise InputError(f"{what} must have shape (n_queries, pool_width)", found=f"{g.shape}")
    return g


def _sample(sample, n_queries: int) -> np.ndarray:
    s = np.asarray(sample, dtype=np.int64)
    if s.ndim != 1 or s.size < 2:
        raise InputError("the judge audit needs at least 2 human-sample queries",
                         found=f"{s.size}")
    if (s < 0).any() or (s >= n_queries).any() or np.unique(s).size != s.size:
        raise InputError("the human sample must be distinct queries of the pool",
                         found=f"positions outside [0, {n_queries}) or repeated")
    return s


def arm_leniency(human_grades, model_grades, ranked, *, sample, k: int = 10,
                 arms: Sequence[str] | None = None, families: Mapping[str, str] | None = None,
                 alpha: float = 0.05) -> tuple[Leniency, ...]:
    """Each arm's mean (model grade - human grade) over its top-k pairs on the human sample.

    Parameters
    ----------
    human_grades, model_grades : array-like of shape (n_queries, pool_width), float
        Grades of the pool columns under each key; NaN = not graded. Only the rows in
        ``sample`` are read.
    ranked : array-like of shape (n_arms, n_queries, depth), int
        Pool columns at each rank, -1 for none (see :mod:`relgrade.evaluation.pooled`).
    sample : array-like of shape (n,), int
        Positions of the human-sample queries, ``n >= 2``.
    k : int, default 10
        Ranks of each arm that count.
    arms : sequence of str, optional
        Arm names (default ``"0", "1", ...``).
    families : mapping of arm -> str, optional
        Declared family of each arm.
    alpha : float, default 0.05

    Returns
    -------
    tuple of Leniency

    Raises
    ------
    InputError
        Shapes that disagree, a bad sample, or an arm with pairs on fewer than 2 queries.

    Notes
    -----
    The mean is a ratio ``R = sum_q s_q / sum_q m_q`` of per-query sums ``s_q`` of the
    differences and counts ``m_q`` of pairs. Pairs of one query share the query and the
    grader's state of mind on it, so the query is the cluster: the standard error is the
    cluster-robust (linearised ratio) one,
    ``se^2 = G / (G - 1) * sum_q (s_q - R m_q)^2 / (sum_q m_q)^2`` over the ``G`` queries
    with pairs. It needs no random draws. A pair retrieved by several arms counts for each.
    """
    h, m = _grades(human_grades, "human grades"), _grades(model_grades, "model grades")
    r = np.asarray(ranked)
    if h.shape != m.shape or r.ndim != 3 or r.shape[1] != h.shape[0] or r.shape[2] < k:
        raise InputError("human grades, model grades and ranked lists disagree in shape",
                         found=f"{h.shape}, {m.shape}, {r.shape}")
    s = _sample(sample, h.shape[0])
    names = [str(i) for i in range(r.shape[0])] if arms is None else [str(a) for a in arms]
    fam = dict(families or {})
    from scipy import stats as sps
    z = float(sps.norm.ppf(1 - alpha / 2))
    diff = m[s] - h[s]                                       # (n, width)
    padded = np.concatenate([diff, np.full((s.size, 1), np.nan)], axis=1)
    out = []
    for a, name in enumerate(names):
        cols = r[a][s][:, :k]
        cols = np.where(cols < 0, diff.shape[1], cols)
        d = padded[np.arange(s.size)[:, None], cols]         # (n, k)
        ok = ~np.isnan(d)
        s_q, m_q = np.where(ok, d, 0.0).sum(axis=1), ok.sum(axis=1).astype(np.float64)
        has = m_q > 0
        g = int(has.sum())
        if g < 2:
            raise InputError("leniency needs graded pairs on at least 2 sample queries",
                             item=f"arm {name}", found=f"{g}")
        ratio = s_q.sum() / m_q.sum()
        u = (s_q - ratio * m_q)[has]
        se = math.sqrt(g / (g - 1) * (u ** 2).sum()) / m_q.sum()
        out.append(Leniency(arm=name, family=fam.get(name), mean=float(ratio), se=se,
                            low=ratio - z * se, high=ratio + z * se, pairs=int(m_q.sum()),
                            queries=g))
    return tuple(out)


# --- order agreement -----------------------------------------------------------------

def kendall_tau_b(x, y) -> np.ndarray | float:
    """Kendall's tau-b between two orderings, over the last axis, vectorised.

    Parameters
    ----------
    x, y : array-like of shape (..., m), float
        Scores of ``m`` items under two keys; leading axes broadcast.

    Returns
    -------
    float or numpy.ndarray of shape (...)
        ``sum_{i<j} sx_ij sy_ij / sqrt(sum sx_ij^2 * sum sy_ij^2)`` with
        ``sx_ij = sign(x_i - x_j)``: tau-b (ties in either key leave the pair out of that
        key's count). NaN when every item is tied under one key.

    Examples
    --------
    >>> float(kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]))  # 5 concordant, 1 discordant: 4/6
    0.6666666666666666
    """
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(xa.shape[-1], 1)
    sx, sy = np.sign(xa[..., i] - xa[..., j]), np.sign(ya[..., i] - ya[..., j])
    num = (sx * sy).sum(axis=-1)
    den = np.sqrt((sx ** 2).sum(axis=-1) * (sy ** 2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def _interval(boot: np.ndarray, alpha: float):
    b = boot[np.isfinite(boot)]
    if b.size == 0:
        return None, None
    lo, hi = np.quantile(b, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _value(x) -> float | None:
    return None if not np.isfinite(x) else float(x)


def order_agreement(human_values, model_values, *, rng: np.random.Generator,
                    arms: Sequence[str] | None = None, n_resamples: int = 1000,
                    close: float = CLOSE, alpha: float = 0.05) -> tuple[OrderStatistic, ...]:
    """Agreement of the arm orders under the model key and the human key, with intervals.

    Parameters
    ----------
    human_values, model_values : array-like of shape (n_arms, n), float
        Each arm's per-query metric on the human-sample queries under each key.
    rng : numpy.random.Generator
        Source of the bootstrap: each resample is ``rng.integers(0, n, size=n)``.
    arms : sequence of str, optional
    n_resamples : int, default 1000
    close : float, default 0.02
        Two arms are a close pair when their human-key means differ by less than this.
    alpha : float, default 0.05
        Percentile intervals at ``alpha / 2`` and ``1 - alpha / 2``.

    Returns
    -------
    tuple of OrderStatistic
        ``kendall_tau`` (tau-b over all arms of the two keys' means), ``top_half_tau``
        (tau-b over the ``ceil(n_arms / 2)`` arms with the highest human-key means on the
        sample, at least 2) and ``close_pair_agreement``.

    Notes
    -----
    Close-pair agreement is the share of close pairs (chosen once, on the observed
    human-key means) whose difference has the same sign under both keys. It is ``None``
    when no pair is close. Each resample draws queries with replacement, recomputes the
    means under both keys and the three statistics on the same arms and pairs.
    """
    hv = np.asarray(human_values, dtype=np.float64)
    mv = np.asarray(model_values, dtype=np.float64)
    if hv.shape != mv.shape or hv.ndim != 2 or hv.shape[0] < 2 or hv.shape[1] < 2:
        raise InputError("order agreement needs per-query values of shape (n_arms >= 2, n >= 2) "
                         "under both keys", found=f"{hv.shape} and {mv.shape}")
    names = tuple(str(i) for i in range(hv.shape[0])) if arms is None else tuple(map(str, arms))
    n_arms, n = hv.shape
    hm, mm = hv.mean(axis=1), mv.mean(axis=1)
    idx = rng.integers(0, n, size=(int(n_resamples), n), dtype=np.int64)
    hb, mb = hv[:, idx].mean(axis=2).T, mv[:, idx].mean(axis=2).T     # (B, n_arms)
    top = np.sort(np.argsort(-hm, kind="stable")[:max(2, math.ceil(n_arms / 2))])
    i, j = np.triu_indices(n_arms, 1)
    near = np.abs(hm[i] - hm[j]) < close
    ci, cj = i[near], j[near]

    def agree(h, m):
        return (np.sign(h[..., ci] - h[..., cj]) == np.sign(m[..., ci] - m[..., cj])).mean(axis=-1)

    out = []
    tau_b = kendall_tau_b(mb, hb)
    out.append(OrderStatistic("kendall_tau", _value(kendall_tau_b(mm, hm)),
                              *_interval(tau_b, alpha), names, int(i.size), int(n_resamples)))
    tt = kendall_tau_b(mb[:, top], hb[:, top])
    out.append(OrderStatistic("top_half_tau", _value(kendall_tau_b(mm[top], hm[top])),
                              *_interval(tt, alpha), tuple(names[t] for t in top),
                              int(top.size * (top.size - 1) // 2), int(n_resamples)))
    if ci.size:
        out.append(OrderStatistic("close_pair_agreement", float(agree(hm, mm)),
                                  *_interval(agree(hb, mb), alpha),
                                  tuple(sorted({names[x] for x in np.concatenate([ci, cj])})),
                                  int(ci.size), int(n_resamples)))
    else:
        out.append(OrderStatistic("close_pair_agreement", None, None, None, (), 0,
                                  int(n_resamples)))
    return tuple(out)


def judge_audit(human_grades, model_grades, ranked, *, sample, rng: np.random.Generator,
                arms: Sequence[str] | None = None, families: Mapping[str, str] | None = None,
                model_family: str | None = None, k: int = 10, max_spread: float = MAX_SPREAD,
                close: float = CLOSE, n_resamples: int = 1000,
                alpha: float = 0.05) -> JudgeAudit:
    """Leniency per arm, its flags and the order agreement of the two keys on the human sample.

    Parameters
    ----------
    human_grades, model_grades, ranked, sample, k, arms, families, alpha
        As in :func:`arm_leniency`.
    rng : numpy.random.Generator
        Source of the bootstrap of :func:`order_agreement`.
    model_family : str, optional
        The model grader's family; ``None`` disables the family flag.
    max_spread : float, default 0.15
        Leniency spread (grades) above which the audit flags.
    close, n_resamples
        As in :func:`order_agreement`; the per-query metric is nDCG@k
        (:func:`relgrade.evaluation.pooled.ndcg_at_k`) under each key.

    Returns
    -------
    JudgeAudit
    """
    if not (isinstance(max_spread, (int, float)) and max_spread >= 0):
        raise InputError("max_spread must be a grade difference >= 0", found=repr(max_spread))
    len_ = arm_leniency(human_grades, model_grades, ranked, sample=sample, k=k, arms=arms,
                        families=families, alpha=alpha)
    means = np.array([x.mean for x in len_])
    spread = float(means.max() - means.min())
    top = means.max()
    affinity = tuple(x.arm for x in len_ if model_family is not None
                     and x.family == model_family and x.mean == top)
    flags = []
    if spread > max_spread:
        flags.append(f"leniency spread {spread:.3f} grade exceeds {max_spread:g} "
                     f"(most lenient arm {len_[int(means.argmax())].arm})")
    for a in affinity:
        flags.append(f"family affinity: arm {a} shares the model grader's family "
                     f"{model_family} and is the most lenient")
    s = _sample(sample, np.asarray(human_grades).shape[0])
    r = np.asarray(ranked)[:, s]
    hv = ndcg_at_k(np.asarray(human_grades, dtype=np.float64)[s], r, k=k)
    mv = ndcg_at_k(np.asarray(model_grades, dtype=np.float64)[s], r, k=k)
    order = order_agreement(hv, mv, rng=rng, arms=[x.arm for x in len_], close=close,
                            n_resamples=n_resamples, alpha=alpha)
    return JudgeAudit(leniency=len_, spread=spread, max_spread=float(max_spread),
                      spread_flag=spread > max_spread, affinity_arms=affinity, order=order,
                      flags=tuple(flags))
