"""The label-noise band: how far a measured difference moves when someone else grades.

The audit sample was graded twice, blind: by the key grader and by the auditor. Scoring the
arms on the audit queries under each label set shows how much of a difference between two
arms is the graders rather than the arms. If an improvement is no larger than the amount
relabelling moves it, it has not been measured.

* :func:`auditor_key` — the key with the audit queries' grades taken from the auditor;
* :func:`noise_deltas` — per comparison, the difference on the audit queries under both
  label sets, the band ``|delta_auditor - delta_grader|`` and a flag when the measured
  difference is inside it;
* :func:`kendall_tau` and :func:`tau_ap` — how the ordering of the arms changes between
  the two label sets (Kendall 1938; Yilmaz, Aslam & Robertson 2008, "A new rank
  correlation coefficient for information retrieval", SIGIR).

The protocol never overwrites the key with the auditor's grades: the auditor key exists
only to measure this band.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from relgrade.errors import InputError


@dataclass(frozen=True)
class LabelNoise:
    """How far one paired difference moves when the auditor's grades replace the grader's.

    Attributes
    ----------
    queries : int
        Audit queries both label sets define the measure on.
    delta_grader, delta_auditor : float
        Mean difference A - B over those queries under the grader's and the auditor's grades.
    band : float
        ``|delta_auditor - delta_grader|``: the label-noise band.
    delta_swapped : float
        The difference over all queries with the audit queries scored on the auditor's
        grades.
    within : bool
        ``|delta| <= band``, with ``delta`` the difference over all queries on the key:
        the measured difference is no larger than what relabelling moves it by.
    """

    queries: int
    delta_grader: float
    delta_auditor: float
    band: float
    delta_swapped: float
    within: bool

    def to_dict(self) -> dict:
        return {"queries": self.queries, "delta_grader": self.delta_grader,
                "delta_auditor": self.delta_auditor, "band": self.band,
                "delta_swapped": self.delta_swapped, "within_band": self.within}


def auditor_key(*, key: pd.DataFrame, grades: pd.DataFrame, audit_queries: Iterable[str],
                auditor: str, round: int) -> tuple[pd.DataFrame, dict]:  # noqa: A002
    """The key with each audit query's grades replaced by the auditor's.

    Parameters
    ----------
    key : pandas.DataFrame of shape (n_pairs, 3)
        The frozen key: ``query_id``, ``chunk_id``, ``grade``. Not modified.
    grades : pandas.DataFrame
        The long grades table: ``query_id``, ``chunk_id``, ``grader``, ``round``, ``grade``.
    audit_queries : iterable of str
        The audit sample.
    auditor : str
        The auditor's grader name (params ``grading.auditor``).
    round : int
        The grading round (params ``grading.round``).

    Returns
    -------
    key : pandas.DataFrame
        Same pairs and columns as ``key``; on audit queries the grade is the auditor's where
        the auditor graded the pair, the key's otherwise.
    info : dict
        ``queries`` (audit queries in the key), ``pairs`` (their pairs), ``replaced``
        (pairs given the auditor's grade), ``kept`` (pairs the auditor did not grade),
        ``changed`` (pairs whose grade differs).

    Raises
    ------
    InputError
        A column is missing, or the auditor graded no pair of the audit queries in the key.
    """
    needs = (("key", key, ["query_id", "chunk_id", "grade"]),
             ("grades", grades, ["query_id", "chunk_id", "grader", "round", "grade"]))
    for name, df, cols in needs:
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise InputError(f"{name} lacks column(s) {', '.join(missing)}")
    audit = {str(q) for q in audit_queries}
    out = key.assign(query_id=key["query_id"].astype(str), chunk_id=key["chunk_id"].astype(str))
    aud = grades[(grades["grader"].astype(str) == str(auditor))
                 & (grades["round"].astype(int) == int(round))]
    aud = aud.assign(query_id=aud["query_id"].astype(str), chunk_id=aud["chunk_id"].astype(str))
    aud = aud[aud["query_id"].isin(audit)].drop_duplicates(["query_id", "chunk_id"], keep="last")
    lookup = aud.set_index(["query_id", "chunk_id"])["grade"]
    in_audit = out["query_id"].isin(audit).to_numpy()
    idx = pd.MultiIndex.from_frame(out[["query_id", "chunk_id"]])
    new = lookup.reindex(idx).to_numpy(dtype=np.float64, na_value=np.nan)
    replace = in_audit & ~np.isnan(new)
    if in_audit.any() and not replace.any():
        raise InputError("the auditor graded none of the audit queries' pairs", item=str(auditor),
                         fix="check grading.auditor and grading.round in the params file")
    old = out["grade"].to_numpy().astype(np.int64)
    grade = np.where(replace, np.nan_to_num(new).astype(np.int64), old)
    out = out.assign(grade=grade)
    info = {"queries": int(out.loc[in_audit, "query_id"].nunique()), "pairs": int(in_audit.sum()),
            "replaced": int(replace.sum()), "kept": int((in_audit & ~replace).sum()),
            "changed": int((grade != old).sum())}
    return out, info


def _wide(per_query: pd.DataFrame, measure: str) -> pd.DataFrame:
    sub = per_query[per_query["measure"] == measure]
    return sub.pivot(index="query_id", columns="arm", values="value")


def _mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    if weights is None:
        return float(values.mean())
    return float((values * weights).sum() / weights.sum())


def noise_deltas(*, grader: pd.DataFrame, auditor: pd.DataFrame,
                 comparisons: Iterable[tuple[str, str, str]],
                 weights: Mapping[str, float] | None = None) -> dict:
    """The label-noise band of each comparison.

    Parameters
    ----------
    grader : pandas.DataFrame
        Per-query values on the key: ``arm``, ``query_id``, ``measure``, ``value``, every
        query.
    auditor : pandas.DataFrame
        Per-query values on :func:`auditor_key` for the audit queries (same columns).
    comparisons : iterable of (arm_a, arm_b, measure)
    weights : mapping, optional
        Traffic weight per query id.

    Returns
    -------
    dict
        ``(arm_a, arm_b, measure) -> LabelNoise``; a comparison with no audit query defined
        under both label sets is absent.

    Notes
    -----
    With ``Q`` the audit queries defined under both label sets, ``d_g(q)`` and ``d_a(q)``
    the per-query differences A - B under the grader's and the auditor's grades:
    ``delta_grader = mean_Q d_g``, ``delta_auditor = mean_Q d_a``, ``band = |delta_auditor
    - delta_grader|``. The band is what the difference would move by if every query were
    relabelled as the audit queries were; a difference over all queries of at most the band
    is flagged (``within``). ``delta_swapped`` is the all-query difference with only the
    audit queries relabelled.
    """
    out = {}
    cache: dict = {}
    for a, b, m in comparisons:
        if m not in cache:
            cache[m] = (_wide(grader, m), _wide(auditor, m))
        g, au = cache[m]
        if a not in g.columns or b not in g.columns or a not in au.columns or b not in au.columns:
            continue
        q = sorted(set(au.index[au[[a, b]].notna().all(axis=1)])
                   & set(g.index[g[[a, b]].notna().all(axis=1)]))
        if not q:
            continue
        all_q = list(g.index[g[[a, b]].notna().all(axis=1)])
        w_q = None if weights is None else np.array([weights[x] for x in q], dtype=np.float64)
        w_all = None if weights is None else np.array([weights[x] for x in all_q], dtype=np.float64)
        dg_q = (g.loc[q, a] - g.loc[q, b]).to_numpy()
        da_q = (au.loc[q, a] - au.loc[q, b]).to_numpy()
        d_all = (g.loc[all_q, a] - g.loc[all_q, b])
        swapped = d_all.copy()
        swapped.loc[q] = da_q
        delta_g, delta_a = _mean(dg_q, w_q), _mean(da_q, w_q)
        band = abs(delta_a - delta_g)
        delta = _mean(d_all.to_numpy(), w_all)
        out[(a, b, m)] = LabelNoise(len(q), delta_g, delta_a, band,
                                    _mean(swapped.to_numpy(), w_all), abs(delta) <= band)
    return out


def ranking_from_scores(scores: Mapping[str, float]) -> list[str]:
    """Items ordered best first: score descending, ties by name ascending."""
    return [k for k, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def tau_ap(ranking: Sequence[str], reference: Sequence[str]) -> float:
    """AP rank correlation of ``ranking`` against ``reference`` (Yilmaz et al. 2008).

    Parameters
    ----------
    ranking : sequence of str
        The ordering being judged, best first.
    reference : sequence of str
        The ordering taken as correct: the same items, best first.

    Returns
    -------
    float
        In [-1, 1]; 1 when the orderings agree, -1 when one reverses the other.

    Raises
    ------
    InputError
        Fewer than 2 items, repeated items, or the two lists hold different items.

    Notes
    -----
    ``tau_ap = 2 / (N - 1) * sum_{i=2..N} C(i) / (i - 1) - 1``, where ``C(i)`` counts the
    items above position ``i`` of ``ranking`` that ``reference`` also places above the item
    at position ``i``. Unlike Kendall's tau, a swap near the top costs more than a swap near
    the bottom, and the coefficient is not symmetric in its two arguments.

    Examples
    --------
    >>> tau_ap(["b", "a", "c", "d"], ["a", "b", "c", "d"])  # top pair swapped
    0.33333333333333326
    >>> tau_ap(["a", "b", "d", "c"], ["a", "b", "c", "d"])  # bottom pair swapped
    0.7777777777777777
    """
    ranking, reference = list(ranking), list(reference)
    n = len(ranking)
    if n < 2 or len(set(ranking)) != n or set(ranking) != set(reference) or len(reference) != n:
        raise InputError("tau_ap needs two orderings of the same 2 or more distinct items",
                         found=f"{ranking} and {reference}")
    pos = {item: i for i, item in enumerate(reference)}
    total = 0.0
    for i in range(1, n):
        here = pos[ranking[i]]
        total += sum(pos[x] < here for x in ranking[:i]) / i
    return 2.0 * total / (n - 1) - 1.0


def kendall_tau(x: Mapping[str, float], y: Mapping[str, float]) -> float | None:
    """Kendall's tau-b between two scorings of the same items (scipy.stats.kendalltau).

    Returns
    -------
    float or None
        None when it is undefined: fewer than 2 items, or one scoring is constant.
    """
    items = sorted(set(x) & set(y))
    if len(items) < 2:
        return None
    a = np.array([x[i] for i in items], dtype=np.float64)
    b = np.array([y[i] for i in items], dtype=np.float64)
    if a.min() == a.max() or b.min() == b.max():
        return None
    return float(sps.kendalltau(a, b).statistic)


def orderings(*, grader: pd.DataFrame, auditor: pd.DataFrame, measures: Sequence[str],
              weights: Mapping[str, float] | None = None) -> list[dict]:
    """How the arm ordering on the audit queries changes between the two label sets.

    Parameters
    ----------
    grader, auditor : pandas.DataFrame
        As for :func:`noise_deltas`.
    measures : sequence of str

    Returns
    -------
    list of dict
        Per measure: ``measure``, ``queries``, ``order_grader`` and ``order_auditor`` (arms
        best first, by the mean over the audit queries), ``kendall_tau`` (None when
        undefined) and ``tau_ap`` (the auditor's ordering judged against the grader's; None
        with fewer than 2 arms). Ties in the means are broken by arm name.
    """
    rows = []
    for m in measures:
        g, au = _wide(grader, m), _wide(auditor, m)
        arms = sorted(set(g.columns) & set(au.columns))
        if not arms:
            continue
        q = sorted(set(au.index[au[arms].notna().all(axis=1)])
                   & set(g.index[g[arms].notna().all(axis=1)]))
        if not q:
            continue
        w = None if weights is None else np.array([weights[x] for x in q], dtype=np.float64)
        sg = {a: _mean(g.loc[q, a].to_numpy(), w) for a in arms}
        sa = {a: _mean(au.loc[q, a].to_numpy(), w) for a in arms}
        og, oa = ranking_from_scores(sg), ranking_from_scores(sa)
        rows.append({"measure": m, "queries": len(q), "order_grader": " > ".join(og),
                     "order_auditor": " > ".join(oa), "kendall_tau": kendall_tau(sg, sa),
                     "tau_ap": tau_ap(oa, og) if len(arms) > 1 else None})
    return rows
