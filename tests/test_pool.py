"""Pooling: hand-computed pools and statistics, the tail sample, the pool version, DuckDB
as an independent implementation, and the pool stage's errors."""

from __future__ import annotations

import hashlib
import importlib
import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from relgrade import ranking as R
from relgrade.canonical import jsonl_bytes
from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.protocol import pool as P

REPO = Path(__file__).resolve().parents[1]


def ranked(rows):
    """Stacked runs from (arm, query_id, chunk_id, score) rows, canonically ranked."""
    df = pd.DataFrame(rows, columns=["arm", "query_id", "chunk_id", "score"])
    df["rank"] = 0
    return R.canonical_ranking(df[["query_id", "chunk_id", "rank", "score", "arm"]])


# Two arms, two queries, depth 2.
#   q1: a ranks c1, c2, c3; b ranks c2, c4, c5  -> top-2 sets {c1,c2} and {c2,c4}
#   q2: a ranks d1;         b ranks d2, d1      -> top-2 sets {d1} and {d1,d2}
HAND = [("a", "q1", "c1", 3.0), ("a", "q1", "c2", 2.0), ("a", "q1", "c3", 1.0),
        ("b", "q1", "c2", 9.0), ("b", "q1", "c4", 8.0), ("b", "q1", "c5", 7.0),
        ("a", "q2", "d1", 1.0),
        ("b", "q2", "d2", 5.0), ("b", "q2", "d1", 4.0)]


def test_pool_is_the_deduplicated_union_of_every_arms_top_depth():
    pool, prov, stats = P.build_pool(ranked(HAND), depth=2)
    assert pool.columns.tolist() == ["query_id", "chunk_id", "inclusion_prob"]
    assert list(zip(pool.query_id, pool.chunk_id)) == [
        ("q1", "c1"), ("q1", "c2"), ("q1", "c4"), ("q2", "d1"), ("q2", "d2")]
    assert pool["inclusion_prob"].tolist() == [1.0] * 5


def test_provenance_records_arm_rank_score_and_source():
    _, prov, _ = P.build_pool(ranked(HAND), depth=2)
    assert prov.columns.tolist() == ["query_id", "chunk_id", "arm", "rank", "score", "source"]
    rows = [tuple(r) for r in prov.itertuples(index=False)]
    assert rows == [("q1", "c1", "a", 1, 3.0, "depth"),
                    ("q1", "c2", "a", 2, 2.0, "depth"),
                    ("q1", "c2", "b", 1, 9.0, "depth"),
                    ("q1", "c4", "b", 2, 8.0, "depth"),
                    ("q2", "d1", "a", 1, 1.0, "depth"),
                    ("q2", "d1", "b", 2, 4.0, "depth"),
                    ("q2", "d2", "b", 1, 5.0, "depth")]


def test_stats_are_the_hand_computed_values():
    _, _, stats = P.build_pool(ranked(HAND), depth=2)
    # Jaccard(a, b): q1 {c1,c2} vs {c2,c4} = 1/3; q2 {d1} vs {d1,d2} = 1/2.
    assert stats["overlap"] == {"a": {"b": round((1 / 3 + 1 / 2) / 2, 6)}}
    # Found by one arm: c1, c4, d2 (3 of 5); by two: c2, d1 (2 of 5).
    assert stats["found_by_one"] == 0.6
    assert stats["found_by_two"] == 0.4
    assert stats["unique"] == {"a": 1, "b": 2}
    assert stats["pairs"] == 5 and stats["queries"] == 2 and stats["arms"] == 2
    assert stats["size"] == {"min": 2, "mean": 2.5, "max": 3}
    assert stats["tail_pairs"] == 0


def test_pool_sorts_ids_by_code_point():
    rows = [("a", "q", c, float(s)) for s, c in enumerate(["zeta", "Zeta", "éclair", "a b", "10", "9"])]
    pool, _, _ = P.build_pool(ranked(rows), depth=10)
    assert pool["chunk_id"].tolist() == sorted(["zeta", "Zeta", "éclair", "a b", "10", "9"])


