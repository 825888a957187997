"""How the commands print: one number format, one plain-text table, the error wrapper.

``undefined`` is printed for a value that does not exist (``None``) or is not a number
(``NaN``): a kappa over one category, a mean over no query. Never ``nan``, never ``0``.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from pathlib import Path

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

    A cell is measured as it is shown: outside text inert (:func:`relgrade.text.inert`), so
    a column holding ``\\u202e`` stays aligned.
    """
    header = [inert(str(t)) for t in header]
    rows = [[inert(str(t)) for t in r] for r in rows]
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
    it cannot steer the terminal. For a command given another folder's experiment
    (``--experiment`` or ``--params``: a ``params_path`` argument), every relgrade command the
    message names in backticks gets that experiment's option
    (:func:`relgrade.experiment.layout.aim_commands`), so it acts on the same experiment
    when typed where the user stands."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RelgradeError as e:
            message = aimed_at(str(e), kwargs.get("params_path"))
            raise click.ClickException(inert(message, keep="\n")) from None

    return wrapper


def aimed_at(message: str, params_path) -> str:
    """``message`` with its relgrade commands in backticks aimed at the experiment of
    ``params_path`` (:func:`relgrade.experiment.layout.aim_commands`).

    Parameters
    ----------
    message : str
    params_path : str, os.PathLike or None
        The params file the command read (None: the message as it is).

    Returns
    -------
    str
        ``message``, each such command given ``--experiment PATH`` (PATH relative to the
        folder the command runs in) when the experiment is another folder of the same
        repository; else as it is.
    """
    if params_path is None:
        return message
    from relgrade.errors import InputError
    from relgrade.experiment.layout import aim_commands, find_repository

    root, here = Path(params_path).parent.resolve(), Path.cwd().resolve()
    try:  # another repository's experiment, or none: its commands are typed there
        if root == here or find_repository(root) != find_repository(here):
            return message
    except InputError:
        return message
    return aim_commands(message, f" --experiment {Path(os.path.relpath(root, here)).as_posix()}")


def counted(count: int, word: str) -> str:
    """A count and its noun, the noun made plural unless the count is 1.

    Parameters
    ----------
    count : int
        How many (any integer; 0 and negatives take the plural).
    word : str
        The noun in the singular, lower case; the last word of a phrase is the one made
        plural. English's regular rule only: a final ``y`` becomes ``ies``, anything else
        takes ``s`` (``query``, ``pair``, ``model call``; not ``day`` or ``box``).

    Returns
    -------
    str
        ``"COUNT NOUN"``.

    Examples
    --------
    >>> counted(1, "query"), counted(2, "query"), counted(0, "pair"), counted(3, "model call")
    ('1 query', '2 queries', '0 pairs', '3 model calls')
    """
    if count == 1:
        return f"1 {word}"
    return f"{count} {word[:-1] + 'ies' if word.endswith('y') else word + 's'}"


def _price(cost: Mapping, name: str) -> str:
    """One grader's owed work of :func:`relgrade.pipeline.cost.judging_cost`, priced by who
    does it: a model's in calls, a person's in annotator-hours."""
    g = cost["graders"][name]
    if g.get("worker") == "model":
        return f"{counted(g['pending_calls'], 'model call')}"
    return f"{g['pending_hours']:.2f} annotator-hours"


def holes_lines(h: Mapping) -> list[str]:
    """What the arms that joined after the key froze owe, and their level claim, as lines.

    Parameters
    ----------
    h : mapping
        :func:`relgrade.pipeline.new_arms.holes_status`'s result.

    Returns
    -------
    list of str
        One line while the holes cannot be listed; else per new arm a line with its holes,
        its sampled hole queries and what the model grader and people owe (priced), and a
        line with its level claim (or that it is not computed yet); then, while any is owed
        and ``h`` has the folder's ``cost``, what the holes stage asks of each grader for
        every arm together (the sum of the arms' lines counts a shared pair, and a query
        sampled for one arm only, differently); then the commands that grade what is owed.

    Examples
    --------
    >>> cost = {"graders": {"m": {"worker": "model", "pending_calls": 8},
    ...                     "p": {"worker": "person", "pending_hours": 4 * 30 / 3600}}}
    >>> lines = holes_lines({"state": "owed", "model_grader": "m", "human_grader": "p",
    ...     "measure": "nDCG@10", "commands": {"m": "relgrade grade run --grader m"},
    ...     "arms": {"fresh": {"holes": 8, "hole_queries": 8, "sampled_holes": 4,
    ...              "sampled_queries": ["a", "b", "c", "d"], "owed": {"m": 8, "p": 4},
    ...              "cost": cost, "verdict": {"state": "not computed"}}}})
    >>> print("\\n".join(lines))
    holes fresh: 8 holes in 8 queries; people's sample: 4 queries (a, b, c, d), 4 holes; m (model) owes 8 (8 model calls), p (people) owes 4 (0.03 annotator-hours)
    holes fresh: level claim not computed yet (dvc repro once every hole is graded)
    holes: to grade them: relgrade grade run --grader m
    """
    if h["state"] in ("waiting", "unreadable"):
        return [f"holes: cannot list the new arms' holes yet: {h['error']}"]
    out = []
    model, human = h["model_grader"], h["human_grader"]
    for arm, a in h["arms"].items():
        out.append(
            f"holes {arm}: {counted(a['holes'], 'hole')} in {counted(a['hole_queries'], 'query')}; "
            f"people's sample: {counted(len(a['sampled_queries']), 'query')} "
            f"({', '.join(a['sampled_queries'])}), {counted(a['sampled_holes'], 'hole')}; "
            f"{model} (model) owes {a['owed'][model]} ({_price(a['cost'], model)}), "
            f"{human} (people) owes {a['owed'][human]} ({_price(a['cost'], human)})")
        v = a["verdict"]
        if v["state"] == "not computed":
            out.append(f"holes {arm}: level claim not computed yet (dvc repro once every "
                       "hole is graded)")
            continue
        when = "" if v["state"] == "computed" else " (outdated: dvc repro recomputes it)"
        out.append(f"holes {arm}: {v['level_claim']}{when}: {v['measure']} "
                   f"{v['estimate']:.4f} [{v['low']:.4f}, {v['high']:.4f}] (PPI++), hole rate "
                   f"{100 * v['hole_rate']:.1f}%, the model grader's bias on the holes minus "
                   f"on the old pairs {v['transport_difference']:+.3f} grade "
                   f"(p = {v['transport_p']:.2g})")
    total = h.get("cost")
    if total and total.get("pending"):
        g = total["graders"]
        out.append(
            f"holes, every arm together (what the holes stage asks: a pair two arms share "
            f"once, people every hole of a query sampled for any arm): {model} (model) owes "
            f"{g[model]['pending']} ({_price(total, model)}), {human} (people) owes "
            f"{g[human]['pending']} ({_price(total, human)})")
    if h.get("commands"):
        out.append("holes: to grade them: " + "; ".join(h["commands"].values()))
    return out
