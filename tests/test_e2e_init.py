"""End to end: a second experiment made by `relgrade init`, graded and run to its report.

In a temporary git + dvc repository holding the tiny experiment at the top, `relgrade init
experiments/second` makes an experiment over the tiny chunks with two built-in arms (bm25,
tfidf) and one external TREC run; `dvc repro experiments/second/dvc.yaml` takes it to the
packets, a command grader that reads the chunk text grades it, and a second repro runs it to
the decision report. The top-level experiment is never run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_init_modes import _repo

pytestmark = [pytest.mark.slow]

GRADER = Path(__file__).with_name("graders") / "tiny_grader.py"
EXP = "experiments/second"


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in folder.rglob("*") if p.is_file()}


def _ignores(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob(".gitignore")}


@pytest.fixture(scope="module")
def second(tmp_path_factory):
    root = _repo(tmp_path_factory, "init")  # the tiny inputs in a new git + DVC repository
    command = f"{sys.executable} {GRADER}"
    made = tiny.run(root, "relgrade", "init", EXP, "--corpus", "data/input/chunks.jsonl",
                    "--queries", "data/input/queries.tsv", "--intents", "data/input/intents.tsv",
                    "--arm", "bm25=bm25", "--arm", "tfidf=tfidf",
                    "--run", "ext=data/input/runs/mixed.trec", "--pool-depth", "3",
                    "--audit-min", "4", "--grader-command", command,
                    "--auditor-command", command)
    ignores = _ignores(root / EXP)
    review = tiny.run(root, "relgrade", "intents", "review", "--experiment", EXP, "--reviewer",
                      "auditor-b")
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:packets")
    packets = sorted(p.name for p in (root / EXP / "data/packets/grader").iterdir())
    for name in ("grader-a", "auditor-b"):
        tiny.run(root, "relgrade", "grade", "run", "--experiment", EXP, "--grader", name,
                 "--no-progress")
    repro = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml")
    return root, made, packets, ignores, {"review": review.stdout, "repro": repro.stdout}


def test_init_prints_the_arms_and_the_next_steps(second):
    _, made, *_ = second
    assert made.stdout.splitlines()[0] == (
        "Created experiment second in experiments/second: arms bm25 (bm25), tfidf (tfidf), "
        "ext (file).")


def test_repro_to_the_packets_gives_one_packet_per_query(second):
    _, _, packets, *_ = second
    assert packets == sorted(f"{q}.json" for q, *_ in tiny.TOPICS)


def test_the_key_holds_the_truth_of_every_pooled_pair_and_its_record_matches(second):
    import hashlib

    root, *_ = second
    ex = root / EXP
    data = (ex / "data/key/key.jsonl").read_bytes()
    record = json.loads((ex / "data/key/record.json").read_text())
    assert hashlib.sha256(data).hexdigest() == record["key_sha256"]
    rows = [json.loads(x) for x in data.decode().splitlines()]
    pool = pd.read_parquet(ex / "data/pool/pool.parquet")
    assert sorted((r["query_id"], r["chunk_id"]) for r in rows) == sorted(
        zip(pool.query_id, pool.chunk_id))
    assert all(r["grade"] == tiny.truth(r["chunk_id"]) for r in rows)
    # the top-level experiment never ran
    assert not (root / "data/key/key.jsonl").exists()


def test_report_has_one_verdict_per_arm_against_the_baseline(second):
    root, *_ = second
    report = (root / EXP / "metrics/report.md").read_text().splitlines()
    start = report.index("## Verdicts")
    end = next(i for i in range(start + 1, len(report)) if report[i].startswith("## "))
    verdicts = [x for x in report[start:end] if x.startswith("- ")]
    assert len(verdicts) == 2
    assert any(" ext " in v and "bm25" in v for v in verdicts)
    assert any(" tfidf " in v and "bm25" in v for v in verdicts)
    record = json.loads((root / EXP / "data/key/record.json").read_text())
    assert f"- key sha256: `{record['key_sha256']}`" in report


def test_status_of_the_experiment_gives_the_key_cost_and_unfilled_design(second):
    root, *_ = second
    ex = root / EXP
    proc = tiny.run(root, "relgrade", "status", "--experiment", EXP, "--json")
    st = json.loads(proc.stdout)
    record = json.loads((ex / "data/key/record.json").read_text())
    assert st["key"]["sha256"] == record["key_sha256"]
    pool = pd.read_parquet(ex / "data/pool/pool.parquet")
    audit = [json.loads(x)["query_id"] for x in (ex / "data/audit/audit.jsonl").read_text()
             .splitlines()]
    audited = int(pool.query_id.isin(audit).sum())
    cost = st["cost"]
    assert cost["graders"]["grader-a"]["spent"] == len(pool)
    assert cost["graders"]["auditor-b"]["spent"] == audited
    assert cost["pending"] == 0
    # both are command graders (kind model): one call per judgment, no annotator-hours
    assert (cost["spent_calls"], cost["spent_hours"]) == (len(pool) + audited, 0)
    assert st["design"]["unfilled"] == [
        f"{EXP}/DESIGN.md: question", f"{EXP}/DESIGN.md: corpus", f"{EXP}/DESIGN.md: graders",
        f"{EXP}/DESIGN.md: deviations", f"{EXP}/rubric/v1.md: corpus examples"]
    text = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    assert f"key: frozen, sha256 {record['key_sha256']}" in text


def _pool_by_hand(ex: Path, depth: int) -> set:
    """Every arm's canonical top ``depth`` per query (score desc, chunk id desc), united."""
    out = set()
    for arm in ("bm25", "tfidf", "ext"):
        run = pd.read_csv(ex / f"data/runs/{arm}.trec", sep=" ", header=None,
                          names=["query_id", "q0", "chunk_id", "rank", "score", "tag"],
                          dtype={"query_id": str, "chunk_id": str})
        run = run.sort_values(["query_id", "score", "chunk_id"], ascending=[True, False, False])
        out |= set(run.groupby("query_id").head(depth)[["query_id", "chunk_id"]]
                   .itertuples(index=False, name=None))
    return out


