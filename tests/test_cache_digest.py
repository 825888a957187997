"""Each call cache entry carries a digest of its key and answer, which the bank line of every
grade it gave records: an entry edited after it was stored is refused, not recorded as the
grader's answer."""

from __future__ import annotations

import json

import pytest

from relgrade.errors import InputError
from relgrade.graders.cache import CallCache, answer_digest
from relgrade.graders.store import read_bank
from tests.graders import experiment as ex
from tests.test_call_cache import CACHE, grades_file, graders, repository, rows, run  # noqa: F401 (autouse)


def test_the_digest_is_the_sha256_of_the_canonical_json_of_key_and_answer():
    import hashlib

    key = "a" * 64
    # canonical JSON keeps the keys in the order given: key, then answer
    want = hashlib.sha256(b'{"key":"' + key.encode() + b'","answer":"x\\n"}').hexdigest()
    assert answer_digest(key, "x\n") == want


def test_cache_lines_and_bank_lines_carry_the_same_digest_on_a_miss_and_a_hit(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    ex.build(one, queries=2, chunks=7, graders=graders(), paths=CACHE)
    ex.build(two, queries=2, chunks=7, graders=graders(), paths=CACHE)
    assert run(one).exit_code == 0
    entries = [json.loads(x) for x in (tmp_path / "shared/call-cache.jsonl").read_text()
               .splitlines()]
    assert len(entries) == 4  # 2 queries x 2 batches
    assert all(e["sha256"] == answer_digest(e["key"], e["answer"]) for e in entries)
    digests = {e["sha256"] for e in entries}
    for root, mark in ((one, "miss"), (two, "hit")):
        if root is two:
            assert run(two).exit_code == 0
        bank = [line for _, line in read_bank(grades_file(root))]
        assert len(bank) == 14 and {b["cache"] for b in bank} == {mark}
        assert {b["answer_sha256"] for b in bank} == digests


def test_an_edited_cache_entry_is_refused_and_nothing_is_recorded(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    ex.build(one, queries=1, chunks=3, graders=graders(), paths=CACHE)
    ex.build(two, queries=1, chunks=3, graders=graders(), paths=CACHE)
    assert run(one).exit_code == 0
    path = tmp_path / "shared/call-cache.jsonl"
    entry = json.loads(path.read_text())
    answer = [json.loads(x) for x in entry["answer"].splitlines()]
    answer[0]["grade"] = 2 - answer[0]["grade"]  # someone changes a grade by hand
    entry["answer"] = "".join(json.dumps(r) + "\n" for r in answer)
    path.write_text(json.dumps(entry) + "\n")
    with pytest.raises(InputError) as e:
        CallCache(path)
    assert str(e.value) == (
        f"{path}:1: a call cache entry was edited after it was stored: its answer no longer "
        f"matches the sha256 on its line (found key {entry['key']}). Restore the file from "
        "the DVC cache, or remove that line (its request is then asked again)")
    res = run(two)
    assert res.exit_code == 1 and res.output.startswith(
        f"Error: {path}:1: a call cache entry was edited")
    assert not grades_file(two).exists() or rows(two) == []


def test_a_line_written_before_the_digest_existed_is_read_as_before(tmp_path):
    path = tmp_path / "calls.jsonl"
    path.write_text(json.dumps({"key": "1" * 64, "answer": "A", "cached_at": "t"}) + "\n")
    cache = CallCache(path)
    assert cache.get("1" * 64) == "A" and cache.digest("1" * 64) == answer_digest("1" * 64, "A")
