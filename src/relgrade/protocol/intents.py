"""The intent table: one locked line per query saying what it asks, frozen and reviewed.

Graders disagree most on short keyword queries, because each one imagines a different asker.
So before any pool is opened, every query gets exactly one intent line, a single reading
(never "X or Y"), which every grader and the auditor receive verbatim. The table is hashed
over a canonical form; a reviewer (the auditor) reads it and signs a review record that
carries that hash. The intents stage freezes the table only when the record's hash matches,
and the packets stage refuses to build a packet unless the frozen table still matches the
reviewed hash (protocol invariant 3).
"""

from __future__ import annotations

import re
from typing import Sequence

import pandas as pd

from relgrade.canonical import jsonl_bytes, sha256_bytes
from relgrade.errors import InputError, PendingWork, ProtocolError
from relgrade.schema import INTENTS, as_id, is_missing

#: What the review record must contain (params ``intents.review``).
REVIEW_KEYS = ("reviewer", "table_sha256", "reviewed_at", "flagged")

REVIEW_FIX = "Run: relgrade intents review --reviewer NAME"

# Wording that offers the grader more than one reading, checked in this order. A slash
# counts only between two plain words ("read/write"), not inside a path ("src/core.py").
_ALTERNATIVES = [
    (re.compile(r"\band\s*/\s*or\b", re.IGNORECASE), "and/or"),
    (re.compile(r"\beither\b", re.IGNORECASE), "either"),
    (re.compile(r"\bor\b", re.IGNORECASE), "or"),
    (re.compile(r"(?<![\w./\\-])[A-Za-z]+/[A-Za-z]+(?![\w./\\-])"), "/"),
]


def _count_text(n: int, ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:5])
    return shown + (f" and {n - 5} more" if n > 5 else "")


def validate_intents(table: pd.DataFrame, *, queries: pd.DataFrame, path=None,
                     lines: Sequence[int] | None = None) -> pd.DataFrame:
    """Check an intent table against the query set and return it in canonical form.

    Parameters
    ----------
    table : pandas.DataFrame of shape (n_rows, >= 3)
        Columns ``query_id``, ``query``, ``intent`` as read from the input file. Not
        modified.
    queries : pandas.DataFrame
        The validated queries table (:func:`relgrade.protocol.queries.validate_queries`).
    path : str or os.PathLike, optional
        The intent file, named in errors.
    lines : sequence of int of length n_rows, optional
        The file line of each row (:func:`relgrade.io.files.read_rows`); by default the
        1-based row number.

    Returns
    -------
    pandas.DataFrame of shape (n_queries, 3)
        ``query_id``, ``query``, ``intent`` (all str), one row per query, sorted by
        ``query_id``. Surrounding whitespace of the intent is removed; ``query`` is the
        query set's text.

    Raises
    ------
    InputError
        A column is missing; a row's id is missing or empty; two rows give an intent for
        the same query (both lines named); an intent names a query that is not in the
        query set; its query text differs from the query set's; an intent is empty; a
        query has no intent (the error lists the ids).
    """
    missing = [c for c in INTENTS if c not in table.columns]
    if missing:
        raise InputError(f"intent table is missing column(s) {', '.join(missing)}", path=path,
                         found="columns " + ", ".join(map(str, table.columns)))
    if lines is None:
        lines = range(1, len(table) + 1)
    lines = list(lines)
    if len(lines) != len(table):
        raise ValueError("lines must give one line number per row")
    known = dict(zip(queries["query_id"].astype(str), queries["query"]))

    seen: dict[str, int] = {}
    rows = []
    for line, qid, text, intent in zip(lines, table["query_id"].tolist(),
                                       table["query"].tolist(), table["intent"].tolist()):
        qid = as_id(qid, "query_id", path=path, line=line)
        if qid in seen:
            raise InputError(f"two intents for one query (the first on line {seen[qid]})",
                             path=path, line=line, item=qid,
                             fix="Keep exactly one intent line per query")
        seen[qid] = line
        if qid not in known:
            raise InputError("intent for a query that is not in the query set", path=path,
                             line=line, item=qid)
        text = "" if is_missing(text) else str(text)
        if text.strip() != known[qid].strip():
            raise InputError("query text differs from the query set", path=path, line=line,
                             item=qid, found=repr(text), fix=f"Use the query text {known[qid]!r}")
        intent = "" if is_missing(intent) else str(intent).strip()
        if not intent:
            raise InputError("intent is empty", path=path, line=line, item=qid,
                             fix="Write one line saying what the query asks")
        rows.append((qid, known[qid], intent))

    lacking = sorted(set(known) - set(seen))
    if lacking:
        raise InputError(f"{len(lacking)} quer{'y has' if len(lacking) == 1 else 'ies have'} "
                         "no intent", path=path, item=_count_text(len(lacking), lacking),
                         fix="Add one intent line for each")
    out = pd.DataFrame(rows, columns=INTENTS)
    return out.sort_values("query_id", kind="stable").reset_index(drop=True)


