"""Stage `report`: the decision report and the per-arm dvc metrics from comparisons.json."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from tests.test_decision import CAVEAT, DEEP, P, report

ROOT = Path(__file__).resolve().parents[1]


def _main():
    return importlib.import_module("relgrade.pipeline.stages.report").run


def _experiment(tmp_path, comparisons: str, primary=P):
    (tmp_path / "comparisons.json").write_text(comparisons)
    paths = {"comparisons": "comparisons.json", "report_md": "out/report.md",
             "report_html": "out/report.html", "decision": "out/decision"}
    return Experiment.from_mapping({"paths": paths, "metrics": {"cutoffs": [5, 10], "primary": primary}},
                                   root=tmp_path)


def test_stage_writes_both_reports_and_one_metrics_file_per_arm(tmp_path, capsys):
    _main()(_experiment(tmp_path, json.dumps(report()), primary=DEEP))
    out = tmp_path / "out"
    assert sorted(p.name for p in (out / "decision").iterdir()) == ["bm25.json", "dense.json"]
    # bm25 − dense on R@10 is +0.05 in the report: dense − bm25 = -0.05
    assert json.loads((out / "decision" / "dense.json").read_text()) == {
        "measure": DEEP, "mean": 0.55, "low": 0.45, "high": 0.65,
        "pool_version": "p-000000000001", "key": "abababababab", "judged": 0.551,
        "baseline": "bm25", "delta": -0.05, "p_holm": 0.2}
    md = (out / "report.md").read_text()
    assert f"- no detectable difference on R@10; {CAVEAT}\n" in md
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 2
    assert capsys.readouterr().out == f"no detectable difference on R@10; {CAVEAT}\n"


@pytest.mark.parametrize("case", ["not JSON", "no comparisons", "primary not compared"])
def test_bad_input_names_the_problem_and_writes_nothing(tmp_path, case):
    text = {"not JSON": "{\n  \"arms\": \n",
            "no comparisons": json.dumps({k: v for k, v in report().items()
                                          if k != "comparisons"}),
            "primary not compared": json.dumps(report())}[case]
    ex = _experiment(tmp_path, text, primary="RR@3" if case == "primary not compared" else P)
    with pytest.raises(InputError) as e:
        _main()(ex)
    source = str(tmp_path / "comparisons.json")
    assert str(e.value) == {
        "not JSON": f"{source}:2: not valid JSON: expecting value at column 11",
        "no comparisons": f"{source}: comparisons: comparison report lacks a section. "
                          "rerun the compare stage (dvc repro compare)",
        "primary not compared": f"{source}: RR@3: primary measure not compared. set "
                                "metrics.primary to one of nDCG(dcg='exp-log2')@5, R@10"}[case]
    assert not (tmp_path / "out").exists()


def _ranked_report(measure):
    # three arms: bm25 surely best, dense and hybrid tied below it
    r = report()
    r["rank_sets"] = {
        "measure": measure, "method": "max-t", "queries": 20, "level": 0.95,
        "n_resamples": 2000, "critical": 2.5, "seed": 7, "stream": "rank-sets",
        "arms": {"bm25": {"estimate": 0.6, "rank_low": 1, "rank_high": 1},
                 "dense": {"estimate": 0.55, "rank_low": 2, "rank_high": 3},
                 "hybrid": {"estimate": 0.5, "rank_low": 2, "rank_high": 3}},
        "tied_groups": [["bm25"], ["dense", "hybrid"]]}
    return r


def test_each_arm_file_carries_its_rank_set_and_the_report_names_the_tied_groups(tmp_path):
    _main()(_experiment(tmp_path, json.dumps(_ranked_report(DEEP)), primary=DEEP))
    out = tmp_path / "out"
    dense = json.loads((out / "decision" / "dense.json").read_text())
    assert (dense["rank_low"], dense["rank_high"]) == (2, 3)
    bm25 = json.loads((out / "decision" / "bm25.json").read_text())
    assert (bm25["rank_low"], bm25["rank_high"]) == (1, 1)
    md = (out / "report.md").read_text()
    assert "## Rank-sets\n" in md
    assert ("Each arm's rank on R@10 (1 the best) with simultaneous 95% coverage: with that "
            "probability every arm's true rank lies in its set at once. From the frozen key's "
            "per-query means over 20 queries, 2000 bootstrap resamples (seed 7, stream "
            "\"rank-sets\").") in md
    assert "| dense | 0.5500 | 2–3 |\n" in md and "| bm25 | 0.6000 | 1 |\n" in md
    assert "Tied groups, best first:\n\n1. bm25\n2. dense, hybrid\n" in md
    html = (out / "report.html").read_text()
    assert '<h2 id="rank-sets">Rank-sets</h2>' in html and "<li>dense, hybrid</li>" in html


def test_rank_sets_of_another_measure_are_left_out(tmp_path):
    _main()(_experiment(tmp_path, json.dumps(_ranked_report(P)), primary=DEEP))
    out = tmp_path / "out"
    assert "rank_low" not in json.loads((out / "decision" / "dense.json").read_text())
    assert "## Rank-sets" not in (out / "report.md").read_text()


def test_in_ppi_mode_the_rank_sets_are_the_ppi_stage_ones():
    stage = importlib.import_module("relgrade.pipeline.stages.report")
    r = _ranked_report(DEEP)
    ppi = {"rank_sets": {DEEP: {"measure": DEEP, "human_queries": 6}}}
    assert stage._rank_sets(r, ppi, DEEP) == {"measure": DEEP, "human_queries": 6}
    assert stage._rank_sets(r, {"rank_sets": {}}, DEEP) is None
    assert stage._rank_sets(r, None, DEEP) is r["rank_sets"]
