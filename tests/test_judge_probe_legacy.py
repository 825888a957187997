"""`relgrade judge probe` on a copy of the shipped experiments/ppi-sim, whose model grades
were recorded before judge identities were: the probe compares the judge now with those
grades of record and says that they carry no identity (docs/judges.md, "Which pairs"); in
ppi mode it renders the pipeline again and names the sub-experiment's `dvc repro`.

The copy holds what a clone of the repository has of the experiment (its git-tracked files:
the grades of record, the audit sample, params and pipeline); `dvc repro` builds the packets
and runs the probe reads, as a user's clone would (the shared `ppi_sim_built`).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from tests.e2e import tiny
from tests.test_judge_printed_commands import _dvc_accepts


@pytest.mark.slow
def test_the_probe_runs_on_legacy_grades_and_says_they_carry_no_identity(tmp_path,
                                                                        monkeypatch,
                                                                        ppi_sim_built):
    repo = tiny.copy_repo(ppi_sim_built / "repo", tmp_path / "repo")
    copy = repo / "experiments" / "ppi-sim"
    assert not (copy / "judges").exists()
    bank = copy / "data/grades/model-m/round-1.bank.jsonl"
    assert '"judge"' not in bank.read_text()  # legacy: no line names an identity
    kept = {p: p.read_bytes() for p in (copy / "data/grades").rglob("*") if p.is_file()}
    audit = [json.loads(line)["query_id"] for line in
             (copy / "data/audit/audit.jsonl").read_text().splitlines()]
    audited = sum(1 for line in (copy / "data/grades/model-m/round-1.jsonl").read_text()
                  .splitlines() if json.loads(line)["query_id"] in audit)

    monkeypatch.chdir(copy)  # typed inside the experiment's folder, as printed
    res = CliRunner().invoke(main, ["judge", "probe", "--experiment", "experiments/ppi-sim",
                                    "--probe", "stuff"])
    assert res.exit_code == 0, res.output
    report = json.loads((copy / "judges/probe-model-m.json").read_text())
    assert report["pairs"] == audited == 240 and report["legacy_pairs"] == 240
    assert "240 of the 240 grades of record carry no judge identity" in res.output
    # the simulated judge grades from the pair alone (sim/model_grader.py), unchanged since
    # its grades were recorded: stuffing the query's words flips none of the 240
    assert report["probes"]["stuff"]["flip_rate"] == 0.0
    assert report["probes"]["stuff"]["flipped_pairs"] == 0
    assert {p: p.read_bytes() for p in (copy / "data/grades").rglob("*") if p.is_file()} == kept
    # ppi mode: the pipeline is rendered again with the report as the ppi stage's dep, and
    # the dvc repro it names is the sub-experiment's, a target DVC accepts
    repro = res.output.split("; run `")[1].split("`")[0]
    assert repro == "dvc repro experiments/ppi-sim/dvc.yaml"
    assert "judges/probe-model-m.json" in (copy / "dvc.yaml").read_text()
    _dvc_accepts(repo, repro)
