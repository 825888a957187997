"""`relgrade status`: the exact lines for a small experiment directory, in several states."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.cli.status import status_lines
from relgrade.experiment.params import parse_params
from relgrade.pipeline.status import experiment_status

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
    # what grades are made on: the chunks, the frozen intents and the rubric file
    _put(tmp_path, p["chunks"], pd.DataFrame({"chunk_id": list("abcdef") + ["n1"],
                                              "header": ["h"] * 7, "text": list("ABCDEF") + ["N"]}))
    _put(tmp_path, p["intents"], pd.DataFrame({"query_id": ["q1", "q2", "q3"],
                                               "intent": ["i1", "i2", "i3"]}))
    rubric = tmp_path / params["grading"]["rubric"]
    rubric.parent.mkdir(parents=True, exist_ok=True)
    rubric.write_text("0/1/2\n")
    # grader-a graded q1 before the pool grew (n1 is new) and all of q2; q3 not started
    _grades(tmp_path, p, "grader-a",
            [_row("q1", "a", 2), _row("q1", "b", 0), _row("q2", "c"), _row("q2", "d")])
    return tmp_path, p


def _grades(root, p, grader, rows):
    """A grader's round-1 file with its bank sidecar, as the grade store records them."""
    from tests.test_grades import _stage_grades

    _stage_grades(root, p, grader, rows)


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
        # the arms are the repository's params' (bm25f joined the default experiment)
        "metrics bm25: missing",
        "metrics bm25f: missing",
        "metrics hybrid: missing",
        "metrics tfidf: missing",
        # both graders are command graders (kind model): 4 grades made, 3 + 2 owed, one
        # call each, no annotator-hours
        "judging cost: 4 judgments spent (4 model calls), 5 pending (5 model calls)",
        "  grader-a (model): 4 spent, 3 pending at 1 call each (3 calls to go)",
        "  auditor-b (model): 0 spent, 2 pending at 1 call each (2 calls to go)",
        # the experiment given by an absolute --params: its file named where it is
        f"design: unfilled: {root.as_posix()}/DESIGN.md: missing (relgrade design writes it)",
    ]


def test_a_review_signed_before_the_first_repro_is_named_with_the_repro_that_freezes_it(exp):
    root, p = exp
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / p["intents_manifest"]).unlink()  # `relgrade intents review`, no dvc repro yet
    review = root / params["intents"]["review"]
    review.parent.mkdir(parents=True, exist_ok=True)
    record = {"reviewer": "auditor-b", "table_sha256": "abcdef012345" + "3" * 52,
              "reviewed_at": "2026-02-03T04:05:06+00:00", "flagged": ["q3"]}
    review.write_text(json.dumps(record))
    lines = _status(root).splitlines()
    assert lines[3] == ("intents: reviewed by auditor-b at 2026-02-03T04:05:06+00:00, sha256 "
                        "abcdef012345; flagged for a second look: q3; not frozen yet: "
                        "`dvc repro` freezes them")
    # a new review of an edited table, the old one still frozen: both are named
    _put(root, p["intents_manifest"], {"sha256": "1234567890ab" + "2" * 52,
                                       "reviewer": "auditor-b",
                                       "reviewed_at": "2026-01-02T03:04:05+00:00",
                                       "flagged": []})
    assert _status(root).splitlines()[3].endswith(
        "not frozen yet: `dvc repro` freezes them; frozen now: sha256 1234567890ab")
    # the review frozen: the frozen line, as before
    review.write_text(json.dumps(record | {"table_sha256": "1234567890ab" + "2" * 52}))
    assert _status(root).splitlines()[3] == (
        "intents: frozen, reviewed by auditor-b at 2026-01-02T03:04:05+00:00, sha256 "
        "1234567890ab")


def test_json_status_lists_the_missing_pairs_by_query(exp):
    root, _ = exp
    st = json.loads(_status(root, "--json"))
    a = st["grading"]["grader-a"]
    assert (a["graded"], a["of"], a["state"]) == (4, 7, "graded")
    assert a["partial"] == {"q1": {"missing": ["n1"], "pool": 3}}
    assert a["not_started"] == ["q3"]
    assert st["grading"]["auditor-b"]["not_started"] == ["q2"]
    assert st["pool"]["version"] == "p-222222222222"


AGREEMENT = {"pairs": 2, "missing": 0, "weighted_kappa": 0.5, "binary_kappa": 0.9,
             "disagreement": 0.05, "two_step_disagreement": 0.0}


def test_failed_gate_says_why(exp):
    root, p = exp
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    _put(root, p["agreement"], AGREEMENT)
    lines = _status(root).splitlines()
    assert "gate: failed: weighted_kappa 0.5 < 0.75" in lines


def test_a_one_category_sample_gets_the_gate_stage_s_own_advice_with_files_and_values(exp):
    from relgrade.protocol import agreement as ag

    root, p = exp
    # both graders gave the audit query q2's two pairs grade 1: both kappas are 0/0
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    _put(root, p["agreement"],
         ag.agreement([1, 1], [1, 1], scale=[0, 1, 2], relevant_min=1) | {"round": 1})
    lines = _status(root).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("gate: failed: "))
    # the stage's words: the params file, the values now (1 of the pool's 3 queries audited,
    # params' min_queries 10 and fraction 0.1), the next round and the command
    assert lines[at + 1] == (
        "  advice: kappa is undefined because every audited pair fell in one category for "
        "both graders, not because they disagree: revising the rubric cannot help. Kappa "
        "needs an audit sample that holds both relevant and non-relevant pairs: in "
        "params.yaml raise audit.min_queries (now 10; 1 of 3 queries are audited) or "
        "audit.fraction (now 0.1), and set grading.round: 2, whose audit sample is drawn "
        "before grading (round 1's grades stay in git); then run `dvc repro` and grade the "
        "new round as before")
    assert not lines[at + 2].startswith("  advice:")  # nothing else fails: no regrade advice


