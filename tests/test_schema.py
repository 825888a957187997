"""The data contract (relgrade.schema): column lists, and the checks every table goes through."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from relgrade import schema
from relgrade.errors import InputError

SRC = Path(schema.__file__).parent


def test_schema_imports_nothing_from_relgrade_but_errors():
    tree = ast.parse(Path(schema.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m and m.startswith("relgrade")} == {"relgrade.errors"}


@pytest.mark.parametrize("module", ["ranking.py", "rng.py", "schema.py", "canonical.py"])
def test_foundation_modules_import_no_package_above_them(module):
    tree = ast.parse((SRC / module).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    above = ("relgrade.io", "relgrade.protocol", "relgrade.evaluation", "relgrade.raters",
             "relgrade.graders", "relgrade.experiment", "relgrade.cli", "relgrade.web")
    assert not [m for m in imported if m.startswith(above)]


@pytest.mark.parametrize("folder", ["protocol", "evaluation", "raters"])
def test_library_packages_open_no_files(folder):
    for path in sorted((SRC / folder).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for call in (".read_bytes(", ".write_bytes(", "read_text(", "write_text("):
            assert call not in text, (path.name, call)
        tree = ast.parse(text)
        opens = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "open"]
        assert not opens, path.name


def test_key_and_gold_tables_are_qrels_and_runs_stack_an_arm_before_the_run_columns():
    assert schema.KEY == schema.QRELS == ["query_id", "chunk_id", "grade"]
    assert schema.RUNS == ["arm", "query_id", "chunk_id", "rank", "score"]
    assert schema.ROW_COLUMNS == list(schema.GRADE_KEYS) == ["query_id", "chunk_id", "reason",
                                                             "grade"]


def test_every_table_starts_from_the_pair_key_it_is_indexed_by():
    for table in (schema.QRELS, schema.RUN, schema.GRADES, schema.RATINGS, schema.POOL,
                  schema.PROVENANCE, schema.ORDERS):
        assert table[:2] == schema.PAIR


def test_require_names_the_missing_columns_the_table_and_the_file():
    with pytest.raises(InputError) as e:
        schema.require(pd.DataFrame(columns=["query_id", "x"]), schema.QRELS,
                       what="the key", path="key.jsonl")
    assert str(e.value) == ("key.jsonl: the key lacks column(s) chunk_id, grade "
                            "(found columns query_id, x)")


def test_require_accepts_extra_columns():
    schema.require(pd.DataFrame(columns=["extra", *schema.PAIR]), schema.PAIR, what="the pool")


def test_normalised_grades_gives_string_ids_and_leaves_the_input_alone():
    given = pd.DataFrame({"query_id": [7], "chunk_id": [4411], "grader": ["ga"], "grade": [2]})
    out = schema.normalised_grades(given)
    assert out.values.tolist() == [["7", "4411", "ga", 2]]
    assert given["query_id"].tolist() == [7]


def test_normalised_grades_refuses_a_table_without_grades():
    with pytest.raises(InputError, match="the grades table lacks column"):
        schema.normalised_grades(pd.DataFrame(columns=["query_id", "chunk_id", "grader"]))


def test_check_scale_sorts_and_refuses_bad_scales():
    assert schema.check_scale([2, 0, np.int64(1)]) == [0, 1, 2]
    with pytest.raises(InputError, match="at least two distinct grades"):
        schema.check_scale([1, 1])
    with pytest.raises(InputError, match="integers only"):
        schema.check_scale([0, 1.5])
    with pytest.raises(InputError) as e:
        schema.check_scale([0, 1, 2], relevant_min=0)
    assert e.value.fix == "Use one of 1, 2"


@pytest.mark.parametrize("value, expected", [
    ("q1", "q1"), (4411, "4411"), (np.int64(7), "7"), (7.0, "7"), ("007", "007"),
])
def test_as_id_reads_strings_and_integers_as_text(value, expected):
    assert schema.as_id(value, "query_id") == expected


@pytest.mark.parametrize("value, rule", [
    (None, "query_id is missing"), (float("nan"), "query_id is missing"),
    (pd.NA, "query_id is missing"), ("  ", "query_id is empty"),
    (True, "query_id must be a string or an integer"),
    (1.5, "query_id must be a string or an integer"),
])
def test_as_id_refuses_missing_empty_boolean_and_fractional_ids(value, rule):
    with pytest.raises(InputError) as e:
        schema.as_id(value, "query_id", path="q.tsv", line=3)
    assert e.value.rule == rule and e.value.line == 3


def test_is_missing_knows_none_nan_and_pd_na_but_not_empty_text_or_zero():
    assert [schema.is_missing(v) for v in (None, float("nan"), np.nan, pd.NA, "", 0)] == \
        [True, True, True, True, False, False]
