"""Static SVG interval charts: the axis range, the coordinates written, escaping, refusals."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from relgrade.errors import InputError
from relgrade.evaluation.charts import Row, axis_range, interval_chart

SVG = "{http://www.w3.org/2000/svg}"


def test_axis_range_spans_every_bound_and_estimate():
    rows = [Row("a", 0.5, 0.25, 0.75), Row("b", 0.4, 0.3, 0.6)]
    assert axis_range(rows) == (0.25, 0.75)


def test_axis_range_takes_in_zero_for_a_zero_line():
    assert axis_range([Row("a", 0.2, 0.1, 0.3)], zero_line=True) == (0.0, 0.3)
    assert axis_range([Row("a", -0.2, -0.3, -0.1)], zero_line=True) == (-0.3, 0.0)


def test_axis_range_widens_a_single_value_and_ignores_undefined_rows():
    assert axis_range([Row("a", 1.0, 1.0, 1.0), Row("b", None, None, None)]) == (0.5, 1.5)
    assert axis_range([Row("b", float("nan"), 0.1, 0.2)]) == (0.0, 1.0)


def test_interval_chart_places_dots_and_lines_by_the_documented_formula():
    # width 640: plot width 640 - 220 - 20 = 400 over [0.25, 0.75].
    # x(0.5) = 220 + 0.25 / 0.5 * 400 = 420; x(0.4) = 220 + 0.15 / 0.5 * 400 = 340;
    # x(0.3) = 260, x(0.6) = 500, x(0.25) = 220, x(0.75) = 620.
    # rows at y = 28 + 11 = 39 and 28 + 33 = 61; height = 28 + 2 * 22 + 30 = 102.
    svg = interval_chart([Row("a", 0.5, 0.25, 0.75), Row("b", 0.4, 0.3, 0.6, emphasis=True)],
                         title="Mean per arm")
    root = ET.fromstring(svg)
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == (
        "640", "102", "0 0 640 102")
    dots = [(c.get("cx"), c.get("cy"), c.get("fill")) for c in root.iter(SVG + "circle")]
    assert dots == [("420.00", "39.00", "#1f4e79"), ("340.00", "61.00", "#b5421b")]
    lines = [(ln.get("x1"), ln.get("x2"), ln.get("y1")) for ln in root.iter(SVG + "line")
             if ln.get("class") == "interval"]
    assert lines == [("220.00", "620.00", "39.00"), ("260.00", "500.00", "61.00")]
    assert root.find(SVG + "title").text == "Mean per arm"


def test_zero_line_sits_at_zero_on_a_range_across_it():
    # range [-0.1, 0.3]: x(0) = 220 + 0.1 / 0.4 * 400 = 320.
    svg = interval_chart([Row("A − B", 0.1, -0.1, 0.3)], title="Δ", zero_line=True)
    zero = [ln for ln in ET.fromstring(svg).iter(SVG + "line") if ln.get("class") == "zero"]
    assert [(z.get("x1"), z.get("x2")) for z in zero] == [("320.00", "320.00")]
    ticks = [t.text for t in ET.fromstring(svg).iter(SVG + "text") if t.get("class") == "tick"]
    assert ticks == ["-0.100", "0.300", "0.000"]


def test_an_undefined_row_says_so_and_draws_nothing():
    svg = interval_chart([Row("a", 0.5, 0.25, 0.75), Row("b", None, None, None)], title="t")
    root = ET.fromstring(svg)
    assert len(list(root.iter(SVG + "circle"))) == 1
    labels = [t.text for t in root.iter(SVG + "text") if t.get("class") == "label"]
    assert labels == ["a", "b", "undefined"]


def test_labels_and_title_are_escaped():
    svg = interval_chart([Row('<script>x</script> & "q"', 0.5, 0.4, 0.6)],
                         title="<b>t</b>")
    assert "<script>" not in svg and "<b>" not in svg
    root = ET.fromstring(svg)
    assert root.find(SVG + "title").text == "<b>t</b>"
    assert [t.text for t in root.iter(SVG + "text") if t.get("class") == "label"] == [
        '<script>x</script> & "q"']


def test_no_rows_or_no_room_is_refused():
    with pytest.raises(InputError, match="a chart needs at least one row"):
        interval_chart([], title="empty")
    with pytest.raises(InputError, match="chart too narrow for its labels"):
        interval_chart([Row("a", 0.5, 0.4, 0.6)], title="t", width=240)
