"""Skip-above pairs and IPS weights: a hand example with every pair and weight written out,
the clip, a pure-Python implementation as reference, and the unbiasedness of IPS weighting
checked in expectation over a seeded simulation."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from relgrade.clicks import LOG_COLUMNS, ClickLog
from relgrade.clicks import pairs as P
from relgrade.clicks.propensity import PropensityCurve
from relgrade.errors import InputError
from tests.test_clicks_propensity import SEED, simulate_log


def frame(rows):
    return pd.DataFrame(rows, columns=list(LOG_COLUMNS))


# Three sessions; p = 1, 1/2, 1/4, 2/25 at positions 1-4, clip 10:
#   weights 1/p: 1, 2, 4, 12.5 -> clipped to 10 at position 4.
#   s1 (q1): a b c d, click at 3           -> c>a, c>b                 weight 4
#   s2 (q1): b a d c, clicks at 1 and 4    -> the click at 1 gives nothing;
#                                             c>a, c>d (b is clicked)  weight 10 (clipped)
#   s3 (q2): e f g,   clicks at 2 and 3    -> f>e weight 2; g>e weight 4 (f is clicked)
HAND = [
    ("s1", "q1", "a", 1, 0, "A", False), ("s1", "q1", "b", 2, 0, "A", False),
    ("s1", "q1", "c", 3, 1, "A", False), ("s1", "q1", "d", 4, 0, "A", False),
    ("s2", "q1", "b", 1, 1, "B", False), ("s2", "q1", "a", 2, 0, "B", False),
    ("s2", "q1", "d", 3, 0, "B", False), ("s2", "q1", "c", 4, 1, "B", False),
    ("s3", "q2", "e", 1, 0, "A", False), ("s3", "q2", "f", 2, 1, "A", False),
    ("s3", "q2", "g", 3, 1, "A", False),
]
HAND_PROPENSITY = {1: 1.0, 2: 1 / 2, 3: 1 / 4, 4: 2 / 25}
HAND_PAIRS = [
    ("q1", "c", "a", 4.0, "s1"), ("q1", "c", "b", 4.0, "s1"),
    ("q1", "c", "a", 10.0, "s2"), ("q1", "c", "d", 10.0, "s2"),
    ("q2", "f", "e", 2.0, "s3"), ("q2", "g", "e", 4.0, "s3"),
]


def test_skip_above_pairs_of_the_hand_example_with_their_weights():
    log = ClickLog.from_frame(frame(HAND))
    rel = P.skip_above(log, P.ips_weights(HAND_PROPENSITY, clip=10))
    assert tuple(rel.columns) == P.PAIR_COLUMNS
    assert rel.fetchall() == HAND_PAIRS


def test_the_joins_table_of_clicks_leaves_out_the_clicks_at_position_1():
    # The hand example's five clicks: s1 at 3, s2 at 1 and 4, s3 at 2 and 3. s2's click at
    # position 1 has nothing above it, gives no pair, and is not in the join's table.
    log = ClickLog.from_frame(frame(HAND))
    pairs = P.skip_above(log, P.ips_weights(HAND_PROPENSITY, clip=10)).fetchall()
    table = log.con.execute("SELECT session_id, position, weight FROM relgrade_clicks_clicked "
                            "ORDER BY session_id, position").fetchall()
    assert table == [("s1", 3, 4.0), ("s2", 4, 10.0), ("s3", 2, 2.0), ("s3", 3, 4.0)]
    assert pairs == HAND_PAIRS


def test_without_the_clip_the_deep_click_keeps_its_full_weight():
    log = ClickLog.from_frame(frame(HAND))
    got = P.skip_above(log, P.ips_weights(HAND_PROPENSITY, clip=100)).fetchall()
    assert [w for *_, w, s in got if s == "s2"] == [1 / (2 / 25), 1 / (2 / 25)]  # 12.5


def test_ips_weights_are_one_over_propensity_capped_at_the_clip():
    w = P.ips_weights({1: 1.0, 2: 0.5, 3: 0.25, 4: 0.08, 5: 0.0, 6: float("nan")}, clip=10)
    assert w["position"].tolist() == [1, 2, 3, 4, 5]  # an undefined propensity gets no weight
    assert w["weight"].tolist() == [1.0, 2.0, 4.0, 10.0, 10.0]
    assert w["clipped"].tolist() == [False, False, False, True, True]
    assert P.ips_weights({1: 1.0, 2: 0.1}, clip=10)["clipped"].tolist() == [False, False]


@pytest.mark.parametrize("clip", [0.5, float("inf"), float("nan")])
def test_a_clip_below_one_or_not_finite_is_refused(clip):
    with pytest.raises(InputError, match="the weight clip must be a finite number of at least 1"):
        P.ips_weights({1: 1.0}, clip=clip)


def test_a_click_beyond_the_curve_gives_no_pair_and_is_counted():
    log = ClickLog.from_frame(frame(HAND))
    weights = P.ips_weights({1: 1.0, 2: 0.5, 3: 0.25}, clip=10)
    got = P.skip_above(log, weights).fetchall()
    assert got == [p for p in HAND_PAIRS if p[4] != "s2"]
    summary = P.click_summary(log, weights)
    assert summary == {"impressions": 11, "sessions": 3, "clicks": 5, "clicks_weighted": 4,
                       "clicks_without_propensity": 1, "positions_without_propensity": [4],
                       "clicks_clipped": 0, "positions_clipped": []}


def test_summary_counts_the_clicks_whose_weight_was_clipped():
    log = ClickLog.from_frame(frame(HAND))
    summary = P.click_summary(log, P.ips_weights(HAND_PROPENSITY, clip=3))
    # weights 1, 2, 3 (4 clipped), 3 (12.5 clipped): clicks at 3 (s1, s3) and 4 (s2)
    assert (summary["clicks_clipped"], summary["positions_clipped"]) == (3, [3, 4])


def test_a_curve_read_from_its_json_form_gives_the_same_weights():
    doc = {"positions": [{"position": k, "propensity": p} for k, p in HAND_PROPENSITY.items()]
           + [{"position": 5, "propensity": None}]}
    curve = PropensityCurve.from_dict(doc)
    pd.testing.assert_frame_equal(P.weights_from_curve(curve, clip=10),
                                  P.ips_weights(HAND_PROPENSITY, clip=10))
    with pytest.raises(InputError, match="the propensity curve defines no position"):
        P.weights_from_curve(PropensityCurve.from_dict(
            {"positions": [{"position": 1, "propensity": None}]}))


def skip_above_by_loop(log: pd.DataFrame, weight: dict) -> list[tuple]:
    out = []
    for session, rows in log.sort_values(["session_id", "position"]).groupby("session_id"):
        shown = list(zip(rows["position"], rows["chunk_id"], rows["clicked"]))
        for k, chunk, clicked in shown:
            if clicked and k in weight:
                out += [(rows["query_id"].iloc[0], chunk, other, weight[k], session)
                        for j, other, c in shown if j < k and not c]
    return out



def test_weight_columns_are_the_columns_of_ips_weights():
    props = {1: 1.0, 2: 0.5, 3: 0.25, 4: 0.08, 5: 0.0, 6: float("nan")}
    columns = P.weight_columns(props, clip=10)
    table = P.ips_weights(props, clip=10)
    assert list(columns) == list(table.columns) == list(P.WEIGHT_COLUMNS)
    for name, values in columns.items():
        assert values.dtype == table[name].dtype == P.WEIGHT_COLUMNS[name]
        assert values.tolist() == table[name].tolist()
    assert columns["weight"].tolist() == [1.0, 2.0, 4.0, 10.0, 10.0]
    curve = PropensityCurve.from_dict(
        {"positions": [{"position": k, "propensity": p} for k, p in HAND_PROPENSITY.items()]})
    for name, values in P.weights_from_curve(curve, clip=10, frame=False).items():
        assert values.tolist() == P.ips_weights(HAND_PROPENSITY, clip=10)[name].tolist()
    with pytest.raises(InputError, match="the propensity curve defines no position"):
        P.weights_from_curve(PropensityCurve.from_dict(
            {"positions": [{"position": 1, "propensity": None}]}), frame=False)


@pytest.mark.parametrize("propensity,clip", [(HAND_PROPENSITY, 10), (HAND_PROPENSITY, 3),
                                             ({1: 1.0, 2: 0.5, 3: 0.25}, 10)],
                         ids=["clip-10", "clip-3", "no-weight-at-4"])
def test_pairs_and_summary_from_weight_columns_equal_those_from_the_table(propensity, clip):
    log = ClickLog.from_frame(frame(HAND))
    table = P.ips_weights(propensity, clip=clip)
    columns = P.weight_columns(propensity, clip=clip)
    assert P.skip_above(log, columns).fetchall() == P.skip_above(log, table).fetchall()
    counts = P.position_counts(log)
    # Counted by hand from HAND above.
    assert {c: v.tolist() for c, v in counts.items()} == {
        "position": [1, 2, 3, 4], "shown": [3, 3, 3, 2], "clicks": [1, 1, 2, 1]}
    assert P.summary_from_positions(counts, columns, sessions=3) \
        == P.click_summary(log, table)


def test_pairs_equal_a_pure_python_reading_of_the_skip_above_rule():
    log, _, _ = simulate_log(SEED, sessions=2000, randomized_share=0.3)
    propensity = {k: 1.0 / k for k in range(1, 9)}  # clicks at 9 and 10 give no pair
    weights = P.ips_weights(propensity, clip=5)
    got = P.skip_above(ClickLog.from_frame(log), weights).fetchall()
    expected = skip_above_by_loop(log, dict(zip(weights["position"], weights["weight"])))
    assert len(got) > 1000
    assert got == expected


def test_pairs_are_the_same_whatever_duckdb_threads_and_row_order():
    log, _, _ = simulate_log(SEED, sessions=2000)
    weights = P.ips_weights({k: 1.0 / k for k in range(1, 11)})
    one = duckdb.connect()
    one.execute("SET threads = 1")
    a = P.skip_above(ClickLog.from_frame(log, con=one), weights).fetchall()
    four = duckdb.connect()
    four.execute("SET threads = 4")
    shuffled = log.sample(frac=1.0, random_state=np.random.default_rng(2))
    b = P.skip_above(ClickLog.from_frame(shuffled, con=four), weights).fetchall()
    assert a == b


# --- unbiasedness of IPS weighting -----------------------------------------------------------

def shuffled_lists(seed, *, sessions=5000, positions=10):
    """One query, ten chunks of known relevance, each session a uniform random order, clicks
    with probability p(k) r(d), p(k) = 1/k: 50,000 impressions."""
    rng = np.random.default_rng(seed)
    relevance = np.linspace(0.15, 0.85, positions)
    order = np.argsort(rng.random((sessions, positions)), axis=1)
    p = 1.0 / np.arange(1, positions + 1)
    clicked = rng.random((sessions, positions)) < p[None, :] * relevance[order]
    log = pd.DataFrame({
        "session_id": np.repeat(np.arange(sessions), positions).astype(str),
        "query_id": "q",
        "chunk_id": [f"c{i}" for i in order.ravel()],
        "position": np.tile(np.arange(1, positions + 1), sessions),
        "clicked": clicked.ravel().astype(int),
        "ranker": "shuffle",
        "randomized": False,
    })
    return log, relevance, p


def per_position(log: pd.DataFrame, propensity: dict, clip: float) -> pd.DataFrame:
    ct = P.click_through(ClickLog.from_frame(log), P.ips_weights(propensity, clip=clip)).df()
    out = ct.groupby("position")[["shown", "clicks", "weighted_clicks"]].sum()
    out["ctr"] = out["clicks"] / out["shown"]
    out["ips_ctr"] = out["weighted_clicks"] / out["shown"]
    return out


def test_ips_weighted_click_through_does_not_depend_on_the_position_shown():
    log, relevance, p = shuffled_lists(SEED)
    out = per_position(log, {k: p[k - 1] for k in range(1, 11)}, clip=10)  # 1/p(10) = 10
    r_mean = relevance.mean()  # every chunk is shown at every position equally often
    # Raw click-through falls with the position, about tenfold from 1 to 10 ...
    assert 6 < out.loc[1, "ctr"] / out.loc[10, "ctr"] < 16
    # ... the IPS-weighted one stays at the mean relevance everywhere, within 3.5 standard
    # errors. An impression shows a uniformly drawn chunk, clicked with probability p r, so
    # Var(c / p) = E[c / p^2] - r_mean^2 = mean(r) / p - r_mean^2.
    var = r_mean / p - r_mean ** 2
    se = np.sqrt(var / out["shown"].to_numpy())
    z = (out["ips_ctr"].to_numpy() - r_mean) / se
    assert np.abs(z).max() < 3.5, z
    # Per chunk, pooled over the positions it was shown at, it recovers the chunk's relevance.
    ct = P.click_through(ClickLog.from_frame(log),
                         P.ips_weights({k: p[k - 1] for k in range(1, 11)})).df()
    by_chunk = ct.groupby("chunk_id")[["weighted_clicks", "shown"]].sum()
    est = (by_chunk["weighted_clicks"] / by_chunk["shown"]).sort_index(
        key=lambda s: s.str[1:].astype(int)).to_numpy()
    assert np.abs(est - relevance).max() < 0.06


def test_the_clip_biases_deep_positions_down_by_the_documented_amount():
    log, relevance, p = shuffled_lists(SEED)
    out = per_position(log, {k: p[k - 1] for k in range(1, 11)}, clip=4)
    r_mean = relevance.mean()
    # Weight min(k, 4): unbiased up to position 4, then E = r * p(k) * 4 = r * 4 / k.
    expected = np.array([r_mean if k <= 4 else r_mean * 4 / k for k in range(1, 11)])
    weight = np.minimum(np.arange(1, 11), 4)
    var = weight ** 2 * p * r_mean - expected ** 2  # E[(w c)^2] - E[w c]^2
    se = np.sqrt(var / out["shown"].to_numpy())
    assert np.abs((out["ips_ctr"].to_numpy() - expected) / se).max() < 3.5
    assert out.loc[10, "ips_ctr"] < 0.6 * r_mean


def test_clicks_by_position_from_the_checks_masks_equals_the_count_over_the_log():
    import dataclasses

    log = ClickLog.from_frame(frame(HAND))
    # Counted by hand from HAND above.
    want = pd.DataFrame({"position": [1, 2, 3, 4], "shown": [3, 3, 3, 2],
                         "clicks": [1, 1, 2, 1]})
    pd.testing.assert_frame_equal(P.clicks_by_position(log), want)
    assert log.patterns is not None
    pd.testing.assert_frame_equal(
        P.clicks_by_position(dataclasses.replace(log, patterns=None)), want)
    sim, _, _ = simulate_log(SEED + 4, sessions=2000, randomized_share=0.3)
    opened = ClickLog.from_frame(sim)
    pd.testing.assert_frame_equal(P.clicks_by_position(opened), P.clicks_by_position(
        dataclasses.replace(opened, patterns=None)))