def test_agreement_of_an_earlier_round_is_not_read_as_this_rounds_gate(exp):
    root, p = exp
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    _put(root, p["agreement"], {**AGREEMENT, "round": 1})
    assert "gate: failed: weighted_kappa 0.5 < 0.75" in _status(root).splitlines()
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grading"]["round"] = 2
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    gate = [line for line in _status(root).splitlines() if line.startswith("gate:")]
    assert gate == ["gate: not run yet for round 2 (the agreement metrics are round 1's)"]


def test_an_incomplete_audit_fails_the_gate_in_status_with_the_counts(exp):
    root, p = exp
    # q2 is audited (pairs c, d): grader-a has both, auditor-b only c.
    _grades(root, p, "auditor-b", [_row("q2", "c")])
    _put(root, p["agreement"], AGREEMENT | {"weighted_kappa": 0.9})
    lines = _status(root).splitlines()
    assert ("gate: failed: audit coverage 1 of 2 pairs (0.5) < 1: auditor-b has graded 1 of 2 "
            "audit pairs, grader-a 2 of 2 (query q2 incomplete)") in lines


PASSED = {"passed": True, "measures": {"weighted_kappa": 0.7, "binary_kappa": 0.9},
          "thresholds": {"weighted_kappa_min": 0.6, "binary_kappa_min": 0.8,
                         "disagreement_max": 0.1, "two_step_max": 0.02,
                         "audit_coverage_min": 1.0, "require_distinct_families": False},
          "round": 1,
          "coverage": {"pairs": 2, "both": 2, "key_grader_missing": 0, "auditor_missing": 0,
                       "coverage": 1.0, "queries_incomplete": []},
          "relaxed_gates": ["gates.weighted_kappa_min 0.6 is looser than the protocol's 0.75"],
          "family_warnings": ["auditor auditor-b is of the same family as grader grader-a (x)"]}


def test_a_passed_gate_record_waits_while_the_audit_queries_are_owed(exp):
    root, p = exp  # q2 is audited; auditor-b has graded none of its 2 pairs
    _put(root, p["gate"], PASSED)
    lines = _status(root).splitlines()
    assert ("gate: waiting for the audit queries' grades (auditor-b owes 2); the last gate "
            "record (passed) predates them: 2 have no grade; the gate runs again once they "
            "are graded") in lines
    assert not any(line.startswith("gate: passed") for line in lines)


def test_a_pass_record_of_the_same_pool_waits_on_grades_gone_stale_and_says_so(exp):
    root, p = exp
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    _put(root, p["gate"], PASSED)
    # chunk c (of the audited q2) is edited: both graders' grades of q2/c go stale, the pool
    # and its version stay as they were
    _put(root, p["chunks"], pd.DataFrame({"chunk_id": list("abcdef") + ["n1"],
                                          "header": ["h"] * 7,
                                          "text": ["A", "B", "C edited", "D", "E", "F", "N"]}))
    lines = _status(root).splitlines()
    assert "pool: 7 pairs over 3 queries, version p-222222222222, arms bm25, hybrid, tfidf" \
        in lines
    assert ("gate: waiting for the audit queries' grades (auditor-b owes 1, grader-a owes 1); "
            "the last gate record (passed) predates them: 2 are stale (a chunk, intent or "
            "rubric changed); the gate runs again once they are graded") in lines
    assert not any("pool's" in line for line in lines)


def test_a_pass_record_of_an_earlier_round_waits_naming_its_round(exp):
    root, p = exp
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    _put(root, p["gate"], PASSED)  # round 1's pass
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grading"]["round"] = 2
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    gate = [line for line in _status(root).splitlines() if line.startswith("gate:")]
    # round 2 regrades everything: the audited q2's two pairs, by both graders
    assert gate == ["gate: waiting for the audit queries' grades (auditor-b owes 2, grader-a "
                    "owes 2); the last gate record (passed) is for round 1; the gate runs "
                    "again for round 2 once these are graded"]


def test_a_gate_passed_under_relaxed_gates_says_so_and_lists_them(exp):
    root, p = exp
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    _put(root, p["gate"], PASSED)
    lines = _status(root).splitlines()
    i = lines.index("gate: passed under relaxed gates (weighted_kappa 0.700, binary_kappa "
                    "0.900; audit coverage 2 of 2 pairs)")
    assert lines[i + 1:i + 3] == [
        "  relaxed: gates.weighted_kappa_min 0.6 is looser than the protocol's 0.75",
        "  warning: auditor auditor-b is of the same family as grader grader-a (x)"]
    assert not any(line.startswith("gate: passed (") for line in lines)
    st = json.loads(_status(root, "--json"))["gate"]
    assert st["thresholds"]["weighted_kappa_min"] == 0.6
    assert st["relaxed"] == PASSED["relaxed_gates"]
    assert st["family_warnings"] == PASSED["family_warnings"]


