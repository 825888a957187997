"""An audit the sample cannot meet: `relgrade init --query-log` writes an
``audit.min_queries`` its own sample can take evenly from every stratum (and says so), and
the audit stage's refusal names the params file and the line to change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.experiment.stage import run_stage
from relgrade.pipeline.stages import audit as audit_stage
from tests.e2e import tiny
from tests.test_audit import provenance, queries
from tests.test_sample_stage import log_tsv

REPO = Path(__file__).resolve().parents[1]


def _repository(root: Path) -> None:
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    (root / "stages").mkdir()
    (root / "in").mkdir()
    (root / "in/chunks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in tiny.chunks()))
    (root / "in/log.tsv").write_text(log_tsv())


def _init(root: Path, n: int):
    return CliRunner().invoke(cli, ["init", "experiments/mine", "--corpus", "in/chunks.jsonl",
                                    "--query-log", "in/log.tsv", "--sample-n", str(n),
                                    "--arm", "bm25=bm25"])


def test_init_writes_an_audit_minimum_the_samples_smallest_stratum_can_meet(tmp_path,
                                                                          monkeypatch):
    # The log of docs/query-sampling.md's worked example: head {alpha, bravo}, torso
    # {charlie, delta, echo}, tail 5 queries. 9 drawn equally would be 3 a stratum, but the
    # head has 2: head 2, torso 3, tail 4. The audit takes the same number from each of the
    # 3 strata, so at most 3 x 2 = 6 queries, not the 9 (every query) init wrote before.
    _repository(tmp_path)
    monkeypatch.chdir(tmp_path)
    res = _init(tmp_path, 9)
    assert res.exit_code == 0, res.output
    params = yaml.safe_load((tmp_path / "experiments/mine/params.yaml").read_text())
    assert params["audit"]["min_queries"] == 6
    note = ("audit.min_queries is 6: the sample of 9 queries draws 2, the fewest of its strata, "
            "from head, and the audit takes an even share of each stratum (6 = 3 x 2), not the "
            "10 it asks for")
    assert params["grading"]["deviations"] == [note]
    assert f"Note (recorded in params grading.deviations): {note}" in res.output


def test_init_keeps_every_query_when_the_strata_share_the_sample_evenly(tmp_path, monkeypatch):
    # 6 drawn equally: 2 from each stratum, so the audit can take all 6.
    _repository(tmp_path)
    monkeypatch.chdir(tmp_path)
    res = _init(tmp_path, 6)
    assert res.exit_code == 0, res.output
    params = yaml.safe_load((tmp_path / "experiments/mine/params.yaml").read_text())
    assert params["audit"]["min_queries"] == 6
    assert params["grading"]["deviations"] == [
        "audit.min_queries is 6, every query: the experiment has 6 queries, fewer than the 10 "
        "the audit asks for"]


def test_the_audit_stage_names_the_params_file_and_the_largest_minimum_that_fits(
        tmp_path, monkeypatch, capsys):
    # groups keyword (k1-k4) and question (u1, u2) pooled; 6 audit queries ask 3 of each;
    # question has 2, so at most 2 x 2 = 4.
    _repository(tmp_path)
    ex_dir = tmp_path / "experiments/mine"
    ex_dir.mkdir(parents=True)
    qs = queries(["k1", "k2", "k3", "k4", "u1", "u2"])
    prov = provenance()
    prov[prov.query_id.isin(qs.query_id)].to_parquet(ex_dir / "prov.parquet")
    qs.to_parquet(ex_dir / "queries.parquet")
    (ex_dir / "pool.json").write_text(json.dumps({"pool_version": "p-000000000001"}))
    (ex_dir / "params.yaml").write_text(yaml.safe_dump({
        "seed": 1, "audit": {"fraction": 0.1, "min_queries": 6}, "grading": {"round": 1},
        "paths": {"provenance": "prov.parquet", "queries": "queries.parquet",
                  "pool_manifest": "pool.json", "audit": "audit.jsonl",
                  "audit_lock": "lock.json"}}))
    # as DVC runs the stage: in the experiment's folder, the error printed from the top once
    monkeypatch.chdir(ex_dir)
    with pytest.raises(SystemExit) as e:
        run_stage(audit_stage.run)
    assert e.value.code == 1
    assert capsys.readouterr().err == (
        "Error: experiments/mine/params.yaml: audit.min_queries: group 'question' has 2 pooled "
        "queries, fewer than its even share of the audit (3 of 6). Add queries to this group, "
        "or lower audit.min_queries to 4 or less\n")
    assert not (ex_dir / "audit.jsonl").exists() and not (ex_dir / "lock.json").exists()
