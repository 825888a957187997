"""One experiment's view: `relgrade metrics show` prints that experiment's decision per arm and
DVC's own commands limited to it; every experiment's plots are titled with its name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import DEFAULT_EXPERIMENT, experiment_folders
from relgrade.pipeline.views import decision_rows, dvc_commands

REPO = Path(__file__).resolve().parents[1]
CROWD = REPO / "experiments" / "crowd-sim"


@pytest.mark.parametrize("folder", experiment_folders(REPO),
                         ids=lambda p: p.relative_to(REPO).as_posix() or ".")
def test_every_top_level_plot_title_starts_with_its_experiments_name(folder):
    plots = yaml.safe_load((folder / "dvc.yaml").read_text()).get("plots", [])
    name = DEFAULT_EXPERIMENT if folder == REPO else folder.name
    titles = [spec["title"] for entry in plots for spec in entry.values()]
    assert all(t.startswith(f"{name}: ") for t in titles), titles


def test_dvc_commands_scope_metrics_by_folder_plots_by_dvc_yaml_and_exp_by_column_regex():
    ex = Experiment.load(CROWD / "params.yaml")
    assert dvc_commands(ex, cwd=CROWD) == {
        "metrics": ["dvc", "metrics", "show", "metrics/decision"],
        "plots": ["dvc", "plots", "show", "dvc.yaml"],
        "exp": ["dvc", "exp", "show", "--drop", ".*", "--keep",
                "^(Experiment|rev)$|^experiments/crowd-sim/metrics/decision/"]}
    assert dvc_commands(ex, cwd=REPO)["metrics"][-1] == "experiments/crowd-sim/metrics/decision"
    top = Experiment.load(REPO / "params.yaml")
    assert dvc_commands(top, cwd=REPO)["exp"][-1] == "^(Experiment|rev)$|^metrics/decision/"


def test_decision_rows_put_the_baseline_first_and_leave_what_a_file_lacks_none():
    rows = decision_rows({"z": {"measure": "m", "mean": 0.5, "baseline": "b", "delta": 0.25,
                                "p_holm": 0.01},
                          "b": {"measure": "m", "mean": 0.25, "low": 0.2, "high": 0.3}})
    assert rows == [
        {"arm": "b", "measure": "m", "mean": 0.25, "low": 0.2, "high": 0.3, "judged": None,
         "baseline": None, "delta": None, "p_holm": None},
        {"arm": "z", "measure": "m", "mean": 0.5, "low": None, "high": None, "judged": None,
         "baseline": "b", "delta": 0.25, "p_holm": 0.01}]


def test_metrics_show_lists_only_that_experiments_arms_then_dvcs_scoped_commands():
    files = sorted((CROWD / "metrics" / "decision").glob("*.json"))
    decisions = {p.stem: json.loads(p.read_text()) for p in files}
    res = CliRunner().invoke(cli, ["metrics", "show", "--experiment", str(CROWD)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    key = decisions["bm25"]["key"]
    # crowd-sim's three arms (bm25, the baseline, first; then random and tfidf)
    assert lines[0] == f"crowd-sim: key {key}, 3 arms, baseline bm25"
    assert [ln.split()[0] for ln in lines[1:5]] == ["arm", "bm25", "random", "tfidf"]
    assert lines[5] == "DVC's views of crowd-sim alone:"
    assert len(lines) == 9 and all(ln.startswith("  dvc ") for ln in lines[6:])
    res = CliRunner().invoke(cli, ["metrics", "show", "--experiment", str(CROWD), "--json"])
    shown = json.loads(res.output)
    assert shown["experiment"] == "crowd-sim"
    assert [(a["arm"], a["mean"], a["delta"]) for a in shown["arms"]] == [
        ("bm25", decisions["bm25"]["mean"], None),
        ("random", decisions["random"]["mean"], decisions["random"]["delta"]),
        ("tfidf", decisions["tfidf"]["mean"], decisions["tfidf"]["delta"])]


def test_metrics_show_before_the_metrics_stage_is_an_error_naming_the_folder(tmp_path):
    (tmp_path / "params.yaml").write_text((CROWD / "params.yaml").read_text())
    res = CliRunner().invoke(cli, ["metrics", "show", "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 1
    assert res.output == (f"Error: {tmp_path / 'metrics/decision'}: no decision files yet. "
                          "Run `dvc repro` until the metrics stage has run\n")
