"""The pool stage's Arrow path: reading a run into Arrow, the per-arm check and cut, and the
pooling of the candidates, against the pandas path every other reader of a run takes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from relgrade import ranking as R
from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.io.files import write_parquet
from relgrade.io.runs import read_run
from relgrade.io.runtable import RUN_SCHEMA, read_run_table
from relgrade.pipeline.stages import pool as pool_stage
from relgrade.protocol import pool as P

from tests.test_pool import stage_setup


def as_frame(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas()


# --- reading --------------------------------------------------------------------------

TREC_LAYOUTS = {
    "spaces": "q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 1 tag\nq2 Q0 d1 1 -0.25 tag\n",
    "tabs": "q1\tQ0\td1\t1\t2.5\ttag\nq1\tQ0\td2\t2\t1\ttag\nq2\tQ0\td1\t1\t-0.25\ttag\n",
    "several spaces": "q1  Q0 d1 1 2.5 tag\nq1 Q0 d2 2 1 tag\n\nq2 Q0 d1 1 -0.25 tag\n",
    "extra fields": "q1 Q0 d1 1 2.5 tag x\nq1 Q0 d2 2 1 tag\nq2 Q0 d1 1 -0.25 tag\n",
    "bom and crlf": "\ufeffq1 Q0 d1 1 2.5 tag\r\nq1 Q0 d2 2 1 tag\r\n"
                    "q2 Q0 d1 1 -0.25 tag\r\n",
}


@pytest.mark.parametrize("layout", sorted(TREC_LAYOUTS))
def test_trec_run_reads_as_read_run_reads_it(tmp_path, layout):
    path = tmp_path / "a.trec"
    path.write_bytes(TREC_LAYOUTS[layout].encode("utf-8"))
    table = read_run_table(path)
    assert table.schema == RUN_SCHEMA
    got = as_frame(table)
    assert got["query_id"].tolist() == ["q1", "q1", "q2"]
    assert got["chunk_id"].tolist() == ["d1", "d2", "d1"]
    assert got["rank"].tolist() == [1, 2, 1]
    assert got["score"].tolist() == [2.5, 1.0, -0.25]
    pd.testing.assert_frame_equal(got, read_run(path)[R.RUN], check_dtype=False)


def test_parquet_and_jsonl_runs_read_as_read_run_reads_them(tmp_path):
    pd.DataFrame({"query_id": ["q1", "q2"], "chunk_id": ["d1", "d2"], "rank": [1, 1],
                  "score": [0.5, 0.25], "arm": ["x", "x"]}).to_parquet(tmp_path / "a.parquet")
    # integer ids are not strings: read_run makes them their decimal text
    pd.DataFrame({"query_id": [7, 8], "chunk_id": [70, 80], "rank": [1, 1],
                  "score": [0.5, 0.25]}).to_parquet(tmp_path / "b.parquet")
    (tmp_path / "c.jsonl").write_text('{"query_id": "q1", "chunk_id": 4411, "rank": 1, '
                                      '"score": 3}\n')
    for name, ids in (("a.parquet", [["q1", "q2"], ["d1", "d2"]]),
                      ("b.parquet", [["7", "8"], ["70", "80"]]),
                      ("c.jsonl", [["q1"], ["4411"]])):
        table = read_run_table(tmp_path / name)
        assert table.schema == RUN_SCHEMA and table.column_names == R.RUN
        assert [table["query_id"].to_pylist(), table["chunk_id"].to_pylist()] == ids


@pytest.mark.parametrize("text, line, rule", [
    ("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 x 1.0 t\n", 2, "rank must be an integer"),
    ("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 nan t\n", 2, "score must be a finite number"),
    ("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2\n", 2, "expected at least 6 whitespace-separated fields"),
])
def test_a_bad_trec_line_is_named_as_read_run_names_it(tmp_path, text, line, rule):
    path = tmp_path / "bad.trec"
    path.write_text(text)
    with pytest.raises(InputError) as fast:
        read_run_table(path)
    with pytest.raises(InputError) as reference:
        read_run(path)
    assert str(fast.value) == str(reference.value)
    assert rule in str(fast.value) and f"bad.trec:{line}:" in str(fast.value)


def test_a_missing_run_file_is_named(tmp_path):
    for name in ("none.trec", "none.parquet"):
        with pytest.raises(InputError, match="file not found"):
            read_run_table(tmp_path / name)


# --- the per-arm check and cut ----------------------------------------------------------

def random_run(rng: np.random.Generator, *, queries: int, per_query: int, shuffle: bool
               ) -> pd.DataFrame:
    rows = []
    for q in range(queries):
        chunks = rng.choice(40, size=per_query, replace=False)
        # scores on a coarse grid, so ties at the cut are common
        scores = np.sort(rng.integers(0, 5, size=per_query))[::-1] / 2
        for r, (c, s) in enumerate(zip(chunks, scores), start=1):
            rows.append((f"q{q}", f"c{c}", r, float(s)))
    run = pd.DataFrame(rows, columns=R.RUN).astype({"query_id": "str", "chunk_id": "str"})
    if shuffle:
        run = run.sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
    return run.reset_index(drop=True)


def to_table(run: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(run[R.RUN], preserve_index=False).cast(RUN_SCHEMA)


@pytest.mark.parametrize("ties", ["score", "rank"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_arm_candidates_keep_the_rows_top_candidates_keeps(ties, shuffle):
    rng = np.random.default_rng(5)
    for depth in (1, 3, 12):
        run = random_run(rng, queries=6, per_query=10, shuffle=shuffle)
        got = as_frame(P.arm_candidates(to_table(run), depth, ties=ties))
        want = P.top_candidates(run, depth, ties=ties).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_arm_candidates_cut_by_hand():
    # q1: scores 3, 2, 2, 1 -> the 2nd best score is 2: both rows at 2 are kept (ties at
    # the cut); q2 has one row, shorter than the depth: kept.
    run = pd.DataFrame({"query_id": ["q1"] * 4 + ["q2"],
                        "chunk_id": ["a", "b", "c", "d", "e"],
                        "rank": [1, 2, 3, 4, 1], "score": [3.0, 2.0, 2.0, 1.0, 0.5]})
    kept = P.arm_candidates(to_table(run), 2)
    assert kept["chunk_id"].to_pylist() == ["a", "b", "c", "e"]


@pytest.mark.parametrize("text, known", [
    ("q1 Q0 c1 1 1.0 t\nq1 Q0 c1 2 0.5 t\n", {}),                       # listed twice
    ("q1 Q0 c1 1 1.0 t\nq3 Q0 c2 1 0.5 t\n", {"queries": ["q1", "q2"]}),  # unknown query
    ("q1 Q0 c1 1 1.0 t\nq1 Q0 c9 2 0.5 t\n", {"chunks": ["c1", "c2"]}),   # unknown chunk
    ("q1 Q0 c1 1 1.0 t\nq1 Q0 c\x1f2 2 0.5 t\n", {}),                    # U+001F in an id
])
def test_arm_candidates_refuse_a_bad_run_with_validate_runs_message(tmp_path, text, known):
    path = tmp_path / "x.trec"
    path.write_text(text)
    sets = {k: P.IdSet(v) for k, v in known.items()}
    with pytest.raises(InputError) as fast:
        P.arm_candidates(read_run_table(path), 10, path=path, **sets)
    with pytest.raises(InputError) as reference:
        R.validate_run(read_run(path), path=path, **known)
    assert str(fast.value) == str(reference.value)
    assert "x.trec" in str(fast.value) and "query q" in str(fast.value)


def test_arm_candidates_refuse_a_non_finite_score_and_an_empty_run():
    run = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"], "rank": [1, 2],
                        "score": [1.0, np.inf]})
    with pytest.raises(InputError, match="query q1, chunk b: score must be a finite number"):
        P.arm_candidates(to_table(run), 1)
    with pytest.raises(InputError, match="the run is empty"):
        P.arm_candidates(to_table(run.iloc[:0]), 1)


def test_a_chunk_listed_twice_in_a_split_query_is_refused_with_validate_runs_message(tmp_path):
    # q1's rows stand in two blocks, c1 once in each; c2 in two queries is no repeat
    path = tmp_path / "x.trec"
    path.write_text("q1 Q0 c1 1 3.0 t\nq1 Q0 c2 2 2.0 t\nq2 Q0 c2 1 5.0 t\n"
                    "q1 Q0 c1 3 1.0 t\n")
    with pytest.raises(InputError) as fast:
        P.arm_candidates(read_run_table(path), 10, path=path)
    with pytest.raises(InputError) as reference:
        R.validate_run(read_run(path), path=path)
    assert str(fast.value) == str(reference.value)
    assert "query q1, chunk c1" in str(fast.value)


def test_two_chunks_whose_pair_keys_tie_are_both_kept():
    # c1710554 and c1477066 hash to 0x3d63b5fe3b317039 and 0x3d63b5fe3b8adb8e: the same top
    # 40 bits, so their pair keys in one query tie; the exact check finds two distinct
    # chunks and the run is cut as any other
    ids = pa.array(["c1710554", "c1477066"], type=pa.large_string())
    hashes = P.text_hashes(ids)
    assert hashes.tolist() == [0x3D63B5FE3B317039, 0x3D63B5FE3B8ADB8E]
    assert P._pairs_may_repeat(np.zeros(2, dtype=np.int64), hashes, 1)
    assert not P._pairs_may_repeat(np.array([0, 1]), hashes, 2)
    run = pd.DataFrame({"query_id": ["q1", "q1", "q1"],
                        "chunk_id": ["c1710554", "c1477066", "c7"], "rank": [1, 2, 3],
                        "score": [3.0, 2.0, 1.0]})
    kept = P.arm_candidates(to_table(run), 2)
    assert kept["chunk_id"].to_pylist() == ["c1710554", "c1477066"]


def test_pair_keys_with_more_queries_than_the_key_holds_compare_whole_hashes():
    # above 2^24 query codes the key is the whole hash mixed with the code: only a true
    # repeat of (code, hash) ties
    hashes = np.array([5, 5, 6], dtype=np.uint64)
    many = (1 << 24) + 1
    assert not P._pairs_may_repeat(np.array([0, 1, 0]), hashes, many)
    assert P._pairs_may_repeat(np.array([3, 3, 0]), hashes, many)


# --- pooling the candidates -------------------------------------------------------------

def reference_pool(runs: dict[str, pd.DataFrame], deepest: int, **kwargs):
    ties = kwargs.pop("ties", "score")
    stacked = pd.concat([P.top_candidates(r, deepest, ties=ties).assign(arm=a)
                         for a, r in runs.items()], ignore_index=True)
    return P.build_pool(R.canonical_ranking(stacked, ties=ties), **kwargs)


@pytest.mark.parametrize("ties", ["score", "rank"])
@pytest.mark.parametrize("tail", [0, 3])
def test_pool_candidates_equal_build_pool_of_the_canonical_ranking(ties, tail):
    rng = np.random.default_rng(11)
    runs = {arm: random_run(rng, queries=5, per_query=12, shuffle=arm == "b")
            for arm in ("c", "a", "b")}
    depth, tail_depth = 3, 8
    deepest = tail_depth if tail else depth
    kwargs = {"depth": depth, "tail_sample": tail, "tail_depth": tail_depth}
    got = P.pool_candidates(
        {a: P.arm_candidates(to_table(r), deepest, ties=ties) for a, r in runs.items()},
        ties=ties, rng=np.random.default_rng(3), **kwargs)
    want = reference_pool(runs, deepest, ties=ties, rng=np.random.default_rng(3), **kwargs)
    for g, w in zip(got[:2], want[:2]):
        pd.testing.assert_frame_equal(g, w)
    assert got[2] == want[2]
    assert (got[2]["tail_pairs"] > 0) == (tail > 0)


def test_pool_tables_are_the_arrow_form_of_pool_candidates():
    rng = np.random.default_rng(5)
    runs = {arm: random_run(rng, queries=4, per_query=9, shuffle=False) for arm in ("a", "b")}
    cands = {a: P.arm_candidates(to_table(r), 6) for a, r in runs.items()}
    kwargs = {"depth": 2, "tail_sample": 2, "tail_depth": 6}
    pool, prov, stats = P.pool_tables(cands, rng=np.random.default_rng(1), **kwargs)
    want = P.pool_candidates(cands, rng=np.random.default_rng(1), **kwargs)
    assert pool.schema == pa.schema([("query_id", pa.large_string()),
                                     ("chunk_id", pa.large_string()),
                                     ("inclusion_prob", pa.float64())])
    assert prov.schema.names == ["query_id", "chunk_id", "arm", "rank", "score", "source"]
    assert [prov.schema.field(c).type for c in ("rank", "score", "source")] == [
        pa.int64(), pa.float64(), pa.large_string()]
    pd.testing.assert_frame_equal(pool.to_pandas(), want[0])
    pd.testing.assert_frame_equal(prov.to_pandas(), want[1])
    assert stats == want[2]
    # the manifest counts the same pairs and queries from either form
    made = {"seed": 1, "depth": 2, "tail_sample": 2, "tail_depth": 6, "arms": ["b", "a"]}
    assert P.pool_manifest(pool, **made) == P.pool_manifest(want[0], **made)
    assert P.pool_manifest(pool, **made)["queries"] == 4


def test_pool_candidates_break_score_ties_by_chunk_id_descending():
    # arm x ties c1 and c2 at the top: trec_eval's rule ranks c2 first, so at depth 1 the
    # pool is {c2}; arm y's c10 beats c9 ("c9" > "c10" as byte strings) at equal score.
    x = pd.DataFrame({"query_id": ["q"] * 3, "chunk_id": ["c1", "c2", "c3"],
                      "rank": [1, 2, 3], "score": [1.0, 1.0, 0.5]})
    y = pd.DataFrame({"query_id": ["q"] * 2, "chunk_id": ["c10", "c9"], "rank": [1, 2],
                      "score": [2.0, 2.0]})
    pool, prov, stats = P.pool_candidates(
        {"x": P.arm_candidates(to_table(x), 1), "y": P.arm_candidates(to_table(y), 1)},
        depth=1)
    assert pool["chunk_id"].tolist() == ["c2", "c9"]
    assert prov[["arm", "chunk_id", "rank"]].values.tolist() == [["x", "c2", 1],
                                                                  ["y", "c9", 1]]
    assert stats["overlap"] == {"x": {"y": 0.0}} and stats["unique"] == {"x": 1, "y": 1}


def test_pool_stage_writes_the_bytes_of_the_reference_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = {"x": "q1 Q0 c1 1 3.0 x\nq1 Q0 c2 2 2.0 x\nq1 Q0 c3 3 2.0 x\nq2 Q0 c5 1 1 x\n",
            "y": "q1 Q0 c3 1 5.0 y\nq1 Q0 c1 2 4.0 y\nq2 Q0 c4 1 1.0 y\nq2 Q0 c0 2 1.0 y\n"}
    params = stage_setup(tmp_path, runs)
    pool_stage.run(Experiment.from_mapping(params))
    # the path the stage took before it read runs into Arrow: pandas frames throughout
    frames = {a: read_run(tmp_path / "runs" / f"{a}.trec") for a in runs}
    pool, prov, stats = reference_pool(frames, 2, depth=2)
    write_parquet(tmp_path / "ref_pool.parquet", pool)
    write_parquet(tmp_path / "ref_prov.parquet", prov)
    assert (tmp_path / "out/pool.parquet").read_bytes() == \
        (tmp_path / "ref_pool.parquet").read_bytes()
    assert (tmp_path / "private/prov.parquet").read_bytes() == \
        (tmp_path / "ref_prov.parquet").read_bytes()
    assert json.loads((tmp_path / "out/stats.json").read_text()) == stats
    # by hand: x's top 2 is c1 and (c3 over c2 at 2.0); y's is c3, c1 and c4, c0 (tie at 1.0:
    # c4 first, then c0) with x's c5 for q2
    assert list(zip(pool.query_id, pool.chunk_id)) == [
        ("q1", "c1"), ("q1", "c3"), ("q2", "c0"), ("q2", "c4"), ("q2", "c5")]


# --- known ids ----------------------------------------------------------------------------

def test_id_set_holds_exactly_its_ids():
    known = P.IdSet(["c1", "c2", "c2", "é"])
    assert len(known) == 4   # the repeated c2 is kept
    assert known.holds_all(pa.array(["c2", "é", "c1", "c1"]))
    assert not known.holds_all(pa.array(["c1", "c3"]))
    assert not known.holds_all(pa.array(["c"]))          # a prefix of a known id
    assert known.holds_all(pa.array([], type=pa.string()))
    assert not P.IdSet([]).holds_all(pa.array(["c1"]))


def test_id_set_agrees_with_arrow_is_in():
    rng = np.random.default_rng(2)
    corpus = [f"doc{i}" for i in rng.choice(5000, size=3000, replace=False)]
    known = P.IdSet(pd.Series(corpus, dtype="str"))
    for _ in range(20):
        values = pa.array([f"doc{i}" for i in rng.integers(0, 5000, size=rng.integers(1, 8))])
        want = bool(pa.compute.all(pa.compute.is_in(values, value_set=pa.array(corpus))).as_py())
        assert known.holds_all(values) == want


def _hash_by_hand(text: str) -> int:
    """The documented string hash, in Python integers: h = byte length; per 8-byte word w
    (little-endian, the last zero-padded) h = (h ^ w) * M1; then splitmix64's finaliser."""
    m = (1 << 64) - 1
    m1, m2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
    data = text.encode("utf-8")
    h = len(data)
    for i in range(0, len(data), 8):
        h = ((h ^ int.from_bytes(data[i:i + 8].ljust(8, b"\0"), "little")) * m1) & m
    h = ((h ^ (h >> 30)) * m1) & m
    h = ((h ^ (h >> 27)) * m2) & m
    return h ^ (h >> 31)


