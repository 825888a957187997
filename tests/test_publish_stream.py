"""The streaming private-text scan against the whole-bundle scan it replaces.

The reference is the scan as it was before it streamed (tests/reference_publish_scan.py, kept
verbatim): on random bundles with planted leaks, the streaming scan must find exactly the
leaks it finds (a missed one would be published), with the same file and text, whatever the
chunk sizes the line file is fed in.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relgrade.protocol import private_scan, publish
from tests import reference_publish_scan as reference

WORDS = ["cache", "Eviction", "http", "timeout", "set", "where", "is", "the", "0", "1", "2",
         "q1", "c7", "db", "ok", "café", "cafe\u0301", "ＣＡＣＨＥ", "time\u200bout", "lru",
         "max_size", "def", "evict(self):", "-", "(", ")", "policy", "x"]
IDS = ["kw01", "qu01", "c1", "c2", "src/a.py:f"]


def _private(rnd: random.Random) -> dict:
    """Random private texts of every length class: tiny, single words, phrases, long."""
    def text(lo, hi):
        return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(lo, hi)))

    kinds = {"query": [], "intent": [], "chunk": [], "reason": []}
    for kind in kinds:
        for i in range(rnd.randint(1, 5)):
            n = rnd.choice([(1, 1), (2, 4), (8, 16), (12, 30)])
            kinds[kind].append((f"{kind[0]}{i % 3}", text(*n)))
    kinds["query"].append(("kwt", rnd.choice(["db", "ok", "x1"])))
    return kinds


def _plant(rnd: random.Random, texts: list[str], line_count: int) -> list[str]:
    """Lines of ids, grades and noise words, with some private texts planted: whole in one
    line, spread over consecutive lines, inside a JSON string, or cut to a part."""
    lines = []
    for _ in range(line_count):
        fields = [rnd.choice(IDS), "0", rnd.choice(IDS + WORDS), str(rnd.randint(0, 3))]
        lines.append(" ".join(fields))
    for t in rnd.sample(texts, k=min(len(texts), rnd.randint(0, 3))):
        words = t.split()
        if rnd.random() < 0.3:
            words = words[rnd.randint(0, max(0, len(words) - 3)):]
        how = rnd.choice(["line", "spread", "json", "upper"])
        at = rnd.randint(0, len(lines))
        if how == "spread":
            lines[at:at] = [" ".join(words[i:i + 2]) for i in range(0, len(words), 2)]
        elif how == "json":
            lines.insert(at, "note " + json.dumps(" ".join(words)))
        elif how == "upper":
            lines.insert(at, " ".join(words).upper())
        else:
            lines.insert(at, " ".join(words))
    return lines


def _bundle(rnd: random.Random, private: dict) -> dict:
    texts = [t for items in private.values() for _, t in items]
    qrels = "".join(line + rnd.choice(["\n", "\n", "\r\n"]) for line in
                    _plant(rnd, texts, rnd.randint(5, 60)))
    metrics = {"bm25": {"arm": "bm25", "note": " ".join(rnd.choice(WORDS) for _ in range(6))}}
    if rnd.random() < 0.5:
        metrics["bm25"]["planted"] = rnd.choice(texts)
    return {"key.qrels": qrels.encode("utf-8"),
            "metrics.json": (json.dumps(metrics, indent=2, ensure_ascii=False) + "\n").encode(),
            "README.txt": ("relgrade public bundle\n" + rnd.choice(texts + [""]) + "\n").encode()}


def _rows(leaks) -> list[tuple]:
    return [(leak.kind, leak.id, leak.file, leak.text) for leak in leaks]


def _streamed(files: dict, private: dict, allowed, rnd: random.Random) -> list:
    """The stream scan: key.qrels fed in random byte chunks, the other files whole."""
    scan = private_scan.BundleScan(private_scan.PrivateIndex(private), allowed)
    stream = scan.lines("key.qrels")
    data = files["key.qrels"]
    pos = 0
    while pos < len(data):
        step = rnd.randint(1, 40)
        stream.feed(data[pos:pos + step])
        pos += step
    stream.close()
    for name in ("README.txt", "metrics.json"):
        scan.add_file(name, files[name])
    return scan.leaks()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), window=st.integers(1, 200))
def test_the_streaming_scan_finds_exactly_the_leaks_the_whole_bundle_scan_finds(seed, window):
    rnd = random.Random(seed)
    private = _private(rnd)
    files = _bundle(rnd, private)
    allowed = IDS[: rnd.randint(0, len(IDS))] + ["bm25"]
    want = _rows(reference.find_private(files, private, allowed=allowed))
    assert _rows(publish.find_private(files, private, allowed=allowed)) == want
    old = private_scan.WINDOW_CHARS
    private_scan.WINDOW_CHARS = window  # many small windows: every boundary case is met
    try:
        assert _rows(_streamed(files, private, allowed, rnd)) == want
    finally:
        private_scan.WINDOW_CHARS = old


def test_random_bundles_do_hold_planted_leaks_of_every_kind():
    """The property test above is not vacuous: its bundles leak, through lines, spreads,
    JSON strings and the metrics, and also come clean."""
    kinds, clean = set(), 0
    for seed in range(200):
        rnd = random.Random(seed)
        private = _private(rnd)
        leaks = reference.find_private(_bundle(rnd, private), private, allowed=["bm25"])
        kinds |= {(leak.kind, leak.file) for leak in leaks}
        clean += not leaks
    assert {"key.qrels", "metrics.json"} <= {f for _, f in kinds}
    assert {"query", "intent", "chunk", "reason"} <= {k for k, _ in kinds}
    assert clean > 0


def _feed_in_two(data: bytes, cut: int, private, allowed=()):
    scan = private_scan.BundleScan(private_scan.PrivateIndex(private), allowed)
    stream = scan.lines("key.qrels")
    stream.feed(data[:cut])
    stream.feed(data[cut:])
    stream.close()
    return scan.leaks()


@pytest.mark.parametrize("cut", range(1, 60))
def test_a_phrase_spanning_two_chunks_is_found(cut, monkeypatch):
    """'where is the timeout' (a four-word intent) sits across the second and third lines;
    the file is fed as two chunks cut at every byte, with windows so small that the second
    chunk starts a new window: the phrase is found at every cut."""
    monkeypatch.setattr(private_scan, "WINDOW_CHARS", 1)
    data = b"kw01 0 c1 1\nkw01 0 where is\nthe timeout 2\nkw01 0 c2 0\n"
    private = {"intent": [("kw01", "Where is the timeout")]}
    leaks = _feed_in_two(data, cut, private, allowed=["kw01", "c1", "c2"])
    assert [(leak.kind, leak.id, leak.file) for leak in leaks] == [
        ("intent", "kw01", "key.qrels")]


@pytest.mark.parametrize("cut", [5, 17, 33, 48, 70, 90])
def test_a_long_chunk_text_spanning_two_chunks_is_found_with_its_whole_shared_run(cut,
                                                                                  monkeypatch):
    """A 48-character run of a chunk text, split over two lines and two fed chunks at each
    cut, is found and shown whole (the extension is not cut at the chunk boundary)."""
    monkeypatch.setattr(private_scan, "WINDOW_CHARS", 1)
    chunk = "drop the least recently used entry once the cache holds more than max items"
    data = (b"q1 0 c1 1\nq1 0 the least recently used entry\nonce the cache holds 0\n"
            b"q1 0 c2 0\n")
    leaks = _feed_in_two(data, cut, {"chunk": [("c9", chunk)]}, allowed=["q1", "c1", "c2"])
    assert leaks == [publish.Leak("chunk", "c9", "key.qrels",
                                  "the least recently used entry once the cache holds")]


def test_a_phrase_cut_from_a_longer_word_at_a_window_start_is_not_a_leak(monkeypatch):
    """A window starts just after a space: 'xwhere is' must not match 'where is' because a
    window happened to start inside the word."""
    monkeypatch.setattr(private_scan, "WINDOW_CHARS", 1)
    data = ("".join(f"kw01 0 c{i} 1\n" for i in range(40)) + "kw01 0 xwhere is 1\n").encode()
    private = {"query": [("kw01", "where is")]}
    allowed = ["kw01", *(f"c{i}" for i in range(40))]
    for cut in range(1, len(data)):
        assert _feed_in_two(data, cut, private, allowed) == []
    assert reference.find_private({"key.qrels": data}, private, allowed=allowed) == []


# --- the key streamed as qrels ----------------------------------------------------------------

def test_the_key_read_in_many_batches_gives_the_qrels_of_the_whole_key(tmp_path):
    """600 rows, read about 1 KB of the file at a time (dozens of batches): the streamed
    qrels are byte for byte the whole key's, and the README counts every row."""
    import pandas as pd

    from relgrade.io.batches import iter_key_batches
    from relgrade.protocol.key import key_bytes, qrels_text

    rnd = random.Random(3)
    key = pd.DataFrame({"query_id": [f"q{i // 20:03d}" for i in range(600)],
                        "chunk_id": [f"doc{i % 20:02d}é" for i in range(600)],
                        "grade": [rnd.randint(0, 3) for _ in range(600)]}).sample(frac=1,
                                                                                  random_state=1)
    path = tmp_path / "key.jsonl"
    path.write_bytes(key_bytes(key))
    batches = list(iter_key_batches(path, block_bytes=1024))
    assert len(batches) > 20
    stream = publish.QrelsStream(iter(batches), source=path)
    assert b"".join(stream) == qrels_text(key).encode("utf-8")
    assert stream.rows == 600


