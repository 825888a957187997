"""Reading and writing files: encodings, line ends, line numbers in errors, atomic writes."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.errors import InputError
from relgrade.io import files as io


def test_bom_and_crlf_are_accepted(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_bytes(b"\xef\xbb\xbfquery_id\tquery\tgroup\r\nq1\tcache eviction\tkeyword\r\n")
    df = io.read_tsv(p, columns=["query_id", "query", "group"])
    assert list(df.columns) == ["query_id", "query", "group"]
    assert df.loc[0, "group"] == "keyword"


def test_invalid_utf8_is_rejected_with_its_line(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(InputError) as e:
        io.read_jsonl(p)
    assert str(e.value) == f"{p}:2: not valid UTF-8 (found byte 0xff at column 8)"


def test_jsonl_keeps_key_order_and_reports_bad_json_line(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_text('{"reason": "x", "grade": 1}\n\n{"grade": 1,\n')
    with pytest.raises(InputError) as e:
        io.read_jsonl(p)
    assert f"{p}:3: not valid JSON" in str(e.value)
    p.write_text('{"reason": "x", "grade": 1}\n')
    (line, obj), = io.iter_jsonl(p)
    assert line == 1 and list(obj) == ["reason", "grade"]


def test_jsonl_line_that_is_not_an_object_is_rejected(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_text('[1, 2]\n')
    with pytest.raises(InputError, match="each line must be a JSON object"):
        io.read_jsonl(p)


def test_tsv_row_with_wrong_field_count_names_the_line(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("query_id\tquery\tgroup\nq1\tonly two\n")
    with pytest.raises(InputError) as e:
        io.read_tsv(p)
    assert str(e.value) == f"{p}:2: expected 3 tab-separated fields (found 2)"


def test_missing_column_is_named(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("query_id\tquery\nq1\tx\n")
    with pytest.raises(InputError, match="missing column\\(s\\) group"):
        io.read_table(p, columns=["query_id", "query", "group"])


def test_unknown_table_extension_is_rejected(tmp_path):
    with pytest.raises(InputError, match="unknown table format"):
        io.read_table(tmp_path / "x.csv")


def test_atomic_write_leaves_the_old_file_when_the_writer_fails(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with io.atomic_path(p) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash")
    assert p.read_text() == "old"
    assert [f.name for f in tmp_path.iterdir()] == ["out.txt"]


def test_sha256_file_equals_hashlib_of_the_bytes(tmp_path):
    p = tmp_path / "b"
    p.write_bytes(b"abc")
    assert io.sha256_file(p) == hashlib.sha256(b"abc").hexdigest() == \
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


rows = st.lists(st.fixed_dictionaries({
    "query_id": st.text(min_size=1, max_size=8),
    "chunk_id": st.text(min_size=1, max_size=8),
    "grade": st.integers(0, 3)}), max_size=20)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_jsonl_round_trips(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("rt") / "x.jsonl"
    io.write_jsonl(p, data)
    assert io.read_jsonl(p) == data


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=10),
                          st.integers(0, 2)), min_size=1, max_size=10))
def test_parquet_round_trips(tmp_path_factory, data):
    import pandas as pd

    df = pd.DataFrame(data, columns=["chunk_id", "grade"])
    p = tmp_path_factory.mktemp("rt") / "x.parquet"
    io.write_parquet(p, df)
    back = io.read_table(p)
    assert back["chunk_id"].tolist() == df["chunk_id"].tolist()
    assert back["grade"].tolist() == df["grade"].tolist()


def test_read_rows_gives_the_file_line_of_each_tsv_row_past_header_and_blank_lines(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("query_id\tquery\tgroup\nq1\ta\tkeyword\n\nq2\tb\tquestion\n", encoding="utf-8")
    table, lines = io.read_rows(p, ["query_id", "query"])
    assert table["query_id"].tolist() == ["q1", "q2"]
    assert lines == [2, 4]


def test_read_rows_counts_jsonl_lines_from_one_and_skips_blank_ones(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('\n{"query_id": "q1"}\n  \n{"query_id": "q2"}\n', encoding="utf-8")
    table, lines = io.read_rows(p)
    assert table["query_id"].tolist() == ["q1", "q2"]
    assert lines == [2, 4]


def test_read_rows_of_parquet_has_no_lines(tmp_path):
    p = tmp_path / "q.parquet"
    io.write_parquet(p, pd.DataFrame({"query_id": ["q1", "q2"]}))
    table, lines = io.read_rows(p, ["query_id"])
    assert table["query_id"].tolist() == ["q1", "q2"] and lines is None


def test_read_rows_refuses_a_missing_column_naming_the_file(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("query_id\nq1\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        io.read_rows(p, ["query_id", "group"])
    assert e.value.rule == "missing column(s) group" and e.value.path == str(p)


# --- Arrow tables written as pandas writes them -------------------------------------------

def _arrow_table(rows):
    import numpy as np
    import pyarrow as pa

    return pa.table({
        "query_id": pa.array([r[0] for r in rows], type=pa.large_string()),
        "chunk_id": pa.array([r[1] for r in rows], type=pa.string()),
        "rank": pa.array([r[2] for r in rows], type=pa.int64()),
        "score": pa.array([r[3] for r in rows], type=pa.float64()),
        "seen": pa.array([r[4] for r in rows], type=pa.bool_()),
    }) if rows else pa.table({
        "query_id": pa.array([], type=pa.large_string()),
        "score": pa.array(np.zeros(0), type=pa.float64())})


@pytest.mark.parametrize("rows", [
    [("q1", "c1", 1, 2.5, True), ("q2", "é ☃", 2, -0.0, False)],
    [("q\"1", "c\\1", 3, float("nan"), True)],  # a NaN score: pandas hands it on as null
    [],
])
def test_arrow_parquet_has_the_bytes_pandas_writes(tmp_path, rows):
    table = _arrow_table(rows)
    io.write_arrow_parquet(tmp_path / "arrow.parquet", table)
    io.write_parquet(tmp_path / "pandas.parquet", table.to_pandas())
    assert (tmp_path / "arrow.parquet").read_bytes() == \
        (tmp_path / "pandas.parquet").read_bytes()


def test_pandas_schema_metadata_is_what_pyarrow_stores_for_the_frame():
    import json

    import pyarrow as pa

    table = _arrow_table([("q1", "c1", 1, 2.5, True)])
    want = pa.Table.from_pandas(table.to_pandas(), preserve_index=False).schema.metadata
    got = io.pandas_schema_metadata(table)
    assert got == want[b"pandas"]
    meta = json.loads(got)
    assert [(c["name"], c["pandas_type"], c["numpy_type"]) for c in meta["columns"]] == [
        ("query_id", "object", "str"), ("chunk_id", "object", "str"),
        ("rank", "int64", "int64"), ("score", "float64", "float64"),
        ("seen", "bool", "bool")]
    assert meta["index_columns"] == [] and meta["pandas_version"] == pd.__version__


def test_arrow_parquet_refuses_a_type_pandas_metadata_is_not_made_for(tmp_path):
    import pyarrow as pa

    table = pa.table({"when": pa.array([1], type=pa.timestamp("s"))})
    with pytest.raises(ValueError, match="when"):
        io.write_arrow_parquet(tmp_path / "x.parquet", table)
    assert not (tmp_path / "x.parquet").exists()


def test_arrow_parquet_of_a_table_in_several_chunks_has_the_bytes_pandas_writes(tmp_path):
    import pyarrow as pa

    table = pa.table({
        "query_id": pa.chunked_array([pa.array(["q1", "q2"], pa.large_string()),
                                      pa.array(["q3"], pa.large_string())]),
        "inclusion_prob": pa.chunked_array([[1.0, 0.5], [0.25]])})
    io.write_arrow_parquet(tmp_path / "arrow.parquet", table)
    io.write_parquet(tmp_path / "pandas.parquet", table.to_pandas())
    assert (tmp_path / "arrow.parquet").read_bytes() == \
        (tmp_path / "pandas.parquet").read_bytes()
    assert io.read_table(tmp_path / "arrow.parquet")["inclusion_prob"].tolist() == \
        [1.0, 0.5, 0.25]


def test_read_table_only_reads_the_columns_asked_for_in_their_order(tmp_path):
    df = pd.DataFrame({"a": ["x", "y"], "b": [1, 2], "c": ["long text", "more"]})
    io.write_parquet(tmp_path / "t.parquet", df)
    got = io.read_table(tmp_path / "t.parquet", columns=["b", "a"], only=True)
    assert got.columns.tolist() == ["b", "a"]
    pd.testing.assert_frame_equal(got, io.read_table(tmp_path / "t.parquet")[["b", "a"]])
    with pytest.raises(InputError, match="missing column"):
        io.read_table(tmp_path / "t.parquet", columns=["a", "d"], only=True)


def test_read_yaml_gives_what_pyyamls_own_parser_gives_for_the_repositorys_pipeline_files():
    # read_yaml parses with libyaml when PyYAML has it; the result must not depend on that
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[1]
    for name in ("params.yaml", "dvc.yaml", "dvc.lock"):
        text = (repo / name).read_text("utf-8")
        assert io.read_yaml(repo / name) == yaml.safe_load(text), name


def test_read_yaml_names_the_line_and_column_where_pyyamls_parser_stops(tmp_path):
    # libyaml refuses the document first; the message comes from PyYAML's own parser
    path = tmp_path / "params.yaml"
    path.write_text("seed: 7\npool:\n  depth: [5\n")
    with pytest.raises(InputError) as e:
        io.read_yaml(path)
    # libyaml would say line 4, column 1, "did not find expected ',' or ']'"
    assert str(e.value).startswith(
        f"{path}:3:12: not valid YAML (found expected ',' or ']', but got '<stream end>': "
        "'  depth: [5')")


def test_a_yaml_parser_message_starting_with_found_reads_the_word_once(tmp_path):
    # PyYAML says "found character '\t' that cannot start any token": wrapped in relgrade's
    # "(found ...)" it read "found found"
    path = tmp_path / "params.yaml"
    path.write_text("pool:\n\tdepth: 5\n")
    with pytest.raises(InputError) as e:
        io.read_yaml(path)
    assert str(e.value).startswith(
        f"{path}:2:1: not valid YAML (found character '\\t' that cannot start any token: "
        "'\\tdepth: 5')")
    path.write_text("seed: *s\n")
    with pytest.raises(InputError) as e:
        io.read_yaml(path)
    assert "found found" not in str(e.value)
    assert "(found undefined alias 's': 'seed: *s')" in str(e.value)
    # a value found is still introduced by the word
    assert str(InputError("grade outside the scale", found="3")) == \
        "grade outside the scale (found 3)"


@pytest.mark.parametrize("text, found", [("[1, 2]", "an array"), ("3", "a number"),
                                         ('"x"', "a string"), ("null", "null")])
def test_a_json_record_that_is_not_an_object_is_refused_naming_what_it_is(tmp_path, text,
                                                                         found):
    path = tmp_path / "record.json"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        io.read_json_object(path)
    assert str(e.value) == (f"{path}: must be a JSON object (relgrade writes one here) "
                            f"(found {found}). Restore it (git checkout, or dvc repro "
                            "rewrites it)")
    path.write_text('{"a": 1}')
    assert io.read_json_object(path) == {"a": 1}
