"""``relgrade status`` counting the bank a block of whole queries at a time: the same status
as the whole path, which still answers whenever work is owed or a file is out of order."""

from __future__ import annotations

import json

import yaml

from relgrade.experiment.files import Experiment
from relgrade.pipeline import judgments_blocks, status
from tests.test_grades import _row, _stage_dir
from tests.test_grades_blocks import _first_grade_stale, _graded


def _both(root, monkeypatch):
    """read_status by blocks (two pool rows read at a time: q1, then q2) and by the whole
    path, as JSON, and whether the block path answered."""
    monkeypatch.chdir(root)
    answered = []
    real = judgments_blocks.judgments_by_blocks

    def small(ex, **kw):
        got = real(ex, **kw, rows=2)
        answered.append(got is not None)
        return got

    monkeypatch.setattr(judgments_blocks, "judgments_by_blocks", small)
    out = []
    for blocks in (True, False):
        monkeypatch.setattr(judgments_blocks, "eligible",
                            (lambda ex: True) if blocks else (lambda ex: False))
        st = status.read_status(Experiment.load(root / "params.yaml"))
        out.append(json.dumps(st, sort_keys=False, default=str))
    return out, answered


def _extra_auditor(root):
    """A second auditor declared in params, which has graded only (q2, c4)."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["auditor-c"] = dict(params["graders"]["auditor-b"])
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def test_status_by_blocks_says_what_the_whole_path_says(tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p)
    (by_blocks, whole), answered = _both(tmp_path, monkeypatch)
    assert answered == [True]
    assert by_blocks == whole
    st = json.loads(whole)
    # 5 pool pairs, all graded by grader-a; auditor-b owes q2's two pairs, both graded
    a, b = st["grading"]["grader-a"], st["grading"]["auditor-b"]
    assert (a["state"], a["graded"], a["of"]) == ("complete", 5, 5)
    assert (b["state"], b["graded"], b["of"]) == ("complete", 2, 2)


def test_an_extra_auditor_with_a_pair_left_is_counted_as_the_whole_path_counts_it(
        tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _extra_auditor(tmp_path)
    _graded(tmp_path, p)
    (by_blocks, whole), answered = _both(tmp_path, monkeypatch)
    assert answered == [True]  # what an extra auditor owes is counted, not stopped on
    assert by_blocks == whole
    c = json.loads(whole)["grading"]["auditor-c"]
    assert (c["state"], c["graded"], c["of"], c["not_started"]) == ("not started", 0, 2,
                                                                     ["q2"])


def test_a_pool_pair_missing_a_grade_is_counted_by_the_whole_path_the_same(
        tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p, a=[_row("q1", "c1", 1), _row("q1", "c2", 1), _row("q2", "c4", 2),
                            _row("q2", "c5", 0)])
    (by_blocks, whole), answered = _both(tmp_path, monkeypatch)
    assert answered == [False]  # (q1, c3) is owed: the whole path counts it
    assert by_blocks == whole
    a = json.loads(whole)["grading"]["grader-a"]
    assert (a["graded"], a["of"], a["partial"]) == (4, 5, {"q1": {"missing": ["c3"],
                                                                  "pool": 3}})


def test_a_stale_grade_is_counted_by_the_whole_path_the_same(tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p)
    _first_grade_stale(tmp_path, p)
    (by_blocks, whole), answered = _both(tmp_path, monkeypatch)
    assert answered == [False]
    assert by_blocks == whole
    assert json.loads(whole)["grading"]["grader-a"]["graded"] == 4


def test_the_would_be_gate_counts_the_audited_pairs_kept_from_the_blocks(
        tmp_path, monkeypatch):
    _, p = _stage_dir(tmp_path)
    _graded(tmp_path, p)
    path = tmp_path / p["agreement"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "round": 1, "grader": "grader-a", "auditor": "auditor-b", "queries": 1, "pairs": 2,
        "missing": 0, "weighted_kappa": 0.5, "binary_kappa": 0.5, "kappa": 0.5,
        "raw_agreement": 0.5, "disagreement": 0.5, "two_step_disagreement": 0.0,
        "scale": [0, 1, 2], "relevant_min": 1, "notes": []}))
    (by_blocks, whole), answered = _both(tmp_path, monkeypatch)
    assert answered == [True]
    assert by_blocks == whole
    gate = json.loads(whole)["gate"]
    # the kappas fail; the coverage of q2's two pairs, from the kept audited rows, passes
    assert gate["state"] == "failed", gate
    assert not any("coverage" in line and "FAIL" in line for line in gate["lines"]), gate
