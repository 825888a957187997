"""Position propensities from click logs: hand-computed curves, recovery of a known curve from
a seeded simulation, the estimators written out independently, the log's rules, and the
curve's JSON form."""

from __future__ import annotations

from collections import Counter, defaultdict

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relgrade.clicks import LOG_COLUMNS, ClickLog, simulate
from relgrade.clicks import propensity as PR
from relgrade.errors import InputError

SEED = 20261130


def simulate_log(seed, *, sessions=5000, queries=50, positions=10, chunks=14, rankers=3,
                 randomized_share=0.0, propensity=None):
    """A click log under the position-based model, seeded.

    Each query has ``chunks`` candidates with relevance r ~ U(0.1, 0.9). Ranker r0 shows a
    random top ``positions``; rankers r1, r2 show it with each adjacent pair swapped with
    probability 0.3 (deterministic per query), which gives intervention harvesting something
    to harvest. A session picks a query and a ranker uniformly; with probability
    ``randomized_share`` it is in the randomized slice: a FairPairs partition (offset 0 or 1
    at random) into adjacent pairs, each swapped by a coin flip and flagged. A chunk at
    position k is clicked with probability p(k) * r, p(k) = 1/k by default.

    Returns the log, the relevance matrix (queries x chunks) and the rankers' lists
    (queries x rankers x positions, chunk indices).
    """
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, positions + 1) if propensity is None else np.asarray(propensity)
    relevance = rng.uniform(0.1, 0.9, size=(queries, chunks))
    lists = simulate.ranker_lists(rng, queries=queries, chunks=chunks, positions=positions,
                                  rankers=rankers)
    q = rng.integers(0, queries, sessions)
    rk = rng.integers(0, rankers, sessions)
    shown, flagged = simulate.fair_pairs(lists[q, rk], rng, share=randomized_share)
    clicked = rng.random((sessions, positions)) < p[None, :] * relevance[q[:, None], shown]
    qid = np.array([f"q{x:03d}" for x in range(queries)])
    log = pd.DataFrame({
        "session_id": np.repeat([f"s{i:06d}" for i in range(sessions)], positions),
        "query_id": np.repeat(qid[q], positions),
        "chunk_id": [f"{qid[a]}-c{b:02d}" for a, b in
                     zip(np.repeat(q, positions), shown.ravel())],
        "position": np.tile(np.arange(1, positions + 1), sessions),
        "clicked": clicked.ravel().astype(np.int64),
        "ranker": np.repeat([f"r{x}" for x in rk], positions),
        "randomized": flagged.ravel(),
    })
    return log, relevance, lists


def frame(rows):
    return pd.DataFrame(rows, columns=list(LOG_COLUMNS))


def rng(seed=0):
    return np.random.default_rng(seed)


# --- hand-computed curves -------------------------------------------------------------

# Randomized pairs, max_position 3:
#   link (1,2): s1 clicks (1,0), s2 (1,1), s3 (0,0)  -> clicks at 1: 2, at 2: 1
#   link (2,3): s4 clicks (1,0), s5 (1,1), s6 (1,0)  -> clicks at 2: 3, at 3: 1
#   p(2) = 1/2, p(3) = 1/2 * 1/3 = 1/6
HAND_RANDOMIZED = [
    ("s1", "q1", "a", 1, 1, "r", True), ("s1", "q1", "b", 2, 0, "r", True),
    ("s1", "q1", "c", 3, 1, "r", False),  # outside the pair: not evidence
    ("s2", "q1", "b", 1, 1, "r", True), ("s2", "q1", "a", 2, 1, "r", True),
    ("s3", "q1", "a", 1, 0, "r", True), ("s3", "q1", "b", 2, 0, "r", True),
    ("s4", "q2", "d", 1, 1, "r", False),
    ("s4", "q2", "e", 2, 1, "r", True), ("s4", "q2", "f", 3, 0, "r", True),
    ("s5", "q2", "f", 2, 1, "r", True), ("s5", "q2", "e", 3, 1, "r", True),
    ("s6", "q2", "e", 2, 1, "r", True), ("s6", "q2", "f", 3, 0, "r", True),
]


def test_randomization_chains_click_ratios_of_adjacent_swapped_pairs():
    curve = PR.randomization(ClickLog.from_frame(frame(HAND_RANDOMIZED)), rng=rng(),
                             max_position=3, n_boot=200)
    t = curve.table
    np.testing.assert_allclose(t["propensity"], [1.0, 1 / 2, (1 / 2) * (1 / 3)], rtol=1e-15)
    assert t["support"].tolist() == [0, 3, 3]
    assert t["clicks_upper"].tolist()[1:] == [2.0, 3.0]
    assert t["clicks_lower"].tolist()[1:] == [1.0, 1.0]
    assert (curve.unit, curve.n_units) == ("session", 6)
    assert t.loc[0, ["ci_low", "ci_high"]].tolist() == [1.0, 1.0]
    assert (t["ci_low"] <= t["propensity"]).all() and (t["propensity"] <= t["ci_high"]).all()


