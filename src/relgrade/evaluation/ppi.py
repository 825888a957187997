"""Prediction-powered estimates of per-arm means from model grades and a small human sample.

A model grader grades every pooled pair of all ``N`` queries; people grade a seeded uniform
sample of ``n`` of those queries in full. Every measure is a mean over queries, so the
estimand of one arm is the mean of its per-query metric under the human key. This module
works on the per-query metric values only:

* ``model_all`` — shape ``(N,)``: the metric under the model key on every query;
* ``human`` and ``model_sample`` — shape ``(n,)``: on the human-sample queries, the metric
  under the human key and under the model key (the same queries, in the same order).

The prediction-powered estimate corrects the model-key mean by the mean human-minus-model
difference on the sample (the rectifier), weighted by a power-tuning factor ``lambda``
(PPI++). Beside it the module gives the classic PPI estimate (``lambda = 1``), the
human-only (classical) estimate on the sample and the model-only (naive) estimate, each a
:class:`PPIEstimate` with a normal interval. Paired arm differences are the same estimator
applied to per-query differences (:func:`ppi_difference`), and :func:`ppi_comparisons`
adjusts a family of them with Holm's method.

The formulas are those of the mean estimator of ``ppi-python`` (``ppi_mean_ci``,
``ppi_mean_pointestimate``, ``classical_mean_ci``), including its plug-in variances with
``ddof=0`` and its clipped ``lambda``; the tests check equality to 1e-9. For small samples
two standard errors count the tuning of ``lambda`` on the sample (both deliberately differ
from ppi-python's, see their notes): :func:`regression_se_rows` (``lambda`` per row, the
regression estimator of double sampling) and :func:`jackknife_rows` (one ``lambda`` shared
by all rows, :func:`tune_lambda_shared`, as ppi-python's power tuning of a vector mean, and
the delete-one-query jackknife; :func:`jackknife_rows_each` the same with a ``lambda`` per row,
the smaller of the shared one and the row's own, for paired differences).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: The estimators, in the order reports list them.
METHODS = ("ppi++", "ppi", "human-only", "model-only")

#: Policies when the standard error is 0 (every value entering it is constant).
ZERO_VARIANCE = ("error", "degenerate")


@dataclass(frozen=True)
class PPIEstimate:
    """One estimate of a mean over queries with its normal interval.

    Attributes
    ----------
    estimate : float
        The point estimate.
    se : float
        Its standard error (plug-in, ``ddof=0``, as ``ppi-python``).
    low, high : float
        ``estimate -/+ z_{1 - alpha/2} * se``.
    lam : float or None
        The weight of the model-key term: tuned and clipped to [0, 1] for ``"ppi++"``, 1 for
        ``"ppi"``, 0 for ``"human-only"``, ``None`` for ``"model-only"``.
    n : int
        Human-graded queries behind the estimate (0 for ``"model-only"``).
    N : int
        Queries with model grades (0 for ``"human-only"``).
    method : str
        One of :data:`METHODS`.
    level : float
        Confidence level ``1 - alpha``.
    """

    estimate: float
    se: float
    low: float
    high: float
    lam: float | None
    n: int
    N: int
    method: str
    level: float = 0.95

    def excludes_zero(self) -> bool:
        """True when the whole interval lies strictly on one side of 0."""
        return self.low > 0 or self.high < 0

    def p_value(self) -> float:
        """Two-sided normal p-value of ``estimate = 0``: ``2 * (1 - Phi(|estimate| / se))``.

        With ``se == 0`` (a degenerate estimate) it is 1.0 when the estimate is 0, else 0.0.
        """
        if self.se == 0:
            return 1.0 if self.estimate == 0 else 0.0
        from scipy import stats as sps
        return float(2.0 * sps.norm.sf(abs(self.estimate) / self.se))

    def to_dict(self) -> dict:
        """A JSON-ready dict (floats as Python floats)."""
        return {"method": self.method, "estimate": float(self.estimate), "se": float(self.se),
                "low": float(self.low), "high": float(self.high),
                "lambda": None if self.lam is None else float(self.lam),
                "n": int(self.n), "N": int(self.N), "level": float(self.level)}


# --- input checks --------------------------------------------------------------------

def _vector(values, what: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise InputError(f"{what} must be a one-dimensional array of per-query values",
                         found=f"shape {v.shape}")
    if not np.isfinite(v).all():
        bad = int(np.flatnonzero(~np.isfinite(v))[0])
        raise InputError(f"{what} must be finite numbers", item=f"query #{bad}",
                         found="NaN or infinity",
                         fix="score every query under both keys before estimating")
    return v


def _check_alpha(alpha) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise InputError("alpha must lie in (0, 1)", found=str(alpha))
    return a


def _check_policy(zero_variance: str) -> None:
    if zero_variance not in ZERO_VARIANCE:
        raise InputError(f"zero_variance must be one of {', '.join(ZERO_VARIANCE)}",
                         found=repr(zero_variance))


def _check_sample(human, model_sample, model_all):
    y = _vector(human, "human-key values")
    yhat = _vector(model_sample, "model-key values on the human sample")
    f = _vector(model_all, "model-key values on all queries")
    if y.shape != yhat.shape:
        raise InputError("the human sample needs one model-key value per human-key value",
                         found=f"{y.size} human-key and {yhat.size} model-key values")
    if y.size < 2:
        raise InputError("an interval needs at least 2 human-graded queries",
                         found=f"{y.size}", fix="raise the human fraction or count")
    if f.size < y.size:
        raise InputError("the human sample must be part of the queries the model graded",
                         found=f"{y.size} human-sample queries but {f.size} model-graded ones")
    return y, yhat, f


def _finish(estimate: float, se: float, *, alpha: float, lam, n: int, N: int, method: str,
            zero_variance: str, what: str) -> PPIEstimate:
    if not se > 0:
        if zero_variance == "error":
            raise InputError(f"{what}: the standard error is 0, so no interval is defined",
                             found="every value entering it is constant",
                             fix="sample more queries, or pass zero_variance='degenerate' "
                                 "to accept a zero-width interval")
        se = 0.0
    from scipy import stats as sps
    half = float(sps.norm.ppf(1.0 - alpha / 2.0)) * se
    return PPIEstimate(estimate=float(estimate), se=float(se), low=float(estimate - half),
                       high=float(estimate + half), lam=None if lam is None else float(lam),
                       n=int(n), N=int(N), method=method, level=1.0 - alpha)


# --- the estimators ------------------------------------------------------------------

#: The least human sample the ppi stage takes, whatever ``ppi.interval``: the ``jackknife``
#: and ``regression`` intervals re-tune lambda on the sample, and the PPI++ rank-sets
#: (:func:`relgrade.evaluation.ranksets.ppi_rank_sets`) need 3 queries for every kind.
#: ``relgrade init``, params ``ppi.human_queries`` and the audit stage refuse a smaller one.
MIN_SAMPLE = 3


def human_sample(n_queries: int, *, fraction=None, count=None,
                 rng: np.random.Generator) -> np.ndarray:
    """A seeded uniform sample of queries to grade by people in full.

    Parameters
    ----------
    n_queries : int
        Queries in the experiment (``N``).
    fraction : float, optional
        Share of the queries to sample, in (0, 1]; the sample holds
        ``max(2, round(fraction * n_queries))`` queries. Give ``fraction`` or ``count``.
    count : int, optional
        Queries to sample, ``2 <= count <= n_queries``.
    rng : numpy.random.Generator
        Source of the draw: ``rng.choice(n_queries, size, replace=False)``.

    Returns
    -------
    numpy.ndarray of shape (n,), int64
        Sorted query positions in ``[0, n_queries)``.

    Raises
    ------
    InputError
        ``fraction`` outside (0, 1], both or neither of ``fraction`` and ``count`` given, or a
        sample of fewer than 2 queries (no interval is defined on one query).

    Examples
    --------
    >>> human_sample(200, fraction=0.1, rng=np.random.default_rng(7)).size
    20
    """
    if (fraction is None) == (count is None):
        raise InputError("give exactly one of the human fraction and the human count",
                         found=f"fraction={fraction!r}, count={count!r}")
    if fraction is not None:
        fr = float(fraction)
        if not (math.isfinite(fr) and 0.0 < fr <= 1.0):
            raise InputError("the human fraction must lie in (0, 1]", found=str(fraction),
                             fix="use e.g. 0.1 for a tenth of the queries")
        size = max(2, int(round(fr * n_queries)))
    else:
        size = int(count)
    if size < 2 or size > n_queries:
        raise InputError("the human sample needs between 2 and all of the queries",
                         found=f"{size} of {n_queries}")
    return np.sort(rng.choice(int(n_queries), size=size, replace=False)).astype(np.int64)


def tune_lambda(human, model_sample, model_all) -> float:
    """The PPI++ power-tuning weight of the model-key term for a mean, clipped to [0, 1].

    Parameters
    ----------
    human, model_sample : array-like of shape (n,), float
        Human-key and model-key per-query values on the human sample.
    model_all : array-like of shape (N,), float
        Model-key per-query values on every query.

    Returns
    -------
    float
        ``clip(cov(Y, Yhat) / ((1 + n / N) * var(Yhat u F)), 0, 1)``; 0 when the model-key
        values are all equal (the model term then carries nothing).

    Notes
    -----
    ``cov`` is the ``ddof=0`` covariance of the human-key values ``Y`` and the model-key
    values ``Yhat`` on the sample; ``var`` is the ``ddof=1`` variance of the ``n + N``
    model-key values of the sample and all queries, concatenated. This is the minimiser of
    the estimator's variance, as ``ppi-python`` computes it for a mean
    (``_calc_lam_glm`` with ``clip=True``).
    """
    y, yhat, f = _check_sample(human, model_sample, model_all)
    n, big_n = y.size, f.size
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, f]), ddof=1))
    if var == 0.0:
        return 0.0
    return float(np.clip(cov / ((1.0 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(human, model_sample, model_all, *, alpha: float = 0.05, lam=None,
             zero_variance: str = "error") -> PPIEstimate:
    """The prediction-powered (PPI++) estimate of a mean over queries, with its interval.

    Parameters
    ----------
    human : array-like of shape (n,), float
        Per-query metric under the human key, on the human-sample queries.
    model_sample : array-like of shape (n,), float
        Per-query metric under the model key, on the same queries in the same order.
    model_all : array-like of shape (N,), float
        Per-query metric under the model key on every query (the sample included).
    alpha : float, default 0.05
        The interval has level ``1 - alpha``.
    lam : float, optional
        The weight of the model term. ``None`` tunes it (PPI++, :func:`tune_lambda`);
        ``1`` is classic PPI; ``0`` is the human-only estimate.
    zero_variance : {"error", "degenerate"}, default "error"
        What to do when the standard error is 0: raise, or return a zero-width interval.

    Returns
    -------
    PPIEstimate
        ``method`` is ``"ppi++"`` when ``lam`` was tuned, ``"ppi"`` when ``lam == 1``,
        else ``"ppi(lambda=...)"``.

    Raises
    ------
    InputError
        A NaN or infinite value, lengths of ``human`` and ``model_sample`` that differ, fewer
        than 2 human-sample queries, more sample queries than model-graded ones, ``alpha``
        outside (0, 1), or (with ``zero_variance="error"``) a standard error of 0.

    Notes
    -----
    With ``Y`` the human-key and ``Yhat`` the model-key values on the sample, ``F`` the
    model-key values on all queries::

        theta = lam * mean(F) + mean(Y - lam * Yhat)
        se^2  = lam^2 * var(F) / N + var(Y - lam * Yhat) / n          (var with ddof 0)
        interval = theta -/+ z_{1 - alpha/2} * se

    ``mean(Y - lam * Yhat)`` rectifies the model-key mean by what people graded
    differently, so ``theta`` is unbiased for the human-key mean however biased the model
    grader is; the interval is narrower than the human-only one when the model tracks
    people. The variance treats ``F`` and the sample as independent, as ``ppi-python``
    does; here the sample is part of ``F``. Over random draws of the ``N`` queries the exact
    variance is then ``var(Y) / N + (1 - n/N) * var(Y - lam * Yhat) / n``, which exceeds the
    formula above by ``2 * lam * (cov(Y, Yhat) - lam * var(Yhat)) / N``: positive for the
    tuned ``lambda`` (shrunk below the slope by ``1 + n/N``), but under 1% of the variance at
    ``n / N = 0.1``. With few sample queries the larger gap is the tuning of ``lambda`` on
    the sample itself; see :func:`regression_se_rows`.

    References
    ----------
    A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan and T. Zrnic,
    "Prediction-powered inference", Science 382 (2023): 669-674.
    A. N. Angelopoulos, J. C. Duchi and T. Zrnic, "PPI++: Efficient prediction-powered
    inference", arXiv:2311.01453 (2023).

    Examples
    --------
    >>> e = ppi_mean([1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, 1.0] * 5,
    ...              lam=1)
    >>> round(e.estimate, 4)  # 0.75 + mean(0, 0, 0, -1)
    0.5
    """
    a = _check_alpha(alpha)
    _check_policy(zero_variance)
    y, yhat, f = _check_sample(human, model_sample, model_all)
    if lam is None:
        lam_v, method = tune_lambda(y, yhat, f), "ppi++"
    else:
        lam_v = float(lam)
        if not math.isfinite(lam_v):
            raise InputError("lambda must be a finite number", found=str(lam))
        method = "ppi" if lam_v == 1.0 else f"ppi(lambda={lam_v:g})"
    n, big_n = y.size, f.size
    rect = y - lam_v * yhat
    theta = lam_v * f.mean() + rect.mean()
    se = math.sqrt((lam_v ** 2) * f.var() / big_n + rect.var() / n)
    return _finish(theta, se, alpha=a, lam=lam_v, n=n, N=big_n, method=method,
                   zero_variance=zero_variance, what=method)


def ppi_mean_rows(human, model_sample, model_all, *, lam=None,
                  ddof: int = 0) -> tuple[np.ndarray, ...]:
    """:func:`ppi_mean` for many means at once (arms, or paired differences), vectorised.

    Parameters
    ----------
    human, model_sample : array-like of shape (m, n), float
        One row per mean: human-key and model-key per-query values on the human sample.
    model_all : array-like of shape (m, N), float
        Model-key per-query values on every query.
    lam : float, optional
        ``None`` tunes one ``lambda`` per row (PPI++), as :func:`tune_lambda`.
    ddof : {0, 1}, default 0
        Degrees of freedom of the two variances of the standard error. 0 is
        ``ppi-python``'s plug-in; 1 gives the unbiased variances, for a small-sample interval
        with Student's t quantile on ``n - 1`` degrees of freedom (the caller's choice; with
        20 sample queries it widens the interval by about 3% and the quantile by about 7%).

    Returns
    -------
    estimate, se, lam : numpy.ndarray of shape (m,), float64
        Row by row equal to :func:`ppi_mean` (a row with zero variance in its model-key
        values gets ``lambda = 0``; a zero standard error is returned as 0, not raised).

    Raises
    ------
    InputError
        Shapes that disagree, fewer than 2 sample queries, or a value that is not finite.
    """
    y, yhat, f = _rows(human, model_sample, model_all, minimum=2, what="an interval")
    n, big_n = y.shape[1], f.shape[1]
    if lam is None:
        cov = ((y - y.mean(axis=1, keepdims=True))
               * (yhat - yhat.mean(axis=1, keepdims=True))).mean(axis=1)
        var = np.var(np.concatenate([yhat, f], axis=1), axis=1, ddof=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            lam_v = np.where(var > 0, cov / ((1.0 + n / big_n) * np.where(var > 0, var, 1.0)),
                             0.0)
        lam_v = np.clip(lam_v, 0.0, 1.0)
    else:
        lam_v = np.full(y.shape[0], float(lam))
    rect = y - lam_v[:, None] * yhat
    theta = lam_v * f.mean(axis=1) + rect.mean(axis=1)
    se = np.sqrt(lam_v ** 2 * f.var(axis=1, ddof=ddof) / big_n
                 + rect.var(axis=1, ddof=ddof) / n)
    return theta, se, lam_v


def _rows(human, model_sample, model_all, *, minimum: int, what: str):
    y = np.asarray(human, dtype=np.float64)
    yhat = np.asarray(model_sample, dtype=np.float64)
    f = np.asarray(model_all, dtype=np.float64)
    if y.ndim != 2 or y.shape != yhat.shape or f.ndim != 2 or f.shape[0] != y.shape[0]:
        raise InputError("per-row values need shapes (m, n), (m, n) and (m, N)",
                         found=f"{y.shape}, {yhat.shape}, {f.shape}")
    if y.shape[1] < minimum or f.shape[1] < y.shape[1]:
        raise InputError(f"{what} needs at least {minimum} human-graded queries, all "
                         "model-graded", found=f"n={y.shape[1]}, N={f.shape[1]}",
                         fix="raise the human fraction or count")
    if not (np.isfinite(y).all() and np.isfinite(yhat).all() and np.isfinite(f).all()):
        raise InputError("per-query values must be finite numbers", found="NaN or infinity")
    return y, yhat, f


def tune_lambda_shared(human, model_sample, model_all) -> float:
    """One PPI++ power-tuning weight for many means at once, clipped to [0, 1].

    Parameters
    ----------
    human, model_sample : array-like of shape (m, n), float
        One row per mean (an arm, or a paired difference): human-key and model-key
        per-query values on the human sample; ``n >= 2``.
    model_all : array-like of shape (m, N), float
        Model-key per-query values on every query.

    Returns
    -------
    float
        ``clip(sum_r cov(Y_r, Yhat_r) / ((1 + n/N) * sum_r var(Yhat_r u F_r)), 0, 1)``
        (``cov`` with ``ddof=0`` on the sample, ``var`` with ``ddof=1`` over the sample's and
        all queries' model-key values concatenated, as :func:`tune_lambda`); 0 when every
        row's model-key values are constant.

    Raises
    ------
    InputError
        Shapes that disagree, fewer than 2 sample queries, or a value that is not finite.

    Notes
    -----
    The weight that minimises the sum of the rows' variances (the trace of the estimator's
    covariance): PPI++'s power tuning of one ``lambda`` for a vector estimand
    (Angelopoulos, Duchi and Zrnic 2023, section 6, "optimal power tuning"), as
    ``ppi_py.ppi_mean_ci`` computes it for a d-dimensional mean with
    ``lam_optim_mode="overall"``. One weight fitted on all rows' ``m * n`` values carries far
    less of the sample's noise than one per row fitted on ``n`` values.
    """
    y, yhat, f = _rows(human, model_sample, model_all, minimum=2, what="a shared lambda")
    n, big_n = y.shape[1], f.shape[1]
    cov = ((y - y.mean(axis=1, keepdims=True))
           * (yhat - yhat.mean(axis=1, keepdims=True))).mean(axis=1).sum()
    var = np.var(np.concatenate([yhat, f], axis=1), axis=1, ddof=1).sum()
    if not var > 0:
        return 0.0
    return float(np.clip(cov / ((1.0 + n / big_n) * var), 0.0, 1.0))


def jackknife_rows(human, model_sample, model_all) -> tuple[np.ndarray, ...]:
    """PPI++ estimates of many means with one shared ``lambda`` and jackknife standard errors.

    The estimate of each row is :func:`ppi_mean`'s with the shared weight of
    :func:`tune_lambda_shared`. Its standard error counts the tuning of that weight on the
    sample: the delete-one-query jackknife over the human sample, re-tuning ``lambda`` with
    each query left out, plus the model term over all queries.

    Parameters
    ----------
    human, model_sample : array-like of shape (m, n), float
        One row per mean: human-key and model-key per-query values on the human sample;
        ``n >= 3``.
    model_all : array-like of shape (m, N), float
        Model-key per-query values on every query (the sample included).

    Returns
    -------
    estimate, se : numpy.ndarray of shape (m,), float64
    lam : float
        The shared weight (the same for every row).

    Raises
    ------
    InputError
        Shapes that disagree, fewer than 3 sample queries, or a value that is not finite.

    Notes
    -----
    With ``theta_(i)`` the estimate when sample query ``i`` is left out of the human sample
    (its model-key value stays among the ``N``; ``lambda`` re-tuned on the other ``n - 1``)::

        se^2 = (n - 1) / n * sum_i (theta_(i) - mean_i theta_(i))^2
               + lambda^2 * var(F, ddof=1) / N

    The first term is Tukey's jackknife variance of the sample part (J. W. Tukey, "Bias and
    confidence in not-quite large samples", Ann. Math. Statist. 29 (1958): 614; its use
    for regression and other non-linear estimators of survey sampling: J. Shao and D. Tu,
    *The Jackknife and Bootstrap*, Springer 1995, chapter 6); the second is the model
    term's sampling variance, as in ppi-python, which treats the two parts as independent.
    With ``lambda = 0`` throughout, the first term is exactly ``var(Y, ddof=1) / n``, the
    human-only variance. The leave-one-out sums are updated in closed form, so the cost is
    ``O(m * (n + N))``.
    """
    y, yhat, f = _rows(human, model_sample, model_all, minimum=3,
                       what="the jackknife interval")
    lam = tune_lambda_shared(y, yhat, f)
    theta, se = _jackknife(y, yhat, f, np.full(y.shape[0], lam), shared=True)
    return theta, se, lam


def jackknife_rows_each(human, model_sample, model_all) -> tuple[np.ndarray, ...]:
    """PPI++ estimates of many means with a ``lambda`` per row, and jackknife standard errors.

    As :func:`jackknife_rows`, except that every row (a paired difference, say) gets its own
    weight: the smaller of the weight shared by all rows (:func:`tune_lambda_shared`) and
    the row's own (:func:`tune_lambda` on that row alone), both re-tuned with each sample
    query left out. A row whose model-key values do not track its human-key values
    (``R^2`` near 0) gets a weight near 0, so its estimate falls back to the human-only
    mean instead of taking a weight that suits the other rows; a row the model tracks well
    keeps the shared weight, which carries less of the sample's noise than its own.

    Parameters
    ----------
    human, model_sample : array-like of shape (m, n), float
        One row per mean: human-key and model-key per-query values on the human sample;
        ``n >= 3``.
    model_all : array-like of shape (m, N), float
        Model-key per-query values on every query (the sample included).

    Returns
    -------
    estimate, se, lam : numpy.ndarray of shape (m,), float64
        ``lam`` is each row's weight in [0, 1]: ``min(shared, own)``, where ``shared`` is
        ``ppi_py.ppi_mean_pointestimate``'s weight with ``lam_optim_mode="overall"`` and
        ``own`` its weight with ``lam_optim_mode="element"``.

    Raises
    ------
    InputError
        Shapes that disagree, fewer than 3 sample queries, or a value that is not finite.

    Notes
    -----
    With ``lambda_r = min(lambda_shared, lambda_own_r)`` and ``theta_(i)`` the row's estimate
    with sample query ``i`` left out and both weights re-tuned on the other ``n - 1``::

        se_r^2 = (n - 1) / n * sum_i (theta_(i) - mean_i theta_(i))^2
                 + lambda_r^2 * var(F_r, ddof=1) / N

    (Tukey's jackknife, as :func:`jackknife_rows`), so the tuning of both weights on the
    sample is counted. The row's own weight alone (PPI++'s power tuning per coordinate,
    Angelopoulos, Duchi and Zrnic 2023) fitted on ``n`` values carries more noise: measured
    in ``benchmarks/sim_ppi.py`` it gave wider intervals than the smaller of the two
    (benchmarks/README.md).
    """
    y, yhat, f = _rows(human, model_sample, model_all, minimum=3,
                       what="the jackknife interval")
    _, _, own = ppi_mean_rows(y, yhat, f)
    lam = np.minimum(tune_lambda_shared(y, yhat, f), own)
    theta, se = _jackknife(y, yhat, f, lam, shared="min")
    return theta, se, lam


def _jackknife(y, yhat, f, lam, *, shared):
    """Estimates at ``lam`` (m,) and their jackknife standard errors, ``lambda`` re-tuned per
    deletion over all rows (``shared=True``) or as the smaller of that and the row's own
    (``shared="min"``)."""
    n, big_n = y.shape[1], f.shape[1]
    theta = lam * f.mean(axis=1) + (y - lam[:, None] * yhat).mean(axis=1)
    # leave-one-out sums, shape (m, n): column i leaves sample query i out
    k = n - 1
    sy = y.sum(axis=1, keepdims=True) - y
    sx = yhat.sum(axis=1, keepdims=True) - yhat
    sxy = (y * yhat).sum(axis=1, keepdims=True) - y * yhat
    cov = sxy / k - (sx / k) * (sy / k)                                      # (m, n)
    tot = k + big_n
    s1 = f.sum(axis=1, keepdims=True) + sx
    s2 = (f ** 2).sum(axis=1, keepdims=True) + (yhat ** 2).sum(axis=1, keepdims=True) \
        - yhat ** 2
    var = (s2 - s1 ** 2 / tot) / (tot - 1)                                   # (m, n)
    def tuned(c, v):
        with np.errstate(invalid="ignore", divide="ignore"):
            lam_t = np.where(v > 0, c / ((1.0 + k / big_n) * np.where(v > 0, v, 1.0)), 0.0)
        return np.clip(lam_t, 0.0, 1.0)

    lam_i = tuned(cov.sum(axis=0), var.sum(axis=0))                           # (n,)
    if shared == "min":
        lam_i = np.minimum(lam_i, tuned(cov, var))                            # (m, n)
    theta_i = lam_i * f.mean(axis=1, keepdims=True) + (sy - lam_i * sx) / k   # (m, n)
    dev = theta_i - theta_i.mean(axis=1, keepdims=True)
    var_jk = (n - 1) / n * (dev ** 2).sum(axis=1)
    se = np.sqrt(var_jk + lam ** 2 * f.var(axis=1, ddof=1) / big_n)
    return theta, se


def regression_se_rows(human, model_sample, model_all, lam) -> tuple[np.ndarray, np.ndarray]:
    """Small-sample standard errors of PPI++ estimates whose ``lambda`` was tuned on the sample.

    ppi-python's standard error treats ``lambda`` as known. Tuned on the same ``n`` sample
    queries, it makes the rectifier's residuals look smaller than they are and adds its own
    noise to the estimate: with 20 sample queries the estimate's spread is about 5% larger
    than that standard error (``benchmarks/sim_ppi.py``). With ``lambda`` fitted, PPI++ is
    the regression estimator of double sampling (a model grade on every query, a human grade
    on a subsample), whose small-sample variance counts both.

    Parameters
    ----------
    human, model_sample : array-like of shape (m, n), float
        One row per mean (an arm, or a paired difference): human-key and model-key per-query
        values on the human sample; ``n >= 3``.
    model_all : array-like of shape (m, N), float
        Model-key per-query values on every query.
    lam : array-like of shape (m,), float
        The ``lambda`` of each row, as :func:`ppi_mean_rows` tuned it.

    Returns
    -------
    se : numpy.ndarray of shape (m,), float64
        The standard error of each row's estimate.
    df : numpy.ndarray of shape (m,), int64
        Degrees of freedom of its Student's t quantile: ``n - 2``, or ``n - 1`` for a row with
        ``lambda == 0``, whose estimate is the human-only mean and whose standard error is
        then ``sd(Y, ddof=1) / sqrt(n)``.

    Raises
    ------
    InputError
        Shapes that disagree, fewer than 3 sample queries (the residual variance has
        ``n - 2`` degrees of freedom), or a value that is not finite.

    Notes
    -----
    With ``e_i = (Y_i - mean(Y)) - lam * (Yhat_i - mean(Yhat))`` on the sample::

        s_e^2 = sum(e_i^2) / (n - 2)
        se^2  = s_e^2 * (1/n + (mean(F) - mean(Yhat))^2 / sum((Yhat_i - mean(Yhat))^2))
                + lam^2 * var(F, ddof=1) / N

    the variance estimator of the regression estimator in double sampling (W. G. Cochran,
    *Sampling Techniques*, 3rd ed., Wiley 1977, section 12.6; without the finite-population
    correction, as the estimand is the expected value over queries). The first term is the
    variance of a fitted mean response at ``mean(F)`` (the slope's own variance is the second
    summand inside the bracket); the last is the model term's sampling variance, as in
    ppi-python. It deliberately differs from ``ppi_py.ppi_mean_ci`` (which uses
    ``var(Y - lam * Yhat) / n`` with ``ddof=0`` and the normal quantile); as ``n`` grows the
    two agree. The slope variance is that of the least-squares slope, a little above that
    of PPI++'s ``lambda`` (shrunk by ``1 + n/N`` and clipped), so the term errs on the wide
    side. Unlike ppi-python's, this interval can be wider than the human-only one when the
    model carries little information (a small ``lambda``): the price of estimating
    ``lambda`` on ``n`` queries.

    Examples
    --------
    >>> y = np.array([[0.0, 1.0, 2.0, 3.0]]); yhat = np.array([[0.0, 1.0, 2.0, 4.0]])
    >>> se, df = regression_se_rows(y, yhat, np.array([[0.0, 1.0, 2.0, 4.0, 3.0]]), [0.5])
    >>> int(df[0])
    2
    """
    y = np.asarray(human, dtype=np.float64)
    yhat = np.asarray(model_sample, dtype=np.float64)
    f = np.asarray(model_all, dtype=np.float64)
    lam_v = np.asarray(lam, dtype=np.float64).reshape(-1)
    if (y.ndim != 2 or y.shape != yhat.shape or f.ndim != 2 or f.shape[0] != y.shape[0]
            or lam_v.shape != (y.shape[0],)):
        raise InputError("per-row values need shapes (m, n), (m, n), (m, N) and (m,)",
                         found=f"{y.shape}, {yhat.shape}, {f.shape}, {lam_v.shape}")
    n, big_n = y.shape[1], f.shape[1]
    if n < 3:
        raise InputError("the small-sample (regression) interval needs at least 3 "
                         "human-graded queries", found=f"n={n}",
                         fix="raise the human fraction or count, or use the t interval")
    if not (np.isfinite(y).all() and np.isfinite(yhat).all() and np.isfinite(f).all()
            and np.isfinite(lam_v).all()):
        raise InputError("per-query values must be finite numbers", found="NaN or infinity")
    yc = y - y.mean(axis=1, keepdims=True)
    xc = yhat - yhat.mean(axis=1, keepdims=True)
    resid = yc - lam_v[:, None] * xc
    s2e = (resid ** 2).sum(axis=1) / (n - 2)
    sxx = (xc ** 2).sum(axis=1)
    gap = f.mean(axis=1) - yhat.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(sxx > 0, gap ** 2 / np.where(sxx > 0, sxx, 1.0), 0.0)
    var = s2e * (1.0 / n + slope) + lam_v ** 2 * f.var(axis=1, ddof=1) / big_n
    human_only = lam_v == 0.0
    var = np.where(human_only, y.var(axis=1, ddof=1) / n, var)
    df = np.where(human_only, n - 1, n - 2).astype(np.int64)
    return np.sqrt(var), df


def normal_p_values(estimate, se, tol=0.0) -> np.ndarray:
    """Two-sided normal p-values ``2 * (1 - Phi(|estimate| / se))``, vectorised.

    Parameters
    ----------
    estimate, se : array-like of shape (m,), float
        Estimates and their standard errors.
    tol : float or array-like of shape (m,), default 0.0
        Per row, the standard error (and estimate) at or below which it counts as 0:
        floating-point noise, e.g.
        :func:`relgrade.evaluation.ppi_table.zero_se_tolerance` of the values entering it.

    Returns
    -------
    numpy.ndarray of shape (m,), float
        The p-values; a standard error within ``tol`` gives 1.0 for an estimate within
        ``tol`` of 0 and 0.0 otherwise, as :meth:`PPIEstimate.p_value` does for an exact 0.
    """
    e, s = np.asarray(estimate, dtype=np.float64), np.asarray(se, dtype=np.float64)
    t = np.broadcast_to(np.asarray(tol, dtype=np.float64), s.shape)
    from scipy import stats as sps
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 2.0 * sps.norm.sf(np.abs(e) / np.where(s > t, s, 1.0))
    return np.where(s > t, p, np.where(np.abs(e) <= t, 1.0, 0.0))


def human_only_mean(human, *, alpha: float = 0.05, zero_variance: str = "error") -> PPIEstimate:
    """The classical estimate from the human sample alone: mean and ``std(ddof=0) / sqrt(n)``.

    Parameters
    ----------
    human : array-like of shape (n,), float
        Per-query metric under the human key on the sample, ``n >= 2``.
    alpha, zero_variance
        As in :func:`ppi_mean`.

    Returns
    -------
    PPIEstimate
        ``method="human-only"``, ``lam=0``, ``N=0``; equal to ``ppi_mean(..., lam=0)``.
    """
    a = _check_alpha(alpha)
    _check_policy(zero_variance)
    y = _vector(human, "human-key values")
    if y.size < 2:
        raise InputError("an interval needs at least 2 human-graded queries",
                         found=f"{y.size}", fix="raise the human fraction or count")
    return _finish(y.mean(), y.std() / math.sqrt(y.size), alpha=a, lam=0.0, n=y.size, N=0,
                   method="human-only", zero_variance=zero_variance, what="human-only")


def model_only_mean(model_all, *, alpha: float = 0.05,
                    zero_variance: str = "error") -> PPIEstimate:
    """The naive estimate from model grades alone: mean and ``std(ddof=0) / sqrt(N)``.

    Its interval ignores the model grader's bias, so it covers the human-key mean only when
    the model grades like people; it is reported to show how far it is off.

    Parameters
    ----------
    model_all : array-like of shape (N,), float
        Per-query metric under the model key on every query, ``N >= 2``.
    alpha, zero_variance
        As in :func:`ppi_mean`.

    Returns
    -------
    PPIEstimate
        ``method="model-only"``, ``lam=None``, ``n=0``.
    """
    a = _check_alpha(alpha)
    _check_policy(zero_variance)
    f = _vector(model_all, "model-key values on all queries")
    if f.size < 2:
        raise InputError("an interval needs at least 2 model-graded queries", found=f"{f.size}")
    return _finish(f.mean(), f.std() / math.sqrt(f.size), alpha=a, lam=None, n=0, N=f.size,
                   method="model-only", zero_variance=zero_variance, what="model-only")


def ppi_estimates(human, model_sample, model_all, *, alpha: float = 0.05,
                  zero_variance: str = "error") -> dict[str, PPIEstimate]:
    """All four estimates of one mean, keyed by :data:`METHODS`.

    Parameters are those of :func:`ppi_mean`. Returns
    ``{"ppi++": ..., "ppi": ..., "human-only": ..., "model-only": ...}``.
    """
    kw = {"alpha": alpha, "zero_variance": zero_variance}
    return {"ppi++": ppi_mean(human, model_sample, model_all, **kw),
            "ppi": ppi_mean(human, model_sample, model_all, lam=1.0, **kw),
            "human-only": human_only_mean(human, **kw),
            "model-only": model_only_mean(model_all, **kw)}


def estimate(method: str, human, model_sample, model_all, *, alpha: float = 0.05,
             zero_variance: str = "error") -> PPIEstimate:
    """One estimate by name (one of :data:`METHODS`); the parameters are those of :func:`ppi_mean`."""
    if method == "ppi++":
        return ppi_mean(human, model_sample, model_all, alpha=alpha, zero_variance=zero_variance)
    if method == "ppi":
        return ppi_mean(human, model_sample, model_all, alpha=alpha, lam=1.0,
                        zero_variance=zero_variance)
    if method == "human-only":
        return human_only_mean(human, alpha=alpha, zero_variance=zero_variance)
    if method == "model-only":
        return model_only_mean(model_all, alpha=alpha, zero_variance=zero_variance)
    raise InputError(f"unknown estimate; use one of {', '.join(METHODS)}", found=repr(method))


def ppi_difference(human_a, human_b, model_sample_a, model_sample_b, model_all_a, model_all_b,
                   *, method: str = "ppi++", alpha: float = 0.05,
                   zero_variance: str = "error") -> PPIEstimate:
    """The estimate of the paired difference ``arm A - arm B`` of a mean over queries.

    Parameters
    ----------
    human_a, human_b : array-like of shape (n,), float
        Each arm's per-query metric under the human key on the sample.
    model_sample_a, model_sample_b : array-like of shape (n,), float
        Each arm's per-query metric under the model key on the sample.
    model_all_a, model_all_b : array-like of shape (N,), float
        Each arm's per-query metric under the model key on every query.
    method : str, default "ppi++"
        One of :data:`METHODS`.
    alpha, zero_variance
        As in :func:`ppi_mean`.

    Returns
    -------
    PPIEstimate
        The estimate of ``mean(A) - mean(B)`` under the human key.

    Raises
    ------
    InputError
        As :func:`ppi_mean`; also when the two arms' arrays differ in length.

    Notes
    -----
    The difference of two arms' means over the same queries is the mean of the per-query
    differences ``D_q = A_q - B_q``, which is itself a per-query value. So the estimator of
    :func:`ppi_mean` applies to ``D`` unchanged (with its own tuned ``lambda``), and its
    interval is valid for the same reason as for one arm. Differencing per query keeps the
    pairing: what the two arms share on a query (its difficulty, its relevant chunks)
    cancels, as in a paired test, instead of entering twice.
    """
    pairs = [("human-key values", human_a, human_b),
             ("model-key values on the human sample", model_sample_a, model_sample_b),
             ("model-key values on all queries", model_all_a, model_all_b)]
    diffs = []
    for what, a, b in pairs:
        va, vb = _vector(a, f"arm A's {what}"), _vector(b, f"arm B's {what}")
        if va.shape != vb.shape:
            raise InputError(f"both arms need the same queries for a paired difference ({what})",
                             found=f"{va.size} and {vb.size} values")
        diffs.append(va - vb)
    return estimate(method, *diffs, alpha=alpha, zero_variance=zero_variance)


def holm(p_values: Sequence[float], *, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down adjustment of a family of p-values.

    Parameters
    ----------
    p_values : sequence of float, length m
        One p-value per comparison of the family.
    alpha : float, default 0.05
        Family-wise error rate.

    Returns
    -------
    adjusted : numpy.ndarray of shape (m,), float
        Holm-adjusted p-values (``statsmodels.stats.multitest.multipletests``,
        ``method="holm"``).
    reject : numpy.ndarray of shape (m,), bool
        ``adjusted <= alpha``.

    References
    ----------
    S. Holm, "A simple sequentially rejective multiple test procedure", Scandinavian
    Journal of Statistics 6 (1979): 65-70.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    if not (np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()):
        raise InputError("p-values must lie in [0, 1]", found=str(p[~((p >= 0) & (p <= 1))][:3]))
    from statsmodels.stats.multitest import multipletests
    reject, adjusted, _, _ = multipletests(p, alpha=_check_alpha(alpha), method="holm")
    return adjusted, reject


def ppi_comparisons(human: Mapping[str, np.ndarray], model_sample: Mapping[str, np.ndarray],
                    model_all: Mapping[str, np.ndarray], *, pairs=None, method: str = "ppi++",
                    alpha: float = 0.05) -> pd.DataFrame:
    """Paired differences of arms with Holm's adjustment over the comparisons made.

    Parameters
    ----------
    human, model_sample : mapping of arm -> array-like of shape (n,), float
        Per-query metric of each arm on the human sample, under the human and the model key.
    model_all : mapping of arm -> array-like of shape (N,), float
        Per-query metric of each arm under the model key on every query.
    pairs : sequence of (arm_a, arm_b), optional
        The comparisons; default every pair of arms in the order of ``model_all``.
    method : str, default "ppi++"
        One of :data:`METHODS`.
    alpha : float, default 0.05
        Level of each interval and family-wise error rate of the Holm verdicts.

    Returns
    -------
    pandas.DataFrame
        One row per comparison, columns ``arm_a``, ``arm_b``, ``method``, ``estimate``
        (A - B), ``se``, ``low``, ``high``, ``lambda``, ``n``, ``N``, ``p`` (two-sided normal),
        ``p_holm``, ``significant`` (``p_holm <= alpha``).

    Notes
    -----
    A zero standard error (two arms equal on every query under both keys) gives a
    zero-width interval and ``p = 1`` for a zero estimate (see :meth:`PPIEstimate.p_value`).
    """
    arms = list(model_all)
    if pairs is None:
        pairs = list(itertools.combinations(arms, 2))
    rows = []
    for a, b in pairs:
        for arm in (a, b):
            if arm not in model_all or arm not in human or arm not in model_sample:
                raise InputError("a compared arm has no per-query values", item=str(arm))
        e = ppi_difference(human[a], human[b], model_sample[a], model_sample[b],
                           model_all[a], model_all[b], method=method, alpha=alpha,
                           zero_variance="degenerate")
        row = {"arm_a": a, "arm_b": b}
        row.update(e.to_dict())
        row["p"] = e.p_value()
        rows.append(row)
    cols = ["arm_a", "arm_b", "method", "estimate", "se", "low", "high", "lambda", "n", "N",
            "p", "p_holm", "significant"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    adjusted, reject = holm(df["p"].to_numpy(), alpha=alpha)
    df["p_holm"] = adjusted
    df["significant"] = reject
    return df[cols]
