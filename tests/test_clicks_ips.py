"""IPS and self-normalised IPS estimates of rankings from a click log: a hand example with
every weight written out, a session-by-session reference implementation, interval coverage
of the exact truth over seeded position-based simulations, and the bad inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.clicks import LOG_COLUMNS, ClickLog, simulate
from relgrade.clicks import ips as I
from relgrade.clicks import propensity as PR
from relgrade.errors import InputError

SEED = 20261201


def frame(rows):
    return pd.DataFrame(rows, columns=list(LOG_COLUMNS))


def ranking(arm, rows):
    return pd.DataFrame([(arm, q, d, r) for q, d, r in rows],
                        columns=["arm", "query_id", "chunk_id", "rank"])


# p = 1, 1/2, 1/4 at positions 1-3; clip 3, so weights w = 1, 2, 3 (1/p(3) = 4 clipped).
#   s1 (q1): a@1 clicked, b@2, c@3 clicked   den 1 + 3 = 4
#   s2 (q1): b@1, a@2 clicked, c@3           den 2
#   s3 (q2): x@1, y@2, no click              den 0 (still one of the n = 4 sessions)
#   s4 (q2): y@1 clicked, x@2                den 1                      total den 7
# alpha ranks q1: c a b, q2: x y  -> e(c) = 1, e(a) = 1/2, e(b) = 1/4, e(x) = 1, e(y) = 1/2
#   s1: 1 * 1/2 + 3 * 1 = 3.5; s2: 2 * 1/2 = 1; s4: 1 * 1/2 = 0.5     num 5
#   IPS = 5 / 4 = 1.25, SNIPS = 5 / 7
# beta ranks q1: a zz (zz never shown), q3: z (q3 never logged); c, b, y unranked (e = 0)
#   s1: 1 * 1 = 1; s2: 2 * 1 = 2; s4: 0                                 num 3
#   IPS = 3 / 4 = 0.75, SNIPS = 3 / 7
HAND = [
    ("s1", "q1", "a", 1, 1, "A", False), ("s1", "q1", "b", 2, 0, "A", False),
    ("s1", "q1", "c", 3, 1, "A", False),
    ("s2", "q1", "b", 1, 0, "B", False), ("s2", "q1", "a", 2, 1, "B", False),
    ("s2", "q1", "c", 3, 0, "B", False),
    ("s3", "q2", "x", 1, 0, "A", False), ("s3", "q2", "y", 2, 0, "A", False),
    ("s4", "q2", "y", 1, 1, "B", False), ("s4", "q2", "x", 2, 0, "B", False),
]
HAND_P = {1: 1.0, 2: 0.5, 3: 0.25}
HAND_RANKINGS = pd.concat([
    ranking("alpha", [("q1", "c", 1), ("q1", "a", 2), ("q1", "b", 3), ("q2", "x", 1),
                      ("q2", "y", 2)]),
    ranking("beta", [("q1", "a", 1), ("q1", "zz", 2), ("q3", "z", 1)]),
], ignore_index=True)


def hand_result(**kw):
    return I.arm_estimates(ClickLog.from_frame(frame(HAND)), HAND_P, HAND_RANKINGS,
                           rng=np.random.default_rng(0), clip=3, n_boot=200, **kw)


def test_ips_and_snips_of_each_arm_equal_the_hand_computed_weights():
    res = hand_result()
    t = res.table.set_index("arm")
    assert t.loc["alpha", "ips"] == pytest.approx(1.25)
    assert t.loc["alpha", "snips"] == pytest.approx(5 / 7)
    assert t.loc["beta", "ips"] == pytest.approx(0.75)
    assert t.loc["beta", "snips"] == pytest.approx(3 / 7)


def test_a_session_without_clicks_counts_in_n_and_adds_nothing():
    res = hand_result()
    assert res.sessions == 4
    assert res.clicks == 4 and res.clicks_weighted == 4


def test_clipped_clicks_are_counted_and_the_bias_note_names_their_positions():
    res = hand_result()
    assert res.clicks_clipped == 1
    assert res.clip == 3.0
    assert any("position(s) 3" in n and "biased downward" in n for n in res.notes)


def test_chunks_and_queries_absent_from_the_log_are_reported_not_refused():
    t = hand_result().table.set_index("arm")
    assert t.loc["alpha", ["ranked", "ranked_not_in_log", "queries_not_in_log"]].tolist() \
        == [5, 0, 0]
    # zz (q1) and z (q3) are never shown; q3 is never logged.
    assert t.loc["beta", ["ranked", "ranked_not_in_log", "queries_not_in_log"]].tolist() \
        == [3, 2, 1]
    assert any(n.startswith("arm beta: 2 of 3 ranked chunks never shown")
               for n in hand_result().notes)


def test_an_arm_matched_by_only_some_impressions_stands_and_the_note_says_the_share():
    # beta ranks (q1, a) at 1 (examination 1): 2 of the 10 logged rows show it (s1 a@1,
    # s2 a@2, both at weighted positions); alpha ranks every shown pair within 1-3: 10 of 10.
    res = hand_result()
    assert res.table.set_index("arm").loc["beta", "ips"] == pytest.approx(0.75)
    assert ("arm beta: 2 of 3 ranked chunks never shown in the log (1 ranked queries never "
            "logged); they earn no clicks in either estimate, which rests on the 2 of 10 "
            "logged impressions (20.0%) of chunks it ranks") in res.notes
    assert not any(n.startswith("arm alpha") for n in res.notes)
    # delta ranks q1's three shown chunks and nothing of q2: nothing it ranks is unshown,
    # but only s1's and s2's 6 rows of the 10 match it
    delta = pd.concat([HAND_RANKINGS, ranking("delta", [("q1", "a", 1), ("q1", "b", 2),
                                                        ("q1", "c", 3)])], ignore_index=True)
    res = I.arm_estimates(ClickLog.from_frame(frame(HAND)), HAND_P, delta,
                          rng=np.random.default_rng(0), clip=3, n_boot=20)
    assert ("arm delta: the estimate rests on the 6 of 10 logged impressions (60.0%) of "
            "chunks it ranks; clicks on the others earn it nothing") in res.notes
    log = ClickLog.from_frame(frame(HAND))
    I.session_patterns(log, I.examinations(HAND_RANKINGS, ips_weights_of(HAND_P, clip=3)),
                       max_position=3, joint=False)
    cover = I.log_coverage(log, ["alpha", "beta"], [1, 2, 3])
    assert cover.to_dict("index") == {"alpha": {"chunks": 0, "queries": 0, "impressions": 10},
                                      "beta": {"chunks": 2, "queries": 1, "impressions": 2}}
    # position 2 without a weight: beta keeps s1 a@1 only, alpha loses its 4 rows at 2
    assert I.log_coverage(log, ["alpha", "beta"], [1, 3])["impressions"].tolist() == [6, 1]


def ips_weights_of(p, *, clip):
    from relgrade.clicks.pairs import ips_weights
    return ips_weights(p, clip=clip)


ZZ = [(s, "zz" + q, d, k, c, r, z) for s, q, d, k, c, r, z in HAND]


@pytest.mark.parametrize("log_rows, rankings, arms, each", [
    # the log's query ids all prefixed: no logged query is among the rankings' queries
    (ZZ, HAND_RANKINGS, "alpha, beta", "for each, "),
    # gamma ranks a shown chunk, but only at rank 4, below the curve (examination 0)
    (HAND, pd.concat([HAND_RANKINGS, ranking("gamma", [("q1", "a", 4), ("q1", "zz", 1)])],
                     ignore_index=True), "gamma", ""),
])
def test_an_arm_no_logged_impression_matches_is_refused_naming_log_rankings_and_arm(
        log_rows, rankings, arms, each):
    log = ClickLog.from_frame(frame(log_rows), source="clicks/log.parquet")
    with pytest.raises(InputError) as e:
        I.arm_estimates(log, HAND_P, rankings, rng=np.random.default_rng(0), clip=3,
                        n_boot=20, source="clicks/rankings")
    assert str(e.value) == (
        f"clicks/log.parquet: no logged impression matches the ranking of arm(s) {arms} in "
        "clicks/rankings: IPS and SNIPS would be 0 whatever users clicked, so there is no "
        f"estimate (found {each}0 of 10 impressions showing a (query, chunk) it ranks within "
        "positions 1-3 of the propensity curve). Check that the rankings and the log use "
        "the same query and chunk ids, or leave the arm out of the rankings folder")


def test_intervals_hold_the_point_estimate_and_the_same_seed_gives_the_same_bounds():
    a, b = hand_result(), hand_result()
    pd.testing.assert_frame_equal(a.table, b.table)
    t = a.table
    assert (t["ips_low"] <= t["ips"]).all() and (t["ips"] <= t["ips_high"]).all()
    other = I.arm_estimates(ClickLog.from_frame(frame(HAND)), HAND_P, HAND_RANKINGS,
                            rng=np.random.default_rng(1), clip=3, n_boot=200)
    assert not np.allclose(other.table["ips_low"], t["ips_low"]) or \
        not np.allclose(other.table["ips_high"], t["ips_high"])


def test_to_dict_is_json_ready_with_every_arm():
    import json

    doc = hand_result().to_dict()
    assert set(doc["arms"]) == {"alpha", "beta"}
    assert doc["arms"]["beta"]["ranked_not_in_log"] == 2
    assert doc["sessions"] == 4 and doc["unit"] == "session"
    json.dumps(doc, allow_nan=False)


# --- a reference implementation, session by session ----------------------------------


def ips_by_loop(log: pd.DataFrame, p: dict, rankings: pd.DataFrame, clip: float):
    """IPS and SNIPS written from the formulas, one click at a time."""
    rank = {(a, q, d): r for a, q, d, r in rankings.itertuples(index=False)}
    arms = sorted(rankings["arm"].unique())
    num = dict.fromkeys(arms, 0.0)
    den = 0.0
    for row in log.itertuples(index=False):
        if not row.clicked or row.position not in p:
            continue
        w = min(1.0 / p[row.position], clip)
        den += w
        for a in arms:
            r = rank.get((a, row.query_id, row.chunk_id))
            num[a] += w * (p[r] if r in p else 0.0)
    n = log["session_id"].nunique()
    return {a: (num[a] / n, num[a] / den) for a in arms}


def test_point_estimates_equal_the_click_by_click_formula_on_a_simulated_log():
    sim = simulate.position_based_log(SEED, sessions=3000, queries=15, positions=6)
    p = {k + 1: float(v) for k, v in enumerate(sim.propensity / sim.propensity[0])}
    rankings = sim.rankings.rename(columns={"ranker": "arm"})
    # One arm ranks only the top 4: ranks 5-6 get no examination.
    short = rankings[rankings["arm"] == "r1"].copy()
    short = short[short["rank"] <= 4].assign(arm="short")
    rankings = pd.concat([rankings, short], ignore_index=True)
    res = I.arm_estimates(ClickLog.from_frame(sim.log), p, rankings,
                          rng=np.random.default_rng(0), clip=4, n_boot=10)
    expected = ips_by_loop(sim.log, p, rankings, 4)
    for rec in res.table.itertuples(index=False):
        assert rec.ips == pytest.approx(expected[rec.arm][0], rel=1e-12)
        assert rec.snips == pytest.approx(expected[rec.arm][1], rel=1e-12)


# --- coverage of the simulation's truth -----------------------------------------------


def _with_oracle(sim):
    oracle = sim.relevance.sort_values(["query_id", "relevance"], ascending=[True, False])
    oracle = oracle.assign(rank=oracle.groupby("query_id").cumcount() + 1, ranker="oracle")
    return pd.concat([sim.rankings, oracle[["ranker", "query_id", "chunk_id", "rank"]]],
                     ignore_index=True).rename(columns={"ranker": "arm"})


def test_intervals_with_the_true_propensities_cover_the_exact_truth_in_seeded_simulations():
    covered, total = 0, 0
    for i in range(8):
        sim = simulate.position_based_log(SEED + i, sessions=2500, queries=20, positions=5)
        p = {k + 1: float(v) for k, v in enumerate(sim.propensity / sim.propensity[0])}
        rankings = _with_oracle(sim)
        res = I.arm_estimates(ClickLog.from_frame(sim.log), p, rankings,
                              rng=np.random.default_rng(i), clip=100, n_boot=400)
        for rec in res.table.itertuples(index=False):
            truth_ips, truth_snips = simulate.true_click_reward(
                rankings[rankings["arm"] == rec.arm], sim)
            covered += rec.ips_low <= truth_ips <= rec.ips_high
            covered += rec.snips_low <= truth_snips <= rec.snips_high
            total += 2
    # 64 nominal-95% intervals: 64 * 0.95 = 60.8 expected; 56 is 2.6 sd below.
    assert total == 64
    assert covered >= 56


def test_resampling_the_propensities_widens_the_intervals_and_covers_the_truth():
    sim = simulate.position_based_log(SEED, sessions=12000, queries=20, positions=6,
                                      randomized_share=0.3)
    log = ClickLog.from_frame(sim.log)
    curve = PR.randomization(log, rng=np.random.default_rng(1), max_position=6, n_boot=200)
    rankings = _with_oracle(sim)
    fixed = I.arm_estimates(log, curve, rankings, rng=np.random.default_rng(2), n_boot=400)
    joint = I.arm_estimates(log, curve, rankings, rng=np.random.default_rng(2), n_boot=400,
                            resample_propensity=True)
    pd.testing.assert_series_equal(fixed.table["ips"], joint.table["ips"])
    width = lambda t: (t["ips_high"] - t["ips_low"]).to_numpy()  # noqa: E731
    assert (width(joint.table) > width(fixed.table)).all()
    assert joint.propensity_resampled and not fixed.propensity_resampled
    assert any("held fixed" in n for n in fixed.notes)
    for rec in joint.table.itertuples(index=False):
        truth_ips, truth_snips = simulate.true_click_reward(
            rankings[rankings["arm"] == rec.arm], sim)
        assert rec.ips_low <= truth_ips <= rec.ips_high, rec.arm
        assert rec.snips_low <= truth_snips <= rec.snips_high, rec.arm


def test_rewards_with_a_resampled_curve_equal_rewards_with_that_curve_fixed():
    # The joint path re-estimates p by chain(); fed the same totals it must agree with
    # the fixed path given chain()'s result.
    k, arms = 3, 1
    totals = np.zeros(k + arms * k * k + 2 * (k - 1))
    totals[:k] = [4, 2, 1]                                   # clicks per position
    totals[k:k + 9] = np.arange(1, 10)                      # N[0, k, j]
    totals[k + 9:] = [10, 5, 6, 3]                          # link evidence: p = 1, .5, .25
    joint = I.rewards(totals, 7, propensity=None, n_arms=1, max_position=3, clip=10)
    fixed = I.rewards(totals, 7, propensity=np.array([1, 0.5, 0.25]), n_arms=1,
                      max_position=3, clip=10)
    np.testing.assert_allclose(joint, fixed)
    # By hand: w = 1, 2, 4; e = 1, .5, .25; N = [[1,2,3],[4,5,6],[7,8,9]]
    # num = 1*(1 + 1 + .75) + 2*(4 + 2.5 + 1.5) + 4*(7 + 4 + 2.25) = 2.75 + 16 + 53 = 71.75
    # den = 4*1 + 2*2 + 1*4 = 12
    assert fixed[0][0] == pytest.approx(71.75 / 7)
    assert fixed[1][0] == pytest.approx(71.75 / 12)


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize("rows, message", [
    ([("a", "q1", "c", 0)], "rank must be a whole number of at least 1"),
    ([("a", "q1", "c", None)], "rank must be a whole number of at least 1"),
    ([("a", "q1", "c", 1.5)], "rank must be a whole number of at least 1"),
    ([("a", "q1", "c", 1), ("a", "q1", "c", 2)], "a ranking names each chunk at most once"),
])
def test_a_bad_ranking_is_refused_naming_the_arm_and_query(rows, message):
    bad = pd.DataFrame(rows, columns=["arm", "query_id", "chunk_id", "rank"])
    with pytest.raises(InputError, match=message) as e:
        I.arm_estimates(ClickLog.from_frame(frame(HAND)), HAND_P, bad,
                        rng=np.random.default_rng(0), source="runs/a.run")
    assert "runs/a.run" in str(e.value) and "arm a" in str(e.value)


def test_a_ranking_without_a_rank_column_is_refused():
    with pytest.raises(InputError, match="missing column"):
        I.arm_estimates(ClickLog.from_frame(frame(HAND)), HAND_P,
                        HAND_RANKINGS.drop(columns="rank"), rng=np.random.default_rng(0))


def test_resampling_the_propensities_refuses_flagged_rows_that_are_not_pairs():
    rows = [r[:6] + (r[0] == "s1" and r[3] == 1,) for r in HAND]
    with pytest.raises(InputError, match="adjacent pairs") as e:
        I.arm_estimates(ClickLog.from_frame(frame(rows)), HAND_P, HAND_RANKINGS,
                        rng=np.random.default_rng(0), resample_propensity=True)
    assert "session s1" in str(e.value)


@pytest.mark.parametrize("kw, message", [
    ({"n_boot": 0}, "bootstrap resamples"), ({"level": 1.0}, "confidence level"),
    ({"clip": 0.5}, "weight clip"),
])
def test_bad_settings_are_refused(kw, message):
    args = {"rng": np.random.default_rng(0), **kw}
    with pytest.raises(InputError, match=message):
        I.arm_estimates(ClickLog.from_frame(frame(HAND)), HAND_P, HAND_RANKINGS, **args)