def test_a_ppi_pass_record_says_agreement_was_not_gated_not_relaxed_gates(exp):
    root, p = exp
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    protocol = {"weighted_kappa_min": 0.75, "binary_kappa_min": 0.8, "disagreement_max": 0.1,
                "two_step_max": 0.02, "audit_coverage_min": 1.0,
                "require_distinct_families": False}
    _put(root, p["gate"], PASSED | {
        "thresholds": protocol, "mode": "ppi", "family_warnings": [],
        "relaxed_gates": ["not applied in ppi mode: weighted_kappa 0.7 < 0.75"]})
    lines = _status(root).splitlines()
    i = lines.index("gate: passed (ppi mode: agreement reported, not gated; weighted_kappa "
                    "0.700, binary_kappa 0.900; audit coverage 2 of 2 pairs)")
    assert lines[i + 1] == "  not applied in ppi mode: weighted_kappa 0.7 < 0.75"
    assert not any("relaxed" in line for line in lines)


def test_an_older_pass_record_is_read_against_the_params_gates(exp):
    root, p = exp
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["gates"]["disagreement_max"] = 0.2
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    _put(root, p["gate"], {"passed": True, "measures": {"weighted_kappa": 0.9}})
    lines = _status(root).splitlines()
    assert "gate: passed under relaxed gates (weighted_kappa 0.900)" in lines
    assert "  relaxed: gates.disagreement_max 0.2 is looser than the protocol's 0.1" in lines


def test_frozen_key_metrics_and_a_pool_that_grew_since(exp):
    root, p = exp
    _put(root, p["gate"], {"passed": True, "measures": {"weighted_kappa": 0.9,
                                                        "binary_kappa": 1.0, "pairs": 2}})
    _put(root, p["record"], {"key_sha256": KEY_HASH, "pool_version": "p-111111111111",
                             "pairs": 5, "queries": 2, "dropped_queries": ["q3"],
                             "post_hoc": False})
    _put(root, p["metrics"] + "/bm25.json", {"arm": "bm25", "key_sha256": KEY_HASH,
                                             "pool_version": "p-111111111111",
                                             "post_hoc": False})
    _put(root, p["metrics"] + "/tfidf.json", {"arm": "tfidf", "key_sha256": "00" * 32,
                                              "pool_version": "p-000000000000"})
    _put(root, p["ledger"], [_use("p-000000000000", "00" * 32),
                             _use("p-111111111111", KEY_HASH)])
    lines = _status(root).splitlines()
    lines = lines[:next(i for i, x in enumerate(lines) if x.startswith("judging cost:"))]
    assert lines[-7:] == [
        # the pass record is the old pool's: the audited q2 is owed by auditor-b (2 pairs)
        "gate: waiting for the audit queries' grades (auditor-b owes 2); the last gate record "
        "(passed) predates them: 2 have no grade; the gate runs again once they are graded",
        # no current key, first: the frozen one is the old pool's, not "key: frozen"
        # grader-a lacks q1's n1 and q3's e, f; auditor-b the audited q2's c, d
        "key: no current key until the owed grades are in: 3 pairs need grader-a (3 new), 2 "
        "need auditor-b (audit query q2); run `relgrade packets export --role grader --out "
        "grader-a-packets.jsonl` and `relgrade packets export --role auditor --out "
        "auditor-b-packets.jsonl`, then `relgrade grade import --grader grader-a FILE` and "
        "`relgrade grade import --grader auditor-b FILE`, then `dvc repro`",
        f"key: frozen key kept for the old pool (not current): sha256 {KEY_HASH}, pool "
        "p-111111111111, 5 pairs over 2 queries; dropped queries: q3",
        "metrics bm25: present (key 9f9f9f9f9f9f, the old pool's key)",
        "metrics bm25f: missing",
        "metrics hybrid: missing",
        "metrics tfidf: stale (computed from key 000000000000, not the frozen key)",
    ]
    # --json says the same: the frozen key is the old pool's, none is current
    key = json.loads(_status(root, "--json"))["key"]
    assert (key["state"], key["current"], key["pool_version"], key["pool_now"],
            key["owed_pairs"]) == ("stale", False, "p-111111111111", "p-222222222222", 5)
    # every pair of the new pool graded: still no current key until dvc repro freezes one
    _grades(root, p, "grader-a", [_row("q1", "a", 2), _row("q1", "b", 0), _row("q1", "n1"),
                                  _row("q2", "c"), _row("q2", "d"), _row("q3", "e"),
                                  _row("q3", "f")])
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    assert [x for x in _status(root).splitlines() if x.startswith("key:")] == [
        "key: no current key for pool p-222222222222 yet: its pairs are graded; `dvc repro` "
        "freezes its key",
        f"key: frozen key kept for the old pool (not current): sha256 {KEY_HASH}, pool "
        "p-111111111111, 5 pairs over 2 queries; dropped queries: q3"]
    key = json.loads(_status(root, "--json"))["key"]
    assert (key["state"], key["current"], key["owed_pairs"]) == ("stale", False, 0)


