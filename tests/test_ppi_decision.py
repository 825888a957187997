"""In ppi mode PPI++ decides: the comparison report rewritten with the ppi stage's estimates,
the model key's numbers beside them (model_only), the sample's (human_only), every entry
labelled; the decision files and the report's verdicts follow."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError
from relgrade.evaluation import decision
from relgrade.evaluation.ppi_decision import anytime_verdict, govern, ppi_verdict
from relgrade.pipeline.stages.ppi import used_up_words
from tests.test_decision import DEEP, P, report


def _row(estimate, low, high, *, se=0.03, lam=0.4, n=6, N=20, p=None, p_holm=None,
         significant=None, capped=False):
    out = {"estimate": estimate, "low": low, "high": high, "se": se, "lambda": lam, "n": n,
           "N": N, "interval": "jackknife", "df": n - 1, "level": 0.95, "capped": capped}
    if p is not None:
        out.update(p=p, p_holm=p_holm, significant=significant)
    return out


def ppi_record():
    """PPI++ on P only; the difference recorded as dense − bm25 (the report reads bm25 −
    dense), and the model key alone calls it significant where PPI++ does not."""
    arms = {"bm25": {"ppi++": _row(0.42, 0.35, 0.49), "human-only": _row(0.40, 0.30, 0.50),
                     "model-only": _row(0.40, 0.30, 0.50)},
            "dense": {"ppi++": _row(0.47, 0.40, 0.54), "human-only": _row(0.49, 0.39, 0.59),
                      "model-only": _row(0.5, 0.4, 0.6)}}
    diff = {"arm_a": "dense", "arm_b": "bm25",
            "ppi++": _row(0.05, -0.02, 0.12, p=0.16, p_holm=0.16, significant=False,
                          capped=True),
            "human-only": _row(0.09, -0.01, 0.19, p=0.08, p_holm=0.08, significant=False),
            "model-only": _row(0.1, 0.05, 0.15, p=0.001, p_holm=0.001, significant=True)}
    return {"key_sha256": "ab" * 32,
            "design": {"model_grader": "model-m", "human_grader": "person-h"},
            "estimates": {P: {"measure": P, "n": 6, "N": 20, "arms": arms,
                              "differences": [diff]}}}


def test_ppi_plus_plus_replaces_the_model_key_numbers_and_keeps_them_beside():
    before = report()
    out = govern(before, ppi_record())
    assert before["arms"]["bm25"][P]["estimate"] == 0.4  # the input is left as it was
    arm = out["arms"]["dense"][P]
    assert (arm["estimator"], arm["estimate"], arm["low"], arm["high"]) == \
        ("ppi++", 0.47, 0.40, 0.54)
    assert arm["model_only"] == {"estimate": 0.5, "low": 0.4, "high": 0.6, "se": 0.05,
                                 "method": "bca", "n": 20}
    assert arm["human_only"] == {"estimate": 0.49, "low": 0.39, "high": 0.59, "se": 0.03,
                                 "n": 6}
    assert (arm["n"], arm["human_n"], arm["method"]) == (20, 6, "ppi++ (jackknife)")
    c = out["comparisons"][0]  # bm25 − dense: the recorded dense − bm25 mirrored
    assert (c["estimator"], c["delta"], c["low"], c["high"]) == ("ppi++", -0.05, -0.12, 0.02)
    assert (c["p_holm"], c["significant"], c["p_randomization"]) == (0.16, False, None)
    assert (c["mean_a"], c["mean_b"]) == (0.42, 0.47)
    assert c["relative"] == pytest.approx(-0.05 / 0.47)
    assert c["model_only"]["delta"] == -0.1 and c["model_only"]["significant"] is True
    assert len(c["model_only"]["segments"]) == 2 and c["segments"] == []
    assert c["human_only"] == {"delta": -0.09, "low": -0.19, "high": 0.01, "se": 0.03,
                               "p": 0.08, "p_holm": 0.08, "significant": False}
    assert c["verdict"] == (
        f"no detectable difference on {P} between bm25 and dense: -0.050 [-0.120, +0.020], "
        "p=0.16 after Holm (PPI++, people on 6 of 20 queries); the model key alone would "
        "call it significant (p=0.004, Holm over all 2 comparisons), not what decides")
    # a measure the ppi stage did not estimate stays the model key's, and says it is no
    # decision
    deep = out["comparisons"][1]
    assert deep["estimator"] == "model-only" and deep["delta"] == 0.05
    assert deep["verdict"] == (
        "not a decision (the model key alone, no PPI++ on this measure; list it in "
        "ppi.measures for people's verdict): no detectable difference on R@10")
    assert out["arms"]["bm25"][DEEP]["estimator"] == "model-only"
    assert out["verdicts"] == [c["verdict"], deep["verdict"]]
    assert out["estimator"]["decides"] == "ppi++" and out["estimator"]["measures"] == [P]


def _ranks(estimate_a, estimate_b, stream):
    return {"measure": P, "level": 0.95, "n_resamples": 1000, "seed": 0, "stream": stream,
            "arms": {"bm25": {"estimate": estimate_a, "rank_low": 1, "rank_high": 2},
                     "dense": {"estimate": estimate_b, "rank_low": 1, "rank_high": 2}},
            "tied_groups": [["dense", "bm25"]]}


def test_the_rank_sets_of_the_comparisons_file_are_ppi_plus_plus_with_the_model_keys_beside():
    model = _ranks(0.40, 0.50, "rank-sets")
    ppi = _ranks(0.42, 0.47, f"ppi-rank-sets {P}") | {"human_queries": 6}
    out = govern(report() | {"rank_sets": model}, ppi_record() | {"rank_sets": {P: ppi}})
    assert out["rank_sets"] == ppi | {"estimator": "ppi++",
                                      "model_only": model | {"estimator": "model-only"}}
    # no PPI++ rank-sets on that measure: the model key's stay, labelled as such
    alone = govern(report() | {"rank_sets": model}, ppi_record())
    assert alone["rank_sets"] == model | {"estimator": "model-only"}


def test_the_decision_files_and_the_report_read_the_ppi_numbers():
    out = govern(report(), ppi_record())
    rows = decision.arm_summaries(out, primary=P)
    dense = rows["dense"]
    assert (dense["estimator"], dense["mean"], dense["low"], dense["high"]) == \
        ("ppi++", 0.47, 0.40, 0.54)
    assert (dense["delta"], dense["p_holm"]) == (0.05, 0.16)  # dense − baseline bm25
    assert (dense["model_only_mean"], dense["model_only_delta"],
            dense["model_only_p_holm"]) == (0.5, 0.1, 0.004)
    assert (dense["human_only_mean"], dense["human_only_delta"],
            dense["human_queries"]) == (0.49, 0.09, 6)
    md = decision.to_markdown(decision.build_decision(out, primary=P))
    verdicts = md.split("## Verdicts")[1].split("## Judged@k")[0]
    assert "- no detectable difference on" in verdicts and "(PPI++, people on 6" in verdicts
    assert "Decided by PPI++" in verdicts and "Model-only" in verdicts
    assert "- decided by: `PPI++ (6 of 20 queries graded by people" in md
    html = decision.to_html(decision.build_decision(out, primary=P))
    assert 'id="decided-by"' in html


def test_a_significant_ppi_difference_names_the_winner():
    row = {"estimate": -0.1, "low": -0.15, "high": -0.05, "p_holm": 0.004,
           "significant": True}
    assert ppi_verdict("a", "b", "m", row, n=10, big_n=40,
                       model_only={"significant": True, "p_holm": 0.0001}) == (
        "b better than a on m by 0.100 [0.050, 0.150], p=0.004 after Holm (PPI++, people on "
        "10 of 40 queries)")


def test_a_ppi_record_of_another_key_or_arm_is_refused():
    other = ppi_record() | {"key_sha256": "cd" * 32}
    with pytest.raises(InputError) as e:
        govern(report(), other, source="metrics/ppi.json")
    assert "computed on another key" in str(e.value) and "metrics/ppi.json" in str(e.value)
    short = ppi_record()
    del short["estimates"][P]["arms"]["dense"]
    with pytest.raises(InputError) as e:
        govern(report(), short)
    assert "lacks an arm" in str(e.value) and "dense" in str(e.value)


def test_a_comparison_the_anytime_rule_decided_names_it_in_every_number():
    # people stopped at 8 of 12 queries; the rule's row is dense − bm25, the report's
    # comparison bm25 − dense: mirrored
    row = {"arm_a": "dense", "arm_b": "bm25", "delta": 0.125, "low": 0.0625, "high": 0.25,
           "low_simultaneous": 0.0625, "high_simultaneous": 0.25, "p": 0.02, "p_holm": 0.02,
           "significant": True, "equivalent": False, "n": 8}
    stop = {"rule": "anytime", "settled": True, "settled_at": 8, "graded": 8, "sample": 12,
            "margin": 0.0, "words": "settled at 8 of 12 queries", "measures": {P: [row]}}
    out = govern(report(), ppi_record() | {"stop": stop})
    (c,) = [c for c in out["comparisons"] if c["measure"] == P]
    assert (c["estimator"], c["delta"], c["low"], c["high"]) == \
        ("anytime", -0.125, -0.25, -0.0625)
    # the verdict test's p-value is the rule's, not the model key's; the model key's test and
    # power analysis stand beside, under model_only
    assert (c["p_test"], c["test"], c["power"]) == (0.02, "anytime", None)
    assert c["model_only"]["p_randomization"] == 0.01
    assert c["model_only"]["power"] == {"power_now": 0.9, "n_needed": 12}
    assert out["estimator"]["comparisons"] == "anytime"
    # the decision file of dense: its mean PPI++'s, its difference from bm25 the rule's
    dense = decision.arm_summaries(out, primary=P)["dense"]
    assert (dense["estimator"], dense["mean"]) == ("ppi++", 0.47)
    assert (dense["delta_estimator"], dense["delta"], dense["p_holm"]) == \
        ("anytime", 0.125, 0.02)
    md = decision.to_markdown(decision.build_decision(out, primary=P))
    (line,) = [x for x in md.splitlines() if x.startswith(f"| bm25 | dense | {P} |")]
    assert ("| -0.1250 | [-0.2500, -0.0625] (anytime) | 0.02 | 0.02 (of 1 on the measure) | yes "
            "| — | — |") in line
    assert f"| dense | {P} | 0.4700 | [0.4000, 0.5400] (ppi++) |" in md
    assert "the comparisons by the anytime stopping rule (settled at 8 of 12 queries)" in md


def test_an_anytime_verdict_whose_own_sequence_excludes_0_says_holm_took_it_back():
    # one of 3 comparisons: its own 95% sequence [-0.741, -0.026] excludes 0, Holm's p 0.11
    # does not reject; at 1 − 0.05/3 the sequence [-0.812, +0.050] holds 0
    row = {"delta": -0.533, "low": -0.741, "high": -0.026, "low_simultaneous": -0.812,
           "high_simultaneous": 0.05, "p_holm": 0.11, "significant": False,
           "equivalent": False}
    stop = {"words": "settled at 8 of 12 queries", "margin": 0.0, "level": 0.95,
            "measures": {P: [{}, {}, {}]}}
    assert anytime_verdict("a", "b", P, row, stop=stop) == (
        f"no detectable difference on {P} between a and b: -0.533 [-0.741, -0.026], anytime "
        "p=0.11 after Holm; the confidence sequence shown is each comparison's own at 95% "
        "and excludes 0 only before correcting for the 3 comparisons made (at 1 − 0.05/3 it "
        "is [-0.812, +0.050]) (people, settled at 8 of 12 queries)")
    # a sequence that holds 0, or a family of one, needs no such words
    assert "before correcting" not in anytime_verdict(
        "a", "b", P, row | {"high": 0.01}, stop=stop)
    assert "before correcting" not in anytime_verdict(
        "a", "b", P, row, stop=stop | {"measures": {P: [{}]}})


def test_a_used_up_sample_is_not_called_an_early_stop():
    row = {"arm_a": "dense", "arm_b": "bm25", "delta": 0.125, "low": -0.0625, "high": 0.25,
           "low_simultaneous": -0.0625, "high_simultaneous": 0.25, "p": 0.3, "p_holm": 0.3,
           "significant": False, "equivalent": False, "n": 8}
    words = used_up_words(8)
    assert words == ("the whole sample is graded; the rule did not settle: verdicts from all "
                     "8 queries")
    stop = {"rule": "anytime", "settled": False, "settled_at": None, "graded": 8, "sample": 8,
            "margin": 0.0, "level": 0.95, "words": words, "measures": {P: [row]}}
    note = govern(report(), ppi_record() | {"stop": stop})["estimator"]["note"]
    assert "stopped early" not in note
    assert (f"people graded the human sample in a seeded order ({words}), each comparison is "
            "decided") in note


def _report_record():
    """A ppi record with what the report's prediction-powered section reads."""
    record = ppi_record()
    record["design"].update(level=0.9, queries=20, human_fraction=0.3, seed=1,
                            human_sample=["q1"], rectifier="r", interval="jackknife")
    record.update(judge_audit={"leniency": [], "order": [], "flags": [], "spread": 0.0,
                               "max_spread": 0.15},
                  budget={"reference": "r", "curve": [], "tau_0.9": {}})
    return record


