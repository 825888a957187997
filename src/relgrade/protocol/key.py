"""The key: the key grader's grades of the whole pool, frozen, sorted and hashed.

The key holds one row per pool pair, ``(query_id, chunk_id, grade)``, taken from the key
grader (params ``grading.key_grader``) for the current round only. The auditor's grades never
enter it, not even on the audit queries: those queries would otherwise carry a different
grader than the rest. A query whose whole pool has no grade at or above ``relevant_min`` is
dropped and listed, since every arm would score 0 on it.

The key's hash
--------------
The canonical byte form of a key is one line per row, rows sorted by ``query_id`` and then
``chunk_id`` in Python string order (Unicode code point order), each line the JSON object
``{"query_id":"...","chunk_id":"...","grade":N}`` with the keys in that order, no spaces,
non-ASCII characters written as UTF-8 rather than escaped, and ids as JSON strings, followed
by a single LF. An empty key is zero bytes. ``key_sha256`` is the lowercase hex sha256 of
those bytes. The key file (params ``paths.key``) is written in exactly this form, so
``sha256sum key.jsonl`` reproduces the hash.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Mapping

import pandas as pd

from relgrade.canonical import canonical_json
from relgrade.errors import InputError, ProtocolError


def _sorted_rows(key: pd.DataFrame) -> list[tuple[str, str, int]]:
    rows = sorted(zip(key["query_id"].astype(str), key["chunk_id"].astype(str),
                      (int(g) for g in key["grade"])))
    for a, b in zip(rows, rows[1:]):
        if a[:2] == b[:2]:
            raise InputError("a key holds one grade per pair",
                             item=f"pair ({a[0]}, {a[1]})", found="two rows")
    return rows


def build_key(
    grades: pd.DataFrame,
    *,
    key_grader: str,
    round: int,
    pool: pd.DataFrame,
    relevant_min: int,
) -> tuple[pd.DataFrame, list[str]]:
    """Build the key from the key grader's grades of the pool.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table: columns ``query_id``, ``chunk_id``, ``grader``, ``round``,
        ``grade`` (at least), one row per (pair, grader, round).
    key_grader : str
        Whose grades make the key (params ``grading.key_grader``).
    round : int
        The grading round (params ``grading.round``).
    pool : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``: every pair the key must grade.
    relevant_min : int
        The lowest grade that counts as relevant (params ``scale.relevant_min``).

    Returns
    -------
    key : pandas.DataFrame of shape (n_pairs, 3)
        Columns ``query_id`` (str), ``chunk_id`` (str), ``grade`` (int64), sorted by
        (query_id, chunk_id) in Python string order, without the dropped queries.
    dropped_query_ids : list of str
        Queries whose whole pool has no grade >= ``relevant_min``, sorted.

    Raises
    ------
    InputError
        A pool pair lacks a grade from the key grader (the message says how many and in
        which queries); the key grader graded a pair outside the pool, or one pair twice; or
        no query is left after dropping.

    Notes
    -----
    Dropping follows the protocol: a query with nothing relevant in its pool scores 0 for
    every arm, and keeping it only pulls the arms' means towards each other.
    """
    mine = grades[(grades["grader"].astype(str) == key_grader)
                  & (grades["round"].astype("int64") == int(round))]
    rows = _sorted_rows(mine)
    have = {(q, c): g for q, c, g in rows}
    pool_pairs = sorted(zip(pool["query_id"].astype(str), pool["chunk_id"].astype(str)))
    pool_set = set(pool_pairs)
    outside = [p for p in have if p not in pool_set]
    if outside:
        q, c = outside[0]
        raise InputError("the key grader graded a pair outside the pool", item=f"pair ({q}, {c})",
                         found=f"{len(outside)} such pairs",
                         fix="Rerun the grades stage against the current pool")
    missing: dict[str, int] = {}
    for p in pool_pairs:
        if p not in have:
            missing[p[0]] = missing.get(p[0], 0) + 1
    if missing:
        n = sum(missing.values())
        shown = ", ".join(f"{q} ({k})" for q, k in list(missing.items())[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise InputError(f"{n} pool pairs lack a grade from the key grader, in "
                         f"{len(missing)} queries: {shown}{more}", item=key_grader,
                         fix=f"Grade them (`relgrade grade` grades only the missing pairs) "
                             f"for round {int(round)}")
    best: dict[str, int] = {}
    for q, _, g in rows:
        best[q] = max(best.get(q, g), g)
    dropped = sorted(q for q, g in best.items() if g < relevant_min)
    kept = [r for r in rows if r[0] not in set(dropped)]
    if not kept:
        raise InputError("no query has a chunk graded relevant: the key would be empty",
                         item=key_grader, found=f"{len(dropped)} queries dropped",
                         fix="Check the grades and params scale.relevant_min")
    key = pd.DataFrame({
        "query_id": pd.Series([r[0] for r in kept], dtype="str"),
        "chunk_id": pd.Series([r[1] for r in kept], dtype="str"),
        "grade": pd.Series([r[2] for r in kept], dtype="int64"),
    })
    return key, dropped


def key_bytes(key: pd.DataFrame) -> bytes:
    """The key's canonical byte form (see the module docstring).

    Parameters
    ----------
    key : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``grade``; any row order.

    Returns
    -------
    bytes
        One LF-terminated UTF-8 JSON line per row, in (query_id, chunk_id) order.

    Raises
    ------
    InputError
        Two rows for one pair.

    Examples
    --------
    >>> key_bytes(pd.DataFrame({"query_id": ["q2", "q1"], "chunk_id": ["7", "é"],
    ...                         "grade": [0, 2]}))
    b'{"query_id":"q1","chunk_id":"\\xc3\\xa9","grade":2}\\n{"query_id":"q2","chunk_id":"7","grade":0}\\n'
    """
    return "".join(
        canonical_json({"query_id": q, "chunk_id": c, "grade": g}) + "\n"
        for q, c, g in _sorted_rows(key)
    ).encode("utf-8")


def key_sha256(key: pd.DataFrame) -> str:
    """The key's hash: hex sha256 of :func:`key_bytes` (64 lowercase hex characters)."""
    return hashlib.sha256(key_bytes(key)).hexdigest()