def test_a_key_of_this_pool_with_pairs_owed_is_the_previous_key_not_the_current_one(exp):
    root, p = exp
    _put(root, p["record"], {"key_sha256": KEY_HASH, "pool_version": "p-222222222222",
                             "pairs": 5, "queries": 2, "dropped_queries": ["q3"],
                             "post_hoc": False})
    _put(root, p["metrics"] + "/bm25.json", {"arm": "bm25", "key_sha256": KEY_HASH,
                                             "pool_version": "p-222222222222",
                                             "post_hoc": False})
    _put(root, p["ledger"], [_use("p-222222222222", KEY_HASH)])
    lines = _status(root).splitlines()
    assert [x for x in lines if x.startswith(("key:", "metrics bm25:"))] == [
        # grader-a lacks q1's n1 and q3's e, f; auditor-b the audited q2's c, d
        "key: no current key until the owed grades are in: 3 pairs need grader-a (3 new), 2 "
        "need auditor-b (audit query q2); run `relgrade packets export --role grader --out "
        "grader-a-packets.jsonl` and `relgrade packets export --role auditor --out "
        "auditor-b-packets.jsonl`, then `relgrade grade import --grader grader-a FILE` and "
        "`relgrade grade import --grader auditor-b FILE`, then `dvc repro`",
        f"key: previous key kept (not current): sha256 {KEY_HASH}, pool p-222222222222, "
        "5 pairs over 2 queries; dropped queries: q3",
        "metrics bm25: present (key 9f9f9f9f9f9f, the previous key)"]
    key = json.loads(_status(root, "--json"))["key"]
    assert (key["state"], key["current"], key["sha256"], key["pool_version"]) == (
        "previous", False, KEY_HASH, "p-222222222222")
    assert key["owed"] == {"grader-a": {"new": 3}, "auditor-b": {"audit": 2}}
    assert key["owed_pairs"] == 5
    # every owed pair graded: the key is current again
    _grades(root, p, "grader-a", [_row("q1", "a", 2), _row("q1", "b", 0), _row("q1", "n1"),
                                  _row("q2", "c"), _row("q2", "d"), _row("q3", "e"),
                                  _row("q3", "f")])
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    key = json.loads(_status(root, "--json"))["key"]
    assert (key["state"], key["current"], "owed" in key) == ("frozen", True, False)
    assert f"key: frozen, sha256 {KEY_HASH}, 5 pairs over 2 queries; dropped queries: q3" in \
        _status(root).splitlines()


def test_the_key_line_of_an_experiment_below_the_top_names_its_own_dvc_repro(exp, tmp_path_factory):
    # the same experiment as experiments/sub of a repository (stages/ and dvc.yaml at its
    # top): every command the key line names is the one typed at the top, dvc repro included
    import re
    import shutil

    root, p = exp
    _put(root, p["record"], {"key_sha256": KEY_HASH, "pool_version": "p-222222222222",
                             "pairs": 5, "queries": 2, "dropped_queries": ["q3"],
                             "post_hoc": False})
    repo = tmp_path_factory.mktemp("repo")
    (repo / "stages").mkdir()
    (repo / "dvc.yaml").write_text("stages: {}\n")
    sub = repo / "experiments" / "sub"
    shutil.copytree(root, sub)
    (line,) = [x for x in _status(sub).splitlines() if x.startswith("key: no current key")]
    assert line.endswith(", then `dvc repro experiments/sub/dvc.yaml`"), line
    commands = re.findall(r"`([^`]*)`", line)
    assert commands == ["relgrade packets export --role grader --out grader-a-packets.jsonl "
                        "--experiment experiments/sub",
                        "relgrade packets export --role auditor --out auditor-b-packets.jsonl "
                        "--experiment experiments/sub",
                        "relgrade grade import --grader grader-a --experiment "
                        "experiments/sub FILE",
                        "relgrade grade import --grader auditor-b --experiment "
                        "experiments/sub FILE",
                        "dvc repro experiments/sub/dvc.yaml"], line
    assert json.loads(_status(sub, "--json"))["key"]["repro"] == \
        "dvc repro experiments/sub/dvc.yaml"


def test_with_an_incomplete_audit_allowed_the_auditors_open_pairs_leave_the_key_current(exp):
    root, p = exp
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["gates"]["audit_coverage_min"] = 0.5  # the gate weighs the audit, not the key
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    _put(root, p["record"], {"key_sha256": KEY_HASH, "pool_version": "p-222222222222",
                             "pairs": 7, "queries": 3, "dropped_queries": [],
                             "post_hoc": False})
    _grades(root, p, "grader-a", [_row("q1", "a", 2), _row("q1", "b", 0), _row("q1", "n1"),
                                  _row("q2", "c"), _row("q2", "d"), _row("q3", "e"),
                                  _row("q3", "f")])
    key = json.loads(_status(root, "--json"))["key"]
    assert (key["state"], key["current"]) == ("frozen", True)


def test_a_panels_adjudication_queue_is_owed_work_of_the_key_too():
    from relgrade.cli.status import previous_key_lines
    from relgrade.pipeline.status import key_while_owed

    frozen = {"state": "frozen", "current": True, "sha256": "ab" * 32, "pool_version": "p-1",
              "pairs": 9, "queries": 3, "dropped": [], "post_hoc": False}
    none_owed = pd.DataFrame(columns=["grader", "query_id", "chunk_id", "why"])
    key = key_while_owed(frozen, none_owed,
                         adjudication={"expert": "expert-e", "pending": 2, "queries": ["q1"]})
    assert (key["state"], key["current"], key["owed"], key["owed_pairs"],
            key["owed_message"]) == ("previous", False, {"expert-e": {"adjudicate": 2}}, 2,
                                     None)
    assert previous_key_lines(key) == [
        "key: no current key until the owed grades are in: 2 queued pairs to adjudicate by "
        "expert-e, then `dvc repro`",
        f"key: previous key kept (not current): sha256 {'ab' * 32}, pool p-1, 9 pairs over "
        "3 queries; dropped queries: none"]
    # a key frozen for another pool version stays stale, and is not current either
    stale = key_while_owed(frozen | {"state": "stale", "current": False, "pool_now": "p-2"},
                           pd.DataFrame([("g", "q1", "c9", "new")], columns=none_owed.columns))
    assert (stale["state"], stale["current"], stale["owed"]) == ("stale", False,
                                                                {"g": {"new": 1}})


