"""Progress lines of a long stage: one line per step, on stderr, through rich.

A stage that runs longer than a few seconds names each step as it starts
(``compare: step 2/3: pool bias (4.1 s so far)``). On a terminal rich styles the line; in a
log (stderr not a terminal, as under CI or ``dvc repro > log``) it is the same plain line, one
per step, never a redrawn bar.
"""

from __future__ import annotations

import time
from collections.abc import Callable


#: Seconds a stage runs before its steps are printed (``quiet`` of the data stages): a quick
#: stage, and any error it stops with, stay one line.
QUIET_SECONDS = 2.0


def step_printer(stage: str, total: int, *, console=None,
                 clock: Callable[[], float] = time.monotonic,
                 quiet: float = 0.0) -> Callable[[str], None]:
    """A function that prints the next step of ``stage``.

    Parameters
    ----------
    stage : str
        The stage's name, heading each line.
    total : int
        How many steps the stage announces.
    console : rich.console.Console, optional
        Where to print (default: :func:`relgrade.terminal.console` on stderr, outside text
        shown inert; plain text when it is not a terminal).
    clock : callable, optional
        Seconds, monotone (default :func:`time.monotonic`).
    quiet : float, default 0
        A step that starts before the stage has run this many seconds is not printed (its
        number still counts), so a stage that ends, or stops with an error, within them
        prints nothing of its steps (:data:`QUIET_SECONDS` for the data stages).

    Returns
    -------
    callable
        ``step(what)`` prints ``STAGE: step I/TOTAL: WHAT (S s so far)``, I counting from 1.

    Examples
    --------
    >>> import io
    >>> from rich.console import Console
    >>> out = io.StringIO()
    >>> ticks = iter([0.0, 0.0, 2.5])
    >>> step = step_printer("compare", 2, console=Console(file=out, width=80),
    ...                     clock=lambda: next(ticks))
    >>> step("paired comparisons"); step("pool bias")
    >>> print(out.getvalue(), end="")
    compare: step 1/2: paired comparisons (0.0 s so far)
    compare: step 2/2: pool bias (2.5 s so far)
    >>> ticks = iter([0.0, 0.0, 2.5])
    >>> step = step_printer("key", 2, console=Console(file=(out := io.StringIO()), width=80),
    ...                     clock=lambda: next(ticks), quiet=2.0)
    >>> step("the key"); step("the files")
    >>> print(out.getvalue(), end="")
    key: step 2/2: the files (2.5 s so far)
    """
    if console is None:
        from relgrade.terminal import console as inert_console

        console = inert_console(stderr=True, highlight=False)
    start, done = clock(), [0]

    def step(what: str) -> None:
        done[0] += 1
        elapsed = clock() - start
        if elapsed < quiet:
            return
        console.print(f"[bold]{stage}[/bold]: step {done[0]}/{total}: {what} "
                      f"({elapsed:.1f} s so far)", highlight=False, soft_wrap=True)

    return step
