"""Reading a query log: the input of query sampling (``relgrade queries sample``, stage ``sample``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from relgrade.errors import InputError
from relgrade.io.files import read_lines, read_rows


def read_query_log(path) -> tuple[pd.DataFrame, list[int] | None]:
    """A query log and the file line of each row.

    Parameters
    ----------
    path : str or os.PathLike
        ``.tsv``/``.tab`` (a header row with ``query`` and ``count``), ``.parquet`` or
        ``.jsonl`` (columns ``query`` and ``count``); any other extension: one issued query
        per line, blank lines skipped.

    Returns
    -------
    log : pandas.DataFrame
        ``query`` (and ``count`` for the table formats), as read; checked by
        :func:`relgrade.query_sampling.strata`.
    lines : list of int or None
        The 1-based file line of each row; ``None`` for Parquet.

    Raises
    ------
    InputError
        The file is missing or unreadable, or a table lacks ``query`` or ``count`` (the
        message says how to give a one-query-per-line log instead).
    """
    path = Path(path)
    if path.suffix.lower() in (".tsv", ".tab", ".parquet", ".jsonl", ".ndjson"):
        try:
            return read_rows(path, ["query", "count"])
        except InputError as e:
            if e.rule.startswith("missing column"):
                what = ("a header row with query and count"
                        if path.suffix.lower() in (".tsv", ".tab") else "query and count columns")
                raise InputError(e.rule, path=path, found=e.found,
                                 fix=f"A {path.suffix.lower()} log needs {what}; give a log of "
                                     "one query per line another extension (.txt)") from None
            raise
    lines = read_lines(path)
    numbers = [i + 1 for i, text in enumerate(lines) if text.strip()]
    return pd.DataFrame({"query": [lines[i - 1] for i in numbers]}, dtype=object), numbers
