"""The judgment bank read as columns: the same table as the row path, the same error words.

A grade file and its bank sidecar are written here the way relgrade writes them (canonical
JSON lines, the sidecar's ``row_sha256`` binding each line to its row), then read twice:
as columns (:mod:`relgrade.io.grade_columns`, :mod:`relgrade.protocol.bank_columns`) and
row by row (:func:`relgrade.protocol.grades.bank_of_file` without columns). Every table
must be equal, and every refusal must be the row path's message, byte for byte.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.canonical import canonical_json, jsonl_bytes
from relgrade.errors import InputError
from relgrade.graders.cache import (CACHE_FIELDS, JUDGE_FIELDS, TEMPLATE_FIELDS, cache_counts,
                                    judge_counts, template_counts)
from relgrade.graders.store import bank_path, read_bank
from relgrade.io.files import iter_jsonl
from relgrade.io.grade_columns import RoundBlocks, read_bank_columns, read_grade_columns
from relgrade.protocol import bank_columns, grades
from relgrade.protocol.sidecar import row_sha256

H = {"content": "c" * 64, "intent": "i" * 64, "rubric": "r" * 64}
MODEL = {"role": "grader", "kind": "model", "family": "f"}
HUMAN_AUDITOR = {"role": "auditor", "kind": "human", "family": "people"}


def _rows():
    return [{"query_id": "q1", "chunk_id": "a", "reason": "defines the function", "grade": 2},
            {"query_id": "q1", "chunk_id": "b", "reason": "unrelated", "grade": 0},
            {"query_id": "q2", "chunk_id": "a", "reason": "mentions it once", "grade": 1}]


def _line(row, **extra):
    line = {"query_id": str(row["query_id"]), "chunk_id": str(row["chunk_id"]),
            "content_sha256": H["content"], "intent_sha256": H["intent"],
            "rubric_version": "v1", "rubric_sha256": H["rubric"],
            "graded_at": "2026-12-06T10:00:00Z", "row_sha256": row_sha256(row)}
    return {**line, **extra}


def _write(tmp_path, rows, lines=None, *, raw=None, raw_bank=None):
    path = tmp_path / "grader-a" / "round-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw if raw is not None else jsonl_bytes(rows))
    lines = [_line(r) for r in rows] if lines is None else lines
    bank_path(path).write_bytes(raw_bank if raw_bank is not None else jsonl_bytes(lines))
    return path


def _both(path, spec=MODEL, scale=(0, 1, 2), words=15):
    """(columns' result or error text, rows' result or error text, bank_of_columns hit)."""
    def run(columns):
        try:
            f = grades.GraderFile(rows=iter_jsonl(path), source=path.as_posix(), sha256="",
                                  round=1, bank=None if columns else read_bank(path),
                                  bank_source=bank_path(path).as_posix(),
                                  columns=columns,
                                  load_bank=(lambda: read_bank(path)) if columns else None)
            return grades.bank_of_file(f, name="grader-a", spec=spec, scale=scale,
                                       max_reason_words=words)
        except InputError as e:
            return str(e)

    rows_t, bank_t = read_grade_columns(path), read_bank_columns(bank_path(path))
    columns = (rows_t, bank_t) if rows_t is not None and bank_t is not None else None
    hit = columns is not None and bank_columns.bank_of_columns(
        *columns, name="grader-a", spec=spec, round=1, scale=scale, max_reason_words=words,
        reasonless_formats=grades.REASONLESS_FORMATS) is not None
    whole = run(columns)
    # the same files read a block of rows at a time (blocks of one line or a few, and
    # the whole file): the same table, or the same refusal, word for word
    for size in (16, 200, 1 << 20):
        by_blocks = _by_blocks(path, size, spec=spec, scale=scale, words=words)
        if isinstance(whole, str):
            assert by_blocks == whole
        else:
            pd.testing.assert_frame_equal(by_blocks, whole)
    return whole, run(None), hit


def _by_blocks(path, size, *, spec, scale, words):
    """bank_of_file of ``path`` read through RoundBlocks of ``size`` bytes (or its error)."""
    blocks = RoundBlocks(path, bank_path(path), block_size=size)
    f = grades.GraderFile(rows=iter_jsonl(path), source=path.as_posix(), sha256="", round=1,
                          bank=None, bank_source=bank_path(path).as_posix(), blocks=blocks,
                          load_bank=lambda: read_bank(path))
    try:
        return grades.bank_of_file(f, name="grader-a", spec=spec, scale=scale,
                                   max_reason_words=words)
    except InputError as e:
        return str(e)


def test_a_file_relgrade_wrote_is_built_from_columns_into_the_row_paths_table(tmp_path):
    rows = _rows() + [{"query_id": "q2", "chunk_id": "b", "reason": "žluťoučký kůň",
                       "grade": 1}]
    lines = [_line(r) for r in rows]
    lines[1]["cache"] = "hit"
    lines[2]["imported_from"] = {"file": "x.jsonl", "sha256": "s", "format": "jsonl"}
    lines[3].pop("graded_at")  # an old line without a time reads as ""
    path = _write(tmp_path, rows, lines)
    cols, by_rows, hit = _both(path)
    assert hit
    pd.testing.assert_frame_equal(cols, by_rows)
    assert cols["graded_at"].tolist() == ["2026-12-06T10:00:00Z"] * 3 + [""]
    assert cols["sequence"].tolist() == [0, 1, 2, 3]
    assert cols["grade"].tolist() == [2, 0, 1, 1]


def test_a_pair_regraded_on_new_content_keeps_both_rows_on_the_column_path(tmp_path):
    rows = _rows() + [{"query_id": "q1", "chunk_id": "a", "reason": "now it is gone",
                       "grade": 0}]
    lines = [_line(r) for r in rows]
    lines[3]["content_sha256"] = "d" * 64
    cols, by_rows, hit = _both(_write(tmp_path, rows, lines))
    assert hit
    pd.testing.assert_frame_equal(cols, by_rows)
    assert len(cols) == 4


def test_trailing_bank_lines_without_rows_are_left_out_on_the_column_path(tmp_path):
    rows = _rows()
    lines = [_line(r) for r in rows] + [_line({"query_id": "q9", "chunk_id": "z",
                                                "reason": "x", "grade": 1})]
    cols, by_rows, hit = _both(_write(tmp_path, rows, lines))
    assert hit
    pd.testing.assert_frame_equal(cols, by_rows)
    assert len(cols) == 3


def _bad_cases():
    rows = _rows()
    good = jsonl_bytes(rows)
    lines = [_line(r) for r in rows]
    out = {}
    swapped = good.replace(b'"reason":"unrelated","grade":0', b'"grade":0,"reason":"unrelated"')
    out["keys out of order"] = (swapped, None, MODEL)
    out["a grade off the scale"] = (good.replace(b'"grade":2', b'"grade":3'), None, MODEL)
    out["a grade written 1.0"] = (good.replace(b'"grade":1', b'"grade":1.0'), None, MODEL)
    out["a grade written true"] = (good.replace(b'"grade":1', b'"grade":true'), None, MODEL)
    out["an empty query id"] = (good.replace(b'"query_id":"q2"', b'"query_id":""'), None, MODEL)
    out["a query id of no-break spaces"] = (
        good.replace(b'"query_id":"q2"', '"query_id":"\u00a0 "'.encode()), None, MODEL)
    out["a reason of 16 words"] = (
        good.replace(b'"unrelated"', b'"' + b" ".join([b"w"] * 16) + b'"'), None, MODEL)
    out["a reason of 301 characters"] = (
        good.replace(b'"unrelated"', b'"' + b"x" * 301 + b'"'), None, MODEL)
    out["an empty reason from a model"] = (good.replace(b'"unrelated"', b'""'), None, MODEL)
    out["a reason that is a lone surrogate"] = (
        good.replace(b'"unrelated"', b'"\\ud83d"'), None, MODEL)
    out["a missing reason"] = (good.replace(b'"reason":"unrelated",', b""), None, MODEL)
    out["an extra key"] = (good.replace(b'"grade":0}', b'"grade":0,"x":1}'), None, MODEL)
    out["a comment line"] = (b"# graded by hand\n" + good, None, MODEL)
    out["a line that is not JSON"] = (good + b"{oops\n", None, MODEL)
    out["a row without its bank line"] = (good, jsonl_bytes(lines[:2]), MODEL)
    moved = [lines[1], lines[0], lines[2]]
    out["a bank line of another pair"] = (good, jsonl_bytes(moved), MODEL)
    other = [dict(lines[0], row_sha256="0" * 64), *lines[1:]]
    out["a bank line of another grade of the pair"] = (good, jsonl_bytes(other), MODEL)
    empty = [dict(lines[0], intent_sha256=""), *lines[1:]]
    out["a bank line without an intent hash"] = (good, jsonl_bytes(empty), MODEL)
    nulled = [dict(lines[0], rubric_sha256=None), *lines[1:]]
    out["a bank line with a null rubric hash"] = (good, jsonl_bytes(nulled), MODEL)
    twice = good + jsonl_bytes([rows[0]])
    out["one pair twice on the same content"] = (twice, jsonl_bytes(lines + [lines[0]]), MODEL)
    out["a bank line that is not an object"] = (good, jsonl_bytes(lines[:2]) + b"[1]\n", MODEL)
    return out


@pytest.mark.parametrize("case", list(_bad_cases()))
def test_a_bad_file_is_refused_with_the_row_paths_message_word_for_word(tmp_path, case):
    raw, raw_bank, spec = _bad_cases()[case]
    path = _write(tmp_path, _rows(), raw=raw, raw_bank=raw_bank)
    cols, by_rows, hit = _both(path, spec=spec)
    assert isinstance(by_rows, str), "the row path refuses the file"
    assert not hit, "the column path never accepts what the row path refuses"
    assert cols == by_rows


def test_a_human_auditors_zero_without_reason_and_a_qrels_import_are_accepted(tmp_path):
    rows = _rows()
    rows[1]["reason"] = ""  # a human auditor's 0 needs no reason
    lines = [_line(r) for r in rows]
    cols, by_rows, hit = _both(_write(tmp_path, rows, lines), spec=HUMAN_AUDITOR)
    assert hit
    pd.testing.assert_frame_equal(cols, by_rows)
    rows[1]["grade"] = 1  # but a 1 does, unless its bank line says it came from qrels
    lines = [_line(r) for r in rows]
    cols, by_rows, hit = _both(_write(tmp_path, rows, lines), spec=HUMAN_AUDITOR)
    assert not hit and cols == by_rows and "reason required" in cols
    lines[1]["imported_from"] = {"file": "old.qrels", "sha256": "s", "format": "qrels"}
    cols, by_rows, hit = _both(_write(tmp_path, rows, lines), spec=HUMAN_AUDITOR)
    assert hit
    pd.testing.assert_frame_equal(cols, by_rows)


def test_files_the_column_path_leaves_to_the_rows_are_still_read_the_same(tmp_path):
    rows = _rows()
    # integer ids, spaces after the separators, CRLF line ends: valid, read row by row
    spaced = "".join(json.dumps(r) + "\r\n" for r in rows).encode()
    numeric = [dict(r, chunk_id=7) for r in rows[:1]]
    for raw, rows_now in ((spaced, rows), (jsonl_bytes(numeric), numeric)):
        path = _write(tmp_path, rows_now, raw=raw)
        cols, by_rows, hit = _both(path)
        assert not isinstance(by_rows, str)
        pd.testing.assert_frame_equal(cols, by_rows)


def test_a_sidecar_whose_last_line_is_torn_is_left_to_read_bank(tmp_path):
    rows = _rows()
    path = _write(tmp_path, rows, raw_bank=jsonl_bytes([_line(r) for r in rows])
                  + b'{"query_id":"q3","chu')
    assert read_bank_columns(bank_path(path)) is None
    assert len(read_bank(path)) == 3
    cols, by_rows, _ = _both(path)
    pd.testing.assert_frame_equal(cols, by_rows)


def test_made_on_hashes_are_held_as_dictionary_columns(tmp_path):
    path = _write(tmp_path, _rows())
    table = read_bank_columns(bank_path(path))
    for name in ("intent_sha256", "rubric_version", "rubric_sha256", "graded_at"):
        assert pa.types.is_dictionary(table.schema.field(name).type)
        assert len(table.column(name).chunk(0).dictionary) == 1  # one value, 3 codes


def test_cache_and_judge_counts_from_columns_equal_those_from_lines(tmp_path):
    rows = _rows() + [{"query_id": "q1", "chunk_id": "a", "reason": "again", "grade": 1}]
    lines = [_line(r) for r in rows]
    lines[0].update(cache="hit", judge="j1")
    lines[1].update(cache="miss", judge="j2")
    lines[2].update(judge="")
    lines[3].update(cache="hit", judge="j3", content_sha256="d" * 64)
    path = _write(tmp_path, rows, lines)
    table, by_lines = read_bank_columns(bank_path(path)), read_bank(path)
    assert cache_counts(table) == cache_counts(by_lines) == {"hit": 2, "miss": 1, "none": 1}
    # q1/a's latest line names j3; q1/b j2; q2/a none
    assert judge_counts(table) == judge_counts(by_lines) == \
        {"j2": 1, "identity not recorded": 1, "j3": 1}
    assert list(judge_counts(table)) == list(judge_counts(by_lines))
    # read with only the fields each count needs, the same counts
    narrow = read_bank_columns(bank_path(path), JUDGE_FIELDS)
    assert narrow.column_names == ["query_id", "chunk_id", "judge"]
    assert judge_counts(narrow) == judge_counts(by_lines)
    assert cache_counts(read_bank_columns(bank_path(path), CACHE_FIELDS)) == \
        cache_counts(by_lines)


def test_template_counts_from_columns_equal_those_from_lines(tmp_path):
    rows = _rows() + [{"query_id": "q1", "chunk_id": "a", "reason": "again", "grade": 1}]
    lines = [_line(r) for r in rows]
    lines[0].update(judge="j1", template_sha256="t1")
    lines[1].update(judge="j1", template_sha256="t1")
    lines[3].update(judge="j1", template_sha256="t2")
    path = _write(tmp_path, rows, lines)
    table = read_bank_columns(bank_path(path), TEMPLATE_FIELDS)
    # q1/a's latest line names t2, q1/b t1, q2/a no template
    want = {"t1": 1, "template not recorded": 1, "t2": 1}
    assert template_counts(table) == template_counts(read_bank(path)) == want
    assert list(template_counts(table)) == list(template_counts(read_bank(path)))


def test_sidecar_blocks_of_three_fields_build_those_and_skip_a_bad_other_field(tmp_path):
    from relgrade.io.grade_columns import bank_blocks
    rows = _rows()
    lines = [_line(r, judge="j1", template_sha256="t1") for r in rows]
    lines[1].update(judge="j2", graded_at=5)  # a time that is not text: a field not counted
    path = _write(tmp_path, rows, lines)
    assert list(bank_blocks(bank_path(path))) == [None]  # every field: refused
    # blocks of about two lines (a line is about 450 bytes)
    blocks = list(bank_blocks(bank_path(path), block_size=1000, fields=TEMPLATE_FIELDS))
    assert len(blocks) == 2 and all(b.column_names == list(TEMPLATE_FIELDS) for b in blocks)
    # the whole count with the same fields reads the file too: the same lines
    assert [j for b in blocks for j in b.column("judge").to_pylist()] == ["j1", "j2", "j1"]
    assert read_bank_columns(bank_path(path), TEMPLATE_FIELDS).num_rows == 3


def test_whitespace_is_exactly_what_str_isspace_calls_whitespace():
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    others = [chr(c) for c in range(0x3001) if not chr(c).isspace()
              and not 0xD800 <= c <= 0xDFFF]
    assert bank_columns.blank_ids(pa.array(spaces)).all()
    assert not bank_columns.blank_ids(pa.array(others)).any()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30),
                min_size=1, max_size=20))
def test_words_and_blank_ids_agree_with_python_string_methods(texts):
    arr = pa.array(texts, pa.string())
    assert bank_columns.word_counts(arr).tolist() == [len(t.split()) for t in texts]
    assert bank_columns.blank_ids(arr).tolist() == [not t.strip() for t in texts]


def test_the_row_hash_of_a_canonical_line_is_the_hash_of_its_bytes():
    row = _rows()[2]
    import hashlib
    assert row_sha256(row) == hashlib.sha256(canonical_json(row).encode()).hexdigest()


def test_a_grade_file_read_in_small_blocks_equals_it_read_in_one(tmp_path):
    # 40 rows of about 80 bytes: 16-byte blocks split every line, 100-byte blocks cut
    # between lines and inside them; each line's hash is the sha256 of its bytes
    rows = [{"query_id": f"q{i // 7}", "chunk_id": f"c{i}", "reason": "žluťoučký " * (i % 3),
             "grade": i % 3} for i in range(40)]
    path = _write(tmp_path, rows)
    whole = read_grade_columns(path)
    for size in (16, 100, 1 << 20):
        assert read_grade_columns(path, block_size=size).equals(whole)
    assert whole.column("line_sha256").to_pylist() == [row_sha256(r) for r in rows]
    assert whole.column("grade").to_pylist() == [i % 3 for i in range(40)]
    path.write_bytes(jsonl_bytes(rows)[:-1])  # no newline after the last line
    assert read_grade_columns(path, block_size=100).equals(whole)


def test_a_round_read_in_blocks_of_rows_gives_the_banks_table_of_the_whole_files(tmp_path):
    # 40 rows: grade blocks of one or two lines, sidecar blocks of about three lines (so a
    # block of rows takes its lines from one or two sidecar blocks, and leaves some over),
    # two trailing bank lines without rows, and times and intents that differ by block
    rows = [{"query_id": f"q{i // 7}", "chunk_id": f"c{i}", "reason": f"fits {i % 3}",
             "grade": i % 3} for i in range(40)]
    lines = [_line(r, graded_at=f"2026-12-06T10:0{i // 10}:00Z",
                   intent_sha256=f"{i // 7}" * 64) for i, r in enumerate(rows)]
    extra = [_line({"query_id": "q9", "chunk_id": f"x{i}", "reason": "x", "grade": 0})
             for i in range(2)]
    path = _write(tmp_path, rows, lines + extra)
    whole = bank_columns.bank_of_columns(
        read_grade_columns(path), read_bank_columns(bank_path(path)), name="grader-a",
        spec=MODEL, round=1, scale=(0, 1, 2), max_reason_words=15)
    assert whole is not None and len(whole) == 40
    for size, bank_size in ((100, 1024), (250, 700), (1 << 20, 1 << 20)):
        blocks = RoundBlocks(path, bank_path(path), block_size=size, bank_block_size=bank_size)
        got = bank_columns.bank_of_column_blocks(
            blocks, name="grader-a", spec=MODEL, round=1, scale=(0, 1, 2),
            max_reason_words=15)
        pd.testing.assert_frame_equal(got, whole)
        assert not blocks.refused and blocks.rows == 40
    # a sidecar shorter than the file: no table (the row path words the refusal)
    path = _write(tmp_path, rows, lines[:33])
    blocks = RoundBlocks(path, bank_path(path), block_size=100, bank_block_size=1024)
    assert bank_columns.bank_of_column_blocks(
        blocks, name="grader-a", spec=MODEL, round=1, scale=(0, 1, 2),
        max_reason_words=15) is None
    assert not blocks.refused
    # a bad line in the sidecar after the last row: refused, as the whole-file reader does
    path = _write(tmp_path, rows, raw_bank=jsonl_bytes(lines + extra) + b"[1]\n")
    blocks = RoundBlocks(path, bank_path(path), block_size=100, bank_block_size=1024)
    assert bank_columns.bank_of_column_blocks(
        blocks, name="grader-a", spec=MODEL, round=1, scale=(0, 1, 2),
        max_reason_words=15) is None
    assert blocks.refused and read_bank_columns(bank_path(path)) is None


def test_a_bad_line_in_a_later_block_sends_the_file_to_the_row_path(tmp_path):
    rows = [{"query_id": "q", "chunk_id": f"c{i}", "reason": "r", "grade": 1}
            for i in range(30)]
    raw = jsonl_bytes(rows).replace(b'"chunk_id":"c27"', b'"chunk_id":27')
    path = _write(tmp_path, rows, raw=raw)
    assert read_grade_columns(path, block_size=64) is None


def test_the_banks_made_on_columns_are_categoricals_on_both_paths(tmp_path):
    rows = _rows()
    lines = [_line(r) for r in rows]
    lines[2]["intent_sha256"] = "j" * 64
    cols, by_rows, hit = _both(_write(tmp_path, rows, lines))
    assert hit
    pd.testing.assert_frame_equal(cols, by_rows)
    for name in bank_columns.CATEGORICAL:
        assert isinstance(cols[name].dtype, pd.CategoricalDtype)
    assert list(cols["intent_sha256"].cat.categories) == ["i" * 64, "j" * 64]
    assert cols["intent_sha256"].cat.codes.tolist() == [0, 0, 1]
    assert cols["content_sha256"].dtype == "str"


def test_two_files_of_the_bank_stack_into_one_categorical_per_column(tmp_path):
    a = pd.DataFrame({"intent_sha256": bank_columns.as_categorical(["x", "y"]),
                      "rubric_version": bank_columns.as_categorical(["v1", "v1"]),
                      "rubric_sha256": bank_columns.as_categorical(["r", "r"]),
                      "graded_at": bank_columns.as_categorical(["t1", "t1"])})
    b = pd.DataFrame({"intent_sha256": bank_columns.as_categorical(["w"]),
                      "rubric_version": bank_columns.as_categorical(["v2"]),
                      "rubric_sha256": bank_columns.as_categorical(["r"]),
                      "graded_at": bank_columns.as_categorical([""])})
    both = bank_columns.concat_bank([a, b])
    assert list(both["intent_sha256"].cat.categories) == ["w", "x", "y"]
    assert both["intent_sha256"].tolist() == ["x", "y", "w"]
    assert both["rubric_version"].tolist() == ["v1", "v1", "v2"]
    assert both["graded_at"].tolist() == ["t1", "t1", ""]
    assert all(isinstance(both[k].dtype, pd.CategoricalDtype) for k in bank_columns.CATEGORICAL)


def test_currency_of_categorical_hashes_equals_that_of_strings():
    from relgrade.protocol.bank import currency

    plain = pd.DataFrame({"query_id": ["q", "q", "r", "s"], "chunk_id": ["a", "b", "a", "c"],
                          "content_sha256": ["A", "B", "A", "C"],
                          "intent_sha256": ["i", "i", "old", "k"],
                          "rubric_version": ["v1", "v0", "v1", "v1"],
                          "rubric_sha256": ["r", "r", "r", "r"]})
    held = plain.assign(**{k: bank_columns.as_categorical(plain[k])
                           for k in ("intent_sha256", "rubric_version", "rubric_sha256")})
    now = dict(content=pd.Series({"a": "A", "b": "B", "c": "C"}),
               intents=pd.Series({"q": "i", "r": "i"}), rubric_sha256="r",
               rubric_version="v1")
    # s has no intent now (differs), r's intent moved, b was graded under rubric v0
    expected = ["current", "rubric", "intent", "intent"]
    assert currency(plain, **now).tolist() == expected
    assert currency(held, **now).tolist() == expected
    assert currency(held, **dict(now, rubric_sha256="new")).tolist() == \
        ["rubric", "rubric", "intent", "intent"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["q1", "q2"]), st.sampled_from(["a", "b", "c"]),
                          st.sampled_from(["same", "other", ""])), max_size=8),
       st.lists(st.tuples(st.sampled_from(["q1", "q2"]), st.sampled_from(["a", "b", "c"]),
                          st.sampled_from(["same", "old", ""])), max_size=8))
def test_carried_reasons_over_columns_count_what_the_rows_count(now, before):
    from relgrade.protocol.ledger import carried_reasons

    def frame(rows):
        return pd.DataFrame(rows, columns=["query_id", "chunk_id", "reason"], dtype="str")

    last = {(q, c): r for q, c, r in before}  # the row rule: the pair's last reason
    expected = sum(1 for q, c, r in now if last.get((q, c)) == r)
    assert carried_reasons(frame(now), frame(before)) == expected
