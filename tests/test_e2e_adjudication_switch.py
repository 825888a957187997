"""End to end: experiments/crowd-sim's aggregation method switched with the expert's grades
in the bank: a changed adjudication queue is pending work, never an error.

The experiment is copied as in tests/test_e2e_crowd.py (its raters' and auditor's committed
grades, not the expert's; the shared copy run to its pool), with ``aggregation.method:
dawid-skene``. The loop, each time to the key: `dvc repro` stops with the expert's queue
pending; `relgrade grade run --grader expert-e`; `dvc repro` completes. Then the method is
switched to the majority vote, whose queue adds the ties of two kept raters (the spread rule
is the same for both methods): the `Pending:` line names only those pairs for the expert;
once graded, the key is made. Switched back to Dawid-Skene, the ties' grades are set aside
(kept in the bank, unused) and the key is the first one, byte for byte.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

EXP = "experiments/crowd-sim"
KEY = f"{EXP}/dvc.yaml:key"


def _method(exp, method):
    params = exp / "params.yaml"
    text = params.read_text()
    old = next(line for line in text.splitlines() if line.startswith("  method: "))
    params.write_text(text.replace(old, f"  method: {method}", 1))


def _queue(exp):
    return {(r["query_id"], r["chunk_id"]) for r in
            (json.loads(x) for x in (exp / "data/aggregate/queue.jsonl").read_text()
             .splitlines())}


def _expert(root):
    tiny.run(root, "relgrade", "grade", "run", "--experiment", EXP, "--grader", "expert-e",
             "--no-progress")


@pytest.fixture(scope="module")
def switched(tmp_path_factory, crowd_sim_pooled):
    # the copy (tests.e2e.shipped) with sample -> pool run, shared by the crowd-sim modules
    # (tests/conftest.py): the pool stage reads none of the params changed below
    root = tiny.copy_repo(crowd_sim_pooled / "repo", tmp_path_factory.mktemp("switch"))
    exp = root / EXP
    _method(exp, "dawid-skene")
    # Dawid-Skene's key agrees less with the auditor (binary kappa 0.58): the gate is not
    # what this test is about, so it is loosened to let the key be made under both methods
    params = exp / "params.yaml"
    text = params.read_text()
    assert "binary_kappa_min: 0.60" in text
    params.write_text(text.replace("binary_kappa_min: 0.60", "binary_kappa_min: 0.50", 1))
    out = {"ds_first": tiny.run(root, "dvc", "repro", KEY, check=False)}
    out["ds_queue"] = _queue(exp)
    _expert(root)
    tiny.run(root, "dvc", "repro", KEY)
    out["ds_key"] = (exp / "data/key/key.jsonl").read_bytes()
    _method(exp, "majority")
    out["majority_first"] = tiny.run(root, "dvc", "repro", KEY, check=False)
    out["majority_queue"] = _queue(exp)
    _expert(root)
    out["majority_done"] = tiny.run(root, "dvc", "repro", KEY)
    out["majority_key"] = (exp / "data/key/key.jsonl").read_bytes()
    _method(exp, "dawid-skene")
    out["ds_again"] = tiny.run(root, "dvc", "repro", KEY, check=False)
    out["ds_key_again"] = (exp / "data/key/key.jsonl").read_bytes()
    out["expert_rows"] = (exp / "data/grades/expert-e/round-1.jsonl").read_text().splitlines()
    return out


def _pending(proc):
    return [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]


def test_the_switch_to_the_majority_vote_queues_more_pairs(switched):
    # the majority vote adds the ties of two kept raters; the spread rule queues the same
    assert switched["ds_queue"] < switched["majority_queue"]


def test_the_newly_queued_pairs_are_pending_for_the_expert_not_an_error(switched):
    proc = switched["majority_first"]
    assert proc.returncode != 0 and "Error:" not in proc.stderr
    added = switched["majority_queue"] - switched["ds_queue"]
    queries = sorted({q for q, _ in added})
    line = (_pending(proc) or [""])[0]
    assert line.startswith(f"Pending: grading: {len(added)} pairs need expert-e (adjudication "
                           f"quer{'y' if len(queries) == 1 else 'ies'} {', '.join(queries)})"), line
    assert "; run `relgrade grade run --grader expert-e" in line, line
    # the first run owed the whole Dawid-Skene queue, named the same way
    first = _pending(switched["ds_first"])
    assert first and f"{len(switched['ds_queue'])} pairs need expert-e" in first[0]


def test_the_expert_grades_each_queued_pair_once_and_the_key_is_made(switched):
    pairs = [(r["query_id"], r["chunk_id"]) for r in map(json.loads, switched["expert_rows"])]
    assert sorted(pairs) == sorted(switched["majority_queue"])
    assert "Running stage 'experiments/crowd-sim/dvc.yaml:key'" in \
        switched["majority_done"].stdout


def test_switched_back_the_ties_grades_are_set_aside_and_the_key_is_the_first(switched):
    proc = switched["ds_again"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    added = len(switched["majority_queue"] - switched["ds_queue"])
    assert (f"note: {added} expert-e grades of pairs no longer in the adjudication queue set "
            "aside (kept in the judgment bank, unused)") in proc.stdout
    assert switched["ds_key_again"] == switched["ds_key"]
    assert switched["majority_key"] != switched["ds_key"]
