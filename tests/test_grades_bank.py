"""The grades stage's rule over the judgment bank: current grades only, pending work named."""

from __future__ import annotations

import pandas as pd
import pytest

from relgrade.errors import InputError, ProtocolError
from relgrade.protocol import bank, grades

CHUNKS = pd.DataFrame({"chunk_id": ["a", "b", "c"], "header": ["h"] * 3,
                       "text": ["A", "B", "C"]})
INTENTS = pd.DataFrame({"query_id": ["q1", "q2"], "intent": ["i1", "i2"]})
RUBRIC = "r" * 64
GRADERS = {"grader-a": {"role": "grader", "kind": "model", "family": "f"},
           "auditor-b": {"role": "auditor", "kind": "model", "family": "f"}}
NOW = dict(content=bank.content_sha256(CHUNKS), intents=bank.intent_sha256(INTENTS),
           rubric_sha256=RUBRIC, rubric_version="v1")


def _file(grader_rows, *, made_on_text=None, round_=1, with_bank=True):
    """A grade file of (query_id, chunk_id, grade) rows, its bank made on today's corpus
    (or on ``made_on_text``: chunk id → the text it was graded on)."""
    chunks = CHUNKS.copy()
    if made_on_text:
        chunks["text"] = [made_on_text.get(c, t) for c, t in zip(chunks["chunk_id"],
                                                                  chunks["text"])]
    content, intents = bank.content_sha256(chunks), bank.intent_sha256(INTENTS)
    rows = [(i + 1, {"query_id": q, "chunk_id": c, "reason": "says so", "grade": g})
            for i, (q, c, g) in enumerate(grader_rows)]
    made = [(i + 1, {"query_id": q, "chunk_id": c, "content_sha256": content[c],
                     "intent_sha256": intents[q], "rubric_version": "v1",
                     "rubric_sha256": RUBRIC, "graded_at": "2026-01-01T00:00:00Z"})
            for i, (q, c, _) in enumerate(grader_rows)]
    return grades.GraderFile(rows=rows, source="g/round-1.jsonl", sha256="s", round=round_,
                             bank=made if with_bank else None,
                             bank_source="g/round-1.bank.jsonl")


def _bank(files):
    return grades.judgment_bank(files, graders=GRADERS, scale=[0, 1, 2], max_reason_words=15)


def _table(judged, pool_pairs, audit=("q2",)):
    pool = pd.DataFrame(pool_pairs, columns=["query_id", "chunk_id"])
    return grades.current_table(judged, graders=GRADERS, pool=pool, audit_query_ids=audit,
                                round=1, intents_sha256="i", **NOW)


def test_a_grade_of_a_pair_that_left_the_pool_stays_in_the_bank_unused_without_error():
    judged = _bank({"grader-a": [_file([("q1", "a", 2), ("q1", "b", 0)])]})
    table, manifest = _table(judged, [("q1", "a")], audit=())
    assert table[["query_id", "chunk_id", "grade"]].values.tolist() == [["q1", "a", 2]]
    assert manifest["graders"]["grader-a"]["bank_rows"] == 2
    assert manifest["graders"]["grader-a"]["unused"] == 1


def test_a_grade_made_on_other_text_is_stale_and_never_enters_the_table():
    judged = _bank({"grader-a": [_file([("q1", "a", 2), ("q1", "b", 1)],
                                       made_on_text={"b": "old text"})]})
    table, _ = _table(judged, [("q1", "a"), ("q1", "b")], audit=())
    assert table["chunk_id"].tolist() == ["a"]
    pool = pd.DataFrame([("q1", "a"), ("q1", "b")], columns=["query_id", "chunk_id"])
    pending = bank.pending_work(pool, judged, key_grader="grader-a", auditor="auditor-b",
                                audit_ids=[], **NOW)
    assert pending.values.tolist() == [["grader-a", "q1", "b", "stale"]]


def test_a_grade_whose_chunk_no_longer_exists_is_stale_not_an_error():
    judged = _bank({"grader-a": [_file([("q1", "a", 2)])]})
    gone = dict(NOW, content=bank.content_sha256(CHUNKS[CHUNKS["chunk_id"] != "a"]))
    assert bank.currency(judged, **gone).tolist() == ["chunk gone"]
    pool = pd.DataFrame([("q1", "b")], columns=["query_id", "chunk_id"])
    table, _ = grades.current_table(judged, graders=GRADERS, pool=pool, audit_query_ids=[],
                                    round=1, intents_sha256="i", **gone)
    assert table.empty


