"""Stage `agreement`: the key grader against the auditor on the audit sample.

Writes the agreement metrics, the confusion pairs for dvc's confusion plot and the private
disagreement report. It always reports, however poor the agreement; the gate stage decides.

The grades table and the display orders are pool-sized. Both are written in query order
(the orders one role after another), so they are read a block of whole queries at a time
(:func:`_by_query_blocks`): each grade is joined to its display row inside its block and
only what the fits need is kept, a few bytes per grade
(:class:`relgrade.protocol.diagnostics.RoundRows`), with the audited queries' rows for the
pairing; the reasons are read for the disagreements alone. When the order or another rule
of that path does not hold, the audited rows are read whole and every row as codes
(:class:`relgrade.protocol.diagnostics.GradeCodes`), and that path words any refusal. With
three or more graders in the round (a rater panel, an extra auditor) the table is read
whole, as the many-rater agreement reads it.
"""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.canonical import significant_floats
from relgrade.errors import InputError
from relgrade.experiment.progress import QUIET_SECONDS, step_printer
from relgrade.io import files as io
from relgrade.io.batches import (distinct_text, iter_query_blocks, iter_table_batches,
                                 query_rows)
from relgrade.io.parquet_columns import ParquetColumns
from relgrade.pipeline.memory import arrays_off_the_heap, hand_back
from relgrade.protocol import agreement
from relgrade.protocol.diagnostics import GradeCodes, GraderRows, PositionCodes, RoundRows, Shown
from relgrade.protocol.reliability import Resampling
from relgrade.ranking import arrow_ids, codes_in
from relgrade.rng import derive_seed


def run(ex):
    arrays_off_the_heap()
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
        try:
            grades, whole = _by_query_blocks(table, orders, round=grading.round,
                                             audit_ids=audit_ids)
        except (_Whole, InputError):  # read whole: that path words what is wrong
            grades, whole = _grades(table, audit_ids)
        del table
        hand_back()  # the blocks' parts, stacked
    report = agreement.audit_agreement(
        grades, audit_ids=audit_ids,
        queries=io.read_table(ex.path("queries"), columns=["query_id", "group"]),
        grader=grader, auditor=auditor, round=grading.round, scale=scale.grades,
        relevant_min=scale.relevant_min,
        positions=None if isinstance(whole, RoundRows) or not orders.exists() else
        _positions(orders) if whole is not None and orders.suffix == ".parquet"
        else io.read_table(orders), resampling=resampling,
        graders=sorted(ex.params.graders),
        panel=sorted(n for n, g in ex.params.graders_dict().items() if g["role"] == "rater")
        if grading.mode == "raters" else None, whole=whole)
    by_blocks = isinstance(whole, RoundRows)
    del grades, whole  # the report holds what is written: freed before the reasons' read
    if by_blocks:
        _with_reasons(report.disagreements, ex.path("grades"), round=grading.round)
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


#: The audited rows' columns the block path keeps: what the pairing reads (the reasons
#: are read for the disagreements alone, see :func:`_with_reasons`).
AUDITED_COLUMNS = ["query_id", "chunk_id", "grader", "round", "grade"]

#: Grade rows read at once by the block path (whole queries are kept together): the
#: stage's memory is about one such block and its display rows, beside the fits' arrays.
BLOCK_ROWS = 1 << 17


class _Whole(Exception):
    """The grades or orders hold what only the whole-table path handles or words (a
    missing id, a third grader, a pair shown twice, rows out of query order, a column
    missing or of another type): that path reads them instead, from scratch."""


