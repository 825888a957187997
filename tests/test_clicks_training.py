"""The learning-to-rank training set: key rows and IPS-weighted click rows written out by
hand, the leakage rule on and off, and group boundaries checked against a groupby."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from relgrade.clicks import training as T
from relgrade.errors import InputError

KEY = pd.DataFrame({"query_id": ["q2", "q1", "q1"], "chunk_id": ["b", "b", "a"],
                    "grade": [3, 0, 2]})
# q1 is graded; q3 and q4 only have clicks. The two q3 rows d>c collapse into one.
PAIRS = pd.DataFrame({
    "query_id": ["q3", "q1", "q3", "q4", "q3"],
    "preferred_chunk_id": ["d", "b", "d", "f", "e"],
    "other_chunk_id": ["c", "a", "c", "g", "c"],
    "weight": [2.0, 4.0, 10.0, 1.0, 1.5],
    "session_id": ["s1", "s2", "s3", "s4", "s5"],
})


def test_key_rows_come_first_sorted_with_grades_as_labels_and_weight_one():
    rows, _ = T.training_set(KEY, PAIRS)
    key = rows[rows["source"] == "key"]
    assert key[["query_id", "chunk_id", "label", "weight", "sessions"]].values.tolist() == [
        ["q1", "a", 2.0, 1.0, 0], ["q1", "b", 0.0, 1.0, 0], ["q2", "b", 3.0, 1.0, 0]]
    assert (key["other_chunk_id"] == "").all()
    assert rows["source"].tolist()[:3] == ["key"] * 3


def test_click_rows_sum_the_ips_weights_of_a_repeated_preference():
    rows, summary = T.training_set(KEY, PAIRS)
    clicks = rows[rows["source"] == "clicks"]
    assert clicks[["query_id", "chunk_id", "other_chunk_id", "weight", "sessions"]] \
        .values.tolist() == [["q3", "d", "c", 12.0, 2], ["q3", "e", "c", 1.5, 1],
                             ["q4", "f", "g", 1.0, 1]]
    assert clicks["label"].isna().all()
    assert list(rows.columns) == list(T.TRAINING_COLUMNS)


def test_the_key_queries_click_rows_are_left_out_by_default_and_counted():
    rows, summary = T.training_set(KEY, PAIRS)
    assert "q1" not in rows.loc[rows["source"] == "clicks", "query_id"].tolist()
    assert summary == {"key_rows": 3, "key_queries": 2, "click_rows": 3, "click_queries": 2,
                       "exclude_eval_queries": True, "pairs_in": 5, "pairs_excluded": 1,
                       "queries_excluded": 1}


def test_without_the_leakage_rule_the_key_queries_click_rows_stay():
    rows, summary = T.training_set(KEY, PAIRS, exclude_eval_queries=False)
    clicks = rows[rows["source"] == "clicks"]
    assert clicks.iloc[0][["query_id", "chunk_id", "other_chunk_id", "weight"]].tolist() == \
        ["q1", "b", "a", 4.0]
    assert summary["pairs_excluded"] == 0 and summary["click_rows"] == 4


def test_group_sizes_equal_the_rows_per_query_in_order():
    rows, _ = T.training_set(KEY, PAIRS)
    for source in ("key", "clicks"):
        part = rows[rows["source"] == source]
        expected = part.groupby("query_id", sort=False).size().tolist()
        assert T.group_sizes(part).tolist() == expected
        assert T.group_sizes(part).sum() == len(part)
    assert T.group_sizes(rows[rows["source"] == "key"]).tolist() == [2, 1]


def test_ids_sort_by_bytes_not_by_locale():
    key = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["b", "B", "é"],
                        "grade": [1, 1, 1]})
    rows = T.key_rows(key)
    assert rows["chunk_id"].tolist() == ["B", "b", "é"]


def test_non_contiguous_groups_are_refused():
    with pytest.raises(InputError, match="contiguous"):
        T.group_sizes(pd.DataFrame({"query_id": ["a", "b", "a"]}))
    assert T.group_sizes(pd.DataFrame({"query_id": []})).tolist() == []


def test_a_key_graded_twice_or_missing_a_column_is_refused():
    twice = pd.concat([KEY, KEY.iloc[:1]], ignore_index=True)
    with pytest.raises(InputError, match="once") as e:
        T.training_set(twice, PAIRS)
    assert "query q2, chunk b" in str(e.value)
    with pytest.raises(InputError, match="grade"):
        T.training_set(KEY.drop(columns="grade"), PAIRS)
    with pytest.raises(InputError, match="weight"):
        T.training_set(KEY, PAIRS.drop(columns="weight"))


def test_no_pairs_gives_the_key_rows_alone():
    rows, summary = T.training_set(KEY, PAIRS.iloc[:0])
    assert rows["source"].tolist() == ["key"] * 3
    assert summary["click_rows"] == 0
    assert np.isfinite(rows["weight"]).all()
