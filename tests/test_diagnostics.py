"""Grading diagnostics: position bias and leniency drift (relgrade.protocol.diagnostics)."""

from __future__ import annotations

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.protocol import diagnostics as dg


def long(rows):
    """A long grades table from (query_id, chunk_id, grader, grade) tuples."""
    return pd.DataFrame([{"query_id": q, "chunk_id": c, "grader": g, "role": "grader",
                          "round": 1, "grade": grade, "reason": f"{g} on {c}"}
                         for q, c, g, grade in rows])


def test_position_bias_is_the_mean_grade_by_display_position():
    g = long([("q1", "c1", "ga", 2), ("q1", "c2", "ga", 0), ("q1", "c3", "ga", 1),
              ("q2", "c4", "ga", 1), ("q2", "c5", "ga", 1), ("q2", "c6", "ga", 2)])
    pos = pd.DataFrame({"query_id": ["q1"] * 3 + ["q2"] * 3,
                        "chunk_id": ["c1", "c2", "c3", "c4", "c5", "c6"],
                        "position": [0, 1, 2, 0, 1, 2]})
    table = dg.position_bias(g, pos)
    assert table.values.tolist() == [["ga", 0, 2, 1.5], ["ga", 1, 2, 0.5], ["ga", 2, 2, 1.5]]
    diag = dg.grading_diagnostics(g, pos)
    # Least-squares slope of grade on position: x = (0,1,2,0,1,2), y = (2,0,1,1,1,2);
    # x mean 1, y mean 7/6; sum dx*dy = -(2 - 7/6) + (1 - 7/6) - (1 - 7/6) + (2 - 7/6) = 0.
    assert diag["ga"]["position_slope"] == pytest.approx(0.0, abs=1e-12)
    # Three chunks per query: position p of 3 falls in third floor(3p/3) = p.
    assert diag["ga"]["mean_by_third"] == {"first": 1.5, "middle": 0.5, "last": 1.5}
    assert diag["notes"] == ["leniency drift not computed: the grades table has no "
                             "`sequence` column recording the order of grading"]


def test_position_slope_reads_a_falling_grade():
    g = long([("q1", "c1", "ga", 2), ("q1", "c2", "ga", 0), ("q2", "c3", "ga", 1),
              ("q2", "c4", "ga", 1)])
    pos = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"],
                        "chunk_id": ["c1", "c2", "c3", "c4"], "position": [0, 1, 0, 1]})
    # x = (0,1,0,1), y = (2,0,1,1): sum dx*dy = -0.5*1 + 0.5*(-1) + 0 + 0 = -1; sum dx^2 = 1.
    assert dg.grading_diagnostics(g, pos)["ga"]["position_slope"] == pytest.approx(-1.0)


def test_position_join_uses_role_and_round_when_both_tables_have_them():
    g = long([("q1", "c1", "ga", 2)])
    g.loc[0, "role"] = "auditor"
    pos = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["c1", "c1"],
                        "role": ["grader", "auditor"], "round": [1, 1], "position": [0, 4]})
    assert dg.position_bias(g, pos).values.tolist() == [["ga", 4, 1, 2.0]]


def test_leniency_drift_is_the_mean_grade_by_stretch_of_the_grading_sequence():
    g = long([("q", f"c{i}", "ga", grade) for i, grade in enumerate([0, 0, 1, 1, 2, 2])])
    g["sequence"] = range(6)
    table = dg.leniency_drift(g, bins=3)
    assert table.values.tolist() == [["ga", 1, 2, 0.0], ["ga", 2, 2, 1.0], ["ga", 3, 2, 2.0]]
    diag = dg.grading_diagnostics(g, bins=3)
    # Least-squares slope of grade on relative order x = 0, 0.2, ..., 1 (mean 0.5), y mean 1:
    # sum dx*dy = 0.5 + 0.3 + 0 + 0 + 0.3 + 0.5 = 1.6; sum dx^2 = 2 * (0.25 + 0.09 + 0.01) = 0.7.
    assert diag["ga"]["drift_slope"] == pytest.approx(1.6 / 0.7)
    assert diag["ga"]["mean_by_stretch"] == {"1": 0.0, "2": 1.0, "3": 2.0}


def test_leniency_drift_refuses_a_bins_count_that_is_not_a_positive_integer():
    g = long([("q", "c0", "ga", 1)]).assign(sequence=[0])
    with pytest.raises(InputError, match="bins must be a positive integer"):
        dg.leniency_drift(g, bins=0)


def test_position_table_listing_a_pair_twice_is_refused():
    g = long([("q1", "c1", "ga", 2)])
    pos = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["c1", "c1"], "position": [0, 1]})
    with pytest.raises(InputError, match="lists one pair twice"):
        dg.position_bias(g, pos)


def test_diagnostics_without_positions_or_sequence_say_what_was_not_computed():
    out = dg.grading_diagnostics(long([("q1", "c1", "ga", 2), ("q1", "c2", "gb", 0)]))
    assert out == {"ga": {"grades": 1}, "gb": {"grades": 1},
                   "notes": ["position bias not computed: no display positions were given",
                             "leniency drift not computed: the grades table has no "
                             "`sequence` column recording the order of grading"]}
