"""Text that is not relgrade's own, made inert before it is shown.

Chunk text, grade and correction reasons, names, dispute text, group names and file names
come from outside. Shown raw, a bidirectional override (U+202E) reorders what a reader
sees, a terminal escape (ESC, U+001B) recolours or clears a terminal, a newline splits a
Markdown paragraph or a one-line message. :func:`inert` renders each such character
visibly, as ``\\uXXXX``; every face (the grading page, the reports, ``status``, error
messages) shows outside text through it.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories rendered visibly: controls (C0, DEL, C1), format characters (bidi
#: embeddings, overrides and isolates, zero-width characters, the BOM), line and paragraph
#: separators, and surrogates (text that was not valid UTF-8).
VISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def is_hidden(ch: str) -> bool:
    """Whether the one character ``ch`` is rendered as an escape by :func:`inert`.

    Examples
    --------
    >>> is_hidden("\\u202e"), is_hidden("\\x1b"), is_hidden("é"), is_hidden(" ")
    (True, True, False, False)
    """
    return unicodedata.category(ch) in VISIBLE_CATEGORIES


def inert(text: str, *, keep: str = "") -> str:
    """``text`` with every control, format, separator and surrogate character made visible.

    Parameters
    ----------
    text : str
        Text from outside relgrade.
    keep : str, default ""
        Characters left as they are (``"\\n\\t"`` for a chunk's code, shown in a ``<pre>``).

    Returns
    -------
    str
        ``text`` with each such character replaced by ``\\u`` and its four (or more) hex
        digits; every other character unchanged.

    Examples
    --------
    >>> inert("abc\\u202edef")
    'abc\\\\u202edef'
    >>> inert("red \\x1b[31m, two\\nlines")
    'red \\\\u001b[31m, two\\\\u000alines'
    >>> inert("a\\tb\\nc", keep="\\n\\t")
    'a\\tb\\nc'
    """
    # fast path: a printable str holds no character of VISIBLE_CATEGORIES (str.isprintable
    # is False for Cc, Cf, Cs, Zl, Zp, and for other spaces, which fall to the slow path)
    probe = text
    for ch in keep:
        probe = probe.replace(ch, "")
    if probe.isprintable():
        return text
    return "".join(f"\\u{ord(ch):04x}" if ch not in keep and is_hidden(ch) else ch
                   for ch in text)


def hidden_at(text: str) -> int | None:
    """The index of the first character :func:`inert` would escape, or None.

    Examples
    --------
    >>> hidden_at("plain"), hidden_at("a\\nb")
    (None, 1)
    """
    for i, ch in enumerate(text):
        if is_hidden(ch):
            return i
    return None


def markdown_text(text: str) -> str:
    """``text`` for one line or one table cell of Markdown: inert, one line, no markup.

    :func:`inert` (a newline becomes ``\\u000a``, so it cannot split a paragraph or a row),
    then ``|`` escaped (a table cell stays one cell) and ``<``, ``>`` written as entities
    (no HTML tag reaches a Markdown renderer).

    Examples
    --------
    >>> markdown_text("Ana\\nBen | <script>x</script>")
    'Ana\\\\u000aBen \\\\| &lt;script&gt;x&lt;/script&gt;'
    """
    return (inert(str(text)).replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;"))


def check_free_text(text: str, *, limit: int, what: str) -> str:
    """A free-text field a user sets (a reason, a name, a group name), checked.

    Parameters
    ----------
    text : str
        The text.
    limit : int
        The most characters allowed (grade reasons: 300).
    what : str
        The field, named in the error (``"--reason"``, ``"a group name"``).

    Returns
    -------
    str
        ``text`` stripped of outer whitespace.

    Raises
    ------
    ValueError
        Longer than ``limit`` characters, or not valid Unicode (a lone surrogate); the
        message names ``what``, the rule and what was found (shown inert). Callers raise it
        on as their own :class:`~relgrade.errors.InputError` with the file or option.

    Examples
    --------
    >>> check_free_text("  fine ", limit=10, what="--by")
    'fine'
    """
    text = str(text).strip()
    if len(text) > limit:
        raise ValueError(f"{what} longer than {limit} characters (found {len(text)} "
                         "characters). Shorten it")
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            raise ValueError(f"{what} is not valid Unicode text (found \\u{ord(ch):04x} at "
                             f"character {i + 1})")
    return text
