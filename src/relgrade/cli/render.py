"""How the commands print: one number format, one plain-text table, the error wrapper.

``undefined`` is printed for a value that does not exist (``None``) or is not a number
(``NaN``): a kappa over one category, a mean over no query. Never ``nan``, never ``0``.
"""

from __future__ import annotations

import functools
import math

import click

from relgrade.errors import RelgradeError
from relgrade.text import inert

#: What is printed for a value that does not exist.
UNDEFINED = "undefined"


def number(value, digits: int | None = 4) -> str:
    """A value as printed: floats rounded, ``None`` and NaN as ``undefined``.

    Parameters
    ----------
    value : int, float, numpy scalar, str or None
        The value.
    digits : int or None, default 4
        Decimal places of a float; ``None`` prints the float in full precision
        (``repr``, the shortest text that reads back to the same float).

    Returns
    -------
    str

    Examples
    --------
    >>> number(0.123456), number(0.1, digits=None), number(None), number(float("nan")), number(3)
    ('0.1235', '0.1', 'undefined', 'undefined', '3')
    """
    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return UNDEFINED
    if isinstance(value, float):
        return repr(value) if digits is None else f"{value:.{digits}f}"
    return str(value)


def table(header: list[str], rows: list[list[str]], *, right: set[int] = frozenset()) -> list[str]:
    """Rows of text cells as aligned lines, columns two spaces apart.

    Parameters
    ----------
    header : list of str
        The column names.
    rows : list of list of str
        The cells, one list per row, as long as ``header``.
    right : set of int, optional
        Indices of the columns aligned right (numbers); the others align left.

    Returns
    -------
    list of str
        One line per row, header first, trailing spaces removed.

    Examples
    --------
    >>> table(["run", "RR"], [["bm25", "1.0"], ["tfidf", "0.5"]], right={1})
    ['run     RR', 'bm25   1.0', 'tfidf  0.5']
    """
    widths = [max(len(t) for t in col) for col in zip(header, *rows)]
    out = []
    for r in [header, *rows]:
        cells = [t.rjust(w) if i in right else t.ljust(w)
                 for i, (t, w) in enumerate(zip(r, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def handle_errors(fn):
    """Turn a :class:`~relgrade.errors.RelgradeError` into ``Error: ...`` and exit 1.

    The message is shown inert (:func:`relgrade.text.inert`, newlines kept): outside text in
    it cannot steer the terminal."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RelgradeError as e:
            raise click.ClickException(inert(str(e), keep="\n")) from None

    return wrapper