def test_input_row_order_does_not_change_pool_or_provenance():
    runs = ranked(HAND)
    shuffled = runs.sample(frac=1.0, random_state=3).reset_index(drop=True)
    a = P.build_pool(runs, depth=2, tail_sample=1, tail_depth=3, rng=np.random.default_rng(4))
    b = P.build_pool(shuffled, depth=2, tail_sample=1, tail_depth=3, rng=np.random.default_rng(4))
    pd.testing.assert_frame_equal(a[0], b[0])
    pd.testing.assert_frame_equal(a[1], b[1])
    assert a[2] == b[2]


def test_tail_sample_draws_k_of_n_candidates_with_probability_k_over_n():
    # q1 candidates at ranks 3..3: c3 (a), c5 (b) -> n = 2, k = 1, prob 1/2.
    # q2 has no rank-3 chunk: no candidates, nothing sampled.
    pool, prov, stats = P.build_pool(ranked(HAND), depth=2, tail_sample=1, tail_depth=3,
                                     rng=np.random.default_rng(0))
    tail = pool[pool.inclusion_prob < 1]
    assert len(tail) == 1 and tail.query_id.iloc[0] == "q1"
    assert tail.chunk_id.iloc[0] in {"c3", "c5"}
    assert tail.inclusion_prob.iloc[0] == 1 / 2
    tail_prov = prov[prov.source == "tail"]
    assert tail_prov.chunk_id.tolist() == tail.chunk_id.tolist()
    assert tail_prov["rank"].tolist() == [3]
    assert stats["tail_pairs"] == 1 and stats["pairs"] == 6


def test_tail_sample_larger_than_candidates_takes_all_with_probability_one():
    pool, _, _ = P.build_pool(ranked(HAND), depth=2, tail_sample=5, tail_depth=3,
                              rng=np.random.default_rng(0))
    tail = pool[pool.chunk_id.isin(["c3", "c5"])]
    assert tail.inclusion_prob.tolist() == [1.0, 1.0]


def test_tail_sample_excludes_chunks_already_in_the_top_depth_pool():
    # c2 is at rank 3 for arm b but rank 1 for arm a: it is pooled, not a tail candidate.
    rows = [("a", "q", "c2", 9.0), ("a", "q", "c1", 8.0),
            ("b", "q", "c4", 9.0), ("b", "q", "c3", 8.0), ("b", "q", "c2", 7.0)]
    pool, prov, _ = P.build_pool(ranked(rows), depth=1, tail_sample=3, tail_depth=3,
                                 rng=np.random.default_rng(1))
    # depth pool {c2, c4}; tail candidates c1 (a@2), c3 (b@2): n = 2 < k, both taken.
    assert dict(zip(pool.chunk_id, pool.inclusion_prob)) == {"c1": 1.0, "c2": 1.0, "c3": 1.0,
                                                             "c4": 1.0}
    tail = prov[prov.source == "tail"]
    assert list(zip(tail.chunk_id, tail.arm, tail["rank"])) == [("c1", "a", 2), ("c3", "b", 2)]
    assert ("c2", "b", 3) not in set(zip(prov.chunk_id, prov.arm, prov["rank"]))


def test_tail_sample_is_uniform_over_candidates():
    # 4000 queries, each with the same 10 tail candidates; k = 3, so each candidate is
    # sampled in 30% of queries. Binomial sd = sqrt(.3 * .7 / 4000) = 0.0072; allow 5 sd.
    rows = []
    for q in range(4000):
        rows.append(("a", f"q{q}", "top", 100.0))
        rows += [("a", f"q{q}", f"c{i}", float(50 - i)) for i in range(10)]
    pool, _, _ = P.build_pool(ranked(rows), depth=1, tail_sample=3, tail_depth=11,
                              rng=np.random.default_rng(2026))
    tail = pool[pool.chunk_id != "top"]
    assert tail.groupby("query_id").size().eq(3).all()
    freq = tail["chunk_id"].value_counts() / 4000
    assert len(freq) == 10
    assert np.abs(freq.to_numpy() - 0.3).max() < 5 * np.sqrt(0.3 * 0.7 / 4000)
    assert np.allclose(tail.inclusion_prob, 0.3)