def test_pool_plan_prices_a_deeper_pool_without_writing(second):
    root, *_ = second
    ex = root / EXP
    before = _snapshot(ex)
    plan = json.loads(tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP,
                               "--depth", "5", "--json").stdout)
    assert _snapshot(ex) == before
    now = pd.read_parquet(ex / "data/pool/pool.parquet")
    have = set(zip(now.query_id, now.chunk_id))
    deeper = _pool_by_hand(ex, 5)
    assert _pool_by_hand(ex, 3) == have
    new = deeper - have
    audit = {json.loads(x)["query_id"] for x in (ex / "data/audit/audit.jsonl").read_text()
             .splitlines()}
    assert plan["pairs"] == len(deeper) and plan["new_pairs"] == len(new) > 0
    assert plan["pool_version"] != plan["pool_version_now"]
    owed_a = len(new)
    owed_b = sum(q in audit for q, _ in new)
    assert plan["cost"]["graders"]["grader-a"]["pending"] == owed_a
    assert plan["cost"]["graders"]["auditor-b"]["pending"] == owed_b
    # command graders are models: priced in calls, no annotator-hours
    assert plan["cost"]["pending_calls"] == owed_a + owed_b
    assert plan["cost"]["pending_hours"] == 0


def test_pool_plan_prices_an_extra_auditors_share_as_the_status_does(second):
    root, *_ = second
    ex = root / EXP
    params = ex / "params.yaml"
    before = params.read_text()
    raw = yaml.safe_load(before)
    # a second auditor, a person: it owes the audited queries' pairs of the deeper pool too
    raw["graders"]["expert-c"] = {**raw["graders"]["auditor-b"], "kind": "human",
                                  "family": "human"}
    raw["graders"]["expert-c"].pop("model", None)
    try:
        params.write_text(yaml.safe_dump(raw, sort_keys=False))
        plan = json.loads(tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP,
                                   "--depth", "5", "--json").stdout)
        status = json.loads(tiny.run(root, "relgrade", "status", "--experiment", EXP,
                                     "--json").stdout)
    finally:
        params.write_text(before)
    now = pd.read_parquet(ex / "data/pool/pool.parquet")
    have = set(zip(now.query_id, now.chunk_id))
    audit = {json.loads(x)["query_id"] for x in (ex / "data/audit/audit.jsonl").read_text()
             .splitlines()}
    deeper = _pool_by_hand(ex, 5)
    graders = plan["cost"]["graders"]
    assert set(graders) == {"grader-a", "auditor-b", "expert-c"}
    # at today's depth expert-c owes every audited pair; the deeper pool adds its new ones
    assert graders["expert-c"]["pending"] == sum(q in audit for q, _ in deeper) > 0
    assert graders["expert-c"]["spent"] == 0
    assert plan["cost"]["pending_hours"] > 0      # a person's work, in annotator-hours
    # spent as the status counts it, grader by grader
    assert {g: v["spent"] for g, v in graders.items()} == {
        g: v["spent"] for g, v in status["cost"]["graders"].items()}


