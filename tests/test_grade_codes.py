"""The grades and display orders held as codes (relgrade.protocol.diagnostics.GradeCodes,
PositionCodes) and read from Parquet a column at a time (relgrade.io.parquet_columns)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.io import files as io
from relgrade.io.parquet_columns import ParquetColumns
from relgrade.pipeline.stages import agreement as stage
from relgrade.protocol import diagnostics as dg


def _grades() -> pd.DataFrame:
    # two queries; ga grades every pair, gb (the auditor) the pairs of q10 only
    rows = [("q2", "c1", "ga", "grader", 2, 0), ("q2", "c2", "ga", "grader", 0, 1),
            ("q10", "c3", "ga", "grader", 1, 2), ("q10", "c4", "ga", "grader", 1, 3),
            ("q10", "c3", "gb", "auditor", 2, 0), ("q10", "c4", "gb", "auditor", 0, 1)]
    return pd.DataFrame([{"query_id": q, "chunk_id": c, "grader": g, "role": r, "round": 1,
                          "grade": grade, "reason": f"{g} on {c}", "sequence": s}
                         for q, c, g, r, grade, s in rows])


def _positions() -> pd.DataFrame:
    return pd.DataFrame({"query_id": ["q2", "q2", "q10", "q10", "q10", "q10"],
                         "chunk_id": ["c1", "c2", "c3", "c4", "c3", "c4"],
                         "role": ["grader"] * 4 + ["auditor"] * 2, "round": [1] * 6,
                         "position": [0, 1, 1, 0, 0, 1]})


def test_parquet_id_codes_follow_the_ids_code_point_order(tmp_path):
    io.write_parquet(tmp_path / "g.parquet", _grades())
    codes, uniques = ParquetColumns(tmp_path / "g.parquet").id_codes("query_id")
    # "q10" < "q2" as strings: q10 is code 0
    assert uniques.to_pylist() == ["q10", "q2"]
    assert codes.tolist() == [1, 1, 0, 0, 0, 0]


def test_parquet_rows_are_the_kept_rows_as_read_table_reads_them(tmp_path):
    io.write_parquet(tmp_path / "g.parquet", _grades())
    keep = np.array([False, True, False, False, True, False])
    got = ParquetColumns(tmp_path / "g.parquet").rows(keep)
    want = io.read_table(tmp_path / "g.parquet").iloc[[1, 4]].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)


def test_a_parquet_file_lacking_a_column_is_refused_as_read_table_refuses_it(tmp_path):
    io.write_parquet(tmp_path / "g.parquet", _grades().drop(columns=["round"]))
    with pytest.raises(InputError) as by_columns:
        ParquetColumns(tmp_path / "g.parquet").require(["query_id", "round"])
    with pytest.raises(InputError) as by_table:
        io.read_table(tmp_path / "g.parquet", columns=["query_id", "round"])
    assert str(by_columns.value) == str(by_table.value)
    assert "missing column(s) round" in str(by_columns.value)


def test_diagnostics_of_codes_are_those_of_the_table():
    g, pos = _grades(), _positions()
    by_codes = dg.diagnose(dg.GradeCodes.of_table(g), dg.PositionCodes.of_table(pos),
                           bins=2, graders=["ga", "gb", "gc"])
    assert by_codes == dg.grading_diagnostics(g, pos, bins=2, graders=["ga", "gb", "gc"])
    ga = by_codes["graders"]["ga"]
    # ga's displays: q2 shows c1 (grade 2) at 0 and c2 (0) at 1; q10 c4 (1) at 0, c3 (1)
    # at 1. Within each display: x = (-0.5, 0.5, 0.5, -0.5), y = (1, -1, 0, 0): slope
    # sum(xy) / sum(x^2) = -1 / 1.
    assert ga["position_slope"] == pytest.approx(-1.0)
    # thirds of two-chunk displays: position 0 first (grades 2, 1), 1 middle (0, 1)
    assert ga["mean_by_third"] == {"first": 1.5, "middle": 0.5}
    # sequence 0..3 in two stretches: (2, 0) then (1, 1)
    assert ga["mean_by_stretch"] == {"1": 1.0, "2": 1.0}
    assert by_codes["graders"]["gc"] == {"grades": 0}


def test_position_table_listing_a_pair_twice_is_refused_from_codes_too():
    pos = pd.concat([_positions(), _positions().iloc[[2]]], ignore_index=True)
    with pytest.raises(InputError, match="lists one pair twice") as err:
        dg.diagnose(dg.GradeCodes.of_table(_grades()), dg.PositionCodes.of_table(pos))
    assert "pair (q10, c3)" in str(err.value)


def test_agreement_stage_reads_the_audited_rows_whole_and_every_row_as_codes(tmp_path):
    io.write_parquet(tmp_path / "g.parquet", _grades())
    audited, whole = stage._grades(ParquetColumns(tmp_path / "g.parquet"), ["q10"])
    table = io.read_table(tmp_path / "g.parquet")
    pd.testing.assert_frame_equal(
        audited, table[table["query_id"] == "q10"].reset_index(drop=True))
    assert len(whole) == 6 and whole.graders == ("ga", "gb")
    assert dg.diagnose(whole) == dg.grading_diagnostics(table)


def _experiment(rng, queries: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A grades table in (query, chunk, grader) order (ga grades every pair, gb the pairs of
    every third query) and its display orders, grader role first, each role in query
    order; a few pairs of ga are not shown, a few display rows not graded."""
    grades, orders = [], []
    for q in sorted(f"q{i}" for i in range(queries)):
        chunks = sorted(f"c{j}" for j in rng.choice(40, size=rng.integers(1, 9),
                                                    replace=False))
        for role, grader in (("grader", "ga"), ("auditor", "gb")):
            if grader == "gb" and int(q[1:]) % 3:
                continue
            for p, c in enumerate(rng.permutation(chunks)):
                orders.append({"query_id": q, "chunk_id": str(c), "role": role, "round": 1,
                               "position": p})
            for c in chunks:
                if rng.random() < 0.9:
                    grades.append({"query_id": q, "chunk_id": c, "grader": grader,
                                   "role": role, "round": int(rng.choice([1, 1, 1, 2])),
                                   "grade": int(rng.integers(0, 4)),
                                   "reason": f"{grader} on {c}"})
    grades = pd.DataFrame(grades).sort_values(["query_id", "chunk_id", "grader"],
                                              kind="stable", ignore_index=True)
    grades["sequence"] = rng.permutation(len(grades))
    orders = pd.DataFrame(orders)
    orders = orders.sort_values("role", key=lambda r: r != "grader", kind="stable",
                                ignore_index=True)
    return grades, orders


