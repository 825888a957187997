"""Invariant 1 and 2: graders never see an arm, a rank, a score, how many arms found a chunk
or any provenance field, and the display order is the recorded seeded shuffle.

A small experiment is run through the real stages (pool, audit, packets) from TREC runs whose
arm names are distinctive strings and whose scores are distinctive numbers; then every byte
given to graders (packet files) and every file beside them (pool, orders) is scanned.
"""

from __future__ import annotations

import importlib
import json
import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from relgrade import schema
from relgrade.experiment.files import Experiment
from relgrade.protocol import intents as I
from relgrade.protocol import packets as K

REPO = Path(__file__).resolve().parents[1]
ARMS = ["ARM_ZEPHYR_7731", "ARM_QUOKKA_2209", "ARM_NARWHAL_5518"]
N_QUERIES, PER_QUERY, DEPTH = 120, 12, 5
SEED = 424242


def load_stage(name):
    module = importlib.import_module(f"relgrade.pipeline.stages.{name}")
    return module


def params(tail_sample: int, arms) -> dict:
    return {
        "seed": SEED,
        "paths": {"queries": "data/queries.parquet", "chunks": "data/chunks.parquet",
                  "runs": "data/runs", "pool": "data/pool.parquet",
                  "provenance": "data/private/provenance.parquet",
                  "pool_manifest": "data/pool.json", "pool_stats": "data/pool_stats.json",
                  "intents": "data/intents.parquet", "intents_manifest": "data/intents.json",
                  "audit": "data/audit.jsonl", "audit_lock": "data/audit_lock.json",
                  "packets": "data/packets",
                  "orders": "data/orders.parquet"},
        "arms": {a: {"kind": "file", "depth": 100, "source": f"runs/{a}.trec"} for a in arms},
        "runs": {"ties": "score"},
        "pool": {"depth": DEPTH, "tail_sample": tail_sample, "tail_depth": PER_QUERY},
        "audit": {"fraction": 0.1, "min_queries": 6},
        "grading": {"round": 1, "batch_size": 5, "rubric_version": "v1"},
    }


def qid(q: int) -> str:
    return f"q{q:03d}"


def runs_by_arm(seed: int = 1) -> dict[str, list[tuple[str, str, float]]]:
    """Each arm ranks the 12 chunks of every query in its own random order, with scores
    7000.xxxxxxxxx that appear nowhere else."""
    rng = np.random.default_rng(seed)
    out = {}
    for a, arm in enumerate(ARMS):
        rows = []
        for q in range(N_QUERIES):
            perm = rng.permutation(PER_QUERY)
            scores = np.sort(7000 + a + rng.random(PER_QUERY))[::-1]
            rows += [(qid(q), f"{qid(q)}-c{j:02d}", float(s)) for j, s in zip(perm, scores)]
        out[arm] = rows
    return out


