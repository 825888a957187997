"""The audit stage with its lock: drawn once per round, kept across pool changes."""

from __future__ import annotations

import importlib
import json

import pytest

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from tests.test_audit import provenance, queries


def _stage():
    stage = importlib.import_module("relgrade.pipeline.stages.audit")
    return stage


def _run(root, *, round=1, version="p-000000000001", prov=None):
    (prov if prov is not None else provenance()).to_parquet(root / "prov.parquet")
    queries().to_parquet(root / "queries.parquet")
    (root / "pool.json").write_text(json.dumps({"pool_version": version}))
    params = {"seed": 1, "audit": {"fraction": 0.25, "min_queries": 4},
              "grading": {"round": round},
              "paths": {"provenance": "prov.parquet", "queries": "queries.parquet",
                        "pool_manifest": "pool.json", "audit": "audit.jsonl",
                        "audit_lock": "lock.json"}}
    _stage().run(Experiment.from_mapping(params, root=root))
    return [json.loads(line)["query_id"] for line in (root / "audit.jsonl").read_text().splitlines()]


def _deeper_pool():
    # A new arm w finds three more chunks of k1 alone: k1's share becomes 4/5 = 0.8, above
    # k2's 2/3, so a fresh draw would audit k1 instead of k2.
    prov = provenance()
    extra = prov.iloc[:3].copy()
    extra["query_id"], extra["chunk_id"], extra["arm"] = "k1", ["d", "e", "f"], "w"
    extra["source"] = "depth"
    return __import__("pandas").concat([prov, extra], ignore_index=True)


def test_a_pool_change_keeps_the_locked_audit_and_leaves_the_lock_untouched(tmp_path):
    before = _run(tmp_path)
    assert before[:2] == ["k3", "k2"]
    lock = tmp_path / "lock.json"
    locked, mtime = lock.read_bytes(), lock.stat().st_mtime_ns
    after = _run(tmp_path, version="p-000000000002", prov=_deeper_pool())
    assert after == before
    assert lock.read_bytes() == locked and lock.stat().st_mtime_ns == mtime
    assert json.loads(locked)["pool_version"] == "p-000000000001"


def test_a_new_round_redraws_from_the_current_pool(tmp_path):
    _run(tmp_path)
    after = _run(tmp_path, round=2, version="p-000000000002", prov=_deeper_pool())
    assert after[:2] == ["k3", "k1"]
    lock = json.loads((tmp_path / "lock.json").read_text())
    assert (lock["round"], lock["pool_version"]) == (2, "p-000000000002")


def test_a_hand_edited_lock_stops_the_stage_with_the_fix(tmp_path):
    _run(tmp_path)
    lock = tmp_path / "lock.json"
    lock.write_text(lock.read_text().replace('"k2"', '"k1"'))
    with pytest.raises(InputError) as e:
        _run(tmp_path)
    assert "does not match its sha256" in str(e.value)
    assert "relgrade audit redraw" in str(e.value)



def _redraw(root, *args):
    from click.testing import CliRunner

    from relgrade.cli import main

    params = {"seed": 1, "audit": {"fraction": 0.25, "min_queries": 4},
              "grading": {"round": 1, "auditor": "auditor-b"},
              "graders": {"auditor-b": {"role": "auditor", "kind": "human"}},
              "paths": {"provenance": "prov.parquet", "queries": "queries.parquet",
                        "pool_manifest": "pool.json", "audit": "audit.jsonl",
                        "audit_lock": "lock.json", "grades_in": "grades"}}
    (root / "params.yaml").write_text(json.dumps(params))  # JSON is YAML
    return CliRunner().invoke(main, ["audit", "redraw", "--params", str(root / "params.yaml"),
                                     *args])


def test_redraw_draws_the_round_again_from_the_current_pool(tmp_path):
    _run(tmp_path)
    _deeper_pool().to_parquet(tmp_path / "prov.parquet")
    (tmp_path / "pool.json").write_text(json.dumps({"pool_version": "p-000000000002"}))
    res = _redraw(tmp_path)
    assert res.exit_code == 0, res.output
    lock = json.loads((tmp_path / "lock.json").read_text())
    assert [q["query_id"] for q in lock["queries"]][:2] == ["k3", "k1"]
    assert (lock["round"], lock["pool_version"]) == (1, "p-000000000002")
    assert "redrawn from pool p-000000000002: k3, k1" in res.output
    assert "(was: k3, k2" in res.output
    assert res.output.rstrip().endswith("Commit it and run `dvc repro`.")  # its own top


def test_redraw_of_a_sub_experiment_names_its_own_dvc_repro(tmp_path):
    # a relgrade repository (stages/ and dvc.yaml at its top) holding experiments/sub: the
    # printed command typed at the top must run the sub-experiment, not the top's pipeline
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    sub = tmp_path / "experiments" / "sub"
    sub.mkdir(parents=True)
    _run(sub)
    _deeper_pool().to_parquet(sub / "prov.parquet")
    (sub / "pool.json").write_text(json.dumps({"pool_version": "p-000000000002"}))
    res = _redraw(sub)
    assert res.exit_code == 0, res.output
    assert res.output.rstrip().endswith(
        "Commit it and run `dvc repro experiments/sub/dvc.yaml`.")


def test_redraw_is_refused_once_the_auditor_has_grades_of_the_round_unless_forced(tmp_path):
    _run(tmp_path)
    before = (tmp_path / "lock.json").read_bytes()
    graded = tmp_path / "grades/auditor-b/round-1.jsonl"
    graded.parent.mkdir(parents=True)
    graded.write_text('{"query_id": "k3", "chunk_id": "a", "reason": "r", "grade": 1}\n')
    _deeper_pool().to_parquet(tmp_path / "prov.parquet")
    res = _redraw(tmp_path)
    assert res.exit_code == 1
    assert "auditor-b already has grades for round 1" in res.output and "--force" in res.output
    assert (tmp_path / "lock.json").read_bytes() == before
    res = _redraw(tmp_path, "--force")
    assert res.exit_code == 0, res.output
    assert [q["query_id"] for q in json.loads((tmp_path / "lock.json").read_text())["queries"]][:2] \
        == ["k3", "k1"]


def test_redraw_replaces_a_hand_edited_lock(tmp_path):
    _run(tmp_path)
    lock = tmp_path / "lock.json"
    lock.write_text(lock.read_text().replace('"k2"', '"k1"'))
    res = _redraw(tmp_path)
    assert res.exit_code == 0, res.output
    assert "(was: no readable lock)" in res.output
    assert _run(tmp_path)[:2] == ["k3", "k2"]  # the stage accepts the new lock