def test_an_auditor_grade_outside_the_audit_sample_is_kept_unused_not_refused():
    judged = _bank({"auditor-b": [_file([("q1", "a", 2), ("q2", "c", 1)])]})
    table, manifest = _table(judged, [("q1", "a"), ("q2", "c")], audit=("q2",))
    assert table[["grader", "query_id", "chunk_id"]].values.tolist() == [
        ["auditor-b", "q2", "c"]]
    assert manifest["graders"]["auditor-b"]["unused"] == 1


def test_a_grade_file_without_its_bank_sidecar_is_refused_naming_the_file():
    with pytest.raises(InputError, match="without its bank sidecar") as e:
        _bank({"grader-a": [_file([("q1", "a", 2)], with_bank=False)]})
    assert "g/round-1.jsonl" in str(e.value)


def test_an_empty_grade_file_without_a_sidecar_holds_no_grade_and_is_no_error():
    # the grading page opens a person's round file before anything is saved
    judged = _bank({"grader-a": [_file([], with_bank=False)]})
    assert judged.empty


def test_a_grade_row_without_its_bank_line_is_refused():
    f = _file([("q1", "a", 2), ("q1", "b", 0)])
    f.bank = f.bank[:1]
    with pytest.raises(InputError, match="without its bank line") as e:
        _bank({"grader-a": [f]})
    assert "(q1, b)" in str(e.value)


def test_pending_work_stops_with_one_message_naming_counts_and_the_command():
    judged = _bank({"grader-a": [_file([("q1", "a", 2)])]})
    pool = pd.DataFrame([("q1", "a"), ("q1", "b"), ("q2", "c")],
                        columns=["query_id", "chunk_id"])
    pending = bank.pending_work(pool, judged, key_grader="grader-a", auditor="auditor-b",
                                audit_ids=["q2"], **NOW)
    with pytest.raises(ProtocolError) as e:
        bank.require_no_pending(pending)
    assert str(e.value) == ("grading: 2 pairs need grader-a (2 new), 1 needs auditor-b "
                            "(audit query q2); run `relgrade grade run --grader grader-a` "
                            "or `relgrade serve`")
    bank.require_no_pending(pending.iloc[:0])  # nothing pending: no error


def test_the_table_keeps_each_rows_position_in_its_file_as_sequence():
    judged = _bank({"grader-a": [_file([("q1", "b", 0), ("q1", "a", 2)])]})
    table, _ = _table(judged, [("q1", "a"), ("q1", "b")], audit=())
    assert table[["chunk_id", "sequence"]].values.tolist() == [["a", 1], ["b", 0]]


def test_a_grade_under_another_rubric_version_is_stale():
    judged = _bank({"grader-a": [_file([("q1", "a", 2)])]})
    assert bank.currency(judged, **dict(NOW, rubric_version="v2")).tolist() == ["rubric"]


def test_the_latest_round_s_current_grade_of_a_pair_is_the_one_in_the_table():
    judged = _bank({"grader-a": [_file([("q1", "a", 0), ("q1", "b", 1)], round_=1),
                                 _file([("q1", "a", 2)], round_=2)]})
    table, manifest = _table(judged, [("q1", "a"), ("q1", "b")], audit=())
    assert table[["chunk_id", "grade", "sequence"]].values.tolist() == [["a", 2, 0],
                                                                        ["b", 1, 1]]
    assert manifest["rounds"] == [1, 2]
    assert manifest["graders"]["grader-a"]["bank_rows"] == 3
    assert manifest["graders"]["grader-a"]["unused"] == 1


def test_current_positions_are_the_bank_rows_of_the_latest_current_pool_grades():
    # bank rows: 0 = round 1 (q1, a), 1 = round 1 (q1, b), 2 = round 2 (q1, a)
    judged = _bank({"grader-a": [_file([("q1", "a", 0), ("q1", "b", 1)], round_=1),
                                 _file([("q1", "a", 2)], round_=2)]})
    pool = pd.DataFrame([("q1", "a"), ("q1", "b")], columns=["query_id", "chunk_id"])
    assert grades.current_positions(judged, pool=pool, **NOW).tolist() == [1, 2]
    assert grades.current_positions(judged, pool=pool.iloc[1:], **NOW).tolist() == [1]
