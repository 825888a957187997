"""Prediction-powered estimates (relgrade.evaluation.ppi): hand-computed values, ppi-python
as the reference implementation, Holm, and the errors on bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import ppi

ppi_py = pytest.importorskip("ppi_py")

# A tiny sample: 4 human-graded queries out of N = 20 model-graded ones.
Y = np.array([1.0, 0.0, 1.0, 0.0])          # human key on the sample
YHAT = np.array([1.0, 0.0, 1.0, 1.0])       # model key on the sample
F = np.tile(YHAT, 5)                        # model key on all 20 queries
Z975 = sps.norm.ppf(0.975)


def test_classic_ppi_on_a_tiny_sample_matches_the_arithmetic():
    e = ppi.ppi_mean(Y, YHAT, F, lam=1)
    # theta = mean(F) + mean(Y - YHAT) = 0.75 + mean(0, 0, 0, -1) = 0.75 - 0.25 = 0.5
    assert e.estimate == pytest.approx(0.5, abs=1e-15)
    # var(F) (ddof 0) = 0.75 * 0.25 = 0.1875, over N = 20: 0.009375
    # var(Y - YHAT) = mean of squares 0.25 - 0.25^2 = 0.1875, over n = 4: 0.046875
    se = math.sqrt(0.1875 / 20 + 0.1875 / 4)
    assert e.se == pytest.approx(se, abs=1e-15)
    assert (e.low, e.high) == pytest.approx((0.5 - Z975 * se, 0.5 + Z975 * se), abs=1e-14)
    assert (e.method, e.lam, e.n, e.N) == ("ppi", 1.0, 4, 20)


def test_tuned_lambda_on_a_tiny_sample_matches_the_arithmetic():
    # cov(Y, YHAT), ddof 0: deviations (.5, -.5, .5, -.5) x (.25, -.75, .25, .25)
    #   = (.125 + .375 + .125 - .125) / 4 = 0.125
    # var of the 24 model values YHAT u F (18 ones, 6 zeros), ddof 1: 24 * 0.1875 / 23
    # lambda = 0.125 / ((1 + 4/20) * 4.5 / 23) = 2.875 / 5.4
    lam = 2.875 / 5.4
    assert ppi.tune_lambda(Y, YHAT, F) == pytest.approx(lam, abs=1e-15)
    e = ppi.ppi_mean(Y, YHAT, F)
    # theta = 0.75 lam + mean(Y - lam YHAT) = 0.75 lam + 0.5 - 0.75 lam = 0.5
    assert e.estimate == pytest.approx(0.5, abs=1e-15)
    # Y - lam YHAT = (1 - lam, 0, 1 - lam, -lam): mean (2 - 3 lam) / 4
    r = np.array([1 - lam, 0.0, 1 - lam, -lam])
    var_r = ((r - (2 - 3 * lam) / 4) ** 2).sum() / 4
    se = math.sqrt(lam ** 2 * 0.1875 / 20 + var_r / 4)
    assert e.se == pytest.approx(se, abs=1e-15)
    assert e.method == "ppi++" and e.lam == pytest.approx(lam, abs=1e-15)


def test_human_only_and_model_only_on_a_tiny_sample_match_the_arithmetic():
    h = ppi.human_only_mean(Y)
    # mean 0.5, std (ddof 0) 0.5, se = 0.5 / sqrt(4) = 0.25
    assert (h.estimate, h.se, h.lam, h.N) == (0.5, 0.25, 0.0, 0)
    m = ppi.model_only_mean(F)
    # mean 0.75, std sqrt(0.1875), se = sqrt(0.1875 / 20)
    assert m.estimate == 0.75 and m.se == pytest.approx(math.sqrt(0.1875 / 20), abs=1e-15)
    assert m.lam is None and m.n == 0


def test_lambda_zero_is_the_human_only_estimate():
    e = ppi.ppi_mean(Y, YHAT, F, lam=0)
    h = ppi.human_only_mean(Y)
    assert (e.estimate, e.se, e.low, e.high) == pytest.approx((h.estimate, h.se, h.low, h.high),
                                                              abs=1e-15)


def _random_case(rng, n, big_n, slope, noise):
    f = rng.uniform(0, 1, big_n)
    idx = rng.choice(big_n, n, replace=False)
    yhat = f[idx]
    y = np.clip(slope * yhat + rng.normal(0.1, noise, n), 0, 1)
    return y, yhat, f


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.3])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_interval_and_estimate_equal_ppi_python_on_random_data(seed, lam, alpha):
    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(5, 60)), int(rng.integers(100, 400))
    y, yhat, f = _random_case(rng, n, big_n, slope=rng.uniform(-0.5, 1.5),
                              noise=rng.uniform(0.05, 0.5))
    e = ppi.ppi_mean(y, yhat, f, alpha=alpha, lam=lam)
    low, high = ppi_py.ppi_mean_ci(y, yhat, f, alpha=alpha, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, f, lam=lam)
    assert e.low == pytest.approx(float(np.squeeze(low)), abs=1e-9)
    assert e.high == pytest.approx(float(np.squeeze(high)), abs=1e-9)
    assert e.estimate == pytest.approx(float(np.squeeze(point)), abs=1e-9)


@pytest.mark.parametrize("slope,expected", [(4.0, 1.0), (-1.0, 0.0)])
def test_tuned_lambda_is_clipped_to_the_unit_interval_as_ppi_python_does(slope, expected):
    rng = np.random.default_rng(11)
    f = rng.uniform(0, 0.2, 300)
    yhat = f[:30]
    y = slope * yhat + rng.normal(0, 0.01, 30)   # cov / var is about `slope`
    assert ppi.tune_lambda(y, yhat, f) == expected
    low, high = ppi_py.ppi_mean_ci(y, yhat, f, alpha=0.05)
    e = ppi.ppi_mean(y, yhat, f)
    assert (e.low, e.high) == pytest.approx((float(np.squeeze(low)), float(np.squeeze(high))),
                                            abs=1e-9)


def test_human_only_equals_ppi_python_classical_interval():
    rng = np.random.default_rng(3)
    y = rng.uniform(0, 1, 25)
    low, high = ppi_py.classical_mean_ci(y, alpha=0.05)
    h = ppi.human_only_mean(y)
    assert (h.low, h.high) == pytest.approx((float(low), float(high)), abs=1e-9)


def test_tuned_interval_is_never_wider_than_human_only_on_random_data():
    rng = np.random.default_rng(5)
    for _ in range(200):
        y, yhat, f = _random_case(rng, 20, 200, slope=rng.uniform(-1, 2), noise=0.3)
        assert ppi.ppi_mean(y, yhat, f).se <= ppi.human_only_mean(y).se * (1 + 1e-12)


def test_paired_difference_is_the_estimator_on_per_query_differences():
    rng = np.random.default_rng(8)
    ya, yb = rng.uniform(0, 1, 15), rng.uniform(0, 1, 15)
    fa, fb = rng.uniform(0, 1, 150), rng.uniform(0, 1, 150)
    d = ppi.ppi_difference(ya, yb, fa[:15], fb[:15], fa, fb)
    ref = ppi_py.ppi_mean_ci(ya - yb, fa[:15] - fb[:15], fa - fb, alpha=0.05)
    assert (d.low, d.high) == pytest.approx((float(np.squeeze(ref[0])),
                                             float(np.squeeze(ref[1]))), abs=1e-9)


def test_comparisons_apply_holm_over_the_family():
    # Three arms, 100 queries, the first 10 graded by people. "a" is 0.5 above "b" up to a
    # small jitter; "c" is "b" plus an alternating +-0.05, so b - c averages exactly 0 on the
    # sample and on all queries: its estimate is 0 and p = 1.
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 0.4, 100)
    alternating = np.tile([0.05, -0.05], 50)
    model_all = {"a": base + 0.5 + rng.normal(0, .05, 100), "b": base,
                 "c": base + alternating}
    idx = np.arange(10)
    human = {k: v[idx] + 0.01 for k, v in model_all.items()}
    sample = {k: v[idx] for k, v in model_all.items()}
    df = ppi.ppi_comparisons(human, sample, model_all)
    assert list(zip(df.arm_a, df.arm_b)) == [("a", "b"), ("a", "c"), ("b", "c")]
    # Holm: sorted p-values p(1) <= p(2) <= p(3) are multiplied by 3, 2, 1, then made monotone.
    p = df["p"].to_numpy()
    order = np.argsort(p)
    adj = np.minimum(1, np.maximum.accumulate(p[order] * np.array([3, 2, 1])))
    assert df["p_holm"].to_numpy()[order] == pytest.approx(adj, abs=1e-15)
    assert df["significant"].tolist() == [True, True, False]
    assert df.loc[2, "estimate"] == pytest.approx(0.0, abs=1e-15)


def test_identical_arms_give_a_degenerate_comparison_with_p_one():
    v = np.linspace(0, 1, 30)
    df = ppi.ppi_comparisons({"a": v[:5], "b": v[:5]}, {"a": v[:5], "b": v[:5]},
                             {"a": v, "b": v})
    assert df.loc[0, ["estimate", "se", "p", "p_holm"]].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert not df.loc[0, "significant"]


def test_to_dict_names_every_field():
    d = ppi.ppi_mean(Y, YHAT, F, lam=1).to_dict()
    assert set(d) == {"method", "estimate", "se", "low", "high", "lambda", "n", "N", "level"}
    assert d["method"] == "ppi" and d["lambda"] == 1.0 and d["level"] == 0.95


def test_human_sample_draws_the_rounded_share_sorted_and_reproducibly():
    a = ppi.human_sample(200, fraction=0.1, rng=np.random.default_rng(1))
    b = ppi.human_sample(200, fraction=0.1, rng=np.random.default_rng(1))
    assert a.size == 20 and (np.diff(a) > 0).all() and (a == b).all()
    assert ppi.human_sample(5, fraction=1.0, rng=np.random.default_rng(1)).tolist() == [0, 1, 2,
                                                                                       3, 4]


# --- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.2, float("nan")])
def test_fraction_outside_zero_one_is_an_error(fraction):
    with pytest.raises(InputError, match=r"the human fraction must lie in \(0, 1\]"):
        ppi.human_sample(100, fraction=fraction, rng=np.random.default_rng(0))


def test_sample_of_one_query_is_an_error():
    with pytest.raises(InputError, match="at least 2 human-graded queries"):
        ppi.ppi_mean([0.5], [0.4], [0.4, 0.3, 0.2])
    with pytest.raises(InputError, match="between 2 and all of the queries"):
        ppi.human_sample(10, count=1, rng=np.random.default_rng(0))


def test_mismatched_lengths_are_an_error():
    with pytest.raises(InputError, match="one model-key value per human-key value"):
        ppi.ppi_mean([0.5, 0.1, 0.2], [0.4, 0.3], [0.4, 0.3, 0.2])
    with pytest.raises(InputError, match="part of the queries the model graded"):
        ppi.ppi_mean([0.5, 0.1, 0.2], [0.4, 0.3, 0.2], [0.4, 0.3])


def test_nan_is_an_error_naming_the_query():
    with pytest.raises(InputError, match=r"query #1: human-key values must be finite"):
        ppi.ppi_mean([0.5, float("nan")], [0.4, 0.3], [0.4, 0.3, 0.2])


def test_zero_standard_error_is_an_error_unless_degenerate_is_asked_for():
    with pytest.raises(InputError, match="the standard error is 0"):
        ppi.ppi_mean([1.0, 1.0], [1.0, 1.0], [1.0, 1.0, 1.0])
    e = ppi.ppi_mean([1.0, 1.0], [1.0, 1.0], [1.0, 1.0, 1.0], zero_variance="degenerate")
    # constant model values: lambda 0, the human-only mean 1 with a zero-width interval
    assert (e.estimate, e.se, e.low, e.high, e.lam) == (1.0, 0.0, 1.0, 1.0, 0.0)


def test_row_wise_estimates_equal_one_at_a_time():
    rng = np.random.default_rng(21)
    f = rng.uniform(0, 1, (5, 120))
    yhat = f[:, :12]
    y = np.clip(yhat + rng.normal(0, 0.2, (5, 12)), 0, 1)
    for lam in (None, 1.0):
        est, se, lams = ppi.ppi_mean_rows(y, yhat, f, lam=lam)
        for i in range(5):
            e = ppi.ppi_mean(y[i], yhat[i], f[i], lam=lam)
            assert (est[i], se[i], lams[i]) == pytest.approx((e.estimate, e.se, e.lam),
                                                             abs=1e-12)
            assert ppi.normal_p_values(est[i], se[i]) == pytest.approx(e.p_value(), abs=1e-12)


def test_the_ppi_table_refuses_a_sample_outside_the_pool_and_a_zero_variance_arm():
    from relgrade.evaluation.ppi_table import ppi_table

    model = pd.DataFrame([[1.0, 0.0, 1.0]], index=["a"], columns=["q1", "q2", "q3"])
    outside = pd.DataFrame([[1.0, 0.0]], index=["a"], columns=["q1", "q9"])
    with pytest.raises(InputError, match="subset of the pool's queries"):
        ppi_table(model, outside, measure="nDCG@10")
    flat = pd.DataFrame([[1.0, 1.0, 1.0]], index=["a"], columns=["q1", "q2", "q3"])
    with pytest.raises(InputError, match="standard error is 0"):
        ppi_table(flat, flat[["q1", "q2", "q3"]], measure="nDCG@10")
    with pytest.raises(InputError, match="standard error is 0"):
        ppi_table(flat, flat[["q1", "q2"]], measure="nDCG@10", interval="t")
    with pytest.raises(InputError, match="at least 2 human-sample queries"):
        ppi_table(model, model[["q1"]], measure="nDCG@10")


def test_a_zero_variance_arm_is_refused_with_its_values_and_advice_that_can_work():
    from relgrade.evaluation.ppi_table import LARGER_SAMPLE, ppi_table

    # Arm a is 1 on each of the 3 sampled queries under both keys; the model key gives 0.5 on
    # the fourth, unsampled query. With the t interval (lambda per arm) y is constant, so
    # cov(y, yhat) = 0, lambda = 0 and the PPI++ standard error is sd(y)/sqrt(3) = 0.
    model = pd.DataFrame([[1.0, 1.0, 1.0, 0.5], [1.0, 0.0, 1.0, 0.5]], index=["a", "b"],
                         columns=["q1", "q2", "q3", "q4"])
    human = pd.DataFrame([[1.0, 1.0, 1.0], [1.0, 0.0, 0.5]], index=["a", "b"],
                         columns=["q1", "q2", "q3"])
    with pytest.raises(InputError) as e:
        ppi_table(model, human, measure="nDCG@10", interval="t")
    assert str(e.value) == (
        "arm a, nDCG@10: the PPI++ standard error is 0: the arm's value is the same on every "
        "sampled query, so no interval can be formed from them (found 1 on each of the 3 "
        "sampled queries by the human key, 1 on each by the model key, varying over the 4 "
        "queries by the model key). The model key's nDCG@10 varies over the 4 queries, so a "
        f"larger sample can hold queries of other values. {LARGER_SAMPLE}")
    # the caller's words for a larger sample (the ppi stage: a new round) replace the default
    with pytest.raises(InputError) as e:
        ppi_table(model, human, measure="nDCG@10", interval="t", larger_sample="New round.")
    assert str(e.value).endswith("so a larger sample can hold queries of other values. "
                                 "New round.")


def test_a_zero_variance_arm_on_every_query_is_told_no_larger_sample_exists():
    from relgrade.evaluation.ppi_table import ppi_table

    flat = pd.DataFrame([[0.5, 0.5, 0.5]], index=["a"], columns=["q1", "q2", "q3"])
    with pytest.raises(InputError) as e:
        ppi_table(flat, flat, measure="nDCG@10", larger_sample="New round.")
    assert str(e.value) == (
        "arm a, nDCG@10: the PPI++ standard error is 0: the arm's value is the same on every "
        "sampled query, so no interval can be formed from them (found 0.5 on each of the 3 "
        "sampled queries by the human key, 0.5 on each by the model key, 0.5 on all 3 queries "
        "by the model key). The sample holds all 3 queries already, so no larger sample "
        "exists: nDCG@10 does not vary over this query set; add queries to the experiment "
        "(graded in a new grading.round), or name measures that vary in ppi.measures")


def test_a_zero_variance_arm_whose_model_key_is_constant_too_is_told_what_a_sample_can_do():
    from relgrade.evaluation.ppi_table import ppi_table

    model = pd.DataFrame([[1.0, 1.0, 1.0, 1.0]], index=["a"], columns=["q1", "q2", "q3", "q4"])
    with pytest.raises(InputError) as e:
        ppi_table(model, model[["q1", "q2", "q3"]], measure="nDCG@10",
                  larger_sample="New round.")
    assert str(e.value).endswith(
        "1 on all 4 queries by the model key). The model key gives 1 on all 4 queries too, so "
        "a larger sample helps only if people grade some query it adds otherwise than the "
        "model. New round.")


def test_the_t_interval_of_the_ppi_table_is_the_hand_computed_one():
    from scipy import stats as sps
    from relgrade.evaluation.ppi_table import ppi_table

    # human-only on the sample (1, 0): mean 0.5, sd (ddof 1) 0.7071, se 0.5, t_{0.975, 1}
    model = pd.DataFrame([[1.0, 0.0, 1.0, 1.0]], index=["a"], columns=["q1", "q2", "q3", "q4"])
    human = pd.DataFrame([[1.0, 0.0]], index=["a"], columns=["q1", "q2"])
    row = ppi_table(model, human, measure="m", interval="t")["arms"]["a"]["human-only"]
    assert row["estimate"] == pytest.approx(0.5)
    assert row["high"] - row["estimate"] == pytest.approx(sps.t.ppf(0.975, 1) * 0.5)


# --- the small-sample (regression) standard error ---------------------------------------

def test_regression_standard_error_on_a_tiny_sample_matches_the_arithmetic():
    # Y = (1, 0, 1, 0), Yhat = (1, 0, 1, 1), F = Yhat then 16 zeros (N = 20), lambda = 0.5
    f = np.concatenate([YHAT, np.zeros(16)])
    se, df = ppi.regression_se_rows(Y[None], YHAT[None], f[None], [0.5])
    # residuals (Y - 0.5) - 0.5 (Yhat - 0.75) = (.375, -.125, .375, -.625): sum of squares
    # 0.6875 over n - 2 = 2 -> 0.34375; sum (Yhat - 0.75)^2 = 3 * 0.0625 + 0.5625 = 0.75;
    # mean(F) - mean(Yhat) = 0.15 - 0.75 = -0.6; var(F, ddof 1) = (3 - 20 * 0.15^2) / 19
    expected = 0.34375 * (1 / 4 + 0.36 / 0.75) + 0.25 * (2.55 / 19) / 20
    assert se[0] == pytest.approx(math.sqrt(expected), abs=1e-15)
    assert df.tolist() == [2]


def test_regression_standard_error_with_lambda_zero_is_the_human_only_t_one():
    rng = np.random.default_rng(4)
    y, yhat, f = _random_case(rng, 12, 120, slope=1.0, noise=0.2)
    se, df = ppi.regression_se_rows(y[None], yhat[None], f[None], [0.0])
    assert se[0] == pytest.approx(np.std(y, ddof=1) / math.sqrt(12), abs=1e-15)
    assert df.tolist() == [11]


def test_regression_standard_error_approaches_ppi_python_as_the_sample_grows():
    # the slope term and the n - 2 are O(1/n): at n = 4000 the two agree within 0.2%
    rng = np.random.default_rng(9)
    y, yhat, f = _random_case(rng, 4000, 40000, slope=0.8, noise=0.2)
    est, se_plug, lam = ppi.ppi_mean_rows(y[None], yhat[None], f[None])
    se, _ = ppi.regression_se_rows(y[None], yhat[None], f[None], lam)
    low, high = ppi_py.ppi_mean_ci(y, yhat, f, alpha=0.05)
    assert se_plug[0] == pytest.approx((float(np.squeeze(high)) - float(np.squeeze(low)))
                                       / (2 * Z975), abs=1e-12)
    assert se[0] / se_plug[0] == pytest.approx(1.0, abs=2e-3)


def test_regression_standard_error_is_wider_than_the_plug_in_one_on_a_small_sample():
    rng = np.random.default_rng(12)
    for _ in range(50):
        y, yhat, f = _random_case(rng, 20, 200, slope=rng.uniform(0.2, 1.5), noise=0.2)
        _, se1, lam = ppi.ppi_mean_rows(y[None], yhat[None], f[None], ddof=1)
        se, _ = ppi.regression_se_rows(y[None], yhat[None], f[None], lam)
        assert se[0] >= se1[0] * (1 - 1e-12) or lam[0] == 0.0


def test_regression_interval_needs_three_sample_queries():
    from relgrade.evaluation.ppi_table import ppi_table

    with pytest.raises(InputError, match="at least 3 human-graded queries"):
        ppi.regression_se_rows([[1.0, 0.0]], [[1.0, 1.0]], [[1.0, 1.0, 0.0]], [0.5])
    model = pd.DataFrame([[1.0, 0.0, 1.0]], index=["a"], columns=["q1", "q2", "q3"])
    with pytest.raises(InputError, match="the regression interval needs at least 3"):
        ppi_table(model, model[["q1", "q2"]] * 0.5, measure="nDCG@10", interval="regression")


def test_the_regression_interval_of_the_ppi_table_uses_t_on_n_minus_2():
    from relgrade.evaluation.ppi_table import ppi_table

    rng = np.random.default_rng(17)
    y, yhat, f = _random_case(rng, 10, 60, slope=1.0, noise=0.1)
    q = [f"q{i:02d}" for i in range(60)]
    model = pd.DataFrame([f], index=["a"], columns=q)
    pos = [int(np.flatnonzero(f == v)[0]) for v in yhat]
    human = pd.DataFrame([y], index=["a"], columns=[q[i] for i in pos])
    row = ppi_table(model, human, measure="m", interval="regression")["arms"]["a"]
    _, _, lam = ppi.ppi_mean_rows(y[None], yhat[None], f[None], ddof=1)
    assert 0 < lam[0] < 1
    se, _ = ppi.regression_se_rows(y[None], yhat[None], f[None], lam)
    pp = row["ppi++"]
    assert (pp["df"], pp["interval"]) == (8, "regression")
    assert pp["se"] == pytest.approx(se[0], abs=1e-15)
    assert pp["high"] - pp["estimate"] == pytest.approx(sps.t.ppf(0.975, 8) * se[0], abs=1e-12)
    # human-only and model-only are the t interval's
    ho = row["human-only"]
    assert ho["df"] == 9 and ho["se"] == pytest.approx(np.std(y, ddof=1) / math.sqrt(10))


# --- one shared lambda and the jackknife interval ----------------------------------------

def test_shared_lambda_on_a_tiny_sample_matches_the_arithmetic():
    # row 1: Y = (1, 0, 1, 0), Yhat = (1, 0, 1, 1), F = Yhat x 5: cov 0.125 (ddof 0),
    #   var of the 24 model values (18 ones) ddof 1 = 24 * 0.1875 / 23
    # row 2: Y = (0, 0, 1, 1), Yhat = (0, 0, 1, 1), F = Yhat x 5: cov 0.25,
    #   var of the 24 model values (12 ones) ddof 1 = 24 * 0.25 / 23
    y = np.array([Y, [0.0, 0.0, 1.0, 1.0]])
    yhat = np.array([YHAT, [0.0, 0.0, 1.0, 1.0]])
    f = np.tile(yhat, 5)
    expected = (0.125 + 0.25) / ((1 + 4 / 20) * (24 * 0.1875 / 23 + 24 * 0.25 / 23))
    assert ppi.tune_lambda_shared(y, yhat, f) == pytest.approx(expected, abs=1e-15)
    # constant model values carry nothing: lambda 0
    assert ppi.tune_lambda_shared(y, np.ones_like(y), np.ones_like(f)) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_shared_lambda_and_estimates_equal_ppi_python_overall_power_tuning(seed):
    rng = np.random.default_rng(seed)
    m, n, big_n = 5, 18, 150
    f = rng.uniform(0, 1, (m, big_n)) ** rng.uniform(0.5, 3, (m, 1))
    yhat = f[:, :n]
    y = np.clip(yhat * rng.uniform(-0.5, 1.5, (m, 1)) + rng.normal(0, 0.2, (m, n)), 0, 1)
    lam = ppi.tune_lambda_shared(y, yhat, f)
    theta, _, lam2 = ppi.jackknife_rows(y, yhat, f)
    ref = np.ravel(ppi_py.ppi_mean_pointestimate(y.T, yhat.T, f.T, lam=None))
    assert lam2 == lam and theta == pytest.approx(ref, abs=1e-9)
    # and ppi-python's interval at that lambda is ppi_mean_rows' plug-in one
    low, high = ppi_py.ppi_mean_ci(y.T, yhat.T, f.T, alpha=0.05, lam=lam)
    est, se, _ = ppi.ppi_mean_rows(y, yhat, f, lam=lam)
    assert np.ravel(low) == pytest.approx(est - Z975 * se, abs=1e-9)
    assert np.ravel(high) == pytest.approx(est + Z975 * se, abs=1e-9)


def test_jackknife_standard_error_equals_the_explicit_leave_one_out_loop():
    rng = np.random.default_rng(21)
    m, n, big_n = 4, 12, 90
    f = rng.uniform(0, 1, (m, big_n))
    yhat = f[:, :n]
    y = np.clip(0.6 * yhat + rng.normal(0, 0.25, (m, n)), 0, 1)
    theta, se, lam = ppi.jackknife_rows(y, yhat, f)
    loo = []
    for i in range(n):
        keep = np.arange(n) != i
        li = ppi.tune_lambda_shared(y[:, keep], yhat[:, keep], f)
        loo.append(li * f.mean(axis=1) + (y[:, keep] - li * yhat[:, keep]).mean(axis=1))
    loo = np.array(loo)
    expected = np.sqrt((n - 1) / n * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0)
                       + lam ** 2 * f.var(axis=1, ddof=1) / big_n)
    assert 0 < lam < 1
    assert se == pytest.approx(expected, abs=1e-13)
    assert theta == pytest.approx(lam * f.mean(axis=1) + (y - lam * yhat).mean(axis=1),
                                  abs=1e-15)


def test_jackknife_with_constant_model_values_is_the_human_only_t_standard_error():
    # lambda is 0 with every deletion, so theta_(i) is the mean of the other 3 values:
    # Y = (1, 0, 1, 0): theta_(i) = (1/3, 2/3, 1/3, 2/3), mean 0.5, squared deviations 4/36,
    # (n - 1)/n * 4/36 = 1/12 = var(Y, ddof 1) / n = (1/3) / 4
    theta, se, lam = ppi.jackknife_rows(Y[None], np.ones((1, 4)), np.ones((1, 20)))
    assert lam == 0.0 and theta[0] == 0.5
    assert se[0] == pytest.approx(math.sqrt(1 / 12), abs=1e-15)


def test_jackknife_needs_three_sample_queries():
    from relgrade.evaluation.ppi_table import ppi_table

    with pytest.raises(InputError, match="at least 3 human-graded queries"):
        ppi.jackknife_rows([[1.0, 0.0]], [[1.0, 1.0]], [[1.0, 1.0, 0.0]])
    model = pd.DataFrame([[1.0, 0.0, 1.0]], index=["a"], columns=["q1", "q2", "q3"])
    with pytest.raises(InputError, match="the jackknife interval needs at least 3"):
        ppi_table(model, model[["q1", "q2"]] * 0.5, measure="nDCG@10")


def _table_case(seed, m=4, n=15, big_n=80):
    rng = np.random.default_rng(seed)
    q = [f"q{i:02d}" for i in range(big_n)]
    f = rng.uniform(0, 1, (m, big_n))
    y = np.clip(f[:, :n] * rng.uniform(-0.3, 1.2, (m, 1)) + rng.normal(0, 0.3, (m, n)), 0, 1)
    arms = [f"a{i}" for i in range(m)]
    return (pd.DataFrame(f, index=arms, columns=q),
            pd.DataFrame(y, index=arms, columns=q[:n]), f, y)


@pytest.mark.parametrize("seed", range(6))
def test_the_jackknife_interval_of_the_ppi_table_is_never_wider_than_human_only(seed):
    from relgrade.evaluation.ppi_table import ppi_table

    model, human, f, y = _table_case(seed)
    n = human.shape[1]
    t = ppi_table(model, human, measure="m")
    assert t["interval"] == "jackknife"
    _, se, lam = ppi.jackknife_rows(y, f[:, :n], f)
    q = sps.t.ppf(0.975, n - 1)
    for i, arm in enumerate(model.index):
        pp, ho = t["arms"][arm]["ppi++"], t["arms"][arm]["human-only"]
        assert pp["lambda"] == pytest.approx(lam, abs=1e-15)
        assert pp["df"] == n - 1 == ho["df"]
        se_human = np.std(y[i], ddof=1) / math.sqrt(n)
        assert pp["capped"] == bool(se[i] > se_human)
        assert pp["se"] == pytest.approx(min(se[i], se_human), abs=1e-14)
        assert pp["high"] - pp["estimate"] == pytest.approx(q * pp["se"], abs=1e-12)
        assert pp["high"] - pp["low"] <= ho["high"] - ho["low"] + 1e-15
    # each difference: the smaller of the differences' shared lambda and its own
    ia, ib = [0, 0, 0, 1, 1, 2], [1, 2, 3, 2, 3, 3]
    dy, dyhat, df_ = y[ia] - y[ib], f[ia, :n] - f[ib, :n], f[ia] - f[ib]
    d_lam = ppi.tune_lambda_shared(dy, dyhat, df_)
    for j, row in enumerate(t["differences"]):
        own = ppi.tune_lambda(dy[j], dyhat[j], df_[j])
        assert row["ppi++"]["lambda"] == pytest.approx(min(d_lam, own), abs=1e-15)
        assert (row["ppi++"]["high"] - row["ppi++"]["low"]
                <= row["human-only"]["high"] - row["human-only"]["low"] + 1e-15)


def test_per_row_lambda_on_a_tiny_sample_is_the_smaller_of_shared_and_own():
    # row 1 (Y, YHAT): own = 0.125 / (1.2 * 24 * 0.1875 / 23) = 0.6389
    # row 2 (Y2 = YHAT2 = (0, 0, 1, 1)): own = 0.25 / (1.2 * 24 * 0.25 / 23) = 0.7986
    # shared = 0.375 / (1.2 * (24 * 0.4375 / 23)) = 0.7113: row 1 keeps its own, row 2 shared
    y = np.array([Y, [0.0, 0.0, 1.0, 1.0]])
    yhat = np.array([YHAT, [0.0, 0.0, 1.0, 1.0]])
    f = np.tile(yhat, 5)
    own1 = 0.125 / (1.2 * 24 * 0.1875 / 23)
    shared = 0.375 / (1.2 * 24 * 0.4375 / 23)
    theta, _, lam = ppi.jackknife_rows_each(y, yhat, f)
    assert lam == pytest.approx([own1, shared], abs=1e-15)
    assert theta == pytest.approx(lam * f.mean(axis=1) + (y - lam[:, None] * yhat).mean(axis=1),
                                  abs=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_per_row_lambda_is_the_smaller_of_ppi_python_overall_and_element_tuning(seed):
    rng = np.random.default_rng(seed)
    m, n, big_n = 5, 18, 150
    f = rng.uniform(0, 1, (m, big_n)) ** rng.uniform(0.5, 3, (m, 1))
    yhat = f[:, :n]
    y = np.clip(yhat * rng.uniform(-0.5, 1.5, (m, 1)) + rng.normal(0, 0.2, (m, n)), 0, 1)
    from ppi_py.ppi import _calc_lam_glm

    def ref_lam(mode):
        # ppi_mean_pointestimate's own call, with the mean's gradients
        point = f.T.mean(0) + (y.T - yhat.T).mean(0)
        return _calc_lam_glm(y.T - point, yhat.T - point, f.T - point, np.eye(m), clip=True,
                             optim_mode=mode)

    theta, _, lam = ppi.jackknife_rows_each(y, yhat, f)
    expected = np.minimum(ref_lam("overall"), ref_lam("element"))
    assert lam == pytest.approx(expected, abs=1e-12)
    elem = np.ravel(ppi_py.ppi_mean_pointestimate(y.T, yhat.T, f.T, lam=None,
                                                  lam_optim_mode="element"))
    _, _, own = ppi.ppi_mean_rows(y, yhat, f)
    fixed = own * f.mean(axis=1) + (y - own[:, None] * yhat).mean(axis=1)
    assert fixed == pytest.approx(elem, abs=1e-9)
    assert theta == pytest.approx(lam * f.mean(axis=1) + (y - lam[:, None] * yhat).mean(axis=1),
                                  abs=1e-15)


def test_per_row_jackknife_equals_the_explicit_leave_one_out_loop():
    rng = np.random.default_rng(22)
    m, n, big_n = 4, 12, 90
    f = rng.uniform(0, 1, (m, big_n))
    yhat = f[:, :n]
    y = np.clip(yhat * np.array([[0.9], [0.6], [0.0], [0.3]]) + rng.normal(0, 0.25, (m, n)),
                0, 1)
    theta, se, lam = ppi.jackknife_rows_each(y, yhat, f)
    loo = []
    for i in range(n):
        keep = np.arange(n) != i
        shared = ppi.tune_lambda_shared(y[:, keep], yhat[:, keep], f)
        li = np.array([min(shared, ppi.tune_lambda(y[r, keep], yhat[r, keep], f[r]))
                       for r in range(m)])
        loo.append(li * f.mean(axis=1) + (y[:, keep] - li[:, None] * yhat[:, keep]).mean(axis=1))
    loo = np.array(loo)
    expected = np.sqrt((n - 1) / n * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0)
                       + lam ** 2 * f.var(axis=1, ddof=1) / big_n)
    assert len(set(lam.round(12))) > 1
    assert se == pytest.approx(expected, abs=1e-13)


def test_a_difference_the_model_does_not_track_falls_back_to_human_only():
    from relgrade.evaluation.ppi_table import estimate_rows

    # row 0: people track the model closely; row 1: the model's values are independent of
    # people's, and its sample covariance is negative, so its own lambda clips to 0
    rng = np.random.default_rng(3)
    f = rng.uniform(0, 1, (2, 60)) * np.array([[2.0], [1.0]])
    y0 = f[0, :12] + rng.normal(0, 0.02, 12)
    y1 = 0.5 - 0.2 * f[1, :12] + rng.normal(0, 0.3, 12)
    y = np.array([y0, y1])
    out = estimate_rows(y, f[:, :12], f, tuning="per-row")["ppi++"]
    shared = estimate_rows(y, f[:, :12], f)["ppi++"]
    assert out["lambda"][1] == 0.0 and shared["lambda"][1] > 0.3
    assert out["estimate"][1] == pytest.approx(y1.mean(), abs=1e-15)
    # with lambda 0 throughout, the jackknife is the human-only standard error
    assert out["se"][1] == pytest.approx(y1.std(ddof=1) / math.sqrt(12), abs=1e-15)
    assert out["lambda"][0] == shared["lambda"][0]
    with pytest.raises(InputError, match="lambda tuning must be one of"):
        estimate_rows(y, f[:, :12], f, tuning="each")


def test_the_cap_takes_the_human_only_standard_error_where_the_jackknife_is_larger():
    from relgrade.evaluation.ppi_table import estimate_rows

    # arm 0: people track the model (lambda suits it); arm 1: the model is noise for
    # people, so the shared lambda only adds variance there and the cap applies
    rng = np.random.default_rng(5)
    f = rng.uniform(0, 1, (2, 60))
    y = np.array([f[0, :12] + rng.normal(0, 0.02, 12), rng.uniform(0, 1, 12)])
    out = estimate_rows(y, f[:, :12], f)["ppi++"]
    _, se, _ = ppi.jackknife_rows(y, f[:, :12], f)
    se_human = y.std(axis=1, ddof=1) / math.sqrt(12)
    assert se[0] < se_human[0] and se[1] > se_human[1]
    assert out["capped"].tolist() == [False, True]
    assert out["se"].tolist() == [se[0], se_human[1]]


# --- Holm -----------------------------------------------------------------------------

def test_holm_adjusts_sorted_p_values_by_m_minus_rank_and_keeps_them_monotone():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> 0.06 (monotone)
    adjusted, reject = ppi.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert reject.tolist() == [True, False, False, True]


def test_intervals_of_a_bounded_measure_are_clipped_to_its_range_and_marked():
    from relgrade.evaluation.ppi_table import ppi_table

    # human-only on the sample [1, 1, 1, 0.5] (normal interval, ddof 0): mean 0.875,
    # se = sqrt(0.046875) / 2, so 0.875 +/- 1.96 se = [0.6628, 1.0872]: the top is cut to 1
    model = pd.DataFrame([[1.0, 1.0, 1.0, 0.5, 1.0, 1.0]], index=["a"],
                         columns=[f"q{i}" for i in range(1, 7)])
    human = pd.DataFrame([[1.0, 1.0, 1.0, 0.5]], index=["a"], columns=["q1", "q2", "q3", "q4"])
    half = sps.norm.ppf(0.975) * math.sqrt(0.046875) / 2
    row = ppi_table(model, human, measure="nDCG@10", interval="normal")["arms"]["a"]
    assert row["human-only"]["low"] == pytest.approx(0.875 - half, abs=1e-12)
    assert row["human-only"]["high"] == 1.0 and row["human-only"]["clipped"] is True
    for estimator in ("ppi++", "model-only"):
        e = row[estimator]
        assert e["high"] <= 1.0 and e["clipped"] == (e["estimate"] + half * e["se"] /
                                                      row["human-only"]["se"] > 1.0)
    # a count has no range: the same numbers under NumRel are left as they are
    count = ppi_table(model, human, measure="NumRel", interval="normal")["arms"]["a"]
    assert count["human-only"]["high"] == pytest.approx(0.875 + half, abs=1e-12)
    assert count["human-only"]["clipped"] is False


def test_normal_p_values_take_noise_within_the_tolerance_as_zero():
    # 0.8 - 0.7 and 0.7 - 0.6 differ by 1.1e-16: as estimate and se that ratio is noise
    noise = (0.8 - 0.7) - (0.7 - 0.6)
    assert noise != 0.0
    est, se = np.array([noise, 0.1, 0.0, 0.2]), np.array([abs(noise), 0.0, 0.0, 0.1])
    exact = ppi.normal_p_values(est, se)
    assert exact[0] == pytest.approx(2 * sps.norm.sf(1.0), abs=1e-15)   # noise read as z = 1
    assert exact[1:3].tolist() == [0.0, 1.0]
    tol = np.full(4, 1e-12)
    p = ppi.normal_p_values(est, se, tol)
    # noise within 1e-12: no difference (p 1); a nonzero estimate with no spread keeps 0.0;
    # a real standard error is untouched: z = 2
    assert p.tolist()[:3] == [1.0, 0.0, 1.0]
    assert p[3] == pytest.approx(2 * sps.norm.sf(2.0), abs=1e-15)
