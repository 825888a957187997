"""relgrade's exceptions.

Every error that a user's input can cause is a :class:`RelgradeError`; its message names
the file, the line or id, the rule that was broken and what was found, and where it can,
how to fix it. The CLI and the stage scripts print it as ``Error: ...`` and exit 1.
"""

from __future__ import annotations

from relgrade.text import inert


class RelgradeError(Exception):
    """Base class of every error relgrade raises on purpose."""


class InputError(RelgradeError):
    """Bad input: a file, a row or a parameter breaks one of relgrade's rules.

    Parameters
    ----------
    rule : str
        The rule that was broken, in plain words ("duplicate chunk in one ranked list").
    path : str or os.PathLike, optional
        The file the bad input came from.
    line : int, optional
        1-based line number within ``path``.
    column : int, optional
        1-based column within ``line``, printed after it (``path:line:column``).
    item : str, optional
        The id (query id, chunk id, pair, grader) the error is about.
    found : str, optional
        What was found instead, printed as ``(found FOUND)``; a text that already starts
        with the word (a parser's own message, "found character '\\t' that cannot start
        any token") is printed as it is, ``(FOUND)``, so the word is not doubled.
    fix : str, optional
        How to fix it.

    Examples
    --------
    >>> str(InputError("grade outside the scale 0-2", path="g.jsonl", line=3, found="3"))
    'g.jsonl:3: grade outside the scale 0-2 (found 3)'
    >>> str(InputError("not valid YAML", path="p.yaml", line=4, column=19))
    'p.yaml:4:19: not valid YAML'
    >>> str(InputError("not valid YAML", path="p.yaml", found="found undefined alias 'a'"))
    "p.yaml: not valid YAML (found undefined alias 'a')"

    Text from outside (path, item, found) is shown inert (:func:`relgrade.text.inert`):

    >>> print(InputError("no such grader", item="a\\u202eb", path="x\\ny"))
    x\\u000ay: a\\u202eb: no such grader
    """

    def __init__(self, rule, *, path=None, line=None, item=None, found=None, fix=None,
                 column=None):
        self.rule = rule
        self.path = None if path is None else str(path)
        self.line = line
        self.column = column
        self.item = item
        self.found = found
        self.fix = fix
        super().__init__(self._message())

    def _message(self) -> str:
        where = ""
        if self.path is not None:
            where = inert(self.path)
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        elif self.line is not None:
            where = f"line {self.line}" + (
                f", column {self.column}" if self.column is not None else "") + ": "
        msg = where
        if self.item is not None:
            msg += f"{inert(str(self.item))}: "
        msg += self.rule
        if self.found is not None:
            msg += f" {found_clause(inert(str(self.found)))}"
        if self.fix:
            msg += f". {self.fix}"
        return msg


def found_clause(found: str) -> str:
    """What was found, in parentheses, the word "found" said once.

    Parameters
    ----------
    found : str
        What was found; a parser's own message may start with the word already
        (PyYAML's "found character '\\t' that cannot start any token").

    Returns
    -------
    str
        ``(found FOUND)``, or ``(FOUND)`` when ``found`` starts with "found ".

    Examples
    --------
    >>> found_clause("3"), found_clause("found unexpected end of stream")
    ('(found 3)', '(found unexpected end of stream)')
    """
    return f"({found})" if found.startswith("found ") else f"(found {found})"


class ProtocolError(RelgradeError):
    """A protocol step was attempted out of order or against a rule of the protocol.

    Examples: packets before the intent table is reviewed, a key after a failed gate,
    a grade changed after metrics were seen for the same pool, rubric and round (void).
    """


class PendingWork(ProtocolError):
    """Graders still owe pairs: the pipeline stops here until they are graded.

    Not a failure of the data or the code: the message names what is owed and the command
    that does it; a stage exits with :data:`PENDING_EXIT` so that DVC stops the pipeline.
    """


#: The exit status of a stage that stopped at pending work (``Pending: ...`` on stderr).
PENDING_EXIT = 3


class StorageError(ProtocolError):
    """The disk refused a write (no space left, a file-size limit): nothing was acknowledged.

    Raised by relgrade's writers after they have cut the file back to its last whole line,
    so what was recorded before stays readable and the refused write left nothing behind.
    """


class GateFailed(RelgradeError):
    """The agreement gate failed; ``lines`` holds one line per failing measure, ``advice``
    what to do about it, ``warnings`` what the gate warns of besides (relaxed gates, the
    family rule): neither advice nor a warning is a failure."""

    def __init__(self, lines, *, advice=(), warnings=()):
        self.lines, self.advice, self.warnings = list(lines), list(advice), list(warnings)
        super().__init__("agreement gate failed:\n" + "\n".join(
            [*self.lines, *(f"advice: {a}" for a in self.advice),
             *(f"warning: {w}" for w in self.warnings)]))