def test_randomization_ignores_pairs_reaching_below_max_position():
    curve = PR.randomization(ClickLog.from_frame(frame(HAND_RANDOMIZED)), rng=rng(),
                             max_position=2, n_boot=50)
    assert curve.table["propensity"].tolist() == [1.0, 0.5]
    assert curve.n_units == 3  # s4-s6 only hold the pair (2, 3)


# Harvesting, one query: ranker A shows a, b, c; ranker B shows b, a, c.
#   (q, a) is at 1 under A and at 2 under B; (q, b) at 1 under B and at 2 under A: both in
#   the interventional set of link (1, 2); c is at 3 under both, in no set.
#   A: 2 sessions, clicks on a (s1) and b (s2)       -> ctr(a@1) = 1/2, ctr(b@2) = 1/2
#   B: 4 sessions, b clicked in s3-s5, a in s3       -> ctr(b@1) = 3/4, ctr(a@2) = 1/4
#   p(2) = (1/2 + 1/4) / (1/2 + 3/4) = 3/5
#   s7 is a randomized session (A's list with the top pair swapped): left out.
HAND_HARVEST = [
    ("s1", "q", "a", 1, 1, "A", False), ("s1", "q", "b", 2, 0, "A", False),
    ("s1", "q", "c", 3, 0, "A", False),
    ("s2", "q", "a", 1, 0, "A", False), ("s2", "q", "b", 2, 1, "A", False),
    ("s2", "q", "c", 3, 1, "A", False),
    ("s3", "q", "b", 1, 1, "B", False), ("s3", "q", "a", 2, 1, "B", False),
    ("s3", "q", "c", 3, 0, "B", False),
    ("s4", "q", "b", 1, 1, "B", False), ("s4", "q", "a", 2, 0, "B", False),
    ("s4", "q", "c", 3, 0, "B", False),
    ("s5", "q", "b", 1, 1, "B", False), ("s5", "q", "a", 2, 0, "B", False),
    ("s5", "q", "c", 3, 0, "B", False),
    ("s6", "q", "b", 1, 0, "B", False), ("s6", "q", "a", 2, 0, "B", False),
    ("s6", "q", "c", 3, 0, "B", False),
    ("s7", "q", "b", 1, 0, "A", True), ("s7", "q", "a", 2, 1, "A", True),
    ("s7", "q", "c", 3, 0, "A", False),
]


def test_harvesting_is_the_ratio_of_summed_click_through_rates_over_the_interventional_set():
    curve = PR.harvesting(ClickLog.from_frame(frame(HAND_HARVEST)), rng=rng(),
                          max_position=2, n_boot=50)
    t = curve.table
    assert t["propensity"].tolist()[0] == 1.0
    assert t["propensity"].tolist()[1] == pytest.approx((1 / 2 + 1 / 4) / (1 / 2 + 3 / 4),
                                                        rel=1e-15)
    assert t["clicks_upper"].tolist()[1] == pytest.approx(1 / 2 + 3 / 4)
    assert t["clicks_lower"].tolist()[1] == pytest.approx(1 / 2 + 1 / 4)
    assert t["support"].tolist() == [0, 2]
    assert (curve.unit, curve.n_units) == ("query", 1)
    # One query: every resample is the same query, so the interval is the point.
    assert t.loc[1, ["ci_low", "ci_high"]].tolist() == pytest.approx([3 / 5, 3 / 5])


def test_a_link_without_evidence_leaves_every_position_below_it_undefined_with_a_note():
    curve = PR.harvesting(ClickLog.from_frame(frame(HAND_HARVEST)), rng=rng(),
                          max_position=4, n_boot=50)
    t = curve.table
    assert t["propensity"].tolist()[:2] == pytest.approx([1.0, 3 / 5])
    assert t["propensity"].iloc[2:].isna().all()
    assert t["ci_low"].iloc[2:].isna().all()
    assert t["support"].tolist() == [0, 2, 0, 0]
    assert "positions 2-3: no interventional pair; p(3) and every position below it are " \
           "undefined" in curve.notes
    assert curve.propensities() == pytest.approx({1: 1.0, 2: 0.6})


def test_no_click_at_the_upper_position_of_a_link_is_undefined_not_infinite():
    rows = [("s1", "q", "a", 1, 0, "r", True), ("s1", "q", "b", 2, 1, "r", True)]
    curve = PR.randomization(ClickLog.from_frame(frame(rows)), rng=rng(), max_position=2,
                             n_boot=20)
    assert np.isnan(curve.table["propensity"].iloc[1])
    assert curve.notes == ["positions 1-2: no click at the upper position; p(2) and every "
                           "position below it are undefined"]


