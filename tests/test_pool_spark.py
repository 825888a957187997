"""The pool stage on Spark (params ``pool.engine: spark``, local mode): the same four
outputs, byte for byte, as the local engine; a run Spark leaves to the reference rules is
pooled, or refused, exactly as locally."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.pipeline.stages import pool as pool_stage

from tests.test_pool import stage_setup

pytestmark = [pytest.mark.slow,
              # PySpark 4.3 warns about pandas 3 on every conversion; nothing relgrade can fix.
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

OUTPUTS = ("out/pool.parquet", "private/prov.parquet", "out/manifest.json", "out/stats.json")


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from relgrade.tables import spark as S

    return S.session("local[2]")


def outputs(root: Path, params: dict, engine: str) -> dict[str, bytes]:
    """Run the pool stage in ``root`` on ``engine``; its four outputs' bytes."""
    params = {**params, "pool": {**params["pool"], "engine": engine,
                                 "spark_master": "local[2]"}}
    old = Path.cwd()
    os.chdir(root)
    try:
        pool_stage.run(Experiment.from_mapping(params))
        return {name: (root / name).read_bytes() for name in OUTPUTS}
    finally:
        os.chdir(old)


RUNS = {  # score ties at the cut and across arms; q2 shorter than the depth in x
    "x": "q1 Q0 c1 1 3.0 x\nq1 Q0 c2 2 2.0 x\nq1 Q0 c3 3 2.0 x\nq2 Q0 c5 1 1 x\n",
    "y": "q1 Q0 c3 1 5.0 y\nq1 Q0 c1 2 4.0 y\nq2 Q0 c4 1 1.0 y\nq2 Q0 c0 2 1.0 y\n"
         "q2 Q0 c2 3 0.5 y\n",
}


@pytest.mark.parametrize("ties", ["score", "rank"])
@pytest.mark.parametrize("tail", [0, 2])
def test_spark_pool_writes_the_local_engines_bytes(spark, tmp_path, ties, tail):
    params = stage_setup(tmp_path, RUNS)
    params["runs"]["ties"] = ties
    params["pool"].update(depth=1, tail_sample=tail, tail_depth=3)
    local = outputs(tmp_path, params, "local")
    assert outputs(tmp_path, params, "spark") == local
    # by hand, ties=score, depth 1, no tail: x's q1 top is c1; q2 c5; y's c3; q2 tie at
    # 1.0 between c4 and c0: c4 first (chunk id descending)
    if ties == "score" and tail == 0:
        pool = pd.read_parquet(tmp_path / OUTPUTS[0])
        assert list(zip(pool.query_id, pool.chunk_id)) == [
            ("q1", "c1"), ("q1", "c3"), ("q2", "c4"), ("q2", "c5")]


def test_spark_pool_equals_the_local_pool_on_a_generated_set(spark, tmp_path):
    # 10,000 queries, two arms of depth 12 on a 4,000-chunk corpus; scores on a coarse grid,
    # so ties at the cut are common
    rng = np.random.default_rng(30)
    n, depth = 10_000, 12
    params = stage_setup(tmp_path, {})
    qids = [f"q{i}" for i in range(n)]
    pd.DataFrame({"query_id": qids, "query": qids, "group": ["keyword"] * n,
                  "weight": [1.0] * n}).to_parquet(tmp_path / "queries.parquet")
    pd.DataFrame({"chunk_id": [f"c{i}" for i in range(4000)], "header": "h", "text": "t",
                  "source": "s"}).to_parquet(tmp_path / "chunks.parquet")
    for arm in ("a", "b"):
        # distinct per query: a seeded start, then steps of 7 (7 * 11 < 4,000)
        chunks = (rng.integers(0, 4000, size=(n, 1)) + 7 * np.arange(depth)) % 4000
        scores = -np.sort(-rng.integers(0, 6, size=(n, depth)), axis=1) / 2
        with open(tmp_path / "runs" / f"{arm}.trec", "w") as f:
            for q in range(n):
                f.writelines(f"q{q} Q0 c{c} {r} {s} {arm}\n"
                             for r, (c, s) in enumerate(zip(chunks[q], scores[q]), start=1))
        params["arms"][arm] = {"kind": "file", "depth": depth, "source": f"runs/{arm}.trec"}
    params["pool"].update(depth=5)
    local = outputs(tmp_path, params, "local")
    assert outputs(tmp_path, params, "spark") == local
    assert len(pd.read_parquet(tmp_path / OUTPUTS[0])) > 5 * n
    # and Spark did the work (it left nothing to the local engine)
    from relgrade.tables import spark as S

    assert S.arm_candidates(spark, {a: tmp_path / "runs" / f"{a}.trec" for a in "ab"},
                            depth=5, queries=tmp_path / "queries.parquet",
                            chunks=tmp_path / "chunks.parquet") is not None


