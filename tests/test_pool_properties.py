"""Properties of the pool and its display orders, over generated runs (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade import ranking as R
from relgrade.protocol import pool as P
from relgrade.protocol.packets import build_orders, display_order

CHUNKS = [f"c{i}" for i in range(12)] + ["é", "Z", "10", "9"]


@st.composite
def stacked_runs(draw):
    """1-4 arms x 1-3 queries, each ranked list a distinct subset of the chunks, coarse scores."""
    n_arms = draw(st.integers(1, 4))
    n_queries = draw(st.integers(1, 3))
    rows = []
    for a in range(n_arms):
        for q in range(n_queries):
            picked = draw(st.lists(st.sampled_from(CHUNKS), unique=True, max_size=len(CHUNKS)))
            scores = draw(st.lists(st.integers(0, 4), min_size=len(picked), max_size=len(picked)))
            rows += [(f"q{q}", c, 0, float(s), f"arm{a}") for c, s in zip(picked, scores)]
    if not rows:
        rows = [("q0", "c0", 0, 1.0, "arm0")]
    raw = pd.DataFrame(rows, columns=["query_id", "chunk_id", "rank", "score", "arm"])
    return R.canonical_ranking(raw)


pool_args = dict(depth=st.integers(1, 6), tail_sample=st.integers(0, 4),
                 extra=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))


@settings(max_examples=80, deadline=None)
@given(runs=stacked_runs(), **pool_args)
def test_every_arms_top_depth_is_in_the_pool(runs, depth, tail_sample, extra, seed):
    pool, _, _ = P.build_pool(runs, depth=depth, tail_sample=tail_sample,
                              tail_depth=depth + extra, rng=np.random.default_rng(seed))
    top = runs[runs["rank"] <= depth]
    assert set(zip(top.query_id, top.chunk_id)) <= set(zip(pool.query_id, pool.chunk_id))
    assert (pool[pool.inclusion_prob < 1].shape[0] == 0) or tail_sample > 0


@settings(max_examples=80, deadline=None)
@given(runs=stacked_runs(), **pool_args)
def test_pool_has_no_duplicate_pair_and_is_sorted(runs, depth, tail_sample, extra, seed):
    pool, _, _ = P.build_pool(runs, depth=depth, tail_sample=tail_sample,
                              tail_depth=depth + extra, rng=np.random.default_rng(seed))
    pairs = list(zip(pool.query_id, pool.chunk_id))
    assert len(pairs) == len(set(pairs))
    assert pairs == sorted(pairs)


@settings(max_examples=80, deadline=None)
@given(runs=stacked_runs(), **pool_args)
def test_inclusion_probabilities_are_in_zero_one_and_match_the_sample(runs, depth, tail_sample,
                                                                    extra, seed):
    tail_depth = depth + extra
    pool, prov, _ = P.build_pool(runs, depth=depth, tail_sample=tail_sample,
                                 tail_depth=tail_depth, rng=np.random.default_rng(seed))
    p = pool["inclusion_prob"].to_numpy()
    assert ((p > 0) & (p <= 1)).all()
    # per query: min(k, n) chunks sampled from n candidates, each with probability min(k, n)/n
    top = runs[runs["rank"] <= depth]
    tail = runs[(runs["rank"] > depth) & (runs["rank"] <= tail_depth)]
    for q, g in tail.groupby("query_id"):
        cand = set(g.chunk_id) - set(top[top.query_id == q].chunk_id)
        sampled = prov[(prov.query_id == q) & (prov.source == "tail")].chunk_id.unique()
        assert set(sampled) <= cand
        if cand and tail_sample:
            assert len(sampled) == min(tail_sample, len(cand))
            probs = pool[(pool.query_id == q) & pool.chunk_id.isin(sampled)].inclusion_prob
            assert np.allclose(probs, min(tail_sample, len(cand)) / len(cand))


@settings(max_examples=100, deadline=None)
@given(runs=stacked_runs(), depth=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       rnd=st.integers(1, 3), batch=st.integers(1, 5))
def test_display_order_is_a_permutation_of_the_pool_and_reproducible(runs, depth, seed, rnd,
                                                                     batch):
    pool, _, _ = P.build_pool(runs, depth=depth)
    qids = pool.query_id.unique().tolist()
    orders = build_orders(pool, seed=seed, round=rnd, batch_size=batch, audit_ids=qids[:1])
    for (role, q), g in orders.groupby(["role", "query_id"]):
        assert sorted(g.chunk_id) == sorted(pool[pool.query_id == q].chunk_id)
        assert g.position.tolist() == list(range(len(g)))
        assert g.batch.value_counts().max() <= batch
    again = build_orders(pool, seed=seed, round=rnd, batch_size=batch, audit_ids=qids[:1])
    pd.testing.assert_frame_equal(orders, again)


@settings(max_examples=120, deadline=None)
@given(ids=st.lists(st.sampled_from(CHUNKS), unique=True, min_size=4),
       seed=st.integers(0, 2**63 - 1), qid=st.text(min_size=1, max_size=8),
       rnd=st.integers(1, 4))
def test_other_role_or_round_gives_another_order_for_more_than_three_chunks(ids, seed, qid, rnd):
    grader, _ = display_order(ids, seed=seed, query_id=qid, role="grader", round=rnd)
    auditor, _ = display_order(ids, seed=seed, query_id=qid, role="auditor", round=rnd)
    later, _ = display_order(ids, seed=seed, query_id=qid, role="grader", round=rnd + 1)
    assert grader != auditor
    assert grader != later
    assert auditor != later
    assert display_order(list(reversed(ids)), seed=seed, query_id=qid, role="grader",
                         round=rnd)[0] == grader


@st.composite
def unsorted_runs(draw):
    """Stacked runs with coarse scores, arbitrary rank columns and arbitrary row order."""
    runs = draw(stacked_runs())
    perm = draw(st.permutations(range(len(runs))))
    ranks = draw(st.lists(st.integers(1, 5), min_size=len(runs), max_size=len(runs)))
    return runs.iloc[list(perm)].assign(rank=ranks).reset_index(drop=True)


@settings(max_examples=120, deadline=None)
@given(run=st.one_of(stacked_runs(), unsorted_runs()), depth=st.integers(1, 8),
       ties=st.sampled_from(["score", "rank"]))
def test_top_candidates_keep_every_canonical_rank_up_to_depth(run, depth, ties):
    full = R.canonical_ranking(run, ties=ties)
    cut = R.canonical_ranking(P.top_candidates(run, depth, ties=ties), ties=ties)
    want = full[full["rank"] <= depth].reset_index(drop=True)
    got = cut[cut["rank"] <= depth].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)


@settings(max_examples=120, deadline=None)
@given(pairs=st.lists(st.tuples(st.text(min_size=1, max_size=6), st.text(min_size=1, max_size=6)),
                      min_size=1, max_size=20, unique=True))
def test_pool_bytes_equal_canonical_jsonl_for_any_ids(pairs):
    from relgrade.canonical import jsonl_bytes

    pool = pd.DataFrame(pairs, columns=["query_id", "chunk_id"])
    expected = jsonl_bytes({"query_id": q, "chunk_id": c} for q, c in sorted(pairs))
    assert P.pool_bytes(pool) == expected
