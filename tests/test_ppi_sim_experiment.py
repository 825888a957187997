"""experiments/ppi-sim, read from its committed files only (nothing is run).

A SIMULATED prediction-powered experiment: a lenient model grader with a family affinity for
tfidf grades every pool pair, a simulated person grades a uniform sample of 10 of the 36
queries. The report must show PPI++, model-only and human-only side by side with the judge
audit and the budget curve; metrics/ppi.json must name the sample, its seed, the rectifier and
every lambda; the judge audit must find the simulation's leniency on every arm, most on tfidf;
and the model-only estimate must overrate the random arm, whose pairs are truly 0, the most
(docs/ppi.md; issue 21).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

EXP = Path(__file__).resolve().parents[1] / "experiments" / "ppi-sim"
PRIMARY = "nDCG(dcg='exp-log2')@10"
ARMS = ("bm25", "hybrid", "random", "tfidf")


@pytest.fixture(scope="module")
def report() -> str:
    return (EXP / "metrics" / "report.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def ppi() -> dict:
    return json.loads((EXP / "metrics" / "ppi.json").read_text(encoding="utf-8"))


def _section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of any level."""
    start = text.index(heading)
    nxt = re.search(r"^#{2,3} ", text[start + len(heading):], flags=re.M)
    return text[start:start + len(heading) + (nxt.start() if nxt else len(text))]


def test_it_is_labelled_simulated_and_runs_in_ppi_mode_on_the_default_pool_and_random_pairs():
    raw = (EXP / "params.yaml").read_text(encoding="utf-8")
    assert raw.startswith("# SIMULATED")
    assert "**SIMULATED" in (EXP / "DESIGN.md").read_text(encoding="utf-8")
    params = yaml.safe_load(raw)
    assert params["grading"]["mode"] == "ppi"
    assert params["ppi"]["human_queries"] == 10  # docs/ppi.md: at least 10 human queries
    assert params["arms"]["tfidf"]["family"] == params["graders"]["model-m"]["family"]
    pool = json.loads((EXP / "data" / "pool" / "manifest.json").read_text(encoding="utf-8"))
    # the default experiment's pool before bm25f joined (its 521 pairs are the known truth,
    # sim/truth.jsonl) plus
    # the random arm's top 10 of each of the 36 queries, 352 of which are new pairs
    truth = {(r["query_id"], r["chunk_id"]) for r in map(
        json.loads, (EXP / "sim" / "truth.jsonl").read_text(encoding="utf-8").splitlines())}
    pooled = {(r["query_id"], r["chunk_id"]) for r in map(  # the frozen key: every pool pair
        json.loads, (EXP / "data" / "key" / "key.jsonl").read_text(encoding="utf-8").splitlines())}
    assert len(truth) == 521 and truth <= pooled and len(pooled - truth) == 352
    assert pool["pool_version"] == "p-118db5f0d636"


def test_the_report_shows_the_three_estimates_side_by_side_with_audit_and_curve(report):
    table = _section(report, f"### {PRIMARY}: PPI++, model-only and human-only")
    assert "| arm | PPI++ | λ | model-only (ignores the model's bias) | human-only |" in table
    for arm in ARMS:
        row = next(line for line in table.splitlines() if line.startswith(f"| {arm} |"))
        # a t interval may reach below 0 (random's, around a mean of 0.045)
        assert len(re.findall(r"-?\d\.\d{4} \[-?\d\.\d{4}, -?\d\.\d{4}\]", row)) == 3
    assert "| difference | PPI++ | Holm p (of the measure's 3) |" in table
    audit = _section(report, "### Judge audit")
    assert "family affinity: arm tfidf shares the model grader's family" in audit
    assert "kendall tau" in audit
    budget = _section(report, "### Judging budget")
    assert "First budget with Kendall τ ≥ 0.9" in budget
    assert "| strategy | budget | judgments | annotator-hours | τ |" in budget


def test_the_record_names_the_sample_seed_rectifier_and_every_lambda(ppi):
    design = ppi["design"]
    lock = json.loads((EXP / "data" / "audit" / "lock.json").read_text(encoding="utf-8"))
    assert design["human_sample"] == sorted(q["query_id"] for q in lock["queries"])
    assert len(design["human_sample"]) == 10 and design["queries"] == 36
    assert design["seed"] == 20261130 and design["sample_stream"] == "ppi-sample"
    assert "PPI++" in design["rectifier"]
    arms = ppi["estimates"][PRIMARY]["arms"]
    assert sorted(arms) == list(ARMS)
    for arm in ARMS:
        lam = arms[arm]["ppi++"]["lambda"]
        assert 0.0 <= lam <= 1.0