def test_identical_sessions_give_an_interval_of_zero_width():
    rows = []
    for i in range(20):
        rows += [(f"s{i}", "q", "a", 1, 1, "r", True), (f"s{i}", "q", "b", 2, i % 2, "r", True)]
    curve = PR.randomization(ClickLog.from_frame(frame(rows)), rng=rng(), max_position=2,
                             n_boot=300)
    # p(2) = 10 / 20; resamples vary how many odd sessions they take, so the interval is wide;
    # with every session the same the interval collapses.
    assert curve.table["propensity"].iloc[1] == 0.5
    assert curve.table["ci_low"].iloc[1] < 0.5 < curve.table["ci_high"].iloc[1]
    same = [r for r in rows if r[0] in {f"s{i}" for i in range(1, 20, 2)}]
    curve = PR.randomization(ClickLog.from_frame(frame(same)), rng=rng(), max_position=2,
                             n_boot=300)
    assert curve.table.loc[1, ["propensity", "ci_low", "ci_high"]].tolist() == [1.0, 1.0, 1.0]


def test_resamples_that_leave_a_link_without_clicks_are_left_out_of_the_interval_with_a_note():
    # Link (1, 2): one session of the thirty has a click at 1 (and at 2). A resample of 30
    # sessions misses it with probability (29/30)^30 = 0.362, and then p(2) and p(3) are
    # undefined. Link (2, 3): ten sessions, clicks (1, i % 2).
    rows = [("s00", "q", "a", 1, 1, "r", True), ("s00", "q", "b", 2, 1, "r", True)]
    for i in range(1, 20):
        rows += [(f"s{i:02d}", "q", "a", 1, 0, "r", True),
                 (f"s{i:02d}", "q", "b", 2, 0, "r", True)]
    for i in range(20, 30):
        rows += [(f"s{i:02d}", "q", "c", 2, 1, "r", True),
                 (f"s{i:02d}", "q", "d", 3, i % 2, "r", True)]
    curve = PR.randomization(ClickLog.from_frame(frame(rows)), rng=rng(4), max_position=3,
                             n_boot=1000)
    t = curve.table
    assert t["propensity"].tolist() == [1.0, 1.0, 0.5]  # 1/1, then 1 * 5/10
    (note,) = curve.notes
    assert note.startswith("positions 2-3: ")
    left_out = int(note.split(": ")[1].split(" ")[0])
    assert 300 < left_out < 420  # about 362 of 1000
    assert note.endswith("resamples had no click at the upper position of a link above; each "
                         "interval is over the others")
    assert t["ci_low"].notna().all()


def test_chain_multiplies_adjacent_ratios_from_position_one():
    evidence = np.array([[[10.0, 5.0], [6.0, 3.0], [4.0, 1.0]],
                         [[0.0, 5.0], [6.0, 3.0], [4.0, 1.0]]])
    out = PR.chain(evidence)
    np.testing.assert_allclose(out[0], [1, 5 / 10, 5 / 10 * 3 / 6, 5 / 10 * 3 / 6 * 1 / 4])
    assert out[1, 0] == 1.0 and np.isnan(out[1, 1:]).all()


# --- recovery of a known curve -----------------------------------------------------------

@pytest.mark.parametrize("method,share", [("randomization", 1.0), ("harvesting", 0.0)])
def test_both_estimators_recover_a_one_over_k_curve_within_their_intervals(method, share):
    log, _, _ = simulate_log(SEED, randomized_share=share)  # 50,000 impressions
    curve = PR.estimate(ClickLog.from_frame(log), method=method, rng=rng(3), level=0.99)
    t = curve.table
    truth = 1.0 / t["position"]
    assert ((t["ci_low"] <= truth) & (truth <= t["ci_high"])).all(), t
    # ... and the intervals are informative: no wider than 0.2 anywhere, point within 0.05.
    assert (t["ci_high"] - t["ci_low"]).max() < 0.2
    assert (t["propensity"] - truth).abs().max() < 0.05


def test_randomization_uses_only_the_randomized_slice():
    log, _, _ = simulate_log(SEED, randomized_share=0.2)
    full = PR.randomization(ClickLog.from_frame(log), rng=rng(), n_boot=50)
    in_slice = log.groupby("session_id")["randomized"].transform("any")
    alone = PR.randomization(ClickLog.from_frame(log[in_slice]), rng=rng(), n_boot=50)
    pd.testing.assert_frame_equal(full.table, alone.table)


def test_harvesting_leaves_out_every_session_of_the_randomized_slice():
    log, _, _ = simulate_log(SEED, randomized_share=0.2)
    full = PR.harvesting(ClickLog.from_frame(log), rng=rng(), n_boot=50)
    in_slice = log.groupby("session_id")["randomized"].transform("any")
    plain = PR.harvesting(ClickLog.from_frame(log[~in_slice]), rng=rng(), n_boot=50)
    pd.testing.assert_frame_equal(full.table, plain.table)


# --- independent implementations ------------------------------------------------------------

