"""Grading diagnostics: position bias and leniency drift (relgrade.protocol.diagnostics)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.protocol import diagnostics as dg


def long(rows):
    """A long grades table from (query_id, chunk_id, grader, grade) tuples."""
    return pd.DataFrame([{"query_id": q, "chunk_id": c, "grader": g, "role": "grader",
                          "round": 1, "grade": grade, "reason": f"{g} on {c}"}
                         for q, c, g, grade in rows])


def test_position_bias_is_the_mean_grade_by_display_position():
    g = long([("q1", "c1", "ga", 2), ("q1", "c2", "ga", 0), ("q1", "c3", "ga", 1),
              ("q2", "c4", "ga", 1), ("q2", "c5", "ga", 1), ("q2", "c6", "ga", 2)])
    pos = pd.DataFrame({"query_id": ["q1"] * 3 + ["q2"] * 3,
                        "chunk_id": ["c1", "c2", "c3", "c4", "c5", "c6"],
                        "position": [0, 1, 2, 0, 1, 2]})
    table = dg.position_bias(g, pos)
    assert table.values.tolist() == [["ga", 0, 2, 1.5], ["ga", 1, 2, 0.5], ["ga", 2, 2, 1.5]]
    diag = dg.grading_diagnostics(g, pos)
    # Least-squares slope of grade on position: x = (0,1,2,0,1,2), y = (2,0,1,1,1,2);
    # x mean 1, y mean 7/6; sum dx*dy = -(2 - 7/6) + (1 - 7/6) - (1 - 7/6) + (2 - 7/6) = 0.
    assert diag["graders"]["ga"]["position_slope"] == pytest.approx(0.0, abs=1e-12)
    # Three chunks per query: position p of 3 falls in third floor(3p/3) = p.
    assert diag["graders"]["ga"]["mean_by_third"] == {"first": 1.5, "middle": 0.5, "last": 1.5}
    assert diag["notes"] == ["leniency drift not computed: the grades table has no "
                             "`sequence` column recording the order of grading"]


def test_position_slope_reads_a_falling_grade():
    g = long([("q1", "c1", "ga", 2), ("q1", "c2", "ga", 0), ("q2", "c3", "ga", 1),
              ("q2", "c4", "ga", 1)])
    pos = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"],
                        "chunk_id": ["c1", "c2", "c3", "c4"], "position": [0, 1, 0, 1]})
    # x = (0,1,0,1), y = (2,0,1,1): sum dx*dy = -0.5*1 + 0.5*(-1) + 0 + 0 = -1; sum dx^2 = 1.
    assert dg.grading_diagnostics(g, pos)["graders"]["ga"]["position_slope"] == pytest.approx(-1.0)


def test_position_join_uses_role_and_round_when_both_tables_have_them():
    g = long([("q1", "c1", "ga", 2)])
    g.loc[0, "role"] = "auditor"
    pos = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["c1", "c1"],
                        "role": ["grader", "auditor"], "round": [1, 1], "position": [0, 4]})
    assert dg.position_bias(g, pos).values.tolist() == [["ga", 4, 1, 2.0]]


def test_leniency_drift_is_the_mean_grade_by_stretch_of_the_grading_sequence():
    g = long([("q", f"c{i}", "ga", grade) for i, grade in enumerate([0, 0, 1, 1, 2, 2])])
    g["sequence"] = range(6)
    table = dg.leniency_drift(g, bins=3)
    assert table.values.tolist() == [["ga", 1, 2, 0.0], ["ga", 2, 2, 1.0], ["ga", 3, 2, 2.0]]
    diag = dg.grading_diagnostics(g, bins=3)
    # Least-squares slope of grade on relative order x = 0, 0.2, ..., 1 (mean 0.5), y mean 1:
    # sum dx*dy = 0.5 + 0.3 + 0 + 0 + 0.3 + 0.5 = 1.6; sum dx^2 = 2 * (0.25 + 0.09 + 0.01) = 0.7.
    assert diag["graders"]["ga"]["drift_slope"] == pytest.approx(1.6 / 0.7)
    assert diag["graders"]["ga"]["mean_by_stretch"] == {"1": 0.0, "2": 1.0, "3": 2.0}


def test_leniency_drift_refuses_a_bins_count_that_is_not_a_positive_integer():
    g = long([("q", "c0", "ga", 1)]).assign(sequence=[0])
    with pytest.raises(InputError, match="bins must be a positive integer"):
        dg.leniency_drift(g, bins=0)


def test_position_table_listing_a_pair_twice_is_refused():
    g = long([("q1", "c1", "ga", 2)])
    pos = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["c1", "c1"], "position": [0, 1]})
    with pytest.raises(InputError, match="lists one pair twice"):
        dg.position_bias(g, pos)


def test_diagnostics_without_positions_or_sequence_say_what_was_not_computed():
    out = dg.grading_diagnostics(long([("q1", "c1", "ga", 2), ("q1", "c2", "gb", 0)]))
    assert out["graders"] == {"ga": {"role": "grader", "grades": 1},
                              "gb": {"role": "grader", "grades": 1}}
    assert out["flags"] == []
    assert out["notes"] == ["position bias not computed: no display positions were given",
                             "leniency drift not computed: the grades table has no "
                             "`sequence` column recording the order of grading"]


# --- intervals, flags, every grader, grading order -------------------------------------

def test_slope_interval_equals_statsmodels_cluster_robust_ols():
    import statsmodels.api as sm

    rng = np.random.default_rng(4)
    x = rng.random(80)
    q = rng.integers(0, 9, 80)
    y = 0.5 * x + 0.2 * q + rng.normal(size=80)
    for intercept in (True, False):
        design = sm.add_constant(x) if intercept else x[:, None]
        fit = sm.OLS(y, design).fit(cov_type="cluster", cov_kwds={"groups": q}, use_t=True)
        ours = dg.slope_interval(x, y, q, level=0.9, intercept=intercept)
        assert ours["slope"] == pytest.approx(fit.params[-1], abs=1e-12)
        assert [ours["low"], ours["high"]] == pytest.approx(list(fit.conf_int(0.1)[-1]),
                                                           abs=1e-10)


def test_slope_interval_by_hand_on_two_queries():
    # y = x exactly on two queries: slope 1 and zero residuals, so the interval is [1, 1].
    out = dg.slope_interval([0, 1, 0, 1], [0, 1, 0, 1], ["a", "a", "b", "b"])
    assert out == {"slope": 1.0, "low": 1.0, "high": 1.0, "excludes_zero": True}
    # One query: a slope, but no interval (a cluster interval needs two clusters).
    one = dg.slope_interval([0, 1, 2], [2, 1, 1], ["a", "a", "a"])
    assert one["slope"] == pytest.approx(-0.5) and one["low"] is None
    # x constant: no slope.
    assert dg.slope_interval([1, 1], [0, 2], ["a", "b"])["slope"] is None


def test_position_slope_is_read_within_each_display_not_across_pool_sizes():
    # q1 has 2 chunks, both grade 2; q2 has 4 chunks, all grade 0. Pooled, later positions
    # (2, 3) exist only in q2 and would read as a falling grade; within each display the
    # grade does not move with position, so the slope is 0.
    g = long([("q1", "a", "ga", 2), ("q1", "b", "ga", 2)]
             + [("q2", f"c{i}", "ga", 0) for i in range(4)])
    pos = pd.DataFrame({"query_id": ["q1", "q1"] + ["q2"] * 4,
                        "chunk_id": ["a", "b", "c0", "c1", "c2", "c3"],
                        "position": [0, 1, 0, 1, 2, 3]})
    d = dg.grading_diagnostics(g, pos)["graders"]["ga"]
    assert d["position_slope"] == pytest.approx(0.0, abs=1e-12)
    assert d["position_flag"] is False


def test_drift_is_read_in_grading_order_not_in_table_order():
    # The table is sorted by pair (c0..c5) but the grader graded c5 first and c0 last:
    # sequence 5, 4, ..., 0. Grades by pair are 0, 0, 1, 1, 2, 2, so in grading order they
    # fall: 2, 2, 1, 1, 0, 0; the slope is -1.6 / 0.7 (see the rising case above).
    g = long([(f"q{i % 3}", f"c{i}", "ga", grade)
              for i, grade in enumerate([0, 0, 1, 1, 2, 2])])
    g["sequence"] = [5, 4, 3, 2, 1, 0]
    d = dg.grading_diagnostics(g, bins=3)["graders"]["ga"]
    assert d["drift_slope"] == pytest.approx(-1.6 / 0.7)
    assert d["mean_by_stretch"] == {"1": 2.0, "2": 1.0, "3": 0.0}


def test_a_drifting_grader_is_flagged_and_a_steady_one_is_not():
    # 20 queries of 10 pairs each, graded in order. "drifter" grows generous: grade 0 for
    # the first half of its sequence, 2 for the second. "steady" grades 2 at places 1, 2, 7
    # and 8 of every query (mean place 4.5, the mean of 0..9), 0 elsewhere: every query alike
    # and no trend inside one, so its slope is 0. The drifter's interval excludes 0.
    rows, seq = [], []
    for q in range(20):
        for c in range(10):
            i = q * 10 + c
            rows.append((f"q{q:02d}", f"c{c}", "drifter", 0 if i < 100 else 2))
            rows.append((f"q{q:02d}", f"c{c}", "steady", 2 if c in (1, 2, 7, 8) else 0))
            seq += [i, i]
    g = long(rows).assign(sequence=seq)
    out = dg.grading_diagnostics(g, graders=["drifter", "steady", "idle"])
    assert out["graders"]["drifter"]["drift_flag"] is True
    assert out["graders"]["steady"]["drift_flag"] is False
    assert out["graders"]["steady"]["drift_slope"] == pytest.approx(0.0, abs=1e-12)
    assert out["flags"] == [
        "drifter: leniency drift: slope {:+.3f} per whole sequence, interval [{:+.3f}, {:+.3f}]"
        " excludes 0".format(out["graders"]["drifter"]["drift_slope"],
                             *out["graders"]["drifter"]["drift_interval"])]
    # A grader declared in params without grades is listed, with a note.
    assert out["graders"]["idle"] == {"grades": 0}
    assert "idle has no grades: nothing to diagnose" in out["notes"]
    assert out["level"] == 0.95


def test_every_grader_of_the_round_is_diagnosed_with_its_role():
    rows = [("q1", "c1", "ga", 1), ("q1", "c1", "gb", 1), ("q1", "c1", "r1", 0)]
    g = long(rows)
    g.loc[g["grader"] == "r1", "role"] = "rater"
    out = dg.grading_diagnostics(g.assign(sequence=[0, 0, 0]))
    assert {k: v["role"] for k, v in out["graders"].items()} == {"ga": "grader",
                                                                "gb": "grader",
                                                                "r1": "rater"}


def test_group_codes_are_the_ranks_np_unique_gives():
    from relgrade.protocol.diagnostics import _group_codes

    # distinct values 3, 7, 9 rank 0, 1, 2
    assert _group_codes(np.array([7, 3, 9, 7, 3], dtype=np.int32)).tolist() == [1, 0, 2, 1, 0]
    rng = np.random.default_rng(0)
    for values in (rng.integers(-50, 50, 400), rng.integers(0, 2**40, 30),
                   rng.integers(5, 9, 7).astype(np.uint8), np.array(["b", "a", "b"])):
        assert _group_codes(values).tolist() == \
            np.unique(values, return_inverse=True)[1].tolist()


def _slope_by_one_product(x, y, groups, intercept):
    """slope_interval's point and interval as first written: every product made at once."""
    from scipy.stats import t as t_dist

    X = np.column_stack([np.ones_like(x), x]) if intercept else x[:, None]
    k = X.shape[1]
    bread = np.linalg.inv(X.T @ X)
    beta = bread @ X.T @ y
    _, codes = np.unique(groups, return_inverse=True)
    g = int(codes.max()) + 1
    score = np.zeros((g, k))
    np.add.at(score, codes, X * (y - X @ beta)[:, None])
    n = x.size
    var = g / (g - 1) * (n - 1) / (n - k) * (bread @ (score.T @ score) @ bread)[-1, -1]
    half = float(t_dist.ppf(0.975, g - 1) * np.sqrt(max(var, 0.0)))
    return float(beta[-1]), float(beta[-1]) - half, float(beta[-1]) + half


