"""Stage `ppi`: model key on every query + people on the human sample → prediction-powered
estimates, the judge audit and the judging-budget curve (``grading.mode: ppi``).

Reads the metrics stage's per-query values under the frozen key (the model grader's:
``paths.per_query/ARM.parquet``), scores every arm on the human-sample queries under the
human key (the auditor's grades of the round, with the metrics stage's own scorer,
:func:`relgrade.evaluation.metrics.evaluate_arm`), and writes ``paths.ppi`` (small, in git):

* per measure (``ppi.measures``, default ``metrics.primary``), per arm and per paired
  difference (the comparisons ``metrics.pairs`` makes, as the compare stage, with Holm over
  them): PPI++, human-only and model-only, labelled
  (:func:`relgrade.evaluation.ppi_table.ppi_table`);
* the judge audit per arm (:func:`relgrade.evaluation.judge_audit.judge_audit`);
* the judging-budget curve on the human sample (:func:`relgrade.evaluation.budget.budget_curve`),
  also as the plot table ``paths.ppi_budget`` (one row per budget, one column per strategy
  and statistic);
* per measure, the rank-sets of the arms on the PPI++ estimates
  (:func:`relgrade.evaluation.ranksets.ppi_rank_sets`: each arm's rank interval with
  simultaneous coverage at ``ppi.level``, ``metrics.bootstrap`` resamples from the stream
  "ppi-rank-sets" of params ``seed``);
* the design: the sample, its seed, the rectifier and every lambda; with a locked sample
  smaller than :data:`relgrade.evaluation.ppi_table.RECOMMENDED_SAMPLE` queries also
  ``small_sample`` (its size, the recommendation and the warning's words, naming
  :func:`larger_sample_fix`), which the stage prints and the report shows under its
  verdicts (a warning, not a refusal);
* with params ``grading.stop: anytime``, the stopping rule's look (``stop``): people grade the
  sample in the seeded order of ``paths.stop``; the stage reads only the queries owed so far,
  and either stops with the next batch owed or, once every comparison is settled, says
  "settled at N of M queries" and estimates on those N queries (see :func:`_look`).

When the key grader's probe report ``judges/probe-GRADER.json`` exists (``relgrade judge
probe``), measured under the key grader's judge identity now and on the rubric now, the
paraphrase component of each arm's per-query metric and of each paired difference's is
measured on its paraphrase answers (:mod:`relgrade.evaluation.ppi_paraphrase`, metric units)
and, with params ``judges.probe.widen`` (the default), every PPI++ interval is widened by
it (:func:`relgrade.evaluation.ppi_table.widen_block`); ``paraphrase`` in the output records
the report's sha256, the components and whether it widened. A report of another identity
or rubric is recorded as ignored, with the reason. Without a report nothing changes.

A model key grader whose judge identity has no calibration against people in the judges'
ledger, or a stale one, is pending work: printed after the estimates, or, with params
``judges.require_calibration``, the stage stops before it writes anything (exit 3).

A query with no relevant chunk under a key has no nDCG in the per-query table: it counts 0
here, as a query missing from a run does (the estimand is the mean over every pool query).

The human key is under the void rule (:mod:`relgrade.protocol.ledger`): before ``paths.ppi``
is written, its use for the frozen key's (pool version, rubric version, round) goes to the
ledger (``paths.ledger``, ``"kind": "ppi-human"``), the key, what each grade was made on and
a record of the use kept beside it (:meth:`~relgrade.experiment.files.Experiment.human_key_files`:
the record witnesses the use if the ledger loses it). ``paths.ppi`` is unchanged by this,
except for a post-hoc human key. A different human key for
the same triple is refused before anything is estimated (``void:``, naming the ledger and the
pairs that changed), unless it is a revision (every changed pair regraded on changed
content, :func:`relgrade.protocol.key.revision_pairs`) or params set ``grading.post_hoc``,
which labels the output ``post_hoc: true`` (with a note and the ``human_key_sha256`` used).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from relgrade.errors import InputError, PendingWork
from relgrade.evaluation import anytime, budget, judge_audit, metrics, pooled, ppi_table, \
    ranksets
from relgrade.evaluation.ppi import MIN_SAMPLE
from relgrade.evaluation.ppi_paraphrase import metric_prompt_variances, paraphrase_metric_cells
from relgrade.evaluation.settings import design_pairs
from relgrade.experiment.calibration import PENDING_GOES_ON, owed_calibrations
from relgrade.experiment.layout import grade_commands, packets_build_command
from relgrade.experiment.probe_report import ppi_paraphrase_source, prompt_draws
from relgrade.io import files as io
from relgrade.protocol import key as key_mod
from relgrade.protocol import ledger, stopping
from relgrade.io.runs import read_run
from relgrade.pipeline.cost import people_seconds
from relgrade.pipeline.stages.audit import check_sample_lock, locked_design, params_shown, \
    sample_design
from relgrade.rng import stage_rng

#: The statistics of the plot table, per strategy.
PLOT_STATS = {"kendall_tau": "tau", "top_half_tau": "top_half_tau",
              "verdicts_preserved": "verdicts", "annotator_hours": "hours",
              "judged_fraction": "judged_fraction"}


def _clean(x):
    """JSON-ready: NaN and infinity as None, numpy scalars as Python numbers."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def human_sample_ids(ex, pool_queries, *, minimum: int = 2) -> list[str]:
    """The locked human sample, checked to be queries of the pool.

    ``minimum`` is the least sample size; the stage passes
    :data:`relgrade.evaluation.ppi.MIN_SAMPLE` (3, whatever ``ppi.interval``).

    Raises
    ------
    InputError
        A sampled query is not in the pool (the lock names it, the pool does not), the
        sample holds fewer than ``minimum`` queries, or params (``seed``,
        ``ppi.human_fraction``, ``ppi.human_queries``) no longer draw the locked sample
        (:func:`relgrade.pipeline.stages.audit.check_sample_lock`).
    """
    lock_path = ex.path("audit_lock")
    lock = io.read_json(lock_path)
    if not check_sample_lock(ex, lock, path=lock_path):
        raise InputError("params no longer draw the locked human sample", path=lock_path,
                         found=f"locked with {locked_design(lock)}; params now give "
                               f"{sample_design(ex)}",
                         fix="run the audit stage first (dvc repro): nothing is graded yet, "
                             "so it draws the sample again")
    ids = [str(q["query_id"]) for q in lock["queries"]]
    outside = sorted(set(ids) - set(pool_queries))
    if outside:
        raise InputError("the human sample must be a subset of the pool's queries",
                         path=lock_path, found=", ".join(outside[:5]),
                         fix="draw the sample again from the current pool "
                             "(`relgrade audit redraw`, or a new grading.round)")
    if len(ids) < minimum:
        cfg, rnd = ex.params.need("ppi"), ex.params.grading.round
        key = "ppi.human_fraction" if cfg.human_fraction is not None else "ppi.human_queries"
        raise InputError(
            f"the ppi stage needs a human sample of at least {minimum} queries (its intervals "
            f"and rank-sets), and round {rnd}'s sample is locked", path=lock_path,
            found=str(len(ids)),
            fix=f"The sample of a round cannot grow once drawn: start a new round, with "
                f"grading.round: {rnd + 1} and a {key} in {params_shown(ex)} that gives at "
                f"least {minimum} queries (its sample is drawn before the model grades it)")
    return sorted(ids)


