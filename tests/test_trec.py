"""TREC run and qrels files: both readers (Arrow fast path and exact line reader), writers,
errors that name the file and line, and write/read round trips."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.errors import InputError
from relgrade.io.trec import (
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_run_is_read_with_string_ids_and_typed_columns(tmp_path):
    p = _write(tmp_path, "r.trec", b"301 Q0 007 1 12.5 bm25\n301 Q0 d2 2 -0.25 bm25\n")
    run = read_trec_run(p)
    assert list(run.columns) == ["query_id", "chunk_id", "rank", "score"]
    assert run["query_id"].tolist() == ["301", "301"]
    assert run["chunk_id"].tolist() == ["007", "d2"]  # leading zeros kept
    assert run["rank"].dtype == np.int64 and run["score"].dtype == np.float64
    assert run["score"].tolist() == [12.5, -0.25]
    assert pd.api.types.is_string_dtype(run["query_id"])


def test_tabs_and_runs_of_spaces_give_the_same_table(tmp_path):
    single = read_trec_run(_write(tmp_path, "a", b"q1 Q0 d1 1 2 t\nq1 Q0 d2 2 1 t\n"))
    tabs = read_trec_run(_write(tmp_path, "b", b"q1\tQ0\td1\t1\t2\tt\nq1\tQ0\td2\t2\t1\tt\n"))
    ragged = read_trec_run(_write(tmp_path, "c", b"  q1  Q0 d1\t1 2 t \n\nq1 Q0  d2 2 1 t\n\n"))
    pd.testing.assert_frame_equal(single, tabs)
    pd.testing.assert_frame_equal(single, ragged)


def test_bom_and_crlf_are_accepted(tmp_path):
    p = _write(tmp_path, "r.trec", b"\xef\xbb\xbfq1 Q0 d1 1 2 t\r\nq1 Q0 d2 2 1 t\r\n")
    run = read_trec_run(p)
    assert run["query_id"].tolist() == ["q1", "q1"]
    assert run["chunk_id"].tolist() == ["d1", "d2"]


def test_invalid_utf8_is_rejected_with_its_line(tmp_path):
    p = _write(tmp_path, "r.trec", b"q1 Q0 d1 1 2 t\nq1 Q0 d\xff 2 1 t\n")
    with pytest.raises(InputError) as e:
        read_trec_run(p)
    assert str(e.value) == f"{p}:2: not valid UTF-8 (found byte 0xff at column 8)"


_TOO_FEW = ("expected at least 6 whitespace-separated fields (qid Q0 docid rank score tag) "
            "(found 5 fields)")


@pytest.mark.parametrize("line, message", [
    (b"q1 Q0 d2 2 1", _TOO_FEW),
    (b"q1  d2 2 1 t", _TOO_FEW),
    (b"q1 Q0 d2 2 1 ", _TOO_FEW),
    (b"q1 Q0 d2 2 high t", "score must be a number (found 'high')"),
    (b"q1 Q0 d2 2 nan t", "score must be a finite number (found 'nan')"),
    (b"q1 Q0 d2 2 NaN t", "score must be a finite number (found 'NaN')"),
    (b"q1 Q0 d2 2 -inf t", "score must be a finite number (found '-inf')"),
    (b"q1 Q0 d2 2.0 1 t", "rank must be an integer (found '2.0')"),
    (b"q1 Q0 d2 two 1 t", "rank must be an integer (found 'two')"),
])
def test_bad_run_line_is_named_with_file_and_line(tmp_path, line, message):
    p = _write(tmp_path, "r.trec", b"q1 Q0 d1 1 2 t\n" + line + b"\n")
    with pytest.raises(InputError) as e:
        read_trec_run(p)
    assert str(e.value) == f"{p}:2: {message}"


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_trec_run(tmp_path / "absent.trec")


def test_qrels_are_read_with_integer_grades(tmp_path):
    p = _write(tmp_path, "q.qrels", b"1 0 a 2\n1 0 b 0\n2 0 a -1\n")
    qrels = read_trec_qrels(p)
    assert list(qrels.columns) == ["query_id", "chunk_id", "grade"]
    assert qrels["grade"].tolist() == [2, 0, -1]
    assert qrels["grade"].dtype == np.int64
    assert qrels["query_id"].tolist() == ["1", "1", "2"]


def test_repeated_qrels_pair_names_query_chunk_and_both_lines(tmp_path):
    p = _write(tmp_path, "q.qrels", b"q1 0 a 1\nq1 0 b 2\nq2 0 a 0\nq1 0 a 0\n")
    with pytest.raises(InputError) as e:
        read_trec_qrels(p)
    assert str(e.value) == (f"{p}:4: query q1, chunk a: one (query, chunk) pair is graded "
                            "twice (found lines 1 and 4). Keep one grade per pair")


def test_repeated_qrels_pair_in_a_ragged_file_names_the_real_lines(tmp_path):
    p = _write(tmp_path, "q.qrels", b"q1  0 a 1\n\nq1 0 b 2\nq1 0 a 0\n")
    with pytest.raises(InputError) as e:
        read_trec_qrels(p)
    assert "(found lines 1 and 4)" in str(e.value)


def test_non_integer_grade_is_rejected_with_its_line(tmp_path):
    p = _write(tmp_path, "q.qrels", b"q1 0 a 1\nq1 0 b 1.5\n")
    with pytest.raises(InputError) as e:
        read_trec_qrels(p)
    assert str(e.value) == f"{p}:2: grade must be an integer (found '1.5')"


def test_writers_produce_trec_lines(tmp_path):
    run = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"], "rank": [1, 2],
                        "score": [2.0, 0.1]})
    write_trec_run(tmp_path / "r.trec", run, tag="bm25")
    assert (tmp_path / "r.trec").read_text() == "q1 Q0 a 1 2 bm25\nq1 Q0 b 2 0.1 bm25\n"
    qrels = pd.DataFrame({"query_id": [7], "chunk_id": ["x"], "grade": [2]})
    write_trec_qrels(tmp_path / "k.qrels", qrels)
    assert (tmp_path / "k.qrels").read_text() == "7 0 x 2\n"


def test_writer_refuses_ids_with_whitespace_and_leaves_no_file(tmp_path):
    run = pd.DataFrame({"query_id": ["q 1"], "chunk_id": ["a"], "rank": [1], "score": [1.0]})
    with pytest.raises(InputError, match="empty or holds whitespace"):
        write_trec_run(tmp_path / "r.trec", run, tag="t")
    assert not (tmp_path / "r.trec").exists()
    with pytest.raises(InputError, match="run tag"):
        write_trec_run(tmp_path / "r.trec", run.assign(query_id="q1"), tag="my run")


_id = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FFF,
                                     blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs")),
              min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_id, _id, st.integers(-10**6, 10**6),
                               st.floats(allow_nan=False, allow_infinity=False)),
                     min_size=1, max_size=30))
def test_run_round_trips_exactly(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("rt") / "r.trec"
    run = pd.DataFrame(rows, columns=["query_id", "chunk_id", "rank", "score"])
    write_trec_run(path, run, tag="arm")
    back = read_trec_run(path)
    assert back["query_id"].tolist() == run["query_id"].tolist()
    assert back["chunk_id"].tolist() == run["chunk_id"].tolist()
    assert back["rank"].tolist() == run["rank"].tolist()
    assert back["score"].tolist() == run["score"].tolist()  # exact float64 round trip


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(_id, _id, st.integers(-3, 3)), min_size=1, max_size=30,
                     unique_by=lambda r: (r[0], r[1])))
def test_qrels_round_trip(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("rt") / "k.qrels"
    qrels = pd.DataFrame(rows, columns=["query_id", "chunk_id", "grade"])
    write_trec_qrels(path, qrels)
    back = read_trec_qrels(path)
    assert back.values.tolist() == qrels.values.tolist()