def test_the_ppi_report_names_the_holm_family_of_every_p_value():
    # PPI++ decides P, whose family is its 1 comparison (the ppi record's differences on
    # P); R@10 stays model-only, adjusted by the compare stage over both comparisons (2)
    record = _report_record()
    out = govern(report(), record)
    md = decision.to_markdown(decision.build_decision(out, primary=P, ppi=record))
    assert ("- Holm: `PPI++ verdicts over the 1 comparison on their measure "
            f"({P}) at alpha 0.1; model-only verdicts over all 2 comparisons made at alpha "
            "0.05`") in md.splitlines()
    assert (f"On the primary measure, {P} (PPI++, Holm-adjusted over the 1 comparison made "
            "on it):") in md.splitlines()
    assert "| p (verdict test) | p (Holm, of the family named) | significant |" in md
    rows = {line.split(" | ")[2]: line.split(" | ")[6] for line in md.splitlines()
            if line.startswith("| bm25 | dense |")}
    assert rows == {P: "0.16 (of 1 on the measure)", DEEP: "0.2 (of all 2)"}
    assert ("| difference | PPI++ | Holm p (of the measure's 1) | significant | model-only | "
            "significant (Holm of 1) | human-only | significant (Holm of 1) |") in md
    html = decision.to_html(decision.build_decision(out, primary=P, ppi=record))
    assert "(PPI++, Holm-adjusted over the 1 comparison made on it)" in html
    assert "<th>Holm p (of the measure's 1)</th>" in html
    assert "<th>p (Holm, of the family named)</th>" in html


