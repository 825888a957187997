"""Stage `report`: the comparison report → the decision report and the per-arm dvc metrics.

Reads `paths.comparisons` (written by `compare`) and writes, all built before any is written:
`paths.report_md` and `paths.report_html` (verdicts with Holm, arms with intervals and power,
per-group results, pool bias and Judged@k caveats, label noise, key sha256 and pool version;
the HTML page self-contained, its charts static SVG) and `paths.decision/ARM.json` (the
primary measure's mean, interval, Judged@k and difference from the baseline, with the pool
version and key they rest on, and the arm's rank-set `rank_low`..`rank_high`: the files
`dvc metrics show` lists, one row per arm). The report's rank-sets section names the tied
groups; in ppi mode both come from the PPI++ estimates. Prints the verdicts on the primary
measure.

When the key stage kept a replaced key in `paths.key_previous`, every arm's run is scored
under it and under the frozen key (the report's translation section: shift per arm, order,
Kendall's tau). The judging cost comes from the grades manifest and params `cost`. In ppi
mode the report adds `paths.ppi` (the ppi stage's result): PPI++, model-only and human-only
side by side, the judge audit and the judging-budget curve. When a post-hoc key stands beside
the frozen one (`paths.key_post_hoc`: corrections recorded by `relgrade grade correct`, or a
changed key allowed by `grading.post_hoc`), a post-hoc section follows: the corrections, both
keys' sha256 and each arm's primary measure under both (from `paths.metrics` and
`paths.metrics_post_hoc`). The verdicts and the decision files stay the frozen key's.
With a `holes` section, each arm that joined after the key froze gets its decision file and
a report section from `paths.holes` (the holes stage: its PPI++ estimate, hole rate and
transport verdict, "level claim refused" when the check refuses), and its comparisons with
the old arms join the Verdicts (PPI++ on its corrected per-query values, so said in each).
"""

from dataclasses import replace

from markupsafe import escape

from relgrade.evaluation import decision, new_arm, translate
from relgrade.pipeline.cost import report_cost
from relgrade.io import files as io
from relgrade.io.runs import read_run
from relgrade.pipeline.stages.metrics import post_hoc_key


def _translation(ex, measure):
    """Every arm under the previous and the current key, or None without a previous key."""
    if not getattr(ex.params.paths, "key_previous", None):
        return None
    if not ex.key_files(previous=True).record.exists():
        return None
    previous, previous_record = ex.read_key(previous=True)
    current, current_record = ex.read_key()
    runs = {arm: read_run(ex.path("runs") / f"{arm}.trec") for arm in ex.params.need("arms")}
    out = translate.translate(
        runs=runs, previous=previous, current=current, measure=measure,
        relevant_min=ex.params.need("scale").relevant_min, ties=ex.params.runs.ties,
        previous_record=previous_record, current_record=current_record,
        # the current pool's depth, read from its key: an arm whose top pairs the previous
        # key lacks joined since, and is left out of the order's comparison
        depth=translate.pooled_depth(runs, current, ties=ex.params.runs.ties)).to_dict()
    # a revision (regraded on edited content) says so; its pairs are in the key record
    if current_record.get("revises") == previous_record.get("key_sha256"):
        out["regraded"] = len(current_record.get("regraded") or [])
    return out


def _cost(ex):
    if not getattr(ex.params.paths, "grades_manifest", None):
        return None
    path = ex.path("grades_manifest")
    return report_cost(ex.params, io.read_json(path)) if path.exists() else None


