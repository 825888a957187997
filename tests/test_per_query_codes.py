"""The per-query values as codes: the matrices, the checks and their words as the frame's."""

import numpy as np
import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.evaluation.per_query_codes import PerQueryCodes


def _table(rows):
    return pd.DataFrame(rows, columns=["arm", "query_id", "measure", "value"])


def _two_arms():
    return _table([("b", "q2", "m", 0.5), ("b", "q10", "m", 0.25), ("a", "q2", "m", 1.0),
                   ("a", "q10", "m", 0.0), ("a", "q2", "n", 3.0), ("b", "q2", "n", 4.0)])


def test_matrix_rows_are_sorted_arms_and_columns_code_point_ordered_queries():
    codes = PerQueryCodes.from_frame(_two_arms())
    codes.check()
    qids, groups, mat = codes.matrix("m", codes.arms)
    assert codes.arms == ["a", "b"]
    assert codes.measures == ["m", "n"]          # first appearance
    assert qids == ["q10", "q2"]                 # "q10" < "q2" as text
    assert groups == ["all", "all"]
    assert mat.tolist() == [[0.0, 1.0], [0.25, 0.5]]
    qids, _, mat = codes.matrix("n", codes.arms)
    assert qids == ["q2"] and mat.tolist() == [[3.0], [4.0]]


def test_tables_coded_one_at_a_time_equal_the_stacked_frame():
    t = _two_arms()
    per_arm = [(a, t[t["arm"] == a].drop(columns="arm")) for a in ("b", "a")]
    one, two = PerQueryCodes.from_frame(pd.concat([f.assign(arm=a) for a, f in per_arm],
                                                  ignore_index=True)), \
        PerQueryCodes.from_tables(iter(per_arm))
    for m in ("m", "n"):
        for x, y in zip(one.matrix(m, one.arms), two.matrix(m, two.arms)):
            assert np.array_equal(np.asarray(x), np.asarray(y))
    assert two.measures == ["m", "n"] and two.arms == ["a", "b"]


def test_ids_are_compared_as_text():
    t = _table([("a", 7, "m", 1.0), ("b", "7", "m", 2.0)])
    qids, _, mat = PerQueryCodes.from_frame(t).matrix("m", ["a", "b"])
    assert qids == ["7"] and mat.tolist() == [[1.0], [2.0]]


def test_groups_follow_each_query():
    t = _two_arms().assign(group=["x", "y", "x", "y", "x", "x"])
    qids, groups, _ = PerQueryCodes.from_frame(t).matrix("m", ["a", "b"])
    assert qids == ["q10", "q2"] and groups == ["y", "x"]


def _error(t) -> InputError:
    codes = PerQueryCodes.from_frame(t)
    with pytest.raises(InputError) as e:
        codes.check()
        for m in codes.measures:
            codes.matrix(m, codes.arms)
    return e.value


def test_a_missing_column_is_named_with_the_columns_found():
    e = _error(_two_arms().drop(columns="value"))
    assert "per-query table lacks column(s) value" in str(e)
    assert "columns arm, query_id, measure" in str(e)


def test_the_first_value_not_finite_is_named_as_given():
    t = _two_arms()
    t["value"] = t["value"].astype(object)
    t.loc[3, "value"] = "x"
    t.loc[4, "value"] = float("nan")
    e = _error(t)
    assert "per-query value must be a finite number" in str(e)
    assert "arm a, query q10, measure m" in str(e) and "'x'" in str(e)


def test_the_first_repeated_row_is_named():
    t = pd.concat([_two_arms(), _table([("b", "q2", "n", 4.0), ("a", "q2", "m", 1.0)])],
                  ignore_index=True)
    e = _error(t)
    assert "a query has two values for one arm and measure" in str(e)
    assert "arm b, query q2, measure n" in str(e)


def test_a_missing_value_names_the_first_query_then_arm():
    t = _two_arms().drop(index=[1])               # b has no q10 on m
    e = _error(t)
    assert "per-query values missing" in str(e)
    assert "arm b, query q10, measure m" in str(e)


def test_a_query_in_two_groups_is_named():
    t = _two_arms().assign(group=["x", "y", "z", "y", "x", "x"])
    e = _error(t)
    assert "a query belongs to two groups" in str(e) and "query q2" in str(e)


def test_the_frame_of_some_measures_keeps_row_order():
    f = PerQueryCodes.from_frame(_two_arms()).frame(["n"])
    assert f.to_dict("list") == {"arm": ["a", "b"], "query_id": ["q2", "q2"],
                                 "measure": ["n", "n"], "value": [3.0, 4.0]}
