"""The click stage scripts on bad logs and keys: one ``Error:`` line naming the file, exit
status 1 and no output written. Each stage's ``main`` runs under ``run_stage`` on the experiment's params file, as in a
dvc run (in process, to keep the suite fast; the end-to-end test runs them under dvc)."""

from __future__ import annotations

import contextlib
import importlib
import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml

from relgrade.clicks import LOG_COLUMNS
from relgrade.experiment.stage import run_stage

REPO = Path(__file__).resolve().parents[1]

PARAMS = {
    "seed": 7,
    "paths": {"click_propensity": "metrics/propensity.json",
              "click_propensity_plot": "plots/propensity.csv",
              "click_ips": "metrics/ips.json", "click_pairs": "data/pairs.parquet",
              "training_set": "data/training"},
    "clicks": {"log": "log.parquet", "method": "randomization", "max_position": 3,
               "bootstrap": 50, "rankings": "rankings", "key": "key"},
}


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def stage(root: Path, name: str) -> Result:
    """Run a stage script's ``main`` in this process on ``root/params.yaml``, as dvc would."""
    module = importlib.import_module(f"relgrade.pipeline.stages.{name}")
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run_stage(module.run, params_path=root / "params.yaml")
        except SystemExit as e:
            code = e.code
    return Result(code, out.getvalue(), err.getvalue().replace(f"{root.as_posix()}/", ""))


def setup(root: Path, rows, **clicks) -> None:
    params = {**PARAMS, "clicks": {**PARAMS["clicks"], **clicks}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    pd.DataFrame(rows, columns=list(LOG_COLUMNS)).to_parquet(root / "log.parquet")


# Two randomized sessions swapping a and b at (1, 2), and one plain session.
GOOD = [("s1", "q1", "a", 1, 1, "r", True), ("s1", "q1", "b", 2, 1, "r", True),
        ("s1", "q1", "c", 3, 0, "r", False),
        ("s2", "q1", "b", 1, 1, "r", True), ("s2", "q1", "a", 2, 0, "r", True),
        ("s2", "q1", "c", 3, 1, "r", False),
        ("s3", "q1", "a", 1, 0, "r", False), ("s3", "q1", "b", 2, 1, "r", False)]


def test_the_propensity_stage_writes_the_curve_as_metrics_and_a_plot_table(tmp_path):
    setup(tmp_path, GOOD, max_position=2)
    proc = stage(tmp_path, "propensity")
    assert proc.returncode == 0, proc.stderr
    plot = pd.read_csv(tmp_path / "plots/propensity.csv")
    # Link (1, 2): clicks at 1: 2 (s1, s2), at 2: 1 (s1) -> p(2) = 1/2.
    assert plot["position"].tolist() == [1, 2]
    assert plot["propensity"].tolist() == [1.0, 0.5]
    assert '"method": "randomization"' in (tmp_path / "metrics/propensity.json").read_text()


def test_a_log_without_randomized_traffic_under_randomization_is_an_error(tmp_path):
    rows = [r[:6] + (False,) for r in GOOD]
    setup(tmp_path, rows)
    proc = stage(tmp_path, "propensity")
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: log.parquet: the log gives no propensity below "
                                  "position 1 by randomization")
    assert "clicks.method: harvesting" in proc.stderr
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "plots").exists()


def test_an_empty_log_stops_the_propensity_stage_naming_the_file(tmp_path):
    setup(tmp_path, [])
    pd.DataFrame(GOOD, columns=list(LOG_COLUMNS)).iloc[:0].to_parquet(tmp_path / "log.parquet")
    proc = stage(tmp_path, "propensity")
    assert proc.returncode == 1
    assert proc.stderr == "Error: log.parquet: the log has no rows\n"
    assert not (tmp_path / "metrics").exists()


@pytest.mark.parametrize("rows, message", [
    ([("s1", "q1", "a", 0, 1, "r", False)], "position must be a whole number of at least 1"),
    ([("s1", "q1", "a", None, 1, "r", False)],
     "position must be a whole number of at least 1"),
    ([("s1", "q1", "a", 1, 1, "r", False), ("s1", "q1", "a", 2, 0, "r", False)],
     "a session shows each chunk at most once"),
    ([("s1", "q1", "a", 1, 1, "r", False), ("s1", "q1", "b", 1, 0, "r", False)],
     "a session shows one chunk per position"),
])
def test_a_bad_log_stops_the_propensity_stage_naming_the_file(tmp_path, rows, message):
    frame = pd.DataFrame(rows, columns=list(LOG_COLUMNS)).astype(
        {"position": "float64"} if rows[0][3] is None else {})
    setup(tmp_path, [])
    frame.to_parquet(tmp_path / "log.parquet")
    proc = stage(tmp_path, "propensity")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"Error: log.parquet: session s1: {message}"), proc.stderr
    assert not (tmp_path / "metrics").exists()


def test_a_key_that_is_not_the_one_its_record_froze_stops_the_training_set(tmp_path):
    setup(tmp_path, GOOD, max_position=2)
    assert stage(tmp_path, "propensity").returncode == 0
    assert stage(tmp_path, "click_pairs").returncode == 0
    key = tmp_path / "key"
    key.mkdir()
    (key / "key.jsonl").write_text('{"query_id":"q1","chunk_id":"a","grade":2}\n')
    (key / "record.json").write_text('{"key_sha256": "0000"}\n')
    proc = stage(tmp_path, "training_set")
    assert proc.returncode == 1
    assert "key/key.jsonl: the key's sha256 is not the one its record froze" in proc.stderr
    assert not (tmp_path / "data/training").exists()


def test_a_rankings_folder_without_runs_stops_the_ips_stage(tmp_path):
    setup(tmp_path, GOOD, max_position=2)
    assert stage(tmp_path, "propensity").returncode == 0
    (tmp_path / "rankings").mkdir()
    proc = stage(tmp_path, "ips")
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: rankings: the rankings folder holds no run file")
    assert not (tmp_path / "metrics/ips.json").exists()


def test_a_ranking_naming_chunks_absent_from_the_log_is_reported_by_the_ips_stage(tmp_path):
    setup(tmp_path, GOOD, max_position=2)
    assert stage(tmp_path, "propensity").returncode == 0
    (tmp_path / "rankings").mkdir()
    (tmp_path / "rankings/arm.run").write_text("q1 Q0 zz 1 2 arm\nq1 Q0 a 2 1 arm\n"
                                               "q9 Q0 y 1 1 arm\n")
    proc = stage(tmp_path, "ips")
    assert proc.returncode == 0, proc.stderr
    assert "Note: arm arm: 2 of 3 ranked chunks never shown in the log (1 ranked queries " \
           "never logged)" in proc.stdout
    import json

    doc = json.loads((tmp_path / "metrics/ips.json").read_text())
    assert doc["arms"]["arm"]["ranked_not_in_log"] == 2
    assert doc["propensity_resampled"] is True
