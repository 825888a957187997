"""`relgrade grade import` reading and checking the file a block of rows at a time: the same
grade file and bank sidecar as the whole-file path, the same refusals, nothing written when
the file changes between the check and the write."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from relgrade.graders.store import bank_path
from tests.test_grade_import_cli import TARGET, _import, _row, exp, _write  # noqa: F401


def _recorded(root, grader="grader-a"):
    """The grade file's bytes and its bank lines without the time of recording."""
    target = root / f"data/grades/{grader}/round-1.jsonl"
    bank = [json.loads(line) for line in bank_path(target).read_text().splitlines()]
    for b in bank:
        b.pop("graded_at")
    return target.read_bytes(), bank


def _rows():
    # three queries, every pair of the fixture's pool once, in no particular order
    return [_row("q3", "d", 0, reason="Off topic."), _row("q1", "b", 1), _row("q2", "c", 2),
            _row("q1", "a", 2, reason="Defines the loader.")]


def test_blocks_of_one_line_record_the_bytes_of_the_whole_file_path(exp, monkeypatch):
    from relgrade.cli import grade
    from relgrade.graders import store
    from relgrade.io import grade_columns

    src = exp / "new.jsonl"
    src.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in _rows()))
    called = []
    real = grade._blocks_checked

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        called.append(out is not None)
        return out

    monkeypatch.setattr(grade, "_blocks_checked", spy)
    monkeypatch.setattr(store, "IMPORT_BLOCK", 1)
    # a block of 60 bytes: one line at a time (each line is longer), on both passes
    monkeypatch.setattr(grade_columns.GradeBlocks, "BLOCK", 60)
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert called == [True]
    blocks = _recorded(exp)
    (exp / TARGET).unlink()
    bank_path(exp / TARGET).unlink()
    monkeypatch.setattr(grade, "_blocks_checked", lambda *a, **k: None)
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert _recorded(exp) == blocks
    assert blocks[0] == src.read_bytes()
    assert [b["imported_from"]["format"] for b in blocks[1]] == ["jsonl"] * 4


@pytest.mark.parametrize("rows, message", [
    ([_row("q1", "a", 2), _row("q1", "a", 0)], ":2: grader-a: pair (q1, a): second row for "
                                               "one pair (first on line 1)"),
    ([_row("q1", "a", 2), _row("q2", "d", 1)], ":2: grader-a: pair (q2, d): pair not in the "
                                               "pool"),
    ([_row("q1", "a", 7)], ":1: grader-a"),
])
def test_a_file_the_blocks_refuse_is_refused_in_the_row_readers_words(exp, rows, message):
    src = exp / "bad.jsonl"
    src.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {src.as_posix()}{message}"), res.output
    assert not (exp / TARGET).exists() and not bank_path(exp / TARGET).exists()


def test_a_file_changed_between_the_check_and_the_write_records_nothing(exp, monkeypatch):
    from relgrade.cli import grade

    src = exp / "new.jsonl"
    src.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in _rows()))
    real = grade._blocks_checked

    def edited_after_the_check(ex, file, **kwargs):
        out = real(ex, file, **kwargs)
        file.write_bytes(file.read_bytes().replace(b'"grade":2}', b'"grade":0}'))
        return out

    monkeypatch.setattr(grade, "_blocks_checked", edited_after_the_check)
    res = _import(str(src), "--grader", "grader-a")
    assert res.exit_code == 1
    assert "the file changed while it was imported; nothing was recorded" in res.output
    assert not (exp / TARGET).exists() and not bank_path(exp / TARGET).exists()


def test_id_codes_find_known_ids_and_never_pass_an_unknown_one():
    from relgrade.protocol.grade_blocks import IdCodes

    known = IdCodes(pa.array(["c10", "c2", "", "c1"]))
    assert known.unique and len(known) == 4
    assert known.codes(pa.array(["c1", "c2", "c3", "", "c10", "c1"])).tolist() == \
        [3, 1, -1, 2, 0, 3]
    # a hash that matches but an id that does not: the ids are compared, so it is unknown
    known._hashes = known._hashes.copy()
    other = IdCodes(pa.array(["zz"]))
    known._hashes[np.searchsorted(known._hashes, other._hashes[0]) - 1] = other._hashes[0]
    known._order = known._order[np.argsort(known._hashes, kind="stable")]
    known._hashes.sort()
    assert known.codes(pa.array(["zz"])).tolist() == [-1]
    assert not IdCodes(pa.array(["a", "b", "a"])).unique


def test_a_new_import_refused_in_a_later_block_leaves_no_sidecar_behind(tmp_path, monkeypatch):
    from relgrade.errors import InputError
    from relgrade.graders import store
    from relgrade.graders.store import GradeStore

    made = {"content_sha256": "c" * 64, "intent_sha256": "i" * 64, "rubric_version": "v1",
            "rubric_sha256": "r" * 64}
    monkeypatch.setattr(store, "IMPORT_BLOCK", 2)
    path = tmp_path / "g" / "round-1.jsonl"
    rows = [_row("q1", f"c{i}", 1) for i in range(5)]
    # the fifth row's pair is one no packet shows: found in the third block, after the
    # first two blocks' bank lines were appended
    with pytest.raises(InputError, match="no packet shows this pair"):
        GradeStore(path, made_on=lambda r: None if r["chunk_id"] == "c4" else made) \
            .import_rows(rows)
    assert not path.exists() and not bank_path(path).exists()
    assert not path.parent.exists()  # nor the folder made for it