def test_pool_plan_without_depth_prices_todays_depth(second):
    root, *_ = second
    ex = root / EXP
    plan = json.loads(tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP,
                               "--json").stdout)
    # params pool.depth is 3 (init --pool-depth 3): today's pool, every pair graded
    now = pd.read_parquet(ex / "data/pool/pool.parquet")
    assert plan["depth"] == 3
    assert plan["pairs"] == plan["pairs_now"] == len(now) == len(_pool_by_hand(ex, 3))
    assert plan["pool_version"] == plan["pool_version_now"]
    assert plan["new_pairs"] == 0 and plan["cost"]["pending"] == 0
    # the text says what each grader has spent and owes, in the lines status prints
    text = tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP).stdout.splitlines()
    status = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout.splitlines()
    cost = plan["cost"]  # model graders, one call a judgment
    assert text[1] == (f"judging cost: {cost['spent']} judgments spent ({cost['spent_calls']} "
                       "model calls), 0 pending (0 model calls)")
    assert text[1:] == [line for line in status if line.startswith(
        ("judging cost:", *(f"  {g} (" for g in plan["cost"]["graders"])))]


def test_pool_plan_right_after_arm_add_prices_the_new_runs_made_as_dvc_repro_makes_them(
        second, tmp_path):
    # pool plan used to refuse until the new arms' runs were made; it now makes them in
    # memory, as their retrieve stages will (and as `arm add` prices them)
    root = tiny.copy_repo(second[0], tmp_path / "repo")
    ex = root / EXP
    tiny.run(root, "relgrade", "arm", "add", "bm25b", "--kind", "bm25", "--depth", "8",
             "--experiment", EXP)
    tiny.run(ex, "relgrade", "arm", "add", "fused", "--kind", "rrf", "--fuse", "bm25,tfidf",
             "--depth", "8")
    before = _snapshot(ex)
    inside = tiny.run(ex, "relgrade", "pool", "plan")
    planned = json.loads(tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP,
                                  "--json").stdout)
    assert _snapshot(ex) == before  # nothing written
    assert inside.stdout.splitlines()[1] == (
        "arms bm25b, fused: no run yet, made in memory for this plan as `dvc repro "
        "retrieve@bm25b retrieve@fused` will make them")
    assert planned["made_in_memory"] == ["bm25b", "fused"]
    # the runs the retrieve stages then write give the same plan, read from their files
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:retrieve@bm25b",
             f"{EXP}/dvc.yaml:retrieve@fused")
    from_files = json.loads(tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP,
                                     "--json").stdout)
    assert from_files.pop("made_in_memory") == []
    planned.pop("made_in_memory")
    assert planned == from_files
    # by hand: bm25b ranks as bm25 does, so only fused can add pairs to today's pool
    now = pd.read_parquet(ex / "data/pool/pool.parquet")
    have = set(zip(now.query_id, now.chunk_id))
    runs = {arm: pd.read_csv(ex / f"data/runs/{arm}.trec", sep=" ", header=None,
                             names=["query_id", "q0", "chunk_id", "rank", "score", "tag"],
                             dtype={"query_id": str, "chunk_id": str})
            for arm in ("bm25", "bm25b", "fused")}
    assert runs["bm25b"][["query_id", "chunk_id", "score"]].equals(
        runs["bm25"][["query_id", "chunk_id", "score"]])
    top = runs["fused"].sort_values(["query_id", "score", "chunk_id"],
                                    ascending=[True, False, False]).groupby("query_id").head(3)
    added = set(zip(top.query_id, top.chunk_id)) - have
    assert planned["new_pairs"] == len(added)
    assert planned["pairs"] == len(have) + len(added)


def test_corpus_export_writes_the_chunk_table_an_external_run_can_use(second):
    root, *_ = second
    tiny.run(root, "relgrade", "corpus", "export", "--experiment", EXP, "--out", "chunks.jsonl")
    rows = [json.loads(x) for x in (root / "chunks.jsonl").read_text().splitlines()]
    assert [r["chunk_id"] for r in rows] == [c["chunk_id"] for c in tiny.chunks()]
    assert {"chunk_id", "header", "text", "source"} <= set(rows[0])


