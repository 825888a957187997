"""Stage `compare`: per-query values, key, runs, grades, audit, provenance → decisions.

Writes the comparison report (per-arm intervals, paired tests with Holm, power, segments,
pool bias, label-noise band, verdicts) and the two plot tables; prints the verdicts.
Decisions are made on the frozen key only (read with its qrels and record checked to have
been written together); a post-hoc key beside it never enters a comparison.
"""

from relgrade.evaluation import compare
from relgrade.experiment.stage import run_stage
from relgrade.io import files as io


def _csv(path, df):
    with io.atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")


def main(ex):
    result = compare.full_report(**ex.compare_inputs(full=True))
    primary = ex.params.need("metrics").primary
    io.write_text(ex.path("comparisons"), result.to_json())
    _csv(ex.path("arms_plot"), result.arms_plot())
    _csv(ex.path("deltas_plot"),
         result.deltas_plot(primary if primary in result.measures else None))
    for line in result.verdicts():
        print(line)


if __name__ == "__main__":
    run_stage(main)
