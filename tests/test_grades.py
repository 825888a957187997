"""Grade rows: each validation rule with its exact message, and the grades stage's tables."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from relgrade.errors import InputError
from relgrade.io.files import iter_jsonl
from relgrade.protocol import grades
from relgrade.protocol.grades import reason_required, validate_grade_rows

POOL = {("q1", "4411"), ("q1", "c2"), ("q2", "c3")}
GOOD = {"query_id": "q1", "chunk_id": "c2", "reason": "Defines the loader.", "grade": 2}


def _validate(rows, **kw):
    args = dict(pool_pairs=POOL, scale=[0, 1, 2], max_reason_words=15, require_reason=True,
                source="g.jsonl")
    args.update(kw)
    return validate_grade_rows(list(enumerate(rows, start=1)), **args)


def _message(rows, **kw):
    with pytest.raises(InputError) as e:
        _validate(rows, **kw)
    return str(e.value)


def test_valid_rows_come_back_as_a_typed_table_in_file_order():
    df = _validate([GOOD, {"query_id": "q2", "chunk_id": "c3", "reason": "Off topic.",
                           "grade": 0}])
    assert list(df.columns) == ["query_id", "chunk_id", "reason", "grade"]
    assert df["grade"].dtype == "int64"
    assert df["query_id"].tolist() == ["q1", "q2"]
    assert df["grade"].tolist() == [2, 0]


def test_grade_3_on_a_0_to_2_scale_names_file_line_pair_and_scale():
    row = dict(GOOD, grade=3)
    assert _message([GOOD | {"chunk_id": "4411"}, row]) == (
        "g.jsonl:2: pair (q1, c2): grade outside the scale 0-2 (found 3)")


def test_sixteen_word_reason_is_rejected_with_its_word_count():
    reason = " ".join(["word"] * 16)
    assert _message([dict(GOOD, reason=reason)]) == (
        "g.jsonl:1: pair (q1, c2): reason longer than 15 words (found 16 words). "
        "Say what the chunk says about the target, in fewer words")


def test_fifteen_words_separated_by_any_whitespace_are_accepted():
    reason = "a\tb  c\nd " + " ".join(["w"] * 11)
    assert len(reason.split()) == 15
    assert _validate([dict(GOOD, reason=reason)])["reason"].iat[0] == reason


def test_reason_after_grade_is_a_key_order_error():
    row = {"query_id": "q1", "chunk_id": "c2", "grade": 2, "reason": "Defines the loader."}
    assert _message([row]) == (
        "g.jsonl:1: pair (q1, c2): keys out of order: a grade row lists query_id, chunk_id, "
        "reason, grade (found query_id, chunk_id, grade, reason). Write the reason before the "
        "grade")


def test_missing_and_extra_keys_are_named():
    row = {"query_id": "q1", "chunk_id": "c2", "grade": 2, "arm": "bm25"}
    assert _message([row]) == (
        "g.jsonl:1: pair (q1, c2): a grade row has exactly the keys query_id, chunk_id, "
        "reason, grade (found query_id, chunk_id, grade, arm). Missing reason; unexpected arm")


def test_empty_reason_from_a_model_grader_is_rejected():
    assert _message([dict(GOOD, reason="  ")]) == (
        "g.jsonl:1: pair (q1, c2): reason required for every grade from this grader "
        "(found an empty reason). State what the chunk says about the target before the grade")


def test_model_grader_needs_a_reason_on_a_zero_through_reason_required():
    rule = lambda g: reason_required("model", "grader", g)  # noqa: E731
    assert "reason required" in _message([dict(GOOD, reason="", grade=0)],
                                         require_reason=rule)


def test_human_auditor_may_leave_a_zero_without_reason_but_not_a_one():
    rule = lambda g: reason_required("human", "auditor", g)  # noqa: E731
    df = _validate([dict(GOOD, reason="", grade=0)], require_reason=rule)
    assert df["reason"].iat[0] == ""
    assert "reason required" in _message([dict(GOOD, reason="", grade=1)],
                                         require_reason=rule)


def test_reason_required_table():
    assert reason_required("model", "grader", 0) is True
    assert reason_required("model", "auditor", 0) is True
    assert reason_required("human", "grader", 0) is True
    assert reason_required("human", "auditor", 0) is False
    assert reason_required("human", "auditor", 2) is True
    assert reason_required("import", "grader", 2) is False


def test_two_rows_for_one_pair_name_both_lines():
    other = {"query_id": "q2", "chunk_id": "c3", "reason": "Off topic.", "grade": 0}
    assert _message([GOOD, other, dict(GOOD, grade=1)]) == (
        "g.jsonl:3: pair (q1, c2): second row for one pair (first on line 1). "
        "Keep one grade per pair and grader")


def test_pair_outside_the_pool_is_rejected():
    assert _message([dict(GOOD, chunk_id="c9")]) == (
        "g.jsonl:1: pair (q1, c9): pair not in the pool. "
        "Grade only the pool's pairs (see the packets)")


def test_pool_check_is_skipped_when_pool_pairs_is_none():
    assert len(_validate([dict(GOOD, chunk_id="c9")], pool_pairs=None)) == 1


@pytest.mark.parametrize("value, shown", [(True, "true"), (1.0, "1.0"), ("2", '"2"'),
                                          (None, "null")])
def test_grade_that_is_not_an_integer_is_rejected(value, shown):
    assert _message([dict(GOOD, grade=value)]) == (
        f"g.jsonl:1: pair (q1, c2): grade must be an integer on the scale 0-2 (found {shown})")


def test_integer_chunk_id_is_normalised_to_a_string():
    df = _validate([dict(GOOD, chunk_id=4411)])
    assert df["chunk_id"].tolist() == ["4411"]
    assert isinstance(df["chunk_id"].iat[0], str)


def test_boolean_or_float_chunk_id_is_rejected():
    assert _message([dict(GOOD, chunk_id=4411.0)]) == (
        "g.jsonl:1: pair (q1, 4411.0): chunk_id must be a string or an integer (found 4411.0)")


def test_grader_name_is_added_to_messages_when_given():
    assert _message([dict(GOOD, grade=3)], grader="grader-a") == (
        "g.jsonl:1: grader-a: pair (q1, c2): grade outside the scale 0-2 (found 3)")


def test_a_bad_row_rejects_the_whole_file_even_after_good_rows(tmp_path):
    path = tmp_path / "round-1.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(dict(GOOD, chunk_id="4411",
                                                                 grade=7)) + "\n")
    with pytest.raises(InputError) as e:
        validate_grade_rows(iter_jsonl(path), pool_pairs=POOL, scale=[0, 1, 2],
                            max_reason_words=15, require_reason=True, source=path.name)
    assert str(e.value) == "round-1.jsonl:3: pair (q1, 4411): grade outside the scale 0-2 (found 7)"


def test_scale_text_names_gaps():
    assert grades.scale_text([0, 1, 2, 3]) == "0-3"
    assert grades.scale_text([0, 1, 3]) == "0, 1, 3"


# --- the stage's library call ------------------------------------------------------------

GRADERS = {
    "grader-a": {"role": "grader", "kind": "model", "family": "fam-x", "model": "m1"},
    "auditor-b": {"role": "auditor", "kind": "human", "family": "people", "person": "editor"},
}
POOL_DF = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2"],
                        "chunk_id": ["c1", "c2", "c3", "c4", "c5"],
                        "inclusion_prob": [1.0] * 5})


def _row(q, c, g, reason="Says how it works."):
    return {"query_id": q, "chunk_id": c, "reason": reason, "grade": g}


def _collect(files, **kw):
    args = dict(graders=GRADERS, pool=POOL_DF, audit_query_ids=["q2"], scale=[0, 1, 2],
                max_reason_words=15, rubric_version="v1", round=1, intents_sha256="i" * 64)
    args.update(kw)
    return grades.collect_grades(files, **args)


def _file(rows, meta=None, name="f.jsonl"):
    return grades.GraderFile(rows=list(enumerate(rows, start=1)), source=name, sha256="s",
                             meta=meta, meta_source=name.replace(".jsonl", ".meta.json"))


def test_long_table_has_one_row_per_pair_and_grader_sorted():
    files = {
        "grader-a": _file([_row("q2", "c4", 1), _row("q1", "c1", 2), _row("q1", "c2", 0)]),
        "auditor-b": _file([_row("q2", "c4", 0, reason="")]),
    }
    table, manifest = _collect(files)
    assert list(table.columns) == ["query_id", "chunk_id", "grader", "role", "round", "grade",
                                   "reason", "sequence"]
    # sequence is each grader's file order: grader-a wrote q2/c4 first, then q1/c1, q1/c2.
    assert table["sequence"].tolist() == [1, 2, 0, 0]
    assert table[["query_id", "chunk_id", "grader", "grade"]].values.tolist() == [
        ["q1", "c1", "grader-a", 2], ["q1", "c2", "grader-a", 0],
        ["q2", "c4", "auditor-b", 0], ["q2", "c4", "grader-a", 1]]
    assert table["round"].tolist() == [1, 1, 1, 1]
    a = manifest["graders"]["grader-a"]
    # grader-a started q1 (missing c3) and q2 (missing c5)
    assert a["missing"] == {"q1": ["c3"], "q2": ["c5"]}
    assert (a["rows"], a["queries"], a["pairs_missing"]) == (3, 2, 2)
    assert a["model"] == "m1" and a["kind"] == "model" and a["rubric_version"] == "v1"
    b = manifest["graders"]["auditor-b"]
    assert b["missing"] == {"q2": ["c5"]} and b["person"] == "editor"
    assert manifest["pool_pairs"] == 5
    assert grades.coverage_lines(manifest) == [
        "auditor-b: 1 pool pair lacks a grade, in 1 query: q2 (1)",
        "grader-a: 2 pool pairs lack a grade, in 2 queries: q1 (1), q2 (1)"]


def test_grader_without_a_file_is_in_the_manifest_with_nothing_graded():
    table, manifest = _collect({"grader-a": _file([_row("q1", "c1", 2)])})
    assert manifest["graders"]["auditor-b"]["rows"] == 0
    assert manifest["graders"]["auditor-b"]["missing"] == {"q2": ["c4", "c5"]}
    assert set(table["grader"]) == {"grader-a"}


def test_auditor_outside_the_audit_sample_is_refused_with_its_line():
    files = {"auditor-b": _file([_row("q2", "c4", 1), _row("q1", "c1", 1)], name="b.jsonl")}
    with pytest.raises(InputError) as e:
        _collect(files)
    assert str(e.value) == ("b.jsonl:2: auditor-b: query q1: the auditor grades only the "
                            "audit queries. Remove the rows of queries outside the audit sample")


def test_grades_folder_of_an_undeclared_grader_is_refused():
    with pytest.raises(InputError, match=r"grader-z: grader not declared in params `graders`"):
        _collect({"grader-z": _file([_row("q1", "c1", 2)])})


def test_sidecar_with_other_intents_hash_is_refused():
    meta = {"intents_sha256": "o" * 64, "rubric_version": "v1"}
    with pytest.raises(InputError) as e:
        _collect({"grader-a": _file([_row("q1", "c1", 2)], meta=meta, name="a.jsonl")})
    assert str(e.value) == (
        f"a.meta.json: grades were made from packets with other intents (found intents_sha256 "
        f"{'o' * 64}, frozen intents {'i' * 64}). Regrade from the current packets (a new round)")


def test_sidecar_with_other_rubric_version_is_refused():
    meta = {"intents_sha256": "i" * 64, "rubric_version": "v0"}
    with pytest.raises(InputError, match="grades were made under another rubric version"):
        _collect({"grader-a": _file([_row("q1", "c1", 2)], meta=meta)})


def test_matching_sidecar_passes():
    meta = {"intents_sha256": "i" * 64, "rubric_version": "v1"}
    table, _ = _collect({"grader-a": _file([_row("q1", "c1", 2)], meta=meta)})
    assert len(table) == 1


def test_model_grader_missing_reason_is_refused_in_the_stage_call():
    with pytest.raises(InputError, match=r"^f.jsonl:1: grader-a: pair \(q1, c1\): reason required"):
        _collect({"grader-a": _file([_row("q1", "c1", 0, reason="")])})


# --- the stage script ------------------------------------------------------------------------

def _stage_dir(root):
    """The grades stage's inputs: a 5-pair pool over q1 (c1-c3) and q2 (c4, c5, audited),
    with grader-a's grades of q1 (and their bank sidecar) committed."""
    repo = Path(__file__).resolve().parents[1]
    params = yaml.safe_load((repo / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]
    (root / p["pool"]).parent.mkdir(parents=True)
    POOL_DF.to_parquet(root / p["pool"], index=False)
    (root / p["audit"]).parent.mkdir(parents=True)
    (root / p["audit"]).write_text('{"query_id": "q2"}\n')
    (root / p["intents_manifest"]).parent.mkdir(parents=True)
    (root / p["intents_manifest"]).write_text(json.dumps({"sha256": "i" * 64}))
    _write_made_on_inputs(root, p, params)
    _stage_grades(root, p, "grader-a", [_row("q1", c, 1) for c in ("c1", "c2", "c3")])
    return repo, p


def _write_made_on_inputs(root, p, params):
    chunks = [f"c{i}" for i in range(1, 6)]
    (root / p["chunks"]).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"chunk_id": chunks, "header": chunks, "text": [c.upper() for c in chunks],
                  "source": ["s"] * 5}).to_parquet(root / p["chunks"], index=False)
    (root / p["intents"]).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"query_id": ["q1", "q2"], "query": ["x", "y"],
                  "intent": ["i1", "i2"]}).to_parquet(root / p["intents"], index=False)
    rubric = root / params["grading"]["rubric"]
    rubric.parent.mkdir(parents=True, exist_ok=True)
    rubric.write_text("# rubric\n")


