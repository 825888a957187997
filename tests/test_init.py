"""`relgrade init`: a new experiment's folder, its inputs, and the bad input it refuses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.errors import InputError
from relgrade.pipeline.design import FILL_IN, unfilled
from relgrade.experiment.inputs import beir_corpus, beir_queries
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import (check_disjoint, check_name, claimed_paths,
                                        experiment_folders)
from relgrade.pipeline.new_arms import work_params
from tests.e2e import tiny

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with the pipeline and stage folder, and the tiny experiment's inputs."""
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "stages").mkdir()
    inp = tmp_path / "in"
    (inp / "runs").mkdir(parents=True)
    (inp / "chunks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in tiny.chunks()))
    (inp / "queries.tsv").write_text("query_id\tquery\tgroup\n" + "".join(
        f"{q}\t{text}\t{g}\n" for q, g, text, _ in tiny.TOPICS))
    (inp / "intents.tsv").write_text("query_id\tquery\tintent\n" + "".join(
        f"{q}\t{text}\t{intent}\n" for q, _, text, intent in tiny.TOPICS))
    (inp / "runs" / "ext.trec").write_text("".join(
        f"{q} Q0 {c} {r} {s} x\n" for r, (q, c, s) in enumerate(tiny.runs()["lexical"], 1)))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def init(*args, folder="experiments/second"):
    base = ["init", folder, "--corpus", "in/chunks.jsonl", "--queries", "in/queries.tsv",
            "--intents", "in/intents.tsv"]
    return CliRunner().invoke(cli, [*base, *args])


def test_init_writes_params_pipeline_rubric_inputs_and_design(repo):
    res = init("--arm", "bm25=bm25", "--arm", "hyb=rrf:bm25,ext", "--run", "ext=in/runs/ext.trec",
               "--pool-depth", "3", "--audit-min", "4")
    assert res.exit_code == 0, res.output
    ex = repo / "experiments/second"
    files = sorted(p.relative_to(ex).as_posix() for p in ex.rglob("*") if p.is_file())
    assert [f for f in files if not f.endswith("/.gitignore")] == [
        "DESIGN.md", "data/grades/.gitkeep", "data/input/chunks.jsonl",
        "data/input/intents.review.json", "data/input/intents.tsv", "data/input/queries.tsv",
        "data/input/runs/ext.trec",
        "dvc.yaml", "params.yaml", "rubric/CHANGELOG.md", "rubric/v1.md"]
    # each cached output is ignored from the start (tests/test_e2e_init.py checks dvc agrees)
    assert [f for f in files if f.endswith("/.gitignore")] == [
        "data/.gitignore", *[f"data/{d}/.gitignore" for d in (
        "corpus", "graded", "intents", "metrics", "orders", "pool", "private", "queries",
        "runs")]]
    assert (ex / "data/metrics/.gitignore").read_text() == "/bm25.parquet\n/hyb.parquet\n/ext.parquet\n"
    params = yaml.safe_load((ex / "params.yaml").read_text())
    assert params["arms"] == {
        "bm25": {"kind": "bm25", "depth": 100, "source": "../../src/relgrade/retrieve/bm25.py"},
        "hyb": {"kind": "rrf", "depth": 100, "k": 60, "fuse": ["bm25", "ext"],
                "source": "../../src/relgrade/retrieve/fusion.py"},
        "ext": {"kind": "file", "depth": 100, "source": "data/input/runs/ext.trec"}}
    assert params["queries"] == {"input": "data/input/queries.tsv",
                                 "groups": ["keyword", "question"]}
    assert params["pool"]["depth"] == 3 and params["audit"]["min_queries"] == 4
    assert params["metrics"]["baseline"] == "bm25"
    assert params["cost"] == {"seconds_per_judgment": 30}
    assert params["graders"] == {
        "grader-a": {"role": "grader", "kind": "human", "family": "human"},
        "auditor-b": {"role": "auditor", "kind": "human", "family": "human"}}
    pipeline = yaml.safe_load((ex / "dvc.yaml").read_text())
    pool = pipeline["stages"]["pool"]
    assert pool["cmd"] == "python ../../stages/pool.py"
    # the registry's rendering: the entry script, then the stage module's import closure
    assert pool["deps"][:2] == ["../../stages/pool.py", "../../src/relgrade/__init__.py"]
    assert "../../src/relgrade/protocol/pool.py" in pool["deps"]
    assert "${paths.runs}" in pool["deps"]
    assert pipeline["stages"]["retrieve"]["do"]["cmd"] == "python ../../stages/retrieve.py ${key}"
    # hyb fuses the file arm ext: every retrieve stage reads ext's run
    assert pipeline["stages"]["retrieve"]["do"]["deps"][-1] == "data/input/runs/ext.trec"
    assert set(pipeline["stages"]) == set(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"])
    rubric = (ex / "rubric/v1.md").read_text()
    assert "click" not in rubric.lower()
    assert rubric.startswith("version: v1\n") and FILL_IN in rubric
    design = (ex / "DESIGN.md").read_text()
    assert design.startswith("# Design record: second\n")
    assert unfilled(design) == ["question", "corpus", "graders", "deviations"]
    assert "- `ext`: file, depth 100, from `data/input/runs/ext.trec`" in design


def test_the_init_rubrics_query_forms_and_boundary_cases_are_cases_a_revision_keeps_apart(repo):
    # a revision of one case of the rubric relgrade init writes leaves current the grades that
    # name another case: only those naming it, or naming none, are graded again
    import hashlib

    import pandas as pd

    from relgrade.protocol import bank
    from relgrade.protocol import rubric as rb

    assert init("--arm", "bm25=bm25").exit_code == 0
    text = (repo / "experiments/second/rubric/v1.md").read_text()
    v1 = rb.parse(text)
    assert v1.front["version"] == "v1"
    assert [s for s, sec in v1.sections.items() if not sec.general] == [
        "query-forms", "where", "how", "why", "which-or-what", "boundary-cases",
        "right-subject-wrong-aspect", "neighbouring-question",
        "header-only-or-table-of-contents", "duplicates", "split-answer",
        "primary-text-example-or-commentary", "outdated-text"]
    v2_text = text.replace("version: v1\n", "version: v2\nrevises: v1\nchanges: duplicates\n",
                           1).replace("never lower one because", "never grade one lower because")
    v2 = rb.parse(v2_text)
    rb.check_revision(v1, v2, source="rubric/v2.md", old_source="rubric/v1.md")
    sha1, sha2 = (hashlib.sha256(t.encode()).hexdigest() for t in (text, v2_text))
    carry = rb.carry([(sha2, v2, "rubric/v2.md"), (sha1, v1, "rubric/v1.md")])
    reasons = ["§neighbouring-question answers how to install, not where", "§where the module "
               "defining it", "§duplicates same text as another chunk", "no case named"]
    grades = pd.DataFrame({"query_id": "q", "chunk_id": [f"c{i}" for i in range(4)],
                           "reason": reasons, "rubric_sha256": sha1, "content_sha256": "h",
                           "intent_sha256": "i", "grader": "g"})
    status = bank.currency(grades, content=pd.Series({f"c{i}": "h" for i in range(4)}),
                           intents=pd.Series({"q": "i"}), rubric_sha256=sha2, carry=carry)
    assert status.tolist() == ["current", "current", "rubric", "rubric"]


def test_init_refuses_a_folder_that_is_not_empty_unless_forced(repo):
    (repo / "experiments/second").mkdir(parents=True)
    (repo / "experiments/second/notes.txt").write_text("mine")
    res = init("--arm", "bm25=bm25")
    assert res.exit_code == 1
    assert res.output == ("Error: experiments/second: the folder is not empty. Choose a new "
                          "folder, or pass --force to replace it\n")
    assert (repo / "experiments/second/notes.txt").read_text() == "mine"
    res = init("--arm", "bm25=bm25", "--force")
    assert res.exit_code == 0, res.output
    assert not (repo / "experiments/second/notes.txt").exists()
    assert (repo / "experiments/second/params.yaml").is_file()


@pytest.mark.parametrize("name", ["a\\b", "..", "-lead", "sp ace"])
def test_experiment_name_must_be_one_plain_path_segment(name):
    with pytest.raises(InputError):
        check_name(name)


def test_experiment_name_with_a_path_separator_is_refused_naming_it():
    with pytest.raises(InputError) as e:
        check_name("a/b")
    assert str(e.value) == ("an experiment name is one path segment; it holds a path separator "
                            "(found 'a/b'). Give the experiment's folder, e.g. experiments/NAME")
    assert check_name("httpx_2.0-bm25") == "httpx_2.0-bm25"


def test_init_takes_a_nested_folder_whose_last_segment_is_the_name(repo):
    res = init("--arm", "bm25=bm25", folder="experiments/2026/httpx")
    assert res.exit_code == 0, res.output
    assert (repo / "experiments/2026/httpx/DESIGN.md").read_text().startswith(
        "# Design record: httpx\n")
    pipeline = yaml.safe_load((repo / "experiments/2026/httpx/dvc.yaml").read_text())
    assert pipeline["stages"]["pool"]["cmd"] == "python ../../../stages/pool.py"


def test_init_refuses_a_folder_name_with_a_backslash_and_writes_nothing(repo):
    res = init("--arm", "bm25=bm25", folder="experiments/a\\b")
    assert res.exit_code == 1
    assert "an experiment name is one path segment; it holds a path separator" in res.output
    assert not (repo / "experiments").exists()


def test_arm_name_with_a_path_separator_is_refused(repo):
    res = init("--run", "a/b=in/runs/ext.trec")
    assert res.exit_code == 1
    assert res.output.startswith("Error: --run: an arm name starts with a letter or digit")


def test_run_with_chunks_not_in_the_corpus_names_the_first_few_and_writes_nothing(repo):
    (repo / "in/runs/bad.trec").write_text(
        "kw01 Q0 kw01-answer 1 3.0 x\nkw01 Q0 nope-1 2 2.0 x\nkw01 Q0 nope-2 3 1.0 x\n"
        "kw02 Q0 nope-1 1 1.0 x\n")
    res = init("--run", "bad=in/runs/bad.trec")
    assert res.exit_code == 1
    # nope-1 is the chunk of the file's second line: the error names that line, as the
    # duplicate-chunk check does.
    assert res.output == ("Error: in/runs/bad.trec:2: query kw01, chunk nope-1: unknown chunk id "
                          "(found 3 row(s) name chunks that are not in the corpus, first "
                          "nope-1, nope-2)\n")
    assert not (repo / "experiments").exists() or not any((repo / "experiments").iterdir())


def test_beir_corpus_and_queries_are_converted(repo):
    (repo / "in/corpus.jsonl").write_text("".join(
        json.dumps({"_id": c["chunk_id"], "title": c["header"], "text": c["text"]}) + "\n"
        for c in tiny.chunks()))
    (repo / "in/queries.jsonl").write_text("".join(
        json.dumps({"_id": q, "text": text, "metadata": {"group": g}}) + "\n"
        for q, g, text, _ in tiny.TOPICS))
    res = CliRunner().invoke(cli, ["init", "experiments/beir", "--corpus", "in/corpus.jsonl",
                                   "--queries", "in/queries.jsonl", "--intents",
                                   "in/intents.tsv", "--arm", "bm25=bm25"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in
            (repo / "experiments/beir/data/input/chunks.jsonl").read_text().splitlines()]
    first = tiny.chunks()[0]
    assert rows[0] == {"chunk_id": first["chunk_id"], "header": first["header"],
                       "text": first["text"], "source": "corpus.jsonl"}
    assert len(rows) == 48
    tsv = (repo / "experiments/beir/data/input/queries.tsv").read_text().splitlines()
    assert tsv[0] == "query_id\tquery\tgroup"
    assert tsv[1] == "kw01\tcache eviction\tkeyword"


def test_beir_corpus_line_without_id_is_refused_naming_the_line(repo):
    (repo / "in/corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "", "text": "a"}) + "\n"
        + json.dumps({"title": "t", "text": "b"}) + "\n")
    res = CliRunner().invoke(cli, ["init", "experiments/beir", "--corpus", "in/corpus.jsonl",
                                   "--queries", "in/queries.tsv", "--intents",
                                   "in/intents.tsv", "--arm", "bm25=bm25"])
    assert res.exit_code == 1
    assert res.output == ("Error: in/corpus.jsonl:2: a BEIR corpus line needs `_id` "
                          "(found text, title)\n")
    assert not (repo / "experiments/beir").exists()


def test_beir_queries_without_group_fall_in_group_all():
    table = beir_queries([(1, {"_id": 7, "text": "why x"}), (2, {"_id": "b", "text": "y"})])
    assert table.values.tolist() == [["7", "why x", "all"], ["b", "y", "all"]]
    with pytest.raises(InputError, match="q.jsonl:1: a BEIR queries line needs `text`"):
        beir_queries([(1, {"_id": "a"})], path="q.jsonl")


def test_beir_corpus_without_title_gets_an_empty_header():
    table = beir_corpus([(1, {"_id": "d1", "text": "body"})], path="c.jsonl")
    assert table.to_dict("records") == [{"chunk_id": "d1", "header": "", "text": "body",
                                         "source": "c.jsonl"}]


def test_two_experiments_claiming_the_same_output_folder_are_refused(repo):
    assert init("--arm", "bm25=bm25", folder="experiments/a").exit_code == 0
    params_a = repo / "experiments/a/params.yaml"
    text = params_a.read_text().replace("  key: data/key/key.jsonl",
                                        "  key: ../b/data/key/key.jsonl")
    params_a.write_text(text)
    res = init("--arm", "bm25=bm25", folder="experiments/b")
    assert res.exit_code == 1
    b_key = (repo / "experiments/b/data/key/key.jsonl").resolve()
    assert res.output == (
        f"Error: {(repo / 'experiments/b').resolve() / 'params.yaml'}: paths.key: two "
        f"experiments claim the same output folder (found {b_key} (also paths.key of "
        f"{(repo / 'experiments/a').resolve()})). Keep every path of an experiment inside its "
        "own folder\n")
    assert not (repo / "experiments/b").exists()


def test_claims_inside_each_other_overlap_and_sibling_folders_do_not(tmp_path):
    a = claimed_paths(tmp_path / "a", {"publish": "data/publish", "key": "data/key/key.jsonl"})
    b = claimed_paths(tmp_path / "b", {"publish": "data/publish"})
    check_disjoint({tmp_path / "a": a, tmp_path / "b": b})
    inside = claimed_paths(tmp_path / "b", {"grades": "../a/data/publish/x.parquet"})
    with pytest.raises(InputError, match="paths.grades: two experiments claim the same output"):
        check_disjoint({tmp_path / "a": a, tmp_path / "b": inside})


def test_init_outside_a_repository_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["init", "experiments/x", "--corpus", "c.jsonl", "--queries",
                                   "q.tsv", "--intents", "i.tsv"])
    assert res.exit_code == 1
    assert "not inside a relgrade repository" in res.output


def test_rrf_arm_without_a_list_fuses_every_other_arm(repo):
    res = init("--arm", "bm25=bm25", "--arm", "tfidf=tfidf", "--arm", "all=rrf",
               "--run", "ext=in/runs/ext.trec", "--baseline", "tfidf")
    assert res.exit_code == 0, res.output
    params = yaml.safe_load((repo / "experiments/second/params.yaml").read_text())
    assert params["arms"]["all"]["fuse"] == ["bm25", "tfidf", "ext"]
    assert params["metrics"]["baseline"] == "tfidf"


def test_command_graders_are_declared_as_model_graders(repo):
    res = init("--arm", "bm25=bm25", "--grader-command", "python g.py", "--auditor", "aud",
               "--auditor-command", "python a.py")
    assert res.exit_code == 0, res.output
    params = yaml.safe_load((repo / "experiments/second/params.yaml").read_text())
    assert params["graders"] == {
        "grader-a": {"role": "grader", "kind": "model", "command": "python g.py"},
        "aud": {"role": "auditor", "kind": "model", "command": "python a.py"}}
    assert params["grading"]["auditor"] == "aud"


def test_a_pypi_source_spec_is_copied(repo):
    shutil.copy(REPO / "data/input/corpus.source.yaml", repo / "in/corpus.source.yaml")
    res = CliRunner().invoke(cli, ["init", "experiments/click2", "--corpus",
                                   "in/corpus.source.yaml", "--queries", "in/queries.tsv",
                                   "--intents", "in/intents.tsv", "--arm", "bm25=bm25"])
    assert res.exit_code == 0, res.output
    ex = repo / "experiments/click2"
    assert (ex / "data/input/corpus.source.yaml").read_bytes() == (
        REPO / "data/input/corpus.source.yaml").read_bytes()
    assert yaml.safe_load((ex / "params.yaml").read_text())["corpus"] == {
        "input": "data/input/corpus.source.yaml"}


def test_a_run_over_a_source_spec_is_checked_against_the_corpus_built_in_memory(repo):
    from relgrade.pipeline.stages.corpus import build_corpus
    from tests.test_corpus_cli import _sdist

    spec = _sdist(repo / "in")
    known = build_corpus(spec)[0]["chunk_id"].iat[0]
    (repo / "in/runs/good.trec").write_text(f"kw01 Q0 {known} 1 1.0 x\n")
    (repo / "in/runs/bad.trec").write_text(f"kw01 Q0 {known} 1 1.0 x\nkw01 Q0 nope 2 0.5 x\n")
    base = ["init", "--corpus", "in/pkg.source.yaml", "--queries", "in/queries.tsv",
            "--intents", "in/intents.tsv"]
    res = CliRunner().invoke(cli, [base[0], "experiments/bad", *base[1:],
                                   "--run", "mine=in/runs/bad.trec"])
    assert res.exit_code == 1
    assert "unknown chunk id" in res.output and "nope" in res.output
    assert not (repo / "experiments/bad").exists()
    res = CliRunner().invoke(cli, [base[0], "experiments/good", *base[1:],
                                   "--run", "mine=in/runs/good.trec"])
    assert res.exit_code == 0, res.output


def test_fewer_queries_than_the_audit_minimum_audit_every_query_as_a_recorded_deviation(repo):
    res = init("--arm", "bm25=bm25", "--audit-min", "20")
    assert res.exit_code == 0, res.output
    params = yaml.safe_load((repo / "experiments/second/params.yaml").read_text())
    line = ("audit.min_queries is 12, every query: the experiment has 12 queries, fewer "
            "than the 20 the audit asks for")
    assert params["audit"]["min_queries"] == 12
    assert params["grading"]["deviations"] == [line]
    assert f"Note (recorded in params grading.deviations): {line}\n" in res.output


def test_a_local_sdist_spec_brings_its_archive_along(repo):
    (repo / "in/pkg-1.0.tar.gz").write_bytes(b"not really an archive")
    (repo / "in/local.yaml").write_text(
        "kind: sdist-file\npath: pkg-1.0.tar.gz\nsha256: '" + "a" * 64 + "'\n")
    res = CliRunner().invoke(cli, ["init", "experiments/local", "--corpus", "in/local.yaml",
                                   "--queries", "in/queries.tsv", "--intents",
                                   "in/intents.tsv", "--arm", "bm25=bm25"])
    assert res.exit_code == 0, res.output
    inp = repo / "experiments/local/data/input"
    assert (inp / "pkg-1.0.tar.gz").read_bytes() == b"not really an archive"
    assert yaml.safe_load((inp / "corpus.source.yaml").read_text()) == {
        "kind": "sdist-file", "path": "pkg-1.0.tar.gz", "sha256": "a" * 64}


def test_a_parquet_chunks_corpus_is_copied_and_checked(repo):
    import pandas as pd

    pd.DataFrame(tiny.chunks()).to_parquet(repo / "in/chunks.parquet", index=False)
    res = CliRunner().invoke(cli, ["init", "experiments/pq", "--corpus", "in/chunks.parquet",
                                   "--queries", "in/queries.tsv", "--intents",
                                   "in/intents.tsv", "--run", "ext=in/runs/ext.trec"])
    assert res.exit_code == 0, res.output
    assert (repo / "experiments/pq/data/input/chunks.parquet").read_bytes() == (
        repo / "in/chunks.parquet").read_bytes()


def test_a_corpus_line_or_row_without_chunk_id_is_refused_as_missing_naming_where(repo):
    import pandas as pd

    chunks = tiny.chunks()[:3]
    lines = [json.dumps(c) for c in chunks]
    lines[1] = json.dumps({k: v for k, v in chunks[1].items() if k != "chunk_id"})
    (repo / "in/chunks.jsonl").write_text("\n".join(lines) + "\n")
    res = init("--run", "ext=in/runs/ext.trec")
    assert res.exit_code == 1
    assert res.output == "Error: in/chunks.jsonl:2: chunk_id is missing: every chunk needs one\n"
    table = pd.DataFrame(chunks)
    table.loc[2, "chunk_id"] = None
    table.to_parquet(repo / "in/chunks.parquet", index=False)
    res = CliRunner().invoke(cli, ["init", "experiments/pq", "--corpus", "in/chunks.parquet",
                                   "--queries", "in/queries.tsv", "--intents",
                                   "in/intents.tsv", "--run", "ext=in/runs/ext.trec"])
    assert res.exit_code == 1
    assert res.output == ("Error: in/chunks.parquet: row 3: chunk_id is missing: every chunk "
                          "needs one\n")
    assert not (repo / "experiments").exists() or not any((repo / "experiments").iterdir())


def test_init_refuses_a_chunk_with_empty_text_with_the_corpus_stage_s_rule_naming_its_option(
        repo):
    import pandas as pd

    from relgrade.pipeline.stages.corpus import build_corpus

    chunks = tiny.chunks()
    chunks[3]["text"], chunks[7]["text"] = "  \n", ""
    (repo / "in/chunks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
    pd.DataFrame(chunks).to_parquet(repo / "in/chunks.parquet", index=False)
    (repo / "in/beir.jsonl").write_text("".join(
        json.dumps({"_id": c["chunk_id"], "text": c["text"]}) + "\n" for c in chunks))
    for corpus, where in (("in/chunks.jsonl", ":4"), ("in/chunks.parquet", ""),
                          ("in/beir.jsonl", ":4")):
        res = CliRunner().invoke(cli, ["init", "experiments/e", "--corpus", corpus,
                                       "--queries", "in/queries.tsv", "--intents",
                                       "in/intents.tsv", "--run", "ext=in/runs/ext.trec"])
        assert res.exit_code == 1, res.output
        # the first blank chunk (line 4, kw01-miss2), how many there are (2), and init's
        # option that keeps them
        rule = (f"Error: {corpus}{where}: kw01-miss2: chunk text is empty (found 2 chunks "
                "with empty or blank text). Remove those chunks, or ")
        assert res.output == rule + (
            "run relgrade init again with --allow-empty to keep them (params "
            "corpus.allow_empty: true; they are then counted in the corpus manifest)\n")
        assert not (repo / "experiments").exists() or not any((repo / "experiments").iterdir())
        if corpus != "in/beir.jsonl":  # the stage reads chunks files (init converts BEIR)
            with pytest.raises(InputError) as stage:
                build_corpus(corpus)
            assert f"Error: {stage.value}\n" == rule + (
                "set corpus.allow_empty: true to keep them (they are then counted in the "
                "corpus manifest)\n")


@pytest.mark.parametrize("corpus", ["in/chunks.jsonl", "in/chunks.parquet", "in/beir.jsonl"])
def test_init_allow_empty_keeps_chunks_with_empty_text_and_the_corpus_stage_counts_them(
        repo, corpus):
    import pandas as pd

    from relgrade.pipeline.stages import corpus as corpus_stage

    chunks = tiny.chunks()
    chunks[3]["text"], chunks[7]["text"] = "  \n", ""
    (repo / "in/chunks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
    pd.DataFrame(chunks).to_parquet(repo / "in/chunks.parquet", index=False)
    (repo / "in/beir.jsonl").write_text("".join(
        json.dumps({"_id": c["chunk_id"], "text": c["text"]}) + "\n" for c in chunks))
    res = CliRunner().invoke(cli, ["init", "experiments/e", "--corpus", corpus, "--queries",
                                   "in/queries.tsv", "--intents", "in/intents.tsv", "--run",
                                   "ext=in/runs/ext.trec", "--allow-empty"])
    assert res.exit_code == 0, res.output
    params = yaml.safe_load((repo / "experiments/e/params.yaml").read_text())
    assert params["corpus"]["allow_empty"] is True
    # the corpus stage depends on the flag, so editing it by hand reruns the stage
    stages = yaml.safe_load((repo / "experiments/e/dvc.yaml").read_text())["stages"]
    assert stages["corpus"]["params"] == ["corpus.input", "corpus.allow_empty"]
    # the corpus stage, run on the experiment init wrote, keeps both and counts them
    ex = Experiment.load(repo / "experiments/e/params.yaml")
    corpus_stage.run(ex)
    manifest = json.loads(ex.path("corpus_manifest").read_text())
    assert manifest["chunks"] == 48 and manifest["empty_chunks"] == 2


def test_init_without_allow_empty_writes_no_allow_empty_key(repo):
    assert init("--run", "ext=in/runs/ext.trec").exit_code == 0
    params = yaml.safe_load((repo / "experiments/second/params.yaml").read_text())
    assert params["corpus"] == {"input": "data/input/chunks.jsonl"}
    # DVC refuses a listed params key that params.yaml lacks: the stage does not list it
    stages = yaml.safe_load((repo / "experiments/second/dvc.yaml").read_text())["stages"]
    assert stages["corpus"]["params"] == ["corpus.input"]


def test_init_refuses_a_click_log_the_click_stages_refuse_with_their_message(repo):
    from relgrade.clicks import engine, simulate

    log = simulate.position_based_log(7, sessions=40, queries=4, positions=3, rankers=1,
                                      randomized_share=0.3).log
    log.to_parquet(repo / "in/log.parquet", index=False)
    fine = CliRunner().invoke(cli, ["init", "experiments/c", "--mode", "clicks",
                                    "--click-log", "in/log.parquet"])
    assert fine.exit_code == 0, fine.output
    # the second impression of the first session at position 0
    log.loc[1, "position"] = 0
    log.to_parquet(repo / "in/odd.parquet", index=False)
    res = CliRunner().invoke(cli, ["init", "experiments/d", "--mode", "clicks",
                                   "--click-log", "in/odd.parquet"])
    assert res.exit_code == 1
    session = log.loc[1, "session_id"]
    assert res.output == (
        f"Error: in/odd.parquet: session {session}: position must be a whole number of at "
        "least 1 (found 0). 1 row(s) break this rule\n")
    # the propensity stage's own reading of the log, word for word
    runner = engine.get("duckdb")
    with pytest.raises(InputError) as stage:
        with runner.errors("in/odd.parquet"):
            runner.open_log("in/odd.parquet")
    assert res.output == f"Error: {stage.value}\n"
    assert not (repo / "experiments/d").exists()


def test_another_experiment_with_sections_unknown_here_is_read_for_its_paths_only(repo):
    other = repo / "experiments/clicks-sim"
    other.mkdir(parents=True)
    (other / "params.yaml").write_text(yaml.safe_dump(
        {"clicks": {"sessions": 1000}, "paths": {"out": "data/out"}}))
    res = init("--arm", "bm25=bm25")
    assert res.exit_code == 0, res.output


# --- names and values reach params.yaml through the YAML serializer -----------------------

@pytest.mark.parametrize("option, value", [
    ("--grader", "grader-a\n  share_from: [/etc]"),
    ("--auditor", "b: {share_from: [/tmp]}"),
    ("--grader", "-leading-dash"),
    ("--auditor", "with space"),
    ("--grader", ".."),
])
def test_init_refuses_a_grader_name_that_is_not_a_plain_word(repo, option, value):
    res = init("--arm", "bm25=bm25", option, value)
    assert res.exit_code == 1
    assert res.output == (f"Error: {option}: a name starts with a letter or digit and holds "
                          "only letters, digits, '.', '_' and '-' (found "
                          f"{value!r}). Choose a plain name such as grader-a or bm25\n")
    assert not (repo / "experiments/second").exists()


def test_init_refuses_an_arm_name_that_is_not_a_plain_word(repo):
    res = init("--arm", "a/b=bm25")
    assert res.exit_code == 1
    assert "--arm: an arm name starts with a letter or digit" in res.output
    assert not (repo / "experiments/second").exists()


@pytest.mark.parametrize("value", [
    "grader-a", "x\n  share_from: [/etc]", "a: b", "# comment", "'quoted'", '"dq"', "yes",
    "null", "1.5", "- item", "{a: 1}", "tab\there", "é ünïcode", 7, 0.25, True, None,
    ["a", "b: c"], {"head": 1, "tail": "x\ny"},
])
def test_every_value_written_by_init_reads_back_as_one_value(value):
    from relgrade.pipeline.scaffold import yaml_value

    text = f"grading:\n  key_grader: {yaml_value(value)}\n  auditor: auditor-b\n"
    assert yaml.safe_load(text) == {"grading": {"key_grader": value, "auditor": "auditor-b"}}


def test_init_writes_plain_names_unquoted(repo):
    assert init("--arm", "bm25=bm25", "--grader", "g.1_x-y").exit_code == 0
    text = (repo / "experiments/second/params.yaml").read_text()
    assert "  key_grader: g.1_x-y\n" in text
    assert yaml.safe_load(text)["graders"]["g.1_x-y"]["role"] == "grader"


def test_an_unreviewed_intent_table_is_pending_work_naming_the_review_command(repo, capsys):
    # init writes a review record that signs nothing: the intents stage (as DVC runs it,
    # every dep present) stops with the command to run, not with a missing-file error
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.stage import run_stage
    from relgrade.pipeline.stages import intents, queries

    assert init("--arm", "bm25=bm25").exit_code == 0
    ex_dir = repo / "experiments/second"
    assert json.loads((ex_dir / "data/input/intents.review.json").read_text()) == {
        "reviewer": None, "table_sha256": None, "reviewed_at": None, "flagged": []}
    queries.run(Experiment.load(ex_dir / "params.yaml"))
    with pytest.raises(SystemExit) as stop:
        run_stage(intents.run, params_path=ex_dir / "params.yaml")
    assert stop.value.code == 3
    err = capsys.readouterr().err
    # every path and command as typed at the repository's top
    assert err.startswith("Pending: experiments/second/data/input/intents.review.json: the "
                          "intent table is not "
                          "reviewed yet; intents are frozen only after review. run `relgrade "
                          "intents review --experiment experiments/second --reviewer auditor-b`"
                          ", then `dvc repro experiments/second/dvc.yaml` again")


def test_a_rater_panel_draws_a_tenth_of_the_pool_as_gold_unless_told(repo):
    gold = repo / "in" / "gold.tsv"
    gold.write_text("query_id\tchunk_id\tgrade\nkw01\tkw01-answer\t2\n")
    panel = ["--arm", "bm25=bm25", "--mode", "raters", "--gold", str(gold),
             *[a for i in range(1, 5) for a in ("--rater", f"rater-{i}")]]
    assert init(*panel).exit_code == 0
    params = yaml.safe_load((repo / "experiments/second/params.yaml").read_text())
    assert params["gold"]["fraction"] == 0.1
    assert init(*panel, "--gold-fraction", "0.25", folder="experiments/third").exit_code == 0
    params = yaml.safe_load((repo / "experiments/third/params.yaml").read_text())
    assert params["gold"]["fraction"] == 0.25
    res = init(*panel, "--gold-fraction", "0.6", folder="experiments/fourth")
    assert res.exit_code == 1
    assert res.output == ("Error: --gold-fraction: the gold share of the pool is in (0, 0.5] "
                          "(found 0.6)\n")
    assert not (repo / "experiments/fourth").exists()


@pytest.mark.parametrize("rows, said", [
    ("query_id\tchunk_id\tgrade\nkw01\tkw01-answer\t5\n",
     "a gold grade is off the scale 0, 1, 2 (found 5)"),
    ("query_id\tchunk_id\nkw01\tkw01-answer\n",
     "the gold table lacks column(s) grade (found columns query_id, chunk_id)"),
    ("query_id\tchunk_id\tgrade\nkw01\tkw01-answer\t2\nkw01\tkw01-answer\t1\n",
     "pair (kw01, kw01-answer): the gold table lists a pair twice. Keep one known grade per "
     "pair"),
    ("query_id\tchunk_id\tgrade\nkw01\tkw01-answer\ttwo\n",
     "a gold grade must be a whole number (found 'two')"),
    ("query_id\tchunk_id\tgrade\nzz99\tkw01-answer\t1\n",
     "pair (zz99, kw01-answer): a gold pair is not in the pool (found query zz99 is not one "
     "of the experiment's queries). Gold questions are pool pairs with a known grade"),
])
def test_init_refuses_a_gold_file_the_packets_stage_would_refuse(repo, rows, said):
    gold = repo / "in" / "gold.tsv"
    gold.write_text(rows)
    res = init("--arm", "bm25=bm25", "--mode", "raters", "--gold", str(gold),
               *[a for i in range(1, 5) for a in ("--rater", f"rater-{i}")])
    assert res.exit_code == 1
    lines = res.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {gold}: "), res.output
    assert said in lines[0]
    assert not (repo / "experiments/second").exists()


def test_the_gold_rules_at_init_are_the_packets_stages():
    # the same function and messages: a pool pair off the scale is refused alike
    import pandas as pd

    from relgrade.raters.assign import check_panel_gold

    gold = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["c1"], "grade": [5]})
    pool = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["c1"]})
    with pytest.raises(InputError) as staged:
        check_panel_gold(gold, pool=pool, scale=[0, 1, 2], path="g.tsv")
    with pytest.raises(InputError) as early:
        check_panel_gold(gold, pool=None, scale=[0, 1, 2], path="g.tsv")
    assert str(staged.value) == str(early.value) == (
        "g.tsv: pair (q1, c1): a gold grade is off the scale 0, 1, 2 (found 5)")