def test_same_seed_same_tail_and_other_seed_other_tail():
    rows = [("a", "q", f"c{i:02d}", float(-i)) for i in range(40)]
    draw = lambda s: P.build_pool(ranked(rows), depth=2, tail_sample=5, tail_depth=40,
                                  rng=np.random.default_rng(s))[0]
    pd.testing.assert_frame_equal(draw(1), draw(1))
    assert set(draw(1).chunk_id) != set(draw(2).chunk_id)


def test_duplicate_chunk_in_one_ranked_list_is_refused():
    runs = pd.DataFrame({"arm": ["a", "a"], "query_id": ["q", "q"], "chunk_id": ["c", "c"],
                         "rank": [1, 2], "score": [2.0, 1.0]})
    with pytest.raises(InputError) as e:
        P.build_pool(runs, depth=5)
    assert "arm a, query q, chunk c: chunk listed twice in one ranked list" in str(e.value)


@pytest.mark.parametrize("kwargs, name", [
    ({"depth": 0}, "pool.depth"),
    ({"depth": 2.5}, "pool.depth"),
    ({"depth": 2, "tail_sample": -1}, "pool.tail_sample"),
    ({"depth": 5, "tail_sample": 2, "tail_depth": 5}, "pool.tail_depth"),
    ({"depth": 5, "tail_sample": 2}, "pool.tail_depth"),
])
def test_bad_pool_params_are_named(kwargs, name):
    with pytest.raises(InputError, match=name.replace(".", r"\.")):
        P.build_pool(ranked(HAND), rng=np.random.default_rng(0), **kwargs)


def test_input_runs_are_not_modified():
    runs = ranked(HAND)
    before = runs.copy()
    P.build_pool(runs, depth=2, tail_sample=1, tail_depth=3, rng=np.random.default_rng(0))
    pd.testing.assert_frame_equal(runs, before)


def test_pool_version_hashes_the_documented_canonical_rows():
    pool = pd.DataFrame({"query_id": ["q2", "q1", "q1"], "chunk_id": ["é", 'say "x"', "b"],
                         "inclusion_prob": [1.0, 0.5, 1.0]})
    expected = ('{"query_id":"q1","chunk_id":"b"}\n'
                '{"query_id":"q1","chunk_id":"say \\"x\\""}\n'
                '{"query_id":"q2","chunk_id":"é"}\n').encode("utf-8")
    assert P.pool_bytes(pool) == expected
    assert P.pool_version(pool) == "p-" + hashlib.sha256(expected).hexdigest()[:12]
    # the io module's canonical JSON Lines gives the same bytes
    rows = sorted(zip(pool.query_id, pool.chunk_id))
    assert P.pool_bytes(pool) == jsonl_bytes({"query_id": q, "chunk_id": c} for q, c in rows)


def test_pool_version_ignores_row_order_and_probabilities_but_not_pairs():
    pool, _, _ = P.build_pool(ranked(HAND), depth=2)
    other = pool.iloc[::-1].assign(inclusion_prob=0.5)
    assert P.pool_version(other) == P.pool_version(pool)
    assert P.pool_version(pool.iloc[1:]) != P.pool_version(pool)


def test_manifest_has_the_documented_keys():
    pool, _, _ = P.build_pool(ranked(HAND), depth=2)
    m = P.pool_manifest(pool, seed=7, depth=2, tail_sample=0, tail_depth=100, arms=["b", "a"])
    assert m == {"pool_version": P.pool_version(pool), "seed": 7, "depth": 2, "tail_sample": 0,
                 "tail_depth": 100, "pairs": 5, "queries": 2, "arms": ["a", "b"]}