def test_the_model_is_lenient_on_every_arm_and_model_only_overrates_random_most(ppi):
    # Grade by grade the model is lenient on every arm's pairs. On nDCG, model-only sits
    # above human-only where the arm's own pairs carry the leniency (random: truly 0 pairs
    # the model often grades 1), but the model's 1s on the random arm's pairs also raise
    # every query's ideal ranking, so for the good arms the two effects come close to
    # cancelling (hybrid and tfidf even fall below human-only): the overrating is largest
    # for random.
    arms = ppi["estimates"][PRIMARY]["arms"]
    over = {arm: arms[arm]["model-only"]["estimate"] - arms[arm]["human-only"]["estimate"]
            for arm in ARMS}
    assert max(over, key=over.get) == "random" and over["random"] > 0.1
    leniency = {row["arm"]: row["mean"] for row in ppi["judge_audit"]["leniency"]}
    assert min(leniency.values()) > 0
    assert max(leniency, key=leniency.get) == "tfidf"  # the arm of the model's family
    assert ppi["judge_audit"]["affinity_arms"] == ["tfidf"]


def test_the_verdicts_script_prints_the_ppi_verdicts_and_says_ppi_decides():
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", str(EXP.parents[1] / "tools" / "verdicts.sh")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    block = next(b for b in done.stdout.split("\n\n")
                 if b.startswith("Verdicts of experiments/ppi-sim "))
    assert "(decided by PPI++: people graded 10 of 36 queries, the model every query" in block
    lines = [ln for ln in block.splitlines() if ln.startswith("  - ")]
    assert len(lines) == 3  # each arm against the baseline bm25 (metrics.pairs: baseline)
    assert all("after Holm (PPI++, people on 10 of 36 queries)" in ln for ln in lines)


def test_the_report_sentence_describes_the_interval_kind_in_words(ppi):
    from relgrade.evaluation.decision import ppi_cells
    from relgrade.evaluation.ppi_table import INTERVAL_WORDS

    design = dict(ppi["design"], interval="regression",
                  interval_words=INTERVAL_WORDS["regression"])
    sentence = ppi_cells(dict(ppi, design=design))["design"]
    assert ("Intervals: regression (PPI++ with the small-sample variance of the regression "
            "estimator, which counts the tuning of lambda on the sample, and Student's t on "
            "n - 2 degrees of freedom;") in sentence
    assert sentence.endswith(" at level 0.95.")
    # a record written before the words were recorded still reads
    old = dict(ppi["design"])
    old.pop("interval_words", None)
    assert (f"Intervals: {old['interval']} at level {old['level']}."
            in ppi_cells(dict(ppi, design=old))["design"])


def test_the_report_marks_each_capped_interval_and_counts_them(ppi):
    from relgrade.evaluation.decision import ppi_cells

    est = ppi["estimates"][PRIMARY]
    capped_arms = sorted(a for a, r in est["arms"].items() if r["ppi++"]["capped"])
    capped_pairs = [r for r in est["differences"] if r["ppi++"]["capped"]]
    cells = next(m for m in ppi_cells(ppi)["measures"] if m["measure"] == PRIMARY)
    assert sorted(r["arm"] for r in cells["arms"] if r["ppi"].endswith(" (capped)")) == \
        capped_arms
    assert sum(r["ppi"].endswith(" (capped)") for r in cells["pairs"]) == len(capped_pairs)
    assert cells["capped"] == len(capped_arms) + len(capped_pairs)
    # a capped interval has the human-only half-width: the same standard error on the same
    # degrees of freedom (the width itself may be cut to the measure's range, marked clipped)
    for arm in capped_arms:
        p, h = est["arms"][arm]["ppi++"], est["arms"][arm]["human-only"]
        assert (p["se"], p["df"]) == (pytest.approx(h["se"], rel=1e-12), h["df"])
        if not p.get("clipped") and not h.get("clipped"):
            assert round(p["high"] - p["low"], 4) == pytest.approx(
                round(h["high"] - h["low"], 4), abs=2e-4)
    # a record written before intervals could be capped reads with no mark
    old = {"arms": {a: {k: {kk: vv for kk, vv in v.items() if kk != "capped"}
                        for k, v in r.items()} for a, r in est["arms"].items()}}
    assert not any(r["ppi"].endswith("(capped)") for r in ppi_cells(
        dict(ppi, estimates={PRIMARY: dict(est, **old)}))["measures"][0]["arms"])
