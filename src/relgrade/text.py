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
    if text.isprintable() and not any(is_hidden(ch) for ch in text):
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
