"""``GradeStore.import_rows``: a whole file's rows added under the store's lock, or nothing."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError, ProtocolError
from relgrade.graders.store import GradeStore, marker_path


def _row(q, c, g):
    return {"query_id": q, "chunk_id": c, "reason": "Defines it.", "grade": g}


ROW_BYTES = b'{"query_id":"q1","chunk_id":"a","reason":"Defines it.","grade":2}\n'


def test_rows_are_added_after_the_recorded_bytes(tmp_path):
    path = tmp_path / "g" / "round-1.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"query_id": "q0", "chunk_id": "z", "reason": "", "grade": 0}')
    total = GradeStore(path).import_rows([_row("q1", "a", 2)])
    assert total == 2
    assert path.read_bytes() == (b'{"query_id": "q0", "chunk_id": "z", "reason": "", '
                                 b'"grade": 0}\n' + ROW_BYTES)


def test_a_new_file_is_created_and_the_check_sees_the_recorded_rows(tmp_path):
    path = tmp_path / "new" / "round-1.jsonl"
    seen = []
    assert GradeStore(path).import_rows([_row("q1", "a", 2)], check=seen.append) == 1
    assert seen == [[]] and path.read_bytes() == ROW_BYTES
    GradeStore(path).import_rows([_row("q1", "b", 0)], check=seen.append)
    assert seen[1] == [(1, _row("q1", "a", 2))]


def test_recorded_pairs_are_refused_and_a_refused_new_file_leaves_nothing(tmp_path):
    path = tmp_path / "g" / "round-1.jsonl"
    GradeStore(path).import_rows([_row("q1", "a", 2)])
    with pytest.raises(InputError) as e:
        GradeStore(path).import_rows([_row("q1", "b", 1), _row("q1", "a", 0)],
                                     source=tmp_path / "new.jsonl")
    assert str(e.value) == (f"{tmp_path / 'new.jsonl'}: 1 pair already recorded in "
                            f"{path.as_posix()} (found (q1, a)). Remove it from new.jsonl; "
                            "recorded grades are never replaced (a changed grade needs a new "
                            "round, or, once the key is frozen, `relgrade grade correct` "
                            "records a post-hoc correction beside it)")
    assert path.read_bytes() == ROW_BYTES
    fresh = tmp_path / "fresh" / "round-1.jsonl"

    def refuse(_):
        raise InputError("bad recorded row")

    with pytest.raises(InputError):
        GradeStore(fresh).import_rows([_row("q1", "a", 2)], check=refuse)
    assert not fresh.parent.exists()


def test_an_open_store_or_an_interrupted_batch_refuses_the_import(tmp_path):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path).open():
        with pytest.raises(ProtocolError, match="another relgrade process is writing"):
            GradeStore(path).import_rows([_row("q1", "a", 2)])
    marker_path(path).write_bytes(b"relgrade-inflight 1 2\n")
    with pytest.raises(ProtocolError, match="a grading batch was interrupted"):
        GradeStore(path).import_rows([_row("q1", "a", 2)])
    assert not path.exists()  # nothing written; the store removed its empty file on close


def test_rows_recorded_byte_for_byte_are_skipped_and_named_others_still_refused(tmp_path):
    path = tmp_path / "g" / "round-1.jsonl"
    GradeStore(path).import_rows([_row("q1", "a", 2), _row("q1", "b", 0)])
    skipped: list = []
    # the same two rows exported again, plus one new pair: only the new pair is added
    total = GradeStore(path).import_rows([_row("q1", "a", 2), _row("q1", "c", 1),
                                          _row("q1", "b", 0)], skipped=skipped)
    assert total == 3 and skipped == [("q1", "a"), ("q1", "b")]
    assert path.read_bytes() == (ROW_BYTES + b'{"query_id":"q1","chunk_id":"b","reason":'
                                 b'"Defines it.","grade":0}\n{"query_id":"q1","chunk_id":"c",'
                                 b'"reason":"Defines it.","grade":1}\n')
    # every row recorded already: nothing written, nothing refused
    before = path.read_bytes()
    assert GradeStore(path).import_rows([_row("q1", "c", 1)], skipped=skipped) == 3
    assert path.read_bytes() == before and skipped[-1] == ("q1", "c")
    # another grade of a recorded pair is refused as before, whole file, nothing written
    with pytest.raises(InputError, match="1 pair already recorded"):
        GradeStore(path).import_rows([_row("q1", "d", 2), _row("q1", "a", 1)], skipped=[])
    assert path.read_bytes() == before
