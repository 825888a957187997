"""Published agreement values, computed from the command line.

Fleiss (1971)'s worked layout as Wikipedia's "Fleiss' kappa" article tabulates it (10
subjects, 14 raters, 5 categories): P-bar = 0.378, P_e = 0.213, kappa = 0.210. Linear
weighted kappa on eight pairs, by hand and with scikit-learn.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa

from relgrade.cli import main

# counts[i][j]: raters who put subject i in category j (categories 0..4 here)
FLEISS_TABLE = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
                [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
                [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def _grades_file(tmp_path):
    rows = []
    for i, counts in enumerate(FLEISS_TABLE):
        labels = [g for g, n in enumerate(counts) for _ in range(n)]
        rows += [{"query_id": "q", "chunk_id": f"s{i:02d}", "grader": f"r{k:02d}", "grade": g}
                 for k, g in enumerate(labels)]
    path = tmp_path / "grades.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_fleiss_p_bar_p_e_and_kappa_of_the_published_example_from_the_cli(tmp_path):
    out = CliRunner().invoke(main, ["aggregate", "--grades", str(_grades_file(tmp_path)),
                                    "--scale", "0,1,2,3,4", "--json"])
    assert out.exit_code == 0, out.output
    a = json.loads(out.output)["agreement"]["all"]
    assert round(a["fleiss_p_bar"], 3) == 0.378
    assert round(a["fleiss_p_e"], 3) == 0.213
    assert round(a["fleiss_kappa"], 3) == 0.210
    assert a["fleiss_kappa"] == pytest.approx(fleiss_kappa(np.array(FLEISS_TABLE)))
    # kappa from its parts, Fleiss (1971)
    assert a["fleiss_kappa"] == pytest.approx(
        (a["fleiss_p_bar"] - a["fleiss_p_e"]) / (1 - a["fleiss_p_e"]))


def test_linear_weighted_kappa_from_the_cli_equals_the_hand_value_and_sklearn(tmp_path):
    a, b = [0, 1, 2, 2, 1, 0, 2, 1], [0, 1, 1, 1, 1, 0, 1, 0]
    for name, grades in (("a", a), ("b", b)):
        (tmp_path / f"{name}.qrels").write_text(
            "".join(f"q 0 c{i} {g}\n" for i, g in enumerate(grades)))
    out = CliRunner().invoke(main, ["agreement", str(tmp_path / "a.qrels"),
                                    str(tmp_path / "b.qrels"), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    # observed |i - j| disagreement 4/8, expected 52/64: 1 - (1/2) / (13/16) = 5/13
    assert doc["linear_weighted_kappa"] == pytest.approx(5 / 13)
    assert doc["linear_weighted_kappa"] == pytest.approx(
        cohen_kappa_score(a, b, labels=[0, 1, 2], weights="linear"))
    text = CliRunner().invoke(main, ["agreement", str(tmp_path / "a.qrels"),
                                     str(tmp_path / "b.qrels")]).output
    assert "linear_weighted_kappa  0.3846" in text
