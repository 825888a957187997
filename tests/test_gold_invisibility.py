"""Gold questions are invisible: nothing a rater is given tells a gold pair from a work pair.

A property test over many random panels (pool size, raters, raters per pair, gold set, gold
share, seed): each rater's packets and the command-grader requests made from them are a
function of which pairs the rater has, never of which of them are gold. They are built
twice, once from the real queue and once from the same queue with every gold flag erased,
and must be byte-identical; no key, field, order or id differs. The served page is checked
on one panel: every chunk block, gold or not, has the same markup once its id, header and
text are masked, and no page says gold.

Raters who compare their queues are an attacker too: over all raters' packets of a panel
experiment, the number of raters whose packets hold a pair must be the same for gold and
work pairs (``raters.per_pair``), so the count does not find the gold.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from relgrade.cli.serve import build_site
from relgrade.errors import InputError
from relgrade.graders.exchange import batch_request, encode_request
from relgrade.protocol.packets import (
    CHUNK_KEYS,
    PACKET_KEYS,
    build_packets,
    check_packet,
)
from relgrade.experiment.files import Experiment
from relgrade.pipeline.panel import build_rater_orders
from relgrade.raters.assign import assign_pairs, rater_orders, rater_queues, select_gold
from relgrade.schema import ORDERS
from relgrade.web.app import create_app
from tests.graders import experiment as ex


def _panel(n_queries, per_query, n_raters, per_pair, n_gold, fraction, seed):
    rng = np.random.default_rng(seed)
    # opaque ids drawn the same way for every chunk: nothing in an id says gold
    ids = [f"c{int(x):012x}" for x in rng.choice(2**40, n_queries * per_query, replace=False)]
    pool = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_queries) for _ in range(per_query)],
                         "chunk_id": ids})
    chunks = pd.DataFrame({"chunk_id": ids, "header": [f"src/m{i}.py > f" for i in range(len(ids))],
                           "text": [f"def f{i}():\n    return {i}" for i in range(len(ids))]})
    intents = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_queries)],
                            "query": [f"query {i}" for i in range(n_queries)],
                            "intent": [f"what query {i} asks" for i in range(n_queries)]})
    raters = [f"rater-{i}" for i in range(1, n_raters + 1)]
    pick = rng.choice(len(pool), size=n_gold, replace=False)
    gold = pool.iloc[sorted(pick)].assign(grade=rng.integers(0, 3, n_gold))
    gold = select_gold(gold, pool=pool, fraction=fraction, rng=np.random.default_rng(seed + 1))
    assignment = assign_pairs(pool, raters, per_pair=per_pair, rng=np.random.default_rng(seed),
                              first=gold)
    queues = rater_queues(assignment, gold)
    return queues, chunks, intents


def _packets(queues, chunks, intents, seed):
    orders = rater_orders(queues, seed=seed, round=1, batch_size=3)
    out = {}
    for name, mine in orders.groupby("grader", sort=True):
        built = build_packets(mine[ORDERS], chunks=chunks, intents=intents,
                              rubric_version="v1", intents_sha256="0" * 64)
        out[name] = built["rater"]
    return out


def _requests(packets):
    out = []
    for name, ps in packets.items():
        for p in ps:
            for b, batch in enumerate(p["batches"]):
                req = batch_request(p, b, batch, grader=name, rubric="rubric", scale=[0, 1, 2],
                                    max_reason_words=15)
                out.append(encode_request(req))
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_queries=st.integers(2, 4), per_query=st.integers(3, 7), n_raters=st.integers(3, 5),
       per_pair=st.integers(3, 5), n_gold=st.integers(1, 8),
       fraction=st.floats(0.05, 0.5), seed=st.integers(0, 2**31))
def test_packets_and_requests_do_not_depend_on_which_pairs_are_gold(
        n_queries, per_query, n_raters, per_pair, n_gold, fraction, seed):
    assume(per_pair <= n_raters and n_gold <= n_queries * per_query)
    try:
        queues, chunks, intents = _panel(n_queries, per_query, n_raters, per_pair, n_gold,
                                         fraction, seed)
    except InputError:
        assume(False)  # too few gold pairs for this share: refused
    shown = _packets(queues, chunks, intents, seed)
    erased = _packets(queues.assign(work=True, gold=False), chunks, intents, seed)
    assert json.dumps(shown, sort_keys=False) == json.dumps(erased, sort_keys=False)
    requests = _requests(shown)
    assert requests == _requests(erased)
    for ps in shown.values():
        for p in ps:
            check_packet(p)
            assert tuple(p) == PACKET_KEYS
            assert all(tuple(c) == CHUNK_KEYS for b in p["batches"] for c in b)
    assert not any(b"gold" in r or b'"work"' in r for r in requests)
    # every queued pair, gold or work, is in its rater's packets exactly once
    for name, mine in queues.groupby("grader"):
        got = sorted((p["query_id"], c["chunk_id"]) for p in shown[name]
                     for b in p["batches"] for c in b)
        assert got == sorted(zip(mine["query_id"], mine["chunk_id"]))


def _mask(block, chunk):
    for value in (chunk["chunk_id"], chunk["header"]):
        block = block.replace(value, "@")
    return re.sub(r"<pre.*?</pre>", "<pre/>", block, flags=re.S)


def test_the_served_page_shows_gold_and_work_chunks_in_the_same_markup(tmp_path):
    queues, chunks, intents = _panel(2, 6, 5, 3, 6, 0.4, 0)
    assert queues["gold"].any()  # gold questions are hidden among the queues' pairs
    graders = {n: {"role": "rater", "kind": "human", "family": "person"}
               for n in sorted(queues["grader"].unique())}
    ex.build(tmp_path, queries=2, chunks=6, audit=0, graders=graders)
    packets = _packets(queues, chunks, intents, 0)
    for name, ps in packets.items():
        folder = tmp_path / "data/packets/rater" / name
        folder.mkdir(parents=True)
        for p in ps:
            (folder / f"{p['query_id']}.json").write_text(json.dumps(p))
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=sorted(graders))
    try:
        app = create_app(site)
        flags = {(g, q, c): bool(o) for g, q, c, o in
                 zip(queues["grader"], queues["query_id"], queues["chunk_id"], queues["gold"])}
        seen = {True: set(), False: set()}
        for name, ps in packets.items():
            client = TestClient(app)
            client.get(f"/login?token={site.graders[name].token}", follow_redirects=False)
            for p in ps:
                for b, batch in enumerate(p["batches"]):
                    html = client.get(f"/g/{name}/q/{p['query_id']}/{b}").text
                    assert "gold" not in html.lower()
                    blocks = re.findall(r'<article class="chunk.*?</article>', html, flags=re.S)
                    assert len(blocks) == len(batch)
                    for block, chunk in zip(blocks, batch):
                        # the place in the batch is numbered: numbers masked as well
                        masked = re.sub(r"\d+", "#", _mask(block, chunk))
                        seen[flags[(name, p["query_id"], chunk["chunk_id"])]].add(masked)
        assert seen[True] and seen[False]
        assert seen[True] <= seen[False]  # a gold block is marked up as a work block is
    finally:
        site.writer.close()
        for s in stores:
            s.close()


# --- the queue-comparison attack --------------------------------------------------------------

PANEL_PARAMS = """\
seed: {seed}
paths: {{packets: data/packets, grades_in: data/grades, pool: data/pool/pool.parquet}}
scale: {{grades: [0, 1, 2], relevant_min: 1}}
grading: {{rubric: rubric/v1.md, rubric_version: v1, round: 1, batch_size: 5,
          max_reason_words: 15, mode: raters, key_grader: crowd}}
