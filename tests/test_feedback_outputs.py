"""The feedback commands' smaller promises: `relgrade metrics exp`'s title wraps at word
boundaries, the re-check's owed line agrees in number, and the files those commands write
are committed on purpose (no ignore rule catches them, the README says to commit them)."""

from __future__ import annotations

import subprocess

import pytest

from relgrade.pipeline.views import exp_title
from tests.e2e import tiny


def test_the_exp_title_wraps_at_word_boundaries_under_50_columns():
    # 70 characters: "crowd-sim: 3 revisions; per arm: mean, delta from the baseline, Holm p";
    # up to "delta" 44 (10 + 2 + 11 + 4 + 5 + 6 + 6): at 44 columns the first line ends
    # there, at 43 before it; the rest is indented two spaces
    assert exp_title("crowd-sim", 3, width=44) == [
        "crowd-sim: 3 revisions; per arm: mean, delta",
        "  from the baseline, Holm p"]
    assert exp_title("crowd-sim", 3, width=43) == [
        "crowd-sim: 3 revisions; per arm: mean,",
        "  delta from the baseline, Holm p"]
    assert exp_title("crowd-sim", 1, width=80) == [
        "crowd-sim: 1 revision; per arm: mean, delta from the baseline, Holm p"]
    for width in range(40, 81):
        lines = exp_title("triage-sim", 12, width=width)
        assert all(len(x) <= width for x in lines)
        assert " ".join(x.strip() for x in lines).split() == (
            "triage-sim: 12 revisions; per arm: mean, delta from the baseline, Holm p").split()


@pytest.mark.parametrize("who, verb", [("person-h", "owes"), ("people", "owe")])
def test_the_recheck_owed_line_agrees_in_number(who, verb):
    from types import SimpleNamespace

    from relgrade.experiment.recheck import owed_words

    ex = SimpleNamespace(root=tiny.REPO, working_tree=lambda: tiny.REPO.resolve())
    o = {"per_stratum": {0: 2, 2: 1}, "against": None if who == "people" else who,
         "size": 3, "frame": 9, "people": 3, "hours": 0.025, "seconds": 30, "judge": 3,
         "drawn": False}
    text = owed_words(ex, "grader-a", o)
    assert (f"stratified by the judge's grade (grade 0: 2, grade 2: 1); {who} {verb} 3 "
            "(0.03 annotator-hours at 30 s each), the judge 3: relgrade judge recheck "
            "--grader grader-a") in text


RECORDS = ["data/disputes.jsonl", "metrics/reconcile.json", "metrics/reconcile.md",
           "data/queries/drift.json", "data/grades/grader-a/recheck/0123456789ab-1/draw.json",
           "judges/ledger.jsonl", "judges/probe-grader-a.json",
           "experiments/crowd-sim/data/queries/drift.json",
           "experiments/crowd-sim/metrics/reconcile.json"]


@pytest.mark.parametrize("path", RECORDS)
def test_the_feedback_commands_records_are_never_ignored(path):
    # exit 1: no ignore rule of the repository matches the path
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=tiny.REPO)
    assert done.returncode == 1


def test_the_readme_says_to_commit_each_record():
    readme = (tiny.REPO / "README.md").read_text()
    for name in ("`data/disputes.jsonl`", "`metrics/reconcile.json`", "`metrics/reconcile.md`",
                 "`data/queries/drift.json`", "`data/grades/GRADER/recheck/`", "`judges/`"):
        assert name in readme
    assert "committed on purpose" in readme
