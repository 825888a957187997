"""End to end: `dvc repro` of experiments/clicks-sim (smaller) in a temporary git repository.

The repository's click experiment is copied with its dvc.yaml, the stage scripts and the
sources its stages depend on; the simulation is shrunk so the run takes seconds. Checks that
simulate -> propensity -> ips -> pairs -> training_set all run, that every IPS interval
covers the simulation's exact truth, that the training set keeps the key's queries out of
the click rows, and that a second repro changes nothing.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

EXPERIMENT = "experiments/clicks-sim"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("clicks")
    shutil.copytree(tiny.REPO / "stages", root / "stages",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tiny.REPO / "src", root / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    exp = root / EXPERIMENT
    exp.mkdir(parents=True)
    shutil.copy(tiny.REPO / EXPERIMENT / "dvc.yaml", exp / "dvc.yaml")
    params = yaml.safe_load((tiny.REPO / EXPERIMENT / "params.yaml").read_text())
    params["clicks"]["simulate"].update(sessions=12000, queries=20)
    params["clicks"]["bootstrap"] = 400
    (exp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")
    proc = tiny.run(exp, "dvc", "repro")
    return exp, params, proc


def test_repro_runs_the_five_click_stages_in_order(repo):
    _, _, proc = repo
    order = [line.split("'")[1] for line in proc.stdout.splitlines()
             if line.startswith("Running stage")]
    assert order == ["simulate", "propensity", "ips", "pairs", "training_set"]


def test_every_ips_interval_covers_the_simulations_true_value(repo):
    exp, _, _ = repo
    truth = json.loads((exp / "data/clicks/truth.json").read_text())
    ips = json.loads((exp / "metrics/ips.json").read_text())
    assert truth["simulated"] is True
    assert sorted(ips["arms"]) == ["oracle", "r0", "r1", "r2"]
    assert ips["propensity_resampled"] is True and ips["n_boot"] == 400
    for arm, true in truth["rankings"].items():
        got = ips["arms"][arm]
        assert got["ips_low"] <= true["ips"] <= got["ips_high"], arm
        assert got["snips_low"] <= true["snips"] <= got["snips_high"], arm
    # The oracle orders by true relevance: the highest true and estimated reward.
    assert max(ips["arms"], key=lambda a: ips["arms"][a]["ips"]) == "oracle"


def test_the_propensity_metrics_cover_one_over_k(repo):
    exp, _, _ = repo
    curve = json.loads((exp / "metrics/propensity.json").read_text())
    for row in curve["positions"]:
        assert row["ci_low"] <= 1 / row["position"] <= row["ci_high"], row
    plot = pd.read_csv(exp / "plots/propensity.csv")
    assert plot["position"].tolist() == list(range(1, 9))


def test_the_training_set_keeps_the_key_queries_out_of_the_click_rows(repo):
    exp, params, _ = repo
    rows = pd.read_parquet(exp / "data/training/training.parquet")
    manifest = json.loads((exp / "data/training/manifest.json").read_text())
    key_queries = set(rows.loc[rows["source"] == "key", "query_id"])
    assert len(key_queries) == params["clicks"]["simulate"]["queries"] // 4
    assert not key_queries & set(rows.loc[rows["source"] == "clicks", "query_id"])
    assert manifest["key_simulated"] is True and manifest["exclude_eval_queries"] is True
    assert manifest["pairs_excluded"] > 0
    sizes = [int(x) for x in (exp / "data/training/key.query").read_text().split()]
    assert sum(sizes) == manifest["key_rows"] == len(rows[rows["source"] == "key"])
    clicks = pd.read_csv(exp / "data/training/clicks.tsv", sep="\t")
    sizes = [int(x) for x in (exp / "data/training/clicks.query").read_text().split()]
    assert sum(sizes) == len(clicks) == manifest["click_rows"]


def test_dvc_metrics_show_lists_both_click_metrics(repo):
    exp, _, _ = repo
    out = tiny.run(exp, "dvc", "metrics", "show").stdout
    assert "metrics/ips.json" in out and "metrics/propensity.json" in out


def test_a_second_repro_changes_nothing(repo):
    exp, _, _ = repo
    lock = (exp / "dvc.lock").read_text()
    out = tiny.run(exp, "dvc", "repro").stdout
    assert "up to date" in out.lower()
    assert (exp / "dvc.lock").read_text() == lock
