"""`relgrade status`: the exact lines for a small experiment directory, in several states."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.experiment.params import parse_params
from relgrade.experiment.status import experiment_status, status_lines

REPO = Path(__file__).resolve().parents[1]
KEY_HASH = "9f" * 32


def _put(root, rel, obj):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(obj, pd.DataFrame):
        obj.to_parquet(path, index=False)
    elif isinstance(obj, list):
        path.write_text("".join(json.dumps(r) + "\n" for r in obj))
    else:
        path.write_text(json.dumps(obj))


def _row(q, c, g=1):
    return {"query_id": q, "chunk_id": c, "reason": "Shows the loader.", "grade": g}


@pytest.fixture
def exp(tmp_path):
    """Pool of 3 queries (q1: 3 pairs, q2: 2, q3: 2); audit sample q2; grading in progress."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]
    _put(tmp_path, p["corpus_manifest"], {"source": "x", "sha256": "c0ffee" + "0" * 58,
                                          "chunks": 48, "table_sha256": "t"})
    _put(tmp_path, p["queries_manifest"], {"sha256": "abcdef" + "1" * 58, "queries": 3,
                                           "groups": {"keyword": 2, "question": 1}})
    _put(tmp_path, p["pool"], pd.DataFrame({
        "query_id": ["q1", "q1", "q1", "q2", "q2", "q3", "q3"],
        "chunk_id": ["a", "b", "n1", "c", "d", "e", "f"], "inclusion_prob": [1.0] * 7}))
    _put(tmp_path, p["pool_manifest"], {"pool_version": "p-222222222222", "pairs": 7,
                                        "queries": 3, "arms": ["bm25", "hybrid", "tfidf"]})
    _put(tmp_path, p["intents_manifest"], {"sha256": "1234567890ab" + "2" * 52,
                                           "reviewer": "auditor-b",
                                           "reviewed_at": "2026-01-02T03:04:05+00:00",
                                           "flagged": []})
    _put(tmp_path, p["audit"], [{"query_id": "q2", "group": "keyword", "unique_share": 0.5,
                                 "reason": "r"}])
    # grader-a graded q1 before the pool grew (n1 is new) and all of q2; q3 not started
    _put(tmp_path, p["grades_in"] + "/grader-a/round-1.jsonl",
         [_row("q1", "a", 2), _row("q1", "b", 0), _row("q2", "c"), _row("q2", "d")])
    return tmp_path, p


def _status(root, *args):
    res = CliRunner().invoke(main, ["status", "--params", str(root / "params.yaml"), *args])
    assert res.exit_code == 0, res.output
    return res.output


def test_partly_graded_pool_gives_the_exact_lines(exp):
    root, _ = exp
    assert _status(root).splitlines() == [
        "corpus: frozen, 48 chunks, sha256 c0ffee000000",
        "queries: frozen, 3 queries (keyword 2, question 1), sha256 abcdef111111",
        "pool: 7 pairs over 3 queries, version p-222222222222, arms bm25, hybrid, tfidf",
        "intents: frozen, reviewed by auditor-b at 2026-01-02T03:04:05+00:00, "
        "sha256 1234567890ab",
        "audit sample: 1 query chosen (q2)",
        "grading: 4 of 7 pool pairs graded by grader-a (round 1)",
        "  q1: 1 of 3 pairs lack grades: n1",
        "  not started: 1 query: q3",
        "audit: 0 of 2 pairs graded by auditor-b (round 1)",
        "gate: not run yet (no agreement metrics)",
        "key: not frozen yet",
        "metrics bm25: missing",
        "metrics hybrid: missing",
        "metrics tfidf: missing",
    ]


def test_json_status_lists_the_missing_pairs_by_query(exp):
    root, _ = exp
    st = json.loads(_status(root, "--json"))
    a = st["grading"]["grader-a"]
    assert (a["graded"], a["of"], a["state"]) == (4, 7, "graded")
    assert a["partial"] == {"q1": {"missing": ["n1"], "pool": 3}}
    assert a["not_started"] == ["q3"]
    assert st["grading"]["auditor-b"]["not_started"] == ["q2"]
    assert st["pool"]["version"] == "p-222222222222"


