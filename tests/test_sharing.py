"""Judgments shared across experiments: the reuse rule on hand-built banks, the sources an
experiment may name, `relgrade init --share-from`, and the status warning for a missing dep."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from relgrade.errors import InputError
from relgrade.pipeline import sharing
from relgrade.experiment.files import Experiment
from relgrade.pipeline.status import share_warnings
from relgrade.schema import BANK
from tests.test_init import init, repo  # noqa: F401 (repo is a fixture)

NOW = dict(content=pd.Series({"a": "A", "b": "B", "c": "C", "x": "X"}),
           intents=pd.Series({"q": "i"}), rubric_sha256="r", rubric_version="v1")
POOL = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "c"]})
GRADERS = ["grader-a", "auditor-b"]


def _bank(rows):
    """Bank rows from (grader, chunk, grade, content, rubric_version) on query q, intent i."""
    return pd.DataFrame(
        [{"query_id": "q", "chunk_id": c, "grader": g, "round": 1, "grade": grade,
          "reason": "", "content_sha256": h, "intent_sha256": "i", "rubric_version": v,
          "rubric_sha256": "r", "graded_at": "", "sequence": n}
         for n, (g, c, grade, h, v) in enumerate(rows)], columns=[*BANK, "sequence"])


def _reused(own, shared):
    out = sharing.reuse(own, shared, graders=GRADERS, pool=POOL, **NOW)
    return [tuple(r) for r in out[["grader", "chunk_id", "grade", "origin"]].itertuples(
        index=False)]


def test_a_current_source_grade_of_a_pool_pair_counts_for_the_grader_of_its_name():
    source = _bank([("grader-a", "a", 2, "A", "v1"), ("auditor-b", "b", 1, "B", "v1")])
    assert _reused(_bank([]), [("../A", source)]) == [("grader-a", "a", 2, "../A"),
                                                      ("auditor-b", "b", 1, "../A")]


def test_a_stale_source_grade_is_not_reused_content_or_rubric_version():
    source = _bank([("grader-a", "a", 2, "old", "v1"), ("grader-a", "b", 1, "B", "v0")])
    assert _reused(_bank([]), [("../A", source)]) == []


def test_a_grade_of_another_grader_or_outside_the_pool_is_not_reused():
    source = _bank([("grader-z", "a", 2, "A", "v1"), ("grader-a", "x", 1, "X", "v1")])
    assert _reused(_bank([]), [("../A", source)]) == []


def test_own_current_grade_wins_and_a_stale_own_grade_does_not_block():
    own = _bank([("grader-a", "a", 0, "A", "v1"), ("grader-a", "b", 0, "old", "v1")])
    source = _bank([("grader-a", "a", 2, "A", "v1"), ("grader-a", "b", 1, "B", "v1")])
    assert _reused(own, [("../A", source)]) == [("grader-a", "b", 1, "../A")]


def test_the_first_source_listed_wins_a_pair_both_hold():
    first = _bank([("grader-a", "b", 1, "B", "v1")])
    second = _bank([("grader-a", "b", 2, "B", "v1"), ("grader-a", "c", 0, "C", "v1")])
    assert _reused(_bank([]), [("../A", first), ("../B", second)]) == [
        ("grader-a", "b", 1, "../A"), ("grader-a", "c", 0, "../B")]


def test_shared_counts_per_source_and_grader_leave_own_rows_out():
    table = pd.DataFrame({"grader": ["grader-a", "grader-a", "auditor-b", "grader-a"],
                          "origin": ["../A", "../A", "../A", sharing.OWN]})
    assert sharing.shared_counts(table) == {"../A": {"auditor-b": 1, "grader-a": 2}}


# --- the sources an experiment may name ---------------------------------------------

def _two(repo, *extra):  # noqa: F811 (the fixture)
    assert init("--arm", "bm25=bm25", folder="experiments/first").exit_code == 0
    res = init("--arm", "bm25=bm25", "--share-from", "../first", *extra)
    assert res.exit_code == 0, res.output
    return repo / "experiments/first", repo / "experiments/second"


def _sharing(folder, entries):
    """The experiment in ``folder`` with params ``grading.share_from`` set to ``entries``."""
    params = yaml.safe_load((folder / "params.yaml").read_text())
    params["grading"]["share_from"] = entries
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return Experiment.load(folder / "params.yaml")


def _manifest(folder, sha):
    path = folder / "data/corpus/manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"sha256": sha}))


def test_init_share_from_writes_the_param_and_the_deps_of_stages_reading_grades(repo):  # noqa: F811
    _, second = _two(repo)
    params = yaml.safe_load((second / "params.yaml").read_text())
    assert params["grading"]["share_from"] == ["../first"]
    stages = yaml.safe_load((second / "dvc.yaml").read_text())["stages"]
    for name in ("packets", "grades"):
        assert stages[name]["deps"][-1] == "../first/data/grades"
        assert stages[name]["params"][-1] == "grading.share_from"
    assert "../first/data/grades" not in stages["key"]["deps"]
    ex = Experiment.load(second / "params.yaml")
    assert share_warnings(ex) == []


def test_init_without_share_from_writes_no_share_key(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25").exit_code == 0
    text = (repo / "experiments/second/params.yaml").read_text()
    assert "share_from" not in text


def test_init_refuses_a_share_source_that_is_not_an_experiment(repo):  # noqa: F811
    (repo / "experiments/empty").mkdir(parents=True)
    res = init("--arm", "bm25=bm25", "--share-from", "../empty")
    assert res.exit_code == 1
    assert "a share source is not an experiment folder" in res.output
    assert "--share-from ../empty" in res.output
    assert not (repo / "experiments/second").exists()


def test_init_refuses_itself_as_a_share_source(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25").exit_code == 0
    before = (repo / "experiments/second/params.yaml").read_text()
    res = init("--arm", "bm25=bm25", "--force", "--share-from", ".")
    assert res.exit_code == 1
    assert "--share-from .: a share source is the new experiment itself" in res.output
    assert (repo / "experiments/second/params.yaml").read_text() == before


def test_sources_refuse_a_folder_without_params_naming_the_entry(repo):  # noqa: F811
    _, second = _two(repo)
    (repo / "experiments/empty").mkdir()
    ex = _sharing(second, ["../empty"])
    with pytest.raises(InputError) as e:
        sharing.sources(ex)
    assert "a share source is not an experiment folder" in str(e.value)
    assert "grading.share_from: ../empty" in str(e.value)


def test_sources_refuse_the_experiment_itself(repo):  # noqa: F811
    _, second = _two(repo)
    ex = _sharing(second, ["../second"])
    with pytest.raises(InputError, match="a share source is this experiment itself"):
        sharing.sources(ex)


def test_sources_refuse_another_corpus_version_naming_both(repo):  # noqa: F811
    first, second = _two(repo)
    _manifest(first, "1" * 64)
    _manifest(second, "2" * 64)
    with pytest.raises(InputError) as e:
        sharing.sources(Experiment.load(second / "params.yaml"))
    msg = str(e.value)
    assert "a share source was built from another corpus version" in msg
    assert f"sha256 {'1' * 64}" in msg and f"sha256 {'2' * 64}" in msg


def test_sources_accept_the_same_corpus_version(repo):  # noqa: F811
    first, second = _two(repo)
    _manifest(first, "1" * 64)
    _manifest(second, "1" * 64)
    found = sharing.sources(Experiment.load(second / "params.yaml"))
    assert [(entry, src.root.resolve()) for entry, src in found] == [
        ("../first", first.resolve())]


def test_status_warns_when_a_hand_edited_share_from_lacks_its_dep(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25", folder="experiments/first").exit_code == 0
    assert init("--arm", "bm25=bm25").exit_code == 0
    second = repo / "experiments/second"
    ex = _sharing(second, ["../first"])
    where = (second / "dvc.yaml").as_posix()
    assert share_warnings(ex) == [
        f"{where}: stage {s} lacks the dep ../first/data/grades (a share source's grades), "
        "so dvc will not rerun it when they change; render the pipeline from params: "
        "`relgrade pipeline render --experiment experiments/second` (at the repository's top)"
        for s in ("packets", "grades")]


# --- sources stay inside the repository ------------------------------------------------

def _planted(folder):
    """A whole experiment (a copy of experiments/first's params, with a grade folder) that
    relgrade must never read grades from."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.yaml").write_text(
        (Path.cwd() / "experiments/first/params.yaml").read_text())
    (folder / "data/grades/grader-a").mkdir(parents=True)
    return folder


