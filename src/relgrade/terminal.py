"""What relgrade prints on a terminal passes through :func:`relgrade.text.inert` on its way out.

A command or a stage prints query text, chunk text, intents, arm, grader and rater names,
correction reasons and names and file names from params: text that is not relgrade's own.
Rather than each of the many lines that print such text making it inert, the streams
themselves do: :func:`inert_output` puts an :class:`InertStream` over ``sys.stdout`` and
``sys.stderr`` for the run of a command (``relgrade``'s entry point) or a stage
(:func:`relgrade.experiment.stage.run_stage`), so every ``click.echo``, ``print`` and
``Error:`` line shows a bidi control (U+202A-U+202E, U+2066-U+2069, U+200E/F, U+061C), a
C0 or C1 control (ESC, a bare CR, NUL) or any other character of
:data:`relgrade.text.VISIBLE_CATEGORIES` as ``\\u202e``, ``\\u001b``, ``\\u000d``. A
newline (the line break relgrade prints) and a tab (the column separator of
``relgrade evaluate``'s trec_eval-style lines) are kept.

rich styles what it prints on a terminal with escape sequences of its own, which the stream
would show as text; :func:`console` gives a rich console that writes to the stream beneath
and makes the text it renders inert instead (its own control sequences untouched).

Bytes written to ``sys.stdout.buffer`` (``grade export -o -``: a batch file, data rather than
text shown) pass unchanged. JSON a command prints stays valid: ``\\u202e`` is JSON's own
escape, so a string decodes to the same characters, except one beyond the Basic Multilingual
Plane (a tag character, U+E0001, shown ``\\ue0001``, which JSON reads as U+E000 and ``1``).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from relgrade.text import inert

#: Characters printed as they are: the line break and the column separator relgrade prints.
KEPT = "\n\t"


class InertStream:
    """A text stream that writes ``inert(text, keep=KEPT)`` to the stream beneath.

    Parameters
    ----------
    raw : text stream
        The stream written to (``sys.stdout``, ``sys.stderr``, a test runner's capture).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> InertStream(out).write("arm\\u202e \\x1b[31mred\\r\\n")
    15
    >>> out.getvalue()
    'arm\\\\u202e \\\\u001b[31mred\\\\u000d\\n'
    """

    def __init__(self, raw):
        self.raw = raw

    def write(self, text: str) -> int:
        """Write ``text`` inert; returns ``len(text)`` (what the caller gave).

        Raises
        ------
        TypeError
            ``text`` is not a str (bytes go to :attr:`buffer`).
        """
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.raw.write(inert(text, keep=KEPT))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return self.raw.closed

    @property
    def encoding(self):
        return getattr(self.raw, "encoding", "utf-8")

    @property
    def errors(self):
        return getattr(self.raw, "errors", "strict")

    @property
    def buffer(self):
        """The binary stream beneath: bytes written there pass unchanged."""
        return self.raw.buffer

    def __getattr__(self, name):
        # anything else a library asks of a stream (name, mode, line_buffering, reconfigure)
        # is the stream beneath's
        if name == "raw":
            raise AttributeError(name)
        return getattr(self.raw, name)


def raw(stream):
    """The stream beneath an :class:`InertStream` (any other stream as it is)."""
    return stream.raw if isinstance(stream, InertStream) else stream


@contextmanager
def inert_output():
    """``sys.stdout`` and ``sys.stderr`` as :class:`InertStream` while the block runs.

    Restored afterwards, also when the block raises or exits; entered twice (a command run
    from a test's command runner inside another), the streams are wrapped once.
    """
    out, err = sys.stdout, sys.stderr
    if out is not None and not isinstance(out, InertStream):
        sys.stdout = InertStream(out)
    if err is not None and not isinstance(err, InertStream):
        sys.stderr = InertStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def console(*, stderr: bool = False, **kwargs):
    """A :class:`rich.console.Console` on stdout (or stderr) that shows outside text inert.

    It writes to the stream beneath an :class:`InertStream` (so rich's own styling reaches
    a terminal) and makes every string it renders inert first (:func:`relgrade.text.inert`,
    newlines kept), a cell's width measured on what is shown; every text segment it emits
    is made inert again, its control segments (cursor moves of a progress bar) untouched.

    Parameters
    ----------
    stderr : bool, default False
        Print on stderr rather than stdout.
    **kwargs
        Passed to :class:`rich.console.Console` (``width``, ``highlight``).

    Returns
    -------
    rich.console.Console

    Examples
    --------
    >>> import io, sys
    >>> c = console(width=40)
    >>> c.file = io.StringIO()
    >>> c.print("arm\\u202e x\\x1b[2J", highlight=False)
    >>> c.file.getvalue()
    'arm\\\\u202e x\\\\u001b[2J\\n'
    """
    from rich.console import Console
    from rich.segment import Segment

    class InertConsole(Console):
        def render_str(self, text, **kw):
            return super().render_str(inert(text, keep="\n"), **kw)

        def render(self, renderable, options=None):
            for seg in super().render(renderable, options):
                if seg.control or seg.text.isprintable() or seg.text == "\n":
                    yield seg
                else:
                    yield Segment(inert(seg.text, keep="\n"), seg.style, seg.control)

    stream = raw(sys.stderr if stderr else sys.stdout)
    return InertConsole(file=stream, **kwargs)
