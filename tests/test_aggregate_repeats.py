"""Repeated grades by one rater on one pair: refused unless declared (``--repeats allowed``),
and Dawid & Skene's own 1979 data reproducing the paper's printed estimates.

Dawid & Skene (1979), "Maximum likelihood estimation of observer error-rates using the EM
algorithm", Applied Statistics 28(1), Table 1: 45 patients, each rated on a 1-4 scale by five
observers (anaesthetists), observer 1 three times. Their Table 2 prints the estimated class
priors 0.40, 0.42, 0.11, 0.07; Table 3 observer 1's error rates; Table 4 the most probable
class of each patient (patients 1-6: 1, 4, 2, 2, 2, 2).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.raters.aggregate import check_ratings, dawid_skene, majority
from relgrade.raters.report import aggregate_raters

# Table 1, one line per patient: observer 1's three ratings, then observers 2, 3, 4 and 5.
TABLE_1 = """\
1 1 1 1 1 1 1
3 3 3 4 3 3 4
1 1 2 2 1 2 2
2 2 2 3 1 2 1
2 2 2 3 2 2 2
2 2 2 3 3 2 2
1 2 2 2 1 1 1
3 3 3 3 4 3 3
2 2 2 2 2 2 3
2 3 2 2 2 2 3
4 4 4 4 4 4 4
2 2 2 3 3 4 3
1 1 1 1 1 1 1
2 2 2 3 2 1 2
1 2 1 1 1 1 1
1 1 1 2 1 1 1
1 1 1 1 1 1 1
1 1 1 1 1 1 1
2 2 2 2 2 2 1
2 2 2 1 3 2 2
2 2 2 2 2 2 2
2 2 2 2 2 2 1
2 2 2 3 2 2 2
2 2 1 2 2 2 2
1 1 1 1 1 1 1
1 1 1 1 1 1 1
2 3 2 2 2 2 2
1 1 1 1 1 1 1
1 1 1 1 1 1 1
1 1 2 1 1 2 1
1 1 1 1 1 1 1
3 3 3 3 2 3 3
1 1 1 1 1 1 1
2 2 2 2 2 2 2
2 2 2 3 2 3 2
4 3 3 4 3 4 3
2 2 1 2 2 3 2
2 3 2 3 2 3 3
3 3 3 3 4 3 2
1 1 1 1 1 1 1
1 1 1 1 1 1 1
1 2 1 2 1 1 1
2 3 2 2 2 2 2
1 2 1 1 1 1 1
2 2 2 2 2 2 2
"""


def patients() -> pd.DataFrame:
    out = []
    for i, line in enumerate(TABLE_1.splitlines(), start=1):
        r = [int(x) for x in line.split()]
        out += [(f"p{i:02d}", "record", "observer1", g) for g in r[:3]]
        out += [(f"p{i:02d}", "record", f"observer{j}", g) for j, g in enumerate(r[3:], 2)]
    return pd.DataFrame(out, columns=["query_id", "chunk_id", "grader", "grade"])


def test_dawid_skene_on_the_1979_patients_reproduces_the_printed_estimates():
    grades = patients()
    assert len(grades) == 45 * 7
    ds = dawid_skene(grades, scale=[1, 2, 3, 4], repeats=True)
    assert ds.converged
    # Table 2: the class priors, to the paper's two decimals
    assert ds.priors.round(2).tolist() == [0.40, 0.42, 0.11, 0.07]
    # Table 3: observer 1's error rates (rows: true class, columns: the rating given)
    assert ds.confusion.loc["observer1"].round(2).to_numpy().tolist() == [
        [0.89, 0.11, 0.00, 0.00],
        [0.07, 0.88, 0.05, 0.00],
        [0.00, 0.34, 0.66, 0.00],
        [0.00, 0.00, 0.56, 0.44]]
    # Table 4: patients 1-6 are put in classes 1, 4, 2, 2, 2, 2 with probability 1.00
    assert ds.labels["grade"].head(6).tolist() == [1, 4, 2, 2, 2, 2]
    assert ds.labels["posterior"].head(6).round(2).tolist() == [1.0] * 6


def test_repeats_are_refused_unless_declared_naming_the_rater_and_the_pair():
    grades = patients()
    with pytest.raises(InputError, match=r"observer1: pair \(p01, record\): a grader has two "
                                         r"grades for one pair"):
        check_ratings(grades)
    with pytest.raises(InputError, match="a grader has two grades for one pair"):
        dawid_skene(grades, scale=[1, 2, 3, 4])
    with pytest.raises(InputError, match="a grader has two grades for one pair"):
        aggregate_raters(grades, scale=[1, 2, 3, 4])


def test_with_repeats_a_majority_counts_every_label():
    # r1 says 2 twice and r2 says 1 once: three votes, 2 holds two of them
    grades = pd.DataFrame({"query_id": ["q"] * 3, "chunk_id": ["a"] * 3,
                           "grader": ["r1", "r1", "r2"], "grade": [2, 2, 1]})
    out = majority(grades, scale=[0, 1, 2], repeats=True)
    assert out[["grade", "votes"]].values.tolist() == [[2, 3]]
    assert out["agreement"].tolist() == [2 / 3]


def test_agreement_with_repeats_takes_each_repeat_as_one_more_rating():
    grades = pd.DataFrame({"query_id": ["q"] * 6, "chunk_id": ["a", "a", "a", "b", "b", "b"],
                           "grader": ["r1", "r1", "r2"] * 2, "grade": [2, 2, 1, 0, 1, 0]})
    report = aggregate_raters(grades, scale=[0, 1, 2], repeats=True).to_dict()
    renamed = grades.assign(grader=["r1", "r1#2", "r2"] * 2)
    explicit = aggregate_raters(renamed, scale=[0, 1, 2]).to_dict()
    assert report["agreement"] == explicit["agreement"]
    assert report["agreement"]["all"]["raters"] == 3
    # Fleiss' P-bar by hand: pair a votes (0, 1, 2) -> (0 + 0 + 2) / 6; b (2, 1, 0) -> 2 / 6
    assert report["agreement"]["all"]["fleiss_p_bar"] == pytest.approx(1 / 3)


def _jsonl(path, grades):
    path.write_text("".join(json.dumps(r) + "\n" for r in grades.to_dict("records")))
    return path


def test_aggregate_cli_refuses_repeats_by_default_and_counts_them_when_allowed(tmp_path):
    path = _jsonl(tmp_path / "patients.jsonl", patients())
    res = CliRunner().invoke(main, ["aggregate", "--grades", str(path), "--scale", "1,2,3,4",
                                    "--method", "dawid-skene"])
    assert res.exit_code == 1
    assert (f"Error: {path}:2: observer1: pair (p01, record): one grader grades one (query, "
            "chunk) pair twice (found lines 1 and 2). Keep one grade per pair and rater, or "
            "pass --repeats allowed to count each repeated grade") in res.output
    res = CliRunner().invoke(main, ["aggregate", "--grades", str(path), "--scale", "1,2,3,4",
                                    "--method", "dawid-skene", "--repeats", "allowed",
                                    "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    priors = doc["dawid_skene"]["priors"]
    assert [round(priors[g], 2) for g in "1234"] == [0.40, 0.42, 0.11, 0.07]
    assert doc["raters"][0]["grader"] == "observer1" and doc["raters"][0]["grades"] == 135
