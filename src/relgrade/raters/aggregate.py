"""Several raters per pair: one grade per pair by majority vote or by Dawid-Skene.

With three to five raters on every pair, the key needs one grade per pair. Two aggregators
are offered, both over the long grades table (``query_id``, ``chunk_id``, ``grader``,
``grade``) after the raters who failed their gold questions are removed
(:mod:`relgrade.raters.gold`):

* :func:`majority`: the most frequent grade, with relgrade's tie rule (the median of the
  tied grades, rounded down to a grade on the scale: :func:`majority_grade`, also the rule
  that records a model grader's repeated samples);
* :func:`dawid_skene`: the maximum-likelihood grade under Dawid and Skene's model, in which
  every rater has their own confusion matrix; it learns who is reliable, who is lenient and
  who reverses the scale, and weighs each rater's grade accordingly.

Pairs whose raters disagree widely are flagged by :func:`flag_high_variance` for an expert
to adjudicate, whatever the aggregate says. Fleiss' kappa and Krippendorff's alpha over the
raters are :func:`relgrade.protocol.agreement.multi_rater_agreement`.

Everything is deterministic: pairs are taken in (query_id, chunk_id) order and raters in
name order, whatever the order of the input rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.schema import PAIR, RATINGS, check_scale, require

#: Columns of :func:`majority`'s result.
MAJORITY_COLUMNS = ["query_id", "chunk_id", "grade", "votes", "agreement"]

#: Columns of the labels of :func:`dawid_skene`.
DS_COLUMNS = ["query_id", "chunk_id", "grade", "posterior"]

#: Columns of :func:`flag_high_variance`'s result.
FLAG_COLUMNS = ["query_id", "chunk_id", "votes", "grades", "mean", "variance", "spread",
                "reason"]

#: relgrade's tie rule (:func:`majority_grade`), as written into reports.
TIE_RULE = "median of the tied modal grades, rounded down to a grade on the scale"

#: Tie rules of :func:`majority`, and what each records.
TIES = {
    "median-low": TIE_RULE,
    "low": "the lowest of the tied modal grades",
    "high": "the highest of the tied modal grades",
}

#: Floor on probabilities inside Dawid-Skene (keeps every log finite).
EPS = 1e-10

#: Dawid-Skene's defaults: at most this many EM iterations, and convergence when no prior
#: and no confusion entry moves by more than TOL in one iteration.
MAX_ITER = 2000
TOL = 1e-7


# --- the ratings table -----------------------------------------------------------------

def check_ratings(grades: pd.DataFrame, *, scale: Iterable[int] | None = None,
                  repeats: bool = False) -> pd.DataFrame:
    """The long grades table reduced to checked ratings, in a fixed order.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        Columns ``query_id``, ``chunk_id``, ``grader`` and ``grade`` (other columns are
        ignored). A row whose grade is null counts as not graded and is left out. Not
        modified.
    scale : iterable of int, optional
        The allowed grades; when given, a grade off the scale is an error.
    repeats : bool, default False
        Accept several grades by one grader on one pair (repeated labels, as in Dawid &
        Skene 1979, where one clinician rated every patient three times); each is kept.

    Returns
    -------
    pandas.DataFrame of shape (n_ratings, 4)
        Columns ``query_id``, ``chunk_id``, ``grader`` (str) and ``grade`` (int64), sorted
        by (query_id, chunk_id, grader), index 0..n-1 (a grader's repeated grades of one
        pair in their input order).

    Raises
    ------
    InputError
        A column is missing; an id or grader name is empty; a grade is not a whole number
        or is off the scale; a grader has two grades for one pair (select one round first)
        and ``repeats`` is False. Each error names the grader and the pair.
    """
    require(grades, RATINGS, what="the grades table")
    g = grades[grades["grade"].notna().to_numpy()]
    out = pd.DataFrame({c: g[c].astype(str).to_numpy() for c in RATINGS[:3]})
    for col in RATINGS[:3]:
        empty = out[col].str.strip() == ""
        if empty.any():
            i = int(np.flatnonzero(empty.to_numpy())[0])
            raise InputError(f"the grades table has an empty {col}",
                             item=f"pair ({out.at[i, 'query_id']}, {out.at[i, 'chunk_id']})")
    raw = g["grade"].to_numpy()
    values = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values) | (values != np.round(values))
    bad |= np.array([isinstance(v, (bool, np.bool_)) for v in raw], dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError("a grade must be a whole number", item=_who(out, i),
                         found=repr(raw[i].item() if hasattr(raw[i], "item") else raw[i]))
    out["grade"] = values.astype(np.int64)
    if scale is not None:
        labels = sorted(int(s) for s in scale)
        off = ~np.isin(out["grade"].to_numpy(), labels)
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise InputError(f"grade outside the scale {', '.join(map(str, labels))}",
                             item=_who(out, i), found=int(out.at[i, "grade"]))
    dup = out.duplicated(RATINGS[:3], keep=False)
    if dup.any() and not repeats:
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError("a grader has two grades for one pair", item=_who(out, i),
                         fix="Select one grading round first")
    return out.sort_values(RATINGS[:3], kind="stable").reset_index(drop=True)


def _who(ratings: pd.DataFrame, i: int) -> str:
    return (f"{ratings.at[i, 'grader']}: pair ({ratings.at[i, 'query_id']}, "
            f"{ratings.at[i, 'chunk_id']})")


def _labels(scale: Iterable[int]) -> list[int]:
    return check_scale(scale)


@dataclass(frozen=True)
class _Coded:
    """Ratings as integer codes: pairs, raters and grades numbered from 0."""

    pairs: pd.DataFrame     # (n_pairs, 2) query_id, chunk_id, in (query_id, chunk_id) order
    raters: list[str]       # rater names, sorted
    labels: list[int]       # the scale, ascending
    item: np.ndarray        # (n_ratings,) pair code of each rating
    rater: np.ndarray       # (n_ratings,) rater code
    grade: np.ndarray       # (n_ratings,) position of the grade on the scale
    counts: np.ndarray      # (n_pairs, n_grades) votes per grade


def _coded(grades: pd.DataFrame, scale: Iterable[int], repeats: bool = False) -> _Coded:
    labels = _labels(scale)
    r = check_ratings(grades, scale=labels, repeats=repeats)
    item = r.groupby(PAIR, sort=True).ngroup().to_numpy(dtype=np.int64)
    pairs = r[PAIR].drop_duplicates().reset_index(drop=True)
    raters = sorted(r["grader"].unique())
    rater = pd.Categorical(r["grader"], categories=raters).codes.astype(np.int64)
    grade = np.searchsorted(np.asarray(labels), r["grade"].to_numpy()).astype(np.int64)
    counts = np.zeros((len(pairs), len(labels)), dtype=np.int64)
    np.add.at(counts, (item, grade), 1)
    return _Coded(pairs, raters, labels, item, rater, grade, counts)


# --- majority vote ---------------------------------------------------------------------

def majority_grade(grades: Sequence[int], scale: Iterable[int]) -> int:
    """The majority of one pair's sampled grades, with relgrade's tie rule.

    Parameters
    ----------
    grades : sequence of int, length n_samples >= 1
        The grades the samples gave, each on ``scale``.
    scale : iterable of int
        The allowed grades (params ``scale.grades``).

    Returns
    -------
    int
        The most frequent grade; on a tie, the median of the tied grades rounded down to the
        largest grade on ``scale`` that is not above it.

    Raises
    ------
    ValueError
        ``grades`` is empty or holds a grade outside ``scale``.

    Notes
    -----
    With modal grades :math:`m_1 < \\dots < m_t` (all with the highest count), the result is
    :math:`\\max\\{g \\in S : g \\le \\operatorname{median}(m_1, \\dots, m_t)\\}`. For
    :math:`t = 1` this is plain plurality voting (the majority vote of crowd-sourcing
    aggregation, e.g. crowd-kit's ``MajorityVote``), with a deterministic tie rule in
    place of a random draw.

    Examples
    --------
    >>> majority_grade([2, 2, 1], [0, 1, 2])
    2
    >>> majority_grade([0, 2], [0, 1, 2])
    1
    >>> majority_grade([0, 1], [0, 1, 2])
    0
    >>> majority_grade([0, 1, 2], [0, 1, 2])
    1
    """
    values = sorted(int(g) for g in scale)
    grades = [int(g) for g in grades]
    if not grades:
        raise ValueError("no sampled grades")
    bad = [g for g in grades if g not in values]
    if bad:
        raise ValueError(f"grade {bad[0]} is not on the scale {values}")
    counts = {g: grades.count(g) for g in set(grades)}
    top = max(counts.values())
    modes = sorted(g for g, c in counts.items() if c == top)
    if len(modes) == 1:
        return modes[0]
    median = float(np.median(modes))
    return max(g for g in values if g <= median)


def majority(grades: pd.DataFrame, *, scale: Iterable[int],
             tie: str = "median-low", repeats: bool = False) -> pd.DataFrame:
    """One grade per pair: the grade most of its raters gave.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``), one grade
        per pair and rater. Not modified.
    scale : iterable of int
        The grade scale (params ``scale.grades``).
    tie : {"median-low", "low", "high"}, default "median-low"
        What a tie between two or more most frequent grades records: ``"median-low"`` the
        median of the tied grades rounded down to a grade on the scale (relgrade's rule,
        :func:`majority_grade`); ``"low"`` / ``"high"`` the lowest / highest tied grade.
    repeats : bool, default False
        Accept a rater's repeated grades of one pair, each a vote (:func:`check_ratings`).

    Returns
    -------
    pandas.DataFrame of shape (n_pairs, 5)
        Columns :data:`MAJORITY_COLUMNS`: ``query_id``, ``chunk_id`` (str), ``grade``
        (int64, on the scale), ``votes`` (int64, raters of the pair) and ``agreement``
        (float64 in [0, 1], the share of the pair's raters who gave the recorded grade; 0
        when the tie rule records a grade nobody gave, as 1 for a 0-2 split). Sorted by
        (query_id, chunk_id).

    Raises
    ------
    InputError
        Unknown ``tie``; a bad scale; as :func:`check_ratings`.

    Notes
    -----
    With :math:`c_{ig}` the raters giving pair :math:`i` grade :math:`g`, the modal grades
    are :math:`M_i = \\arg\\max_g c_{ig}`; one mode is recorded as it is (plurality vote, as
    crowd-kit's ``MajorityVote``), several follow ``tie``. On the 0-2 scale with
    ``"median-low"``: 0-2 records 1, 1-2 records 1, 0-1 records 0, 0-1-2 records 1. Rounding
    down keeps a split from inflating the key.

    Examples
    --------
    >>> g = pd.DataFrame({"query_id": ["q"] * 5, "chunk_id": ["a", "a", "a", "b", "b"],
    ...                   "grader": ["r1", "r2", "r3", "r1", "r2"],
    ...                   "grade": [2, 2, 1, 0, 2]})
    >>> majority(g, scale=[0, 1, 2])[["chunk_id", "grade", "votes"]].values.tolist()
    [['a', 2, 3], ['b', 1, 2]]
    """
    if tie not in TIES:
        raise InputError("unknown tie rule", item="tie", found=repr(tie),
                         fix=f"Use one of {', '.join(TIES)}")
    c = _coded(grades, scale, repeats)
    counts = c.counts
    labels = np.asarray(c.labels, dtype=np.int64)
    top = counts.max(axis=1, initial=0)
    modal = counts == top[:, None]
    n_modes = modal.sum(axis=1)
    choice = np.argmax(counts, axis=1) if len(counts) else np.zeros(0, dtype=np.int64)
    for i in np.flatnonzero(n_modes > 1):
        modes = labels[modal[i]]
        if tie == "median-low":
            value = majority_grade(modes.tolist(), c.labels)
        elif tie == "low":
            value = int(modes[0])
        else:
            value = int(modes[-1])
        choice[i] = int(np.searchsorted(labels, value))
    votes = counts.sum(axis=1)
    rows = np.arange(len(counts))
    agreement = (counts[rows, choice] / np.maximum(votes, 1)).astype(float)
    return pd.DataFrame({
        "query_id": c.pairs["query_id"].astype(str),
        "chunk_id": c.pairs["chunk_id"].astype(str),
        "grade": labels[choice] if len(counts) else np.zeros(0, dtype=np.int64),
        "votes": votes.astype(np.int64),
        "agreement": agreement,
    })[MAJORITY_COLUMNS]


# --- Dawid-Skene -----------------------------------------------------------------------

@dataclass(frozen=True)
class DawidSkeneResult:
    """What :func:`dawid_skene` estimates; unpacks as ``labels, confusion, priors``.

    Attributes
    ----------
    labels : pandas.DataFrame of shape (n_pairs, 4)
        Columns :data:`DS_COLUMNS`: ``query_id``, ``chunk_id`` (str), ``grade`` (int64, the
        most probable true grade) and ``posterior`` (float64, its posterior probability),
        sorted by (query_id, chunk_id).
    confusion : pandas.DataFrame of shape (n_raters * n_grades, n_grades)
        Indexed by (``grader``, ``true_grade``), one column per grade given: the estimated
        probability that the rater gives that grade when the true grade is ``true_grade``.
        Each row sums to 1.
    priors : pandas.Series of shape (n_grades,)
        Indexed by grade (name ``prior``): the estimated share of pairs of each true grade.
    posteriors : pandas.DataFrame of shape (n_pairs, n_grades)
        Indexed by (query_id, chunk_id): the posterior probability of every true grade.
    iterations : int
        EM iterations run.
    converged : bool
        Whether the log-likelihood settled within ``tol`` before ``max_iter``.
    log_likelihood : float
        Mean log-likelihood per grade of the data under the final estimates.
    """

    labels: pd.DataFrame
    confusion: pd.DataFrame
    priors: pd.Series
    posteriors: pd.DataFrame
    iterations: int
    converged: bool
    log_likelihood: float

    def __iter__(self):
        return iter((self.labels, self.confusion, self.priors))


def _m_step(c: _Coded, post: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Priors (K,) and confusion (R, K, K) from posteriors (n_pairs, K)."""
    n_raters, k = len(c.raters), len(c.labels)
    priors = post.mean(axis=0)
    conf = np.empty((n_raters, k, k))
    cell = c.rater * k + c.grade
    for t in range(k):
        conf[:, t, :] = np.bincount(cell, weights=post[c.item, t],
                                    minlength=n_raters * k).reshape(n_raters, k)
    conf = np.clip(conf, EPS, None)
    conf /= conf.sum(axis=2, keepdims=True)
    return priors, conf


def _e_step(c: _Coded, priors: np.ndarray, conf: np.ndarray) -> tuple[np.ndarray, float]:
    """Posteriors (n_pairs, K) and the data's total log-likelihood."""
    n_pairs, k = c.counts.shape
    log_conf = np.log(conf)
    contrib = log_conf[c.rater, :, c.grade]                  # (n_ratings, K)
    score = np.empty((n_pairs, k))
    for t in range(k):
        score[:, t] = np.bincount(c.item, weights=contrib[:, t], minlength=n_pairs)
    score += np.log(np.maximum(priors, EPS))
    top = score.max(axis=1, keepdims=True)
    weight = np.exp(score - top)
    total = weight.sum(axis=1, keepdims=True)
    return weight / total, float((top[:, 0] + np.log(total[:, 0])).sum())


def dawid_skene(grades: pd.DataFrame, *, scale: Iterable[int], max_iter: int = MAX_ITER,
                tol: float = TOL, init: str = "majority",
                repeats: bool = False) -> DawidSkeneResult:
    """True grades and per-rater confusion matrices by Dawid and Skene's EM algorithm.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``), one grade
        per pair and rater; raters need not grade the same pairs. Not modified.
    scale : iterable of int
        The grade scale: the true grades and the grades a rater can give.
    max_iter : int >= 1, default MAX_ITER (2000)
        At most this many EM iterations; reaching it leaves ``converged`` False.
    tol : float >= 0, default TOL (1e-7)
        Stop (converged) when no class prior and no confusion entry moves by more than this
        in one iteration.
    init : {"majority"}, default "majority"
        Start from each pair's vote shares (the soft majority vote), as crowd-kit does.
    repeats : bool, default False
        Accept a rater's repeated grades of one pair (:func:`check_ratings`); each counts
        in the likelihood, as in Dawid & Skene (1979), whose counts n_il^(k) are how often
        observer k gave grade l to patient i.

    Returns
    -------
    DawidSkeneResult
        Unpacks as ``labels, confusion, priors`` (see :class:`DawidSkeneResult`; it also
        carries the full posteriors, the iterations run, whether EM converged and the final
        log-likelihood).

    Raises
    ------
    InputError
        No grades; ``max_iter``, ``tol`` or ``init`` invalid; a bad scale; as
        :func:`check_ratings`.

    Notes
    -----
    The model (Dawid & Skene 1979): pair :math:`i` has a hidden true grade :math:`z_i`, drawn
    with prior :math:`p_k = P(z_i = k)`; rater :math:`j` who grades it gives grade :math:`l`
    with probability :math:`\\pi^{(j)}_{kl} = P(y_{ij} = l \\mid z_i = k)`, independently of
    the other raters given :math:`z_i`. EM alternates

    * E-step: :math:`T_{ik} \\propto p_k \\prod_{j \\in R_i} \\pi^{(j)}_{k\\,y_{ij}}` (the
      posterior of each true grade, normalised over :math:`k`; computed in logs);
    * M-step: :math:`p_k = \\frac1N \\sum_i T_{ik}` and
      :math:`\\pi^{(j)}_{kl} = \\sum_{i:\\,y_{ij}=l} T_{ik} / \\sum_{i \\in I_j} T_{ik}`,

    starting from :math:`T` = vote shares followed by an M-step. Confusion entries are
    floored at ``1e-10`` before normalising, so a grade a rater never gave keeps a finite
    log. The log-likelihood :math:`\\sum_i \\log \\sum_k p_k \\prod_j \\pi^{(j)}_{k\\,y_{ij}}`
    never decreases under EM (its mean per grade is reported); iterations stop when the
    largest change of a prior or a confusion entry is at most ``tol``. A rule on the
    likelihood instead (crowd-kit's: stop when the mean log-likelihood rises by less than
    ``tol``) stops early where the optimum is flat: EM converges linearly, and there a
    likelihood gain of 1e-6 per grade goes with priors that still move by 1e-3 per step and
    lie several hundredths from the fixed point. The label is the most probable true grade,
    the lower grade on an exact tie.

    Because each rater has a full confusion matrix, a rater who reverses the scale (gives 2
    for 0 and 0 for 2) is as informative as an accurate one once EM has learnt it, where a
    majority vote counts that rater against the truth. EM finds a local maximum: the vote
    share start ties the solution to the reading most raters share. Pairs are taken in
    (query_id, chunk_id) order and raters in name order, so row order of the input never
    changes the result. Cross-checked against crowd-kit's ``DawidSkene``.

    References
    ----------
    A. P. Dawid and A. M. Skene, "Maximum likelihood estimation of observer error-rates using
    the EM algorithm", Journal of the Royal Statistical Society, Series C (Applied
    Statistics) 28(1), 20-28, 1979.

    Examples
    --------
    >>> g = pd.DataFrame({"query_id": ["q"] * 6, "chunk_id": ["a"] * 3 + ["b"] * 3,
    ...                   "grader": ["r1", "r2", "r3"] * 2, "grade": [2, 2, 0, 0, 0, 2]})
    >>> labels, confusion, priors = dawid_skene(g, scale=[0, 1, 2])
    >>> labels["grade"].tolist()
    [2, 0]
    """
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) \
            or max_iter < 1:
        raise InputError("max_iter must be a whole number of at least 1", item="max_iter",
                         found=repr(max_iter))
    if not (isinstance(tol, (int, float, np.floating)) and math.isfinite(tol) and tol >= 0):
        raise InputError("tol must be a finite number of at least 0", item="tol",
                         found=repr(tol))
    if init != "majority":
        raise InputError("unknown start for Dawid-Skene", item="init", found=repr(init),
                         fix="Use init='majority'")
    c = _coded(grades, scale, repeats)
    if len(c.item) == 0:
        raise InputError("no grades to aggregate",
                         fix="Dawid-Skene needs at least one grade")
    n_ratings = len(c.item)
    post = c.counts / c.counts.sum(axis=1, keepdims=True)
    priors, conf = _m_step(c, post)
    converged, iterations, mean_ll, change = False, 0, -np.inf, np.inf
    for iterations in range(1, int(max_iter) + 1):
        post, total = _e_step(c, priors, conf)
        new_priors, new_conf = _m_step(c, post)
        mean_ll = total / n_ratings
        # Convergence is judged on the parameters, not on the likelihood: near a flat
        # optimum the mean log-likelihood moves by less than 1e-6 per iteration while the
        # priors still move by 1e-3, so a likelihood rule stops far from the fixed point.
        change = max(float(np.abs(new_priors - priors).max()),
                     float(np.abs(new_conf - conf).max()))
        priors, conf = new_priors, new_conf
        if change <= tol:
            converged = True
            break
    labels = np.asarray(c.labels, dtype=np.int64)
    best = np.argmax(post, axis=1)
    index = pd.MultiIndex.from_frame(c.pairs)
    out = pd.DataFrame({
        "query_id": c.pairs["query_id"].astype(str),
        "chunk_id": c.pairs["chunk_id"].astype(str),
        "grade": labels[best],
        "posterior": post[np.arange(len(post)), best].astype(float),
    })[DS_COLUMNS]
    k = len(labels)
    confusion = pd.DataFrame(
        conf.reshape(len(c.raters) * k, k),
        index=pd.MultiIndex.from_product([c.raters, c.labels], names=["grader", "true_grade"]),
        columns=pd.Index(c.labels, name="grade"))
    return DawidSkeneResult(
        labels=out,
        confusion=confusion,
        priors=pd.Series(priors, index=pd.Index(c.labels, name="grade"), name="prior"),
        posteriors=pd.DataFrame(post, index=index, columns=pd.Index(c.labels, name="grade")),
        iterations=int(iterations),
        converged=bool(converged),
        log_likelihood=float(mean_ll),
    )


