"""``relgrade.io.judgments``: one reader, one rule set, for JSONL, TREC qrels and Parquet.

The last test runs one matrix of good and bad qrels files through ``relgrade evaluate`` and
``relgrade grade import``: both must accept and refuse exactly the same files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.io.judgments import (
    judgment_format,
    judgment_objects,
    judgment_rows,
    read_grades_table,
    read_judgments,
)
from tests.test_grade_import_cli import _write_made_on_inputs

REPO = Path(__file__).resolve().parents[1]


def _text(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def _error(path, **kw) -> str:
    with pytest.raises(InputError) as e:
        read_judgments(path, **kw)
    return str(e.value)


# --- formats -------------------------------------------------------------------------

def test_format_is_told_by_extension_then_by_the_first_character(tmp_path):
    assert judgment_format(tmp_path / "a.parquet") == "parquet"
    assert judgment_format(tmp_path / "a.NDJSON") == "jsonl"
    assert judgment_format(tmp_path / "a.qrels") == "qrels"
    key = _text(tmp_path, "key", '\ufeff\n  {"query_id": "q1", "chunk_id": "a", "grade": 1}\n')
    assert judgment_format(key) == "jsonl"
    assert judgment_format(_text(tmp_path, "key.txt", "q1 0 a 1\n")) == "qrels"
    assert judgment_format(key, "qrels") == "qrels"
    with pytest.raises(InputError, match="unknown judgment format"):
        judgment_format(key, "csv")
    with pytest.raises(InputError, match="file not found"):
        judgment_format(tmp_path / "absent")


def test_the_same_judgments_read_alike_from_qrels_jsonl_and_parquet(tmp_path):
    qrels = _text(tmp_path, "k.qrels", "q1 0 4411 2\n\nq2 Q0 c3 0\n")
    jsonl = _text(tmp_path, "k.jsonl",
                  '{"query_id": "q1", "chunk_id": 4411, "reason": "Defines it.", "grade": 2}\n'
                  '{"query_id": "q2", "chunk_id": "c3", "grade": 0}\n')
    parquet = tmp_path / "k.parquet"
    pd.DataFrame({"query_id": ["q1", "q2"], "chunk_id": ["4411", "c3"],
                  "grade": [2, 0]}).to_parquet(parquet, index=False)
    expected = [{"query_id": "q1", "chunk_id": "4411", "grade": 2},
                {"query_id": "q2", "chunk_id": "c3", "grade": 0}]
    for path in (qrels, jsonl, parquet):
        df = read_judgments(path, scale=[0, 1, 2])
        assert list(df.columns) == ["query_id", "chunk_id", "grade", "reason"]
        assert str(df["grade"].dtype) == "int64"
        assert df[["query_id", "chunk_id", "grade"]].to_dict("records") == expected
    assert read_judgments(jsonl)["reason"].tolist() == ["Defines it.", ""]
    assert read_judgments(qrels)["reason"].tolist() == ["", ""]


def test_judgment_rows_are_grade_rows_with_their_line_numbers(tmp_path):
    qrels = _text(tmp_path, "a.qrels", "q1 0 4411 2\n\n \nq2 Q0 c3 0\n")
    assert judgment_rows(qrels) == [
        (1, {"query_id": "q1", "chunk_id": "4411", "reason": "", "grade": 2}),
        (4, {"query_id": "q2", "chunk_id": "c3", "reason": "", "grade": 0})]


def test_judgment_objects_keep_key_order_and_refuse_comments(tmp_path):
    path = _text(tmp_path, "g.jsonl", '\n{"grade": 1, "query_id": "q1"}\n')
    assert [(n, list(o)) for n, o in judgment_objects(path)] == [(2, ["grade", "query_id"])]
    path = _text(tmp_path, "c.jsonl", '# graded by hand\n{"grade": 1}\n')
    with pytest.raises(InputError) as e:
        judgment_objects(path)
    assert str(e.value) == (f"{path}:1: a comment line: no judgment format has comments. "
                            "Delete the line")


# --- the rules -----------------------------------------------------------------------

def test_an_empty_file_is_refused_in_every_format(tmp_path):
    for name in ("e.qrels", "e.jsonl"):
        path = _text(tmp_path, name, "\n \n")
        assert _error(path) == (f"{path}: no judgments in the file. A judgment file holds at "
                                "least one (query, chunk, grade) row")
    parquet = tmp_path / "e.parquet"
    pd.DataFrame({"query_id": [], "chunk_id": [], "grade": []}).to_parquet(parquet)
    assert "no judgments in the file" in _error(parquet)


def test_a_repeated_pair_names_both_lines_in_every_format(tmp_path):
    path = _text(tmp_path, "d.jsonl", '{"query_id": "q1", "chunk_id": 7, "grade": 1}\n\n'
                                      '{"query_id": "q1", "chunk_id": "7", "grade": 2}\n')
    assert _error(path) == (f"{path}:3: pair (q1, 7): one (query, chunk) pair is graded "
                            "twice (found lines 1 and 3). Keep one grade per pair")
    path = _text(tmp_path, "d.qrels", "q1 0 7 1\nq1 0 7 2\n")
    assert "one (query, chunk) pair is graded twice (found lines 1 and 2)" in _error(path)
    parquet = tmp_path / "d.parquet"
    pd.DataFrame({"query_id": ["q1", "q2", "q1"], "chunk_id": ["7", "7", "7"],
                  "grade": [1, 1, 2]}).to_parquet(parquet, index=False)
    assert _error(parquet) == (f"{parquet}: pair (q1, 7): one (query, chunk) pair is graded "
                               "twice (found rows 1 and 3). Keep one grade per pair")


@pytest.mark.parametrize("row, message", [
    ({"query_id": "q1", "chunk_id": "a", "grade": True}, "grade must be an integer (found true)"),
    ({"query_id": "q1", "chunk_id": "a", "grade": 1.0}, "grade must be an integer (found 1.0)"),
    ({"query_id": "q1", "chunk_id": "a", "grade": "1"}, 'grade must be an integer (found "1")'),
    ({"query_id": "q1", "chunk_id": None, "grade": 1}, "chunk_id must be a string or an integer"),
    ({"query_id": "q 1", "chunk_id": "a", "grade": 1}, "query_id is empty or holds whitespace"),
    ({"query_id": "", "chunk_id": "a", "grade": 1}, "query_id is empty or holds whitespace"),
    ({"query_id": "q1", "grade": 1}, "a row needs query_id, chunk_id, grade (found no chunk_id)"),
], ids=["bool", "float", "string", "null-id", "space-in-id", "empty-id", "no-chunk"])
def test_bad_json_rows_name_file_and_line(tmp_path, row, message):
    path = _text(tmp_path, "k.jsonl", '{"query_id": "q0", "chunk_id": "z", "grade": 0}\n'
                 + json.dumps(row) + "\n")
    assert _error(path).startswith(f"{path}:2: ")
    assert message in _error(path)


def test_a_grade_off_the_scale_is_refused_only_when_a_scale_is_given(tmp_path):
    path = _text(tmp_path, "k.qrels", "q1 0 a 1\nq1 0 b -1\n")
    assert read_judgments(path)["grade"].tolist() == [1, -1]
    assert _error(path, scale=[0, 1, 2]) == (f"{path}:2: pair (q1, b): grade outside the "
                                             "scale 0,1,2 (found -1)")


def test_a_hash_line_is_a_refused_comment_in_qrels(tmp_path):
    path = _text(tmp_path, "k.qrels", "q1 0 a 1\n\n#q1 0 b 1\n")
    assert _error(path) == (f"{path}:3: a comment line: no judgment format has comments "
                            "(found '#q1'). Delete the line")


def test_parquet_grades_must_be_an_integer_column(tmp_path):
    path = tmp_path / "f.parquet"
    pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grade": [1.0]}).to_parquet(path)
    assert _error(path) == (f"{path}: pair (q1, a): grade must be an integer (found row 1: "
                            "1.0). Store grades in an integer column")
    pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"]}).to_parquet(path)
    assert _error(path) == (f"{path}: a judgment table needs the columns query_id, chunk_id, "
                            "grade (found no grade)")


def test_grades_table_repeats_are_per_grader_and_round(tmp_path):
    rows = [{"query_id": "q1", "chunk_id": "a", "grader": "x", "grade": 1, "round": 1},
            {"query_id": "q1", "chunk_id": "a", "grader": "y", "grade": 2, "round": 1},
            {"query_id": "q1", "chunk_id": "a", "grader": "x", "grade": 2, "round": 2}]
    path = _text(tmp_path, "g.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    df = read_grades_table(path, scale=[0, 1, 2])
    assert df[["grader", "grade", "round"]].to_dict("records") == [
        {"grader": "x", "grade": 1, "round": 1.0}, {"grader": "y", "grade": 2, "round": 1.0},
        {"grader": "x", "grade": 2, "round": 2.0}]
    path = _text(tmp_path, "h.jsonl", "".join(json.dumps(r) + "\n" for r in rows + rows[:1]))
    with pytest.raises(InputError) as e:
        read_grades_table(path)
    assert str(e.value) == (f"{path}:4: x: pair (q1, a): one grader grades one (query, chunk) "
                            "pair twice (found lines 1 and 4). Keep one grade per pair")
    no_round = _text(tmp_path, "n.jsonl", json.dumps({k: v for k, v in rows[0].items()
                                                       if k != "round"}) + "\n")
    assert "round" not in read_grades_table(no_round).columns


# --- evaluate and grade import accept and refuse the same qrels lines ----------------

GOOD = {
    "plain": ("q1 0 a 2\n", [("q1", "a", 2)]),
    "tabs": ("q1\t0\ta\t2\n", [("q1", "a", 2)]),
    "runs-of-spaces": ("  q1   0  a\t 1  \n", [("q1", "a", 1)]),
    "bom-and-crlf": ("\ufeffq1 0 a 2\r\nq1 0 b 0\r\n", [("q1", "a", 2), ("q1", "b", 0)]),
    "blank-lines": ("\n\nq1 0 a 1\n   \nq2 0 c 0\n\n", [("q1", "a", 1), ("q2", "c", 0)]),
    "iter-field-q0": ("q1 Q0 a 1\n", [("q1", "a", 1)]),
    "leading-zero-and-plus": ("q1 0 a 01\nq1 0 b +2\n", [("q1", "a", 1), ("q1", "b", 2)]),
    "no-final-newline": ("q1 0 a 1", [("q1", "a", 1)]),
}
BAD = {
    "three-fields": "q1 0 a\n",
    "five-fields": "q1 0 a 2 x\n",
    "float-grade": "q1 0 a 1.0\n",
    "word-grade": "q1 0 a two\n",
    "digit-separator": "q1 0 a 1_0\n",
    "above-scale": "q1 0 a 3\n",
    "below-scale": "q1 0 a -1\n",
    "repeated-pair": "q1 0 a 1\nq1 0 a 2\n",
    "comment": "#q1 0 a 1\n",
    "comment-with-space": "# q1 0 a 1\n",
    "empty": "",
    "only-blank-lines": "\n \n",
    "invalid-utf8": b"q1 0 a\xff 1\n",
    "hex-grade": "q1 0 a 0x1\nq1 0 b 1\n",
    "fullwidth-grade": "q1 0 a \uff12\n",
}


@pytest.fixture
def exp(tmp_path, monkeypatch):
    """An experiment with a four-pair pool and a grader of kind import."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["graders"]["legacy"] = {"role": "grader", "kind": "import", "family": "trec",
                                   "person": "assessor"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    pool = tmp_path / params["paths"]["pool"]
    pool.parent.mkdir(parents=True)
    pd.DataFrame({"query_id": ["q1", "q1", "q2", "q3"], "chunk_id": ["a", "b", "c", "d"],
                  "inclusion_prob": [1.0] * 4}).to_parquet(pool, index=False)
    (tmp_path / "run.trec").write_text("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\n")
    _write_made_on_inputs(tmp_path, params["paths"], params)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _both(exp, text):
    src = _text(exp, "judged.qrels", text)
    evaluated = CliRunner().invoke(main, ["evaluate", str(src), str(exp / "run.trec"),
                                          "--scale", "0,1,2", "--json"])
    imported = CliRunner().invoke(main, ["grade", "import", str(src), "--grader", "legacy"])
    return evaluated, imported


