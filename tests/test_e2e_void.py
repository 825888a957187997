"""End to end: the void rule cannot be bypassed on the real pipeline (`dvc repro` in a
temporary git repository).

After a key was frozen and used for metrics: a deleted ledger is refused by the key stage
and by a metrics-only run; a key and record swapped by hand give no metrics; a post-hoc key
is written beside the frozen one with its own metrics, the frozen files untouched; a round-2
grade file copied from round 1 is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_dvc import _pairs

pytestmark = [pytest.mark.slow]

FROZEN = ("data/key/key.jsonl", "data/key/key.qrels", "data/key/record.json",
          *(f"metrics/arms/{arm}.json" for arm in tiny.ARMS))


@pytest.fixture(scope="module")
def frozen(tmp_path_factory, truth_frozen_built):
    root = tiny.copy_repo(truth_frozen_built, tmp_path_factory.mktemp("void"))
    return root, _pairs(root)[1]


def _snapshot(root):
    return {name: (root / name).read_bytes() for name in FROZEN}


def _change_a_grade(root, audit_pairs):
    path = root / "data/grades/grader-a/round-1.jsonl"
    before = path.read_bytes()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    changed = next(r for r in rows if (r["query_id"], r["chunk_id"]) not in audit_pairs
                   and r["grade"] == 0)
    changed["grade"] = 1
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, before


def test_a_deleted_ledger_is_refused_by_the_key_stage_and_a_metrics_only_run(frozen):
    root, audit_pairs = frozen
    before, ledger = _snapshot(root), (root / "data/ledger.jsonl").read_bytes()
    grades, original = _change_a_grade(root, audit_pairs)
    (root / "data/ledger.jsonl").unlink()
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    assert "Error: ledger: data/ledger.jsonl has no entry for key" in proc.stderr
    assert "git checkout -- data/ledger.jsonl" in proc.stderr
    assert _snapshot(root) == before
    grades.write_bytes(original)
    proc = tiny.run(root, "dvc", "repro", "-f", "-s", "metrics@lexical", check=False)
    assert proc.returncode != 0 and "Error: ledger: " in proc.stderr
    assert _snapshot(root) == before
    (root / "data/ledger.jsonl").write_bytes(ledger)
    tiny.run(root, "dvc", "repro")  # restored: the same key again, only its frozen_at is new
    after = _snapshot(root)
    assert {k: v for k, v in after.items() if not k.endswith("record.json")} == \
        {k: v for k, v in before.items() if not k.endswith("record.json")}
    assert (root / "data/ledger.jsonl").read_bytes() == ledger


def test_a_key_and_record_swapped_by_hand_give_no_metrics(frozen):
    root, _ = frozen
    before = _snapshot(root)
    rows = [json.loads(line) for line in (root / "data/key/key.jsonl").read_text().splitlines()]
    rows[0]["grade"] = 2 if rows[0]["grade"] != 2 else 1
    key = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
    qrels = "".join(f"{r['query_id']} 0 {r['chunk_id']} {r['grade']}\n" for r in rows).encode()
    record = json.loads(before["data/key/record.json"])
    record |= {"key_sha256": hashlib.sha256(key).hexdigest(),
               "qrels_sha256": hashlib.sha256(qrels).hexdigest()}
    (root / "data/key/key.jsonl").write_bytes(key)
    (root / "data/key/key.qrels").write_bytes(qrels)
    (root / "data/key/record.json").write_text(json.dumps(record))
    proc = tiny.run(root, "dvc", "repro", "-f", "-s", "metrics@lexical", check=False)
    assert proc.returncode != 0
    old = json.loads(before["data/key/record.json"])["key_sha256"]
    assert f"Error: void: key {old} was already used for metrics" in proc.stderr
    assert (root / "metrics/arms/lexical.json").read_bytes() == before["metrics/arms/lexical.json"]
    for name in ("data/key/key.jsonl", "data/key/key.qrels", "data/key/record.json"):
        (root / name).write_bytes(before[name])


def test_a_post_hoc_key_stands_beside_the_frozen_one_with_both_sets_of_metrics(frozen):
    root, audit_pairs = frozen
    before = _snapshot(root)
    grades, original = _change_a_grade(root, audit_pairs)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grading"]["post_hoc"] = True
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = tiny.run(root, "dvc", "repro")
    assert "(post-hoc) beside the frozen key, in data/key-post-hoc" in proc.stdout
    assert _snapshot(root) == before  # the frozen key, its metrics and the decision stay
    record = json.loads((root / "data/key-post-hoc/record.json").read_text())
    assert record["post_hoc"] is True
    frozen_sha = json.loads(before["data/key/record.json"])["key_sha256"]
    assert record["key_sha256"] != frozen_sha
    for arm in tiny.ARMS:
        m = json.loads((root / f"metrics/post-hoc/{arm}/metrics.json").read_text())
        assert (m["arm"], m["key_sha256"], m["post_hoc"]) == (arm, record["key_sha256"], True)
        assert (root / f"metrics/post-hoc/{arm}/per_query.parquet").exists()
    ledger = [json.loads(line) for line in (root / "data/ledger.jsonl").read_text().splitlines()]
    assert [e["key_sha256"] for e in ledger] == [frozen_sha, record["key_sha256"]]
    status = tiny.run(root, "relgrade", "status").stdout
    assert f"key: a post-hoc key {record['key_sha256']} stands beside the frozen one" in status
    assert "up to date" in tiny.run(root, "dvc", "repro").stdout.lower()
    params["grading"]["post_hoc"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    grades.write_bytes(original)


def test_a_round_two_file_copied_from_round_one_is_refused(frozen):
    root, _ = frozen
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grading"]["round"] = 2
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for grader in ("grader-a", "auditor-b"):
        folder = root / "data/grades" / grader
        for suffix in ("jsonl", "bank.jsonl"):  # the grades and what they were made on
            shutil.copy(folder / f"round-1.{suffix}", folder / f"round-2.{suffix}")
    before = _snapshot(root)
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    assert ("Error: round 2: data/grades/auditor-b/round-2.jsonl (auditor-b) is byte-identical "
            "to data/grades/auditor-b/round-1.jsonl") in proc.stderr
    assert _snapshot(root) == before
