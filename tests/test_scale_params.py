"""``scale.relevant_min`` is checked when params load, by the rule the key stage applies."""

from __future__ import annotations

import pytest

from relgrade.errors import InputError
from relgrade.experiment.params import load_params
from tests.test_inert_text import params_with


@pytest.mark.parametrize("relevant_min, found", [(5, "5"), (0, "0")])
def test_relevant_min_off_the_scale_or_at_its_bottom_is_refused_by_params(tmp_path,
                                                                          relevant_min, found):
    path = params_with(tmp_path, scale={"grades": [0, 1, 2], "relevant_min": relevant_min})
    with pytest.raises(InputError) as e:
        load_params(path)
    assert str(e.value) == (f"{path}: scale.relevant_min: relevant_min must be a grade of the "
                            f"scale above its lowest grade (found {found}). Use one of 1, 2")


def test_relevant_min_on_the_scale_loads(tmp_path):
    path = params_with(tmp_path, scale={"grades": [0, 1, 2, 3], "relevant_min": 3})
    assert load_params(path).scale.relevant_min == 3
