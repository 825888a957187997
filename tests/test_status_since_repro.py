"""params_since_repro on the locks DVC wrote for the shipped experiments (read, not run)."""

from __future__ import annotations

import json
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


# --- inputs -------------------------------------------------------------------------------

def _lock_paths(root: Path) -> list[str]:
    """Every path the lock at ``root`` records that exists there, code left out."""
    from ruamel.yaml import YAML

    lock = YAML(typ="safe").load((root / "dvc.lock").read_bytes())
    return sorted({e["path"] for s in lock["stages"].values() for what in ("deps", "outs")
                   for e in s.get(what) or [] if not e["path"].endswith(".py")
                   and (root / e["path"]).exists()})


def test_every_committed_experiment_reads_its_inputs_as_its_lock_records_them():
    # hashed as DVC 3 hashed them (a file's md5, a folder's listing with .dvcignore applied):
    # right after the committed `dvc repro`, no input is changed
    from relgrade.pipeline.since_repro import inputs_since_repro

    for params in [REPO / "params.yaml", *sorted(REPO.glob("experiments/*/params.yaml"))]:
        assert inputs_since_repro(Experiment.load(params)) == {"state": "unchanged"}, params


def test_an_edited_audit_lock_and_a_hand_edited_grade_are_named_with_their_stages(tmp_path):
    from click.testing import CliRunner

    from relgrade.cli import main
    from relgrade.pipeline.since_repro import inputs_since_repro

    for name in ("params.yaml", "dvc.yaml", "dvc.lock", ".dvcignore", *_lock_paths(REPO)):
        source, target = REPO / name, tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy(source, target)
    (tmp_path / ".dvc").mkdir()
    ex = Experiment.load(tmp_path / "params.yaml")
    assert inputs_since_repro(ex) == {"state": "unchanged"}
    # a leftover a crash leaves is ignored by DVC (.dvcignore), and so here
    (tmp_path / "data/grades/grader-a/.round-1.jsonl.inflight").write_text("x")
    assert inputs_since_repro(ex) == {"state": "unchanged"}
    # one grade changed by hand, 1 -> 2: the same size, another md5
    grades = tmp_path / "data/grades/grader-a/round-1.jsonl"
    text = grades.read_text()
    first = text.index('"grade": 1') if '"grade": 1' in text else text.index('"grade":1')
    grades.write_text(text[:first] + text[first:].replace("1", "2", 1))
    assert grades.stat().st_size == (REPO / "data/grades/grader-a/round-1.jsonl").stat().st_size
    lock = tmp_path / "data/audit/lock.json"
    lock.write_text(lock.read_text().replace('"round": 1', '"round": 2', 1))
    got = inputs_since_repro(ex)
    assert got == {"state": "changed", "paths": {
        "data/audit/lock.json": {"change": "edited", "stages": ["audit"]},
        "data/grades": {"change": "edited",
                        "stages": ["agreement", "grades", "key", "packets"]}},
        "stages": ["agreement", "audit", "grades", "key", "packets"], "repro": "dvc repro"}
    res = CliRunner().invoke(main, ["status", "--params", str(tmp_path / "params.yaml"),
                                    "--json"])
    assert json.loads(res.output)["inputs_changed"] == got
    res = CliRunner().invoke(main, ["status", "--params", str(tmp_path / "params.yaml")])
    lines = res.output.splitlines()
    i = lines.index("inputs: changed since the last dvc repro: data/audit/lock.json edited; "
                    "data/grades edited")
    assert lines[i + 1] == ("  `dvc repro` reruns stages agreement, audit, grades, key, packets "
                            "and those after them; their outputs below are the last run's")
    lock.unlink()
    assert inputs_since_repro(ex)["paths"]["data/audit/lock.json"] == {
        "change": "deleted", "stages": ["audit"]}


