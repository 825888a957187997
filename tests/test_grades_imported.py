"""Grades imported from TREC qrels carry no reason: the judgment bank takes them for a grader
of any kind when their bank line says they were imported from qrels, and only then."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError
from relgrade.protocol.grades import GraderFile, bank_of_file, imported_from
from relgrade.protocol.sidecar import row_sha256

HUMAN = {"role": "grader", "kind": "human", "family": "people", "person": "an assessor"}
ROWS = [(1, {"query_id": "q1", "chunk_id": "a", "reason": "", "grade": 2}),
        (2, {"query_id": "q1", "chunk_id": "b", "reason": "Names the loader.", "grade": 1})]


def _file(notes):
    bank = [(line, {"query_id": r["query_id"], "chunk_id": r["chunk_id"],
                    "content_sha256": "c", "intent_sha256": "i", "rubric_version": "v1",
                    "rubric_sha256": "r", "graded_at": "2026-12-01T00:00:00Z",
                    "row_sha256": row_sha256(r), **note})
            for (line, r), note in zip(ROWS, notes)]
    return GraderFile(rows=ROWS, source="round-1.jsonl", sha256="x", round=1, bank=bank,
                      bank_source="round-1.bank.jsonl")


def _bank(notes):
    return bank_of_file(_file(notes), name="person-h", spec=HUMAN, scale=[0, 1, 2],
                        max_reason_words=15)


def test_a_human_graders_reasonless_grade_imported_from_qrels_enters_the_bank():
    qrels = imported_from("old.qrels", "ab" * 32, "qrels")
    jsonl = imported_from("new.jsonl", "cd" * 32, "jsonl")
    got = _bank([qrels, jsonl])
    assert list(zip(got["chunk_id"], got["reason"], got["grade"])) == \
        [("a", "", 2), ("b", "Names the loader.", 1)]


@pytest.mark.parametrize("note", [{}, imported_from("new.jsonl", "cd" * 32, "jsonl")],
                         ids=["graded here", "imported from jsonl"])
def test_a_human_graders_reasonless_grade_from_anywhere_else_is_refused_by_line(note):
    with pytest.raises(InputError) as e:
        _bank([note, {}])
    assert str(e.value).startswith("round-1.jsonl:1: person-h: pair (q1, a): reason required")
