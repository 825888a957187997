"""Params of grading.mode ppi: each bad value is one InputError naming the file and the key."""

from __future__ import annotations

import copy

import pytest
import yaml

from relgrade.errors import InputError
from relgrade.experiment.params import load_params
from tests.test_params import DEFAULT


def _ppi(**section):
    p = copy.deepcopy(DEFAULT)
    p["grading"]["mode"] = "ppi"
    p["ppi"] = section
    return p


def _load(tmp_path, p):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return path, load_params(path)


def test_a_ppi_section_gets_the_honest_interval_and_the_audit_defaults(tmp_path):
    _, params = _load(tmp_path, _ppi(human_fraction=0.1))
    # benchmarks/README.md: normal and t undercover with 20 sample queries; jackknife holds
    # its level and is never wider than human-only
    assert params.ppi.interval == "jackknife"
    assert params.ppi.judge_audit.max_spread == 0.15 and params.ppi.judge_audit.k == 10
    assert params.ppi.budget.fractions[0] == 0.1 and params.ppi.budget.fractions[-1] == 1.0


@pytest.mark.parametrize("section, message", [
    ({"human_fraction": 0.0}, "ppi.human_fraction: must be a number in (0, 1] (found 0.0)"),
    ({"human_fraction": 1.5}, "ppi.human_fraction: must be a number in (0, 1] (found 1.5)"),
    ({"human_queries": 1}, "ppi.human_queries: must be an integer >= 3 (the ppi stage's "
                           "intervals and rank-sets need 3 queries) (found 1)"),
    ({"human_fraction": 0.1, "human_queries": 5}, "give exactly one of ppi.human_fraction and "
                                                  "ppi.human_queries (found both)"),
    ({"human_queries": 2}, "ppi.human_queries: must be an integer >= 3 (the ppi stage's "
                           "intervals and rank-sets need 3 queries) (found 2)"),
    # the t interval too: the ppi stage's PPI++ rank-sets need 3 queries whatever the interval
    ({"human_queries": 2, "interval": "t"}, "ppi.human_queries: must be an integer >= 3"),
    ({"human_fraction": 0.1, "interval": "wald"}, "ppi.interval: must be one of jackknife, "
                                                  "regression, t or normal (found 'wald')"),
])
def test_a_bad_ppi_value_names_the_file_and_the_key(tmp_path, section, message):
    with pytest.raises(InputError) as e:
        _load(tmp_path, _ppi(**section))
    assert message in str(e.value)
    assert "params.yaml" in str(e.value)


def test_a_human_grader_with_the_model_graders_name_is_refused(tmp_path):
    p = _ppi(human_fraction=0.2)
    p["grading"]["auditor"] = p["grading"]["key_grader"]
    with pytest.raises(InputError) as e:
        _load(tmp_path, p)
    name = p["grading"]["key_grader"]
    assert (f"grading.auditor {name} is also the key grader: in ppi mode the human sample "
            f"must be graded by another grader than the model grader (found both {name})"
            in str(e.value))


def test_ppi_mode_without_a_ppi_section_is_refused(tmp_path):
    p = copy.deepcopy(DEFAULT)
    p["grading"]["mode"] = "ppi"
    with pytest.raises(InputError) as e:
        _load(tmp_path, p)
    assert "grading.mode is ppi but there is no `ppi` section" in str(e.value)


def test_three_sample_queries_are_enough_for_every_interval(tmp_path):
    for interval in ("jackknife", "regression", "t", "normal"):
        _, params = _load(tmp_path, _ppi(human_queries=3, interval=interval))
        assert (params.ppi.human_queries, params.ppi.interval) == (3, interval)