@pytest.mark.parametrize("name", sorted(GOOD))
def test_evaluate_and_grade_import_accept_the_same_qrels(exp, name):
    text, pairs = GOOD[name]
    evaluated, imported = _both(exp, text)
    assert evaluated.exit_code == 0, evaluated.output
    assert imported.exit_code == 0, imported.output
    recorded = [json.loads(line) for line in
                (exp / "data/grades/legacy/round-1.jsonl").read_text().splitlines()]
    assert [(r["query_id"], r["chunk_id"], r["grade"]) for r in recorded] == pairs
    assert json.loads(evaluated.output)["queries"] == len({q for q, _, _ in pairs})


@pytest.mark.parametrize("name", sorted(BAD))
def test_evaluate_and_grade_import_refuse_the_same_qrels_with_the_same_error(exp, name):
    evaluated, imported = _both(exp, BAD[name])
    assert evaluated.exit_code == 1 and imported.exit_code == 1
    assert evaluated.output.startswith(f"Error: {exp / 'judged.qrels'}")
    assert evaluated.output == imported.output
    assert not (exp / "data/grades/legacy").exists()


def test_an_empty_qrels_file_is_an_error_for_evaluate(tmp_path):
    qrels = _text(tmp_path, "key.qrels", "")
    run = _text(tmp_path, "r.trec", "q1 Q0 a 1 1 t\n")
    res = CliRunner().invoke(main, ["evaluate", str(qrels), str(run)])
    assert res.exit_code == 1
    assert res.output == (f"Error: {qrels}: no judgments in the file. A judgment file holds at "
                          "least one (query, chunk, grade) row\n")


