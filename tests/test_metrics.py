"""Measure names and per-query metrics, each rule checked on a small hand-computed case."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.evaluation.measures import Measure, parse_measure, protocol_measures
from relgrade.evaluation.metrics import excluded_queries, index_qrels, mean, per_query
from relgrade.experiment.files import Experiment

EXP10 = "nDCG(dcg='exp-log2')@10"


def qrels(rows):
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grade"])


def run(rows):
    """Rows (query, chunk[, score]); ranks follow the row order, scores fall with it."""
    out = []
    for i, r in enumerate(rows):
        q, c = r[0], r[1]
        score = r[2] if len(r) > 2 else float(len(rows) - i)
        out.append((q, c, i + 1, score))
    return pd.DataFrame(out, columns=["query_id", "chunk_id", "rank", "score"])


def values(pq, measure):
    sub = pq[pq["measure"] == measure]
    return dict(zip(sub["query_id"], sub["value"]))


# --- measure names -------------------------------------------------------------------

@pytest.mark.parametrize("name, canonical", [
    ("nDCG(dcg='exp-log2')@10", "nDCG(dcg='exp-log2')@10"),
    ("NDCG(dcg='exp-log2')@10", "nDCG(dcg='exp-log2')@10"),
    ("nDCG(dcg='log2')@5", "nDCG@5"),
    ("nDCG", "nDCG"),
    ("R@10", "R@10"),
    ("R(rel=1)@10", "R@10"),
    ("Recall(rel=2)@100", "R(rel=2)@100"),
    ("MRR@10", "RR@10"),
    ("RR", "RR"),
    ("P(rel=2)@5", "P(rel=2)@5"),
    ("Judged@10", "Judged@10"),
    (" RR @ 3 ", "RR@3"),
])
def test_measure_names_parse_to_their_canonical_form(name, canonical):
    m = parse_measure(name)
    assert str(m) == canonical
    assert parse_measure(str(m)) == m  # the canonical string is the identity


def test_relevant_min_sets_the_default_rel_and_shows_in_the_name():
    assert parse_measure("R@10", relevant_min=2) == Measure("R", 10, rel=2)
    assert str(parse_measure("RR@10", relevant_min=2)) == "RR(rel=2)@10"
    assert str(parse_measure("RR(rel=1)@10", relevant_min=2)) == "RR@10"
    assert str(parse_measure("nDCG@10", relevant_min=2)) == "nDCG@10"


@pytest.mark.parametrize("name, message", [
    ("NAP@10", "NAP@10: unknown measure (found NAP)"),
    ("nDCG@0", "nDCG@0: a measure's cutoff must be a positive integer (found 0)"),
    ("nDCG@ten", "nDCG@ten: measure parameters must be literal values"),
    ("nDCG(rel=2)@10", "nDCG(rel=2)@10: nDCG takes no parameter `rel`"),
    ("nDCG(dcg='exp')@10", "nDCG(dcg='exp')@10: nDCG's dcg must be 'log2' or 'exp-log2' "
                           "(found 'exp')"),
    ("R(2)@10", "R(2)@10: measure parameters are given by name, e.g. R(rel=2)@10"),
    ("R@@10", "R@@10: not a measure name"),
])
def test_bad_measure_names_are_input_errors(name, message):
    with pytest.raises(InputError) as e:
        parse_measure(name)
    assert str(e.value).startswith(message)


def test_protocol_measures_cover_each_cutoff():
    names = [str(m) for m in protocol_measures([3, 10], relevant_min=1)]
    assert names == ["nDCG(dcg='exp-log2')@3", "R@3", "RR@3", "Judged@3",
                     "nDCG(dcg='exp-log2')@10", "R@10", "RR@10", "Judged@10"]


# --- the brief's worked cases --------------------------------------------------------

def test_exp_gain_ndcg_at_3_on_five_graded_chunks():
    q = qrels([("q1", "d1", 2), ("q1", "d2", 2), ("q1", "d3", 1), ("q1", "d4", 1),
               ("q1", "d5", 1)])
    r = run([("q1", "d3"), ("q1", "d1"), ("q1", "d9")])
    got = values(per_query(qrels=q, run=r, measures=["nDCG(dcg='exp-log2')@3"]),
                 "nDCG(dcg='exp-log2')@3")
    dcg = 1 / np.log2(2) + 3 / np.log2(3)
    idcg = 3 + 3 / np.log2(3) + 1 / 2
    assert got["q1"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert round(got["q1"], 4) == 0.5364


def test_missing_query_counts_as_zero_in_the_mean():
    q = qrels([("q1", "a", 1), ("q2", "b", 1), ("q2", "c", 1), ("q3", "e", 2)])
    r = run([("q1", "a"), ("q1", "x"), ("q2", "y"), ("q2", "b")])
    pq = per_query(qrels=q, run=r, measures=[EXP10, "RR"])
    means = mean(pq)
    q2 = (1 / np.log2(3)) / (1 + 1 / np.log2(3))
    assert means[EXP10] == pytest.approx((1 + q2 + 0) / 3, abs=1e-12)
    assert round(means[EXP10], 4) == 0.4623
    assert means["RR"] == pytest.approx((1 + 0.5 + 0) / 3, abs=1e-12)
    assert values(pq, "RR") == {"q1": 1.0, "q2": 0.5, "q3": 0.0}


def test_skip_leaves_a_missing_query_out_as_trec_eval_does():
    q = qrels([("q1", "a", 1), ("q2", "b", 1), ("q2", "c", 1), ("q3", "e", 2)])
    r = run([("q1", "a"), ("q1", "x"), ("q2", "y"), ("q2", "b")])
    pq = per_query(qrels=q, run=r, measures=["RR"], on_missing_query="skip")
    assert values(pq, "RR") == {"q1": 1.0, "q2": 0.5}
    assert mean(pq)["RR"] == 0.75


def _tied():
    q = qrels([("q1", "d3", 1), ("q2", "d10", 1)])
    r = run([("q1", "d1", 1.0), ("q1", "d2", 1.0), ("q1", "d3", 1.0),
             ("q2", "d9", 0.5), ("q2", "d10", 0.5)])
    return q, r


def test_score_ties_break_by_chunk_id_descending_for_every_measure():
    q, r = _tied()
    # trec_eval's order: q1 d3, d2, d1 (d3 first); q2 "d9" > "d10" as bytes, so d10 is second
    means = mean(per_query(qrels=q, run=r, measures=["RR", "nDCG@10", "R@1", "P@1",
                                                     "Judged@1", EXP10]))
    assert means["RR"] == pytest.approx((1 + 1 / 2) / 2, abs=1e-12)
    assert means["nDCG@10"] == pytest.approx((1 + 1 / np.log2(3)) / 2, abs=1e-12)
    assert round(means["RR"], 4) == 0.75 and round(means["nDCG@10"], 4) == 0.8155
    assert means["R@1"] == 0.5 and means["P@1"] == 0.5 and means["Judged@1"] == 0.5
    assert means[EXP10] == means["nDCG@10"]  # grades 0/1: both gains agree


def test_rank_ties_use_the_run_order_for_every_measure():
    q, r = _tied()
    means = mean(per_query(qrels=q, run=r, measures=["RR", "nDCG@10", "R@1"], ties="rank"))
    assert means["RR"] == pytest.approx((1 / 3 + 1 / 2) / 2, abs=1e-12)
    assert means["nDCG@10"] == pytest.approx((1 / np.log2(4) + 1 / np.log2(3)) / 2, abs=1e-12)
    assert means["R@1"] == 0.0


def test_repeated_qrels_pair_is_an_error_naming_query_and_chunk():
    q = qrels([("q1", "a", 1), ("q1", "b", 0), ("q1", "a", 2)])
    with pytest.raises(InputError) as e:
        per_query(qrels=q, run=run([("q1", "a")]), measures=["RR"])
    assert str(e.value) == ("query q1, chunk a: one (query, chunk) pair is graded twice in "
                            "the qrels. Keep one grade per pair")


def test_chunk_twice_in_a_ranked_list_is_an_error_naming_query_and_chunk():
    q = qrels([("q1", "a", 1)])
    r = run([("q1", "b"), ("q1", "a"), ("q1", "b")])
    with pytest.raises(InputError) as e:
        per_query(qrels=q, run=r, measures=["RR@10"])
    assert str(e.value) == ("query q1, chunk b: a chunk is listed twice for one query. "
                            "List each chunk at most once per query")


def test_cutoff_cuts_rr_at_10_ignores_a_first_relevant_at_rank_11():
    q = qrels([("q1", "rel", 1)])
    r = run([("q1", f"n{i:02d}") for i in range(10)] + [("q1", "rel")])
    got = {m: values(per_query(qrels=q, run=r, measures=[m]), m)["q1"]
           for m in ["RR@10", "RR@11", "RR", "R@10", "R@11", "nDCG@10"]}
    assert got == {"RR@10": 0.0, "RR@11": 1 / 11, "RR": 1 / 11, "R@10": 0.0, "R@11": 1.0,
                   "nDCG@10": 0.0}


def test_nothing_relevant_retrieved_scores_zero():
    q = qrels([("q1", "a", 2), ("q1", "b", 0)])
    r = run([("q1", "b"), ("q1", "x")])
    pq = per_query(qrels=q, run=r, measures=[EXP10, "R@10", "RR@10", "P@10", "Judged@10"])
    assert values(pq, EXP10) == {"q1": 0.0}
    assert values(pq, "R@10") == {"q1": 0.0}
    assert values(pq, "RR@10") == {"q1": 0.0}
    assert values(pq, "P@10") == {"q1": 0.0}
    assert values(pq, "Judged@10") == {"q1": 1 / 2}


def test_query_without_relevant_chunk_is_excluded_and_counted():
    q = qrels([("q1", "a", 1), ("q2", "b", 0), ("q2", "c", 0)])
    r = run([("q1", "a"), ("q2", "b")])
    measures = [EXP10, "R@10", "RR@10", "P@10", "Judged@10"]
    pq = per_query(qrels=q, run=r, measures=measures)
    for m in measures[:4]:
        assert values(pq, m) == {"q1": 1.0 if m != "P@10" else 0.1}
    assert values(pq, "Judged@10") == {"q1": 1.0, "q2": 1.0}
    assert not pq["value"].isna().any()
    assert excluded_queries(q, measures) == {EXP10: ["q2"], "R@10": ["q2"], "RR@10": ["q2"],
                                             "P@10": ["q2"], "Judged@10": []}
    assert mean(pq)["RR@10"] == 1.0


def test_relevance_threshold_changes_what_counts():
    q = qrels([("q1", "a", 1), ("q1", "b", 2)])
    r = run([("q1", "a"), ("q1", "b")])
    pq = per_query(qrels=q, run=r, measures=["RR(rel=2)", "R(rel=2)@1", "RR"])
    assert values(pq, "RR(rel=2)") == {"q1": 0.5}
    assert values(pq, "R(rel=2)@1") == {"q1": 0.0}
    assert values(pq, "RR") == {"q1": 1.0}
    # relevant_min=2 makes plain names mean rel=2, and the name says so
    pq2 = per_query(qrels=q, run=r, measures=["RR"], relevant_min=2)
    assert values(pq2, "RR(rel=2)") == {"q1": 0.5}


def test_ideal_dcg_uses_every_graded_chunk_not_only_retrieved_ones():
    q = qrels([("q1", "a", 2), ("q1", "b", 1), ("q1", "c", 0)])
    r = run([("q1", "b"), ("q1", "c")])
    pq = per_query(qrels=q, run=r, measures=["nDCG@10", EXP10])
    assert values(pq, "nDCG@10")["q1"] == pytest.approx(1 / (2 + 1 / np.log2(3)), abs=1e-12)
    assert values(pq, EXP10)["q1"] == pytest.approx(1 / (3 + 1 / np.log2(3)), abs=1e-12)


def test_ideal_dcg_is_cut_at_k_too():
    q = qrels([("q1", "a", 2), ("q1", "b", 2), ("q1", "c", 1)])
    r = run([("q1", "c"), ("q1", "a")])
    got = values(per_query(qrels=q, run=r, measures=["nDCG(dcg='exp-log2')@1"]),
                 "nDCG(dcg='exp-log2')@1")
    assert got["q1"] == pytest.approx(1 / 3, abs=1e-12)  # dcg@1 = 1, idcg@1 = 3


def test_unjudged_chunks_have_gain_zero_and_lower_judged_at_k():
    q = qrels([("q1", "a", 2)])
    r = run([("q1", "u1"), ("q1", "a"), ("q1", "u2")])
    pq = per_query(qrels=q, run=r, measures=["nDCG@10", "Judged@2", "Judged@10", "Judged"])
    assert values(pq, "nDCG@10")["q1"] == pytest.approx((2 / np.log2(3)) / 2, abs=1e-12)
    assert values(pq, "Judged@2") == {"q1": 0.5}
    assert values(pq, "Judged@10") == {"q1": 1 / 3}  # three retrieved: min(k, 3) = 3
    assert values(pq, "Judged") == {"q1": 1 / 3}


def test_precision_divides_by_k_even_when_fewer_are_retrieved():
    q = qrels([("q1", "a", 1)])
    pq = per_query(qrels=q, run=run([("q1", "a")]), measures=["P@5", "P"])
    assert values(pq, "P@5") == {"q1": 0.2}
    assert values(pq, "P") == {"q1": 1.0}


def test_queries_only_in_the_run_are_ignored():
    q = qrels([("q1", "a", 1)])
    r = run([("q1", "a"), ("zz", "a"), ("zz", "b")])
    pq = per_query(qrels=q, run=r, measures=["RR", "Judged@10"])
    assert set(pq["query_id"]) == {"q1"}
    assert mean(pq).tolist() == [1.0, 1.0]


def test_per_query_table_layout_and_order():
    q = qrels([("q2", "a", 1), ("q10", "b", 1)])
    r = run([("q2", "a"), ("q10", "x")])
    pq = per_query(qrels=q, run=r, measures=["RR", "R@5"])
    assert list(pq.columns) == ["query_id", "measure", "value"]
    assert pq.values.tolist() == [["q10", "RR", 0.0], ["q2", "RR", 1.0],
                                  ["q10", "R@5", 0.0], ["q2", "R@5", 1.0]]
    assert pq["value"].dtype == np.float64


def test_numeric_ids_are_the_same_ids_as_their_text():
    q = pd.DataFrame({"query_id": [1, 1], "chunk_id": [4411, 7], "grade": [2, 1]})
    r = run([("1", "7"), ("1", "4411")])
    got = values(per_query(qrels=q, run=r, measures=["RR(rel=2)"]), "RR(rel=2)")
    assert got == {"1": 0.5}


def test_stacked_arms_are_scored_separately():
    q = qrels([("q1", "a", 1)])
    r = pd.concat([run([("q1", "a"), ("q1", "b")]).assign(arm="good"),
                   run([("q1", "b"), ("q1", "a")]).assign(arm="bad")], ignore_index=True)
    pq = per_query(qrels=q, run=r, measures=["RR"])
    assert pq.values.tolist() == [["bad", "q1", "RR", 0.5], ["good", "q1", "RR", 1.0]]
    assert mean(pq).to_dict() == {("bad", "RR"): 0.5, ("good", "RR"): 1.0}


def test_weighted_mean_uses_traffic_weights():
    q = qrels([("q1", "a", 1), ("q2", "b", 1)])
    pq = per_query(qrels=q, run=run([("q1", "a"), ("q2", "x"), ("q2", "b")]), measures=["RR"])
    assert mean(pq, weights={"q1": 3.0, "q2": 1.0})["RR"] == pytest.approx(
        (3 * 1.0 + 1 * 0.5) / 4, abs=1e-12)
    with pytest.raises(InputError, match="query q2: a query has no weight"):
        mean(pq, weights={"q1": 1.0})


def test_inputs_are_not_modified_and_key_index_is_reusable():
    q = qrels([("q1", "a", 1), ("q1", "b", 2)])
    r = run([("q1", "b"), ("q1", "a")])
    q0, r0 = q.copy(), r.copy()
    first = per_query(qrels=q, run=r, measures=[EXP10])
    again = per_query(qrels=index_qrels(q), run=r, measures=[EXP10])
    pd.testing.assert_frame_equal(first, again)
    pd.testing.assert_frame_equal(q, q0)
    pd.testing.assert_frame_equal(r, r0)


def test_bad_policy_and_bad_scores_are_input_errors():
    q = qrels([("q1", "a", 1)])
    with pytest.raises(InputError, match="on_missing_query must be"):
        per_query(qrels=q, run=run([("q1", "a")]), measures=["RR"], on_missing_query="nan")
    with pytest.raises(InputError, match="query q1, chunk a: score must be a finite number"):
        per_query(qrels=q, run=run([("q1", "a", np.nan)]), measures=["RR"])
    with pytest.raises(InputError, match="a grade must be an integer"):
        per_query(qrels=qrels([("q1", "a", 1.5)]), run=run([("q1", "a")]), measures=["RR"])


# --- properties every measure must have ----------------------------------------------

# Each measure family and what it guarantees; a family missing here fails the test below.
PROPERTIES = {
    "nDCG": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "R": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "RR": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "P": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "Judged": {"bounds": (0.0, 1.0), "needs_relevant": False},
    "AP": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "Rprec": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "Bpref": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "Success": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "infAP": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "ERR": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "IPrec": {"bounds": (0.0, 1.0), "needs_relevant": True},
    "RBP": {"bounds": (0.0, 1.0), "needs_relevant": False},
    "RBPResid": {"bounds": (0.0, 1.0), "needs_relevant": False},
    "Unjudged": {"bounds": (0.0, 1.0), "needs_relevant": False},
    "NumRet": {"bounds": (0.0, np.inf), "needs_relevant": False},
    "NumRel": {"bounds": (0.0, np.inf), "needs_relevant": False},
    # estimates from a sampled pool: 1/pi weights can carry them above 1
    "xinfAP": {"bounds": (0.0, np.inf), "needs_relevant": True},
    "infNDCG": {"bounds": (0.0, np.inf), "needs_relevant": True},
}
# measures that read inclusion probabilities; their own tests are in test_inferred_measures
INFERRED = ["xinfAP", "xinfAP@5", "infNDCG", "infNDCG(dcg='exp-log2')@3"]
ALL = ["nDCG@3", "nDCG(dcg='exp-log2')@5", "nDCG", "nDCG(gains={1:5})@5",
       "nDCG(judged_only=True)@3", "R@3", "R(rel=2)@10", "RR@3", "RR", "P@3", "P(rel=2)@5",
       "Judged@3", "Judged", "AP", "AP@5", "AP(judged_only=True)", "Rprec", "Bpref",
       "Success@3", "infAP", "ERR@5", "IPrec@0.5", "IPrec@0.0", "RBP(p=0.9)", "RBP(rel=2)@5",
       "RBPResid(p=0.9)", "Unjudged@5", "NumRet", "NumRelRet", "NumRel(rel=2)"]


def test_every_measure_family_is_classified():
    from relgrade.evaluation.measures import _ALIASES, SPECS

    assert set(_ALIASES.values()) == set(PROPERTIES)
    assert {parse_measure(m).name for m in ALL + INFERRED} == set(PROPERTIES)
    assert {parse_measure(m).name for m in INFERRED} == {
        n for n, spec in SPECS.items() if spec.get("inclusion")}
    for m in ALL + INFERRED:
        assert parse_measure(m).needs_relevant is PROPERTIES[parse_measure(m).name][
            "needs_relevant"]


def _random_case(rng):
    rows_q, rows_r = [], []
    for qi in range(12):
        chunks = [f"c{j}" for j in range(15)]
        for c in rng.choice(chunks, size=rng.integers(1, 8), replace=False):
            rows_q.append((f"q{qi}", c, int(rng.integers(0, 3))))
        if qi % 5 != 4:
            for c in rng.choice(chunks + ["u1", "u2"], size=rng.integers(1, 12), replace=False):
                rows_r.append((f"q{qi}", c, 0, float(rng.integers(0, 4))))
    r = pd.DataFrame(rows_r, columns=["query_id", "chunk_id", "rank", "score"])
    r["rank"] = r.groupby("query_id").cumcount() + 1
    return qrels(rows_q), r


@pytest.mark.parametrize("seed", range(5))
def test_measures_stay_in_bounds_and_ignore_row_order_and_id_names(seed):
    rng = np.random.default_rng(seed)
    q, r = _random_case(rng)
    pool = q[["query_id", "chunk_id"]].assign(inclusion_prob=np.where(
        np.arange(len(q)) % 3 == 0, 0.5, 1.0))
    base = per_query(qrels=q, run=r, measures=ALL + INFERRED, inclusion=pool)
    for m in ALL + INFERRED:
        lo, hi = PROPERTIES[parse_measure(m).name]["bounds"]
        v = base.loc[base["measure"] == str(parse_measure(m)), "value"]
        assert ((v >= lo) & (v <= hi)).all()
    shuffled = per_query(qrels=q.sample(frac=1, random_state=seed),
                         run=r.sample(frac=1, random_state=seed), measures=ALL + INFERRED,
                         inclusion=pool.sample(frac=1, random_state=seed))
    pd.testing.assert_frame_equal(base, shuffled)
    # renaming queries (order-preserving) changes no value
    rename = {f"q{i}": f"query-q{i}" for i in range(12)}
    renamed = per_query(qrels=q.assign(query_id=q["query_id"].map(rename)),
                        run=r.assign(query_id=r["query_id"].map(rename)),
                        measures=ALL + INFERRED,
                        inclusion=pool.assign(query_id=pool["query_id"].map(rename)))
    assert renamed["value"].tolist() == base["value"].tolist()


# --- the metrics stage ---------------------------------------------------------------

def _stage_experiment(tmp_path):
    import hashlib
    import json

    from relgrade.io.files import write_jsonl

    key_rows = [{"query_id": "q1", "chunk_id": "a", "grade": 2},
                {"query_id": "q1", "chunk_id": "b", "grade": 0},
                {"query_id": "q2", "chunk_id": "c", "grade": 1}]
    paths = {"key": "key.jsonl", "record": "record.json", "runs": "runs",
             "queries": "queries.parquet", "ledger": "ledger.jsonl", "metrics": "m",
             "per_query": "pq"}
    paths = {k: str(tmp_path / v) for k, v in paths.items()}
    write_jsonl(paths["key"], key_rows)
    sha = hashlib.sha256((tmp_path / "key.jsonl").read_bytes()).hexdigest()
    (tmp_path / "record.json").write_text(json.dumps(
        {"key_sha256": sha, "pool_version": "p-000000000001", "rubric_version": "v1",
         "round": 1, "post_hoc": False}))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "bm25.trec").write_text("q1 Q0 b 1 2 bm25\nq1 Q0 a 2 1 bm25\n")
    pd.DataFrame({"query_id": ["q1", "q2"], "query": ["x", "y"],
                  "group": ["keyword", "question"]}).to_parquet(paths["queries"])
    params = {"paths": paths, "arms": {"bm25": {"kind": "bm25", "depth": 10}},
              "runs": {"ties": "score"}, "scale": {"grades": [0, 1, 2], "relevant_min": 1}, "metrics": {"cutoffs": [1, 10]}}
    return params, sha


def _stage_main():
    import importlib

    run = importlib.import_module("relgrade.pipeline.stages.metrics").run
    return lambda ex: run(ex, "bm25")


def test_stage_writes_means_per_query_rows_and_one_ledger_entry(tmp_path, monkeypatch):
    import json

    params, sha = _stage_experiment(tmp_path)
    main = _stage_main()
    main(Experiment.from_mapping(params))
    out = json.loads((tmp_path / "m" / "bm25.json").read_text())
    # q1: b (0) then a (2): RR 1/2, nDCG@10 = (3/log2(3)) / 3; q2 missing from the run: 0
    assert out.pop("nDCG(dcg='exp-log2')@10") == pytest.approx((3 / np.log2(3) / 3 + 0) / 2,
                                                               abs=1e-15)
    assert out == {"arm": "bm25", "key_sha256": sha, "pool_version": "p-000000000001",
                   "rubric_version": "v1", "round": 1,
                   "post_hoc": False, "queries": 2,
                   "nDCG(dcg='exp-log2')@1": 0.0, "R@1": 0.0, "RR@1": 0.0,
                   "Judged@1": 0.5, "R@10": 0.5, "RR@10": 0.25, "Judged@10": 0.5}
    table = pd.read_parquet(tmp_path / "pq" / "bm25.parquet")
    assert list(table.columns) == ["query_id", "group", "measure", "value"]
    assert table[table["measure"] == "RR@10"].values.tolist() == [
        ["q1", "keyword", "RR@10", 0.5], ["q2", "question", "RR@10", 0.0]]
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [(e["pool_version"], e["rubric_version"], e["round"], e["key_sha256"])
            for e in ledger] == [("p-000000000001", "v1", 1, sha)]
    main(Experiment.from_mapping(params))  # the same key used again: still one entry
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 1


def test_stage_refuses_a_key_whose_hash_is_not_the_record_s(tmp_path, monkeypatch):
    from relgrade.errors import ProtocolError

    params, sha = _stage_experiment(tmp_path)
    with open(params["paths"]["key"], "a") as f:
        f.write('{"query_id":"q2","chunk_id":"d","grade":2}\n')
    with pytest.raises(ProtocolError, match=f"is not the {sha} of its record"):
        _stage_main()(Experiment.from_mapping(params))
    assert not (tmp_path / "m").exists() and not (tmp_path / "ledger.jsonl").exists()


def _tail_sampled(tmp_path, probs):
    """_stage_experiment with a sampled tail: its pool table holds each pair's probability."""
    params, sha = _stage_experiment(tmp_path)
    pool = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["a", "b", "c"],
                         "inclusion_prob": probs})
    pool.to_parquet(tmp_path / "pool.parquet", index=False)
    params["paths"]["pool"] = str(tmp_path / "pool.parquet")
    params["pool"] = {"depth": 1, "tail_sample": 1, "tail_depth": 10}
    return params, sha


