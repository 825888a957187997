"""The decision report's translation from a replaced key and its judging cost: cells, both
renderers, and the report stage reading the previous key kept by the key stage."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import pytest

from relgrade.errors import InputError, ProtocolError
from relgrade.evaluation import decision
from relgrade.pipeline.cost import report_cost
from relgrade.experiment.files import Experiment
from relgrade.experiment.params import parse_params
from tests.test_cost_design import BASE
from tests.test_decision import P, report

ROOT = Path(__file__).resolve().parents[1]

TRANSLATION = {
    "measure": P,
    "previous": {"key_sha256": "0" * 64, "pool_version": "p-old", "rubric_version": "v1",
                 "round": 1, "queries": 2},
    "current": {"key_sha256": "1" * 64, "pool_version": "p-new", "rubric_version": "v1",
                "round": 1, "queries": 3},
    "queries_shared": 2,
    "arms": [{"arm": "dense", "previous": 0.5, "current": 2 / 3, "shift": 2 / 3 - 0.5,
              "rank_previous": 2, "rank_current": 1},
             {"arm": "bm25", "previous": 1.0, "current": 1 / 3, "shift": 1 / 3 - 1.0,
              "rank_previous": 1, "rank_current": 2}],
    "order_previous": ["bm25", "dense"], "order_current": ["dense", "bm25"],
    "kendall_tau": -1.0, "order_changed": True,
}

COST = {"graders": {"g": {"worker": "person", "spent": 240, "pending": 80,
                          "seconds_per_judgment": 45.0, "spent_hours": 3.0,
                          "pending_hours": 1.0},
                    "m": {"worker": "model", "spent": 4560, "pending": 0,
                          "calls_per_judgment": 1, "spent_calls": 4560, "pending_calls": 0}},
        "spent": 4800, "pending": 80, "spent_hours": 3.0, "pending_hours": 1.0,
        "spent_calls": 4560, "pending_calls": 0}


def test_without_a_previous_key_or_cost_the_report_has_neither_section():
    d = decision.build_decision(report(), primary=P)
    assert d.translation is None and d.cost is None
    md, html = decision.to_markdown(d), decision.to_html(d)
    assert "Translation" not in md and "Judging cost" not in md
    assert 'id="translation"' not in html and 'id="cost"' not in html


def test_the_translation_section_gives_both_keys_every_arm_its_shift_and_tau():
    d = decision.build_decision(report(), primary=P, translation=TRANSLATION)
    md = decision.to_markdown(d)
    section = md.split("## Translation from the previous key\n", 1)[1].split("\n## ", 1)[0]
    assert "| previous | `" + "0" * 64 + "` | p-old | v1 | 1 | 2 |" in section
    assert "| current | `" + "1" * 64 + "` | p-new | v1 | 1 | 3 |" in section
    # 2/3 - 1/2 = +0.1667; 1/3 - 1 = -0.6667
    assert "| dense | 0.5000 | 0.6667 | +0.1667 | 2 → 1 |" in section
    assert "| bm25 | 1.0000 | 0.3333 | -0.6667 | 1 → 2 |" in section
    assert "- previous order: bm25 > dense\n- current order: dense > bm25\n" in section
    assert ("- the arms' order changed between the keys (Kendall τ -1.000): numbers published "
            "under the previous key do not carry over") in section
    html = decision.to_html(d)
    assert '<h2 id="translation">' in html
    assert '<td class="num">+0.1667</td>' in html and "Kendall τ -1.000" in html


def test_an_unchanged_order_says_each_number_moved_by_its_shift():
    same = dict(TRANSLATION, order_previous=["dense", "bm25"], kendall_tau=1.0,
                order_changed=False)
    cells = decision.translation_cells(same)
    assert cells["summary"] == ("the arms' order is the same under both keys (Kendall τ "
                                "1.000); each arm's number moved by its shift")


def test_a_changed_pool_is_named_as_a_new_pool_version_above_the_tables():
    # TRANSLATION's keys are of pools p-old and p-new
    d = decision.build_decision(report(), primary=P, translation=TRANSLATION)
    section = decision.to_markdown(d).split("## Translation from the previous key\n", 1)[1]
    assert section.startswith("\nThe pool changed (p-old → p-new): the current key is a new "
                              "pool version, not a revision.\n")
    assert ("<p>The pool changed (p-old → p-new): the current key is a new pool version, not "
            "a revision.</p>") in decision.to_html(d)


def test_a_revision_says_how_many_pairs_were_regraded_on_edited_content():
    same_pool = {**TRANSLATION, "previous": {**TRANSLATION["previous"], "pool_version": "p-new"},
                 "regraded": 2}
    assert decision.translation_cells(same_pool)["why"] == (
        "The current key revises the previous one: 2 pairs regraded because what they show "
        "changed (chunk text, intent or rubric); the key record lists each with its grade "
        "before and after (regraded).")
    # same pool and no revision recorded: nothing to say beyond the tables
    assert decision.translation_cells({**same_pool, "regraded": None})["why"] == ""


def test_the_cost_section_gives_judgments_and_annotator_hours_per_grader_and_in_all():
    d = decision.build_decision(report(), primary=P, cost=COST)
    md = decision.to_markdown(d)
    # a person's work in annotator-hours, a model's in calls: 4560 model grades are not
    # 38 hours of anyone's time
    assert "| g | person | 240 | 80 | 45 s | 3.00 h | 1.00 h |" in md
    assert "| m | model | 4560 | 0 | 1 call | 4560 calls | 0 calls |" in md
    assert ("| all | | 4800 | 80 | | 3.00 annotator-hours + 4560 model calls | 1.00 "
            "annotator-hours + 0 model calls |") in md
    assert '<h2 id="cost">Judging cost</h2>' in decision.to_html(d)


def test_report_cost_prices_the_judging_counts_the_grades_stage_recorded():
    manifest = {"graders": {"g": {"rows": 100, "bank_rows": 120, "pairs_missing": 8},
                            "h": {"rows": 30, "pairs_missing": 0}},
                "judging": {"g": {"spent": 125, "pending": 8}, "h": {"spent": 30, "pending": 0}}}
    cost = report_cost(parse_params(BASE), manifest)
    # g: 125 spent at its own 45 s = 1.5625 h, 8 pending = 0.1 h; h: 30 spent at 20 s = 1/6 h
    assert cost["graders"]["g"] == {"worker": "person", "spent": 125, "pending": 8,
                                         "seconds_per_judgment": 45.0,
                                         "spent_hours": pytest.approx(1.5625),
                                         "pending_hours": pytest.approx(0.1)}
    assert cost["graders"]["h"]["spent"] == 30
    # h is a model (kind model): 30 calls, no annotator-hours
    assert cost["spent_hours"] == pytest.approx(1.5625)
    assert (cost["graders"]["h"]["worker"], cost["spent_calls"]) == ("model", 30)
    assert report_cost(parse_params(BASE), {"graders": {}}) is None


def test_a_grades_manifest_without_judging_counts_is_refused_with_the_fix():
    with pytest.raises(InputError) as e:
        report_cost(parse_params(BASE), {"graders": {"g": {"bank_rows": 3}}})
    assert str(e.value) == ("judging: the grades manifest has no `judging` counts (written by "
                            "an older relgrade). Rerun the grades stage: dvc repro -f -s grades")


# --- the report stage with a previous key -----------------------------------------------


def _main():
    return importlib.import_module("relgrade.pipeline.stages.report").run


def _put_key(folder: Path, rows, pool):
    """A key, its qrels and a record holding their sha256, as the key stage writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    key = "".join(json.dumps({"query_id": q, "chunk_id": c, "grade": g},
                             separators=(",", ":")) + "\n" for q, c, g in rows).encode()
    qrels = "".join(f"{q} 0 {c} {g}\n" for q, c, g in rows).encode()
    (folder / "key.jsonl").write_bytes(key)
    (folder / "key.qrels").write_bytes(qrels)
    record = {"key_sha256": hashlib.sha256(key).hexdigest(),
              "qrels_sha256": hashlib.sha256(qrels).hexdigest(), "pool_version": pool,
              "rubric_version": "v1", "round": 1}
    (folder / "record.json").write_text(json.dumps(record))
    return record


