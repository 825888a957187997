"""A new arm's report from tables (relgrade.evaluation.new_arm): the owed holes and their
seeded sample, the record's values computed by hand, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import holes, new_arm

MEASURE = "nDCG(dcg='exp-log2')@2"
QS = ["q1", "q2", "q3", "q4", "q5", "q6"]
# the key grades chunk a (2) and x (1) of every query: ideal gains (3, 1)
KEY = pd.DataFrame({"query_id": np.repeat(QS, 2), "chunk_id": ["a", "x"] * 6,
                    "grade": [2, 1] * 6})
# the new arm: q1 ranks x then a, q2 a then x (no holes); q3-q6 rank a then the hole h
RUN = pd.DataFrame({"query_id": np.repeat(QS, 2),
                    "chunk_id": ["x", "a", "a", "x"] + ["a", "h"] * 4,
                    "rank": [1, 2] * 6, "score": [2.0, 1.0] * 6})
HOLES = pd.DataFrame({"query_id": ["q3", "q4", "q5", "q6"], "chunk_id": ["h"] * 4})
MODEL = HOLES.assign(grade=[1, 1, 1, 1])
PEOPLE = HOLES.iloc[:3].assign(grade=[0, 2, 1])
SAMPLE = ["q3", "q4", "q5"]
OLD = {"bm25": pd.Series([0.4, 0.6, 0.5, 0.5, 0.5, 0.5], index=QS)}
OLD_PAIRS = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"], "chunk_id": ["a", "x", "a", "x"],
                          "model": [2, 1, 2, 2], "human": [1, 1, 2, 1]})

L3 = 1 / math.log2(3)
IDEAL = 3 + L3
V1 = (1 + 3 * L3) / IDEAL        # q1: gains (1, 3)
LOW = 3 / IDEAL                  # a hole graded 0: gains (3, 0) under the ideal (3, 1)
# by hand: with the model grading every hole 1, each hole query scores 1 (gains (3, 1));
# people's grades 0, 2, 1 give LOW, 1 (gains (3, 3) under the ideal (3, 3)) and 1
Y = np.array([LOW, 1.0, 1.0])
Q0 = np.array([V1, 1.0])


def report(**change):
    kw = dict(arm="dense", run=RUN, key=KEY, queries=QS, model_grades=MODEL,
              human_grades=PEOPLE, sample=SAMPLE, old=OLD, old_pairs=OLD_PAIRS,
              measure=MEASURE)
    return new_arm.new_arm_report(**(kw | change))


def test_the_report_counts_holes_and_corrects_the_arm_by_hand():
    out = report()
    assert (out["queries"], out["pairs"], out["holes"], out["hole_queries"]) == (6, 12, 4, 4)
    assert out["hole_rate"] == pytest.approx(4 / 12)
    assert out["sample"] == SAMPLE
    # the model's values on the stratum with holes are constant (1), so lambda = 0 and the
    # stratum's estimate is people's mean; post-stratified with the 2 exact queries
    theta = (2 * Q0.mean() + 4 * Y.mean()) / 6
    se = math.sqrt((2 / 6) ** 2 * Q0.var(ddof=1) / 2 + (4 / 6) ** 2 * Y.var(ddof=1) / 3)
    half = sps.t.ppf(0.975, 2) * se
    e = out["estimates"]["ppi++"]
    assert e["estimate"] == pytest.approx(theta, abs=1e-12)
    assert e["se"] == pytest.approx(se, abs=1e-12)
    # the t interval runs past 1, which no mean of nDCG reaches: cut there, as ppi mode cuts
    assert theta + half > 1
    assert (e["low"], e["high"], e["clipped"]) == (pytest.approx(theta - half, abs=1e-12),
                                                   1.0, True)
    assert (e["lambda"], e["n"], e["hole_queries"], e["N"], e["df"]) == (0.0, 3, 4, 6, 2)
    f = np.array([V1, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert out["estimates"]["model-only"]["estimate"] == pytest.approx(f.mean(), abs=1e-12)
    # holes counted as not relevant: each hole query scores LOW
    assert out["estimates"]["key-only"]["estimate"] == pytest.approx(
        (V1 + 1 + 4 * LOW) / 6, abs=1e-12)


def test_the_difference_with_an_old_arm_uses_the_same_corrected_values_by_hand():
    (row,) = report()["comparisons"]
    o = OLD["bm25"].to_numpy()
    d0 = Q0 - o[:2]                          # exact on the queries without holes
    dy = Y - o[2:5]                          # people's values minus the old arm's
    est = (2 * d0.mean() + 4 * dy.mean()) / 6
    se = math.sqrt((2 / 6) ** 2 * d0.var(ddof=1) / 2 + (4 / 6) ** 2 * dy.var(ddof=1) / 3)
    assert (row["arm_a"], row["arm_b"]) == ("dense", "bm25")
    assert row["estimate"] == pytest.approx(est, abs=1e-12)
    assert row["se"] == pytest.approx(se, abs=1e-12)
    p = 2 * sps.t.sf(abs(est) / se, 2)
    assert row["p"] == pytest.approx(p, abs=1e-12)
    assert row["p_holm"] == pytest.approx(p, abs=1e-12)   # one old arm: Holm leaves it
    assert row["significant"] is bool(p <= 0.05)
    half = sps.t.ppf(0.975, 2) * se          # within [-1, 1]: not cut
    assert (row["low"], row["high"], row["clipped"]) == (
        pytest.approx(est - half, abs=1e-12), pytest.approx(est + half, abs=1e-12), False)


def test_a_difference_interval_past_the_range_of_a_difference_is_cut_to_it():
    # the old arm scores 0 but on q5 (0.9): the new arm's differences 0.79, 1, 0.1 on the
    # sampled queries spread so widely that the t interval (2 degrees of freedom) passes 1
    o = np.array([0.0, 0.0, 0.0, 0.0, 0.9, 0.0])
    (row,) = report(old={"bm25": pd.Series(o, index=QS)})["comparisons"]
    est, half = row["estimate"], sps.t.ppf(0.975, row["df"]) * row["se"]
    assert row["df"] == 2 and est + half > 1
    assert (row["low"], row["high"], row["clipped"]) == (
        pytest.approx(est - half, abs=1e-12), 1.0, True)


def test_the_verdicts_of_a_new_arm_read_as_an_old_arms_and_say_how_they_were_made():
    out = report()
    (row,) = out["comparisons"]
    (line,) = new_arm.verdict_lines(out)
    how = ("(dense joined after the key froze: PPI++ on its holes, Holm over its 1 "
           f"comparison with the old arms; {out['level_claim']})")
    if row["significant"]:
        assert line.startswith("dense better than bm25 on ") and line.endswith(how)
    else:
        assert line == (f"no detectable difference on {MEASURE} between dense and bm25: "
                        f"{row['estimate']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}], "
                        f"p={row['p_holm']:.2g} after Holm {how}")


def test_the_transport_sides_are_the_old_pairs_and_the_sampled_holes():
    out = report()
    t = out["transport"]
    # old side: model - human = 1, 0 (q1), 0, 1 (q2); new side: 1 - 0, 1 - 2, 1 - 1
    assert t["bias_old"] == pytest.approx(0.5)
    assert t["bias_new"] == pytest.approx(0.0)
    assert (t["pairs_old"], t["pairs_new"], t["queries_old"], t["queries_new"]) == (4, 3, 2, 3)
    direct = holes.transport_check(old_model=[2, 1, 2, 2], old_human=[1, 1, 2, 1],
                                   old_query=["q1", "q1", "q2", "q2"], new_model=[1, 1, 1],
                                   new_human=[0, 2, 1], new_query=SAMPLE)
    assert t == direct.to_dict()
    assert out["level_claim"] == new_arm.LEVEL_CLAIM[direct.refuse]


def test_a_shifted_bias_on_the_holes_refuses_the_level_claim():
    # the model grades every hole 2 where people give 0: bias +2 on the holes, none before
    model = HOLES.assign(grade=[2, 2, 2, 2])
    people = HOLES.iloc[:3].assign(grade=[0, 0, 0])
    same = OLD_PAIRS.assign(model=[1, 1, 2, 2], human=[1, 1, 2, 2])
    out = report(model_grades=model, human_grades=people, old_pairs=same)
    assert out["transport"]["refuse"] is True
    assert out["level_claim"] == "level claim refused"
    # people graded every sampled hole 0: the stratum's values are LOW, the model's 1
    assert out["estimates"]["ppi++"]["estimate"] == pytest.approx(
        (2 * Q0.mean() + 4 * LOW) / 6, abs=1e-12)


def test_the_owed_holes_flag_a_seeded_sample_of_hole_queries():
    kw = dict(run=RUN, key=KEY, queries=QS, measure=MEASURE, fraction=0.75)
    a = new_arm.owed_holes(**kw, rng=np.random.default_rng(7))
    b = new_arm.owed_holes(**kw, rng=np.random.default_rng(7))
    pd.testing.assert_frame_equal(a, b)
    assert a[["query_id", "chunk_id"]].values.tolist() == HOLES.values.tolist()
    # round(0.75 * 4) = 3 of the 4 queries with holes
    assert int(a["sampled"].sum()) == 3
    every = new_arm.owed_holes(**(kw | {"fraction": 1.0}), rng=np.random.default_rng(7))
    assert every["sampled"].all()


@pytest.mark.parametrize("change, rule", [
    ({"human_grades": PEOPLE.iloc[:2]}, "a hole has no grade"),
    ({"model_grades": MODEL.iloc[1:]}, "a hole has no grade"),
    ({"sample": ["q1", "q3", "q4"]}, "queries with holes only"),
    ({"sample": ["q3", "q4", "q9"]}, "not a query of the experiment"),
    ({"measure": "AP"}, "needs a rank cutoff"),
    ({"queries": QS + ["q1"]}, "listed twice"),
    ({"old_pairs": OLD_PAIRS.drop(columns="human")}, "human"),
])
def test_bad_input_to_the_report_is_refused(change, rule):
    with pytest.raises(InputError, match=rule):
        report(**change)


def test_too_few_queries_with_holes_are_refused_before_any_grading():
    two = RUN[RUN["query_id"].isin(["q1", "q2", "q3", "q4"])]
    with pytest.raises(InputError, match="at least 3 queries with holes"):
        new_arm.owed_holes(run=two, key=KEY, queries=QS, measure=MEASURE, fraction=1.0,
                           rng=np.random.default_rng(0))


def test_the_reference_pairs_are_the_pairs_both_graders_graded():
    g = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2", "q3"],
                      "chunk_id": ["a", "a", "b", "a", "a", "a"],
                      "grader": ["judge", "people", "judge", "people", "judge", "people"],
                      "grade": [2, 1, 0, 2, 2, 1]})
    out = new_arm.reference_pairs(g, model_grader="judge", human_grader="people")
    assert out.values.tolist() == [["q1", "a", 2, 1], ["q2", "a", 2, 2]]
    only_q2 = pd.DataFrame({"query_id": ["q2"], "chunk_id": ["a"]})
    kept = new_arm.reference_pairs(g, model_grader="judge", human_grader="people",
                                   pairs=only_q2)
    assert kept.values.tolist() == [["q2", "a", 2, 2]]


@pytest.mark.parametrize("grades, names, rule", [
    (pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grader": ["judge"], "grade": [1]}),
     ("judge", "people"), "no pair of the old arms"),
    (pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "a"], "grader": ["judge"] * 2,
                   "grade": [1, 2]}), ("judge", "people"), "two current grades"),
    (pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grader": ["judge"], "grade": [1]}),
     ("judge", "judge"), "two graders"),
])
def test_reference_pairs_refuse_what_cannot_measure_a_bias(grades, names, rule):
    with pytest.raises(InputError, match=rule):
        new_arm.reference_pairs(grades, model_grader=names[0], human_grader=names[1])


def test_the_decision_file_carries_the_corrected_estimate_and_the_verdict():
    out = report()
    fields = new_arm.decision_fields(out, key_sha256="ab" * 32, pool_version="v1",
                                     baseline="bm25")
    e = out["estimates"]["ppi++"]
    (row,) = out["comparisons"]
    assert fields == {"measure": MEASURE, "mean": e["estimate"], "low": e["low"],
                      "high": e["high"], "method": "ppi++ on holes",
                      "hole_rate": pytest.approx(1 / 3),
                      "model_only_mean": out["estimates"]["model-only"]["estimate"],
                      "key_only_mean": out["estimates"]["key-only"]["estimate"],
                      "level_claim": out["level_claim"],
                      "judged": pytest.approx(8 / 12),   # 8 of the 12 pairs in the key
                      "pool_version": "v1",
                      "key": "abababababab", "baseline": "bm25", "delta": row["estimate"],
                      "p_holm": row["p_holm"]}
    # without a baseline among the old arms, no difference is written (the record has them)
    assert "delta" not in new_arm.decision_fields(out, baseline="tfidf")


def test_the_report_section_says_a_refused_level_claim():
    model = HOLES.assign(grade=[2, 2, 2, 2])
    people = HOLES.iloc[:3].assign(grade=[0, 0, 0])
    same = OLD_PAIRS.assign(model=[1, 1, 2, 2], human=[1, 1, 2, 2])
    lines = new_arm.report_lines(report(model_grades=model, human_grades=people,
                                        old_pairs=same))
    assert lines[0] == "## New arm dense on the frozen key"
    assert "- hole rate: 33.3% (4 of 12 pairs within the cutoff)" in lines
    refused = [x for x in lines if "level claim refused" in x]
    # bias on the holes 2 - 0 = 2 grades, none on the old pairs
    assert len(refused) == 1 and "(2.000 grade)" in refused[0] and "(0.000)" in refused[0]
    assert lines[-1].startswith("- dense − bm25: ")
    assert lines[-2].startswith("- differences with the old arms: PPI++ on the per-query "
                                "differences")
    kept = new_arm.report_lines(report())
    assert not any("refused" in x for x in kept)
