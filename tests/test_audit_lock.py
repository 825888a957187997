"""The audit lock (drawn once per round, hash-checked) and the audit's coverage."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.protocol import audit, gate
from relgrade.schema import AUDIT

CHOSEN = pd.DataFrame([("kw02", "keyword", 0.5, "group keyword, rank 1"),
                       ("qu05", "question", 0.25, "group question, rank 1")],
                      columns=AUDIT)


def test_lock_hash_is_sha256_of_the_documented_canonical_json():
    lock = audit.lock_audit(CHOSEN, round=1, pool_version="p-0123456789ab")
    text = ('{"round":1,"pool_version":"p-0123456789ab","queries":['
            '{"query_id":"kw02","group":"keyword","unique_share":0.5,"reason":"group keyword, rank 1"},'
            '{"query_id":"qu05","group":"question","unique_share":0.25,"reason":"group question, rank 1"}'
            ']}')
    assert lock["sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_a_lock_reads_back_as_the_chosen_table():
    lock = audit.lock_audit(CHOSEN, round=2, pool_version="p-0123456789ab")
    pd.testing.assert_frame_equal(audit.check_lock(lock, path="data/audit/lock.json"), CHOSEN)


def test_a_lock_edited_by_hand_is_refused_with_the_fix():
    lock = audit.lock_audit(CHOSEN, round=1, pool_version="p-0123456789ab")
    lock["queries"][1]["query_id"] = "qu06"
    with pytest.raises(InputError) as e:
        audit.check_lock(lock, path="data/audit/lock.json")
    assert "data/audit/lock.json" in str(e.value)
    assert "does not match its sha256" in str(e.value)
    assert "git checkout -- data/audit/lock.json" in str(e.value)
    assert "relgrade audit redraw" in str(e.value)


@pytest.mark.parametrize("broken", [[], {"round": 1}, {"round": 1, "pool_version": "p", "queries": [{"query_id": "q"}], "sha256": "x"}],
                         ids=["not-an-object", "keys-missing", "row-lacks-columns"])
def test_a_malformed_lock_is_refused(broken):
    with pytest.raises(InputError, match="audit lock"):
        audit.check_lock(broken, path="lock.json")


POOL = pd.DataFrame({"query_id": ["kw02"] * 3 + ["qu05"] * 2 + ["kw09"],
                     "chunk_id": ["a", "b", "c", "d", "e", "f"]})


def _grades(rows):
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader"])


def test_coverage_counts_pairs_graded_by_both_over_pool_pairs_of_audited_queries():
    # 5 audited pairs (kw02: a b c; qu05: d e). Key grader has all 5; auditor has a, b, d.
    grades = _grades([(q, c, "grader-a") for q, c in zip(POOL["query_id"], POOL["chunk_id"])]
                     + [("kw02", "a", "auditor-b"), ("kw02", "b", "auditor-b"),
                        ("qu05", "d", "auditor-b")])
    c = audit.audit_coverage(POOL, grades, audit_ids=["kw02", "qu05"], key_grader="grader-a",
                             auditor="auditor-b")
    assert c == {"pairs": 5, "both": 3, "key_grader_missing": 0, "auditor_missing": 2,
                 "coverage": 3 / 5, "queries_incomplete": ["kw02", "qu05"]}


def test_grades_for_pairs_outside_the_pool_do_not_count_toward_coverage():
    grades = _grades([("kw02", "zz", "grader-a"), ("kw02", "zz", "auditor-b")])
    c = audit.audit_coverage(POOL, grades, audit_ids=["kw02"], key_grader="grader-a",
                             auditor="auditor-b")
    assert (c["pairs"], c["both"], c["coverage"]) == (3, 0, 0.0)


def test_coverage_of_audit_queries_without_pooled_pairs_is_undefined():
    c = audit.audit_coverage(POOL, _grades([]), audit_ids=["nothing"], key_grader="g",
                             auditor="a")
    assert c["coverage"] is None and c["pairs"] == 0


def test_gates_looser_than_the_protocol_are_named_and_stricter_ones_are_not():
    lines = gate.looser_than_protocol({"weighted_kappa_min": 0.7, "binary_kappa_min": 0.9,
                                       "disagreement_max": 0.15, "two_step_max": 0.02,
                                       "audit_coverage_min": 0.5})
    assert lines == ["gates.weighted_kappa_min 0.7 is looser than the protocol's 0.75",
                     "gates.disagreement_max 0.15 is looser than the protocol's 0.1",
                     "gates.audit_coverage_min 0.5 is looser than the protocol's 1"]


def test_family_rule_names_auditor_and_arm_clashes_and_ignores_undeclared_families():
    lines = gate.family_warnings(
        key_grader="grader-a", auditor="auditor-b",
        graders={"grader-a": "anthropic-claude", "auditor-b": "anthropic-claude"},
        arms={"bm25": None, "tfidf": None})
    assert lines == ["auditor auditor-b is of the same family as grader grader-a (anthropic-claude)"]
    assert gate.family_warnings(key_grader="g", auditor="a", graders={"g": "x", "a": "y"},
                                arms={"dense": "z"}) == []


OTHER = pd.DataFrame([("kw04", "keyword", 0.6, "group keyword, rank 1"),
                      ("qu01", "question", 0.3, "group question, rank 1")], columns=AUDIT)


def _never():
    raise AssertionError("a locked round must not be re-drawn")


def test_a_lock_of_the_current_round_is_kept_whatever_the_pool_has_become():
    lock = audit.lock_audit(CHOSEN, round=1, pool_version="p-0123456789ab")
    table, kept, drawn = audit.audit_for_round(lock, _never, round=1,
                                               pool_version="p-ffffffffffff")
    assert drawn is False and kept is lock
    assert list(table["query_id"]) == ["kw02", "qu05"]


def test_a_new_round_draws_a_new_lock_from_the_current_pool():
    lock = audit.lock_audit(CHOSEN, round=1, pool_version="p-0123456789ab")
    table, new, drawn = audit.audit_for_round(lock, lambda: OTHER, round=2,
                                              pool_version="p-ffffffffffff")
    assert drawn is True
    assert (new["round"], new["pool_version"]) == (2, "p-ffffffffffff")
    assert list(table["query_id"]) == ["kw04", "qu01"]
    assert new["sha256"] == audit.lock_sha256(new)


def test_no_lock_draws_one():
    table, new, drawn = audit.audit_for_round(None, lambda: CHOSEN, round=1, pool_version="p-1")
    assert drawn and list(table["query_id"]) == ["kw02", "qu05"] and new["round"] == 1


def test_a_hand_edited_lock_is_refused_even_in_a_new_round():
    lock = audit.lock_audit(CHOSEN, round=1, pool_version="p-0123456789ab")
    lock["queries"][0]["unique_share"] = 0.9
    with pytest.raises(InputError, match="does not match its sha256"):
        audit.audit_for_round(lock, lambda: OTHER, round=2, pool_version="p-1",
                              path="data/audit/lock.json")
