"""The query set: validation errors name file, line and id; canonical form; the queries stage."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.io.files import read_rows
from relgrade.protocol import queries

REPO = Path(__file__).resolve().parents[1]
GROUPS = ["keyword", "question"]


def load_stage(name):
    module = importlib.import_module(f"relgrade.pipeline.stages.{name}")
    return module


def read(path: Path):
    """What the queries stage does: the table and the line of each row."""
    table, lines = read_rows(path, queries.REQUIRED_COLUMNS)
    return queries.validate_queries(table, groups=GROUPS, path=path, lines=lines)


def write_tsv(tmp_path, body: str, name="queries.tsv") -> Path:
    p = tmp_path / name
    p.write_text("query_id\tquery\tgroup\n" + body, encoding="utf-8")
    return p


def test_valid_table_is_sorted_by_id_with_default_weight(tmp_path):
    p = write_tsv(tmp_path, "q2\tHow are pages split?\tquestion\nq1\tcache eviction\tkeyword\n")
    out = read(p)
    assert out.columns.tolist() == ["query_id", "query", "group", "weight"]
    assert out["query_id"].tolist() == ["q1", "q2"]
    assert out["weight"].tolist() == [1.0, 1.0]
    assert str(out["weight"].dtype) == "float64"


def test_duplicate_id_names_both_lines(tmp_path):
    p = write_tsv(tmp_path, "q1\ta\tkeyword\nq2\tb\tkeyword\nq1\tc\tquestion\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert str(e.value) == (f"{p}:4: q1: duplicate query id (first on line 2). "
                            "Give every query its own id")


def test_empty_query_names_line_and_id(tmp_path):
    p = write_tsv(tmp_path, "q1\tcache eviction\tkeyword\nq2\t  \tquestion\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert str(e.value).startswith(f"{p}:3: q2: query text is empty")


def test_unknown_group_names_line_id_and_allowed_groups(tmp_path):
    p = write_tsv(tmp_path, "q1\tcache eviction\theadword\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert str(e.value) == (f'{p}:2: q1: group is not one of the query groups (keyword, '
                            f'question) (found "headword"). Correct the group, or add it to '
                            f"queries.groups in the params file")


@pytest.mark.parametrize("weight", ["abc", "-1", "0", "inf", "nan"])
def test_bad_weight_is_rejected(tmp_path, weight):
    p = tmp_path / "queries.tsv"
    p.write_text(f"query_id\tquery\tgroup\tweight\nq1\tcache\tkeyword\t{weight}\n")
    with pytest.raises(InputError, match=r":2: q1: weight must be a positive"):
        read(p)


def test_weight_is_read_and_blank_weight_is_one(tmp_path):
    p = tmp_path / "queries.tsv"
    p.write_text("query_id\tquery\tgroup\tweight\nq1\tcache\tkeyword\t2.5\nq2\tpages\tquestion\t\n")
    assert read(p)["weight"].tolist() == [2.5, 1.0]


def test_crlf_and_bom_are_accepted(tmp_path):
    p = tmp_path / "queries.tsv"
    p.write_bytes(b"\xef\xbb\xbfquery_id\tquery\tgroup\r\nq1\tcache eviction\tkeyword\r\n"
                  b"q2\tWhy rebuild nightly?\tquestion\r\n")
    out = read(p)
    assert out["query"].tolist() == ["cache eviction", "Why rebuild nightly?"]
    assert out["group"].tolist() == ["keyword", "question"]


def test_invalid_utf8_line_is_named(tmp_path):
    p = tmp_path / "queries.tsv"
    p.write_bytes(b"query_id\tquery\tgroup\nq1\tcache\tkeyword\nq2\tcaf\xe9\tkeyword\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert str(e.value).startswith(f"{p}:3: not valid UTF-8")


def test_blank_lines_do_not_shift_line_numbers(tmp_path):
    p = write_tsv(tmp_path, "q1\ta\tkeyword\n\n\nq2\t\tkeyword\n")
    with pytest.raises(InputError, match=r":5: q2: query text is empty"):
        read(p)


def test_integer_ids_from_jsonl_become_strings(tmp_path):
    p = tmp_path / "queries.jsonl"
    p.write_text('{"query_id": 7, "query": "cache", "group": "keyword"}\n'
                 '{"query_id": "007", "query": "pages", "group": "question"}\n')
    table, lines = read_rows(p)
    out = queries.validate_queries(table, groups=GROUPS, path=p, lines=lines)
    assert out["query_id"].tolist() == ["007", "7"]


def test_missing_column_is_named(tmp_path):
    table = pd.DataFrame({"query_id": ["q1"], "query": ["a"]})
    with pytest.raises(InputError, match="missing column.*group"):
        queries.validate_queries(table, groups=GROUPS, path="q.tsv")


def test_input_table_is_not_modified():
    table = pd.DataFrame({"query_id": ["q2", "q1"], "query": ["b", "a"],
                          "group": ["keyword", "question"]})
    before = table.copy()
    queries.validate_queries(table, groups=GROUPS)
    pd.testing.assert_frame_equal(table, before)


def test_sha256_is_over_the_documented_canonical_rows():
    table = pd.DataFrame({"query_id": ["q2", "q1"], "query": ["café", 'say "hi"'],
                          "group": ["question", "keyword"]})
    out = queries.validate_queries(table, groups=GROUPS)
    expected = ('{"query_id":"q1","query":"say \\"hi\\"","group":"keyword","weight":1.0}\n'
                '{"query_id":"q2","query":"café","group":"question","weight":1.0}\n')
    assert queries.queries_sha256(out) == hashlib.sha256(expected.encode()).hexdigest()
    shuffled = out.iloc[::-1].reset_index(drop=True)
    assert queries.queries_sha256(shuffled) == queries.queries_sha256(out)


def test_manifest_counts_every_params_group():
    table = pd.DataFrame({"query_id": ["a", "b", "c"], "query": ["x", "y", "z"],
                          "group": ["keyword", "keyword", "keyword"]})
    out = queries.validate_queries(table, groups=GROUPS)
    m = queries.queries_manifest(out, groups=GROUPS)
    assert m["queries"] == 3
    assert m["groups"] == {"keyword": 3, "question": 0}
    assert m["sha256"] == queries.queries_sha256(out)


def test_stage_writes_table_and_manifest_and_nothing_on_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stage = load_stage("queries")
    params = {"paths": {"queries": "out/queries.parquet", "queries_manifest": "out/manifest.json"},
              "queries": {"input": "queries.tsv", "groups": GROUPS}}
    write_tsv(tmp_path, "q1\tcache\tkeyword\nq1\tpages\tquestion\n")
    with pytest.raises(InputError):
        stage.run(Experiment.from_mapping(params))
    assert not (tmp_path / "out").exists()
    write_tsv(tmp_path, "q1\tcache\tkeyword\nq2\tpages\tquestion\n")
    stage.run(Experiment.from_mapping(params))
    table = pd.read_parquet(tmp_path / "out/queries.parquet")
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert table["query_id"].tolist() == ["q1", "q2"]
    assert manifest == {"sha256": queries.queries_sha256(table), "queries": 2,
                        "groups": {"keyword": 1, "question": 1}}


@pytest.mark.parametrize("qid", ["q005 ", "q 5", "q\u00a05"])
def test_an_id_holding_whitespace_is_refused_naming_line_and_the_id_quoted(tmp_path, qid):
    # A trailing space would be frozen into the query set, then refused only when a TREC
    # run is written; the rule stops it at the input line instead.
    p = write_tsv(tmp_path, f"q1\tcache eviction\tkeyword\n{qid}\tpage split\tquestion\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert str(e.value) == (f'{p}:3: query_id must not contain whitespace (TREC files split '
                            f'on it) (found "{qid}"). Remove the spaces, tabs or line breaks '
                            "from the id")
