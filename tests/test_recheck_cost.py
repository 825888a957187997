"""The judges' re-check judgments are in the judging cost: made, so paid for."""

from __future__ import annotations

import shutil
from pathlib import Path

from relgrade.experiment.files import Experiment
from relgrade.pipeline.cost import cost_lines, judging_cost
from relgrade.pipeline.judgments import judgment_counts, recheck_judgments

REPO = Path(__file__).resolve().parents[1]


def test_re_check_files_of_the_judge_and_of_people_are_counted_by_who_made_them(tmp_path):
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    ex = Experiment.load(tmp_path / "params.yaml")
    tag = ex.path("grades_in") / "grader-a" / "recheck" / "a06abfe96163-1"
    tag.mkdir(parents=True)
    row = '{"query_id": "q", "chunk_id": "c%d", "reason": "r", "grade": 1}\n'
    (tag / "grader-a.jsonl").write_text("".join(row % i for i in range(3)))
    (tag / "auditor-b.jsonl").write_text(row % 0 + "\n" + row % 1)  # a blank line between
    (tag / "auditor-b.bank.jsonl").write_text(row % 0 * 5)  # sidecars are no judgments
    assert recheck_judgments(ex) == {"auditor-b": 2, "grader-a": 3}


def test_the_cost_counts_re_checks_in_spent_and_says_them_apart():
    counts = judgment_counts({"graders": {
        "model-m": {"made": 10, "made_by_round": {1: 10}, "current": 10, "pending_new": 0,
                    "made_recheck": 4},
        "person-h": {"made": 6, "made_by_round": {1: 6}, "current": 6, "pending_audit": 2,
                     "made_recheck": 4}}})
    assert counts == {"model-m": {"spent": 14, "pending": 0, "spent_recheck": 4},
                      "person-h": {"spent": 10, "pending": 2, "spent_recheck": 4}}
    cost = judging_cost(counts, {
        "model-m": {"worker": "model", "calls_per_judgment": 1},
        "person-h": {"worker": "person", "seconds_per_judgment": 36}})
    # 10 people's judgments at 36 s = 0.10 h spent, 2 at 36 s = 0.02 h to go
    assert cost_lines(cost) == [
        "judging cost: 24 judgments spent (0.10 annotator-hours + 14 model calls), "
        "2 pending (0.02 annotator-hours + 0 model calls)",
        "  model-m (model): 14 spent (4 for judge calibration), 0 pending at 1 call each "
        "(0 calls to go)",
        "  person-h (person): 10 spent (4 for judge calibration), 2 pending at 36 s each "
        "(0.02 h to go)"]