# --- adjudication ----------------------------------------------------------------------

def flag_high_variance(grades: pd.DataFrame, *, threshold: float,
                       min_spread: int | None = 2, repeats: bool = False) -> pd.DataFrame:
    """Pairs whose raters disagree too widely, for an expert to adjudicate.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``), one grade
        per pair and rater. Not modified.
    threshold : float >= 0
        A pair is flagged when the variance of its grades is at least this.
    min_spread : int >= 1 or None, default 2
        A pair is also flagged when its highest and lowest grade are at least this far
        apart (2 on the 0-2 scale: one rater said 0 and another 2); None turns this off.
    repeats : bool, default False
        Accept a rater's repeated grades of one pair, each counted (:func:`check_ratings`).

    Returns
    -------
    pandas.DataFrame of shape (n_flagged, 8)
        Columns :data:`FLAG_COLUMNS`: ``query_id``, ``chunk_id`` (str), ``votes`` (int64),
        ``grades`` (str, the pair's grades ascending, comma-separated), ``mean``,
        ``variance`` (float64), ``spread`` (int64, highest minus lowest grade) and
        ``reason`` (str, which rule flagged it). Only pairs with two or more grades can be
        flagged. Sorted by (query_id, chunk_id).

    Raises
    ------
    InputError
        ``threshold`` negative or not finite; ``min_spread`` not a whole number >= 1; as
        :func:`check_ratings`.

    Notes
    -----
    The variance is the population variance of the pair's :math:`n` grades,
    :math:`\\frac1n \\sum_j (g_j - \\bar g)^2` (numpy's ``var`` with ``ddof=0``): 1 for
    grades 0 and 2, 8/9 for 0, 0, 2, 2/3 for 0, 1, 2, 1/4 for 1, 2. It is compared with the
    threshold less ``1e-12``, so a variance equal to it in exact arithmetic (0.5 for 0, 1, 1,
    2) is flagged despite rounding. Flagged pairs keep their aggregate grade until an
    expert's grade replaces it.

    Examples
    --------
    >>> g = pd.DataFrame({"query_id": ["q"] * 6, "chunk_id": ["a"] * 3 + ["b"] * 3,
    ...                   "grader": ["r1", "r2", "r3"] * 2, "grade": [0, 2, 2, 1, 2, 2]})
    >>> flag_high_variance(g, threshold=0.5)[["chunk_id", "grades"]].values.tolist()
    [['a', '0,2,2']]
    """
    threshold_ok = isinstance(threshold, (int, float, np.integer, np.floating)) \
        and not isinstance(threshold, bool) and math.isfinite(threshold) and threshold >= 0
    if not threshold_ok:
        raise InputError("the variance threshold must be a finite number of at least 0",
                         item="threshold", found=repr(threshold))
    if min_spread is not None and (isinstance(min_spread, bool)
                                   or not isinstance(min_spread, (int, np.integer))
                                   or min_spread < 1):
        raise InputError("min_spread must be a whole number of at least 1 or None",
                         item="min_spread", found=repr(min_spread))
    r = check_ratings(grades, repeats=repeats).sort_values(PAIR + ["grade"], kind="stable")
    by = r.groupby(PAIR, sort=True)["grade"]
    stats = pd.DataFrame({"votes": by.size(), "mean": by.mean().astype(float),
                          "variance": by.var(ddof=0).astype(float),
                          "low": by.min(), "high": by.max()})
    stats["spread"] = (stats["high"] - stats["low"]).astype(np.int64)
    by_var = (stats["votes"] >= 2) & (stats["variance"] >= float(threshold) - 1e-12)
    by_spread = (stats["votes"] >= 2) & (
        stats["spread"] >= min_spread if min_spread is not None else False)
    flagged = stats[by_var | by_spread].copy()
    text = r.groupby(PAIR, sort=True)["grade"].agg(lambda s: ",".join(map(str, s)))
    reasons = []
    for key, row in flagged.iterrows():
        parts = []
        if by_var[key]:
            parts.append(f"variance {row['variance']:.4f} >= {float(threshold):g}")
        if by_spread[key]:
            parts.append(f"grades {int(row['low'])} and {int(row['high'])} both given")
        reasons.append("; ".join(parts))
    flagged = flagged.reset_index()
    return pd.DataFrame({
        "query_id": flagged["query_id"].astype(str),
        "chunk_id": flagged["chunk_id"].astype(str),
        "votes": flagged["votes"].astype(np.int64),
        "grades": pd.Series([text[(q, c)] for q, c in zip(flagged["query_id"],
                                                          flagged["chunk_id"])], dtype=str),
        "mean": flagged["mean"].astype(float),
        "variance": flagged["variance"].astype(float),
        "spread": flagged["spread"].astype(np.int64),
        "reason": pd.Series(reasons, dtype=str),
    })[FLAG_COLUMNS]