def test_init_declares_the_holes_paths_so_a_new_arm_needs_only_the_holes_section(repo):
    res = init("--run", "ext=in/runs/ext.trec", "--grader-command", "python grade.py")
    assert res.exit_code == 0, res.output
    ex = repo / "experiments/second"
    params = yaml.safe_load((ex / "params.yaml").read_text())
    assert (params["paths"]["holes"], params["paths"]["holes_work"]) == (
        "metrics/holes.json", "data/holes")
    # the user's one step: the holes section (its run file beside the others), then render
    shutil.copy(repo / "in/runs/ext.trec", ex / "data/input/runs/late.trec")
    params["holes"] = {"arms": {"late": {"kind": "file", "depth": 10,
                                         "source": "data/input/runs/late.trec"}},
                       "model_grader": "grader-a", "human_grader": "auditor-b",
                       "human_fraction": 0.5}
    (ex / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = CliRunner().invoke(cli, ["pipeline", "render", "--experiment", "experiments/second"])
    assert res.exit_code == 0, res.output
    stage = yaml.safe_load((ex / "dvc.yaml").read_text())["stages"]["holes"]
    assert [next(iter(o)) for o in stage["outs"]] == ["${paths.holes_work}", "${paths.holes}"]
    assert "data/input/runs/late.trec" in stage["deps"]


def test_init_in_ppi_mode_leaves_the_holes_paths_out(repo):
    # a holes section is refused in ppi mode (the key is the model grader's)
    res = init("--run", "ext=in/runs/ext.trec", "--mode", "ppi", "--grader-command", "python g.py",
               "--human-queries", "4")
    assert res.exit_code == 0, res.output
    paths = yaml.safe_load((repo / "experiments/second/params.yaml").read_text())["paths"]
    assert "holes" not in paths and "holes_work" not in paths


def test_a_holes_folder_inside_an_experiment_is_no_experiment_of_the_repository(repo):
    # an arm joins experiments/hs after its key froze: the holes stage writes the holes'
    # folder, data/holes, with a params.yaml of its own for the graders' commands
    hs = repo / "experiments/hs"
    assert init("--arm", "bm25=bm25", "--grader-command", "python g.py", "--auditor", "aud",
                folder="experiments/hs").exit_code == 0
    shutil.copy(repo / "in/runs/ext.trec", repo / "in/runs/fresh.trec")
    res = CliRunner().invoke(cli, ["arm", "add", "fresh", "--run", "in/runs/fresh.trec",
                                   "--holes", "--model-grader", "grader-a", "--human-grader",
                                   "aud", "--human-fraction", "0.5", "--experiment",
                                   "experiments/hs"])
    assert res.exit_code == 0, res.output
    ex = Experiment.load(hs / "params.yaml")
    work = ex.path("holes_work")
    work.mkdir(parents=True)
    (work / "params.yaml").write_text(yaml.safe_dump(work_params(ex, work), sort_keys=False))
    assert work == hs / "data/holes"
    assert experiment_folders(repo) == [repo / "experiments/hs"]
    # a later experiment is made (the holes' paths are hs's, not a second claim)
    assert init("--arm", "bm25=bm25", folder="experiments/other").exit_code == 0
    listed = CliRunner().invoke(cli, ["pipeline", "list"])
    assert (listed.exit_code, listed.output) == (0, "experiments/hs\nexperiments/other\n")
    rendered = CliRunner().invoke(cli, ["pipeline", "render", "--all"])
    assert rendered.exit_code == 0, rendered.output
    assert rendered.output == (f"{repo / 'experiments/hs/dvc.yaml'}: unchanged\n"
                               f"{repo / 'experiments/other/dvc.yaml'}: unchanged\n")
    checked = CliRunner().invoke(cli, ["pipeline", "check", "--all"])
    assert checked.exit_code == 0, checked.output
    assert "data/holes" not in checked.output
    # tools/repro.sh's loop over the experiments: each one's design record and status
    script = (REPO / "tools/repro.sh").read_text()
    loop = script[script.index("for dir in $(relgrade pipeline list)"):]
    loop = loop[:loop.index("\ndone\n") + len("\ndone\n")]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", loop], cwd=repo, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert re.findall(r"^Status of (.*):$", proc.stdout, re.M) == [
        "experiments/hs", "experiments/other"]


