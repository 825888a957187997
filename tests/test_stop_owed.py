"""What people owe under `grading.stop: anytime`, counted from the grades recorded, and the
status line that says it (params' margin, a look taken under another one named)."""

from __future__ import annotations

from relgrade.cli.status import stop_line
from relgrade.protocol import stopping

ORDER = ["q5", "q2", "q9", "q1", "q7", "q3", "q8", "q4", "q6"]


def _record(**kw):
    return {"order": ORDER, "sample": 9, "looks": [], "settled_at": None} | kw


def test_before_any_look_people_owe_the_first_batch_when_nothing_is_graded():
    assert stopping.owed_queries(_record(), batch=4) == ["q5", "q2", "q9", "q1"]


def test_queries_graded_ahead_in_another_order_are_read_up_to_the_first_gap():
    # graded in id order q1..q6: the head of the seeded order graded is q5, q2 (q9 is not)
    graded = {"q1", "q2", "q3", "q4", "q5", "q6"}
    assert stopping.graded_prefix(ORDER, graded) == 2
    assert stopping.owed_count(_record(), batch=4, graded=graded) == 4
    # every query graded: the rule reads the whole sample, nothing is left to grade
    assert stopping.owed_count(_record(), batch=4, graded=set(ORDER)) == 9
    # after a look at 4: the next batch ends at 8, the graded head reaches 7 (q4 missing)
    graded = set(ORDER) - {"q4"}
    assert stopping.owed_count(_record(looks=[{"t": 4, "settled": False}]), batch=4,
                               graded=graded) == 8


def test_grades_beyond_a_settled_point_are_not_read():
    settled = _record(looks=[{"t": 4, "settled": True}], settled_at=4)
    assert stopping.owed_queries(settled, batch=4, graded=set(ORDER)) == ORDER[:4]


def test_the_next_look_is_one_batch_after_the_last_and_at_most_the_sample():
    assert stopping.next_look(_record(), batch=4) == 4
    assert stopping.next_look(_record(looks=[{"t": 8, "settled": False}]), batch=4) == 9


def _stop(**kw):
    return {"state": "grading", "rule": "anytime", "sample": 12, "reads": 4, "owed": [],
            "graded": 12, "looks": [], "settled_at": None, "batch": 4, "margin": 0.0,
            "seed": 0, "looked_with": {}} | kw


def test_the_status_line_owes_nothing_when_the_queries_read_are_graded():
    assert stop_line(_stop(reads=12)) == (
        "stopping rule: not settled (looks at none yet); people have graded the first 12 of "
        "12 queries of the seeded order and owe none now: `dvc repro` looks at them (4 a "
        "batch, margin 0, seed 0)")


def test_the_status_line_names_the_queries_still_owed():
    line = stop_line(_stop(looks=[4], reads=8, owed=["kw03", "qu06"], graded=6,
                           margin=0.05))
    assert line == ("stopping rule: not settled (looks at 4); people owe 2 of the first 8 of "
                    "12 queries of the seeded order (kw03, qu06), 4 a batch (margin 0.05, "
                    "seed 0)")


def test_the_status_line_names_a_margin_changed_after_a_look():
    line = stop_line(_stop(state="settled", looks=[4, 8], settled_at=8, margin=0.1,
                           looked_with={"grading.stop_margin": {"now": 0.1, "was": 0.05}}))
    assert line == ("stopping rule: settled at 8 of 12 queries (looks at 4, 8); people owe no "
                    "further query of the human sample; grading.stop_margin is 0.1 in params "
                    "but the looks were taken with 0.05: the ppi stage refuses it (restore "
                    "it, or start a new grading.round)")


def test_the_status_line_names_the_packets_build_before_the_grade_command():
    # the ppi stage's look moved the batch after the packets stage ran: the packets of the
    # owed queries are built first, as the ppi stage's Pending line says
    line = stop_line(_stop(looks=[2], reads=4, owed=["qu03", "qu05"], graded=2,
                           how="relgrade grade run --grader auditor-b --experiment e/p",
                           build="dvc repro e/p/dvc.yaml:packets"))
    assert line.endswith("(qu03, qu05), 4 a batch (margin 0, seed 0); run `dvc repro "
                         "e/p/dvc.yaml:packets` (it writes their packets), then `relgrade "
                         "grade run --grader auditor-b --experiment e/p`")
    built = stop_line(_stop(looks=[2], reads=4, owed=["qu03", "qu05"], graded=2,
                            how="relgrade grade run --grader auditor-b", build=None))
    assert built.endswith("(margin 0, seed 0); run `relgrade grade run --grader auditor-b`")


def test_the_status_line_says_a_used_up_sample_is_graded_and_did_not_settle():
    line = stop_line(_stop(looks=[4, 8, 12], reads=12, owed=[], graded=12))
    assert line == ("stopping rule: the whole sample is graded; the rule did not settle "
                    "(looks at 4, 8, 12): verdicts from all 12 queries; people owe no further "
                    "query of the human sample")