def test_the_single_mode_report_keeps_its_one_holm_family_words():
    md = decision.to_markdown(decision.build_decision(report(), primary=P))
    assert "- Holm: `2 comparisons at alpha 0.05`" in md.splitlines()
    assert f"On the primary measure, {P} (Holm-adjusted over every comparison made):" in md
    assert "| p (verdict test) | p (Holm) | significant |" in md
    assert "| bm25 | dense | R@10 | +0.0500 | [-0.0100, +0.1100] | 0.01 | 0.2 | no |" in md


def test_with_lambda_0_the_arms_and_rank_sets_say_they_rest_on_the_human_sample():
    # lambda 0 on every arm: PPI++ is the human-only mean of the 6 sample queries of 20
    record = ppi_record()
    for r in record["estimates"][P]["arms"].values():
        r["ppi++"]["lambda"] = 0.0
    out = govern(report(), record)
    ranks = {"measure": P, "level": 0.95, "n_resamples": 100, "queries": 20,
             "human_queries": 6, "seed": 3, "stream": "s",
             "arms": {"dense": {"estimate": 0.47, "rank_low": 1, "rank_high": 2},
                      "bm25": {"estimate": 0.42, "rank_low": 1, "rank_high": 2}},
             "tied_groups": [["dense", "bm25"]]}
    md = decision.to_markdown(decision.build_decision(out, primary=P, rank_sets=ranks))
    # the model key's power analysis (n_needed 100 in the report) is labelled as such
    assert f"| dense | {P} | 0.4700 | [0.4000, 0.5400] (ppi++) | 0.0300 | 6 (people only: " \
           "λ = 0) | 100 (model-only) |" in md.splitlines()
    # R@10 stays the model key's, over all 20 queries
    assert f"| dense | {DEEP} | 0.5500 | [0.4500, 0.6500] (model-only) | 0.0500 | 20 | 100 |" \
        in md.splitlines()
    assert ("From PPI++ estimates (model key on every query, rectified on 6 human-graded "
            "queries; here λ = 0, so each estimate is the human-only one and rests on those "
            "6 queries alone) over 20 queries") in md
    # with lambda above 0 the rows keep every query the model graded, and say how many of
    # them people graded
    md = decision.to_markdown(decision.build_decision(govern(report(), ppi_record()),
                                                      primary=P, rank_sets=ranks))
    assert f"| dense | {P} | 0.4700 | [0.4000, 0.5400] (ppi++) | 0.0300 | 20 (6 by people) " \
           "| 100 (model-only) |" in md.splitlines()
    assert "λ = 0" not in md