def test_a_ppi_sample_under_ten_queries_is_warned_with_inits_own_fix(repo):
    # 12 queries, --human-fraction 0.25: round(3.0) = 3 queries; 10 / 12 = 0.83 gives
    # round(9.96) = 10
    res = init("--arm", "bm25=bm25", "--mode", "ppi", "--grader-command", "python g.py",
               "--human-fraction", "0.25", folder="experiments/few")
    assert res.exit_code == 0, res.output
    assert "Human sample: 3 of 12 queries" in res.output
    assert ("Warning: the human sample holds 3 queries, fewer than the 10 or more docs/ppi.md "
            "recommends: PPI++ intervals from so few queries are wide and cover the truth "
            "less often than stated, so verdicts on them are weak evidence. Run relgrade init "
            "again with --force and --human-queries 10 (or --human-fraction 0.83), or set "
            "ppi.human_queries: 10 (and ppi.human_fraction: null) in "
            "experiments/few/params.yaml before the first dvc repro draws the sample\n"
            ) in res.output
    # the recommended size: no warning
    res = init("--arm", "bm25=bm25", "--mode", "ppi", "--grader-command", "python g.py",
               "--human-queries", "10", folder="experiments/enough")
    assert res.exit_code == 0, res.output
    assert "Human sample: 10 of 12 queries" in res.output and "Warning" not in res.output


def test_init_refuses_a_query_id_with_a_trailing_space_at_its_line(repo):
    # Before, the id was frozen as "kw01 " and refused only when a run was written.
    rows = (repo / "in/queries.tsv").read_text().splitlines(keepends=True)
    qid = rows[1].split("\t")[0]
    rows[1] = rows[1].replace(qid, qid + " ", 1)
    (repo / "in/queries.tsv").write_text("".join(rows))
    res = init("--arm", "bm25=bm25")
    assert res.exit_code == 1
    assert res.output == (f'Error: in/queries.tsv:2: query_id must not contain whitespace '
                          f'(TREC files split on it) (found "{qid} "). Remove the spaces, '
                          "tabs or line breaks from the id\n")
    assert not (repo / "experiments").exists() or not any((repo / "experiments").iterdir())
