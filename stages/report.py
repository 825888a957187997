"""Stage `report`: the comparison report → the decision report and the per-arm dvc metrics.

Reads `paths.comparisons` (written by `compare`) and writes, all built before any is written:
`paths.report_md` and `paths.report_html` (verdicts with Holm, arms with intervals and power,
per-group results, pool bias and Judged@k caveats, label noise, key sha256 and pool version;
the HTML page self-contained, its charts static SVG) and `paths.decision/ARM.json` (the
primary measure's mean, interval, Judged@k and difference from the baseline: the files
`dvc metrics show` lists, one row per arm). Prints the verdicts on the primary measure.
"""

from relgrade.evaluation import decision
from relgrade.experiment.stage import run_stage
from relgrade.io import files as io


def main(ex):
    source = ex.path("comparisons")
    report = io.read_json(source)
    primary = ex.params.need("metrics").primary
    result = decision.build_decision(report, primary=primary, source=source)
    summaries = decision.arm_summaries(report, primary=result.primary, source=source)
    markdown, html = decision.to_markdown(result), decision.to_html(result)
    with io.atomic_dir(ex.path("decision")) as tmp:
        for arm, row in summaries.items():
            io.write_json(tmp / f"{arm}.json", row)
    io.write_text(ex.path("report_md"), markdown)
    io.write_text(ex.path("report_html"), html)
    for line in result.verdicts:
        print(line)


if __name__ == "__main__":
    run_stage(main)
