"""``GradeStore.import_rows``: a whole file's rows added under the store's lock, or nothing."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError, ProtocolError
from relgrade.graders.store import GradeStore, bank_path, marker_path


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


def _made_on(row):
    if row["chunk_id"] == "gone":
        return None
    return {"content_sha256": "c" * 64, "intent_sha256": "i" * 64, "rubric_version": "v1",
            "rubric_sha256": "r" * 64}


def test_an_import_written_in_blocks_has_the_bytes_of_one_block(tmp_path, monkeypatch):
    import relgrade.graders.store as store

    rows = [_row(f"q{i // 3}", f"c{i}", i % 3) for i in range(10)]
    one, blocks = tmp_path / "one" / "round-1.jsonl", tmp_path / "blocks" / "round-1.jsonl"
    monkeypatch.setattr(store, "now_utc", lambda: "2026-12-06T12:00:00Z")
    GradeStore(one, made_on=_made_on).import_rows(rows, note={"format": "jsonl"})
    monkeypatch.setattr(store, "IMPORT_BLOCK", 3)  # 4 blocks: 3, 3, 3 and 1 rows
    assert GradeStore(blocks, made_on=_made_on).import_rows(rows, note={"format": "jsonl"}) \
        == 10
    assert blocks.read_bytes() == one.read_bytes()
    assert bank_path(blocks).read_bytes() == bank_path(one).read_bytes()
    assert len(bank_path(blocks).read_bytes().splitlines()) == 10


def test_a_pair_no_packet_shows_in_a_later_block_writes_nothing(tmp_path, monkeypatch):
    import relgrade.graders.store as store

    path = tmp_path / "g" / "round-1.jsonl"
    GradeStore(path, made_on=_made_on).import_rows([_row("q0", "a", 1)])
    before, bank_before = path.read_bytes(), bank_path(path).read_bytes()
    monkeypatch.setattr(store, "IMPORT_BLOCK", 2)
    rows = [_row("q1", f"c{i}", 1) for i in range(5)] + [_row("q1", "gone", 2)]
    with pytest.raises(InputError, match="no packet shows this pair"):
        GradeStore(path, made_on=_made_on).import_rows(rows)
    assert path.read_bytes() == before and bank_path(path).read_bytes() == bank_before


def test_a_block_that_fails_cuts_the_sidecar_back_to_its_size_before_the_first(tmp_path):
    from relgrade.graders.store import append_lines

    path = tmp_path / "side.jsonl"
    path.write_bytes(b'{"a":1}\n')

    def blocks():
        yield b'{"b":2}\n'
        yield b'{"c":3}\n'
        raise OSError(28, "no space left")

    with pytest.raises(OSError):
        append_lines(path, blocks())
    assert path.read_bytes() == b'{"a":1}\n'
    assert append_lines(path, iter([b'{"b":2}\n', b"", b'{"c":3}\n'])) == 8
    assert path.read_bytes() == b'{"a":1}\n{"b":2}\n{"c":3}\n'


@pytest.mark.parametrize("left", ["whole", "torn"])
def test_a_reimport_after_a_killed_one_cuts_the_bank_lines_it_left(tmp_path, monkeypatch, left):
    # a kill -9 between the bank lines and the grade rows leaves the sidecar and no grade
    # file (all its lines written, or the last block torn mid-line); the import run again
    # must record one bank line per row, equal to an import that was never stopped
    import relgrade.graders.store as store

    monkeypatch.setattr(store, "now_utc", lambda: "2026-12-06T12:00:00Z")
    rows = [_row("q1", f"c{i}", i % 3) for i in range(4)]
    clean = tmp_path / "clean" / "round-1.jsonl"
    GradeStore(clean, made_on=_made_on).import_rows(rows)
    path = tmp_path / "g" / "round-1.jsonl"
    path.parent.mkdir()
    bank = bank_path(clean).read_bytes()
    bank_path(path).write_bytes(bank if left == "whole" else bank[:len(bank) * 2 // 3])
    assert GradeStore(path, made_on=_made_on).import_rows(rows) == 4
    assert path.read_bytes() == clean.read_bytes()
    assert bank_path(path).read_bytes() == bank
    assert len(bank_path(path).read_bytes().splitlines()) == 4


def test_a_reimport_cuts_only_the_lines_past_the_recorded_rows(tmp_path, monkeypatch):
    import relgrade.graders.store as store

    monkeypatch.setattr(store, "now_utc", lambda: "2026-12-06T12:00:00Z")
    path = tmp_path / "g" / "round-1.jsonl"
    GradeStore(path, made_on=_made_on).import_rows([_row("q0", "a", 1)])
    first = bank_path(path).read_bytes()
    # a second import killed after its bank lines: two lines without rows
    other = tmp_path / "o" / "round-1.jsonl"
    GradeStore(other, made_on=_made_on).import_rows([_row("q9", "x", 0), _row("q9", "y", 2)])
    bank_path(path).write_bytes(first + bank_path(other).read_bytes())
    assert GradeStore(path, made_on=_made_on).import_rows([_row("q1", "b", 2)]) == 2
    lines = bank_path(path).read_bytes().splitlines()
    assert len(lines) == 2 and lines[0] + b"\n" == first
    assert b'"chunk_id":"b"' in lines[1]
