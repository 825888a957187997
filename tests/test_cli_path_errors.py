"""A missing file or a folder given where a file goes, on the feedback commands (disputes
import, reconcile, drift, queries sample/refresh): one `Error:` line naming the path, the
argument and the rule, exit 1 (not click's usage error, exit 2), and nothing written.

Each command is given as a user types it (click's runner: the same entry point as the
`relgrade` script, in-process), in a folder holding an empty folder `adir`; the checks run
before the experiment is read, so the repository's own experiment is named."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from tests.e2e import tiny

EXP = str(tiny.REPO)

CASES = [
    (["disputes", "import", "nope.jsonl"], "nope.jsonl: FILE: file not found"),
    (["disputes", "import", "adir"], "adir: FILE: is a folder, not a file. Give the file's path"),
    (["reconcile", "--ab", "adir"], "adir: --ab: is a folder, not a file. Give the file's path"),
    (["reconcile", "--ab", "nope.jsonl"], "nope.jsonl: --ab: file not found"),
    (["reconcile", "--ab", "ab.jsonl", "--query-log", "adir"],
     "adir: --query-log: is a folder, not a file. Give the file's path"),
    (["drift", "--log", "adir"], "adir: --log: is a folder, not a file. Give the file's path"),
    (["drift", "--log", "log.tsv", "--out", "adir"],
     "adir: --out: is a folder, where the output file goes. Give a file's path (in that "
     "folder, if it is the place)"),
    (["drift", "--log", "log.tsv", "--out", "log.tsv/drift.json"],
     "log.tsv/drift.json: --out: a part of this path is a file, where a folder is expected "
     "(found log.tsv)"),
    (["queries", "refresh", "--log", "adir", "--share", "0.25"],
     "adir: --log: is a folder, not a file. Give the file's path"),
    (["queries", "sample", "adir", "--n", "3", "--out", "q.tsv"],
     "adir: LOG: is a folder, not a file. Give the file's path"),
    (["queries", "sample", "log.tsv", "--n", "3", "--out", "adir"],
     "adir: --out: is a folder, where the output file goes. Give a file's path (in that "
     "folder, if it is the place)"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_missing_file_or_a_folder_is_one_error_line_naming_path_and_rule(tmp_path, args,
                                                                           message,
                                                                           monkeypatch):
    (tmp_path / "adir").mkdir()
    (tmp_path / "log.tsv").write_text("query\tcount\nhow to x\t3\n")
    (tmp_path / "ab.jsonl").write_text("{}\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, [*args, "--experiment", EXP])
    assert (done.exit_code, done.stdout, done.stderr) == (1, "", f"Error: {message}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "adir").iterdir()) == []


def test_a_dispute_before_the_pool_exists_names_the_repro_that_builds_it(tmp_path,
                                                                        monkeypatch):
    from tests.graders import experiment as ex

    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"}}
    ex.build(tmp_path, queries=2, chunks=3, audit=1, graders=graders,
             rubric="version: v1\n\n# Rubric\n\n## 1. The scale\n\n0, 1 or 2.\n")
    (tmp_path / "one.jsonl").write_text(
        '{"query_id": "q01", "chunk_id": "c1", "grader": "alice", "grade": 1, '
        '"section": "the-scale", "reason": "r"}\n')
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["disputes", "import", "one.jsonl"])
    assert (done.exit_code, done.stdout) == (1, "")
    assert done.stderr == ("Error: data/pool/pool.parquet: a dispute is on a pair of the pool, "
                           "and the pool is not built yet. Run `dvc repro dvc.yaml:pool` (at "
                           "the repository's top) first\n")
    assert not (tmp_path / "data/disputes.jsonl").exists()
