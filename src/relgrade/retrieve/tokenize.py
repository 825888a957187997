"""The lexical arms' tokenizer: identifiers split at snake_case and CamelCase boundaries.

Code and prose share one vocabulary this way: a query that says "help formatter" matches a
chunk defining ``HelpFormatter``, and a query that says ``get_params`` still prefers the chunk
that spells the identifier whole.
"""

from __future__ import annotations

import re

#: a word: letters and digits, joined by underscores (leading/trailing underscores dropped)
_WORD = re.compile(r"[^\W_]+(?:_+[^\W_]+)*")

#: a small English stopword list (function words only; no programming keywords, so
#: ``if``, ``not``, ``none`` and ``for``-loops stay searchable where they are meaningful)
STOPWORDS = frozenset("""
a an and are as at be been but by do does did can could from has have had how i in into is
it its me my of on or our so than that the their them then there these they this those to
was we were what when where which who whom why will with would you your
""".split())


def tokenize(text: str) -> list[str]:
    """Split text into lowercase terms, keeping identifiers whole and in parts.

    Parameters
    ----------
    text : str
        A query, or a chunk's header and text.

    Returns
    -------
    list of str
        Terms in order of appearance, repeats kept (term frequency counts them). For each
        word: the whole word lowercased, then, when it has several parts, each part.

    Notes
    -----
    - A word is a run of letters and digits, possibly joined by underscores; everything
      else (punctuation, operators, whitespace) separates words and is dropped.
    - Parts come from splitting at underscores and at CamelCase boundaries:
      ``get_params`` → ``get_params``, ``get``, ``params``; ``HelpFormatter`` →
      ``helpformatter``, ``help``, ``formatter``; ``HTTPServer`` → ``httpserver``,
      ``http``, ``server``.
    - Stopwords (:data:`STOPWORDS`) are dropped, whole words and parts alike, as are
      one-character terms other than digits.

    Examples
    --------
    >>> tokenize("How does get_params() work?")
    ['get_params', 'get', 'params', 'work']
    >>> tokenize("class HelpFormatter:")
    ['class', 'helpformatter', 'help', 'formatter']
    """
    out: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        parts = [p.lower() for piece in word.split("_") if piece for p in camel_parts(piece)]
        whole = word.lower()
        if _keep(whole):
            out.append(whole)
        if len(parts) > 1:
            out.extend(p for p in parts if _keep(p))
    return out


def camel_parts(word: str) -> list[str]:
    """Split a word without underscores at case and digit boundaries.

    A boundary falls between a lower-case and an upper-case letter (``helpFormatter``),
    between a letter and a digit (``utf8``), and before the last capital of an upper-case
    run that a lower-case letter follows (``HTTPServer`` → ``HTTP``, ``Server``). Any
    script with case works (``str.isupper``/``str.islower``).

    Examples
    --------
    >>> camel_parts("HTTPServer")
    ['HTTP', 'Server']
    >>> camel_parts("utf8")
    ['utf', '8']
    """
    parts = []
    start = 0
    for i in range(1, len(word)):
        a, b = word[i - 1], word[i]
        after = word[i + 1] if i + 1 < len(word) else ""
        if ((a.islower() and b.isupper()) or (a.isdigit() != b.isdigit())
                or (a.isupper() and b.isupper() and after.islower())):
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts


def _keep(term: str) -> bool:
    return term not in STOPWORDS and (len(term) > 1 or term.isdigit())
