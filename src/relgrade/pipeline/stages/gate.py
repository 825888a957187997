"""Stage `gate`: agreement, a complete audit and the family rule; a fail stops the pipeline.

The agreement metrics are checked against params ``gates``; the audit's coverage (pool pairs
of the audited queries graded by both the key grader and the auditor in this round) against
``gates.audit_coverage_min``; the model families of graders and arms give warnings, or a
failure with ``gates.require_distinct_families``. The pass record carries the thresholds in
force, the agreement, the coverage, and a line for every gate looser than the protocol's.
In triage mode the audit's pairs are the people's triage queue on the audited queries. In
ppi mode the agreement thresholds are reported but not applied
(:func:`relgrade.protocol.gate.ppi_gate`): the record says so, with the lines that would have
failed; a complete human sample and the family rule still gate.

A model judge of the key (the key grader, or the triage grader) whose judge identity has no
calibration against people in the judges' ledger, or a stale one, is pending work: printed
(``Pending, the stage goes on: judge calibration: ...``), or, with params
``judges.require_calibration``, the stage stops there before it writes anything (exit 3).
"""

from relgrade.errors import GateFailed
from relgrade.experiment.calibration import PENDING_GOES_ON, key_judges, owed_calibrations
from relgrade.experiment.layout import disagreements_file, repro_command
from relgrade.io import batches as stream
from relgrade.io import files as io
from relgrade.pipeline.cost import people_seconds
from relgrade.protocol import triage
from relgrade.protocol.audit import audit_coverage_blocks
from relgrade.pipeline.stages.audit import params_shown
from relgrade.protocol.gate import (
    NOT_THE_RUBRIC,
    PPI_GATE_NOTE,
    PPI_NOT_APPLIED,
    check_audit_gates,
    family_warnings,
    ppi_gate,
    relaxed_lines,
)


def one_category_advice(ex, *, audited: int, queries: int) -> str:
    """What to do when a kappa is undefined because both graders gave every audited pair one
    category: a larger audit sample in a new round, named as typed at the repository's top.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (params ``audit``, ``grading.round``, ``grading.mode``, ``triage``).
    audited, queries : int
        The audited queries, and the queries of the pool (or, in triage mode, of people's
        queue).

    Returns
    -------
    str
        One sentence: why the rubric is not at fault, which params to raise (with their
        current values) in which file, the new ``grading.round``, and the ``dvc repro``.
    """
    p = ex.params
    rnd, where = p.grading.round, params_shown(ex)
    triage = p.grading.mode == "triage"
    raise_ = []
    if triage and p.triage is not None and p.triage.zero_sample < 1:
        raise_.append(f"triage.zero_sample (now {p.triage.zero_sample:g}), so people "
                      "grade more of the model's 0s,")
    cfg = p.audit
    if cfg is not None and audited < queries:
        raise_.append(f"audit.min_queries (now {cfg.min_queries}; {audited} of {queries} "
                      f"queries are audited) or audit.fraction (now {cfg.fraction:g})")
    if not raise_:
        return (f"{NOT_THE_RUBRIC} Every one of the {queries} pooled queries is audited "
                "already, so a sample with both relevant and non-relevant pairs needs more "
                "queries or a deeper pool "
                f"(pool.depth in {where}), graded in a new round (grading.round: {rnd + 1}); "
                f"then `{repro_command(ex)}`")
    return (f"{NOT_THE_RUBRIC} Kappa needs an audit sample that holds both relevant and "
            f"non-relevant pairs: in {where} raise "
            + " or ".join(raise_).rstrip(",")
            + f", and set grading.round: {rnd + 1}, whose audit sample is drawn before grading "
            f"(round {rnd}'s grades stay in git); then run `{repro_command(ex)}` and grade the "
            "new round as before")


def run(ex):
    p, grading = ex.params, ex.params.grading
    key_grader, auditor = p.need("grading.key_grader"), p.need("grading.auditor")
    # stops here when calibration is required
    owed = owed_calibrations(ex, key_judges(ex), seconds_of=people_seconds(ex))
    measures = io.read_json(ex.path("agreement"))
    audited = ex.audit_ids() or []
    # the coverage reads the audited queries' rows alone, a batch at a time, and holds them
    # as compact codes (protocol.audit.audit_coverage_blocks): memory does not grow with the
    # pool
    grades = (g[g["round"] == grading.round] for g in stream.iter_rows_where_in(
        ex.path("grades"), ["query_id", "chunk_id", "grader", "round"], "query_id", audited))
    if grading.mode == "triage":
        # the audit covers what people grade: the triage queue's pairs of the audited queries
        path = ex.path("triage_queue")
        pool = triage.people_queue(triage.typed_queue(io.read_table(path), path=path))
        pooled = len(set(pool["query_id"].astype(str)))
        pool = [pool]
    else:
        pool = stream.iter_rows_where_in(ex.path("pool"), ["query_id", "chunk_id"],
                                         "query_id", audited)
        pooled = len(stream.distinct_text(ex.path("pool"), "query_id"))
    coverage = audit_coverage_blocks(
        pool, grades, audit_ids=audited, key_grader=key_grader, auditor=auditor)
    families = family_warnings(
        key_grader=key_grader, auditor=auditor,
        graders={name: g.get("family") for name, g in p.graders_dict().items()},
        arms={name: a.family for name, a in (p.arms or {}).items()},
        roles={name: g.get("role") for name, g in p.graders_dict().items()})
    thresholds = p.need("gates").thresholds()
    sample_advice = one_category_advice(
        ex, audited=len(set(map(str, audited))), queries=pooled)
    result = check_audit_gates(measures, thresholds, coverage=coverage,
                               key_grader=key_grader, auditor=auditor, families=families,
                               sample_advice=sample_advice,
                               disagreements=disagreements_file(ex))
    if grading.mode == "ppi":
        result = ppi_gate(result, measures, thresholds)
    relaxed, not_applied = relaxed_lines(result.relaxed)
    warnings = [*relaxed, *result.families]
    out = ex.path("gate")
    if not result.passed:
        out.unlink(missing_ok=True)  # a stale pass record must not outlive a failed gate
        raise GateFailed(result.lines, advice=result.advice,
                         warnings=warnings + [PPI_NOT_APPLIED + x for x in not_applied])
    record = result.record(round=measures.get("round"))
    if grading.mode == "ppi":
        record["mode"] = "ppi"
        record["note"] = PPI_GATE_NOTE
    io.write_json(out, record)
    how = " under relaxed gates" if relaxed else ""
    print(f"gate passed{how}: " + ", ".join(f"{k} {v}" for k, v in result.measures.items())
          + f", audit coverage {coverage['both']} of {coverage['pairs']} pairs")
    for line in not_applied:  # reported, not a relaxation: ppi mode does not gate agreement
        print(f"ppi mode, agreement gate reported, not applied: {line}")
    for line in warnings:
        print(f"warning: {line}")
    for line in owed:
        print(f"{PENDING_GOES_ON}{line}")

