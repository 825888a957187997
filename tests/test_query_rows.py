"""The audited queries' rows and a column's distinct values, read a batch at a time
(`relgrade.io.batches.query_rows`, `distinct_text`): the same rows, order and dtypes as a
whole read cut afterwards, whatever the batch size."""

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.io import batches
from relgrade.io.files import read_table


def _grades(tmp_path):
    df = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q3", "q3", "q2", "q10"],
                       "chunk_id": ["a", "b", "a", "c", "d", "b", "e"],
                       "grader": ["g", "g", "g", "x", "g", "x", "g"],
                       "round": [1, 1, 2, 1, 1, 1, 1]})
    path = tmp_path / "grades.parquet"
    df.to_parquet(path, index=False)
    return path, df


@pytest.mark.parametrize("rows", [1, 2, 3, 1000])
def test_query_rows_keeps_the_rows_of_the_named_queries_in_file_order(tmp_path, rows):
    path, df = _grades(tmp_path)
    got = batches.query_rows(path, ["query_id", "chunk_id", "round"], ["q2", "q10"],
                             rows=rows)
    expected = pd.DataFrame({"query_id": ["q2", "q2", "q10"], "chunk_id": ["a", "b", "e"],
                             "round": [2, 1, 1]})
    pd.testing.assert_frame_equal(got, expected.astype(got.dtypes.to_dict()))
    whole = read_table(path, columns=["query_id", "chunk_id", "round"], only=True)
    pd.testing.assert_frame_equal(
        got, whole[whole["query_id"].isin(["q2", "q10"])].reset_index(drop=True))


def test_query_rows_of_no_named_query_is_an_empty_table_with_the_columns(tmp_path):
    path, df = _grades(tmp_path)
    got = batches.query_rows(path, ["chunk_id", "query_id"], [], rows=2)
    assert list(got.columns) == ["chunk_id", "query_id"] and len(got) == 0
    whole = read_table(path)
    assert got.dtypes.to_dict() == whole[["chunk_id", "query_id"]].dtypes.to_dict()


def test_query_rows_compares_numeric_ids_as_text(tmp_path):
    path = tmp_path / "pool.parquet"
    pd.DataFrame({"query_id": [7, 8, 7], "chunk_id": ["a", "b", "c"]}).to_parquet(path)
    got = batches.query_rows(path, ["query_id", "chunk_id"], ["7"], rows=1)
    assert got["chunk_id"].tolist() == ["a", "c"] and got["query_id"].tolist() == [7, 7]


def test_query_rows_of_a_jsonl_table_cuts_the_whole_read(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"query_id": "q1", "chunk_id": "a"}\n{"query_id": "q2", "chunk_id": "b"}\n')
    got = batches.query_rows(path, ["query_id", "chunk_id"], {"q2"})
    assert got.to_dict(orient="records") == [{"query_id": "q2", "chunk_id": "b"}]


def test_query_rows_names_the_file_and_the_missing_column(tmp_path):
    path, _ = _grades(tmp_path)
    with pytest.raises(InputError) as e:
        batches.query_rows(path, ["query_id", "grade"], ["q1"])
    assert "missing column(s) grade" in str(e.value) and "grades.parquet" in str(e.value)
    with pytest.raises(InputError, match="file not found"):
        batches.query_rows(tmp_path / "absent.parquet", ["query_id"], ["q1"])


