"""Every agreement statistic declares its properties; each property is checked here with
hypothesis, and a statistic that is reported but not registered, or a property that no test
below checks, fails the suite (as scikit-learn's metrics test_common does)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relgrade.protocol import agreement as ag

#: The properties this file knows how to check; a new field of Properties must be added.
CHECKED_PROPERTIES = {"symmetric", "row_order_invariant", "relabel_invariant", "bounds"}

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# --- completeness -------------------------------------------------------------------

def test_every_property_field_is_checked_by_this_file():
    fields = {f.name for f in dataclasses.fields(ag.Properties)}
    assert fields == CHECKED_PROPERTIES


def test_every_registered_statistic_is_fully_classified():
    assert ag.STATISTICS, "the registry is empty"
    for name, stat in ag.STATISTICS.items():
        assert stat.name == name
        assert stat.raters in ("two", "many"), name
        props = stat.properties
        assert isinstance(props, ag.Properties), name
        for field in CHECKED_PROPERTIES - {"bounds"}:
            assert isinstance(getattr(props, field), bool), (name, field)
        low, high = props.bounds
        assert low <= high, name


def test_every_reported_measure_is_registered():
    two = ag.agreement([0, 1, 2, 2], [0, 1, 1, 2], scale=[0, 1, 2], relevant_min=1)
    reported = {k for k, v in two.items() if isinstance(v, float)} | set(ag.MEASURES)
    g = pd.DataFrame({"query_id": "q", "chunk_id": ["c1", "c1", "c2", "c2"],
                      "grader": ["r1", "r2", "r1", "r2"], "grade": [0, 1, 2, 2]})
    many = ag.multi_rater_agreement(g, scale=[0, 1, 2])
    reported |= {k for k, v in many.items() if isinstance(v, float)} | set(ag.MULTI_MEASURES)
    unregistered = reported - set(ag.STATISTICS)
    assert not unregistered, f"measures reported but not registered: {sorted(unregistered)}"


def test_registry_values_equal_the_reported_values():
    a, b = [0, 1, 2, 2, 1, 0, 2, 1], [0, 1, 1, 1, 1, 0, 1, 0]
    g = pd.DataFrame({"query_id": "q", "chunk_id": [f"c{i}" for i in range(8)] * 2,
                      "grader": ["ga"] * 8 + ["au"] * 8, "grade": a + b})
    out = ag.agreement(a, b, scale=[0, 1, 2], relevant_min=1)
    for name in ag.MEASURES:
        value = ag.STATISTICS[name].compute(g, raters=["ga", "au"], scale=[0, 1, 2],
                                            relevant_min=1)
        assert value == pytest.approx(out[name]), name


# --- generated grade tables ---------------------------------------------------------

@st.composite
def grade_tables(draw):
    """A long grades table: 2-4 raters, 1-12 pairs over 1-3 queries, some grades missing."""
    scale = draw(st.sampled_from([[0, 1, 2], [0, 1, 2, 3]]))
    relevant_min = draw(st.sampled_from(scale[1:]))
    n_raters = draw(st.integers(2, 4))
    raters = [f"r{i}" for i in range(n_raters)]
    n_pairs = draw(st.integers(1, 12))
    rows = []
    for p in range(n_pairs):
        query = f"q{p % 3}"
        for r in raters:
            grade = draw(st.one_of(st.none(), st.sampled_from(scale)) if p % 4 == 3
                         else st.sampled_from(scale))
            if grade is not None:
                rows.append({"query_id": query, "chunk_id": f"c{p}", "grader": r,
                             "grade": grade})
    table = pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "grade"])
    return table, raters, scale, relevant_min


def compute(stat, table, raters, scale, relevant_min):
    used = raters[:2] if stat.raters == "two" else raters
    return stat.compute(table, raters=used, scale=scale, relevant_min=relevant_min)


def same(x, y):
    if x is None or y is None:
        return x is None and y is None
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


# --- the properties -----------------------------------------------------------------

@SETTINGS
@given(grade_tables(), st.randoms(use_true_random=False))
def test_symmetric_statistics_do_not_depend_on_which_rater_is_which(case, rnd):
    table, raters, scale, rel = case
    for name, stat in ag.STATISTICS.items():
        if not stat.properties.symmetric:
            continue
        base = compute(stat, table, raters, scale, rel)
        if stat.raters == "two":
            swapped = stat.compute(table, raters=[raters[1], raters[0]], scale=scale,
                                   relevant_min=rel)
        else:
            # Permute the raters and give them new names in a different sort order.
            order = list(raters)
            rnd.shuffle(order)
            rename = {old: f"z{len(order) - i}" for i, old in enumerate(order)}
            renamed = table.assign(grader=table["grader"].map(rename))
            swapped = stat.compute(renamed, raters=[rename[r] for r in order], scale=scale,
                                   relevant_min=rel)
        assert same(base, swapped), (name, base, swapped)


@SETTINGS
@given(grade_tables(), st.randoms(use_true_random=False))
def test_row_order_invariant_statistics_ignore_the_order_of_rows(case, rnd):
    table, raters, scale, rel = case
    order = list(range(len(table)))
    rnd.shuffle(order)
    shuffled = table.iloc[order].reset_index(drop=True)
    for name, stat in ag.STATISTICS.items():
        if not stat.properties.row_order_invariant:
            continue
        assert same(compute(stat, table, raters, scale, rel),
                    compute(stat, shuffled, raters, scale, rel)), name


@SETTINGS
@given(grade_tables(), st.randoms(use_true_random=False))
def test_relabel_invariant_statistics_ignore_the_names_of_queries_and_chunks(case, rnd):
    table, raters, scale, rel = case
    chunks = sorted(table["chunk_id"].unique())
    new = [f"{rnd.randint(0, 10**6)}-{i}" for i in range(len(chunks))]
    rnd.shuffle(new)
    chunk_map = dict(zip(chunks, new))
    queries = sorted(table["query_id"].unique())
    query_map = dict(zip(queries, [f"w{len(queries) - i}" for i in range(len(queries))]))
    relabelled = table.assign(chunk_id=table["chunk_id"].map(chunk_map),
                              query_id=table["query_id"].map(query_map))
    for name, stat in ag.STATISTICS.items():
        if not stat.properties.relabel_invariant:
            continue
        assert same(compute(stat, table, raters, scale, rel),
                    compute(stat, relabelled, raters, scale, rel)), name


@SETTINGS
@given(grade_tables())
def test_statistics_stay_within_their_declared_bounds(case):
    table, raters, scale, rel = case
    for name, stat in ag.STATISTICS.items():
        value = compute(stat, table, raters, scale, rel)
        if value is None:
            continue
        low, high = stat.properties.bounds
        assert np.isfinite(value), name
        assert low - 1e-9 <= value <= high + 1e-9, (name, value)


def test_bounds_are_reached_where_they_should_be():
    # Perfect agreement reaches the upper bound of every kappa; total systematic
    # disagreement on two grades reaches -1 for Cohen's kappa.
    a, b = [0, 2, 0, 2], [0, 2, 0, 2]
    assert ag.weighted_kappa(a, b, scale=[0, 1, 2]) == 1.0
    assert ag.cohen_kappa([0, 2, 0, 2], [2, 0, 2, 0], scale=[0, 1, 2]) == -1.0
    assert ag.disagreement([0, 2], [2, 0]) == 1.0