def _stage_grades(root, p, grader, rows, *, bank=True):
    """A grader's round-1 file, recorded as the grade store records it."""
    from relgrade.experiment.files import Experiment
    from relgrade.graders.store import bank_path, bank_rows

    folder = root / p["grades_in"] / grader
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "round-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if bank:
        made_on = Experiment.load(root / "params.yaml").made_on_now()
        bank_path(folder / "round-1.jsonl").write_text("".join(
            json.dumps(r) + "\n" for r in bank_rows(rows, made_on, graded_at="t")))


def _run_stage(repo, root):
    return subprocess.run([sys.executable, str(repo / "stages/grades.py")], cwd=root,
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(repo / "src"), "PATH": "/usr/bin:/bin"})


def test_stage_stops_with_the_pending_work_and_writes_nothing(tmp_path):
    repo, p = _stage_dir(tmp_path)
    proc = _run_stage(repo, tmp_path)
    assert proc.returncode == 3  # pending work, not a failure: DVC stops the pipeline here
    assert proc.stderr == ("Pending: grading: 2 pairs need grader-a (2 new), 2 need auditor-b "
                           "(audit query q2); run `relgrade packets export --role grader "
                           "--out grader-a-packets.jsonl` and `relgrade packets export --role "
                           "auditor --out auditor-b-packets.jsonl`, then `relgrade grade import "
                           "--grader grader-a FILE` and `relgrade grade import --grader "
                           "auditor-b FILE`, then `dvc repro` again. This is work owed, not a failure: DVC reports "
                           "the stage as failed so that the pipeline stops here.\n")
    assert not (tmp_path / p["grades"]).exists()
    assert not (tmp_path / p["grades_manifest"]).exists()