def test_dvc_sees_both_pipelines_and_the_experiment_is_up_to_date(second):
    root, *_ = second
    listed = tiny.run(root, "dvc", "stage", "list", "--all").stdout
    assert f"{EXP}/dvc.yaml:pool" in listed and "\npool " in f"\n{listed}"
    assert tiny.run(root, "dvc", "status", f"{EXP}/dvc.yaml").stdout.strip() == (
        "Data and pipelines are up to date.")
    # the top level has never run; the experiment's stages are not among the changed ones
    everything = tiny.run(root, "dvc", "status").stdout
    assert everything.startswith("corpus:") and f"{EXP}/dvc.yaml" not in everything
    params = yaml.safe_load((root / EXP / "params.yaml").read_text())
    assert params["arms"]["ext"]["source"] == "data/input/runs/ext.trec"
    assert os.path.exists(root / EXP / "data/input/runs/ext.trec")


def test_init_ignores_every_cached_output_up_front_exactly_as_dvc_does(second):
    # dvc adds an output's .gitignore entry only when its stage succeeds; init writes them
    # all first, so a folder committed after a failed run never has git track a cached
    # output. After the full run dvc has added nothing: the entries were the ones it needs.
    root, _, _, ignores, _ = second
    assert ignores["data/corpus/.gitignore"] == "/chunks.parquet\n"
    assert ignores["data/runs/.gitignore"] == "/bm25.trec\n/tfidf.trec\n/ext.trec\n"
    assert ignores["data/private/.gitignore"] == "/provenance.parquet\n/disagreements.jsonl\n"
    assert _ignores(root / EXP) == ignores
    tracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", EXP],
                             cwd=root, check=True, capture_output=True, text=True).stdout
    outputs = [line for line in tracked.splitlines()
               if line.endswith((".parquet", ".trec")) and "data/input/" not in line]
    assert outputs == []


# --- the change loop on the frozen experiment: arms added by command and by hand ----------