graders:
{raters}  expert-e: {{role: expert, kind: human, family: person}}
raters: {{per_pair: {per_pair}}}
gold: {{input: data/private/gold.tsv, fraction: {fraction}}}
adjudication: {{expert: expert-e}}
"""


def _panel_experiment(root, *, n_queries, per_query, n_raters, per_pair, n_gold, fraction,
                      seed):
    """A rater-panel experiment's params and gold file; its pool, chunks and intents."""
    rng = np.random.default_rng(seed)
    ids = [f"c{int(x):012x}" for x in rng.choice(2**40, n_queries * per_query, replace=False)]
    pool = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_queries) for _ in range(per_query)],
                         "chunk_id": ids})
    chunks = pd.DataFrame({"chunk_id": ids, "header": [f"src/m{i}.py > f" for i in range(len(ids))],
                           "text": [f"def f{i}():\n    return {i}" for i in range(len(ids))]})
    intents = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_queries)],
                            "query": [f"query {i}" for i in range(n_queries)],
                            "intent": [f"what query {i} asks" for i in range(n_queries)]})
    raters = "".join(f"  rater-{i}: {{role: rater, kind: human, family: person}}\n"
                     for i in range(1, n_raters + 1))
    (root / "params.yaml").write_text(PANEL_PARAMS.format(
        seed=seed, raters=raters, per_pair=per_pair, fraction=fraction))
    pick = sorted(rng.choice(len(pool), size=n_gold, replace=False))
    (root / "data/private").mkdir(parents=True)
    pool.iloc[pick].assign(grade=rng.integers(0, 3, n_gold)).to_csv(
        root / "data/private/gold.tsv", sep="\t", index=False)
    return Experiment.load(root / "params.yaml"), pool, chunks, intents


