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
        "not JSON": f"{source}:2: not valid JSON (found Expecting value)",
        "no comparisons": f"{source}: comparisons: comparison report lacks a section. "
                          "rerun the compare stage (dvc repro compare)",
        "primary not compared": f"{source}: RR@3: primary measure not compared. set "
                                "metrics.primary to one of nDCG(dcg='exp-log2')@5, R@10"}[case]
    assert not (tmp_path / "out").exists()