def randomization_by_loop(log: pd.DataFrame, max_position: int) -> list[float]:
    """Walk each session's flagged rows two at a time and count clicks per position."""
    above, below = Counter(), Counter()
    flagged = log[log["randomized"]].sort_values(["session_id", "position"])
    for _, rows in flagged.groupby("session_id"):
        items = list(zip(rows["position"], rows["clicked"]))
        for (k, c_upper), (k1, c_lower) in zip(items[::2], items[1::2]):
            assert k1 == k + 1
            if k1 <= max_position:
                above[k] += c_upper
                below[k] += c_lower
    curve = [1.0]
    for k in range(1, max_position):
        curve.append(curve[-1] * below[k] / above[k])
    return curve


def harvesting_by_formula(log: pd.DataFrame, lists: np.ndarray, max_position: int) -> list:
    """Agarwal et al. (2019), Sec. 4, from the rankers' known lists and traffic n_i(q).

    c_k = sum_i sum_{j in Omega_i} sum_{d in S(q_j)} 1[rk_i(d|q_j) = k] c_j(d) / w(q_j, d, k),
    w(q, d, k) = sum_i n_i(q) 1[rk_i(d|q) = k]; p(k+1)/p(k) = c_{k+1} / c_k over S_{k,k+1}.
    """
    first = log.drop_duplicates("session_id")
    n = Counter(zip(first["query_id"], first["ranker"]))
    rank = {}
    for qi in range(lists.shape[0]):
        for ri in range(lists.shape[1]):
            for pos, ci in enumerate(lists[qi, ri], start=1):
                rank[(f"q{qi:03d}", f"r{ri}", f"q{qi:03d}-c{ci:02d}")] = pos
    rankers = sorted({r for _, r in n})
    clicks = defaultdict(float)
    for (q, d, r, k), c in log.groupby(["query_id", "chunk_id", "ranker", "position"])[
            "clicked"].sum().items():
        clicks[(q, d, r, k)] = c
    pairs = sorted({(q, d) for q, _, d in rank})
    curve = [1.0]
    for k in range(1, max_position):
        upper = lower = 0.0
        for q, d in pairs:
            active = [r for r in rankers if n[(q, r)] > 0]
            if not any(r1 != r2 and rank[(q, r1, d)] == k and rank.get((q, r2, d)) == k + 1
                       for r1 in active if (q, r1, d) in rank for r2 in active):
                continue
            for pos in (k, k + 1):
                w = sum(n[(q, r)] for r in active if rank.get((q, r, d)) == pos)
                c = sum(clicks[(q, d, r, pos)] for r in active if rank.get((q, r, d)) == pos)
                if pos == k:
                    upper += c / w
                else:
                    lower += c / w
        curve.append(curve[-1] * lower / upper)
    return curve


def test_randomization_equals_a_session_by_session_count():
    log, _, _ = simulate_log(SEED + 1, sessions=3000, randomized_share=0.5)
    curve = PR.randomization(ClickLog.from_frame(log), rng=rng(), n_boot=20)
    np.testing.assert_allclose(curve.table["propensity"], randomization_by_loop(log, 10),
                               rtol=1e-12)


def test_harvesting_equals_agarwal_et_al_weighted_estimator_written_from_the_formula():
    log, _, lists = simulate_log(SEED + 2, sessions=3000)
    curve = PR.harvesting(ClickLog.from_frame(log), rng=rng(), n_boot=20)
    np.testing.assert_allclose(curve.table["propensity"],
                               harvesting_by_formula(log, lists, 10), rtol=1e-12)


# --- reproducibility -----------------------------------------------------------------------

@pytest.mark.parametrize("method,share", [("randomization", 0.5), ("harvesting", 0.5)])
def test_same_seed_same_curve_whatever_duckdb_threads_and_row_order(method, share):
    log, _, _ = simulate_log(SEED, sessions=2000, randomized_share=share)
    one = duckdb.connect()
    one.execute("SET threads = 1")
    a = PR.estimate(ClickLog.from_frame(log, con=one), method=method, rng=rng(5), n_boot=300)
    shuffled = log.sample(frac=1.0, random_state=np.random.default_rng(1))
    four = duckdb.connect()
    four.execute("SET threads = 4")
    b = PR.estimate(ClickLog.from_frame(shuffled, con=four), method=method, rng=rng(5),
                    n_boot=300)
    pd.testing.assert_frame_equal(a.table, b.table, check_exact=True)
    c = PR.estimate(ClickLog.from_frame(log), method=method, rng=rng(6), n_boot=300)
    assert not np.array_equal(a.table["ci_low"].to_numpy()[1:], c.table["ci_low"].to_numpy()[1:])


