"""End to end: `relgrade arm add` of an arm that adds no pair to grade does not promise that
`dvc repro` stops for grading, and `dvc repro` indeed runs through."""

from __future__ import annotations

import pytest

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


def test_an_arm_adding_no_pair_to_grade_says_dvc_repro_does_not_stop(truth_frozen_built,
                                                                     tmp_path):
    repo = tiny.copy_repo(truth_frozen_built, tmp_path / "repo")
    # a copy of lexical's run: the same pool, every pair graded already
    out = tiny.run(repo, "relgrade", "arm", "add", "extra", "--run",
                   "data/input/runs/lexical.trec").stdout.splitlines()
    assert out[-1] == ("Next: dvc repro; no judgment is owed with this pool, so it does not "
                       "stop for grading.")
    proc = tiny.run(repo, "dvc", "repro", check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Pending: " not in proc.stderr