def random_runs(seed, n_arms=4, n_queries=30, n_chunks=60, depth=25):
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(n_arms):
        for q in range(n_queries):
            n = int(rng.integers(0, depth + 1))
            picks = rng.choice(n_chunks, size=n, replace=False)
            # coarse scores so ties happen and the chunk-id tie rule matters
            rows += [(f"arm{a}", f"q{q}", f"c{c}", float(rng.integers(0, 5))) for c in picks]
    return pd.DataFrame(rows, columns=["arm", "query_id", "chunk_id", "score"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pool_equals_duckdb_window_function(seed):
    duckdb = pytest.importorskip("duckdb")
    raw = random_runs(seed)
    raw["rank"] = 0
    runs = R.canonical_ranking(raw[["query_id", "chunk_id", "rank", "score", "arm"]])
    pool, prov, _ = P.build_pool(runs, depth=10)
    con = duckdb.connect()
    con.register("runs", raw)
    ref = con.execute("""
        SELECT DISTINCT query_id, chunk_id FROM runs
        QUALIFY row_number() OVER (PARTITION BY arm, query_id
                                   ORDER BY score DESC, chunk_id DESC) <= 10
        ORDER BY query_id, chunk_id""").fetchall()
    assert list(zip(pool.query_id, pool.chunk_id)) == ref
    ref_prov = con.execute("""
        SELECT query_id, chunk_id, arm, rn FROM (
          SELECT *, row_number() OVER (PARTITION BY arm, query_id
                                       ORDER BY score DESC, chunk_id DESC) AS rn FROM runs)
        WHERE rn <= 10 ORDER BY query_id, chunk_id, arm""").fetchall()
    assert [tuple(r) for r in prov[["query_id", "chunk_id", "arm", "rank"]].itertuples(
        index=False)] == ref_prov


def test_stats_equal_a_plain_set_computation():
    raw = random_runs(5)
    raw["rank"] = 0
    runs = R.canonical_ranking(raw[["query_id", "chunk_id", "rank", "score", "arm"]])
    _, _, stats = P.build_pool(runs, depth=10)
    top = runs[runs["rank"] <= 10]
    sets = {(a, q): set(g.chunk_id) for (a, q), g in top.groupby(["arm", "query_id"])}
    arms = sorted(top.arm.unique())
    queries = sorted(top.query_id.unique())
    for a, b in combinations(arms, 2):
        values = []
        for q in queries:
            A, B = sets.get((a, q), set()), sets.get((b, q), set())
            if A | B:
                values.append(len(A & B) / len(A | B))
        assert stats["overlap"][a][b] == pytest.approx(np.mean(values), abs=1e-6)
    found = top.groupby(["query_id", "chunk_id"]).arm.nunique()
    assert stats["found_by_one"] == pytest.approx((found == 1).mean(), abs=1e-6)
    assert stats["found_by_two"] == pytest.approx((found == 2).mean(), abs=1e-6)
    solo = top.set_index(["query_id", "chunk_id"]).loc[found[found == 1].index]
    assert stats["unique"] == {a: int((solo.arm == a).sum()) for a in arms}


# --- the pool stage ----------------------------------------------------------------

def load_stage(name):
    module = importlib.import_module(f"relgrade.pipeline.stages.{name}")
    return module


def stage_setup(root: Path, runs: dict[str, str]) -> dict:
    (root / "runs").mkdir()
    pd.DataFrame({"query_id": ["q1", "q2"], "query": ["a", "b"], "group": ["keyword"] * 2,
                  "weight": [1.0, 1.0]}).to_parquet(root / "queries.parquet")
    pd.DataFrame({"chunk_id": [f"c{i}" for i in range(6)], "header": ["h"] * 6,
                  "text": ["t"] * 6, "source": ["s"] * 6}).to_parquet(root / "chunks.parquet")
    for arm, text in runs.items():
        (root / "runs" / f"{arm}.trec").write_text(text)
    return {"seed": 11,
            "paths": {"queries": "queries.parquet", "chunks": "chunks.parquet", "runs": "runs",
                      "pool": "out/pool.parquet", "provenance": "private/prov.parquet",
                      "pool_manifest": "out/manifest.json", "pool_stats": "out/stats.json"},
            "arms": {arm: {"kind": "file", "depth": 10, "source": f"runs/{arm}.trec"}
                     for arm in runs},
            "runs": {"ties": "score"},
            "pool": {"depth": 2, "tail_sample": 0, "tail_depth": 10}}


#: Two arms' TREC runs over stage_setup's queries and chunks: their top-2 pool is
#: (q1, c1), (q1, c3), (q2, c0), (q2, c4), (q2, c5).
STAGE_RUNS = {"x": "q1 Q0 c1 1 3.0 x\nq1 Q0 c2 2 2.0 x\nq1 Q0 c3 3 2.0 x\nq2 Q0 c5 1 1 x\n",
              "y": "q1 Q0 c3 1 5.0 y\nq1 Q0 c1 2 4.0 y\nq2 Q0 c4 1 1.0 y\nq2 Q0 c0 2 1.0 y\n"}


def stage_process_loads(root: Path, modules: tuple[str, ...]) -> list[bool]:
    """Run the pool stage as DVC runs it (``stages/pool.py`` in a fresh interpreter, in
    ``root`` set up by :func:`stage_setup` with :data:`STAGE_RUNS`) and say, for each of
    ``modules``, whether the process had imported it by its end."""
    import subprocess
    import sys

    import yaml

    (root / "params.yaml").write_text(yaml.safe_dump(stage_setup(root, STAGE_RUNS)))
    entry = Path(__file__).resolve().parents[1] / "stages" / "pool.py"
    probe = ("import runpy, sys\n"
             f"sys.argv = [{str(entry)!r}]\n"
             "try:\n"
             f"    runpy.run_path({str(entry)!r}, run_name='__main__')\n"
             "finally:\n"
             f"    print(*(m in sys.modules for m in {tuple(modules)!r}))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return [word == "True" for word in done.stdout.split()]


def test_pool_stage_writes_pool_provenance_manifest_and_stats(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = stage_setup(tmp_path, {
        "x": "q1 Q0 c1 1 3.0 x\nq1 Q0 c2 2 2.0 x\nq1 Q0 c3 3 1.0 x\n",
        "y": "q1 Q0 c3 1 5.0 y\nq1 Q0 c1 2 4.0 y\nq2 Q0 c4 1 1.0 y\n"})
    load_stage("pool").run(Experiment.from_mapping(params))
    pool = pd.read_parquet(tmp_path / "out/pool.parquet")
    assert list(zip(pool.query_id, pool.chunk_id)) == [("q1", "c1"), ("q1", "c2"), ("q1", "c3"),
                                                        ("q2", "c4")]
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    assert manifest["pool_version"] == P.pool_version(pool) and manifest["arms"] == ["x", "y"]
    stats = json.loads((tmp_path / "out/stats.json").read_text())
    # q1: x {c1,c2}, y {c3,c1} -> 1/3; q2: x {}, y {c4} -> 0.
    assert stats["overlap"] == {"x": {"y": round((1 / 3 + 0) / 2, 6)}}
    prov = pd.read_parquet(tmp_path / "private/prov.parquet")
    assert set(prov.arm) == {"x", "y"}


def test_pool_stage_names_file_query_and_unknown_chunk_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = stage_setup(tmp_path, {"x": "q1 Q0 c1 1 3.0 x\n",
                                    "y": "q1 Q0 c1 1 3.0 y\nq2 Q0 nope 2 1.0 y\n"})
    with pytest.raises(InputError) as e:
        load_stage("pool").run(Experiment.from_mapping(params))
    msg = str(e.value)
    assert "runs/y.trec" in msg and "query q2, chunk nope" in msg and "unknown chunk id" in msg
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()
