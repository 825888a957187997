"""Params of the stopping rule (grading.stop: anytime): defaults, and each bad value one
InputError naming the file and the key; the seeded grading order and what people owe."""

from __future__ import annotations

import copy

import pytest
import yaml

from relgrade.errors import InputError
from relgrade.experiment.params import load_params
from relgrade.protocol import stopping
from tests.test_params import DEFAULT


def _stop(mode="ppi", **grading):
    p = copy.deepcopy(DEFAULT)
    p["grading"]["mode"] = mode
    if mode == "ppi":
        p["ppi"] = {"human_fraction": 0.5}
    p["paths"]["stop"] = "data/audit/stop.json"
    p["grading"].update({"stop": "anytime", **grading})
    return p


def _load(tmp_path, p):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return load_params(path)


def test_the_rule_is_off_by_default_and_its_settings_have_defaults(tmp_path):
    params = _load(tmp_path, copy.deepcopy(DEFAULT))
    assert params.grading.stop == "none"
    params = _load(tmp_path, _stop())
    g = params.grading
    assert (g.stop, g.stop_batch, g.stop_margin) == ("anytime", 5, 0.0)


@pytest.mark.parametrize("change, message", [
    ({"stop_batch": 0}, "grading.stop_batch: must be an integer >= 1 (found 0)"),
    ({"stop_margin": -0.1}, "grading.stop_margin: must be a number in [0, 1] (found -0.1)"),
    ({"stop": "sometimes"}, "grading.stop"),
])
def test_a_bad_stop_value_names_the_file_and_the_key(tmp_path, change, message):
    with pytest.raises(InputError) as e:
        _load(tmp_path, _stop(**change))
    assert message in str(e.value) and "params.yaml" in str(e.value)


def test_a_stop_rule_without_a_human_sample_is_refused(tmp_path):
    with pytest.raises(InputError) as e:
        _load(tmp_path, _stop(mode="single"))
    assert ("grading.stop: anytime needs a human sample to stop on: set grading.mode: ppi "
            "(found mode single)") in str(e.value)


def test_a_stop_rule_without_its_record_path_is_refused(tmp_path):
    p = _stop()
    del p["paths"]["stop"]
    with pytest.raises(InputError) as e:
        _load(tmp_path, p)
    assert "grading.stop: anytime needs paths.stop" in str(e.value)


def test_the_grading_order_is_a_seeded_permutation_of_the_sample():
    ids = [f"q{i:02d}" for i in range(12)]
    a = stopping.grading_order(ids, seed=3)
    assert sorted(a) == ids and a != ids
    assert stopping.grading_order(list(reversed(ids)), seed=3) == a
    assert stopping.grading_order(ids, seed=4) != a


def test_people_owe_one_batch_more_than_the_last_look_until_settled():
    r = stopping.new_record([f"q{i}" for i in range(10)], seed=0, batch=4, margin=0.0,
                            level=0.95, round=1, lock_sha256="x")
    assert stopping.owed_count(r, batch=4) == 4
    r["looks"] = [{"t": 4, "settled": False}]
    assert stopping.owed_count(r, batch=4) == 8
    r["looks"].append({"t": 8, "settled": False})
    assert stopping.owed_count(r, batch=4) == 10           # never past the sample
    r["settled_at"] = 8
    assert stopping.owed_count(r, batch=4) == 8
    assert stopping.owed_queries(r, batch=4) == r["order"][:8]


def test_a_margin_changed_after_a_look_is_refused():
    r = stopping.new_record(["a", "b", "c"], seed=0, batch=1, margin=0.05, level=0.95,
                            round=1, lock_sha256="x")
    stopping.check_unchanged(r, margin=0.1, level=0.95, seed=0)   # no look yet: fine
    r["looks"] = [{"t": 1, "settled": False}]
    with pytest.raises(InputError) as e:
        stopping.check_unchanged(r, margin=0.1, level=0.95, seed=0, path="stop.json")
    assert "grading.stop_margin changed after the stopping rule's first look" in str(e.value)