def test_bootstrap_draws_one_multinomial_per_resample_over_grouped_units():
    evidence = np.array([[[1.0, 0.0]], [[1.0, 1.0]]])
    counts = np.array([3, 1])
    got = PR.bootstrap_chain(evidence, counts, rng=rng(9), n_boot=5)
    draws = rng(9).multinomial(4, [0.75, 0.25], size=5)
    expected = draws[:, 1] / (draws[:, 0] + draws[:, 1])  # clicks below / clicks above
    np.testing.assert_array_equal(got[:, 0], np.ones(5))
    np.testing.assert_allclose(got[:, 1], expected)


# --- the log's rules -----------------------------------------------------------------------

def test_flagged_rows_that_are_not_adjacent_pairs_are_refused_naming_the_session():
    rows = [("s1", "q", "a", 1, 0, "r", True), ("s1", "q", "b", 2, 0, "r", False),
            ("s1", "q", "c", 3, 1, "r", True)]
    with pytest.raises(InputError) as e:
        PR.randomization(ClickLog.from_frame(frame(rows), source="log.parquet"), rng=rng())
    assert str(e.value) == ("log.parquet: session s1: rows flagged randomized must come in "
                            "adjacent pairs (k, k + 1) (found positions 1 and 3 taken "
                            "together). Flag exactly the two rows of each swapped pair")
    with pytest.raises(InputError, match="a lone flagged row at position 3"):
        PR.randomization(ClickLog.from_frame(frame(rows[1:])), rng=rng())


@pytest.mark.parametrize("rows,message", [
    ([("s1", "q", "a", 1, 2, "r", False)],
     "log.parquet: session s1, position 1: clicked must be 0 or 1 (or true / false) (found 2). "
     "1 row(s) break this rule"),
    ([("s1", "q", "a", 0, 1, "r", False), ("s2", "q", "a", -1, 1, "r", False)],
     "log.parquet: session s1: position must be a whole number of at least 1 (found 0). "
     "2 row(s) break this rule"),
    ([("s1", "q", "", 1, 1, "r", False)],
     "log.parquet: session s1, position 1: chunk_id must be a non-empty string or an integer "
     "(found an empty value). 1 row(s) break this rule"),
    ([("s1", "q", "a", 1, 1, "r", False), ("s1", "q", "b", 1, 0, "r", False)],
     "log.parquet: session s1: a session shows one chunk per position "
     "(found position 1 holds a, b)"),
    ([("s1", "q", "a", 1, 1, "r", False), ("s1", "q", "a", 2, 0, "r", False)],
     "log.parquet: session s1: a session shows each chunk at most once "
     "(found chunk a at positions 1, 2)"),
    ([("s1", "q1", "a", 1, 1, "r", False), ("s1", "q2", "b", 2, 0, "r", False)],
     "log.parquet: session s1: a session answers one query from one ranker "
     "(found queries q1, q2). Give each result list shown its own session_id"),
])
def test_a_log_breaking_a_rule_is_refused_naming_the_session_and_the_rule(rows, message):
    with pytest.raises(InputError) as e:
        ClickLog.from_frame(frame(rows), source="log.parquet")
    assert str(e.value) == message


def test_one_pass_reports_a_row_rule_before_a_session_rule_and_counts_rows_over_sessions():
    # s1 repeats position 1 (a session rule); s3 and s4 hold clicked = 5 (a row rule): the
    # row rule is reported, counted over both sessions, though s1 comes first by id.
    rows = [("s1", "q", "a", 1, 1, "r", False), ("s1", "q", "b", 1, 0, "r", False),
            ("s3", "q", "a", 1, 5, "r", False), ("s3", "q", "b", 2, 5, "r", False),
            ("s4", "q", "c", 1, 5, "r", False)]
    with pytest.raises(InputError) as e:
        ClickLog.from_frame(frame(rows), source="log.parquet")
    assert str(e.value) == ("log.parquet: session s3, position 1: clicked must be 0 or 1 "
                            "(or true / false) (found 5). 3 row(s) break this rule")
    # Without the bad rows, the session rule is what is left to report.
    with pytest.raises(InputError, match="^log.parquet: session s1: a session shows one chunk "
                                         r"per position \(found position 1 holds a, b\)$"):
        ClickLog.from_frame(frame(rows[:2]), source="log.parquet")
    # A clean log: rows and distinct sessions from the same pass.
    log = ClickLog.from_frame(frame([rows[0], ("s3", "q", "a", 1, 0, "r", False),
                                     ("s3", "q", "b", 2, 1, "r", False)]))
    assert (log.rows, log.sessions) == (3, 2)


def test_positions_beyond_64_are_checked_for_repeats_too():
    fine = [("s1", "q", "a", 1, 0, "r", False), ("s1", "q", "b", 64, 0, "r", False),
            ("s1", "q", "c", 65, 1, "r", False), ("s1", "q", "d", 130, 0, "r", False)]
    assert ClickLog.from_frame(frame(fine)).rows == 4
    with pytest.raises(InputError, match=r"session s1: a session shows one chunk per position "
                                         r"\(found position 65 holds c, e\)"):
        ClickLog.from_frame(frame(fine + [("s1", "q", "e", 65, 0, "r", False)]))


