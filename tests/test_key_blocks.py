"""The key made, hashed, compared and written a block of whole queries at a time: the same
bytes and the same refusals as the key built whole."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pyarrow as pa
import pytest

from relgrade.errors import InputError, ProtocolError
from relgrade.experiment.files import Experiment
from relgrade.io import files as io
from relgrade.io.trec import qrels_lines, write_trec_qrels
from relgrade.pipeline.stages import key as stage
from relgrade.protocol import key
from relgrade.protocol.key_blocks import KeyDigest, with_pool_rows
from tests.test_key import _grades, _stage_dir
from tests.test_key_stage import KEY_SHA, _metrics_file, _use

#: The fixture's grades in query order (the grades stage's order): blocks hold.
SORTED = [("q1", "a", "grader-a", 2), ("q1", "a", "auditor-b", 1), ("q1", "b", "grader-a", 0),
          ("q2", "c", "grader-a", 0)]


def _in_order(tmp_path, rows=SORTED, **kw):
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = _stage_dir(tmp_path, **kw)
    _grades(rows).to_parquet(tmp_path / p["grades"], index=False)
    return p


def _run(tmp_path, monkeypatch, *, whole=False):
    """The key stage in this process; ``whole``: the key built whole, as before blocks."""
    with monkeypatch.context() as m:
        if whole:
            m.setattr(stage, "_key_in_blocks", lambda ex, manifests: None)
        stage.run(Experiment.load(tmp_path / "params.yaml"))


def _outputs(root, p):
    out = {n: (root / p[n]).read_bytes() for n in ("key", "qrels", "key_made_on")}
    record = json.loads((root / p["record"]).read_text())
    record.pop("frozen_at")
    return out, record


def _blocked(root):
    ex = Experiment.load(root / "params.yaml")
    manifests = {name: io.read_json(ex.path(f"{name}_manifest"))
                 for name in ("corpus", "queries", "intents", "pool", "grades")}
    return stage._key_in_blocks(ex, manifests)


def test_the_blocks_write_the_bytes_the_whole_key_writes(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    p = _in_order(a)
    _in_order(b)
    assert _blocked(a) is not None  # the blocks hold here
    _run(a, monkeypatch)
    _run(b, monkeypatch, whole=True)
    assert _outputs(a, p) == _outputs(b, p)
    assert (a / p["key"]).read_bytes() == (b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
                                          b'{"query_id":"q1","chunk_id":"b","grade":0}\n')
    assert (a / p["qrels"]).read_text() == "q1 0 a 2\nq1 0 b 0\n"
    assert _outputs(a, p)[1]["dropped_queries"] == ["q2"]


def test_a_rerun_compares_the_frozen_key_by_its_bytes_without_reading_it(tmp_path, monkeypatch):
    p = _in_order(tmp_path)
    _run(tmp_path, monkeypatch)
    first = {n: (tmp_path / p[n]).read_bytes() for n in ("key", "qrels", "key_made_on", "record")}

    def refuse(*a, **k):
        raise AssertionError("the frozen key read whole")
    monkeypatch.setattr(Experiment, "read_key", refuse)
    monkeypatch.setattr(Experiment, "read_key_made_on", refuse)
    _run(tmp_path, monkeypatch)
    # the record keeps its frozen_at: the same key is not frozen again
    assert {n: (tmp_path / p[n]).read_bytes() for n in first} == first


def test_a_changed_key_after_metrics_is_void_with_the_message_of_the_whole_path(
        tmp_path, monkeypatch):
    messages = []
    for whole in (False, True):
        root = tmp_path / str(whole)
        p = _in_order(root)
        _run(root, monkeypatch)
        _metrics_file(root, p)
        (root / p["ledger"]).write_text(json.dumps(_use()) + "\n")
        rows = [r if r[:3] != ("q1", "b", "grader-a") else ("q1", "b", "grader-a", 1)
                for r in SORTED]
        _grades(rows).to_parquet(root / p["grades"], index=False)
        with pytest.raises(ProtocolError) as e:
            _run(root, monkeypatch, whole=whole)
        messages.append(str(e.value).replace(str(root), "ROOT"))
        assert json.loads((root / p["record"]).read_text())["key_sha256"] == KEY_SHA
    assert messages[0] == messages[1]


def test_a_post_hoc_key_in_blocks_is_the_whole_paths(tmp_path, monkeypatch):
    outs = []
    for whole in (False, True):
        root = tmp_path / str(whole)
        p = _in_order(root)
        _run(root, monkeypatch)
        _metrics_file(root, p)
        _in_order(root, [r if r[:3] != ("q1", "b", "grader-a") else ("q1", "b", "grader-a", 1)
                         for r in SORTED], ledger_rows=[_use()], post_hoc=True)
        _run(root, monkeypatch, whole=whole)
        folder = root / p["key_post_hoc"]
        record = json.loads((folder / "record.json").read_text())
        record.pop("frozen_at")
        outs.append(({n: (folder / n).read_bytes() for n in
                      ("key.jsonl", "key.qrels", "made_on.jsonl", "README.md")}, record))
        assert (root / p["key"]).read_bytes().endswith(b'"b","grade":0}\n')  # frozen stands
    assert outs[0] == outs[1]
    assert outs[0][1]["post_hoc"] is True


@pytest.mark.parametrize("rows, why", [
    ([("q1", "a", "grader-a", 2), ("q2", "c", "grader-a", 0), ("q1", "b", "grader-a", 0)],
     "out of query order"),
    ([("q1", "a", "grader-a", 2), ("q2", "c", "grader-a", 0)], "a pool pair without a grade"),
    ([("q1", "a", "grader-a", 0), ("q1", "b", "grader-a", 0), ("q2", "c", "grader-a", 0)],
     "an empty key"),
])
def test_where_the_blocks_do_not_hold_the_whole_path_decides(tmp_path, monkeypatch, rows, why):
    results = []
    for whole in (False, True):
        root = tmp_path / str(whole)
        p = _in_order(root, rows)
        if not whole:
            assert _blocked(root) is None, why
        try:
            _run(root, monkeypatch, whole=whole)
            results.append(_outputs(root, p))
        except InputError as e:
            results.append(str(e).replace(str(root), "ROOT"))
    assert results[0] == results[1]


def _key_table(rows):
    return pa.table({"query_id": pa.array([r[0] for r in rows], pa.large_string()),
                     "chunk_id": pa.array([r[1] for r in rows], pa.large_string()),
                     "grade": pa.array([r[2] for r in rows], pa.int64())})


def test_the_digest_of_the_blocks_is_the_whole_keys_hash_and_counts():
    blocks = [_key_table([("q1", "a", 2), ("q1", "é", 0)]), _key_table([]),
              _key_table([("q3", "b", 1)])]
    d = KeyDigest()
    lines = b"".join(bytes(d.add(b, dropped)) for b, dropped in zip(blocks, [[], ["q2"], []]))
    whole = pd.DataFrame({"query_id": ["q3", "q1", "q1"], "chunk_id": ["b", "é", "a"],
                          "grade": [1, 0, 2]})
    assert lines == key.key_bytes(whole)
    assert d.totals() == key.KeyTotals(hashlib.sha256(lines).hexdigest(), 3, 2)
    assert d.dropped == ["q2"]


def test_each_grades_block_meets_the_pool_rows_of_its_queries():
    grades = [pd.DataFrame({"query_id": ["q1", "q1"], "x": [1, 2]}),
              pd.DataFrame({"query_id": ["q4"], "x": [3]})]
    pool = [pd.DataFrame({"query_id": ["q1", "q2"], "chunk_id": ["a", "b"]}),
            pd.DataFrame({"query_id": ["q4", "q5"], "chunk_id": ["c", "d"]})]
    got = [(list(g["query_id"]), list(zip(p["query_id"], p["chunk_id"])))
           for g, p in with_pool_rows(grades, pool)]
    # q2 (no grades) goes with the block after it; q5 (after the last graded query) last
    assert got == [(["q1", "q1"], [("q1", "a")]),
                   (["q4"], [("q2", "b"), ("q4", "c")]),
                   ([], [("q5", "d")])]


def test_qrels_lines_of_blocks_are_the_file_write_trec_qrels_writes(tmp_path):
    rows = [("q1", "a", 2), ("q1", "b", 0), ("q2", "c", 1)]
    write_trec_qrels(tmp_path / "whole.qrels",
                     pd.DataFrame(rows, columns=["query_id", "chunk_id", "grade"]))
    t = _key_table(rows)
    lines = bytes(qrels_lines(t.slice(0, 2), "x")) + bytes(qrels_lines(t.slice(2), "x"))
    assert lines == (tmp_path / "whole.qrels").read_bytes() == b"q1 0 a 2\nq1 0 b 0\nq2 0 c 1\n"
    bad = _key_table([("q1", "a b", 2)])
    with pytest.raises(InputError) as blocked:
        qrels_lines(bad, tmp_path / "k.qrels")
    with pytest.raises(InputError) as whole:
        write_trec_qrels(tmp_path / "k.qrels", bad.to_pandas())
    assert str(blocked.value) == str(whole.value)


def test_files_written_together_are_each_the_blocks_joined(tmp_path):
    a, b = tmp_path / "a", tmp_path / "sub" / "b"
    io.write_blocks_together([a, b], iter([(b"1", b"x"), (b"2", b"y")]))
    assert a.read_bytes() == b"12" and b.read_bytes() == b"xy"

    def broken():
        yield b"3", b"z"
        raise OSError("disk full")
    with pytest.raises(OSError):
        io.write_blocks_together([a, b], broken())
    assert a.read_bytes() == b"12" and b.read_bytes() == b"xy"  # neither replaced
    assert sorted(x.name for x in tmp_path.rglob("*") if x.is_file()) == ["a", "b"]


def test_same_bytes_says_whether_the_blocks_are_the_file(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"abcdef")
    for blocks, want in (([b"abc", b"def"], True), ([b"abcdef", b""], True),
                         ([b"abc"], False), ([b"abc", b"deg"], False),
                         ([b"abcdefg"], False)):
        same = io.SameBytes(f)
        for block in blocks:
            same.take(memoryview(block))
        assert same.finish() is want, blocks


def test_latest_counts_of_sidecar_blocks_are_the_whole_tables_counts():
    from relgrade.graders.cache import judge_counts, template_counts
    from relgrade.protocol.key_blocks import latest_value_counts

    t = pa.table({"query_id": ["q1", "q1", "q2", "q2"], "chunk_id": ["a", "b", "a", "c"],
                  "judge": ["j2", "", None, "j1"],
                  "template_sha256": pa.array(["t", "t", "t", None]).dictionary_encode()})
    got = latest_value_counts([t.slice(0, 3), t.slice(3)], {"judge": "none",
                                                           "template_sha256": "no t"})
    # first come: j2 (line 1), none (lines 2 and 3), j1 (line 4)
    assert got == {"judge": {"j2": 1, "none": 2, "j1": 1},
                   "template_sha256": {"t": 3, "no t": 1}}
    assert list(got["judge"]) == ["j2", "none", "j1"]  # j1 first comes in the second block
    assert got["judge"] == {k.replace("identity not recorded", "none"): v
                            for k, v in judge_counts(t).items()}
    assert got["template_sha256"] == {k.replace("template not recorded", "no t"): v
                                      for k, v in template_counts(t).items()}


def test_a_pair_on_two_sidecar_lines_or_a_refused_block_is_counted_whole():
    from relgrade.protocol.key_blocks import latest_value_counts

    t = pa.table({"query_id": ["q1", "q1"], "chunk_id": ["a", "a"], "judge": ["j1", "j2"]})
    assert latest_value_counts([t], {"judge": "none"}) is None  # the last line decides: whole
    assert latest_value_counts([t.slice(0, 1), None], {"judge": "none"}) is None
    # the pair's two lines in two blocks: whole too
    assert latest_value_counts([t.slice(0, 1), t.slice(1)], {"judge": "none"}) is None


def test_the_corpus_hashed_one_chunk_at_a_time_gives_each_chunk_its_content_hash(
        tmp_path, monkeypatch):
    from relgrade.experiment import made_on
    from relgrade.protocol.bank import content_sha256
    _in_order(tmp_path)
    ex = Experiment.load(tmp_path / "params.yaml")
    monkeypatch.setattr(made_on, "_BATCH", 1)  # three batches of one chunk, read in turn
    now = made_on.MadeOnNow.load(ex)
    chunks = pd.read_parquet(ex.path("chunks"))
    assert now.chunks.ids.to_pylist() == ["a", "b", "c"]
    assert [bytes(d).hex() for d in now.content] == content_sha256(chunks).tolist()


def test_the_key_is_made_with_arrows_jemalloc_pool_and_the_previous_pool_put_back(
        tmp_path, monkeypatch):
    before = pa.default_memory_pool().backend_name
    seen = []
    real = stage._key_in_blocks

    def spy(ex, manifests):
        seen.append(pa.default_memory_pool().backend_name)
        return real(ex, manifests)

    monkeypatch.setattr(stage, "_key_in_blocks", spy)
    p = _in_order(tmp_path)
    stage.run(Experiment.load(tmp_path / "params.yaml"))
    assert seen in (["jemalloc"], [before])  # jemalloc where pyarrow was built with it
    assert pa.default_memory_pool().backend_name == before
    assert (tmp_path / p["key"]).exists()