def _by_query_blocks(table: ParquetColumns, orders, *, round: int,  # noqa: A002
                     audit_ids) -> tuple[pd.DataFrame, RoundRows]:
    """The audited queries' rows of the grades table (:data:`AUDITED_COLUMNS`: the reasons
    are read for the disagreements alone, by :func:`_with_reasons`) and the round's grades
    grader by grader with their display positions joined, the grades and the orders read a
    block of whole queries at a time (both are written in query order; the orders once per
    role, each role's rows in query order).

    Held whole: per grade of the round, its grade, place in the grading order and query code
    (the drift's fit) and, when shown, its centred position and grade (the position fit):
    the slopes' sums are taken over each grader's whole arrays in table order, as
    :func:`relgrade.protocol.diagnostics.diagnose` takes them. The values are those of
    :func:`~relgrade.protocol.diagnostics.diagnose` over the whole table: each display's
    rows (one query, role and round) are in one block, so its centring means are the same
    sums of the same values in the same order.

    Raises
    ------
    _Whole
        See the class; nothing is kept.
    InputError
        The files cannot be read.
    """
    names = table.names
    if "round" not in names or "role" not in names or "reason" not in names:
        raise _Whole("no round or role column")
    sequence = "sequence" in names
    columns = ["query_id", "chunk_id", "grader", "role", "round", "grade"] + \
        (["sequence"] if sequence else [])
    shows = orders.exists()
    if shows:
        if orders.suffix.lower() != ".parquet":
            raise _Whole("orders not in Parquet")
        shown_columns = ParquetColumns(orders).names
        if any(c not in shown_columns for c in ("query_id", "chunk_id", "position", "role")):
            raise _Whole("the orders lack a column")
        by_round = "round" in shown_columns
        keys = ["query_id", "chunk_id", "role"] + (["round"] if by_round else [])
        streams = [_RoleRows(orders, role, keys + ["position"])
                   for role in sorted(distinct_text(orders, "role").to_pylist())]
    audit = pa.array(sorted({str(q) for q in audit_ids}), type=pa.large_string())
    audited, in_round, graders = [], set(), set()
    parts: dict[str, dict[str, list]] = {}
    roles: dict[str, str] = {}
    queries_before = 0
    for block in iter_query_blocks(table.path, columns, rows=BLOCK_ROWS,
                                   writer="the grades stage"):
        if any(block[c].isna().any() for c in ("query_id", "chunk_id", "grader", "role")):
            raise _Whole("a missing id")
        if block["round"].dtype.kind not in "iu" or block["grade"].dtype.kind not in "iuf":
            raise _Whole("a round or grade of another type")
        graders.update(block["grader"].unique().tolist())
        if len(graders) >= 3:
            raise _Whole("three or more graders")
        query = arrow_ids(block["query_id"])
        kept = np.flatnonzero(np.asarray(pc.is_in(query, value_set=audit), dtype=bool))
        if len(kept):
            audited.append(block.iloc[kept][AUDITED_COLUMNS])
        # the query's code sorts as its id does: the blocks come in query order
        code, distinct = pd.factorize(block["query_id"])
        code = (code + queries_before).astype(np.int32)
        queries_before += len(distinct)
        mine = (block["round"] == int(round)).to_numpy()
        in_round.update(block["grader"][mine].unique().tolist())
        grade = block["grade"].to_numpy()
        if grade.dtype.kind == "f":
            mine &= ~np.isnan(grade)
        rows = np.flatnonzero(mine)
        if shows:
            last = block["query_id"].iat[-1]
            shown = [part for s in streams if len(part := s.upto(last))]
            at, position, display, size = _display_rows(
                pd.concat(shown, ignore_index=True) if shown else None, block.iloc[rows], keys)
            del shown
        # the graders as codes in name order (no str per row)
        who, named = pd.factorize(block["grader"].iloc[rows], sort=True)
        for i, name in enumerate(named.tolist()):
            sel = who == i
            own = rows[sel]
            roles.setdefault(name, str(block["role"].iat[own[0]]))
            got = parts.setdefault(name, {"count": [], "shown": [], "sequence": [],
                                          "grade": [], "query": []})
            got["count"].append(len(own))
            if sequence:
                got["sequence"].append(_small(block["sequence"].to_numpy()[own]))
                got["grade"].append(_compact(grade[own]))
                got["query"].append(code[own])
            if shows:
                row = at[sel]
                took = own[row >= 0]
                row = row[row >= 0]
                if len(took):
                    got["shown"].append(Shown.of_rows(
                        position[row], grade[took].astype(float).astype(np.int64),
                        display[row], size[row], code[took]))
        del block
        hand_back()  # the block's temporaries are garbage
    if shows:
        for s in streams:
            s.upto(None)  # the rest of the orders: checked, not kept
        del streams
    hand_back()  # Arrow's pool keeps the batches' buffers
    whole = RoundRows(
        in_round=frozenset(str(n) for n in in_round),
        graders=tuple(GraderRows(
            name=str(name), role=roles[name], count=sum(got["count"]),
            shown=Shown.joined(got["shown"]) if got["shown"] else None,
            sequence=np.concatenate(got["sequence"]) if sequence else None,
            grade=np.concatenate(got["grade"]) if sequence else None,
            query=np.concatenate(got["query"]) if sequence else None)
            for name, got in sorted(parts.items())),
        positions=shows, sequence=sequence)
    audited = pd.concat(audited, ignore_index=True) if audited else \
        table.schema.empty_table().select(AUDITED_COLUMNS).to_pandas()
    return audited, whole


