"""A rater panel's params: each bad value is one error naming the params file and the rule."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from relgrade.errors import InputError
from relgrade.experiment.params import load_params

REPO = Path(__file__).resolve().parents[1]
PANEL = yaml.safe_load((REPO / "experiments/crowd-sim/params.yaml").read_text())


def _with(change):
    p = copy.deepcopy(PANEL)
    change(p)
    return p


BAD = {
    "gold_fraction_zero": (lambda p: p["gold"].update(fraction=0),
                           "gold.fraction: must be a number in (0, 0.5] (found 0)"),
    "gold_fraction_above_half": (lambda p: p["gold"].update(fraction=0.6),
                                 "gold.fraction: must be a number in (0, 0.5] (found 0.6)"),
    "per_pair_above_raters": (
        lambda p: [p["graders"].pop(n) for n in ("rater-3", "rater-4", "rater-5")],
        "raters.per_pair must be at most the number of graders with role rater (found "
        "per_pair 3; raters: rater-1, rater-2)"),
    "per_pair_out_of_range": (lambda p: p["raters"].update(per_pair=6),
                              "raters.per_pair: must be an integer from 3 to 5 (found 6)"),
    "no_raters_section": (lambda p: p.pop("raters"),
                          "grading.mode is raters but the params have no `raters` section: "
                          "set raters.per_pair (3 to 5)"),
    "key_grader_declared": (lambda p: p["grading"].update(key_grader="rater-1"),
                            "grading.key_grader must name the aggregate of the raters, a name "
                            "not declared under graders (found 'rater-1')"),
    "expert_not_an_expert": (lambda p: p["adjudication"].update(expert="rater-1"),
                             "adjudication.expert must name a grader with role expert "
                             "(found 'rater-1')"),
    "unknown_method": (lambda p: p["aggregation"].update(method="vote"),
                       "aggregation.method: must be one of majority or dawid-skene "
                       "(found 'vote')"),
    "partial_regrade": (lambda p: p["grading"].update(regrade="relevant"),
                        "grading.regrade must be all when grading.mode is raters: a rater "
                        "panel regrades a round whole (found 'relevant')"),
    "unknown_mode": (lambda p: p["grading"].update(mode="crowd"),
                     "grading.mode: must be one of single, triage, raters or ppi (found 'crowd')"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_panel_value_is_one_error_naming_the_file(tmp_path, case):
    change, message = BAD[case]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(_with(change), sort_keys=False))
    with pytest.raises(InputError) as e:
        load_params(path)
    assert str(e.value) == f"{path}: {message}"


def test_the_crowd_experiments_params_are_a_complete_panel():
    p = load_params(REPO / "experiments/crowd-sim/params.yaml")
    assert (p.grading.mode, p.raters.per_pair, p.gold.fraction) == ("raters", 3, 0.4)
    assert (p.aggregation.method, p.adjudication.expert) == ("majority", "expert-e")