def intents_bytes(table: pd.DataFrame) -> bytes:
    """The intent table's canonical bytes: JSON Lines ``{"query_id","query","intent"}``.

    Rows are sorted by ``query_id`` (code-point order) and written as
    :func:`relgrade.canonical.jsonl_bytes` writes them: no spaces, non-ASCII as UTF-8, LF ends.
    """
    ordered = table.sort_values("query_id", kind="stable")
    return jsonl_bytes({"query_id": str(q), "query": str(t), "intent": str(i)}
                       for q, t, i in zip(ordered["query_id"], ordered["query"],
                                          ordered["intent"]))


def intents_sha256(table: pd.DataFrame) -> str:
    """sha256 (64 hex digits) of :func:`intents_bytes`: the hash a review signs.

    Examples
    --------
    >>> t = pd.DataFrame({"query_id": ["q1"], "query": ["log rotation"],
    ...                   "intent": ["Why are logs rotated by size?"]})
    >>> len(intents_sha256(t))
    64
    """
    return sha256_bytes(intents_bytes(table))


def flag_alternatives(table: pd.DataFrame) -> pd.DataFrame:
    """Intents that seem to offer more than one reading, for the reviewer to look at.

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``query_id`` and ``intent``.

    Returns
    -------
    pandas.DataFrame of shape (n_flagged, 3)
        ``query_id``, ``intent``, ``why`` (the first wording found: ``"and/or"``,
        ``"either"``, ``"or"`` or ``"/"``), sorted by ``query_id``.

    Notes
    -----
    The protocol asks for one reading per query, never an "or". The check is a word
    match, so it can flag a harmless "or"; the reviewer decides. A slash is flagged only
    between two plain words ("read/write"), not inside a path or version ("src/core.py",
    "HTTP/2").
    """
    rows = []
    for qid, intent in zip(table["query_id"], table["intent"]):
        for pattern, why in _ALTERNATIVES:
            if pattern.search(str(intent)):
                rows.append((str(qid), str(intent), why))
                break
    out = pd.DataFrame(rows, columns=["query_id", "intent", "why"])
    return out.sort_values("query_id", kind="stable").reset_index(drop=True)


def review_record(table: pd.DataFrame, *, reviewer: str, reviewed_at: str) -> dict:
    """The record a reviewer signs for a validated intent table.

    Parameters
    ----------
    table : pandas.DataFrame
        A table returned by :func:`validate_intents`.
    reviewer : str
        Who reviewed it (the auditor, per the protocol); must not be empty.
    reviewed_at : str
        When, as an ISO 8601 UTC time.

    Returns
    -------
    dict
        ``{"reviewer", "table_sha256", "reviewed_at", "flagged"}``; ``flagged`` is the
        sorted list of query ids :func:`flag_alternatives` flagged.

    Raises
    ------
    InputError
        ``reviewer`` is empty.
    """
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise InputError("reviewer name is empty", fix="Pass --reviewer NAME")
    return {
        "reviewer": reviewer.strip(),
        "table_sha256": intents_sha256(table),
        "reviewed_at": str(reviewed_at),
        "flagged": flag_alternatives(table)["query_id"].tolist(),
    }


