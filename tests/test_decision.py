"""The decision report: Judged@k caveats, verdict order, per-arm dvc metrics, both renderers."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import decision
from relgrade.evaluation.compare import compare_arms
from tests.test_compare import settings, table

P = "nDCG(dcg='exp-log2')@5"
DEEP = "R@10"


def _ci(estimate, low, high, n_needed=100):
    return {"estimate": estimate, "low": low, "high": high, "se": 0.05, "level": 0.95,
            "method": "bca", "n": 20, "n_resamples": 2000, "notes": [],
            "power": {"n_needed": n_needed}}


def _pair(a, b, measure, delta, low, high, p_holm, significant, verdict, segments=()):
    return {"arm_a": a, "arm_b": b, "measure": measure, "n": 20, "mean_a": 0.5, "mean_b": 0.4,
            "delta": delta, "low": low, "high": high, "se": 0.02, "p_randomization": 0.01,
            "p_holm": p_holm, "significant": significant, "holm_family": 2,
            "power": {"power_now": 0.9, "n_needed": 12}, "segments": list(segments),
            "segment_cancellation": False, "label_noise": None, "verdict": verdict}


def report():
    """Two arms, a pool of depth 5, compared at 5 (within the pool) and 10 (deeper)."""
    seg = [{"group": "keyword", "n": 10, "delta": 0.2, "low": 0.1, "high": 0.3,
            "significant": True},
           {"group": "question", "n": 10, "delta": 0.0, "low": -0.1, "high": 0.1,
            "significant": False}]
    return {
        "key_sha256": "ab" * 32, "pool_version": "p-000000000001", "post_hoc": False,
        "settings": {"seed": 7, "bootstrap": 2000, "permutations": 2000, "level": 0.95,
                     "interval": "bca", "alpha": 0.05, "power": 0.8,
                     "min_relative_change": 0.02, "baseline": "bm25", "pairs": "baseline"},
        "measures": [P, DEEP],
        "arms": {"bm25": {P: _ci(0.4, 0.3, 0.5), DEEP: _ci(0.6, 0.5, 0.7)},
                 "dense": {P: _ci(0.5, 0.4, 0.6), DEEP: _ci(0.55, 0.45, 0.65)}},
        # read as bm25 − dense: the per-arm summary must flip it to dense − bm25
        "comparisons": [
            _pair("bm25", "dense", P, -0.1, -0.15, -0.05, 0.004, True,
                  "dense better than bm25 on P", seg),
            _pair("bm25", "dense", DEEP, 0.05, -0.01, 0.11, 0.2, False,
                  "no detectable difference on R@10")],
        "pool_bias": {"depth": 5, "unique_pairs": {"bm25": 3, "dense": 9},
                      "judged": [{"arm": "bm25", "k": 5, "judged": 1.0},
                                 {"arm": "dense", "k": 5, "judged": 1.0},
                                 {"arm": "bm25", "k": 10, "judged": 0.62},
                                 {"arm": "dense", "k": 10, "judged": 0.551}],
                      "leave_one_arm_out": [], "condensed": []},
        "label_noise": None,
    }


# the pool version and the key's first 12 hex digits, so `dvc metrics diff` shows a new key
STAMP = {"pool_version": "p-000000000001", "key": "abababababab"}

CAVEAT = ("at cutoff 10, deeper than the pool depth 5, ungraded chunks count as not relevant "
          "(Judged@10: bm25 0.62; dense 0.55)")


def test_a_cutoff_deeper_than_the_pool_gets_a_caveat_naming_judged_at_k():
    assert decision.judged_caveats(report()) == {10: CAVEAT}


def test_a_cutoff_at_the_pool_depth_gets_no_caveat():
    r = report()
    r["pool_bias"]["depth"] = 10
    assert decision.judged_caveats(r) == {}
    assert decision.build_decision(r, primary=P).caveats == [
        "every cutoff lies within the pool depth 10: all retrieved chunks of the pooled arms "
        "were graded"]


def test_only_verdicts_deeper_than_the_pool_carry_the_caveat():
    assert decision.verdicts(report()) == [
        (P, "dense better than bm25 on P"),
        (DEEP, "no detectable difference on R@10; " + CAVEAT)]


def test_a_post_hoc_report_labels_every_verdict():
    r = report()
    r["post_hoc"] = True
    assert [t for _, t in decision.verdicts(r)][0] == "post-hoc: dense better than bm25 on P"


def test_verdicts_lead_with_the_primary_measure():
    d = decision.build_decision(report(), primary=DEEP)
    assert d.verdicts == ["no detectable difference on R@10; " + CAVEAT]
    assert d.other_verdicts == ["dense better than bm25 on P"]


def test_arm_summaries_read_the_difference_as_arm_minus_baseline():
    s = decision.arm_summaries(report(), primary=P)
    assert s == {
        "bm25": {"measure": P, "mean": 0.4, "low": 0.3, "high": 0.5, **STAMP, "judged": 1.0},
        "dense": {"measure": P, "mean": 0.5, "low": 0.4, "high": 0.6, **STAMP, "judged": 1.0,
                  "baseline": "bm25", "delta": 0.1, "p_holm": 0.004}}
    assert decision.arm_summaries(report(), primary=DEEP)["dense"]["judged"] == 0.551


def test_arm_summaries_default_to_the_first_measure():
    assert decision.arm_summaries(report()) == decision.arm_summaries(report(), primary=P)


def test_a_primary_measure_not_compared_is_refused():
    with pytest.raises(InputError) as e:
        decision.build_decision(report(), primary="RR@3")
    assert str(e.value) == ("RR@3: primary measure not compared. set metrics.primary to one "
                            "of nDCG(dcg='exp-log2')@5, R@10")


def test_a_report_without_comparisons_is_refused_with_the_fix():
    r = report()
    del r["comparisons"]
    with pytest.raises(InputError) as e:
        decision.build_decision(r, primary=P, source="metrics/comparisons.json")
    assert str(e.value) == ("metrics/comparisons.json: comparisons: comparison report lacks a "
                            "section. rerun the compare stage (dvc repro compare)")


def test_markdown_holds_every_section_and_the_key_hash():
    md = decision.to_markdown(decision.build_decision(report(), primary=P))
    for heading in ("## Verdicts", "## Judged@k", "## Arms", "## Paired comparisons",
                    "## Per query group", "## Pool bias", "## Label noise",
                    "## Verdicts on the other measures"):
        assert heading in md
    assert f"- key sha256: `{'ab' * 32}`" in md
    assert "- pool version: `p-000000000001`" in md
    assert "- Holm: `2 comparisons at alpha 0.05`" in md
    # bm25 − dense on P: -0.1 [-0.15, -0.05], Holm 0.004, power now 0.9, 12 queries needed
    assert ("| bm25 | dense | nDCG(dcg='exp-log2')@5 | -0.1000 | [-0.1500, -0.0500] | 0.01 | "
            "0.004 | yes | 0.90 | 12 |  |") in md
    assert "| bm25 | dense | R@10 | +0.0500 | [-0.0100, +0.1100] | 0.01 | 0.2 | no | 0.90 | " \
           "12 | yes |" in md
    assert "| bm25 | dense | nDCG(dcg='exp-log2')@5 | keyword | 10 | +0.2000 |" in md
    assert "| dense | 10 | 0.551 | yes |" in md
    assert "No label-noise audit in this comparison." in md


def test_the_verdict_section_is_bullets_a_shell_can_cut_out():
    md = decision.to_markdown(decision.build_decision(report(), primary=P))
    section = md.split("## Verdicts\n", 1)[1].split("\n## ", 1)[0]
    assert [ln for ln in section.splitlines() if ln.startswith("- ")] == [
        "- dense better than bm25 on P"]


def test_a_pipe_in_a_name_does_not_break_a_markdown_row():
    r = report()
    r["arms"]["a|b"] = r["arms"].pop("dense")
    md = decision.to_markdown(decision.build_decision(r, primary=P))
    assert "| a\\|b | nDCG(dcg='exp-log2')@5 | 0.5000 |" in md


def test_html_escapes_names_and_carries_no_script_or_external_reference():
    r = report()
    r["arms"]["<script>alert(1)</script>"] = r["arms"].pop("dense")
    html = decision.to_html(decision.build_decision(r, primary=P))
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "<link" not in html and " src=" not in html
    assert html.count("<svg") == 2 and "<style>" in html


def test_a_real_comparison_round_trips_through_its_json_into_the_report():
    # per-query values: bm25 = A, up = A + 0.0625; means 0.4 and 0.4625 (numpy, by hand)
    a = [0.5, 0.25, 0.75, 0.125, 0.375]
    c = compare_arms(table({"bm25": a, "up": np.add(a, 0.0625)}), settings=settings())
    r = json.loads(c.to_json())
    s = decision.arm_summaries(r)
    assert s["bm25"]["mean"] == pytest.approx(np.mean(a)) == pytest.approx(0.4)
    assert s["up"]["mean"] == pytest.approx(0.4625)
    assert s["up"]["delta"] == pytest.approx(0.0625)
    assert s["up"]["p_holm"] == c.pairs[0].p_holm
    d = decision.build_decision(r)
    assert d.verdicts == c.verdicts()
    assert d.caveats == ["no pool depth recorded"]


def test_the_report_dict_is_not_changed():
    r = report()
    before = copy.deepcopy(r)
    decision.to_html(decision.build_decision(r, primary=P))
    decision.arm_summaries(r, primary=P)
    assert r == before


def test_renderings_are_byte_for_byte_the_same_on_a_second_run():
    one = decision.build_decision(report(), primary=P)
    two = decision.build_decision(copy.deepcopy(report()), primary=P)
    assert decision.to_html(one) == decision.to_html(two)
    assert decision.to_markdown(one) == decision.to_markdown(two)
