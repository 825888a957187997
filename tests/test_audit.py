"""The audit sample: hand-computed selection, the size rules, ties broken by the seed, errors."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.protocol import audit as A
from relgrade.rng import stage_rng

REPO = Path(__file__).resolve().parents[1]

# Which arms found each pooled chunk within the depth, per query (three arms x, y, z).
FOUND = {
    "k1": {"a": "xyz", "b": "x"},              # 1 of 2 found by <= 2 arms -> 0.5
    "k2": {"a": "x", "b": "y", "c": "xyz"},    # 2/3
    "k3": {"a": "xy"},                         # 1.0
    "k4": {"a": "xyz"},                        # 0.0 (its tail chunk t is ignored)
    "u1": {"a": "x", "b": "xyz"},              # 0.5
    "u2": {"a": "x", "b": "y"},                # 1.0
    "u3": {"a": "x", "b": "xyz"},              # 0.5, tied with u1
    "u4": {"a": "xyz", "b": "xyz", "c": "z"},  # 1/3
}
GROUP = {q: "keyword" if q[0] == "k" else "question" for q in FOUND}


def provenance():
    rows = [(q, c, arm, i + 1, 1.0, "depth") for q, chunks in FOUND.items()
            for c, arms in chunks.items() for i, arm in enumerate(arms)]
    rows.append(("k4", "t", "x", 40, 0.1, "tail"))
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "arm", "rank", "score", "source"])


def queries(ids=None):
    ids = list(FOUND) if ids is None else ids
    return pd.DataFrame({"query_id": ids, "query": ids, "group": [GROUP[q] for q in ids],
                         "weight": 1.0})


def test_unique_share_counts_chunks_found_by_one_or_two_arms_at_depth():
    share = A.unique_share(provenance())
    assert share.to_dict() == pytest.approx({"k1": 0.5, "k2": 2 / 3, "k3": 1.0, "k4": 0.0,
                                             "u1": 0.5, "u2": 1.0, "u3": 0.5, "u4": 1 / 3})


def test_hand_computed_selection_with_reasons():
    # N = 8: max(ceil(0.25 * 8), 4) = 4 queries, 2 per group.
    out = A.choose_audit(provenance(), queries(), fraction=0.25, min_queries=4,
                         rng=np.random.default_rng(0))
    assert out.columns.tolist() == ["query_id", "group", "unique_share", "reason"]
    assert out.query_id.tolist()[:3] == ["k3", "k2", "u2"]
    assert out.reason.tolist()[:3] == [
        "group keyword, rank 1 of 4 by share of chunks found by one or two arms (1.00)",
        "group keyword, rank 2 of 4 by share of chunks found by one or two arms (0.67)",
        "group question, rank 1 of 4 by share of chunks found by one or two arms (1.00)",
    ]
    assert out.query_id.iloc[3] in {"u1", "u3"}
    assert out.reason.iloc[3] == ("group question, rank 2 of 4 by share of chunks found by one "
                                  "or two arms (0.50); tied with 1 other query, order set by "
                                  "the seed")
    assert out.unique_share.tolist() == pytest.approx([1.0, 2 / 3, 1.0, 0.5])


@pytest.mark.parametrize("seed", range(6))
def test_tie_goes_to_the_smaller_seeded_key_in_query_id_order(seed):
    # one rng.random() per pooled query, drawn in query_id order: u1 is 5th, u3 is 7th
    keys = np.random.default_rng(seed).random(8)
    expected = "u1" if keys[4] < keys[6] else "u3"
    out = A.choose_audit(provenance(), queries(), fraction=0.25, min_queries=4,
                         rng=np.random.default_rng(seed))
    assert out.query_id.iloc[3] == expected


def test_ties_are_random_across_seeds_and_fixed_for_one_seed():
    picks = {A.choose_audit(provenance(), queries(), fraction=0.25, min_queries=4,
                            rng=np.random.default_rng(s)).query_id.iloc[3] for s in range(20)}
    assert picks == {"u1", "u3"}
    a = A.choose_audit(provenance(), queries(), fraction=0.25, min_queries=4,
                       rng=stage_rng(20261130, "audit"))
    b = A.choose_audit(provenance(), queries(), fraction=0.25, min_queries=4,
                       rng=stage_rng(20261130, "audit"))
    pd.testing.assert_frame_equal(a, b)


def test_row_order_of_inputs_does_not_change_the_choice():
    a = A.choose_audit(provenance(), queries(), fraction=0.25, min_queries=4,
                       rng=np.random.default_rng(3))
    b = A.choose_audit(provenance().iloc[::-1], queries().iloc[[1, 0, 2, 3, 4, 5, 6, 7]],
                       fraction=0.25, min_queries=4, rng=np.random.default_rng(3))
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("n, groups, fraction, minimum, expected", [
    (18, 2, 0.10, 10, (10, 5)),   # the minimum wins
    (250, 2, 0.10, 10, (25, 13)), # the fraction wins; 13 + 13 >= 25, even
    (30, 1, 0.10, 1, (3, 3)),     # 0.1 * 30 is 3, not 4, despite floating point
    (31, 3, 0.10, 1, (4, 2)),     # ceil(3.1) = 4, ceil(4 / 3) = 2
])
def test_audit_size_rules(n, groups, fraction, minimum, expected):
    assert A.audit_size(n, groups, fraction=fraction, min_queries=minimum) == expected


def test_fraction_rule_takes_more_than_the_minimum():
    # N = 8, fraction 0.75 -> 6 queries, 3 per group
    out = A.choose_audit(provenance(), queries(), fraction=0.75, min_queries=2,
                         rng=np.random.default_rng(0))
    assert out.groupby("group").size().to_dict() == {"keyword": 3, "question": 3}
    assert out[out.group == "keyword"].query_id.tolist() == ["k3", "k2", "k1"]


def test_too_few_queries_is_refused_with_the_numbers():
    with pytest.raises(InputError) as e:
        A.choose_audit(provenance(), queries(), fraction=0.1, min_queries=10,
                       rng=np.random.default_rng(0))
    assert str(e.value) == ("audit.min_queries: too few queries for the audit: it needs 10 "
                            "(max of ceil(0.1 x 8) and 10), the pool has 8. Add queries, or "
                            "lower audit.min_queries / audit.fraction")


def test_a_group_too_small_for_its_even_share_is_refused():
    qs = queries(["k1", "k2", "k3", "k4", "u1", "u2"])
    prov = provenance()
    with pytest.raises(InputError) as e:
        A.choose_audit(prov[prov.query_id.isin(qs.query_id)], qs, fraction=0.1, min_queries=6,
                       rng=np.random.default_rng(0))
    # 2 groups, the smaller with 2 pooled queries: at most 2 x 2 = 4 audit queries
    assert str(e.value) == ("audit.min_queries: group 'question' has 2 pooled queries, "
                            "fewer than its even share of the audit (3 of 6). Add queries to "
                            "this group, or lower audit.min_queries to 4 or less")


def test_queries_without_pooled_chunks_are_not_eligible():
    prov = provenance()
    prov = prov[~prov.query_id.isin(["u2", "u4"])]
    out = A.choose_audit(prov, queries(), fraction=0.25, min_queries=4,
                         rng=np.random.default_rng(0))
    assert set(out[out.group == "question"].query_id) == {"u1", "u3"}
    with pytest.raises(InputError, match="group 'question' has 1 pooled query"):
        A.choose_audit(prov[prov.query_id != "u3"], queries(), fraction=0.25, min_queries=4,
                       rng=np.random.default_rng(0))


@pytest.mark.parametrize("kwargs, name", [({"fraction": 1.5, "min_queries": 1}, "audit.fraction"),
                                          ({"fraction": 0.1, "min_queries": 0}, "audit.min_queries"),
                                          ({"fraction": 0.1, "min_queries": 2.5}, "audit.min_queries")])
def test_bad_audit_params_are_named(kwargs, name):
    with pytest.raises(InputError, match=name.replace(".", r"\.")):
        A.choose_audit(provenance(), queries(), rng=np.random.default_rng(0), **kwargs)


def test_audit_stage_writes_one_json_line_per_query(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    provenance().to_parquet(tmp_path / "prov.parquet")
    queries().to_parquet(tmp_path / "queries.parquet")
    (tmp_path / "pool.json").write_text('{"pool_version": "p-000000000001"}')
    params = {"seed": 1, "audit": {"fraction": 0.25, "min_queries": 4},
              "paths": {"provenance": "prov.parquet", "queries": "queries.parquet",
                        "pool_manifest": "pool.json", "audit": "out/audit.jsonl",
                        "audit_lock": "out/lock.json"}}
    stage = importlib.import_module("relgrade.pipeline.stages.audit")
    stage.run(Experiment.from_mapping(params))
    rows = [json.loads(line) for line in (tmp_path / "out/audit.jsonl").read_text().splitlines()]
    assert [list(r) for r in rows] == [["query_id", "group", "unique_share", "reason"]] * 4
    assert [r["query_id"] for r in rows][:3] == ["k3", "k2", "u2"]
