"""The pool stage's compiled path: TREC runs scanned, every row's ids looked up in compiled
tables of the known ids (by hash, then byte for byte), against the path every other run
takes (Arrow's reader, ``arm_candidates`` and DuckDB's anti-join): the same pool, the same
refusals, the same messages."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401  (pa.parquet)
import pytest

from relgrade.errors import InputError
from relgrade.io import _trec_scan as K
from relgrade.io import trec_scan
from relgrade.io.trec_scan import KnownIds, scanned_ids_known
from relgrade.pipeline.stages import pool as stage
from relgrade.protocol import pool as P


def _buffers(values):
    arr = pa.array(values, pa.large_string())
    return trec_scan._string_buffers(arr)


def _unknown_at(known: KnownIds, values, **kw) -> int:
    data, offsets = _buffers(values)
    return known.unknown_at(data, offsets, **kw)


# --- the compiled table -----------------------------------------------------------------

def test_known_ids_find_exactly_their_ids():
    known = KnownIds.build(pa.array(["c1", "c2", "c2", "é", "doc-0123456789abcdef"]))
    assert known.n_ids == 5  # the repeated c2 is kept
    assert _unknown_at(known, ["c2", "é", "c1", "c1", "doc-0123456789abcdef"]) == -1
    assert _unknown_at(known, ["c1", "c3"]) == 1
    assert _unknown_at(known, ["c"]) == 0                      # a prefix of a known id
    assert _unknown_at(known, ["doc-0123456789abcdeg"]) == 0   # differs in the last byte
    assert _unknown_at(known, ["e"]) == 0                      # é without its accent
    assert _unknown_at(known, []) == -1
    assert _unknown_at(KnownIds.build(pa.array([], pa.string())), ["c1"]) == 0


def test_ids_of_at_most_15_bytes_are_held_in_the_table_and_found_exactly():
    fifteen = "abcdefgh1234567"                        # 15 bytes: the longest held so
    known = KnownIds.build(pa.array(["", "c1", "doc2097151", fifteen, "é"]))
    assert known._short
    assert _unknown_at(known, ["", "c1", "doc2097151", fifteen, "é"]) == -1
    assert _unknown_at(known, ["c1\x00"]) == 0         # the zero padding is not a byte
    assert _unknown_at(known, ["c"]) == 0               # a prefix
    assert _unknown_at(known, ["abcdefgh1234568"]) == 0   # differs in the 15th byte
    assert _unknown_at(known, ["abcdefgi1234567"]) == 0   # differs in the 8th byte
    assert _unknown_at(known, [fifteen + "8"]) == 0     # 16 bytes, a known id's prefix
    assert _unknown_at(known, ["doc2097151"], rows=np.array([0], dtype=np.int64)) == -1


def test_a_known_id_of_16_bytes_makes_the_table_refer_to_the_bytes():
    known = KnownIds.build(pa.array(["c1", "abcdefgh12345678"]))
    assert not known._short
    assert _unknown_at(known, ["abcdefgh12345678", "c1"]) == -1
    assert _unknown_at(known, ["abcdefgh1234567"]) == 0
    data, offsets = _buffers(["c1", "abcdefgh12345678"])
    assert not K.id_table(data, offsets, np.empty(8, dtype=np.uint64), True)  # too long


def test_a_hash_that_matches_a_known_ids_hash_passes_only_the_same_bytes():
    # a collision forced by handing c9 the hash of c1: the bytes decide
    known = KnownIds.build(pa.array(["c1", "c2"]))
    data, offsets = _buffers(["c1"])
    h = np.empty(1, dtype=np.uint64)
    K.hash_ids(data, offsets, h)
    assert _unknown_at(known, ["c9"], hashes=h) == 0
    assert _unknown_at(known, ["c1"], hashes=h) == -1


def test_only_the_rows_asked_for_are_checked():
    known = KnownIds.build(pa.array(["q1", "q2"]))
    values = ["x", "q1", "q2", "y"]
    assert _unknown_at(known, values, rows=np.array([1, 2], dtype=np.int64)) == -1
    assert _unknown_at(known, values, rows=np.array([2, 3, 1], dtype=np.int64)) == 1


@pytest.mark.parametrize("prefix", ["doc", "a-longer-chunk-prefix-"])  # short and long ids
def test_known_ids_agree_with_arrow_is_in_on_random_ids(prefix):
    rng = np.random.default_rng(5)
    corpus = [f"{prefix}{i}" for i in rng.choice(20000, size=9000, replace=False)]
    # a sliced, chunked column with a null: the slice's offsets are used as they stand,
    # the null names no id
    column = pa.chunked_array([pa.array(["zz"] + corpus[:4000]).slice(1),
                               pa.array(corpus[4000:] + [None])])
    known = KnownIds.build(column)
    assert known.n_ids == 9000
    for _ in range(200):
        values = [f"{prefix}{i}" for i in rng.integers(0, 20000, size=rng.integers(1, 6))]
        want = pa.compute.is_in(pa.array(values), value_set=pa.array(corpus)).to_pylist()
        got = _unknown_at(known, values)
        assert got == (want.index(False) if False in want else -1)


@pytest.mark.parametrize("call, message", [
    (lambda t, d, o: K.unknown_at(t, d, d, np.array([0, 5], dtype=np.int64), None, None),
     "offsets within bytes"),
    (lambda t, d, o: K.unknown_at(t, d, d, np.array([2, 1], dtype=np.int64), None, None),
     "offsets within bytes"),
    (lambda t, d, o: K.unknown_at(t, d, d, o, None, np.array([1], dtype=np.int64)),
     "rows must lie within off"),
    (lambda t, d, o: K.unknown_at(t, d, d, o, None, np.array([-1], dtype=np.int64)),
     "rows must lie within off"),
    (lambda t, d, o: K.unknown_at(t, d, d, o, np.zeros(2, dtype=np.uint64), None),
     "hashes one per item"),
    (lambda t, d, o: K.unknown_at(t[:6], d, d, o, None, None), "power of two"),
    (lambda t, d, o: K.unknown_at(t, d[:1], d, o, None, None), "outside known_bytes"),
    (lambda t, d, o: K.id_table(d, o, np.empty(2, dtype=np.uint64)), "power of two"),
    (lambda t, d, o: K.id_table(d, np.array([0, 9], dtype=np.int64), t.copy()),
     "within known_bytes"),
    (lambda t, d, o: K.unknown_at(t, d, d, o.astype(np.int32), None, None), "int64"),
    (lambda t, d, o: K.unknown_at(t, d, d, o.astype(np.int32), None, None, True), "int64"),
])
def test_the_compiled_check_refuses_arrays_that_do_not_fit(call, message):
    data, offsets = _buffers(["abc"])
    table = np.empty(8, dtype=np.uint64)
    assert K.id_table(data, offsets, table)
    with pytest.raises((ValueError, TypeError), match=message):
        call(table, data, offsets)


def test_scanned_ids_known_checks_every_chunk_and_each_querys_id(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 c1 1 3 t\nq1 Q0 c2 2 2 t\nq2 Q0 c2 1 1 t\nq2 Q0 c9 2 0.5 t\n")
    scanned = trec_scan.scan_trec_run(path)
    queries = KnownIds.build(pa.array(["q1", "q2"]))
    assert scanned_ids_known(scanned, queries=queries,
                             chunks=KnownIds.build(pa.array(["c1", "c2", "c9"])))
    # the last row's chunk, below any pool depth, is still checked
    assert not scanned_ids_known(scanned, chunks=KnownIds.build(pa.array(["c1", "c2"])))
    assert not scanned_ids_known(scanned, queries=KnownIds.build(pa.array(["q1"])))
    assert scanned_ids_known(scanned)


# --- the stage: the compiled path against the reader's -----------------------------------

QUERIES = [f"q{i}" for i in range(12)]
CHUNKS = [f"c{i:03d}" for i in range(300)]


def _run_text(rng, arm: str, *, sep: str = " ", end: str = "\n") -> str:
    """A run of every query, each query's rows adjacent and ranked by score (with ties)."""
    lines = []
    for q in QUERIES:
        n = int(rng.integers(1, 25))
        chunks = rng.choice(CHUNKS[:-1], size=n, replace=False)  # the last: kept unused
        scores = np.sort(rng.integers(0, 8, size=n) / 4)[::-1]
        lines += [sep.join([q, "Q0", c, str(r + 1), repr(float(s)), arm]) + end
                  for r, (c, s) in enumerate(zip(chunks, scores))]
    return "".join(lines)