@pytest.mark.parametrize("rows", [64, 1 << 16])
def test_slope_interval_summed_by_blocks_of_rows_has_the_one_product_bits(rows, monkeypatch):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=5000), rng.normal(size=5000)
    groups = rng.integers(0, 300, 5000).astype(np.int32)
    monkeypatch.setattr(dg, "_DESIGN_ROWS", rows)
    for intercept in (True, False):
        got = dg.slope_interval(x, y, groups, intercept=intercept)
        assert (got["slope"], got["low"], got["high"]) == \
            _slope_by_one_product(x, y, groups, intercept)


@pytest.mark.parametrize("seed", range(6))
def test_means_by_stretch_are_leniency_drifts_table(seed):
    # sums of whole grades over counts: the bits of pandas' group means, grades truncated
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    g = pd.DataFrame({"query_id": [f"q{i}" for i in rng.integers(0, 30, n)],
                      "chunk_id": [f"c{i}" for i in range(n)],
                      "grader": rng.choice(["ga", "gb"], n),
                      "grade": rng.integers(0, 4, n) + rng.choice([0.0, 0.5], n),
                      "sequence": rng.integers(0, n, n)})
    bins = int(rng.integers(1, 7))
    table = dg.leniency_drift(g, bins=bins)
    got = dg.grading_diagnostics(g, bins=bins)["graders"]
    for grader, rows in table.groupby("grader"):
        assert got[grader]["mean_by_stretch"] == {
            str(b): m for b, m in zip(rows["bin"], rows["mean_grade"])}


