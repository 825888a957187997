"""The metrics stage by query blocks: the key and a run in query order scored a block of whole
queries at a time give the same values, means and file bytes as the whole key and run."""

from __future__ import annotations

import hashlib
import importlib
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from relgrade.evaluation import metrics
from relgrade.evaluation.measures import protocol_measures
from relgrade.experiment.files import Experiment
from relgrade.io.runtable import RunNotInBlocks, trec_query_blocks, trec_table

stage = importlib.import_module("relgrade.pipeline.stages.metrics")


def _random(seed, n_queries=40):
    """A key (sorted by query and chunk, some queries with nothing relevant) and a run in
    query order that misses some key queries, answers some queries outside the key, and
    ties on some scores."""
    rng = np.random.default_rng(seed)
    key_rows, run_rows = [], []
    for q in range(n_queries):
        qid = f"q{q:03d}"
        chunks = [f"c{q}-{i}" for i in range(12)]
        in_key = q % 7 != 3
        if in_key:
            for c in sorted(rng.choice(chunks, size=6, replace=False)):
                key_rows.append((qid, c, int(rng.integers(0, 3)) if q % 5 else 0))
        if q % 6 != 2:
            picked = rng.choice(chunks, size=int(rng.integers(1, 11)), replace=False)
            scores = np.round(rng.normal(size=len(picked)), 1)
            for r, (c, s) in enumerate(zip(picked, scores), 1):
                run_rows.append((qid, c, r, float(s)))
    key = pd.DataFrame(key_rows, columns=["query_id", "chunk_id", "grade"])
    run = pd.DataFrame(run_rows, columns=["query_id", "chunk_id", "rank", "score"])
    return key.sort_values(["query_id", "chunk_id"], ignore_index=True), run


def _cut(key, run, bounds):
    """(key rows, run rows) per block of queries, the blocks ending at the key's queries
    ``bounds`` (indices into its distinct ids); the last block takes every later run row."""
    ids = sorted(key["query_id"].unique())
    edges = [ids[b] for b in bounds] + [None]
    low = None
    for high in edges:
        def inside(q):
            keep = np.ones(len(q), dtype=bool)
            if low is not None:
                keep &= (q > low).to_numpy()
            if high is not None:
                keep &= (q <= high).to_numpy()
            return keep
        k, r = key[inside(key["query_id"])], run[inside(run["query_id"])]
        low = high
        yield k.reset_index(drop=True), pa.Table.from_pandas(r, preserve_index=False)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("bounds", [[], [0], [4, 5, 17], list(range(33))])
def test_blocks_give_the_whole_run_s_values_and_means_float_for_float(seed, bounds):
    key, run = _random(seed)
    measures = protocol_measures([1, 3, 10])
    whole = metrics.per_query_table(qrels=key, run=run, measures=measures)
    values = metrics.score_blocks(_cut(key, run, bounds), measures=measures)
    got = values.table()
    assert got["query_id"].to_pylist() == whole["query_id"].to_pylist()
    assert got["measure"].to_pylist() == whole["measure"].to_pylist()
    assert got["value"].to_numpy().tobytes() == whole["value"].to_numpy().tobytes()
    means = metrics.mean(metrics.per_query(qrels=key, run=run, measures=measures))
    assert values.means() == {m: float(v) for m, v in means.items()}


def test_a_block_the_arm_does_not_answer_scores_zero():
    key = pd.DataFrame({"query_id": ["a", "b"], "chunk_id": ["x", "y"], "grade": [2, 1]})
    run = pa.table({"query_id": pa.array(["a"], pa.large_string()),
                    "chunk_id": pa.array(["x"], pa.large_string()),
                    "rank": [1], "score": [1.0]})
    blocks = [(key.iloc[:1], run), (key.iloc[1:].reset_index(drop=True), run.slice(0, 0))]
    values = metrics.score_blocks(blocks, measures=["RR@10", "R@10"])
    assert values.query_ids.to_pylist() == ["a", "b"]
    assert [v.tolist() for v in values.values] == [[1.0, 0.0], [1.0, 0.0]]


def _write_run(path, run):
    path.write_text("".join(f"{q} Q0 {c} {r} {s!r} arm\n" for q, c, r, s in
                            run.itertuples(index=False)))


def test_a_run_in_query_order_comes_in_blocks_of_whole_queries(tmp_path):
    _, run = _random(4)
    path = tmp_path / "a.trec"
    _write_run(path, run)
    blocks = list(trec_query_blocks(path, block_bytes=200))
    assert len(blocks) > 5
    firsts = [b["query_id"][0].as_py() for b in blocks]
    lasts = [b["query_id"][len(b) - 1].as_py() for b in blocks]
    assert all(last < first for last, first in zip(lasts, firsts[1:]))  # no query split
    assert pa.concat_tables(blocks).equals(trec_table(path))


def test_a_run_out_of_query_order_is_left_to_the_whole_reader(tmp_path):
    path = tmp_path / "a.trec"
    path.write_text("q2 Q0 a 1 1.0 t\nq2 Q0 b 2 0.5 t\nq1 Q0 c 1 1.0 t\n")
    with pytest.raises(RunNotInBlocks):
        list(trec_query_blocks(path, block_bytes=1 << 20))
    path.write_text("q1 Q0 a 1 1.0 t\nq1  Q0 b 2 0.5 t\n")  # a doubled separator
    with pytest.raises(RunNotInBlocks):
        list(trec_query_blocks(path))


