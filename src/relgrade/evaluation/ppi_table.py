"""The prediction-powered estimates of an experiment: every arm and every paired difference,
three estimators side by side, with a small-sample interval.

:mod:`relgrade.evaluation.ppi` holds the estimators; this module applies them to the arms of
one experiment for one measure and gives one JSON-ready result:

* ``ppi++`` — the model-key mean over all ``N`` queries rectified by the human sample
  (with the default ``jackknife`` interval one ``lambda`` shared by the arms,
  :func:`relgrade.evaluation.ppi.jackknife_rows`, and per difference the smaller of the
  differences' shared ``lambda`` and the difference's own,
  :func:`relgrade.evaluation.ppi.jackknife_rows_each`; with the other kinds one
  ``lambda`` per arm or difference, :func:`relgrade.evaluation.ppi.ppi_mean_rows`);
* ``human-only`` — the mean over the ``n`` human-sample queries under the human key;
* ``model-only`` — the mean over all queries under the model key, labelled: its interval
  ignores the model grader's bias.

Inputs are wide tables of per-query values: rows the arms, columns the query ids. Paired
differences are the same estimators applied to per-query differences, with Holm's method
over the comparisons made, per estimator.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation.measures import value_range
from relgrade.evaluation.ppi import (holm, jackknife_rows, jackknife_rows_each,
                                     ppi_mean_rows, regression_se_rows)
from relgrade.evaluation.robustness import paraphrase_widened

#: Interval kinds: ``jackknife`` (the default: PPI++ with one lambda shared by the arms and,
#: per difference, the smaller of the differences' shared lambda and its own, the
#: delete-one-query jackknife standard error with lambda
#: re-tuned per deletion, Student's t on n - 1 degrees of freedom, the half-width capped at
#: the human-only one; the others as ``t``), ``regression`` (PPI++ with lambda per row and
#: the small-sample variance of the regression estimator, Student's t on n - 2),
#: ``t`` (unbiased variances, Student's t on n - 1 degrees of freedom) and ``normal``
#: (ppi-python's plug-in variances, ddof 0, and the normal quantile).
INTERVALS = ("jackknife", "regression", "t", "normal")

#: How the ``jackknife`` kind tunes lambda over rows: one for all (arms), or per row (differences).
TUNINGS = ("shared", "per-row")

#: Interval kinds that need 3 human-sample queries (the others 2, in this module).
NEEDS_THREE = ("jackknife", "regression")

#: A standard error at or below ``SE_ZERO_RTOL`` times the scale of the values it comes from
#: (the largest absolute per-query value entering it, metric units) counts as 0. Values that
#: are all the same give a standard error of exactly 0 in exact arithmetic, but the PPI++
#: estimators (lambda tuned, re-tuned per jackknife deletion, subtracted back) leave
#: floating-point noise of a few units of float64's epsilon (2.2e-16) times the scale
#: (1.57e-16 for nDCG values of 1 on a 3-query sample), growing at most with the log of the
#: number of values summed. 1e-12 is about 4,500 epsilons, far above that noise for any query
#: count, and far below any real standard error: one query out of a million moved by a
#: millionth of the scale already gives a standard error about 1e-9 times the scale.
SE_ZERO_RTOL = 1e-12

#: The human sample docs/ppi.md recommends at least (queries): below it the intervals get
#: wide and their coverage falls (:data:`relgrade.evaluation.ppi.MIN_SAMPLE` is the least
#: taken at all).
RECOMMENDED_SAMPLE = 10


def zero_se_tolerance(*values) -> np.ndarray:
    """Per row, the standard error at or below which :func:`ppi_table` takes it as 0.

    Parameters
    ----------
    *values : array-like of shape (m, k), float
        The per-query values entering each of ``m`` rows' standard errors (any number of
        tables, each with its own ``k``; metric units).

    Returns
    -------
    numpy.ndarray of shape (m,), float
        :data:`SE_ZERO_RTOL` times the largest absolute value of each row (0 for a row of
        zeros, whose standard error is then exactly 0).

    Examples
    --------
    >>> zero_se_tolerance(np.array([[1.0, 0.5], [0.0, 0.0]]), np.array([[0.2], [0.0]]))
    array([1.e-12, 0.e+00])
    """
    scale = np.max(np.hstack([np.abs(np.asarray(v, dtype=np.float64)) for v in values]),
                   axis=1)
    return SE_ZERO_RTOL * scale


def small_sample_words(n: int, *, fix: str) -> str | None:
    """The warning for a human sample smaller than :data:`RECOMMENDED_SAMPLE` (None when it
    is not).

    Parameters
    ----------
    n : int
        Human-sample queries.
    fix : str
        How to get a larger sample, in the caller's words (a sentence, no final stop).

    Examples
    --------
    >>> small_sample_words(3, fix="Raise ppi.human_queries")
    'the human sample holds 3 queries, fewer than the 10 or more docs/ppi.md recommends: PPI++ intervals from so few queries are wide and cover the truth less often than stated, so verdicts on them are weak evidence. Raise ppi.human_queries'
    >>> small_sample_words(10, fix="x") is None
    True
    """
    if n >= RECOMMENDED_SAMPLE:
        return None
    return (f"the human sample holds {n} quer{'y' if n == 1 else 'ies'}, fewer than the "
            f"{RECOMMENDED_SAMPLE} or more docs/ppi.md recommends: PPI++ intervals from so few "
            "queries are wide and cover the truth less often than stated, so verdicts on them "
            f"are weak evidence. {fix}")


#: Each interval kind in words (the report's design sentence).
INTERVAL_WORDS = {
    "jackknife": "PPI++ with one lambda shared by the arms (and per difference the smaller "
                 "of the differences' shared lambda and the difference's own), "
                 "the delete-one-query jackknife variance with lambda re-tuned per deletion "
                 "plus the model term, Student's t on n - 1 degrees of freedom, the "
                 "half-width capped at the human-only one; human-only and model-only with "
                 "Student's t on n - 1 and N - 1",
    "regression": "PPI++ with the small-sample variance of the regression estimator, which "
                  "counts the tuning of lambda on the sample, and Student's t on n - 2 degrees "
                  "of freedom; human-only and model-only with Student's t on n - 1 and N - 1",
    "t": "unbiased variances and Student's t on n - 1 degrees of freedom (N - 1 for "
         "model-only)",
    "normal": "ppi-python's plug-in variances and the normal quantile",
}

#: The estimators, in the order reports list them.
ESTIMATORS = ("ppi++", "human-only", "model-only")

#: What the rectifier is, in words (recorded in ppi.json), with lambda per row.
RECTIFIER = ("lambda * mean over all queries of the model-key value + mean over the human "
             "sample of (human-key value - lambda * model-key value); lambda tuned per arm "
             "and per difference (PPI++), clipped to [0, 1]")

#: The same with one shared lambda (the ``jackknife`` interval).
RECTIFIER_SHARED = ("lambda * mean over all queries of the model-key value + mean over the "
                    "human sample of (human-key value - lambda * model-key value); one lambda "
                    "tuned over all arms (PPI++ power tuning of a vector mean) and, per "
                    "difference, the smaller of one lambda tuned over all differences and "
                    "the difference's own, clipped to [0, 1]")


def rectifier(interval: str) -> str:
    """The rectifier in words for an interval kind (:data:`RECTIFIER_SHARED` for
    ``jackknife``, else :data:`RECTIFIER`)."""
    return RECTIFIER_SHARED if interval == "jackknife" else RECTIFIER


def _quantile(interval: str, alpha: float, df) -> np.ndarray:
    from scipy import stats as sps

    if interval == "normal":
        return np.asarray(sps.norm.ppf(1.0 - alpha / 2.0))
    return np.asarray(sps.t.ppf(1.0 - alpha / 2.0, df))


def _p_values(est: np.ndarray, se: np.ndarray, interval: str, df,
              tol: np.ndarray | float = 0.0) -> np.ndarray:
    """Two-sided p-values of ``est / se``; a standard error at or below ``tol`` (per row,
    :func:`zero_se_tolerance`) counts as 0: p 1 for an estimate within ``tol`` of 0, else 0."""
    from scipy import stats as sps

    spread = se > tol
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(est) / np.where(spread, se, 1.0)
    p = 2.0 * (sps.norm.sf(z) if interval == "normal" else sps.t.sf(z, df))
    return np.where(spread, p, np.where(np.abs(est) <= tol, 1.0, 0.0))


def estimate_rows(human, model_sample, model_all, *, level: float = 0.95,
                  interval: str = "jackknife",
                  tuning: str = "shared") -> dict[str, dict[str, np.ndarray]]:
    """The three estimates of many means at once (arms, or paired differences).

    Parameters
    ----------
    human, model_sample : array-like of shape (m, n), float
        Per-query values on the human sample under the human key and the model key.
    model_all : array-like of shape (m, N), float
        Per-query values under the model key on every query (the sample included).
    level : float, default 0.95
        Confidence level of the intervals.
    interval : {"jackknife", "regression", "t", "normal"}, default "jackknife"
        ``t``: variances with ``ddof=1`` and Student's t quantile on ``n - 1`` degrees of
        freedom for ``ppi++`` and ``human-only`` (``N - 1`` for ``model-only``);
        ``jackknife``: the same, except that ``ppi++`` takes one ``lambda`` shared by all
        ``m`` rows and the jackknife standard error of
        :func:`relgrade.evaluation.ppi.jackknife_rows` (needs ``n >= 3``), capped at the
        human-only standard error where that is positive (same quantile, so the interval
        is never wider than a human-only interval of positive width; where the human-only
        standard error is 0, within :func:`zero_se_tolerance`, nothing is capped and the row
        is marked ``wider_than_human_only``);
        ``regression``: the same, except that ``ppi++`` takes the small-sample standard
        error of :func:`relgrade.evaluation.ppi.regression_se_rows` and Student's t on
        ``n - 2`` degrees of freedom (``n - 1`` where ``lambda`` is 0; needs ``n >= 3``);
        ``normal``: ``ddof=0`` and the normal quantile, equal to ``ppi-python``'s
        ``ppi_mean_ci`` and ``classical_mean_ci``.
    tuning : {"shared", "per-row"}, default "shared"
        With ``jackknife`` only: ``shared`` takes one ``lambda`` for all rows
        (:func:`relgrade.evaluation.ppi.jackknife_rows`, the arms' rule); ``per-row`` takes
        per row the smaller of that and the row's own
        (:func:`relgrade.evaluation.ppi.jackknife_rows_each`, the differences' rule, so a
        difference the model does not track falls back to human-only).

    Returns
    -------
    dict
        ``{estimator: {"estimate", "se", "low", "high", "lambda", "df", "capped",
        "wider_than_human_only"}}`` for each of :data:`ESTIMATORS`, every value an array of
        shape (m,) (``df`` per row, integer; ``lambda`` 0 for human-only and NaN for
        model-only; ``capped`` True where the ``jackknife`` kind took the human-only standard
        error, else False; ``wider_than_human_only`` True where the ``jackknife`` kind's
        PPI++ standard error exceeds a human-only one of 0 (people gave the same value on
        every sampled query: a zero-width human-only interval is no interval, so nothing caps
        PPI++), else False).

    Raises
    ------
    InputError
        Shapes that disagree, fewer than 2 sample queries (3 for ``regression``), a value
        that is not finite, an unknown interval kind or a level outside (0, 1).

    Notes
    -----
    With 20 sample queries of skewed nDCG values (``benchmarks/sim_ppi.py``, 500
    replicates, see benchmarks/README.md) PPI++ covers the truth at a nominal 95% in 90-92%
    of replicates with the normal interval, 92.6-94.3% with ``t``, 94.1-95.5% with
    ``regression`` (wider than human-only in a fifth of the arms) and about 94% of arms and
    95% of differences with ``jackknife``, never wider than human-only. The cap is a rule,
    not a theorem: where the shared ``lambda`` does not suit a row, PPI++ can be truly less
    precise than human-only there, and the capped interval then covers less; in the
    simulation it costs about 0.2 points of coverage (measured, see benchmarks/README.md).

    References
    ----------
    A. N. Angelopoulos, J. C. Duchi and T. Zrnic, "PPI++: Efficient prediction-powered
    inference", arXiv:2311.01453 (2023).
    """
    if interval not in INTERVALS:
        raise InputError(f"the interval kind must be one of {', '.join(INTERVALS)}",
                         found=repr(interval))
    if not 0.0 < float(level) < 1.0:
        raise InputError("the confidence level must lie in (0, 1)", found=str(level))
    alpha, ddof = 1.0 - float(level), 0 if interval == "normal" else 1
    y = np.asarray(human, dtype=np.float64)
    f = np.asarray(model_all, dtype=np.float64)
    if tuning not in TUNINGS:
        raise InputError(f"the lambda tuning must be one of {', '.join(TUNINGS)}",
                         found=repr(tuning))
    if interval == "jackknife" and tuning == "per-row":
        theta, se, lam = jackknife_rows_each(y, model_sample, f)
    elif interval == "jackknife":
        theta, se, lam_shared = jackknife_rows(y, model_sample, f)
        lam = np.full(y.shape[0], lam_shared)
    else:
        theta, se, lam = ppi_mean_rows(y, model_sample, f, ddof=ddof)
    n, big_n, m = y.shape[1], f.shape[1], y.shape[0]
    df = np.full(m, n - 1, dtype=np.int64)
    se_human = y.std(axis=1, ddof=ddof) / math.sqrt(n)
    capped, wider = np.zeros(m, dtype=bool), np.zeros(m, dtype=bool)
    if interval == "jackknife":
        human_spread = se_human > zero_se_tolerance(y)
        capped = (se > se_human) & human_spread
        wider = (se > se_human) & ~human_spread
        se = np.where(capped, se_human, se)
    if interval == "regression":
        se, df = regression_se_rows(y, model_sample, f, lam)
    rows = {
        "ppi++": (theta, se, lam, df),
        "human-only": (y.mean(axis=1), se_human,
                       np.zeros(m), np.full(m, n - 1, dtype=np.int64)),
        "model-only": (f.mean(axis=1), f.std(axis=1, ddof=ddof) / math.sqrt(big_n),
                       np.full(m, np.nan), np.full(m, big_n - 1, dtype=np.int64)),
    }
    out = {}
    for name, (est, s, lm, d) in rows.items():
        half = _quantile(interval, alpha, d) * s
        out[name] = {"estimate": est, "se": s, "low": est - half, "high": est + half,
                     "lambda": lm, "df": d,
                     "capped": capped if name == "ppi++" else np.zeros(m, dtype=bool),
                     "wider_than_human_only":
                         wider if name == "ppi++" else np.zeros(m, dtype=bool)}
    return out


def clip_interval(low: float, high: float, bounds) -> tuple[float, float, bool]:
    """An interval cut to the range its quantity can take.

    Parameters
    ----------
    low, high : float
        The interval's ends.
    bounds : tuple of (float, float) or None
        The range (a bounded measure's ``(0, 1)``; ``(-1, 1)`` for a difference of two);
        None: no range, nothing cut.

    Returns
    -------
    tuple of (float, float, bool)
        ``max(low, lo)``, ``min(high, hi)`` and whether either end moved. A normal or t
        interval of a mean near the end of its range can run past it (``[0.41, 1.04]`` for an
        nDCG): the values beyond are impossible, so the reported interval stops at the end and
        the record says it was clipped (its coverage is the unclipped interval's).

    Examples
    --------
    >>> clip_interval(0.408, 1.039, (0.0, 1.0))
    (0.408, 1.0, True)
    >>> clip_interval(-0.2, 0.3, None)
    (-0.2, 0.3, False)
    """
    if bounds is None:
        return float(low), float(high), False
    lo, hi = float(max(low, bounds[0])), float(min(high, bounds[1]))
    return lo, hi, bool(lo != low or hi != high)


def widen_block(block: dict, prompt_variance, *, draws: int, interval: str,
                level: float) -> dict:
    """A PPI++ block of :func:`estimate_rows` with every row's interval widened by the
    paraphrase component of its model term.

    Parameters
    ----------
    block : dict
        ``estimate_rows(...)["ppi++"]`` (arrays of shape (m,)). Not modified.
    prompt_variance : array-like of shape (m,), float
        Per row, the prompt variance of the mean of the model's per-query values
        (:func:`relgrade.evaluation.robustness.prompt_variance_of_mean`, metric units
        squared, >= 0).
    draws : {1, 2}
        Independent prompt draws (see
        :func:`relgrade.evaluation.robustness.paraphrase_widened`).
    interval, level
        The block's interval kind and level (its quantile is kept).

    Returns
    -------
    dict
        The block with ``se``, ``low`` and ``high`` widened, and under ``paraphrase`` per
        row ``prompt_variance``, ``added_variance`` (``draws * lambda^2 *
        prompt_variance``) and the unwidened ``se``, ``low``, ``high``.

    Notes
    -----
    Per row, :func:`~relgrade.evaluation.robustness.paraphrase_widened` gives
    ``se_w = sqrt(se^2 + draws * lambda^2 * prompt_variance)``; the interval is
    ``estimate -/+ q * se_w`` with the row's own quantile ``q`` (normal, or Student's t on
    the row's degrees of freedom), so with the ``normal`` kind it is exactly
    ``paraphrase_widened``'s interval. The ``jackknife`` kind's cap applies to ``se``
    before the widening: the widened interval may be wider than human-only.
    """
    pv = np.asarray(prompt_variance, dtype=np.float64)
    se_w, added = np.empty_like(pv), np.empty_like(pv)
    for i, v in enumerate(pv):
        w = paraphrase_widened(float(block["estimate"][i]), float(block["se"][i]),
                               lam=float(block["lambda"][i]), prompt_variance=float(v),
                               draws=draws, level=level)
        se_w[i], added[i] = w["se"], w["added_variance"]
    half = _quantile(interval, 1.0 - float(level), block["df"]) * se_w
    est = block["estimate"]
    return block | {"se": se_w, "low": est - half, "high": est + half,
                    "paraphrase": {"prompt_variance": pv, "added_variance": added,
                                   "draws": draws, "se": block["se"], "low": block["low"],
                                   "high": block["high"]}}


def _row(block: dict, i: int, *, n: int, N: int, interval: str, level: float,
         method: str, bounds=None) -> dict:
    lam = float(block["lambda"][i])
    low, high, clipped = clip_interval(float(block["low"][i]), float(block["high"][i]), bounds)
    out = {"method": method, "estimate": float(block["estimate"][i]),
           "se": float(block["se"][i]), "low": low, "high": high, "clipped": clipped,
           "lambda": None if math.isnan(lam) else lam,
           "n": 0 if method == "model-only" else int(n),
           "N": 0 if method == "human-only" else int(N), "interval": interval,
           "df": int(block["df"][i]), "level": float(level)} | (
               {"capped": bool(block["capped"][i])} if method == "ppi++" else {}) | (
               # only where it holds: a row without it is as before the mark existed
               {"wider_than_human_only": True}
               if method == "ppi++" and bool(block["wider_than_human_only"][i]) else {})
    para = block.get("paraphrase")
    if para is not None:
        u_low, u_high, _ = clip_interval(float(para["low"][i]), float(para["high"][i]), bounds)
        out["paraphrase"] = {"prompt_variance": float(para["prompt_variance"][i]),
                             "draws": int(para["draws"]),
                             "added_variance": float(para["added_variance"][i]),
                             "unwidened": {"se": float(para["se"][i]), "low": u_low,
                                           "high": u_high}}
    return out


#: :func:`ppi_table`'s default advice for a larger human sample (the ppi stage gives its own,
#: naming the new round the sample lock asks for).
LARGER_SAMPLE = ("Draw a larger human sample (ppi.human_fraction or ppi.human_queries) before "
                 "the model grades")


def _same(values: np.ndarray) -> float | None:
    """The value every entry of ``values`` holds, or None when they differ (or there is none);
    entries within :data:`SE_ZERO_RTOL` of the largest magnitude count as the same (a
    difference of two arms carries floating-point noise: 0.8 - 0.7 is 0.10000000000000009)."""
    if not values.size:
        return None
    tol = SE_ZERO_RTOL * float(np.max(np.abs(values)))
    return float(values[0]) if bool(np.all(np.abs(values - values[0]) <= tol)) else None


def spread_words(human: np.ndarray, model_sample: np.ndarray, model_all: np.ndarray) -> str:
    """One arm's per-query values in words, for the zero-standard-error refusal.

    Parameters
    ----------
    human, model_sample : numpy.ndarray of float, shape (n,)
        The arm's per-query values on the human sample, under the human and the model key.
    model_all : numpy.ndarray of float, shape (N,)
        Its values on every query, under the model key.

    Returns
    -------
    str
        E.g. ``"1 on each of the 3 sampled queries by the human key, 1 on each by the model
        key, 1 on all 6 queries by the model key"``; a key whose values differ is said to
        vary.

    Examples
    --------
    >>> spread_words(np.array([1.0, 1.0]), np.array([1.0, 0.5]), np.array([1.0, 0.5, 0.0]))
    '1 on each of the 2 sampled queries by the human key, varying on them by the model key, varying over the 3 queries by the model key'
    """
    n, big_n = human.size, model_all.size
    h, m, a = _same(human), _same(model_sample), _same(model_all)
    return ", ".join((
        (f"{h:g} on each of the {n} sampled queries" if h is not None
         else f"varying over the {n} sampled queries") + " by the human key",
        (f"{m:g} on each" if m is not None else "varying on them") + " by the model key",
        (f"{a:g} on all {big_n} queries" if a is not None
         else f"varying over the {big_n} queries") + " by the model key"))


def zero_spread_fix(human: np.ndarray, model_all: np.ndarray, *, measure: str,
                    larger_sample: str = LARGER_SAMPLE) -> str:
    """What can help an arm whose PPI++ standard error is 0.

    Parameters
    ----------
    human : numpy.ndarray of float, shape (n,)
        The arm's per-query values on the human sample, under the human key.
    model_all : numpy.ndarray of float, shape (N,)
        Its values on every query, under the model key.
    measure : str
        The measure, named in the advice.
    larger_sample : str, default :data:`LARGER_SAMPLE`
        How to get a larger human sample, in the caller's words.

    Returns
    -------
    str
        With a sample smaller than the query set: why a larger sample can help (a query
        the sample lacks may give another value; when the model key gives the same value on
        every query, only where people grade otherwise), then ``larger_sample``. With a sample of every query: no larger sample exists; more queries, or
        another measure in ``ppi.measures``.

    Examples
    --------
    >>> zero_spread_fix(np.array([1.0, 1.0]), np.array([1.0, 1.0]), measure="nDCG@10")
    'The sample holds all 2 queries already, so no larger sample exists: nDCG@10 does not vary over this query set; add queries to the experiment (graded in a new grading.round), or name measures that vary in ppi.measures'
    """
    n, big_n = human.size, model_all.size
    if n >= big_n:
        return (f"The sample holds all {big_n} queries already, so no larger sample exists: "
                f"{measure} does not vary over this query set; add queries to the experiment "
                "(graded in a new grading.round), or name measures that vary in ppi.measures")
    a = _same(model_all)
    why = (f"The model key gives {a:g} on all {big_n} queries too, so a larger sample helps "
           "only if people grade some query it adds otherwise than the model"
           if a is not None else
           f"The model key's {measure} varies over the {big_n} queries, so a larger sample "
           "can hold queries of other values")
    return f"{why}. {larger_sample}"


def no_spread_words(arm_a: str, arm_b: str, estimate: float, method: str) -> str:
    """Why a human-only or model-only paired difference has no p-value: its standard error is
    0 while the difference is not (the PPI++ rule's words; a PPI++ row so is refused).

    Examples
    --------
    >>> no_spread_words("good", "poor", 0.25, "model-only")
    'good - poor is 0.25 with no spread (model-only), so no test can be formed from it (a p-value would claim a certainty the sample does not give): p undefined, not significant'
    """
    return (f"{arm_a} - {arm_b} is {estimate:g} with no spread ({method}), so no test can be "
            "formed from it (a p-value would claim a certainty the sample does not give): p "
            "undefined, not significant")


def ppi_table(model_values: pd.DataFrame, human_values: pd.DataFrame, *, measure: str,
              level: float = 0.95, interval: str = "jackknife",
              pairs: Sequence[tuple[str, str]] | None = None,
              prompt_variance: dict | None = None, draws: int = 1,
              larger_sample: str = LARGER_SAMPLE) -> dict:
    """Per-arm and paired-difference estimates of one measure, three estimators each.

    Parameters
    ----------
    model_values : pandas.DataFrame of shape (n_arms, N)
        Index the arms, columns the query ids: per-query values under the model key on
        every query. Not modified.
    human_values : pandas.DataFrame of shape (n_arms, n)
        The same arms (same order), columns the human-sample query ids: per-query values
        under the human key.
    measure : str
        The measure's canonical name (recorded).
    level : float, default 0.95
        Confidence level; ``1 - level`` is also the family-wise error rate of Holm.
    interval : {"jackknife", "regression", "t", "normal"}, default "jackknife"
        See :func:`estimate_rows`. With ``jackknife`` the arms share one ``lambda``; each
        difference takes the smaller of one ``lambda`` shared by the differences (tuned on the
        differences themselves) and its own (``tuning="per-row"``).
    pairs : sequence of (arm_a, arm_b), optional
        The comparisons (A - B); default every pair of arms in index order.
    prompt_variance : dict, optional
        ``{"arms": {arm: float}, "differences": {(arm_a, arm_b): float}}``: per arm and per
        difference, the prompt variance of the mean of the model's per-query values (metric
        units squared, from the judge's paraphrase probe). Given, every PPI++ interval is
        widened by it (:func:`widen_block`), its p-values (and Holm's) taken on the widened
        standard error, and each PPI++ row carries ``paraphrase``. Default None: nothing
        is widened and the rows are as without it.
    draws : {1, 2}, default 1
        Independent prompt draws behind the model term (with ``prompt_variance``).
    larger_sample : str, default :data:`LARGER_SAMPLE`
        How to get a larger human sample, in the caller's words: the fix of the refusals
        below when the sample is smaller than the query set (the ppi stage names a new
        ``grading.round``, since a round's sample is locked once drawn).

    Returns
    -------
    dict
        ``{"measure", "level", "interval", "n", "N", "arms": {arm: {estimator: row}},
        "differences": [{"arm_a", "arm_b", estimator: row + p, p_holm, significant}]}``.
        A human-only or model-only difference whose standard error is 0 while its estimate is
        not (the same nonzero value on every query it is taken over) has no test: ``p`` and
        ``p_holm`` None, ``significant`` False and ``no_spread`` its words
        (:func:`no_spread_words`); it counts in Holm's family as p 1. "0" is within the
        tolerance of the PPI++ rule below.

    Raises
    ------
    InputError
        The human sample is not a subset of the model-graded queries, the two tables hold
        different arms, fewer than 2 sample queries (3 with the ``jackknife`` and
        ``regression`` intervals),
        the PPI++ standard error of an arm is 0 (its value is the same on every sampled
        query: no interval can be formed; the message gives the values, and
        :func:`zero_spread_fix`'s advice), or the PPI++ standard error of a paired difference
        is 0 while its estimate is not (the difference is the same nonzero value on every
        sampled query, and under the model key: no interval or test can be formed, and a
        p-value near 0 would be a degenerate claim; same message and advice). "0" is within
        :func:`zero_se_tolerance` of the values entering it (for a difference, the larger of
        its two arms'), so floating-point noise does not pass for spread. A difference whose
        standard error and estimate are both 0 (two arms equal on every query) is kept:
        estimate 0, p 1, not significant.

    Examples
    --------
    >>> m = pd.DataFrame([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]], index=["a", "b"],
    ...                  columns=["q1", "q2", "q3", "q4"])
    >>> h = pd.DataFrame([[1.0, 0.0], [0.0, 1.0]], index=["a", "b"], columns=["q1", "q2"])
    >>> t = ppi_table(m, h, measure="nDCG@10", interval="normal")
    >>> round(t["arms"]["a"]["model-only"]["estimate"], 2), t["n"], t["N"]
    (0.75, 2, 4)
    """
    outside = [q for q in human_values.columns if q not in set(model_values.columns)]
    if outside:
        raise InputError("the human sample must be a subset of the pool's queries",
                         found=", ".join(map(str, outside[:5])),
                         fix="draw the sample from the pool (`relgrade audit redraw`)")
    if list(model_values.index) != list(human_values.index):
        raise InputError("the model-key and human-key tables must hold the same arms",
                         found=f"{list(model_values.index)} and {list(human_values.index)}")
    arms = [str(a) for a in model_values.index]
    sample = list(human_values.columns)
    f = model_values.to_numpy(dtype=np.float64)
    y = human_values.to_numpy(dtype=np.float64)
    yhat = model_values[sample].to_numpy(dtype=np.float64)
    n, big_n = y.shape[1], f.shape[1]
    if n < 2:
        raise InputError("an interval needs at least 2 human-sample queries", found=str(n),
                         fix=larger_sample)
    if interval in NEEDS_THREE and n < 3:
        raise InputError(f"the {interval} interval needs at least 3 human-sample queries",
                         found=str(n), fix=f"{larger_sample}, or set ppi.interval: t")
    est = estimate_rows(y, yhat, f, level=level, interval=interval)
    if prompt_variance is not None:
        missing = [a for a in arms if a not in prompt_variance["arms"]]
        if missing:
            raise InputError("every arm needs its prompt variance to be widened",
                             item=f"arm {missing[0]}, {measure}")
        est["ppi++"] = widen_block(est["ppi++"], [prompt_variance["arms"][a] for a in arms],
                                   draws=draws, interval=interval, level=level)
    # "0" in metric units: floating-point noise (1.57e-16 for values all 1) is no spread
    tol = zero_se_tolerance(y, yhat, f)
    zero = np.flatnonzero(~(est["ppi++"]["se"] > tol))
    if zero.size:
        i = int(zero[0])
        same = _same(y[i]) is not None
        raise InputError(
            "the PPI++ standard error is 0: "
            + ("the arm's value is the same on every sampled query, so no interval can be "
               "formed from them" if same else "no interval can be formed"),
            item=f"arm {arms[i]}, {measure}", found=spread_words(y[i], yhat[i], f[i]),
            fix=zero_spread_fix(y[i], f[i], measure=measure, larger_sample=larger_sample))
    out = {"measure": measure, "level": float(level), "interval": interval, "n": n,
           "N": big_n, "arms": {}, "differences": []}
    try:  # a bounded measure's intervals are clipped to its range, and marked clipped
        bounds = value_range(measure)
    except InputError:
        bounds = None  # a name the measure parser does not read: nothing is clipped
    diff_bounds = None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])
    for i, arm in enumerate(arms):
        out["arms"][arm] = {m: _row(est[m], i, n=n, N=big_n, interval=interval, level=level,
                                    method=m, bounds=bounds) for m in ESTIMATORS}
    pairs = list(itertools.combinations(arms, 2)) if pairs is None else list(pairs)
    if not pairs:
        return out
    pos = {a: i for i, a in enumerate(arms)}
    ia = np.array([pos[a] for a, _ in pairs])
    ib = np.array([pos[b] for _, b in pairs])
    d = estimate_rows(y[ia] - y[ib], yhat[ia] - yhat[ib], f[ia] - f[ib], level=level,
                      interval=interval, tuning="per-row")
    if prompt_variance is not None:
        diffs = prompt_variance["differences"]
        missing = [p for p in pairs if tuple(p) not in diffs]
        if missing:
            raise InputError("every difference needs its prompt variance to be widened",
                             item=f"{missing[0][0]} - {missing[0][1]}, {measure}")
        d["ppi++"] = widen_block(d["ppi++"], [diffs[tuple(p)] for p in pairs], draws=draws,
                                 interval=interval, level=level)
    # a difference's noise is that of its two arms' values: the larger arm tolerance
    tol_d = np.maximum(tol[ia], tol[ib])
    e = d["ppi++"]
    flat = np.flatnonzero(~(e["se"] > tol_d) & (np.abs(e["estimate"]) > tol_d))
    if flat.size:
        j = int(flat[0])
        a, b = pairs[j]
        dy, dyhat, df_ = y[ia[j]] - y[ib[j]], yhat[ia[j]] - yhat[ib[j]], f[ia[j]] - f[ib[j]]
        raise InputError(
            "the PPI++ standard error of a paired difference is 0 while the difference is "
            f"not: {a} - {b} is {float(e['estimate'][j]):g} with no spread, so no interval "
            "or test can be formed from it (a p-value would claim a certainty the sample "
            "does not give)", item=f"{a} - {b}, {measure}",
            found=spread_words(dy, dyhat, df_),
            fix=zero_spread_fix(dy, df_, measure=measure, larger_sample=larger_sample))
    rows = [{"arm_a": a, "arm_b": b} for a, b in pairs]
    for m in ESTIMATORS:
        block = d[m]
        p = _p_values(block["estimate"], block["se"], interval, block["df"], tol_d)
        # the PPI++ rule for the columns beside it: a nonzero difference with no spread has
        # no test (PPI++ so was refused above); it stays in Holm's family, as p 1
        flat = ~(block["se"] > tol_d) & (np.abs(block["estimate"]) > tol_d)
        adjusted, reject = holm(np.where(flat, 1.0, p), alpha=1.0 - float(level))
        for j, row in enumerate(rows):
            row[m] = _row(block, j, n=n, N=big_n, interval=interval, level=level, method=m,
                          bounds=diff_bounds) | (
                {"p": None, "p_holm": None, "significant": False,
                 "no_spread": no_spread_words(row["arm_a"], row["arm_b"],
                                              float(block["estimate"][j]), m)}
                if flat[j] else
                {"p": float(p[j]), "p_holm": float(adjusted[j]),
                 "significant": bool(reject[j])})
    out["differences"] = rows
    return out
