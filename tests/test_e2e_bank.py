"""End to end, in a temporary git repository: a pool change creates pending work, never an error.

A key is frozen from grades made by a command grader; then an arm is added (only the new
pairs are pending, grading them completes ``dvc repro``, every earlier grade is reused) and
a graded chunk is edited (exactly that pair is pending for the grader and the auditor, it
never enters the grades table stale, and regrading it completes the grades stage).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

GRADER = Path(__file__).with_name("graders") / "tiny_grader.py"


def _params(root, change):
    params = yaml.safe_load((root / "params.yaml").read_text())
    change(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _commands(params):
    for name in ("grader-a", "auditor-b"):
        params["graders"][name].update(command=[sys.executable, str(GRADER)], timeout=60,
                                       retries=1)


def _grade(root):
    for name in ("grader-a", "auditor-b"):
        tiny.run(root, "relgrade", "grade", "run", "--grader", name, "--no-progress")


def _rows(root, grader):
    path = root / "data/grades" / grader / "round-1.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


def _pending_line(proc):
    lines = [x for x in (proc.stderr + proc.stdout).splitlines() if "grading:" in x]
    return lines


def _reviewed(root):
    """The tiny experiment's inputs and params in a new git + DVC repository, intents
    reviewed: where a user starts grading."""
    tiny.write_inputs(root)
    _params(root, _commands)
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")
    tiny.run(root, "relgrade", "intents", "review", "--reviewer", "auditor-b")


def build_frozen(root):
    """A reviewed tiny experiment in ``root`` graded in full by its command graders and its key
    frozen, by the user's loop and nothing else: ``dvc repro`` stops at the pending work, the
    graders grade, ``dvc repro`` completes. The ``frozen_built`` fixture (tests/conftest.py)
    builds it once per test process."""
    _reviewed(root)
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0 and _pending_line(proc), proc.stderr
    _grade(root)
    tiny.run(root, "dvc", "repro")
    return root


@pytest.fixture(scope="module")
def frozen(tmp_path_factory, frozen_built):
    return tiny.copy_repo(frozen_built, tmp_path_factory.mktemp("bank"))


def test_adding_an_arm_makes_only_the_new_pairs_pending_and_grading_them_completes(frozen):
    root = frozen
    key_before = (root / "data/key/key.jsonl").read_text()
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    ids = sorted(c["chunk_id"] for c in tiny.chunks())
    have = set(zip(pool.query_id, pool.chunk_id))
    new = [(q, next(c for c in ids if (q, c) not in have)) for q, *_ in tiny.TOPICS]
    (root / "data/input/runs/extra.trec").write_text("".join(
        f"{q} Q0 {c} 1 1.0 extra\n" for q, c in new))
    _params(root, lambda p: p["arms"].update(
        extra={"kind": "file", "depth": 8, "source": "data/input/runs/extra.trec"}))
    before = {g: _rows(root, g) for g in ("grader-a", "auditor-b")}

    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    line, = _pending_line(proc)
    assert "grading: 12 pairs need grader-a (12 new)" in line
    assert "Traceback" not in proc.stderr
    assert (root / "data/key/key.jsonl").read_text() == key_before

    tiny.run(root, "relgrade", "grade", "run", "--grader", "grader-a", "--no-progress")
    after = _rows(root, "grader-a")
    assert after[:len(before["grader-a"])] == before["grader-a"]  # every earlier grade kept
    assert {(r["query_id"], r["chunk_id"]) for r in after[len(before["grader-a"]):]} == set(new)
    tiny.run(root, "relgrade", "grade", "run", "--grader", "auditor-b", "--no-progress")
    assert _rows(root, "auditor-b")[:len(before["auditor-b"])] == before["auditor-b"]
    tiny.run(root, "dvc", "repro")
    key = [json.loads(x) for x in (root / "data/key/key.jsonl").read_text().splitlines()]
    assert set(new) <= {(r["query_id"], r["chunk_id"]) for r in key}


def test_a_deeper_pool_by_dvc_exp_run_is_pending_work_then_completes_with_no_other_step(frozen):
    root = frozen
    # a clone as a user has it: the frozen key committed, every DVC-cached output ignored
    from relgrade.pipeline.scaffold import cached_outputs, write_gitignores

    params = yaml.safe_load((root / "params.yaml").read_text())
    write_gitignores(root, cached_outputs(yaml.safe_load((root / "dvc.yaml").read_text()),
                                          params["paths"], params["arms"]))
    tiny.git(root, "add", "-A")
    tiny.git(root, "commit", "-qm", "frozen key")
    pool_before = pd.read_parquet(root / "data/pool/pool.parquet")
    proc = tiny.run(root, "dvc", "exp", "run", "-S", "pool.depth=7", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    line, = _pending_line(proc)
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    new = len(pool) - len(pool_before)
    assert new > 0
    assert line.startswith(f"Pending: grading: {new} pairs need grader-a ({new} new)")
    # the packets were rebuilt before the grades stage asked for them: grade run finds the work
    built = json.loads((root / "data/packets/manifest.json").read_text())
    version = json.loads((root / "data/pool/manifest.json").read_text())["pool_version"]
    assert built["pool_version"] == version
    ran = tiny.run(root, "relgrade", "grade", "run", "--grader", "grader-a", "--no-progress")
    assert f"graded {new} pairs" in ran.stdout + ran.stderr
    tiny.run(root, "relgrade", "grade", "run", "--grader", "auditor-b", "--no-progress")
    tiny.run(root, "dvc", "exp", "run")
    record = json.loads((root / "data/key/record.json").read_text())
    assert record["pool_version"] == version and record["pairs"] == len(pool)
    status = tiny.run(root, "relgrade", "status").stdout
    assert "gate: passed" in status


def test_editing_a_graded_chunk_makes_exactly_that_pair_pending_for_both_graders(frozen):
    root = frozen
    audit = [json.loads(x)["query_id"]
             for x in (root / "data/audit/audit.jsonl").read_text().splitlines()]
    qid = audit[0]
    cid = f"{qid}-answer"
    grades = pd.read_parquet(root / "data/graded/grades.parquet")
    assert set(grades.loc[grades.chunk_id == cid, "grader"]) == {"grader-a", "auditor-b"}
    path = root / "data/input/chunks.jsonl"
    chunks = [json.loads(x) for x in path.read_text().splitlines()]
    for c in chunks:
        if c["chunk_id"] == cid:
            c["text"] = "This page intentionally left blank."
    path.write_text("".join(json.dumps(c) + "\n" for c in chunks))

    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    pairs = pool[pool.chunk_id == cid]  # the chunk may be pooled for other queries too
    n_a, n_b = len(pairs), int(pairs.query_id.isin(audit).sum())
    key_before = (root / "data/key/key.jsonl").read_bytes()

    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    line, = _pending_line(proc)
    a = "1 pair needs" if n_a == 1 else f"{n_a} pairs need"
    assert line.startswith(f"Pending: grading: {a} grader-a ({n_a} stale), {n_b} "
                           f"need{'s' if n_b == 1 else ''} auditor-b ({n_b} stale); "
                           "run `relgrade grade run --grader grader-a` and "
                           "`relgrade grade run --grader auditor-b`, then `dvc repro` again.")
    # the stale grades reach no key: the frozen key is as it was
    assert (root / "data/key/key.jsonl").read_bytes() == key_before

    _grade(root)
    tiny.run(root, "dvc", "repro", "grades")
    grades = pd.read_parquet(root / "data/graded/grades.parquet")
    mine = grades[(grades.chunk_id == cid) & (grades.query_id == qid)]
    assert sorted(mine["grader"]) == ["auditor-b", "grader-a"]
    assert mine["grade"].tolist() == [0, 0]  # the regrades; the stale 2s never enter
    # both grades of the pair stay recorded, each beside what it was made on
    for g in ("grader-a", "auditor-b"):
        assert [r["grade"] for r in _rows(root, g)
                if (r["query_id"], r["chunk_id"]) == (qid, cid)] == [2, 0]

    # The key that was used for metrics changes only where the text changed: a revision,
    # not a void run. The record names the pair and the content it was regraded on.
    old_hash = json.loads((root / "data/key/record.json").read_text())["key_sha256"]
    tiny.run(root, "dvc", "repro")
    record = json.loads((root / "data/key/record.json").read_text())
    new_text = {"header": next(c["header"] for c in chunks if c["chunk_id"] == cid),
                "text": "This page intentionally left blank."}
    digest = hashlib.sha256(json.dumps(new_text, separators=(",", ":"), ensure_ascii=False)
                            .encode()).hexdigest()
    assert record["revises"] == old_hash != record["key_sha256"]
    # the command grader reads the text: every pool pair of the chunk was a 2, now a 0
    assert record["regraded"] == [{"query_id": q, "chunk_id": cid, "content_sha256": digest,
                                   "grade_before": 2, "grade": 0}
                                  for q in sorted(pairs.query_id)]
    made = [json.loads(x) for x in (root / "data/key/made_on.jsonl").read_text().splitlines()]
    assert {m["content_sha256"] for m in made if m["chunk_id"] == cid} == {digest}
    assert record["made_on_sha256"] == hashlib.sha256(
        (root / "data/key/made_on.jsonl").read_bytes()).hexdigest()
    ledger = [json.loads(x) for x in (root / "data/ledger.jsonl").read_text().splitlines()]
    assert ledger[-1]["key_sha256"] == record["key_sha256"]
    assert ledger[-1]["revises"] == old_hash
    arm = json.loads(next((root / "metrics/arms").glob("*.json")).read_text())
    assert arm["key_sha256"] == record["key_sha256"] and arm["post_hoc"] is False


def test_a_partial_regrade_round_regrades_only_the_relevant_pairs_and_merges_the_zeros(frozen):
    root = frozen
    before = pd.read_parquet(root / "data/graded/grades.parquet")
    relevant = set(zip(before.loc[before.grade >= 1, "query_id"],
                       before.loc[before.grade >= 1, "chunk_id"]))
    audit = {json.loads(x)["query_id"]
             for x in (root / "data/audit/audit.jsonl").read_text().splitlines()}
    # round 1 as the earlier steps left it: every pool pair, plus the regrades of earlier
    # changes (an edited chunk's pairs) when the module's earlier tests ran
    round_1 = len((root / "data/grades/grader-a/round-1.jsonl").read_text().splitlines())
    assert round_1 >= len(before[before.grader == "grader-a"])

    def round_two(params):
        params["grading"].update(round=2, regrade="relevant")
        for name in ("grader-a", "auditor-b"):  # a fresh grader, in its own words
            params["graders"][name]["command"] = [sys.executable, str(GRADER), "second", "look"]
    _params(root, round_two)
    # no `dvc repro packets` first: grades depends on the packets, so DVC rebuilds them
    proc = tiny.run(root, "dvc", "repro", check=False)
    line, = _pending_line(proc)
    assert f"grading: {len(relevant)} pairs need grader-a ({len(relevant)} regrade)" in line
    shown = {role: {(p["query_id"], c["chunk_id"])
                    for f in (root / "data/packets" / role).glob("*.json")
                    for p in [json.loads(f.read_text())] for b in p["batches"] for c in b}
             for role in ("grader", "auditor")}
    assert shown["grader"] == relevant  # only the pairs graded 1 or 2 by either grader
    # a new round draws its own audit sample: on a query audited again the auditor regrades
    # the relevant pairs; on a newly audited one it owes every pair (it graded none of them)
    audit_1, audit = audit, {json.loads(x)["query_id"] for x in
                             (root / "data/audit/audit.jsonl").read_text().splitlines()}
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    newly = {(q, c) for q, c in zip(pool.query_id, pool.chunk_id) if q in audit - audit_1}
    assert shown["auditor"] == {pair for pair in relevant if pair[0] in audit} | newly
    _grade(root)
    # a round-2 grade of a pair this round does not regrade (a 0 of round 1), imported by hand
    zero = sorted(set(zip(before.loc[(before.grade == 0) & (before.grader == "grader-a"),
                                     "query_id"],
                          before.loc[(before.grade == 0) & (before.grader == "grader-a"),
                                     "chunk_id"])) - relevant)[0]
    (root / "stray.jsonl").write_text(json.dumps(
        {"query_id": zero[0], "chunk_id": zero[1], "reason": "a second look", "grade": 2}) + "\n")
    tiny.run(root, "relgrade", "grade", "import", "stray.jsonl", "--grader", "grader-a",
             "--round", "2")
    done = tiny.run(root, "dvc", "repro")
    assert (f"note: 1 round-2 grades of pairs this partial round does not regrade are ignored "
            f"(kept in the bank, unused): {zero[0]}/{zero[1]}") in done.stdout
    rows = [json.loads(x) for x in
            (root / "data/grades/grader-a/round-2.jsonl").read_text().splitlines()]
    assert {(r["query_id"], r["chunk_id"]) for r in rows} == relevant | {zero}
    merged = pd.read_parquet(root / "data/graded/grades.parquet")
    # the round-1 zeros stand beside the regrades: every pool pair once for grader-a, and
    # once for auditor-b on the round's audited queries
    assert len(merged) == len(pool) + int(pool.query_id.isin(audit).sum())
    kept = merged[(merged.query_id == zero[0]) & (merged.chunk_id == zero[1])
                  & (merged.grader == "grader-a")]
    assert kept["grade"].tolist() == [0]  # the stray 2 never enters the merged grades
    manifest = json.loads((root / "data/graded/manifest.json").read_text())
    audited_pairs = shown["auditor"]
    assert manifest["regrade"] == {"mode": "relevant", "rounds": [1, 2], "pairs": len(relevant),
                                   "merged": {"auditor-b": len(audited_pairs),
                                              "grader-a": len(relevant)},
                                   "ignored": {"grader-a": 1}}
    record = json.loads((root / "data/key/record.json").read_text())
    assert record["regrade"] == manifest["regrade"]
    agreement = json.loads((root / "metrics/agreement.json").read_text())
    audited = int(pool.query_id.isin(audit).sum())  # every pair of the round's audit queries
    assert agreement["pairs"] == audited and agreement["missing"] == 0
    record = json.loads((root / "data/key/record.json").read_text())
    assert record["round"] == 2 and record["regrade"]["rounds"] == [1, 2]
    # the judging cost after the regrade: the report and `relgrade status` give the same
    # numbers, one count of both (every judgment of the two rounds' files was made and paid
    # for: the superseded round-1 grades, the regrades and the stray one alike)
    by_round = {g: {r: len((root / f"data/grades/{g}/round-{r}.jsonl").read_text().splitlines())
                    for r in (1, 2)} for g in ("grader-a", "auditor-b")}
    made = {g: sum(n.values()) for g, n in by_round.items()}
    # round 2 adds exactly the regraded relevant pairs and the stray grade
    assert made["grader-a"] == round_1 + len(relevant) + 1
    # both graders are models (params graders: kind model): priced in calls, one per
    # judgment, not in annotator-hours
    report_md = (root / "metrics/report.md").read_text()
    for g in ("grader-a", "auditor-b"):
        assert f"| {g} | model | {made[g]} | 0 | 1 call | {made[g]} calls | 0 calls |" in report_md
    assert (f"| all | | {sum(made.values())} | 0 | | {sum(made.values())} model calls | "
            "0 model calls |") in report_md
    status = tiny.run(root, "relgrade", "status").stdout.splitlines()
    # status also says what each round made
    rounds = {r: by_round["grader-a"][r] + by_round["auditor-b"][r] for r in (1, 2)}
    assert (f"judging cost: {sum(made.values())} judgments spent ({sum(made.values())} model "
            f"calls; round 1: {rounds[1]}, round 2: {rounds[2]}), 0 pending (0 model calls)"
            ) in status
    for g in ("grader-a", "auditor-b"):
        assert (f"  {g} (model): {made[g]} spent (round 1: {by_round[g][1]}, round 2: "
                f"{by_round[g][2]}), 0 pending at 1 call each (0 calls to go)") in status