def test_a_chunk_hash_collision_is_confirmed_on_the_ids_before_it_is_reported():
    from relgrade.clicks.log import _confirm_repeated_chunk

    rows = [("s1", "q", "a", 1, 0, "r", False), ("s1", "q", "b", 2, 0, "r", False),
            ("s2", "q", "c", 1, 0, "r", False), ("s2", "q", "d", 2, 0, "r", False)]
    log = ClickLog.from_frame(frame(rows))
    # As if the hashes of a and b had collided: s1 holds no repeat, and no session does.
    assert _confirm_repeated_chunk(log.con, "s1") is None
    # With a session that does repeat a chunk in the view, the exact pass finds it.
    repeat = rows + [("s3", "q", "c", 1, 0, "r", False), ("s3", "q", "c", 2, 0, "r", False)]
    log.con.register("with_repeat", frame(repeat))
    log.con.execute("CREATE OR REPLACE TEMP VIEW relgrade_clicks_log AS "
                    "SELECT * FROM with_repeat")
    assert _confirm_repeated_chunk(log.con, "s1") == "s3"
    assert _confirm_repeated_chunk(log.con, "s3") == "s3"


def test_a_missing_column_is_refused_with_the_columns_found():
    df = frame([("s1", "q", "a", 1, 1, "r", False)]).drop(columns=["ranker"])
    with pytest.raises(InputError) as e:
        ClickLog.from_frame(df, source="log.parquet")
    assert str(e.value).startswith("log.parquet: missing column(s) ranker (found columns "
                                   "session_id, query_id, chunk_id, position, clicked, "
                                   "randomized). An impression log needs the columns")


def test_an_empty_log_is_refused():
    with pytest.raises(InputError, match="^log.parquet: the log has no rows$"):
        ClickLog.from_frame(frame([]).astype({
            "session_id": "str", "query_id": "str", "chunk_id": "str", "position": "int64",
            "clicked": "int64", "ranker": "str", "randomized": "bool"}), source="log.parquet")


def test_integer_ids_are_read_as_strings_and_text_columns_are_parsed():
    df = pd.DataFrame({"session_id": [7, 7], "query_id": [4411, 4411], "chunk_id": [1, 2],
                       "position": ["1", "2"], "clicked": ["false", "1"],
                       "ranker": ["A", "A"], "randomized": ["0", "FALSE"]})
    log = ClickLog.from_frame(df)
    got = log.con.sql("SELECT * FROM relgrade_clicks_log ORDER BY position").fetchall()
    assert got == [("7", "4411", "1", 1, 0, "A", False), ("7", "4411", "2", 2, 1, "A", False)]
    assert (log.rows, log.sessions) == (2, 1)


def test_a_position_that_is_not_a_whole_number_is_refused():
    df = frame([("s1", "q", "a", 1, 1, "r", False)]).astype({"position": "str"})
    df.loc[0, "position"] = "3.5"
    with pytest.raises(InputError, match=r"position must be a whole number of at least 1 "
                                         r"\(found 3.5\)"):
        ClickLog.from_frame(df)


def test_settings_out_of_range_are_refused():
    log = ClickLog.from_frame(frame(HAND_RANDOMIZED))
    with pytest.raises(InputError, match="max_position must be an integer of at least 2"):
        PR.randomization(log, rng=rng(), max_position=1)
    with pytest.raises(InputError, match="bootstrap resamples must be at least 1"):
        PR.harvesting(log, rng=rng(), n_boot=0)
    with pytest.raises(InputError, match="confidence level must be between 0 and 1"):
        PR.randomization(log, rng=rng(), level=1.0)
    with pytest.raises(InputError, match="unknown propensity method"):
        PR.estimate(log, method="cascade", rng=rng())


# --- the curve's JSON form ------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(1e-6, 10.0)), min_size=1, max_size=12),
       st.floats(0.5, 0.999))
def test_curve_round_trips_through_its_json_form(values, level):
    table = pd.DataFrame({
        "position": np.arange(1, len(values) + 1, dtype=np.int64),
        "propensity": [np.nan if v is None else v for v in values],
        "ci_low": [np.nan if v is None else v / 2 for v in values],
        "ci_high": [np.nan if v is None else v * 2 for v in values],
        "support": np.arange(len(values), dtype=np.int64),
        "clicks_upper": np.full(len(values), 3.5),
        "clicks_lower": np.full(len(values), 1.25)})
    curve = PR.PropensityCurve("harvesting", len(values), level, 100, "query", 9, table, ["n"])
    back = PR.PropensityCurve.from_dict(curve.to_dict())
    pd.testing.assert_frame_equal(back.table, curve.table)
    assert (back.method, back.level, back.n_boot, back.unit, back.n_units, back.notes) == \
        ("harvesting", level, 100, "query", 9, ["n"])


