"""The query set: validation, canonical form and manifest.

A query is ``query_id`` (str), ``query`` (the text a user typed), ``group`` (the stratum the
audit is balanced over, one of params ``queries.groups``) and an optional traffic ``weight``
(a positive finite number, 1.0 when absent or blank). The validated table is sorted by
``query_id`` and has exactly these four columns; its sha256 is taken over a canonical JSON
Lines form so that the same queries give the same hash from any input format.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np
import pandas as pd

from relgrade.canonical import jsonl_bytes, sha256_bytes
from relgrade.errors import InputError
from relgrade.schema import QUERIES, as_id, is_missing, shown

#: Columns an input must have (``weight`` is optional).
REQUIRED_COLUMNS = ["query_id", "query", "group"]

# TREC runs and qrels split their lines on whitespace: an id holding any can be read in but
# never written to, or matched in, a run.
_WHITESPACE = re.compile(r"\s")


def _weight(value, *, path, line, item) -> float:
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return 1.0
    if isinstance(value, (bool, np.bool_)):
        raise InputError("weight must be a positive number", path=path, line=line, item=item,
                         found=shown(value))
    try:
        w = float(value)
    except (TypeError, ValueError):
        raise InputError("weight must be a positive number", path=path, line=line, item=item,
                         found=shown(value)) from None
    if not math.isfinite(w) or w <= 0:
        raise InputError("weight must be a positive finite number", path=path, line=line,
                         item=item, found=shown(value))
    return w


def validate_queries(table: pd.DataFrame, *, groups: Sequence[str], path=None,
                     lines: Sequence[int] | None = None) -> pd.DataFrame:
    """Check a queries table and return it in canonical form.

    Parameters
    ----------
    table : pandas.DataFrame of shape (n_queries, >= 3)
        Columns ``query_id``, ``query``, ``group`` and optionally ``weight``, as read from
        the input file (ids may be strings or integers; other columns are ignored).
    groups : sequence of str
        The allowed query groups (params ``queries.groups``).
    path : str or os.PathLike, optional
        The input file, named in errors.
    lines : sequence of int of length n_queries, optional
        The file line of each row (see :func:`relgrade.io.files.read_rows`); by default the
        1-based row number, which is the line for a header-less file without blank lines.

    Returns
    -------
    pandas.DataFrame of shape (n_queries, 4)
        Columns ``query_id`` (str), ``query`` (str), ``group`` (str), ``weight`` (float64,
        1.0 where absent), sorted by ``query_id``, with a fresh RangeIndex. The input is not
        modified.

    Raises
    ------
    InputError
        A required column is missing; an id is missing, empty or not a string/integer; an id
        holds whitespace (a space, tab or line break anywhere in it); a query id appears twice (both lines are named); a query text is empty; a group is
        not one of ``groups``; a weight is not a positive finite number; the table is empty.
        Each error names the file, the line and the query id.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"queries table is missing column(s) {', '.join(missing)}", path=path,
                         found="columns " + ", ".join(map(str, table.columns)))
    if len(table) == 0:
        raise InputError("queries table has no rows", path=path)
    if lines is None:
        lines = range(1, len(table) + 1)
    lines = list(lines)
    if len(lines) != len(table):
        raise ValueError("lines must give one line number per row")
    allowed = [str(g) for g in groups]
    allowed_set = set(allowed)
    has_weight = "weight" in table.columns
    weights = table["weight"].tolist() if has_weight else [None] * len(table)

    seen: dict[str, int] = {}
    rows = []
    for line, qid, text, group, weight in zip(lines, table["query_id"].tolist(),
                                              table["query"].tolist(),
                                              table["group"].tolist(), weights):
        qid = as_id(qid, "query_id", path=path, line=line)
        if _WHITESPACE.search(qid):
            raise InputError("query_id must not contain whitespace (TREC files split on it)",
                             path=path, line=line, found=shown(qid),
                             fix="Remove the spaces, tabs or line breaks from the id")
        if qid in seen:
            raise InputError(f"duplicate query id (first on line {seen[qid]})", path=path,
                             line=line, item=qid,
                             fix="Give every query its own id")
        seen[qid] = line
        if is_missing(text) or not isinstance(text, str) or not text.strip():
            raise InputError("query text is empty", path=path, line=line, item=qid,
                             found=None if is_missing(text) else shown(text))
        group = "" if is_missing(group) else str(group)
        if group not in allowed_set:
            raise InputError(f"group is not one of the query groups ({', '.join(allowed)})",
                             path=path, line=line, item=qid, found=shown(group),
                             fix="Correct the group, or add it to queries.groups in the params file")
        rows.append((qid, text, group, _weight(weight, path=path, line=line, item=qid)))

    out = pd.DataFrame(rows, columns=QUERIES)
    out["weight"] = out["weight"].astype("float64")
    return out.sort_values("query_id", kind="stable").reset_index(drop=True)


def queries_sha256(queries: pd.DataFrame) -> str:
    """sha256 of the validated queries table's canonical bytes.

    Parameters
    ----------
    queries : pandas.DataFrame
        A table returned by :func:`validate_queries`.

    Returns
    -------
    str
        64 hex digits: sha256 of canonical JSON Lines (:func:`relgrade.canonical.jsonl_bytes`) of
        rows ``{"query_id", "query", "group", "weight"}``, sorted by ``query_id``.

    Notes
    -----
    Hashing a canonical text form rather than the Parquet file keeps the hash independent
    of the Parquet writer's version and of the input file's format.
    """
    ordered = queries.sort_values("query_id", kind="stable")
    rows = ({"query_id": q, "query": t, "group": g, "weight": float(w)}
            for q, t, g, w in zip(ordered["query_id"], ordered["query"], ordered["group"],
                                  ordered["weight"]))
    return sha256_bytes(jsonl_bytes(rows))


def queries_manifest(queries: pd.DataFrame, *, groups: Sequence[str]) -> dict:
    """The queries manifest: ``{"sha256", "queries", "groups"}``.

    Parameters
    ----------
    queries : pandas.DataFrame
        A table returned by :func:`validate_queries`.
    groups : sequence of str
        The query groups in params order; each gets its count (0 when unused).

    Returns
    -------
    dict
        ``sha256`` (:func:`queries_sha256`), ``queries`` (int, the number of queries) and
        ``groups`` (dict group → number of queries).
    """
    counts = queries["group"].value_counts()
    return {
        "sha256": queries_sha256(queries),
        "queries": int(len(queries)),
        "groups": {str(g): int(counts.get(str(g), 0)) for g in groups},
    }
