"""params_since_repro on the locks DVC wrote for the shipped experiments (read, not run)."""

from __future__ import annotations

import shutil
from pathlib import Path

from relgrade.experiment.files import Experiment
from relgrade.pipeline.since_repro import params_since_repro

REPO = Path(__file__).resolve().parents[1]


def _copy(tmp_path, name):
    for f in ("params.yaml", "dvc.lock"):
        shutil.copy(REPO / "experiments" / name / f, tmp_path / f)
    return tmp_path / "params.yaml"


def test_a_float_dvc_wrote_without_a_dot_equals_the_params_value(tmp_path):
    # the lock holds `tol: 1e-07` (YAML 1.2: a float; PyYAML would read a string) and params
    # `tol: 1.0e-7`: DVC sees no change, nor may the status
    params = _copy(tmp_path, "crowd-sim")
    assert "tol: 1e-07" in (tmp_path / "dvc.lock").read_text()
    assert "tol: 1.0e-7" in params.read_text()
    assert params_since_repro(Experiment.load(params)) == {"state": "unchanged"}


def test_an_edited_nested_value_names_its_key_both_values_and_the_stage(tmp_path):
    params = _copy(tmp_path, "crowd-sim")
    params.write_text(params.read_text().replace("tol: 1.0e-7", "tol: 1.0e-6", 1))
    got = params_since_repro(Experiment.load(params))
    assert got["state"] == "changed"
    assert got["keys"] == {"aggregation": {
        "was": {"method": "majority", "tol": 1e-07, "max_iter": 2000},
        "now": {"method": "majority", "tol": 1e-06, "max_iter": 2000}}}
    assert got["stages"] == ["aggregate"]
    assert got["arms"] == {"added": [], "removed": [], "changed": []}


def test_without_a_lock_nothing_has_run(tmp_path):
    params = _copy(tmp_path, "crowd-sim")
    (tmp_path / "dvc.lock").unlink()
    assert params_since_repro(Experiment.load(params)) == {"state": "no run"}


def test_a_removed_arms_stages_left_in_the_lock_are_not_a_change_after_the_repro(tmp_path):
    # after `arm remove bm25f` and a dvc repro, every stage dvc.yaml still has recorded the
    # arms without bm25f; DVC keeps retrieve@bm25f and metrics@bm25f in the lock, with the old
    # arms, but never runs them again: nothing is left to rerun
    import yaml
    from ruamel.yaml import YAML

    for f in ("params.yaml", "dvc.lock", "dvc.yaml"):
        shutil.copy(REPO / f, tmp_path / f)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    del params["arms"]["bm25f"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    lock = YAML(typ="safe").load((tmp_path / "dvc.lock").read_bytes())
    gone = sorted(s for s in lock["stages"] if s.endswith("@bm25f"))
    assert gone == ["metrics@bm25f", "retrieve@bm25f"]
    for stage, entry in lock["stages"].items():
        recorded = (entry.get("params") or {}).get("params.yaml") or {}
        if stage not in gone and "arms" in recorded:
            del recorded["arms"]["bm25f"]
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    assert params_since_repro(Experiment.load(tmp_path / "params.yaml")) == {
        "state": "unchanged"}


def test_an_added_arms_own_stages_are_listed_with_those_that_rerun(tmp_path):
    # retrieve@plain and metrics@plain have no lock entry (they never ran), yet dvc repro
    # runs them: the list names them beside the stages that recorded `arms`
    import yaml

    for f in ("params.yaml", "dvc.lock", "dvc.yaml"):
        shutil.copy(REPO / f, tmp_path / f)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["arms"]["plain"] = {"kind": "bm25", "depth": 100,
                               "source": "src/relgrade/retrieve/bm25.py"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    got = params_since_repro(Experiment.load(tmp_path / "params.yaml"))
    assert got["arms"] == {"added": ["plain"], "removed": [], "changed": []}
    assert got["stages"] == ["gate", "metrics@plain", "pool", "retrieve@bm25", "retrieve@bm25f",
                             "retrieve@hybrid", "retrieve@plain", "retrieve@tfidf"]