#: The review record ``relgrade init`` writes before anyone has reviewed the table: the
#: file exists (DVC needs the intents stage's deps to exist), and it signs nothing.
UNREVIEWED = {"reviewer": None, "table_sha256": None, "reviewed_at": None, "flagged": []}


def is_unreviewed(record) -> bool:
    """Whether ``record`` is no review yet: missing (None) or :data:`UNREVIEWED`.

    Examples
    --------
    >>> is_unreviewed(None), is_unreviewed(dict(UNREVIEWED)), is_unreviewed({"reviewer": "b"})
    (True, True, False)
    """
    return record is None or (isinstance(record, dict) and record.get("reviewer") is None
                              and record.get("table_sha256") is None)


def check_review(table: pd.DataFrame, record: dict | None, *, path=None,
                 fix: str = REVIEW_FIX) -> dict:
    """Freeze a validated intent table against its review record.

    Parameters
    ----------
    table : pandas.DataFrame
        A table returned by :func:`validate_intents`.
    record : dict or None
        The review record (params ``intents.review``); ``None`` when the file is missing.
    path : str or os.PathLike, optional
        The review record's file, named in errors.
    fix : str, optional
        What to run to review (the pending work's command).

    Returns
    -------
    dict
        The intents manifest ``{"sha256", "reviewer", "reviewed_at", "flagged"}``.

    Raises
    ------
    PendingWork
        No review yet (:func:`is_unreviewed`): work owed, naming ``fix``.
    ProtocolError
        The record lacks a key or a reviewer, or was signed for a different table (its
        ``table_sha256`` differs from :func:`intents_sha256` of ``table``).
    """
    where = f"{path}: " if path is not None else ""
    if is_unreviewed(record):
        raise PendingWork(f"{where}the intent table is not reviewed yet; intents are frozen "
                          f"only after review. {fix}")
    if not isinstance(record, dict) or any(k not in record for k in REVIEW_KEYS):
        raise ProtocolError(f"{where}the review record must have the keys "
                            f"{', '.join(REVIEW_KEYS)}. {REVIEW_FIX}")
    if not isinstance(record["reviewer"], str) or not record["reviewer"].strip():
        raise ProtocolError(f"{where}the review record names no reviewer. {REVIEW_FIX}")
    sha = intents_sha256(table)
    if record["table_sha256"] != sha:
        raise ProtocolError(f"{where}the intent table changed after it was reviewed "
                            f"(reviewed {str(record['table_sha256'])[:12]}, now {sha[:12]}). "
                            f"{REVIEW_FIX}")
    return {
        "sha256": sha,
        "reviewer": record["reviewer"],
        "reviewed_at": record["reviewed_at"],
        "flagged": list(record["flagged"]),
    }


def check_frozen(table: pd.DataFrame, manifest: dict | None, *, path=None) -> str:
    """Refuse unless the frozen intent table is the reviewed one; return its sha256.

    Parameters
    ----------
    table : pandas.DataFrame
        The frozen intent table (params ``paths.intents``).
    manifest : dict or None
        The intents manifest (params ``paths.intents_manifest``); ``None`` when missing.
    path : str or os.PathLike, optional
        The manifest's file, named in errors.

    Returns
    -------
    str
        The table's sha256, as packets record it.

    Raises
    ------
    ProtocolError
        No manifest, no reviewer in it, or its ``sha256`` differs from the table's: no
        packet may exist before the intent table is frozen and reviewed.
    """
    where = f"{path}: " if path is not None else ""
    if not isinstance(manifest, dict) or not str(manifest.get("reviewer") or "").strip():
        raise ProtocolError(f"{where}the intent table is not frozen and reviewed, so no "
                            f"packet can be made. {REVIEW_FIX}, then dvc repro intents")
    sha = intents_sha256(table)
    if manifest.get("sha256") != sha:
        raise ProtocolError(f"{where}the intent table differs from the reviewed one "
                            f"(reviewed {str(manifest.get('sha256'))[:12]}, now {sha[:12]}), "
                            f"so no packet can be made. {REVIEW_FIX}, then dvc repro intents")
    return sha
