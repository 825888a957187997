"""Agreement between graders: the audit that comes before any arm metric.

On the audit sample the key grader and the auditor grade the same pairs blind. This module
pairs their grades and measures how far they agree, over the full grade scale and over the
relevant / not-relevant line that recall and MRR read:

* quadratic weighted Cohen's kappa over the full scale (a 0-versus-2 split costs four times
  a one-step split);
* binary Cohen's kappa, 0 against ``>= relevant_min``;
* unweighted Cohen's kappa, raw agreement, the share of pairs that disagree, the share that
  disagree by two steps or more, and the share of disagreements that fall between two
  relevant grades (1 versus 2 on the 0-2 scale);
* with more than two graders per pair, Fleiss' kappa and Krippendorff's alpha.

Missing grades are dropped pairwise and counted, never turned into a category. A kappa whose
chance agreement is 1 (both raters used one and the same grade for every pair) is undefined:
it is reported as ``None`` with a note that says why, never as 0 or NaN.

Every statistic is registered in :data:`STATISTICS` together with the properties it is
expected to have (symmetric in the raters, invariant to row order and to relabelling of the
ids, bounds); the test-suite checks each declared property and fails on an unclassified
statistic.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from relgrade.errors import InputError
from relgrade.protocol import bands, reliability
from relgrade.protocol.diagnostics import (GradeCodes, PositionCodes, RoundRows, diagnose,
                                            diagnose_rows, grading_diagnostics)
from relgrade.protocol.reliability import Resampling
from relgrade.ranking import id_codes
from relgrade.schema import PAIR, RATINGS, check_scale, normalised_grades, require

#: Columns of the table returned by :func:`pair_grades`.
PAIRED_COLUMNS = ["query_id", "chunk_id", "grade_a", "grade_b", "reason_a", "reason_b"]

#: Columns of the table returned by :func:`disagreements`.
DISAGREEMENT_COLUMNS = ["query_id", "chunk_id", "step", "grade_a", "grade_b",
                        "reason_a", "reason_b"]

#: The two-rater measures :func:`agreement` reports, in report order.
MEASURES = ("weighted_kappa", "binary_kappa", "kappa", "raw_agreement", "disagreement",
            "two_step_disagreement", "relevant_split_share")

#: The multi-rater measures :func:`multi_rater_agreement` reports.
MULTI_MEASURES = ("fleiss_kappa", "fleiss_p_bar", "fleiss_p_e", "krippendorff_alpha_nominal",
                  "krippendorff_alpha_ordinal", "krippendorff_alpha_interval",
                  "krippendorff_alpha_ratio")

KRIPPENDORFF_LEVELS = ("nominal", "ordinal", "interval", "ratio")


# --- checking inputs -------------------------------------------------------------------

def _grade_array(values, scale: list[int], who: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError("grades must be a one-dimensional sequence", item=who,
                         found=f"shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind == "b":
        raise InputError("grades must be integers", item=who, found="booleans")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            bad = arr[~(np.isfinite(arr) & (arr == np.round(arr)))][0]
            raise InputError("grades must be integers", item=who, found=repr(float(bad)))
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        try:
            arr = arr.astype(np.int64)
        except (TypeError, ValueError):
            raise InputError("grades must be integers", item=who,
                             found=repr(arr.tolist()[:3])) from None
    arr = arr.astype(np.int64)
    outside = ~np.isin(arr, scale)
    if outside.any():
        raise InputError(f"grade outside the scale {', '.join(map(str, scale))}", item=who,
                         found=int(arr[outside][0]))
    return arr


# --- pairing ---------------------------------------------------------------------------

def pair_grades(grades: pd.DataFrame, *, rater_a: str, rater_b: str, round: int | None = None,
                queries: Iterable[str] | None = None) -> tuple[pd.DataFrame, int]:
    """Line up two graders' grades pair by pair.

    Parameters
    ----------
    grades : pandas.DataFrame of shape (n_rows, >= 4)
        The long grades table: ``query_id``, ``chunk_id``, ``grader``, ``grade`` and, where
        used, ``round`` (int) and ``reason`` (str). A row whose grade is null counts as
        not graded.
    rater_a, rater_b : str
        The two graders' names (``grader`` column); ``rater_a`` is the first rater (the key
        grader in the audit), ``rater_b`` the second (the auditor).
    round : int, optional
        Keep only rows of this grading round.
    queries : iterable of str, optional
        Keep only these query ids (the audit sample).

    Returns
    -------
    paired : pandas.DataFrame of shape (n_pairs, 6)
        Columns :data:`PAIRED_COLUMNS`: ``query_id``, ``chunk_id`` (str), ``grade_a``,
        ``grade_b`` (int64), ``reason_a``, ``reason_b`` (str, empty when absent); one row per
        pair graded by both, sorted by (query_id, chunk_id).
    missing : int
        Pairs graded by only one of the two: dropped pairwise and counted, never made into
        a category of their own.

    Raises
    ------
    InputError
        A column is missing; the two names are the same grader; ``round`` is given but the
        table has no ``round`` column; one grader has two grades for the same pair (within
        the selected round); a grade is not a whole number.

    Notes
    -----
    Pairing is pairwise deletion: a pair counts only when both graders graded it, so a
    grade that one side left out can never look like agreement or disagreement.
    """
    if str(rater_a) == str(rater_b):
        raise InputError("agreement needs two different graders", item=str(rater_a))
    require(grades, RATINGS, what="the grades table")
    names = (str(rater_a), str(rater_b))
    keep = (grades["grader"].astype(str).isin(names).to_numpy(dtype=bool)
            & grades["grade"].notna().to_numpy())
    if round is not None:
        require(grades, ["round"], what="the grades table")
        keep &= (pd.to_numeric(grades["round"], errors="coerce") == int(round)).to_numpy()
    if queries is not None:
        # a hash lookup: np.isin on object arrays compares every row with every query
        keep &= grades["query_id"].astype(str).isin([str(q) for q in queries]) \
            .to_numpy(dtype=bool)
    # only the kept rows become Python objects: on the whole pool (the diagnostics' table)
    # one str per row and column would outweigh the table itself
    kept = grades.iloc[np.flatnonzero(keep)]
    values = kept["grade"].to_numpy()
    if len(kept) and values.dtype.kind in "iuf" and np.isfinite(values).all():
        return _paired_by_codes(kept, names, values)
    who = kept["grader"].astype(str).to_numpy()
    qids = kept["query_id"].astype(str).to_numpy()
    cids = kept["chunk_id"].astype(str).to_numpy()
    reasons = (kept["reason"].to_numpy() if "reason" in kept.columns
               else np.full(len(kept), "", dtype=object))
    del kept
    sides: dict[str, dict] = {names[0]: {}, names[1]: {}}
    for i in range(len(who)):
        side, key = sides[who[i]], (qids[i], cids[i])
        if key in side:
            raise InputError("a grader has two grades for one pair",
                             item=f"{who[i]}: pair ({key[0]}, {key[1]})",
                             fix="Pass round= to compare one grading round, or keep one grade "
                                 "per pair and grader")
        grade = values[i]
        if isinstance(grade, (bool, np.bool_)) or float(grade) != int(grade):
            raise InputError("grades must be integers", item=f"{who[i]}: pair ({key[0]}, "
                             f"{key[1]})", found=str(grade.item() if hasattr(grade, "item") else grade))
        reason = reasons[i]
        side[key] = (int(grade), reason if isinstance(reason, str) else "")
    a, b = sides[names[0]], sides[names[1]]
    both = sorted(a.keys() & b.keys())
    missing = len(a) + len(b) - 2 * len(both)
    paired = pd.DataFrame({
        "query_id": pd.Series([k[0] for k in both], dtype=str),
        "chunk_id": pd.Series([k[1] for k in both], dtype=str),
        "grade_a": pd.Series([a[k][0] for k in both], dtype=np.int64),
        "grade_b": pd.Series([b[k][0] for k in both], dtype=np.int64),
        "reason_a": pd.Series([a[k][1] for k in both], dtype=str),
        "reason_b": pd.Series([b[k][1] for k in both], dtype=str),
    })
    return paired[PAIRED_COLUMNS], missing


def _paired_by_codes(kept: pd.DataFrame, names: tuple[str, str],
                     values: np.ndarray) -> tuple[pd.DataFrame, int]:
    """:func:`pair_grades` of its kept rows when their grades are numbers: the same
    checks, errors and table, over integer codes of the ids (a pair is one int64), so no
    Python object is made per row, only per paired pair."""
    grader, graders = id_codes(kept["grader"].astype(str))
    side = (graders.to_pylist().index(names[1]) == grader) if names[1] in \
        graders.to_pylist() else np.zeros(len(kept), dtype=bool)
    query, queries = id_codes(kept["query_id"].astype(str))
    chunk, chunks = id_codes(kept["chunk_id"].astype(str))
    # a pair as one int64 in (query_id, chunk_id) order: the order sorted() gives the tuples
    pair = query * max(len(chunks), 1) + chunk
    del query, chunk
    key = pair * 2 + side
    order = np.argsort(key, kind="stable")
    again = np.zeros(len(key), dtype=bool)  # a row whose grader graded its pair before
    again[order[1:]] = key[order[1:]] == key[order[:-1]]
    del key, order
    fraction = values != np.floor(values) if values.dtype.kind == "f" else \
        np.zeros(len(values), dtype=bool)
    bad = np.flatnonzero(again | fraction)
    if len(bad):  # the first offending row, checked as the rows are read
        i = int(bad[0])
        who = names[int(side[i])]
        q, c = divmod(int(pair[i]), max(len(chunks), 1))
        item = f"{who}: pair ({queries[q].as_py()}, {chunks[c].as_py()})"
        if again[i]:
            raise InputError("a grader has two grades for one pair", item=item,
                             fix="Pass round= to compare one grading round, or keep one grade "
                                 "per pair and grader")
        raise InputError("grades must be integers", item=item, found=str(values[i].item()))
    rows_a, rows_b = np.flatnonzero(~side), np.flatnonzero(side)
    order_a, order_b = rows_a[np.argsort(pair[rows_a])], rows_b[np.argsort(pair[rows_b])]
    both, at_a, at_b = np.intersect1d(pair[order_a], pair[order_b], assume_unique=True,
                                      return_indices=True)
    missing = len(rows_a) + len(rows_b) - 2 * len(both)
    ra, rb = order_a[at_a], order_b[at_b]
    width = max(len(chunks), 1)
    reasons = kept["reason"] if "reason" in kept.columns else None

    def said(rows):
        if reasons is None:
            return pd.Series([""] * len(rows), dtype=str)
        return pd.Series([r if isinstance(r, str) else "" for r in reasons.iloc[rows]],
                         dtype=str)

    paired = pd.DataFrame({
        "query_id": pd.Series(queries.take(pa.array(both // width)).to_pylist(), dtype=str),
        "chunk_id": pd.Series(chunks.take(pa.array(both % width)).to_pylist(), dtype=str),
        "grade_a": pd.Series(values[ra].astype(np.int64), dtype=np.int64),
        "grade_b": pd.Series(values[rb].astype(np.int64), dtype=np.int64),
        "reason_a": said(ra), "reason_b": said(rb),
    })
    return paired[PAIRED_COLUMNS], missing


# --- two-rater statistics --------------------------------------------------------------

def confusion_matrix(a, b, *, scale: Iterable[int]) -> np.ndarray:
    """Counts of (grade of a, grade of b) over the full scale.

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)
        The two raters' grades, aligned pair by pair.
    scale : iterable of int
        The grade scale; every grade of it gets a row and a column, used or not.

    Returns
    -------
    numpy.ndarray of int64, shape (n_grades, n_grades)
        Entry ``[i, j]`` counts pairs graded ``scale[i]`` by a and ``scale[j]`` by b.

    Raises
    ------
    InputError
        The arrays differ in length, or hold a grade outside the scale.
    """
    labels = check_scale(scale)
    x, y = _pair_arrays(a, b, labels)
    index = {g: i for i, g in enumerate(labels)}
    m = np.zeros((len(labels), len(labels)), dtype=np.int64)
    np.add.at(m, (np.array([index[v] for v in x.tolist()], dtype=np.int64),
                  np.array([index[v] for v in y.tolist()], dtype=np.int64)), 1)
    return m


def _pair_arrays(a, b, labels: list[int]) -> tuple[np.ndarray, np.ndarray]:
    x = _grade_array(a, labels, "first rater")
    y = _grade_array(b, labels, "second rater")
    if x.shape != y.shape:
        raise InputError("the two raters' grades must be aligned pair by pair",
                         found=f"{x.size} and {y.size} grades")
    return x, y


def _kappa(x: np.ndarray, y: np.ndarray, labels: list[int], weights: str | None,
           describe: Callable[[int], str]) -> tuple[float | None, str | None]:
    """Cohen's kappa via scikit-learn, or (None, why) when it is undefined."""
    from sklearn.metrics import cohen_kappa_score

    if x.size == 0:
        return None, "no pair has grades from both raters"
    used_x, used_y = np.unique(x), np.unique(y)
    if used_x.size == 1 and used_y.size == 1 and used_x[0] == used_y[0]:
        return None, (f"both raters gave every pair {describe(int(used_x[0]))}, so chance "
                      "agreement is 1 and kappa is 0/0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            value = float(cohen_kappa_score(x, y, labels=labels, weights=weights))
    if not np.isfinite(value):  # excluded above; guards against a NaN ever leaking out
        return None, "chance agreement is 1"
    return value, None


def _describe_grade(g: int) -> str:
    return f"grade {g}"


def _describe_binary(relevant_min: int) -> Callable[[int], str]:
    def describe(v: int) -> str:
        return (f"a relevant grade (>= {relevant_min})" if v == 1
                else f"a grade below {relevant_min} (not relevant)")
    return describe


def weighted_kappa(a, b, *, scale: Iterable[int]) -> float | None:
    """Quadratic weighted Cohen's kappa over the full grade scale.

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)
        The two raters' grades, aligned pair by pair, each a grade of ``scale``.
    scale : iterable of int
        The full grade scale. It is always passed to scikit-learn as ``labels``: without it
        the weights are built from the grades that happen to occur, and a grade neither
        rater used would silently shrink the distance between its neighbours.

    Returns
    -------
    float in [-1, 1] or None
        ``None`` when kappa is undefined (no pairs, or both raters used one and the same
        grade for every pair); see :func:`agreement` for the note that says why.

    Raises
    ------
    InputError
        The arrays differ in length or hold a grade outside the scale.

    Notes
    -----
    With ``O`` the observed proportions of (grade of a, grade of b), ``E`` the product of
    the two raters' marginal proportions and weights ``w_ij = (i - j)**2`` over the scale's
    positions ``i, j``:

    .. math:: \\kappa_w = 1 - \\frac{\\sum_{ij} w_{ij} O_{ij}}{\\sum_{ij} w_{ij} E_{ij}}

    (Cohen 1968). Computed with ``sklearn.metrics.cohen_kappa_score(a, b, labels=scale,
    weights="quadratic")``.

    References
    ----------
    J. Cohen, "Weighted kappa: nominal scale agreement with provision for scaled
    disagreement or partial credit", Psychological Bulletin 70(4), 1968.

    Examples
    --------
    >>> round(weighted_kappa([0, 1, 2, 2, 1, 0, 2, 1], [0, 1, 1, 1, 1, 0, 1, 0],
    ...                      scale=[0, 1, 2]), 4)
    0.5429
    """
    labels = check_scale(scale)
    x, y = _pair_arrays(a, b, labels)
    return _kappa(x, y, labels, "quadratic", _describe_grade)[0]


def linear_weighted_kappa(a, b, *, scale: Iterable[int]) -> float | None:
    """Linear weighted Cohen's kappa over the full grade scale.

    Parameters, returns and errors as :func:`weighted_kappa`; the weights are
    ``w_ij = |i - j|`` over the scale's positions, so a disagreement by two grades costs
    twice one by a single grade (the quadratic weights charge it four times).

    Notes
    -----
    :math:`\\kappa_w = 1 - \\sum_{ij} w_{ij} O_{ij} / \\sum_{ij} w_{ij} E_{ij}` (Cohen
    1968), computed with ``sklearn.metrics.cohen_kappa_score(a, b, labels=scale,
    weights="linear")``.

    Examples
    --------
    Observed weighted disagreement 4/8, expected 52/64, so kappa = 1 - (1/2)/(13/16) = 5/13:

    >>> round(linear_weighted_kappa([0, 1, 2, 2, 1, 0, 2, 1], [0, 1, 1, 1, 1, 0, 1, 0],
    ...                             scale=[0, 1, 2]), 4)
    0.3846
    """
    labels = check_scale(scale)
    x, y = _pair_arrays(a, b, labels)
    return _kappa(x, y, labels, "linear", _describe_grade)[0]


def cohen_kappa(a, b, *, scale: Iterable[int]) -> float | None:
    """Unweighted Cohen's kappa over the grade scale.

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)
        The two raters' grades, aligned pair by pair.
    scale : iterable of int
        The grade scale (passed to scikit-learn as ``labels``).

    Returns
    -------
    float in [-1, 1] or None
        ``None`` when undefined (no pairs, or chance agreement 1).

    Raises
    ------
    InputError
        The arrays differ in length or hold a grade outside the scale.

    Notes
    -----
    :math:`\\kappa = (p_o - p_e) / (1 - p_e)` with :math:`p_o` the share of pairs with
    equal grades and :math:`p_e = \\sum_k p_{a,k} p_{b,k}` the agreement expected from the
    marginals (Cohen 1960).

    References
    ----------
    J. Cohen, "A coefficient of agreement for nominal scales", Educational and
    Psychological Measurement 20(1), 1960.
    """
    labels = check_scale(scale)
    x, y = _pair_arrays(a, b, labels)
    return _kappa(x, y, labels, None, _describe_grade)[0]


def binary_kappa(a, b, *, scale: Iterable[int], relevant_min: int) -> float | None:
    """Cohen's kappa on the relevance line: grade 0 against grade ``>= relevant_min``.

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)
        The two raters' grades, aligned pair by pair.
    scale : iterable of int
        The grade scale.
    relevant_min : int
        The lowest relevant grade (params ``scale.relevant_min``); this is the line that
        recall@k and MRR read.

    Returns
    -------
    float in [-1, 1] or None
        ``None`` when undefined (no pairs, or both raters put every pair on the same side).

    Raises
    ------
    InputError
        As :func:`cohen_kappa`, or ``relevant_min`` is not a grade above the lowest.

    Notes
    -----
    Unweighted Cohen's kappa (Cohen 1960) of the indicators ``a >= relevant_min`` and
    ``b >= relevant_min``, with ``labels=[0, 1]``.
    """
    labels = check_scale(scale, relevant_min)
    x, y = _pair_arrays(a, b, labels)
    return _kappa((x >= relevant_min).astype(np.int64), (y >= relevant_min).astype(np.int64),
                  [0, 1], None, _describe_binary(int(relevant_min)))[0]


def raw_agreement(a, b) -> float | None:
    """Share of pairs with equal grades, or None without pairs.

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)
        The two raters' grades, aligned pair by pair.

    Returns
    -------
    float in [0, 1] or None

    Notes
    -----
    :math:`p_o = \\frac{1}{n}\\sum_i [a_i = b_i]`. Pools are mostly zeros, so raw agreement
    flatters; it is a sanity check beside the kappas, not a gate on its own.
    """
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        raise InputError("the two raters' grades must be aligned pair by pair",
                         found=f"{x.size} and {y.size} grades")
    return None if x.size == 0 else float(np.mean(x == y))


def disagreement(a, b) -> float | None:
    """Share of pairs whose grades differ (``1 - raw_agreement``), or None without pairs.

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)

    Returns
    -------
    float in [0, 1] or None
    """
    p = raw_agreement(a, b)
    return None if p is None else float(np.mean(np.asarray(a) != np.asarray(b)))


def two_step_disagreement(a, b) -> float | None:
    """Share of pairs whose grades differ by two steps or more (0 against 2 on 0-2).

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)

    Returns
    -------
    float in [0, 1] or None
        ``None`` without pairs.

    Notes
    -----
    :math:`\\frac{1}{n}\\sum_i [|a_i - b_i| \\ge 2]`.
    """
    if raw_agreement(a, b) is None:
        return None
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    return float(np.mean(np.abs(x - y) >= 2))


def relevant_split_share(a, b, *, relevant_min: int) -> float | None:
    """Share of the disagreeing pairs in which both grades are relevant (1 versus 2).

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)
    relevant_min : int
        The lowest relevant grade.

    Returns
    -------
    float in [0, 1] or None
        ``None`` when no pair disagrees.

    Notes
    -----
    When binary kappa passes and weighted kappa fails mostly on these splits, the protocol
    tightens the query-form rules and regrades only the chunks graded relevant (a partial
    regrade, see :mod:`relgrade.protocol.gate`).
    """
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if x.shape != y.shape:
        raise InputError("the two raters' grades must be aligned pair by pair",
                         found=f"{x.size} and {y.size} grades")
    differ = x != y
    if not differ.any():
        return None
    inside = differ & (x >= relevant_min) & (y >= relevant_min)
    return float(inside.sum() / differ.sum())


def agreement(a, b, *, scale: Iterable[int], relevant_min: int,
              raters: tuple[str, str] = ("a", "b")) -> dict:
    """Every two-rater agreement measure, with notes on any that is undefined.

    Parameters
    ----------
    a, b : array-like of int, shape (n_pairs,)
        The two raters' grades, aligned pair by pair (see :func:`pair_grades`).
    scale : iterable of int
        The full grade scale, e.g. ``[0, 1, 2]``.
    relevant_min : int
        The lowest relevant grade, e.g. ``1``.
    raters : tuple of (str, str), default ("a", "b")
        Names of the two raters, used in the notes.

    Returns
    -------
    dict
        ``pairs`` (int); ``weighted_kappa``, ``binary_kappa``, ``kappa`` (float in [-1, 1]
        or None); ``raw_agreement``, ``disagreement``, ``two_step_disagreement``,
        ``relevant_split_share`` (float in [0, 1] or None); ``confusion`` (list of lists of
        int, rows = a's grade, columns = b's grade, over the full scale); ``scale`` (list of
        int); ``relevant_min`` (int); ``notes`` (list of str, one per undefined or
        degenerate measure, each starting with the measure's name).

    Raises
    ------
    InputError
        The arrays differ in length, a grade is outside the scale, or the scale or
        ``relevant_min`` is malformed.

    Notes
    -----
    See :func:`weighted_kappa`, :func:`cohen_kappa`, :func:`binary_kappa`. A kappa is
    undefined exactly when its chance agreement is 1, i.e. both raters used one and the same
    category for every pair; it is then ``None`` and a note says so. When only one rater
    used a single category, kappa is defined and equals 0 (observed agreement equals chance
    agreement); a note points that out too.

    Examples
    --------
    >>> out = agreement([1, 1, 1, 1, 1], [1, 1, 1, 1, 1], scale=[0, 1, 2], relevant_min=1)
    >>> out["weighted_kappa"] is None, out["raw_agreement"]
    (True, 1.0)
    """
    labels = check_scale(scale, relevant_min)
    x, y = _pair_arrays(a, b, labels)
    rel = int(relevant_min)
    notes: list[str] = []

    def kappa_with_note(name, xs, ys, labs, weights, describe):
        value, why = _kappa(xs, ys, labs, weights, describe)
        if why is not None:
            notes.append(f"{name} is undefined: {why}")
        elif xs.size:
            for who, mine, other in ((raters[0], xs, ys), (raters[1], ys, xs)):
                used = np.unique(mine)
                if used.size == 1 and np.unique(other).size > 1:
                    notes.append(f"{name} is 0 by construction: {who} gave every pair "
                                 f"{describe(int(used[0]))}, so observed agreement equals "
                                 "chance agreement")
        return value

    wk = kappa_with_note("weighted_kappa", x, y, labels, "quadratic", _describe_grade)
    xb, yb = (x >= rel).astype(np.int64), (y >= rel).astype(np.int64)
    bk = kappa_with_note("binary_kappa", xb, yb, [0, 1], None, _describe_binary(rel))
    k = kappa_with_note("kappa", x, y, labels, None, _describe_grade)
    if not x.size:
        notes.append("pairs is 0: no pair has grades from both raters, so every measure is "
                     "undefined")
    return {
        "pairs": int(x.size),
        "weighted_kappa": wk,
        "binary_kappa": bk,
        "kappa": k,
        "raw_agreement": raw_agreement(x, y),
        "disagreement": disagreement(x, y),
        "two_step_disagreement": two_step_disagreement(x, y),
        "relevant_split_share": relevant_split_share(x, y, relevant_min=rel),
        "confusion": confusion_matrix(x, y, scale=labels).tolist(),
        "scale": labels,
        "relevant_min": rel,
        "notes": notes,
    }


def group_agreement(paired: pd.DataFrame, groups: pd.DataFrame, *, scale: Iterable[int],
                    relevant_min: int, raters: tuple[str, str] = ("a", "b")) -> dict:
    """Agreement per query group, to catch a group where the raters part ways.

    Parameters
    ----------
    paired : pandas.DataFrame of shape (n_pairs, 6)
        As returned by :func:`pair_grades`.
    groups : pandas.DataFrame of shape (n_queries, >= 2)
        ``query_id`` and ``group`` of every query the report covers (e.g. the audit
        queries' rows of the queries table). Every group listed appears in the result, with
        ``pairs`` 0 when none of its pairs was graded by both.
    scale : iterable of int
    relevant_min : int
    raters : tuple of (str, str)

    Returns
    -------
    dict of str to dict
        group → the output of :func:`agreement` without ``confusion``, ``scale`` and
        ``relevant_min``, groups in sorted order.

    Raises
    ------
    InputError
        ``groups`` lacks a column or lists one query twice, or a paired query has no group.
    """
    require(groups, ["query_id", "group"], what="the query groups table")
    g = pd.DataFrame({"query_id": groups["query_id"].astype(str),
                      "group": groups["group"].astype(str)})
    dup = g["query_id"].duplicated(keep=False)
    if dup.any():
        raise InputError("a query is listed twice in the query groups table",
                         item=str(g.loc[dup, "query_id"].iloc[0]))
    mapping = dict(zip(g["query_id"], g["group"]))
    unknown = sorted(set(paired["query_id"].astype(str)) - set(mapping))
    if unknown:
        raise InputError("an audited query is not in the queries table", item=unknown[0],
                         fix="Rebuild the audit sample from the current queries table")
    of_pair = paired["query_id"].astype(str).map(mapping)
    out = {}
    for name in sorted(set(mapping.values())):
        part = paired[of_pair == name]
        res = agreement(part["grade_a"].to_numpy(), part["grade_b"].to_numpy(), scale=scale,
                        relevant_min=relevant_min, raters=raters)
        for key in ("confusion", "scale", "relevant_min"):
            res.pop(key)
        out[name] = res
    return out


def disagreements(paired: pd.DataFrame) -> pd.DataFrame:
    """Every pair on which the two raters disagree, the widest splits first.

    Parameters
    ----------
    paired : pandas.DataFrame of shape (n_pairs, 6)
        As returned by :func:`pair_grades`.

    Returns
    -------
    pandas.DataFrame of shape (n_disagreements, 7)
        Columns :data:`DISAGREEMENT_COLUMNS`: ``query_id``, ``chunk_id``, ``step``
        (``|grade_a - grade_b|``, int64), both grades and both reasons; sorted by step
        descending (two-step splits first), then query_id, chunk_id. Private: reasons quote
        the corpus.
    """
    require(paired, PAIRED_COLUMNS, what="the paired grades table")
    d = paired[paired["grade_a"] != paired["grade_b"]].copy()
    d["step"] = (d["grade_a"].astype(np.int64) - d["grade_b"].astype(np.int64)).abs()
    order = sorted(range(len(d)), key=lambda i: (-int(d["step"].iat[i]), d["query_id"].iat[i],
                                                  d["chunk_id"].iat[i]))
    return d.iloc[order].reset_index(drop=True)[DISAGREEMENT_COLUMNS]


# --- several raters --------------------------------------------------------------------

def _rater_matrix(grades: pd.DataFrame, scale: list[int], raters: Sequence[str] | None
                  ) -> pd.DataFrame:
    """Pairs × raters, each cell a grade or NaN; rows sorted by pair, columns by rater."""
    g = normalised_grades(grades)
    g = g[g["grade"].notna()]
    if raters is not None:
        g = g[g["grader"].isin([str(r) for r in raters])]
    dup = g.duplicated(PAIR + ["grader"], keep=False)
    if dup.any():
        first = g[dup].iloc[0]
        raise InputError("a grader has two grades for one pair",
                         item=f"{first['grader']}: pair ({first['query_id']}, "
                              f"{first['chunk_id']})",
                         fix="Select one grading round first")
    _grade_array(g["grade"].to_numpy(), scale, "grades table")
    wide = g.pivot(index=PAIR, columns="grader", values="grade")
    wide = wide.reindex(sorted(wide.columns, key=str), axis=1)
    return wide.sort_index().astype(float)


def rating_counts(grades: pd.DataFrame, *, scale: Iterable[int],
                  raters: Sequence[str] | None = None) -> tuple[pd.DataFrame, int]:
    """Per pair, how many raters gave each grade: the table Fleiss' kappa reads.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``), any
        number of graders, one grade per pair and grader.
    scale : iterable of int
        The grade scale: one column per grade.
    raters : sequence of str, optional
        Only these graders (default: every grader in the table).

    Returns
    -------
    counts : pandas.DataFrame of shape (n_pairs, n_grades)
        Indexed by (query_id, chunk_id); only pairs graded by the largest number of raters
        any pair has (Fleiss' kappa needs the same number of ratings per pair).
    dropped : int
        Pairs with fewer ratings, left out and counted.

    Raises
    ------
    InputError
        A column is missing, a grade is off the scale, or a grader grades a pair twice.
    """
    labels = check_scale(scale)
    wide = _rater_matrix(grades, labels, raters)
    counts = pd.DataFrame({g: (wide == g).sum(axis=1) for g in labels}, index=wide.index)
    counts = counts.astype(np.int64)
    n = counts.sum(axis=1)
    full = n == (n.max() if len(n) else 0)
    return counts[full], int((~full).sum())


def fleiss_kappa(grades: pd.DataFrame, *, scale: Iterable[int],
                 raters: Sequence[str] | None = None) -> float | None:
    """Fleiss' kappa over pairs graded by the same number of raters.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table (see :func:`rating_counts`).
    scale : iterable of int
        The grade scale.
    raters : sequence of str, optional
        Only these graders.

    Returns
    -------
    float or None
        At most 1; ``None`` when undefined: fewer than two ratings per pair, no pair, or
        every rating in one category (chance agreement 1).

    Raises
    ------
    InputError
        As :func:`rating_counts`.

    Notes
    -----
    With ``N`` pairs, ``n`` ratings per pair and ``n_ij`` the raters giving pair ``i``
    grade ``j``: :math:`P_i = (\\sum_j n_{ij}^2 - n) / (n(n-1))`, :math:`\\bar P` their
    mean, :math:`p_j = \\sum_i n_{ij} / (Nn)`, :math:`\\bar P_e = \\sum_j p_j^2` and
    :math:`\\kappa = (\\bar P - \\bar P_e) / (1 - \\bar P_e)` (Fleiss 1971). Computed with
    ``statsmodels.stats.inter_rater.fleiss_kappa``. Pairs with fewer ratings than the most
    any pair has are left out (see :func:`rating_counts`).

    References
    ----------
    J. L. Fleiss, "Measuring nominal scale agreement among many raters", Psychological
    Bulletin 76(5), 1971.
    """
    return _fleiss(grades, scale=scale, raters=raters)[0]


def fleiss_from_counts(counts) -> tuple[float | None, str | None]:
    """Fleiss' kappa of a table of rating counts, or why it is undefined.

    The one wrapper of ``statsmodels.stats.inter_rater.fleiss_kappa`` in relgrade: the
    multi-rater agreement (:func:`fleiss_kappa`) and a model grader's self-consistency
    over repeated samples both call it.

    Parameters
    ----------
    counts : array-like of shape (n_items, n_categories), int
        ``counts[i, j]`` = how many raters put item ``i`` in category ``j``; every row sums
        to the same number of ratings ``n`` (the caller keeps only such items).

    Returns
    -------
    kappa : float or None
        Kappa, at most 1; ``None`` when undefined.
    note : str or None
        Why kappa is undefined: no item, fewer than two ratings per item, or every rating
        in one category (chance agreement 1, so kappa is 0/0); ``None`` when defined.

    Notes
    -----
    The formula is that of :func:`fleiss_kappa` (Fleiss 1971).

    Examples
    --------
    >>> fleiss_from_counts([[2, 0], [0, 2]])
    (1.0, None)
    >>> fleiss_from_counts([[2, 0], [2, 0]])[0] is None
    True
    """
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    table = np.asarray(counts, dtype=float)
    n = int(table.sum(axis=1)[0]) if len(table) else 0
    if len(table) == 0 or n < 2:
        return None, "no pair has grades from two or more raters"
    p = table.sum(axis=0) / table.sum()
    if np.isclose(float((p * p).sum()), 1.0):
        return None, ("every rating is one and the same grade, so chance agreement is 1 and "
                      "kappa is 0/0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            value = float(sm_fleiss_kappa(table, method="fleiss"))
    if not np.isfinite(value):
        return None, "chance agreement is 1"
    return value, None


def fleiss_components(counts) -> tuple[float | None, float | None]:
    """Fleiss' observed agreement P̄ and chance agreement P_e of a table of rating counts.

    Parameters
    ----------
    counts : array-like of shape (n_items, n_categories), int
        As for :func:`fleiss_from_counts`: every row sums to the same ``n >= 2``.

    Returns
    -------
    p_bar : float in [0, 1] or None
        The mean over items of ``P_i = (sum_j n_ij**2 - n) / (n (n - 1))``, the share of
        agreeing ordered rater pairs on item ``i``; ``None`` without items or with ``n < 2``.
    p_e : float in (0, 1] or None
        ``sum_j p_j**2`` with ``p_j`` the share of all ratings in category ``j``.

    Notes
    -----
    Fleiss' kappa is ``(p_bar - p_e) / (1 - p_e)`` (Fleiss 1971, eqs. 2-9); both parts are
    reported beside it so a kappa near 0 can be read as low agreement or high chance
    agreement.

    Examples
    --------
    >>> fleiss_components([[3, 0], [1, 2]])
    (0.6666666666666666, 0.5555555555555556)
    """
    table = np.asarray(counts, dtype=float)
    if len(table) == 0:
        return None, None
    n = float(table.sum(axis=1)[0])
    if n < 2:
        return None, None
    p_i = ((table * table).sum(axis=1) - n) / (n * (n - 1))
    p = table.sum(axis=0) / table.sum()
    return float(p_i.mean()), float((p * p).sum())


def fleiss_p_bar(grades: pd.DataFrame, *, scale: Iterable[int],
                 raters: Sequence[str] | None = None) -> float | None:
    """Fleiss' observed agreement P̄ over the pairs :func:`fleiss_kappa` reads.

    Parameters, errors and the pairs used as :func:`fleiss_kappa`; the value as
    :func:`fleiss_components`.
    """
    counts, _ = rating_counts(grades, scale=scale, raters=raters)
    return fleiss_components(counts.to_numpy(dtype=float))[0]


def fleiss_p_e(grades: pd.DataFrame, *, scale: Iterable[int],
               raters: Sequence[str] | None = None) -> float | None:
    """Fleiss' chance agreement P_e over the pairs :func:`fleiss_kappa` reads.

    Parameters, errors and the pairs used as :func:`fleiss_kappa`; the value as
    :func:`fleiss_components`.
    """
    counts, _ = rating_counts(grades, scale=scale, raters=raters)
    return fleiss_components(counts.to_numpy(dtype=float))[1]


def _fleiss(grades, *, scale, raters) -> tuple[float | None, str | None, int, int]:
    counts, dropped = rating_counts(grades, scale=scale, raters=raters)
    value, note = fleiss_from_counts(counts.to_numpy(dtype=float))
    return value, note, len(counts), dropped


def krippendorff_alpha(grades: pd.DataFrame, *, scale: Iterable[int], level: str = "ordinal",
                       raters: Sequence[str] | None = None) -> float | None:
    """Krippendorff's alpha over any number of raters, missing ratings allowed.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``grade``).
    scale : iterable of int
        The grade scale (the value domain).
    level : {"ordinal", "interval", "ratio", "nominal"}, default "ordinal"
        The level of measurement, i.e. the distance between two grades.
    raters : sequence of str, optional
        Only these graders.

    Returns
    -------
    float or None
        At most 1; ``None`` when undefined: fewer than two pairable ratings (a pair needs
        two ratings to count), or every pairable rating the same grade.

    Raises
    ------
    InputError
        Unknown ``level``, or as :func:`rating_counts`.

    Notes
    -----
    :math:`\\alpha = 1 - D_o / D_e`, observed over expected disagreement, both computed
    from the coincidence matrix of pairable values with the level's distance metric
    (Krippendorff 2011). Computed with the ``krippendorff`` package (Castro), pairs as
    units and graders as coders, ``value_domain=scale``.

    References
    ----------
    K. Krippendorff, "Computing Krippendorff's Alpha-Reliability", Annenberg School for
    Communication, University of Pennsylvania, 2011.
    """
    return _alpha(grades, scale=scale, level=level, raters=raters)[0]


def _alpha(grades, *, scale, level, raters) -> tuple[float | None, str | None]:
    import krippendorff

    if level not in KRIPPENDORFF_LEVELS:
        raise InputError("unknown level of measurement for Krippendorff's alpha",
                         found=repr(level), fix=f"Use one of {', '.join(KRIPPENDORFF_LEVELS)}")
    labels = check_scale(scale)
    wide = _rater_matrix(grades, labels, raters)
    data = wide.to_numpy(dtype=float)
    pairable = data[(~np.isnan(data)).sum(axis=1) >= 2]
    values = pairable[~np.isnan(pairable)]
    if values.size < 2:
        return None, "no pair has grades from two or more raters"
    if np.unique(values).size == 1:
        return None, (f"every pairable rating is grade {int(values[0])}, so expected "
                      "disagreement is 0 and alpha is 0/0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            value = float(krippendorff.alpha(reliability_data=data.T,
                                             value_domain=np.asarray(labels, dtype=float),
                                             level_of_measurement=level))
    if not np.isfinite(value):
        return None, "expected disagreement is 0"
    return value, None


def multi_rater_agreement(grades: pd.DataFrame, *, scale: Iterable[int],
                          raters: Sequence[str] | None = None) -> dict:
    """Fleiss' kappa (with P̄ and P_e) and Krippendorff's alpha (four levels), any raters.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table, one round, any number of graders per pair.
    scale : iterable of int
        The grade scale.
    raters : sequence of str, optional
        Only these graders.

    Returns
    -------
    dict
        ``raters`` (int), ``pairs`` (pairs with the full number of ratings, read by Fleiss'
        kappa), ``dropped`` (pairs left out of Fleiss' kappa), ``fleiss_kappa``,
        ``fleiss_p_bar`` and ``fleiss_p_e`` (:func:`fleiss_components`),
        ``krippendorff_alpha_nominal``, ``krippendorff_alpha_ordinal``,
        ``krippendorff_alpha_interval``, ``krippendorff_alpha_ratio`` (float or None),
        ``notes`` (list of str).

    Raises
    ------
    InputError
        As :func:`rating_counts`.
    """
    notes: list[str] = []
    fk, why, pairs, dropped = _fleiss(grades, scale=scale, raters=raters)
    if why:
        notes.append(f"fleiss_kappa is undefined: {why}")
    if dropped:
        notes.append(f"fleiss_kappa leaves out {dropped} pair(s) with fewer ratings than the "
                     "others")
    counts, _ = rating_counts(grades, scale=scale, raters=raters)
    p_bar, p_e = fleiss_components(counts.to_numpy(dtype=float))
    out = {"raters": int(_rater_matrix(grades, check_scale(scale), raters).shape[1]),
           "pairs": pairs, "dropped": dropped, "fleiss_kappa": fk, "fleiss_p_bar": p_bar,
           "fleiss_p_e": p_e}
    for level in KRIPPENDORFF_LEVELS:
        value, why = _alpha(grades, scale=scale, level=level, raters=raters)
        name = f"krippendorff_alpha_{level}"
        if why:
            notes.append(f"{name} is undefined: {why}")
        out[name] = value
    out["notes"] = notes
    return out


def many_rater_agreement(ratings: pd.DataFrame, scale: Iterable[int], *, seed: int,
                         resamples: int, level: float,
                         raters: Sequence[str] | None = None) -> dict:
    """Fleiss' kappa and ordinal Krippendorff's alpha with intervals and band verdicts.

    The entry point for several raters per pair: every measure of
    :func:`multi_rater_agreement`, plus a bootstrap interval for Fleiss' kappa and for
    Krippendorff's alpha at the ordinal level over the declared scale (resampling queries,
    the pairs of a query kept together), and the band of each (see
    :mod:`relgrade.protocol.bands`).

    Parameters
    ----------
    ratings : pandas.DataFrame
        The long grades table: ``query_id``, ``chunk_id``, ``grader`` (str), ``grade``
        (int on ``scale``); one round, one grade per pair and rater, any number of raters
        per pair (gold answers and removed raters already taken out by the caller).
    scale : iterable of int
        The declared grade scale, e.g. ``[0, 1, 2]``; it is alpha's value domain, so a
        grade nobody used still counts in the ordinal distances.
    seed : int
        Seed of the resamples (``numpy.random.default_rng(seed)`` per statistic); recorded
        in the result. A stage derives it from params ``seed``.
    resamples : int
        Bootstrap resamples, >= 1.
    level : float
        Confidence level in (0, 1).
    raters : sequence of str, optional
        Only these raters (default: every grader in the table).

    Returns
    -------
    dict
        JSON-ready:

        * ``raters`` (int), ``pairs`` (int, pairs with the full number of ratings, read by
          Fleiss' kappa), ``dropped`` (int, pairs left out of Fleiss' kappa);
        * ``fleiss_kappa``, ``fleiss_p_bar``, ``fleiss_p_e`` and
          ``krippendorff_alpha_{nominal,ordinal,interval,ratio}`` (float or None), as
          :func:`multi_rater_agreement`;
        * ``intervals``: ``{"fleiss_kappa": {"low", "high", "undefined_resamples",
          "resample_unit", "units", "method"}, "krippendorff_alpha_ordinal": {...}}``
          (see :class:`relgrade.protocol.reliability.Interval`);
        * ``bands``: the same two keys, each :func:`relgrade.protocol.bands.verdict`'s
          ``{"band", "meaning", "settled", "verdict"}``;
        * ``bootstrap``: ``{"seed", "resamples", "level", "method": "jackknife-t",
          "resample_unit": "query", "unit"}``;
        * ``notes`` (list of str).

    Raises
    ------
    InputError
        A column is missing, a grade is off the scale, a rater grades a pair twice, or
        ``seed``, ``resamples`` or ``level`` is out of range.

    Notes
    -----
    Fleiss' kappa resamples the queries of the fully rated pairs, alpha the queries of the
    pairs with two or more ratings, each query with all its pairs (jackknife t interval
    over queries on Fisher's z, the cluster bootstrap's expanded percentile interval where
    that is undefined; see :mod:`relgrade.protocol.reliability`). Point values
    come from statsmodels and the ``krippendorff`` package; the resamples from
    :mod:`relgrade.protocol.reliability`, whose kernels give the same point values.

    Examples
    --------
    >>> t = pd.DataFrame({"query_id": ["q"] * 6, "chunk_id": ["a", "a", "a", "b", "b", "b"],
    ...                   "grader": ["r1", "r2", "r3"] * 2, "grade": [2, 2, 2, 0, 0, 1]})
    >>> out = many_rater_agreement(t, [0, 1, 2], seed=1, resamples=200, level=0.9)
    >>> round(out["fleiss_kappa"], 4), out["bands"]["fleiss_kappa"]["band"]
    (0.4545, 'training')
    """
    spec = Resampling(seed=seed, resamples=resamples, level=level)
    labels = check_scale(scale)
    out = multi_rater_agreement(ratings, scale=labels, raters=raters)
    counts, _ = rating_counts(ratings, scale=labels, raters=raters)
    wide = _rater_matrix(ratings, labels, raters)
    fk = reliability.fleiss_kappa_interval(
        counts.to_numpy(dtype=float) if len(counts) else np.zeros((0, len(labels))),
        rng=spec.rng(), resamples=spec.resamples, level=spec.level,
        clusters=counts.index.get_level_values("query_id").to_numpy())
    ka = reliability.krippendorff_alpha_interval(
        wide.to_numpy(dtype=float), values=labels, level="ordinal", rng=spec.rng(),
        resamples=spec.resamples, confidence=spec.level,
        clusters=wide.index.get_level_values("query_id").to_numpy())
    intervals = {"fleiss_kappa": fk, "krippendorff_alpha_ordinal": ka}
    out["intervals"] = {k: v.to_dict() for k, v in intervals.items()}
    out["bands"] = {k: bands.verdict(k, out[k], v.low, v.high, level=spec.level,
                                     units=v.units)
                    for k, v in intervals.items()}
    out["bootstrap"] = spec.to_dict()
    for k, v in intervals.items():
        if v.undefined and out[k] is not None:
            out["notes"].append(f"{k}'s interval leaves out {v.undefined} of {v.resamples} "
                                "resamples on which it is undefined")
    return out


def audit_intervals(a, b, *, scale: Iterable[int], relevant_min: int,
                    resampling: Resampling, queries=None) -> dict:
    """Bootstrap intervals of the audit's agreement, resampling the audited queries.

    Parameters
    ----------
    a, b : array-like of shape (n_pairs,), int
        The key grader's and the auditor's grades, aligned pair by pair.
    scale : iterable of int
    relevant_min : int
        Binary kappa reads grades ``>= relevant_min`` as relevant.
    resampling : Resampling
        Seed, resamples and level.
    queries : array-like of shape (n_pairs,), str, optional
        The query of each pair. The audit samples queries, so whole queries are resampled
        with all their pairs (jackknife t interval over queries on a transformed scale,
        the cluster bootstrap where that is undefined; see
        :mod:`relgrade.protocol.reliability`); without it pairs are resampled one by one.

    Returns
    -------
    dict
        ``weighted_kappa`` (quadratic), ``binary_kappa``, ``kappa`` (unweighted),
        ``disagreement`` (share of pairs whose grades differ) and
        ``two_step_disagreement`` (share two steps or more apart), each
        ``{"low", "high", "undefined_resamples", "resample_unit", "units", "method"}`` (see
        :class:`relgrade.protocol.reliability.Interval`); every statistic is computed on
        the same resamples.

    Raises
    ------
    InputError
        As :func:`agreement`, or ``queries`` of another length.
    """
    labels = check_scale(scale, relevant_min)
    x, y = _pair_arrays(a, b, labels)
    rel = int(relevant_min)
    xb, yb = (x >= rel).astype(np.int64), (y >= rel).astype(np.int64)
    common = {"rng": None, "resamples": resampling.resamples, "level": resampling.level,
              "clusters": None if queries is None else np.asarray(queries).astype(str)}
    out = {}
    for name, xs, ys, labs, weights in (("weighted_kappa", x, y, labels, "quadratic"),
                                        ("binary_kappa", xb, yb, [0, 1], None),
                                        ("kappa", x, y, labels, None)):
        common["rng"] = resampling.rng()
        out[name] = reliability.cohen_kappa_interval(xs, ys, labels=labs, weights=weights,
                                                     **common).to_dict()
    steps = np.abs(np.searchsorted(labels, x) - np.searchsorted(labels, y))
    for name, hits in (("disagreement", steps >= 1), ("two_step_disagreement", steps >= 2)):
        common["rng"] = resampling.rng()
        out[name] = reliability.share_interval(hits, **common).to_dict()
    return out


# --- the audit report ------------------------------------------------------------------

@dataclass(frozen=True)
class AuditReport:
    """What the agreement stage writes.

    Attributes
    ----------
    metrics : dict
        The dvc metrics (see :func:`audit_agreement`).
    confusion : pandas.DataFrame
        Columns ``grader``, ``auditor`` (int64): one row per audited pair, the input of dvc's
        confusion plot.
    disagreements : pandas.DataFrame
        One row per disagreeing pair with both grades and both reasons (private).
    """

    metrics: dict
    confusion: pd.DataFrame
    disagreements: pd.DataFrame


def audit_agreement(grades: pd.DataFrame, *, audit_ids: Iterable[str], queries: pd.DataFrame,
                    grader: str, auditor: str, round: int, scale: Iterable[int],
                    relevant_min: int, positions: pd.DataFrame | None = None,
                    resampling: Resampling | None = None,
                    graders: Sequence[str] | None = None,
                    panel: Sequence[str] | None = None,
                    whole: GradeCodes | RoundRows | None = None) -> AuditReport:
    """Agreement of the key grader and the auditor on the audit sample, ready to write.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table (``query_id``, ``chunk_id``, ``grader``, ``role``, ``round``,
        ``grade``, ``reason``).
    audit_ids : iterable of str
        The audit sample's query ids.
    queries : pandas.DataFrame
        The queries table (``query_id``, ``group``).
    grader, auditor : str
        The key grader and the auditor (params ``grading.key_grader``, ``grading.auditor``).
    round : int
        The grading round (params ``grading.round``).
    scale : iterable of int
    relevant_min : int
    positions : pandas.DataFrame or PositionCodes, optional
        Display positions (the orders table) for the grading diagnostics.
    resampling : Resampling, optional
        Seed, resamples and level of the kappas' bootstrap intervals; without it no
        interval is computed.
    graders : sequence of str, optional
        Every declared grader (params ``graders``): the diagnostics list each one, with or
        without grades.
    panel : sequence of str, optional
        A rater panel's raters (role ``rater``): ``many_raters`` is then their agreement
        alone, over the pairs each of them graded (the aggregate, auditor and expert left
        out). Without it, every grader of the round when there are three or more.
    whole : GradeCodes or RoundRows, optional
        Every row of the grades table as codes
        (:class:`relgrade.protocol.diagnostics.GradeCodes`), or the round's rows grader by
        grader with their display positions joined
        (:class:`relgrade.protocol.diagnostics.RoundRows`; ``positions`` is then not
        read), when ``grades`` holds the audited queries' rows only (with their reasons):
        the notes and the diagnostics then read it, and the results are those of the whole
        table. Not with three or more graders in the round (the many-rater agreement reads
        the table itself).

    Returns
    -------
    AuditReport
        ``metrics``: ``round``, ``grader``, ``auditor``, ``queries`` (audit queries),
        ``pairs``, ``missing``, every measure of :func:`agreement` except the confusion
        matrix, ``notes``, ``groups`` (see :func:`group_agreement`), with ``resampling``
        also ``intervals`` (:func:`audit_intervals`), ``bootstrap`` (what
        :meth:`Resampling.to_dict` records) and ``bands`` (weighted and binary kappa, each
        :func:`relgrade.protocol.bands.verdict`), and, when three or more graders graded
        in the round, ``many_raters`` (:func:`many_rater_agreement` over all of them on
        the whole pool); ``diagnostics``
        (see :func:`relgrade.protocol.diagnostics.grading_diagnostics`, over every grader's
        grades of the round on the whole pool, at the resampling's level or 0.95). Always
        produced, however poor the agreement; when the auditor has not graded yet,
        ``pairs`` is 0 and a note says so.

    Raises
    ------
    InputError
        An audit query is missing from the queries table, a grader grades one pair twice,
        a grade is off the scale, or a table lacks a column.
    ValueError
        ``whole`` is given and three or more graders graded in the round.
    """
    labels = check_scale(scale, relevant_min)
    ids = [str(q) for q in audit_ids]
    require(queries, ["query_id", "group"], what="the queries table")
    qt = pd.DataFrame({"query_id": queries["query_id"].astype(str),
                       "group": queries["group"].astype(str)})
    unknown = sorted(set(ids) - set(qt["query_id"]))
    if unknown:
        raise InputError("an audit query is not in the queries table", item=unknown[0],
                         fix="Rebuild the audit sample from the current queries table")
    paired, missing = pair_grades(grades, rater_a=grader, rater_b=auditor, round=round,
                                  queries=ids)
    res = agreement(paired["grade_a"].to_numpy(), paired["grade_b"].to_numpy(), scale=labels,
                    relevant_min=relevant_min, raters=(str(grader), str(auditor)))
    if whole is None:
        g = normalised_grades(grades)
        if "round" in g.columns:
            g = g[pd.to_numeric(g["round"], errors="coerce") == int(round)]
        in_round = set(g["grader"].unique())
    else:
        if isinstance(whole, RoundRows):
            g, in_round = whole, set(whole.in_round)
        else:
            g = whole.of_round(round) if whole.round is not None else whole
            in_round = g.grader_names()
        if len(in_round) >= 3:
            raise ValueError("three or more graders in the round: pass the grades table "
                             "whole, not as codes")
    notes = list(res["notes"])
    for who in (str(grader), str(auditor)):
        if who not in in_round:
            notes.insert(0, f"{who} has no grades in round {int(round)} yet: the measures are "
                            "undefined and the gate fails")
    audited = set(paired["query_id"])
    without = [q for q in ids if q not in audited]
    if without and res["pairs"]:
        notes.append(f"{len(without)} audit quer{'y has' if len(without) == 1 else 'ies have'}"
                     f" no pair graded by both: {', '.join(without[:10])}")
    if missing:
        notes.append(f"missing is {missing}: pairs of the audit queries graded by only one of "
                     f"{grader} and {auditor}, dropped pairwise")
    metrics = {"round": int(round), "grader": str(grader), "auditor": str(auditor),
               "queries": len(ids), "pairs": res["pairs"], "missing": missing}
    for name in MEASURES:
        metrics[name] = res[name]
    metrics["scale"] = labels
    metrics["relevant_min"] = int(relevant_min)
    metrics["notes"] = notes
    metrics["groups"] = group_agreement(paired, qt[qt["query_id"].isin(set(ids))],
                                        scale=labels, relevant_min=relevant_min,
                                        raters=(str(grader), str(auditor)))
    if resampling is not None:
        iv = audit_intervals(paired["grade_a"].to_numpy(), paired["grade_b"].to_numpy(),
                             scale=labels, relevant_min=relevant_min, resampling=resampling,
                             queries=paired["query_id"].to_numpy())
        metrics["intervals"] = iv
        metrics["bootstrap"] = resampling.to_dict()
        metrics["bands"] = {k: bands.verdict(k, metrics[k], iv[k]["low"], iv[k]["high"],
                                             level=resampling.level, units=iv[k]["units"])
                            for k in ("weighted_kappa", "binary_kappa")}
        # Three or more graders in the round (raters): agreement among them too. With a
        # panel, among its raters only: the aggregate, the auditor and the expert grade
        # some pairs, and would leave Fleiss' kappa only the pairs they all graded.
        among = [r for r in panel or [] if r in in_round]
        if len(among) >= 3:
            metrics["many_raters"] = many_rater_agreement(
                g, labels, seed=resampling.seed, resamples=resampling.resamples,
                level=resampling.level, raters=among)
        elif panel is None and len(in_round) >= 3:
            metrics["many_raters"] = many_rater_agreement(
                g, labels, seed=resampling.seed, resamples=resampling.resamples,
                level=resampling.level)
    # Every grader of the round, in its own grading order (the `sequence` column).
    level = resampling.level if resampling is not None else 0.95
    if whole is None:
        metrics["diagnostics"] = grading_diagnostics(g, positions, graders=graders,
                                                     level=level)
    else:
        if isinstance(g, RoundRows):
            metrics["diagnostics"] = diagnose_rows(g, graders=graders, level=level)
        else:
            if positions is not None and not isinstance(positions, PositionCodes):
                positions = PositionCodes.of_table(positions)
            metrics["diagnostics"] = diagnose(g, positions, graders=graders, level=level)
    del g
    confusion = pd.DataFrame({"grader": paired["grade_a"].astype(np.int64),
                              "auditor": paired["grade_b"].astype(np.int64)})
    d = disagreements(paired)
    group_of = dict(zip(qt["query_id"], qt["group"]))
    report = pd.DataFrame({
        "query_id": d["query_id"], "chunk_id": d["chunk_id"],
        "group": d["query_id"].map(group_of).astype(str), "step": d["step"],
        "grader": str(grader), "grader_grade": d["grade_a"], "grader_reason": d["reason_a"],
        "auditor": str(auditor), "auditor_grade": d["grade_b"],
        "auditor_reason": d["reason_b"],
    })
    return AuditReport(metrics=metrics, confusion=confusion, disagreements=report)


# --- the property registry -------------------------------------------------------------

@dataclass(frozen=True)
class Properties:
    """What a statistic promises; every field must be set.

    Attributes
    ----------
    symmetric : bool
        Swapping the raters (or, for several raters, permuting and renaming them) leaves
        the value unchanged.
    row_order_invariant : bool
        Shuffling the rows of the grades table leaves the value unchanged.
    relabel_invariant : bool
        Renaming query and chunk ids one-to-one leaves the value unchanged.
    bounds : tuple of (float, float)
        Every defined value lies in ``[low, high]``.
    """

    symmetric: bool
    row_order_invariant: bool
    relabel_invariant: bool
    bounds: tuple[float, float]


@dataclass(frozen=True)
class Statistic:
    """One registered agreement statistic.

    Attributes
    ----------
    name : str
        Its key in relgrade's agreement outputs.
    raters : {"two", "many"}
        Whether it compares exactly two raters or any number.
    compute : callable
        ``compute(grades, *, raters, scale, relevant_min) -> float or None`` over the long
        grades table.
    properties : Properties
    """

    name: str
    raters: str
    compute: Callable[..., float | None]
    properties: Properties


def _on_pairs(fn: Callable[..., float | None], *, needs: tuple[str, ...] = ()):
    def compute(grades, *, raters, scale, relevant_min):
        paired, _ = pair_grades(grades, rater_a=raters[0], rater_b=raters[1])
        kwargs = {"scale": scale, "relevant_min": relevant_min}
        return fn(paired["grade_a"].to_numpy(), paired["grade_b"].to_numpy(),
                  **{k: kwargs[k] for k in needs})
    return compute


def _on_table(fn: Callable[..., float | None], **fixed):
    def compute(grades, *, raters, scale, relevant_min):
        return fn(grades, scale=scale, raters=raters, **fixed)
    return compute


_KAPPA = Properties(symmetric=True, row_order_invariant=True, relabel_invariant=True,
                    bounds=(-1.0, 1.0))
_SHARE = Properties(symmetric=True, row_order_invariant=True, relabel_invariant=True,
                    bounds=(0.0, 1.0))

#: Every agreement statistic relgrade reports, with the properties it declares.
STATISTICS: Mapping[str, Statistic] = MappingProxyType({s.name: s for s in (
    Statistic("weighted_kappa", "two", _on_pairs(weighted_kappa, needs=("scale",)), _KAPPA),
    Statistic("binary_kappa", "two",
              _on_pairs(binary_kappa, needs=("scale", "relevant_min")), _KAPPA),
    Statistic("kappa", "two", _on_pairs(cohen_kappa, needs=("scale",)), _KAPPA),
    Statistic("linear_weighted_kappa", "two",
              _on_pairs(linear_weighted_kappa, needs=("scale",)), _KAPPA),
    Statistic("raw_agreement", "two", _on_pairs(raw_agreement), _SHARE),
    Statistic("disagreement", "two", _on_pairs(disagreement), _SHARE),
    Statistic("two_step_disagreement", "two", _on_pairs(two_step_disagreement), _SHARE),
    Statistic("relevant_split_share", "two",
              _on_pairs(relevant_split_share, needs=("relevant_min",)), _SHARE),
    Statistic("fleiss_kappa", "many", _on_table(fleiss_kappa), _KAPPA),
    Statistic("fleiss_p_bar", "many", _on_table(fleiss_p_bar), _SHARE),
    Statistic("fleiss_p_e", "many", _on_table(fleiss_p_e), _SHARE),
    Statistic("krippendorff_alpha_nominal", "many",
              _on_table(krippendorff_alpha, level="nominal"), _KAPPA),
    Statistic("krippendorff_alpha_ordinal", "many",
              _on_table(krippendorff_alpha, level="ordinal"), _KAPPA),
    Statistic("krippendorff_alpha_interval", "many",
              _on_table(krippendorff_alpha, level="interval"), _KAPPA),
    Statistic("krippendorff_alpha_ratio", "many",
              _on_table(krippendorff_alpha, level="ratio"), _KAPPA),
)})
