"""The shared resample plan: one seeded set of bootstrap counts and sign flips per query set,
applied to every arm and comparison as matrix products."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats as sps

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.evaluation import planned, resample, stats
from relgrade.evaluation.compare import compare_arms
from relgrade.evaluation.resample import ResamplePlan
from relgrade.evaluation.settings import Settings
from relgrade.rng import comparison_rng

# Values in eighths: every sum and product below is exact in float64, so the plan's matrix
# product and an explicit gather give the same bits.
A = np.array([0.5, 0.25, 0.75, 0.125, 1.0, 0.0, 0.375])
B = np.array([0.25, 0.25, 0.5, 0.375, 0.625, 0.125, 0.0])


def test_counts_are_the_explicit_indices_counted_and_the_column_means_their_means():
    plan = ResamplePlan(seed=3, n=7, n_resamples=9, n_permutations=5)
    idx = plan.indices(0)
    assert idx.shape == (9, 7) and idx.min() >= 0 and idx.max() <= 6
    counts = plan.counts(0)
    # row 0 by hand: counting each query's index in the drawn row
    assert counts[0].tolist() == [float((idx[0] == j).sum()) for j in range(7)]
    assert (counts.sum(axis=1) == 7).all()
    res, = planned.apply(plan, [planned.Columns(A[None, :], None)], flips=False)
    # the plan's mean of a column is the mean of the same resample drawn by indices, exactly
    assert res.arm_means(0).tolist() == A[idx].mean(axis=1).tolist()


def test_plan_blocks_draw_from_their_own_documented_generators(monkeypatch):
    monkeypatch.setattr(resample, "BLOCK_ELEMENTS", 14)        # 2 rows a block for n = 7
    plan = ResamplePlan(seed=3, n=7, n_resamples=5, n_permutations=3)
    assert plan.rows == 2
    want = comparison_rng(3, "plan", "plan-v1", "queries", "7", "bootstrap", "2").integers(
        0, 7, size=(1, 7), dtype=np.int64)
    assert plan.indices(2).tolist() == want.tolist()          # the last block: 1 row
    words = comparison_rng(3, "plan", "plan-v1", "queries", "7", "sign-flip", "1").integers(
        0, 2 ** 32, size=(1, 1), dtype=np.uint32)
    signs = plan.signs(1)
    # query j flips when bit j of the row's word is set
    assert signs[0].tolist() == [-1.0 if (int(words[0, 0]) >> j) & 1 else 1.0 for j in range(7)]
    with pytest.raises(InputError):
        plan.indices(3)


def test_a_difference_resampled_from_two_arm_columns_equals_resampling_the_difference_column():
    plan = ResamplePlan(seed=11, n=7, n_resamples=400, n_permutations=300)
    d = A - B
    both, alone = planned.apply(plan, [planned.Columns(np.vstack([A, B]), None, (),
                                                       ((0, 1),)),
                                       planned.Columns(d[None, :], None, (0,))], flips=True)
    est = float(d.mean())
    assert both.pair_means(0, 1).tolist() == alone.arm_means(0).tolist()
    ci_pair = stats.interval_from_resamples(both.pair_means(0, 1), est,
                                            jackknife=stats.jackknife_means(d), n=7)
    ci_col = stats.interval_from_resamples(alone.arm_means(0), est,
                                           jackknife=stats.jackknife_means(d), n=7)
    assert ci_pair == ci_col
    m1, t1 = both.pair_studentized(0, 1, est)
    m2, t2 = alone.arm_studentized(0, est)
    assert m1.tolist() == m2.tolist() and t1.tolist() == t2.tolist()
    # sign flips: arm a's signed sum minus arm b's is the signed sum of the difference
    assert both.flip_sums(0, 1).tolist() == (plan.flip_sums(d[:, None])[:, 0]).tolist()


def test_weighted_plan_means_are_weighted_means_of_the_explicit_resample():
    w = np.array([1.0, 2.0, 0.5, 1.0, 4.0, 1.0, 2.0])
    plan = ResamplePlan(seed=5, n=7, n_resamples=6, n_permutations=2)
    res, = planned.apply(plan, [planned.Columns(np.vstack([A, B]), w, (0,), ((0, 1),))],
                         flips=False)
    idx = plan.indices(0)
    assert res.arm_means(1).tolist() == ((B * w)[idx].sum(1) / w[idx].sum(1)).tolist()
    # the studentized statistics equal stats.studentized_resamples' on the same resamples
    est = float(stats.weighted_mean(A, w))
    mu, t = res.arm_studentized(0, est)
    se = np.array([stats.standard_error(A[r], w[r]) for r in idx])
    means = np.array([stats.weighted_mean(A[r], w[r]) for r in idx])
    np.testing.assert_allclose(mu, means, rtol=1e-13)
    np.testing.assert_allclose(t, (means - est) / se, rtol=1e-9)


def _table(n=300, arms=4, seed=0, groups=False):
    rng = np.random.default_rng(seed)
    base = rng.beta(2, 3, n)
    rows = []
    for a in range(arms):
        for m in ("m1", "m2"):
            v = np.clip(base + 0.02 * a + rng.normal(0, 0.1, n), 0, 1)
            df = pd.DataFrame({"arm": f"arm{a}", "query_id": [f"q{i:04d}" for i in range(n)],
                               "measure": m, "value": v})
            if groups:
                df["group"] = np.where(np.arange(n) % 3 == 0, "head", "tail")
            rows.append(df)
    return pd.concat(rows, ignore_index=True)


def _numbers(result):
    doc = json.loads(result.to_json())
    drop = ("p_holm", "significant", "holm_family", "verdict")
    return {(c["arm_a"], c["arm_b"], c["measure"]): {k: v for k, v in c.items() if k not in drop}
            for c in doc["comparisons"]}


def test_results_do_not_depend_on_worker_count_or_comparison_order(monkeypatch):
    pq = _table(groups=True)
    s = Settings(seed=9, n_resamples=700, n_permutations=600, pairs="all")
    monkeypatch.setattr(resample, "BLOCK_ELEMENTS", 300 * 64)   # 64-row blocks: 11 of them
    many = compare_arms(pq, settings=s, workers=1).to_json()
    assert compare_arms(pq, settings=s, workers=3).to_json() == many
    assert json.loads(many)["resample_plans"][0]["block_rows"] == 64
    monkeypatch.undo()
    one = compare_arms(pq, settings=s, workers=1).to_json()
    assert compare_arms(pq, settings=s, workers=2).to_json() == one
    pairs = [("arm2", "arm0"), ("arm3", "arm1"), ("arm1", "arm0")]
    fwd = _numbers(compare_arms(pq, settings=s, pairs=pairs, workers=1))
    back = _numbers(compare_arms(pq, settings=s, pairs=pairs[::-1], measures=["m2", "m1"],
                                 workers=2))
    assert fwd == back
    # a comparison's numbers are the same whichever other comparisons are made
    alone = _numbers(compare_arms(pq, settings=s, pairs=pairs[:1], measures=["m1"]))
    assert alone[("arm2", "arm0", "m1")] == fwd[("arm2", "arm0", "m1")]
    assert json.loads(one)["resample_plans"][0] == {
        "version": "plan-v1", "seed": 9, "scope": "queries", "n": 300, "n_resamples": 700,
        "n_permutations": 600, "block_rows": 1024}


def test_plan_percentile_interval_agrees_with_scipy_bootstrap_within_monte_carlo_error():
    pq = _table(n=400, arms=2)
    s = Settings(seed=4, n_resamples=4000, n_permutations=2000, pairs="all",
                 method="percentile")
    c = compare_arms(pq, settings=s, measures=["m1"]).pairs[0]
    v = pq[pq.measure == "m1"].pivot(index="query_id", columns="arm", values="value")
    d = (v[c.arm_a] - v[c.arm_b]).to_numpy()
    ref = sps.bootstrap((d,), np.mean, n_resamples=4000, method="percentile",
                        random_state=np.random.default_rng(1)).confidence_interval
    # the 2.5% quantile of 4,000 resamples moves by about 0.1 standard errors between seeds
    tol = 0.15 * float(stats.standard_error(d))
    assert c.delta.low == pytest.approx(ref.low, abs=tol)
    assert c.delta.high == pytest.approx(ref.high, abs=tol)
    assert c.delta.se == pytest.approx(float(np.std(d, ddof=1) / np.sqrt(d.size)), rel=0.05)


def test_plan_sign_flip_p_agrees_with_scipy_permutation_test_within_monte_carlo_error():
    rng = np.random.default_rng(8)
    n = 200
    a = rng.beta(2, 3, n)
    d = rng.normal(0, 0.08, n)
    b = a - (d - d.mean() + 0.008)                # mean difference 0.008, t near 1.4
    pq = pd.concat([pd.DataFrame({"arm": arm, "query_id": [f"q{i}" for i in range(n)],
                                  "measure": "m", "value": v}) for arm, v in (("a", a), ("b", b))])
    s = Settings(seed=2, n_resamples=200, n_permutations=20000, baseline="b")
    c = compare_arms(pq, settings=s).pairs[0]
    ref = sps.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                               permutation_type="samples", n_resamples=20000,
                               alternative="two-sided", random_state=np.random.default_rng(3),
                               vectorized=True)
    p = ref.pvalue
    assert 0.02 < p < 0.5
    # two independent estimates of p from 20,000 draws each: sd of the difference
    assert c.randomization.p == pytest.approx(p, abs=4 * np.sqrt(2 * p * (1 - p) / 20000))


def test_compare_cli_records_the_resample_plan_and_its_seed(tmp_path):
    pq = _table(n=60, arms=2)
    path = tmp_path / "pq.parquet"
    pq.to_parquet(path)
    args = ["compare", "--per-query", str(path), "--all-pairs", "--json", "--seed", "77",
            "--bootstrap", "500", "--permutations", "400"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    doc = json.loads(first.output)
    assert doc["resample_plans"] == [{"version": "plan-v1", "seed": 77, "scope": "queries",
                                      "n": 60, "n_resamples": 500, "n_permutations": 400,
                                      "block_rows": 1024}]
    again = CliRunner().invoke(main, args + ["--workers", "2"])
    assert json.loads(again.output)["comparisons"] == doc["comparisons"]


def test_plan_refuses_a_table_of_the_wrong_length_and_empty_sizes():
    plan = ResamplePlan(seed=1, n=7, n_resamples=3, n_permutations=3)
    with pytest.raises(InputError, match="one row per query"):
        plan.resample_sums(np.ones((6, 2)))
    with pytest.raises(InputError, match="positive sizes"):
        ResamplePlan(seed=1, n=0, n_resamples=3, n_permutations=3)