@pytest.mark.parametrize("doc,message", [
    ({"curve": []}, "f.json: a propensity file is a JSON object with a `positions` list"),
    ({"positions": [{"position": 0, "propensity": 1.0}]},
     "f.json: positions[0]: position must be an integer of at least 1 (found 0)"),
    ({"positions": [{"position": 1, "propensity": 1.0}, {"position": 1, "propensity": 0.5}]},
     "f.json: positions[1]: each position is listed once (found position 1 again)"),
    ({"positions": [{"position": 2, "propensity": -0.5}]},
     "f.json: position 2: propensity must be a number greater than 0, or null (found -0.5)"),
    ({"positions": [{"position": 2, "propensity": "0.5"}]},
     "f.json: position 2: propensity must be a number greater than 0, or null (found '0.5')"),
])
def test_a_malformed_propensity_file_is_refused(doc, message):
    with pytest.raises(InputError) as e:
        PR.PropensityCurve.from_dict(doc, source="f.json")
    assert str(e.value).startswith(message)


# --- the check's patterns: the randomization estimate read in the same pass -----------------

def test_the_check_keeps_each_sessions_masks_of_shown_clicked_and_flagged_positions():
    log = ClickLog.from_frame(frame(HAND_RANDOMIZED))
    got = pd.DataFrame(log.patterns).sort_values(["shown", "clicks", "flagged"],
                                                 ignore_index=True)
    # s2 shows 1-2, clicks both, flags both: shown 0b11, clicks 0b11, flagged 0b11.
    # s3 shows 1-2, clicks none; s1 shows 1-3, clicks 1 and 3, flags 1-2 (clicked 1);
    # s4 shows 1-3, clicks 1-2, flags 2-3 (clicked 2); s5 shows 2-3, clicks both, flags
    # both; s6 shows 2-3, clicks 2, flags both (clicked 2).
    want = pd.DataFrame(
        [(0b011, 0b000, 0b011, 0b000, 1), (0b011, 0b011, 0b011, 0b011, 1),
         (0b110, 0b010, 0b110, 0b010, 1), (0b110, 0b110, 0b110, 0b110, 1),
         (0b111, 0b011, 0b110, 0b010, 1), (0b111, 0b101, 0b011, 0b001, 1)],
        columns=["shown", "clicks", "flagged", "flagged_clicks", "sessions"],
    ).astype({"shown": "uint64", "clicks": "uint64", "flagged": "uint64",
              "flagged_clicks": "uint64"})
    pd.testing.assert_frame_equal(got, want)


def test_patterns_from_masks_pair_flagged_positions_two_at_a_time_and_cut_at_max_position():
    masks = pd.DataFrame({"flagged": [0b1111, 0b1111, 0b0110, 0b0000],
                          "flagged_clicks": [0b0101, 0b0101, 0b0100, 0b0000],
                          "sessions": [2, 3, 4, 7]})
    # 0b1111: pairs (1,2) and (3,4), clicks at 1 and 3; 0b0110: pair (2,3), click at 3.
    assert PR.patterns_from_masks(masks, max_position=4) == [
        ([1, 3], [1, 1], [0, 0], 5), ([2], [0], [1], 4)]
    # With max_position 3 the pair (3, 4) reaches below it and is left out.
    assert PR.patterns_from_masks(masks, max_position=3) == [([1], [1], [0], 5),
                                                             ([2], [0], [1], 4)]
    # A lone flagged row, or two taken together that are not adjacent: no patterns.
    assert PR.patterns_from_masks(pd.DataFrame({"flagged": [0b0100], "flagged_clicks": [0],
                                                "sessions": [1]}), max_position=4) is None
    assert PR.patterns_from_masks(pd.DataFrame({"flagged": [0b0101], "flagged_clicks": [0],
                                                "sessions": [1]}), max_position=4) is None


@pytest.mark.parametrize("max_position", [10, 6])
def test_randomization_from_the_checks_masks_equals_the_sql_estimate_draw_for_draw(max_position):
    import dataclasses

    log, _, _ = simulate_log(SEED + 3, sessions=3000, randomized_share=0.4)
    opened = ClickLog.from_frame(log)
    assert opened.patterns is not None
    fused = PR.randomization(opened, rng=rng(3), n_boot=200, max_position=max_position)
    by_sql = PR.randomization(dataclasses.replace(opened, patterns=None), rng=rng(3),
                              n_boot=200, max_position=max_position)
    pd.testing.assert_frame_equal(fused.table, by_sql.table, check_exact=True)
    assert fused.notes == by_sql.notes and fused.n_units == by_sql.n_units


