"""A command given another folder's experiment names its fixes aimed at that experiment."""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError
from relgrade.experiment.layout import aim_commands

REPO = Path(__file__).resolve().parents[1]


@click.command()
@params_option
@handle_errors
def failing(params_path):
    raise InputError("a grade file and its bank sidecar disagree", path="data/g/round-1.jsonl",
                     fix="grade again with `relgrade grade run --grader g` or `relgrade "
                         "serve`, or start over with `relgrade init x`; then `relgrade "
                         "status --experiment y`")


@pytest.fixture
def top(tmp_path, monkeypatch):
    """A repository's top holding experiments/mine."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "experiments" / "mine").mkdir(parents=True)
    shutil.copy(REPO / "params.yaml", tmp_path / "experiments" / "mine" / "params.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_error_under_experiment_names_commands_with_that_experiment(top):
    res = CliRunner().invoke(failing, ["--experiment", "experiments/mine"])
    assert res.exit_code == 1
    assert res.output == (
        "Error: data/g/round-1.jsonl: a grade file and its bank sidecar disagree. grade "
        "again with `relgrade grade run --grader g --experiment experiments/mine` or "
        "`relgrade serve --experiment experiments/mine`, or start over with `relgrade init "
        "x`; then `relgrade status --experiment y`\n")


def test_the_same_error_typed_in_the_experiment_s_folder_is_unchanged(top, monkeypatch):
    monkeypatch.chdir(top / "experiments" / "mine")
    res = CliRunner().invoke(failing, [])
    assert res.exit_code == 1
    assert "`relgrade grade run --grader g` or `relgrade serve`," in res.output


def test_a_sibling_folder_gets_the_path_from_where_the_user_stands(top, monkeypatch):
    (top / "experiments" / "other").mkdir()
    monkeypatch.chdir(top / "experiments" / "other")
    res = CliRunner().invoke(failing, ["--params", "../mine/params.yaml"])
    assert "`relgrade serve --experiment ../mine`" in res.output


def test_aim_commands_leaves_text_alone_without_an_option():
    assert aim_commands("run `relgrade serve`", "") == "run `relgrade serve`"