def test_a_row_out_of_order_across_a_batch_boundary_is_refused_with_its_line():
    import pandas as pd

    from relgrade.errors import InputError

    first = pd.DataFrame({"query_id": ["q1", "q2"], "chunk_id": ["a", "b"], "grade": [1, 0]})
    second = pd.DataFrame({"query_id": ["q2"], "chunk_id": ["a"], "grade": [2]})
    with pytest.raises(InputError) as e:
        b"".join(publish.QrelsStream([first, second], source="key.jsonl"))
    assert str(e.value) == ("key.jsonl:3: pair (q2, a): a key is in canonical order (query_id, "
                            "then chunk_id) (found after (q2, b)). Rerun the key stage: it "
                            "writes the key sorted and hashed")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_block_hash_collisions_never_make_or_hide_a_leak(seed):
    """With a multiplier of 1 every block's hash is the sum of its code points, so blocks
    that are anagrams of each other collide all the time (on these bundles about six times
    as many texts are looked up as with the real multiplier): the characters decide."""
    rnd = random.Random(seed)
    private = _private(rnd)
    files = _bundle(rnd, private)
    want = _rows(reference.find_private(files, private, allowed=["bm25"]))
    old = private_scan._PRIME
    private_scan._PRIME = 1
    try:
        assert _rows(publish.find_private(files, private, allowed=["bm25"])) == want
    finally:
        private_scan._PRIME = old