def test_chunk_hashes_are_the_documented_hash_of_each_id():
    ids = ["", "c", "doc12345", "doc123456", "é☃-chunk-0001-of-the-corpus", "abcdefgh" * 3]
    arr = pa.chunked_array([pa.array(ids[:2], pa.large_string()),
                            pa.array(ids[2:], pa.large_string()).slice(0)])
    assert P.text_hashes(arr).tolist() == [_hash_by_hand(t) for t in ids]
    # a slice starts its strings mid-buffer
    assert P.text_hashes(pa.array(ids, pa.large_string()).slice(3)).tolist() == \
        [_hash_by_hand(t) for t in ids[3:]]


# --- a process without pandas -------------------------------------------------------------

def test_the_pool_stage_process_writes_its_outputs_without_loading_pandas(tmp_path):
    # pandas costs the stage's process 0.26 CPU-s to import; the stage works on Arrow tables
    # and numpy alone, and must not load it through pyarrow either (pa.array, to_numpy and
    # pyarrow.dataset import it on first use)
    from tests.test_pool import stage_process_loads

    assert stage_process_loads(tmp_path, ("pandas",)) == [False]
    pool = pd.read_parquet(tmp_path / "out/pool.parquet")
    assert list(zip(pool.query_id, pool.chunk_id)) == [
        ("q1", "c1"), ("q1", "c3"), ("q2", "c0"), ("q2", "c4"), ("q2", "c5")]
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert manifest["pool_version"] == P.pool_version(pool)


