"""End to end: experiments/triage-sim graded by a command model grader and by people on the
web page, through `dvc repro`, in a temporary git + dvc repository.

The experiment is copied without its grades. The first repro stops: the simulated model
grader owes every pool pair. `relgrade grade run` runs it as a real subprocess; the second
repro builds the people's triage queue (the model's relevant pairs plus a seeded sample of
its 0s) and stops naming it. Two people grade their packets in headless Chromium through
`relgrade serve`; the third repro runs gate → key → metrics → report. Checks the queue's
inclusion probabilities, the key's merge rule against the model's file and the known truth,
the record's triage design, the miss-rate interval against the simulation's true miss rate,
the report's note, and that the run reproduces the committed experiment's key.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e import tiny, triage_web

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EXP = "experiments/triage-sim"
INPUTS = ("params.yaml", "dvc.yaml", "DESIGN.md", "model_grader.py", "rubric", "data/input")


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not Path(triage_web.CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    root = tmp_path_factory.mktemp("triage")
    for folder in ("stages", "src"):
        shutil.copytree(tiny.REPO / folder, root / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    exp = root / EXP
    exp.mkdir(parents=True)
    for name in INPUTS:
        src = tiny.REPO / EXP / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, exp / name)
    (exp / "data/grades").mkdir(parents=True)
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")
    out = {"root": root, "exp": exp}
    out["first"] = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    out["status_waiting"] = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    out["model_run"] = tiny.run(root, "relgrade", "grade", "run", "--experiment", EXP,
                                "--grader", "model-t", "--no-progress")
    out["second"] = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    out["status_people"] = json.loads(tiny.run(root, "relgrade", "status", "--experiment",
                                               EXP, "--json").stdout)
    out["entered"] = triage_web.people_grade(root, EXP, {"person-a": "grader",
                                                         "person-b": "auditor"})
    # up to the decision report (publish adds nothing this test reads)
    out["third"] = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:report")
    return out


def _queue(exp: Path) -> pd.DataFrame:
    return pd.read_csv(exp / "data/private/triage-queue.tsv", sep="\t", dtype={"query_id": str})


def test_the_first_repro_stops_for_the_model_grader_and_names_the_wait(run):
    first = run["first"]
    assert first.returncode != 0
    pool = pd.read_parquet(run["exp"] / "data/pool/pool.parquet")
    assert (f"Pending: grading: {len(pool)} pairs need model-t ({len(pool)} new); run "
            "`relgrade grade run --grader model-t`") in first.stdout + first.stderr
    assert "people's triage queue waits for model-t" in run["first"].stdout
    assert "triage: people's queue waits for model-t to grade every pool pair" in \
        run["status_waiting"]
    assert "graded by person-a (round 1); waiting for the triage queue" in run["status_waiting"]


def test_the_model_grader_ran_as_a_command_over_every_pool_pair(run):
    pool = pd.read_parquet(run["exp"] / "data/pool/pool.parquet")
    assert run["model_run"].stdout.startswith(f"model-t: graded {len(pool)} pairs in ")
    model = _rows(run["exp"] / "data/grades/model-t/round-1.jsonl")
    assert sorted((r["query_id"], r["chunk_id"]) for r in model) == sorted(
        zip(pool.query_id, pool.chunk_id))


def test_the_people_queue_is_the_models_relevant_pairs_and_a_sample_of_its_zeros(run):
    exp = run["exp"]
    queue = _queue(exp)
    model = {(r["query_id"], r["chunk_id"]): r["grade"]
             for r in _rows(exp / "data/grades/model-t/round-1.jsonl")}
    assert {(q, c): g for q, c, g in zip(queue.query_id, queue.chunk_id, queue.model_grade)} \
        == model
    relevant, zeros = queue[queue.model_grade >= 1], queue[queue.model_grade == 0]
    assert relevant.selected.all() and (relevant.inclusion_probability == 1.0).all()
    n0 = len(zeros)
    n_sampled = math.ceil(0.5 * n0)          # params triage.zero_sample: 0.5
    assert int(zeros.selected.sum()) == n_sampled
    assert zeros.inclusion_probability.tolist() == [n_sampled / n0] * n0
    # the second repro stopped naming exactly the people's queue
    owed = int(queue.selected.sum())
    text = run["second"].stdout + run["second"].stderr
    assert f"Pending: grading: {owed} pairs need person-a ({owed} new)" in text
    people = run["status_people"]["pending"]
    assert people["graders"]["person-a"]["pending_new"] == owed
    assert people["triage"] == {"grader": "model-t", "queue": owed,
                                "model_relevant": len(relevant), "model_zeros": n0,
                                "sampled_zeros": n_sampled}
    packets = triage_web.packets_of(exp, "grader")
    shown = {(q, c["chunk_id"]) for q, p in packets.items() for b in p["batches"] for c in b}
    assert shown == set(zip(queue.query_id[queue.selected], queue.chunk_id[queue.selected]))


def test_the_key_takes_peoples_grades_and_the_models_zeros_elsewhere(run):
    exp = run["exp"]
    truth = triage_web.truth(exp)
    queue = _queue(exp)
    people = {(q, c): g for q, c, g in run["entered"]["person-a"]}
    key = {(r["query_id"], r["chunk_id"]): r["grade"] for r in _rows(exp / "data/key/key.jsonl")}
    for q, c, sel, mg in zip(queue.query_id, queue.chunk_id, queue.selected, queue.model_grade):
        if sel:  # people's grade, entered on the page from the known truth
            assert key[(q, c)] == people[(q, c)] == truth.get((q, c), 0), (q, c)
        else:    # an unsampled model 0 stays the model's 0
            assert mg == 0 and key[(q, c)] == 0, (q, c)
    who = pd.read_csv(exp / "data/key/triage.tsv", sep="\t")
    assert list(who.columns) == ["query_id", "chunk_id", "grade", "source", "grader",
                                 "inclusion_probability"]
    assert set(who.loc[who.source == "people", "grader"]) == {"person-a"}
    assert (who.source == "people").sum() == queue.selected.sum()
    assert set(who.loc[who.source == "model", "grader"]) == {"model-t"}


def test_the_record_holds_the_design_and_the_interval_covers_the_true_miss_rate(run):
    exp = run["exp"]
    record = json.loads((exp / "data/key/record.json").read_text())
    t = record["triage"]
    queue = _queue(exp)
    zeros = queue[queue.model_grade == 0]
    assert (t["mode"], t["model_grader"], t["people_grader"], t["zero_sample"], t["seed"]) == (
        "triage", "model-t", "person-a", 0.5, 11)
    assert t["counts"] == {"model_relevant": int((queue.model_grade >= 1).sum()),
                           "model_zeros": len(zeros),
                           "sampled_zeros": int(zeros.selected.sum()),
                           "unsampled_zeros": int((~zeros.selected).sum())}
    truth = triage_web.truth(exp)
    true_rate = sum(truth.get((q, c), 0) >= 1
                    for q, c in zip(zeros.query_id, zeros.chunk_id)) / len(zeros)
    m = t["miss_rate"]
    sampled = zeros[zeros.selected]
    missed = sum(truth.get((q, c), 0) >= 1 for q, c in zip(sampled.query_id, sampled.chunk_id))
    assert (m["sampled"], m["missed"]) == (len(sampled), missed)
    assert m["low"] <= true_rate <= m["high"]
    assert t["provenance_sha256"] == hashlib.sha256(
        (exp / "data/key/triage.tsv").read_bytes()).hexdigest()


def test_the_report_puts_the_miss_rate_and_the_model_judged_note_beside_the_verdicts(run):
    exp = run["exp"]
    md = (exp / "metrics/report.md").read_text()
    verdicts = md.index("## Verdicts")
    triage_at = md.index("Triage key:")
    assert verdicts < triage_at < md.index("## Judged@k")
    assert "Model miss rate on its 0s: " in md and "model-judged" in md
    assert "Triage key:" in (exp / "metrics/report.html").read_text()
    comparisons = json.loads((exp / "metrics/comparisons.json").read_text())
    assert comparisons["triage"]["note"].startswith("Triage key: pairs the model graded 0")


def test_the_run_reproduces_the_committed_triage_experiment(run):
    exp, committed = run["exp"], tiny.REPO / EXP
    for name in ("model-t", "person-a", "person-b"):
        ours = [(r["query_id"], r["chunk_id"], r["grade"])
                for r in _rows(exp / f"data/grades/{name}/round-1.jsonl")]
        theirs = [(r["query_id"], r["chunk_id"], r["grade"])
                  for r in _rows(committed / f"data/grades/{name}/round-1.jsonl")]
        assert ours == theirs, name
    assert (exp / "data/key/key.jsonl").read_bytes() == \
        (committed / "data/key/key.jsonl").read_bytes()
    # the queue holds the model's grades: private, so git has no copy to compare with; the
    # key's triage table, made from it, is committed
    assert (exp / "data/key/triage.tsv").read_bytes() == \
        (committed / "data/key/triage.tsv").read_bytes()
    assert "/triage-queue.tsv" in (committed / "data/private/.gitignore").read_text().split()