def setup(root: Path, runs: dict, tail_sample: int) -> dict:
    p = params(tail_sample, runs)
    data = root / "data"
    (data / "runs").mkdir(parents=True)
    qids = [qid(q) for q in range(N_QUERIES)]
    pd.DataFrame({"query_id": qids, "query": [f"query words {q}" for q in qids],
                  "group": ["keyword", "question"] * (N_QUERIES // 2),
                  "weight": 1.0}).to_parquet(root / p["paths"]["queries"])
    chunk_ids = [f"{q}-c{j:02d}" for q in qids for j in range(PER_QUERY)]
    pd.DataFrame({"chunk_id": chunk_ids, "header": [f"header of {c}" for c in chunk_ids],
                  "text": [f"plain text of {c}" for c in chunk_ids],
                  "source": "src"}).to_parquet(root / p["paths"]["chunks"])
    for arm, rows in runs.items():
        (data / "runs" / f"{arm}.trec").write_text("".join(
            f"{q} Q0 {c} {r} {s:.9f} {arm}\n" for r, (q, c, s) in enumerate(rows, start=1)))
    intents = pd.DataFrame({"query_id": qids, "query": [f"query words {q}" for q in qids],
                            "intent": [f"what query {q} asks" for q in qids]})
    intents.to_parquet(root / p["paths"]["intents"])
    (root / p["paths"]["intents_manifest"]).write_text(json.dumps(
        {"sha256": I.intents_sha256(intents), "reviewer": "auditor-b",
         "reviewed_at": "2026-01-01T00:00:00Z", "flagged": []}))
    return p


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("blind")
    runs = runs_by_arm()
    p = setup(root, runs, tail_sample=2)
    cwd = Path.cwd()
    import os
    os.chdir(root)
    try:
        for stage in ("pool", "audit", "packets"):
            load_stage(stage).run(Experiment.from_mapping(p))
    finally:
        os.chdir(cwd)
    return root, runs


def grader_files(root: Path):
    return sorted((root / "data/packets").rglob("*"))


def test_no_arm_name_or_score_reaches_any_packet_byte(experiment):
    root, runs = experiment
    files = [f for f in grader_files(root) if f.is_file()]
    packets = [f for f in files if f.name != "manifest.json"]  # the folder's own record
    assert len(packets) == N_QUERIES + 12        # every query for graders, 12 audit queries
    names = [a.encode() for a in ARMS] + [a.lower().encode() for a in ARMS]
    score_texts = {t.encode() for rows in runs.values() for _, _, s in rows
                   for t in (f"{s:.9f}", f"{s:.4f}", f"{s:.2f}", repr(s))}
    for f in files:
        data = f.read_bytes()
        assert not [n for n in names if n in data], f.name
        numbers = set(re.findall(rb"[0-9]+(?:\.[0-9]+)?", data))
        assert not numbers & score_texts, f"{f.name} holds {sorted(numbers & score_texts)[:3]}"
        assert b"7000." not in data and b"7001." not in data and b"7002." not in data
        for word in (b'"arm', b'"rank', b'"score', b'"source', b'"inclusion', b'"provenance',
                     b'"found', b'"depth', b'"tail'):
            assert word not in data


def test_no_provenance_reaches_the_pool_or_orders_files(experiment):
    root, runs = experiment
    scores = {struct.pack("<d", round(s, 9)) for rows in runs.values() for _, _, s in rows}
    for name in ("data/pool.parquet", "data/orders.parquet"):
        data = (root / name).read_bytes()
        assert not [a for a in ARMS if a.encode() in data]
        assert not [s for s in scores if s in data]
    pool = pd.read_parquet(root / "data/pool.parquet")
    orders = pd.read_parquet(root / "data/orders.parquet")
    assert pool.columns.tolist() == schema.POOL
    assert orders.columns.tolist() == schema.ORDERS
    # the pool file is sorted by id, not by any arm's rank
    assert list(zip(pool.query_id, pool.chunk_id)) == sorted(zip(pool.query_id, pool.chunk_id))
    # the provenance did reach its private file, so the scan above looked for real values
    prov = pd.read_parquet(root / "data/private/provenance.parquet")
    assert set(prov.arm) == set(ARMS)
    assert {struct.pack("<d", x) for x in prov.score} <= scores


def test_packets_hold_exactly_the_allowed_keys_and_file_names(experiment):
    root, _ = experiment
    pool = pd.read_parquet(root / "data/pool.parquet")
    for role in schema.ROLES:
        for f in sorted((root / "data/packets" / role).iterdir()):
            packet = json.loads(f.read_text())
            assert tuple(packet) == K.PACKET_KEYS
            assert f.name == f"{packet['query_id']}.json"
            chunks = [c for b in packet["batches"] for c in b]
            assert all(tuple(c) == K.CHUNK_KEYS for c in chunks)
            assert all(len(b) <= 5 for b in packet["batches"])
            assert sorted(c["chunk_id"] for c in chunks) == sorted(
                pool[pool.query_id == packet["query_id"]].chunk_id)
    assert sorted(p.name for p in (root / "data/packets").iterdir()) == [
        "auditor", "grader", "manifest.json"]
    # the folder's record says what the packets were built for (the rubric among it: this
    # experiment names a rubric version and no rubric file, so no rubric sha256), and nothing
    # of the arms
    built_for = json.loads((root / "data/packets/manifest.json").read_text())
    assert sorted(built_for) == ["intents_sha256", "pool_version", "regrade", "round",
                                 "rubric_version"]


def test_display_order_is_the_recorded_seeded_shuffle(experiment):
    root, _ = experiment
    orders = pd.read_parquet(root / "data/orders.parquet")
    for (role, q), g in orders.groupby(["role", "query_id"]):
        expected, oseed = K.display_order(g.chunk_id, seed=SEED, query_id=q, role=role, round=1)
        assert g.sort_values("position").chunk_id.tolist() == expected
        assert set(g.order_seed) == {oseed}


def test_display_order_is_not_correlated_with_any_arms_rank(experiment):
    root, _ = experiment
    orders = pd.read_parquet(root / "data/orders.parquet")
    prov = pd.read_parquet(root / "data/private/provenance.parquet")
    shown = orders[orders.role == "grader"].set_index(["query_id", "chunk_id"]).position
    for arm in ARMS:
        taus = []
        for q, g in prov[prov.arm == arm].groupby("query_id"):
            pos = shown.loc[list(zip(g.query_id, g.chunk_id))].to_numpy()
            if len(g) > 2:
                taus.append(kendalltau(g["rank"].to_numpy(), pos).statistic)
        # Kendall's tau of a random order has mean 0 and sd about 0.33 for 5-7 items, so
        # the mean over ~120 queries has sd about 0.03; an order sorted by rank gives 1.
        assert len(taus) > 100
        assert abs(np.mean(taus)) < 0.15
        assert np.mean(np.abs(taus) == 1.0) < 0.2


def run_stages(root: Path, runs: dict, *, tail_sample: int, depth: int, audit: bytes | None,
               monkeypatch) -> None:
    monkeypatch.chdir(root)
    p = setup(root, runs, tail_sample=tail_sample)
    p["pool"]["depth"] = depth
    load_stage("pool").run(Experiment.from_mapping(p))
    if audit is None:
        load_stage("audit").run(Experiment.from_mapping(p))
    else:
        (root / p["paths"]["audit"]).write_bytes(audit)
    load_stage("packets").run(Experiment.from_mapping(p))


def test_same_pool_from_other_arms_ranks_and_scores_gives_identical_packets(tmp_path,
                                                                         monkeypatch):
    """Experiment A pools three arms at depth 5. Experiment B has one arm, with another name,
    other ranks and other scores, whose list is exactly A's pool. Every packet file and the
    orders are byte-for-byte the same, so nothing about the arms, their number, ranks or
    scores can be in them."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    run_stages(a, runs_by_arm(), tail_sample=0, depth=DEPTH, audit=None,
               monkeypatch=monkeypatch)
    pool_a = pd.read_parquet(a / "data/pool.parquet")
    rng = np.random.default_rng(99)
    rows = []
    for q, g in pool_a.groupby("query_id"):
        ids = list(rng.permutation(g.chunk_id.to_numpy()))
        rows += [(q, c, float(123.5 - i)) for i, c in enumerate(ids)]
    run_stages(b, {"other_system": rows}, tail_sample=0, depth=PER_QUERY,
               audit=(a / "data/audit.jsonl").read_bytes(), monkeypatch=monkeypatch)
    pool_b = pd.read_parquet(b / "data/pool.parquet")
    pd.testing.assert_frame_equal(pool_a, pool_b)
    pd.testing.assert_frame_equal(pd.read_parquet(a / "data/orders.parquet"),
                                  pd.read_parquet(b / "data/orders.parquet"))
    files_a = sorted(f.relative_to(a) for f in (a / "data/packets").rglob("*.json"))
    files_b = sorted(f.relative_to(b) for f in (b / "data/packets").rglob("*.json"))
    assert files_a == files_b and len(files_a) > N_QUERIES
    for f in files_a:
        assert (a / f).read_bytes() == (b / f).read_bytes()
    # the provenance of the two experiments does differ: the test compares unlike inputs
    prov_a = pd.read_parquet(a / "data/private/provenance.parquet")
    prov_b = pd.read_parquet(b / "data/private/provenance.parquet")
    assert set(prov_a.arm) == set(ARMS) and set(prov_b.arm) == {"other_system"}