def _post_hoc(ex, measure):
    """The post-hoc key beside the frozen one and each arm's ``measure`` under both, or None
    without one (see :func:`relgrade.evaluation.decision.post_hoc_cells`)."""
    if not getattr(ex.params.paths, "metrics_post_hoc", None):
        return None
    _, frozen = ex.read_key()
    beside = post_hoc_key(ex, frozen)
    if beside is None:
        return None
    record = beside[1]

    def mean(path, key_sha256):
        # a metrics file counts only for the key it was computed on
        if not path.exists():
            return None
        m = io.read_json(path)
        return m.get(measure) if m.get("key_sha256") == key_sha256 else None

    arms = {arm: {"frozen": mean(ex.path("metrics") / f"{arm}.json", frozen["key_sha256"]),
                  "post_hoc": mean(ex.post_hoc_metrics_folder(arm) / "metrics.json",
                                   record["key_sha256"])}
            for arm in ex.params.need("arms")}
    return {"measure": measure, "frozen": frozen, "post_hoc": record, "arms": arms}


def _ppi(ex):
    """The ppi stage's result in ppi mode (``paths.ppi``), else None."""
    if ex.params.grading.mode != "ppi":
        return None
    return io.read_json(ex.path("ppi"))


def _rank_sets(report, ppi, measure):
    """The arms' rank-sets on ``measure``: in ppi mode the PPI++ ones (the ppi stage's), else
    the comparison report's (the frozen key's per-query means); None without any."""
    if ppi is not None:
        return (ppi.get("rank_sets") or {}).get(measure)
    return report.get("rank_sets")


def _holes(ex):
    """The holes stage's result when params have a ``holes`` section (``paths.holes``), else
    None: each new arm's decision file and report section (docs/new-arm.md)."""
    if ex.params.holes is None:
        return None
    return io.read_json(ex.path("holes"))


def _with_holes(markdown: str, html: str, holes) -> tuple[str, str]:
    """The report with a section per arm that joined after the key froze."""
    if not holes:
        return markdown, html
    for record in holes["arms"].values():
        lines = new_arm.report_lines(record)
        markdown = markdown.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
        items = "".join(f"<li>{escape(x[2:])}</li>" for x in lines[2:])
        section = f"<section><h2>{escape(lines[0][3:])}</h2><ul>{items}</ul></section>"
        html = html.replace("</body>", section + "</body>", 1)
    return markdown, html


def run(ex):
    source = ex.path("comparisons")
    report = io.read_json(source)
    primary = ex.params.need("metrics").primary
    # built twice: the measure translated is the one the decision settles on
    measure = decision.build_decision(report, primary=primary, source=source).primary
    ppi = _ppi(ex)
    ranks = _rank_sets(report, ppi, measure)
    result = decision.build_decision(report, primary=primary, source=source,
                                     translation=_translation(ex, measure), cost=_cost(ex),
                                     ppi=ppi, post_hoc=_post_hoc(ex, measure), rank_sets=ranks)
    summaries = decision.arm_summaries(report, primary=result.primary, source=source,
                                       rank_sets=ranks)
    holes = _holes(ex)
    if holes:  # the new arms' comparisons join the verdicts on their measure
        extra = [(r["measure"], line) for r in holes["arms"].values()
                 for line in new_arm.verdict_lines(r)]
        result = replace(
            result, verdicts=result.verdicts + [t for m, t in extra if m == result.primary],
            other_verdicts=result.other_verdicts + [t for m, t in extra if m != result.primary])
    markdown, html = decision.to_markdown(result), decision.to_html(result)
    markdown, html = _with_holes(markdown, html, holes)
    with io.atomic_dir(ex.path("decision")) as tmp:
        for arm, row in summaries.items():
            io.write_json(tmp / f"{arm}.json", row)
        if holes:  # arms that joined after the key froze: their corrected estimates
            for arm, record in holes["arms"].items():
                io.write_json(tmp / f"{arm}.json", new_arm.decision_fields(
                    record, key_sha256=holes["key_sha256"], pool_version=holes["pool_version"],
                    baseline=ex.params.need("metrics").baseline))
    io.write_text(ex.path("report_md"), markdown)
    io.write_text(ex.path("report_html"), html)
    for line in result.verdicts:
        print(line)
    if result.translation:
        print(f"translation from the previous key: {result.translation['summary']}")
    if result.post_hoc:
        print(f"post-hoc (beside the frozen key, deciding nothing): {result.post_hoc['summary']}")

