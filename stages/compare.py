"""Stage `compare`: per-query values, key, runs, grades, audit, provenance → decisions.

Writes the comparison report (per-arm intervals, paired tests with Holm, power, segments,
pool bias, label-noise band, verdicts) and the two plot tables; prints the verdicts.
"""

from relgrade.cli.compare import load_experiment
from relgrade.evaluation import compare
from relgrade.experiment.stage import path_of, run_stage
from relgrade.io import files as io


def _csv(path, df):
    with io.atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")


def main(params):
    result = compare.full_report(**load_experiment(params))
    primary = (params.get("metrics") or {}).get("primary")
    io.write_text(path_of(params, "comparisons"), result.to_json())
    _csv(path_of(params, "arms_plot"), result.arms_plot())
    _csv(path_of(params, "deltas_plot"),
         result.deltas_plot(primary if primary in result.measures else None))
    for line in result.verdicts():
        print(line)


if __name__ == "__main__":
    run_stage(main)
