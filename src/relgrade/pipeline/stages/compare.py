"""Stage `compare`: per-query values, key, runs, grades, audit, provenance → decisions.

Writes the comparison report (per-arm intervals, paired tests with Holm, power, segments,
pool bias, label-noise band, verdicts) and the two plot tables; prints the verdicts.
Decisions are made on the frozen key only (read with its qrels and record checked to have
been written together); a post-hoc key beside it never enters a comparison. A triage key
adds the record's triage design (the model's miss rate on 0s and the note that unsampled 0s
are model-judged) to the report, and the verdicts are printed with it.
"""

import json

from relgrade.evaluation import compare, decision
from relgrade.experiment.progress import step_printer
from relgrade.io import files as io


def _csv(path, df):
    with io.atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")


def run(ex):
    result = compare.full_report(**ex.compare_inputs(full=True),
                                 progress=step_printer("compare", 3))
    primary = ex.params.need("metrics").primary
    text = result.to_json()
    triage = _triage(ex)
    if triage is not None:  # a triage key: its miss rate and note travel with the verdicts
        text = json.dumps(json.loads(text) | {"triage": triage}, indent=2,
                          ensure_ascii=False, allow_nan=False) + "\n"
    io.write_text(ex.path("comparisons"), text)
    _csv(ex.path("arms_plot"), result.arms_plot())
    _csv(ex.path("deltas_plot"),
         result.deltas_plot(primary if primary in result.measures else None))
    for line in result.verdicts():
        print(line)
    for line in decision.triage_lines(triage):
        print(line)


def _triage(ex):
    """The frozen key record's triage design (counts, miss rate, note), or None."""
    if ex.params.grading.mode != "triage":
        return None
    _, record = ex.read_key()
    design = record.get("triage")
    return None if design is None else {k: design[k] for k in
                                        ("model_grader", "zero_sample", "counts",
                                         "miss_rate", "note")}