def _damaged(rng, text: str, kind: str) -> str:
    lines = text.splitlines(keepends=True)
    i = int(rng.integers(1, len(lines)))
    f = lines[i].split(" ")
    if kind == "unknown chunk, deep":
        lines[-1] = lines[-1].replace(" c", " nope-c", 1)
    elif kind == "unknown query":
        f[0] = "q99"
        lines[i] = " ".join(f)
    elif kind == "chunk twice":
        g = lines[i - 1].split(" ")
        f[0], f[2] = g[0], g[2]
        lines[i] = " ".join(f)
    elif kind == "query split":  # the first query's rows in two blocks, no chunk twice
        g = lines[0].split(" ")
        g[2] = CHUNKS[-1]
        lines.append(" ".join(g))
    elif kind == "query split, chunk twice":  # its first row again, at the end
        lines.append(lines[0])
    elif kind == "infinite score":
        f[4] = "inf"
        lines[i] = " ".join(f)
    elif kind == "blank line":
        lines.insert(i, "\n")
    elif kind == "U+001F":
        f[2] = f[2] + "\x1f"
        lines[i] = " ".join(f)
    elif kind == "seven fields":
        lines[i] = lines[i].rstrip("\n") + " x\n"
    return "".join(lines)


def _both_ways(monkeypatch, paths, **kw):
    """pool_files with the compiled path, then with the C module hidden (the reader's
    path): each the tables and stats, or the error's message."""
    out = []
    for compiled in (True, False):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(trec_scan, "_kernels", lambda: None)
            try:
                out.append(stage.pool_files(paths, **kw))
            except InputError as e:
                out.append(str(e))
    return out