def _use(pool, sha):
    return {"pool_version": pool, "rubric_version": "v1", "round": 1, "key_sha256": sha,
            "used_at": "2026-01-01T00:00:00+00:00"}


def test_invalid_grade_file_is_reported_not_raised(exp):
    root, p = exp
    _grades(root, p, "auditor-b", [_row("q2", "c", 5)])
    lines = _status(root).splitlines()
    path = (root / p["grades_in"] / "auditor-b/round-1.jsonl").as_posix()
    assert (f"audit: auditor-b's round 1 file is invalid: {path}:1: auditor-b: pair (q2, c): "
            "grade outside the scale 0-2 (found 5)") in lines


def test_one_graders_invalid_file_is_blamed_on_that_grader_alone(exp):
    root, p = exp
    _grades(root, p, "grader-a", [_row("q1", "a", 2)])
    _grades(root, p, "auditor-b", [_row("q2", "c", 5)])
    lines = _status(root).splitlines()
    path = (root / p["grades_in"] / "auditor-b/round-1.jsonl").as_posix()
    assert (f"audit: auditor-b's round 1 file is invalid: {path}:1: auditor-b: pair (q2, c): "
            "grade outside the scale 0-2 (found 5)") in lines
    assert ("grading: grader-a's grades cannot be counted until auditor-b's file is fixed "
            "(see its line)") in lines
    assert not any(line.startswith("grading: grader-a's round 1 file is invalid")
                   for line in lines)


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


# --- what must be fixed before anything runs: DVC's files, the ledger, a torn key -------------

def _failed_status(root):
    res = CliRunner().invoke(main, ["status", "--params", str(root / "params.yaml")])
    assert res.exit_code == 1, res.output
    return res.output.splitlines()


@pytest.mark.parametrize("text, problem", [
    ("schema: '2.0'\nstages:\n  corpus:\n    cmd: \"python st", "is not valid YAML"),
    ("", "has no `stages`"),
    ("schema: '2.0'\n", "has no `stages`"),
    ("schema: '2.0'\nstages:\n  corpus:\n", "has a stage without its `cmd`")])
def test_a_truncated_dvc_lock_is_named_with_its_fix(exp, text, problem):
    root, _ = exp
    (root / ".dvc").mkdir()
    (root / "dvc.lock").write_text(text)
    lines = _failed_status(root)
    lock = (root / "dvc.lock").as_posix()
    assert lines[0] == (f"dvc: {lock} {problem} (truncated by an interrupted dvc command?); "
                        f"fix: git checkout {lock}")


