"""End to end: an experiment that reuses another experiment's grades (grading.share_from).

In a temporary git + dvc repository holding the tiny experiment at the top (never run),
`relgrade init experiments/a` makes an experiment with two built-in arms, graded by a
command grader and run to its frozen key (its metrics and report are not needed).
`relgrade init experiments/b --share-from ../a` makes one over the same inputs with one more
arm (an external run): only the pairs that arm adds are pending; once they are graded,
`dvc repro` of b completes and b's key record says what was shared from a.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

GRADER = Path(__file__).with_name("graders") / "tiny_grader.py"
INPUTS = ["--corpus", "data/input/chunks.jsonl", "--queries", "data/input/queries.tsv",
          "--intents", "data/input/intents.tsv", "--arm", "bm25=bm25", "--arm", "tfidf=tfidf",
          "--pool-depth", "3", "--audit-min", "4"]
A = "experiments/a"


def _pairs(table: pd.DataFrame) -> set:
    return set(zip(table["query_id"].astype(str), table["chunk_id"].astype(str)))


def _grade(root: Path, exp: str) -> None:
    for name in ("grader-a", "auditor-b"):
        tiny.run(root, "relgrade", "grade", "run", "--experiment", exp, "--grader", name,
                 "--no-progress")


def build_keyed(folder: Path, bare: Path) -> None:
    """The tiny experiment's inputs at the top of a new git + DVC repository ``folder /
    "repo"`` (never run; a copy of ``bare``, the ``_repo`` template of
    tests/test_e2e_init_modes.py), ``relgrade init experiments/a`` with two built-in arms
    (bm25, tfidf), pool depth 3 and the command grader (tests/graders/tiny_grader.py) for both
    graders, its intents reviewed by auditor-b, ``dvc repro experiments/a/dvc.yaml:packets``,
    both graders' ``relgrade grade run`` and ``dvc repro experiments/a/dvc.yaml:key``: the key
    frozen, its metrics and report not run.

    Kept beside it: ``init.json``, ``{"params", "pipeline"}``, the text of the experiment's
    params.yaml and dvc.yaml right after ``relgrade init``; and ``key.json``, ``{"returncode",
    "stdout", "stderr", "disputes_file"}``, the last ``dvc repro`` and whether
    ``data/disputes.jsonl`` existed after it. The session fixture ``a_keyed``
    (tests/conftest.py) builds it once per test run for this module and
    tests/test_e2e_disputes_anywhere.py; copy ``folder / "repo"`` (``tiny.copy_repo``) to
    change it.
    """
    root = tiny.copy_repo(bare, folder / "repo")
    command = f"{sys.executable} {GRADER}"
    graders = ["--grader-command", command, "--auditor-command", command]
    tiny.run(root, "relgrade", "init", A, *INPUTS, *graders)
    (folder / "init.json").write_text(json.dumps({
        "params": (root / A / "params.yaml").read_text(),
        "pipeline": (root / A / "dvc.yaml").read_text()}))
    tiny.run(root, "relgrade", "intents", "review", "--experiment", A, "--reviewer",
             "auditor-b")
    tiny.run(root, "dvc", "repro", f"{A}/dvc.yaml:packets")
    _grade(root, A)
    key = tiny.run(root, "dvc", "repro", f"{A}/dvc.yaml:key")  # its report is not needed
    (folder / "key.json").write_text(json.dumps({
        "returncode": key.returncode, "stdout": key.stdout, "stderr": key.stderr,
        "disputes_file": (root / A / "data/disputes.jsonl").exists()}))


@pytest.fixture(scope="module")
def shared(tmp_path_factory, a_keyed):
    # experiments/a made, graded and run to its frozen key: a copy of the shared build
    # (tests/conftest.py), which ran exactly these commands
    root = tiny.copy_repo(a_keyed / "repo", tmp_path_factory.mktemp("share"))
    command = f"{sys.executable} {GRADER}"
    graders = ["--grader-command", command, "--auditor-command", command]
    tiny.run(root, "relgrade", "init", "experiments/b", *INPUTS, "--run",
             "ext=data/input/runs/mixed.trec", "--share-from", "../a", *graders)
    tiny.run(root, "relgrade", "intents", "review", "--experiment", "experiments/b",
             "--reviewer", "auditor-b")
    tiny.run(root, "dvc", "repro", "experiments/b/dvc.yaml:packets")
    before = json.loads(tiny.run(root, "relgrade", "status", "--experiment", "experiments/b",
                                 "--json").stdout)
    stopped = tiny.run(root, "dvc", "repro", "experiments/b/dvc.yaml", check=False)
    _grade(root, "experiments/b")
    tiny.run(root, "dvc", "repro", "experiments/b/dvc.yaml")
    return root, before, stopped


def test_only_the_pairs_the_new_arm_adds_are_pending(shared):
    root, before, stopped = shared
    a, b = root / "experiments/a", root / "experiments/b"
    new = _pairs(pd.read_parquet(b / "data/pool/pool.parquet")) - \
        _pairs(pd.read_parquet(a / "data/pool/pool.parquet"))
    assert new  # the external run adds pairs
    assert before["pending"]["graders"]["grader-a"]["pending_new"] == len(new)
    assert before["pending"]["graders"]["grader-a"]["pending_stale"] == 0
    assert stopped.returncode != 0
    assert f"grading: {len(new)} pairs need grader-a ({len(new)} new" in stopped.stderr
    # the grader graded only the remainder, in b's own file; a's grades stay in a
    own = [json.loads(x) for x in (b / "data/grades/grader-a/round-1.jsonl").read_text()
           .splitlines()]
    assert {(r["query_id"], r["chunk_id"]) for r in own} == new


def test_the_key_record_and_grades_say_what_was_shared_and_every_key_grade_is_the_truth(shared):
    root, *_ = shared
    a, b = root / "experiments/a", root / "experiments/b"
    pool_b = _pairs(pd.read_parquet(b / "data/pool/pool.parquet"))
    reused = pool_b & _pairs(pd.read_parquet(a / "data/pool/pool.parquet"))
    grades = pd.read_parquet(b / "data/graded/grades.parquet")
    mine = grades[grades["grader"] == "grader-a"]
    assert _pairs(mine[mine["origin"] == "../a"]) == reused
    assert _pairs(mine[mine["origin"] == ""]) == pool_b - reused
    manifest = json.loads((b / "data/graded/manifest.json").read_text())
    audited = grades[(grades["grader"] == "auditor-b") & (grades["origin"] == "../a")]
    expected = {"grader-a": len(reused)} | ({"auditor-b": len(audited)} if len(audited) else {})
    assert manifest["shared"] == {"../a": {"pairs": dict(sorted(expected.items()))}}
    record = json.loads((b / "data/key/record.json").read_text())
    assert record["shared"] == {"../a": {"pairs": dict(sorted(expected.items())),
                                         "key_pairs": len(reused)}}
    key = [json.loads(x) for x in (b / "data/key/key.jsonl").read_text().splitlines()]
    assert {(r["query_id"], r["chunk_id"]) for r in key} == pool_b
    assert all(r["grade"] == tiny.truth(r["chunk_id"]) for r in key)


def test_status_names_the_source_and_what_it_gave(shared):
    root, before, _ = shared
    shared_counts = before["pending"]["shared"]
    assert list(shared_counts) == ["../a"] and shared_counts["../a"]["grader-a"] > 0
    text = tiny.run(root, "relgrade", "status", "--experiment", "experiments/b").stdout
    assert "shared: " in text and "reused from ../a (" in text
    assert "warning:" not in text
