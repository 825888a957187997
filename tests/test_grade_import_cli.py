"""`relgrade grade import`: validated like the grades stage, appended atomically, never replacing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def exp(tmp_path, monkeypatch):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["graders"]["legacy"] = {"role": "grader", "kind": "import", "family": "trec",
                                   "person": "assessor"}
    params["graders"]["person-h"] = {"role": "grader", "kind": "human", "family": "people",
                                     "person": "an assessor"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]
    pool = tmp_path / p["pool"]
    pool.parent.mkdir(parents=True)
    pd.DataFrame({"query_id": ["q1", "q1", "q2", "q3"], "chunk_id": ["a", "b", "c", "d"],
                  "inclusion_prob": [1.0] * 4}).to_parquet(pool, index=False)
    audit = tmp_path / p["audit"]
    audit.parent.mkdir(parents=True)
    audit.write_text('{"query_id": "q2", "group": "keyword", "unique_share": 0.5, "reason": "x"}\n')
    _write_made_on_inputs(tmp_path, p, params)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write_made_on_inputs(root, p, params):
    """The chunks, frozen intents and rubric an import records its grades as made on."""
    chunks = root / p["chunks"]
    chunks.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"chunk_id": list("abcd"), "header": list("ABCD"), "text": list("wxyz"),
                  "source": ["s"] * 4}).to_parquet(chunks, index=False)
    intents = root / p["intents"]
    intents.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"query_id": ["q1", "q2", "q3"], "query": ["x"] * 3,
                  "intent": ["i1", "i2", "i3"]}).to_parquet(intents, index=False)
    rubric = root / params["grading"]["rubric"]
    rubric.parent.mkdir(parents=True, exist_ok=True)
    rubric.write_text("# rubric\n")


def _row(q, c, g, reason="Shows where the loader lives."):
    return {"query_id": q, "chunk_id": c, "reason": reason, "grade": g}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _import(*args):
    return CliRunner().invoke(main, ["grade", "import", *args])


TARGET = Path("data/grades/grader-a/round-1.jsonl")


def test_import_into_an_empty_grader_writes_canonical_rows(exp):
    src = _write(exp / "new.jsonl", [_row("q1", "b", 1), _row("q1", "a", 2)])
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert res.output == ("imported 2 grades for grader-a (round 1) into "
                          "data/grades/grader-a/round-1.jsonl: 2 rows\n")
    assert (exp / TARGET).read_bytes() == (
        b'{"query_id":"q1","chunk_id":"b","reason":"Shows where the loader lives.","grade":1}\n'
        b'{"query_id":"q1","chunk_id":"a","reason":"Shows where the loader lives.","grade":2}\n')


def test_import_appends_and_keeps_recorded_bytes(exp):
    (exp / TARGET).parent.mkdir(parents=True)
    recorded = b'{"query_id": "q1", "chunk_id": "a", "reason": "Defines it.", "grade": 2}'
    (exp / TARGET).write_bytes(recorded)  # no final newline
    src = _write(exp / "new.jsonl", [_row("q2", "c", 0)])
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    data = (exp / TARGET).read_bytes()
    assert data.startswith(recorded + b"\n")
    assert data.count(b"\n") == 2
    assert res.output.endswith(": 2 rows\n")


def test_already_graded_pairs_are_refused_by_name_and_the_file_is_unchanged(exp):
    (exp / TARGET).parent.mkdir(parents=True)
    _write(exp / TARGET, [_row("q1", "a", 2), _row("q2", "c", 0)])
    before = (exp / TARGET).read_bytes()
    src = _write(exp / "new.jsonl", [_row("q1", "b", 1), _row("q1", "a", 0)])
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert res.output == (
        f"Error: {src.as_posix()}: 1 pair already recorded in "
        "data/grades/grader-a/round-1.jsonl (found (q1, a))."
        " Remove it from new.jsonl; recorded grades are never replaced (a changed grade "
        "needs a new round, or, once the key is frozen, `relgrade grade correct` records a "
        "post-hoc correction beside it)\n")
    assert (exp / TARGET).read_bytes() == before


def test_rows_recorded_byte_for_byte_are_skipped_with_a_note_and_the_rest_imported(exp):
    # a file exported with every pair and graded again: the recorded rows come back as they
    # are; only the new pair is added, and the note says how many were skipped
    first = _write(exp / "first.jsonl", [_row("q1", "a", 2), _row("q2", "c", 0)])
    assert _import(str(first), "--grader", "grader-a").exit_code == 0
    before = (exp / TARGET).read_bytes()
    again = _write(exp / "again.jsonl", [_row("q1", "a", 2), _row("q2", "c", 0),
                                         _row("q1", "b", 1)])
    res = _import(str(again), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert res.output == (
        "imported 1 grade for grader-a (round 1) into data/grades/grader-a/round-1.jsonl: "
        "3 rows\nNote: skipped 2 rows of again.jsonl already recorded byte for byte in "
        "data/grades/grader-a/round-1.jsonl (the same grade and reason)\n")
    assert (exp / TARGET).read_bytes() == before + (
        b'{"query_id":"q1","chunk_id":"b","reason":"Shows where the loader lives.","grade":1}\n')


@pytest.mark.parametrize("bad, message", [
    (_row("q1", "b", 3), "new.jsonl:2: grader-a: pair (q1, b): grade outside the scale 0-2 (found 3)"),
    (_row("q9", "z", 1), "new.jsonl:2: grader-a: pair (q9, z): pair not in the pool"),
    (_row("q1", "b", 1, reason=""), "new.jsonl:2: grader-a: pair (q1, b): reason required"),
])
def test_a_bad_file_leaves_the_existing_grades_file_byte_identical(exp, bad, message):
    (exp / TARGET).parent.mkdir(parents=True)
    _write(exp / TARGET, [_row("q2", "c", 0)])
    before = (exp / TARGET).read_bytes()
    src = _write(exp / "new.jsonl", [_row("q1", "a", 2), bad])
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {exp.as_posix()}/{message}")
    assert (exp / TARGET).read_bytes() == before
    assert sorted(p.name for p in (exp / TARGET).parent.iterdir()) == ["round-1.jsonl"]


def test_qrels_import_for_a_grader_of_kind_import(exp):
    src = exp / "old.qrels"
    src.write_text("q1 0 a 2\nq3 0 d 0\n")
    res = _import(str(src), "--grader", "legacy")
    assert res.exit_code == 0, res.output
    rows = [json.loads(l) for l in (exp / "data/grades/legacy/round-1.jsonl").read_text().splitlines()]
    assert rows == [{"query_id": "q1", "chunk_id": "a", "reason": "", "grade": 2},
                    {"query_id": "q3", "chunk_id": "d", "reason": "", "grade": 0}]


def _bank(grader):
    path = Path(f"data/grades/{grader}/round-1.bank.jsonl")
    return [json.loads(l) for l in path.read_text().splitlines()]


def test_qrels_import_for_a_human_grader_records_the_file_in_the_bank(exp):
    import hashlib

    src = exp / "old.qrels"
    src.write_text("q1 0 a 2\nq3 0 d 0\n")
    res = _import("old.qrels", "--grader", "person-h")
    assert res.exit_code == 0, res.output
    rows = [json.loads(l) for l in
            (exp / "data/grades/person-h/round-1.jsonl").read_text().splitlines()]
    # TREC qrels carry no reasons: the grades have none
    assert [(r["chunk_id"], r["reason"], r["grade"]) for r in rows] == [("a", "", 2), ("d", "", 0)]
    origin = {"file": "old.qrels", "sha256": hashlib.sha256(b"q1 0 a 2\nq3 0 d 0\n").hexdigest(),
              "format": "qrels"}
    assert [b["imported_from"] for b in _bank("person-h")] == [origin, origin]
    # a later import with reasons goes beside them; the recorded qrels grades stay valid
    more = _write(exp / "more.jsonl", [_row("q1", "b", 1)])
    res = _import(str(more), "--grader", "person-h")
    assert res.exit_code == 0, res.output
    assert res.output.endswith(": 3 rows\n")
    assert _bank("person-h")[2]["imported_from"]["format"] == "jsonl"
    # ... but a human grader's own jsonl grade still needs its reason
    bare = _write(exp / "bare.jsonl", [_row("q2", "c", 1, reason="")])
    res = _import(str(bare), "--grader", "person-h")
    assert res.exit_code == 1
    assert "bare.jsonl:1: person-h: pair (q2, c): reason required" in res.output


def test_qrels_import_for_a_model_grader_is_taken_too(exp):
    src = exp / "old.txt"
    src.write_text("q1 0 a 2\n")
    res = _import(str(src), "--grader", "grader-a", "--format", "qrels")
    assert res.exit_code == 0, res.output
    assert (exp / TARGET).read_bytes() == \
        b'{"query_id":"q1","chunk_id":"a","reason":"","grade":2}\n'
    assert _bank("grader-a")[0]["imported_from"]["file"] == src.as_posix()


@pytest.mark.parametrize("text, message", [
    ("q1 0 a 2\nq1 0 b 7\n", "old.qrels:2"),
    ("q1 0 a 2\nq9 0 z 1\n", "old.qrels:2: person-h: pair (q9, z): pair not in the pool"),
])
def test_a_bad_qrels_file_is_refused_naming_its_line_and_records_nothing(exp, text, message):
    src = exp / "old.qrels"
    src.write_text(text)
    res = _import(str(src), "--grader", "person-h")
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {exp.as_posix()}/{message}"), res.output
    assert not (exp / "data/grades/person-h").exists()


def test_auditor_import_outside_the_audit_queries_is_refused(exp):
    src = _write(exp / "b.jsonl", [_row("q2", "c", 1), _row("q1", "a", 1)])
    res = _import(str(src), "--grader", "auditor-b")
    assert res.exit_code == 1
    assert "b.jsonl:2: auditor-b: query q1: the auditor grades only the audit queries" in res.output


def test_unknown_grader_and_explicit_round(exp):
    src = _write(exp / "new.jsonl", [_row("q1", "a", 2)])
    res = _import(str(src), "--grader", "nobody")
    assert res.exit_code == 1 and "nobody: grader not declared in params `graders`" in res.output
    res = _import(str(src), "--grader", "grader-a", "--round", "2")
    assert res.exit_code == 0, res.output
    assert (exp / "data/grades/grader-a/round-2.jsonl").exists()


def test_an_import_after_an_intent_edit_brings_the_sidecar_up_to_the_frozen_intents(exp):
    (exp / TARGET).parent.mkdir(parents=True)
    (exp / TARGET.with_name("round-1.meta.json")).write_text(
        json.dumps({"intents_sha256": "x" * 64, "rubric_version": "v1", "round": 1}))
    manifest = exp / "data/intents/manifest.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"sha256": "y" * 64}))
    res = _import(str(_write(exp / "new.jsonl", [_row("q1", "a", 2)])), "--grader", "grader-a")
    # each grade's bank line says what it was made on; the sidecar names the intents now
    assert res.exit_code == 0, res.output
    assert json.loads((exp / TARGET.with_name("round-1.meta.json")).read_text()) == {
        "intents_sha256": "y" * 64, "rubric_version": "v1", "round": 1, "regrade": "all"}
    assert [json.loads(x)["chunk_id"] for x in (exp / TARGET).read_text().splitlines()] == ["a"]


def test_import_refuses_while_a_grading_run_holds_the_file(exp):
    from relgrade.graders.store import GradeStore

    (exp / TARGET).parent.mkdir(parents=True)
    _write(exp / TARGET, [_row("q1", "a", 2)])
    before = (exp / TARGET).read_bytes()
    src = _write(exp / "new.jsonl", [_row("q1", "b", 1)])
    with GradeStore(exp / TARGET).open():
        res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert res.output == (f"Error: {TARGET.as_posix()}: another relgrade process is "
                          "writing this grade file; import when it has finished\n")
    assert (exp / TARGET).read_bytes() == before
    assert _import(str(src), "--grader", "grader-a").exit_code == 0


def test_import_refused_before_writing_leaves_no_new_grade_file(exp):
    src = _write(exp / "new.jsonl", [_row("q1", "b", 1)])
    target = exp / "data/grades/grader-a/round-1.jsonl"
    target.parent.mkdir(parents=True)
    target.with_name(".round-1.jsonl.inflight").write_bytes(b"relgrade-inflight 1 2\n")
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1 and "a grading batch was interrupted" in res.output
    assert not target.exists()


def _label_studio_export(pairs_grades):
    """A Label Studio JSON export: one annotated task per (query, chunk, grade)."""
    return [{"id": i, "data": {"query_id": q, "chunk_id": c, "header": "h", "text": "t"},
             "annotations": [{"id": 100 + i, "completed_by": 7, "was_cancelled": False,
                              "result": [
                                  {"from_name": "reason", "to_name": "chunk",
                                   "type": "textarea", "value": {"text": ["Defines it."]}},
                                  {"from_name": "grade", "to_name": "chunk",
                                   "type": "choices", "value": {"choices": [str(g)]}}]}]}
            for i, (q, c, g) in enumerate(pairs_grades, start=1)]


def test_label_studio_export_is_imported_like_jsonl(exp):
    src = exp / "export.json"
    src.write_text(json.dumps(_label_studio_export([("q1", "a", 2), ("q1", "b", 0)])))
    res = _import(str(src), "--grader", "grader-a", "--format", "label-studio")
    assert res.exit_code == 0, res.output
    assert (exp / TARGET).read_bytes() == (
        b'{"query_id":"q1","chunk_id":"a","reason":"Defines it.","grade":2}\n'
        b'{"query_id":"q1","chunk_id":"b","reason":"Defines it.","grade":0}\n')


def test_label_studio_grade_outside_the_scale_is_refused_and_nothing_written(exp):
    src = exp / "export.json"
    src.write_text(json.dumps(_label_studio_export([("q1", "a", 2), ("q1", "b", 3)])))
    res = _import(str(src), "--grader", "grader-a", "--format", "label-studio")
    assert res.exit_code == 1
    assert "grade" in res.output and "scale" in res.output
    assert not (exp / TARGET).exists()


def test_import_records_the_intents_and_rubric_it_was_graded_under(exp):
    manifest = exp / "data/intents/manifest.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"sha256": "a" * 64, "reviewer": "r"}))
    src = _write(exp / "new.jsonl", [_row("q1", "a", 2)])
    assert _import(str(src), "--grader", "grader-a").exit_code == 0
    meta = exp / TARGET.with_name("round-1.meta.json")
    assert json.loads(meta.read_text()) == {"intents_sha256": "a" * 64, "rubric_version": "v1",
                                             "round": 1, "regrade": "all"}
    # The intents change after grading: a further import is recorded (each grade's bank
    # line says what it was made on) and the sidecar follows the intents graded from now.
    manifest.write_text(json.dumps({"sha256": "b" * 64, "reviewer": "r"}))
    res = _import(str(_write(exp / "more.jsonl", [_row("q1", "b", 0)])), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert json.loads(meta.read_text())["intents_sha256"] == "b" * 64
    assert [json.loads(x)["chunk_id"] for x in (exp / TARGET).read_text().splitlines()] == \
        ["a", "b"]


def test_import_records_what_each_grade_was_made_on_in_the_bank_sidecar(exp):
    import hashlib

    src = _write(exp / "new.jsonl", [_row("q1", "b", 1), _row("q1", "a", 2)])
    assert _import(str(src), "--grader", "grader-a").exit_code == 0
    lines = [json.loads(x) for x in
             (exp / TARGET.with_name("round-1.bank.jsonl")).read_text().splitlines()]
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    assert [(r["query_id"], r["chunk_id"]) for r in lines] == [("q1", "b"), ("q1", "a")]
    assert lines[0]["content_sha256"] == sha('{"header":"B","text":"x"}')
    assert lines[1]["content_sha256"] == sha('{"header":"A","text":"w"}')
    assert lines[0]["intent_sha256"] == sha('{"query_id":"q1","intent":"i1"}')
    assert lines[0]["rubric_version"] == "v1"
    assert lines[0]["rubric_sha256"] == sha("# rubric\n")
    assert list(lines[0]) == ["query_id", "chunk_id", "content_sha256", "intent_sha256",
                              "rubric_version", "rubric_sha256", "graded_at", "row_sha256",
                              "imported_from"]
    # the file the grades came from: as named on the command line, its sha256, its format
    assert lines[0]["imported_from"] == {"file": src.as_posix(),
                                         "sha256": hashlib.sha256(src.read_bytes()).hexdigest(),
                                         "format": "jsonl"}
    # the grade rows themselves keep their four keys, in order
    rows = [json.loads(x) for x in (exp / TARGET).read_text().splitlines()]
    assert list(rows[0]) == ["query_id", "chunk_id", "reason", "grade"]


def test_a_stale_pair_is_imported_again_as_a_new_grade_made_on_the_new_text(exp):
    import hashlib

    src = _write(exp / "new.jsonl", [_row("q1", "a", 2)])
    assert _import(str(src), "--grader", "grader-a").exit_code == 0
    # chunk a is edited: its grade is stale, and the stale message names `grade import`
    params = yaml.safe_load((exp / "params.yaml").read_text())
    pd.DataFrame({"chunk_id": list("abcd"), "header": list("ABCD"),
                  "text": ["w edited", "x", "y", "z"], "source": ["s"] * 4}).to_parquet(
        exp / params["paths"]["chunks"], index=False)
    again = _write(exp / "again.jsonl", [_row("q1", "a", 0, reason="No longer defines it.")])
    res = _import(str(again), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert res.output.endswith(": 2 rows\n")
    rows = [json.loads(x) for x in (exp / TARGET).read_text().splitlines()]
    assert [(r["chunk_id"], r["grade"]) for r in rows] == [("a", 2), ("a", 0)]
    bank = [json.loads(x) for x in
            (exp / TARGET.with_name("round-1.bank.jsonl")).read_text().splitlines()]
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    assert [b["content_sha256"] for b in bank] == [sha('{"header":"A","text":"w"}'),
                                                   sha('{"header":"A","text":"w edited"}')]
    # the new grade is current: the same row again is skipped as recorded, another grade of
    # the pair is refused as recorded
    res = _import(str(again), "--grader", "grader-a")
    assert res.exit_code == 0 and "Note: skipped 1 row of again.jsonl" in res.output
    other = _write(exp / "other.jsonl", [_row("q1", "a", 1, reason="No longer defines it.")])
    res = _import(str(other), "--grader", "grader-a")
    assert res.exit_code == 1
    assert "1 pair already recorded" in res.output


def test_a_recorded_grade_of_a_pair_that_left_the_pool_is_kept_and_the_import_goes_on(exp):
    # grader-a graded (q1, b) and (q3, d); then the pool changes and (q1, b) leaves it
    assert _import(str(_write(exp / "old.jsonl", [_row("q1", "a", 2), _row("q1", "b", 1),
                                                  _row("q3", "d", 0)])),
                   "--grader", "grader-a").exit_code == 0
    params = yaml.safe_load((exp / "params.yaml").read_text())
    pd.DataFrame({"query_id": ["q1", "q2", "q3"], "chunk_id": ["a", "c", "d"],
                  "inclusion_prob": [1.0] * 3}).to_parquet(exp / params["paths"]["pool"],
                                                           index=False)
    before = (exp / TARGET).read_bytes()
    res = _import(str(_write(exp / "new.jsonl", [_row("q2", "c", 1)])), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert res.output == ("imported 1 grade for grader-a (round 1) into "
                          "data/grades/grader-a/round-1.jsonl: 4 rows\n")
    # the left pair's line stays where it was, byte for byte; the new row follows
    assert (exp / TARGET).read_bytes() == before + (
        b'{"query_id":"q2","chunk_id":"c","reason":"Shows where the loader lives.","grade":1}\n')
    # the incoming rows still answer to the pool now: the left pair is refused there
    res = _import(str(_write(exp / "left.jsonl", [_row("q1", "b", 0)])), "--grader", "grader-a")
    assert res.exit_code == 1
    assert "left.jsonl:1: grader-a: pair (q1, b): pair not in the pool" in res.output


def test_an_auditors_recorded_grade_of_a_query_no_longer_audited_is_kept(exp):
    assert _import(str(_write(exp / "b.jsonl", [_row("q2", "c", 1)])),
                   "--grader", "auditor-b").exit_code == 0
    params = yaml.safe_load((exp / "params.yaml").read_text())
    (exp / params["paths"]["audit"]).write_text(
        '{"query_id": "q3", "group": "keyword", "unique_share": 0.5, "reason": "x"}\n')
    res = _import(str(_write(exp / "b2.jsonl", [_row("q3", "d", 0)])), "--grader", "auditor-b")
    assert res.exit_code == 0, res.output
    assert res.output.endswith("data/grades/auditor-b/round-1.jsonl: 2 rows\n")


def test_counts_in_messages_agree_with_their_nouns(exp):
    res = _import(str(_write(exp / "one.jsonl", [_row("q1", "a", 2)])), "--grader", "grader-a")
    assert res.output == ("imported 1 grade for grader-a (round 1) into "
                          "data/grades/grader-a/round-1.jsonl: 1 row\n")
    assert _import(str(_write(exp / "two.jsonl", [_row("q1", "b", 1)])),
                   "--grader", "grader-a").exit_code == 0
    res = _import(str(_write(exp / "again.jsonl", [_row("q1", "a", 0), _row("q1", "b", 2)])),
                  "--grader", "grader-a")
    assert res.exit_code == 1
    assert (": 2 pairs already recorded in data/grades/grader-a/round-1.jsonl (found (q1, a), "
            "(q1, b)). Remove them from again.jsonl;") in res.output


def test_a_file_checked_as_columns_records_what_the_row_reader_records(exp):
    # canonical lines are read as columns; the same rows with CRLF line ends only by rows
    rows = [_row("q1", "b", 1), _row("q1", "a", 2), _row("q3", "d", 0, reason="Off topic.")]
    columns = exp / "columns.jsonl"
    columns.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    by_rows = exp / "rows.jsonl"
    by_rows.write_bytes(columns.read_bytes().replace(b"\n", b"\r\n"))
    recorded = {}
    for src, grader in ((columns, "grader-a"), (by_rows, "person-h")):
        res = _import(str(src), "--grader", grader)
        assert res.exit_code == 0, res.output
        target = exp / f"data/grades/{grader}/round-1.jsonl"
        bank = [json.loads(line) for line in
                target.with_name("round-1.bank.jsonl").read_text().splitlines()]
        recorded[grader] = (target.read_bytes(),
                            [{k: v for k, v in b.items() if k not in ("graded_at", "imported_from")}
                             for b in bank])
    assert recorded["grader-a"] == recorded["person-h"]
    assert recorded["grader-a"][0] == columns.read_bytes()


def test_a_pair_twice_in_a_clean_file_is_refused_by_the_row_readers_words(exp):
    src = exp / "twice.jsonl"
    src.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n"
                           for r in (_row("q1", "a", 2), _row("q1", "b", 1), _row("q1", "a", 0))))
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert res.output.startswith(
        f"Error: {src.as_posix()}:3: grader-a: pair (q1, a): second row for one pair "
        "(first on line 1)")
    assert not (exp / TARGET).exists()