def test_a_sampled_tail_adds_the_inferred_measures_equal_to_the_plain_ones_when_all_judged(
        tmp_path, monkeypatch):
    import json

    params, _ = _tail_sampled(tmp_path, [1.0, 1.0, 1.0])
    _stage_main()(Experiment.from_mapping(params))
    out = json.loads((tmp_path / "m" / "bm25.json").read_text())
    # every pair drawn with probability 1: infNDCG is nDCG; xinfAP is AP. q1's only relevant
    # chunk a is at rank 2: AP 1/2; q2 retrieves nothing: 0
    assert out["infNDCG(dcg='exp-log2')@10"] == pytest.approx(
        out["nDCG(dcg='exp-log2')@10"], abs=1e-15)
    assert out["xinfAP@10"] == pytest.approx((0.5 + 0) / 2, abs=1e-15)
    assert out["infNDCG(dcg='exp-log2')@1"] == 0.0 and out["xinfAP@1"] == 0.0
    names = list(out)[list(out).index("queries") + 1:]
    assert names[-4:] == ["infNDCG(dcg='exp-log2')@1", "xinfAP@1",
                          "infNDCG(dcg='exp-log2')@10", "xinfAP@10"]


def test_the_stage_scores_inferred_measures_from_the_pool_tables_probabilities(
        tmp_path, monkeypatch):
    import json

    params, _ = _tail_sampled(tmp_path, [0.5, 1.0, 1.0])
    _stage_main()(Experiment.from_mapping(params))
    out = json.loads((tmp_path / "m" / "bm25.json").read_text())
    run = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["b", "a"], "rank": [1, 2],
                        "score": [2.0, 1.0]})
    key = pd.read_json(tmp_path / "key.jsonl", lines=True, dtype={"query_id": str})
    direct = per_query(qrels=key, run=run, measures=["infNDCG(dcg='exp-log2')@10"],
                               on_missing_query="zero",
                               inclusion=pd.read_parquet(tmp_path / "pool.parquet"))
    assert out["infNDCG(dcg='exp-log2')@10"] == pytest.approx(direct["value"].mean(), abs=1e-15)
    # a's probability of 1/2 counts it for two relevant chunks: the estimate moves off nDCG
    assert out["infNDCG(dcg='exp-log2')@10"] != pytest.approx(out["nDCG(dcg='exp-log2')@10"])