def test_an_empty_dvc_rwlock_is_named_with_its_fix(exp):
    root, _ = exp
    (root / ".dvc/tmp").mkdir(parents=True)
    (root / ".dvc/tmp/rwlock").write_text("")
    (root / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    rwlock = (root / ".dvc/tmp/rwlock").as_posix()
    assert _failed_status(root)[0] == (f"dvc: {rwlock} is empty or not JSON (left by a killed "
                                       f"dvc command); fix: rm {rwlock}")


def test_sound_dvc_files_say_nothing_and_exit_0(exp):
    root, _ = exp
    (root / ".dvc/tmp").mkdir(parents=True)
    (root / ".dvc/tmp/rwlock").write_text('{"read": {}, "write": {}}')
    (root / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    assert not [line for line in _status(root).splitlines() if line.startswith("dvc:")]


def test_a_deleted_ledger_while_metrics_exist_is_named_with_its_fix(exp):
    root, p = exp
    _put(root, p["metrics"] + "/bm25.json", {"arm": "bm25", "key_sha256": KEY_HASH,
                                             "pool_version": "p-111111111111"})
    lines = _failed_status(root)
    ledger = root / p["ledger"]
    assert lines[-1] == (
        f"ledger: refused: ledger: {ledger} has no entry for key {KEY_HASH} on pool "
        f"p-111111111111, which {(root / p['metrics'] / 'bm25.json').as_posix()} shows was "
        "used for metrics; the ledger was deleted, truncated or edited. Restore it "
        f"(`git checkout -- {ledger}`) before freezing or scoring a key")


def test_a_torn_key_and_a_post_hoc_key_beside_it_are_reported(exp):
    import hashlib

    root, p = exp
    key = b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
    sha = hashlib.sha256(key).hexdigest()
    (root / p["key"]).parent.mkdir(parents=True, exist_ok=True)
    (root / p["key"]).write_bytes(key)
    _put(root, p["record"], {"key_sha256": "00" * 32, "pool_version": "p-222222222222"})
    lines = _status(root).splitlines()
    assert [l for l in lines if l.startswith("key:")] == [
        f"key: cannot be read: {(root / p['key']).as_posix()}: the key's sha256 {sha} is not "
        f"the {'00' * 32} of its record {(root / p['record']).as_posix()}: the key stage was "
        "interrupted between its writes, or a file was edited or swapped by hand. Rerun the key "
        "stage (`dvc repro key`) to write the three files again"]
    _put(root, p["record"], {"key_sha256": sha, "pool_version": "p-222222222222"})
    (root / p["key_post_hoc"]).mkdir(parents=True)
    (root / p["key_post_hoc"] / "key.jsonl").write_bytes(b"")
    _put(root, p["key_post_hoc"] + "/record.json",
         {"key_sha256": hashlib.sha256(b"").hexdigest(), "post_hoc": True})
    lines = _status(root).splitlines()
    assert (f"key: a post-hoc key {hashlib.sha256(b'').hexdigest()} stands beside the frozen one "
            "(its metrics are labelled post-hoc; the decision stays with the frozen key)") in lines
def test_status_json_counts_per_grader_the_current_grades_and_the_pending_work(tmp_path):
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.status import read_status
    from tests.test_grades import _row, _stage_dir, _stage_grades

    _, p = _stage_dir(tmp_path)  # grader-a graded q1's three pairs; q2 (audited) has two
    _stage_grades(tmp_path, p, "auditor-b", [_row("q2", "c5", 0)])
    pending = read_status(Experiment.load(tmp_path / "params.yaml"))["pending"]
    assert pending == {"pool_version": None, "rounds": [1], "graders": {
        "grader-a": {"made": 3, "made_by_round": {1: 3}, "current": 3, "pending_new": 2,
                     "pending_stale": 0,
                     "pending_audit": 0, "pending_regrade": 0},
        "auditor-b": {"made": 1, "made_by_round": {1: 1}, "current": 1, "pending_new": 0,
                      "pending_stale": 0,
                      "pending_audit": 1, "pending_regrade": 0}},
        # the owed pairs of the audited query q2: grader-a's two, auditor-b's one
        "audit_owed": {"auditor-b": 1, "grader-a": 2},
        "audit_owed_why": {"audit": 1, "new": 2}}


def test_a_grade_of_a_pair_that_left_the_pool_stays_in_the_bank_and_status_counts_the_rest(exp):
    root, p = exp
    # q1-c was graded when an arm since removed still pooled it: kept, unused, no error
    _grades(root, p, "grader-a", [_row("q1", "a", 2), _row("q1", "b", 0), _row("q1", "c", 1),
                                  _row("q2", "c"), _row("q2", "d")])
    lines = _status(root).splitlines()
    assert "grading: 4 of 7 pool pairs graded by grader-a (round 1)" in lines
    assert not [x for x in lines if "invalid" in x]
    st = json.loads(_status(root, "--json"))
    # five grades made (q1-c's included: it was paid for), four of them current
    assert st["pending"]["graders"]["grader-a"] == {
        "made": 5, "made_by_round": {"1": 5}, "current": 4, "pending_new": 3, "pending_stale": 0, "pending_audit": 0,
        "pending_regrade": 0}
    assert st["cost"]["graders"]["grader-a"]["spent"] == 5


def test_status_of_a_click_experiment_lists_its_outputs_and_what_is_not_built(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "seed": 1, "paths": {"click_propensity": "metrics/propensity.json",
                             "click_ips": "metrics/ips.json"},
        "clicks": {"log": "data/log.parquet"}}))
    _put(tmp_path, "metrics/propensity.json", {"curve": []})
    res = CliRunner().invoke(main, ["status", "--experiment", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [
        "click experiment: log data/log.parquet (no pool, grading or key)",
        f"click propensity: {(tmp_path / 'metrics/propensity.json').as_posix()}",
        "click ips: not built yet (dvc repro)"]


def test_design_leaves_a_click_experiments_hand_written_record_alone(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "seed": 1, "paths": {"click_ips": "metrics/ips.json"},
        "clicks": {"log": "data/log.parquet"}}))
    (tmp_path / "DESIGN.md").write_text("# Simulated clicks\n")
    res = CliRunner().invoke(main, ["design", "--experiment", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "written by hand" in res.output
    assert (tmp_path / "DESIGN.md").read_text() == "# Simulated clicks\n"


def _round_grades(root, p, grader, rows, rnd):
    """A grader's file of round ``rnd`` with its bank sidecar, as the grade store records it."""
    from relgrade.experiment.files import Experiment
    from relgrade.graders.store import bank_path, bank_rows

    path = root / p["grades_in"] / grader / f"round-{rnd}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    made_on = Experiment.load(root / "params.yaml").made_on_now()
    bank_path(path).write_text("".join(json.dumps(r) + "\n"
                                       for r in bank_rows(rows, made_on, graded_at="t")))


def test_a_partial_regrade_counts_what_the_round_owes_and_what_it_carries(exp):
    root, p = exp
    # round 1 complete: grader-a graded the 7 pool pairs, relevant (>= 1) a, c, f; auditor-b
    # graded the audited q2 (c relevant, d not)
    _grades(root, p, "grader-a", [_row("q1", "a", 2), _row("q1", "b", 0), _row("q1", "n1", 0),
                                  _row("q2", "c", 1), _row("q2", "d", 0), _row("q3", "e", 0),
                                  _row("q3", "f", 1)])
    _grades(root, p, "auditor-b", [_row("q2", "c", 1), _row("q2", "d", 0)])
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grading"].update(round=2, regrade="relevant")
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    # round 2 regrades the pairs either grader graded relevant: a, c, f; grader-a owes the
    # three, auditor-b the audited c; the other 4 (and auditor-b's d) are carried
    lines = _status(root).splitlines()
    assert "grading: 0 of 3 pairs this round owes graded by grader-a (round 2; 4 carried " \
           "from round 1)" in lines
    assert "audit: 0 of 1 pair this round owes graded by auditor-b (round 2; 1 carried " \
           "from round 1)" in lines
    st = json.loads(_status(root, "--json"))
    # the same numbers as the pending counts (the Pending line's)
    assert st["pending"]["graders"]["grader-a"]["pending_regrade"] == 3
    assert st["pending"]["graders"]["auditor-b"]["pending_regrade"] == 1
    _round_grades(root, p, "grader-a", [_row("q1", "a", 1)], 2)
    lines = _status(root).splitlines()
    i = lines.index("grading: 1 of 3 pairs this round owes graded by grader-a (round 2; 4 "
                    "carried from round 1)")
    assert lines[i + 1] == "  not started: 2 queries: q2, q3"


def test_judging_cost_counts_the_judgments_of_every_round_not_only_the_current_ones(exp):
    root, p = exp  # round 1: grader-a made 4 judgments
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grading"]["round"] = 2  # a full round: round 1's grades are set aside, not unmade
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    _round_grades(root, p, "grader-a", [_row("q1", "a", 2), _row("q1", "b", 0)], 2)
    lines = _status(root).splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith("judging cost:"))
    # spent 4 + 2 = 6 model calls; pending: grader-a 5 of the 7 pool pairs, auditor-b the
    # audited q2's 2: 7 calls
    assert lines[i:i + 3] == [
        "judging cost: 6 judgments spent (6 model calls; round 1: 4, round 2: 2), 7 pending "
        "(7 model calls)",
        "  grader-a (model): 6 spent (round 1: 4, round 2: 2), 5 pending at 1 call each "
        "(5 calls to go)",
        "  auditor-b (model): 0 spent, 2 pending at 1 call each (2 calls to go)"]


def test_an_extra_auditor_is_in_the_judging_cost_as_in_its_audit_line(exp):
    root, p = exp
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["expert-c"] = {"role": "auditor", "kind": "human", "family": "human",
                                     "person": "search engineer"}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    _grades(root, p, "expert-c", [_row("q2", "c")])  # 1 of the audited q2's 2 pairs
    lines = _status(root).splitlines()
    assert "audit: 1 of 2 pairs graded by expert-c (round 1)" in lines
    i = next(i for i, x in enumerate(lines) if x.startswith("judging cost:"))
    # the person expert-c: 1 spent × 30 s = 0.008 h, 1 pending = 0.008 h; the command graders:
    # 4 spent calls, 3 + 2 pending calls
    assert lines[i:i + 4] == [
        "judging cost: 5 judgments spent (0.01 annotator-hours + 4 model calls), 6 pending "
        "(0.01 annotator-hours + 5 model calls)",
        "  grader-a (model): 4 spent, 3 pending at 1 call each (3 calls to go)",
        "  auditor-b (model): 0 spent, 2 pending at 1 call each (2 calls to go)",
        "  expert-c (person): 1 spent, 1 pending at 30 s each (0.01 h to go)"]
    # the gate waits on the protocol's auditor only: expert-c's open pair is not owed to it
    assert json.loads(_status(root, "--json"))["pending"]["audit_owed"] == {"auditor-b": 2}


def test_progress_counts_a_pool_pair_listed_twice_twice_and_orders_ids_as_python_does():
    from relgrade.pipeline.status import _grader_progress

    # q"é" sorts after "q2" (U+00E9 > "2"); chunk "B" before "a"; q2/a is listed twice
    pool = pd.DataFrame({"query_id": ["qé", "q2", "q2", "q2", "q1", "qé"],
                         "chunk_id": ["a", "a", "B", "a", "x", "b"]})
    rows = pd.DataFrame({"query_id": ["q2", "qé", "zz"], "chunk_id": ["a", "b", "n"]})
    got = _grader_progress(rows, spec={"role": "grader", "kind": "model"}, pool=pool,
                           audit=None)
    assert got == {"role": "grader", "kind": "model", "state": "graded", "graded": 3,
                   "of": 6, "partial": {"q2": {"missing": ["B"], "pool": 3},
                                        "qé": {"missing": ["a"], "pool": 2}},
                   "not_started": ["q1"]}
    audited = _grader_progress(rows, spec={"role": "auditor", "kind": "model"}, pool=pool,
                               audit=["q2"])
    assert (audited["graded"], audited["of"], audited["partial"]) == (
        2, 3, {"q2": {"missing": ["B"], "pool": 3}})


def test_the_bank_keeps_made_on_hashes_as_categoricals_across_graders(exp):
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.judgments import judgments

    root, p = exp
    # the auditor's grades are made on q2's intent only, grader-a's on q1's and q2's
    _grades(root, p, "auditor-b", [_row("q2", "c"), _row("q2", "d")])
    ex = Experiment.load(root / "params.yaml")
    held = judgments(ex, pd.read_parquet(root / p["pool"]), ["q2"])
    assert held.bank["grader"].tolist() == ["auditor-b"] * 2 + ["grader-a"] * 4
    for k in ("intent_sha256", "rubric_sha256", "graded_at"):
        assert isinstance(held.bank[k].dtype, pd.CategoricalDtype), k
    assert held.bank["intent_sha256"].nunique() == 2


def test_a_pool_the_last_repro_built_and_a_failed_stage_removed_is_named_as_missing(exp):
    # dvc repro ran the pool stage at depth 7; then params said 10, the pool stage ran again
    # and failed, and DVC had deleted its outputs before running it: the lock still records
    # the pool the earlier run built
    root, p = exp
    _lock_with_a_removed_pool(root, p)
    lines = _status(root).splitlines()
    assert ("pool: missing: the last dvc repro built it (dvc.lock records data/pool/pool.parquet) "
            "and it is gone since: DVC deletes a stage's outputs before running the stage, so "
            "a pool stage that failed (on a bad params value, say) leaves none; params "
            "pool.depth changed since it ran; run `dvc repro` to build it again (it names the "
            "cause again if it is still there)") in lines
    assert "pool: not built yet" not in lines
    doc = json.loads(_status(root, "--json"))
    assert doc["pool"] == {"state": "removed", "path": "data/pool/pool.parquet",
                           "stage": "pool", "params": ["pool.depth"], "repro": "dvc repro"}
    # the params line says the stage stopped, not that params changed since that run
    assert lines[0] == ("params: changed since stage pool last ran (the last dvc repro stopped "
                        "at stage pool: see its Pending or Error line): pool.depth 7 -> 10")


def _lock_with_a_removed_pool(root, p, *, cached=True):
    """A DVC repository whose lock records the pool stage's run at depth 7 (params now say
    10), the pool file gone; with ``cached``, its md5 in the DVC cache (made here)."""
    (root / p["pool"]).unlink()
    (root / ".dvc" / "tmp").mkdir(parents=True)
    if cached:
        obj = root / ".dvc/cache/files/md5/00" / ("0" * 30)
        obj.parent.mkdir(parents=True)
        obj.write_bytes(b"x")
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"pool": {
        "cmd": "python stages/pool.py",
        "params": {"params.yaml": {"pool.depth": 7}},
        "outs": [{"path": p["pool"], "hash": "md5", "md5": "0" * 32, "size": 1},
                 {"path": p["pool_manifest"], "hash": "md5", "md5": "1" * 32, "size": 1}]}}}))


