"""The pool stage a block of queries at a time: TREC runs scanned a block of whole queries
at a time, merged by query across arms, pooled block by block and written a row group at a
time, against the whole-run path: the same bytes in every output, the same refusals."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.io import trec_scan
from relgrade.io.files import write_arrow_parquet
from relgrade.pipeline.stages import pool as stage
from relgrade.protocol import pool as P
from tests.test_pool import stage_setup
from tests.test_pool_scan import CHUNKS, QUERIES, _damaged
from tests.test_pool_scan import _run_text as _file_order_text


def _run_text(rng, arm: str, **kw) -> str:
    """A run of every query (tests.test_pool_scan's), its queries in byte order."""
    lines = _file_order_text(rng, arm, **kw).splitlines(keepends=True)
    return "".join(sorted(lines, key=lambda line: line.split()[0]))


def _scan_columns(run):
    """A scanned run's rows as plain values."""
    q = pa.LargeStringArray.from_buffers(run.n_rows, pa.py_buffer(run.query_offsets),
                                         pa.py_buffer(run.query_bytes)).to_pylist()
    c = pa.LargeStringArray.from_buffers(run.n_rows, pa.py_buffer(run.chunk_offsets),
                                         pa.py_buffer(run.chunk_bytes)).to_pylist()
    return q, c, run.rank.tolist(), run.score.tolist(), run.chunk_hash.tolist()


# --- the scan a block of queries at a time -------------------------------------------------

@pytest.mark.parametrize("end", ["\n", "\r\n"])
@pytest.mark.parametrize("block", [16, 64, 100, 1 << 22])
def test_the_blocks_stacked_are_the_whole_scan_and_hold_whole_queries(tmp_path, block, end):
    path = tmp_path / "r.trec"
    path.write_bytes(b"\xef\xbb\xbf" + _run_text(np.random.default_rng(3), "a",
                                                   end=end).encode())
    whole = trec_scan.scan_trec_run(path)
    pieces = list(trec_scan.scan_trec_blocks(path, block_bytes=block))
    assert all(p is not None for p in pieces)
    got = [sum(col, []) for col in zip(*(_scan_columns(p) for p in pieces))]
    assert got == [list(v) for v in _scan_columns(whole)]
    # each query's rows in one piece, one head each; no piece holds a repeat
    firsts = [q for p in pieces for q in np.array(_scan_columns(p)[0])[p.heads].tolist()]
    assert firsts == sorted(QUERIES)
    assert not any(p.repeated_hash for p in pieces)
    if block <= 100:
        assert len(pieces) > 1


def test_a_query_in_two_places_shows_in_two_blocks_and_a_repeat_is_found(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 c1 1 3 t\nq1 Q0 c2 2 2 t\nq2 Q0 c1 1 1 t\nq1 Q0 c1 3 1 t\n")
    pieces = list(trec_scan.scan_trec_blocks(path, block_bytes=16))
    heads = [np.array(_scan_columns(p)[0])[p.heads].tolist() for p in pieces]
    assert sum(heads, []) == ["q1", "q2", "q1"]
    path.write_text("q1 Q0 c1 1 3 t\nq1 Q0 c2 2 2 t\nq1 Q0 c1 3 1 t\nq2 Q0 c1 1 1 t\n")
    pieces = list(trec_scan.scan_trec_blocks(path, block_bytes=16))
    assert [p.repeated_hash for p in pieces] == [True]


def test_a_line_the_scan_does_not_take_ends_the_blocks_with_none(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 c1 1 3 t\nq2 Q0 c2 1 2 t\nq3 Q0 c3 1 inf t\nq4 Q0 c4 1 1 t\n")
    assert list(trec_scan.scan_trec_blocks(path, block_bytes=16))[-1] is None
    path.write_text("")
    assert list(trec_scan.scan_trec_blocks(path)) == [None]


# --- the pool a block of queries at a time ---------------------------------------------------

def _candidates(rng, arms, n_queries=30):
    """Each arm's candidate rows as Arrow tables, queries ascending, ranked by score."""
    out = {}
    for arm in arms:
        q, c, r, s = [], [], [], []
        for i in range(n_queries):
            n = int(rng.integers(0, 12))
            chunks = rng.choice(60, size=n, replace=False)
            scores = np.sort(rng.integers(0, 5, size=n) / 2)[::-1]
            q += [f"q{i:03d}"] * n
            c += [f"c{x}" for x in chunks]
            r += list(range(1, n + 1))
            s += scores.tolist()
        out[arm] = pa.table({"query_id": pa.array(q, pa.large_string()),
                             "chunk_id": pa.array(c, pa.large_string()),
                             "rank": pa.array(r, pa.int64()),
                             "score": pa.array(s, pa.float64())})
    return out


def _in_blocks(candidates, bounds):
    """The candidates cut at the query ids ``bounds`` (each block: queries below it)."""
    edges = [None, *bounds, None]
    for lo, hi in zip(edges[:-1], edges[1:]):
        block = {}
        for arm, t in candidates.items():
            q = np.array(t["query_id"].to_pylist(), dtype=object)
            keep = np.ones(len(q), dtype=bool)
            if lo is not None:
                keep &= q >= lo
            if hi is not None:
                keep &= q < hi
            block[arm] = t.filter(pa.array(keep))
        yield block


@pytest.mark.parametrize("seed", range(6))
def test_the_blocks_pool_stacked_is_the_whole_pool_with_the_same_stats_and_manifest(seed):
    rng = np.random.default_rng(seed)
    arms = ["b", "a", "c"]
    candidates = _candidates(rng, arms)
    kw = {"depth": 3, "ties": ("score", "rank")[seed % 2]}
    if seed >= 3:
        kw.update(tail_sample=2, tail_depth=8)
    whole = P.pool_tables(candidates, **kw, rng=np.random.default_rng(seed))
    blocks = P.PoolBlocks(arms, **kw, rng=np.random.default_rng(seed))
    bounds = sorted({f"q{int(x):03d}" for x in rng.integers(1, 30, size=4)})
    got = [blocks.add(b) for b in _in_blocks(candidates, bounds)]
    assert pa.concat_tables([g[0] for g in got]).equals(whole[0])
    assert pa.concat_tables([g[1] for g in got]).equals(whole[1])
    assert blocks.stats() == whole[2]
    params = {"seed": 1, "depth": 3, "tail_sample": kw.get("tail_sample", 0),
              "tail_depth": kw.get("tail_depth"), "arms": arms}
    assert blocks.manifest(**params) == P.pool_manifest(whole[0], **params)


def test_a_block_before_the_last_ones_queries_is_refused():
    candidates = _candidates(np.random.default_rng(1), ["a"])
    first, second = _in_blocks(candidates, ["q015"])
    blocks = P.PoolBlocks(["a"], depth=3)
    blocks.add(second)
    with pytest.raises(ValueError, match="after query q029"):
        blocks.add(first)
    with pytest.raises(ValueError, match="are not"):
        blocks.add({"b": second["a"]})


def test_pooling_a_second_block_does_not_load_pandas():
    # the order check compares the block's first query with the last one before it; a
    # Python str there would make pyarrow import pandas (0.3 CPU-s of the stage's process)
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import numpy as np\n"
        "from relgrade.protocol.pool import PoolBlocks\n"
        "from relgrade.ranking import arrow_array, arrow_strings\n"
        "def rows(q):\n"
        "    return {'a': __import__('pyarrow').table({\n"
        "        'query_id': arrow_strings([q, q]), 'chunk_id': arrow_strings(['c1', 'c2']),\n"
        "        'rank': arrow_array(np.array([1, 2])),\n"
        "        'score': arrow_array(np.array([2.0, 1.0]))})}\n"
        "blocks = PoolBlocks(['a'], depth=1)\n"
        "got = [blocks.add(rows(q))[0].num_rows for q in ('q1', 'q2', 'q3')]\n"
        "print(got, blocks.stats()['pairs'], 'pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[1, 1, 1] 3 False"


# --- the stage -----------------------------------------------------------------------------

def _stage(root, runs, **pool):
    params = stage_setup(root, runs)
    params["pool"].update(pool)
    # every query and chunk id the runs may name
    pa.parquet.write_table(pa.table({"query_id": QUERIES, "query": QUERIES,
                                     "group": ["keyword"] * len(QUERIES),
                                     "weight": [1.0] * len(QUERIES)}),
                           root / "queries.parquet")
    pa.parquet.write_table(pa.table({"chunk_id": CHUNKS, "header": CHUNKS, "text": CHUNKS,
                                     "source": CHUNKS}), root / "chunks.parquet")
    return Experiment.from_mapping(params)


OUTPUTS = ["out/pool.parquet", "private/prov.parquet", "out/manifest.json",
           "out/stats.json"]


def _whole_outputs(ex, root):
    """What the whole-run path writes for the experiment, as bytes, in a folder apart."""
    arms = list(ex.params.arms)
    paths = {a: ex.path("runs") / f"{a}.trec" for a in arms}
    cfg = ex.params.pool
    rng = np.random.default_rng(0)
    from relgrade.rng import stage_rng

    rng = stage_rng(ex.params.seed, "pool")
    queries, chunks = stage.known_ids(ex)
    table, prov, stats = stage.pool_files(
        paths, depth=cfg.depth, tail_sample=cfg.tail_sample, tail_depth=cfg.tail_depth,
        ties=ex.params.runs.ties, rng=rng, queries=queries, chunks=chunks)
    out = root / "whole"
    write_arrow_parquet(out / "pool.parquet", table)
    write_arrow_parquet(out / "prov.parquet", prov)
    manifest = P.pool_manifest(table, seed=ex.params.seed, depth=cfg.depth,
                               tail_sample=cfg.tail_sample, tail_depth=cfg.tail_depth,
                               arms=arms)
    return [(out / "pool.parquet").read_bytes(), (out / "prov.parquet").read_bytes(),
            manifest, stats]


def _written(root):
    return [(root / o).read_bytes() for o in OUTPUTS[:2]] + [
        json.loads((root / o).read_text()) for o in OUTPUTS[2:]]


@pytest.mark.parametrize("seed", range(4))
def test_the_stage_in_blocks_writes_the_whole_paths_bytes(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    monkeypatch.chdir(tmp_path)
    runs = {a: _run_text(rng, a) for a in ("x", "y", "z")}
    ex = _stage(tmp_path, runs, depth=3,
                **({"tail_sample": 2, "tail_depth": 9} if seed % 2 else {}))
    took = []
    real = stage.pool_in_blocks
    monkeypatch.setattr(stage, "pool_in_blocks",
                        lambda *a, **k: took.append(real(*a, **k)) or took[-1])
    # small blocks: each arm's run is read in several, cut at other queries in each arm
    monkeypatch.setattr(trec_scan, "BLOCK_BYTES", 200 + 50 * seed)
    monkeypatch.setattr(stage, "BLOCK_ROWS", 10 + 40 * seed)
    stage.run(ex)
    assert took == [True]
    assert _written(tmp_path) == _whole_outputs(ex, tmp_path)


def test_runs_whose_queries_are_not_in_order_are_pooled_whole(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    monkeypatch.chdir(tmp_path)
    # x: q10 after q9 (the file order of tests.test_pool_scan); y: queries in byte order
    runs = {"x": _file_order_text(rng, "x"), "y": _run_text(rng, "y")}
    ex = _stage(tmp_path, runs, depth=3)
    known = stage._known_tables(*stage.known_ids(ex))
    assert not stage.pool_in_blocks(ex, {a: tmp_path / "runs" / f"{a}.trec" for a in runs},
                                    known=known, seed=11, arms=list(runs), depth=3)
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()
    stage.run(ex)
    assert _written(tmp_path) == _whole_outputs(ex, tmp_path)


@pytest.mark.parametrize("kind", ["unknown chunk, deep", "unknown query", "chunk twice",
                                  "query split", "infinite score", "blank line"])
def test_a_damaged_run_is_refused_or_pooled_as_the_whole_path_does(tmp_path, monkeypatch,
                                                                  kind):
    rng = np.random.default_rng(7)
    monkeypatch.chdir(tmp_path)
    runs = {"a": _run_text(rng, "a"), "b": _damaged(rng, _run_text(rng, "b"), kind)}
    ex = _stage(tmp_path, runs, depth=3)
    monkeypatch.setattr(trec_scan, "BLOCK_BYTES", 150)
    try:
        stage.pool_files({a: ex.path("runs") / f"{a}.trec" for a in runs}, depth=3,
                         queries=QUERIES, chunks=CHUNKS)
        refused = None
    except InputError as e:
        refused = str(e)
    if refused is None:
        stage.run(ex)
        assert _written(tmp_path) == _whole_outputs(ex, tmp_path)
        return
    with pytest.raises(InputError) as e:
        stage.run(ex)
    assert str(e.value) == refused
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()


def test_the_pool_and_provenance_span_row_groups_as_the_whole_file_does(tmp_path,
                                                                        monkeypatch):
    # the row groups cut at 64 rows on both paths: the same bytes across their boundaries
    from relgrade.io import files

    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 64)
    real = pq.write_table
    monkeypatch.setattr(pq, "write_table",
                        lambda table, where, **kw: real(table, where, row_group_size=64, **kw))
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(11)
    ex = _stage(tmp_path, {a: _run_text(rng, a) for a in ("x", "y")}, depth=4)
    monkeypatch.setattr(trec_scan, "BLOCK_BYTES", 300)
    monkeypatch.setattr(stage, "BLOCK_ROWS", 50)
    stage.run(ex)
    assert pq.ParquetFile(tmp_path / "out/pool.parquet").metadata.num_row_groups > 1
    assert _written(tmp_path) == _whole_outputs(ex, tmp_path)


def test_a_run_left_to_the_whole_path_after_some_blocks_draws_the_same_tail_sample(
        tmp_path, monkeypatch):
    # y's last query comes out of byte order: the block path has pooled (and drawn tail
    # keys for) the blocks before it when it gives the runs to the whole path
    rng = np.random.default_rng(13)
    monkeypatch.chdir(tmp_path)
    lines = _run_text(rng, "y").splitlines(keepends=True)
    first = [line for line in lines if line.startswith("q0 ")]
    runs = {"x": _run_text(rng, "x"),
            "y": "".join([line for line in lines if not line.startswith("q0 ")] + first)}
    ex = _stage(tmp_path, runs, depth=2, tail_sample=2, tail_depth=9)
    monkeypatch.setattr(trec_scan, "BLOCK_BYTES", 200)
    monkeypatch.setattr(stage, "BLOCK_ROWS", 10)
    drawn = []
    real = P.PoolBlocks.add
    monkeypatch.setattr(P.PoolBlocks, "add",
                        lambda self, block: drawn.append(1) or real(self, block))
    stage.run(ex)
    assert drawn  # some blocks were pooled before the whole path took over
    assert _written(tmp_path) == _whole_outputs(ex, tmp_path)
