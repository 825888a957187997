"""Hostile text in grade rows: unencodable reasons, megabyte reasons, non-ASCII digits.

The same validation serves `grade run`, `grade import` and `serve`, so each channel is tried.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.graders.command import packet_pairs
from relgrade.graders.labelstudio import import_label_studio, label_studio_tasks
from relgrade.io.judgments import read_judgments
from relgrade.protocol.grades import is_ascii_grade, validate_grade_rows
from tests.graders import experiment as ex
from tests.test_grade_import_cli import TARGET, _import, _row, _write, exp  # noqa: F401
from tests.test_labelstudio import annotated


def check(reason="defines it", grade=2, *, chunk="c1", **kw):
    rows = [(1, {"query_id": "q1", "chunk_id": chunk, "reason": reason, "grade": grade})]
    return validate_grade_rows(rows, pool_pairs=None, scale=[0, 1, 2], max_reason_words=15,
                               require_reason=True, source="g.jsonl", **kw)


# --- the rules ------------------------------------------------------------------------

def test_a_reason_with_a_lone_surrogate_is_a_clear_validation_error():
    with pytest.raises(InputError) as e:
        check("cut in half \ud83d")
    assert str(e.value) == (
        "g.jsonl:1: pair (q1, c1): reason is not valid Unicode text (it cannot be written as "
        "UTF-8) (found \\ud83d at character 13). Write the reason again as plain text")
    str(e.value).encode("utf-8")  # the message itself can be printed


def test_an_id_with_a_lone_surrogate_is_refused_and_the_message_stays_printable():
    with pytest.raises(InputError, match="chunk_id is not valid Unicode text") as e:
        check(chunk="c\udc80")
    assert "pair (q1, c\\udc80)" in str(e.value)
    str(e.value).encode("utf-8")


def test_a_one_word_reason_of_megabytes_is_refused_by_its_length_in_characters():
    with pytest.raises(InputError, match=r"reason longer than 300 characters \(found 2000000"):
        check("x" * 2_000_000)
    check("x" * 300)


def test_the_character_cap_is_a_keyword():
    with pytest.raises(InputError, match="reason longer than 20 characters"):
        check("a reason of more than twenty characters", max_reason_chars=20)
    assert len(check("a" * 500, max_reason_chars=500)) == 1


@pytest.mark.parametrize("grade", [True, False, "2", 2.0, "\uff12"],
                         ids=["true", "false", "string", "float", "fullwidth-string"])
def test_only_json_integers_are_grades(grade):
    with pytest.raises(InputError, match="grade must be an integer"):
        check(grade=grade)


@pytest.mark.parametrize("text, ok", [("2", True), ("0", True), ("-1", True), ("\uff12", False),
                                      ("\u0662", False), ("\u00b2", False), ("2.0", False),
                                      ("", False), ("-", False), ("+2", False)])
def test_only_ascii_digits_spell_a_grade(text, ok):
    assert is_ascii_grade(text) is ok


def test_a_fullwidth_digit_in_qrels_is_refused(tmp_path):
    path = tmp_path / "x.qrels"
    path.write_text("q1 0 c1 \uff12\n", encoding="utf-8")
    with pytest.raises(InputError, match="grade must be an integer") as e:
        read_judgments(path)
    assert "x.qrels:1" in str(e.value)


def test_a_fullwidth_digit_chosen_in_label_studio_is_refused():
    ps = {"q01": ex.packet("q01", 3)}
    export = annotated(label_studio_tasks(ps.values()), grade_of=lambda t: "\uff12")
    with pytest.raises(InputError, match="grade must be an integer"):
        import_label_studio(export, pool_pairs=packet_pairs(ps), scale=[0, 1, 2],
                            max_reason_words=15, kind="human", role="grader",
                            source="export.json", grader="alice")


# --- the channels ---------------------------------------------------------------------

def test_grade_run_retries_a_surrogate_reason_then_reports_it_and_grades_the_rest(tmp_path):
    packets = ex.build(tmp_path, queries=3, chunks=5, graders={
        "grader-a": {"role": "grader", "kind": "model", "family": "test",
                     "command": ex.command("surrogate"), "timeout": 20, "retries": 1}})
    result = CliRunner().invoke(main, ["grade", "run", "--grader", "grader-a", "--no-progress",
                                       "--params", str(tmp_path / "params.yaml")])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "retried 1 attempts; failed 1 batches" in result.output
    assert "failed: query q01 batch 0" in result.output
    assert "reason is not valid Unicode text" in result.output
    got = {(r["query_id"], r["chunk_id"])
           for r in ex.read_rows(tmp_path / "data/grades/grader-a/round-1.jsonl")}
    assert got == {(q, c["chunk_id"]) for q in ("q02", "q03")
                   for b in packets[q]["batches"] for c in b}


def test_grade_import_of_a_surrogate_reason_names_file_and_line_and_writes_nothing(exp):  # noqa: F811
    src = exp / "new.jsonl"
    src.write_text('{"query_id": "q1", "chunk_id": "a", "reason": "fine", "grade": 2}\n'
                   '{"query_id": "q1", "chunk_id": "b", "reason": "half \\ud83d", "grade": 1}\n')
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert res.output.startswith(f"Error: {src.as_posix()}:2: grader-a: pair (q1, b): reason is "
                                 "not valid Unicode text")
    assert not (exp / TARGET).exists()
    assert not (exp / TARGET).parent.exists()


def test_grade_import_of_a_megabyte_reason_is_refused(exp):  # noqa: F811
    src = _write(exp / "new.jsonl", [_row("q1", "a", 2, reason="y" * 3_000_000)])
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert "reason longer than 300 characters (found 3000000 characters)" in res.output
    assert not (exp / TARGET).exists()
