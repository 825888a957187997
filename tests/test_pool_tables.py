"""The pool stage on the table engine: DuckDB connections, the one-query check of every run
row against the known ids, and which bad arm the stage names when several are bad."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from relgrade import ranking as R
from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.io.files import read_column, read_table
from relgrade.io.runs import read_run, run_lines
from relgrade.pipeline.stages import pool as pool_stage
from relgrade.tables.engine import connect
from relgrade.tables.pooling import runs_naming_unknown_ids

from tests.test_pool import stage_setup


# --- connections ------------------------------------------------------------------------

def setting(con, name):
    return con.execute(f"SELECT current_setting('{name}')").fetchone()[0]


def test_connect_applies_threads_memory_limit_and_temp_dir(tmp_path):
    with connect(threads=1, memory_limit="100MB", temp_dir=tmp_path / "spill") as con:
        assert setting(con, "threads") == 1
        # DuckDB reports the limit in its own units: 100MB = 100,000,000 bytes = 95.3 MiB
        assert setting(con, "memory_limit") == "95.3 MiB"
        assert setting(con, "temp_directory") == str(tmp_path / "spill")
        assert setting(con, "preserve_insertion_order") is False


@pytest.mark.parametrize("kwargs, words", [
    ({"threads": 0}, "threads must be an integer >= 1"),
    ({"threads": True}, "threads must be an integer >= 1"),
    ({"memory_limit": "lots"}, "not a memory limit DuckDB accepts"),
])
def test_connect_refuses_a_bad_setting_naming_it(kwargs, words):
    with pytest.raises(InputError, match=words) as e:
        connect(**kwargs)
    assert repr(next(iter(kwargs.values()))).strip("'") in str(e.value)


# --- unknown ids in one query -------------------------------------------------------------

def ids(*values):
    return pa.array(values, type=pa.large_string())


def test_runs_naming_unknown_ids_by_hand():
    queries, chunks = ["q1", "q2"], ["c1", "c2", "é"]
    q = [ids("q1", "q2"), ids("q1"), ids("q3"), ids("q2")]
    c = [ids("c1", "é"), ids("c"), ids("c2"), ids("c2", "c1", "c2")]
    with connect(threads=1) as con:
        # run 1 names "c", a prefix of a known id (unknown); run 2 names query q3
        assert runs_naming_unknown_ids(con, query_ids=q, chunk_ids=c, queries=queries,
                                       chunks=chunks) == [1, 2]
        assert runs_naming_unknown_ids(con, query_ids=q, chunk_ids=c, chunks=chunks) == [1]
        assert runs_naming_unknown_ids(con, query_ids=q, chunk_ids=c, queries=queries) == [2]
        assert runs_naming_unknown_ids(con, query_ids=q, chunk_ids=c) == []
        assert runs_naming_unknown_ids(con, query_ids=[q[0], q[3]], chunk_ids=[c[0], c[3]],
                                       queries=queries, chunks=chunks) == []
        # the views it registered are gone again
        assert con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal "
                           "AND view_name LIKE 'relgrade_%'").fetchone()[0] == 0
    with pytest.raises(ValueError):
        runs_naming_unknown_ids(None, query_ids=q, chunk_ids=c[:2], chunks=chunks)


def test_runs_naming_unknown_ids_agree_with_arrow_is_in():
    rng = np.random.default_rng(4)
    corpus = pa.array([f"doc{i}" for i in rng.choice(4000, size=3000, replace=False)])
    runs = [pa.array([f"doc{i}" for i in rng.integers(0, 4000, size=rng.integers(1, 12))])
            for _ in range(40)]
    want = [i for i, r in enumerate(runs)
            if not pc.all(pc.is_in(r, value_set=corpus)).as_py()]
    assert 0 < len(want) < len(runs)
    with connect() as con:
        got = runs_naming_unknown_ids(con, query_ids=[ids("q")] * len(runs), chunk_ids=runs,
                                      chunks=corpus)
    assert got == want


# --- the stage ------------------------------------------------------------------------------

@pytest.mark.parametrize("x, y, named", [
    # x names an unknown chunk, y lists a chunk twice: x comes first, so x's rule is named
    ("q1 Q0 c1 1 3.0 x\nq1 Q0 nope 2 1.0 x\n", "q1 Q0 c1 1 3.0 y\nq1 Q0 c1 2 2.0 y\n",
     ("runs/x.trec", "query q1, chunk nope", "unknown chunk id")),
    # and the other way round, naming the repeat's line and the first one's
    ("q1 Q0 c1 1 3.0 x\nq1 Q0 c1 2 2.0 x\n", "q1 Q0 c1 1 3.0 y\nq1 Q0 nope 2 1.0 y\n",
     ("runs/x.trec:2: query q1, chunk c1", "a chunk is listed twice for one query",
      "(found lines 1 and 2)")),
    # a blank line is a line of the file, not a row of the run
    ("q1 Q0 c1 1 3.0 x\n\nq1 Q0 c1 2 2.0 x\n", "q1 Q0 c1 1 3.0 y\n",
     ("runs/x.trec:3: query q1, chunk c1", "(found lines 1 and 3)")),
    # an unknown query in the second arm, after a good first arm
    ("q1 Q0 c1 1 3.0 x\n", "q1 Q0 c1 1 3.0 y\nq7 Q0 c2 1 1.0 y\n",
     ("runs/y.trec", "query q7, chunk c2", "unknown query id")),
])
def test_pool_stage_names_the_first_bad_arm_with_the_reference_message(tmp_path, monkeypatch,
                                                                      x, y, named):
    monkeypatch.chdir(tmp_path)
    params = stage_setup(tmp_path, {"x": x, "y": y})
    with pytest.raises(InputError) as e:
        pool_stage.run(Experiment.from_mapping(params))
    msg = str(e.value)
    assert all(part in msg for part in named), msg
    arm = named[0].split("/")[1].split(".trec")[0]
    with pytest.raises(InputError) as reference:
        R.validate_run(read_run(tmp_path / "runs" / f"{arm}.trec"),
                       path=tmp_path / "runs" / f"{arm}.trec",
                       queries=["q1", "q2"], chunks=[f"c{i}" for i in range(6)],
                       lines=run_lines(tmp_path / "runs" / f"{arm}.trec"))
    assert msg == str(reference.value).replace(str(tmp_path / "runs"), "runs")
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()


def test_pool_stage_script_prints_one_error_line_for_an_unknown_chunk(tmp_path):
    params = stage_setup(tmp_path, {"x": "q1 Q0 c1 1 3.0 x\n",
                                    "y": "q1 Q0 c1 1 3.0 y\nq2 Q0 nope 2 1.0 y\n"})
    import yaml

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    script = "from relgrade.pipeline.runner import run_stage\n" \
             "from relgrade.pipeline.stages.pool import run\nrun_stage(run)\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "runs/y.trec" in lines[0] and "chunk nope" in lines[0]
    assert not (tmp_path / "out").exists()


# --- reading one column -------------------------------------------------------------------

def test_read_column_reads_what_read_table_reads(tmp_path):
    frame = pd.DataFrame({"chunk_id": ["c2", "é", "c1"], "text": ["a", "b", "c"],
                          "n": [1, 2, 3]})
    frame.to_parquet(tmp_path / "t.parquet")
    frame.to_csv(tmp_path / "t.tsv", sep="\t", index=False)
    for name in ("t.parquet", "t.tsv"):
        got = read_column(tmp_path / name, "chunk_id")
        assert got.to_pylist() == ["c2", "é", "c1"]
        assert got.to_pylist() == read_table(tmp_path / name)["chunk_id"].tolist()
    # a column of another type is read as read_table reads it: as text
    assert read_column(tmp_path / "t.parquet", "n").to_pylist() == ["1", "2", "3"]


def test_read_column_refuses_as_read_table_refuses(tmp_path):
    pd.DataFrame({"query_id": ["q1"]}).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    for path in (tmp_path / "t.parquet", tmp_path / "bad.parquet", tmp_path / "gone.parquet"):
        with pytest.raises(InputError) as got:
            read_column(path, "chunk_id")
        with pytest.raises(InputError) as want:
            read_table(path, columns=["chunk_id"])
        assert str(got.value) == str(want.value)
