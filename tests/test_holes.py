"""A new arm on a frozen key (relgrade.evaluation.holes): hand-computed estimates, ppi-python
and statsmodels as independent references, the transport rule and the errors on bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import holes

# Six queries, four pairs each. Queries 0 and 1 have no holes (scored exactly on the key);
# queries 2-5 have holes, and people graded the holes of 2, 3 and 5.
FILLED = np.array([0.2, 0.4, 0.5, 0.5, 0.5, 0.5])
HOLES = np.array([0, 0, 1, 2, 1, 1])
PAIRS = np.array([4, 4, 4, 4, 4, 4])
SAMPLE = np.array([2, 3, 5])
HUMAN = np.array([0.2, 0.6, 0.7])
# by hand: the model values of the stratum with holes are constant, so lambda = 0 and its
# estimate is the human mean 0.5 with se^2 = var(0.2, 0.6, 0.7; ddof 1) / 3 = 0.07 / 3;
# the stratum without holes: mean 0.3, var (ddof 1) 0.02 over 2 queries
THETA = (2 * 0.3 + 4 * 0.5) / 6
SE = math.sqrt((2 / 6) ** 2 * 0.02 / 2 + (4 / 6) ** 2 * 0.07 / 3)


def test_hole_rate_is_holes_over_pairs():
    assert holes.hole_rate(HOLES, PAIRS) == pytest.approx(5 / 24, abs=1e-15)
    assert holes.hole_rate([0, 0], [0, 0]) == 0.0


def test_the_estimate_combines_the_exact_stratum_with_the_corrected_one_by_hand():
    est = holes.new_arm_estimate(filled=FILLED, holes=HOLES, pairs=PAIRS, sample=SAMPLE,
                                 human=HUMAN)
    e = est["ppi++"]
    assert e.estimate == pytest.approx(THETA, abs=1e-14)
    assert e.se == pytest.approx(SE, abs=1e-14)
    half = sps.t.ppf(0.975, 2) * SE
    assert (e.low, e.high) == pytest.approx((THETA - half, THETA + half), abs=1e-13)
    assert (e.lam, e.df, e.n, e.n_hole_queries, e.N) == (0.0, 2, 3, 4, 6)
    m = est["model-only"]
    assert m.estimate == pytest.approx(2.6 / 6, abs=1e-15)
    assert m.se == pytest.approx(np.std(FILLED, ddof=1) / math.sqrt(6), abs=1e-15)
    assert (m.df, m.lam, m.n) == (5, None, 0)


def test_the_corrected_stratum_equals_ppi_python_point_estimate():
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(3)
    n_q = 120
    hole_n = rng.integers(0, 4, n_q)
    truth = rng.uniform(0, 1, n_q)
    filled = np.clip(truth + 0.15 + rng.normal(0, 0.1, n_q), 0, 1)
    filled[hole_n == 0] = truth[hole_n == 0]
    sample = holes.sample_hole_queries(hole_n, fraction=0.2, rng=rng)
    e = holes.new_arm_estimate(filled=filled, holes=hole_n, pairs=np.full(n_q, 10),
                               sample=sample, human=truth[sample])["ppi++"]
    h = np.flatnonzero(hole_n > 0)
    theta_h = ppi_py.ppi_mean_pointestimate(truth[sample], filled[sample], filled[h])
    expected = (truth[hole_n == 0].sum() + h.size * float(np.ravel(theta_h)[0])) / n_q
    assert e.estimate == pytest.approx(expected, abs=1e-12)
    assert 0.0 < e.lam < 1.0


def test_a_difference_with_an_old_arm_is_corrected_per_query_by_hand():
    # old arm: exact on every query; F - O is 0.1 on every query with holes, so lambda = 0
    old = np.array([0.1, 0.5, 0.4, 0.4, 0.4, 0.4])
    df = holes.new_arm_comparisons("new", filled=FILLED, holes=HOLES, pairs=PAIRS,
                                   sample=SAMPLE, human=HUMAN, old={"o1": old, "o2": FILLED})
    row = df.iloc[0]
    # without holes: D = (0.1, -0.1), mean 0, var 0.02; sampled: Y - O = (-0.2, 0.2, 0.3),
    # mean 0.1, var 0.07 (ddof 1)
    est = (2 * 0.0 + 4 * 0.1) / 6
    assert (row["arm_a"], row["arm_b"]) == ("new", "o1")
    assert row["estimate"] == pytest.approx(est, abs=1e-14)
    assert row["se"] == pytest.approx(SE, abs=1e-14)
    p1 = 2 * sps.t.sf(est / SE, 2)
    assert row["p"] == pytest.approx(p1, abs=1e-12)
    # against itself filled: D is 0 off the sample, Y - F on the sample = (-0.3, 0.1, 0.2)
    row2 = df.iloc[1]
    assert row2["estimate"] == pytest.approx(4 * 0.0 / 6, abs=1e-14)
    p2 = row2["p"]
    assert p2 == pytest.approx(1.0, abs=1e-12)
    # Holm over the two: the smaller p doubled, the larger at least that
    assert df["p_holm"].tolist() == pytest.approx([min(1.0, 2 * p1), 1.0], abs=1e-12)


def test_a_difference_of_float_noise_alone_is_no_difference_p_1():
    # (F + 0.7) - 0.7 differs from F by 5.6e-17 and -1.1e-16 on queries 0 and 1: the
    # difference's estimate and standard error are both noise (about 1e-17), so p is 1
    old = (FILLED + 0.7) - 0.7
    assert (FILLED - old).tolist()[:2] == [5.551115123125783e-17, -1.1102230246251565e-16]
    df = holes.new_arm_comparisons("new", filled=FILLED, holes=HOLES, pairs=PAIRS,
                                   sample=SAMPLE, human=FILLED[SAMPLE], old={"o": old})
    row = df.iloc[0]
    assert 0.0 < row["se"] < 1e-15
    assert (row["p"], row["p_holm"], bool(row["significant"])) == (1.0, 1.0, False)


def test_a_nonzero_difference_with_no_spread_is_refused_not_given_p_0():
    # F - O is 0.1 on every query and so is Y - O on the sample: estimate 0.1, se 0 up to noise
    old = FILLED - 0.1
    with pytest.raises(InputError, match=r"new - o is 0.1 with no spread") as err:
        holes.new_arm_comparisons("new", filled=FILLED, holes=HOLES, pairs=PAIRS,
                                  sample=SAMPLE, human=old[SAMPLE] + 0.1, old={"o": old})
    assert "larger human sample" in str(err.value)


def test_the_sample_draws_only_queries_with_holes_and_repeats_with_its_seed():
    h = np.array([0, 3, 1, 0, 2, 2, 1, 0, 4, 1, 1, 1])
    a = holes.sample_hole_queries(h, fraction=0.5, rng=np.random.default_rng(11))
    b = holes.sample_hole_queries(h, fraction=0.5, rng=np.random.default_rng(11))
    assert a.tolist() == b.tolist()
    assert a.size == 4                       # round(0.5 * 9 queries with holes)
    assert (h[a] > 0).all() and (np.diff(a) > 0).all()


@pytest.mark.parametrize("h, fraction, rule", [
    ([0, 1, 1, 0], 1.0, "at least 3 queries with holes"),
    ([1] * 10, 0.1, "at least 3 queries (jackknife)"),
    ([1] * 10, 1.5, "fraction must lie in"),
])
def test_a_sample_too_small_or_a_bad_fraction_is_refused(h, fraction, rule):
    with pytest.raises(InputError, match=rule.replace("(", r"\(").replace(")", r"\)")):
        holes.sample_hole_queries(h, fraction=fraction, rng=np.random.default_rng(0))


@pytest.mark.parametrize("change, rule", [
    ({"sample": np.array([0, 3, 5]), "human": HUMAN}, "queries with holes only"),
    ({"sample": np.array([2, 2, 5]), "human": HUMAN}, "sampled twice"),
    ({"sample": np.array([2, 3, 9]), "human": HUMAN}, "outside the queries"),
    ({"sample": np.array([2, 3]), "human": HUMAN[:2]}, "at least 3 sampled"),
    ({"human": np.array([0.2, np.nan, 0.7])}, "finite"),
    ({"human": HUMAN[:2]}, "one human-graded value per sampled query"),
    ({"holes": np.array([0, 0, 5, 2, 1, 1])}, "more holes than pairs"),
    ({"holes": np.array([0, 0, 1, -2, 1, 1])}, "must not be negative"),
])
def test_bad_input_to_the_estimate_is_refused(change, rule):
    kw = {"filled": FILLED, "holes": HOLES, "pairs": PAIRS, "sample": SAMPLE, "human": HUMAN}
    kw.update(change)
    with pytest.raises(InputError, match=rule):
        holes.new_arm_estimate(**kw)


def test_an_old_arm_with_too_few_values_is_refused():
    with pytest.raises(InputError, match="one value per query"):
        holes.new_arm_comparisons("new", filled=FILLED, holes=HOLES, pairs=PAIRS,
                                  sample=SAMPLE, human=HUMAN, old={"o1": FILLED[:5]})


# Transport: model - human on the old pairs, per query: (1, 0), (1, 1), (0, 0) -> bias 0.5;
# on the new arm's holes: (1, 1), (1,), (1, 0, 1) -> bias 5/6.
OLD_D = np.array([1, 0, 1, 1, 0, 0.0])
OLD_Q = np.array(["q1", "q1", "q2", "q2", "q3", "q3"])
NEW_D = np.array([1, 1, 1, 1, 0, 1.0])
NEW_Q = np.array(["q7", "q7", "q8", "q9", "q9", "q9"])


def _check(old_d=OLD_D, old_q=OLD_Q, new_d=NEW_D, new_q=NEW_Q, **kw):
    # human grades 1 throughout; the model grade carries the difference
    return holes.transport_check(old_model=1 + old_d, old_human=np.ones(old_d.size),
                                 old_query=old_q, new_model=1 + new_d,
                                 new_human=np.ones(new_d.size), new_query=new_q, **kw)


def test_transport_biases_and_clustered_standard_errors_by_hand():
    tc = _check()
    assert (tc.bias_old, tc.bias_new) == pytest.approx((0.5, 5 / 6), abs=1e-15)
    # old: cluster sums (1, 2, 0) - 0.5 * (2, 2, 2) = (0, 1, -1); 3/2 * 2 / 36
    v_old = 1.5 * 2 / 36
    # new: sums (2, 1, 2) - 5/6 * (2, 1, 3) = (1/3, 1/6, -1/2); 3/2 * (1/9 + 1/36 + 1/4) / 36
    v_new = 1.5 * (1 / 9 + 1 / 36 + 1 / 4) / 36
    assert tc.se == pytest.approx(math.sqrt(v_old + v_new), abs=1e-15)
    df = (v_old + v_new) ** 2 / (v_old ** 2 / 2 + v_new ** 2 / 2)
    assert tc.df == pytest.approx(df, abs=1e-12)
    assert tc.p == pytest.approx(2 * sps.t.sf((5 / 6 - 0.5) / tc.se, df), abs=1e-12)
    assert (tc.pairs_old, tc.pairs_new, tc.queries_old, tc.queries_new) == (6, 6, 3, 3)
    assert tc.refuse is False                 # p is about 0.37


def test_clustered_variance_equals_statsmodels_cluster_robust_ols():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(5)
    q = rng.integers(0, 15, 90)
    d = rng.integers(-1, 2, 90).astype(float) + 0.1 * q
    fit = sm.OLS(d, np.ones((d.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": q})
    tc = _check(old_d=d, old_q=q, new_d=np.array([0.0, 0.0, 0.0, 0.0]),
                new_q=np.array([1, 1, 2, 2]))
    assert tc.bias_old == pytest.approx(float(fit.params[0]), abs=1e-12)
    assert tc.se == pytest.approx(float(fit.bse[0]), rel=1e-10)   # the new side varies not


def test_transport_refuses_a_clear_shift_beyond_the_tolerance_only():
    rng = np.random.default_rng(9)
    old_q, new_q = np.repeat(np.arange(40), 5), np.repeat(np.arange(20), 4)
    old_d = (rng.random(old_q.size) < 0.3).astype(float)       # bias about 0.3
    new_d = (rng.random(new_q.size) < 0.8).astype(float)       # bias about 0.8
    assert _check(old_d=old_d, old_q=old_q, new_d=new_d, new_q=new_q).refuse is True
    kept = _check(old_d=old_d, old_q=old_q, new_d=new_d, new_q=new_q, tolerance=0.9)
    assert kept.refuse is False and kept.p < 1e-6


def test_a_constant_shift_with_no_variance_refuses_and_no_shift_does_not():
    q = np.array([1, 1, 2, 2])
    assert _check(old_d=np.zeros(4), old_q=q, new_d=np.ones(4), new_q=q).refuse is True
    same = _check(old_d=np.ones(4), old_q=q, new_d=np.ones(4), new_q=q)
    assert (same.refuse, same.p, same.difference) == (False, 1.0, 0.0)


@pytest.mark.parametrize("kw, rule", [
    ({"old_q": np.array(["q1"] * 6)}, "at least 2 queries"),
    ({"new_q": NEW_Q[:5]}, "one entry per pair"),
    ({"alpha": 1.5}, "alpha must lie in"),
    ({"tolerance": -0.1}, "tolerance must be"),
])
def test_bad_input_to_the_transport_check_is_refused(kw, rule):
    with pytest.raises(InputError, match=rule):
        _check(**kw)


# --- tables: which pairs are holes, and the key with them graded -----------------------

RUN = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2", "q3"],
                    "chunk_id": ["a", "b", "c", "d", "a", "e"],
                    "rank": [1, 2, 3, 1, 2, 1], "score": [3.0, 2.0, 1.0, 2.0, 1.0, 1.0]})
KEY = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q3"], "chunk_id": ["a", "x", "a", "e"],
                    "grade": [2, 1, 0, 3]})


def test_holes_are_the_new_arms_top_k_pairs_the_key_did_not_grade():
    found, counts = holes.find_holes(RUN, KEY, k=2)
    # q1's top 2: a (graded), b (hole); q2's: d (hole), a (graded); q3's: e (graded)
    assert found.values.tolist() == [["q1", "b"], ["q2", "d"]]
    assert counts.values.tolist() == [["q1", 2, 1], ["q2", 2, 1], ["q3", 1, 0]]
    assert holes.hole_rate(counts["holes"], counts["pairs"]) == pytest.approx(2 / 5)


def test_filling_keeps_the_key_rows_and_adds_one_grade_per_hole():
    found, _ = holes.find_holes(RUN, KEY, k=2)
    grades = pd.DataFrame({"query_id": ["q2", "q1", "q9"], "chunk_id": ["d", "b", "z"],
                           "grade": [1, 2, 3]})
    filled = holes.fill_holes(KEY, found, grades)
    assert filled.iloc[:4].values.tolist() == KEY.values.tolist()
    assert filled.iloc[4:].values.tolist() == [["q1", "b", 2], ["q2", "d", 1]]
    assert list(filled.columns) == ["query_id", "chunk_id", "grade"]


@pytest.mark.parametrize("grades, rule", [
    (pd.DataFrame({"query_id": ["q1"], "chunk_id": ["b"], "grade": [1]}), "a hole has no grade"),
    (pd.DataFrame({"query_id": ["q1", "q1", "q2"], "chunk_id": ["b", "b", "d"],
                   "grade": [1, 2, 0]}), "a hole has two grades"),
])
def test_a_hole_without_or_with_two_grades_is_refused(grades, rule):
    found, _ = holes.find_holes(RUN, KEY, k=2)
    with pytest.raises(InputError, match=rule):
        holes.fill_holes(KEY, found, grades)


def test_a_hole_the_key_grades_is_refused():
    with pytest.raises(InputError, match="already grades"):
        holes.fill_holes(KEY, pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"]}),
                         pd.DataFrame({"query_id": ["q1"], "chunk_id": ["a"], "grade": [0]}))


def test_the_new_arms_per_query_metric_from_the_filled_key_feeds_the_estimate():
    from relgrade.evaluation import metrics

    # four queries, each: key grades chunk a (2) and x (1); the new arm ranks a, then h
    qs = ["q1", "q2", "q3", "q4", "q5"]
    run = pd.DataFrame({"query_id": np.repeat(qs, 2), "chunk_id": ["a", "h"] * 5,
                        "rank": [1, 2] * 5, "score": [2.0, 1.0] * 5})
    key = pd.DataFrame({"query_id": np.repeat(qs, 2), "chunk_id": ["a", "x"] * 5,
                        "grade": [2, 1] * 5})
    found, counts = holes.find_holes(run, key, k=2)
    model = found.assign(grade=[1, 1, 1, 1, 1])           # the model: every hole grade 1
    people = found.assign(grade=[0, 0, 1, 0, 1])          # people on q1, q2, q3 (sampled)
    measure = "nDCG(dcg='exp-log2')@2"
    f = metrics.per_query(qrels=holes.fill_holes(key, found, model), run=run, measures=measure)
    y = metrics.per_query(qrels=holes.fill_holes(key, found, people), run=run, measures=measure)
    f, y = f.set_index("query_id")["value"], y.set_index("query_id")["value"]
    # by hand: ideal (3, 1) -> 3 + 1/log2(3); with the hole graded 1 the arm ranks (3, 1): 1;
    # graded 0 it ranks (3, 0): 3 / (3 + 1/log2(3))
    assert f.tolist() == pytest.approx([1.0] * 5, abs=1e-12)
    low = 3 / (3 + 1 / np.log2(3))
    assert y.tolist() == pytest.approx([low, low, 1.0, low, 1.0], abs=1e-12)
    sample = np.array([0, 1, 2])
    est = holes.new_arm_estimate(filled=f.to_numpy(), holes=counts["holes"],
                                 pairs=counts["pairs"], sample=sample,
                                 human=y.to_numpy()[sample])["ppi++"]
    # the model values are constant, so lambda = 0: the human mean of the sample,
    # every query has a hole (no exact stratum)
    assert est.estimate == pytest.approx((2 * low + 1) / 3, abs=1e-12)
    assert est.lam == 0.0


# Old arms around the new arm (its estimate THETA = 0.4333): one better by 0.5 on every
# query, one at 0 everywhere, and a twin equal to the filled values, so its mean is THETA
# too (the model values of the stratum with holes are constant: lambda 0 on every resample).
OLD = {"high": FILLED + 0.5, "low": np.zeros(6), "twin": FILLED.copy()}


def _ranks(rng_seed=0, **kw):
    return holes.new_arm_rank_sets(filled=FILLED, holes=HOLES, pairs=PAIRS, sample=SAMPLE,
                                   human=HUMAN, old=kw.pop("old", OLD),
                                   rng=np.random.default_rng(rng_seed), **kw)


def test_a_new_arms_rank_set_ranks_it_by_its_corrected_estimate_among_the_old_arms():
    r = _ranks()
    # estimates: the old arms' means, then the new arm's (new_arm_estimate's, by hand)
    assert r.estimate == pytest.approx([THETA + 0.5, 0.0, THETA, THETA], abs=1e-15)
    est = holes.new_arm_estimate(filled=FILLED, holes=HOLES, pairs=PAIRS, sample=SAMPLE,
                                 human=HUMAN)["ppi++"].estimate
    assert r.estimate[-1] == est      # the very number the record and decision file carry
    # high is surely first and low surely last; the twin and the new arm share ranks 2-3
    assert r.rank_low.tolist() == [1, 4, 2, 2]
    assert r.rank_high.tolist() == [1, 4, 3, 3]
    assert r.tied_groups() == [[0], [2, 3], [1]]


def test_a_new_arms_rank_set_repeats_with_its_seed():
    a, b = _ranks(7), _ranks(7)
    assert a.critical == b.critical and a.n_resamples == 1000
    assert _ranks(7, n_resamples=200).n_resamples == 200


@pytest.mark.parametrize("kw, rule", [
    ({"old": {}}, "at least one old arm"),
    ({"old": {"a": np.zeros(5)}}, "one value per query"),
    ({"n_resamples": 50}, "at least 100 bootstrap resamples"),
    ({"level": 1.0}, "level must lie in"),
])
def test_bad_input_to_a_new_arms_rank_set_is_refused(kw, rule):
    with pytest.raises(InputError, match=rule):
        _ranks(**kw)
