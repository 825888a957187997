"""The hashed byte forms and the plain-JSON converter (relgrade.canonical)."""

import json
import math

import numpy as np
import pytest

from relgrade.canonical import canonical_json, json_ready, jsonl_bytes, sha256_bytes


def test_canonical_json_has_no_spaces_and_keeps_utf8():
    assert canonical_json({"query_id": "q1", "chunk_id": "é", "grade": 2}) == \
        '{"query_id":"q1","chunk_id":"é","grade":2}'


def test_canonical_json_keeps_key_order_as_given():
    assert canonical_json({"b": 1, "a": [1, "x"]}) == '{"b":1,"a":[1,"x"]}'


def test_jsonl_bytes_are_utf8_lines_each_ending_in_lf():
    assert jsonl_bytes([{"a": "é"}, {"b": 2}]) == b'{"a":"\xc3\xa9"}\n{"b":2}\n'


def test_jsonl_bytes_of_no_rows_is_empty():
    assert jsonl_bytes([]) == b""


def test_sha256_bytes_of_abc_is_the_fips_180_2_vector():
    assert sha256_bytes(b"abc") == \
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_json_ready_turns_numpy_scalars_into_python_ones_of_the_same_value():
    out = json_ready({"n": np.int64(3), "x": np.float32(0.5), "ok": np.bool_(True)})
    assert out == {"n": 3, "x": 0.5, "ok": True}
    assert [type(v) for v in out.values()] == [int, float, bool]


def test_json_ready_turns_tuples_and_arrays_into_lists_and_keys_into_strings():
    assert json_ready({1: (1, 2), "a": np.array([3, 4])}) == {"1": [1, 2], "a": [3, 4]}


def test_json_ready_keeps_nan_unless_asked_so_a_strict_writer_still_refuses_it():
    kept = json_ready({"k": np.float64("nan")})
    assert math.isnan(kept["k"])
    with pytest.raises(ValueError):
        json.dumps(kept, allow_nan=False)
    assert json_ready({"k": np.float64("nan"), "m": [float("nan"), 1.0]}, nan_as_null=True) == \
        {"k": None, "m": [None, 1.0]}


def test_json_ready_does_not_modify_its_input():
    given = {"a": [np.int64(1)], "b": (2,)}
    json_ready(given)
    assert isinstance(given["a"][0], np.int64) and given["b"] == (2,)


def test_json_ready_output_is_written_by_json_dumps_with_keys_in_order():
    assert json.dumps(json_ready({"z": np.int16(1), "a": (np.float64(0.25),)})) == \
        '{"z": 1, "a": [0.25]}'
