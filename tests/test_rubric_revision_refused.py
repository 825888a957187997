"""A rubric revision with a wrong `changes:` line is the rubric's fault, said as such.

`relgrade disputes` names the version revised (from the revised file's version line, else
the revision's `revises:` line), and `relgrade status` names the rubric file as the problem,
not a grader's grade file, and exits 1. Run as a user types them, at the repository's top,
on the tiny grading set-up of tests/graders/experiment.py placed at experiments/sub.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from relgrade.cli import main
from tests.graders import experiment as rig

# "Version:" is not the front block's `version:` key, so the v1 file names no version (the
# form a new user wrote); its sections: the-scale and traps
V1 = ("Version: v1\n\n# Grading rubric\n\nJudge each chunk against the intent line alone.\n\n"
      "## The scale\n\n2 answers it, 1 helps, 0 does not help.\n\n"
      "## Traps\n\nA test that calls the function is not its definition.\n")
# v2 changes the-scale but its changes: line names traps
V2 = ("version: v2\nrevises: v1\nchanges: traps\n\n"
      + V1.replace("0 does not help.", "0 does not help; a pointer alone is a 1."))
EXPERIMENT = "experiments/sub"
RULE = ("rubric/v2.md:3: changes: sections changed since v1 but not named in the revision's "
        "changes (found the-scale). Name them, or undo the edit (compare with rubric/v1.md)")
#: the paths `relgrade status` reads besides the grading set-up's
STATUS_PATHS = {"record": "data/key/record.json", "key": "data/key/key.jsonl",
                "metrics": "metrics", "ledger": "data/ledger.jsonl",
                "corpus_manifest": "data/corpus/manifest.json",
                "queries_manifest": "data/queries/manifest.json",
                "pool_manifest": "data/pool/manifest.json",
                "intents_manifest": "data/intents/manifest.json",
                "agreement": "data/gate/agreement.json", "gate": "data/gate/gate.json"}


def _run(top: Path, monkeypatch, *args):
    monkeypatch.chdir(top)
    return CliRunner().invoke(main, [*args, "--experiment", EXPERIMENT])


def _graded_then_revised(tmp_path: Path, monkeypatch) -> Path:
    """grader-a grades all 28 pairs under v1; then params point at the wrong v2."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    sub = tmp_path / EXPERIMENT
    rig.build(sub, rubric=V1, paths=STATUS_PATHS)
    done = _run(tmp_path, monkeypatch, "grade", "run", "--grader", "grader-a")
    assert done.exit_code == 0, done.output
    assert len(rig.read_rows(sub / "data/grades/grader-a/round-1.jsonl")) == 4 * 7
    (sub / "rubric/v2.md").write_text(V2)
    params = yaml.safe_load((sub / "params.yaml").read_text())
    params["grading"].update(rubric="rubric/v2.md", rubric_version="v2")
    (sub / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return sub


def test_disputes_names_the_revised_version_when_its_file_has_no_version_line(
        tmp_path, monkeypatch):
    _graded_then_revised(tmp_path, monkeypatch)
    result = _run(tmp_path, monkeypatch, "disputes")
    assert result.exit_code == 1
    assert result.output.splitlines() == [f"Error: {RULE}"]


def test_status_names_the_rubric_file_not_a_grade_file_and_exits_1(tmp_path, monkeypatch):
    _graded_then_revised(tmp_path, monkeypatch)
    result = _run(tmp_path, monkeypatch, "status")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert f"rubric: refused: {RULE}" in lines
    assert ("grading: grader-a's grades cannot be counted until the rubric is fixed "
            "(see `rubric:` above)") in lines
    assert not [x for x in lines if "file is invalid" in x], result.output