def _lock_stage_out(lock: dict, stage: str, path: str, md5: str) -> None:
    """Set the md5 ``stage``'s lock entry records for its output ``path``: as DVC records it
    after the stage made the file again."""
    (out,) = [o for o in lock["stages"][stage]["outs"] if o["path"] == path]
    out["md5"] = md5


def test_the_committed_locks_have_no_decision_stage_behind_its_inputs():
    from relgrade.pipeline.since_repro import stages_behind

    for params in [REPO / "params.yaml", *sorted((REPO / "experiments").glob("*/params.yaml"))]:
        assert stages_behind(Experiment.load(params)) == {}, params


def test_a_ppi_stage_that_stopped_after_the_grades_were_made_again_is_named_stale(tmp_path):
    # dvc repro remade the grades table (people's grades changed) and the ppi stage refused:
    # the grades stage's entry records the new md5, the ppi stage's still the one it read
    from ruamel.yaml import YAML

    from relgrade.pipeline.since_repro import behind_lines, stages_behind

    for f in ("params.yaml", "dvc.lock", "dvc.yaml"):
        shutil.copy(REPO / "experiments" / "ppi-sim" / f, tmp_path / f)
    yaml = YAML(typ="safe")
    lock = yaml.load((tmp_path / "dvc.lock").read_bytes())
    grades = next(o["path"] for o in lock["stages"]["grades"]["outs"]
                  if o["path"].endswith("grades.parquet"))
    readers = sorted(s for s, e in lock["stages"].items()
                     if s.split("@")[0] in ("key", "metrics", "ppi", "compare", "report", "holes")
                     and any(d["path"] == grades for d in e.get("deps", [])))
    assert "ppi" in readers
    _lock_stage_out(lock, "grades", grades, "0" * 32)
    with open(tmp_path / "dvc.lock", "w") as f:
        yaml.dump(lock, f)
    got = stages_behind(Experiment.load(tmp_path / "params.yaml"))
    assert got["repro"] == "dvc repro"
    assert got["stages"] == {s: [(grades, "grades")] for s in readers}
    assert behind_lines({"repro": "dvc repro", "stages": {"ppi": got["stages"]["ppi"]}}) == [
        f"stale: ppi last ran on an earlier {grades} (made again since by grades); its files "
        "below are of the earlier input, and `dvc repro` runs it again (an Error line there "
        "says why it stops)"]


def test_metrics_show_says_its_rows_are_stale_when_the_ppi_stage_stopped_after_new_grades(
        tmp_path):
    from click.testing import CliRunner
    from ruamel.yaml import YAML

    from relgrade.cli import main

    # a repository's top (stages/ and dvc.yaml) with the experiment below it
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    tmp_path = tmp_path / "experiments" / "ppi-sim"
    tmp_path.mkdir(parents=True)
    for f in ("params.yaml", "dvc.lock", "dvc.yaml"):
        shutil.copy(REPO / "experiments" / "ppi-sim" / f, tmp_path / f)
    shutil.copytree(REPO / "experiments" / "ppi-sim" / "metrics" / "decision",
                    tmp_path / "metrics" / "decision")
    show = ["metrics", "show", "--params", str(tmp_path / "params.yaml")]
    before = CliRunner().invoke(main, show)
    assert before.exit_code == 0 and "stale:" not in before.output
    yaml = YAML(typ="safe")
    lock = yaml.load((tmp_path / "dvc.lock").read_bytes())
    grades = next(o["path"] for o in lock["stages"]["grades"]["outs"]
                  if o["path"].endswith("grades.parquet"))
    _lock_stage_out(lock, "grades", grades, "0" * 32)
    with open(tmp_path / "dvc.lock", "w") as f:
        yaml.dump(lock, f)
    after = CliRunner().invoke(main, show)
    assert after.exit_code == 0
    assert (f"stale: ppi last ran on an earlier {grades} (made again since by grades); these "
            "files are of the earlier input") in after.output
    as_json = json.loads(CliRunner().invoke(main, show + ["--json"]).output)
    assert as_json["stale"]["ppi"] == [[grades, "grades"]]
