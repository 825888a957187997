"""The judging-budget curve of a graded experiment, read from its files (``relgrade budget``).

In ppi mode (``grading.mode: ppi``) the reference is the human grader's judgments of the
locked human sample, and the ``ppi`` strategy adds the model key (the frozen key) on those
queries, as the ``ppi`` stage computes it. In every other mode the reference is the frozen
key on every pooled query, and only the strategies without a model run (``uniform``,
``maxmean``, ``mtf``). See :func:`relgrade.evaluation.budget.budget_curve`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from relgrade.evaluation import budget, pooled
from relgrade.experiment.params import BUDGET_FRACTIONS
from relgrade.io import files as io
from relgrade.io.runs import read_run
from relgrade.pipeline.cost import MODEL, PERSON, calls_per_judgment, worker
from relgrade.rng import stage_rng


def experiment_budget(ex, *, fractions=None, k: int | None = None) -> tuple[pd.DataFrame, dict]:
    """The budget curve of experiment ``ex`` and what it was computed on.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    fractions : sequence of float in (0, 1], optional
        Budgets; default ``ppi.budget.fractions`` in ppi mode, else
        :data:`relgrade.experiment.params.BUDGET_FRACTIONS`.
    k : int, optional
        Depth and nDCG cutoff; default ``ppi.judge_audit.k`` in ppi mode, else 10.

    Returns
    -------
    curve : pandas.DataFrame
        :data:`relgrade.evaluation.budget.COLUMNS`.
    info : dict
        ``reference`` (in words), ``queries``, ``human_judgments``, ``seed_stream``,
        ``reference_grader`` and ``reference_worker`` (``person`` or ``model``,
        :func:`relgrade.pipeline.cost.worker`: whose judgments the budgets count; a model's
        are priced in calls, ``calls_per_judgment``); in ppi mode ``model_grader`` and
        ``model_calls`` (its calls on every pool pair, which the ``ppi`` strategy uses at
        every budget).

    Raises
    ------
    InputError
        The key, the runs or (in ppi mode) the human sample's grades are missing.
    """
    p = ex.params
    cfg = p.ppi if p.grading.mode == "ppi" else None
    fractions = list(fractions or (cfg.budget.fractions if cfg else BUDGET_FRACTIONS))
    k = int(k or (cfg.judge_audit.k if cfg else 10))
    key, _ = ex.read_key()
    arms = sorted(map(str, p.need("arms")))
    stacked = pd.concat([read_run(ex.path("runs") / f"{a}.trec").assign(arm=a) for a in arms],
                        ignore_index=True)
    arrays = pooled.pool_arrays(stacked, k=k)
    model = pooled.grade_matrix(arrays, key)
    if cfg is None:
        rows = np.arange(len(arrays.query_ids))
        human, model_rows = model, None
        reference = f"the frozen key on all {rows.size} queries (no model strategy)"
    else:
        from relgrade.pipeline.stages.ppi import human_grades, human_sample_ids

        pool = io.read_table(ex.path("pool"), columns=["query_id"])
        sample = human_sample_ids(ex, sorted(set(pool["query_id"].astype(str))))
        human = pooled.grade_matrix(arrays, human_grades(ex, sample))
        rows = np.array([arrays.query_ids.index(q) for q in sample if q in arrays.query_ids])
        model_rows = model[rows]
        reference = (f"the decision with every human judgment of the {rows.size} "
                     "human-sample queries")
    curve = budget.budget_curve(
        human[rows], arrays.ranked[:, rows], model_grades=model_rows,
        rng=stage_rng(p.need("seed"), "ppi-budget"), fractions=fractions, k=k,
        alpha=1.0 - (cfg.level if cfg else 0.95),
        seconds_per_judgment=p.cost.seconds_per_judgment)
    # who made the reference judgments: people are priced in hours, a model in calls
    ref_grader = p.grading.auditor if cfg is not None else p.grading.key_grader
    who = worker(p, ref_grader) if ref_grader else PERSON
    info = {"reference": reference, "queries": int(rows.size),
            "human_judgments": int(np.isfinite(human[rows]).sum()), "k": k,
            "seed_stream": "ppi-budget", "reference_grader": ref_grader,
            "reference_worker": who,
            "calls_per_judgment": calls_per_judgment(p, ref_grader) if who == MODEL else None}
    if cfg is not None:  # the ppi strategy also rests on the model grader's every pool pair
        model = p.grading.key_grader
        info["model_grader"] = model
        info["model_calls"] = int(len(key)) * calls_per_judgment(p, model)
    return curve, info