def _compact(grade: np.ndarray) -> np.ndarray:
    """Whole-number grades as int8 when they fit (the same values, an eighth of the bytes)."""
    if grade.dtype.kind in "iu" and len(grade) and -128 <= grade.min() and grade.max() < 128:
        return grade.astype(np.int8)
    return grade


def _display_rows(shown: pd.DataFrame | None, graded: pd.DataFrame, keys: list[str]):
    """Each graded row's display row among ``shown`` (-1 when not shown), and per display
    row its position, its display's code (one query, role and round) and that display's
    size; ``shown`` holds every display row of the graded rows' queries (None: none).

    Raises
    ------
    _Whole
        A display row's round or position is not a whole number.
    """
    if shown is None:
        none = np.zeros(0, dtype=np.int64)
        return np.full(len(graded), -1, dtype=np.int64), none, none, none
    if shown["position"].dtype.kind not in "iu" or (
            "round" in keys and shown["round"].dtype.kind not in "iu"):
        raise _Whole("a position or round of another type")
    at = pd.MultiIndex.from_frame(shown[keys]).get_indexer(
        pd.MultiIndex.from_frame(graded[keys]))
    display = shown.groupby([k for k in keys if k != "chunk_id"], sort=False).ngroup()
    display = display.to_numpy(np.int64)
    return (np.asarray(at, dtype=np.int64), shown["position"].to_numpy().astype(np.int64),
            display, np.bincount(display)[display])


class _RoleRows:
    """One role's rows of the orders table, whole queries at a time, in query order (the
    packets stage writes each role's rows in query order, the roles one after another).

    Raises
    ------
    _Whole
        The role's rows are not in query order, or one pair is listed twice for the role
        and round (that path names the pair).
    """

    def __init__(self, path, role: str, columns: list[str]):
        self._batches = iter_table_batches(path, columns, rows=BLOCK_ROWS)
        self._role, self._keys = role, [c for c in columns if c != "position"]
        self._carry = None
        self._last = None

    def upto(self, last: str | None) -> pd.DataFrame:
        """The rows not handed out yet whose query is ``last`` or sorts before it (every
        one when ``last`` is None), checked."""
        parts = []
        while True:
            if self._carry is not None:
                q = self._carry["query_id"]
                n = len(q) if last is None else int((q <= last).sum())
                parts.append(self._carry.iloc[:n])
                if n < len(q):
                    self._carry = self._carry.iloc[n:]
                    break
                self._carry = None
            batch = next(self._batches, None)
            if batch is None:
                break
            rows = batch[(batch["role"].astype(str) == self._role).to_numpy()]
            if not len(rows):
                continue
            if rows["query_id"].isna().any() or rows["chunk_id"].isna().any():
                raise _Whole("a missing id")
            q = arrow_ids(rows["query_id"]).combine_chunks()
            if (self._last is not None and q[0].as_py() < self._last) or (len(q) > 1 and pc.any(
                    pc.less(q.slice(1), q.slice(0, len(q) - 1))).as_py()):
                raise _Whole("the orders are not in query order")
            self._last = q[len(q) - 1].as_py()
            self._carry = rows.reset_index(drop=True)
        out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
            columns=self._keys + ["position"])
        if len(out) and out.duplicated(self._keys).any():
            raise _Whole("a pair listed twice")
        return out


def _with_reasons(report: pd.DataFrame, path, *, round: int) -> None:  # noqa: A002
    """Fill the disagreement report's ``grader_reason`` and ``auditor_reason`` (made from
    rows read without their reasons) with the reasons of those rows of round ``round``,
    read for the report's queries alone: a reason that is not text is empty, as
    :func:`relgrade.protocol.agreement.pair_grades` reads it."""
    if not len(report):
        return
    rows = query_rows(path, ["query_id", "chunk_id", "grader", "round", "reason"],
                      sorted(set(report["query_id"])))
    # the report's pairs' rows alone become Python objects
    rows = rows[((rows["round"] == int(round)) & rows["chunk_id"].isin(
        set(report["chunk_id"]))).to_numpy()]
    said = {(q, c, g): r if isinstance(r, str) else "" for q, c, g, r in zip(
        rows["query_id"], rows["chunk_id"], rows["grader"], rows["reason"])}
    for who, column in (("grader", "grader_reason"), ("auditor", "auditor_reason")):
        report[column] = pd.Series(
            [said.get((q, c, g), "") for q, c, g in
             zip(report["query_id"], report["chunk_id"], report[who])],
            index=report.index, dtype=str)
