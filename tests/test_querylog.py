"""Query sampling from a query log: strata by hand, allocation, πps draws and their weights,
exactness on a whole population and unbiasedness over many seeded samples."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import pytest

from relgrade import query_sampling as querylog
from relgrade.errors import InputError
from relgrade.protocol.queries import validate_queries
from relgrade.query_sampling import (
    STRATA,
    allocate,
    inclusion_probabilities,
    normalize_query,
    sample_queries,
    strata,
)

# A 10-query log as issued, 37 rows, with case and whitespace variants of the same query.
TEN_QUERY_COUNTS = {
    "python tutorial": 12, "pandas merge": 6, "numpy array": 5, "click option": 3,
    "dvc repro": 3, "ndcg formula": 2, "kappa weights": 2, "pytest fixture": 2,
    "bm25 k1": 1, "trec qrels": 1,
}
VARIANTS = {"python tutorial": ["Python Tutorial", "  python\ttutorial ", "PYTHON  TUTORIAL"],
            "pandas merge": ["Pandas Merge"]}


def ten_query_log() -> pd.DataFrame:
    rows = []
    for query, count in TEN_QUERY_COUNTS.items():
        forms = VARIANTS.get(query, []) + [query] * count
        rows += forms[:count]
    return pd.DataFrame({"query": rows})


def population(n_queries=60, seed=11):
    """A log with a power-law count profile (3 head, 11 torso, 46 tail queries) and a
    per-query value to estimate that depends on traffic, so an unweighted mean would be off."""
    counts = [max(1, int(300 / (i + 1) ** 1.2)) for i in range(n_queries)]
    log = pd.DataFrame({"query": [f"query {i:02d}" for i in range(n_queries)], "count": counts})
    table = strata(log)
    noise = np.random.default_rng(seed).random(n_queries)
    value = dict(zip(table["query"], 0.2 + 0.6 * (table["count"] > 3) + 0.1 * noise))
    return table, value


def traffic_weighted_mean(table, value):
    c = table["count"].to_numpy(dtype=float)
    v = table["query"].map(value).to_numpy(dtype=float)
    return float((c * v).sum() / c.sum())


def weighted_estimate(sample, value):
    w = sample["weight"].to_numpy()
    v = np.array([value[q] for q in sample["query"].tolist()])
    return float((w * v).sum() / w.sum())


# --- normalisation and strata ---------------------------------------------------------

def test_normalisation_folds_case_whitespace_and_compatibility_forms():
    assert normalize_query("  Python\tTUTORIAL \u00a0 ") == "python tutorial"
    assert normalize_query("\uff30\uff59\uff54\uff48\uff4f\uff4e") == "python"  # full width
    assert normalize_query("Stra\u00dfe") == "stra\u00dfe"  # lower(), not casefold()


def test_strata_of_a_ten_query_log_by_hand():
    # T = 37; head cut 0.5*37 = 18.5, torso cut 0.8*37 = 29.6. Levels on [0, 37):
    # 12 -> [0,12) mid 6 head; 6 -> [12,18) mid 15 head; 5 -> [18,23) mid 20.5 torso
    # (0.5 of it lies before the head cut, 4.5 after); 3,3 -> [23,29) mid 26 torso;
    # 2,2,2 -> [29,35) mid 32 tail (the level straddles 29.6 and is not split);
    # 1,1 -> [35,37) mid 36 tail.
    table = strata(ten_query_log())
    assert table.columns.tolist() == ["query", "count", "stratum"]
    assert table["query"].tolist() == [
        "python tutorial", "pandas merge", "numpy array", "click option", "dvc repro",
        "kappa weights", "ndcg formula", "pytest fixture", "bm25 k1", "trec qrels"]
    assert table["count"].tolist() == [12, 6, 5, 3, 3, 2, 2, 2, 1, 1]
    assert table["stratum"].tolist() == ["head"] * 2 + ["torso"] * 3 + ["tail"] * 5
    assert str(table["count"].dtype) == "int64"
    s = querylog.summary(table)
    assert s["queries"].tolist() == [2, 3, 5]
    assert s["traffic"].tolist() == [18, 11, 8]
    assert s["share"].tolist() == [18 / 37, 11 / 37, 8 / 37]


def test_strata_with_other_shares_move_the_cuts():
    # head cut 0.25*37 = 9.25: 12 -> mid 6 head; 6 -> mid 15 >= 9.25, < (0.25+0.5)*37 = 27.75
    # torso; 5 -> 20.5 torso; 3,3 -> 26 torso; 2,2,2 -> 32 tail; 1,1 -> 36 tail
    table = strata(ten_query_log(), head_share=0.25, torso_share=0.5)
    assert table["stratum"].tolist() == ["head"] + ["torso"] * 4 + ["tail"] * 5


def test_a_midpoint_on_a_cut_goes_to_the_lower_stratum():
    # T = 10: a -> [0,6) mid 3 < 5 head; b -> [6,10) mid 8 = 0.8*10, not below: tail
    log = pd.DataFrame({"query": ["a", "b"], "count": [6, 4]})
    table = strata(log)
    assert table["stratum"].tolist() == ["head", "tail"]
    assert querylog.summary(table)["queries"].tolist() == [1, 0, 1]


def test_one_dominant_query_is_the_whole_head():
    # "a" covers [0, 90) of 100: mid 45 < 50 head; the rest sits in [90, 100): tail
    log = pd.DataFrame({"query": ["a", "b", "c"], "count": [90, 6, 4]})
    assert strata(log)["stratum"].tolist() == ["head", "tail", "tail"]


def test_counted_rows_are_added_up_over_spelling_variants_and_input_is_not_modified():
    log = pd.DataFrame({"query": ["Foo Bar", "foo  bar", "baz"], "count": ["3", 2, 1]})
    before = log.copy()
    table = strata(log)
    assert table["query"].tolist() == ["foo bar", "baz"]
    assert table["count"].tolist() == [5, 1]
    pd.testing.assert_frame_equal(log, before)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2.5", "abc", "", True, None])
def test_a_count_that_is_not_a_positive_integer_names_its_line(bad):
    log = pd.DataFrame({"query": ["a", "b"], "count": [3, bad]}, dtype=object)
    with pytest.raises(InputError) as e:
        strata(log, path="log.tsv", lines=[2, 5])
    assert str(e.value).startswith("log.tsv:5: count must be a positive integer (found ")


def test_an_integer_count_column_below_one_names_its_line():
    log = pd.DataFrame({"query": ["a", "b"], "count": np.array([3, 0], dtype=np.int64)})
    with pytest.raises(InputError) as e:
        strata(log, path="log.tsv", lines=[2, 3])
    assert str(e.value) == ("log.tsv:3: count must be a positive integer (found 0). "
                            "Drop queries with no traffic")


def test_empty_log_and_empty_or_missing_queries_are_refused():
    with pytest.raises(InputError, match="query log is empty"):
        strata(pd.DataFrame({"query": []}, dtype=object), path="log.txt")
    with pytest.raises(InputError) as e:
        strata(pd.DataFrame({"query": ["a", " \t "]}), path="log.txt", lines=[1, 4])
    assert str(e.value) == "log.txt:4: query is empty (found ' \\t ')"
    with pytest.raises(InputError, match="query must be text"):
        strata(pd.DataFrame({"query": ["a", 7]}, dtype=object))
    with pytest.raises(InputError, match="no `query` column"):
        strata(pd.DataFrame({"q": ["a"]}))


@pytest.mark.parametrize("head,torso,rule", [
    (0, 0.3, "head share must be greater than 0 and less than 1"),
    (1, 0, "head share must be greater than 0 and less than 1"),
    (0.5, -0.1, "torso share must not be negative"),
    (0.6, 0.4, "head share + torso share must be less than 1"),
    (0.7, 0.3, "head share + torso share must be less than 1"),
    (float("nan"), 0.3, "head share must be a number"),
    ("0.5", 0.3, "head share must be a number"),
])
def test_bad_shares_are_refused(head, torso, rule):
    with pytest.raises(InputError) as e:
        strata(ten_query_log(), head_share=head, torso_share=torso)
    assert str(e.value).startswith(rule)


def test_a_zero_torso_share_leaves_head_and_tail():
    table = strata(ten_query_log(), head_share=0.5, torso_share=0)
    assert table["stratum"].tolist() == ["head"] * 2 + ["tail"] * 8


# --- allocation --------------------------------------------------------------------------

def test_equal_allocation_gives_a_small_stratum_all_it_has_and_splits_the_rest():
    assert allocate({"head": 2, "torso": 30, "tail": 300}, {s: 1 for s in STRATA}, n=30) \
        == {"head": 2, "torso": 14, "tail": 14}


def test_proportional_allocation_by_hand():
    # quotas 10*(50, 30, 20)/100 = 5, 3, 2; head holds 2 -> all of it, 8 left;
    # quotas 8*30/50 = 4.8 and 8*20/50 = 3.2 -> floors 4, 3; the remaining 1 to torso (.8)
    assert allocate({"head": 2, "torso": 10, "tail": 100},
                    {"head": 50, "torso": 30, "tail": 20}, n=10) \
        == {"head": 2, "torso": 5, "tail": 3}


def test_every_stratum_with_a_share_gets_at_least_one_query():
    # quotas 3*(.98, .01, .01): torso and tail below 1 get 1 each, head the last one
    assert allocate({"head": 2, "torso": 5, "tail": 5},
                    {"head": 98, "torso": 1, "tail": 1}, n=3) == {"head": 1, "torso": 1, "tail": 1}


def test_equal_remainders_go_to_the_more_frequent_stratum():
    # quotas 4/3 each: floors 1, 1, 1; one left, remainders tie -> head
    assert allocate({s: 10 for s in STRATA}, {s: 1 for s in STRATA}, n=4) \
        == {"head": 2, "torso": 1, "tail": 1}


def test_a_stratum_with_no_share_or_no_queries_gets_none():
    assert allocate({"head": 0, "torso": 4, "tail": 9}, {"head": 1, "torso": 0, "tail": 1},
                    n=5) == {"head": 0, "torso": 0, "tail": 5}


def test_allocation_refuses_n_beyond_capacity_or_below_the_strata_count():
    with pytest.raises(InputError) as e:
        allocate({"head": 1, "torso": 2, "tail": 3}, {s: 1 for s in STRATA}, n=7)
    assert str(e.value) == ("n is larger than the distinct queries the sampled strata hold "
                            "(found n=7, 6 distinct queries). Ask for at most 6 queries")
    with pytest.raises(InputError, match="n must be at least 3, one query per sampled stratum"):
        allocate({"head": 1, "torso": 2, "tail": 3}, {s: 1 for s in STRATA}, n=2)
    for bad in (0, -3, True, 2.0):
        with pytest.raises(InputError, match="n must be a positive integer"):
            allocate({"head": 1, "torso": 2, "tail": 3}, {s: 1 for s in STRATA}, n=bad)


# --- inclusion probabilities and weights ------------------------------------------------

def test_inclusion_probabilities_by_hand():
    # m=2, T=14: 2*10 >= 14 -> "10" is certain; 1 place left over traffic 4 -> c/4
    assert inclusion_probabilities([10, 1, 1, 2], 2).tolist() == [1.0, 0.25, 0.25, 0.5]
    # no certainty: 2*c/6
    assert inclusion_probabilities([2, 1, 1, 1, 1], 2).tolist() == pytest.approx(
        [4 / 6, 2 / 6, 2 / 6, 2 / 6, 2 / 6], rel=1e-15)
    assert inclusion_probabilities([5, 3, 1], 3).tolist() == [1.0, 1.0, 1.0]
    assert inclusion_probabilities([5, 3, 1], 0).tolist() == [0.0, 0.0, 0.0]
    # a certainty that appears only after the first round: m=3, T=20: 3*10 >= 20 certain;
    # then 2 places over traffic 10: 2*5 >= 10 certain; then 1 place over 5: c/5
    assert inclusion_probabilities([10, 5, 2, 2, 1], 3).tolist() == [1.0, 1.0, 0.4, 0.4, 0.2]


def test_weight_is_stratum_traffic_over_sampled_queries_without_certainty():
    log = pd.DataFrame({"query": ["a", "b", "c", "d", "e", "f"], "count": [30, 2, 1, 1, 1, 1]})
    table = strata(log)  # T=36: a -> mid 15 head; b -> mid 31, 1s -> mid 34, both >= 28.8: tail
    assert table["stratum"].tolist() == ["head"] + ["tail"] * 5
    s = sample_queries(table, n=3, rng=np.random.default_rng(4))
    tail = s[s["group"] == "tail"]
    assert len(tail) == 2
    assert tail["weight"].tolist() == [6 / 2, 6 / 2]  # T_tail / m_tail
    assert s.loc[s["group"] == "head", "weight"].tolist() == [30.0]


def test_a_certain_query_carries_its_own_count_and_the_rest_share_what_is_left():
    # one stratum (torso empty, tail = everything but "h"): tail counts 10, 5, 2, 2, 1;
    # m=3 -> 10 and 5 certain (see above), one more from {2, 2, 1} weighted 5/1
    log = pd.DataFrame({"query": ["h", "t1", "t2", "t3", "t4", "t5"],
                        "count": [80, 10, 5, 2, 2, 1]})
    table = strata(log)
    assert table["stratum"].tolist() == ["head"] + ["tail"] * 5
    s = sample_queries(table, n=4, allocation={"head": 1, "tail": 3},
                       rng=np.random.default_rng(0))
    tail = s[s["group"] == "tail"]
    assert tail["query"].tolist()[:2] == ["t1", "t2"]
    assert tail["weight"].tolist() == [10.0, 5.0, 5.0]
    assert tail["weight"].sum() == 20.0


def test_sample_is_a_valid_queries_table_with_stable_hash_ids():
    table = strata(ten_query_log())
    s = sample_queries(table, n=6, rng=np.random.default_rng(1))
    assert s.columns.tolist() == ["query_id", "query", "group", "weight", "count"]
    valid = validate_queries(s, groups=list(STRATA))
    assert len(valid) == 6
    for qid, q in zip(s["query_id"], s["query"]):
        assert qid == "q" + hashlib.sha256(q.encode("utf-8")).hexdigest()[:12]
    by_id = valid.set_index("query_id")["weight"]
    assert by_id.to_dict() == s.set_index("query_id")["weight"].to_dict()
    assert s["group"].tolist() == sorted(s["group"], key=STRATA.index)


def test_ids_grow_until_sampled_ids_differ():
    queries = [f"query {i}" for i in range(40)]  # 40 ids of one hex digit must collide
    ids = querylog._ids(queries, hex_digits=1)
    assert len(set(ids)) == 40
    assert len({len(i) for i in ids}) == 1
    digits = len(ids[0]) - 1
    assert ids == [querylog.query_id(q, hex_digits=digits) for q in queries]
    assert len({querylog.query_id(q, hex_digits=digits - 1) for q in queries}) < 40


def test_same_seed_same_sample_and_ids_do_not_depend_on_the_seed():
    table, _ = population()
    a = sample_queries(table, n=12, rng=np.random.default_rng(7))
    b = sample_queries(table, n=12, rng=np.random.default_rng(7))
    pd.testing.assert_frame_equal(a, b)
    others = [sample_queries(table, n=12, rng=np.random.default_rng(s)) for s in range(8, 14)]
    assert any(o["query"].tolist() != a["query"].tolist() for o in others)
    ids = dict(zip(a["query"], a["query_id"]))
    for o in others:
        for q, i in zip(o["query"], o["query_id"]):
            if q in ids:
                assert ids[q] == i


def test_whole_population_weighted_mean_equals_the_traffic_weighted_mean():
    table, value = population()
    for allocation in ("equal", "proportional", {"head": 1, "torso": 2, "tail": 5}):
        s = sample_queries(table, n=len(table), allocation=allocation,
                           rng=np.random.default_rng(3))
        assert sorted(s["query"]) == sorted(table["query"])
        assert (s["weight"].to_numpy() == s["count"].to_numpy(dtype=float)).all()
        assert weighted_estimate(s, value) == pytest.approx(
            traffic_weighted_mean(table, value), rel=1e-12)


@pytest.mark.parametrize("allocation,sizes", [("equal", [3, 3, 3]),
                                               ("proportional", [3, 4, 2])])
def test_weighted_mean_is_unbiased_over_many_seeded_samples(allocation, sizes):
    table, value = population()
    assert querylog.summary(table)["queries"].tolist() == [3, 11, 46]
    truth = traffic_weighted_mean(table, value)
    unweighted_truth = float(table["query"].map(value).mean())
    assert abs(truth - unweighted_truth) > 0.1  # the weights matter for this value
    traffic = table.groupby("stratum")["count"].sum().reindex(STRATA).to_numpy(dtype=float)
    rng = np.random.default_rng(20261130)
    estimates = []
    for _ in range(2000):
        s = sample_queries(table, n=9, allocation=allocation, rng=rng)
        code = np.array([STRATA.index(g) for g in s["group"].tolist()])
        assert np.bincount(code, minlength=3).tolist() == sizes
        # in every sample the weights of a stratum add up to its traffic
        assert np.allclose(np.bincount(code, weights=s["weight"].to_numpy(), minlength=3),
                           traffic, rtol=1e-12, atol=0)
        estimates.append(weighted_estimate(s, value))
    estimates = np.array(estimates)
    se = estimates.std(ddof=1) / math.sqrt(len(estimates))
    assert se > 0
    assert abs(estimates.mean() - truth) < 3 * se


def test_selection_frequencies_match_the_inclusion_probabilities():
    # n=6, equal: 2 per stratum. Head (300, 130, 80): 2*300 >= 510, so "query 00" is
    # certain and the other place goes to 130 or 80 with probability 130/210, 80/210.
    table, _ = population()
    n, draws = 6, 2000
    alloc = allocate(table.groupby("stratum").size().to_dict(),
                     {s: 1 for s in STRATA}, n=n)
    assert alloc == {"head": 2, "torso": 2, "tail": 2}
    expected = {}
    for s in STRATA:
        members = table[table["stratum"] == s]
        pi = inclusion_probabilities(members["count"].to_numpy(), alloc[s])
        expected.update(zip(members["query"], pi))
    assert [expected[f"query 0{i}"] for i in range(3)] == [1.0, 130 / 210, 80 / 210]
    assert sum(expected.values()) == pytest.approx(n)
    rng = np.random.default_rng(5)
    hits = dict.fromkeys(expected, 0)
    for _ in range(draws):
        for q in sample_queries(table, n=n, rng=rng)["query"]:
            hits[q] += 1
    for q, pi in expected.items():
        sd = math.sqrt(pi * (1 - pi) / draws)
        assert abs(hits[q] / draws - pi) <= 4 * sd + 1e-12, q


def test_sampling_refuses_bad_requests():
    table = strata(ten_query_log())
    rng = np.random.default_rng(0)
    with pytest.raises(InputError) as e:
        sample_queries(table, n=11, rng=rng)
    assert str(e.value) == ("n is larger than the distinct queries the sampled strata hold "
                            "(found n=11, 10 distinct queries). Ask for at most 10 queries")
    with pytest.raises(InputError, match="allocation must be equal, proportional"):
        sample_queries(table, n=3, allocation="neyman", rng=rng)
    with pytest.raises(InputError, match="allocation names a stratum that is not one of"):
        sample_queries(table, n=3, allocation={"body": 1}, rng=rng)
    with pytest.raises(InputError, match="tail: allocation share must be a non-negative"):
        sample_queries(table, n=3, allocation={"head": 1, "tail": -1}, rng=rng)
    with pytest.raises(InputError, match="allocation gives no share to a stratum"):
        sample_queries(table, n=3, allocation={"head": 0}, rng=rng)
    with pytest.raises(InputError, match="counts table is missing column"):
        sample_queries(table.drop(columns="stratum"), n=3, rng=rng)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        sample_queries(table, n=3, rng=0)
