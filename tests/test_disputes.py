"""Disputes as filed and recorded (relgrade.protocol.disputes): the rules a filed dispute
answers to, its id, and the open disputes grouped by section, with hand-written values."""

from __future__ import annotations

import hashlib
import json

import pytest

from relgrade.errors import InputError
from relgrade.protocol import disputes as dsp

RULES = dict(pool_pairs={("q1", "c1"), ("q1", "c2")}, graders=["grader-a", "carol"],
             scale=[0, 1, 2], sections={"duplicates": None, "split-answer": None})


def _row(**over):
    row = {"query_id": "q1", "chunk_id": "c1", "grader": "grader-a", "grade": 2,
           "section": "duplicates", "reason": "the copy answers it whole"}
    row.update(over)
    return row


def test_a_dispute_id_is_the_sha256_of_its_filed_fields_in_canonical_json():
    text = ('{"query_id":"q1","chunk_id":"c1","grader":"grader-a","grade":2,'
            '"section":"duplicates","reason":"the copy answers it whole"}')
    assert dsp.dispute_id(_row()) == "d-" + hashlib.sha256(text.encode()).hexdigest()[:12]


@pytest.mark.parametrize("row, message", [
    ({"chunk_id": "c1", "query_id": "q1", "grader": "grader-a", "grade": 2,
      "section": "duplicates", "reason": "r"},
     "d.jsonl:4: q1/c1: a dispute has exactly the keys query_id, chunk_id, grader, grade, "
     "section, reason, in that order (found chunk_id, query_id, grader, grade, section, "
     "reason)"),
    (_row(chunk_id="c9"), "d.jsonl:4: q1/c9: a dispute is filed on a pair of the pool. "
                          "Dispute only pairs the packets show"),
    (_row(grader="bob"), "d.jsonl:4: q1/c1: a dispute names a grader of params `graders` "
                         "(found bob)"),
    (_row(grade=3), "d.jsonl:4: q1/c1: a dispute's grade is an integer on the scale 0, 1, 2 "
                    "(found 3)"),
    (_row(grade=True), "d.jsonl:4: q1/c1: a dispute's grade is an integer on the scale 0, 1, "
                       "2 (found True)"),
    (_row(section="traps"), "d.jsonl:4: q1/c1: unknown section id: a dispute names a section "
                            "of the current rubric (found traps). See `relgrade disputes "
                            "sections` for the ids"),
    (_row(reason="   "), "d.jsonl:4: q1/c1: a dispute says why the rubric is wrong here: the "
                         "reason is empty"),
    (_row(reason="x" * 301), "d.jsonl:4: q1/c1: a dispute's reason longer than 300 "
                             "characters (found 301 characters). Shorten it"),
    (_row(query_id=7), "d.jsonl:4: a dispute's query_id is a non-empty string (found 7)"),
], ids=["key-order", "outside-pool", "unknown-grader", "off-scale", "bool-grade",
        "unknown-section", "empty-reason", "long-reason", "int-id"])
def test_a_filed_dispute_that_breaks_a_rule_is_refused_naming_file_line_pair_and_rule(row,
                                                                                     message):
    with pytest.raises(InputError) as e:
        dsp.check_dispute(row, source="d.jsonl", line=4, **RULES)
    assert str(e.value) == message


def test_open_disputes_group_by_section_in_the_rubrics_order_and_leave_settled_ones_out():
    def rec(**over):
        return dsp.recorded(_row(**over), rubric_version="v1", filed_at="2026-12-06T00:00:00Z",
                            via="import")

    a = rec(section="split-answer", reason="one half is the whole answer here")
    b = rec()
    c = rec(chunk_id="c2")
    d = rec(chunk_id="c2", grader="carol", grade=1, reason="a pointer, not a copy")
    table = dsp.table([a, b, c, d, b])  # b filed twice is one dispute
    assert len(table) == 4
    groups = dsp.open_by_section(table, settled=[c["id"]], sections=RULES["sections"])
    assert [(g["section"], g["count"], g["pairs"]) for g in groups] == [
        ("duplicates", 2, ["q1/c1", "q1/c2"]), ("split-answer", 1, ["q1/c1"])]
    assert groups[0]["disputes"] == [
        {"id": b["id"], "query_id": "q1", "chunk_id": "c1", "grader": "grader-a", "grade": 2,
         "reason": "the copy answers it whole"},
        {"id": d["id"], "query_id": "q1", "chunk_id": "c2", "grader": "carol", "grade": 1,
         "reason": "a pointer, not a copy"}]
    assert list(a) == list(dsp.RECORDED)
    assert json.loads(json.dumps(a))["via"] == "import"


def _experiment(root):
    """The two things the disputes reader asks of an experiment: its params' path and root."""
    from types import SimpleNamespace

    paths = SimpleNamespace(disputes="data/disputes.jsonl")
    return SimpleNamespace(root=root, params=SimpleNamespace(paths=paths),
                           path=lambda name: root / getattr(paths, name))


def test_a_torn_last_line_of_the_disputes_file_was_never_acknowledged_and_is_skipped(tmp_path):
    from relgrade.canonical import jsonl_bytes
    from relgrade.experiment.revisions import read_disputes

    one = dsp.recorded(_row(), rubric_version="v1", filed_at="2026-12-06T00:00:00Z", via="page")
    (tmp_path / "data").mkdir()
    (tmp_path / "data/disputes.jsonl").write_bytes(jsonl_bytes([one]) + b'{"id": "d-01')
    table = read_disputes(_experiment(tmp_path))
    assert table["id"].tolist() == [one["id"]]


def test_a_broken_whole_line_of_the_disputes_file_is_refused_naming_file_and_line(tmp_path):
    from relgrade.experiment.revisions import read_disputes

    (tmp_path / "data").mkdir()
    (tmp_path / "data/disputes.jsonl").write_text('[1, 2]\n')
    with pytest.raises(InputError) as e:
        read_disputes(_experiment(tmp_path))
    assert str(e.value) == "data/disputes.jsonl:1: a recorded dispute is a JSON object"