# --- round trips: what relgrade writes, the reader reads back unchanged ---------------

_ID = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
              min_size=1, max_size=6).filter(lambda s: not s.startswith("#"))
_JUDGMENTS = st.lists(st.tuples(_ID, _ID, st.integers(0, 3)), min_size=1, max_size=20,
                      unique_by=lambda t: (t[0], t[1]))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(judgments=_JUDGMENTS)
def test_key_qrels_and_parquet_written_by_relgrade_read_back_unchanged(tmp_path, judgments):
    from relgrade.io.trec import write_trec_qrels
    from relgrade.protocol.key import key_bytes

    df = pd.DataFrame(judgments, columns=["query_id", "chunk_id", "grade"])
    expected = sorted(judgments)
    (tmp_path / "key.jsonl").write_bytes(key_bytes(df))
    write_trec_qrels(tmp_path / "key.qrels", df)
    df.to_parquet(tmp_path / "key.parquet", index=False)
    for name in ("key.jsonl", "key.qrels", "key.parquet"):
        got = read_judgments(tmp_path / name, scale=[0, 1, 2, 3])
        assert sorted(zip(got["query_id"], got["chunk_id"], got["grade"])) == expected, name


def test_an_id_with_a_unicode_space_is_refused_in_qrels_and_jsonl_alike(tmp_path):
    qrels = _text(tmp_path, "k.qrels", "q1 0 a 1\nq\u00a01 0 b 1\n")
    assert _error(qrels) == f"{qrels}:2: query_id is empty or holds whitespace (found 'q\\xa01')"
    jsonl = _text(tmp_path, "k.jsonl", '{"query_id": "q1", "chunk_id": "a", "grade": 1}\n'
                                       '{"query_id": "q\\u00a01", "chunk_id": "b", "grade": 1}\n')
    assert _error(jsonl) == f"{jsonl}:2: query_id is empty or holds whitespace (found 'q\\xa01')"
    fine = _text(tmp_path, "ok.qrels", "q\u00e91 0 \u00e9 1\n")
    assert read_judgments(fine)["query_id"].tolist() == ["q\u00e91"]