def _stage(tmp_path, *, previous=True):
    rep = report()
    rep["measures"] = ["RR@10", *rep["measures"]]
    for arm in rep["arms"]:
        rep["arms"][arm]["RR@10"] = rep["arms"][arm][P]
    (tmp_path / "comparisons.json").write_text(json.dumps(rep))
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "bm25.trec").write_text("q1 Q0 a 1 2.0 bm25\nq1 Q0 b 2 1.0 bm25\n")
    (runs / "dense.trec").write_text("q1 Q0 b 1 2.0 dense\nq1 Q0 a 2 1.0 dense\n")
    current = _put_key(tmp_path / "key", [("q1", "a", 0), ("q1", "b", 2)], "p-new")
    old = _put_key(tmp_path / "previous", [("q1", "a", 1)], "p-old") if previous else None
    (tmp_path / "graded.json").write_text(json.dumps(
        {"graders": {"grader-a": {"bank_rows": 3, "pairs_missing": 0}},
         "judging": {"grader-a": {"spent": 3, "pending": 0}}}))
    paths = {"comparisons": "comparisons.json", "report_md": "out/report.md",
             "report_html": "out/report.html", "decision": "out/decision", "runs": "runs",
             "key": "key/key.jsonl", "qrels": "key/key.qrels", "record": "key/record.json",
             "key_previous": "previous", "grades_manifest": "graded.json"}
    ex = Experiment.from_mapping(
        {"paths": paths, "metrics": {"cutoffs": [10], "primary": "RR@10"},
         "scale": {"grades": [0, 1, 2], "relevant_min": 1},
         "arms": {"bm25": {"kind": "file", "depth": 10, "source": "runs/bm25.trec"},
                  "dense": {"kind": "file", "depth": 10, "source": "runs/dense.trec"}}},
        root=tmp_path)
    return ex, current, old