@pytest.mark.parametrize("values", [
    np.array([True, False, True, True, False, False, True, False, True]),  # 9 bits: 2 bytes
    np.arange(5, dtype=np.int64)[::-2], np.array([1.5, -0.0, np.inf]),
    np.array([7], dtype=np.uint32), np.zeros(0, dtype=np.int8)])
def test_arrow_array_equals_pa_array(values):
    assert R.arrow_array(values).equals(pa.array(values))


def test_numpy_values_read_sliced_and_chunked_arrays_as_to_numpy_does():
    sliced = pa.array([1.0, 2.5, 4.0, 8.0]).slice(1, 2)
    assert R.numpy_values(sliced).tolist() == [2.5, 4.0]
    chunked = pa.chunked_array([pa.array([3, 1], pa.int32()), pa.array([], pa.int32()),
                                pa.array([2], pa.int32())])
    got = R.numpy_values(chunked)
    assert got.dtype == np.int32 and got.tolist() == [3, 1, 2]
    # a null, or another type: Arrow's own to_numpy
    with_null = R.numpy_values(pa.array([1, None]))
    assert with_null[0] == 1.0 and np.isnan(with_null[1])
    assert R.numpy_values(pa.chunked_array([["a"], ["b"]])).tolist() == ["a", "b"]


