"""`relgrade grade import --batch RESULTS --partial`: every valid owed answer recorded, each
refused line listed with its rule, exit 1 when any was refused; without the flag the file is
still all or nothing."""

from __future__ import annotations

import json

from tests.graders import experiment as ex
from tests.test_batch_files import (
    PATHS,
    answer_text,
    cli,
    export,
    grades_file,
    graders,
    openai_result,
    write_jsonl,
)


def results_with_a_chatty_answer(root):
    """Four owed batches (2 queries x (5 + 2 chunks)) answered; the third answer is chatty."""
    ex.build(root, queries=2, chunks=7, graders=graders(), paths=PATHS)
    reqs = export(root, "openai", root / "requests.jsonl")
    chatty = "Sure! Here you go:\n```json\n" + answer_text(reqs[2]) + "```\n"
    lines = [openai_result(reqs[0]), openai_result(reqs[1]), openai_result(reqs[2], chatty),
             openai_result(reqs[3]),
             # a stray line of some other file: no custom_id
             {"id": "x", "response": {"status_code": 200}}]
    return reqs, write_jsonl(root / "results.jsonl", lines)


def recorded(root):
    path = grades_file(root)
    return sorted((r["query_id"], r["chunk_id"]) for r in ex.read_rows(path)) \
        if path.exists() else []


def test_without_partial_one_chatty_answer_refuses_the_whole_file(tmp_path):
    _, results = results_with_a_chatty_answer(tmp_path)
    res = cli(tmp_path, "grade", "import", "--batch", str(results), "--grader", "grader-a")
    assert res.exit_code == 1
    assert f"Error: {results}:3: " in res.output and "Nothing of this file was recorded" \
        in res.output
    assert recorded(tmp_path) == []


def test_partial_records_every_valid_answer_and_names_each_refused_line(tmp_path):
    reqs, results = results_with_a_chatty_answer(tmp_path)
    res = cli(tmp_path, "grade", "import", "--batch", str(results), "--grader", "grader-a",
              "--partial")
    assert res.exit_code == 1, res.output
    # batches 0, 1 and 3 are q01 b0 (5 chunks), q01 b1 (2), q02 b1 (2): 9 pairs; 14 - 9 = 5
    assert (f"imported 9 grades in 3 batches for grader-a from {results.as_posix()} (openai "
            "results); 0 requests unanswered; 5 pairs still owed") in res.output
    refused = [line for line in res.output.splitlines() if line.startswith("refused: ")]
    assert len(refused) == 2
    assert refused[0].startswith(f"refused: {results}:3: ") and "q02 batch 0" in refused[0]
    assert "nothing of this file was recorded" not in refused[0].lower()
    assert refused[1].startswith(
        f"refused: {results}:5: a results line must be an OpenAI or Anthropic batch result "
        "with a custom_id")
    assert res.output.rstrip().endswith(
        f"Error: 2 lines of {results.as_posix()} refused (listed above, not recorded; their "
        "batches stay owed); every other answer was recorded")
    want = sorted((q, f"{q}-c{j}") for q, js in (("q01", range(7)), ("q02", range(5, 7)))
                  for j in js)
    assert recorded(tmp_path) == want
    # the refused batch stays owed: a corrected answer for it alone is taken next
    fixed = write_jsonl(tmp_path / "fixed.jsonl", [openai_result(reqs[2])])
    again = cli(tmp_path, "grade", "import", "--batch", str(fixed), "--grader", "grader-a",
                "--partial")
    assert again.exit_code == 0, again.output
    assert "0 pairs still owed" in again.output and len(recorded(tmp_path)) == 14


def test_partial_with_nothing_refused_exits_0(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, graders=graders(), paths=PATHS)
    (req,) = export(tmp_path, "openai", tmp_path / "requests.jsonl")
    results = write_jsonl(tmp_path / "results.jsonl", [openai_result(req)])
    res = cli(tmp_path, "grade", "import", "--batch", str(results), "--grader", "grader-a",
              "--partial")
    assert res.exit_code == 0, res.output
    assert "refused" not in res.output and len(recorded(tmp_path)) == 3


def test_partial_needs_batch(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, graders=graders(), paths=PATHS)
    (tmp_path / "g.jsonl").write_text(json.dumps({"query_id": "q01"}) + "\n")
    res = cli(tmp_path, "grade", "import", str(tmp_path / "g.jsonl"), "--grader", "grader-a",
              "--partial")
    assert res.exit_code == 2 and "--partial applies to --batch RESULTS only" in res.output
