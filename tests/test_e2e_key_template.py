"""End to end: the key's record names the prompt template its grades were made with.

The tiny experiment graded in full by its command graders through `relgrade grade run` and
its key frozen by `dvc repro` (the ``frozen_built`` fixture). The prompt template is then
edited in the repository's own package (``src/relgrade/prompts/grader.md``, the copy the
pipeline runs: PYTHONPATH names it): `dvc repro` leaves the record as it was, and the key
stage run again still names the template the grades were made with, not the edited file.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


def _lines(path):
    return len(path.read_text().splitlines())


def test_an_edited_prompt_template_leaves_the_record_naming_the_one_the_grades_used(
        tmp_path, frozen_built):
    root = tiny.copy_repo(frozen_built, tmp_path)
    env = {"PYTHONPATH": str(root / "src")}
    template = root / "src/relgrade/prompts/grader.md"
    made_with = hashlib.sha256(template.read_bytes()).hexdigest()
    record_path = root / "data/key/record.json"
    before = record_path.read_bytes()
    record = json.loads(before)
    # the key grader's grades make the key; the auditor's are compared with it, never in it
    n = _lines(root / "data/grades/grader-a/round-1.jsonl")
    assert record["prompt_template_sha256"] == made_with
    assert record["prompt_templates"] == {"grader-a": {made_with: n}}
    assert "prompt_template_note" not in record

    template.write_text(template.read_text() + "\nAnswer in English.\n")
    edited = hashlib.sha256(template.read_bytes()).hexdigest()
    assert edited != made_with
    proc = tiny.run(root, "dvc", "repro", env_extra=env)
    assert "Traceback" not in proc.stderr
    assert record_path.read_bytes() == before  # no grade was made with the edited template

    again = tiny.run(root, "dvc", "repro", "--force", "--single-item", "key", env_extra=env)
    assert "Running stage 'key'" in again.stdout
    rerun = json.loads(record_path.read_text())
    assert rerun["prompt_template_sha256"] == made_with
    assert rerun["prompt_templates"] == record["prompt_templates"]
    assert rerun["key_sha256"] == record["key_sha256"]
