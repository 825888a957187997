"""Gold questions are invisible: nothing a rater is given tells a gold pair from a work pair.

A property test over many random panels (pool size, raters, raters per pair, gold set, gold
share, seed): each rater's packets and the command-grader requests made from them are a
function of which pairs the rater has, never of which of them are gold. They are built
twice, once from the real queue and once from the same queue with every gold flag erased,
and must be byte-identical; no key, field, order or id differs. The served page is checked
on one panel: every chunk block, gold or not, has the same markup once its id, header and
text are masked, and no page says gold.
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
from relgrade.raters.assign import assign_pairs, rater_orders, rater_queues
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
    assignment = assign_pairs(pool, raters, per_pair=per_pair, rng=np.random.default_rng(seed))
    pick = rng.choice(len(pool), size=n_gold, replace=False)
    gold = pool.iloc[sorted(pick)].assign(grade=rng.integers(0, 3, n_gold))
    queues = rater_queues(assignment, gold, fraction=fraction,
                          rng=np.random.default_rng(seed + 1))
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
        assume(False)  # too few gold pairs outside some queue for this share: refused
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
    queues, chunks, intents = _panel(2, 6, 5, 3, 4, 0.4, 0)
    assert (~queues["work"]).any()  # at least one gold question was hidden in a queue
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
