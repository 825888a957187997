"""`relgrade aggregate --per-pair` / `--json`: each pair's majority share or Dawid-Skene posteriors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main

# c0: 2, 2, 0 -> majority 2 with share 2/3; c1: 0, 0, 2 -> 0, 2/3; c2: 1, 1, 1 -> 1, 3/3;
# c3: 0, 1, 2 -> three-way tie, median 1, share 1/3.
GRADES = {"c0": (2, 2, 0), "c1": (0, 0, 2), "c2": (1, 1, 1), "c3": (0, 1, 2)}


def _file(tmp_path):
    rows = [{"query_id": "q", "chunk_id": c, "grader": f"r{k}", "grade": g}
            for c, gs in GRADES.items() for k, g in enumerate(gs)]
    path = tmp_path / "grades.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, pd.DataFrame(rows)


def test_aggregate_prints_each_pairs_majority_share(tmp_path):
    path, _ = _file(tmp_path)
    out = CliRunner().invoke(main, ["aggregate", "--grades", str(path), "--per-pair"])
    assert out.exit_code == 0, out.output
    assert ("query_id  chunk_id  grade  votes   share\n"
            "q         c0            2      3  0.6667\n"
            "q         c1            0      3  0.6667\n"
            "q         c2            1      3  1.0000\n"
            "q         c3            1      3  0.3333\n") in out.output
    doc = json.loads(CliRunner().invoke(main, ["aggregate", "--grades", str(path),
                                               "--json"]).output)
    assert [(s["chunk_id"], s["grade"], s["share"]) for s in doc["shares"]] == [
        ("c0", 2, pytest.approx(2 / 3)), ("c1", 0, pytest.approx(2 / 3)),
        ("c2", 1, 1.0), ("c3", 1, pytest.approx(1 / 3))]


def test_aggregate_dawid_skene_posteriors_equal_crowdkits(tmp_path):
    crowdkit = pytest.importorskip("crowdkit.aggregation")
    path, table = _file(tmp_path)
    doc = json.loads(CliRunner().invoke(main, ["aggregate", "--grades", str(path), "--method",
                                               "dawid-skene", "--json"]).output)
    ds = doc["dawid_skene"]
    data = table.rename(columns={"chunk_id": "task", "grader": "worker", "grade": "label"})[
        ["task", "worker", "label"]]
    ref = crowdkit.DawidSkene(n_iter=ds["iterations"], tol=-np.inf).fit(data)
    probas = ref.probas_.sort_index().reindex(columns=[0, 1, 2], fill_value=0.0)
    ours = np.array([[p["posterior"][g] for g in ("0", "1", "2")] for p in ds["posteriors"]])
    np.testing.assert_allclose(ours, probas.to_numpy(), atol=1e-9)
    assert [p["grade"] for p in ds["posteriors"]] == [int(np.argmax(r)) for r in ours]
    text = CliRunner().invoke(main, ["aggregate", "--grades", str(path), "--method",
                                     "dawid-skene", "--per-pair"]).output
    assert "query_id  chunk_id  grade    P(0)    P(1)    P(2)\n" in text


def test_aggregate_json_shares_equal_crowdkits_majority_vote_probabilities(tmp_path):
    # crowd-kit's MajorityVote.fit_predict_proba gives each grade's share of a pair's votes;
    # ours is the share of the grade recorded (on c3's three-way tie: the median, 1, at 1/3)
    crowdkit = pytest.importorskip("crowdkit.aggregation")
    path, table = _file(tmp_path)
    doc = json.loads(CliRunner().invoke(main, ["aggregate", "--grades", str(path), "--json",
                                               "--per-pair"]).output)
    data = table.rename(columns={"chunk_id": "task", "grader": "worker", "grade": "label"})[
        ["task", "worker", "label"]]
    probas = crowdkit.MajorityVote().fit_predict_proba(data).sort_index()
    probas = probas.reindex(columns=[0, 1, 2], fill_value=0.0).fillna(0.0)
    assert [s["share"] for s in doc["shares"]] == pytest.approx(
        [probas.at[s["chunk_id"], s["grade"]] for s in doc["shares"]])
    assert [s["votes"] for s in doc["shares"]] == [3, 3, 3, 3]
