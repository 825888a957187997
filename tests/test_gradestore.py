"""The grade store: whole batches or nothing, torn tails repaired, one writer at a time."""

from __future__ import annotations

import hashlib
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.errors import InputError, ProtocolError
from relgrade.graders.store import GradeStore, SingleWriter, marker_path


def row(q, c, grade=1, reason="shows where it lives"):
    return {"query_id": q, "chunk_id": c, "reason": reason, "grade": grade}


def test_append_writes_canonical_lines_in_key_order_and_reopen_reads_them(tmp_path):
    path = tmp_path / "g" / "round-1.jsonl"
    with GradeStore(path).open() as store:
        store.append([row("q1", "c1", 2, "défini ici"), row("q1", "c2", 0)])
    assert path.read_bytes() == (
        '{"query_id":"q1","chunk_id":"c1","reason":"défini ici","grade":2}\n'
        '{"query_id":"q1","chunk_id":"c2","reason":"shows where it lives","grade":0}\n'
    ).encode("utf-8")
    with GradeStore(path).open() as store:
        assert [ln for ln, _ in store.rows] == [1, 2]
        assert [list(r) for _, r in store.rows] == [["query_id", "chunk_id", "reason", "grade"]] * 2
        assert ("q1", "c2") in store and ("q1", "c3") not in store
        assert store.recovery.truncated_bytes == 0


def test_a_torn_last_line_is_cut_and_complete_rows_are_kept(tmp_path):
    path = tmp_path / "round-1.jsonl"
    good = json.dumps(row("q1", "c1")) + "\n"
    path.write_text(good + '{"query_id":"q1","chunk_id":"c2","rea')
    with GradeStore(path).open() as store:
        assert len(store) == 1
        assert store.recovery.reason == "torn last line"
        assert store.recovery.truncated_bytes == len('{"query_id":"q1","chunk_id":"c2","rea')
    assert path.read_text() == good


def test_a_torn_first_and_only_line_leaves_no_file_behind(tmp_path):
    path = tmp_path / "round-1.jsonl"
    path.write_text('{"query_id":"q1"')
    with GradeStore(path).open() as store:
        assert len(store) == 0
        assert path.read_bytes() == b""
    assert not path.exists()


def test_an_interrupted_batch_is_removed_whole_even_when_its_lines_are_complete(tmp_path):
    # A kill during the append of a 3-row batch left 2 complete lines of it; the marker
    # written before the append says where the batch started and where it would end.
    path = tmp_path / "round-1.jsonl"
    first = (json.dumps(row("q1", "c1")) + "\n").encode()
    batch = b"".join((json.dumps(row("q2", c)) + "\n").encode() for c in ("a", "b", "c"))
    two_lines = batch[:batch.index(b"\n", batch.index(b"\n") + 1) + 1]
    path.write_bytes(first + two_lines)
    record = b"relgrade-inflight %020d %020d" % (len(first), len(first) + len(batch))
    marker_path(path).write_bytes(record.ljust(63) + b"\n")
    with GradeStore(path).open() as store:
        assert [r["chunk_id"] for _, r in store.rows] == ["c1"]
        assert store.recovery.reason == "interrupted batch"
        assert store.recovery.truncated_bytes == len(two_lines)
    assert path.read_bytes() == first
    assert not marker_path(path).exists()


def test_a_stale_marker_of_a_batch_that_was_fully_written_changes_nothing(tmp_path):
    path = tmp_path / "round-1.jsonl"
    data = b"".join((json.dumps(row("q1", c)) + "\n").encode() for c in ("a", "b"))
    path.write_bytes(data)
    record = b"relgrade-inflight %020d %020d" % (0, len(data))
    marker_path(path).write_bytes(record.ljust(63) + b"\n")
    with GradeStore(path).open() as store:
        assert len(store) == 2 and store.recovery.truncated_bytes == 0
    assert path.read_bytes() == data


def test_a_torn_marker_is_ignored_because_the_append_starts_only_after_it_is_synced(tmp_path):
    path = tmp_path / "round-1.jsonl"
    data = (json.dumps(row("q1", "a")) + "\n").encode()
    path.write_bytes(data)
    marker_path(path).write_bytes(b"relgrade-infli")
    with GradeStore(path).open() as store:
        assert len(store) == 1
    assert path.read_bytes() == data