def test_the_report_stage_scores_every_arm_under_the_previous_and_the_current_key(tmp_path,
                                                                                 capsys):
    ex, current, old = _stage(tmp_path)
    _main()(ex)
    md = (tmp_path / "out/report.md").read_text()
    # previous key: a relevant; bm25 puts a first (RR 1), dense second (0.5).
    # current key: only b relevant; bm25 puts it second (0.5), dense first (1).
    assert "| dense | 0.5000 | 1.0000 | +0.5000 | 2 → 1 |" in md
    assert "| bm25 | 1.0000 | 0.5000 | -0.5000 | 1 → 2 |" in md
    assert f"| previous | `{old['key_sha256']}` | p-old | v1 | 1 | 1 |" in md
    assert f"| current | `{current['key_sha256']}` | p-new | v1 | 1 | 1 |" in md
    assert "Kendall τ -1.000" in md
    # the judging cost: grader-a is not declared in params, so priced as a person's: 3
    # judgments at the default 30 s
    assert "| grader-a | person | 3 | 0 | 30 s | 0.03 h | 0.00 h |" in md
    assert capsys.readouterr().out.endswith(
        "translation from the previous key: the arms' order changed between the keys "
        "(Kendall τ -1.000): numbers published under the previous key do not carry over\n")


def test_without_a_previous_key_the_report_stage_writes_no_translation(tmp_path):
    ex, _, _ = _stage(tmp_path, previous=False)
    (tmp_path / "previous").mkdir()
    (tmp_path / "previous/README.md").write_text("No previous key.\n")
    _main()(ex)
    md = (tmp_path / "out/report.md").read_text()
    assert "## Translation" not in md and "## Judging cost" in md


def test_a_previous_key_edited_by_hand_is_refused_and_nothing_is_written(tmp_path):
    ex, _, _ = _stage(tmp_path)
    (tmp_path / "previous/key.jsonl").write_text('{"query_id":"q1","chunk_id":"a","grade":2}\n')
    with pytest.raises(ProtocolError) as e:
        _main()(ex)
    assert "previous/key.jsonl" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_a_new_arm_is_named_and_left_out_of_the_order_both_keys_judged():
    # bm25 and dense were judged by both keys; fresh joined since (previous number: its
    # pairs never judged)
    arms = TRANSLATION["arms"] + [{"arm": "fresh", "previous": 0.1, "current": 0.9,
                                    "shift": 0.8, "rank_previous": 3, "rank_current": 1}]
    same = dict(TRANSLATION, arms=arms, order_previous=["dense", "bm25", "fresh"],
                order_current=["fresh", "dense", "bm25"], kendall_tau=1.0,
                order_changed=False, arms_new=["fresh"])
    assert decision.translation_cells(same)["summary"] == (
        "the order of the arms both keys judged is the same (Kendall τ 1.000 over the arms "
        "both keys judged); the full order changed through fresh alone, new to the previous "
        "key (its pairs that key lacks count as not relevant under it)")
    kept = dict(same, order_current=["dense", "bm25", "fresh"])
    assert decision.translation_cells(kept)["summary"] == (
        "the arms' order is the same under both keys (Kendall τ 1.000 over the arms both keys "
        "judged; fresh, new to the previous key, left out: its pairs that key lacks count as "
        "not relevant under it); each arm's number moved by its shift")
    moved = dict(same, kendall_tau=-1.0, order_changed=True)
    assert decision.translation_cells(moved)["summary"] == (
        "the order of the arms both keys judged changed (Kendall τ -1.000 over the arms both "
        "keys judged): numbers published under the previous key do not carry over; fresh, new "
        "to the previous key, left out: its pairs that key lacks count as not relevant under "
        "it")
    tied = dict(kept, kendall_tau=None)
    assert decision.translation_cells(tied)["summary"].startswith(
        "the arms' order is the same under both keys (Kendall τ undefined over the arms both "
        "keys judged: fewer than two, or tied under a key; fresh, new")
