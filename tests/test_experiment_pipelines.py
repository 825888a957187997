"""Every experiment that `relgrade init` wrote keeps up with the repository's pipeline.

An experiment's dvc.yaml is a copy of the repository's, re-rooted at ``../..``: when a stage
of the repository gains a dependency or a params key, a copy that lacks it would not rerun
when that input changes. The copy may add (a triage or panel stage, more deps) but never
lack what the repository's stage lists.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from relgrade.pipeline.scaffold import pipeline

REPO = Path(__file__).resolve().parents[1]
GENERATED = "# The pipeline of experiment "
EXPERIMENTS = sorted(p.parent for p in (REPO / "experiments").glob("*/dvc.yaml")
                     if p.read_text().startswith(GENERATED))


def _body(stage: dict) -> dict:
    return stage.get("do", stage)


def _names(entries) -> set[str]:
    return {e if isinstance(e, str) else next(iter(e)) for e in entries or []}


def test_the_repository_holds_experiments_written_by_init():
    assert {p.name for p in EXPERIMENTS} >= {"triage-sim", "crowd-sim"}


@pytest.mark.parametrize("folder", EXPERIMENTS, ids=lambda p: p.name)
def test_each_stage_lists_every_dep_and_param_of_the_repository_stage(folder):
    repo = pipeline(yaml.safe_load((REPO / "dvc.yaml").read_text()), "../..",
                    file_runs=False)["stages"]
    mine = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    missing = {}
    for name, stage in repo.items():
        assert name in mine, f"{folder.name} has no {name} stage"
        want, have = _body(stage), _body(mine[name])
        lacks = sorted(_names(want.get("deps")) - _names(have.get("deps"))) + sorted(
            _names(want.get("params")) - _names(have.get("params")))
        if lacks:
            missing[name] = lacks
    assert missing == {}


@pytest.mark.parametrize("folder", [REPO, *EXPERIMENTS], ids=lambda p: p.name)
def test_every_value_the_pipeline_interpolates_is_in_the_experiments_params(folder):
    # dvc refuses a whole pipeline when one ${...} of one stage does not resolve
    import re

    params = yaml.safe_load((folder / "params.yaml").read_text())
    text = (folder / "dvc.yaml").read_text()
    names = sorted(set(re.findall(r"\$\{([a-z_]+(?:\.[a-z_]+)+)\}", text)))

    def found(name):
        node = params
        for part in name.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    # item.*: a foreach stage's own item
    assert [n for n in names if not n.startswith("item.") and not found(n)] == []
    # and every params key a stage lists, which dvc reads from params.yaml
    listed = {p for stage in yaml.safe_load(text)["stages"].values()
              for p in _body(stage).get("params") or [] if isinstance(p, str)}
    assert sorted(n for n in listed if not found(n)) == []