def test_a_bad_complete_line_is_refused_with_its_line_number_and_the_file_is_untouched(tmp_path):
    path = tmp_path / "round-1.jsonl"
    text = json.dumps(row("q1", "a")) + "\nnot json\n" + json.dumps(row("q1", "b")) + "\n"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        GradeStore(path).open()
    assert str(e.value).startswith(f"{path}:2: a recorded grade line is not valid JSON")
    assert path.read_text() == text
    GradeStore(path)  # the lock was released: a new store can be made and would fail the same way
    with pytest.raises(InputError):
        GradeStore(path).open()


def test_appending_a_recorded_pair_is_refused_and_writes_nothing(tmp_path):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path).open() as store:
        store.append([row("q1", "a")])
        before = path.read_bytes()
        with pytest.raises(InputError, match="pair already recorded"):
            store.append([row("q1", "b"), row("q1", "a")])
        with pytest.raises(InputError, match="pair already recorded"):
            store.append([row("q1", "c"), row("q1", "c")])
        assert path.read_bytes() == before
        assert len(store) == 1


def test_a_second_writer_on_the_same_file_is_refused_until_the_first_closes(tmp_path):
    path = tmp_path / "round-1.jsonl"
    first = GradeStore(path).open()
    with pytest.raises(ProtocolError, match="another relgrade process is writing"):
        GradeStore(path).open()
    first.close()
    with GradeStore(path).open() as again:
        assert len(again) == 0


def test_closing_removes_the_marker_and_closing_twice_is_harmless(tmp_path):
    path = tmp_path / "round-1.jsonl"
    store = GradeStore(path).open()
    store.append([row("q", "c")])
    assert marker_path(path).exists()
    store.close()
    store.close()
    assert not marker_path(path).exists()
    with pytest.raises(ProtocolError, match="not open"):
        store.append([row("q", "d")])


def test_the_single_writer_never_interleaves_batches_from_many_threads(tmp_path):
    stores = [GradeStore(tmp_path / f"g{i}.jsonl").open() for i in range(2)]
    errors = []
    with SingleWriter() as writer:
        def work(t):
            try:
                for b in range(25):
                    rows = [row(f"t{t}-b{b}", f"c{k}", k % 3) for k in range(5)]
                    writer.submit(stores[t % 2], rows).result()
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    for s in stores:
        s.close()
    assert errors == []
    for i in range(2):
        lines = (tmp_path / f"g{i}.jsonl").read_text().splitlines()
        assert len(lines) == 4 * 25 * 5
        rows = [json.loads(line) for line in lines]
        # each batch's five rows are adjacent and in order
        for k in range(0, len(rows), 5):
            block = rows[k:k + 5]
            assert {r["query_id"] for r in block} == {block[0]["query_id"]}
            assert [r["chunk_id"] for r in block] == [f"c{j}" for j in range(5)]


def test_the_writer_hands_a_refused_batch_back_to_its_submitter(tmp_path):
    store = GradeStore(tmp_path / "g.jsonl").open()
    with SingleWriter() as writer:
        assert writer.submit(store, [row("q", "c")]).result() == 1
        with pytest.raises(InputError, match="already recorded"):
            writer.submit(store, [row("q", "c")]).result()
    with pytest.raises(ProtocolError, match="closed"):
        writer.submit(store, [row("q", "d")])
    store.close()


ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)
reasons = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(ids, ids, reasons, st.integers(0, 2)), min_size=1, max_size=5),
                max_size=6))
def test_rows_appended_in_batches_read_back_identically(tmp_path_factory, batches):
    path = tmp_path_factory.mktemp("rt") / "round-1.jsonl"
    written, seen = [], set()
    with GradeStore(path).open() as store:
        for batch in batches:
            rows = []
            for q, c, r, g in batch:
                if (q, c) in seen:
                    continue
                seen.add((q, c))
                rows.append({"query_id": q, "chunk_id": c, "reason": r, "grade": g})
            store.append(rows)
            written.extend(rows)
    with GradeStore(path).open() as store:
        assert [r for _, r in store.rows] == written
    assert path.exists() == bool(written)


def test_a_group_commit_writes_the_good_batches_together_and_refuses_only_the_bad_one(tmp_path):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path).open() as store:
        store.append([row("q0", "a")])
        results = store.append_many([
            [row("q1", "a"), row("q1", "b")],
            [row("q0", "a")],                 # already recorded
            [row("q2", "a"), row("q1", "b")],  # repeats a pair of the first batch
            [row("q3", "a")],
        ])
        assert results[0] == 2 and results[3] == 1
        assert isinstance(results[1], InputError) and isinstance(results[2], InputError)
        assert "(q0, a)" not in str(results[1]) and "q0, a" in str(results[1])
    assert [(r["query_id"], r["chunk_id"]) for r in map(json.loads, path.read_text().splitlines())] \
        == [("q0", "a"), ("q1", "a"), ("q1", "b"), ("q3", "a")]


