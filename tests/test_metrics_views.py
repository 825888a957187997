"""One experiment's view: `relgrade metrics show` prints that experiment's decision per arm and
DVC's own commands limited to it; `relgrade metrics diff` sets its decisions at two git
revisions side by side; every experiment's plots are titled with its name."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import DEFAULT_EXPERIMENT, experiment_folders
from relgrade.pipeline.views import decision_rows, dvc_commands, exp_notes, exp_rows, \
    exp_table

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
                                "p_holm": 0.01, "estimator": "ppi++",
                                "delta_estimator": "anytime"},
                          "b": {"measure": "m", "mean": 0.25, "low": 0.2, "high": 0.3}})
    assert rows == [
        {"arm": "b", "measure": "m", "mean": 0.25, "low": 0.2, "high": 0.3, "judged": None,
         "baseline": None, "delta": None, "p_holm": None, "estimator": None,
         "delta_estimator": None},
        {"arm": "z", "measure": "m", "mean": 0.5, "low": None, "high": None, "judged": None,
         "baseline": "b", "delta": 0.25, "p_holm": 0.01, "estimator": "ppi++",
         "delta_estimator": "anytime"}]


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


def test_metrics_show_prints_a_field_a_file_lacks_as_missing_and_a_null_one_as_undefined(
        tmp_path):
    (tmp_path / "params.yaml").write_text((CROWD / "params.yaml").read_text())
    (tmp_path / "stages").mkdir()        # a relgrade repository of its own
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    folder = tmp_path / "metrics/decision"
    folder.mkdir(parents=True)
    m = "nDCG@10"
    (folder / "bm25.json").write_text(json.dumps({"measure": m, "mean": 0.5, "low": 0.4,
                                               "high": 0.6, "judged": None}))
    (folder / "tfidf.json").write_text(json.dumps({"measure": m, "mean": 0.4, "low": 0.3,
                                               "high": 0.5, "baseline": "bm25", "delta": -0.1,
                                               "p_holm": 0.2}))
    res = CliRunner().invoke(cli, ["metrics", "show", "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 0, res.output
    rows = {line.split()[0]: line.split() for line in res.output.splitlines()
            if line.startswith(("bm25 ", "tfidf "))}
    assert rows["bm25"][5] == "undefined"      # the file holds judged: null
    assert rows["tfidf"][5] == "missing"        # the file has no judged at all
    assert "undefined" not in " ".join(rows["tfidf"])


@pytest.mark.parametrize("content, said", [
    ("[1]\n", "a decision file must be a JSON object of one arm's decision (measure, mean, "
               "...) (found a JSON list)"),
    ('{"measure": "R@10", "mean": "x"}\n',
     "a decision file's mean must be a number or null (found 'x')"),
    ('{"measure": "R@10", "mean": 0.5, "p_holm": true}\n',
     "a decision file's p_holm must be a number or null (found True)"),
    ('{"mean": 0.5}\n', "a decision file needs measure (found none)"),
    ('{"measure": 10, "mean": 0.5}\n', "a decision file's measure must be text or null "
                                        "(found 10)"),
    ('{"measure": "R@10", "mean": NaN}\n',
     "a decision file's mean must be a finite number or null (found nan)"),
    ('{"measure": "R@10", "mean": 0.5, "high": Infinity}\n',
     "a decision file's high must be a finite number or null (found inf)"),
])
def test_metrics_show_refuses_a_decision_file_of_the_wrong_shape_naming_it(tmp_path, content,
                                                                            said):
    (tmp_path / "params.yaml").write_text((CROWD / "params.yaml").read_text())
    _decide(tmp_path, {"bm25": 0.5})
    bad = tmp_path / "metrics/decision/tfidf.json"
    bad.write_text(content)
    res = CliRunner().invoke(cli, ["metrics", "show", "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 1
    assert res.output == (f"Error: {bad}: {said}. Restore the file (git checkout, or dvc "
                          "repro rewrites it)\n")


# --- metrics diff of an experiment in a subfolder ------------------------------------------


def _git(root, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="relgrade test",
               GIT_AUTHOR_EMAIL="test@relgrade.invalid", GIT_COMMITTER_NAME="relgrade test",
               GIT_COMMITTER_EMAIL="test@relgrade.invalid")
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env)


def _decide(folder, means, pool="p-1", key="aaaaaaaaaaaa"):
    out = folder / "metrics" / "decision"
    out.mkdir(parents=True, exist_ok=True)
    for arm, mean in means.items():
        (out / f"{arm}.json").write_text(json.dumps(
            {"measure": "R@10", "mean": mean, "pool_version": pool, "key": key}))


@pytest.fixture
def subfolder_repo(tmp_path, monkeypatch):
    """A git repository whose experiment lives in experiments/httpx: absent at HEAD~2, its
    first decision at HEAD~1 (bm25 0.5, tfidf 0.25), bm25 moved to 0.625 at HEAD, same pool."""
    root = tmp_path / "repo"
    httpx = root / "experiments" / "httpx"
    httpx.mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "README.md").write_text("a repository\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "start")
    (httpx / "params.yaml").write_text((CROWD / "params.yaml").read_text())
    _decide(httpx, {"bm25": 0.5, "tfidf": 0.25})
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "httpx: first decision")
    _decide(httpx, {"bm25": 0.625, "tfidf": 0.25})
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "httpx: bm25 moves")
    monkeypatch.chdir(root)
    return root


TWO_COMMITS = ["comparable: pool p-1 on both sides",
               "pool p-1 (key aaaaaaaaaaaa) at HEAD~1; pool p-1 (key aaaaaaaaaaaa) at HEAD",
               "  bm25: R@10 0.5000 at HEAD~1 -> 0.6250 at HEAD (+0.1250)",
               "  tfidf: R@10 0.2500 at HEAD~1 -> 0.2500 at HEAD (+0.0000)"]


def test_metrics_diff_reads_a_subfolder_experiment_at_two_revisions_from_the_top(
        subfolder_repo):
    res = CliRunner().invoke(cli, ["metrics", "diff", "HEAD~1", "HEAD", "--experiment",
                                   "experiments/httpx"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == TWO_COMMITS


def test_metrics_diff_reads_a_subfolder_experiment_at_two_revisions_from_inside_it(
        subfolder_repo, monkeypatch):
    monkeypatch.chdir(subfolder_repo / "experiments" / "httpx")
    res = CliRunner().invoke(cli, ["metrics", "diff", "HEAD~1", "HEAD"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == TWO_COMMITS


def test_metrics_diff_against_the_workspace_sets_head_beside_the_files_on_disk(
        subfolder_repo):
    _decide(subfolder_repo / "experiments" / "httpx", {"bm25": 0.75})
    res = CliRunner().invoke(cli, ["metrics", "diff", "--experiment", "experiments/httpx"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[2] == (
        "  bm25: R@10 0.6250 at HEAD -> 0.7500 at workspace (+0.1250)")


def test_metrics_diff_with_no_decision_files_at_a_revision_says_so_not_comparable(
        subfolder_repo):
    res = CliRunner().invoke(cli, ["metrics", "diff", "HEAD~2", "HEAD", "--experiment",
                                   "experiments/httpx"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [
        "not comparable: no decision files at HEAD~2",
        "no decision files at HEAD~2 (experiments/httpx/metrics/decision); "
        "pool p-1 (key aaaaaaaaaaaa) at HEAD",
        "  bm25: R@10 — at HEAD~2 -> 0.6250 at HEAD (—)",
        "  tfidf: R@10 — at HEAD~2 -> 0.2500 at HEAD (—)"]
    res = CliRunner().invoke(cli, ["metrics", "diff", "HEAD~2", "--json", "--experiment",
                                   "experiments/httpx"])
    shown = json.loads(res.output)
    assert shown["comparable"] is False
    assert shown["reason"] == "not comparable: no decision files at HEAD~2"


def _decisions(prefix, **arms):
    return {f"{prefix}/{arm}.json": {"data": values} for arm, values in arms.items()}


# the shape `dvc exp show --json` (DVC 3) prints: the workspace, a baseline commit and one
# experiment run on it; another experiment's files under the same names must not leak in
EXP_SHOW = [
    {"rev": "workspace", "name": None, "data": {"metrics": {
        **_decisions("experiments/a/metrics/decision", bm25={"mean": 0.5},
                     tfidf={"mean": 0.45, "baseline": "bm25", "delta": -0.05,
                            "p_holm": 0.2}),
        **_decisions("metrics/decision", bm25={"mean": 0.9})}}, "experiments": None},
    {"rev": "f00dfeed" * 5, "name": "main", "data": {"metrics": _decisions(
        "experiments/a/metrics/decision", bm25={"mean": 0.5})},
     "experiments": [{"name": "deep-pool", "revs": [
         {"rev": "c0ffee00" * 5, "name": "deep-pool", "data": {"metrics": _decisions(
             "experiments/a/metrics/decision", bm25={"mean": 0.52},
             tfidf={"mean": 0.6, "baseline": "bm25", "delta": 0.08, "p_holm": 0.001})},
          "experiments": None}]}]},
    {"rev": "badc0de0" * 5, "name": None, "data": None, "error": {"msg": "failed"}}]


def test_exp_rows_take_one_experiments_decisions_per_revision_in_dvcs_order():
    rows = exp_rows(EXP_SHOW, "experiments/a/metrics/decision")
    assert [(r["rev"], r["commit"]) for r in rows] == [
        ("workspace", None), ("main", "f00dfeed" * 5), ("deep-pool", "c0ffee00" * 5),
        ("badc0de", "badc0de0" * 5)]
    assert rows[0]["arms"] == {
        "bm25": {"mean": 0.5, "delta": None, "p_holm": None, "baseline": None},
        "tfidf": {"mean": 0.45, "delta": -0.05, "p_holm": 0.2, "baseline": "bm25"}}
    assert list(rows[1]["arms"]) == ["bm25"] and rows[3]["arms"] == {}
    assert rows[2]["arms"]["tfidf"]["delta"] == 0.08


def test_exp_table_reads_mean_delta_and_p_with_a_dash_where_a_revision_lacks_the_arm():
    lines = exp_table(exp_rows(EXP_SHOW, "experiments/a/metrics/decision"))
    assert lines == [
        "rev         bm25               tfidf",
        "workspace  0.500  0.450 -0.050 p0.20",
        "main       0.500                   \u2014",
        "deep-pool  0.520  0.600 +0.080 p<.01",
        "badc0de        \u2014                   \u2014"]


def test_exp_table_splits_the_arms_into_blocks_no_wider_than_the_width():
    arms = {f"arm{i}": {"mean": 0.5, "baseline": "arm0", "delta": 0.01 * i, "p_holm": 0.5}
            for i in range(1, 6)}
    rows = exp_rows([{"rev": "workspace", "name": None,
                      "data": {"metrics": _decisions("d", arm0={"mean": 0.49}, **arms)}}], "d")
    lines = exp_table(rows, width=60)
    # the rev column is 9 wide, the baseline's 7 with its gap, every other arm 2 + 18:
    # 9 + 7 + 20 + 20 = 56, then 9 + 20 + 20 = 49, then 9 + 20
    assert max(len(x) for x in lines) <= 60
    headers = [x.split() for x in lines if x.startswith("rev")]
    assert headers == [["rev", "arm0", "arm1", "arm2"], ["rev", "arm3", "arm4"],
                       ["rev", "arm5"]]
    assert lines[2] == lines[5] == "" and len(lines) == 8
    with pytest.raises(ValueError, match="width 30 is below 40"):
        exp_table(rows, width=30)


def test_the_exp_table_marks_a_difference_the_anytime_rule_made_and_says_so():
    m = {"metrics/decision/a.json": {"data": {"mean": 0.5}},
         "metrics/decision/b.json": {"data": {"mean": 0.625, "baseline": "a", "delta": 0.125,
                                              "p_holm": 0.25, "estimator": "ppi++"}}}
    stopped = {"metrics/decision/a.json": {"data": {"mean": 0.5}},
               "metrics/decision/b.json": {"data": {"mean": 0.75, "baseline": "a",
                                                    "delta": 0.25, "p_holm": 0.001,
                                                    "estimator": "ppi++",
                                                    "delta_estimator": "anytime"}}}
    rows = exp_rows([{"rev": "workspace", "name": None, "data": {"metrics": stopped}},
                     {"rev": "0123456789abcdef", "name": None, "data": {"metrics": m}}],
                    "metrics/decision")
    # columns: rev 9 wide (workspace), a 5 (0.500), b 19 (the marked cell), two spaces apart
    assert exp_table(rows) + exp_notes(rows) == [
        "rev" + " " * 6 + "  " + " " * 4 + "a" + "  " + " " * 18 + "b",
        "workspace" + "  " + "0.500" + "  " + "0.750 +0.250* p<.01",
        "0123456" + " " * 2 + "  " + "0.500" + "  " + " 0.625 +0.125 p0.25",
        "* delta and p: anytime (workspace)"]


def test_metrics_diff_names_a_damaged_file_of_a_revision_and_does_not_advise_restoring_it(
        subfolder_repo):
    bad = subfolder_repo / "experiments" / "httpx" / "metrics" / "decision" / "bm25.json"
    bad.write_text('{"measure": "R@10", "mean": "abc"}\n')
    _git(subfolder_repo, "add", "-A")
    _git(subfolder_repo, "commit", "-qm", "a damaged decision file")
    res = CliRunner().invoke(cli, ["metrics", "diff", "HEAD~1", "HEAD", "--experiment",
                                   "experiments/httpx"])
    assert res.exit_code == 1
    assert res.output == (
        "Error: HEAD:experiments/httpx/metrics/decision/bm25.json: a decision file's mean "
        "must be a number or null (found 'abc'). That revision's file cannot be compared; "
        "compare other revisions, or commit a file `dvc repro` rewrote\n")


def test_metrics_show_leaves_out_a_file_of_no_arm_and_names_an_arm_without_one(tmp_path):
    (tmp_path / "params.yaml").write_text((CROWD / "params.yaml").read_text())
    (tmp_path / "stages").mkdir()        # a relgrade repository of its own
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    _decide(tmp_path, {"bm25": 0.5, "tfidf": 0.25, "ghost": 0.75})  # random has none
    res = CliRunner().invoke(cli, ["metrics", "show", "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["bm25", "tfidf"]
    assert not any(line.startswith("ghost") for line in lines)
    assert f"note: {tmp_path}/metrics/decision/ghost.json is the file of no arm of params; " \
           "not shown" in lines
    assert "note: no decision file for random yet; run `dvc repro` until the report stage " \
           "has run" in lines
    res = CliRunner().invoke(cli, ["metrics", "show", "--json", "--params",
                                   str(tmp_path / "params.yaml")])
    data = json.loads(res.output)
    assert [r["arm"] for r in data["arms"]] == ["bm25", "tfidf"]
    assert data["not_arms"] == ["ghost"] and data["arms_without_file"] == ["random"]
