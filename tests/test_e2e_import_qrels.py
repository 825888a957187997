"""End to end: a human grader's grades imported from TREC qrels reach the frozen key, and the
judgment bank records the file they came from."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


def test_a_human_graders_qrels_reach_the_key_and_the_bank_names_the_file(tmp_path_factory,
                                                                         packets_built):
    # the tiny experiment with intents reviewed and `dvc repro packets` run (shared, see
    # tests/conftest.py): of the stages up to the packets only the packets read the graders,
    # so `dvc repro packets` makes them again for the human grader
    root = tiny.copy_repo(packets_built, tmp_path_factory.mktemp("qrels"))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["grader-a"] = {"role": "grader", "kind": "human", "family": "people",
                                     "person": "an assessor of an earlier campaign"}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "dvc", "repro", "packets")
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    pairs = sorted(zip(pool.query_id, pool.chunk_id))
    audit = {json.loads(x)["query_id"]
             for x in (root / "data/audit/audit.jsonl").read_text().splitlines()}
    # the grader's judgments as TREC qrels (no reasons), the auditor's as grade rows
    text = "".join(f"{q} 0 {c} {tiny.truth(c)}\n" for q, c in pairs)
    (root / "judged.qrels").write_text(text)
    said = tiny.run(root, "relgrade", "grade", "import", "judged.qrels", "--grader", "grader-a")
    assert f"imported {len(pairs)} grades for grader-a (round 1)" in said.stdout
    tiny.write_grades(root, "auditor-b", tiny.grade_rows({p for p in pairs if p[0] in audit}))
    tiny.run(root, "dvc", "repro")
    key = {(r["query_id"], r["chunk_id"]): r["grade"] for r in
           map(json.loads, (root / "data/key/key.jsonl").read_text().splitlines())}
    # every pool pair of a query with something relevant, graded as the qrels say
    assert key and all(key[p] == tiny.truth(p[1]) for p in key)
    assert set(key) == {p for p in pairs if any(tiny.truth(c) for q, c in pairs if q == p[0])}
    rows = [json.loads(x) for x in
            (root / "data/grades/grader-a/round-1.jsonl").read_text().splitlines()]
    assert {r["reason"] for r in rows} == {""}  # qrels carry no reasons
    bank = [json.loads(x) for x in
            (root / "data/grades/grader-a/round-1.bank.jsonl").read_text().splitlines()]
    origin = {"file": "judged.qrels", "sha256": hashlib.sha256(text.encode()).hexdigest(),
              "format": "qrels"}
    assert len(bank) == len(pairs) and all(b["imported_from"] == origin for b in bank)
    manifest = json.loads((root / "data/graded/manifest.json").read_text())
    assert manifest["graders"]["grader-a"]["kind"] == "human"
    assert manifest["graders"]["grader-a"]["pairs_missing"] == 0
