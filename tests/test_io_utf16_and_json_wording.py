"""Input a reader cannot take is worded so a user can act on it: a UTF-16 file is named as
UTF-16, JSON that does not parse gets one phrase with its column, and a last line cut off by
an interrupted write is said to be cut off, with the fix."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError
from relgrade.io import files as io
from relgrade.io.runs import read_run

RUN = "q1 Q0 c1 1 2.5 bm25\nq1 Q0 c2 2 1.5 bm25\n"
UTF16 = "not valid UTF-8: looks like UTF-16; save it as UTF-8"


def _error(read, path) -> str:
    with pytest.raises(InputError) as e:
        read(path)
    return str(e.value)


def test_a_utf16_grade_file_with_its_byte_order_mark_is_named_utf16(tmp_path):
    p = tmp_path / "round-1.jsonl"
    p.write_bytes('{"query_id": "q1"}\n'.encode("utf-16"))  # the mark, little-endian
    assert _error(io.read_jsonl, p) == (
        f"{p}:1: {UTF16} (found the UTF-16 byte-order mark 0xff 0xfe)")


def test_a_big_endian_utf16_queries_file_is_named_utf16(tmp_path):
    p = tmp_path / "queries.tsv"
    p.write_bytes(b"\xfe\xff" + "query_id\tquery\n".encode("utf-16-be"))
    assert _error(lambda f: io.read_tsv(f, columns=["query_id", "query"]), p) == (
        f"{p}:1: {UTF16} (found the UTF-16 byte-order mark 0xfe 0xff)")


def test_a_utf16_trec_run_without_a_mark_is_named_utf16_not_a_bad_rank(tmp_path):
    p = tmp_path / "armD.trec"
    p.write_bytes(RUN.encode("utf-16-le"))
    assert _error(read_run, p) == f"{p}:1: {UTF16} (found byte 0x00 at column 2)"


def test_a_big_endian_utf16_run_without_a_mark_names_its_first_nul(tmp_path):
    p = tmp_path / "armD.trec"
    p.write_bytes(RUN.encode("utf-16-be"))
    assert _error(read_run, p) == f"{p}:1: {UTF16} (found byte 0x00 at column 1)"


def test_a_nul_among_utf8_text_is_not_called_utf16():
    assert io.utf16_found(b"q1\x00Q0 c1 1 2.5 bm25\n") is None
    assert io.utf16_found(b"\xef\xbb\xbfq1 Q0") is None  # the UTF-8 mark
    assert io.utf16_found("é".encode("utf-16-le")) is None  # one character: too little


def test_bad_json_is_one_phrase_with_its_column(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_text('{"grade": 1}\n{"grade": 1,\n{"grade": 2}\n')
    assert _error(io.read_jsonl, p) == (
        f"{p}:2: not valid JSON: expecting property name enclosed in double quotes at "
        "column 13")


def test_a_json_document_names_line_and_column(tmp_path):
    p = tmp_path / "record.json"
    p.write_text('{\n  "pairs": ,\n}\n')
    assert _error(io.read_json, p) == f"{p}:2: not valid JSON: expecting value at column 12"


def test_a_grade_file_whose_last_line_was_cut_off_says_so_and_how_to_repair_it(tmp_path):
    p = tmp_path / "round-1.jsonl"
    whole = '{"query_id": "q1", "chunk_id": "c1", "reason": "names the flag", "grade": 2}\n'
    p.write_text(whole + '{"query_id": "q1", "chunk_id": "c2", "reason": "describes th')
    assert _error(io.read_jsonl, p) == (
        f"{p}:2: not valid JSON: unterminated string starting at column 48; it is the last "
        "line and has no line end, so it looks cut off (an interrupted write). For a grade "
        "file, run `relgrade grade run` for its grader again: opening the file cuts a torn "
        "last line away, and its pair is graded again. For another file, write it again")


def test_a_bad_last_line_that_ends_with_a_newline_is_not_called_cut_off(tmp_path):
    p = tmp_path / "round-1.jsonl"
    p.write_text('{"grade": 1}\n{"grade": }\n')
    assert _error(io.read_jsonl, p) == f"{p}:2: not valid JSON: expecting value at column 11"


def test_a_whole_last_line_without_a_newline_is_read(tmp_path):
    p = tmp_path / "round-1.jsonl"
    p.write_text('{"grade": 1}\n{"grade": 2}')
    assert io.read_jsonl(p) == [{"grade": 1}, {"grade": 2}]


def test_a_recorded_dispute_that_is_not_json_is_worded_the_same_way(tmp_path):
    from pathlib import Path

    import yaml

    from relgrade.experiment.files import Experiment
    from relgrade.experiment.revisions import read_disputes

    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    raw["paths"]["disputes"] = "data/disputes.jsonl"
    ex = Experiment.from_mapping(raw, root=tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "disputes.jsonl").write_text('{"query_id": "q1",\n{}\n')
    assert _error(lambda _: read_disputes(ex), None) == (
        "data/disputes.jsonl:1: not valid JSON: expecting property name enclosed in double "
        "quotes at column 19")