def _experiment(tmp_path, seed, *, shuffled=False):
    """A metrics stage's inputs (a random key and run); the run's rows in query order, or
    shuffled across queries (then the stage reads it whole)."""
    key, run = _random(seed)
    tmp_path.mkdir()
    paths = {"key": "key.jsonl", "record": "record.json", "runs": "runs",
             "queries": "queries.parquet", "ledger": "ledger.jsonl", "metrics": "m",
             "per_query": "pq"}
    paths = {k: str(tmp_path / v) for k, v in paths.items()}
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n"
                   for r in key.to_dict("records"))
    (tmp_path / "key.jsonl").write_text(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    (tmp_path / "record.json").write_text(json.dumps(
        {"key_sha256": sha, "pool_version": "p-000000000001", "rubric_version": "v1",
         "round": 1, "post_hoc": False}))
    (tmp_path / "runs").mkdir()
    if shuffled:
        run = run.sample(frac=1.0, random_state=0, ignore_index=True)
    _write_run(tmp_path / "runs" / "bm25.trec", run)
    ids = [f"q{q:03d}" for q in range(40)]
    pd.DataFrame({"query_id": ids, "query": ids,
                  "group": ["keyword", "question"] * 20}).to_parquet(paths["queries"])
    return Experiment.from_mapping({
        "paths": paths, "arms": {"bm25": {"kind": "bm25", "depth": 10}},
        "runs": {"ties": "score"}, "scale": {"grades": [0, 1, 2], "relevant_min": 1},
        "metrics": {"cutoffs": [1, 3, 10]}})


@pytest.mark.parametrize("seed", [5, 6])
def test_the_stage_in_blocks_writes_the_bytes_of_the_whole_path(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(stage, "KEY_BLOCK_BYTES", 300)
    monkeypatch.setattr(stage, "RUN_BLOCK_BYTES", 250)
    ordered = _experiment(tmp_path / "ordered", seed)
    whole = _experiment(tmp_path / "whole", seed, shuffled=True)
    run = lambda ex: ex.path("runs") / "bm25.trec"  # noqa: E731
    assert stage._values_in_blocks(ordered, ordered.path("key"), run(ordered)) is not None
    assert stage._values_in_blocks(whole, whole.path("key"), run(whole)) is None
    for ex in (ordered, whole):
        stage.run(ex, "bm25")
    for name in ("m/bm25.json", "pq/bm25.parquet"):
        assert (tmp_path / "ordered" / name).read_bytes() == \
            (tmp_path / "whole" / name).read_bytes(), name


@pytest.mark.parametrize("bad", ["zzz Q0 c1 1 1.0 arm\n", "q039 Q0 c39-0 1 nan arm\n"])
def test_a_refused_run_in_query_order_is_refused_as_the_whole_path_refuses_it(
        tmp_path, monkeypatch, bad):
    from relgrade.errors import InputError

    monkeypatch.setattr(stage, "KEY_BLOCK_BYTES", 300)
    monkeypatch.setattr(stage, "RUN_BLOCK_BYTES", 250)
    messages = []
    for name, shuffled in (("ordered", False), ("whole", True)):
        ex = _experiment(tmp_path / name, 5, shuffled=shuffled)
        path = ex.path("runs") / "bm25.trec"
        path.write_text(path.read_text() + bad)  # last line: in order for the ordered run
        with pytest.raises(InputError) as e:
            stage.run(ex, "bm25")
        messages.append(str(e.value).replace(str(tmp_path / name), "ROOT"))
        assert not (tmp_path / name / "m").exists() and not (tmp_path / name / "pq").exists()
        assert not (tmp_path / name / "ledger.jsonl").exists()
    assert messages[0] == messages[1]
    assert "bm25.trec:" in messages[0]  # the line is named


def test_a_key_is_read_in_blocks_of_whole_lines_and_a_bad_line_refused_in_arrows_words(
        tmp_path):
    from relgrade.errors import InputError
    from relgrade.io.batches import iter_key_batches, line_blocks

    key, _ = _random(8)
    path = tmp_path / "key.jsonl"
    path.write_text(key.to_json(orient="records", lines=True))
    assert b"".join(line_blocks(path, 100)) == path.read_bytes()
    assert all(b.endswith(b"\n") for b in line_blocks(path, 100))
    got = pd.concat(list(iter_key_batches(path, block_bytes=300)), ignore_index=True)
    pd.testing.assert_frame_equal(got, pd.concat(list(iter_key_batches(path)),
                                                 ignore_index=True))
    assert got["query_id"].tolist() == key["query_id"].tolist()
    assert got["grade"].tolist() == key["grade"].tolist()
    path.write_text(path.read_text() + '{"query_id": "q9", "chunk_id": 3, "grade": 1}\n')
    with pytest.raises(InputError, match="not a key in JSON Lines form") as e:
        list(iter_key_batches(path, block_bytes=300))
    assert "in row" in str(e.value)  # Arrow's own words, as the streaming reader gives them
