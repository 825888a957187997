"""End to end, in a temporary git repository: an arm joins after the key froze.

The tiny experiment's key is frozen from grades made by command graders; then a new arm is
named under ``holes.arms``. ``dvc repro`` stops at the holes' pending work, the commands it
prints grade them, and ``dvc repro`` completes: the key and every old arm's numbers are
byte-identical, and the new arm has its corrected estimate, decision file and report section.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_bank import _grade, _params, _pending_line, _reviewed

pytestmark = [pytest.mark.slow]

# queries whose new-arm list starts with a chunk the pool never held (another topic's answer,
# grade 2 by the graders' truth): their holes
HOLE_QUERIES = ["kw01", "kw02", "kw03", "kw04", "qu01", "qu02", "qu03", "qu04"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ndcg(ranked, grades, k=10):
    """nDCG@k with gains 2^g - 1 and discount 1/log2(rank + 1), by hand."""
    dcg = sum((2 ** grades.get(c, 0) - 1) / math.log2(i + 2) for i, c in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _new_run(root):
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    pooled = set(zip(pool.query_id, pool.chunk_id))
    lexical = {}
    for line in (root / "data/input/runs/lexical.trec").read_text().splitlines():
        q, _, c, *_ = line.split()
        lexical.setdefault(q, []).append(c)
    ranked = {}
    for q, *_ in tiny.TOPICS:
        head = [c for c in lexical[q] if (q, c) in pooled][:4]
        if q in HOLE_QUERIES:
            other = next(c for c in (f"{t}-answer" for t, *_ in tiny.TOPICS)
                         if (q, c) not in pooled and c not in head)
            head = [other, *head]
        ranked[q] = head
    (root / "data/input/runs/fresh.trec").write_text("".join(
        f"{q} Q0 {c} {i + 1} {10 - i} fresh\n" for q, cs in ranked.items()
        for i, c in enumerate(cs)))
    return ranked


def test_a_new_arm_on_a_frozen_key_gets_its_corrected_estimate_and_changes_nothing_else(
        tmp_path):
    root = tmp_path
    _reviewed(root)
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0 and _pending_line(proc), proc.stderr
    _grade(root)
    tiny.run(root, "dvc", "repro")
    record = json.loads((root / "data/key/record.json").read_text())
    kept = sorted(p for d in ("data/key", "metrics/arms", "metrics/decision")
                  for p in (root / d).glob("*") if p.is_file())
    kept.append(root / "metrics/comparisons.json")
    before = {p: _sha(p) for p in kept}

    ranked = _new_run(root)

    def add(params):
        params["holes"] = {"arms": {"fresh": {"kind": "file", "depth": 5,
                                              "source": "data/input/runs/fresh.trec"}},
                           "model_grader": "auditor-b", "human_grader": "grader-a",
                           "human_fraction": 0.5}
        params["paths"].update(holes="metrics/holes.json", holes_work="data/holes")
    _params(root, add)
    tiny.run(root, "relgrade", "pipeline", "render")

    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    line, = [x for x in (proc.stderr + proc.stdout).splitlines() if x.startswith("Pending:")]
    # the model grader owes every hole, people the holes of half the hole queries
    assert "grading: 8 pairs need auditor-b (8 new), 4 need grader-a" in line
    commands = re.findall(r"`(relgrade grade run [^`]+)`", line)
    assert sorted(commands) == [
        "relgrade grade run --grader auditor-b --experiment data/holes",
        "relgrade grade run --grader grader-a --experiment data/holes"]
    for command in commands:
        tiny.run(root, *shlex.split(command), "--no-progress")
    done = tiny.run(root, "dvc", "repro")
    assert "holes nDCG" in done.stdout

    assert {p: _sha(p) for p in kept} == before          # the key and the old arms as they were
    assert json.loads((root / "data/key/record.json").read_text()) == record
    holes = json.loads((root / "metrics/holes.json").read_text())
    assert holes["key_sha256"] == record["key_sha256"]
    fresh = holes["arms"]["fresh"]
    assert (fresh["holes"], fresh["hole_queries"]) == (8, 8)
    assert fresh["hole_rate"] == pytest.approx(8 / 56)     # 8 lists of 5, 4 of 4
    assert len(fresh["sample"]) == 4 and set(fresh["sample"]) <= set(HOLE_QUERIES)
    # both graders grade by the same truth: the model-only value is the new arm's nDCG@10
    # under the truth with every hole graded, by hand; holes as not relevant score lower
    key = pd.read_json(root / "data/key/key.jsonl", lines=True, dtype={"query_id": str})
    graded = {q: dict(zip(g.chunk_id, g.grade)) for q, g in key.groupby("query_id")}
    truth = [_ndcg(cs, graded.get(q, {}) | {c: tiny.truth(c) for c in cs[:1]
                                              if q in HOLE_QUERIES})
             for q, cs in sorted(ranked.items())]
    as_is = [_ndcg(cs, graded.get(q, {})) for q, cs in sorted(ranked.items())]
    est = fresh["estimates"]
    assert est["model-only"]["estimate"] == pytest.approx(sum(truth) / 12, abs=1e-12)
    assert est["key-only"]["estimate"] == pytest.approx(sum(as_is) / 12, abs=1e-12)
    assert est["key-only"]["estimate"] < est["model-only"]["estimate"]
    ppi = est["ppi++"]
    assert ppi["low"] <= sum(truth) / 12 <= ppi["high"]
    assert fresh["level_claim"] == "level claim holds"      # the same bias on both sides
    assert {r["arm_b"] for r in fresh["comparisons"]} == set(tiny.ARMS)

    decision = json.loads((root / "metrics/decision/fresh.json").read_text())
    assert decision["mean"] == ppi["estimate"]
    assert decision["key"] == record["key_sha256"][:12]
    assert decision["level_claim"] == "level claim holds"
    vs, = [r for r in fresh["comparisons"] if r["arm_b"] == "lexical"]   # metrics.baseline
    assert (decision["baseline"], decision["delta"], decision["p_holm"]) == (
        "lexical", vs["estimate"], vs["p_holm"])
    report = (root / "metrics/report.md").read_text()
    assert "## New arm fresh on the frozen key" in report
    params = yaml.safe_load((root / "data/holes/params.yaml").read_text())
    assert params["graders"]["auditor-b"]["role"] == "grader"