def test_a_block_hash_is_the_polynomial_of_its_code_points():
    codes = np.array([ord(c) for c in "abcd"], dtype=np.uint64)
    p = private_scan._PRIME
    # runs of 3: "abc" and "bcd", 97·p² + 98·p + 99 and 98·p² + 99·p + 100, modulo 2**64
    want = [(97 * p * p + 98 * p + 99) % 2**64, (98 * p * p + 99 * p + 100) % 2**64]
    assert private_scan.block_hashes(codes, 3).tolist() == want
    assert private_scan.block_hashes(codes, 5).size == 0


def test_the_index_holds_each_long_text_once_in_the_order_first_given():
    long_a = "the eviction policy of the cache is least recently used"
    long_b = "a timeout of thirty seconds applies to every http request"
    index = private_scan.PrivateIndex({"chunk": [("c1", long_b), ("c2", long_a)],
                                       "reason": [("r1", long_b.upper()), ("r2", "ok then")]})
    assert index.texts.to_pylist() == [long_b, long_a]
    assert index.number(long_a) == 1 and index.number("not indexed at all, not in it") is None
    # 57 and 55 characters: two aligned 20-character blocks each
    assert index.block_hash.size == 4
    assert sorted(index.block_at.tolist()) == [0, 20, (1 << 32) | 0, (1 << 32) | 20]
    assert index.longest == len(long_b)


def test_texts_sharing_a_hash_are_both_kept_and_repeats_once():
    texts = pa.chunked_array([["x" * 40, "y" * 40], ["x" * 40, "z" * 40]])
    hashes = np.array([5, 5, 5, 7], dtype="int64")  # y's hash collides with x's
    assert private_scan._first_of_each(texts, hashes).tolist() == [0, 1, 3]
