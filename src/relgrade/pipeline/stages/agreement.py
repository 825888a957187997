"""Stage `agreement`: the key grader against the auditor on the audit sample.

Writes the agreement metrics, the confusion pairs for dvc's confusion plot and the private
disagreement report. It always reports, however poor the agreement; the gate stage decides.
"""

from relgrade.canonical import significant_floats
from relgrade.experiment.progress import QUIET_SECONDS, step_printer
from relgrade.io import files as io
from relgrade.protocol import agreement
from relgrade.protocol.reliability import Resampling
from relgrade.rng import derive_seed


def run(ex):
    grading, scale = ex.params.grading, ex.params.need("scale")
    step = step_printer("agreement", 2, quiet=QUIET_SECONDS)
    step("kappas and their intervals, resampling the audited queries")
    grader, auditor = ex.params.need("grading.key_grader"), ex.params.need("grading.auditor")
    orders = ex.path("orders")
    # The intervals' seed is a child of the experiment seed, recorded in agreement.json.
    boot = ex.params.agreement
    resampling = Resampling(seed=derive_seed(ex.params.need("seed"), "agreement", grading.round),
                            resamples=boot.bootstrap, level=boot.level)
    report = agreement.audit_agreement(
        io.read_table(ex.path("grades"),
                      columns=["query_id", "chunk_id", "grader", "round", "grade"]),
        audit_ids=ex.audit_ids() or [],
        queries=io.read_table(ex.path("queries"), columns=["query_id", "group"]),
        grader=grader, auditor=auditor, round=grading.round, scale=scale.grades,
        relevant_min=scale.relevant_min,
        positions=io.read_table(orders) if orders.exists() else None, resampling=resampling,
        graders=sorted(ex.params.graders),
        panel=sorted(n for n, g in ex.params.graders_dict().items() if g["role"] == "rater")
        if grading.mode == "raters" else None)
    # Diagnostics are per-grader tables: kept beside the gate's measures, not among them, so
    # `dvc metrics show` stays a readable table.
    step("writing the agreement, the confusion pairs and the disagreements")
    metrics = dict(report.metrics)
    # rounded to 12 significant digits: the same bytes in every run (see significant_floats)
    io.write_json(ex.path("diagnostics"), significant_floats(metrics.pop("diagnostics", {})))
    # A model grader run with `samples: N` reports how well it agrees with itself; that
    # figure belongs beside the audit's.
    consistency = {name: c for name in (grader, auditor)
                   if (c := ex.consistency(name)) is not None}
    if consistency:
        metrics["self_consistency"] = consistency
    io.write_json(ex.path("agreement"), metrics)
    with io.atomic_path(ex.path("confusion")) as tmp:
        report.confusion.to_csv(tmp, index=False, lineterminator="\n")
    io.write_jsonl(ex.path("disagreements"), report.disagreements.to_dict("records"))
    m = report.metrics
    print(f"agreement: {m['pairs']} pairs, {m['missing']} missing, weighted_kappa "
          f"{m['weighted_kappa']}, binary_kappa {m['binary_kappa']}")
    for note in m["notes"]:
        print(f"note: {note}")

