"""Static SVG charts for the decision report: estimates with their intervals, one row each.

The report must open offline and look the same everywhere, so its charts are plain SVG text
written here (no script, no font or stylesheet fetched): a label column on the left, then a
horizontal axis on which each row draws its interval as a line and its estimate as a dot.

Layout (all lengths in SVG user units, i.e. CSS pixels at 100 % zoom)::

    x(v) = LABEL_WIDTH + (v - lo) / (hi - lo) * plot_width
    plot_width = width - LABEL_WIDTH - RIGHT_MARGIN
    y(row i) = TOP + (i + 0.5) * ROW_HEIGHT

``[lo, hi]`` is the smallest range holding every finite bound and estimate (and 0 when
``zero_line`` is asked for); a range of width 0 is widened by 0.5 on each side.

The axis is labelled at round values inside ``[lo, hi]`` (:func:`axis_ticks`): multiples of
a step of 1, 2, 2.5 or 5 times a power of ten, the smallest step whose labels are distinct
and stand at least :data:`TICK_GAP` apart at :data:`TICK_FONT_SIZE`, so no two tick labels
ever run into each other. 0 is a multiple of every step: a range across 0 labels it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape

from relgrade.errors import InputError

LABEL_WIDTH = 220
RIGHT_MARGIN = 20
TOP = 28
ROW_HEIGHT = 22
AXIS_HEIGHT = 30
#: The tick labels' font size (the report's stylesheet sets the same), and the width one
#: character of it is taken to need: a digit of a proportional sans-serif face is about
#: 0.55 em wide, a minus sign or point less, so 0.6 em overestimates every label.
TICK_FONT_SIZE = 12
TICK_CHAR_WIDTH = 0.6 * TICK_FONT_SIZE
#: The least blank space between two neighbouring tick labels.
TICK_GAP = 10
#: The most tick labels an axis carries.
MAX_TICKS = 6


@dataclass(frozen=True)
class Row:
    """One row of an interval chart.

    Parameters
    ----------
    label : str
        Shown left of the axis (escaped for XML).
    estimate, low, high : float or None
        The point estimate and its interval bounds, in the measure's units; None (or NaN)
        when undefined, in which case the row says "undefined" instead of drawing.
    emphasis : bool
        Draw the row in the accent colour (a significant difference, the baseline arm).
    """

    label: str
    estimate: float | None
    low: float | None
    high: float | None
    emphasis: bool = False

    def defined(self) -> bool:
        return all(v is not None and math.isfinite(v) for v in (self.estimate, self.low,
                                                                   self.high))


def axis_range(rows, *, zero_line: bool = False) -> tuple[float, float]:
    """The ``(lo, hi)`` the axis spans: every defined row's bounds and estimate, and 0 if asked.

    Parameters
    ----------
    rows : sequence of Row
    zero_line : bool
        Include 0 in the range (differences are read against 0).

    Returns
    -------
    (float, float)
        ``lo < hi``; a single value v gives ``(v - 0.5, v + 0.5)``; no defined row and no
        zero line gives ``(0.0, 1.0)``.
    """
    values = [v for r in rows if r.defined() for v in (r.low, r.high, r.estimate)]
    if zero_line:
        values.append(0.0)
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if lo == hi:
        return lo - 0.5, hi + 0.5
    return lo, hi


def _steps(span: float):
    """Round steps from about span / MAX_TICKS upward: 1, 2, 2.5, 5 times powers of ten."""
    exponent = math.floor(math.log10(span / MAX_TICKS))
    while True:
        for mantissa, extra in ((1, 0), (2, 0), (2.5, 1), (5, 0)):
            step = mantissa * 10.0 ** exponent
            yield step, max(0, -exponent + extra)
        exponent += 1


def tick_label(value: float, decimals: int) -> str:
    """A tick's text: ``decimals`` places, and never ``-0``.

    Examples
    --------
    >>> tick_label(-0.0000001, 3), tick_label(0.25, 2), tick_label(3.0, 0)
    ('0.000', '0.25', '3')
    """
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def axis_ticks(lo: float, hi: float, plot_width: float) -> list[tuple[float, str]]:
    """Where the axis is labelled, and with what text: labels distinct and never touching.

    Parameters
    ----------
    lo, hi : float
        The axis range, ``lo < hi`` (:func:`axis_range`).
    plot_width : float
        The axis' length in user units.

    Returns
    -------
    list of (float, str)
        The tick values, ascending, each with its label. The values are the multiples of the
        first step of 1, 2, 2.5, 5 × 10^k (from about ``(hi - lo) / MAX_TICKS`` up) that lie
        in ``[lo, hi]``, number at least two and at most :data:`MAX_TICKS`, have distinct
        labels (as many decimals as the step needs), and leave at least :data:`TICK_GAP`
        between neighbouring labels, each taken as ``len(label) * TICK_CHAR_WIDTH`` wide
        and centred on its tick. When no step gives two such ticks (a short axis), the two
        ends are labelled, with the decimals that place each label within half a unit of
        length of its value; when even those touch, only ``lo`` is.

    Examples
    --------
    >>> [t for _, t in axis_ticks(0.0, 0.043, 400)]
    ['0.00', '0.01', '0.02', '0.03', '0.04']
    >>> [t for _, t in axis_ticks(-0.3, 0.1, 400)]
    ['-0.3', '-0.2', '-0.1', '0.0', '0.1']
    """
    span = hi - lo
    for step, decimals in _steps(span):
        if step > span:
            break
        first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
        count = last - first + 1
        if count > MAX_TICKS:
            continue
        if count < 2:
            break
        values = [k * step for k in range(first, last + 1)]
        labels = [tick_label(v, decimals) for v in values]
        widest = max(len(t) for t in labels) * TICK_CHAR_WIDTH
        if len(set(labels)) == count and step / span * plot_width >= widest + TICK_GAP:
            return list(zip(values, labels))
    # no round step fits: label the two ends, to within half a pixel, if they fit; else lo
    decimals = max(0, math.ceil(-math.log10(2 * span / plot_width)))
    ends = [(lo, tick_label(lo, decimals)), (hi, tick_label(hi, decimals))]
    room = plot_width - (len(ends[0][1]) + len(ends[1][1])) / 2 * TICK_CHAR_WIDTH
    return ends if ends[0][1] != ends[1][1] and room >= TICK_GAP else ends[:1]


def interval_chart(rows, *, title: str, zero_line: bool = False, width: int = 640) -> str:
    """An SVG chart: one row per estimate, its interval as a line, the estimate as a dot.

    Parameters
    ----------
    rows : sequence of Row
        Drawn top to bottom in the order given.
    title : str
        Written above the chart and as the SVG's accessible title (escaped).
    zero_line : bool
        Draw a dashed vertical line at 0 (for differences).
    width : int
        Total width in user units; must leave room for the plot beside the labels.

    Returns
    -------
    str
        A standalone ``<svg>`` element with ``width``, ``height`` and ``viewBox`` set:
        ``height = TOP + len(rows) * ROW_HEIGHT + AXIS_HEIGHT``.

    Raises
    ------
    InputError
        ``rows`` is empty, or ``width`` leaves no room for the plot.
    """
    rows = list(rows)
    if not rows:
        raise InputError("a chart needs at least one row", item=title)
    plot_width = width - LABEL_WIDTH - RIGHT_MARGIN
    if plot_width <= 0:
        raise InputError("chart too narrow for its labels", item=title, found=width,
                         fix=f"use a width above {LABEL_WIDTH + RIGHT_MARGIN}")
    lo, hi = axis_range(rows, zero_line=zero_line)
    height = TOP + len(rows) * ROW_HEIGHT + AXIS_HEIGHT
    bottom = TOP + len(rows) * ROW_HEIGHT

    def x(v: float) -> float:
        return LABEL_WIDTH + (v - lo) / (hi - lo) * plot_width

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img">',
           f"<title>{escape(title)}</title>",
           f'<text x="0" y="16" class="chart-title">{escape(title)}</text>',
           f'<line x1="{LABEL_WIDTH}" y1="{bottom}" x2="{LABEL_WIDTH + plot_width}" '
           f'y2="{bottom}" class="axis" stroke="#555"/>']
    for t, label in axis_ticks(lo, hi, plot_width):
        out.append(f'<line x1="{x(t):.2f}" y1="{bottom}" x2="{x(t):.2f}" y2="{bottom + 4}" '
                   'class="axis" stroke="#555"/>')
        out.append(f'<text x="{x(t):.2f}" y="{bottom + 18}" class="tick" '
                   f'font-size="{TICK_FONT_SIZE}" text-anchor="middle">{label}</text>')
    if zero_line:
        out.append(f'<line x1="{x(0.0):.2f}" y1="{TOP}" x2="{x(0.0):.2f}" y2="{bottom}" '
                   'class="zero" stroke="#888" stroke-dasharray="4 3"/>')
    for i, r in enumerate(rows):
        y = TOP + (i + 0.5) * ROW_HEIGHT
        cls = "row emphasis" if r.emphasis else "row"
        colour = "#b5421b" if r.emphasis else "#1f4e79"
        out.append(f'<g class="{cls}">')
        out.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 4:.2f}" text-anchor="end" '
                   f'class="label">{escape(r.label)}</text>')
        if r.defined():
            out.append(f'<line x1="{x(r.low):.2f}" y1="{y:.2f}" x2="{x(r.high):.2f}" '
                       f'y2="{y:.2f}" class="interval" stroke="{colour}" stroke-width="2"/>')
            out.append(f'<circle cx="{x(r.estimate):.2f}" cy="{y:.2f}" r="4" class="estimate" '
                       f'fill="{colour}">'
                       f"<title>{escape(r.label)}: {r.estimate:.4f} "
                       f"[{r.low:.4f}, {r.high:.4f}]</title></circle>")
        else:
            out.append(f'<text x="{LABEL_WIDTH + 4}" y="{y + 4:.2f}" class="label">'
                       "undefined</text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)
