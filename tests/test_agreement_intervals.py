"""Agreement intervals and bands (relgrade.protocol.reliability, .bands, agreement.many_rater_agreement)."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from relgrade.errors import InputError
from relgrade.protocol import agreement as ag
from relgrade.protocol import bands
from relgrade.protocol import reliability as rl
from relgrade.protocol.reliability import Resampling


def long(table, raters=None):
    """Long grades table from an items × raters array (NaN = not graded)."""
    rows = []
    for i, row in enumerate(np.asarray(table, dtype=float)):
        for j, g in enumerate(row):
            if not np.isnan(g):
                rows.append({"query_id": f"q{i // 10}", "chunk_id": f"c{i}",
                             "grader": (raters or [f"r{k}" for k in range(len(row))])[j],
                             "grade": int(g)})
    return pd.DataFrame(rows)


# --- point values: hand-computed and against independent implementations ---------------

def test_fleiss_kernel_gives_the_hand_computed_value():
    # Item a: 3 raters all grade 2 -> P_a = (9 - 3) / 6 = 1; item b: two 0s and one 1 ->
    # P_b = (4 + 1 - 3) / 6 = 1/3. P̄ = 2/3; p = (2, 1, 3) / 6, P_e = 14/36;
    # kappa = (2/3 - 14/36) / (1 - 14/36) = (10/36) / (22/36) = 5/11.
    assert rl.fleiss_kappa_point([[0, 0, 3], [2, 1, 0]]) == pytest.approx(5 / 11)


def test_cohen_kernel_gives_the_hand_computed_quadratic_kappa():
    # a = (0, 1, 2, 2), b = (0, 2, 2, 1): observed quadratic disagreement (0 + 1 + 0 + 1)/4
    # = 0.5; marginals a (1, 1, 2)/4, b (1, 1, 2)/4; chance = sum_ij p_i q_j (i - j)^2
    # = [1*1*0 + 1*1*1 + 1*2*4 + 1*1*1 + 1*1*0 + 1*2*1 + 2*1*4 + 2*1*1 + 2*2*0] / 16 = 22/16.
    # kappa = 1 - 0.5 / (22/16) = 1 - 8/22 = 7/11.
    assert rl.cohen_kappa_point([0, 1, 2, 2], [0, 2, 2, 1], labels=[0, 1, 2],
                                weights="quadratic") == pytest.approx(7 / 11)


def test_ordinal_alpha_kernel_gives_the_hand_computed_value():
    # Two units, two raters: (0, 0) and (0, 2), scale 0..2. Coincidences: o_00 = 2 + 0,
    # o_02 = o_20 = 1; n_0 = 3, n_1 = 0, n_2 = 1, n = 4. Ordinal delta(0, 2) =
    # (n_0 + n_1 + n_2 - (n_0 + n_2)/2)^2 = (4 - 2)^2 = 4. D_o part = 2 * 1 * 4 = 8;
    # expected part = 2 * n_0 n_2 * 4 = 24; alpha = 1 - (n - 1) * 8 / 24 = 1 - 3 * 8 / 24 = 0.
    assert rl.krippendorff_alpha_point([[0, 0], [0, 2]], values=[0, 1, 2]) \
        == pytest.approx(0.0, abs=1e-12)


def simulated_ratings(seed, items, raters, scale=4, agree=0.7, missing=0.0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, scale, items)
    data = np.where(rng.random((items, raters)) < agree, truth[:, None],
                    rng.integers(0, scale, (items, raters))).astype(float)
    if missing:
        data[rng.random((items, raters)) < missing] = np.nan
    return data


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kernels_equal_statsmodels_sklearn_and_krippendorff(seed):
    data = simulated_ratings(seed, 60, 4, missing=0.2)
    for level in rl.LEVELS:
        ours = rl.krippendorff_alpha_point(data, values=[0, 1, 2, 3], level=level)
        ref = krippendorff.alpha(reliability_data=data.T, value_domain=[0, 1, 2, 3],
                                 level_of_measurement=level)
        assert ours == pytest.approx(ref, abs=1e-12)
    full = simulated_ratings(seed, 60, 5)
    counts = np.stack([(full == g).sum(axis=1) for g in range(4)], axis=1)
    assert rl.fleiss_kappa_point(counts) == pytest.approx(sm_fleiss_kappa(counts), abs=1e-12)
    a, b = full[:, 0].astype(int), full[:, 1].astype(int)
    for weights in (None, "linear", "quadratic"):
        assert rl.cohen_kappa_point(a, b, labels=[0, 1, 2, 3], weights=weights) == \
            pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights=weights),
                          abs=1e-12)


# --- intervals ------------------------------------------------------------------------

def test_resamples_on_which_kappa_is_undefined_are_counted_not_read_as_zero():
    # One item whose three ratings share a grade: every resample has chance agreement 1.
    iv = rl.fleiss_kappa_interval([[3, 0]], rng=np.random.default_rng(0), resamples=50,
                                  level=0.9)
    assert (iv.low, iv.high, iv.undefined) == (None, None, 50)
    # Two items, (3, 0) and (0, 3): a resample drawing one item twice is undefined, one
    # drawing both has kappa 1. Each of the 50 is one or the other.
    iv = rl.fleiss_kappa_interval([[3, 0], [0, 3]], rng=np.random.default_rng(0),
                                  resamples=50, level=0.9)
    assert (iv.low, iv.high) == (1.0, 1.0) and 0 < iv.undefined < 50


def test_interval_is_reproducible_from_its_seed_and_moves_with_it():
    data = simulated_ratings(5, 80, 3)
    counts = np.stack([(data == g).sum(axis=1) for g in range(4)], axis=1)
    one = rl.fleiss_kappa_interval(counts, rng=np.random.default_rng(11), resamples=500,
                                   level=0.95)
    two = rl.fleiss_kappa_interval(counts, rng=np.random.default_rng(11), resamples=500,
                                   level=0.95)
    other = rl.fleiss_kappa_interval(counts, rng=np.random.default_rng(12), resamples=500,
                                     level=0.95)
    assert one == two and one != other
    point = rl.fleiss_kappa_point(counts)
    assert one.low < point < one.high


def test_interval_equals_percentiles_of_explicit_resamples():
    # The vectorised resampling against the plain loop: same generator, same draws.
    a = np.array([0, 1, 2, 2, 1, 0, 0, 2, 1, 1])
    b = np.array([0, 1, 1, 2, 1, 0, 2, 2, 0, 1])
    iv = rl.cohen_kappa_interval(a, b, labels=[0, 1, 2], weights="quadratic",
                                 rng=np.random.default_rng(3), resamples=100, level=0.8)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 10, size=(100, 10))
    vals = []
    for row in idx:
        x, y = a[row], b[row]
        vals.append(cohen_kappa_score(x, y, labels=[0, 1, 2], weights="quadratic")
                    if len(set(x) | set(y)) > 1 else np.nan)
    vals = np.array(vals)
    vals = vals[np.isfinite(vals)]
    assert (iv.low, iv.high) == pytest.approx(tuple(np.quantile(vals, [0.1, 0.9])))


@pytest.mark.parametrize("statistic", ["fleiss", "alpha"])
def test_bootstrap_interval_covers_the_population_value_about_95_percent(statistic):
    # Items whose 3 raters copy the item's true grade with probability 0.6, else guess
    # uniformly over 0..3. The population value is the statistic on 400,000 items; 200
    # seeded samples of 60 items each should cover it about 95% of the time.
    def counts_of(data):
        return np.stack([(data == g).sum(axis=1) for g in range(4)], axis=1)

    if statistic == "fleiss":
        def value(data):
            return rl.fleiss_kappa_point(counts_of(data))

        def interval(data, rng):
            return rl.fleiss_kappa_interval(counts_of(data), rng=rng, resamples=400,
                                            level=0.95)
    else:
        def value(data):
            return rl.krippendorff_alpha_point(data, values=[0, 1, 2, 3])

        def interval(data, rng):
            return rl.krippendorff_alpha_interval(data, values=[0, 1, 2, 3], rng=rng,
                                                  resamples=400, confidence=0.95)
    truth = value(simulated_ratings(10_000, 400_000, 3, agree=0.6))
    covered = 0
    for seed in range(200):
        iv = interval(simulated_ratings(seed, 60, 3, agree=0.6), np.random.default_rng(seed))
        covered += iv.low <= truth <= iv.high
    assert 0.88 <= covered / 200 <= 0.99


def test_bad_resampling_settings_are_refused():
    with pytest.raises(InputError, match="positive integer"):
        Resampling(seed=1, resamples=0, level=0.95)
    with pytest.raises(InputError, match=r"level must lie in \(0, 1\)"):
        Resampling(seed=1, resamples=10, level=1.0)
    with pytest.raises(InputError, match="seed must be a non-negative integer"):
        Resampling(seed=-1, resamples=10, level=0.5)
    with pytest.raises(InputError, match="same number"):
        rl.fleiss_kappa_point([[2, 0], [1, 2]])
    with pytest.raises(InputError, match="off the scale"):
        rl.krippendorff_alpha_point([[0, 5]], values=[0, 1, 2])


# --- bands ----------------------------------------------------------------------------

def test_bands_split_at_0_4_and_0_6_with_both_boundaries_in_the_middle_band():
    assert [bands.band(v) for v in (-0.2, 0.399, 0.4, 0.5, 0.6, 0.601, 1.0, None)] == [
        "fix-guideline", "fix-guideline", "training", "training", "training", "evaluation",
        "evaluation", None]


def test_verdict_says_whether_the_interval_stays_in_the_band():
    v = bands.verdict("fleiss_kappa", 0.65, 0.62, 0.70)
    assert (v["band"], v["settled"]) == ("evaluation", True)
    assert v["verdict"] == ("fleiss_kappa 0.650: above 0.6: consistent enough for a frozen "
                            "evaluation set; the interval [0.620, 0.700] stays in this band")
    v = bands.verdict("weighted_kappa", 0.45, 0.35, 0.62)
    assert (v["band"], v["settled"]) == ("training", False)
    assert v["verdict"].endswith("reaches into evaluation and fix-guideline, so the band is "
                                 "not settled")
    assert bands.verdict("fleiss_kappa", None)["band"] is None


# --- many_rater_agreement -------------------------------------------------------------

def test_many_rater_agreement_reports_points_intervals_bands_and_the_seed():
    data = simulated_ratings(7, 50, 4)
    out = ag.many_rater_agreement(long(data), [0, 1, 2, 3], seed=99, resamples=300,
                                  level=0.9)
    counts = np.stack([(data == g).sum(axis=1) for g in range(4)], axis=1)
    assert out["fleiss_kappa"] == pytest.approx(sm_fleiss_kappa(counts))
    assert out["krippendorff_alpha_ordinal"] == pytest.approx(krippendorff.alpha(
        reliability_data=data.T, value_domain=[0, 1, 2, 3], level_of_measurement="ordinal"))
    assert out["bootstrap"] == {"seed": 99, "resamples": 300, "level": 0.9,
                                "method": "jackknife-t", "resample_unit": "query",
                                "unit": "query: the audited queries are the units "
                                        "(left out one at a time by the jackknife, drawn "
                                        "with replacement by the fallback bootstrap), the "
                                        "judged pairs of a query kept together"}
    # items i belong to query q{i // 10}: 50 items, 5 queries, resampled whole
    iv = rl.fleiss_kappa_interval(counts, rng=np.random.default_rng(99), resamples=300,
                                  level=0.9, clusters=[f"q{i // 10}" for i in range(50)])
    assert out["intervals"]["fleiss_kappa"] == iv.to_dict()
    assert (iv.unit, iv.units, iv.method) == ("query", 5, "jackknife-t")
    for name in ("fleiss_kappa", "krippendorff_alpha_ordinal"):
        lo, hi = out["intervals"][name]["low"], out["intervals"][name]["high"]
        assert lo < out[name] < hi
        assert out["bands"][name] == bands.verdict(name, out[name], lo, hi, level=0.9,
                                                   units=5)
    # Same inputs, same output: the seed is the only source of randomness.
    assert ag.many_rater_agreement(long(data), [0, 1, 2, 3], seed=99, resamples=300,
                                   level=0.9) == out


def test_many_rater_agreement_refuses_a_rater_twice_on_one_pair():
    t = long([[1, 1, 2]])
    t = pd.concat([t, t.iloc[[0]]], ignore_index=True)
    with pytest.raises(InputError, match="a grader has two grades for one pair"):
        ag.many_rater_agreement(t, [0, 1, 2], seed=1, resamples=10, level=0.9)


def test_many_rater_agreement_of_one_shared_grade_is_undefined_with_no_band():
    out = ag.many_rater_agreement(long([[1, 1, 1], [1, 1, 1]]), [0, 1, 2], seed=1,
                                  resamples=20, level=0.9)
    assert out["fleiss_kappa"] is None
    assert out["intervals"]["fleiss_kappa"] == {"low": None, "high": None,
                                                "undefined_resamples": 20,
                                                "resample_unit": "query", "units": 1,
                                                "method": "jackknife-t"}
    assert out["bands"]["fleiss_kappa"]["band"] is None


# --- the audit ------------------------------------------------------------------------

def test_audit_intervals_resample_the_audited_pairs_for_each_kappa():
    a = [0, 0, 1, 2, 2, 0, 1, 2, 0, 1]
    b = [0, 0, 1, 2, 1, 0, 1, 2, 2, 1]
    spec = Resampling(seed=5, resamples=400, level=0.9)
    out = ag.audit_intervals(a, b, scale=[0, 1, 2], relevant_min=1, resampling=spec)
    assert set(out) == {"weighted_kappa", "binary_kappa", "kappa", "disagreement",
                        "two_step_disagreement"}
    binary = rl.cohen_kappa_interval([int(x >= 1) for x in a], [int(x >= 1) for x in b],
                                     labels=[0, 1], rng=np.random.default_rng(5),
                                     resamples=400, level=0.9)
    assert out["binary_kappa"] == binary.to_dict()
    assert out["binary_kappa"]["resample_unit"] == "pair"
    wk = cohen_kappa_score(a, b, weights="quadratic")
    assert out["weighted_kappa"]["low"] < wk < out["weighted_kappa"]["high"]


def test_audit_with_three_graders_adds_many_rater_agreement_over_all_of_them():
    data = simulated_ratings(4, 12, 3)
    grades = long(data, raters=["grader-a", "auditor-b", "rater-c"]).assign(round=1)
    queries = pd.DataFrame({"query_id": ["q0", "q1"], "group": ["keyword", "question"]})
    spec = Resampling(seed=8, resamples=200, level=0.9)
    m = ag.audit_agreement(grades, audit_ids=["q0", "q1"], queries=queries,
                           grader="grader-a", auditor="auditor-b", round=1,
                           scale=[0, 1, 2, 3], relevant_min=1, resampling=spec).metrics
    assert m["many_raters"] == ag.many_rater_agreement(grades, [0, 1, 2, 3], seed=8,
                                                       resamples=200, level=0.9)
    assert m["many_raters"]["raters"] == 3 and m["many_raters"]["pairs"] == 12
    two = ag.audit_agreement(grades[grades["grader"] != "rater-c"], audit_ids=["q0", "q1"],
                             queries=queries, grader="grader-a", auditor="auditor-b",
                             round=1, scale=[0, 1, 2, 3], relevant_min=1,
                             resampling=spec).metrics
    assert "many_raters" not in two and two["bootstrap"]["seed"] == 8


def test_bootstrap_by_row_patterns_gives_the_sums_of_the_weights_matrix_from_the_same_draws():
    """Kappa rows are one-hot over the cells: counting drawn patterns equals weights @ rows."""
    import numpy as np

    from relgrade.protocol import reliability as R

    gen = np.random.default_rng(3)
    a, b = gen.integers(0, 3, 301), gen.integers(0, 3, 301)
    per_item = R._cell_table(a, b, [0, 1, 2])
    codes, patterns = R._row_patterns(per_item)
    assert np.array_equal(patterns[codes], per_item) and len(patterns) <= 9
    assert R._row_patterns(per_item * 0.5) is None  # not integers: the weights matrix
    sums = []
    R._bootstrap(per_item, lambda t: sums.append(t) or t[:, 0], rng=np.random.default_rng(9),
                 resamples=600, level=0.9)
    rng = np.random.default_rng(9)
    expected = [R._weights(301, rng, size).astype(float) @ per_item for size in (256, 256, 88)]
    assert len(sums) == 3
    for got, want in zip(sums, expected):
        assert np.array_equal(got, want)


def test_alpha_coincidence_rows_take_the_pattern_path_and_keep_their_sums():
    import numpy as np

    from relgrade.protocol import reliability as R

    per_item = np.array([[2.0, 0, 0, 0], [0, 1, 1, 0], [2, 0, 0, 0], [0, 0, 0, 2]])
    codes, patterns = R._row_patterns(per_item)
    assert np.array_equal(patterns[codes], per_item) and len(patterns) == 3
    got, want = [], []
    R._bootstrap(per_item, lambda s: got.append(s) or s[:, 0], rng=np.random.default_rng(4),
                 resamples=300, level=0.9)
    rng = np.random.default_rng(4)
    want = [R._weights(4, rng, size).astype(float) @ per_item for size in (256, 44)]
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


# --- resampling the query, the audit's sampling unit -----------------------------------

def test_quantile_levels_of_the_expanded_percentile_interval_by_hand():
    # 10 queries, 95%: c = sqrt(10/9) * t_{9, 0.975} = 1.05409 * 2.26216 = 2.38455,
    # Phi(-2.38455) = 0.008549 (Hesterberg 2015's expanded percentile interval).
    lo, hi = rl.quantile_levels(0.95, 10, expanded=True)
    assert lo == pytest.approx(0.008549, abs=2e-6)
    assert hi == pytest.approx(1 - lo)
    assert rl.quantile_levels(0.95, 10, expanded=False) == pytest.approx((0.025, 0.975))
    assert rl.quantile_levels(0.9, 1, expanded=True) == pytest.approx((0.05, 0.95))


def test_cluster_interval_is_the_jackknife_t_on_fisher_z_of_an_explicit_leave_one_query_out():
    # Query q0 = pairs 0-3, q1 = 4-6, q2 = 7-9. Quadratic kappa without each query in
    # turn (sklearn), then tanh(z -/+ t_{2, 0.9} * se) with z = atanh(kappa) and the
    # jackknife se of the three atanh values.
    a = np.array([0, 1, 2, 2, 1, 0, 0, 2, 1, 1])
    b = np.array([0, 1, 1, 2, 1, 0, 2, 2, 0, 1])
    q = np.array(["q0"] * 4 + ["q1"] * 3 + ["q2"] * 3)
    iv = rl.cohen_kappa_interval(a, b, labels=[0, 1, 2], weights="quadratic",
                                 rng=np.random.default_rng(3), resamples=200, level=0.8,
                                 clusters=q)
    loo = np.arctanh([cohen_kappa_score(a[q != c], b[q != c], labels=[0, 1, 2],
                                        weights="quadratic") for c in ("q0", "q1", "q2")])
    se = np.sqrt(2 / 3 * ((loo - loo.mean()) ** 2).sum())
    z = np.arctanh(cohen_kappa_score(a, b, labels=[0, 1, 2], weights="quadratic"))
    tq = sps.t.ppf(0.9, 2)
    assert (iv.low, iv.high) == pytest.approx((np.tanh(z - tq * se), np.tanh(z + tq * se)))
    assert (iv.unit, iv.units, iv.method, iv.resamples) == ("query", 3, "jackknife-t", 0)


def test_share_interval_by_hand_is_the_jackknife_t_on_the_arcsine_root():
    # q0, q1, q2: 1, 2, 3 disagreements in 4 pairs; share 6/12, without one query 5/8,
    # 4/8, 3/8 -> asin(sqrt(.)) = 0.911738, 0.785398, 0.659058; jackknife se
    # sqrt(2/3 * 2 * 0.126340^2) = 0.145885; t_{2, 0.95} = 2.919986; ends
    # sin(0.785398 -/+ 0.425983)^2 = 0.123712, 0.876288.
    hits = [1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0]
    q = ["q0"] * 4 + ["q1"] * 4 + ["q2"] * 4
    iv = rl.share_interval(hits, rng=np.random.default_rng(0), resamples=500, level=0.9,
                           clusters=q)
    assert (iv.low, iv.high) == pytest.approx((0.123712, 0.876288), abs=1e-6)
    # Two queries (t on 1 df): the arcsine-root ends fall outside [0, pi/2] and are
    # clipped, so the share's interval is [0, 1], not a folded one.
    iv = rl.share_interval(hits[:8], rng=np.random.default_rng(0), resamples=500,
                           level=0.95, clusters=q[:8])
    assert (iv.low, iv.high) == pytest.approx((0.0, 1.0))


def test_cluster_interval_falls_back_to_resampled_queries_when_a_leave_one_out_is_undefined():
    # Without q0 every grade is 1: kappa undefined (chance agreement 1), so no jackknife;
    # the expanded percentile interval of resampled whole queries, as an explicit loop.
    a = np.array([0, 1, 2, 2, 1, 1, 1, 1, 1, 1])
    b = np.array([0, 1, 1, 2, 1, 1, 1, 1, 1, 1])
    q = np.array(["q0"] * 4 + ["q1"] * 3 + ["q2"] * 3)
    iv = rl.cohen_kappa_interval(a, b, labels=[0, 1, 2], weights="quadratic",
                                 rng=np.random.default_rng(3), resamples=200, level=0.8,
                                 clusters=q)
    members = [np.flatnonzero(q == c) for c in ("q0", "q1", "q2")]
    vals = []
    for row in np.random.default_rng(3).integers(0, 3, size=(200, 3)):
        rows = np.concatenate([members[i] for i in row])
        x, y = a[rows], b[rows]
        vals.append(cohen_kappa_score(x, y, labels=[0, 1, 2], weights="quadratic")
                    if len(set(x) | set(y)) > 1 else np.nan)
    vals = np.array(vals)
    defined = vals[np.isfinite(vals)]
    levels = rl.quantile_levels(0.8, 3, expanded=True)
    assert (iv.low, iv.high) == pytest.approx(tuple(np.quantile(defined, levels)))
    assert (iv.method, iv.undefined) == ("expanded-percentile", int((~np.isfinite(vals)).sum()))


def test_kappa_of_one_on_every_query_falls_back_rather_than_reading_an_infinite_z():
    a = [0, 1, 2, 0, 1, 2]
    iv = rl.cohen_kappa_interval(a, a, labels=[0, 1, 2], rng=np.random.default_rng(0),
                                 resamples=50, level=0.9, clusters=["q0"] * 3 + ["q1"] * 3)
    assert (iv.low, iv.high, iv.method) == (1.0, 1.0, "expanded-percentile")


def test_audit_records_query_resampling_and_the_band_names_it():
    data = simulated_ratings(4, 30, 2, scale=3)
    grades = long(data, raters=["grader-a", "auditor-b"]).assign(round=1)
    queries = pd.DataFrame({"query_id": ["q0", "q1", "q2"], "group": ["k", "k", "k"]})
    spec = Resampling(seed=8, resamples=200, level=0.9)
    m = ag.audit_agreement(grades, audit_ids=["q0", "q1", "q2"], queries=queries,
                           grader="grader-a", auditor="auditor-b", round=1,
                           scale=[0, 1, 2], relevant_min=1, resampling=spec).metrics
    assert m["bootstrap"]["resample_unit"] == "query"
    for name in ("weighted_kappa", "binary_kappa", "kappa", "disagreement",
                 "two_step_disagreement"):
        assert m["intervals"][name]["resample_unit"] == "query"
        assert m["intervals"][name]["units"] == 3
    assert "the 90% interval over 3 queries" in m["bands"]["weighted_kappa"]["verdict"]


def test_krippendorff_clusters_follow_the_items_with_two_ratings():
    data = np.array([[0, 0], [1, np.nan], [2, 2], [0, 1], [2, 1], [1, 1]], dtype=float)
    q = ["a", "a", "b", "b", "c", "c"]
    iv = rl.krippendorff_alpha_interval(data, values=[0, 1, 2], rng=np.random.default_rng(1),
                                        resamples=100, confidence=0.9, clusters=q)
    assert iv.units == 3
    with pytest.raises(InputError, match="one unit per judged pair"):
        rl.krippendorff_alpha_interval(data, values=[0, 1, 2], rng=np.random.default_rng(1),
                                       resamples=100, confidence=0.9, clusters=q[:5])


def test_one_audited_query_gives_no_interval_rather_than_a_zero_width_one():
    iv = rl.cohen_kappa_interval([0, 1, 2, 2], [0, 1, 1, 2], labels=[0, 1, 2],
                                 rng=np.random.default_rng(0), resamples=50, level=0.95,
                                 clusters=["q"] * 4)
    assert (iv.low, iv.high, iv.undefined, iv.units) == (None, None, 50, 1)
    assert bands.verdict("kappa", 0.6, iv.low, iv.high)["settled"] is None


def test_fleiss_and_alpha_cluster_intervals_are_jackknife_t_of_statsmodels_and_krippendorff():
    # 40 items of 3 raters in 4 queries of 10: each statistic without each query in turn
    # from the independent implementations, then tanh(atanh(theta) -/+ t_{3, .95} * se).
    data = simulated_ratings(21, 40, 3)
    q = np.array([f"q{i // 10}" for i in range(40)])
    counts = np.stack([(data == g).sum(axis=1) for g in range(4)], axis=1)
    tq = sps.t.ppf(0.95, 3)

    def expected(value):
        z = np.arctanh(value(np.ones(40, dtype=bool)))
        loo = np.arctanh([value(q != c) for c in ("q0", "q1", "q2", "q3")])
        se = np.sqrt(3 / 4 * ((loo - loo.mean()) ** 2).sum())
        return np.tanh(z - tq * se), np.tanh(z + tq * se)

    fk = rl.fleiss_kappa_interval(counts, rng=np.random.default_rng(0), resamples=100,
                                  level=0.9, clusters=q)
    assert (fk.low, fk.high) == pytest.approx(expected(lambda m: sm_fleiss_kappa(counts[m])))
    ka = rl.krippendorff_alpha_interval(data, values=[0, 1, 2, 3], rng=np.random.default_rng(0),
                                        resamples=100, confidence=0.9, clusters=q)
    assert (ka.low, ka.high) == pytest.approx(expected(lambda m: krippendorff.alpha(
        reliability_data=data[m].T, value_domain=[0, 1, 2, 3], level_of_measurement="ordinal")))
    assert fk.method == ka.method == "jackknife-t"


# --- per-query cell counts in place of one-hot rows -------------------------------------

def _one_hot_interval(a, b, labels, weights, clusters, seed, resamples=200, level=0.9):
    """The interval as the one-hot rows summed by np.add.at per query gave it."""
    k = len(labels)
    cells = np.array([labels.index(int(x)) * k + labels.index(int(y)) for x, y in zip(a, b)])
    onehot = np.zeros((len(cells), k * k))
    onehot[np.arange(len(cells)), cells] = 1.0
    _, code = np.unique(np.asarray(clusters).astype(str), return_inverse=True)
    per_query = np.zeros((code.max() + 1, k * k))
    np.add.at(per_query, code, onehot)
    w = rl._disagreement_weights(k, weights)
    return rl._of_units(per_query, lambda t: rl._kappa_of_tables(t, w),
                        rng=np.random.default_rng(seed), resamples=resamples, level=level,
                        clustered=True, transform=rl.fisher_z)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cluster_kappa_interval_from_cell_counts_equals_the_one_hot_rows_to_the_bit(seed,
                                                                                   weights):
    rng = np.random.default_rng(seed)
    n = 3000
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.7, a, rng.integers(0, 4, n))
    # query ids whose text order is not their number order (q10 before q2)
    clusters = np.array([f"q{i}" for i in rng.integers(0, 40, n)], dtype=object)
    got = rl.cohen_kappa_interval(a, b, labels=[0, 1, 2, 3], weights=weights,
                                  rng=np.random.default_rng(5), resamples=200, level=0.9,
                                  clusters=clusters)
    assert got == _one_hot_interval(a, b, [0, 1, 2, 3], weights, clusters, 5)
    assert got.method == rl.METHOD_CLUSTERED and got.units == 40


def test_cluster_kappa_fallback_resamples_the_same_query_counts():
    # every pair of query q1 agrees on grade 1 alone: without q0 kappa is 0/0, so the
    # interval falls back to resampled queries, drawn from the counts per query
    a = np.array([0, 1, 1, 0, 1, 1])
    b = np.array([0, 1, 0, 0, 1, 1])
    clusters = np.array(["q0", "q0", "q0", "q1", "q1", "q1"])
    a[3:], b[3:] = 1, 1
    got = rl.cohen_kappa_interval(a, b, labels=[0, 1], rng=np.random.default_rng(3),
                                  resamples=300, level=0.9, clusters=clusters)
    assert got.method == rl.METHOD_FALLBACK
    assert got == _one_hot_interval(a, b, [0, 1], None, clusters, 3, resamples=300)


def test_cell_counts_of_a_pair_table_by_hand():
    # pairs (0,0) (0,1) (2,1) (2,1) on labels [0, 1, 2]: cells 0, 1, 7, 7
    counts = rl._cell_counts(np.array([0, 0, 2, 2]), np.array([0, 1, 1, 1]), [0, 1, 2])
    assert counts.tolist() == [1.0, 1.0, 0, 0, 0, 0, 0, 2.0, 0]


def test_a_grade_off_the_scale_still_raises_as_the_label_lookup_did():
    with pytest.raises(KeyError):
        rl.cohen_kappa_point(np.array([0, 5]), np.array([0, 1]), labels=[0, 1])


@pytest.mark.parametrize("seed", [0, 1])
def test_cluster_share_interval_from_bincount_equals_the_rows_summed_by_add_at(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    hits = rng.random(n) < 0.2
    clusters = np.array([f"q{i}" for i in rng.integers(0, 30, n)])
    got = rl.share_interval(hits, rng=np.random.default_rng(1), resamples=100, level=0.95,
                            clusters=clusters)
    rows = np.column_stack([hits.astype(float), np.ones(n)])
    with np.errstate(all="ignore"):
        want = rl._of_units(rl.cluster_sums(rows, clusters), lambda t: t[:, 0] / t[:, 1],
                            rng=np.random.default_rng(1), resamples=100, level=0.95,
                            clustered=True, transform=rl.arcsine_root)
    assert got == want


def test_clusters_of_another_length_keep_their_message():
    with pytest.raises(InputError, match="one unit per judged pair") as e:
        rl.cohen_kappa_interval([0, 1, 1], [0, 1, 0], labels=[0, 1],
                                rng=np.random.default_rng(0), resamples=10, level=0.9,
                                clusters=["q1", "q2"])
    assert "2 units for 3 pairs" in str(e.value)