def test_a_pool_a_fresh_clone_has_not_pulled_is_not_built_yet_not_removed(exp):
    # the lock records the pool, but its md5 is in no cache here: never made on this machine
    root, p = exp
    _lock_with_a_removed_pool(root, p, cached=False)
    lines = _status(root).splitlines()
    assert "pool: not built yet" in lines
    assert lines[0] == "params: changed since the last dvc repro: pool.depth 7 -> 10"


def test_a_pool_no_repro_ever_built_is_still_not_built_yet(exp):
    root, p = exp
    (root / p["pool"]).unlink()
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"corpus": {
        "cmd": "python stages/corpus.py",
        "outs": [{"path": p["corpus_manifest"], "hash": "md5", "md5": "0" * 32, "size": 1}]}}}))
    assert "pool: not built yet" in _status(root).splitlines()


def test_a_grader_without_a_command_is_told_the_packets_export_that_writes_its_file(exp):
    # grades made elsewhere are made from the role's packets: the command that writes them
    # comes first, with --grader for a grader who is not the role's own (grading.key_grader)
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import grade_commands

    root, _ = exp
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["grader-c"] = {"role": "grader", "kind": "import", "family": "people"}
    params["graders"]["person-h"] = {"role": "auditor", "kind": "human", "family": "people"}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    how = grade_commands(Experiment.load(root / "params.yaml"))
    assert how["grader-a"] == ("relgrade packets export --role grader --out "
                               "grader-a-packets.jsonl`, then `relgrade grade import --grader "
                               "grader-a FILE")
    assert how["grader-c"] == ("relgrade packets export --role grader --grader grader-c --out "
                               "grader-c-packets.jsonl`, then `relgrade grade import --grader "
                               "grader-c FILE")
    assert how["person-h"] == "relgrade serve"  # people grade on the page: no file to export