@pytest.mark.parametrize("rows", [1, 2, 3, 1000])
def test_iter_rows_where_in_gives_the_kept_rows_batch_by_batch_in_file_order(tmp_path, rows):
    path, _ = _grades(tmp_path)
    blocks = list(batches.iter_rows_where_in(path, ["query_id", "chunk_id", "round"],
                                             "query_id", ["q2", "q10"], rows=rows))
    # batches that keep no row are skipped; the blocks together are query_rows' table
    assert all(len(b) for b in blocks) and len(blocks) <= -(-7 // rows)
    got = pd.concat(blocks, ignore_index=True)
    pd.testing.assert_frame_equal(got, batches.query_rows(
        path, ["query_id", "chunk_id", "round"], ["q2", "q10"]))
    assert got["chunk_id"].tolist() == ["a", "b", "e"]


def test_iter_rows_where_in_names_the_missing_column_on_the_call(tmp_path):
    path, _ = _grades(tmp_path)
    # no batch asked for: the file and its columns are checked when the reader is made
    with pytest.raises(InputError, match="missing column[(]s[)] grade"):
        batches.iter_rows_where_in(path, ["query_id", "grade"], "query_id", ["q1"])
    with pytest.raises(InputError, match="file not found"):
        batches.iter_rows_where_in(tmp_path / "absent.parquet", ["query_id"], "query_id", [])


def test_iter_rows_where_in_of_a_jsonl_table_is_one_block(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"query_id": "q1", "chunk_id": "a"}\n{"query_id": "q2", "chunk_id": "b"}\n')
    blocks = list(batches.iter_rows_where_in(path, ["query_id", "chunk_id"], "query_id", {"q2"}))
    assert [b.to_dict(orient="records") for b in blocks] == [[{"query_id": "q2",
                                                                "chunk_id": "b"}]]


@pytest.mark.parametrize("rows", [1, 3, 1000])
def test_distinct_text_gives_each_value_once_across_batches(tmp_path, rows):
    path, _ = _grades(tmp_path)
    got = batches.distinct_text(path, "query_id", rows=rows)
    assert sorted(got.to_pylist()) == ["q1", "q10", "q2", "q3"]
    numbers = tmp_path / "n.parquet"
    pd.DataFrame({"query_id": [3, 1, 3, 2]}).to_parquet(numbers)
    assert sorted(batches.distinct_text(numbers, "query_id", rows=rows).to_pylist()) == \
        ["1", "2", "3"]


def _provenance(tmp_path, query_ids):
    path = tmp_path / "provenance.parquet"
    n = len(query_ids)
    pd.DataFrame({"query_id": query_ids, "chunk_id": [f"c{i}" for i in range(n)],
                  "rank": list(range(1, n + 1))}).to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 100])
def test_query_blocks_hold_every_row_of_a_query_together_in_file_order(tmp_path, rows):
    ids = ["q1", "q1", "q1", "q10", "q2", "q2", "q3"]
    path = _provenance(tmp_path, ids)
    blocks = list(batches.iter_query_blocks(path, ["query_id", "rank"], rows=rows))
    seen = [set(b["query_id"]) for b in blocks]
    for i, a in enumerate(seen):  # no query in two blocks
        assert all(not (a & b) for b in seen[i + 1:])
    stacked = pd.concat(blocks, ignore_index=True)
    assert stacked["query_id"].tolist() == ids and stacked["rank"].tolist() == list(range(1, 8))
    assert all(list(b.columns) == ["query_id", "rank"] for b in blocks)
    assert blocks[0].index[0] == 0


def test_query_blocks_refuse_a_row_out_of_query_order_naming_the_row(tmp_path):
    path = _provenance(tmp_path, ["q1", "q2", "q3", "q2", "q4"])
    for rows in (1, 2, 100):
        with pytest.raises(InputError) as e:
            list(batches.iter_query_blocks(path, ["query_id"], rows=rows, writer="the pool stage"))
        text = str(e.value)
        assert "provenance.parquet" in text and "row 4" in text
        assert "rows are not in query_id order" in text
        assert "query 'q2' after query 'q3'" in text and "the pool stage" in text


def test_query_blocks_order_ids_by_code_point_as_python_does(tmp_path):
    ids = sorted(["b", "a\u00e9", "a\uffff", "a\U0001f600", "A"])
    path = _provenance(tmp_path, ids)
    got = pd.concat(batches.iter_query_blocks(path, ["query_id"], rows=2))
    assert got["query_id"].tolist() == ids


def test_query_blocks_of_an_empty_table_yield_nothing(tmp_path):
    path = _provenance(tmp_path, [])
    assert list(batches.iter_query_blocks(path, ["query_id"])) == []