def larger_sample_fix(ex) -> str:
    """How to get a larger human sample, as the sample lock allows: a new round.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        In ppi mode (params ``grading.round``, ``ppi``).

    Returns
    -------
    str
        The fix of the ppi table's refusals (a sample too small, an arm with the same value on
        every sampled query), naming the params key in use with its value and the file as
        typed at the repository's top: a round's sample is locked once drawn, so a larger one
        is a new ``grading.round`` whose sample is drawn before the model grades it.
    """
    cfg, rnd = ex.params.need("ppi"), ex.params.grading.round
    key, now = (("ppi.human_fraction", f"{cfg.human_fraction:g}")
                if cfg.human_fraction is not None
                else ("ppi.human_queries", str(cfg.human_queries)))
    return (f"Round {rnd}'s human sample is locked (raising {key} alone is refused), so a "
            f"larger sample is a new round: set grading.round: {rnd + 1} and a larger {key} "
            f"(now {now}) in {params_shown(ex)}; its sample is drawn before the model grades "
            f"that round, and round {rnd}'s grades stay in git")


def small_sample_record(ex, n: int) -> dict | None:
    """The design's warning for a locked human sample smaller than docs/ppi.md recommends.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        In ppi mode.
    n : int
        Queries in the round's locked human sample.

    Returns
    -------
    dict or None
        ``{"n", "recommended", "words"}`` (``words``:
        :func:`relgrade.evaluation.ppi_table.small_sample_words` with
        :func:`larger_sample_fix`) when ``n`` is below
        :data:`relgrade.evaluation.ppi_table.RECOMMENDED_SAMPLE`, else None (nothing is
        recorded, so a sample of the recommended size leaves ``ppi.json`` as it was).
    """
    words = ppi_table.small_sample_words(n, fix=larger_sample_fix(ex))
    if words is None:
        return None
    return {"n": int(n), "recommended": ppi_table.RECOMMENDED_SAMPLE, "words": words}


