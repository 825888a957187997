"""End to end, with `dvc repro`: the audit lock across pool changes and rounds, and the gate
on a complete audit."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_dvc import _setup

pytestmark = [pytest.mark.slow]


def _set(root, section, key, value):
    params = yaml.safe_load((root / "params.yaml").read_text())
    params[section][key] = value
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_a_deeper_pool_keeps_the_locked_audit_and_a_new_round_redraws(tmp_path,
                                                                     packets_built):
    _setup(tmp_path, packets_built)
    lock_path, audit_path = tmp_path / "data/audit/lock.json", tmp_path / "data/audit/audit.jsonl"
    lock, table = lock_path.read_bytes(), audit_path.read_bytes()
    pool_before = json.loads((tmp_path / "data/pool/manifest.json").read_text())["pool_version"]
    assert json.loads(lock)["pool_version"] == pool_before

    _set(tmp_path, "pool", "depth", 8)
    proc = tiny.run(tmp_path, "dvc", "repro", "audit")
    pool_after = json.loads((tmp_path / "data/pool/manifest.json").read_text())["pool_version"]
    assert pool_after != pool_before                     # the pool did change
    assert "locked (from pool " + pool_before in proc.stdout
    assert lock_path.read_bytes() == lock                # the lock is untouched
    assert audit_path.read_bytes() == table              # the audit table is the same

    _set(tmp_path, "grading", "round", 2)
    proc = tiny.run(tmp_path, "dvc", "repro", "audit")
    new = json.loads(lock_path.read_text())
    assert (new["round"], new["pool_version"]) == (2, pool_after)
    assert "drawn now" in proc.stdout


def test_a_hand_edited_lock_stops_dvc_repro_with_the_fix(tmp_path, packets_built):
    _setup(tmp_path, packets_built)
    lock_path = tmp_path / "data/audit/lock.json"
    lock = json.loads(lock_path.read_text())
    lock["queries"][0]["query_id"] = "kw06" if lock["queries"][0]["query_id"] != "kw06" else "kw05"
    lock_path.write_text(json.dumps(lock))
    proc = tiny.run(tmp_path, "dvc", "repro", "audit", check=False)
    assert proc.returncode != 0
    assert "does not match its sha256" in proc.stderr
    assert "relgrade audit redraw" in proc.stderr


def test_an_auditor_at_half_its_pairs_stops_the_pipeline_naming_the_counts(tmp_path,
                                                                          packets_built):
    pairs, audit_pairs = _setup(tmp_path, packets_built)
    tiny.write_grades(tmp_path, "grader-a", tiny.grade_rows(pairs))
    half = sorted(audit_pairs)[: len(audit_pairs) // 2]
    tiny.write_grades(tmp_path, "auditor-b", tiny.grade_rows(half))
    incomplete = sorted({q for q, _ in set(audit_pairs) - set(half)})
    proc = tiny.run(tmp_path, "dvc", "repro", check=False)
    assert proc.returncode != 0
    n, m = len(half), len(audit_pairs)
    word = "query" if len(incomplete) == 1 else "queries"
    # the grades stage names the auditor's pending pairs before the gate is reached
    assert (f"grading: {m - n} pairs need auditor-b (audit {word} {', '.join(incomplete)}); "
            "run `relgrade packets export --role auditor --out auditor-b-packets.jsonl`, then "
            "`relgrade grade import --grader auditor-b FILE`") in proc.stderr, \
        proc.stderr
    assert not (tmp_path / "data/gate/gate.json").exists()
    assert not (tmp_path / "data/key/key.jsonl").exists()
    assert not list((tmp_path / "metrics").glob("arms/*.json"))
    status = tiny.run(tmp_path, "relgrade", "status").stdout
    assert "key: not frozen yet" in status


def test_with_a_relaxed_audit_coverage_an_auditor_at_half_fails_the_gate_naming_the_counts(
        tmp_path, packets_built):
    pairs, audit_pairs = _setup(tmp_path, packets_built)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["gates"]["audit_coverage_min"] = 0.9
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.write_grades(tmp_path, "grader-a", tiny.grade_rows(pairs))
    half = sorted(audit_pairs)[: len(audit_pairs) // 2]
    tiny.write_grades(tmp_path, "auditor-b", tiny.grade_rows(half))
    proc = tiny.run(tmp_path, "dvc", "repro", check=False)
    assert proc.returncode != 0
    n, m = len(half), len(audit_pairs)
    assert f"note: {m - n} audit pairs not graded by auditor-b" in proc.stdout
    assert not (tmp_path / "data/gate/gate.json").exists()  # no pass record of a failed gate
    assert f"audit coverage {n} of {m} pairs (" in proc.stderr + proc.stdout
    assert f") < 0.9: auditor-b has graded {n} of {m} audit pairs" in proc.stderr + proc.stdout
    assert not (tmp_path / "data/key/key.jsonl").exists()
