"""End to end: disputes in an experiment below the top, made by `relgrade init`.

In a temporary git + dvc repository holding the tiny experiment at the top, `relgrade init
experiments/a` makes an experiment that is graded and run to its key (the build
tests/test_e2e_share.py starts from too). Its params name the disputes file
(`paths.disputes`), which does not exist yet: its pipeline does not depend on it, so `dvc
repro` neither fails on a missing file nor warns on an empty one. The `paths.disputes` line
is then taken out (an experiment made before disputes existed); `relgrade disputes import
FILE --experiment experiments/a` files a dispute, adds the line back, creates the file and
renders the experiment's dvc.yaml again, as it prints; the `dvc repro` after it runs the
grades and key stages, which now depend on the file.
"""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

EXP = "experiments/a"
LINE = "  disputes: data/disputes.jsonl"


def _stages_on_disputes(text: str) -> list[str]:
    """The stages of a dvc.yaml (its text) that depend on the disputes file."""
    pipeline = yaml.safe_load(text)["stages"]
    return sorted(name for name, s in pipeline.items()
                  if "${paths.disputes}" in s.get("deps", []))


@pytest.fixture(scope="module")
def journey(tmp_path_factory, a_keyed):
    # the experiment made, reviewed, graded and run to its key: a copy of the shared build
    # (tests/conftest.py, tests.test_e2e_share.build_keyed), which ran exactly these commands
    root = tiny.copy_repo(a_keyed / "repo", tmp_path_factory.mktemp("anywhere"))
    made = json.loads((a_keyed / "init.json").read_text())
    out = {"params_after_init": made["params"],
           "stages_before": _stages_on_disputes(made["pipeline"])}
    key = json.loads((a_keyed / "key.json").read_text())
    out["first"] = subprocess.CompletedProcess(["dvc", "repro", f"{EXP}/dvc.yaml:key"],
                                               key["returncode"], key["stdout"], key["stderr"])
    out["file_before"] = key["disputes_file"]

    # an experiment whose params predate disputes: no paths.disputes
    params = root / EXP / "params.yaml"
    text = params.read_text()
    params.write_text("".join(x for x in text.splitlines(keepends=True)
                              if not x.startswith(LINE)))
    tiny.run(root, "relgrade", "pipeline", "render", "--experiment", EXP)
    tiny.git(root, "add", "-A")
    tiny.git(root, "commit", "-qm", "second, graded")
    pool = pd.read_parquet(root / EXP / "data/pool/pool.parquet")
    q, c = pool.loc[0, "query_id"], pool.loc[0, "chunk_id"]
    out["pair"] = (q, c)
    (root / "one.jsonl").write_text(json.dumps(
        {"query_id": q, "chunk_id": c, "grader": "grader-a", "grade": 2,
         "section": "boundary-cases", "reason": "the rubric misses this case"}) + "\n")
    out["imported"] = tiny.run(root, "relgrade", "disputes", "import", "one.jsonl",
                               "--experiment", EXP)
    out["params_after_import"] = params.read_text()
    out["stages_after"] = _stages_on_disputes((root / EXP / "dvc.yaml").read_text())
    out["check"] = tiny.run(root, "relgrade", "pipeline", "check", "--experiment", EXP,
                          check=False)
    out["second"] = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:key", check=False)
    out["listed"] = tiny.run(root, "relgrade", "disputes", "--experiment", EXP)
    out["root"] = root
    return out


def test_init_names_the_disputes_file_and_the_pipeline_waits_for_it(journey):
    assert f"\n{LINE}" in journey["params_after_init"]
    assert journey["stages_before"] == []
    assert journey["file_before"] is False


def test_repro_without_a_disputes_file_neither_fails_nor_warns(journey):
    # DVC says nothing of the disputes file: no missing dep, no empty one
    first = journey["first"]
    assert "disputes.jsonl" not in first.stdout + first.stderr


def test_import_files_the_dispute_names_the_file_in_params_and_renders_the_pipeline(journey):
    assert journey["imported"].stdout == (
        f"Filed 1 dispute from one.jsonl in {EXP}/data/disputes.jsonl\n"
        f"Added paths.disputes: data/disputes.jsonl to {EXP}/params.yaml\n"
        f"Rendered {EXP}/dvc.yaml: the grades and key stages now depend on "
        f"{EXP}/data/disputes.jsonl\n"
        f"Commit {EXP}/data/disputes.jsonl, {EXP}/params.yaml and {EXP}/dvc.yaml\n")
    params = yaml.safe_load(journey["params_after_import"])
    assert params["paths"]["disputes"] == "data/disputes.jsonl"
    rows = (journey["root"] / EXP / "data/disputes.jsonl").read_text().splitlines()
    assert [(json.loads(r)["query_id"], json.loads(r)["chunk_id"]) for r in rows] == \
        [journey["pair"]]
    assert journey["stages_after"] == ["grades", "key"]
    assert journey["check"].returncode == 0, journey["check"].stdout + journey["check"].stderr


def test_repro_after_the_first_dispute_runs_on_the_file(journey):
    second = journey["second"]
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Errno" not in second.stderr and "disputes.jsonl' is empty" not in second.stderr
    # the new dep reruns the stages that read it; a dispute alone changes no grade
    assert f"Running stage '{EXP}/dvc.yaml:grades'" in second.stdout
    assert journey["listed"].stdout.startswith("1 open dispute on rubric v1, 1 section\n")