def test_a_key_file_read_as_columns_equals_it_read_one_object_per_line(tmp_path):
    from relgrade.io.files import read_jsonl
    from relgrade.io.judgments import read_key_table

    cols = ["query_id", "chunk_id", "grade"]
    cases = {
        "canonical": b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
                     b'{"query_id":"q1","chunk_id":"b","grade":0}\n',
        "an integer id": b'{"query_id":"q1","chunk_id":7,"grade":1}\n',
        "another key": b'{"query_id":"q1","chunk_id":"a","grade":1,"x":1}\n',
        "empty": b"",
    }
    for name, raw in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(raw)
        got = read_key_table(path)
        pd.testing.assert_frame_equal(got, pd.DataFrame(read_jsonl(path), columns=cols))
    got = read_key_table(tmp_path / "canonical.jsonl")
    assert got["grade"].tolist() == [2, 0] and got["chunk_id"].tolist() == ["a", "b"]


def test_arrow_from_jemalloc_puts_the_previous_arrow_pool_back_when_done():
    import pyarrow as pa

    from relgrade.pipeline.memory import arrow_from_jemalloc

    before = pa.default_memory_pool().backend_name
    with arrow_from_jemalloc():
        inside = pa.default_memory_pool().backend_name
        made = pa.array(["a", "b"])
    assert pa.default_memory_pool().backend_name == before
    assert inside in ("jemalloc", before)  # jemalloc where pyarrow was built with it
    assert made.to_pylist() == ["a", "b"]  # a buffer made inside outlives the switch
