"""A grade file replaced on disk while a store holds it: no acknowledged batch is lost.

``git stash && git stash pop``, ``git checkout``, an editor's save-by-rename or a ``grade
import`` put a new file at the path; the store must notice, say so, re-read the new file and
append there, for ``grade run`` (a real subprocess) and for ``serve`` alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from relgrade.errors import ProtocolError
from relgrade.graders.store import (
    GradeStore,
    SingleWriter,
    clean_litter,
    lock_path,
    writer_lock,
)
from tests.graders import experiment as ex

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")


def row(q, c, grade=1, reason="shows where it lives"):
    return {"query_id": q, "chunk_id": c, "reason": reason, "grade": grade}


def pairs_at(path):
    return {(r["query_id"], r["chunk_id"]) for r in ex.read_rows(path)} if path.exists() else set()


def replace_with_copy(path, *, keep_last=None):
    """Put a new file (a copy of the current one, optionally cut) at ``path`` by rename."""
    data = path.read_bytes()
    if keep_last is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[:keep_last])
    tmp = path.with_name("editor-save.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --- the store -----------------------------------------------------------------------

def test_a_batch_after_the_file_was_replaced_lands_in_the_file_at_the_path(tmp_path, caplog):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path).open() as store:
        store.append([row("q1", "c1")])
        replace_with_copy(path)  # an editor's save: same rows, new inode
        assert store.append([row("q1", "c2")]) == 1
        assert pairs_at(path) == {("q1", "c1"), ("q1", "c2")}
        assert len(store.replacements) == 1
        assert "was replaced on disk" in store.replacements[0]
        assert "was replaced on disk" in caplog.text
    with GradeStore(path).open() as store:
        assert [(r["query_id"], r["chunk_id"]) for _, r in store.rows] == [("q1", "c1"), ("q1", "c2")]


def test_grades_already_in_the_new_file_count_as_recorded(tmp_path):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path).open() as store:
        store.append([row("q1", "c1")])
        other = tmp_path / "other.jsonl"
        other.write_text(json.dumps(row("q1", "c1")) + "\n" + json.dumps(row("q9", "c9")) + "\n")
        os.replace(other, path)  # e.g. a grade import landed: q9 is new
        store.append([row("q1", "c2")])
        assert ("q9", "c9") in store
        assert [json.loads(x)["chunk_id"] for x in path.read_text().splitlines()] == ["c1", "c9", "c2"]


class _ReplacedWhileWriting(GradeStore):
    """A store whose file is replaced right after its first append reaches the old file."""

    keep_last = None
    _done = False

    def _write_block(self, rows, notes=None):
        super()._write_block(rows, notes)
        if not self._done:
            self._done = True
            replace_with_copy(self.path, keep_last=self.keep_last)


@pytest.mark.parametrize("keep_last", [None, 1], ids=["copy-with-the-batch", "older-copy"])
def test_a_replacement_during_an_append_is_caught_before_the_batch_is_acknowledged(tmp_path, keep_last):
    path = tmp_path / "round-1.jsonl"
    path.write_text(json.dumps(row("q1", "c1")) + "\n")
    store = _ReplacedWhileWriting(path)
    store.keep_last = keep_last
    with store.open():
        assert store.append([row("q2", "a"), row("q2", "b")]) == 2
        assert store.replacements
    rows = [(r["query_id"], r["chunk_id"]) for r in ex.read_rows(path)]
    assert rows == [("q1", "c1"), ("q2", "a"), ("q2", "b")]  # present once, not twice


def test_the_lock_file_keeps_a_second_writer_out_even_after_the_file_was_replaced(tmp_path):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path).open() as store:
        store.append([row("q1", "c1")])
        replace_with_copy(path)
        with pytest.raises(ProtocolError, match="another relgrade process"):
            GradeStore(path).open()
        with pytest.raises(ProtocolError, match="another relgrade process"):
            with writer_lock(path):
                pass
    assert not lock_path(path).exists()
    with GradeStore(path).open() as store:
        assert len(store) == 1


def test_the_single_writer_acknowledges_only_batches_in_the_file_at_the_path(tmp_path):
    path = tmp_path / "round-1.jsonl"
    store = GradeStore(path).open()
    acked = []
    with SingleWriter() as writer:
        for i in range(30):
            rows = [row(f"q{i}", "a"), row(f"q{i}", "b")]
            writer.submit(store, rows).result()
            acked += [(r["query_id"], r["chunk_id"]) for r in rows]
            if i % 7 == 3:
                replace_with_copy(path)
    store.close()
    assert pairs_at(path) == set(acked)


# --- litter --------------------------------------------------------------------------

def test_leftover_temporary_files_and_an_empty_grade_file_are_cleaned_on_the_next_start(tmp_path):
    path = tmp_path / "round-1.jsonl"
    path.write_bytes(b"")
    (tmp_path / ".round-1.jsonl.abc123.tmp").write_text("half an import")
    (tmp_path / ".round-1.meta.json.x.tmp").write_text("{")
    (tmp_path / ".round-10.jsonl.keep.tmp").write_text("another round's")
    gone = clean_litter(path)
    assert {p.name for p in gone} == {"round-1.jsonl", ".round-1.jsonl.abc123.tmp",
                                      ".round-1.meta.json.x.tmp"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".round-10.jsonl.keep.tmp"]


def test_a_store_that_recorded_nothing_leaves_no_file_behind(tmp_path):
    path = tmp_path / "g" / "round-1.jsonl"
    with GradeStore(path).open() as store:
        assert len(store) == 0
    assert sorted(p.name for p in path.parent.iterdir()) == []


# --- grade run and serve -------------------------------------------------------------

def _grade_run(root):
    cmd = [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "run",
           "--grader", "grader-a", "--params", str(root / "params.yaml"), "--no-progress"]
    return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_replacing_the_grade_file_during_grade_run_loses_no_acknowledged_grade(tmp_path):
    packets = ex.build(tmp_path, queries=8, chunks=5, graders={
        "grader-a": {"role": "grader", "kind": "model", "family": "test",
                     "command": ex.command("sleep:0.15"), "timeout": 20, "retries": 0,
                     "workers": 2}})
    path = tmp_path / "data/grades/grader-a/round-1.jsonl"
    proc = _grade_run(tmp_path)
    replaced = 0
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > 0:
            replace_with_copy(path)  # git stash && git stash pop: same content, new inode
            replaced += 1
        time.sleep(0.1)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert replaced >= 2
    assert "0 of 40 pairs still lack a grade" in out
    assert "was replaced on disk" in err
    want = {(q, c["chunk_id"]) for q, p in packets.items() for b in p["batches"] for c in b}
    assert pairs_at(path) == want


def test_replacing_the_grade_file_during_serve_loses_no_saved_batch(tmp_path):
    from relgrade.cli.serve import build_site
    from relgrade.web.app import create_app

    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"}}
    packets = ex.build(tmp_path, queries=3, chunks=5, audit=1, graders=graders)
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice"])
    try:
        client = TestClient(create_app(site))
        client.get(f"/login?token={site.graders['alice'].token}", follow_redirects=False)
        path = tmp_path / "data/grades/alice/round-1.jsonl"
        saved = set()
        for qid in packets:
            page = client.get(f"/g/alice/q/{qid}/0")
            data = {"csrf": _form_token(page.text)}
            for i in range(5):
                data[f"grade-{i}"] = "1"
                data[f"reason-{i}"] = "helps a little"
            r = client.post(f"/g/alice/q/{qid}/0", data=data, follow_redirects=False,
                            headers={"origin": "http://testserver"})
            assert r.status_code == 303
            saved |= {(qid, c["chunk_id"]) for c in packets[qid]["batches"][0]}
            replace_with_copy(path)  # after each save, a new inode at the path
        assert pairs_at(path) == saved
        progress = client.get("/g/alice/progress.json").json()
        assert progress["graded"] == len(saved)
        assert stores[0].replacements
    finally:
        site.writer.close()
        for s in stores:
            s.close()


def _form_token(html):
    import re

    m = re.search(r'name="csrf" value="([^"]+)"', html)
    return m.group(1) if m else ""


def test_a_file_replaced_between_the_open_and_the_lock_is_the_one_held(tmp_path, monkeypatch):
    # A grade import landing between a store's open() of the file and its flock: the store
    # must end up holding, reading and appending to the file now at the path.
    import fcntl as real_fcntl

    from relgrade.graders import store as store_mod

    path = tmp_path / "round-1.jsonl"
    path.write_text(json.dumps(row("q1", "c1")) + "\n")
    calls = []
    original = real_fcntl.flock

    def flock(fd, op):
        if op & real_fcntl.LOCK_EX and not calls and os.fstat(fd).st_ino == os.stat(path).st_ino:
            calls.append(fd)
            new = tmp_path / "imported.jsonl"
            new.write_text(json.dumps(row("q1", "c1")) + "\n" + json.dumps(row("q9", "c9")) + "\n")
            os.replace(new, path)
        return original(fd, op)

    monkeypatch.setattr(store_mod.fcntl, "flock", flock)
    with GradeStore(path).open() as store:
        assert calls, "the replacement was not staged"
        assert ("q9", "c9") in store
        store.append([row("q1", "c2")])
    assert pairs_at(path) == {("q1", "c1"), ("q9", "c9"), ("q1", "c2")}


def test_a_replacement_with_a_broken_line_is_reported_on_the_page_and_nothing_is_acknowledged(tmp_path):
    from relgrade.cli.serve import build_site
    from relgrade.web.app import create_app

    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"}}
    packets = ex.build(tmp_path, queries=2, chunks=5, audit=1, graders=graders)
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice"])
    try:
        client = TestClient(create_app(site))
        client.get(f"/login?token={site.graders['alice'].token}", follow_redirects=False)
        path = tmp_path / "data/grades/alice/round-1.jsonl"

        def save(qid):
            data = {"csrf": _form_token(client.get(f"/g/alice/q/{qid}/0").text)}
            for i in range(5):
                data[f"grade-{i}"] = "1"
                data[f"reason-{i}"] = "helps a little"
            return client.post(f"/g/alice/q/{qid}/0", data=data, follow_redirects=False,
                               headers={"origin": "http://testserver"})

        assert save("q01").status_code == 303
        good = path.read_bytes()
        broken = tmp_path / "broken.jsonl"
        broken.write_bytes(good + b"<<<<<<< Updated upstream\n")  # a merge conflict marker
        os.replace(broken, path)
        r = save("q02")
        assert r.status_code == 409
        assert "A recorded grade line is not valid JSON" in r.text
        assert "Nothing was saved" in r.text or "never drops" in r.text
        assert pairs_at_lines(path) == good.count(b"\n")  # nothing of q02 was acknowledged
        fixed = tmp_path / "fixed.jsonl"
        fixed.write_bytes(good)
        os.replace(fixed, path)
        assert save("q02").status_code == 303
        want = {(q, c["chunk_id"]) for q in packets for c in packets[q]["batches"][0]}
        assert pairs_at(path) == want
    finally:
        site.writer.close()
        for s in stores:
            s.close()


def pairs_at_lines(path):
    return sum(1 for line in path.read_bytes().split(b"\n") if line.startswith(b"{"))
