"""`relgrade corpus edit` on a chunks file: one line rewritten, and `grade run` before
`dvc repro` says the packets predate the edit instead of grading nothing in silence. On the
same small pipeline: the retrieve stage notes a run file's seventh field as `evaluate` does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_init_modes import _repo

GRADER = Path(__file__).with_name("graders") / "tiny_grader.py"

pytestmark = [pytest.mark.slow]  # a DVC corpus stage run (about 40 s)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The tiny experiment with its corpus stage run (manifest of the chunks file read)."""
    root = _repo(tmp_path_factory, "edit")  # the tiny inputs in a new git + DVC repository
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["grader-a"]["command"] = [sys.executable, str(GRADER)]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "dvc", "repro", "corpus")
    return root


def test_corpus_edit_rewrites_only_the_edited_line_of_chunks_jsonl(built):
    path = built / "data/input/chunks.jsonl"
    before = path.read_bytes().splitlines(keepends=True)
    (built / "new.txt").write_text("def main():\n    return 'edited'\n")
    tiny.run(built, "relgrade", "corpus", "edit", "kw02-miss1", "--text-file", "new.txt")
    after = path.read_bytes().splitlines(keepends=True)
    assert len(after) == len(before) == 48
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    # kw02 is the second topic, four chunks each: its first near miss is line 7 (index 6)
    assert changed == [6]
    assert after[6] == (b'{"chunk_id":"kw02-miss1","header":"docs/page1.md \xe2\x80\xba Overview",'
                        b'"text":"def main():\\n    return \'edited\'\\n","source":"docs/page1.md"}\n')


def test_grade_run_after_corpus_edit_says_the_packets_predate_it(built):
    if not (built / "new.txt").exists():
        (built / "new.txt").write_text("def main():\n    return 'edited'\n")
        tiny.run(built, "relgrade", "corpus", "edit", "kw02-miss1", "--text-file", "new.txt")
    import hashlib
    import json

    was = json.loads((built / "data/corpus/manifest.json").read_text())["sha256"]
    now = hashlib.sha256((built / "data/input/chunks.jsonl").read_bytes()).hexdigest()
    proc = tiny.run(built, "relgrade", "grade", "run", "--grader", "grader-a", "--no-progress",
                    check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr == (
        f"Error: {built / 'data/input/chunks.jsonl'} changed since the chunk table and the "
        f"packets were built (built from {was[:12]}, now {now[:12]}): the packets predate the "
        "edit; nothing was graded. Run `dvc repro` first: it rebuilds the packets and stops on "
        "the pairs owed, then run this command again\n").replace(
        "Error: ", "Error: the corpus input ", 1)
    # once the corpus stage has read the edited file, the check is quiet
    tiny.run(built, "dvc", "repro", "corpus")
    again = tiny.run(built, "relgrade", "grade", "run", "--grader", "grader-a", "--no-progress",
                     check=False)
    assert "predate" not in again.stderr + again.stdout


def test_the_retrieve_stage_notes_a_seventh_field_as_evaluate_does(built):
    run = built / "data/input/runs/dense.trec"
    lines = run.read_text().splitlines()
    # a seventh field on lines 2 and 5 (1-based): ignored, as trec_eval does, and noted
    for i in (1, 4):
        lines[i] += " comment"
    run.write_text("\n".join(lines) + "\n")
    proc = tiny.run(built, "dvc", "repro", "retrieve@dense")
    assert ("Note: data/input/runs/dense.trec: 2 line(s) have fields after the sixth "
            "(first: line 2); they were ignored.\n") in proc.stderr
    # the words are evaluate's: both print relgrade.io.trec.extra_fields_note
