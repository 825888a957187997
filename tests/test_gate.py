"""The agreement gate: one line per failing measure, undefined kappa fails, the partial
regrade advice in its case only, the pass record, and the gate stage's exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from relgrade.errors import InputError, ProtocolError
from relgrade.protocol import agreement as ag
from relgrade.protocol.gate import (
    GENERAL_ADVICE,
    ONE_CATEGORY_ADVICE,
    check_gates,
    one_category,
)

REPO = Path(__file__).resolve().parents[1]
GATES = {"weighted_kappa_min": 0.75, "binary_kappa_min": 0.80, "disagreement_max": 0.10,
         "two_step_max": 0.02}
GOOD = {"pairs": 120, "missing": 0, "weighted_kappa": 0.86, "binary_kappa": 0.91,
        "disagreement": 0.06, "two_step_disagreement": 0.0, "relevant_split_share": 0.5,
        "notes": []}


def with_(**changes):
    return {**GOOD, **changes}


def test_passing_measures_pass_with_no_lines():
    r = check_gates(GOOD, GATES)
    assert r.passed and r.lines == () and r.advice == ()


@pytest.mark.parametrize("change, line", [
    ({"weighted_kappa": 0.71}, "weighted_kappa 0.71 < 0.75"),
    ({"binary_kappa": 0.79}, "binary_kappa 0.79 < 0.8"),
    ({"disagreement": 0.125}, "disagreement 0.125 > 0.1"),
    ({"two_step_disagreement": 0.03}, "two_step_disagreement 0.03 > 0.02"),
])
def test_each_gate_failing_alone_gives_exactly_its_line(change, line):
    r = check_gates(with_(**change), GATES)
    assert not r.passed
    assert r.lines == (line,)


def test_a_value_on_the_threshold_passes():
    r = check_gates(with_(weighted_kappa=0.75, binary_kappa=0.8, disagreement=0.1,
                          two_step_disagreement=0.02), GATES)
    assert r.passed


def test_a_value_just_below_the_threshold_is_printed_with_enough_digits():
    r = check_gates(with_(weighted_kappa=0.7499), GATES)
    assert r.lines == ("weighted_kappa 0.7499 < 0.75",)


def test_undefined_kappa_fails_with_a_line_saying_why():
    # Both raters give grade 1 to all five pairs: raw agreement 1.0, kappa undefined.
    m = ag.agreement([1] * 5, [1] * 5, scale=[0, 1, 2], relevant_min=1)
    assert m["raw_agreement"] == 1.0
    r = check_gates(m, GATES)
    assert not r.passed
    assert r.lines == (
        "weighted_kappa undefined: both graders gave all 5 audited pairs grade 1, so chance "
        "agreement is 1 and kappa is 0/0: chance-corrected agreement cannot be measured on a "
        "sample of one category (gate >= 0.75)",
        "binary_kappa undefined: both graders gave all 5 audited pairs a relevant grade "
        "(>= 1), so chance agreement is 1 and kappa is 0/0: chance-corrected agreement cannot "
        "be measured on a sample of one category (gate >= 0.8)",
    )
    # the sample, not the rubric, is at fault: no advice to revise and regrade
    assert r.advice == (ONE_CATEGORY_ADVICE,)


def test_all_relevant_sample_names_the_category_and_advises_a_larger_sample_only():
    # Both graders put all 4 pairs on the relevant side, splitting 1 and 2 the same way:
    # weighted kappa is 1 (both used grades 1 and 2, and agree on each), binary kappa 0/0.
    m = ag.agreement([1, 2, 2, 1], [1, 2, 2, 1], scale=[0, 1, 2], relevant_min=1)
    assert m["weighted_kappa"] == 1.0 and m["binary_kappa"] is None
    r = check_gates(m, GATES, sample_advice="use a larger audit sample")
    assert not r.passed
    assert r.lines == (
        "binary_kappa undefined: both graders gave all 4 audited pairs a relevant grade "
        "(>= 1), so chance agreement is 1 and kappa is 0/0: chance-corrected agreement cannot "
        "be measured on a sample of one category (gate >= 0.8)",)
    assert r.advice == ("use a larger audit sample",)


def test_a_one_category_sample_with_another_failing_measure_gets_both_advices():
    # All 5 pairs relevant for both graders, but 1 and 2 swapped on 4 of them: binary kappa
    # 0/0, disagreement 4/5 = 0.8 > 0.1, weighted kappa below 0 (it fails too).
    m = ag.agreement([1, 2, 1, 2, 2], [2, 1, 2, 1, 2], scale=[0, 1, 2], relevant_min=1)
    r = check_gates(m, GATES)
    assert [line.split(" ", 1)[0] for line in r.lines] == [
        "weighted_kappa", "binary_kappa", "disagreement"]
    assert r.lines[2] == "disagreement 0.8 > 0.1"
    assert r.advice == (ONE_CATEGORY_ADVICE, GENERAL_ADVICE)


def test_one_grader_of_one_category_is_a_kappa_of_0_with_the_regrade_advice():
    # Only the auditor varies: kappa is defined (0, observed = chance agreement); the graders
    # disagree on 1 of 4 pairs, which is a grading matter, not the sample's.
    m = ag.agreement([1, 1, 1, 1], [1, 1, 0, 1], scale=[0, 1, 2], relevant_min=1)
    assert m["binary_kappa"] == 0.0
    r = check_gates(m, GATES)
    assert "binary_kappa 0 < 0.8" in r.lines
    assert r.advice == (GENERAL_ADVICE,)


def test_one_category_reads_the_agreement_note_only_for_a_one_category_sample():
    m = ag.agreement([0, 0, 0], [0, 0, 0], scale=[0, 1, 2], relevant_min=1)
    assert one_category("binary_kappa", m) == "a grade below 1 (not relevant)"
    assert one_category("weighted_kappa", m) == "grade 0"
    assert one_category("binary_kappa", ag.agreement([], [], scale=[0, 1, 2],
                                                     relevant_min=1)) is None
    assert one_category("binary_kappa", GOOD) is None


def test_no_pairs_fails_every_gate_as_undefined():
    m = ag.agreement([], [], scale=[0, 1, 2], relevant_min=1)
    r = check_gates(m, GATES)
    assert len(r.lines) == 4
    assert r.lines[2] == ("disagreement undefined: no pair has grades from both raters "
                          "(gate <= 0.1)")


def test_partial_regrade_advice_when_binary_passes_and_weighted_fails_on_one_two_splits():
    # 20 pairs: 12 agree on 0, 2 agree on 1, 2 agree on 2, four 1-versus-2 splits.
    a = [0] * 12 + [1, 1, 2, 2] + [1, 2, 1, 2]
    b = [0] * 12 + [1, 1, 2, 2] + [2, 1, 2, 1]
    m = ag.agreement(a, b, scale=[0, 1, 2], relevant_min=1)
    assert m["binary_kappa"] == 1.0 and m["relevant_split_share"] == 1.0
    # Quadratic weights: observed 4/20; marginals a = b = (12, 4, 4) over 0,1,2, expected
    # (2*12*4*1 + 2*12*4*4 + 2*4*4*1) / 400 = 512/400 -> kappa_w = 1 - 0.2/1.28 = 0.84375;
    # so use a stricter gate to make weighted kappa fail while binary passes.
    assert m["weighted_kappa"] == pytest.approx(1 - (4 / 20) / (512 / 400))
    r = check_gates(m, {**GATES, "weighted_kappa_min": 0.9, "disagreement_max": 0.25})
    assert r.lines == ("weighted_kappa 0.844 < 0.9",)
    (advice,) = r.advice
    assert advice == (
        "binary_kappa passes and 100% of the disagreements are splits between two relevant "
        "grades (1 versus 2): tighten the query-form rules of the rubric, log the revision, "
        "and regrade only the chunks graded 1 or 2 in a new grading.round (a partial regrade)")


@pytest.mark.parametrize("change", [
    {"weighted_kappa": 0.70, "binary_kappa": 0.79, "relevant_split_share": 0.9},  # binary fails
    {"weighted_kappa": 0.70, "relevant_split_share": 0.5},  # not mostly 1-vs-2
    {"disagreement": 0.2, "relevant_split_share": 0.9},  # weighted kappa passes
    {"weighted_kappa": 0.70, "binary_kappa": None, "relevant_split_share": 0.9},
])
def test_general_advice_otherwise(change):
    r = check_gates(with_(**change), GATES)
    assert not r.passed
    assert r.advice == (GENERAL_ADVICE,)
    assert "graded 1 or 2" not in r.advice[0]


def test_pass_record_carries_measures_thresholds_and_round():
    r = check_gates(GOOD, GATES)
    assert r.record(round=2) == {
        "passed": True,
        "measures": {"weighted_kappa": 0.86, "binary_kappa": 0.91, "disagreement": 0.06,
                     "two_step_disagreement": 0.0, "pairs": 120, "missing": 0},
        "thresholds": GATES, "round": 2}
    with pytest.raises(ProtocolError):
        check_gates(with_(weighted_kappa=0.1), GATES).record(round=2)


def test_bad_gates_and_missing_measures_are_input_errors():
    with pytest.raises(InputError) as e:
        check_gates(GOOD, {**GATES, "weighted_kapa_min": 0.7})
    assert str(e.value).startswith("weighted_kapa_min: unknown gate")
    gates = dict(GATES)
    del gates["two_step_max"]
    with pytest.raises(InputError, match="two_step_max: params `gates` lacks a gate"):
        check_gates(GOOD, gates)
    with pytest.raises(InputError, match="must be a number"):
        check_gates(GOOD, {**GATES, "disagreement_max": "ten percent"})
    measures = dict(GOOD)
    del measures["binary_kappa"]
    with pytest.raises(InputError, match="binary_kappa: the agreement metrics lack"):
        check_gates(measures, GATES)


# --- the stage ----------------------------------------------------------------------

def stage(tmp_path, measures):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]
    (tmp_path / p["agreement"]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / p["agreement"]).write_text(json.dumps(measures))
    # A complete audit of one query (pairs a, b), so only the agreement decides.
    for name, table in (("pool", {"query_id": ["q1", "q1"], "chunk_id": ["a", "b"]}),
                        ("grades", {"query_id": ["q1"] * 4, "chunk_id": ["a", "b"] * 2,
                                    "grader": ["grader-a"] * 2 + ["auditor-b"] * 2,
                                    "round": [1] * 4, "grade": [1, 0, 1, 0]})):
        (tmp_path / p[name]).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(table).to_parquet(tmp_path / p[name])
    (tmp_path / p["audit"]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / p["audit"]).write_text('{"query_id": "q1"}\n')
    done = subprocess.run([sys.executable, str(REPO / "stages" / "gate.py")], cwd=tmp_path,
                          capture_output=True, text=True)
    return done, tmp_path / p["gate"], params["gates"]


def test_gate_stage_writes_the_pass_record(tmp_path):
    done, out, gates = stage(tmp_path, {**GOOD, "round": 1})
    assert done.returncode == 0, done.stderr
    rec = json.loads(out.read_text())
    assert rec["passed"] is True and rec["round"] == 1 and rec["thresholds"] == gates
    assert rec["measures"]["weighted_kappa"] == 0.86


def test_gate_stage_fails_with_one_line_per_measure_and_leaves_no_pass_record(tmp_path):
    done, out, _ = stage(tmp_path, {**GOOD, "round": 1})
    assert out.exists()
    done, out, _ = stage(tmp_path, {**GOOD, "round": 1, "weighted_kappa": 0.71})
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == "Gate failed: weighted_kappa 0.71 < 0.75"
    # advice and warnings under their own labels: neither is a failure
    assert lines[1].startswith("Advice: read the disagreements")
    assert lines[2:] == ["Warning: auditor auditor-b is of the same family as grader grader-a "
                         "(anthropic-claude)"]
    assert not out.exists()


def test_gate_stage_on_an_all_relevant_audit_names_the_category_and_a_larger_sample(tmp_path):
    # Two pooled queries, q1 audited; both graders give its two pairs grade 1.
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]
    measures = ag.agreement([1, 1], [1, 1], scale=[0, 1, 2], relevant_min=1) | {"round": 1}
    (tmp_path / p["agreement"]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / p["agreement"]).write_text(json.dumps(measures))
    for name, table in (("pool", {"query_id": ["q1", "q1", "q2"], "chunk_id": ["a", "b", "c"]}),
                        ("grades", {"query_id": ["q1"] * 4, "chunk_id": ["a", "b"] * 2,
                                    "grader": ["grader-a"] * 2 + ["auditor-b"] * 2,
                                    "round": [1] * 4, "grade": [1, 1, 1, 1]})):
        (tmp_path / p[name]).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(table).to_parquet(tmp_path / p[name])
    (tmp_path / p["audit"]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / p["audit"]).write_text('{"query_id": "q1"}\n')
    done = subprocess.run([sys.executable, str(REPO / "stages" / "gate.py")], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[:2] == [
        "Gate failed: weighted_kappa undefined: both graders gave all 2 audited pairs grade 1, "
        "so chance agreement is 1 and kappa is 0/0: chance-corrected agreement cannot be "
        "measured on a sample of one category (gate >= 0.75)",
        "Gate failed: binary_kappa undefined: both graders gave all 2 audited pairs a relevant "
        "grade (>= 1), so chance agreement is 1 and kappa is 0/0: chance-corrected agreement "
        "cannot be measured on a sample of one category (gate >= 0.8)"]
    advice = [line for line in lines if line.startswith("Advice: ")]
    assert len(advice) == 1, lines
    assert "revising the rubric cannot help" in advice[0]
    assert (f"raise audit.min_queries (now {params['audit']['min_queries']}; 1 of 2 queries "
            f"are audited) or audit.fraction (now {params['audit']['fraction']:g}), and set "
            f"grading.round: {params['grading']['round'] + 1}") in advice[0]
    assert "read the disagreements" not in done.stderr
    assert not (tmp_path / p["gate"]).exists()


def test_in_triage_mode_the_advice_names_the_zero_sample_and_the_audit_size(tmp_path):
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages.gate import one_category_advice

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["grading"]["mode"] = "triage"
    params["graders"]["model-t"] = {"role": "triage", "kind": "model", "family": "x",
                                    "model": "m"}
    params["triage"] = {"zero_sample": 0.2}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    ex = Experiment.load(tmp_path / "params.yaml")
    tail = (", and set grading.round: 2, whose audit sample is drawn before grading (round 1's "
            "grades stay in git); then run `dvc repro` and grade the new round as before")
    assert one_category_advice(ex, audited=2, queries=6).endswith(
        "in params.yaml raise triage.zero_sample (now 0.2), so people grade more of the "
        "model's 0s, or audit.min_queries (now 10; 2 of 6 queries are audited) or "
        "audit.fraction (now 0.1)" + tail)
    # every queue query audited already: only the zero sample can grow
    assert one_category_advice(ex, audited=6, queries=6).endswith(
        "in params.yaml raise triage.zero_sample (now 0.2), so people grade more of the "
        "model's 0s" + tail)


def test_the_regrade_advice_names_the_disagreements_file_it_is_given():
    r = check_gates(with_(disagreement=0.125), GATES,
                    disagreements="experiments/mine/data/private/disagreements.jsonl")
    assert r.advice == (
        "read the disagreements (experiments/mine/data/private/disagreements.jsonl) with both "
        "reasons and name the cause: an ambiguous intent, a missing boundary rule, or drift; "
        "revise the rubric or the intents, log the revision, and regrade the whole pool from "
        "fresh orders in a new grading.round",)
