"""The Spark engine against DuckDB on the same logs: the same propensity curves (intervals
included), the same pairs in the same order, the same refusals; and a Spark that cannot
start is one clear error with no output. One local[2] session per test worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from relgrade.clicks import LOG_COLUMNS, engine
from relgrade.clicks import pairs as P
from relgrade.clicks import propensity as PR
from relgrade.clicks import spark as S
from relgrade.errors import InputError
from tests.test_clicks_propensity import SEED, simulate_log

pytestmark = [pytest.mark.slow,
              # PySpark 4.3 warns about pandas 3 on every conversion; nothing relgrade can fix.
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    return S.session("local[2]")


@pytest.fixture(scope="module")
def logs(tmp_path_factory, spark):
    """One simulated log (with a randomized slice) as Parquet, open on both engines."""
    folder = tmp_path_factory.mktemp("spark-logs")
    frame, _, _ = simulate_log(SEED, sessions=1500, queries=20, positions=6, chunks=8,
                               randomized_share=0.3)
    path = folder / "log.parquet"
    frame.to_parquet(path)
    duck = engine.open_log(path)
    return path, duck, S.open_log(spark, path)


def _curves(duck, sp, method):
    kw = {"method": method, "max_position": 6, "n_boot": 200, "level": 0.9}
    a = PR.estimate(duck, rng=np.random.default_rng(3), **kw)
    b = S.estimate(sp, rng=np.random.default_rng(3), **kw)
    return a, b


def test_the_log_has_the_same_rows_and_sessions_on_both_engines(logs):
    _, duck, sp = logs
    assert (sp.rows, sp.sessions) == (duck.rows, duck.sessions) == (9000, 1500)


@pytest.mark.parametrize("method", ["randomization", "harvesting"])
def test_spark_gives_duckdbs_curve_and_intervals(logs, method):
    _, duck, sp = logs
    a, b = _curves(duck, sp, method)
    assert a.n_units == b.n_units and a.unit == b.unit
    pd.testing.assert_frame_equal(a.table, b.table, check_exact=False, rtol=1e-12, atol=0)
    assert a.notes == b.notes


def test_spark_writes_duckdbs_pairs_in_the_same_order(logs, tmp_path):
    _, duck, sp = logs
    curve = PR.estimate(duck, method="randomization", rng=np.random.default_rng(0),
                        max_position=6, n_boot=10)
    weights = P.ips_weights(curve, clip=4)
    d, s = engine.DuckDBEngine(), engine.SparkEngine()
    n_d = d.write_pairs(duck, weights, tmp_path / "duck.parquet")
    n_s = s.write_pairs(sp, weights, tmp_path / "spark")
    assert n_d == n_s > 0
    a = pd.read_parquet(tmp_path / "duck.parquet")
    b = pd.read_parquet(tmp_path / "spark")
    pd.testing.assert_frame_equal(a, b[list(a.columns)], check_dtype=False)
    by_duckdb, by_spark = d.clicks_by_position(duck), s.clicks_by_position(sp)
    assert list(by_duckdb) == list(by_spark) == ["position", "shown", "clicks"]
    for column in by_duckdb:
        assert by_duckdb[column].dtype == by_spark[column].dtype == np.int64
        assert by_duckdb[column].tolist() == by_spark[column].tolist()


@pytest.mark.parametrize("rows, message", [
    ([("s1", "q1", "a", 0, 1, "r", False)], "session s1: position must be a whole number"),
    ([("s1", "q1", "a", 1, 1, "r", False), ("s1", "q1", "a", 2, 0, "r", False)],
     "session s1: a session shows each chunk at most once (found chunk a at positions 1, 2)"),
    ([("s1", "q1", "a", 1, 1, "r", True), ("s1", "q1", "b", 3, 0, "r", True)],
     "session s1: rows flagged randomized must come in adjacent pairs"),
])
def test_spark_refuses_what_duckdb_refuses_with_the_same_message(spark, tmp_path, rows,
                                                                  message):
    path = tmp_path / "bad.parquet"
    pd.DataFrame(rows, columns=list(LOG_COLUMNS)).to_parquet(path)
    errors = []
    for open_log, estimate in ((engine.open_log, PR.estimate),
                               (lambda p: S.open_log(spark, p), S.estimate)):
        with pytest.raises(InputError) as e:
            log = open_log(path)
            estimate(log, method="randomization", rng=np.random.default_rng(0),
                     max_position=3, n_boot=10)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    assert message in errors[0]


def test_a_spark_that_cannot_start_is_one_error_and_writes_nothing(tmp_path):
    params = {"seed": 1,
              "paths": {"click_propensity": "metrics/propensity.json",
                        "click_propensity_plot": "plots/propensity.csv"},
              "clicks": {"log": "log.parquet", "engine": "spark", "max_position": 3,
                         "bootstrap": 10}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    frame, _, _ = simulate_log(SEED, sessions=50, positions=3, chunks=4, randomized_share=1)
    frame.to_parquet(tmp_path / "log.parquet")
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java-here")}
    proc = subprocess.run([sys.executable, str(REPO / "stages/propensity.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "Error: Spark could not start (master local[2]):")
    assert "JAVA_HOME" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.parquet", "params.yaml"]


def test_the_command_line_prints_the_same_curve_with_engine_spark(logs, tmp_path):
    from click.testing import CliRunner

    from relgrade.cli import main

    path = logs[0]
    out = {}
    for name in ("duckdb", "spark"):
        res = CliRunner().invoke(main, ["clicks", "propensity", str(path), "--max-position", "6",
                                        "--bootstrap", "100", "--engine", name, "--out",
                                        str(tmp_path / f"{name}.json")])
        assert res.exit_code == 0, res.output
        out[name] = res.output.replace(str(tmp_path / name), "OUT")
    assert out["duckdb"] == out["spark"]
    res = CliRunner().invoke(main, ["clicks", "pairs", str(path), "--propensity",
                                    str(tmp_path / "spark.json"), "--engine", "spark",
                                    "--out", str(tmp_path / "pairs")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "pairs").is_dir()
    assert len(pd.read_parquet(tmp_path / "pairs")) == int(
        res.output.split("wrote ")[1].split(" pairs")[0].replace(",", ""))
