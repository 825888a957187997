"""PPI++ at the edges of its data: a standard error that is 0 up to floating-point noise (an
arm whose people gave every sampled pair grade 2; a paired difference the same on every
query), a PPI++ interval wider than a zero-width human-only one, and the warning for a human
sample under the recommended size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import decision, metrics
from relgrade.evaluation.ppi_table import (LARGER_SAMPLE, RECOMMENDED_SAMPLE, SE_ZERO_RTOL,
                                           estimate_rows, ppi_table, small_sample_words,
                                           zero_se_tolerance)

NDCG = "nDCG(dcg='exp-log2')@10"
QUERIES = [f"q{i:02d}" for i in range(1, 16)]
LEX = [0.6, 0.3, 0.9, 0.5, 0.2, 0.7, 0.4, 0.8, 0.1, 0.6, 0.3, 0.5, 0.9, 0.2, 0.4]


def _all_grade_two_ndcg(depths) -> pd.Series:
    """Per query, relgrade's nDCG@10 of a run whose ``depth`` chunks people all graded 2:
    DCG equals the ideal DCG, so every value is 1 in exact arithmetic."""
    run, key = [], []
    for q, depth in zip(QUERIES, depths):
        for r in range(1, depth + 1):
            run.append({"query_id": q, "chunk_id": f"{q}-c{r}", "rank": r, "score": 20.0 - r})
            key.append({"query_id": q, "chunk_id": f"{q}-c{r}", "grade": 2})
    _, table = metrics.evaluate_arm(key=pd.DataFrame(key), run=pd.DataFrame(run),
                                    cutoffs=[10])
    table = table[table["measure"] == NDCG]
    return pd.Series(table["value"].to_numpy(float), index=table["query_id"].astype(str))


def test_every_grade_2_on_a_three_query_sample_is_refused_though_float_noise_gives_se_1e16():
    # 15 queries, a 3-query human sample, people grade every pair of fused and mine 2, and so
    # does the model: nDCG is 1 on every query, but float sums leave 1 - 2.2e-16 on some
    ones = _all_grade_two_ndcg([3, 5, 7, 10, 4, 6, 8, 9, 3, 5, 7, 10, 4, 6, 8])
    assert np.allclose(ones, 1.0, rtol=0, atol=1e-15) and not (ones == 1.0).all()
    sample = ["q02", "q03", "q04"]
    model = pd.DataFrame([ones.to_numpy(), ones.to_numpy(), LEX], index=["fused", "mine", "lex"],
                         columns=QUERIES)
    human = pd.DataFrame([ones[sample].to_numpy(), ones[sample].to_numpy(), [0.5, 0.4, 0.3]],
                         index=model.index, columns=sample)
    # the noise the refusal used to let through: a positive standard error of about 1e-16
    raw = estimate_rows(human.to_numpy(), model[sample].to_numpy(), model.to_numpy())
    assert 0 < raw["ppi++"]["se"][0] < 1e-15
    with pytest.raises(InputError) as e:
        ppi_table(model, human, measure=NDCG)
    assert str(e.value) == (
        f"arm fused, {NDCG}: the PPI++ standard error is 0: the arm's value is the same on "
        "every sampled query, so no interval can be formed from them (found 1 on each of the "
        "3 sampled queries by the human key, 1 on each by the model key, 1 on all 15 queries "
        "by the model key). The model key gives 1 on all 15 queries too, so a larger sample "
        f"helps only if people grade some query it adds otherwise than the model. "
        f"{LARGER_SAMPLE}")


def test_every_grade_0_is_refused_the_same_way():
    zeros = pd.DataFrame([[0.0] * 15, LEX], index=["fused", "lex"], columns=QUERIES)
    human = pd.DataFrame([[0.0] * 3, [0.5, 0.4, 0.3]], index=zeros.index,
                         columns=["q02", "q03", "q04"])
    with pytest.raises(InputError, match=r"arm fused, .*the PPI\+\+ standard error is 0"):
        ppi_table(zeros, human, measure=NDCG)


def test_a_difference_of_0_1_on_every_query_is_refused_not_given_p_near_0():
    # arm b is arm a less 0.1 on every query under both keys; each arm varies, so neither is
    # refused, but a - b is 0.1 everywhere (0.8 - 0.7 = 0.10000000000000009 in floats): its
    # PPI++ standard error is noise (~1e-17) and its p-value was ~1e-32
    a = [0.2, 0.5, 0.8, 0.6, 0.3, 0.9]
    b = [0.1, 0.4, 0.7, 0.5, 0.2, 0.8]
    cols = ["q1", "q2", "q3", "q4", "q5", "q6"]
    model = pd.DataFrame([a, b], index=["a", "b"], columns=cols)
    human = model[["q1", "q2", "q3"]]
    with pytest.raises(InputError) as e:
        ppi_table(model, human, measure=NDCG, larger_sample="New round.")
    assert str(e.value) == (
        f"a - b, {NDCG}: the PPI++ standard error of a paired difference is 0 while the "
        "difference is not: a - b is 0.1 with no spread, so no interval or test can be formed "
        "from it (a p-value would claim a certainty the sample does not give) (found 0.1 on "
        "each of the 3 sampled queries by the human key, 0.1 on each by the model key, 0.1 on "
        "all 6 queries by the model key). The model key gives 0.1 on all 6 queries too, so a "
        "larger sample helps only if people grade some query it adds otherwise than the "
        "model. New round.")
    # with the t interval too (lambda per row)
    with pytest.raises(InputError, match="standard error of a paired difference is 0"):
        ppi_table(model, human, measure=NDCG, interval="t")


def test_two_arms_equal_on_every_query_give_difference_0_with_p_1():
    a = [0.2, 0.5, 0.8, 0.6, 0.3, 0.9]
    model = pd.DataFrame([a, a], index=["a", "b"], columns=["q1", "q2", "q3", "q4", "q5", "q6"])
    t = ppi_table(model, model[["q1", "q2", "q3"]], measure=NDCG)
    row = t["differences"][0]["ppi++"]
    assert (row["estimate"], row["se"], row["p"], row["p_holm"], row["significant"]) == \
        (0.0, 0.0, 1.0, 1.0, False)


def test_zero_is_relative_to_the_scale_of_the_values():
    # tolerance 1e-12 times the largest |value| of the row; a row of zeros has tolerance 0
    assert SE_ZERO_RTOL == 1e-12
    tol = zero_se_tolerance(np.array([[0.5, -2.0], [0.0, 0.0]]), np.array([[1.0], [0.0]]))
    assert tol.tolist() == [2e-12, 0.0]
    # a measure in small units keeps its intervals: values around 1e-6 with a real spread
    a = np.array([1.0, 3.0, 2.0, 4.0, 2.0, 3.0]) * 1e-6
    model = pd.DataFrame([a, a[::-1]], index=["a", "b"],
                         columns=["q1", "q2", "q3", "q4", "q5", "q6"])
    t = ppi_table(model, model[["q1", "q2", "q3", "q4"]], measure="custom", interval="t")
    # human-only of arm a: the sample 1, 3, 2, 4 (e-6) has sd sqrt(5/3) e-6, se over 2
    assert t["arms"]["a"]["human-only"]["se"] == pytest.approx(np.sqrt(5 / 3) / 2 * 1e-6,
                                                               rel=1e-12)
    assert t["arms"]["a"]["ppi++"]["se"] > 0


def test_ppi_wider_than_a_zero_width_human_only_interval_is_marked_not_capped():
    # arm a: people give 1 on each sampled query, the model varies there; arm b: people track
    # the model, so the shared lambda is positive and arm a's PPI++ has spread while its
    # human-only standard error is 0: no cap (a zero-width interval is no interval), marked
    f = np.array([[1.0, 0.6, 0.8, 0.7, 0.9, 0.5, 1.0, 0.6],
                  [0.1, 0.9, 0.4, 0.6, 0.2, 0.8, 0.3, 0.7]])
    cols = [f"q{i}" for i in range(1, 9)]
    model = pd.DataFrame(f, index=["a", "b"], columns=cols)
    human = pd.DataFrame([[1.0, 1.0, 1.0, 1.0], [0.15, 0.85, 0.45, 0.55]], index=["a", "b"],
                         columns=cols[:4])
    t = ppi_table(model, human, measure="custom")
    a = t["arms"]["a"]
    assert a["ppi++"]["lambda"] > 0 and a["ppi++"]["se"] > 0
    assert (a["human-only"]["low"], a["human-only"]["high"], a["human-only"]["se"]) == \
        (1.0, 1.0, 0.0)
    assert a["ppi++"]["capped"] is False and a["ppi++"]["wider_than_human_only"] is True
    assert a["ppi++"]["high"] - a["ppi++"]["low"] > 0
    # arm b has a human-only spread: no mark at all (rows as before the mark existed)
    assert "wider_than_human_only" not in t["arms"]["b"]["ppi++"]


def test_a_sample_under_ten_queries_gets_a_warning_naming_size_advice_and_fix():
    assert RECOMMENDED_SAMPLE == 10
    assert small_sample_words(3, fix="Set grading.round: 2") == (
        "the human sample holds 3 queries, fewer than the 10 or more docs/ppi.md recommends: "
        "PPI++ intervals from so few queries are wide and cover the truth less often than "
        "stated, so verdicts on them are weak evidence. Set grading.round: 2")
    assert small_sample_words(10, fix="x") is None


def _ppi_json(estimates, **design):
    return {"design": {"model_grader": "model-m", "human_grader": "person-h", "queries": 15,
                       "human_sample": ["q1", "q2", "q3"], "human_fraction": 0.2, "seed": 0,
                       "rectifier": "r", "interval": "jackknife", "level": 0.95} | design,
            "estimates": estimates,
            "judge_audit": {"leniency": [], "order": [], "flags": [], "spread": 0.0,
                            "max_spread": 0.15},
            "budget": {"reference": "r", "curve": [], "tau_0.9": {}}}


def test_the_report_shows_the_small_sample_warning_and_marks_ppi_wider_than_human_only():
    f = np.array([[1.0, 0.6, 0.8, 0.7, 0.9, 0.5, 1.0, 0.6],
                  [0.1, 0.9, 0.4, 0.6, 0.2, 0.8, 0.3, 0.7]])
    cols = [f"q{i}" for i in range(1, 9)]
    est = ppi_table(pd.DataFrame(f, index=["a", "b"], columns=cols),
                    pd.DataFrame([[1.0] * 4, [0.15, 0.85, 0.45, 0.55]], index=["a", "b"],
                                 columns=cols[:4]), measure="custom")
    words = small_sample_words(4, fix="Set grading.round: 2")
    cells = decision.ppi_cells(_ppi_json({"custom": est},
                                         small_sample={"n": 4, "recommended": 10,
                                                       "words": words}))
    assert cells["small_sample"] == f"Warning: {words}"
    assert cells["measures"][0]["wider"] == 1
    assert cells["measures"][0]["arms"][0]["ppi"].endswith(" (wider than human-only)")
    # a design without the record (a sample of 10 or more): no warning
    assert decision.ppi_cells(_ppi_json({"custom": est}))["small_sample"] is None


def _flat_model_difference():
    """Arm b is arm a less 0.5 on every query under the model key; people's difference
    varies on the 3 sampled queries (0.8, -0.1, 0.1)."""
    cols = [f"q{i}" for i in range(1, 7)]
    a = [1.0, 0.5, 0.8, 0.6, 0.9, 0.7]
    model = pd.DataFrame([a, [x - 0.5 for x in a]], index=["a", "b"], columns=cols)
    human = pd.DataFrame([[1.0, 0.0, 0.5], [0.2, 0.1, 0.4]], index=["a", "b"],
                         columns=cols[:3])
    return model, human


@pytest.mark.parametrize("interval", ["jackknife", "regression", "t"])
def test_a_model_only_difference_the_same_on_every_query_has_no_p_value_not_p_0(interval):
    model, human = _flat_model_difference()
    d = ppi_table(model, human, measure=NDCG, interval=interval)["differences"][0]
    flat = d["model-only"]
    assert flat["estimate"] == pytest.approx(0.5, abs=1e-15) and flat["se"] <= 1e-12
    # it was p 0 and significant; now no test, as the PPI++ rule says for its own rows
    assert (flat["p"], flat["p_holm"], flat["significant"]) == (None, None, False)
    assert flat["no_spread"] == (
        "a - b is 0.5 with no spread (model-only), so no test can be formed from it (a p-value "
        "would claim a certainty the sample does not give): p undefined, not significant")
    # people's difference has spread: a test as before. Mean 4/15, sd^2 201/900 (ddof 1),
    # se sqrt(201/2700); Student's t on 2 degrees of freedom: p = 1 - |t| / sqrt(t^2 + 2)
    t = (4 / 15) / np.sqrt(201 / 2700)
    for method in ("human-only", "ppi++"):  # lambda 0: the model's difference has no spread
        row = d[method]
        assert row["estimate"] == pytest.approx(4 / 15, rel=1e-12)
        assert row["se"] == pytest.approx(np.sqrt(201 / 2700), rel=1e-12)
        assert row["p"] == pytest.approx(1 - t / np.sqrt(t * t + 2), rel=1e-9)
        assert row["p_holm"] == row["p"] and "no_spread" not in row


def test_a_flat_model_only_difference_stays_in_holm_s_family_as_p_1():
    # a third arm: a - b flat under the model key, a - c and b - c not; Holm over 3 in each
    model, human = _flat_model_difference()
    model.loc["c"] = [0.3, 0.9, 0.1, 0.7, 0.2, 0.6]
    human.loc["c"] = [0.5, 0.6, 0.2]
    t = ppi_table(model, human, measure=NDCG, interval="t", pairs=[("a", "b"), ("a", "c"),
                                                                   ("b", "c")])
    rows = [d["model-only"] for d in t["differences"]]
    assert rows[0]["p"] is None and rows[0]["p_holm"] is None
    p = sorted(r["p"] for r in rows[1:])
    # Holm with m = 3: the smaller p times 3, the larger times 2 (capped at 1, monotone)
    first = min(1.0, 3 * p[0])
    assert sorted(r["p_holm"] for r in rows[1:]) == pytest.approx(
        [first, max(first, min(1.0, 2 * p[1]))], rel=1e-12)


def test_a_human_only_difference_the_same_on_every_sampled_query_is_refused_through_ppi():
    # people give a - b = 0.3 on each sampled query while the model's difference varies: the
    # difference's own lambda is 0 (no covariance), so PPI++ is human-only and has no spread
    # either, and the PPI++ rule refuses, naming the human key's values
    cols = [f"q{i}" for i in range(1, 7)]
    model = pd.DataFrame([[1.0, 0.5, 0.8, 0.6, 0.9, 0.7], [0.2, 0.4, 0.3, 0.5, 0.1, 0.6]],
                         index=["a", "b"], columns=cols)
    human = pd.DataFrame([[0.9, 0.6, 0.8], [0.6, 0.3, 0.5]], index=["a", "b"],
                         columns=cols[:3])
    with pytest.raises(InputError) as e:
        ppi_table(model, human, measure=NDCG)
    assert "a - b is 0.3 with no spread" in str(e.value)
    assert "(found 0.3 on each of the 3 sampled queries by the human key, varying on them " \
        "by the model key, varying over the 6 queries by the model key)" in str(e.value)


def test_the_report_says_undefined_for_a_difference_with_no_spread():
    model, human = _flat_model_difference()
    est = ppi_table(model, human, measure="custom")
    (pair,) = decision.ppi_cells(_ppi_json({"custom": est}))["measures"][0]["pairs"]
    assert (pair["model_sig"], pair["human_sig"], pair["ppi_sig"]) == (
        "undefined (no spread)", "no", "no")


@pytest.mark.parametrize("p_holm, shown", [(6.8e-05, "6.8e-05"), (0.0026, "0.0026"),
                                           (0.68, "0.68"), (None, "—")])
def test_the_ppi_sections_holm_p_is_printed_as_the_reports_other_p_values(p_holm, shown):
    # it was printed to 3 decimals, so a p of 6.8e-05 read "0.000" beside the headline's
    # "p=6.8e-05 after Holm"
    model, human = _flat_model_difference()
    est = ppi_table(model, human, measure="custom")
    est["differences"][0]["ppi++"]["p_holm"] = p_holm
    (pair,) = decision.ppi_cells(_ppi_json({"custom": est}))["measures"][0]["pairs"]
    assert pair["ppi_holm"] == shown