def candidates(table) -> list[tuple]:
    return sorted(zip(*(table[c].to_pylist() for c in ("query_id", "chunk_id", "rank",
                                                        "score"))))


@pytest.mark.parametrize("ties", ["score", "rank"])
def test_spark_keeps_the_rows_the_local_cut_keeps(spark, tmp_path, ties):
    from relgrade.io.runtable import read_run_table
    from relgrade.protocol import pool as P
    from relgrade.tables import spark as S

    stage_setup(tmp_path, RUNS)
    paths = {a: tmp_path / "runs" / f"{a}.trec" for a in RUNS}
    got = S.arm_candidates(spark, paths, depth=1, ties=ties,
                           queries=tmp_path / "queries.parquet",
                           chunks=tmp_path / "chunks.parquet")
    assert got is not None and list(got) == ["x", "y"]
    for arm, path in paths.items():
        assert candidates(got[arm]) == candidates(P.arm_candidates(read_run_table(path), 1,
                                                                   ties=ties))
    # by hand (ties=score): y's q2 ties c4 and c0 at 1.0 at the cut: both kept
    if ties == "score":
        assert [r[1] for r in candidates(got["y"])] == ["c3", "c0", "c4"]


def test_a_run_in_another_layout_is_pooled_as_locally(spark, tmp_path):
    from relgrade.tables import spark as S

    runs = {"x": "\ufeffq1  Q0 c1 1 3.0 x\r\nq1 Q0 c2 2 -0.0 x\r\n\nq2 Q0 c5 1 0 x\r\n",
            "y": "q1\tQ0\tc3\t1\t5.0\ty\nq2\tQ0\tc4\t1\t1.0\ty\n"}
    params = stage_setup(tmp_path, runs)
    # Spark leaves x (a byte-order mark, two spaces, a blank line, -0.0) to the local engine
    assert S.arm_candidates(spark, {a: tmp_path / "runs" / f"{a}.trec" for a in runs},
                            depth=2) is None
    assert S.arm_candidates(spark, {"y": tmp_path / "runs" / "y.trec"}, depth=2) is not None
    assert outputs(tmp_path, params, "spark") == outputs(tmp_path, params, "local")


@pytest.mark.parametrize("x, y, words", [
    ("q1 Q0 c1 1 3.0 x\n", "q1 Q0 c1 1 3.0 y\nq2 Q0 nope 2 1.0 y\n",
     ("runs/y.trec", "query q2, chunk nope", "unknown chunk id")),
    ("q1 Q0 c1 1 3.0 x\nq1 Q0 c1 2 1.0 x\n", "q9 Q0 c1 1 3.0 y\n",
     ("runs/x.trec:2: query q1, chunk c1", "a chunk is listed twice for one query",
      "(found lines 1 and 2)")),
    ("q1 Q0 c1 1 nan x\n", "q1 Q0 c1 1 3.0 y\n",
     ("runs/x.trec:1", "score must be a finite number", "found 'nan'")),
])
def test_spark_pool_refuses_a_bad_run_as_locally(spark, tmp_path, x, y, words):
    params = stage_setup(tmp_path, {"x": x, "y": y})
    messages = []
    for engine in ("local", "spark"):
        with pytest.raises(InputError) as e:
            outputs(tmp_path, params, engine)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert all(w in messages[1] for w in words), messages[1]
    assert not (tmp_path / "out").exists()
