"""Stage `agreement`: the key grader against the auditor on the audit sample.

Writes the agreement metrics, the confusion pairs for dvc's confusion plot and the private
disagreement report. It always reports, however poor the agreement; the gate stage decides.
"""

from relgrade.experiment.stage import path_of, run_stage, section
from relgrade.io import files as io
from relgrade.protocol import agreement


def main(params):
    grading, scale = section(params, "grading"), section(params, "scale")
    orders = path_of(params, "orders")
    report = agreement.audit_agreement(
        io.read_table(path_of(params, "grades"),
                      columns=["query_id", "chunk_id", "grader", "round", "grade"]),
        audit_ids=[str(r["query_id"]) for r in io.read_jsonl(path_of(params, "audit"))],
        queries=io.read_table(path_of(params, "queries"), columns=["query_id", "group"]),
        grader=str(grading["key_grader"]), auditor=str(grading["auditor"]),
        round=int(grading["round"]), scale=scale["grades"],
        relevant_min=int(scale["relevant_min"]),
        positions=io.read_table(orders) if orders.exists() else None)
    # Diagnostics are per-grader tables: kept beside the gate's measures, not among them, so
    # `dvc metrics show` stays a readable table.
    metrics = dict(report.metrics)
    io.write_json(path_of(params, "diagnostics"), metrics.pop("diagnostics", {}))
    # A model grader run with `samples: N` reports how well it agrees with itself; that
    # figure belongs beside the audit's.
    consistency = {}
    for name in (str(grading["key_grader"]), str(grading["auditor"])):
        f = path_of(params, "grades_in") / name / f"round-{int(grading['round'])}.consistency.json"
        if f.exists():
            c = io.read_json(f)
            consistency[name] = {k: c.get(k) for k in ("samples", "pairs", "fleiss_kappa",
                                                       "unanimous_share")}
    if consistency:
        metrics["self_consistency"] = consistency
    io.write_json(path_of(params, "agreement"), metrics)
    with io.atomic_path(path_of(params, "confusion")) as tmp:
        report.confusion.to_csv(tmp, index=False, lineterminator="\n")
    io.write_jsonl(path_of(params, "disagreements"), report.disagreements.to_dict("records"))
    m = report.metrics
    print(f"agreement: {m['pairs']} pairs, {m['missing']} missing, weighted_kappa "
          f"{m['weighted_kappa']}, binary_kappa {m['binary_kappa']}")
    for note in m["notes"]:
        print(f"note: {note}")


if __name__ == "__main__":
    run_stage(main)
