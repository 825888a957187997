"""A model judge's calibration against people: one measurement, and whether it still holds.

A **calibration** is what a model grader's grades are worth against people's on the pairs
both graded: weighted (quadratic) and binary Cohen's kappa with query-unit intervals
(:func:`relgrade.protocol.agreement.agreement` and
:func:`~relgrade.protocol.agreement.audit_intervals`), the confusion matrix, and the
**leniency**, the mean of (model grade - human grade), overall and per arm family, with a
query-clustered interval. :func:`calibration_state` says whether a recorded calibration
still applies to a judge identity now: none recorded, too small (every measurement rests on
fewer pairs than a re-check's floor), stale (too old, or measured under another rubric) or
current.

Tables in, dicts out; the ledger file is :mod:`relgrade.io.judge_ledger`'s.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.protocol.agreement import agreement, audit_intervals
from relgrade.protocol.reliability import Resampling

#: Columns of the paired table a calibration is measured on.
PAIRED = ["query_id", "chunk_id", "model", "human"]

#: The states :func:`calibration_state` gives.
STATES = ("calibrated", "none", "small", "stale")


def leniency(diff, queries, *, level: float = 0.95) -> dict:
    """Mean (model grade - human grade) with a query-clustered normal interval.

    Parameters
    ----------
    diff : array-like of shape (n_pairs,), float
        Model grade minus human grade, pair by pair (grades of the scale's units).
    queries : array-like of shape (n_pairs,), str
        The query of each pair (the cluster).
    level : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    dict
        ``mean`` (grades), ``se``, ``low``, ``high`` (float; ``se``, ``low`` and ``high``
        None with fewer than 2 queries), ``pairs`` and ``queries`` (int). ``mean`` is None
        with no pair.

    Notes
    -----
    The mean is the ratio ``R = sum_q s_q / sum_q m_q`` of per-query sums of differences
    ``s_q`` and pair counts ``m_q``; its standard error is the cluster-robust (linearised
    ratio) one, ``se^2 = G / (G - 1) * sum_q (s_q - R m_q)^2 / (sum_q m_q)^2`` over the
    ``G`` queries, as :func:`relgrade.evaluation.judge_audit.arm_leniency` computes it
    (Cameron & Miller, "A practitioner's guide to cluster-robust inference", 2015).

    Examples
    --------
    >>> out = leniency([1, 0, -1, 1], ["a", "a", "b", "b"])
    >>> out["mean"], out["pairs"], out["queries"]
    (0.25, 4, 2)
    """
    d = np.asarray(diff, dtype=np.float64)
    q = np.asarray(queries).astype(str)
    if d.shape != q.shape:
        raise InputError("leniency needs one query per pair", found=f"{d.shape} vs {q.shape}")
    if not d.size:
        return {"mean": None, "se": None, "low": None, "high": None, "pairs": 0, "queries": 0}
    codes, q_index = np.unique(q, return_inverse=True)
    s_q = np.bincount(q_index, weights=d)
    m_q = np.bincount(q_index).astype(np.float64)
    g = int(codes.size)
    ratio = float(s_q.sum() / m_q.sum())
    out = {"mean": ratio, "se": None, "low": None, "high": None, "pairs": int(d.size),
           "queries": g}
    if g >= 2:
        from scipy import stats as sps
        z = float(sps.norm.ppf(0.5 + level / 2))
        u = s_q - ratio * m_q
        se = math.sqrt(g / (g - 1) * float((u ** 2).sum())) / float(m_q.sum())
        out |= {"se": se, "low": ratio - z * se, "high": ratio + z * se}
    return out


def measure_calibration(paired: pd.DataFrame, *, scale: Iterable[int], relevant_min: int,
                        resampling: Resampling,
                        families: pd.DataFrame | None = None) -> dict:
    """A model grader's agreement with people on the pairs both graded.

    Parameters
    ----------
    paired : pandas.DataFrame
        Columns :data:`PAIRED`: ``query_id``, ``chunk_id`` (str), ``model`` and ``human``
        (int grades of ``scale``); one row per pair.
    scale : iterable of int
        The grade scale, e.g. ``[0, 1, 2]``.
    relevant_min : int
        Binary kappa reads grades ``>= relevant_min`` as relevant.
    resampling : Resampling
        Seed, resamples and level of the kappa intervals (the level also sets the
        leniency intervals').
    families : pandas.DataFrame, optional
        ``query_id``, ``chunk_id``, ``family`` (str): which arm families retrieved each pair
        (a pair may appear under several). Without it, ``leniency_by_family`` is empty.

    Returns
    -------
    dict
        ``pairs`` and ``queries`` (int); ``weighted_kappa`` and ``binary_kappa``, each
        ``{"value", "low", "high", "method", "resample_unit", "units"}`` (value None when
        undefined); ``confusion`` (list of lists of int: rows the model's grade, columns the
        people's, over ``scale``); ``scale``, ``relevant_min``; ``leniency`` (see
        :func:`leniency`); ``leniency_by_family`` (family -> the same, sorted by family);
        ``notes`` (list of str from :func:`relgrade.protocol.agreement.agreement`).

    Raises
    ------
    InputError
        A column is missing, a pair appears twice, no pair is given, or a grade is outside
        the scale.
    """
    missing = [c for c in PAIRED if c not in paired.columns]
    if missing:
        raise InputError("a calibration needs paired model and human grades",
                         found=f"missing columns {missing}")
    if paired.empty:
        raise InputError("a calibration needs at least one pair graded by both the model "
                         "grader and people", found="0 pairs")
    if paired.duplicated(["query_id", "chunk_id"]).any():
        dup = paired[paired.duplicated(["query_id", "chunk_id"])].iloc[0]
        raise InputError("a calibration takes one row per pair",
                         item=f"{dup['query_id']} {dup['chunk_id']}")
    t = paired.sort_values(["query_id", "chunk_id"], kind="stable")
    model, human = t["model"].to_numpy(), t["human"].to_numpy()
    queries = t["query_id"].astype(str).to_numpy()
    point = agreement(model, human, scale=scale, relevant_min=relevant_min,
                      raters=("the model", "people"))
    ivs = audit_intervals(model, human, scale=scale, relevant_min=relevant_min,
                          resampling=resampling, queries=queries)

    def kappa(name):
        iv = ivs[name]
        return {"value": point[name], "low": iv["low"], "high": iv["high"],
                "method": iv["method"], "resample_unit": iv["resample_unit"],
                "units": iv["units"]}

    diff = model.astype(np.float64) - human.astype(np.float64)
    by_family = {}
    if families is not None and not families.empty:
        fam = families[["query_id", "chunk_id", "family"]].drop_duplicates()
        joined = t.assign(diff=diff).merge(fam, on=["query_id", "chunk_id"], how="inner")
        for name, part in joined.groupby("family", sort=True):
            by_family[str(name)] = leniency(part["diff"].to_numpy(),
                                            part["query_id"].astype(str).to_numpy(),
                                            level=resampling.level)
    return {"pairs": int(len(t)), "queries": int(len(set(queries))),
            "weighted_kappa": kappa("weighted_kappa"), "binary_kappa": kappa("binary_kappa"),
            "confusion": point["confusion"], "scale": point["scale"],
            "relevant_min": point["relevant_min"],
            "leniency": leniency(diff, queries, level=resampling.level),
            "leniency_by_family": by_family, "notes": point["notes"]}


def _when(text: str, *, what: str) -> datetime:
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{what} must be an ISO 8601 time", found=repr(text)) from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def counts_as_calibration(entry: Mapping, *, min_pairs: int) -> bool:
    """Whether one ledger entry rests on enough pairs to stand as a calibration: at least
    ``min_pairs`` (params ``judges.recheck.min_pairs``), or measured on a drawn re-check
    (``interval.method`` ``stratified-delta``), which the re-check's plan sized already and
    which may hold fewer pairs only when the judge graded fewer.

    Parameters
    ----------
    entry : mapping
        One judge ledger entry: ``pairs`` (int, the pairs the agreement was measured on;
        absent counts as 0) and, optionally, ``interval`` (mapping with ``method``, str).
    min_pairs : int
        The fewest pairs a measurement not made on a drawn re-check needs.

    Returns
    -------
    bool
        True when the entry stands as a calibration.

    Examples
    --------
    >>> counts_as_calibration({"pairs": 5}, min_pairs=30)
    False
    >>> counts_as_calibration({"pairs": 5, "interval": {"method": "stratified-delta"}},
    ...                       min_pairs=30)
    True
    """
    if (entry.get("interval") or {}).get("method") == "stratified-delta":
        return True
    return int(entry.get("pairs") or 0) >= min_pairs


def calibration_state(entries: Sequence[Mapping], *, rubric_sha256: str, now: datetime,
                      max_age_days: float, min_pairs: int = 0) -> tuple[str, str, Mapping | None]:
    """Whether a judge identity's calibration still holds.

    Only entries that rest on enough pairs count (:func:`counts_as_calibration`): a
    kappa measured on five pairs says little about the judge, so a measurement that small
    is kept in the ledger but leaves the calibration owed (state ``small``).

    Parameters
    ----------
    entries : sequence of mapping
        The ledger entries of one judge identity in one experiment, oldest first; each has
        ``measured_at`` (ISO 8601, UTC), ``rubric_sha256`` and ``pairs``.
    rubric_sha256 : str
        The experiment's rubric now (64 hex).
    now : datetime.datetime
        The time to age against (timezone-aware).
    max_age_days : float
        Params ``judges.max_age_days``: a calibration measured longer ago is stale.
    min_pairs : int, default 0
        Params ``judges.recheck.min_pairs``: the fewest pairs a measurement not made on a
        drawn re-check rests on to count (0: every entry counts).

    Returns
    -------
    (str, str, mapping or None)
        The state (one of :data:`STATES`), why in words, and the newest entry that counts
        (the newest entry when none counts; None when there is none).

    Raises
    ------
    InputError
        An entry's ``measured_at`` is not an ISO 8601 time.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> e = {"measured_at": "2026-01-01T00:00:00Z", "rubric_sha256": "r1", "pairs": 60}
    >>> calibration_state([e], rubric_sha256="r1", max_age_days=30,
    ...                   now=datetime(2026, 3, 1, tzinfo=timezone.utc))[:2]
    ('stale', 'measured 59 days ago, older than judges.max_age_days (30)')
    >>> calibration_state([e | {"pairs": 5, "queries": 3}], rubric_sha256="r1",
    ...                   max_age_days=90, min_pairs=50,
    ...                   now=datetime(2026, 1, 2, tzinfo=timezone.utc))[:2]
    ('small', 'measured on 5 pairs (3 queries), fewer than judges.recheck.min_pairs (50): too few to count as a calibration')
    """
    if not entries:
        return "none", "no calibration recorded", None

    def newest(es):
        return max(es, key=lambda e: _when(e["measured_at"], what="measured_at"))

    counting = [e for e in entries if counts_as_calibration(e, min_pairs=min_pairs)]
    if not counting:
        last = newest(entries)
        return ("small", f"measured on {last.get('pairs')} pairs ({last.get('queries')} "
                         f"queries), fewer than judges.recheck.min_pairs ({min_pairs}): too "
                         "few to count as a calibration", last)
    last = newest(counting)
    if last["rubric_sha256"] != rubric_sha256:
        return ("stale", f"measured under rubric {str(last['rubric_sha256'])[:12]}, the "
                         f"rubric is now {rubric_sha256[:12]}", last)
    age = (now - _when(last["measured_at"], what="measured_at")).total_seconds() / 86400
    if age > max_age_days:
        return ("stale", f"measured {int(age)} days ago, older than judges.max_age_days "
                         f"({max_age_days:g})", last)
    return "calibrated", f"measured {int(age)} days ago", last