@pytest.mark.parametrize("n", [100_003, 300_001])
def test_drift_fit_of_a_long_sequence_has_the_one_product_bits(n):
    # the drift's inputs: places 0..1 in grading order, whole grades, many queries; the
    # design matrix made a block at a time after X'X, its products the whole one's
    rng = np.random.default_rng(n)
    x = np.arange(n, dtype=float) / (n - 1)
    y = rng.integers(0, 4, n).astype(float)
    groups = rng.integers(0, n // 40, n).astype(np.int32)
    got = dg.slope_interval(x, y, groups)
    assert (got["slope"], got["low"], got["high"]) == _slope_by_one_product(x, y, groups, True)


@pytest.mark.parametrize(("n", "bins", "rows"), [(10, 3, 4), (2, 5, 64), (1000, 5, 64),
                                                 (100_003, 7, 1 << 16)])
def test_stretch_sums_by_blocks_are_the_whole_sequences(n, bins, rows, monkeypatch):
    rng = np.random.default_rng(n)
    grade = rng.integers(0, 4, n) + rng.choice([0.0, 0.5], n)
    stretch = (np.arange(n, dtype=float) * bins // n).astype(np.int64)
    monkeypatch.setattr(dg, "_DESIGN_ROWS", rows)
    sums, counts = dg._stretch_sums(grade, bins)
    assert sums.tolist() == np.bincount(stretch, weights=np.trunc(grade)).tolist()
    assert counts.tolist() == np.bincount(stretch).tolist()


def test_stretch_sums_by_hand():
    # 5 grades in 2 stretches: places 0, 1, 2 -> 0 (j * 2 // 5 = 0, 0, 0), 3, 4 -> 1;
    # grades truncated: 1, 2, 3 | 0, 3
    sums, counts = dg._stretch_sums(np.array([1.5, 2.0, 3.0, 0.5, 3.0]), 2)
    assert sums.tolist() == [6.0, 3.0] and counts.tolist() == [3, 2]


def test_span_is_the_places_scaled_to_one_block_by_block():
    # 5 places: 0, 1/4, 2/4, 3/4, 1
    assert dg.Span(5)[0:5].tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert dg.Span(5)[3:9].tolist() == [0.75, 1.0]
    assert dg.Span(1)[0:1].tolist() == [0.0]
    n = 100_003
    whole = np.arange(n, dtype=float)
    whole /= n - 1
    assert np.array_equal(np.concatenate([dg.Span(n)[s:s + 4096] for s in range(0, n, 4096)]),
                          whole)


@pytest.mark.parametrize("n", [2, 999, 200_001])
def test_drift_fit_on_a_span_has_the_whole_arrays_bits(n):
    rng = np.random.default_rng(n)
    y = rng.integers(0, 4, n).astype(float)
    groups = rng.integers(0, max(n // 40, 2), n).astype(np.int32)
    x = np.arange(n, dtype=float)
    x /= max(n - 1, 1)
    assert dg.slope_interval(dg.Span(n), y, groups) == dg.slope_interval(x, y, groups)


def test_shown_keeps_one_query_a_display_and_gives_each_grade_its_display_query():
    # displays 7, 7, 3, 7 of queries 2, 2, 0, 2: the grades' queries come back in order
    shown = dg.Shown.of_rows(np.array([0, 1, 0, 2]), np.array([1, 0, 3, 2]),
                             np.array([7, 7, 3, 7]), np.array([3, 3, 1, 3]),
                             np.array([2, 2, 0, 2], dtype=np.int32))
    assert shown.display_query.tolist() == [2, 0]
    assert shown.query.tolist() == [2, 2, 0, 2]


@pytest.mark.parametrize("values", [[3, 1, 2], [3, 1, 3], [1.0, np.nan, 2.0],
                                    [np.nan, 1.0, np.nan], [0.0, -0.0], [5], []])
def test_repeats_are_what_numpys_unique_counts(values):
    values = np.asarray(values)
    ordered = values[np.argsort(values, kind="stable")]
    assert dg._has_repeats(ordered) == (len(np.unique(values)) < len(values))