def test_a_position_above_64_leaves_the_log_without_patterns_and_the_estimate_uses_sql():
    rows = [("s1", "q", "a", 1, 1, "r", True), ("s1", "q", "b", 2, 0, "r", True),
            ("s1", "q", "c", 70, 1, "r", False), ("s2", "q", "b", 1, 0, "r", True),
            ("s2", "q", "a", 2, 1, "r", True)]
    log = ClickLog.from_frame(frame(rows))
    assert log.patterns is None and (log.rows, log.sessions) == (5, 2)
    curve = PR.randomization(log, rng=rng(), max_position=2, n_boot=10)
    assert curve.table["propensity"].tolist() == [1.0, 1.0]  # clicks at 1: 1, at 2: 1


def test_a_session_with_two_queries_and_a_repeated_position_is_reported_as_the_exact_pass_does():
    # The fast pass splits s1 into one list per query, so neither list repeats a position;
    # the exact pass still finds the repeated position first, as before.
    rows = [("s1", "q1", "a", 1, 1, "r", False), ("s1", "q2", "b", 1, 0, "r", False)]
    with pytest.raises(InputError) as e:
        ClickLog.from_frame(frame(rows), source="log.parquet")
    assert str(e.value) == ("log.parquet: session s1: a session shows one chunk per position "
                            "(found position 1 holds a, b)")
    with pytest.raises(InputError, match="found rankers r1, r2"):
        ClickLog.from_frame(frame([("s1", "q", "a", 1, 1, "r1", False),
                                   ("s1", "q", "b", 2, 0, "r2", False)]))


@pytest.mark.parametrize("n", [2, 10, 40, 64])
def test_a_chunk_shown_twice_is_found_in_a_session_of_any_length_up_to_64(n):
    # The check certifies distinct chunks from bit masks of their hashes and counts the
    # distinct hashes otherwise; either way a repeat must be found and a clean list pass.
    rows = [("s1", "q", f"c{k:02d}", k + 1, 0, "r", False) for k in range(n)]
    assert ClickLog.from_frame(frame(rows)).rows == n
    rows[-1] = ("s1", "q", "c00", n, 0, "r", False)
    with pytest.raises(InputError) as e:
        ClickLog.from_frame(frame(rows), source="log.parquet")
    assert str(e.value) == ("log.parquet: session s1: a session shows each chunk at most once "
                            f"(found chunk c00 at positions 1, {n})")


@pytest.mark.parametrize("column, value, rule", [
    ("chunk_id", "", "chunk_id must be a non-empty string or an integer"),
    ("position", 0, "position must be a whole number of at least 1"),
    ("clicked", 2, r"clicked must be 0 or 1 \(or true / false\)"),
    ("randomized", "maybe", r"randomized must be true or false \(or 1 / 0\)"),
])
def test_one_bad_value_in_an_otherwise_clean_log_is_refused_by_its_rule(column, value, rule):
    # The fast pass has no counter per rule: a bad value sets no position bit, so its list
    # shows fewer positions than rows, and the exact pass words the rule broken.
    rows = [(f"s{s}", "q", f"c{k}", k, k % 2, "r", False) for s in (1, 2) for k in (1, 2, 3)]
    df = frame(rows).astype({column: object})
    df.loc[4, column] = value  # session s2, position 2
    with pytest.raises(InputError, match=rf"^log.parquet: session s2(, position 2)?: {rule} "
                                         r"\(found "):
        ClickLog.from_frame(df, source="log.parquet")
    assert ClickLog.from_frame(frame(rows)).patterns is not None


@pytest.mark.parametrize("counts", [[1, 1, 1, 1, 1], [2, 1, 1, 1]], ids=["one-unit-rows",
                                                                      "a-grouped-row"])
def test_a_bootstrap_resample_takes_n_units_with_replacement(counts):
    # Unit 0's evidence at the lower position is 1, every other unit's 0, and every unit's
    # upper evidence is 1 (all units of a row alike), so p(2) of a resample is
    # (times unit 0 was taken) / n. Taking n = 5 units with replacement, that count is
    # Binomial(5, 1/5) for a unit of its own: mean 1, variance 5 * 1/5 * 4/5 = 0.8; for a
    # row of two units Binomial(5, 2/5): mean 2, variance 1.2. The uniform picks drawn when
    # every row is one unit and the multinomial of grouped rows must both give these.
    counts = np.array(counts)
    n = counts.sum()
    evidence = np.zeros((len(counts), 1, 2))
    evidence[:, 0, 0] = 1.0
    evidence[0, 0, 1] = 1.0
    reps = PR.bootstrap_chain(evidence, counts, rng=rng(3), n_boot=20_000)
    taken = reps[:, 1] * n
    assert np.allclose(taken, np.round(taken)) and taken.min() >= 0 and taken.max() <= n
    p = counts[0] / n
    assert abs(taken.mean() - n * p) < 0.03
    assert abs(taken.var() - n * p * (1 - p)) < 0.05
    # The same seed gives the same resamples.
    assert np.array_equal(reps, PR.bootstrap_chain(evidence, counts, rng=rng(3), n_boot=20_000))