def human_grades(ex, sample) -> pd.DataFrame:
    """The human key of the sample: the human grader's grades of the round on its queries.

    Returns
    -------
    pandas.DataFrame
        ``query_id``, ``chunk_id``, ``grade``, one row per pair.

    Raises
    ------
    InputError
        A sampled query has no grade of the human grader.
    """
    auditor, rnd = ex.params.need("grading.auditor"), ex.params.grading.round
    grades = io.read_table(ex.path("grades"),
                           columns=["query_id", "chunk_id", "grader", "round", "grade"])
    human = grades[(grades["grader"] == auditor) & (grades["round"] == rnd)
                   & grades["query_id"].astype(str).isin(sample)]
    human = human[["query_id", "chunk_id", "grade"]].drop_duplicates(["query_id", "chunk_id"])
    missing = sorted(set(sample) - set(human["query_id"].astype(str)))
    if missing:
        raise InputError("every human-sample query needs the human grader's grades",
                         path=ex.path("grades"), item=f"grader {auditor}",
                         found=f"none for {', '.join(missing[:5])}",
                         fix=f"grade the sample: relgrade grade run --grader {auditor}")
    return human


def _wide(tables: dict, measure: str, queries: list[str]) -> pd.DataFrame:
    rows = {}
    for arm, t in tables.items():
        t = t[t["measure"] == measure]
        rows[arm] = pd.Series(t["value"].to_numpy(dtype=float),
                              index=t["query_id"].astype(str)).reindex(queries).fillna(0.0)
    return pd.DataFrame.from_dict(rows, orient="index", columns=queries)


def _rank_sets(model: pd.DataFrame, human: pd.DataFrame, measure: str, *, seed: int,
               level: float, n_resamples: int) -> dict:
    """The arms' rank-sets on the PPI++ estimates of one measure (arms in the tables' order);
    one stream per measure, so adding a measure moves no other measure's sets."""
    r = ranksets.ppi_rank_sets(human.to_numpy(dtype=float),
                               model[list(human.columns)].to_numpy(dtype=float),
                               model.to_numpy(dtype=float),
                               rng=stage_rng(seed, f"ppi-rank-sets {measure}"), level=level,
                               n_resamples=n_resamples)
    return {"measure": measure, "method": ranksets.METHOD_PPI, "queries": int(model.shape[1]),
            "human_queries": int(human.shape[1])} | r.to_dict(list(model.index)) | {
                "seed": seed, "stream": f"ppi-rank-sets {measure}"}


