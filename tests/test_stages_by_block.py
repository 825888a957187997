"""The corpus and packets stages read, check and write a block at a time: the bytes of the
whole-table path, and the whole-table path's refusals for anything unusual."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from relgrade.errors import InputError
from relgrade.io import files
from relgrade.io.files import ParquetBlocks, iter_jsonl, iter_jsonl_blocks, write_parquet
from relgrade.pipeline.stages import corpus as corpus_stage
from relgrade.protocol.corpus import ChunkBlocks, corpus_from_table


def chunk(i, **extra):
    return {"chunk_id": f"c{i}", "header": f"m.py \u203a f{i}", "text": f"def f{i}(): pass",
            "source": f"m{i % 3}.py", **extra}


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def whole(path: Path, allow_empty=False):
    rows = list(iter_jsonl(path))
    table = pd.DataFrame([r for _, r in rows])
    return corpus_from_table(table, sha256="0" * 64, path=path, lines=[n for n, _ in rows],
                             allow_empty=allow_empty)


def by_blocks(path: Path, size: int, allow_empty=False):
    blocks = ChunkBlocks(allow_empty=allow_empty)
    for _, rows in iter_jsonl_blocks(path, size=size):
        if not blocks.add(rows):
            return None
    return blocks.result(sha256="0" * 64, path=path)


# --- reading a JSON Lines file a block at a time ------------------------------------------

def test_jsonl_blocks_hold_the_lines_and_objects_of_iter_jsonl(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n   \n{"b": "x"}\n{"c": [1]}\n{"d": 2}')
    got = [(n, o) for lines, objs in iter_jsonl_blocks(p, size=2) for n, o in zip(lines, objs)]
    assert got == list(iter_jsonl(p)) == [(1, {"a": 1}), (4, {"b": "x"}), (5, {"c": [1]}),
                                          (6, {"d": 2})]
    assert [len(lines) for lines, _ in iter_jsonl_blocks(p, size=2)] == [2, 2]


def test_jsonl_blocks_name_the_line_that_is_not_json(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(InputError, match=r"a\.jsonl:2: not valid JSON"):
        list(iter_jsonl_blocks(p, size=1))


# --- the corpus --------------------------------------------------------------------------

def test_chunk_blocks_give_the_table_and_manifest_of_the_table_rules(tmp_path):
    p = write_jsonl(tmp_path / "chunks.jsonl",
                    [chunk(i, line_start=i, line_end=i + 2) for i in range(7)])
    table, manifest = by_blocks(p, size=3)
    chunks, expected = whole(p)
    assert manifest == expected
    assert manifest["chunks"] == 7 and manifest["files"] == 3  # m0.py, m1.py, m2.py
    pd.testing.assert_frame_equal(table.to_pandas(), chunks, check_dtype=False)
    assert table.column_names == ["chunk_id", "header", "text", "source", "line_start",
                                  "line_end"]


def test_the_corpus_stage_writes_the_bytes_of_the_table_rules(tmp_path):
    p = write_jsonl(tmp_path / "chunks.jsonl", [chunk(i) for i in range(5)])
    built, manifest = corpus_stage.jsonl_chunks(p)
    chunks, expected = corpus_stage.build_corpus(p)
    files.write_arrow_parquet(tmp_path / "blocks.parquet", built)
    write_parquet(tmp_path / "whole.parquet", chunks)
    assert (tmp_path / "blocks.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert manifest == expected


def test_blank_texts_are_counted_when_allowed_and_left_to_the_table_rules_when_not(tmp_path):
    p = write_jsonl(tmp_path / "chunks.jsonl", [chunk(0), {**chunk(1), "text": "  "}, chunk(2)])
    _, manifest = by_blocks(p, size=2, allow_empty=True)
    assert manifest["empty_chunks"] == 1 == whole(p, allow_empty=True)[1]["empty_chunks"]
    assert by_blocks(p, size=2) is None
    with pytest.raises(InputError, match="chunk text is empty"):
        whole(p)


@pytest.mark.parametrize("rows", [
    [chunk(0), chunk(1, line_start=3)],                 # line numbers on one row only
    [chunk(0), {**chunk(1), "chunk_id": 7}],            # a number the table makes a string
    [chunk(0), {**chunk(1), "header": None}],           # not a string
    [chunk(0), {**chunk(1), "chunk_id": "c 1"}],        # whitespace in an id
    [chunk(0), chunk(1, line_start=1.0, line_end=2)],   # a float the table makes an int
    [chunk(0), [1, 2]],                                 # not an object
])
def test_rows_outside_the_usual_form_are_left_to_the_table_rules(tmp_path, rows):
    p = write_jsonl(tmp_path / "chunks.jsonl", rows)
    assert by_blocks(p, size=1) is None


def test_an_id_repeated_in_a_later_block_is_left_to_the_table_rules_which_name_its_line(tmp_path):
    p = write_jsonl(tmp_path / "chunks.jsonl", [chunk(0), chunk(1), chunk(2), chunk(1)])
    assert by_blocks(p, size=2) is None
    with pytest.raises(InputError, match=r"chunks\.jsonl:4: c1: duplicate chunk_id \(first at line 2\)"):
        whole(p)


def test_the_corpus_stage_refuses_a_bad_file_with_the_table_rules_message(tmp_path):
    p = write_jsonl(tmp_path / "chunks.jsonl", [chunk(0), {**chunk(1), "text": 5}])
    assert corpus_stage.jsonl_chunks(p) is None
    with pytest.raises(InputError, match=r"chunks\.jsonl:2: c1: `text` must be a string"):
        corpus_stage.build_corpus(p)


# --- Parquet written a row group at a time -----------------------------------------------

def test_parquet_blocks_write_the_bytes_of_the_whole_frame_across_row_groups(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 1024)
    frame = pd.DataFrame({"query_id": [f"q{i // 7:04d}" for i in range(3000)],
                          "role": ["grader"] * 3000,
                          "position": [i % 7 for i in range(3000)]})
    frame["position"] = frame["position"].astype("int64")
    with ParquetBlocks(tmp_path / "blocks.parquet") as w:
        for lo in range(0, 3000, 700):  # blocks that straddle the row groups
            w.write(frame.iloc[lo:lo + 700].reset_index(drop=True))
    frame.to_parquet(tmp_path / "whole.parquet", index=False, row_group_size=1024)
    assert (tmp_path / "blocks.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert pq.ParquetFile(tmp_path / "blocks.parquet").num_row_groups == 3


def test_parquet_blocks_under_one_row_group_write_the_bytes_of_write_parquet(tmp_path):
    frame = pd.DataFrame({"a": ["x", "y", "z"], "n": [1, 2, 3]})
    with ParquetBlocks(tmp_path / "blocks.parquet") as w:
        w.write(frame.iloc[:2])
        w.write(pa.Table.from_pandas(frame.iloc[2:], preserve_index=False))
    write_parquet(tmp_path / "whole.parquet", frame)
    assert (tmp_path / "blocks.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


def test_parquet_blocks_leave_the_old_file_when_the_writing_fails(tmp_path):
    out = tmp_path / "t.parquet"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with ParquetBlocks(out) as w:
            w.write(pd.DataFrame({"a": ["x"]}))
            raise RuntimeError("stop")
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


# --- the packets stage ---------------------------------------------------------------------

def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _packets(repo: Path, monkeypatch, *, blocks: bool, rows: int = 7) -> dict[str, bytes]:
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages import packets as stage

    ex = Experiment.load(repo / "params.yaml")
    with monkeypatch.context() as m:
        m.setattr(stage, "BLOCK_ROWS", rows)
        if not blocks:
            def whole_only(*a, **k):
                raise stage._Whole("the whole-table path, for comparison")
            m.setattr(stage, "_by_query_blocks", whole_only)
        stage.run(ex)
    out = _tree(ex.path("packets"))
    out["orders"] = ex.path("orders").read_bytes()
    return out


def test_packets_by_query_block_are_the_bytes_of_the_whole_table_path(packets_built, tmp_path,
                                                                       monkeypatch):
    from relgrade.pipeline.stages import packets as stage
    from tests.e2e import tiny

    repo = tiny.copy_repo(packets_built, tmp_path / "repo")
    monkeypatch.chdir(repo)
    whole_path = _packets(repo, monkeypatch, blocks=False)
    calls = []
    real = stage._query_blocks
    monkeypatch.setattr(stage, "_query_blocks", lambda *a, **k: calls.append(1) or real(*a, **k))
    by_block = _packets(repo, monkeypatch, blocks=True, rows=7)
    assert calls, "the packets were not built by query block"
    assert by_block == whole_path
    assert any(k.startswith("auditor/") for k in by_block)


def test_query_blocks_keep_each_query_whole_and_refuse_an_unsorted_pool(tmp_path):
    from relgrade.pipeline.stages import packets as stage

    pool = tmp_path / "pool.parquet"
    q = ["q1"] * 3 + ["q2"] * 5 + ["q3"] * 1
    pq.write_table(pa.table({"query_id": q, "chunk_id": [f"c{i}" for i in range(9)]}), pool)
    blocks = list(stage._query_blocks(pool, rows=2))
    assert [b["query_id"].tolist() for b in blocks] == [["q1"] * 3, ["q2"] * 5, ["q3"]]
    pq.write_table(pa.table({"query_id": ["q2", "q1"], "chunk_id": ["a", "b"]}), pool)
    with pytest.raises(stage._Whole):
        list(stage._query_blocks(pool, rows=1))


def test_packets_stage_on_a_corpus_without_a_pooled_chunk_refuses_as_before(packets_built,
                                                                            tmp_path,
                                                                            monkeypatch):
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages import packets as stage
    from tests.e2e import tiny

    repo = tiny.copy_repo(packets_built, tmp_path / "repo")
    monkeypatch.chdir(repo)
    ex = Experiment.load(repo / "params.yaml")
    pool = pq.read_table(ex.path("pool"))
    gone = pool.column("chunk_id")[0].as_py()
    chunks = pd.read_parquet(ex.path("chunks"))
    write_parquet(ex.path("chunks"), chunks[chunks["chunk_id"] != gone])
    before = _tree(ex.path("packets"))
    with pytest.raises(InputError, match=f"{gone}: pooled chunk is not in the corpus"):
        stage.run(ex)
    assert _tree(ex.path("packets")) == before


# --- grade import: the rows' dicts a block at a time -----------------------------------------

def test_frame_rows_import_the_bytes_of_the_rows_as_dicts(tmp_path, monkeypatch):
    from relgrade.graders import store
    from relgrade.graders.store import FrameRows, GradeStore

    monkeypatch.setattr(store, "IMPORT_BLOCK", 2)  # blocks of two rows: five rows, three blocks
    frame = pd.DataFrame({"query_id": ["q1"] * 5, "chunk_id": list("abcde"),
                          "reason": ["Defines it."] * 5, "grade": [2, 0, 1, 0, 2]})
    made_on = {"content_sha256": "c" * 64, "intent_sha256": "i" * 64, "rubric_version": "v1",
               "rubric_sha256": "r" * 64}
    paths = {}
    for name, rows in (("dicts", frame.to_dict("records")), ("blocks", FrameRows(frame))):
        path = paths[name] = tmp_path / name / "round-1.jsonl"
        skipped = []
        assert GradeStore(path, made_on=lambda r: made_on).import_rows(
            rows, skipped=skipped, note={"imported_from": "x"}) == 5
        assert skipped == []
    assert paths["blocks"].read_bytes() == paths["dicts"].read_bytes()
    assert paths["blocks"].read_bytes().count(b"\n") == 5
    bank = [json.loads(line) for line in store.bank_path(paths["blocks"]).read_text().splitlines()]
    assert [b["imported_from"] for b in bank] == ["x"] * 5


def test_frame_rows_recorded_byte_for_byte_are_skipped_and_the_rest_added(tmp_path):
    from relgrade.graders.store import FrameRows, GradeStore

    path = tmp_path / "g" / "round-1.jsonl"
    frame = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"],
                          "reason": ["Defines it.", "Mentions it."], "grade": [2, 1]})
    GradeStore(path).import_rows(FrameRows(frame.iloc[:1]))
    skipped = []
    assert GradeStore(path).import_rows(FrameRows(frame), skipped=skipped) == 2
    assert skipped == [("q1", "a")]
    assert path.read_bytes() == (b'{"query_id":"q1","chunk_id":"a","reason":"Defines it.","grade":2}\n'
                                 b'{"query_id":"q1","chunk_id":"b","reason":"Mentions it.","grade":1}\n')