@pytest.mark.parametrize("seed", range(12))
def test_agreement_stage_by_query_blocks_gives_the_whole_tables_diagnostics(
        tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    grades, orders = _experiment(rng, int(rng.integers(1, 60)))
    io.write_parquet(tmp_path / "g.parquet", grades)
    io.write_parquet(tmp_path / "o.parquet", orders)
    # blocks of a few rows: queries span batches, displays never span blocks
    monkeypatch.setattr(stage, "BLOCK_ROWS", int(rng.integers(1, 20)))
    audit = sorted({q for q in grades["query_id"] if int(q[1:]) % 3 == 0})
    audited, rows = stage._by_query_blocks(ParquetColumns(tmp_path / "g.parquet"),
                                           tmp_path / "o.parquet", round=1, audit_ids=audit)
    want_audited, codes = stage._grades(ParquetColumns(tmp_path / "g.parquet"), audit)
    pd.testing.assert_frame_equal(audited, want_audited[stage.AUDITED_COLUMNS])
    want = dg.diagnose(codes.of_round(1), stage._positions(tmp_path / "o.parquet"),
                       graders=["ga", "gb", "gc"])
    assert dg.diagnose_rows(rows, graders=["ga", "gb", "gc"]) == want
    assert rows.in_round == frozenset(codes.of_round(1).grader_names())


def test_agreement_stage_reads_whole_tables_out_of_query_order_or_a_pair_shown_twice(
        tmp_path):
    grades, orders = _experiment(np.random.default_rng(3), 20)
    io.write_parquet(tmp_path / "g.parquet", grades)
    io.write_parquet(tmp_path / "o.parquet",
                     pd.concat([orders.iloc[:5], orders.iloc[[4]], orders.iloc[5:]]))
    with pytest.raises(stage._Whole, match="listed twice"):
        stage._by_query_blocks(ParquetColumns(tmp_path / "g.parquet"),
                               tmp_path / "o.parquet", round=1, audit_ids=[])
    io.write_parquet(tmp_path / "o.parquet", orders.iloc[::-1])
    with pytest.raises(stage._Whole, match="not in query order"):
        stage._by_query_blocks(ParquetColumns(tmp_path / "g.parquet"),
                               tmp_path / "o.parquet", round=1, audit_ids=[])
    io.write_parquet(tmp_path / "g.parquet", grades.iloc[::-1])
    with pytest.raises(InputError, match="not in query_id order"):
        stage._by_query_blocks(ParquetColumns(tmp_path / "g.parquet"),
                               tmp_path / "o.parquet", round=1, audit_ids=[])


def test_agreement_stage_by_blocks_writes_the_whole_paths_report_reasons_included(tmp_path):
    from relgrade.protocol import agreement

    grades, orders = _experiment(np.random.default_rng(5), 40)
    grades["reason"] = [f"why {i}" for i in range(len(grades))]
    grades.loc[3, "reason"] = None
    io.write_parquet(tmp_path / "g.parquet", grades)
    io.write_parquet(tmp_path / "o.parquet", orders)
    audit = sorted({q for q in grades["query_id"] if int(q[1:]) % 3 == 0})
    queries = pd.DataFrame({"query_id": sorted(set(grades["query_id"])), "group": "g"})
    common = dict(audit_ids=audit, queries=queries, grader="ga", auditor="gb", round=1,
                  scale=[0, 1, 2, 3], relevant_min=2, graders=["ga", "gb"])
    audited, rows = stage._by_query_blocks(ParquetColumns(tmp_path / "g.parquet"),
                                           tmp_path / "o.parquet", round=1, audit_ids=audit)
    got = agreement.audit_agreement(audited, whole=rows, **common)
    stage._with_reasons(got.disagreements, tmp_path / "g.parquet", round=1)
    want_audited, codes = stage._grades(ParquetColumns(tmp_path / "g.parquet"), audit)
    want = agreement.audit_agreement(want_audited, whole=codes,
                                     positions=stage._positions(tmp_path / "o.parquet"),
                                     **common)
    assert len(want.disagreements) > 3
    assert got.metrics == want.metrics
    pd.testing.assert_frame_equal(got.confusion, want.confusion)
    pd.testing.assert_frame_equal(got.disagreements, want.disagreements)