def test_stage_writes_the_long_table_and_manifest_once_nothing_is_pending(tmp_path):
    repo, p = _stage_dir(tmp_path)
    _stage_grades(tmp_path, p, "grader-a", [_row("q1", c, 1) for c in ("c1", "c2", "c3")]
                  + [_row("q2", "c4", 2), _row("q2", "c5", 0), _row("q1", "c4", 2)])
    _stage_grades(tmp_path, p, "auditor-b", [_row("q2", "c5", 0), _row("q2", "c4", 1)])
    proc = _run_stage(repo, tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = pd.read_parquet(tmp_path / p["grades"])
    assert table[["query_id", "chunk_id", "grader", "round", "grade", "sequence"]] \
        .values.tolist() == [
        ["q1", "c1", "grader-a", 1, 1, 0], ["q1", "c2", "grader-a", 1, 1, 1],
        ["q1", "c3", "grader-a", 1, 1, 2], ["q2", "c4", "auditor-b", 1, 1, 1],
        ["q2", "c4", "grader-a", 1, 2, 3], ["q2", "c5", "auditor-b", 1, 0, 0],
        ["q2", "c5", "grader-a", 1, 0, 4]]
    manifest = json.loads((tmp_path / p["grades_manifest"]).read_text())
    a = manifest["graders"]["grader-a"]
    assert a["file"] == "data/grades/grader-a/round-1.jsonl"
    assert a["sha256"] == hashlib.sha256(
        (tmp_path / a["file"]).read_bytes()).hexdigest()
    # (q1, c4) is not in the pool: kept in the bank, unused, no error
    assert (a["rows"], a["queries"], a["pairs_missing"], a["bank_rows"], a["unused"]) == \
        (5, 2, 0, 6, 1)
    assert manifest["rubric_sha256"] == hashlib.sha256(b"# rubric\n").hexdigest()
    assert manifest["rounds"] == [1]


def test_stage_refuses_a_hand_placed_grade_file_without_its_bank_sidecar(tmp_path):
    repo, p = _stage_dir(tmp_path)
    _stage_grades(tmp_path, p, "auditor-b", [_row("q2", "c5", 0)], bank=False)
    proc = _run_stage(repo, tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: data/grades/auditor-b/round-1.jsonl: auditor-b: a "
                                  "grade file without its bank sidecar")
    assert not (tmp_path / p["grades"]).exists()


def test_stage_refuses_a_bad_file_and_writes_nothing(tmp_path):
    repo, p = _stage_dir(tmp_path)
    path = tmp_path / p["grades_in"] / "grader-a/round-1.jsonl"
    path.write_text(path.read_text() + json.dumps(_row("q2", "c4", 3)) + "\n")
    proc = _run_stage(repo, tmp_path)
    assert proc.returncode == 1
    assert proc.stderr == ("Error: data/grades/grader-a/round-1.jsonl:4: grader-a: pair (q2, c4): "
                           "grade outside the scale 0-2 (found 3)\n")
    assert not (tmp_path / p["grades"]).exists()
    assert not (tmp_path / p["grades_manifest"]).exists()


def test_long_table_sorts_ids_in_code_point_order_with_ties_in_row_order():
    # Python's str order: "Z" < "a" < "z" < "é" (U+00E9) < "€" (U+20AC) < "😀" (U+1F600);
    # UTF-16 order would put the astral "😀" before "€". The two q1/c rows of grader-a keep
    # their file order (sequence 1 then 3).
    rows = pd.DataFrame({"query_id": ["é", "q1", "😀", "q1", "€", "Z"],
                         "chunk_id": ["c", "c", "c", "c", "c", "c"],
                         "grade": [0, 1, 2, 0, 1, 2], "reason": ["r"] * 6})
    table = grades.long_table({"grader-a": rows, "auditor-b": rows.iloc[[5, 0]]},
                              roles={"grader-a": "grader", "auditor-b": "auditor"}, round=1)
    assert table[["query_id", "grader", "sequence"]].values.tolist() == [
        ["Z", "auditor-b", 0], ["Z", "grader-a", 5], ["q1", "grader-a", 1],
        ["q1", "grader-a", 3], ["é", "auditor-b", 1], ["é", "grader-a", 0],
        ["€", "grader-a", 4], ["😀", "grader-a", 2]]


def test_the_long_table_written_a_block_of_rows_at_a_time_has_the_bytes_of_one_write(
        tmp_path):
    from relgrade.io import files as io

    rows = pd.DataFrame({"query_id": ["é", "q1", "😀", "q1", "€", "Z"],
                         "chunk_id": ["c", "c", "c", "d", "c", "c"],
                         "grade": [0, 1, 2, 0, 1, 2], "reason": ["r", "", "s", "t", "u", "v"]})
    tables = {"grader-a": rows, "auditor-b": rows.iloc[[5, 0]]}
    roles = {"grader-a": "grader", "auditor-b": "auditor"}
    table = grades.long_table(tables, roles=roles, round=1)
    long = grades.long_rows(tables, roles=roles, round=1)
    assert len(long) == 8
    # blocks of 3 rows (3, 3, 2), stacked, are the sorted table
    parts = list(long.blocks(3))
    assert [len(p) for p in parts] == [3, 3, 2]
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), table)
    # the file written from blocks of 2 rows is the file of the whole table, byte for byte
    with io.ParquetBlocks(tmp_path / "blocks.parquet") as w:
        for part in long.blocks(2):
            w.write(part)
    io.write_parquet(tmp_path / "whole.parquet", table)
    assert (tmp_path / "blocks.parquet").read_bytes() == \
        (tmp_path / "whole.parquet").read_bytes()
