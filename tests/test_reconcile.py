"""relgrade.evaluation.reconcile and the A/B result reader, on small tables computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import reconcile as rec
from relgrade.io.abtest import read_ab_result
from relgrade.query_sampling import query_set_drift

ARMS = ["bm25", "hybrid", "tfidf"]


def _ab(tmp_path, *lines):
    path = tmp_path / "ab.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


LINE = ('{"control": "bm25", "treatment": "hybrid", "metric": "CTR", "delta": 0.024, '
        '"low": 0.011, "high": 0.037}')


def test_the_ab_reader_returns_the_overall_line_and_the_segments(tmp_path):
    seg = LINE.replace('"metric": "CTR"', '"metric": "CTR", "segment": "keyword"')
    overall, segments = read_ab_result(_ab(tmp_path, LINE, seg), arms=ARMS)
    assert (overall["control"], overall["treatment"], overall["delta"]) == ("bm25", "hybrid",
                                                                            0.024)
    assert overall["level"] == 0.95 and overall["line"] == 1
    assert [(s["segment"], s["line"]) for s in segments] == [("keyword", 2)]


@pytest.mark.parametrize("lines, message", [
    ([LINE.replace('"hybrid"', '"semantic"')],
     "ab.jsonl:1: semantic: treatment is not an arm of the experiment. Arms: bm25, hybrid, "
     "tfidf"),
    ([LINE, "{not json"], "ab.jsonl:2: not valid JSON"),
    ([LINE.replace(', "high": 0.037', "")], "ab.jsonl:1: an A/B result line needs control, "
                                             "treatment, metric, delta, low, high (found no high)"),
    ([LINE.replace('"low": 0.011', '"low": 0.03')],
     "ab.jsonl:1: the interval must hold the delta (low <= delta <= high)"),
    ([LINE.replace('0.024', '"2.4%"')], "ab.jsonl:1: delta must be a finite number"),
    ([LINE, LINE], "ab.jsonl:2: two overall results (lines without segment)"),
    ([LINE, LINE.replace('"CTR"', '"add-to-cart"')],
     "ab.jsonl:2: every line must name the first line's control, treatment and metric"),
    ([LINE.replace('"hybrid"', '"bm25"')],
     "ab.jsonl:1: bm25: control and treatment must be two different arms"),
    ([], "ab.jsonl: no overall result: one line must have no segment"),
])
def test_a_bad_ab_file_is_refused_naming_its_line_and_rule(tmp_path, lines, message):
    with pytest.raises(InputError) as e:
        read_ab_result(_ab(tmp_path, *lines), arms=ARMS)
    assert str(e.value).startswith(str(tmp_path / message.split(":")[0]) + ":"
                                   + message.split(":", 1)[1])


def test_direction_reads_the_interval_as_it_is():
    assert rec.direction(0.01, 0.03) == "better"
    assert rec.direction(-0.03, -0.01) == "worse"
    assert rec.direction(-0.01, 0.0) == "no change"


def test_only_found_by_counts_the_top_k_no_other_arm_ranked_within_the_depth():
    # arm a's top 2: x, y; arm b ranks x at 1 and y at 3 (beyond depth 2): only y is a's own
    runs = pd.DataFrame({"arm": ["a", "a", "b", "b", "b"], "query_id": ["q"] * 5,
                         "chunk_id": ["x", "y", "x", "z", "y"], "rank": [1, 2, 1, 2, 3],
                         "score": [3.0, 2.0, 3.0, 2.0, 1.0]})
    out = rec.only_found_by(runs, k=2, depth=2).set_index("arm")
    assert out.loc["a", "only"] == 1 and out.loc["a", "share"] == 0.5
    # with depth 3, b's y counts: a found nothing alone
    assert rec.only_found_by(runs, k=2, depth=3).set_index("arm").loc["a", "only"] == 0


def test_query_set_drift_counts_absent_queries_and_leaves_the_distance_to_drift():
    queries = pd.DataFrame({"query_id": ["a", "b", "c", "d"],
                            "query": ["x", "y", "old one", "old two"]})
    log = pd.DataFrame({"query": ["x", "y", "z"], "count": [6, 3, 1],
                        "stratum": ["head", "torso", "tail"]})
    d = query_set_drift(queries, log)
    assert d["absent"] == ["c", "d"] and d["absent_share"] == 0.5
    assert d["covered_traffic"] == pytest.approx(0.9)
    # the strata distance has one definition (query_sampling.drift.drift): not a second one here
    assert "distance" not in d and "set_strata" not in d


def test_query_set_drift_refuses_a_log_without_queries():
    with pytest.raises(InputError, match="the query log holds no queries"):
        query_set_drift(pd.DataFrame({"query_id": ["a"], "query": ["x"]}),
                            pd.DataFrame({"query": [], "count": [], "stratum": []}))


def test_drift_is_supported_from_a_fifth_of_the_queries_gone():
    values = pd.DataFrame({"query_id": list("abcde"), "treatment": [1.0, 1.0, 0, 0, 0],
                           "control": [0.0, 0.0, 0.5, 0.5, 0.5]})
    drift = {"present": ["a", "b"], "absent": ["c", "d", "e"], "absent_share": 0.6,
             "covered_traffic": 0.5, "distance": 0.6, "distance_interval": [0.55, 0.65]}
    out = rec.drift_check(drift, values, online="better", se=0.1)
    # all queries: (1 + 1 - 1.5) / 5 = 0.1; present ones: 1.0; move 0.9 / 0.1 = 9 errors
    assert out["delta_all"] == pytest.approx(0.1) and out["delta_present"] == pytest.approx(1.0)
    assert out["supported"] and out["strength"] == pytest.approx(9.0)
    low = rec.drift_check(drift | {"absent_share": 0.19}, values, online="better", se=0.1)
    assert not low["supported"] and low["strength"] == 0.0


def _pair(delta, low, high, se):
    return {"delta": delta, "low": low, "high": high, "se": se}


def test_cutoff_is_supported_when_a_shallower_verdict_is_the_online_one():
    pairs = {"nDCG@3": _pair(-0.06, -0.21, 0.09, 0.07), "nDCG@5": _pair(-0.12, -0.24, 0.01, 0.06),
             "nDCG@10": _pair(-0.135, -0.25, -0.02, 0.05)}
    out = rec.cutoff_check(pairs, primary="nDCG@10", shallow=["nDCG@3", "nDCG@5"],
                           online="no change")
    assert out["agreeing"] == ["nDCG@3", "nDCG@5"] and out["supported"]
    # the larger move toward 0: @3, (0.135 - 0.06) / 0.05 = 1.5 primary standard errors
    assert out["strength"] == pytest.approx(1.5)
    same = rec.cutoff_check(pairs, primary="nDCG@10", shallow=["nDCG@3"], online="worse")
    assert not same["supported"] and same["strength"] == 0.0


def test_power_carries_the_online_change_over_and_counts_the_queries_needed():
    pair = _pair(-0.043, -0.119, 0.027, 0.036)
    out = rec.power_check(pair, n=36, control_mean=0.697, online_delta=0.024)
    implied = 0.024 * 0.697
    assert out["implied"] == pytest.approx(implied) and out["inside"] and out["supported"]
    z_a, z_p = sps.norm.ppf(0.975), sps.norm.ppf(0.8)
    assert out["n_needed"] == math.ceil(36 * ((z_a + z_p) * 0.036 / implied) ** 2)
    assert out["strength"] == pytest.approx(z_a - abs(-0.043 - implied) / 0.036)
    outside = rec.power_check(_pair(-0.135, -0.25, -0.02, 0.05), n=36, control_mean=0.7,
                              online_delta=0.002)
    assert not outside["supported"] and outside["strength"] == 0.0


def test_power_with_zero_offline_spread_is_degenerate_not_no_change_to_detect():
    # every query's difference is the same 0.1: se 0, the interval a point; the online +2%
    # of a control at 0.5 is +0.01, a change there is to detect, but no sample size exists
    out = rec.power_check(_pair(0.1, 0.1, 0.1, 0.0), n=12, control_mean=0.5,
                          online_delta=0.02)
    assert out["n_needed"] is None and not out["inside"]
    assert out["text"] == (
        "offline +0.100 [+0.100, +0.100] over 12 queries; the online +2.0% is +0.010 in "
        "offline units, outside the interval; queries needed undefined (the offline "
        "differences have zero spread, so the check is degenerate: a sample size needs a "
        "standard error above 0)")
    assert rec.power_check(_pair(0.1, 0.0, 0.2, 0.05), n=12, control_mean=0.5,
                           online_delta=0.0)["text"].endswith(
        "(the online change is 0: there is no change to detect)")
    assert rec.power_check(_pair(0.1, 0.0, 0.2, 0.05), n=12, control_mean=0.0,
                           online_delta=0.02)["text"].endswith(
        "(the control's offline mean is 0, so a relative change has no size)")


def test_the_drift_text_names_the_one_distance_or_says_it_is_undefined():
    values = pd.DataFrame({"query_id": ["a", "b"], "treatment": [1.0, 0.0],
                           "control": [0.0, 0.0]})
    base = {"present": ["a", "b"], "absent": [], "absent_share": 0.0, "covered_traffic": 0.5}
    sampled = rec.drift_check(base | {"distance": 0.4391, "distance_interval": [0.41, 0.47]},
                              values, online="better", se=0.1)
    assert ("strata distance (total variation, as relgrade drift) 0.439 [0.410, 0.470]"
            in sampled["text"])
    plain = rec.drift_check(base | {"distance": None, "distance_interval": None}, values,
                            online="better", se=0.1)
    assert ("strata distance undefined (the set was not sampled from a query log: no params "
            "queries.log)" in plain["text"])


def test_segments_cancel_when_one_group_is_above_zero_and_another_below():
    groups = [{"group": "keyword", "n": 18, "delta": 0.10, "low": 0.02, "high": 0.18, "se": 0.04},
              {"group": "question", "n": 18, "delta": -0.06, "low": -0.1, "high": -0.02,
               "se": 0.02}]
    out = rec.segment_check(groups, [], se=0.03)
    assert out["offline_cancels"] and out["supported"]
    assert out["strength"] == pytest.approx(min(0.10 / 0.04, 0.06 / 0.02))
    z = sps.norm.ppf(0.975)
    online = [{"segment": "a", "delta": 0.03, "low": 0.01, "high": 0.05, "level": 0.95},
              {"segment": "b", "delta": -0.02, "low": -0.04, "high": -0.001, "level": 0.95}]
    on = rec.segment_check([], online, se=0.03)
    assert on["online_cancels"] and not on["offline_cancels"]
    assert on["strength"] == pytest.approx(min(0.03 / (0.04 / (2 * z)), 0.02 / (0.039 / (2 * z))))
    assert not rec.segment_check(groups[:1], [], se=0.03)["supported"]


def test_the_conclusion_lists_supported_checks_by_strength_then_in_the_seed_order():
    c = {"pool_bias": {"supported": True, "strength": 1.0, "text": "p"}, "drift": None,
         "cutoff": {"supported": True, "strength": 1.0, "text": "c"},
         "power": {"supported": True, "strength": 1.5, "text": "w"},
         "segments": {"supported": False, "strength": 0.0, "text": "s"}}
    assert [r["check"] for r in rec.conclude(c)] == ["power", "pool_bias", "cutoff"]
    assert [r["rank"] for r in rec.conclude(c)] == [1, 2, 3]


def test_shallow_measures_are_the_primary_at_the_smaller_cutoffs_present():
    assert rec.shallow_measures("nDCG(dcg='exp-log2')@10", [10, 5, 3],
                                ["nDCG(dcg='exp-log2')@3", "nDCG(dcg='exp-log2')@10"]) == \
        ["nDCG(dcg='exp-log2')@3"]
    with pytest.raises(InputError, match="needs a rank cutoff"):
        rec.cutoff_of("AP")


def test_pool_bias_names_the_arm_whose_finds_are_unjudged():
    # control c and treatment t over two queries; the key grades only c's top 2 (the
    # worked example's pool: one ranker's results), t's own finds u1, u2 are unjudged
    qrels = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"],
                          "chunk_id": ["a", "b", "d", "e"], "grade": [2, 0, 1, 0]})
    runs = pd.DataFrame({
        "arm": ["c"] * 4 + ["t"] * 4,
        "query_id": ["q1", "q1", "q2", "q2"] * 2,
        "chunk_id": ["a", "b", "d", "e", "u1", "a", "u2", "d"],
        "rank": [1, 2, 1, 2] * 2, "score": [2.0, 1.0, 2.0, 1.0] * 2})
    prov = runs.assign(source="depth")[runs["arm"] == "c"]
    out = rec.pool_bias_check(qrels=qrels, runs=runs, provenance=prov, depth=2, control="c",
                              treatment="t", measure="nDCG(dcg='exp-log2')@2", k=2,
                              online="better", se=0.1)
    assert out["judged"] == {"c": 1.0, "t": 0.5}
    assert out["disfavoured"] == "t" and out["gap"] == pytest.approx(0.5) and out["supported"]
    # standard: c scores 1 on both; t has a at 2 (q1) and d at 2 (q2): 1/log2(3) each
    assert out["standard_delta"] == pytest.approx(1 / np.log2(3) - 1)
    # judged chunks only, t's lists are a / d at rank 1: 1 each, the difference vanishes
    assert out["condensed_delta"] == pytest.approx(0.0)
    assert out["strength"] == pytest.approx((1 - 1 / np.log2(3)) / 0.1)
    assert out["only_found"]["t"] == {"pairs": 4, "only": 2, "share": 0.5}


def test_the_markdown_says_in_a_sentence_when_no_explanation_is_supported():
    result = {"online": {"metric": "CTR", "treatment": "b", "control": "a", "delta": 0.01,
                         "low": -0.01, "high": 0.03, "verdict": "no change"},
              "offline": {"measure": "nDCG@10", "delta": 0.0, "low": -0.1, "high": 0.1, "n": 4,
                          "verdict": "no change"},
              "contradiction": False, "checks": {name: None for name in rec.CHECKS},
              "conclusion": []}
    lines = rec.markdown(result).splitlines()
    assert lines[2] == "Online (CTR): b against a +1.0% [-1.0%, +3.0%]: no change."
    assert lines[-2:] == ["Conclusion, most supported first:",
                          "- None of the five explanations is supported by these numbers"]
