"""Label-noise band, Kendall's tau and tau-ap."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats as sps

from relgrade.errors import InputError
from relgrade.evaluation import noise

# --- tau-ap by hand ------------------------------------------------------------------

def test_tau_ap_on_four_items_by_hand():
    ref = ["a", "b", "c", "d"]
    # top pair swapped: C(2)=0 (a below b in ref), C(3)=2, C(4)=3
    # tau_ap = 2/3 * (0/1 + 2/2 + 3/3) - 1 = 1/3
    assert noise.tau_ap(["b", "a", "c", "d"], ref) == pytest.approx(1 / 3)
    # bottom pair swapped: C(2)=1, C(3)=2, C(4)=2 (d is above c in the ranking, below in ref)
    # tau_ap = 2/3 * (1 + 1 + 2/3) - 1 = 7/9
    assert noise.tau_ap(["a", "b", "d", "c"], ref) == pytest.approx(7 / 9)
    # Kendall's tau cannot tell the two swaps apart: (5 - 1) / 6 each
    for ranking in (["b", "a", "c", "d"], ["a", "b", "d", "c"]):
        pos = [ranking.index(x) for x in ref]
        assert sps.kendalltau(pos, range(4)).statistic == pytest.approx(2 / 3)


def test_tau_ap_is_one_for_the_same_order_and_minus_one_reversed():
    ref = ["a", "b", "c", "d", "e"]
    assert noise.tau_ap(ref, ref) == 1.0
    assert noise.tau_ap(ref[::-1], ref) == -1.0


def test_tau_ap_is_not_symmetric():
    x, y = ["b", "a", "c", "d"], ["a", "c", "b", "d"]
    # x against y: C(2)=0, C(3)=1 (of b, a only a is above c in y), C(4)=3
    # -> 2/3 * (0 + 1/2 + 1) - 1 = 0
    assert noise.tau_ap(x, y) == pytest.approx(0.0)
    # y against x: C(2)=1, C(3)=0, C(4)=3 -> 2/3 * (1 + 0 + 1) - 1 = 1/3
    assert noise.tau_ap(y, x) == pytest.approx(1 / 3)


def test_tau_ap_rejects_different_items():
    with pytest.raises(InputError):
        noise.tau_ap(["a", "b"], ["a", "c"])
    with pytest.raises(InputError):
        noise.tau_ap(["a"], ["a"])


def test_kendall_tau_is_undefined_not_zero_for_a_constant_scoring():
    assert noise.kendall_tau({"a": 0.5, "b": 0.5}, {"a": 0.1, "b": 0.2}) is None
    assert noise.kendall_tau({"a": 0.1}, {"a": 0.2}) is None
    assert noise.kendall_tau({"a": 1, "b": 2, "c": 3}, {"a": 3, "b": 2, "c": 1}) == -1.0


def test_ranking_from_scores_breaks_ties_by_name():
    assert noise.ranking_from_scores({"z": 0.5, "a": 0.5, "m": 0.9}) == ["m", "a", "z"]


# --- the auditor key -----------------------------------------------------------------

KEY = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2"], "chunk_id": ["a", "b", "c", "d"],
                    "grade": [2, 0, 1, 1]})
GRADES = pd.DataFrame({
    "query_id": ["q1", "q1", "q1", "q1", "q2"], "chunk_id": ["a", "b", "a", "b", "d"],
    "grader": ["grader-a", "grader-a", "auditor-b", "auditor-b", "grader-a"],
    "role": ["grader", "grader", "auditor", "auditor", "grader"], "round": [1] * 5,
    "grade": [2, 0, 1, 0, 1], "reason": [""] * 5})


def test_auditor_key_replaces_only_the_audit_queries_grades():
    akey, info = noise.auditor_key(key=KEY, grades=GRADES, audit_queries=["q1"],
                                   auditor="auditor-b", round=1)
    assert akey["grade"].tolist() == [1, 0, 1, 1]     # a: 2 -> 1; b same; c ungraded, kept
    assert info == {"queries": 1, "pairs": 3, "replaced": 2, "kept": 1, "changed": 1}
    assert KEY["grade"].tolist() == [2, 0, 1, 1]      # the key itself is untouched


def test_auditor_key_refuses_an_auditor_who_graded_nothing():
    with pytest.raises(InputError, match="graded none"):
        noise.auditor_key(key=KEY, grades=GRADES, audit_queries=["q1"], auditor="nobody",
                          round=1)


# --- the band ------------------------------------------------------------------------

def _pq(values: dict, measure="M") -> pd.DataFrame:
    return pd.DataFrame([{"arm": arm, "query_id": q, "measure": measure, "value": v}
                         for arm, per_q in values.items() for q, v in per_q.items()])


GRADER = _pq({"A": {"q1": 0.5, "q2": 0.75, "q3": 0.5, "q4": 0.75},
              "B": {"q1": 0.25, "q2": 0.5, "q3": 0.5, "q4": 0.5}})


def test_band_is_the_move_of_the_audit_queries_difference_by_hand():
    # grader: d = [0.25, 0.25, 0, 0.25], delta 0.1875; on {q1, q2}: 0.25
    # auditor on {q1, q2}: d = [0.0, 0.25] -> 0.125; band |0.125 - 0.25| = 0.125
    aud = _pq({"A": {"q1": 0.25, "q2": 0.75}, "B": {"q1": 0.25, "q2": 0.5}})
    out = noise.noise_deltas(grader=GRADER, auditor=aud, comparisons=[("A", "B", "M")])
    band = out[("A", "B", "M")]
    assert (band.queries, band.delta_grader, band.delta_auditor, band.band) == (
        2, pytest.approx(0.25), pytest.approx(0.125), pytest.approx(0.125))
    assert band.delta_swapped == pytest.approx((0.0 + 0.25 + 0 + 0.25) / 4)
    assert band.within is False                       # 0.1875 > 0.125


def test_a_difference_inside_the_band_is_flagged():
    aud = _pq({"A": {"q1": 0.0, "q2": 0.5}, "B": {"q1": 0.25, "q2": 0.75}})
    band = noise.noise_deltas(grader=GRADER, auditor=aud,
                              comparisons=[("A", "B", "M")])[("A", "B", "M")]
    # auditor d = [-0.25, -0.25]: band |−0.25 − 0.25| = 0.5 >= 0.1875
    assert band.band == pytest.approx(0.5)
    assert band.within is True


def test_weights_enter_the_band():
    aud = _pq({"A": {"q1": 0.25, "q2": 0.75}, "B": {"q1": 0.25, "q2": 0.5}})
    w = {"q1": 3.0, "q2": 1.0, "q3": 1.0, "q4": 1.0}
    band = noise.noise_deltas(grader=GRADER, auditor=aud, comparisons=[("A", "B", "M")],
                              weights=w)[("A", "B", "M")]
    # grader on audit: 0.25 either way; auditor (3*0 + 1*0.25)/4 = 0.0625
    assert band.delta_auditor == pytest.approx(0.0625)
    assert band.band == pytest.approx(0.1875)


def test_orderings_report_both_orders_and_their_correlations():
    grader = _pq({"A": {"q1": 0.9}, "B": {"q1": 0.5}, "C": {"q1": 0.1}})
    aud = _pq({"A": {"q1": 0.4}, "B": {"q1": 0.6}, "C": {"q1": 0.1}})
    (row,) = noise.orderings(grader=grader, auditor=aud, measures=["M"])
    assert row["order_grader"] == "A > B > C"
    assert row["order_auditor"] == "B > A > C"
    assert row["kendall_tau"] == pytest.approx(1 / 3)        # (2 - 1) / 3
    # auditor order against grader order: C(2)=0, C(3)=2 -> (0 + 1) - 1 = 0
    assert row["tau_ap"] == pytest.approx(0.0)