def test_failed_gate_says_why(exp):
    root, p = exp
    _put(root, p["agreement"], {"pairs": 2, "missing": 0, "weighted_kappa": 0.5,
                                "binary_kappa": 0.9, "disagreement": 0.05,
                                "two_step_disagreement": 0.0})
    lines = _status(root).splitlines()
    assert "gate: failed: weighted_kappa 0.5 < 0.75" in lines


def test_frozen_key_metrics_and_a_pool_that_grew_since(exp):
    root, p = exp
    _put(root, p["gate"], {"passed": True, "measures": {"weighted_kappa": 0.9,
                                                        "binary_kappa": 1.0, "pairs": 2}})
    _put(root, p["record"], {"key_sha256": KEY_HASH, "pool_version": "p-111111111111",
                             "pairs": 5, "queries": 2, "dropped_queries": ["q3"],
                             "post_hoc": False})
    _put(root, p["metrics"] + "/bm25.json", {"arm": "bm25", "key_sha256": KEY_HASH,
                                             "post_hoc": False})
    _put(root, p["metrics"] + "/tfidf.json", {"arm": "tfidf", "key_sha256": "00" * 32})
    lines = _status(root).splitlines()
    assert lines[-6:] == [
        "gate: passed (weighted_kappa 0.900, binary_kappa 1.000)",
        f"key: frozen, sha256 {KEY_HASH}, 5 pairs over 2 queries; dropped queries: q3",
        "key: frozen for pool p-111111111111, but the pool is now p-222222222222: grade the "
        "new pairs, then freeze a new key",
        "metrics bm25: present (key 9f9f9f9f9f9f)",
        "metrics hybrid: missing",
        "metrics tfidf: stale (computed from key 000000000000, not the frozen key)",
    ]


def test_invalid_grade_file_is_reported_not_raised(exp):
    root, p = exp
    _put(root, p["grades_in"] + "/auditor-b/round-1.jsonl", [_row("q2", "c", 5)])
    lines = _status(root).splitlines()
    path = (root / p["grades_in"] / "auditor-b/round-1.jsonl").as_posix()
    assert (f"audit: auditor-b's round 1 file is invalid: {path}:1: auditor-b: pair (q2, c): "
            "grade outside the scale 0-2 (found 5)") in lines


def test_empty_directory_says_nothing_is_built():
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    st = experiment_status(params=parse_params(params))
    assert status_lines(st)[:5] == ["corpus: not built yet", "queries: not frozen yet",
                                    "pool: not built yet",
                                    "intents: not reviewed yet (no packets before the review)",
                                    "audit sample: not chosen yet"]
    assert status_lines(st)[5] == ("grading: 0 pairs graded by grader-a (round 1); waiting for "
                                   "the pool")


def test_complete_grading_has_no_missing_lines():
    params = parse_params({"paths": {}, "graders": {"g": {"role": "grader", "kind": "model"}},
                           "grading": {"round": 2}})
    pool = pd.DataFrame({"query_id": ["q1", "q2"], "chunk_id": ["a", "b"]})
    rows = {"g": pool.copy()}
    st = experiment_status(params=params, pool=pool, grader_rows=rows)
    assert st["grading"]["g"]["state"] == "complete"
    assert [l for l in status_lines(st) if l.startswith("grading")] == [
        "grading: 2 of 2 pool pairs graded by g (round 2)"]


def test_status_json_counts_per_grader_the_current_grades_and_the_pending_work(tmp_path):
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.status import read_status
    from tests.test_grades import _row, _stage_dir, _stage_grades

    _, p = _stage_dir(tmp_path)  # grader-a graded q1's three pairs; q2 (audited) has two
    _stage_grades(tmp_path, p, "auditor-b", [_row("q2", "c5", 0)])
    pending = read_status(Experiment.load(tmp_path / "params.yaml"))["pending"]
    assert pending == {"pool_version": None, "graders": {
        "grader-a": {"current": 3, "pending_new": 2, "pending_stale": 0, "pending_audit": 0},
        "auditor-b": {"current": 1, "pending_new": 0, "pending_stale": 0, "pending_audit": 1}}}
