"""Stage `agreement`: the key grader against the auditor on the audit sample.

Writes the agreement metrics, the confusion pairs for dvc's confusion plot and the private
disagreement report. It always reports, however poor the agreement; the gate stage decides.

The grades table and the display orders are pool-sized; of the grades only the audited
queries' rows are read whole (reasons included). The rest is read a column at a time as
compact codes (:class:`relgrade.protocol.diagnostics.GradeCodes`), which the notes and the
grading diagnostics read: a few bytes per grade, not a string per id. With three or more
graders in the round (a rater panel, an extra auditor) the table is read whole, as the
many-rater agreement reads it.
"""

import numpy as np
import pandas as pd
import pyarrow as pa

from relgrade.canonical import significant_floats
from relgrade.experiment.progress import QUIET_SECONDS, step_printer
from relgrade.io import files as io
from relgrade.io.parquet_columns import ParquetColumns
from relgrade.protocol import agreement
from relgrade.protocol.diagnostics import GradeCodes, PositionCodes
from relgrade.protocol.reliability import Resampling
from relgrade.ranking import arrow_ids, codes_in
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
    if grading.mode == "raters" or ex.path("grades").suffix.lower() != ".parquet":
        # a panel's many-rater agreement reads the whole table
        grades, whole = io.read_table(ex.path("grades"), columns=GRADE_COLUMNS), None
        audit_ids = ex.audit_ids() or []
    else:
        table = ParquetColumns(ex.path("grades"))
        table.require(GRADE_COLUMNS)
        audit_ids = ex.audit_ids() or []
        grades, whole = _grades(table, audit_ids)
        del table
    report = agreement.audit_agreement(
        grades, audit_ids=audit_ids,
        queries=io.read_table(ex.path("queries"), columns=["query_id", "group"]),
        grader=grader, auditor=auditor, round=grading.round, scale=scale.grades,
        relevant_min=scale.relevant_min,
        positions=(_positions(orders) if whole is not None and orders.suffix == ".parquet"
                   else io.read_table(orders))
        if orders.exists() else None, resampling=resampling,
        graders=sorted(ex.params.graders),
        panel=sorted(n for n, g in ex.params.graders_dict().items() if g["role"] == "rater")
        if grading.mode == "raters" else None, whole=whole)
    del grades, whole
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



#: The grades table's columns the stage requires (the others are read when present).
GRADE_COLUMNS = ["query_id", "chunk_id", "grader", "round", "grade"]


def _small(values: np.ndarray) -> np.ndarray:
    """Whole numbers as int32 when they fit (the same values, half the bytes)."""
    if values.dtype.kind in "iu" and len(values) and \
            -2**31 <= values.min() and values.max() < 2**31:
        return values.astype(np.int32)
    return values


def _grades(table: ParquetColumns, audit_ids) -> tuple[pd.DataFrame, GradeCodes | None]:
    """The audited queries' rows of the grades table, every column, and every row as codes;
    or the whole table and None when an id column cannot be coded (a missing id) or three
    or more graders graded (the many-rater agreement reads the table itself)."""
    names = ["query_id", "chunk_id", "grader"] + (["role"] if "role" in table.names else [])
    coded = {}
    for name in names:
        coded[name] = table.id_codes(name)
        if coded[name] is None or (name == "grader" and len(coded[name][1]) >= 3):
            del coded
            return io.read_table(table.path, columns=GRADE_COLUMNS), None
    query, queries = coded["query_id"]
    wanted = codes_in(arrow_ids([str(q) for q in audit_ids]), pa.chunked_array([queries]))
    wanted = wanted[wanted >= 0]
    audited = table.rows(np.isin(query, wanted))
    grade = table.values("grade")
    graded = ~np.isnan(grade) if grade.dtype.kind == "f" else None
    if graded is not None and graded.all():
        graded = None
    if grade.dtype.kind in "iu" and len(grade) and -128 <= grade.min() and grade.max() < 128:
        grade = grade.astype(np.int8)
    grader, graders = coded["grader"]
    role, roles = coded.get("role", (None, None))
    whole = GradeCodes(
        grader=grader, graders=tuple(graders.to_pylist()), query=query, queries=queries,
        chunk=coded["chunk_id"][0], chunks=coded["chunk_id"][1], grade=grade, graded=graded,
        role=role, roles=None if roles is None else tuple(roles.to_pylist()),
        round=_small(table.values("round")),
        sequence=table.values("sequence") if "sequence" in table.names else None)
    return audited, whole


def _positions(path) -> PositionCodes | pd.DataFrame:
    """The orders table as codes; as a table when it lacks a column the diagnostics need
    (their check words it) or an id is missing."""
    table = ParquetColumns(path)
    if any(c not in table.names for c in ("query_id", "chunk_id", "position")):
        return pd.DataFrame(columns=table.names)
    coded = {name: table.id_codes(name) for name in ("query_id", "chunk_id", "role")
             if name in table.names}
    if any(v is None for v in coded.values()):
        return io.read_table(path)
    role, roles = coded.get("role", (None, None))
    return PositionCodes(
        query=coded["query_id"][0], queries=coded["query_id"][1], chunk=coded["chunk_id"][0],
        chunks=coded["chunk_id"][1], position=_small(table.values("position")), role=role,
        roles=None if roles is None else tuple(roles.to_pylist()),
        round=_small(table.values("round")) if "round" in table.names else None)