def test_an_added_arm_priced_on_its_own_line_is_not_said_to_be_unpriced():
    from relgrade.cli.status import params_changed_lines

    pc = {"state": "changed", "keys": {"arms": {}}, "stages": ["pool"], "repro": "dvc repro",
          "arms": {"added": ["x"], "removed": [], "changed": []},
          "pending_pool": {"pairs": 12, "new_pairs": 2, "pairs_now": 10,
                           "owed": {"grader-a": 2}, "made_in_memory": ["x"]}}
    assert params_changed_lines(pc)[1:] == [
        "  the pool, grading and cost below are the last run's: arm x has no run and no pool "
        "pairs yet, so they leave its pairs out (the next line prices them); `dvc repro` makes "
        "its run and pools it, then stops at the grading owed, which `relgrade status` then "
        "counts and prices",
        "  pending, priced from its run made in memory: the pool with arm x holds 12 pairs, 2 "
        "of them new (today 10); then owed: grader-a 2 judgments"]
    # without a pool to price against: neither counted nor priced, as said
    del pc["pending_pool"]
    assert "its pairs are neither counted nor priced" in params_changed_lines(pc)[1]


def test_a_change_a_stopped_repro_left_unrecorded_names_where_it_stopped():
    from relgrade.cli.status import inputs_changed_lines, params_changed_lines

    pc = {"state": "changed", "keys": {"arms": {"was": {}, "now": {}}}, "stages": ["gate"],
          "repro": "dvc repro", "arms": {"added": [], "removed": [], "changed": []},
          "stopped": ["grades"]}
    assert params_changed_lines(pc) == [
        "params: changed since stage gate last ran (the last dvc repro stopped at stage "
        "grades: see its Pending or Error line): arms edited",
        "  `dvc repro` reruns stage gate; what is below is the last run's"]
    ic = {"state": "changed", "repro": "dvc repro", "stages": ["key", "report"],
          "paths": {"data/audit/lock.json": {"change": "edited", "stages": ["key", "report"]}},
          "stopped": ["grades"]}
    assert inputs_changed_lines(ic)[0] == (
        "inputs: changed since stages key, report last ran (the last dvc repro stopped at "
        "stage grades: see its Pending or Error line): data/audit/lock.json edited")
