"""Offline against online: why an A/B test disagrees with the offline verdict.

An offline comparison says arm B beats arm A on nDCG@10; the A/B test of the same two arms
says no change (or the reverse). The checks below are the five explanations to investigate,
in the order they are usually worth checking, each computed with relgrade's own numbers:

1. **pool bias** (:func:`pool_bias_check`): unjudged chunks score 0, so an arm that
   retrieves what the pool never held is scored down. Judged@k per arm, the share of each
   arm's top k that no other arm ranked within the pool depth, each arm re-scored on the key
   without the pairs only it brought into the pool (Zobel 1998), and the difference
   re-scored on judged chunks only (condensed lists, Sakai 2007);
2. **query-set drift** (:func:`drift_check`, over
   :func:`relgrade.query_sampling.query_set_drift`): the evaluated
   queries are no longer the ones users issue;
3. **cutoff mismatch** (:func:`cutoff_check`): the offline verdict at the shallower cutoffs
   (users rarely look past the first few results) against the verdict at the primary one;
4. **power** (:func:`power_check`): the offline interval, whether it holds the online
   change carried over to the offline measure, and the queries needed to detect it;
5. **segment cancellation** (:func:`segment_check`): per-group differences with their own
   intervals, offline and (when given) online, that disagree in sign.

:func:`conclude` ranks the explanations the numbers support. Every check states its
``strength`` in one currency, offline standard errors of the primary difference: how far
the explanation moves the offline difference toward the online result (pool bias, drift,
cutoff), how far apart the groups pull (segments), or how comfortably the online change
sits inside the offline interval (power). The most supported comes first; equal strengths
keep the order above.

Directions use each interval as it is: ``"better"`` (the whole interval above 0),
``"worse"`` (below 0), ``"no change"`` (it holds 0). The online delta is a relative change
of the treatment against the control (0.024 is +2.4%); carried over to the offline measure
it is ``delta * mean(control)``.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special

from relgrade.errors import InputError
from relgrade.evaluation import metrics, poolbias, stats
from relgrade.ranking import top_k

#: The checks in the order the conclusion breaks ties.
CHECKS = ("pool_bias", "drift", "cutoff", "power", "segments")

#: Pool bias is supported when the arm the offline verdict disfavours has at least this much
#: more of its top k unjudged than the other arm (5 points of Judged@k).
POOL_BIAS_MIN_GAP = 0.05

#: Drift is supported when at least this share of the evaluated queries no longer appear
#: in the current query log.
DRIFT_MIN_ABSENT = 0.20

def direction(low: float, high: float) -> str:
    """``"better"`` when the interval lies above 0, ``"worse"`` below, else ``"no change"``.

    Examples
    --------
    >>> direction(0.011, 0.037), direction(-0.2, -0.01), direction(-0.1, 0.1)
    ('better', 'worse', 'no change')
    """
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return "no change"


def _sign(online: str) -> int:
    return {"better": 1, "worse": -1}.get(online, 0)


def _toward(online: str, before: float, after: float, se: float) -> float:
    """How many standard errors the move from ``before`` to ``after`` goes toward the
    online direction (toward 0 when online says no change); negative when away."""
    if se <= 0:
        return 0.0
    s = _sign(online)
    move = (after - before) * s if s else abs(before) - abs(after)
    return float(move / se)


def _pair_values(per_query: pd.DataFrame, *, measure: str, control: str,
                 treatment: str) -> pd.DataFrame:
    """Per-query values of both arms on one measure: query_id, group, treatment, control."""
    df = per_query[per_query["measure"] == measure]
    cols = ["query_id", "group"] if "group" in df.columns else ["query_id"]
    wide = df.pivot_table(index=cols, columns="arm", values="value", aggfunc="first")
    for arm in (control, treatment):
        if arm not in wide.columns:
            raise InputError("arm has no per-query values", item=f"arm {arm}, {measure}")
    wide = wide[[treatment, control]].dropna().reset_index()
    if "group" not in wide.columns:
        wide["group"] = "all"
    return wide.rename(columns={treatment: "treatment", control: "control"})


# --- 1. pool bias -------------------------------------------------------------------------

def only_found_by(runs: pd.DataFrame, *, k: int, depth: int, ties: str = "score") -> pd.DataFrame:
    """The share of each arm's top ``k`` that no other arm ranked within ``depth``.

    Parameters
    ----------
    runs : pandas.DataFrame
        Stacked runs: ``arm``, ``query_id``, ``chunk_id``, ``rank``, ``score``. Not modified.
    k : int
        The cutoff whose top results are counted (the primary measure's).
    depth : int
        How deep another arm's list is searched (the pool depth, params ``pool.depth``).
    ties : {"score", "rank"}, default "score"
        Run tie rule (params ``runs.ties``).

    Returns
    -------
    pandas.DataFrame
        ``arm`` (str), ``pairs`` (int: pairs in its top k over all queries), ``only``
        (int: of them, pairs no other arm has in its top ``depth``), ``share`` (float in
        [0, 1]: ``only / pairs``, 0 when ``pairs`` is 0); one row per arm, sorted.

    Examples
    --------
    >>> runs = pd.DataFrame({"arm": ["a", "a", "b", "b"], "query_id": ["q"] * 4,
    ...                      "chunk_id": ["x", "y", "x", "z"], "rank": [1, 2, 1, 2],
    ...                      "score": [2.0, 1.0, 2.0, 1.0]})
    >>> only_found_by(runs, k=2, depth=2)[["arm", "only", "share"]].values.tolist()
    [['a', 1, 0.5], ['b', 1, 0.5]]
    """
    top = top_k(runs, int(k), ties=ties)[["arm", "query_id", "chunk_id"]].astype(str)
    deep = top_k(runs, int(depth), ties=ties)[["arm", "query_id", "chunk_id"]].astype(str)
    rows = []
    for arm in sorted(top["arm"].unique()):
        mine = top[top["arm"] == arm]
        others = deep[deep["arm"] != arm]
        seen = pd.MultiIndex.from_frame(others[["query_id", "chunk_id"]])
        hit = pd.MultiIndex.from_frame(mine[["query_id", "chunk_id"]]).isin(seen)
        pairs, only = len(mine), int((~hit).sum())
        rows.append({"arm": arm, "pairs": pairs, "only": only,
                     "share": only / pairs if pairs else 0.0})
    return pd.DataFrame(rows, columns=["arm", "pairs", "only", "share"])


def pool_bias_check(*, qrels: pd.DataFrame, runs: pd.DataFrame, provenance: pd.DataFrame | None,
                    depth: int, control: str, treatment: str, measure: str, k: int,
                    online: str, se: float, ties: str = "score",
                    relevant_min: int = 1) -> dict:
    """Check 1: is either arm scored on chunks nobody graded?

    Parameters
    ----------
    qrels : pandas.DataFrame
        The key (``query_id``, ``chunk_id``, ``grade``).
    runs : pandas.DataFrame
        Stacked runs of the experiment's arms (``arm``, ``query_id``, ``chunk_id``,
        ``rank``, ``score``); every arm counts for :func:`only_found_by`.
    provenance : pandas.DataFrame or None
        The pool's provenance (:func:`relgrade.evaluation.poolbias.unique_contributions`);
        None skips the leave-one-arm-out scores.
    depth : int
        Pool depth.
    control, treatment : str
        The A/B test's arms.
    measure : str
        The primary measure; ``k`` its cutoff.
    online : {"better", "worse", "no change"}
        The online direction of treatment against control.
    se : float
        Standard error of the offline primary difference (treatment - control).
    ties, relevant_min
        Params ``runs.ties`` and ``scale.relevant_min``.

    Returns
    -------
    dict
        ``judged`` ({arm: Judged@k}), ``only_found`` ({arm: {pairs, only, share}}),
        ``leave_one_arm_out`` ({arm: {full, reduced, change, removed_pairs,
        queries_reduced}} or None; ``reduced`` and ``change`` None when no query is left),
        ``standard_delta`` and ``condensed_delta`` (treatment - control on the full lists
        and on judged chunks only), ``disfavoured`` (the arm the offline verdict scores
        below what the online result says), ``gap`` (its unjudged share minus the other
        arm's), ``supported`` (``gap >= POOL_BIAS_MIN_GAP``), ``strength`` (standard errors
        the condensed difference moves toward the online result, at least the gap's
        support), ``text``.
    """
    pair = runs[runs["arm"].astype(str).isin([control, treatment])]
    judged = poolbias.judged_at_k(qrels=qrels, runs=pair, cutoffs=[k], ties=ties)
    judged = {str(r.arm): float(r.judged) for r in judged.itertuples()}
    only = only_found_by(runs, k=k, depth=depth, ties=ties).set_index("arm")
    only_found = {a: {"pairs": int(only.loc[a, "pairs"]), "only": int(only.loc[a, "only"]),
                      "share": float(only.loc[a, "share"])} for a in (control, treatment)
                  if a in only.index}
    loo = None
    if provenance is not None:
        table = poolbias.leave_one_arm_out(qrels=qrels, runs=runs, provenance=provenance,
                                           depth=depth, measures=[measure], ties=ties,
                                           relevant_min=relevant_min)
        # an arm whose pairs make the whole key has no query left to score without them
        loo = {str(r.arm): {"full": float(r.full),
                            "reduced": float(r.reduced) if r.queries_reduced else None,
                            "change": float(r.change) if r.queries_reduced else None,
                            "removed_pairs": int(r.removed_pairs),
                            "queries_reduced": int(r.queries_reduced)}
               for r in table.itertuples() if r.arm in (control, treatment)}

    def delta(run):
        pq = metrics.per_query(qrels=qrels, run=run, measures=[measure], ties=ties,
                               relevant_min=relevant_min)
        v = _pair_values(pq, measure=measure, control=control, treatment=treatment)
        return float((v["treatment"] - v["control"]).mean())

    standard = delta(pair)
    condensed = delta(poolbias.condensed_runs(pair, qrels))
    offline_disfavours = treatment if _sign(online) >= 0 else control
    if online == "no change":  # the arm the offline difference puts below
        offline_disfavours = treatment if standard < 0 else control
    other = control if offline_disfavours == treatment else treatment
    gap = (1 - judged.get(offline_disfavours, 1.0)) - (1 - judged.get(other, 1.0))
    supported = bool(gap >= POOL_BIAS_MIN_GAP)
    move = _toward(online, standard, condensed, se)
    strength = max(move, 0.0) if supported else 0.0
    text = (f"Judged@{k}: {treatment} {judged.get(treatment, 0):.2f}, {control} "
            f"{judged.get(control, 0):.2f}; of each top {k}, found by no other arm within "
            f"depth {depth}: " + ", ".join(f"{a} {v['share']:.0%}" for a, v in
                                           only_found.items())
            + f"; {measure} difference {standard:+.3f}, on judged chunks only "
              f"{condensed:+.3f}")
    if loo:
        text += "; each arm without the pairs only it pooled: " + ", ".join(
            f"{a} {v['full']:.3f} -> " + ("no query left" if v["reduced"] is None
                                          else f"{v['reduced']:.3f}")
            for a, v in loo.items())
    return {"k": int(k), "depth": int(depth), "judged": judged, "only_found": only_found,
            "leave_one_arm_out": loo, "standard_delta": standard, "condensed_delta": condensed,
            "disfavoured": offline_disfavours, "gap": float(gap), "supported": supported,
            "strength": strength, "text": text}


# --- 2. query-set drift --------------------------------------------------------------------

def drift_check(drift: dict, values: pd.DataFrame, *, online: str, se: float) -> dict:
    """Check 2: does the offline difference change on the queries users still issue?

    Parameters
    ----------
    drift : dict
        :func:`relgrade.query_sampling.query_set_drift`'s result, with ``distance``: the
        total variation of :func:`relgrade.query_sampling.drift.drift` (the number
        ``relgrade drift`` prints for the same set and log) and ``distance_interval``, or
        both None when the set was not sampled from a query log (no strata to compare).
    values : pandas.DataFrame
        The primary measure's per-query values (``query_id``, ``treatment``, ``control``).
    online : {"better", "worse", "no change"}
    se : float
        Standard error of the offline primary difference.

    Returns
    -------
    dict
        The drift numbers plus ``delta_all``, ``delta_present`` (mean difference over the
        queries still in the log; None when none is), ``supported``
        (``absent_share >= DRIFT_MIN_ABSENT``), ``strength`` (standard errors the
        difference moves toward the online result when restricted to the present queries),
        ``text``.
    """
    d = values["treatment"] - values["control"]
    live = values["query_id"].astype(str).isin(drift["present"]).to_numpy()
    delta_all = float(d.mean())
    delta_present = float(d[live].mean()) if live.any() else None
    supported = bool(drift["absent_share"] >= DRIFT_MIN_ABSENT)
    move = 0.0 if delta_present is None else _toward(online, delta_all, delta_present, se)
    strength = max(move, 0.0) if supported else 0.0
    text = (f"{len(drift['absent'])} of {len(values)} evaluated queries "
            f"({drift['absent_share']:.0%}) are absent from the current log; the set covers "
            f"{drift['covered_traffic']:.1%} of its traffic; "
            + _distance_text(drift)
            + f"; difference on every query {delta_all:+.3f}, on the "
            "queries still issued " + ("none" if delta_present is None
                                       else f"{delta_present:+.3f}"))
    return drift | {"delta_all": delta_all, "delta_present": delta_present,
                    "supported": supported, "strength": strength, "text": text}


def _distance_text(drift: dict) -> str:
    if drift.get("distance") is None:
        return ("strata distance undefined (the set was not sampled from a query log: no "
                "params queries.log)")
    low, high = drift["distance_interval"]
    return (f"strata distance (total variation, as relgrade drift) {drift['distance']:.3f} "
            f"[{low:.3f}, {high:.3f}]")


# --- 3. cutoff mismatch --------------------------------------------------------------------

def cutoff_check(pairs: Mapping[str, dict], *, primary: str, shallow: Sequence[str],
                 online: str) -> dict:
    """Check 3: is the verdict at the shallower cutoffs the online one?

    Parameters
    ----------
    pairs : mapping of measure -> dict
        Per measure the offline difference: ``delta``, ``low``, ``high``, ``se``.
    primary : str
        The primary measure (e.g. nDCG@10).
    shallow : sequence of str
        The same measure at the shallower cutoffs (e.g. nDCG@3, nDCG@5).
    online : {"better", "worse", "no change"}

    Returns
    -------
    dict
        ``verdicts`` ({measure: {delta, low, high, verdict}}), ``agreeing`` (the shallow
        measures whose verdict differs from the primary's and equals the online one),
        ``supported`` (any agrees), ``strength`` (the largest move, in the primary's
        standard errors, from the primary difference to an agreeing one), ``text``.
    """
    verdicts = {m: {"delta": pairs[m]["delta"], "low": pairs[m]["low"],
                    "high": pairs[m]["high"],
                    "verdict": direction(pairs[m]["low"], pairs[m]["high"])}
                for m in [*shallow, primary]}
    at_primary = verdicts[primary]["verdict"]
    agreeing = [m for m in shallow if verdicts[m]["verdict"] != at_primary
                and verdicts[m]["verdict"] == online]
    se = pairs[primary]["se"]
    strength = max((_toward(online, pairs[primary]["delta"], pairs[m]["delta"], se)
                    for m in agreeing), default=0.0)
    text = "; ".join(f"{m}: {v['delta']:+.3f} [{v['low']:+.3f}, {v['high']:+.3f}] "
                     f"{v['verdict']}" for m, v in verdicts.items())
    return {"verdicts": verdicts, "agreeing": agreeing, "supported": bool(agreeing),
            "strength": max(strength, 0.0) if agreeing else 0.0, "text": text}


# --- 4. power ------------------------------------------------------------------------------

def power_check(pair: dict, *, n: int, control_mean: float, online_delta: float,
                power: float = 0.8, alpha: float = 0.05) -> dict:
    """Check 4: can the offline set tell its result from the online one?

    Parameters
    ----------
    pair : dict
        The offline primary difference: ``delta``, ``low``, ``high``, ``se``, ``level``.
    n : int
        Queries it rests on.
    control_mean : float
        The control arm's offline mean (the reference of relative changes).
    online_delta : float
        The online relative change (0.024 is +2.4%).
    power, alpha : float
        Params ``metrics.power`` and ``metrics.alpha``.

    Returns
    -------
    dict
        ``implied`` (``online_delta * control_mean``: the online change in the offline
        measure's units), ``inside`` (the offline interval holds it), ``n_needed``
        (queries to detect ``implied`` with ``power``: :func:`relgrade.evaluation.stats.power_analysis`
        on the offline standard error; None when the online delta is 0 or the spread is 0),
        ``supported`` (= ``inside``), ``strength`` (``z_{1-alpha/2} - |delta - implied| / se``:
        how many standard errors the online change lies inside the offline acceptance
        band), ``text``.
    """
    implied = float(online_delta) * float(control_mean)
    se = float(pair["se"])
    inside = bool(pair["low"] <= implied <= pair["high"])
    n_needed = None
    if online_delta != 0 and se > 0 and control_mean != 0:
        n_needed = stats.power_analysis(se=se, n=int(n), reference=float(control_mean),
                                        relative_change=abs(float(online_delta)),
                                        power=power, alpha=alpha).n_needed
    z = float(special.ndtri(1 - alpha / 2))
    strength = (z - abs(pair["delta"] - implied) / se) if se > 0 else 0.0
    text = (f"offline {pair['delta']:+.3f} [{pair['low']:+.3f}, {pair['high']:+.3f}] over "
            f"{n} queries; the online {online_delta:+.1%} is {implied:+.3f} in offline units, "
            + ("inside" if inside else "outside") + " the interval; ")
    if n_needed is not None:
        text += f"about {n_needed} queries would detect it with power {power:.0%}"
    else:
        text += "queries needed undefined (" + _undefined_power(online_delta, se,
                                                               control_mean) + ")"
    return {"implied": implied, "inside": inside, "n": int(n), "n_needed": n_needed,
            "supported": inside, "strength": max(strength, 0.0) if inside else 0.0,
            "text": text}


def _undefined_power(online_delta: float, se: float, control_mean: float) -> str:
    """Why the queries needed cannot be computed: the first of the three causes that holds."""
    if se <= 0:
        return ("the offline differences have zero spread, so the check is degenerate: a "
                "sample size needs a standard error above 0")
    if control_mean == 0:
        return "the control's offline mean is 0, so a relative change has no size"
    return "the online change is 0: there is no change to detect"


# --- 5. segment cancellation ---------------------------------------------------------------

def segment_check(groups: Sequence[dict], online_segments: Sequence[dict], *,
                  se: float) -> dict:
    """Check 5: do groups pull in opposite directions?

    Parameters
    ----------
    groups : sequence of dict
        Offline per-group differences: ``group``, ``n``, ``delta``, ``low``, ``high``,
        ``se`` (the comparison's segments).
    online_segments : sequence of dict
        Online per-segment results: ``segment``, ``delta``, ``low``, ``high`` (may be empty).
    se : float
        Standard error of the offline primary difference.

    Returns
    -------
    dict
        ``offline`` and ``online`` (each row with its ``verdict``), ``offline_cancels`` /
        ``online_cancels`` (one group's interval wholly above 0 and another's wholly
        below), ``supported`` (either), ``strength`` (the smaller of the two opposite
        sides' distances from 0, each in its own standard errors; an online segment's is
        ``(high - low) / (2 z)`` at its ``level``; the larger of the offline and online
        values), ``text``.
    """
    off = [dict(g) | {"verdict": direction(g["low"], g["high"])} for g in groups]
    on = [dict(s) | {"verdict": direction(s["low"], s["high"])} for s in online_segments]

    def cancels(rows):
        v = {r["verdict"] for r in rows}
        return "better" in v and "worse" in v

    off_c, on_c = cancels(off), cancels(on)

    def apart(rows, se_of):
        # the smaller of the two opposite sides' distances from 0, each in its own errors
        up = max(r["delta"] / se_of(r) for r in rows if r["verdict"] == "better")
        down = min(r["delta"] / se_of(r) for r in rows if r["verdict"] == "worse")
        return min(up, -down)

    strength = 0.0
    if off_c:
        strength = apart(off, lambda r: r["se"] if r.get("se") else se)
    if on_c:
        strength = max(strength, apart(on, _online_se))
    text = "offline " + ", ".join(
        f"{r['group']} {r['delta']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}] (n={r['n']})"
        for r in off)
    if on:
        text += "; online " + ", ".join(
            f"{r['segment']} {r['delta']:+.1%} [{r['low']:+.1%}, {r['high']:+.1%}]" for r in on)
    return {"offline": off, "online": on, "offline_cancels": off_c, "online_cancels": on_c,
            "supported": bool(off_c or on_c), "strength": float(strength), "text": text}


def _online_se(row: dict) -> float:
    """An online interval's standard error, read back from its width at its level."""
    z = float(special.ndtri(0.5 + float(row.get("level", 0.95)) / 2))
    return max((row["high"] - row["low"]) / (2 * z), 1e-12)


# --- conclusion ----------------------------------------------------------------------------

def conclude(checks: Mapping[str, dict | None]) -> list[dict]:
    """The supported explanations, most supported first.

    Parameters
    ----------
    checks : mapping of name -> dict or None
        The checks by name (:data:`CHECKS`); None for a check that was not run.

    Returns
    -------
    list of dict
        ``rank`` (1 = most supported), ``check``, ``strength``, ``text``: one per supported
        check, by strength descending, ties in :data:`CHECKS` order.

    Examples
    --------
    >>> conclude({"pool_bias": {"supported": True, "strength": 0.5, "text": "a"},
    ...           "drift": None, "cutoff": {"supported": True, "strength": 2.0, "text": "b"},
    ...           "power": {"supported": False, "strength": 0.0, "text": "c"},
    ...           "segments": {"supported": True, "strength": 0.5, "text": "d"}})[0]["check"]
    'cutoff'
    """
    found = [(name, c) for name, c in ((n, checks.get(n)) for n in CHECKS)
             if c is not None and c["supported"]]
    found.sort(key=lambda t: (-round(float(t[1]["strength"]), 9), CHECKS.index(t[0])))
    return [{"rank": i + 1, "check": name, "strength": float(c["strength"]), "text": c["text"]}
            for i, (name, c) in enumerate(found)]


def _measure_at(measure: str, k: int) -> str:
    head, _, _ = str(measure).rpartition("@")
    return f"{head}@{int(k)}"


def cutoff_of(measure: str) -> int:
    """The rank cutoff of a measure name (``nDCG(dcg='exp-log2')@10`` -> 10).

    Raises
    ------
    InputError
        The measure has no integer cutoff.
    """
    _, at, k = str(measure).rpartition("@")
    if not at or not k.isdigit():
        raise InputError("the primary measure needs a rank cutoff (@k) to reconcile",
                         item=str(measure))
    return int(k)


def shallow_measures(primary: str, cutoffs: Sequence[int], available: Sequence[str]) -> list[str]:
    """The primary measure at every cutoff below its own that the per-query table holds.

    Examples
    --------
    >>> shallow_measures("nDCG@10", [3, 5, 10], ["nDCG@3", "nDCG@5", "nDCG@10", "R@3"])
    ['nDCG@3', 'nDCG@5']
    """
    k = cutoff_of(primary)
    out = [_measure_at(primary, c) for c in sorted(set(int(c) for c in cutoffs)) if c < k]
    return [m for m in out if m in set(available)]


def offline_numbers(comparison, *, control: str, treatment: str,
                    measures: Sequence[str]) -> dict:
    """Treatment - control per measure from a :class:`relgrade.evaluation.report.Comparison`.

    Returns
    -------
    dict
        measure -> ``delta``, ``low``, ``high``, ``se``, ``level``, ``n``, ``method``,
        ``mean_treatment``, ``mean_control``, ``groups`` (list of per-group rows).
    """
    out = {}
    for m in measures:
        p = comparison.pair(treatment, control, m)
        d = p.delta
        out[m] = {"delta": float(d.estimate), "low": float(d.low), "high": float(d.high),
                  "se": float(d.se), "level": float(d.level), "n": int(d.n),
                  "method": str(d.method), "mean_treatment": float(p.mean_a),
                  "mean_control": float(p.mean_b),
                  "groups": [s.to_dict() for s in p.segments]}
    return out


def reconcile(*, comparison, per_query: pd.DataFrame, online: dict,
              online_segments: Sequence[dict] = (), primary: str, cutoffs: Sequence[int],
              qrels: pd.DataFrame | None = None, runs: pd.DataFrame | None = None,
              provenance: pd.DataFrame | None = None, depth: int | None = None,
              drift: dict | None = None, power: float = 0.8, alpha: float = 0.05,
              ties: str = "score", relevant_min: int = 1) -> dict:
    """The five checks and the ranked conclusion for one A/B result.

    Parameters
    ----------
    comparison : relgrade.evaluation.report.Comparison
        :func:`relgrade.evaluation.compare.compare_arms` of the pair (treatment, control) on
        the primary measure and its shallower cutoffs, with query groups.
    per_query : pandas.DataFrame
        The per-query table it was computed from (``arm``, ``query_id``, ``group``,
        ``measure``, ``value``).
    online : dict
        ``control``, ``treatment``, ``metric``, ``delta``, ``low``, ``high`` (relative
        changes).
    online_segments : sequence of dict
        Per-segment online results (``segment``, ``delta``, ``low``, ``high``).
    primary : str
        The primary measure; ``cutoffs`` params ``metrics.cutoffs``.
    qrels, runs, provenance, depth
        The key, the stacked runs, the pool provenance and depth; without ``qrels`` and
        ``runs`` the pool-bias check is not run (``None``).
    drift : dict, optional
        :func:`relgrade.query_sampling.query_set_drift` of the set against a current log;
        None: not run.
    power, alpha, ties, relevant_min
        Params ``metrics.power``, ``metrics.alpha``, ``runs.ties``, ``scale.relevant_min``.

    Returns
    -------
    dict
        ``online`` (with its ``verdict``), ``offline`` (the primary difference with its
        ``verdict``), ``contradiction`` (bool), ``checks`` ({name: dict or None}, in
        :data:`CHECKS` order) and ``conclusion`` (:func:`conclude`).
    """
    control, treatment = online["control"], online["treatment"]
    on_dir = direction(online["low"], online["high"])
    shallow = shallow_measures(primary, cutoffs, comparison.measures)
    nums = offline_numbers(comparison, control=control, treatment=treatment,
                           measures=[*shallow, primary])
    main = nums[primary]
    off_dir = direction(main["low"], main["high"])
    se = main["se"]
    values = _pair_values(per_query, measure=primary, control=control, treatment=treatment)
    checks: dict = {}
    if qrels is not None and runs is not None and depth is not None:
        checks["pool_bias"] = pool_bias_check(
            qrels=qrels, runs=runs, provenance=provenance, depth=int(depth), control=control,
            treatment=treatment, measure=primary, k=cutoff_of(primary), online=on_dir, se=se,
            ties=ties, relevant_min=relevant_min)
    else:
        checks["pool_bias"] = None
    checks["drift"] = None if drift is None else drift_check(drift, values, online=on_dir,
                                                             se=se)
    checks["cutoff"] = cutoff_check(nums, primary=primary, shallow=shallow, online=on_dir)
    checks["power"] = power_check(main, n=main["n"], control_mean=main["mean_control"],
                                  online_delta=float(online["delta"]), power=power,
                                  alpha=alpha)
    checks["segments"] = segment_check(main["groups"], online_segments, se=se)
    return {"online": dict(online) | {"verdict": on_dir},
            "offline": {"measure": primary, **{k: v for k, v in main.items() if k != "groups"},
                        "verdict": off_dir},
            "contradiction": on_dir != off_dir,
            "checks": {name: checks[name] for name in CHECKS},
            "conclusion": conclude(checks)}


def markdown(result: dict) -> str:
    """The reconciliation as a Markdown section (``## Offline against online``)."""
    on, off = result["online"], result["offline"]
    lines = ["## Offline against online", "",
             f"Online ({on['metric']}): {on['treatment']} against {on['control']} "
             f"{on['delta']:+.1%} [{on['low']:+.1%}, {on['high']:+.1%}]: {on['verdict']}.",
             f"Offline ({off['measure']}): {off['delta']:+.3f} [{off['low']:+.3f}, "
             f"{off['high']:+.3f}] over {off['n']} queries: {off['verdict']}.",
             "The two " + ("disagree." if result["contradiction"] else "agree."), "",
             "| # | check | supported | strength | numbers |", "|---|---|---|---|---|"]
    for i, name in enumerate(CHECKS, 1):
        c = result["checks"][name]
        if c is None:
            lines.append(f"| {i} | {name} | not checked | | "
                         + ("no query log given" if name == "drift" else
                            "key, runs or pool depth missing") + " |")
            continue
        lines.append(f"| {i} | {name} | {'yes' if c['supported'] else 'no'} | "
                     f"{c['strength']:.2f} | {c['text'].replace('|', '/')} |")
    lines += ["", "Conclusion, most supported first:"]
    if not result["conclusion"]:
        lines.append("- None of the five explanations is supported by these numbers")
    for c in result["conclusion"]:
        lines.append(f"{c['rank']}. {c['check']} (strength {c['strength']:.2f}): {c['text']}")
    return "\n".join(lines) + "\n"


def jsonable(result: dict) -> dict:
    """``result`` with numpy scalars made plain Python numbers (for ``json.dumps``)."""
    def plain(x):
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, np.generic):
            return x.item()
        return x
    return plain(result)