def test_sources_refuse_an_absolute_path(repo, tmp_path_factory):  # noqa: F811
    _, second = _two(repo)
    planted = _planted(tmp_path_factory.mktemp("elsewhere") / "exp")
    ex = _sharing(second, [planted.as_posix()])
    with pytest.raises(InputError) as e:
        sharing.sources(ex)
    assert str(e.value) == (
        f"{(second / 'params.yaml').as_posix()}: grading.share_from: {planted.as_posix()}: "
        "a share source is named relative to the experiment, never by an absolute path "
        f"(found {planted.as_posix()}). Name another experiment of this repository by its "
        "folder, relative to this one (e.g. ../other, or ../.. for the repository's top "
        "experiment)")


def test_sources_refuse_a_relative_path_that_climbs_out_of_the_repository(repo, tmp_path_factory):  # noqa: F811,E501
    _, second = _two(repo)
    outside = _planted(tmp_path_factory.mktemp("outside") / "exp")
    entry = os.path.relpath(outside, second)  # ../../../outsideN/exp
    assert entry.startswith("../../..")
    with pytest.raises(InputError) as e:
        sharing.sources(_sharing(second, [entry]))
    assert "a share source lies outside the repository's working tree" in str(e.value)
    assert f"{entry} resolves to {outside.resolve().as_posix()}" in str(e.value)


def test_sources_refuse_a_symlink_inside_the_repository_that_points_out(repo, tmp_path_factory):  # noqa: F811,E501
    _, second = _two(repo)
    outside = _planted(tmp_path_factory.mktemp("outside") / "exp")
    (repo / "experiments/linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="a share source lies outside the repository's "
                                         "working tree"):
        sharing.sources(_sharing(second, ["../linked"]))


def test_sources_refuse_a_folder_of_the_repository_that_is_no_experiment_of_it(repo):  # noqa: F811
    _, second = _two(repo)
    _planted(repo / "in/fake")  # holds a params.yaml, but is not under experiments/
    with pytest.raises(InputError, match="a share source is not an experiment of this "
                                         "repository"):
        sharing.sources(_sharing(second, ["../../in/fake"]))


def test_init_refuses_a_share_source_outside_the_repository(repo, tmp_path_factory):  # noqa: F811
    assert init("--arm", "bm25=bm25", folder="experiments/first").exit_code == 0
    outside = _planted(tmp_path_factory.mktemp("outside") / "exp")
    res = init("--arm", "bm25=bm25", "--share-from", outside.as_posix())
    assert res.exit_code == 1
    assert "never by an absolute path" in res.output
    assert not (repo / "experiments/second").exists()
