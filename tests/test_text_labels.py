"""Text grades read with their declared order (--labels), and refused without it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.io.judgments import read_grades_table, read_judgments


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_text_grades_read_as_their_position_among_the_labels(tmp_path):
    f = _jsonl(tmp_path / "a.jsonl", [{"query_id": "q", "chunk_id": "c1", "grade": "good"},
                                       {"query_id": "q", "chunk_id": "c2", "grade": "bad"},
                                       {"query_id": "q", "chunk_id": "c3", "grade": "fair"}])
    df = read_judgments(f, labels=["bad", "fair", "good"], scale=[0, 1, 2])
    assert df["grade"].tolist() == [2, 0, 1]


def test_a_text_grade_without_labels_is_refused_with_the_way_forward(tmp_path):
    f = _jsonl(tmp_path / "a.jsonl", [{"query_id": "q", "chunk_id": "c1", "grade": "good"}])
    with pytest.raises(InputError) as e:
        read_judgments(f)
    assert f"{f}:1" in str(e.value) and "grade must be an integer" in str(e.value)
    assert "--labels" in str(e.value)


def test_a_grade_outside_the_labels_is_refused_naming_the_line_and_the_labels(tmp_path):
    f = _jsonl(tmp_path / "a.jsonl", [{"query_id": "q", "chunk_id": "c1", "grade": "fair"},
                                       {"query_id": "q", "chunk_id": "c2", "grade": "great"}])
    with pytest.raises(InputError) as e:
        read_judgments(f, labels=["bad", "fair", "good"])
    msg = str(e.value)
    assert f"{f}:2" in msg and "not one of the declared labels" in msg
    assert '(found "great")' in msg and "bad, fair, good" in msg


def test_a_parquet_grades_table_of_text_labels_reads_with_labels(tmp_path):
    f = tmp_path / "g.parquet"
    pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "a"], "grader": ["r1", "r2"],
                  "grade": ["yes", "no"]}).to_parquet(f, index=False)
    assert read_grades_table(f, labels=["no", "yes"])["grade"].tolist() == [1, 0]
    with pytest.raises(InputError, match="--labels"):
        read_grades_table(f)


def test_agreement_cli_reads_text_labels_in_their_declared_order(tmp_path):
    # A: good, fair, bad, good; B: good, bad, bad, fair -> codes (2,2) (1,0) (0,0) (2,1)
    grades_a = ["good", "fair", "bad", "good"]
    grades_b = ["good", "bad", "bad", "fair"]
    a = _jsonl(tmp_path / "a.jsonl", [{"query_id": "q", "chunk_id": f"c{i}", "grade": g}
                                      for i, g in enumerate(grades_a)])
    b = _jsonl(tmp_path / "b.jsonl", [{"query_id": "q", "chunk_id": f"c{i}", "grade": g}
                                      for i, g in enumerate(grades_b)])
    res = CliRunner().invoke(main, ["agreement", str(a), str(b), "--labels", "bad,fair,good",
                                    "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["labels"] == ["bad", "fair", "good"] and out["scale"] == [0, 1, 2]
    # rows: grade in A, columns: grade in B
    assert out["confusion"] == [[1, 0, 0], [1, 0, 0], [0, 1, 1]]
    assert out["pairs"] == 4 and out["disagreement"] == 0.5


def test_agreement_cli_without_labels_names_the_option(tmp_path):
    a = _jsonl(tmp_path / "a.jsonl", [{"query_id": "q", "chunk_id": "c", "grade": "good"}])
    res = CliRunner().invoke(main, ["agreement", str(a), str(a)])
    assert res.exit_code == 1 and "--labels" in res.output


def test_labels_must_be_two_or_more_distinct_names(tmp_path):
    a = _jsonl(tmp_path / "a.jsonl", [{"query_id": "q", "chunk_id": "c", "grade": "good"}])
    res = CliRunner().invoke(main, ["agreement", str(a), str(a), "--labels", "good,good"])
    assert res.exit_code == 1 and "two or more distinct" in res.output


def test_aggregate_cli_takes_text_labels_and_writes_integer_grades(tmp_path):
    rows = [{"query_id": "q", "chunk_id": "a", "grader": r, "grade": g}
            for r, g in (("r1", "good"), ("r2", "good"), ("r3", "bad"))]
    rows += [{"query_id": "q", "chunk_id": "b", "grader": r, "grade": g}
             for r, g in (("r1", "bad"), ("r2", "fair"), ("r3", "bad"))]
    grades = _jsonl(tmp_path / "g.jsonl", rows)
    out = tmp_path / "agg.jsonl"
    res = CliRunner().invoke(main, ["aggregate", "--grades", str(grades), "--labels",
                                    "bad,fair,good", "--out", str(out)])
    assert res.exit_code == 0, res.output
    # majority: a -> good (2), b -> bad (0)
    assert out.read_text() == ('{"query_id":"q","chunk_id":"a","grade":2}\n'
                               '{"query_id":"q","chunk_id":"b","grade":0}\n')
