"""Static SVG interval charts: the axis range, the coordinates written, escaping, refusals."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from relgrade.errors import InputError
from relgrade.evaluation.charts import (
    TICK_CHAR_WIDTH,
    TICK_GAP,
    Row,
    axis_range,
    axis_ticks,
    interval_chart,
)

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
    ticks = [(t.get("x"), t.text) for t in ET.fromstring(svg).iter(SVG + "text")
             if t.get("class") == "tick"]
    # step 0.1: x(v) = 220 + (v + 0.1) / 0.4 * 400
    assert ticks == [("220.00", "-0.1"), ("320.00", "0.0"), ("420.00", "0.1"),
                     ("520.00", "0.2"), ("620.00", "0.3")]


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


def _tick_labels(svg: str) -> list[tuple[float, str]]:
    return [(float(t.get("x")), t.text) for t in ET.fromstring(svg).iter(SVG + "text")
            if t.get("class") == "tick"]


# (lo, hi) of an estimate row and a difference row as the report draws them; the first is
# the chart whose labels ran together as "0.0000.043" (a tick at lo, one at 0 beside it)
RANGES = [(-0.0004, 0.043), (0.0, 0.043), (0.9917, 1.0), (0.0, 0.0026), (-0.178, 0.09),
          (0.455, 0.766), (-0.5, 0.5), (0.9999, 1.0), (-3.0, 120.0), (0.25, 0.75)]


@pytest.mark.parametrize("lo,hi", RANGES)
@pytest.mark.parametrize("width", [640, 320])
def test_tick_labels_are_distinct_and_never_touch(lo, hi, width):
    rows = [Row("a", (lo + hi) / 2, lo, hi)]
    ticks = _tick_labels(interval_chart(rows, title="t", zero_line=lo < 0 < hi, width=width))
    labels = [t for _, t in ticks]
    assert len(ticks) >= 2 and len(set(labels)) == len(labels)
    for (x1, a), (x2, b) in zip(ticks, ticks[1:]):
        # centred labels: the space between them is the distance less half of each width
        assert x2 - x1 - (len(a) + len(b)) / 2 * TICK_CHAR_WIDTH >= TICK_GAP, (a, b)


def test_ticks_are_round_values_inside_the_range_and_zero_is_one_of_them_across_zero():
    assert axis_ticks(-0.0004, 0.043, 400) == [
        (0.0, "0.00"), (0.01, "0.01"), (0.02, "0.02"), (0.03, "0.03"), (0.04, "0.04")]
    assert [t for _, t in axis_ticks(-0.178, 0.09, 400)] == [
        "-0.15", "-0.10", "-0.05", "0.00", "0.05"]
    assert [t for _, t in axis_ticks(0.9917, 1.0, 400)] == [
        "0.992", "0.994", "0.996", "0.998", "1.000"]


def test_a_short_axis_labels_its_ends_to_half_a_unit_or_else_its_start_only():
    # 80 units over [-0.178, 0.09]: no round step leaves two labels room; 0.00335 per
    # unit, so 3 decimals (an error of at most 0.0005 < half a unit's 0.0017)
    assert axis_ticks(-0.178, 0.09, 80) == [(-0.178, "-0.178"), (0.09, "0.090")]
    assert axis_ticks(0.123, 0.124, 10) == [(0.123, "0.1230")]
