"""Traffic-weighted means beside unweighted ones: per-arm metrics, comparisons, decision, bundle."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.evaluation import decision, weighting
from relgrade.evaluation.compare import compare_arms
from relgrade.evaluation.settings import Settings
from relgrade.protocol.publish import bundle_files

#: Three queries: q1 a head query standing for 6 issued queries, q2 and q3 tail ones (1 each).
WEIGHTS = {"q1": 6.0, "q2": 1.0, "q3": 1.0}


def per_query():
    # arm a: 0.5, 1.0, 0.0; arm b: 0.25, 0.5, 1.0 (one measure).
    rows = [("a", "q1", 0.5), ("a", "q2", 1.0), ("a", "q3", 0.0),
            ("b", "q1", 0.25), ("b", "q2", 0.5), ("b", "q3", 1.0)]
    return pd.DataFrame([{"arm": a, "query_id": q, "group": "g", "measure": "RR@10",
                          "value": v} for a, q, v in rows])


def settings():
    return Settings(seed=3, n_resamples=1000, n_permutations=1000, level=0.9, method="percentile",
                    alpha=0.05, power=0.8, min_relative_change=0.02, baseline="a",
                    pairs="baseline")


def test_weighted_means_by_hand():
    t = per_query()
    a = t[t["arm"] == "a"]
    out = weighting.weighted_means(a, WEIGHTS)
    # (6 * 0.5 + 1 * 1.0 + 1 * 0.0) / 8 = 4 / 8 = 0.5; unweighted it would be 1.5 / 3 = 0.5 too,
    # so take arm b: (6 * 0.25 + 0.5 + 1.0) / 8 = 3 / 8 against 1.75 / 3 unweighted.
    assert out["means"] == {"RR@10": 0.5} and out["weight_sum"] == 8.0
    b = weighting.weighted_means(t[t["arm"] == "b"], WEIGHTS)
    assert b["means"]["RR@10"] == pytest.approx(3 / 8)
    assert b["note"] == weighting.NOTE


def test_weighted_means_with_equal_weights_are_the_plain_means():
    t = per_query()
    b = t[t["arm"] == "b"]
    assert weighting.weighted_means(b, {"q1": 2.0, "q2": 2.0, "q3": 2.0})["means"]["RR@10"] \
        == pytest.approx(b["value"].mean())


def test_a_query_without_weight_or_with_a_bad_one_is_refused():
    t = per_query()
    with pytest.raises(InputError, match="a query has no traffic weight"):
        weighting.weighted_means(t, {"q1": 1.0, "q2": 1.0})
    with pytest.raises(InputError, match="not a positive finite number"):
        weighting.weighted_means(t, {"q1": 1.0, "q2": 0.0, "q3": 1.0})


def test_weighted_comparison_reports_unweighted_means_beside_and_says_what_is_unweighted():
    result = compare_arms(per_query(), settings=settings(), weights=WEIGHTS)
    report = json.loads(result.to_json())
    assert report["weighted"] is True
    assert "t test and d_z are unweighted" in report["weighting"]
    b = report["arms"]["b"]["RR@10"]
    assert b["estimate"] == pytest.approx(3 / 8)
    assert b["unweighted_mean"] == pytest.approx(1.75 / 3)
    (pair,) = report["comparisons"]
    assert pair["delta"] == pytest.approx(3 / 8 - 0.5)
    assert any("t test and d_z are unweighted" in n for n in pair["notes"])
    # Unweighted: the report is as before, with no weighting fields.
    plain = json.loads(compare_arms(per_query(), settings=settings()).to_json())
    assert "weighted" not in plain and "unweighted_mean" not in plain["arms"]["b"]["RR@10"]
    assert plain["arms"]["b"]["RR@10"]["estimate"] == pytest.approx(1.75 / 3)


def test_decision_rows_and_report_carry_the_weighting():
    report = json.loads(compare_arms(per_query(), settings=settings(),
                                     weights=WEIGHTS).to_json())
    rows = decision.arm_summaries(report, primary="RR@10")
    assert rows["b"]["mean"] == pytest.approx(3 / 8)
    assert rows["b"]["weighted"] is True
    assert rows["b"]["unweighted_mean"] == pytest.approx(1.75 / 3)
    d = decision.build_decision(report, primary="RR@10")
    assert dict(d.header)["query weights"] == report["weighting"]
    md = decision.to_markdown(d)
    assert "0.3750 (unweighted 0.5833)" in md
    plain = json.loads(compare_arms(per_query(), settings=settings()).to_json())
    assert "weighted" not in decision.arm_summaries(plain, primary="RR@10")["b"]


def test_bundle_readme_explains_a_traffic_weighted_block():
    key = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["c1"], "grade": [1]})
    record = {"key_sha256": "a" * 64, "pool_version": "p-1"}
    metrics = {"a": {"arm": "a", "key_sha256": "a" * 64, "RR@10": 0.5,
                     "traffic_weighted": weighting.weighted_means(
                         per_query()[lambda t: t["arm"] == "a"], WEIGHTS)}}
    files = bundle_files(key, record, metrics)
    assert "traffic_weighted" in files["README.txt"].decode()
    assert json.loads(files["metrics.json"])["a"]["traffic_weighted"]["means"] == {"RR@10": 0.5}
    plain = bundle_files(key, record, {"a": {"arm": "a", "key_sha256": "a" * 64}})
    assert "traffic_weighted" not in plain["README.txt"].decode()


def test_metrics_stage_writes_weighted_means_beside_the_unweighted_ones(tmp_path, monkeypatch):
    from relgrade.experiment.files import Experiment
    from tests.test_metrics import _stage_experiment, _stage_main

    params, _ = _stage_experiment(tmp_path)
    # q1: the run ranks b (grade 0) then a (grade 2): RR@10 = 1/2; q2 is missing: 0.
    # Weights 3 and 1: (3 * 0.5 + 1 * 0) / 4 = 0.375; unweighted (0.5 + 0) / 2 = 0.25.
    pd.DataFrame({"query_id": ["q1", "q2"], "query": ["x", "y"],
                  "group": ["keyword", "question"], "weight": [3.0, 1.0]}).to_parquet(
        params["paths"]["queries"])
    params["metrics"]["weighted"] = True
    monkeypatch.setattr("sys.argv", ["stages/metrics.py", "bm25"])
    _stage_main()(Experiment.from_mapping(params))
    out = json.loads((tmp_path / "m" / "bm25.json").read_text())
    assert out["RR@10"] == pytest.approx(0.25)
    assert out["traffic_weighted"]["means"]["RR@10"] == pytest.approx(0.375)
    assert out["traffic_weighted"]["weight_sum"] == 4.0
    params["metrics"]["weighted"] = False
    _stage_main()(Experiment.from_mapping(params))
    assert "traffic_weighted" not in json.loads((tmp_path / "m" / "bm25.json").read_text())