def _queue_counts(ex, pool, chunks, intents):
    """Per pair: in how many raters' packets it is, and whether it is gold (private flag)."""
    orders = build_rater_orders(ex, pool)       # what the packets stage builds packets from
    seen: dict = {}
    for name, mine in orders.groupby("grader", sort=True):
        for p in build_packets(mine[list(ORDERS)], chunks=chunks, intents=intents,
                               rubric_version="v1", intents_sha256="0" * 64)["rater"]:
            for batch in p["batches"]:
                for c in batch:
                    seen.setdefault((p["query_id"], c["chunk_id"]), set()).add(name)
    gold = {(q, c) for q, c, g in zip(orders["query_id"], orders["chunk_id"], orders["gold"])
            if g}
    return {pair: (len(names), pair in gold) for pair, names in seen.items()}


def test_comparing_queues_does_not_find_the_gold_in_a_crowd_sized_panel(tmp_path):
    # crowd-sim's shape: 160 pool pairs, five raters, three per pair, 64 gold pairs at 0.4
    # (round(0.4 * 160)). A rater panel that counts in how many queues each pair is sees 3
    # for every pair.
    ex, pool, chunks, intents = _panel_experiment(
        tmp_path, n_queries=10, per_query=16, n_raters=5, per_pair=3, n_gold=64, fraction=0.4,
        seed=11)
    counts = _queue_counts(ex, pool, chunks, intents)
    assert len(counts) == 160
    assert sum(g for _, g in counts.values()) == 64
    assert {n for n, g in counts.values() if g} == {n for n, g in counts.values() if not g} \
        == {3}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_queries=st.integers(1, 4), per_query=st.integers(3, 9), n_raters=st.integers(3, 6),
       per_pair=st.integers(3, 5), fraction=st.floats(0.05, 0.5), spare=st.integers(0, 5),
       seed=st.integers(0, 2**31))
def test_gold_and_work_pairs_are_in_equally_many_raters_queues(
        tmp_path_factory, n_queries, per_query, n_raters, per_pair, fraction, spare, seed):
    assume(per_pair <= n_raters)
    n_pairs, fraction = n_queries * per_query, round(fraction, 3)
    need = int(np.floor(fraction * n_pairs + 0.5))      # round(fraction * n_pairs)
    assume(need >= 1)
    root = tmp_path_factory.mktemp("panel")
    ex, pool, chunks, intents = _panel_experiment(
        root, n_queries=n_queries, per_query=per_query, n_raters=n_raters, per_pair=per_pair,
        n_gold=min(n_pairs, need + spare), fraction=fraction, seed=seed)
    counts = _queue_counts(ex, pool, chunks, intents)
    assert len(counts) == n_pairs                       # every pool pair is in some queue
    multiplicity = {g: {n for n, gold in counts.values() if gold == g} for g in (True, False)}
    assert multiplicity[True] == {per_pair}
    assert multiplicity[False] <= {per_pair}
