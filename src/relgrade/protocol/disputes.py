"""Disputes: a grader says a pair's grade follows the rubric's words but the rubric is wrong.

A dispute never changes a grade. It is kept, open, until a rubric revision settles it (the
revision's ``settles:`` line, see :mod:`relgrade.protocol.rubric`): the disputes are reviewed
as a group, per rubric section, and the section gains a rule with an example, or is reworded
to the reading the grader argued for. Either way the revision names the section, so only the
grades under that section become stale.

A dispute as filed (the import file's line, the page's form), in this key order
(:data:`FILED`): ``query_id``, ``chunk_id``, ``grader`` (who disputes: a grader of params
``graders``), ``grade`` (the grade the grader gives, on the scale), ``section`` (the id of
the rubric section the grader read), ``reason`` (why the section is wrong here, at most
:data:`MAX_REASON_CHARS` characters). As recorded (:data:`RECORDED`): the same fields after
``id`` (``d-`` and 12 hex digits of the sha256 of the filed fields in canonical JSON, so one
dispute filed twice is one dispute), then ``rubric_version``, ``filed_at`` (UTC, ISO 8601)
and ``via`` (``page`` or ``import``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from relgrade.canonical import canonical_json, sha256_bytes
from relgrade.errors import InputError
from relgrade.text import check_free_text

#: Key order of a dispute as filed.
FILED = ("query_id", "chunk_id", "grader", "grade", "section", "reason")
#: Key order of a recorded dispute.
RECORDED = ("id", *FILED, "rubric_version", "filed_at", "via")
#: The longest dispute reason, in characters: a grade reason's cap
#: (params ``grading.max_reason_chars``' default).
MAX_REASON_CHARS = 300


def dispute_id(row: Mapping) -> str:
    """The id of a dispute: ``d-`` and 12 hex digits of the sha256 of its filed fields.

    Examples
    --------
    >>> dispute_id({"query_id": "q", "chunk_id": "c", "grader": "g", "grade": 1,
    ...             "section": "duplicates", "reason": "the copy answers too"})
    'd-49530e56417a'
    """
    return "d-" + sha256_bytes(canonical_json({k: row[k] for k in FILED})
                               .encode("utf-8"))[:12]


def check_dispute(row: Mapping, *, pool_pairs: set, graders: Iterable[str],
                  scale: Iterable[int], sections: Mapping, source, line=None) -> dict:
    """One filed dispute, checked; the filed fields in :data:`FILED` order.

    Parameters
    ----------
    row : mapping
        The filed dispute (keys exactly :data:`FILED`, in that order).
    pool_pairs : set of (str, str)
        The current pool's pairs.
    graders : iterable of str
        The experiment's graders (params ``graders``).
    scale : iterable of int
        Params ``scale.grades``.
    sections : mapping
        The current rubric's sections by id (:attr:`relgrade.protocol.rubric.Rubric.sections`).
    source : str or os.PathLike
        The file (or the page) named in errors; ``line`` its line.

    Returns
    -------
    dict

    Raises
    ------
    InputError
        Naming ``source``, ``line`` and the pair: other keys or another order; an id that is
        not a non-empty string; a pair outside the pool; an unknown grader; a grade off the
        scale; an unknown section id; an empty, over-long or invalid reason.

    Examples
    --------
    >>> row = {"query_id": "q", "chunk_id": "c", "grader": "g", "grade": 1,
    ...        "section": "duplicates", "reason": "  the copy answers too "}
    >>> check_dispute(row, pool_pairs={("q", "c")}, graders=["g"], scale=[0, 1, 2],
    ...               sections={"duplicates": None}, source="d.jsonl")["reason"]
    'the copy answers too'
    """
    keys = tuple(row.keys())
    item = None
    if isinstance(row.get("query_id"), str) and isinstance(row.get("chunk_id"), str):
        item = f"{row['query_id']}/{row['chunk_id']}"
    if keys != FILED:
        raise InputError("a dispute has exactly the keys " + ", ".join(FILED)
                         + ", in that order", path=source, line=line, item=item,
                         found=", ".join(keys) or "no keys")
    for k in ("query_id", "chunk_id", "grader", "section"):
        if not isinstance(row[k], str) or not row[k].strip():
            raise InputError(f"a dispute's {k} is a non-empty string", path=source, line=line,
                             item=item, found=repr(row[k]))
    pair = (row["query_id"], row["chunk_id"])
    if pair not in pool_pairs:
        raise InputError("a dispute is filed on a pair of the pool", path=source, line=line,
                         item=item, fix="Dispute only pairs the packets show")
    if row["grader"] not in set(graders):
        raise InputError("a dispute names a grader of params `graders`", path=source,
                         line=line, item=item, found=row["grader"])
    grade = row["grade"]
    values = sorted(int(g) for g in scale)
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in values:
        raise InputError("a dispute's grade is an integer on the scale "
                         + ", ".join(map(str, values)), path=source, line=line, item=item,
                         found=repr(grade))
    if row["section"] not in sections:
        raise InputError("unknown section id: a dispute names a section of the current "
                         "rubric", path=source, line=line, item=item, found=row["section"],
                         fix="See `relgrade disputes sections` for the ids")
    reason = row["reason"]
    if not isinstance(reason, str):
        raise InputError("a dispute's reason is a string", path=source, line=line, item=item,
                         found=repr(reason))
    try:
        reason = check_free_text(reason, limit=MAX_REASON_CHARS, what="a dispute's reason")
    except ValueError as e:
        raise InputError(str(e), path=source, line=line, item=item) from None
    if not reason:
        raise InputError("a dispute says why the rubric is wrong here: the reason is empty",
                         path=source, line=line, item=item)
    return {**{k: row[k] for k in FILED}, "reason": reason}


def recorded(filed: Mapping, *, rubric_version: str, filed_at: str, via: str) -> dict:
    """A checked dispute as recorded (:data:`RECORDED` order)."""
    return {"id": dispute_id(filed), **{k: filed[k] for k in FILED},
            "rubric_version": str(rubric_version), "filed_at": filed_at, "via": via}


def table(rows: Iterable[Mapping]) -> pd.DataFrame:
    """Recorded disputes as a table (:data:`RECORDED` columns), one row per id (the first
    filing of a dispute filed twice)."""
    out = pd.DataFrame(list(rows), columns=list(RECORDED))
    return out.drop_duplicates("id", keep="first").reset_index(drop=True)


def open_by_section(disputes: pd.DataFrame, *, settled: Iterable[str],
                    sections: Mapping) -> list[dict]:
    """The open disputes grouped by rubric section, for review as a group.

    Parameters
    ----------
    disputes : pandas.DataFrame
        :func:`table`'s output.
    settled : iterable of str
        The ids some revision of the rubric's chain settled.
    sections : mapping
        The current rubric's sections by id (their order is the listing's).

    Returns
    -------
    list of dict
        One per section with an open dispute, in the rubric's order (sections no longer in
        the rubric last, by id): ``section``, ``heading``, ``count`` (open disputes),
        ``pairs`` (distinct ``query_id/chunk_id``, sorted) and ``disputes`` (each ``id``,
        ``query_id``, ``chunk_id``, ``grader``, ``grade``, ``reason``, in filing order).

    Examples
    --------
    >>> d = table([recorded({"query_id": "q", "chunk_id": "c", "grader": "g", "grade": 1,
    ...                      "section": "s", "reason": "r"}, rubric_version="v1",
    ...                     filed_at="t", via="import")])
    >>> [(x["section"], x["count"], x["pairs"]) for x in open_by_section(d, settled=[],
    ...                                                                 sections={"s": None})]
    [('s', 1, ['q/c'])]
    """
    done = set(settled)
    live = disputes[~disputes["id"].isin(done)]
    order = {sid: i for i, sid in enumerate(sections)}
    out = []
    for sid, rows in sorted(live.groupby("section", sort=False),
                            key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        sec = sections.get(sid)
        out.append({
            "section": str(sid),
            "heading": getattr(sec, "heading", None) or ("(not in the current rubric)"
                                                         if sec is None else ""),
            "count": int(len(rows)),
            "pairs": sorted({f"{q}/{c}" for q, c in zip(rows["query_id"], rows["chunk_id"])}),
            "disputes": [{k: (int(v) if k == "grade" else str(v)) for k, v in r.items()}
                         for r in rows[["id", "query_id", "chunk_id", "grader", "grade",
                                        "reason"]].to_dict("records")]})
    return out
