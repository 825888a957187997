"""Anytime-valid confidence sequences and p-values for bounded means, and the stopping rule
that reads them.

People grade the human sample one query at a time in a seeded order. After each query ``t``
the per-query values seen so far (for a paired comparison, the difference of two arms'
values, in [-1, 1]) give a **confidence sequence**: intervals ``C_1, C_2, ...`` that cover the
mean of the whole query population *at every t at once* with probability at least the level.
Stopping at a data-dependent time (when every verdict is settled) therefore keeps the
coverage, which a fixed-sample interval recomputed after each batch does not.

The sequence is the hedged betting confidence sequence of Waudby-Smith & Ramdas (2024), in its
sampling-without-replacement form (Waudby-Smith & Ramdas 2020): the queries are drawn without
replacement from a finite population of ``N`` (the pooled queries), and the estimand is their
mean. For a candidate mean ``m`` (values rescaled to [0, 1]) the mean of the queries not yet
drawn is ``mu_t(m) = (N m - S_{t-1}) / (N - t + 1)`` with ``S_{t-1}`` the sum drawn so far;
two gamblers bet that the next value is above (``+``) or below (``-``) it::

    K_t^+(m) = prod_{i<=t} (1 + lam_i^+ (x_i - mu_i(m)))
    K_t^-(m) = prod_{i<=t} (1 - lam_i^- (x_i - mu_i(m)))
    K_t(m)   = (K_t^+(m) + K_t^-(m)) / 2

with predictable bets (the "predictable plug-in" bets of WSR 2024)
``lam_i = sqrt(2 log(2/alpha) / (s2_{i-1} i log(1 + i)))``, ``s2`` the regularised running
variance ``(1/4 + sum_{j<=i} (x_j - xbar_j)^2) / (i + 1)`` around the regularised running mean
``xbar_j = (1/2 + sum_{k<=j} x_k) / (j + 1)``, truncated to ``lam_i^+ <= c / mu_i(m)`` and
``lam_i^- <= c / (1 - mu_i(m))`` with ``c = 3/4``. Under ``m`` true, ``K_t(m)`` is a
nonnegative martingale starting at 1, so by Ville's inequality
``P(exists t: K_t(m) >= 1/alpha) <= alpha``. Hence

- the **confidence sequence** ``C_t = {m : max_{s<=t} K_s(m) < 1/alpha}`` (running
  intersection), found on a grid of candidate means, its ends widened by one grid step, and
  intersected with the logically possible range ``[S_t / N, (S_t + N - t) / N]``;
- the **anytime p-value** for a null mean ``m_0``: ``p_t = min(1, 1 / max_{s<=t} K_s(m_0))``,
  with ``P(p_tau <= alpha) <= alpha`` at any stopping time ``tau`` (Ramdas, Grünwald, Vovk &
  Shafer 2023). Holm's procedure needs only valid marginal p-values, so Holm over anytime
  p-values read at the stop controls the family-wise error at the stop.

References
----------
I. Waudby-Smith, A. Ramdas, "Estimating means of bounded random variables by betting",
Journal of the Royal Statistical Society B 86(1) (2024) 1-27 (arXiv:2010.09686, 2020): the
hedged capital process, the predictable plug-in bets and their truncation, sampling without
replacement.
I. Waudby-Smith, A. Ramdas, "Confidence sequences for sampling without replacement",
NeurIPS 2020 (arXiv:2006.04347).
A. Ramdas, P. Grünwald, V. Vovk, G. Shafer, "Game-theoretic statistics and safe anytime-valid
inference", Statistical Science 38(4) (2023) 576-601.
S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian Journal of
Statistics 6 (1979) 65-70.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relgrade.errors import InputError

#: Truncation of the bets (WSR 2024's ``c``, who suggest 1/2 or 3/4): a gambler never stakes
#: more than three quarters of what the remaining population's mean allows, so every factor
#: is at least 1/4 (benchmarks/README.md compares it with 1/2).
TRUNCATION = 0.75

#: Candidate means on the grid (the CS's resolution is 1 / (GRID - 1) of the range).
GRID = 2001


@dataclass(frozen=True)
class ConfidenceSequence:
    """A confidence sequence and anytime p-values over one ordered sample.

    Attributes
    ----------
    mean : numpy.ndarray of shape (n,), float64
        Running sample mean after each value (in the values' own units).
    low, high : numpy.ndarray of shape (n,), float64
        The sequence's ends after each value; non-decreasing / non-increasing in t
        (running intersection); within ``[lower_bound, upper_bound]``.
    p_value : numpy.ndarray of shape (n,), float64
        Anytime p-value for the null mean after each value, in (0, 1], non-increasing.
    level : float
        Coverage level, in (0, 1).
    null : float
        The null mean the p-values test.
    population : int or None
        Finite population size (sampling without replacement) or None (with replacement).
    """

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    level: float
    null: float
    population: int | None


def _check(values: np.ndarray, lower_bound: float, upper_bound: float, level: float,
           population: int | None, null: float) -> None:
    if not 0.0 < level < 1.0:
        raise InputError(rule="confidence sequence level in (0, 1)", item="level",
                         found=level)
    if not upper_bound > lower_bound:
        raise InputError(rule="confidence sequence bounds: lower < upper", item="bounds",
                         found=(lower_bound, upper_bound))
    if values.ndim != 1 or values.size == 0:
        raise InputError(rule="confidence sequence: a non-empty 1-d sequence of values",
                         item="values", found=values.shape)
    if not np.all(np.isfinite(values)):
        raise InputError(rule="confidence sequence: finite values", item="values",
                         found="a NaN or infinite value")
    bad = np.flatnonzero((values < lower_bound) | (values > upper_bound))
    if bad.size:
        raise InputError(rule=f"confidence sequence: values within [{lower_bound}, "
                              f"{upper_bound}]", item=f"value {bad[0] + 1}",
                         found=float(values[bad[0]]))
    if population is not None and population < values.size:
        raise InputError(rule="confidence sequence: population at least the sample size",
                         item="population", found=population)
    if not lower_bound <= null <= upper_bound:
        raise InputError(rule="confidence sequence: null mean within the bounds",
                         item="null", found=null)


def plug_in_bets(x: np.ndarray, *, alpha: float) -> np.ndarray:
    """Predictable plug-in bets of WSR 2024, before truncation.

    Parameters
    ----------
    x : numpy.ndarray of shape (n,), float64, values in [0, 1]
    alpha : float
        The sequence's error, in (0, 1).

    Returns
    -------
    numpy.ndarray of shape (n,), float64, positive
        ``lam_t = sqrt(2 log(2/alpha) / (s2_{t-1} t log(1 + t)))``, ``s2_0 = 1/4``;
        ``lam_t`` uses only ``x_1 .. x_{t-1}``.
    """
    t = np.arange(1, x.size + 1, dtype=np.float64)
    xbar = (0.5 + np.cumsum(x)) / (t + 1.0)
    s2 = (0.25 + np.cumsum((x - xbar) ** 2)) / (t + 1.0)
    s2_prev = np.concatenate(([0.25], s2[:-1]))
    return np.sqrt(2.0 * np.log(2.0 / alpha) / (s2_prev * t * np.log1p(t)))


def log_capital(x: np.ndarray, m: np.ndarray, *, alpha: float,
                population: int | None) -> np.ndarray:
    """Log of the hedged capital ``K_t(m)`` for each candidate mean and each t.

    Parameters
    ----------
    x : numpy.ndarray of shape (n,), float64, in [0, 1]
        The values in drawing order.
    m : numpy.ndarray of shape (g,), float64, in [0, 1]
        Candidate population means.
    alpha : float
        Error of the sequence (sets the bets).
    population : int or None
        ``N`` for sampling without replacement, None for independent draws.

    Returns
    -------
    numpy.ndarray of shape (g, n), float64
        ``log K_t(m)``; ``+inf`` where ``m`` is impossible given the draws (the remaining
        population's mean ``mu_t(m)`` outside [0, 1]).
    """
    n = x.size
    lam = plug_in_bets(x, alpha=alpha)
    m = np.asarray(m, dtype=np.float64)[:, None]
    if population is None:
        mu = np.broadcast_to(m, (m.shape[0], n))
    else:
        t = np.arange(1, n + 1, dtype=np.float64)
        s_prev = np.concatenate(([0.0], np.cumsum(x)[:-1]))
        mu = (population * m - s_prev) / (population - t + 1.0)
    impossible = (mu < 0.0) | (mu > 1.0)
    mu_c = np.clip(mu, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        lam_pos = np.minimum(lam, TRUNCATION / mu_c)
        lam_neg = np.minimum(lam, TRUNCATION / (1.0 - mu_c))
    dev = x[None, :] - mu_c
    log_pos = np.cumsum(np.log1p(lam_pos * dev), axis=1)
    log_neg = np.cumsum(np.log1p(-lam_neg * dev), axis=1)
    out = np.logaddexp(log_pos, log_neg) - np.log(2.0)
    # once the candidate is impossible it stays refuted
    out[np.maximum.accumulate(impossible, axis=1)] = np.inf
    return out


def confidence_sequence(values, *, lower_bound: float, upper_bound: float, level: float = 0.95,
                        population: int | None = None, null: float = 0.0,
                        grid: int = GRID) -> ConfidenceSequence:
    """The hedged betting confidence sequence and anytime p-values of an ordered sample.

    Parameters
    ----------
    values : array-like of shape (n,), float
        The values in the order they were drawn (a per-query value or a per-query difference
        of two arms), each within ``[lower_bound, upper_bound]``.
    lower_bound, upper_bound : float
        Known range of every value (for a difference of two measures in [0, 1]: -1 and 1).
    level : float, default 0.95
        Time-uniform coverage, ``1 - alpha``.
    population : int or None
        Size ``N`` of the finite population sampled without replacement (then the estimand
        is its mean), or None for independent draws from a distribution.
    null : float, default 0.0
        Mean the anytime p-values test (for a difference: no difference).
    grid : int, default 2001
        Candidate means evaluated across the range; the ends are widened by one step.

    Returns
    -------
    ConfidenceSequence

    Raises
    ------
    relgrade.errors.InputError
        When a value lies outside the bounds or is not finite, the sequence is empty, the
        level is outside (0, 1), the population is smaller than the sample, or the null lies
        outside the bounds.

    Notes
    -----
    Waudby-Smith & Ramdas (2024); see the module docstring.

    Examples
    --------
    >>> cs = confidence_sequence([0.2, 0.4, 0.3, 0.5, 0.4, 0.3], lower_bound=-1.0,
    ...                          upper_bound=1.0)
    >>> bool(cs.low[-1] < 0.35 < cs.high[-1]), bool(cs.p_value[-1] <= 1.0)
    (True, True)
    """
    v = np.asarray(values, dtype=np.float64)
    _check(v, lower_bound, upper_bound, level, population, null)
    alpha = 1.0 - level
    width = upper_bound - lower_bound
    x = (v - lower_bound) / width
    n = x.size
    m0 = (null - lower_bound) / width
    threshold = np.log(1.0 / alpha)

    p_log = np.maximum.accumulate(log_capital(x, np.array([m0]), alpha=alpha,
                                              population=population)[0])
    p_value = np.minimum(1.0, np.exp(-p_log))

    ms = np.linspace(0.0, 1.0, grid)
    step = 1.0 / (grid - 1)
    inside = log_capital(x, ms, alpha=alpha, population=population) < threshold
    low = np.zeros(n)
    high = np.ones(n)
    any_in = inside.any(axis=0)
    first = np.argmax(inside, axis=0)
    last = grid - 1 - np.argmax(inside[::-1], axis=0)
    low[any_in] = np.maximum(0.0, ms[first[any_in]] - step)
    high[any_in] = np.minimum(1.0, ms[last[any_in]] + step)
    if population is not None:
        s = np.cumsum(x)
        t = np.arange(1, n + 1, dtype=np.float64)
        low = np.maximum(low, s / population)
        high = np.minimum(high, (s + population - t) / population)
    low = np.maximum.accumulate(low)
    high = np.minimum.accumulate(high)
    high = np.maximum(high, low)
    mean = np.cumsum(v) / np.arange(1, n + 1)
    return ConfidenceSequence(mean=mean, low=lower_bound + width * low,
                              high=lower_bound + width * high, p_value=p_value,
                              level=level, null=null, population=population)


@dataclass(frozen=True)
class Settlement:
    """Where a family of comparisons stands after ``t`` values.

    Attributes
    ----------
    t : int
        Values (queries) seen.
    p_holm : numpy.ndarray of shape (k,), float64
        Holm-adjusted anytime p-values.
    significant : numpy.ndarray of shape (k,), bool
        Holm rejects the null (no difference) at ``alpha``.
    equivalent : numpy.ndarray of shape (k,), bool
        The comparison's simultaneous sequence (level ``1 - alpha / k``) lies within
        ``[-margin, margin]``.
    settled : bool
        Every comparison is significant or equivalent.
    """

    t: int
    p_holm: np.ndarray
    significant: np.ndarray
    equivalent: np.ndarray
    settled: bool


def settle(p_values, low_simultaneous, high_simultaneous, *, alpha: float,
           margin: float, t: int) -> Settlement:
    """Decide whether every verdict of a Holm family is final.

    Parameters
    ----------
    p_values : array-like of shape (k,), float
        Anytime p-values of the k comparisons (null: no difference) at the same ``t``.
    low_simultaneous, high_simultaneous : array-like of shape (k,), float
        Each comparison's confidence sequence at level ``1 - alpha / k`` at ``t``.
    alpha : float
        Family-wise error, in (0, 1).
    margin : float
        Indifference margin (the measure's units), >= 0: a difference known to lie within
        ``[-margin, margin]`` is settled as "no difference that matters". 0 settles only by
        significance.
    t : int
        Values seen.

    Returns
    -------
    Settlement

    Notes
    -----
    A comparison is settled when Holm (over anytime p-values; ``statsmodels``'
    ``multipletests(method="holm")``) rejects its null, or when its sequence at
    ``1 - alpha / k`` lies within the margin. Both are monotone in ``t`` (p-values only fall,
    sequences only shrink), so a settled family stays settled. Each kind of claim errs with
    probability at most ``alpha`` at any stopping time: Holm's by its family-wise error
    control over valid p-values, the equivalences because the k sequences at ``alpha / k``
    cover all k differences at once with probability ``1 - alpha`` (Bonferroni).
    """
    p = np.asarray(p_values, dtype=np.float64)
    if not 0.0 < alpha < 1.0:
        raise InputError(rule="family-wise error in (0, 1)", item="alpha", found=alpha)
    if margin < 0:
        raise InputError(rule="indifference margin >= 0", item="margin", found=margin)
    from statsmodels.stats.multitest import multipletests
    reject, adjusted, _, _ = multipletests(p, alpha=alpha, method="holm")
    lo = np.asarray(low_simultaneous, dtype=np.float64)
    hi = np.asarray(high_simultaneous, dtype=np.float64)
    equivalent = (lo >= -margin) & (hi <= margin) if margin > 0 else np.zeros(p.size, bool)
    settled = bool(np.all(reject | equivalent))
    return Settlement(t=t, p_holm=adjusted, significant=reject, equivalent=equivalent,
                      settled=settled)


@dataclass(frozen=True)
class StopResult:
    """The anytime stopping rule run over one ordered sample.

    Attributes
    ----------
    stopped_at : int
        Queries graded when the rule stopped (a batch end where every verdict settled, or
        all of the sample).
    sample : int
        The sample's size ``M`` (the fixed-sample plan).
    settled : bool
        Whether the family settled (False: the whole sample was used and some verdict is
        neither significant nor equivalent: "not settled", decided at ``M``).
    settlement : Settlement
        The family at the stop.
    cs : list of ConfidenceSequence
        Per comparison, at ``level``; read at ``stopped_at - 1``.
    cs_simultaneous : list of ConfidenceSequence
        Per comparison, at ``1 - alpha / k``.
    """

    stopped_at: int
    sample: int
    settled: bool
    settlement: Settlement
    cs: list
    cs_simultaneous: list


def batch_ends(sample: int, batch: int) -> list[int]:
    """The query counts after which the rule looks: ``batch, 2 batch, ...`` and ``sample``.

    Raises
    ------
    relgrade.errors.InputError
        When ``batch`` < 1.
    """
    if batch < 1:
        raise InputError(rule="stopping batch size >= 1", item="batch", found=batch)
    ends = list(range(batch, sample, batch))
    return ends + [sample]


def run_stop(differences, *, level: float, margin: float, batch: int,
             population: int | None, lower_bound: float = -1.0,
             upper_bound: float = 1.0) -> StopResult:
    """Run the stopping rule over the per-query differences of a Holm family.

    Parameters
    ----------
    differences : array-like of shape (k, M), float
        Per comparison, the per-query differences in the seeded grading order (all of the
        sample; the rule reads only a prefix of it, as people would have graded it).
    level : float
        ``1 - alpha``: the family-wise level of the verdicts and each reported sequence's.
    margin : float
        Indifference margin, >= 0 (see :func:`settle`).
    batch : int
        Queries per batch, >= 1: the rule looks after each batch.
    population : int or None
        Queries the sample was drawn from without replacement (the pooled queries).
    lower_bound, upper_bound : float
        Range of each difference.

    Returns
    -------
    StopResult
    """
    d = np.atleast_2d(np.asarray(differences, dtype=np.float64))
    k, m = d.shape
    alpha = 1.0 - level
    cs = [confidence_sequence(row, lower_bound=lower_bound, upper_bound=upper_bound,
                              level=level, population=population) for row in d]
    cs_sim = cs if k == 1 else [
        confidence_sequence(row, lower_bound=lower_bound, upper_bound=upper_bound,
                            level=1.0 - alpha / k, population=population) for row in d]
    settlement = None
    for end in batch_ends(m, batch):
        i = end - 1
        settlement = settle([c.p_value[i] for c in cs], [c.low[i] for c in cs_sim],
                            [c.high[i] for c in cs_sim], alpha=alpha, margin=margin, t=end)
        if settlement.settled:
            break
    return StopResult(stopped_at=settlement.t, sample=m, settled=settlement.settled,
                      settlement=settlement, cs=cs, cs_simultaneous=cs_sim)