def test_arrow_strings_equal_pa_array_of_the_same_strings():
    values = ["b", "", "\u00e9t\u00e9", "q 1"]
    assert R.arrow_strings(values).equals(pa.array(values, pa.large_string()))
    assert R.arrow_ids(values).equals(pa.chunked_array([pa.array(values, pa.large_string())]))


@pytest.mark.parametrize("seed", range(6))
def test_short_id_codes_equal_id_codes_on_random_ids(seed):
    # ids of 0..15 bytes (NUL, spaces, non-ASCII, prefixes of each other, repeats) in
    # slices and several chunks: the numeric sort gives id_codes' codes and distinct ids
    rng = np.random.default_rng(seed)
    alphabet = ["a", "b", "\x00", " ", "é", "z", "0", "~"]
    base = ["".join(rng.choice(alphabet, size=rng.integers(0, 8))) for _ in range(300)]
    ids = [base[i] for i in rng.integers(0, len(base), size=2_000)]
    ids = [s if len(s.encode()) <= 15 else s[:5] for s in ids] + ["", "a", "a\x00", "ab"]
    arr = pa.chunked_array([pa.array(ids[:700], pa.large_string()),
                            pa.array(ids[700:], pa.large_string())])
    for values in (arr, arr.combine_chunks().slice(13, 1_500)):
        got = P.short_id_codes(values)
        want = R.id_codes(values)
        assert got[0].tolist() == want[0].tolist()
        assert got[1].equals(want[1])
        # byte order, checked by Python's own sort of the UTF-8 bytes
        assert [s.encode() for s in got[1].to_pylist()] == sorted(
            {s.encode() for s in values.to_pylist()})


def test_short_id_codes_leave_long_ids_and_nulls_to_id_codes():
    long = pa.array(["x" * 16, "x" * 15, "a"], pa.large_string())
    codes, uniques = P.short_id_codes(long)
    assert codes.tolist() == [2, 1, 0] and uniques.to_pylist() == ["a", "x" * 15, "x" * 16]
    with pytest.raises(InputError, match="an id is missing"):
        P.short_id_codes(pa.array(["a", None], pa.large_string()))
    empty = P.short_id_codes(pa.array([], pa.large_string()))
    assert empty[0].tolist() == [] and len(empty[1]) == 0