def _plot_table(curve: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({"budget": sorted(curve["budget"].unique())})
    for s, part in curve.groupby("strategy", sort=True):
        part = part.set_index("budget")
        for col, short in PLOT_STATS.items():
            out[f"{s}_{short}"] = out["budget"].map(part[col])
    return out


def first_reaching(curve: pd.DataFrame, *, tau: float = 0.9) -> dict:
    """Per strategy, the first budget whose Kendall tau reaches ``tau`` (None if none)."""
    out = {}
    for s, part in curve.groupby("strategy", sort=True):
        ok = part[part["kendall_tau"] >= tau].sort_values("budget")
        out[s] = None if ok.empty else _clean(ok.iloc[0].drop("strategy").to_dict())
    return out


def _paraphrase_record(source: dict, components: dict, draws: int | None) -> dict:
    """The ``paraphrase`` entry of the output: the source report and, per measure, the
    components of each arm and each difference (metric units squared)."""
    out = {k: source[k] for k in ("source", "sha256", "judge", "used", "widen", "note")}
    out["widened"] = bool(source["used"] and source["widen"])
    if not source["used"]:
        return out
    out |= {"paraphrases": source["paraphrases"], "draws": draws,
            "probed_queries": int(source["answers"]["query_id"].nunique()),
            "probed_pairs": int(len(source["answers"].drop_duplicates(
                ["query_id", "chunk_id"]))),
            "components": {}}
    for m, c in components.items():
        out["components"][m] = {
            "arms": {a: e["components"] | {"prompt_variance": e["prompt_variance"]}
                     for a, e in c["arms"].items()},
            "differences": [{"arm_a": a, "arm_b": b} | e["components"]
                            | {"prompt_variance": e["prompt_variance"]}
                            for (a, b), e in c["differences"].items()]}
    return out


def run(ex):
    p = ex.params
    cfg, seed = p.need("ppi"), p.need("seed")
    key_grader, auditor, rnd = p.need("grading.key_grader"), p.need("grading.auditor"), \
        p.grading.round
    arms = sorted(map(str, p.need("arms")))
    measures = list(cfg.measures or [p.need("metrics.primary")])
    # stops here when calibration is required
    owed = owed_calibrations(ex, [key_grader], seconds_of=people_seconds(ex))
    key, record = ex.read_key()
    pool = io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    queries = sorted(set(pool["query_id"].astype(str)))
    sample = human_sample_ids(ex, queries, minimum=MIN_SAMPLE)
    small = small_sample_record(ex, len(sample))

    stop_record = None
    if p.grading.stop != "none":
        # people grade the sample in the record's seeded order: only the first queries of
        # it, up to this look (or as far as people graded ahead of it), are read
        stop_record = ex.stop_record(sample)
        stopping.check_unchanged(stop_record, margin=p.grading.stop_margin, level=cfg.level,
                                 seed=seed, path=ex.path("stop"))
        order = stopping.owed_queries(stop_record, batch=p.grading.stop_batch,
                                      graded=ex.stop_graded(sample))
        sample = sorted(order)
    human = human_grades(ex, sample)
    groups = io.read_table(ex.path("queries"), columns=["query_id", "group"])
    runs = {arm: read_run(ex.path("runs") / f"{arm}.trec") for arm in arms}
    model_tables, human_tables = {}, {}
    for arm in arms:
        path = ex.path("per_query") / f"{arm}.parquet"
        if not path.exists():
            raise InputError("per-query values missing", path=path, item=f"arm {arm}",
                             fix="Run the metrics stage first (dvc repro)")
        model_tables[arm] = io.read_table(path, columns=["query_id", "measure", "value"])
        run = runs[arm]
        _, table = metrics.evaluate_arm(
            key=human, run=run[run["query_id"].astype(str).isin(sample)],
            cutoffs=p.need("metrics").cutoffs, relevant_min=p.need("scale").relevant_min,
            ties=p.runs.ties, groups=groups)
        human_tables[arm] = table
    level, interval = cfg.level, cfg.interval
    # the comparisons the experiment makes (metrics.pairs), so that Holm's family is the
    # decision's: in ppi mode these differences decide (the compare stage reads them)
    settings = p.compare_settings()
    pairs = design_pairs(arms, baseline=settings.baseline, mode=settings.pairs)
    stop = None
    if stop_record is not None:
        stop = _look(ex, stop_record, order, human_tables, measures, pairs, level=level,
                     population=len(queries))
        # the estimates stand on the queries the rule read up to its stop; grades of the
        # sample beyond it stay in the bank, unused
        sample = sorted(stop["order"])
        human = human[human["query_id"].astype(str).isin(sample)]
        human_tables = {a: t[t["query_id"].astype(str).isin(sample)]
                        for a, t in human_tables.items()}
    # the void rule on the human key, before anything is estimated or written
    human_use = _human_key_use(ex, human, record)
    para = ppi_paraphrase_source(ex, key_grader)
    draws = prompt_draws(ex, key_grader, sample) if para and para["used"] else None
    components = {}
    estimates, rank_sets = {}, {}
    for m in measures:
        if not (model_tables[arms[0]]["measure"] == m).any():
            raise InputError("the measure is not among the metrics stage's measures",
                             path=p.source, item="ppi.measures", found=m,
                             fix="name a measure of metrics/arms/ARM.json")
        wide_model, wide_human = _wide(model_tables, m, queries), _wide(human_tables, m, sample)
        widen = None
        if para and para["used"]:
            cells = paraphrase_metric_cells(
                key, para["answers"], runs, measure=m, cutoffs=p.need("metrics").cutoffs,
                relevant_min=p.need("scale").relevant_min, ties=p.runs.ties, groups=groups)
            components[m] = metric_prompt_variances(cells, arms=arms, pairs=pairs,
                                                     n_queries=len(queries))
            if para["widen"]:
                c = components[m]
                widen = {"arms": {a: e["prompt_variance"] for a, e in c["arms"].items()},
                         "differences": {k: e["prompt_variance"]
                                         for k, e in c["differences"].items()}}
        estimates[m] = ppi_table.ppi_table(wide_model, wide_human, measure=m,
                                           level=level, interval=interval, pairs=pairs,
                                           prompt_variance=widen, draws=draws or 1,
                                           larger_sample=larger_sample_fix(ex))
        rank_sets[m] = _rank_sets(wide_model, wide_human, m, seed=seed, level=level,
                                  n_resamples=p.need("metrics").bootstrap)

    # the judge audit and the budget curve work on the depth-k pool as arrays
    k = cfg.judge_audit.k
    stacked = pd.concat([r.assign(arm=a) for a, r in runs.items()], ignore_index=True)
    arrays = pooled.pool_arrays(stacked, k=k)
    rows = [arrays.query_ids.index(q) for q in sample if q in arrays.query_ids]
    h_grades = pooled.grade_matrix(arrays, human)
    m_grades = pooled.grade_matrix(arrays, key)
    graders = p.graders_dict()
    families = {a: arm.family for a, arm in (p.arms or {}).items() if arm.family}
    audit = judge_audit.judge_audit(
        h_grades, m_grades, arrays.ranked, sample=np.array(rows), rng=stage_rng(seed, "ppi-audit"),
        arms=list(arrays.arms), families=families,
        model_family=graders.get(key_grader, {}).get("family"), k=k,
        max_spread=cfg.judge_audit.max_spread, n_resamples=cfg.judge_audit.bootstrap,
        alpha=1.0 - level)
    sub = np.array(rows)
    curve = budget.budget_curve(
        h_grades[sub], arrays.ranked[:, sub], model_grades=m_grades[sub],
        rng=stage_rng(seed, "ppi-budget"), fractions=cfg.budget.fractions, k=k,
        alpha=1.0 - level, seconds_per_judgment=p.cost.seconds_per_judgment)
    pool_pairs = int(len(pool))
    curve["pool_fraction"] = curve["judgments"] / pool_pairs
    lock = io.read_json(ex.path("audit_lock"))
    out = {
        "mode": "ppi",
        "key_sha256": record["key_sha256"], "pool_version": record["pool_version"],
        # a changed human key allowed by grading.post_hoc: every ppi number says so
        **({"post_hoc": True, "post_hoc_note": POST_HOC_NOTE,
            "human_key_sha256": human_use["sha256"]}
           if human_use["status"] == ledger.POST_HOC else {}),
        "design": {
            "model_grader": key_grader, "human_grader": auditor, "round": rnd,
            "human_sample": sample, "queries": len(queries),
            "human_fraction": cfg.human_fraction, "human_queries": cfg.human_queries,
            "seed": seed, "sample_stream": "ppi-sample", "sample_lock_sha256": lock["sha256"],
            "rectifier": ppi_table.rectifier(interval), "interval": interval,
            "interval_words": ppi_table.INTERVAL_WORDS[interval], "level": level,
            "zero_for_no_relevant": "a query with no relevant chunk under a key counts 0"}
        | ({"small_sample": small} if small is not None else {}),
        "estimates": estimates,
    } | ({"paraphrase": _paraphrase_record(para, components, draws)} if para else {}) | {
        "rank_sets": rank_sets,
        **({"stop": stop} if stop is not None else {}),
        "judge_audit": audit.to_dict() | {"k": k, "model_family":
                                          graders.get(key_grader, {}).get("family")},
        "budget": {"reference": f"the decision with every human judgment of the "
                                f"{len(sample)} human-sample queries",
                   "human_judgments": int(np.isfinite(h_grades[sub]).sum()),
                   "pool_pairs": pool_pairs,
                   "seconds_per_judgment": float(p.cost.seconds_per_judgment),
                   "tau_0.9": first_reaching(curve),
                   "curve": curve.to_dict(orient="records")},
    }
    _record_human_key(ex, human_use)  # the human key's use first, then the estimates
    io.write_json(ex.path("ppi"), _clean(out))
    table = _plot_table(curve)
    with io.atomic_path(ex.path("ppi_budget")) as tmp:
        table.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
    if small is not None:
        print(f"ppi: warning: {small['words']}")
    for m, est in estimates.items():
        for arm, row in est["arms"].items():
            e, mo, ho = row["ppi++"], row["model-only"], row["human-only"]
            print(f"ppi {m} {arm}: PPI++ {e['estimate']:.4f} [{e['low']:.4f}, {e['high']:.4f}] "
                  f"(lambda {e['lambda']:.2f}); model-only {mo['estimate']:.4f}; "
                  f"human-only {ho['estimate']:.4f} (n={e['n']}, N={e['N']})")
    if stop is not None:
        print(f"ppi: {stop['words']}")
        if stop["graded_beyond"]:
            k = len(stop["graded_beyond"])
            print(f"ppi: {k} more quer{'y' if k == 1 else 'ies'} of the sample graded beyond "
                  "the stop, kept in the bank, not used (the rule decides at its stop): "
                  + ", ".join(stop["graded_beyond"][:8])
                  + (", ..." if k > 8 else ""))
    if para:
        print(f"ppi paraphrase: {para['source']} (sha256 {para['sha256'][:12]}): "
              + (para["note"] if not para["used"] else
                 ("widened the PPI++ intervals" if para["widen"] else
                  "component recorded, not widened (judges.probe.widen: false)")
                 + f", {draws} prompt draw(s)"))
    for line in audit.flags:
        print(f"judge audit: {line}")
    for line in owed:
        print(f"{PENDING_GOES_ON}{line}")


#: What ``ppi.json`` says beside ``post_hoc: true``.
POST_HOC_NOTE = ("the human sample's grades differ from the human key the ppi stage used "
                 "before on this pool, rubric and round (params grading.post_hoc): every ppi "
                 "number is post-hoc")


def _human_key_use(ex, human: pd.DataFrame, record: dict) -> dict:
    """The void rule on the human key (:mod:`relgrade.protocol.ledger`): its hash, what each
    grade was made on, and the ledger with its use added.

    Parameters
    ----------
    human : pandas.DataFrame
        The human key the estimates use: ``query_id``, ``chunk_id``, ``grade``, one row per
        pair of the human sample (as read up to the stopping rule's stop).
    record : dict
        The frozen key's record (its pool version, rubric version).

    Returns
    -------
    dict
        ``sha256``, ``status`` (:func:`relgrade.protocol.ledger.check_void`'s), ``key``
        and ``made_on`` (the tables to keep beside the ledger), ``entries`` (the ledger
        to write).

    Raises
    ------
    ProtocolError
        The ledger lacks a use that files witness (:meth:`Experiment.ledger`), or ``void:``
        a different human key was used for the same pool, rubric and round, it is not a
        revision, and params neither raise ``grading.round`` nor set ``grading.post_hoc``.
    """
    table = human[["query_id", "chunk_id", "grade"]].astype(
        {"query_id": str, "chunk_id": str, "grade": "int64"})
    sha = key_mod.key_sha256(table)
    made_on = ex.made_on_now_table(table[["query_id", "chunk_id"]])
    entries = ex.ledger()
    at = {"pool_version": record["pool_version"], "rubric_version": record["rubric_version"],
          "round": int(ex.params.grading.round)}
    decision = ledger.decision_key(entries, kind=ledger.HUMAN, **at)
    revises, changed = None, []
    if decision is not None and decision != sha:
        entry = next(e for e in reversed(entries) if e["key_sha256"] == decision
                     and ledger.entry_kind(e) == ledger.HUMAN)
        kept = ex.read_human_key(entry)
        if kept is not None:
            diff = key_mod.content_revision(kept[0], kept[1], table, made_on)
            if key_mod.revision_pairs(diff) is not None:
                revises = decision
            elif ex.params.grading.stop != "none" and not diff["changed"]:
                # the stopping rule reads people's grades in the seeded order, up to its
                # stop: a read of more or fewer of the same grades, none of them changed,
                # is the rule's look, not a second look at changed grades
                revises = decision
            changed = sorted(diff["changed"]) or sorted(diff["added"] + diff["removed"])
    status = ledger.check_void(entries, key_sha256=sha, post_hoc=ex.params.grading.post_hoc,
                               revises=revises, kind=ledger.HUMAN,
                               ledger_path=ex.path("ledger").as_posix(), changed=changed, **at)
    return {"sha256": sha, "status": status, "key": table, "made_on": made_on,
            "entries": entries, "at": at, "revises": revises if status == ledger.REVISED
            else None}


def _record_human_key(ex, use: dict) -> None:
    """Keep the human key, its made-on table and the record of its use beside the ledger
    (once per hash, :meth:`Experiment.human_key_files`), then add its use to the ledger
    (idempotent)."""
    key_path, made_path, record_path = ex.human_key_files(use["sha256"])
    key_path.parent.mkdir(parents=True, exist_ok=True)
    if not key_path.is_file() or io.sha256_file(key_path) != use["sha256"]:
        io.write_bytes(key_path, key_mod.key_bytes(use["key"]))
    if not made_path.is_file():  # kept as first written: the ledger entry holds its hash
        io.write_bytes(made_path, key_mod.made_on_bytes(use["key"], use["made_on"]))
    # its uses (pool, rubric, round), witnessed apart from the ledger
    kept = ex.human_key_records().get(record_path.as_posix())
    uses = list((kept or {}).get("uses") or [])
    if use["at"] not in uses:
        io.write_json(record_path, {"kind": ledger.HUMAN, "key_sha256": use["sha256"],
                                    "grader": ex.params.need("grading.auditor"),
                                    "pairs": int(len(use["key"])),
                                    "queries": int(use["key"]["query_id"].nunique()),
                                    "uses": uses + [use["at"]]})
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    entries = ledger.add_use(use["entries"], key_sha256=use["sha256"], used_at=now,
                             kind=ledger.HUMAN, revises=use["revises"],
                             made_on_sha256=io.sha256_file(made_path), **use["at"])
    if entries != use["entries"]:
        io.write_jsonl(ex.path("ledger"), entries)


def used_up_words(size: int) -> str:
    """What the stage says when the stopping rule used the whole human sample of ``size``
    queries without settling.

    Examples
    --------
    >>> used_up_words(8)
    'the whole sample is graded; the rule did not settle: verdicts from all 8 queries'
    """
    return f"the whole sample is graded; the rule did not settle: verdicts from all {size} queries"


def _look(ex, record: dict, order: list[str], human_tables: dict, measures: list[str],
          pairs, *, level: float, population: int) -> dict:
    """The looks of the stopping rule (params ``grading.stop: anytime``) at the queries people
    have graded, in the record's order.

    The rule looks after each batch: at the last look plus ``grading.stop_batch`` queries of
    the order, then again one batch further, as long as people have graded every query up to
    there (``order``: the queries read, the head of the record's order), and stops at the
    first look that settles. Queries people graded ahead of the rule (another order than the
    seeded one, or the whole sample graded before the rule was turned on) are looked at batch
    by batch as if they had come in the seeded order; grades beyond the first settling look
    are not used (the rule decided there). This is valid whatever order people graded in: the
    seeded order is a uniform random order of a uniform sample, drawn independently of the
    grades, and the rule reads it sequentially (Waudby-Smith & Ramdas 2020, 2024: the
    sequence covers at every look at once, so at the first settling one too).

    At each look, per measure, each comparison's per-query human-key differences (arm A − arm
    B, in [-1, 1]) in grading order give the hedged betting confidence sequence and anytime
    p-value (:func:`relgrade.evaluation.anytime.run_stop`; sampling without replacement from
    the ``population`` pooled queries); Holm runs over each measure's comparisons. The looks
    are recorded (``paths.stop``, with the params' margin, level and batch they were taken
    under). Not settled with queries of the sample left: people owe the queries of the next
    batch they have not graded, and the stage stops (:class:`~relgrade.errors.PendingWork`)
    before it writes anything else, naming the commands in the order to type them: the
    ``dvc repro PATH/dvc.yaml:packets`` that writes the batch's packets while the packets
    folder lacks them (this look moved the batch after the packets stage ran;
    :func:`relgrade.experiment.layout.packets_build_command`), then the grader's command. Settled, or the sample used up: the record says so and
    the returned block (``ppi.json``'s ``stop``) holds the verdicts at the stop, ``order``
    the queries the rule read, and ``graded_beyond`` the sample's queries people graded
    that it did not read.
    """
    p = ex.params
    size, batch = int(record["sample"]), p.grading.stop_batch
    looks = [dict(x) for x in record.get("looks") or []]
    new = dict(record, looks=looks, batch=batch, margin=p.grading.stop_margin, level=level)
    while True:
        t = int(new["settled_at"]) if new.get("settled_at") is not None else \
            stopping.next_look(new, batch=batch)
        if t > len(order):
            break  # people have not graded the next batch in full yet
        families, settled = {}, True
        for m in measures:
            wide = _wide(human_tables, m, order[:t])
            diffs = np.vstack([wide.loc[a].to_numpy() - wide.loc[b].to_numpy()
                               for a, b in pairs])
            r = anytime.run_stop(diffs, level=level, margin=p.grading.stop_margin, batch=t,
                                 population=population)
            settled = settled and r.settled
            families[m] = (r, pairs)
        if not looks or looks[-1]["t"] != t:
            looks.append({"t": t, "settled": bool(settled)})
        new["settled_at"] = t if settled else None
        if settled or t >= size:
            break
    if new != record or not ex.path("stop").is_file():
        io.write_json(ex.path("stop"), new)
    # what the stages before this one read from the record, rewritten only when it changes:
    # a look that settles on the queries they read leaves them current
    ex.write_stop_reads(new)
    if t > len(order):
        auditor = p.need("grading.auditor")
        graded = set(order) | ex.stop_graded(record["order"])
        nxt = [q for q in list(record["order"])[len(order):t] if q not in graded]
        how = grade_commands(ex).get(auditor, f"relgrade grade run --grader {auditor}")
        build = packets_build_command(ex, auditor, nxt)
        raise PendingWork(
            f"grading: the stopping rule is not settled at {len(order)} of {size} "
            f"human-sample queries; {auditor} owes the next {len(nxt)} ({', '.join(nxt[:8])}"
            f"{', ...' if len(nxt) > 8 else ''}); run "
            + (f"`{build}` (it writes their packets), then `{how}`" if build else f"`{how}`"))
    read = list(order[:t])
    beyond = sorted(ex.stop_graded(record["order"]) - set(read))
    words = (f"settled at {t} of {size} queries" if settled else
             used_up_words(size))
    out = {"rule": stopping.ANYTIME, "settled": bool(settled), "settled_at": t if settled
           else None, "graded": t, "sample": size, "queries": population,
           "batch": batch, "margin": p.grading.stop_margin, "level": level,
           "seed": record["seed"], "stream": record["stream"], "order": read,
           "looks": looks, "words": words, "graded_beyond": beyond,
           "method": "hedged betting confidence sequence, sampling without replacement "
                     "(Waudby-Smith & Ramdas 2024); Holm over anytime p-values",
           "measures": {}}
    for m, (r, prs) in families.items():
        s, i = r.settlement, t - 1
        rows = []
        for j, (a, b) in enumerate(prs):
            c, cs = r.cs[j], r.cs_simultaneous[j]
            rows.append({"arm_a": a, "arm_b": b, "delta": c.mean[i], "low": c.low[i],
                         "high": c.high[i], "low_simultaneous": cs.low[i],
                         "high_simultaneous": cs.high[i], "p": c.p_value[i],
                         "p_holm": s.p_holm[j], "significant": bool(s.significant[j]),
                         "equivalent": bool(s.equivalent[j]), "n": t})
        out["measures"][m] = rows
    return _clean(out)
