"""``aggregate_raters``: gold → removal → aggregation → agreement → flags, in one call."""

from __future__ import annotations

import pandas as pd
import pytest

from relgrade.cli.aggregate import report_lines
from relgrade.errors import InputError
from relgrade.raters.report import aggregate_raters, select_grades

# x and y agree on every pair; z reverses the scale on a and b and agrees on c.
RATERS = {"x": [2, 0, 1], "y": [2, 0, 1], "z": [0, 2, 1]}
GRADES = pd.DataFrame([{"query_id": "q1", "chunk_id": c, "grader": n, "grade": g}
                       for n, gs in RATERS.items() for c, g in zip("abc", gs)])
GOLD = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"], "grade": [2, 0]})


def test_gold_removes_the_reverser_and_the_rest_agree_perfectly():
    report = aggregate_raters(GRADES, scale=[0, 1, 2], gold=GOLD, min_gold=2,
                              grades_source="g.jsonl", gold_source="gold.jsonl")
    doc = report.to_dict()
    assert report.labels.to_dict("records") == [
        {"query_id": "q1", "chunk_id": "a", "grade": 2},
        {"query_id": "q1", "chunk_id": "b", "grade": 0},
        {"query_id": "q1", "chunk_id": "c", "grade": 1}]
    assert doc["removed"] == ["z"] and doc["kept_raters"] == ["x", "y"]
    # z got 0 of its 2 gold pairs right; x and y both
    assert [(r["grader"], r["correct"], r["accuracy"]) for r in doc["raters"]] == [
        ("x", 2, 1.0), ("y", 2, 1.0), ("z", 0, 0.0)]
    # x and y: every pair agrees, each grade used once per rater: Fleiss' kappa 1
    assert doc["agreement"]["kept"]["fleiss_kappa"] == pytest.approx(1.0)
    assert doc["high_variance"] == [] and doc["gold_pairs"] == 2
    assert doc["tie_rule"] and doc["out"] is None
    assert report_lines(report)[:2] == [
        "grades: g.jsonl: 9 grades from 3 raters on 3 pairs",
        "gold: gold.jsonl: 2 pairs; a rater with at least 2 gold answers is removed below "
        "accuracy 0.7"]


def test_without_gold_every_rater_stays_and_pairs_two_apart_are_flagged():
    report = aggregate_raters(GRADES, scale=[0, 1, 2])
    doc = report.to_dict()
    assert doc["removed"] == [] and doc["kept_raters"] == ["x", "y", "z"]
    assert [(f["chunk_id"], f["grade"]) for f in doc["high_variance"]] == [("a", 2), ("b", 0)]
    assert report.written_to("agg.jsonl").to_dict()["out"] == "agg.jsonl"
    assert "wrote 3 rows to agg.jsonl" in report_lines(report.written_to("agg.jsonl"))


def test_a_report_without_file_names_says_what_it_read():
    lines = report_lines(aggregate_raters(GRADES, scale=[0, 1, 2], gold=GOLD, min_gold=2))
    assert lines[:2] == ["grades: 9 grades from 3 raters on 3 pairs",
                         "gold: 2 pairs; a rater with at least 2 gold answers is removed "
                         "below accuracy 0.7"]


def test_every_rater_below_the_threshold_leaves_nothing_to_aggregate():
    with pytest.raises(InputError) as e:
        aggregate_raters(GRADES[GRADES["grader"] == "z"], scale=[0, 1, 2], gold=GOLD,
                         min_gold=2, grades_source="g.jsonl")
    assert str(e.value).startswith("g.jsonl: every rater fell below the gold threshold")


def test_select_grades_needs_a_round_when_there_are_several():
    two = pd.concat([GRADES.assign(round=1), GRADES.assign(round=2)], ignore_index=True)
    with pytest.raises(InputError, match=r"several rounds \(found rounds 1, 2\)"):
        select_grades(two)
    assert len(select_grades(two, round_=2, exclude=["z"])) == 6
    with pytest.raises(InputError, match="--exclude names a grader"):
        select_grades(two, round_=2, exclude=["nobody"])
