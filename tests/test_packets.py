"""Packets and display orders: seeded shuffles, batches, fresh orders per role and round,
the packet shape, the JSONL export and the seed derivation behind the orders."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from relgrade import rng as seeds
from relgrade import schema
from relgrade.cli import main as cli
from relgrade.errors import InputError
from relgrade.protocol import packets as K

POOL = pd.DataFrame({"query_id": ["q1"] * 7 + ["q2"] * 3,
                     "chunk_id": [f"c{i}" for i in range(7)] + ["d0", "d1", "d2"],
                     "inclusion_prob": 1.0})
CHUNKS = pd.DataFrame({"chunk_id": POOL.chunk_id, "header": "H " + POOL.chunk_id,
                       "text": "T " + POOL.chunk_id, "source": "s"})
INTENTS = pd.DataFrame({"query_id": ["q1", "q2"], "query": ["cache eviction", "log rotation"],
                        "intent": ["Where is the eviction policy?", "Why rotate by size?"]})


# --- seeds -----------------------------------------------------------------------------

def test_order_seed_is_sha256_of_the_documented_bytes():
    data = b'["relgrade-seed-v1",20261130,"order","w012","grader",1]'
    expected = int.from_bytes(hashlib.sha256(data).digest()[:8], "big") & (2**63 - 1)
    assert seeds.seed_bytes(20261130, "order", "w012", "grader", 1) == data
    assert seeds.order_seed(20261130, "w012", "grader", 1) == expected


def test_order_seed_is_the_same_in_another_process_with_another_hash_salt():
    code = "from relgrade.rng import order_seed; print(order_seed(7, 'q1', 'auditor', 2))"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert int(out) == seeds.order_seed(7, "q1", "auditor", 2)


def test_seed_parts_that_differ_give_different_seeds():
    base = seeds.order_seed(7, "q1", "grader", 1)
    assert len({base, seeds.order_seed(8, "q1", "grader", 1),
                seeds.order_seed(7, "q2", "grader", 1), seeds.order_seed(7, "q1", "auditor", 1),
                seeds.order_seed(7, "q1", "grader", 2)}) == 5
    # JSON quoting keeps parts apart: ("a,b", "c") is not ("a", "b,c")
    assert seeds.derive_seed(1, "a,b", "c") != seeds.derive_seed(1, "a", "b,c")


def test_rng_for_is_a_generator_seeded_with_order_seed():
    a = seeds.rng_for(7, "q1", "grader", 1).random(3)
    b = np.random.default_rng(seeds.order_seed(7, "q1", "grader", 1)).random(3)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "7"])
def test_seed_must_be_a_non_negative_integer(bad):
    with pytest.raises(ValueError):
        seeds.derive_seed(bad, "x")


# --- display orders --------------------------------------------------------------------

def test_first_order_is_the_seeded_permutation_of_the_sorted_ids():
    ids = ["c3", "c1", "c0", "c2"]
    order, oseed = K.display_order(ids, seed=9, query_id="q1", role="grader", round=1)
    perm = np.random.default_rng(seeds.order_seed(9, "q1", "grader", 1)).permutation(4)
    assert order == [sorted(ids)[i] for i in perm]
    assert oseed == seeds.order_seed(9, "q1", "grader", 1)


def test_auditor_order_redraws_when_it_would_repeat_the_graders():
    # Two chunks have two orders: the auditor gets the one the grader did not.
    for seed in range(20):
        g, _ = K.display_order(["a", "b"], seed=seed, query_id="q", role="grader", round=1)
        a, _ = K.display_order(["a", "b"], seed=seed, query_id="q", role="auditor", round=1)
        assert g != a and sorted(a) == ["a", "b"]


def test_single_chunk_has_one_order_for_everyone():
    for role, rnd in [("grader", 1), ("auditor", 1), ("grader", 3)]:
        assert K.display_order(["a"], seed=1, query_id="q", role=role, round=rnd)[0] == ["a"]


def test_unknown_role_and_bad_round_are_refused():
    with pytest.raises(InputError, match="role must be one of grader, auditor"):
        K.display_order(["a"], seed=1, query_id="q", role="judge", round=1)
    with pytest.raises(InputError, match="grading.round"):
        K.display_order(["a"], seed=1, query_id="q", role="grader", round=0)


def test_orders_cover_every_pooled_query_for_graders_and_audit_queries_for_auditors():
    orders = K.build_orders(POOL, seed=3, round=1, batch_size=3, audit_ids=["q2"])
    assert orders.columns.tolist() == schema.ORDERS
    grader = orders[orders.role == "grader"]
    auditor = orders[orders.role == "auditor"]
    assert sorted(grader.query_id.unique()) == ["q1", "q2"]
    assert auditor.query_id.unique().tolist() == ["q2"]
    q1 = grader[grader.query_id == "q1"]
    assert q1.position.tolist() == list(range(7))
    assert q1.batch.tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert set(q1.order_seed) == {seeds.order_seed(3, "q1", "grader", 1)}
    expected, _ = K.display_order(POOL.chunk_id[:7], seed=3, query_id="q1", role="grader", round=1)
    assert q1.chunk_id.tolist() == expected
    a2 = auditor.chunk_id.tolist()
    assert a2 != grader[grader.query_id == "q2"].chunk_id.tolist()
    assert {str(t) for t in orders.dtypes[["round", "position", "batch", "order_seed"]]} == {"int64"}


def test_new_round_gives_fresh_orders():
    r1 = K.build_orders(POOL, seed=3, round=1, batch_size=5)
    r2 = K.build_orders(POOL, seed=3, round=2, batch_size=5)
    for q in ("q1", "q2"):
        assert r1[r1.query_id == q].chunk_id.tolist() != r2[r2.query_id == q].chunk_id.tolist()
    assert set(r2["round"]) == {2}


def test_orders_do_not_depend_on_pool_row_order_or_extra_columns():
    shuffled = POOL.sample(frac=1, random_state=1).assign(inclusion_prob=0.25)
    pd.testing.assert_frame_equal(K.build_orders(POOL, seed=3, round=1, batch_size=5),
                                  K.build_orders(shuffled, seed=3, round=1, batch_size=5))


def test_audit_query_outside_the_pool_is_refused():
    with pytest.raises(InputError, match="q9: audit query has no pooled chunk"):
        K.build_orders(POOL, seed=3, round=1, batch_size=5, audit_ids=["q9"])


# --- packets ---------------------------------------------------------------------------

def built(batch_size=5, audit=("q2",), rnd=1):
    orders = K.build_orders(POOL, seed=3, round=rnd, batch_size=batch_size, audit_ids=audit)
    return orders, K.build_packets(orders, chunks=CHUNKS, intents=INTENTS, rubric_version="v1",
                                   intents_sha256="ab" * 32)


def test_packet_has_exactly_the_allowed_keys_in_order():
    _, out = built()
    for role, plist in out.items():
        for p in plist:
            assert tuple(p) == K.PACKET_KEYS
            assert all(tuple(c) == K.CHUNK_KEYS for b in p["batches"] for c in b)


def test_packet_batches_follow_the_recorded_order_and_size():
    orders, out = built(batch_size=3)
    p = next(p for p in out["grader"] if p["query_id"] == "q1")
    assert [len(b) for b in p["batches"]] == [3, 3, 1]
    shown = [c["chunk_id"] for b in p["batches"] for c in b]
    g = orders[(orders.role == "grader") & (orders.query_id == "q1")]
    assert shown == g.chunk_id.tolist()
    first = p["batches"][0][0]
    assert first == {"chunk_id": shown[0], "header": f"H {shown[0]}", "text": f"T {shown[0]}"}
    assert (p["query"], p["intent"], p["rubric_version"], p["round"]) == (
        "cache eviction", "Where is the eviction policy?", "v1", 1)
    assert p["intents_sha256"] == "ab" * 32


def test_auditor_packets_only_for_audit_queries_in_another_order():
    _, out = built(audit=("q1",))
    assert [p["query_id"] for p in out["auditor"]] == ["q1"]
    g = next(p for p in out["grader"] if p["query_id"] == "q1")
    a = out["auditor"][0]
    flat = lambda p: [c["chunk_id"] for b in p["batches"] for c in b]
    assert sorted(flat(a)) == sorted(flat(g)) and flat(a) != flat(g)


def test_missing_chunk_and_missing_intent_are_refused():
    orders = K.build_orders(POOL, seed=3, round=1, batch_size=5)
    with pytest.raises(InputError, match="c6: pooled chunk is not in the corpus"):
        K.build_packets(orders, chunks=CHUNKS[CHUNKS.chunk_id != "c6"], intents=INTENTS,
                        rubric_version="v1", intents_sha256="x")
    with pytest.raises(InputError, match="q2: pooled query has no frozen intent"):
        K.build_packets(orders, chunks=CHUNKS, intents=INTENTS[INTENTS.query_id == "q1"],
                        rubric_version="v1", intents_sha256="x")


def test_iter_packets_yields_the_packets_of_build_packets_one_at_a_time_sorted_by_role():
    orders, out = built(batch_size=3, audit=("q1", "q2"))
    streamed = list(K.iter_packets(orders.sample(frac=1, random_state=1), chunks=CHUNKS,
                                   intents=INTENTS, rubric_version="v1",
                                   intents_sha256="ab" * 32))
    assert [(r, p["query_id"]) for r, p in streamed] == [
        ("auditor", "q1"), ("auditor", "q2"), ("grader", "q1"), ("grader", "q2")]
    assert [p for r, p in streamed if r == "grader"] == out["grader"]
    assert [p for r, p in streamed if r == "auditor"] == out["auditor"]


@pytest.mark.parametrize("text", ["plain", "é ü 中文 \u2028 \U0001F600", 'quo"te \\ back',
                                  "tab\tnew\nline\x00\x1f\x7f", ""])
def test_packet_json_is_the_bytes_of_json_dumps_with_indent_2(text):
    _, out = built(batch_size=3)
    packet = out["grader"][0]
    packet["query"], packet["batches"][1][0]["text"] = text, text
    packet["batches"][0][2]["header"] = text
    assert K.packet_json(packet) == json.dumps(packet, indent=2, ensure_ascii=False) + "\n"
    # any other shape is written by json.dumps itself: no batches, an empty batch, a float
    for other in ({**packet, "batches": []}, {**packet, "batches": [[]]},
                  {**packet, "round": 1.0}):
        assert K.packet_json(other) == json.dumps(other, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("qid", ["../x", "a/b", "..", ""])
def test_query_ids_that_cannot_be_file_names_are_refused(qid):
    with pytest.raises(InputError, match="cannot name a packet file"):
        K.packet_filename(qid)


def test_jsonl_export_writes_one_packet_per_line():
    _, out = built()
    data = K.packets_jsonl(out["grader"])
    lines = data.decode("utf-8").splitlines()
    assert len(lines) == 2
    assert [json.loads(line) for line in lines] == out["grader"]
    assert data.endswith(b"\n") and b", " not in data.split(b'"text"')[0]


def test_export_refuses_a_packet_with_extra_keys():
    _, out = built()
    leaked = dict(out["grader"][0], arm="bm25")
    with pytest.raises(InputError, match="packet keys must be exactly"):
        K.packets_jsonl([leaked])


def test_export_command_writes_the_roles_packets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"paths": {"packets": "packets"}}))
    runner = CliRunner()
    res = runner.invoke(cli, ["packets", "export", "--role", "auditor", "--out", "a.jsonl"])
    assert res.exit_code == 1 and "no auditor packets found" in res.output
    _, out = built()
    for role, plist in out.items():
        (tmp_path / "packets" / role).mkdir(parents=True)
        for p in plist:
            (tmp_path / "packets" / role / f"{p['query_id']}.json").write_text(json.dumps(p))
    res = runner.invoke(cli, ["packets", "export", "--role", "grader", "--out", "g.jsonl"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "g.jsonl").read_bytes() == K.packets_jsonl(out["grader"])
    res = runner.invoke(cli, ["packets", "export", "--role", "grader", "--out", "g.x",
                              "--format", "csv"])
    assert res.exit_code == 2 and "Invalid value for '--format'" in res.output
    # A Label Studio task file: one task per chunk, in each packet's display order.
    res = runner.invoke(cli, ["packets", "export", "--role", "grader", "--out", "ls.json",
                              "--format", "label-studio"])
    assert res.exit_code == 0, res.output
    tasks = json.loads((tmp_path / "ls.json").read_text())
    expected = [(p["query_id"], c["chunk_id"]) for p in sorted(out["grader"],
                key=lambda p: p["query_id"]) for b in p["batches"] for c in b]
    assert [(t["data"]["query_id"], t["data"]["chunk_id"]) for t in tasks] == expected
