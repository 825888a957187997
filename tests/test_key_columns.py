"""The key on columns gives the bytes, tables and messages the row-wise key gave.

Each column form in :mod:`relgrade.protocol.key` (sort, canonical bytes, made-on bytes, qrels,
the comparison with a frozen key, building the key from the grades) is checked against the
functions as they were before (``tests/reference_key_rows.py``) on random keys whose ids mix
ASCII, Latin-1, astral and non-character code points with the characters JSON escapes.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.errors import InputError
from relgrade.io.judgments import read_made_on_table
from relgrade.protocol import key
from tests import reference_key_rows as rows

#: Characters whose order differs between byte, UTF-16 and code point views, and those JSON
#: escapes (quote, backslash, control characters).
ALPHABET = ["a", "b", "Q", "q", "z", "0", "9", "é", "ÿ", "Ā", "\uffff", "\U0001d538",
            "\ufb01", '"', "\\", "\x01", "\x1f", "\x7f"]
IDS = st.text(alphabet=ALPHABET, min_size=1, max_size=3)
HASHES = ["h1", "h2", "é\"x", "a\\b"]


def _outcome(f, *args, **kwargs):
    """What ``f`` returns, or the message of the InputError it raises."""
    try:
        return ("ok", f(*args, **kwargs))
    except InputError as e:
        return ("error", str(e))


@st.composite
def keys(draw, min_size=0):
    pairs = draw(st.lists(st.tuples(IDS, IDS), min_size=min_size, max_size=25, unique=True))
    grades = draw(st.lists(st.integers(-1, 3), min_size=len(pairs), max_size=len(pairs)))
    frame = pd.DataFrame({"query_id": [p[0] for p in pairs], "chunk_id": [p[1] for p in pairs],
                          "grade": pd.Series(grades, dtype="int64")})
    return frame.sample(frac=1, random_state=draw(st.integers(0, 1000)))


@st.composite
def made_on_of(draw, key_frame):
    """A made-on table for ``key_frame``: some pairs missing, some listed twice (the last
    counts), extra pairs, values missing, as str, object or categorical columns."""
    out = []
    for q, c in zip(key_frame["query_id"], key_frame["chunk_id"]):
        for _ in range(draw(st.sampled_from([1, 1, 1, 2, 0]))):
            out.append((q, c, *(draw(st.sampled_from(HASHES + [None])) for _ in range(3))))
    out += [(draw(IDS), draw(IDS), "h1", "h1", "h1") for _ in range(draw(st.integers(0, 2)))]
    frame = pd.DataFrame(out, columns=list(key.MADE_ON_COLUMNS))
    kind = draw(st.sampled_from(["str", "object", "category"]))
    for name in key.MADE_ON_COLUMNS[2:]:
        frame[name] = frame[name].astype(kind) if kind != "object" else frame[name]
    return frame


@settings(max_examples=150, deadline=None)
@given(keys())
def test_canonical_bytes_qrels_and_hash_equal_the_row_wise_key(k):
    assert key.key_bytes(k) == rows.key_bytes(k)
    assert key.key_sha256(k) == hashlib.sha256(rows.key_bytes(k)).hexdigest()
    assert key.qrels_text(k) == rows.qrels_text(k)
    pd.testing.assert_frame_equal(key.qrels_frame(k), rows.qrels_frame(k))


@settings(max_examples=100, deadline=None)
@given(keys(min_size=1), st.data())
def test_a_pair_twice_is_refused_with_the_row_wise_message(k, data):
    twice = pd.concat([k, k.iloc[[data.draw(st.integers(0, len(k) - 1))]]])
    got, want = _outcome(key.key_bytes, twice), _outcome(rows.key_bytes, twice)
    assert got[0] == "error" and got == want


@settings(max_examples=150, deadline=None)
@given(keys(), st.data())
def test_made_on_bytes_equal_the_row_wise_bytes_and_refusal(k, data):
    made = data.draw(made_on_of(k))
    got = _outcome(lambda: b"".join(key.made_on_blocks(k, made, rows=data.draw(
        st.integers(1, 4)))))
    assert got == _outcome(rows.made_on_bytes, k, made)
    assert _outcome(key.made_on_bytes, k, made) == got


@settings(max_examples=150, deadline=None)
@given(keys(), keys(), st.data())
def test_content_revision_equals_the_row_wise_comparison(old, new, data):
    # half the time the new key is the old one with a few grades moved: common pairs
    if data.draw(st.booleans()) and len(old):
        new = old.assign(grade=[g if data.draw(st.booleans()) else g + 1 for g in old["grade"]])
    old_made, new_made = data.draw(made_on_of(old)), data.draw(made_on_of(new))
    assert key.content_revision(old, old_made, new, new_made) == \
        rows.content_revision(old, old_made, new, new_made)


@settings(max_examples=150, deadline=None)
@given(keys(), st.data())
def test_build_key_equals_the_row_wise_key_and_its_refusals(k, data):
    grades = k.assign(grader="grader-a", round=1)
    extra = data.draw(keys())  # the auditor's grades and an earlier round never count
    grades = pd.concat([grades, extra.assign(grader="auditor-b", round=1),
                        extra.assign(grader="grader-a", round=0)])
    if data.draw(st.booleans()) and len(k):  # a pair graded twice
        grades = pd.concat([grades, grades.iloc[[0]]])
    pool = k[["query_id", "chunk_id"]]
    if data.draw(st.booleans()):  # pairs the key grader left ungraded, one listed twice
        lacking = data.draw(keys())[["query_id", "chunk_id"]]
        pool = pd.concat([pool, lacking, lacking.iloc[:1]])
    if data.draw(st.booleans()) and len(pool) > 1:  # a graded pair outside the pool
        pool = pool.iloc[1:]
    relevant_min = data.draw(st.integers(0, 3))
    got = _outcome(key.build_key, grades, key_grader="grader-a", round=1, pool=pool,
                   relevant_min=relevant_min)
    want = _outcome(rows.build_key, grades, key_grader="grader-a", round=1, pool=pool,
                    relevant_min=relevant_min)
    assert got[0] == want[0]
    if got[0] == "error":
        assert got[1] == want[1]
    else:
        pd.testing.assert_frame_equal(got[1][0], want[1][0])
        assert got[1][1] == want[1][1]


def test_ids_sort_in_code_point_order_not_utf16_order():
    # U+FFFF sorts before U+1D538 by code point (and by UTF-8 bytes); UTF-16 would put the
    # astral character (a surrogate pair, 0xD835...) first
    k = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["\U0001d538", "\uffff", "é"],
                      "grade": [0, 1, 2]})
    assert [line.split('"chunk_id":')[1][:4] for line in
            key.key_bytes(k).decode("utf-8").splitlines()] == ['"é",', '"\uffff",', '"\U0001d538",']


def test_ids_json_escapes_are_the_json_modules():
    k = pd.DataFrame({"query_id": ['q"1', "q\\2"], "chunk_id": ["c\x01", "c\x7f"],
                      "grade": [1, 0]})
    assert key.key_bytes(k) == (b'{"query_id":"q\\"1","chunk_id":"c\\u0001","grade":1}\n'
                                b'{"query_id":"q\\\\2","chunk_id":"c\x7f","grade":0}\n')


def test_made_on_file_read_as_columns_holds_the_row_readers_values(tmp_path):
    k = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["b", "a", "é"],
                      "grade": [2, 0, 1]})
    made = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["b", "a", "é"],
                         "content_sha256": ["c1", "c2", "c1"], "intent_sha256": ["i", "i", "j"],
                         "rubric_sha256": ["r", "r", "r"]})
    path = tmp_path / "made_on.jsonl"
    path.write_bytes(key.made_on_bytes(k, made))
    table = read_made_on_table(path, key.MADE_ON_COLUMNS)
    assert table["content_sha256"].dtype == "category"
    assert table.astype(object).values.tolist() == [
        ["q1", "a", "c2", "i", "r"], ["q1", "b", "c1", "i", "r"], ["q2", "é", "c1", "j", "r"]]
    assert key.made_on_bytes(k, table) == path.read_bytes()


def test_made_on_file_the_column_reader_refuses_is_read_by_rows(tmp_path):
    path = tmp_path / "made_on.jsonl"
    path.write_text('{"query_id":"q","chunk_id":7,"content_sha256":"c","intent_sha256":"i",'
                    '"rubric_sha256":"r"}\n')
    table = read_made_on_table(path, key.MADE_ON_COLUMNS)
    assert table.to_dict("records") == [{"query_id": "q", "chunk_id": 7, "content_sha256": "c",
                                         "intent_sha256": "i", "rubric_sha256": "r"}]


@pytest.mark.parametrize("kind", ["str", "category"])
def test_missing_made_on_values_are_written_as_str_writes_them(kind):
    k = pd.DataFrame({"query_id": ["q"], "chunk_id": ["c"], "grade": [1]})
    made = pd.DataFrame({"query_id": ["q"], "chunk_id": ["c"],
                         "content_sha256": pd.Series([np.nan], dtype=object).astype(kind),
                         "intent_sha256": ["i"], "rubric_sha256": ["r"]})
    assert key.made_on_bytes(k, made) == rows.made_on_bytes(k, made)