def test_a_ppi_verdict_excluding_0_only_before_holm_says_so():
    row = {"estimate": -0.468, "low": -0.736, "high": -0.199, "p_holm": 0.052,
           "significant": False}
    assert ppi_verdict("fresh", "lex", "nDCG@10", row, n=3, big_n=15, family=3) == (
        "no detectable difference on nDCG@10 between fresh and lex: -0.468 [-0.736, -0.199], "
        "p=0.052 after Holm; the interval excludes 0 only before correcting for the 3 "
        "comparisons made (PPI++, people on 3 of 15 queries)")
    # one comparison: nothing was corrected, so nothing to say
    assert "only before correcting" not in ppi_verdict("fresh", "lex", "nDCG@10", row, n=3,
                                                      big_n=15, family=1)


def test_govern_gives_the_ppi_verdict_its_holm_family():
    rec = ppi_record()
    diff = rec["estimates"][P]["differences"][0]
    diff["ppi++"].update(estimate=0.05, low=0.01, high=0.09, p_holm=0.07, significant=False)
    diff2 = {**diff, "arm_a": "bm25", "arm_b": "dense"}  # a family of 2
    rec["estimates"][P]["differences"].append(diff2)
    out = govern(report(), rec)
    verdict = next(c["verdict"] for c in out["comparisons"] if c["measure"] == P)
    assert "excludes 0 only before correcting for the 2 comparisons made" in verdict


def test_the_ppi_report_says_its_other_measures_and_key_translation_are_the_judges():
    from tests.test_report_translation import TRANSLATION

    record = _report_record()
    d = decision.build_decision(govern(report(), record), primary=P, ppi=record,
                                translation=TRANSLATION)
    md = decision.to_markdown(d)
    # R@10 is not decided by people: listed under "Other measures", never as a verdict
    assert "\n## Other measures\n\n- not a decision (the model key alone" in md
    assert "Verdicts on the other measures" not in md
    section = md.split("## Translation from the previous key\n", 1)[1].split("\n## ", 1)[0]
    assert ("Both keys are the model judge's (ppi mode): these are model-key means, not the "
            "people's estimates") in " ".join(section.split())
    html = decision.to_html(d)
    assert '<h2 id="other-verdicts">Other measures</h2>' in html
    assert "<p>Both keys are the model judge's (ppi mode)" in html
    # outside ppi mode neither changes
    single = decision.to_markdown(decision.build_decision(report(), primary=P,
                                                          translation=TRANSLATION))
    assert "model judge's" not in single
