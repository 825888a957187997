"""Params of a `holes` section (arms that joined after the key froze): defaults, and each bad
value one InputError naming the file and the rule."""

from __future__ import annotations

import copy

import pytest
import yaml

from relgrade.errors import InputError
from relgrade.experiment.params import load_params
from tests.test_params import DEFAULT

ARM = {"kind": "file", "depth": 10, "source": "data/input/runs/fresh.trec"}


def _holes(**change):
    p = copy.deepcopy(DEFAULT)
    # the holes' sample is graded by a person: the default graders are both models
    p["graders"]["person-h"] = {"role": "auditor", "kind": "human"}
    p["holes"] = {"arms": {"fresh": ARM}, "model_grader": "auditor-b",
                  "human_grader": "person-h", "human_fraction": 0.1} | change
    return p


def _load(tmp_path, p):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return load_params(path)


def test_a_holes_section_takes_the_transport_defaults(tmp_path):
    h = _load(tmp_path, _holes()).holes
    assert (h.transport_alpha, h.transport_tolerance, h.level, h.measure) == (0.05, 0.1, 0.95,
                                                                             None)
    assert h.arms["fresh"].source == ARM["source"]


@pytest.mark.parametrize("change, message", [
    ({"arms": {"bm25": ARM}}, "holes.arms.bm25 is also under arms"),
    ({"model_grader": "judge"}, "holes.model_grader judge is not declared under graders"),
    ({"human_grader": "auditor-b"}, "holes.human_grader auditor-b is also the model grader"),
    ({"human_grader": "grader-a"}, "holes.human_grader grader-a is a grader of kind model "
                                   "(graders.grader-a.kind): the human_grader must be of kind "
                                   "human (or import)"),
    ({"model_grader": "person-h", "human_grader": "grader-a"},
     "holes.model_grader person-h is a grader of kind human"),
    ({"human_fraction": 0}, "holes.human_fraction: must be a number in (0, 1]"),
    ({"transport_tolerance": -0.1}, "holes.transport_tolerance"),
    ({"arms": {"fresh": {"kind": "bm25", "depth": 10}}}, "holes.arms.fresh"),
])
def test_a_bad_holes_value_names_the_file_and_the_rule(tmp_path, change, message):
    with pytest.raises(InputError) as e:
        _load(tmp_path, _holes(**change))
    assert message in str(e.value)
    assert "params.yaml" in str(e.value)


def test_a_holes_section_without_its_paths_is_refused_naming_the_lines_to_add(tmp_path):
    p = _holes()
    del p["paths"]["holes_work"]
    with pytest.raises(InputError) as e:
        _load(tmp_path, p)
    assert "a holes section needs paths.holes_work (relgrade init writes them): add " \
           "`holes: metrics/holes.json` and `holes_work: data/holes` under paths" in str(e.value)
    del p["paths"]["holes"]
    with pytest.raises(InputError, match="needs paths.holes and paths.holes_work"):
        _load(tmp_path, p)


def test_a_holes_section_in_ppi_mode_is_refused(tmp_path):
    p = _holes()
    p["grading"]["mode"] = "ppi"
    p["ppi"] = {"human_fraction": 0.2}
    p["grading"]["key_grader"], p["grading"]["auditor"] = "grader-a", "auditor-b"
    with pytest.raises(InputError, match="a holes section needs a key graded by people"):
        _load(tmp_path, p)
