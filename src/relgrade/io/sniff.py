"""A file's head: its first bytes, and what they tell about its layout.

The readers of runs (:mod:`relgrade.io.runtable`, :mod:`relgrade.io.trec`) and of judgments
(:mod:`relgrade.io.judgments`) choose how to parse a file from its first bytes; they read
them here, so a missing file or a folder is refused with the same words by each.
"""

from __future__ import annotations

from pathlib import Path

from relgrade.errors import InputError
from relgrade.io.files import BOM


def read_head(path, size: int = 1 << 16) -> bytes:
    """The first ``size`` bytes of a file (fewer when the file is shorter).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    size : int, default 65536
        How many bytes to read at the most.

    Returns
    -------
    bytes
        Of length ``min(size, file size)``, a byte-order mark included.

    Raises
    ------
    InputError
        ``file not found``, or ``is a folder, not a file``, naming the path.
    """
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except FileNotFoundError:
        raise InputError("file not found", path=Path(path)) from None
    except IsADirectoryError:
        raise InputError("is a folder, not a file", path=Path(path)) from None


def field_separator(head: bytes) -> tuple[bytes, tuple[bytes, ...]] | None:
    """The separator of a TREC file that Arrow's CSV reader could split, told by its first line.

    Parameters
    ----------
    head : bytes
        The file's first bytes (see :func:`read_head`), a byte-order mark included.

    Returns
    -------
    (bytes, tuple of bytes) or None
        ``(b"\\t", (b" ", b"\\x0b", b"\\x0c"))`` when the first line holds a tab, else
        ``(b" ", (b"\\t", b"\\x0b", b"\\x0c"))``: the separator, and the bytes that must not
        stand inside a field split on it (the other separator, vertical tab, form feed).
        ``None`` when ``head`` holds nothing but a byte-order mark.

    Examples
    --------
    >>> field_separator(b"q1 Q0 c7 1 2.5 bm25\\n")
    (b' ', (b'\\t', b'\\x0b', b'\\x0c'))
    >>> field_separator(b"\\xef\\xbb\\xbfq1\\t0\\tc7\\t2")[0]
    b'\\t'
    >>> field_separator(b"") is None
    True
    """
    start = len(BOM) if head.startswith(BOM) else 0
    if len(head) <= start:
        return None
    newline = head.find(b"\n", start)
    first = head[start: newline if newline >= 0 else len(head)]
    delim = b"\t" if b"\t" in first else b" "
    return delim, (b" " if delim == b"\t" else b"\t", b"\x0b", b"\x0c")
