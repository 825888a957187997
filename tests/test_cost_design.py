"""Judging cost (seconds per judgment, annotator-hours) and the design record's blocks."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError
from relgrade.pipeline.cost import (
    cost_lines,
    judging_cost,
    prices,
    seconds_per_judgment,
    status_cost,
    worker,
)
from relgrade.pipeline.design import (
    FILL_IN,
    design_context,
    person_blocks,
    render_design,
    unfilled,
)
from relgrade.experiment.params import parse_params

BASE = {
    "seed": 5, "paths": {"record": "data/key/record.json"},
    "scale": {"grades": [0, 1, 2], "relevant_min": 1},
    "corpus": {"input": "data/input/chunks.jsonl"},
    "queries": {"input": "data/input/queries.tsv", "groups": ["a", "b"]},
    "arms": {"bm25": {"kind": "bm25", "depth": 100},
             "ext": {"kind": "file", "depth": 50, "source": "data/input/runs/ext.trec"},
             "mix": {"kind": "rrf", "depth": 100, "fuse": ["bm25", "ext"]}},
    "pool": {"depth": 10},
    "intents": {"input": "data/input/intents.tsv", "review": "data/input/review.json"},
    "audit": {"fraction": 0.25, "min_queries": 4},
    "grading": {"rubric": "rubric/v1.md", "rubric_version": "v1", "key_grader": "g",
                "auditor": "h", "max_reason_words": 15, "deviations": ["one deviation"]},
    "graders": {"g": {"role": "grader", "kind": "human", "seconds_per_judgment": 45},
                "h": {"role": "auditor", "kind": "model", "family": "fam"}},
    "gates": {"weighted_kappa_min": 0.75, "binary_kappa_min": 0.8, "disagreement_max": 0.1,
              "two_step_max": 0.02},
    "cost": {"seconds_per_judgment": 20},
}


def test_a_grader_override_beats_the_cost_default():
    params = parse_params(BASE)
    assert seconds_per_judgment(params, "g") == 45.0
    assert seconds_per_judgment(params, "h") == 20.0
    assert seconds_per_judgment(params, "undeclared") == 20.0


def test_a_bad_grader_override_names_the_key():
    raw = {**BASE, "graders": {"g": {"role": "grader", "kind": "human",
                                     "seconds_per_judgment": -1}}}
    with pytest.raises(InputError) as e:
        seconds_per_judgment(parse_params(raw), "g")
    assert str(e.value) == ("params.yaml: graders.g.seconds_per_judgment: must be a positive "
                            "number of seconds (found -1)")


def test_judging_cost_in_annotator_hours():
    # g: 240 spent × 45 s = 3 h, 80 pending × 45 s = 1 h; h: 90 × 20 s = 0.5 h, 0 pending
    cost = judging_cost({"g": {"spent": 240, "pending": 80}, "h": {"spent": 90, "pending": 0}},
                        {"g": 45.0, "h": 20.0})
    assert cost["graders"]["g"] == {"worker": "person", "spent": 240, "pending": 80,
                                    "seconds_per_judgment": 45.0, "spent_hours": 3.0,
                                    "pending_hours": 1.0}
    assert (cost["spent"], cost["pending"]) == (330, 80)
    assert cost["spent_hours"] == pytest.approx(3.5)
    assert cost["pending_hours"] == pytest.approx(1.0)
    assert cost_lines(cost) == [
        "judging cost: 330 judgments spent (3.50 annotator-hours), 80 pending (1.00 "
        "annotator-hours)",
        "  g (person): 240 spent, 80 pending at 45 s each (1.00 h to go)",
        "  h (person): 90 spent, 0 pending at 20 s each (0.00 h to go)"]


def test_cost_lines_give_each_rounds_judgments_when_more_than_one_round_was_graded():
    # g: round 1 102 + round 2 59 + round 3 102 = 263 at 45 s = 3.2875 h; h: round 1 30 at
    # 20 s = 0.1667 h; total 3.4542 h; per round 132, 59, 102
    counts = {"g": {"spent": 263, "pending": 0,
                    "spent_by_round": {"1": 102, "2": 59, "3": 102}},
              "h": {"spent": 30, "pending": 12, "spent_by_round": {"1": 30}}}
    cost = judging_cost(counts, {"g": 45.0, "h": 20.0})
    assert cost_lines(cost) == [
        "judging cost: 293 judgments spent (3.45 annotator-hours; round 1: 132, round 2: 59, "
        "round 3: 102), 12 pending (0.07 annotator-hours)",
        "  g (person): 263 spent (round 1: 102, round 2: 59, round 3: 102), 0 pending at 45 s "
        "each (0.00 h to go)",
        "  h (person): 30 spent, 12 pending at 20 s each (0.07 h to go)"]


def test_status_cost_sums_every_reason_a_pair_is_pending():
    pending = {"graders": {"g": {"made": 104, "current": 100, "pending_new": 10,
                                 "pending_stale": 2, "pending_audit": 0, "pending_regrade": 4},
                           "h": {"made": 36, "current": 36, "pending_new": 0, "pending_stale": 0,
                                 "pending_audit": 9, "pending_regrade": 0}}}
    cost = status_cost(parse_params(BASE), pending)
    # spent is every judgment made (4 of g's are stale or superseded), not the current ones
    assert (cost["graders"]["g"]["spent"], cost["graders"]["g"]["pending"]) == (104, 16)
    assert (cost["graders"]["h"]["spent"], cost["graders"]["h"]["pending"]) == (36, 9)
    # g is a person: 16 × 45 s = 720 s = 0.2 h; h is a model: its 9 owed judgments are 9
    # calls, no annotator-hours
    assert cost["pending_hours"] == pytest.approx(0.2)
    assert (cost["graders"]["h"]["worker"], cost["pending_calls"], cost["spent_calls"]) == \
        ("model", 9, 36)
    assert "pending_hours" not in cost["graders"]["h"]
    assert status_cost(parse_params(BASE), {"error": "bad file"}) is None


def test_who_worked_comes_from_the_graders_kind_and_family():
    raw = {**BASE, "graders": {
        "person": {"role": "grader", "kind": "human"},
        "script-person": {"role": "auditor", "kind": "model", "command": "x", "family": "Human"},
        "lm": {"role": "triage", "kind": "model", "command": "x"},
        "lm-file": {"role": "rater", "kind": "import", "family": "gpt"},
        "qrels": {"role": "rater", "kind": "import"}}}
    params = parse_params(raw)
    assert {g: worker(params, g) for g in (*raw["graders"], "undeclared")} == {
        "person": "person", "script-person": "person", "lm": "model", "lm-file": "model",
        "qrels": "person", "undeclared": "person"}


def test_a_model_is_priced_in_calls_and_self_consistency_samples_multiply_them():
    raw = {**BASE, "graders": {"g": {"role": "grader", "kind": "human"},
                               "h": {"role": "auditor", "kind": "model", "samples": 5}}}
    params = parse_params(raw)
    # g: 120 spent × 20 s = 0.667 h, 6 pending × 20 s = 0.033 h; h: 4560 spent × 5 = 22800
    # calls, 12 pending × 5 = 60 calls
    cost = judging_cost({"g": {"spent": 120, "pending": 6}, "h": {"spent": 4560, "pending": 12}},
                        prices(params, ["g", "h"]))
    assert cost["graders"]["h"] == {"worker": "model", "spent": 4560, "pending": 12,
                                    "calls_per_judgment": 5, "spent_calls": 22800,
                                    "pending_calls": 60}
    assert (cost["spent_hours"], cost["spent_calls"]) == (pytest.approx(120 * 20 / 3600), 22800)
    assert cost_lines(cost) == [
        "judging cost: 4680 judgments spent (0.67 annotator-hours + 22800 model calls), "
        "18 pending (0.03 annotator-hours + 60 model calls)",
        "  g (person): 120 spent, 6 pending at 20 s each (0.03 h to go)",
        "  h (model): 4560 spent, 12 pending at 5 calls each (60 calls to go)"]


def _record():
    return {"key_sha256": "ab" * 32, "pool_version": "p-123456789abc", "rubric_version": "v1",
            "round": 2, "pairs": 140, "queries": 20, "post_hoc": False,
            "dropped_queries": ["q7", "q9"], "deviations": ["from the record"],
            "agreement": {"pairs": 40, "weighted_kappa": 0.8123, "binary_kappa": 0.85,
                          "disagreement": 0.075, "two_step_disagreement": 0.0}}


def test_design_before_the_freeze_fills_params_and_marks_person_parts():
    text = render_design(design_context(name="x", params=parse_params(BASE)))
    assert text.startswith("# Design record: x\n")
    assert unfilled(text) == ["question", "corpus", "graders", "deviations"]
    assert "- `mix`: rrf, depth 100, fusing bm25, ext" in text
    assert "- `ext`: file, depth 50, from `data/input/runs/ext.trec`" in text
    assert "| g | grader | human | not declared | 45 |" in text
    assert "| h | auditor | model | fam | 20 |" in text
    assert "at least 25% of the queries and at least 4" in text
    assert "Not frozen yet" in text
    assert "1. one deviation" in text
    assert "not reviewed yet" in text


def test_design_after_the_freeze_reads_the_record_and_keeps_written_blocks():
    first = render_design(design_context(name="x", params=parse_params(BASE)))
    written = first.replace(f"{FILL_IN} What decision", "We pick the arm for search.\n"
                            "Two lines. What decision").replace(
        "<!-- relgrade: end question -->", "<!-- relgrade: end question -->", 1)
    blocks = person_blocks(written)
    assert blocks["question"].startswith("We pick the arm for search.\nTwo lines.")
    context = design_context(name="x", params=parse_params(BASE), record=_record(),
                             review={"reviewer": "h", "table_sha256": "cd" * 32, "flagged": []})
    again = render_design(context, blocks)
    assert person_blocks(again)["question"] == blocks["question"]
    assert unfilled(again) == ["corpus", "graders", "deviations"]
    assert (f"The key is frozen: sha256 `{'ab' * 32}`, pool version `p-123456789abc`, rubric "
            "v1, round 2, 140 pairs over 20 queries.") in again
    assert "Dropped queries (no chunk graded relevant): q7, q9." in again
    assert ("Agreement reached (round 2, 40 audited pairs): weighted kappa 0.812, binary kappa "
            "0.850, disagreement 0.075, two-step 0.000.") in again
    assert "1. from the record" in again
    assert f"reviewed by h, table sha256 `{'cd' * 32}`." in again
