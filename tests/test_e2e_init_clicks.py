"""End to end: a click experiment made by `relgrade init --mode clicks` over a log it is given
(here one written by relgrade's position-based simulation, outside the experiment), run by
`dvc repro` to its propensities, IPS estimates, pairs and training set."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
import yaml

from relgrade.clicks import simulate
from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


def _inputs(folder):
    """A small simulated log, its rankers' rankings as TREC runs and a key of 2 queries."""
    sim = simulate.position_based_log(7, sessions=3000, queries=8, positions=6, rankers=2,
                                      randomized_share=0.3)
    folder.mkdir(parents=True)
    sim.log.to_parquet(folder / "log.parquet", index=False)
    (folder / "rankings").mkdir()
    for name, g in sim.rankings.groupby("ranker", sort=True):
        g = g.sort_values(["query_id", "rank"])
        (folder / "rankings" / f"{name}.run").write_text("".join(
            f"{q} Q0 {d} {r} {len(g) - i} {name}\n"
            for i, (q, d, r) in enumerate(zip(g["query_id"], g["chunk_id"], g["rank"]))))
    (folder / "key").mkdir()
    key = sim.relevance[sim.relevance["query_id"].isin(sorted(sim.relevance["query_id"])[:2])]
    data = "".join(json.dumps({"query_id": q, "chunk_id": d, "grade": int(r * 4 > 1)}) + "\n"
                   for q, d, r in zip(key["query_id"], key["chunk_id"], key["relevance"]))
    (folder / "key" / "key.jsonl").write_text(data)
    (folder / "key" / "record.json").write_text(json.dumps(
        {"key_sha256": hashlib.sha256(data.encode()).hexdigest(), "simulated": True}))
    return sim


def test_a_click_experiment_made_by_init_runs_to_its_estimates(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    tiny.write_inputs(root)  # the repository's stages and dvc.yaml beside it
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")
    sim = _inputs(root / "given")
    exp = "experiments/logged"
    made = tiny.run(root, "relgrade", "init", exp, "--mode", "clicks", "--click-log",
                    "given/log.parquet", "--rankings", "given/rankings", "--click-key",
                    "given/key")
    assert made.stdout.splitlines()[0] == (
        "Created click experiment logged in experiments/logged: stages propensity, pairs, "
        "ips, training_set.")
    params = yaml.safe_load((root / exp / "params.yaml").read_text())
    assert params["clicks"]["key"] == "../../given/key"
    stages = yaml.safe_load((root / exp / "dvc.yaml").read_text())["stages"]
    assert list(stages) == ["propensity", "ips", "pairs", "training_set"]  # nothing simulated
    tiny.run(root, "relgrade", "pipeline", "check", "--experiment", exp)
    tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml")
    propensity = json.loads((root / exp / "metrics/propensity.json").read_text())
    assert propensity and (root / exp / "metrics/ips.json").is_file()
    ips = json.loads((root / exp / "metrics/ips.json").read_text())
    assert set(sim.rankings["ranker"].unique()) <= set(json.dumps(ips).replace('"', " ").split())
    pairs = pd.read_parquet(root / exp / "data/clicks/pairs.parquet")
    assert len(pairs) > 0
    assert (root / exp / "data/training").is_dir()


def test_init_refuses_a_click_experiment_without_its_log(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    tiny.write_inputs(root)
    proc = tiny.run(root, "relgrade", "init", "experiments/x", "--mode", "clicks",
                    check=False)
    assert proc.returncode == 1
    assert "a click experiment needs its click log" in proc.stderr
    assert not (root / "experiments/x").exists()


def test_a_log_whose_queries_match_no_ranking_stops_the_ips_stage_with_one_error(tmp_path):
    # The fresh-clone report: every logged query id prefixed "zz", so no logged impression
    # is of a query the rankings rank. IPS used to print 0.0000 [0.0000, 0.0000] per arm
    # and exit 0; now the ips stage refuses, naming the log and the rankings, and writes
    # nothing.
    root = tmp_path / "repo"
    root.mkdir()
    tiny.write_inputs(root)
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")
    _inputs(root / "given")
    log = pd.read_parquet(root / "given/log.parquet")
    log["query_id"] = "zz" + log["query_id"].astype(str)
    log.to_parquet(root / "given/log.parquet", index=False)
    exp = "experiments/logged"
    tiny.run(root, "relgrade", "init", exp, "--mode", "clicks", "--click-log",
             "given/log.parquet", "--rankings", "given/rankings", "--click-key", "given/key")
    proc = tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml:ips", check=False)
    assert proc.returncode != 0
    errors = [x for x in (proc.stdout + proc.stderr).splitlines() if x.startswith("Error: ")]
    assert errors == [
        "Error: experiments/logged/data/input/clicks.parquet: no logged impression matches "
        "the ranking of arm(s) r0, r1 in experiments/logged/data/input/rankings: IPS and "
        "SNIPS would be 0 whatever users clicked, so there is no estimate (found for each, 0 of 18,000 impressions showing a (query, "
        "chunk) it ranks within positions 1-10 of the propensity curve). Check that the "
        "rankings and the log use the same query and chunk ids, or leave the arm out of the "
        "rankings folder"]
    assert (root / exp / "metrics/propensity.json").is_file()
    assert not (root / exp / "metrics/ips.json").exists()