def _pending(proc) -> str:
    lines = [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return lines[0]


def _printed(line: str, prefix: str) -> list[str]:
    """The commands in backticks of a printed line that start with ``prefix``."""
    return [c for c in line.split("`")[1::2] if c.startswith(prefix)]


@pytest.fixture(scope="module")
def changed(second, tmp_path_factory):
    """A copy of the frozen repository, committed as a clone has it; a hand edit of params
    adding an rrf arm over the external run without rendering, refused by `dvc repro`; then
    `relgrade arm add` of that arm, `dvc repro` to the grading owed, the printed grade commands
    typed in the experiment's folder, and `dvc repro` to the report."""
    import shutil

    root = Path(shutil.copytree(second[0], tmp_path_factory.mktemp("arm") / "repo"))
    ex = root / EXP
    tiny.git(root, "add", "-A")
    tiny.git(root, "commit", "-qm", "frozen key")
    params_text = (ex / "params.yaml").read_text()
    hand = params_text.replace("\narms:\n", "\narms:\n  fused:\n    kind: rrf\n    depth: 100\n"
                               "    fuse: [ext, bm25]\n    source: ../../src/relgrade/retrieve/"
                               "fusion.py\n", 1)
    assert hand != params_text
    (ex / "params.yaml").write_text(hand)
    refused = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    ran_anyway = (ex / "data/runs/fused.trec").exists()
    (ex / "params.yaml").write_text(params_text)
    pool_before = pd.read_parquet(ex / "data/pool/pool.parquet")
    audit = [json.loads(x)["query_id"] for x in
             (ex / "data/audit/audit.jsonl").read_text().splitlines()]
    # an external run, then an rrf arm fusing it, added by command in the experiment's folder
    lex = tiny.run(ex, "relgrade", "arm", "add", "lex", "--run", "../../data/input/runs/"
                   "lexical.trec")
    added = tiny.run(root, "relgrade", "arm", "add", "fused", "--kind", "rrf", "--fuse",
                     "lex,bm25", "--experiment", EXP)
    owed = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    pool = pd.read_parquet(ex / "data/pool/pool.parquet")
    line = _pending(owed)
    for command in _printed(line, "relgrade "):
        tiny.run(ex, *command.split())  # typed in the experiment's folder, as printed
    done = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    # the same loop through `dvc exp run`, everything typed in the experiment's folder
    tiny.git(root, "add", "-A")
    tiny.git(root, "commit", "-qm", "arms lex and fused")
    tiny.run(ex, "relgrade", "arm", "add", "dense", "--run", "../../data/input/runs/dense.trec")
    exp_owed = tiny.run(ex, "dvc", "exp", "run", check=False)
    exp_line = _pending(exp_owed)
    for command in _printed(exp_line, "relgrade "):
        tiny.run(ex, *command.split())
    exp_done = tiny.run(ex, "dvc", "exp", "run", check=False)
    exps = subprocess.run(["git", "for-each-ref", "refs/exps"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.splitlines()
    # DVC's experiments table of this experiment, as a terminal 80 columns wide shows it
    exp_table = tiny.run(ex, "relgrade", "metrics", "exp", env_extra={"COLUMNS": "80"})
    exp_json = json.loads(tiny.run(ex, "relgrade", "metrics", "exp", "--json").stdout)
    return dict(root=root, refused=refused, ran_anyway=ran_anyway, exp_owed=exp_owed,
                exp_line=exp_line, exp_done=exp_done, exps=exps, added=added, lex=lex,
                exp_table=exp_table, exp_json=exp_json,
                owed=owed, line=line, done=done,
                pool_before=pool_before, pool=pool, audit=audit)


def test_a_hand_edit_adding_an_arm_without_rendering_is_refused_naming_the_render(changed):
    proc = changed["refused"]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("Error: ")]
    assert len(errors) == 1
    assert "the pipeline differs from what params.yaml gives (stages: retrieve)" in errors[0]
    assert f"`relgrade pipeline render --experiment {EXP}`" in errors[0]
    # then the command that resumes, as the stages' Pending lines print it
    assert (f"then `dvc repro {EXP}/dvc.yaml` again (at the repository's top; `dvc repro` "
            f"in {EXP})") in errors[0]
    # refused before any work: the arm's run was never made
    assert changed["ran_anyway"] is False


def test_arm_add_renders_a_pipeline_where_the_fused_arm_depends_on_the_run_it_fuses(changed):
    ex = changed["root"] / EXP
    dvc = yaml.safe_load((ex / "dvc.yaml").read_text())
    assert "data/input/runs/lex.trec" in dvc["stages"]["retrieve"]["do"]["deps"]
    assert (ex / "data/input/runs/lex.trec").read_bytes() == (
        changed["root"] / "data/input/runs/lexical.trec").read_bytes()
    assert tiny.run(changed["root"], "relgrade", "pipeline", "check", "--experiment",
                    EXP).returncode == 0
    params = yaml.safe_load((ex / "params.yaml").read_text())
    assert params["arms"]["lex"] == {"kind": "file", "depth": 100,
                                     "source": "data/input/runs/lex.trec"}
    assert params["arms"]["fused"] == {"kind": "rrf", "depth": 100, "k": 60,
                                       "fuse": ["lex", "bm25"],
                                       "source": "../../src/relgrade/retrieve/fusion.py"}
    ignored = (ex / "data/runs/.gitignore").read_text().splitlines()
    assert "/fused.trec" in ignored and "/lex.trec" in ignored
    assert changed["lex"].stdout.splitlines()[0] == (
        "Added arm lex (file) to ./params.yaml; rendered ./dvc.yaml.")
    assert changed["lex"].stdout.splitlines()[-1].startswith("Next: dvc repro (it stops")


def test_arm_add_prices_the_pairs_the_pool_stage_then_adds(changed):
    pool, before = changed["pool"], changed["pool_before"]
    new = set(zip(pool.query_id, pool.chunk_id)) - set(zip(before.query_id, before.chunk_id))
    assert new and len(pool) == len(before) + len(new)
    audited = sum(q in changed["audit"] for q, _ in new)
    audited_before = sum(q in changed["audit"] for q in before.query_id)
    out = changed["added"].stdout.splitlines()
    assert out[0] == (f"Added arm fused (rrf) to {EXP}/params.yaml; rendered {EXP}/dvc.yaml.")
    # priced with both new arms' runs made in memory (lex's is not made yet either)
    assert out[1] == (f"Pending: the pool with fused holds {len(pool)} pairs, {len(new)} of "
                      f"them new (today {len(before)}).")
    # each grader's line names who works (a model is priced in calls, a person in hours) and
    # what it has spent: a grade of each pair of the pool before, the auditor's of the audit
    lines = "\n".join(out)
    assert re.search(rf"^  grader-a \((model|person)\): {len(before)} spent, {len(new)} pending "
                     "at ", lines, re.M), lines
    assert re.search(rf"^  auditor-b \((model|person)\): {audited_before} spent, {audited} "
                     "pending at ", lines, re.M), lines
    assert out[-1].startswith(f"Next: dvc repro {EXP}/dvc.yaml (it stops at the grading owed")


def test_repro_after_arm_add_stops_at_the_grading_owed_then_completes(changed):
    line, pool, before = changed["line"], changed["pool"], changed["pool_before"]
    new = len(pool) - len(before)
    assert changed["owed"].returncode != 0
    assert line.startswith(f"Pending: grading: {new} pairs need grader-a ({new} new)")
    assert _printed(line, "relgrade ") == [
        f"relgrade grade run --grader grader-a --experiment {EXP}",
        f"relgrade grade run --grader auditor-b --experiment {EXP}"]
    assert f"`dvc repro {EXP}/dvc.yaml` again (at the repository's top; `dvc repro` in {EXP})" \
        in line
    assert changed["done"].returncode == 0, changed["done"].stderr
    report = (changed["root"] / EXP / "metrics/report.md").read_text()
    assert " fused " in report and " lex " in report


def test_the_loop_through_dvc_exp_run_completes_from_the_experiments_folder(changed):
    owed, line = changed["exp_owed"], changed["exp_line"]
    assert owed.returncode != 0 and "Traceback" not in owed.stderr
    assert line.startswith("Pending: grading: ") and "need grader-a" in line
    assert "then `dvc exp run` again (in the folder you ran it in)" in line
    assert _printed(line, "relgrade ")[0] == (
        f"relgrade grade run --grader grader-a --experiment {EXP}")
    done = changed["exp_done"]
    assert done.returncode == 0, done.stdout + done.stderr
    # one experiment recorded, once the grading was done (DVC's own exec refs aside)
    assert len([r for r in changed["exps"] if "refs/exps/exec/" not in r]) == 1
    report = (changed["root"] / EXP / "metrics/report.md").read_text()
    assert " dense " in report


def test_metrics_exp_shows_the_recorded_experiment_in_80_columns(changed):
    ex = changed["root"] / EXP
    lines = changed["exp_table"].stdout.splitlines()
    assert max(len(x) for x in lines) <= 80, lines
    revisions = changed["exp_json"]["revisions"]
    # the workspace, the commit and the experiment `dvc exp run` recorded on it
    named = [r["rev"] for r in revisions]
    assert named[0] == "workspace" and len(named) == 3, named
    recorded = revisions[2]
    assert recorded["commit"] in " ".join(changed["exps"])
    decision = {p.stem: json.loads(p.read_text()) for p in (ex / "metrics/decision").glob("*.json")}
    # the experiment's row holds the decision files it made (the workspace holds the same)
    assert {a: v["mean"] for a, v in recorded["arms"].items()} == {
        a: d["mean"] for a, d in decision.items()}
    assert "dense" in recorded["arms"] and "dense" not in revisions[1]["arms"]
    # every arm appears under a header, in blocks that repeat the revision column
    headers = [x.split()[1:] for x in lines if x.startswith("rev ")]
    assert sorted(a for h in headers for a in h) == sorted(decision)
    rows = [x for x in lines if x.startswith(recorded["rev"][:24] + " ")]
    baseline = next(d["baseline"] for d in decision.values() if d.get("baseline"))
    assert f"{decision[baseline]['mean']:.3f}" in rows[0]


def test_lines_read_at_the_top_name_the_experiment_s_files_from_the_top(second):
    # the stages run in experiments/second under DVC; their lines are read where the
    # `dvc repro experiments/second/dvc.yaml` was typed
    root, *_, printed = second
    record = json.loads((root / EXP / "data/key/record.json").read_text())
    assert printed["review"].rstrip().endswith(
        f"wrote {EXP}/data/input/intents.review.json")
    assert (f"key {record['key_sha256']} (fresh) in {EXP}/data/key/key.jsonl: "
            f"{record['pairs']} pairs" in printed["repro"])
