"""End to end: an experiment with a sampled tail (`pool.tail_sample: 2`) reaches its
comparisons and its report (`dvc repro` in a temporary git repository).

The tiny experiment's pool takes ranks 1..5 of each arm whole and draws 2 chunks per query
from ranks 6..8; the metrics stage writes xinfAP@k and infNDCG@k from the pool table's
inclusion probabilities, and the compare stage compares them like the other measures.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def tailed(tmp_path_factory, packets_built):
    # the tiny experiment with intents reviewed and `dvc repro packets` run (shared, see
    # tests/conftest.py); the tail's params and pipeline make `dvc repro packets` run the
    # pool again and every stage after it, as a new experiment would
    root = tiny.copy_repo(packets_built, tmp_path_factory.mktemp("tail"))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["pool"]["tail_sample"] = 2
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "relgrade", "pipeline", "render")  # the tail mode's dvc.yaml
    tiny.run(root, "dvc", "repro", "packets")
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    audit = {json.loads(line)["query_id"]
             for line in (root / "data/audit/audit.jsonl").read_text().splitlines()}
    pairs = set(zip(pool.query_id, pool.chunk_id))
    tiny.write_grades(root, "grader-a", tiny.grade_rows(pairs))
    tiny.write_grades(root, "auditor-b", tiny.grade_rows({p for p in pairs if p[0] in audit}))
    proc = tiny.run(root, "dvc", "repro")
    return root, pool, proc


def test_the_inferred_measures_reach_the_comparisons_and_the_report(tailed):
    root, pool, proc = tailed
    assert (pool["inclusion_prob"] < 1).any()  # a tail was drawn
    report = json.loads((root / "metrics/comparisons.json").read_text())
    inferred = [m for m in report["measures"] if m.startswith(("xinfAP", "infNDCG"))]
    assert inferred == [f"{name}@{k}" for k in (3, 5, 10)
                        for name in ("infNDCG(dcg='exp-log2')", "xinfAP")]
    # every arm against the baseline lexical, on every measure
    assert {(c["arm_a"], c["measure"]) for c in report["comparisons"]} == {
        (arm, m) for arm in ("dense", "mixed") for m in report["measures"]}
    metrics = json.loads((root / "metrics/arms/dense.json").read_text())
    (c,) = [c for c in report["comparisons"]
            if (c["arm_a"], c["measure"]) == ("dense", "xinfAP@10")]
    assert c["mean_a"] == pytest.approx(metrics["xinfAP@10"])
    assert c["verdict"] in proc.stdout
    assert report["pool_bias"]["not_checked"]["measures"] == inferred
    assert "| dense | xinfAP@10 | " in (root / "metrics/report.md").read_text()