def qrels_frame(key: pd.DataFrame) -> pd.DataFrame:
    """The key in canonical order as a qrels table (``query_id``, ``chunk_id``, ``grade``)."""
    rows = _sorted_rows(key)
    return pd.DataFrame({
        "query_id": pd.Series([r[0] for r in rows], dtype="str"),
        "chunk_id": pd.Series([r[1] for r in rows], dtype="str"),
        "grade": pd.Series([r[2] for r in rows], dtype="int64"),
    })


def require_gate(gate: Mapping | None, *, source) -> None:
    """Refuse to freeze a key unless the agreement gate passed.

    Raises
    ------
    ProtocolError
        ``gate`` is ``None`` (no gate record) or its ``passed`` is not ``true``.
    """
    if gate is None:
        raise ProtocolError(f"no key before the gate passes: {source} does not exist; run the "
                            "agreement and gate stages first")
    passed = gate.get("passed") if isinstance(gate, Mapping) else None
    if passed is not True:
        raise ProtocolError(f"no key before the gate passes: {source} records passed="
                            f"{json.dumps(passed)}; revise the rubric or intents and regrade")


def grader_setup(grades_manifest: Mapping) -> dict:
    """Each grader's setup from the grades manifest, without the coverage details."""
    keep = ("kind", "family", "model", "person", "role", "rubric_version", "round", "file",
            "sha256", "rows")
    return {name: {k: e[k] for k in keep if k in e}
            for name, e in grades_manifest.get("graders", {}).items()}


def build_record(
    key: pd.DataFrame,
    *,
    frozen_at: str,
    rubric_version: str,
    round: int,
    manifests: Mapping[str, Mapping],
    pool_sha256: str,
    dropped_queries: Iterable[str],
    post_hoc: bool,
    deviations: Iterable[str] = (),
) -> dict:
    """The key's record: what it is, when it was frozen, from what, and how it departs.

    Parameters
    ----------
    key : pandas.DataFrame
        The key (see :func:`build_key`).
    frozen_at : str
        UTC time, ISO 8601.
    rubric_version : str
        Params ``grading.rubric_version``.
    round : int
        Params ``grading.round``.
    manifests : mapping of str to mapping
        The stages' manifests the key was built from: ``corpus``, ``queries`` and
        ``intents`` (their ``sha256`` is recorded), ``pool`` (its ``pool_version``) and
        ``grades`` (the grader setup and each grade file's ``sha256``).
    pool_sha256 : str
        The pool table's file hash.
    dropped_queries : iterable of str
        Queries left out of the key (see :func:`build_key`).
    post_hoc : bool
        Whether the key is a post-hoc correction of one already used for metrics.
    deviations : iterable of str, optional
        Departures from the protocol (params ``grading.deviations``), carried with the key
        so every number built on it has them.

    Returns
    -------
    dict
        ``key_sha256``, ``frozen_at``, ``rubric_version``, ``round``, ``grader_setup``,
        ``pool_version``, ``input_sha256`` (``corpus``, ``queries``, ``intents``, ``pool``,
        ``grades``: grader → file hash), ``dropped_queries``, ``post_hoc``, ``pairs`` and
        ``queries`` in the key, ``deviations``; in that order.

    Raises
    ------
    KeyError
        A manifest named above is missing from ``manifests``.
    """
    grades = manifests["grades"]
    inputs = {name: manifests[name].get("sha256") for name in ("corpus", "queries", "intents")}
    inputs["pool"] = pool_sha256
    inputs["grades"] = {g: e["sha256"] for g, e in grades["graders"].items() if e["sha256"]}
    return {
        "key_sha256": key_sha256(key),
        "frozen_at": frozen_at,
        "rubric_version": str(rubric_version),
        "round": int(round),
        "grader_setup": grader_setup(grades),
        "pool_version": manifests["pool"]["pool_version"],
        "input_sha256": inputs,
        "dropped_queries": sorted(dropped_queries),
        "post_hoc": bool(post_hoc),
        "pairs": int(len(key)),
        "queries": int(key["query_id"].nunique()),
        "deviations": [str(d) for d in deviations],
    }


def qrels_text(key: pd.DataFrame) -> str:
    """The key as TREC qrels text, ``query_id 0 chunk_id grade`` per line, canonical order."""
    return "".join(f"{q} 0 {c} {g}\n" for q, c, g in _sorted_rows(key))
