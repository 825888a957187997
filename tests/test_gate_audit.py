"""The whole gate: agreement, a complete audit, relaxed gates named, the family rule."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError
from relgrade.protocol.gate import check_audit_gates, coverage_line

GOOD = {"weighted_kappa": 0.9, "binary_kappa": 0.9, "disagreement": 0.05,
        "two_step_disagreement": 0.0, "pairs": 95, "missing": 0}
PROTOCOL = {"weighted_kappa_min": 0.75, "binary_kappa_min": 0.8, "disagreement_max": 0.1,
            "two_step_max": 0.02}
COMPLETE = {"pairs": 95, "both": 95, "key_grader_missing": 0, "auditor_missing": 0,
            "coverage": 1.0, "queries_incomplete": []}
# The auditor has graded 5 of 95 pairs; two audited queries lack grades.
PARTIAL = {"pairs": 95, "both": 5, "key_grader_missing": 0, "auditor_missing": 90,
           "coverage": 5 / 95, "queries_incomplete": ["kw02", "qu05"]}


def _gate(measures=GOOD, gates=PROTOCOL, coverage=COMPLETE, families=()):
    return check_audit_gates(measures, gates, coverage=coverage, key_grader="grader-a",
                             auditor="auditor-b", families=families)


def test_a_complete_audit_with_good_agreement_passes_and_records_everything_used():
    r = _gate()
    assert r.passed and r.relaxed == () and r.families == ()
    rec = r.record(round=1)
    assert rec["thresholds"] == PROTOCOL | {"audit_coverage_min": 1.0,
                                            "require_distinct_families": False}
    assert rec["measures"]["weighted_kappa"] == 0.9
    assert rec["coverage"] == COMPLETE
    assert rec["relaxed_gates"] == [] and rec["family_warnings"] == []


def test_an_auditor_at_5_of_95_pairs_fails_the_gate_naming_counts_and_queries():
    r = _gate(coverage=PARTIAL)
    assert not r.passed
    assert r.lines == ("audit coverage 5 of 95 pairs (0.053) < 1: auditor-b has graded 5 of "
                       "95 audit pairs, grader-a 95 of 95 (queries kw02, qu05 incomplete)",)
    assert "relgrade grade run --grader auditor-b" in r.advice[0]
    assert "grader-a`" not in r.advice[0]  # the key grader owes nothing


def test_coverage_fails_first_and_its_advice_replaces_the_regrade_advice():
    r = _gate(measures=GOOD | {"weighted_kappa": 0.5}, coverage=PARTIAL)
    assert r.lines[0].startswith("audit coverage 5 of 95")
    assert r.lines[1] == "weighted_kappa 0.5 < 0.75"
    assert len(r.advice) == 1 and r.advice[0].startswith("finish the audit")


def test_a_relaxed_coverage_gate_passes_a_partial_audit_and_says_it_is_relaxed():
    r = _gate(gates=PROTOCOL | {"audit_coverage_min": 0.05}, coverage=PARTIAL)
    assert r.passed
    assert r.relaxed == ("gates.audit_coverage_min 0.05 is looser than the protocol's 1",)
    assert r.record(1)["relaxed_gates"] == list(r.relaxed)


def test_relaxed_agreement_gates_are_listed_in_the_record():
    r = _gate(gates=PROTOCOL | {"weighted_kappa_min": 0.6, "two_step_max": 0.05})
    assert r.passed
    assert r.record(1)["relaxed_gates"] == [
        "gates.weighted_kappa_min 0.6 is looser than the protocol's 0.75",
        "gates.two_step_max 0.05 is looser than the protocol's 0.02"]


def test_audit_with_no_pooled_pair_fails_as_undefined():
    empty = {"pairs": 0, "both": 0, "key_grader_missing": 0, "auditor_missing": 0,
             "coverage": None, "queries_incomplete": []}
    r = _gate(coverage=empty)
    assert not r.passed and r.lines[0].startswith("audit coverage undefined")


CLASH = ("auditor auditor-b is of the same family as grader grader-a (anthropic-claude)",)


def test_a_family_clash_is_a_recorded_warning_by_default():
    r = _gate(families=CLASH)
    assert r.passed and r.record(1)["family_warnings"] == list(CLASH)


def test_a_family_clash_fails_the_gate_when_distinct_families_are_required():
    r = _gate(gates=PROTOCOL | {"require_distinct_families": True}, families=CLASH)
    assert not r.passed
    assert r.lines == (f"family rule: {CLASH[0]}",)
    assert "another model family" in r.advice[-1]


@pytest.mark.parametrize("gates", [PROTOCOL | {"audit_coverage_min": 1.5},
                                   PROTOCOL | {"require_distinct_families": "yes"}],
                         ids=["coverage-above-1", "flag-not-bool"])
def test_bad_audit_gate_values_are_refused(gates):
    with pytest.raises(InputError, match="gates."):
        _gate(gates=gates)


def test_coverage_line_names_one_query_in_the_singular():
    c = PARTIAL | {"queries_incomplete": ["kw02"]}
    assert coverage_line(c, key_grader="g", auditor="a") == (
        "a has graded 5 of 95 audit pairs, g 95 of 95 (query kw02 incomplete)")


def _params(gates_extra=None, arm_extra=None):
    from pathlib import Path

    import yaml

    from relgrade.experiment.params import parse_params

    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    raw["gates"] |= gates_extra or {}
    raw["arms"]["bm25"] |= arm_extra or {}
    return parse_params(raw)


def test_the_audit_gates_default_to_the_protocol_and_reach_the_gate_stage():
    raw = _params()
    assert raw.gates.thresholds() == PROTOCOL | {"audit_coverage_min": 1.0,
                                                 "require_distinct_families": False}


@pytest.mark.parametrize("extra, item", [({"audit_coverage_min": 1.2}, "gates.audit_coverage_min"),
                                         ({"require_distinct_families": "yes"},
                                          "gates.require_distinct_families")])
def test_bad_audit_gates_in_params_are_refused_by_key(extra, item):
    with pytest.raises(InputError, match=item.replace(".", r"\.")):
        _params(extra)


def test_an_arm_may_declare_its_family():
    assert _params(arm_extra={"family": "okapi"}).arms["bm25"].family == "okapi"


def _gate_stage(root, *, gates, graders, arms=None, agreement=None, mode=None):
    import importlib
    import json

    import pandas as pd

    from relgrade.experiment.files import Experiment

    (root / "agreement.json").write_text(json.dumps((agreement or GOOD) | {"round": 1}))
    pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["a", "b", "c"]}).to_parquet(
        root / "pool.parquet")
    pd.DataFrame({"query_id": ["q1", "q1", "q2", "q1", "q1"],
                  "chunk_id": ["a", "b", "c", "a", "b"],
                  "grader": ["grader-a"] * 3 + ["auditor-b"] * 2,
                  "round": [1] * 5, "grade": [2, 0, 1, 2, 0]}).to_parquet(root / "grades.parquet")
    (root / "audit.jsonl").write_text('{"query_id": "q1"}\n')
    params = {"paths": {"agreement": "agreement.json", "pool": "pool.parquet",
                        "grades": "grades.parquet", "audit": "audit.jsonl", "gate": "gate.json"},
              "grading": {"round": 1, "key_grader": "grader-a", "auditor": "auditor-b",
                          **({"mode": mode} if mode else {})},
              "graders": graders, "gates": gates,
              "arms": arms or {"bm25": {"kind": "bm25", "depth": 10}},
              **({"ppi": {"human_fraction": 0.5}} if mode == "ppi" else {})}
    stage = importlib.import_module("relgrade.pipeline.stages.gate")
    stage.run(Experiment.from_mapping(params, root=root))
    return json.loads((root / "gate.json").read_text())


CLAUDE = {"grader-a": {"role": "grader", "kind": "model", "family": "claude"},
          "auditor-b": {"role": "auditor", "kind": "model", "family": "claude"}}


def test_the_gate_stage_records_relaxed_gates_coverage_and_family_warnings(tmp_path, capsys):
    rec = _gate_stage(tmp_path, gates=PROTOCOL | {"disagreement_max": 0.2}, graders=CLAUDE,
                      arms={"dense": {"kind": "embed", "depth": 10, "family": "claude"}})
    assert rec["relaxed_gates"] == ["gates.disagreement_max 0.2 is looser than the protocol's 0.1"]
    assert rec["family_warnings"] == [
        "auditor auditor-b is of the same family as grader grader-a (claude)",
        "grader grader-a is of the same family as arm dense (claude)"]
    assert (rec["coverage"]["pairs"], rec["coverage"]["both"]) == (2, 2)
    assert rec["thresholds"]["disagreement_max"] == 0.2
    out = capsys.readouterr().out
    assert out.startswith("gate passed under relaxed gates: ")
    assert "warning: gates.disagreement_max 0.2 is looser than the protocol's 0.1" in out


def test_the_gate_stage_fails_on_a_family_clash_when_distinct_families_are_required(tmp_path):
    from relgrade.errors import GateFailed

    (tmp_path / "gate.json").write_text("{}")   # a stale pass record
    with pytest.raises(GateFailed) as e:
        _gate_stage(tmp_path, gates=PROTOCOL | {"require_distinct_families": True},
                    graders=CLAUDE)
    assert e.value.lines[0] == ("family rule: auditor auditor-b is of the same family as "
                                "grader grader-a (claude)")
    assert not (tmp_path / "gate.json").exists()


def test_people_sharing_the_human_family_are_no_family_conflict():
    from relgrade.protocol.gate import family_warnings

    # relgrade init's people: both of family human (any case); an arm of a model family
    assert family_warnings(key_grader="grader-a", auditor="auditor-b",
                           graders={"grader-a": "human", "auditor-b": "Human"},
                           arms={"bm25": None, "dense": "claude"}) == []


def test_a_model_family_shared_by_grader_and_auditor_still_warns_beside_a_person():
    from relgrade.protocol.gate import family_warnings

    # a model auditor of the model grader's family warns; the person (human) is not compared
    assert family_warnings(key_grader="grader-a", auditor="auditor-b",
                           graders={"grader-a": "claude", "auditor-b": "claude",
                                    "expert-c": "human"},
                           arms={"dense": "claude"}) == [
        "auditor auditor-b is of the same family as grader grader-a (claude)",
        "grader grader-a is of the same family as arm dense (claude)"]



def test_an_extra_auditor_is_held_to_the_auditors_rule_not_compared_as_a_grader():
    from relgrade.protocol.gate import family_warnings

    roles = {"grader-a": "grader", "auditor-b": "auditor", "auditor-c": "auditor"}
    # two auditors of one family, the grader of another: no conflict
    assert family_warnings(key_grader="grader-a", auditor="auditor-b",
                           graders={"grader-a": "gemini", "auditor-b": "claude",
                                    "auditor-c": "claude"},
                           arms={"dense": "claude"}, roles=roles) == []
    # the extra auditor shares the grader's family: named as an auditor
    assert family_warnings(key_grader="grader-a", auditor="auditor-b",
                           graders={"grader-a": "gemini", "auditor-b": "claude",
                                    "auditor-c": "gemini"},
                           arms={"dense": "claude"}, roles=roles) == [
        "auditor auditor-c is of the same family as grader grader-a (gemini)"]

PEOPLE = {"grader-a": {"role": "grader", "kind": "human", "family": "human"},
          "auditor-b": {"role": "auditor", "kind": "human", "family": "human"}}


def test_the_gate_stage_of_init_default_people_records_no_family_warning(tmp_path, capsys):
    rec = _gate_stage(tmp_path, gates=PROTOCOL, graders=PEOPLE)
    assert rec["family_warnings"] == []
    out = capsys.readouterr().out
    assert out == "gate passed: weighted_kappa 0.9, binary_kappa 0.9, disagreement 0.05, " \
                  "two_step_disagreement 0.0, pairs 95, missing 0, audit coverage 2 of 2 pairs\n"


def test_a_ppi_gate_that_relaxes_nothing_does_not_say_relaxed_gates(tmp_path, capsys):
    rec = _gate_stage(tmp_path, gates=PROTOCOL, graders=PEOPLE, mode="ppi",
                      agreement=GOOD | {"weighted_kappa": 0.5})
    # the record keeps the not-applied line where it always was
    assert rec["relaxed_gates"] == ["not applied in ppi mode: weighted_kappa 0.5 < 0.75"]
    assert capsys.readouterr().out.splitlines() == [
        "gate passed: weighted_kappa 0.5, binary_kappa 0.9, disagreement 0.05, "
        "two_step_disagreement 0.0, pairs 95, missing 0, audit coverage 2 of 2 pairs",
        "ppi mode, agreement gate reported, not applied: weighted_kappa 0.5 < 0.75"]


def test_a_ppi_gate_under_a_relaxed_gate_says_relaxed_for_that_gate_only(tmp_path, capsys):
    _gate_stage(tmp_path, gates=PROTOCOL | {"disagreement_max": 0.2}, graders=PEOPLE,
                mode="ppi", agreement=GOOD | {"weighted_kappa": 0.5})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gate passed under relaxed gates: ")
    assert out[1:] == [
        "ppi mode, agreement gate reported, not applied: weighted_kappa 0.5 < 0.75",
        "warning: gates.disagreement_max 0.2 is looser than the protocol's 0.1"]
