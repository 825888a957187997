"""Files that stages and commands print are named as a user at the repository's top types
them: ``experiments/mine/...`` for an experiment below the top, the path itself for the
top's experiment."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import stage_path
from relgrade.pipeline.design import unfilled_parts
from relgrade.pipeline.stages.retrieve import read_run

REPO = Path(__file__).resolve().parents[1]

DESIGN = """# Design record

## Question

<!-- relgrade: person question -->
<!-- relgrade: fill in -->
<!-- relgrade: end question -->
"""


@pytest.fixture
def top(tmp_path, monkeypatch):
    """A repository's top with an experiment of its own and experiments/mine below it."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    mine = tmp_path / "experiments" / "mine"
    for folder in (tmp_path, mine):
        (folder / "data" / "input").mkdir(parents=True)
        shutil.copy(REPO / "params.yaml", folder / "params.yaml")
        for name in ("queries.tsv", "intents.tsv"):
            shutil.copy(REPO / "data" / "input" / name, folder / "data" / "input" / name)
        (folder / "DESIGN.md").write_text(DESIGN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_stage_run_in_the_experiment_s_folder_names_its_file_from_the_top(top, monkeypatch):
    monkeypatch.chdir(top / "experiments" / "mine")  # where DVC runs the stage
    ex = Experiment.load("params.yaml")
    assert stage_path(ex, ex.path("key")) == "experiments/mine/data/key/key.jsonl"
    assert stage_path(ex, ex.path("publish")) == "experiments/mine/data/publish"


def test_the_top_s_experiment_keeps_its_paths_as_they_were(top):
    ex = Experiment.load("params.yaml")
    assert stage_path(ex, ex.path("key")) == "data/key/key.jsonl"
    assert stage_path(ex, ex.path("publish")) == "data/publish"


def test_a_stage_run_outside_the_experiment_s_folder_prints_the_path_given(top):
    ex = Experiment.load("experiments/mine/params.yaml")
    assert stage_path(ex, ex.path("key")) == "experiments/mine/data/key/key.jsonl"
    ex = Experiment.load(top / "experiments" / "mine" / "params.yaml")
    assert stage_path(ex, ex.path("key")) == f"{top.as_posix()}/experiments/mine/data/key/key.jsonl"


def test_the_retrieve_stage_s_note_names_the_run_as_its_errors_do(top, monkeypatch, capsys):
    mine = top / "experiments" / "mine"
    (mine / "data" / "input" / "runs").mkdir()
    (mine / "data" / "input" / "runs" / "armD.trec").write_text("q1 Q0 c1 1 2.5 armD extra\n")
    monkeypatch.chdir(mine)
    read_run(Path("data/input/runs/armD.trec"), Experiment.load("params.yaml"))
    assert capsys.readouterr().err == (
        "Note: experiments/mine/data/input/runs/armD.trec: 1 line(s) have fields after the "
        "sixth (first: line 1); they were ignored.\n")


def test_status_names_an_experiment_s_unfilled_design_under_its_folder(top):
    assert unfilled_parts(Experiment.load("experiments/mine/params.yaml")) == [
        "experiments/mine/DESIGN.md: question"]
    assert unfilled_parts(Experiment.load("params.yaml")) == ["DESIGN.md: question"]


@pytest.mark.parametrize("args, wrote", [
    (["--experiment", "experiments/mine"], "experiments/mine/data/input/intents.review.json"),
    ([], "data/input/intents.review.json"),
])
def test_intents_review_names_the_review_it_wrote_in_the_experiment_s_folder(top, args, wrote):
    res = CliRunner().invoke(main, ["intents", "review", "--reviewer", "auditor-b", *args])
    assert res.exit_code == 0, res.output
    assert f"flagged; wrote {wrote}\n" in res.output
    assert Path(wrote).is_file()
