"""The `sample` stage: a query set drawn from a query log as a tracked DVC output.

Unit tests on the worked example of docs/query-sampling.md, the stage script on a tiny log,
`relgrade init --query-log`, and (slow) a temporary repository where changing the log or the
sample params reruns the stage and the queries stage after it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from relgrade import query_sampling as querylog
from relgrade.cli import main as cli
from relgrade.io.files import read_rows, sha256_file
from relgrade.io.querylog import read_query_log
from relgrade.protocol.queries import validate_queries
from relgrade.rng import derive_seed
from tests.e2e import tiny

REPO = Path(__file__).resolve().parents[1]

#: The worked example of docs/query-sampling.md: counts 12, 6, 5, 3, 3, 2, 2, 2, 1, 1.
COUNTS = [("alpha", 12), ("bravo", 6), ("charlie", 5), ("delta", 3), ("echo", 3),
          ("foxtrot", 2), ("golf", 2), ("hotel", 2), ("india", 1), ("juliet", 1)]


def log_tsv(rows=COUNTS) -> str:
    return "query\tcount\n" + "".join(f"{q}\t{c}\n" for q, c in rows)


def test_manifest_of_one_query_per_stratum_by_hand(tmp_path):
    (tmp_path / "log.tsv").write_text(log_tsv())
    log, lines = read_query_log(tmp_path / "log.tsv")
    counts = querylog.strata(log, path=tmp_path / "log.tsv", lines=lines)
    child = derive_seed(5, querylog.SEED_PURPOSE)
    sample = querylog.sample_queries(counts, n=3, rng=np.random.default_rng(child))
    m = querylog.sample_manifest(counts, sample, seed=5, child_seed=child, n=3,
                                 allocation="equal", head_share=0.5, torso_share=0.3)
    # Head = 12 + 6 = 18 issued, torso = 5 + 3 + 3 = 11, tail = 8 (the doc's cut). One query
    # per stratum, none certain (12/18 < 1), so each weight is its stratum's traffic.
    assert {s: (v["queries"], v["traffic"], v["sampled"], v["weight"])
            for s, v in m["strata"].items()} == {"head": (2, 18, 1, 18.0),
                                                 "torso": (3, 11, 1, 11.0),
                                                 "tail": (5, 8, 1, 8.0)}
    assert (m["issued"], m["distinct"], m["weight_sum"]) == (37, 10, 37.0)
    # Kish: 37^2 / (18^2 + 11^2 + 8^2) = 1369 / 509.
    assert m["effective_size"] == pytest.approx(1369 / 509)
    assert (m["seed"], m["child_seed"], m["seed_purpose"]) == (5, child, "queries-sample")
    # The TSV reads back as a valid weighted queries table, weights exact.
    (tmp_path / "q.tsv").write_text(querylog.queries_tsv(sample))
    table, rows = read_rows(tmp_path / "q.tsv", ["query_id", "query", "group"])
    checked = validate_queries(table, groups=list(querylog.STRATA), path=tmp_path / "q.tsv",
                               lines=rows)
    assert dict(zip(checked["group"], checked["weight"])) == {"head": 18.0, "torso": 11.0,
                                                             "tail": 8.0}


def test_parquet_and_jsonl_logs_read_like_the_tsv(tmp_path):
    frame = pd.DataFrame(COUNTS, columns=["query", "count"])
    frame.to_parquet(tmp_path / "log.parquet", index=False)
    (tmp_path / "log.jsonl").write_text("".join(
        json.dumps({"query": q, "count": c}) + "\n" for q, c in COUNTS))
    (tmp_path / "log.tsv").write_text(log_tsv())
    tables = [querylog.strata(read_query_log(tmp_path / f"log.{ext}")[0])
              for ext in ("tsv", "parquet", "jsonl")]
    for t in tables[1:]:
        pd.testing.assert_frame_equal(t, tables[0])


def test_a_table_log_without_count_is_refused_naming_the_file(tmp_path):
    (tmp_path / "log.tsv").write_text("query\nalpha\n")
    with pytest.raises(Exception) as e:
        read_query_log(tmp_path / "log.tsv")
    assert "log.tsv" in str(e.value) and "count" in str(e.value)


def stage_experiment(tmp_path, n=3):
    params = {"seed": 11, "paths": {"sample_manifest": "data/queries/sample.json"},
              "queries": {"input": "data/input/queries.sampled.tsv",
                          "groups": ["head", "torso", "tail"], "log": "data/input/log.tsv"},
              "sample": {"n": n, "allocation": "equal"}}
    (tmp_path / "data/input").mkdir(parents=True)
    (tmp_path / "data/input/log.tsv").write_text(log_tsv())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))


def test_sample_stage_writes_the_weighted_queries_and_a_manifest_with_the_seed(tmp_path):
    stage_experiment(tmp_path, n=4)
    done = subprocess.run([sys.executable, str(REPO / "stages" / "sample.py")], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    m = json.loads((tmp_path / "data/queries/sample.json").read_text())
    assert m["log"] == "data/input/log.tsv"
    assert m["log_sha256"] == sha256_file(tmp_path / "data/input/log.tsv")
    assert (m["seed"], m["child_seed"], m["n"]) == (11, derive_seed(11, "queries-sample"), 4)
    table = pd.read_csv(tmp_path / "data/input/queries.sampled.tsv", sep="\t")
    assert len(table) == 4 and table["weight"].sum() == pytest.approx(37.0)
    # Same as drawing by hand with the recorded child seed.
    log, lines = read_query_log(tmp_path / "data/input/log.tsv")
    again = querylog.sample_queries(querylog.strata(log), n=4,
                                    rng=np.random.default_rng(m["child_seed"]))
    assert table["query"].tolist() == again["query"].tolist()


def test_init_with_a_query_log_writes_the_sample_stage_first(tmp_path, monkeypatch):
    import shutil

    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "stages").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "in/chunks.jsonl").write_text("".join(json.dumps(c) + "\n"
                                                      for c in tiny.chunks()))
    (tmp_path / "in/log.tsv").write_text(log_tsv())
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["init", "experiments/logged", "--corpus", "in/chunks.jsonl",
                                   "--query-log", "in/log.tsv", "--sample-n", "4",
                                   "--arm", "bm25=bm25"])
    assert res.exit_code == 0, res.output
    ex = tmp_path / "experiments/logged"
    pipe = yaml.safe_load((ex / "dvc.yaml").read_text())
    assert list(pipe["stages"])[:2] == ["sample", "corpus"]
    sample = pipe["stages"]["sample"]
    assert sample["cmd"] == "python ../../stages/sample.py"
    assert "${queries.log}" in sample["deps"] and "../../stages/sample.py" in sample["deps"]
    # kept in git, so it persists: a stage refused for bad params deletes no committed file
    assert sample["outs"][0] == {"${queries.input}": {"cache": False, "persist": True}}
    params = yaml.safe_load((ex / "params.yaml").read_text())
    assert params["queries"] == {"input": "data/input/queries.sampled.tsv",
                                 "groups": ["head", "torso", "tail"],
                                 "log": "data/input/query-log.tsv"}
    assert params["sample"]["n"] == 4 and params["metrics"]["weighted"] is True
    assert (ex / "data/input/query-log.tsv").read_text() == log_tsv()
    assert (ex / "data/input/intents.tsv").read_text() == "query_id\tquery\tintent\n"
    # --queries with a log is refused, and nothing is written.
    res = CliRunner().invoke(cli, ["init", "experiments/both", "--corpus", "in/chunks.jsonl",
                                   "--query-log", "in/log.tsv", "--sample-n", "4",
                                   "--queries", "in/log.tsv", "--arm", "bm25=bm25"])
    assert res.exit_code == 1
    assert "--queries cannot be given with a query log" in res.output
    assert not (tmp_path / "experiments/both").exists()


@pytest.mark.slow
def test_changing_the_log_or_the_sample_params_reruns_sample_and_queries(tmp_path):
    root = tmp_path
    tiny.write_inputs(root)
    (root / "log.tsv").write_text(log_tsv())
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")
    exp = "experiments/logged"
    tiny.run(root, "relgrade", "init", exp, "--corpus", "data/input/chunks.jsonl",
             "--query-log", "log.tsv", "--sample-n", "4", "--arm", "bm25=bm25")
    target = f"{exp}/dvc.yaml:queries"

    def repro():
        return tiny.run(root, "dvc", "repro", target).stdout

    first = repro()
    assert f"Running stage '{exp}/dvc.yaml:sample'" in first
    assert f"Running stage '{exp}/dvc.yaml:queries'" in first
    queries = pd.read_parquet(root / exp / "data/queries/queries.parquet")
    assert sorted(queries.columns) == ["group", "query", "query_id", "weight"]
    assert queries["weight"].sum() == pytest.approx(37.0)
    log = root / exp / "data/input/query-log.tsv"
    log.write_text(log_tsv(COUNTS + [("kilo", 40)]))   # a new head query
    again = repro()
    assert f"Running stage '{exp}/dvc.yaml:sample'" in again
    assert f"Running stage '{exp}/dvc.yaml:queries'" in again
    assert "kilo" in set(pd.read_parquet(root / exp / "data/queries/queries.parquet")["query"])
    params = yaml.safe_load((root / exp / "params.yaml").read_text())
    params["sample"]["n"] = 5
    (root / exp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # A changed sample param makes the stage stale (dvc status is cheaper than a third repro;
    # the repro above showed the queries stage follows it).
    status = tiny.run(root, "dvc", "status", f"{exp}/dvc.yaml").stdout
    sample_block = status.split(f"{exp}/dvc.yaml:sample:", 1)[1].split(f"{exp}/dvc.yaml:", 1)[0]
    assert re.search(r"modified:\s+sample\.n\b", sample_block), status


@pytest.mark.parametrize("section, value, message", [
    ("sample", {"n": 0}, "sample.n: must be an integer >= 1 (found 0)"),
    ("sample", {"n": 5, "allocation": "random"}, "sample.allocation"),
    ("agreement", {"bootstrap": 999}, "agreement.bootstrap: must be an integer >= 1000 "
                                      "(found 999)"),
    ("agreement", {"level": 1.0}, "agreement.level: must be a number in (0, 1) (found 1.0)"),
])
def test_sample_and_agreement_params_are_checked_when_read(section, value, message):
    from relgrade.errors import InputError
    from relgrade.experiment.params import parse_params

    with pytest.raises(InputError) as e:
        parse_params({"paths": {}, section: value})
    assert message in str(e.value)


def test_sample_and_agreement_params_default_to_equal_allocation_and_2000_resamples():
    from relgrade.experiment.params import parse_params

    p = parse_params({"paths": {}, "sample": {"n": 3}})
    assert (p.sample.allocation, p.sample.head_share, p.sample.torso_share) == ("equal", 0.5, 0.3)
    assert (p.agreement.bootstrap, p.agreement.level) == (2000, 0.95)
