"""Stage `compare`: per-query values, key, runs, grades, audit, provenance → decisions.

Writes the comparison report (per-arm intervals, paired tests with Holm, power, segments,
pool bias, label-noise band, verdicts, and the rank-sets of the arms on the primary measure:
each arm's rank interval with simultaneous coverage, drawn from the stream "rank-sets" of
params `seed` with `metrics.bootstrap` resamples at `metrics.level`) and the two plot
tables; prints the verdicts.
Decisions are made on the frozen key only (read with its qrels and record checked to have
been written together); a post-hoc key beside it never enters a comparison. A triage key
adds the record's triage design (the model's miss rate on 0s and the note that unsampled 0s
are model-judged) to the report, and the verdicts are printed with it.

In ppi mode (``grading.mode: ppi``) the frozen key is the model grader's, and the decision is
PPI++'s: the ppi stage's estimates (``paths.ppi``) replace the model-key means, intervals,
differences, Holm p-values and verdicts of every measure it estimated
(:func:`relgrade.evaluation.ppi_decision.govern`); the model-key numbers stay beside them as
``model_only``, the human sample's as ``human_only``. The arms plot shows the numbers that
decide.
"""

import json

import pandas as pd

from relgrade.evaluation import compare, decision, ppi_decision, ranksets
from relgrade.evaluation.per_query_codes import PerQueryCodes
from relgrade.experiment.progress import step_printer
from relgrade.io import files as io
from relgrade.rng import stage_rng


def _csv(path, df):
    with io.atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")


def run(ex):
    # every arm's per-query values coded as each file is read: no frame of string columns
    inputs = ex.compare_inputs(full=True, stacked=PerQueryCodes.from_tables)
    result = compare.full_report(**inputs, progress=step_printer("compare", 3))
    primary = ex.params.need("metrics").primary
    text = result.to_json()
    extra = {"rank_sets": _rank_sets(ex, inputs, result, primary)}
    triage = _triage(ex)
    if triage is not None:  # a triage key: its miss rate and note travel with the verdicts
        extra["triage"] = triage
    text = json.dumps(json.loads(text) | extra, indent=2, ensure_ascii=False,
                      allow_nan=False) + "\n"
    governed = _ppi_governed(ex, text)
    arms_plot = result.arms_plot()
    if governed is not None:  # ppi mode: PPI++ decides, the model key's numbers beside
        text = json.dumps(governed, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        arms_plot = _arms_plot(governed)
    io.write_text(ex.path("comparisons"), text)
    _csv(ex.path("arms_plot"), arms_plot)
    _csv(ex.path("deltas_plot"),
         result.deltas_plot(primary if primary in result.measures else None))
    for line in (governed["verdicts"] if governed is not None else result.verdicts()):
        print(line)
    if governed is not None:
        print(governed["estimator"]["note"])
    for line in decision.triage_lines(triage):
        print(line)


def _rank_sets(ex, inputs, result, primary):
    """The arms' rank-sets on the primary measure (the first compared when it was not),
    from the comparison's own matrix of it (the per-query table is not pivoted again)."""
    measure = primary if primary in result.measures else result.measures[0]
    settings = inputs["settings"]
    qids, _, values = result.values[measure]
    out = ranksets.matrix_rank_sets(values, arms=result.arms, query_ids=qids,
                                    measure=measure,
                                    rng=stage_rng(settings.seed, "rank-sets"),
                                    level=settings.level, n_resamples=settings.n_resamples,
                                    weights=inputs.get("weights"))
    return out | {"seed": settings.seed, "stream": "rank-sets"}


def _triage(ex):
    """The frozen key record's triage design (counts, miss rate, note), or None."""
    if ex.params.grading.mode != "triage":
        return None
    _, record = ex.read_key()
    design = record.get("triage")
    return None if design is None else {k: design[k] for k in
                                        ("model_grader", "zero_sample", "counts",
                                         "miss_rate", "note")}



def _ppi_governed(ex, text):
    """In ppi mode, the comparison report with PPI++ deciding (``paths.ppi`` read), else None."""
    if ex.params.grading.mode != "ppi":
        return None
    path = ex.path("ppi")
    return ppi_decision.govern(json.loads(text), io.read_json(path), source=path)


def _arms_plot(report):
    """Per arm and measure: the mean and interval that decide (``metrics/plots/arms.csv``)."""
    rows = [{"arm": arm, "measure": m, "mean": e["estimate"], "low": e["low"], "high": e["high"]}
            for arm, per in report["arms"].items() for m, e in per.items()]
    return pd.DataFrame(rows, columns=["arm", "measure", "mean", "low", "high"])