def _same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert a[0].equals(b[0]) and a[1].equals(b[1]) and a[2] == b[2]


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_path_pools_good_runs_as_the_readers_path(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    paths = {}
    for a, (sep, end) in enumerate([(" ", "\n"), ("\t", "\n"), (" ", "\r\n")]):
        paths[f"arm{a}"] = tmp_path / f"arm{a}.trec"
        paths[f"arm{a}"].write_text(_run_text(rng, f"arm{a}", sep=sep, end=end))
    kw = {"depth": int(rng.integers(1, 6)), "ties": ("score", "rank")[seed % 2],
          "queries": pa.chunked_array([pa.array(QUERIES)]),
          "chunks": pa.chunked_array([pa.array(CHUNKS)])}
    if seed >= 4:
        kw.update(tail_sample=3, tail_depth=12, rng=None)
    got = []
    for compiled in (True, False):
        if seed >= 4:
            kw["rng"] = np.random.default_rng(seed)
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(trec_scan, "_kernels", lambda: None)
            got.append(stage.pool_files(paths, **kw))
    _same(*got)
    assert got[0][0].num_rows > 0
    # and the compiled path took every one of these runs
    known = stage._known_tables(kw["queries"], kw["chunks"])
    assert all(stage._scanned_candidates(p, 3, "score", known) is not None
               for p in paths.values())


KINDS = ["unknown chunk, deep", "unknown query", "chunk twice", "query split",
         "query split, chunk twice", "infinite score", "blank line", "U+001F", "seven fields"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_a_damaged_run_is_refused_or_pooled_as_the_readers_path_does(tmp_path, monkeypatch,
                                                                    kind, seed):
    rng = np.random.default_rng(100 + seed)
    paths = {"a": tmp_path / "a.trec", "b": tmp_path / "b.trec"}
    paths["a"].write_text(_run_text(rng, "a"))
    paths["b"].write_text(_damaged(rng, _run_text(rng, "b"), kind))
    got = _both_ways(monkeypatch, paths, depth=3, queries=QUERIES,
                     chunks=pa.chunked_array([pa.array(CHUNKS)]))
    _same(*got)
    if kind in ("unknown chunk, deep", "unknown query", "chunk twice",
                "query split, chunk twice", "infinite score", "U+001F"):
        assert isinstance(got[0], str) and "b.trec" in got[0]


def test_when_two_arms_are_bad_the_first_is_named_whichever_rule_it_breaks(tmp_path,
                                                                          monkeypatch):
    rng = np.random.default_rng(9)
    paths = {a: tmp_path / f"{a}.trec" for a in "abc"}
    paths["a"].write_text(_run_text(rng, "a"))
    paths["b"].write_text(_damaged(rng, _run_text(rng, "b"), "unknown chunk, deep"))
    paths["c"].write_text(_damaged(rng, _run_text(rng, "c"), "chunk twice"))
    got = _both_ways(monkeypatch, paths, depth=3, queries=QUERIES, chunks=CHUNKS)
    assert got[0] == got[1]
    assert "b.trec" in got[0] and "unknown chunk id" in got[0]
    # the other way round: the repeat (found while reading) comes first
    paths["b"], paths["c"] = paths["c"], paths["b"]
    got = _both_ways(monkeypatch, paths, depth=3, queries=QUERIES, chunks=CHUNKS)
    assert got[0] == got[1]
    assert "c.trec" in got[0] and "listed twice" in got[0]


def test_an_unknown_chunk_below_the_pool_depth_is_named_with_its_line(tmp_path):
    path = tmp_path / "x.trec"
    path.write_text("q1 Q0 c1 1 3.0 x\nq1 Q0 c2 2 2.0 x\nq1 Q0 c9 3 1.0 x\n")
    with pytest.raises(InputError) as e:
        stage.pool_files({"x": path}, depth=1, queries=["q1"], chunks=["c1", "c2"])
    assert str(e.value).startswith(f"{path}:3: query q1, chunk c9: unknown chunk id")
    assert "1 row(s) name chunks that are not in the corpus, first c9" in str(e.value)


def test_candidate_mask_keeps_the_rows_arm_candidates_keeps():
    run = pa.table({"query_id": pa.array(["q1"] * 4 + ["q2"] * 2, pa.large_string()),
                    "chunk_id": pa.array(list("abcdef"), pa.large_string()),
                    "rank": pa.array([1, 2, 3, 4, 1, 2], pa.int64()),
                    "score": pa.array([3.0, 2.0, 2.0, 1.0, 5.0, 4.0])})
    group = np.array([0, 0, 0, 0, 1, 1])
    score, rank = run["score"].to_numpy(), run["rank"].to_numpy()
    for ties in ("score", "rank"):
        keep = P.candidate_mask(group, score, rank, 2, ties=ties)
        assert run.filter(pa.array(keep)).equals(P.arm_candidates(run, 2, ties=ties))
    # score ties at the cut are kept: b and c share the 2nd highest score
    assert P.candidate_mask(group, score, rank, 2).tolist() == [True, True, True, False,
                                                                True, True]


def test_the_stage_process_pools_trec_runs_without_loading_duckdb(tmp_path):
    # every run is the scan's: the known ids are checked in the C module's tables, and the
    # process never imports DuckDB (nor pandas)
    from tests.test_pool import stage_process_loads

    assert stage_process_loads(tmp_path, ("duckdb", "pandas", "relgrade.io._trec_scan")) \
        == [False, False, True]
    pool = pa.parquet.read_table(tmp_path / "out/pool.parquet")
    assert list(zip(pool["query_id"].to_pylist(), pool["chunk_id"].to_pylist())) == [
        ("q1", "c1"), ("q1", "c3"), ("q2", "c0"), ("q2", "c4"), ("q2", "c5")]
