"""End to end, as the README tells a user: `relgrade corpus edit` changes one graded chunk,
`dvc repro` stops on exactly that chunk's pairs, `relgrade grade run` regrades them, and
`dvc repro` writes a revised key."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.e2e import tiny
from tests.test_e2e_bank import _grade, _params, _pending_line, _rows

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def frozen(frozen_built, tmp_path_factory):
    """A copy of the frozen experiment (``frozen_built``: git, DVC cache and all, built once
    per test process and shared with tests/test_e2e_bank.py)."""
    return tiny.copy_repo(frozen_built, tmp_path_factory.mktemp("edit") / "exp")


def test_corpus_edit_makes_that_chunks_pairs_pending_and_regrading_revises_the_key(frozen):
    root = frozen
    audit = [json.loads(x)["query_id"]
             for x in (root / "data/audit/audit.jsonl").read_text().splitlines()]
    cid = f"{audit[0]}-answer"
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    pairs = pool[pool.chunk_id == cid]
    n_a, n_b = len(pairs), int(pairs.query_id.isin(audit).sum())
    owed = (f"grading: {'1 pair needs' if n_a == 1 else f'{n_a} pairs need'} grader-a "
            f"({n_a} stale), {n_b} need{'s' if n_b == 1 else ''} auditor-b ({n_b} stale); "
            "run `relgrade grade run --grader grader-a` and "
            "`relgrade grade run --grader auditor-b`")
    old = json.loads((root / "data/key/record.json").read_text())
    old_hash = old["key_sha256"]
    (root / "blank.txt").write_text("This page intentionally left blank.")

    edit = tiny.run(root, "relgrade", "corpus", "edit", cid, "--text-file", "blank.txt")
    assert edit.stdout.splitlines() == [
        f"Edited chunk {cid} in data/input/chunks.jsonl",
        f"`dvc repro` will then stop on: {owed}",
        "If the new text changes what an arm retrieves, the pool changes too: pairs may leave "
        "it or join it, `dvc repro` names what is owed then, and the key it freezes is a new "
        "pool version (not a revision of this one)."]
    refused = tiny.run(root, "relgrade", "corpus", "edit", cid, "--text-file", "blank.txt",
                       check=False)
    assert refused.returncode == 1
    assert refused.stderr + refused.stdout == (
        f"Error: data/input/chunks.jsonl: {cid}: the text is the chunk's text already: "
        "nothing to edit\n")

    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    assert "exited with 3" in proc.stderr  # relgrade's "pending work" (docs/graders.md)
    line, = _pending_line(proc)
    assert line.startswith(f"Pending: {owed}, then `dvc repro` again.")

    # the frozen key is the previous one now: no key is current until the owed grades are in
    status = tiny.run(root, "relgrade", "status").stdout.splitlines()
    dropped = ", ".join(old["dropped_queries"]) or "none"
    assert [x for x in status if x.startswith("key:")] == [
        "key: no current key until the owed grades are in: "
        f"{owed.removeprefix('grading: ')}, then `dvc repro`",
        f"key: previous key kept (not current): sha256 {old_hash}, pool "
        f"{old['pool_version']}, {old['pairs']} pairs over {old['queries']} queries; "
        f"dropped queries: {dropped}"]
    key = json.loads(tiny.run(root, "relgrade", "status", "--json").stdout)["key"]
    assert (key["state"], key["current"], key["sha256"], key["pool_version"]) == (
        "previous", False, old_hash, old["pool_version"])
    assert key["owed"] == {"grader-a": {"stale": n_a}, "auditor-b": {"stale": n_b}}
    assert key["owed_pairs"] == n_a + n_b

    _grade(root)  # the commands the Pending line printed
    tiny.run(root, "dvc", "repro")
    record = json.loads((root / "data/key/record.json").read_text())
    key = json.loads(tiny.run(root, "relgrade", "status", "--json").stdout)["key"]
    assert (key["state"], key["current"], key["sha256"]) == (
        "frozen", True, record["key_sha256"])
    assert (f"key: frozen, sha256 {record['key_sha256']}, {record['pairs']} pairs over "
            f"{record['queries']} queries; dropped queries: "
            f"{', '.join(record['dropped_queries']) or 'none'}") in \
        tiny.run(root, "relgrade", "status").stdout.splitlines()
    assert record["revises"] == old_hash != record["key_sha256"]
    assert [(r["query_id"], r["chunk_id"], r["grade_before"], r["grade"])
            for r in record["regraded"]] == [(q, cid, 2, 0) for q in sorted(pairs.query_id)]
    # the report's translation section says why the key changed
    n = len(pairs)
    assert (f"The current key revises the previous one: {n} pair{'s' if n != 1 else ''} "
            "regraded because what they show changed") in (root / "metrics/report.md").read_text()


@pytest.fixture(scope="module")
def shrunk(frozen_built, tmp_path_factory):
    """A frozen key, then a shallower pool (pairs leave it) and one chunk edited."""
    return tiny.copy_repo(frozen_built, tmp_path_factory.mktemp("shrunk") / "exp")


def test_after_pairs_leave_the_pool_an_imported_regrade_is_taken_and_the_key_ignores_them(
        shrunk):
    root = shrunk
    audit = [json.loads(x)["query_id"]
             for x in (root / "data/audit/audit.jsonl").read_text().splitlines()]
    cid = f"{audit[0]}-answer"
    before = set(zip(*pd.read_parquet(root / "data/pool/pool.parquet")[
        ["query_id", "chunk_id"]].T.values))
    _params(root, lambda p: p["pool"].update(depth=3))
    (root / "blank.txt").write_text("This page intentionally left blank.")
    tiny.run(root, "relgrade", "corpus", "edit", cid, "--text-file", "blank.txt")
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    now = set(zip(pool.query_id, pool.chunk_id))
    left = before - now
    assert left and now < before  # pairs left the pool; none joined it
    graded = {g: {(r["query_id"], r["chunk_id"]) for r in _rows(root, g)}
              for g in ("grader-a", "auditor-b")}
    assert left & graded["grader-a"]  # recorded grades of pairs no longer pooled
    stale = sorted((q, c) for q, c in now if c == cid)
    n_a, n_b = len(stale), sum(q in audit for q, _ in stale)
    line, = _pending_line(proc)
    assert line.startswith(f"Pending: grading: {'1 pair needs' if n_a == 1 else f'{n_a} pairs need'} "
                           f"grader-a ({n_a} stale)")

    # the user regrades the edited chunk elsewhere and imports it, as the README says
    for name, pairs in (("grader-a", stale), ("auditor-b", [p for p in stale if p[0] in audit])):
        src = root / f"{name}.jsonl"
        src.write_text("".join(json.dumps({"query_id": q, "chunk_id": c,
                                           "reason": "The page is blank.", "grade": 0}) + "\n"
                               for q, c in pairs))
        res = tiny.run(root, "relgrade", "grade", "import", "--grader", name, src.name,
                       check=False)
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith(f"imported {len(pairs)} grade{'s' if len(pairs) != 1 else ''} "
                                     f"for {name} (round 1)")
        # every recorded grade kept, those of the left pairs included
        assert {(r["query_id"], r["chunk_id"]) for r in _rows(root, name)} == graded[name]
    tiny.run(root, "dvc", "repro")
    key = [json.loads(x) for x in (root / "data/key/key.jsonl").read_text().splitlines()]
    in_key = {(r["query_id"], r["chunk_id"]) for r in key}
    assert in_key <= now and not in_key & left
    assert {r["grade"] for r in key if r["chunk_id"] == cid} <= {0}
    table = pd.read_parquet(root / "data/graded/grades.parquet")
    assert not set(zip(table.query_id, table.chunk_id)) & left
    status = tiny.run(root, "relgrade", "status")
    assert "gate: passed" in status.stdout

    # the README's agreement command reads the round files as the pipeline does
    res = tiny.run(root, "relgrade", "agreement", "data/grades/grader-a/round-1.jsonl",
                   "data/grades/auditor-b/round-1.jsonl", check=False)
    assert res.returncode == 0, res.stderr
    assert (f"note: A (data/grades/grader-a/round-1.jsonl): {n_a} superseded "
            f"grade{'s' if n_a != 1 else ''} skipped") in res.stdout


def test_corpus_edit_with_the_pool_removed_names_the_grades_it_makes_stale(frozen_built,
                                                                          tmp_path):
    # a stage that fails after DVC cleared its outputs (a bad params value) leaves the pool
    # off disk while the bank keeps its grades: the edit must not say nothing is affected
    root = tiny.copy_repo(frozen_built, tmp_path / "exp")
    audit = [json.loads(x)["query_id"]
             for x in (root / "data/audit/audit.jsonl").read_text().splitlines()]
    cid = f"{audit[0]}-answer"
    grades = pd.read_parquet(root / "data/graded/grades.parquet")
    mine = grades[grades.chunk_id == cid].groupby("grader").size()
    (root / "data/pool/pool.parquet").unlink()
    (root / "blank.txt").write_text("This page intentionally left blank.")
    edit = tiny.run(root, "relgrade", "corpus", "edit", cid, "--text-file", "blank.txt")
    graded = ", ".join(f"{n} by {g}" for g, n in mine.items())
    assert edit.stdout.splitlines() == [
        f"Edited chunk {cid} in data/input/chunks.jsonl",
        f"data/pool/pool.parquet is not on disk, but chunk {cid} has grades ({graded}): with "
        "its new text they are stale once `dvc repro` builds the pool again, and it stops on "
        "them, naming the graders and the commands."]
    assert set(mine.index) == {"grader-a", "auditor-b"}


def test_a_second_edit_names_its_chunks_pairs_and_the_grading_owed_before_it(frozen_built,
                                                                             tmp_path):
    # two chunks edited before `dvc repro`: it stops on both chunks' pairs, and the second
    # edit's forecast says so, not only its own chunk's
    root = tiny.copy_repo(frozen_built, tmp_path / "exp")
    audit = [json.loads(x)["query_id"]
             for x in (root / "data/audit/audit.jsonl").read_text().splitlines()]
    first, second = f"{audit[0]}-answer", f"{audit[1]}-answer"
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    n = {c: len(pool[pool.chunk_id == c]) for c in (first, second)}
    m = {c: int(pool[pool.chunk_id == c].query_id.isin(audit).sum()) for c in (first, second)}
    (root / "blank.txt").write_text("This page intentionally left blank.")
    tiny.run(root, "relgrade", "corpus", "edit", first, "--text-file", "blank.txt")
    edit = tiny.run(root, "relgrade", "corpus", "edit", second, "--text-file", "blank.txt")
    a, b = n[first] + n[second], m[first] + m[second]
    assert edit.stdout.splitlines()[1] == (
        f"`dvc repro` will then stop on {a + b} pairs, {n[second] + m[second]} of chunk "
        f"{second} and {n[first] + m[first]} of other chunks owed before the edit: grading: "
        f"{a} pairs need grader-a ({a} stale), {b} need{'s' if b == 1 else ''} auditor-b "
        f"({b} stale); run `relgrade grade run --grader grader-a` and "
        "`relgrade grade run --grader auditor-b`")
    proc = tiny.run(root, "dvc", "repro", check=False)
    line, = _pending_line(proc)
    assert line.startswith(f"Pending: grading: {a} pairs need grader-a ({a} stale), {b} need")
