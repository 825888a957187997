"""The corpus stage reads and checks a chunks file a block at a time: the bytes of the
whole-table path, and the whole-table path's refusals for anything unusual."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.io import files
from relgrade.io.files import iter_jsonl, iter_jsonl_blocks, write_parquet
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
