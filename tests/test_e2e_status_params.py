"""End to end: `relgrade status` after params changed since the last `dvc repro`.

The tiny experiment (tests/e2e/tiny.py) with `dvc repro packets` run, copied; its params are
then changed the way a user changes them (`relgrade arm add`, `relgrade arm remove`, a hand
edit of a plain key) and the status read before `dvc repro` runs again. The lock compared
against is the one DVC wrote.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


@pytest.fixture
def repo(tmp_path, packets_built):
    return tiny.copy_repo(packets_built, tmp_path / "repo")


def _status(root):
    text = tiny.run(root, "relgrade", "status", check=False).stdout.splitlines()
    doc = json.loads(tiny.run(root, "relgrade", "status", "--json", check=False).stdout)
    return text, doc["params_changed"]


def _set_depth(root, depth):
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["pool"]["depth"] = depth
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_status_right_after_the_last_repro_says_nothing_of_params(repo):
    text, changed = _status(repo)
    assert changed == {"state": "unchanged"}
    assert not [line for line in text if line.startswith("params:")]


def test_an_added_arm_is_left_out_of_the_last_runs_lines_and_priced_on_its_own_line(repo):
    before, _ = _status(repo)
    pool_line = next(line for line in before if line.startswith("pool:"))
    tiny.run(repo, "relgrade", "arm", "add", "extra", "--run", "data/input/runs/lexical.trec")
    text, changed = _status(repo)
    assert text[:2] == [
        "params: changed since the last dvc repro: arm extra added",
        "  the pool, grading and cost below are the last run's: arm extra has no run and no "
        "pool pairs yet, so they leave its pairs out (the next line prices them); `dvc repro` "
        "makes its run and pools it, then stops at the grading owed, which `relgrade status` "
        "then counts and prices"]
    assert pool_line in text  # the pool is still the last run's, and says so above
    # every stage that read params `arms` (each arm's run and the pool) reruns, and the new
    # arm's own stages run for the first time
    assert changed["state"] == "changed"
    assert changed["arms"] == {"added": ["extra"], "removed": [], "changed": []}
    assert changed["stages"] == ["metrics@extra", "pool", "retrieve@dense", "retrieve@extra",
                                 "retrieve@lexical", "retrieve@mixed"]
    assert list(changed["keys"]) == ["arms"]
    assert set(changed["keys"]["arms"]["now"]) - set(changed["keys"]["arms"]["was"]) == {"extra"}
    assert changed["repro"] == "dvc repro"


def test_an_added_arm_s_pending_pool_is_priced_from_its_run_made_in_memory(repo):
    before, _ = _status(repo)
    tiny.run(repo, "relgrade", "arm", "add", "extra", "--run", "data/input/runs/lexical.trec")
    text, changed = _status(repo)
    # extra is a copy of lexical's run, so its pool is today's and each grader owes what it
    # owes today (no grade made yet: grader-a every pool pair, auditor-b the audit queries')
    today = int(next(line for line in before if line.startswith("pool: ")).split()[1])
    audit_pairs = int(next(line for line in before if line.startswith("audit: "))
                      .split(" of ")[1].split()[0])
    assert text[2] == (
        f"  pending, priced from its run made in memory: the pool with arm extra holds "
        f"{today} pairs, 0 of them new (today {today}); then owed: grader-a {today}, "
        f"auditor-b {audit_pairs} judgments")
    assert changed["pending_pool"]["made_in_memory"] == ["extra"]
    assert changed["pending_pool"]["new_pairs"] == 0


def test_a_removed_arm_is_named_as_removed(repo):
    tiny.run(repo, "relgrade", "arm", "remove", "mixed")
    text, changed = _status(repo)
    assert changed["arms"] == {"added": [], "removed": ["mixed"], "changed": []}
    assert text[0] == "params: changed since the last dvc repro: arm mixed removed"
    # retrieve@mixed recorded `arms` too, but dvc.yaml has it no more
    assert text[1] == ("  `dvc repro` reruns stages pool, retrieve@dense, retrieve@lexical; "
                       "what is below is the last run's")


def test_a_deeper_pool_edited_by_hand_names_both_depths_until_the_pool_is_made(repo):
    _set_depth(repo, 7)  # the tiny experiment's pool is 5 deep
    text, changed = _status(repo)
    assert text[:2] == ["params: changed since the last dvc repro: pool.depth 5 -> 7",
                        "  `dvc repro` reruns stage pool; what is below is the last run's"]
    assert changed["keys"] == {"pool.depth": {"was": 5, "now": 7}}
    assert changed["stages"] == ["pool"]
    tiny.run(repo, "dvc", "repro", "pool")
    assert _status(repo)[1] == {"state": "unchanged"}


def test_a_truncated_lock_is_named_once_by_its_dvc_line_not_by_a_params_line(repo):
    (repo / "dvc.lock").write_text("schema: '2.0'\nstages:\n  corpus: [\n")
    text, changed = _status(repo)
    assert changed["state"] == "unreadable" and "dvc.lock" in changed["error"]
    assert text[0].startswith("dvc: dvc.lock is not valid YAML")
    assert not [line for line in text if line.startswith("params:")]


def test_an_edited_audit_lock_and_a_new_grade_file_are_the_changes_dvc_status_sees(repo):
    text, _ = _status(repo)
    assert not [line for line in text if line.startswith("inputs:")]
    lock = repo / "data/audit/lock.json"
    lock.write_text(lock.read_text() + "\n")  # one byte more: DVC sees another file
    tiny.write_grades(repo, "grader-a", tiny.grade_rows({(tiny.TOPICS[0][0],
                                                          tiny.chunks()[0]["chunk_id"])}))
    doc = json.loads(tiny.run(repo, "relgrade", "status", "--json", check=False).stdout)
    changed = doc["inputs_changed"]
    assert changed["state"] == "changed"
    assert {p: c["change"] for p, c in changed["paths"].items()} == {
        "data/audit/lock.json": "edited", "data/grades": "edited"}
    # DVC's own view: each stage that ran (DVC reports those that never ran as changed too)
    # and whose dependency or output among these paths it finds modified, relgrade names
    dvc = json.loads(tiny.run(repo, "dvc", "status", "--json").stdout)
    ran = set(yaml.safe_load((repo / "dvc.lock").read_text())["stages"])
    seen = {(stage, path) for stage, problems in dvc.items()
            if stage in ran and isinstance(problems, list)
            for problem in problems if isinstance(problem, dict)
            for kind, paths in problem.items() if kind in ("changed deps", "changed outs")
            for path, how in paths.items() if path in changed["paths"] and how == "modified"}
    assert seen == {(s, p) for p, c in changed["paths"].items() for s in c["stages"]}
    text, _ = _status(repo)
    assert "inputs: changed since the last dvc repro: data/audit/lock.json edited; " \
        "data/grades edited" in text


def test_a_pool_a_failed_pool_stage_removed_is_named_missing_with_the_repro_that_remakes_it(
        repo):
    _set_depth(repo, -1)
    proc = tiny.run(repo, "dvc", "repro", check=False)
    assert proc.returncode != 0  # the pool stage refused the depth, after DVC cleared it
    assert not (repo / "data/pool/pool.parquet").exists()
    _set_depth(repo, 6)  # the user mends the value (another than the last run's)
    text, changed = _status(repo)
    assert ("pool: missing: the last dvc repro built it (dvc.lock records data/pool/pool.parquet) "
            "and it is gone since: DVC deletes a stage's outputs before running the stage, so "
            "a pool stage that failed (on a bad params value, say) leaves none; params "
            "pool.depth changed since it ran; run `dvc repro` to build it again (it names the "
            "cause again if it is still there)") in text
    tiny.run(repo, "dvc", "repro", "pool")
    pool_line = next(line for line in _status(repo)[0] if line.startswith("pool:"))
    assert pool_line.split()[2:4] == ["pairs", "over"]  # built again at depth 6


def test_after_a_repro_that_stopped_for_grading_the_params_line_names_where_it_stopped(
        frozen_built, tmp_path):
    # an arm added to a frozen experiment: dvc repro pools it and stops at the grades owed,
    # so the stages after grades never recorded the new arms: not an edit since that run
    repo = tiny.copy_repo(frozen_built, tmp_path / "repo")
    # dense's run with each query's first chunk swapped for one no arm ranks there: new pairs
    rows = [line.split() for line in
            (repo / "data/input/runs/dense.trec").read_text().splitlines()]
    ids = [c["chunk_id"] for c in tiny.chunks()]
    firsts = {}
    for r in rows:
        firsts.setdefault(r[0], r)
    for q, r in firsts.items():
        ranked = {x[2] for x in rows if x[0] == q}
        r[2] = next(c for c in ids if c not in ranked and not c.startswith(q))
    (repo / "extra.trec").write_text("".join(" ".join(r) + "\n" for r in rows))
    tiny.run(repo, "relgrade", "arm", "add", "extra", "--run", "extra.trec")
    proc = tiny.run(repo, "dvc", "repro", check=False)
    assert "Pending: " in proc.stderr
    text, changed = _status(repo)
    assert changed["stopped"] == ["grades"]
    assert text[0].startswith("params: changed since stage")
    assert text[0].endswith(" last ran (the last dvc repro stopped at stage grades: see its "
                            "Pending or Error line): arms edited")