def test_a_batch_with_unencodable_text_is_refused_whole_and_the_others_are_written(tmp_path):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path).open() as store:
        results = store.append_many([[row("q1", "a")], [row("q2", "b", reason="half \ud83d")],
                                     [row("q3", "c")]])
        assert results[0] == 1 and results[2] == 1
        assert isinstance(results[1], InputError)
        assert "cannot be written as UTF-8 (found \\ud83d)" in str(results[1])
        assert ("q2", "b") not in store
    assert [r["query_id"] for r in map(json.loads, path.read_text().splitlines())] == ["q1", "q3"]


def test_a_store_with_made_on_records_each_row_in_the_bank_sidecar_before_the_row(tmp_path):
    from relgrade.graders.store import bank_path, read_bank

    path = tmp_path / "round-1.jsonl"
    made_on = {("q1", "c1"): {"content_sha256": "C1", "intent_sha256": "I1",
                              "rubric_version": "v1", "rubric_sha256": "R"}}
    with GradeStore(path, made_on=lambda r: made_on.get((r["query_id"], r["chunk_id"]))) as st:
        st.append([{"query_id": "q1", "chunk_id": "c1", "reason": "defines it", "grade": 2}])
        # a pair no packet showed: refused, nothing written to either file
        with pytest.raises(InputError, match="no packet shows this pair"):
            st.append([{"query_id": "q9", "chunk_id": "c9", "reason": "x", "grade": 0}])
    assert bank_path(path) == tmp_path / "round-1.bank.jsonl"
    (line, row), = read_bank(path)
    assert line == 1
    assert list(row) == ["query_id", "chunk_id", "content_sha256", "intent_sha256",
                         "rubric_version", "rubric_sha256", "graded_at", "row_sha256"]
    assert (row["query_id"], row["chunk_id"], row["content_sha256"], row["intent_sha256"],
            row["rubric_sha256"]) == ("q1", "c1", "C1", "I1", "R")
    # the line is bound to its grade row: the sha256 of the row's canonical JSON line
    written = path.read_bytes().rstrip(b"\n")
    assert row["row_sha256"] == hashlib.sha256(written).hexdigest()
    assert len(path.read_text().splitlines()) == 1


def test_a_bank_line_cut_short_by_a_crash_is_left_out_and_cut_before_the_next_append(tmp_path):
    from relgrade.graders.store import append_bank, bank_path, read_bank

    path = tmp_path / "round-1.jsonl"
    bank_path(path).write_text('{"query_id":"q1","chunk_id":"a"}\n{"query_id":"q1","chu')
    assert [r["chunk_id"] for _, r in read_bank(path)] == ["a"]
    append_bank(path, [{"query_id": "q1", "chunk_id": "b"}])
    assert bank_path(path).read_text() == ('{"query_id":"q1","chunk_id":"a"}\n'
                                           '{"query_id":"q1","chunk_id":"b"}\n')


def test_a_grade_a_rubric_revision_left_alone_stays_current_and_is_not_offered_again(tmp_path):
    path = tmp_path / "round-1.jsonl"
    made = {"content_sha256": "C", "intent_sha256": "I", "rubric_version": "v1",
            "rubric_sha256": "R1"}
    with GradeStore(path, made_on=lambda r: made).open() as st:
        st.append([{"query_id": "q1", "chunk_id": "a", "reason": "§traps fine", "grade": 2},
                   {"query_id": "q1", "chunk_id": "b", "reason": "no section", "grade": 0}])
    revised = dict(made, rubric_version="v2", rubric_sha256="R2")
    edited = dict(revised, content_sha256="C2")
    seen = []

    def carried(row, on):  # what relgrade.experiment.revisions.carried_check gives a store
        seen.append((row["chunk_id"], on["rubric_sha256"]))
        return "§traps" in row["reason"]

    with GradeStore(path, made_on=lambda r: revised, carried=carried).open() as st:
        assert st.current_keys() == frozenset({("q1", "a")})
        assert st.is_current(("q1", "a")) and not st.is_current(("q1", "b"))
    assert ("a", "R1") in seen
    # a grade whose chunk changed too is outdated whatever its sections
    with GradeStore(path, made_on=lambda r: edited, carried=carried).open() as st:
        assert st.current_keys() == frozenset()
    # without the revision chain, a rubric change outdates every grade, as before
    with GradeStore(path, made_on=lambda r: revised).open() as st:
        assert st.current_keys() == frozenset()
