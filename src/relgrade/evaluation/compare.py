"""Comparing arms: intervals, paired tests with Holm, power and segments, in one result object.

:func:`compare_arms` takes the per-query table of every arm (columns ``arm``, ``query_id``,
``group``, ``measure``, ``value``) and returns a :class:`Comparison`: a bootstrap interval
and a power estimate per arm and measure, and per comparison (each arm against the
baseline, or every pair) the mean difference with its paired interval (Student t or the
studentized bootstrap by relgrade's rule), the mean test (the verdict's test), a paired
sign-flip randomization test, a paired t test, Cohen's d_z, the Holm-adjusted p-value over
every comparison made, the query count needed to detect a relative change, and the
difference per query group with a flag for segment cancellation. :func:`full_report` adds
the pool-bias checks (:mod:`relgrade.evaluation.poolbias`) and the label-noise band
(:mod:`relgrade.evaluation.noise`).

One result, several renderers: :meth:`Comparison.to_dict` / :meth:`~Comparison.to_json`
(``metrics/comparisons.json``), :meth:`~Comparison.to_markdown`,
:meth:`~Comparison.rich_tables` (the CLI), :meth:`~Comparison.verdicts` (plain sentences),
and the two plot tables :meth:`~Comparison.arms_plot` and :meth:`~Comparison.deltas_plot`.

The JSON report (``metrics/comparisons.json``) holds, in this order: ``key_sha256``,
``pool_version``, ``post_hoc`` (from the key's record); ``settings``; ``resample_plans``;
``measures``;
``arms`` (``{arm: {measure: {estimate, low, high, se, level, method, n, n_resamples,
notes, power}}}``); ``comparisons`` (one object per comparison: ``arm_a``, ``arm_b``,
``measure``, ``n``, ``mean_a``, ``mean_b``, ``delta``, ``low``, ``high``, ``se``,
``interval``, ``relative``, ``p_randomization``, ``p_test``, ``test``, ``p_holm``, ``significant``,
``p_bootstrap``, ``randomization``, ``t_test``, ``d_z``, ``power``, ``segments``,
``segment_cancellation``, ``holm_family``, ``label_noise``, ``notes``, ``verdict``);
``pool_bias`` (``depth``, ``unique_pairs``, ``judged``, ``leave_one_arm_out``,
``condensed``, and ``not_checked`` ``{measures, note}`` when inferred measures were left
out); ``label_noise`` (``auditor``, ``round``, ``queries``, ``pairs``,
``replaced``, ``kept``, ``changed``, ``orderings``); ``verdicts``. A value that does not
exist (an infinite t, an undefined power) is ``null`` with a note saying why; the file
never holds NaN.

Reproducibility: every resample comes from one seeded plan per query set
(:class:`relgrade.evaluation.resample.ResamplePlan`, seeded from params ``seed`` and the
number of queries), shared by every arm, pair and measure: its bootstrap counts and sign-flip
patterns are applied to all the (arm, measure) columns in one matrix product each
(:mod:`relgrade.evaluation.planned` reads arm means, paired differences and studentized
statistics off it); each query group gets its own plan for the segments. A comparison's
numbers therefore do not depend on which other comparisons are made or in what order, and the
products, spread over threads in fixed blocks, give bit-identical results for any worker
count. The plans are recorded in the report (``resample_plans``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

from relgrade.errors import InputError
from relgrade.evaluation import planned, stats
from relgrade.evaluation.measures import value_range
from relgrade.evaluation.per_query_codes import PerQueryCodes
from relgrade.evaluation.report import Comparison, PairResult, Segment
from relgrade.evaluation.resample import ResamplePlan
from relgrade.evaluation.settings import Settings, design_pairs

#: Measures that describe the pool rather than the ranking; reported, never compared.
NOT_COMPARED = ("Judged",)

#: The note an inferred measure's comparison carries (xinfAP, infNDCG: a sampled tail).
INFERRED_NOTE = ("inferred from the sampled tail (pool.tail_sample): each query's value "
                 "estimates, without bias, its value on the whole pool to pool.tail_depth; "
                 "both arms are scored on the same sample, and the sampling error of each "
                 "query's estimate is part of the between-query spread the paired tests "
                 "resample")

#: Why the pool-bias checks leave the inferred measures out.
INFERRED_POOL_BIAS_NOTE = ("not checked for pool bias: leaving an arm's pairs out or "
                           "condensing a run changes the sampled strata, which the recorded "
                           "inclusion probabilities no longer describe")

#: Below this many (query x arm x (resample + sign pattern)) multiply-adds the plan's
#: products stay in one thread.
PARALLEL_MIN_WORK = 10_000_000




# --- building ------------------------------------------------------------------------

def _coded(per_query) -> PerQueryCodes:
    """``per_query`` (a stacked frame or :class:`PerQueryCodes`) as codes, checked."""
    codes = per_query if isinstance(per_query, PerQueryCodes) \
        else PerQueryCodes.from_frame(per_query)
    codes.check()
    return codes


def _align_weights(weights, qids: list[str]):
    if weights is None:
        return None
    w = pd.Series(weights, dtype=np.float64)
    w.index = w.index.astype(str)
    missing = [q for q in qids if q not in w.index]
    if missing:
        raise InputError("a query has no traffic weight", item=f"query {missing[0]}")
    return w.reindex(qids).to_numpy()


def _inferred(measure: str) -> bool:
    """True for a measure read from inclusion probabilities (xinfAP, infNDCG)."""
    from relgrade.evaluation.measures import parse_measure

    try:
        return parse_measure(measure).needs_inclusion
    except InputError:  # a name of a measure table relgrade does not define
        return False


# --- the work units ------------------------------------------------------------------

def _bounds(measure: str, *, difference: bool = False):
    """The range a mean of ``measure`` can take ([0, 1] for nDCG, recall ...), or that a
    difference of two such means can ([-1, 1]); None for a count or an unparsed name."""
    try:
        r = value_range(measure)
    except InputError:
        return None
    if r is None:
        return None
    return (r[0] - r[1], r[1] - r[0]) if difference else r


def _arm_results(measure, arms, matrix, weights, res, s: Settings):
    """Intervals and power of every arm on one measure, from the plan's resamples ``res``
    (a :class:`relgrade.evaluation.planned.Resampled`; None when every arm is constant)."""
    n = matrix.shape[1]
    means = stats.weighted_mean(matrix, weights)
    flat = matrix.min(axis=1) == matrix.max(axis=1)
    rule = [stats.rule_method(row) if s.method == "auto" else s.method for row in matrix]
    jk = stats.jackknife_means(matrix, weights)
    se = stats.standard_error(matrix, weights)
    out = []
    for i, arm in enumerate(arms):
        if flat[i]:
            ci = stats.degenerate_interval(float(matrix[i, 0]), n, s.level)
        elif rule[i] == "t":
            ci = stats.t_interval(matrix[i], level=s.level, weights=weights)
        elif rule[i] == "bootstrap-t":
            boot, studentized = res.arm_studentized(i, float(means[i]))
            ci = stats._bootstrap_t_interval(float(means[i]), float(se[i]),
                                             studentized[: s.n_resamples], s.level, n,
                                             boot[: s.n_resamples])
        else:
            ci = stats.interval_from_resamples(res.arm_means(i, s.n_resamples),
                                               float(means[i]), level=s.level,
                                               method=rule[i], jackknife=jk[i], n=n)
        if s.method == "auto" and not flat[i]:
            ci = replace(ci, notes=(stats.RULE_NOTE,) + ci.notes)
        ci = stats.clip_to_range(ci, _bounds(measure))
        pw = stats.power_analysis(se=ci.se, n=n, reference=float(means[i]),
                                  relative_change=s.min_relative_change, power=s.power,
                                  alpha=s.alpha, nonzero=stats.off_mode(matrix[i]),
                                  min_nonzero=s.power_min_nonzero)
        pw = replace(pw, notes=pw.notes + ("standard error of the arm's own mean, standing in "
                                           "for that of a paired difference",))
        out.append((arm, ci, pw))
    return out


def _pair_rules(d: np.ndarray, s: Settings) -> tuple[str, bool]:
    """(the interval's method, whether the mean test takes the studentized bootstrap)."""
    used = stats.rule_method(d) if s.method == "auto" else s.method
    test_bt = bool(d.any()) and d.size >= 2 and not stats._constant(d) and \
        stats.rule_method(d) == "bootstrap-t"
    return used, test_bt


def _segment_rule(d: np.ndarray, s: Settings) -> str:
    """How one group's difference interval is made: ``"degenerate"``, ``"t"``,
    ``"bootstrap-t"``, ``"bca"`` or ``"percentile"``."""
    if d.min() == d.max():
        return "degenerate"
    if s.method in ("bca", "percentile"):
        return s.method
    return stats.rule_method(d) if s.method == "auto" else s.method


def _difference_interval(d, w, rule, res, i, j, s: Settings, boot=None) -> stats.Interval:
    """The interval of the differences ``d = v_i - v_j`` by ``rule`` (one of
    :func:`stats.difference_interval`'s definitions, "degenerate" when ``d`` is constant, or
    :func:`stats.bootstrap_ci`'s under ``metrics.interval`` bca/percentile), read off the
    plan's resamples ``res``; ``boot``, the resampled means when the caller already has them.
    Unclipped: the caller clips to the measure's range where it reports one."""
    n = d.size
    if rule == "degenerate":
        return stats.degenerate_interval(float(d[0]), n, s.level)
    est = float(stats.weighted_mean(d, w))
    if rule == "t":
        ci = stats.t_interval(d, level=s.level, weights=w)
    elif rule == "bootstrap-t":
        sb, st = res.pair_studentized(i, j, est)
        ci = stats._bootstrap_t_interval(est, float(stats.standard_error(d, w)),
                                         st[: s.n_resamples], s.level, n,
                                         sb[: s.n_resamples])
    else:
        if boot is None:
            boot = res.pair_means(i, j, s.n_resamples)
        ci = stats.interval_from_resamples(boot, est, level=s.level, method=rule,
                                           jackknife=stats.jackknife_means(d, w), n=n)
    if s.method == "auto":
        ci = replace(ci, notes=(stats.RULE_NOTE,) + ci.notes)
    return ci


def _sign_flip(d, weights, res, i, j, s: Settings) -> stats.SignFlip:
    """The paired sign-flip test of ``d = v_i - v_j``: exact (enumerated) up to
    :data:`stats.EXACT_MAX_N` non-zero differences, else read off the plan's shared sign
    patterns, ``p = (b + 1) / (P + 1)``."""
    x = d if weights is None else d * weights
    x = x[x != 0.0]
    if x.size <= stats.EXACT_MAX_N:
        # exact: every pattern enumerated, no draws (the generator is never used)
        return stats.sign_flip_test(d, rng=np.random.default_rng(0),
                                    n_permutations=s.n_permutations, weights=weights)
    tol = stats.TIE_RTOL * float(np.abs(x).sum())
    observed = abs(float(x.sum()))
    b = int((np.abs(res.flip_sums(i, j)) >= observed - tol).sum())
    return stats.SignFlip((b + 1) / (s.n_permutations + 1), "monte-carlo",
                          int(s.n_permutations), b)


def _pair_result(arm_a, arm_b, i, j, measure, matrix, weights, groups, res, seg_res,
                 s: Settings) -> PairResult:
    """One comparison, every number read off the shared plan's resamples.

    ``res`` is the measure's :class:`~relgrade.evaluation.planned.Resampled` on the query
    set's plan; ``seg_res`` maps a query group to (its query mask, its Resampled).
    """
    va, vb = matrix[i], matrix[j]
    d = va - vb
    n = d.size
    est = float(stats.weighted_mean(d, weights))
    notes = []
    used, test_bt = _pair_rules(d, s)
    if d.min() == d.max():
        ci = stats.degenerate_interval(float(d[0]), n, s.level)
        p_boot = 1.0 if d[0] == 0 else 1.0 / (s.n_resamples + 1)
    else:
        boot = res.pair_means(i, j, s.n_resamples)
        ci = _difference_interval(d, weights, used, res, i, j, s, boot=boot)
        ci = stats.clip_to_range(ci, _bounds(measure, difference=True))
        p_boot = stats.bootstrap_p_value(boot, est)
    flip = _sign_flip(d, weights, res, i, j, s)
    if test_bt:
        t_obs = est / float(stats.standard_error(d, weights))
        t = res.pair_studentized(i, j, est)[1][: s.n_permutations]
        b = int((np.abs(t) >= abs(t_obs) * (1 - stats.TIE_RTOL)).sum())
        test = stats.MeanTest((b + 1) / (t.size + 1), "bootstrap-t", t_obs, int(t.size))
    else:
        # t, or no spread: no resample is read (the generator is never used)
        test = stats.mean_test(d, rng=np.random.default_rng(0),
                               n_permutations=s.n_permutations, weights=weights)
    tt = stats.paired_t_test(va, vb)
    dz = stats.cohens_dz(d)
    if weights is not None:
        notes.append("t test and d_z are unweighted; the interval and the randomization test "
                     "use the traffic weights")
    if s.test == "sign-flip":
        notes.append("verdict test: the sign-flip randomization test, which assumes each "
                     "query's difference is symmetric about 0 under the null "
                     "(metrics.test: sign-flip)")
    mean_b = float(stats.weighted_mean(vb, weights))
    pw = stats.power_analysis(se=ci.se, n=n, reference=mean_b,
                              relative_change=s.min_relative_change, power=s.power, alpha=s.alpha,
                              nonzero=stats.nonzero(d), min_nonzero=s.power_min_nonzero)
    segments = []
    for label, (sel, sres) in seg_res.items():
        w = None if weights is None else weights[sel]
        seg = _difference_interval(d[sel], w, _segment_rule(d[sel], s), sres, i, j, s)
        segments.append(Segment(label, seg))
    cancel = (any(x.delta.low > 0 for x in segments) and any(x.delta.high < 0 for x in segments))
    if _inferred(measure):
        notes.append(INFERRED_NOTE)
    return PairResult(arm_a, arm_b, measure, float(stats.weighted_mean(va, weights)), mean_b,
                      ci, p_boot, flip, tt, dz, pw, tuple(segments), cancel, alpha=s.alpha,
                      notes=tuple(notes), test=test, verdict_test=s.test)


def _plans_and_resamples(values: dict, weights, arms: list[str], idx_pairs: list,
                         s: Settings, workers: int):
    """Draw one plan per query-set size (and one per query group for the segments), lay out
    every measure's columns and multiply each plan once.

    Returns
    -------
    main : dict measure -> Resampled (None when nothing is resampled)
    segs : dict measure -> {group: (mask, Resampled)}
    plans : list of ResamplePlan (what the report records)
    """
    main_tables: dict = {}
    seg_tables: dict = {}
    for m, (qids, groups, mat) in values.items():
        w = _align_weights(weights, qids)
        rules = [stats.rule_method(r) if s.method == "auto" else s.method for r in mat]
        arm_sq = tuple(i for i, r in enumerate(rules) if r == "bootstrap-t"
                       and mat[i].min() != mat[i].max())
        pair_sq = []
        for i, j in idx_pairs:
            d = mat[i] - mat[j]
            if d.min() == d.max():
                continue
            used, test_bt = _pair_rules(d, s)
            if used == "bootstrap-t" or test_bt:
                pair_sq.append((i, j))
        main_tables.setdefault(mat.shape[1], []).append(
            (m, planned.Columns(mat, w, arm_sq, tuple(pair_sq))))
        labels = sorted(set(groups))
        if len(labels) > 1 and idx_pairs:
            g = np.asarray(groups)
            for label in labels:
                sel = g == label
                sub = mat[:, sel]
                wsub = None if w is None else w[sel]
                sq = tuple((i, j) for i, j in idx_pairs
                           if _segment_rule(sub[i] - sub[j], s) == "bootstrap-t")
                seg_tables.setdefault((label, int(sel.sum())), []).append(
                    (m, sel, planned.Columns(sub, wsub, (), sq)))
    main: dict = {}
    segs: dict = {m: {} for m in values}
    plans = []
    rows = max(s.n_resamples, s.n_permutations)
    for n, items in sorted(main_tables.items()):
        plan = ResamplePlan(s.seed, n, rows, s.n_permutations, scope="queries")
        plans.append(plan)
        res = planned.apply(plan, [c for _, c in items], flips=bool(idx_pairs),
                            workers=workers)
        main.update({m: r for (m, _), r in zip(items, res)})
    for (label, n), items in sorted(seg_tables.items()):
        plan = ResamplePlan(s.seed, n, s.n_resamples, 1, scope=f"segment:{label}")
        plans.append(plan)
        res = planned.apply(plan, [c for _, _, c in items], flips=False, workers=workers)
        for (m, sel, _), r in zip(items, res):
            segs[m][label] = (sel, r)
    return main, segs, plans


def compare_arms(per_query: pd.DataFrame | PerQueryCodes, *, settings: Settings,
                 pairs: Iterable[tuple[str, str]] | None = None,
                 measures: Sequence[str] | None = None, weights=None,
                 workers: int | None = None) -> Comparison:
    """Per-arm intervals and every paired comparison of an experiment.

    Parameters
    ----------
    per_query : pandas.DataFrame of shape (n_rows, 5), or PerQueryCodes
        ``arm`` (str), ``query_id`` (str), ``group`` (str, optional: one group when
        absent), ``measure`` (str), ``value`` (float): the metrics stage's per-query files
        stacked, or the same rows coded
        (:class:`relgrade.evaluation.per_query_codes.PerQueryCodes`, as the stage reads
        them). Every arm needs a value for every query a measure is defined on. Not
        modified.
    settings : Settings
        Seed, resamples, permutations, level, alpha, power, baseline (see
        :meth:`relgrade.experiment.params.Params.compare_settings`).
    pairs : iterable of (str, str), optional
        Comparisons to make, "A against B"; default :func:`design_pairs` from the settings.
    measures : sequence of str, optional
        Measures to compare; default every measure in the table except Judged@k.
    weights : mapping or pandas.Series, optional
        Traffic weight per query id; every mean, resample and sign-flip sum is then
        weighted.
    workers : int, optional
        Threads the resample plan's block products are spread over (the statistics read
        off them are cheap and run in the caller's thread); default 1 for small work, else
        the CPU count (at most 8). Results are identical for any value.

    Returns
    -------
    Comparison

    Raises
    ------
    InputError
        A column is missing, a value is not finite, a (arm, query, measure) is duplicated or
        missing, an arm of ``pairs`` has no values, a measure is unknown, the baseline is
        not an arm.

    Notes
    -----
    Holm's adjustment (``statsmodels.stats.multitest.multipletests``) runs over the verdict
    test's p-values of every comparison made here (all pairs x all measures): the mean
    test (:func:`relgrade.evaluation.stats.mean_test`, null: the mean difference is 0) by
    default, the sign-flip randomization test with ``settings.test == "sign-flip"`` (null:
    each difference symmetric about 0); a comparison is significant when its adjusted
    p-value is at most ``settings.alpha``. Intervals follow ``settings.method``
    (``"auto"``: :func:`relgrade.evaluation.stats.difference_interval`'s rule), and power
    figures are given only when at least ``settings.power_min_nonzero`` differences are
    non-zero. Segment
    cancellation is flagged when one query group's difference interval lies wholly above 0
    and another's wholly below (the groups' intervals are not Holm-adjusted).
    """
    codes = _coded(per_query)
    arms = list(codes.arms)
    if not arms:
        raise InputError("per-query table is empty", fix="run the metrics stage first")
    all_measures = list(codes.measures)
    if measures is None:
        measures = [m for m in all_measures if not m.startswith(NOT_COMPARED)]
    else:
        measures = [str(m) for m in measures]
        unknown = [m for m in measures if m not in all_measures]
        if unknown:
            from relgrade.evaluation.measures import suggest_measure

            near = suggest_measure(unknown[0], known=all_measures)
            raise InputError("measure not in the per-query table", item=unknown[0],
                             fix=(f"Did you mean {near}? " if near else "")
                             + "Use one of " + ", ".join(all_measures))
    if pairs is None:
        pairs = design_pairs(arms, baseline=settings.baseline, mode=settings.pairs)
    pairs = [(str(a), str(b)) for a, b in pairs]
    for a, b in pairs:
        for arm in (a, b):
            if arm not in arms:
                raise InputError("arm has no per-query values", item=arm,
                                 fix="run the metrics stage for it, or check the name; arms: "
                                     + ", ".join(arms))
        if a == b:
            raise InputError("an arm cannot be compared with itself here", item=a)
    values = {}
    for m in measures:
        values[m] = codes.matrix(m, arms)
    idx_pairs = [(arms.index(a), arms.index(b)) for a, b in pairs]
    if workers is None:
        work = sum(len(values[m][0]) for m in measures) * len(arms) * \
            (settings.n_resamples + settings.n_permutations)
        workers = 1 if work < PARALLEL_MIN_WORK else min(os.cpu_count() or 1, 8)
    main, segs, plans = _plans_and_resamples(values, weights, arms, idx_pairs, settings,
                                             int(workers))
    intervals, arm_power = {}, {}
    by_measure = {}
    for m in measures:
        qids, _, mat = values[m]
        by_measure[m] = _arm_results(m, arms, mat, _align_weights(weights, qids), main[m],
                                     settings)
    for arm in arms:
        for m in measures:
            for a, ci, pw in by_measure[m]:
                if a == arm:
                    intervals[(arm, m)] = ci
                    arm_power[(arm, m)] = pw
    pair_results = []
    for m in measures:
        qids, groups, mat = values[m]
        w = _align_weights(weights, qids)
        for (a, b), (i, j) in zip(pairs, idx_pairs):
            pair_results.append(_pair_result(a, b, i, j, m, mat, w, groups, main[m], segs[m],
                                             settings))
    if pair_results:
        _, adjusted, _, _ = multipletests([p.p_test for p in pair_results],
                                          method="holm")
        pair_results = [replace(p, p_holm=float(h), significant=bool(h <= settings.alpha),
                                family=len(pair_results))
                        for p, h in zip(pair_results, adjusted)]
    return Comparison(settings, arms, list(measures), intervals, arm_power, pair_results,
                      values=values, plans=[p.to_dict() for p in plans],
                      unweighted=None if weights is None else {
                          (arm, m): float(values[m][2][i].mean())
                          for m in measures for i, arm in enumerate(arms)})


def full_report(per_query: pd.DataFrame | PerQueryCodes, *, settings: Settings, qrels: pd.DataFrame | None = None,
                runs: pd.DataFrame | None = None, provenance=None,
                depth: int | None = None, cutoffs: Sequence[int] = (),
                grades: pd.DataFrame | None = None, audit_queries: Sequence[str] | None = None,
                auditor: str | None = None, round: int = 1,  # noqa: A002
                ties: str = "score", relevant_min: int = 1, weights=None,
                pairs: Iterable[tuple[str, str]] | None = None,
                measures: Sequence[str] | None = None, workers: int | None = None,
                record: dict | None = None,
                inclusion: pd.DataFrame | None = None,
                blocks: Callable[[], Iterable[tuple[pd.DataFrame, pd.DataFrame]]] | None = None,
                run_arms: Sequence[str] | None = None,
                progress: Callable[[str], None] | None = None) -> Comparison:
    """:func:`compare_arms`, plus the pool-bias checks and the label-noise band.

    Parameters
    ----------
    per_query, settings, pairs, measures, weights, workers
        As for :func:`compare_arms`.
    progress : callable, optional
        Called with the name of each of the three steps as it starts (paired comparisons,
        pool bias, label noise), e.g. to print a progress line.
    qrels : pandas.DataFrame, optional
        The frozen key (``query_id``, ``chunk_id``, ``grade``).
    runs : pandas.DataFrame, optional
        Stacked runs (``arm``, ``query_id``, ``chunk_id``, ``rank``, ``score``).
    provenance : pandas.DataFrame or callable, optional
        Pool provenance; with ``qrels``, ``runs`` and ``depth`` it enables the pool-bias
        checks (:func:`relgrade.evaluation.poolbias.pool_bias_report`). With ``blocks``, a
        callable giving its blocks of whole queries.
    depth : int, optional
        Pool depth (params ``pool.depth``).
    cutoffs : sequence of int
        The k of judged@k (params ``metrics.cutoffs``).
    grades : pandas.DataFrame, optional
        The long grades table; with ``qrels``, ``runs``, ``audit_queries`` and ``auditor``
        it enables the label-noise band (:mod:`relgrade.evaluation.noise`).
    audit_queries : sequence of str, optional
        The audit sample.
    auditor : str, optional
        The auditor's grader name (params ``grading.auditor``).
    round : int, default 1
        Grading round (params ``grading.round``).
    ties : {"score", "rank"}, default "score"
        Run tie rule (params ``runs.ties``).
    relevant_min : int, default 1
        Lowest relevant grade (params ``scale.relevant_min``).
    record : dict, optional
        ``key_sha256``, ``pool_version``, ``post_hoc`` of the key the values come from.
    inclusion : pandas.DataFrame, optional
        A sampled pool's inclusion probabilities (``query_id``, ``chunk_id``,
        ``inclusion_prob``: the pool table, params ``paths.pool``), needed when the
        per-query table holds inferred measures (xinfAP, infNDCG) and the label-noise band
        is computed: the auditor's key is scored on the same sample.
    blocks : callable, optional
        The pool-bias checks a block of whole queries at a time
        (:func:`relgrade.evaluation.poolbias.pool_bias_blocks`), so the whole key and
        provenance are never held: ``blocks()`` gives ``(key rows, run rows)`` per block,
        and ``provenance`` is then a callable giving the provenance's blocks of whole
        queries. ``qrels`` may then hold the audit queries' rows alone (the label-noise band
        reads no others).
    run_arms : sequence of str, optional
        With ``blocks``: the arms whose run has a row, sorted (as ``runs``' ``arm`` column
        would list them), when ``runs`` holds only the audit queries' rows (the label-noise
        band reads no others) and ``blocks()`` gives every run row.

    Returns
    -------
    Comparison
        With ``pool_bias`` and ``noise`` filled when their inputs were given, and each
        comparison's ``noise`` set where the audit sample defines it.

    Notes
    -----
    Inferred measures (xinfAP, infNDCG, from a sampled tail) are compared with the same
    paired statistics as the others: each query's value is an unbiased estimate of its
    value on the whole pool, both arms are scored on the one sample, and the estimate's
    sampling error is part of the between-query spread the bootstrap and the sign-flip test
    resample. Each such comparison carries :data:`INFERRED_NOTE`. The pool-bias checks
    leave them out (``pool_bias["not_checked"]``, with :data:`INFERRED_POOL_BIAS_NOTE`):
    removing an arm's pairs or condensing a run changes the sampled strata, which the
    recorded inclusion probabilities no longer describe.

    Raises
    ------
    InputError
        As :func:`compare_arms`, :mod:`relgrade.evaluation.poolbias` and :mod:`relgrade.evaluation.noise`.
    """
    from relgrade.evaluation import metrics, noise, poolbias

    def step(what: str) -> None:
        if progress is not None:
            progress(what)

    step("paired comparisons (bootstrap intervals, sign-flip tests)")
    per_query = _coded(per_query)  # coded once, for the comparisons and the band
    result = compare_arms(per_query, settings=settings, pairs=pairs, measures=measures,
                          weights=weights, workers=workers)
    result.record = record
    inferred = [m for m in result.measures if _inferred(m)]
    step("pool bias (each arm's pairs left out in turn)")
    if blocks is not None and provenance is not None and runs is not None \
            and depth is not None:
        checked = [m for m in result.measures if m not in inferred]
        # each provenance block's unique pairs, read beside the key's blocks: never all
        pairs_unique = (poolbias.unique_contributions(part, depth=int(depth))
                        for part in provenance())
        result.pool_bias = poolbias.pool_bias_blocks(
            blocks(), unique=pairs_unique,
            arms=(list(run_arms) if run_arms is not None
                  else sorted(runs["arm"].astype(str).unique())),
            depth=int(depth), measures=checked, cutoffs=list(cutoffs), ties=ties,
            relevant_min=relevant_min)
        del pairs_unique
        if inferred:
            result.pool_bias["not_checked"] = {"measures": inferred,
                                               "note": INFERRED_POOL_BIAS_NOTE}
    elif qrels is not None and runs is not None and provenance is not None \
            and depth is not None:
        result.pool_bias = poolbias.pool_bias_report(
            qrels=qrels, runs=runs, provenance=provenance, depth=int(depth),
            measures=[m for m in result.measures if m not in inferred], cutoffs=list(cutoffs),
            ties=ties, relevant_min=relevant_min)
        if inferred:
            result.pool_bias["not_checked"] = {"measures": inferred,
                                               "note": INFERRED_POOL_BIAS_NOTE}
    step("label noise (the auditor's key on the audit queries)")
    if (qrels is not None and runs is not None and grades is not None and audit_queries
            and auditor):
        audit = sorted({str(q) for q in audit_queries})
        akey, info = noise.auditor_key(key=qrels, grades=grades, audit_queries=audit,
                                       auditor=auditor, round=round)
        akey = akey[akey["query_id"].isin(audit)]
        arun = runs[runs["query_id"].astype(str).isin(audit)]
        aud_pq = metrics.per_query(qrels=akey, run=arun, measures=result.measures, ties=ties,
                                   relevant_min=relevant_min,
                                   inclusion=inclusion if inferred else None)
        # the grader's values of the compared measures (the band reads no others)
        grader_pq = per_query.frame(result.measures)
        w = None if weights is None else {str(k): float(v) for k, v in dict(weights).items()}
        bands = noise.noise_deltas(grader=grader_pq, auditor=aud_pq,
                                   comparisons=[p.key for p in result.pairs], weights=w)
        result.pairs = [replace(p, noise=bands.get(p.key)) for p in result.pairs]
        result.noise = {"auditor": str(auditor), "round": int(round), **info,
                        "orderings": noise.orderings(grader=grader_pq, auditor=aud_pq,
                                                     measures=result.measures, weights=w)}
    return result
