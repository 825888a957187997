"""Post-hoc corrections: a grade of the frozen key changed after the key was frozen.

A correction never replaces the frozen key: it is recorded beside the key grader's round file
(``round-N.corrections.jsonl``), and the key stage writes the corrected key beside the frozen
one as a post-hoc key (``paths.key_post_hoc``, its record ``post_hoc: true`` with the
corrections listed), so every number made on it is labelled post-hoc.

One correction row, in this key order (:data:`CORRECTION`): ``query_id``, ``chunk_id``,
``grade_before`` (the key's grade, or the last correction's), ``grade``, ``reason``,
``grader``, ``round``, ``corrected_at`` (UTC, ISO 8601), ``corrected_by`` (who made the
correction, or None when not named), ``key_sha256`` (the frozen key it corrects) and what it
was made on (``content_sha256``, ``intent_sha256``, ``rubric_version``, ``rubric_sha256``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from relgrade.errors import InputError
from relgrade.schema import MADE_ON
from relgrade.text import check_free_text

#: The longest correction reason, in characters: a grade reason's cap
#: (params ``grading.max_reason_chars``' default).
MAX_REASON_CHARS = 300
#: The longest name of who corrects (``--by``), in characters.
MAX_NAME_CHARS = 100

#: Key order of a correction row.
CORRECTION = ("query_id", "chunk_id", "grade_before", "grade", "reason", "grader", "round",
              "corrected_at", "corrected_by", "key_sha256", *MADE_ON)


def current_grade(key: pd.DataFrame, corrections: Sequence[Mapping], query_id: str,
                  chunk_id: str) -> int | None:
    """The pair's grade as corrected so far: the last correction's, else the key's.

    Parameters
    ----------
    key : pandas.DataFrame
        The frozen key (``query_id``, ``chunk_id``, ``grade``).
    corrections : sequence of mapping
        Earlier corrections, in the order recorded.
    query_id, chunk_id : str
        The pair.

    Returns
    -------
    int or None
        None when the pair is not in the key.

    Examples
    --------
    >>> k = pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"], "grade": [0]})
    >>> current_grade(k, [], "q", "a"), current_grade(k, [{"query_id": "q",
    ...     "chunk_id": "a", "grade": 2}], "q", "a"), current_grade(k, [], "q", "b")
    (0, 2, None)
    """
    grade = None
    hit = key[(key["query_id"].astype(str) == str(query_id))
              & (key["chunk_id"].astype(str) == str(chunk_id))]
    if len(hit):
        grade = int(hit["grade"].iat[0])
    for c in corrections:
        if (str(c["query_id"]), str(c["chunk_id"])) == (str(query_id), str(chunk_id)):
            grade = int(c["grade"])
    return grade


def correction_row(*, key: pd.DataFrame, pool: pd.DataFrame, earlier: Sequence[Mapping],
                   query_id: str, chunk_id: str, grade: int, reason: str,
                   scale: Iterable[int], grader: str, round: int, corrected_at: str,
                   key_sha256: str, made_on: Mapping | None, source=None,
                   corrected_by: str | None = None) -> dict:
    """One checked correction row (:data:`CORRECTION`) of the frozen key.

    Parameters
    ----------
    key : pandas.DataFrame
        The frozen key (``query_id``, ``chunk_id``, ``grade``).
    pool : pandas.DataFrame
        The pool (``query_id``, ``chunk_id``).
    earlier : sequence of mapping
        The corrections already recorded for this key, in order.
    query_id, chunk_id : str
        The pair corrected.
    grade : int
        The corrected grade.
    reason : str
        Why the grade is corrected; not empty.
    scale : iterable of int
        The grade scale.
    grader, round
        The key grader and round whose grade is corrected.
    corrected_at : str
        The time, UTC ISO 8601.
    key_sha256 : str
        The frozen key's hash.
    made_on : mapping or None
        What the pair shows now (:data:`relgrade.schema.MADE_ON`); None when the corpus or
        intents lack it.
    source : str or os.PathLike, optional
        The corrections file, named in errors.
    corrected_by : str, optional
        Who makes the correction (a person's name); None when not named.

    Returns
    -------
    dict
        The row, keys in :data:`CORRECTION` order.

    Raises
    ------
    InputError
        The pair is not in the pool, or not in the key (a dropped query); the grade is off
        the scale; the reason is empty or longer than :data:`MAX_REASON_CHARS`;
        ``corrected_by`` is given but blank or longer than :data:`MAX_NAME_CHARS`; the grade is the
        one already recorded.

    Examples
    --------
    >>> k = pd.DataFrame({"query_id": ["q"], "chunk_id": ["a"], "grade": [0]})
    >>> row = correction_row(key=k, pool=k[["query_id", "chunk_id"]], earlier=[],
    ...     query_id="q", chunk_id="a", grade=2, reason="answers it", scale=[0, 1, 2],
    ...     grader="g", round=1, corrected_at="t", key_sha256="k", made_on=None)
    >>> row["grade_before"], row["grade"]
    (0, 2)
    """
    qid, cid, item = str(query_id), str(chunk_id), f"pair ({query_id}, {chunk_id})"
    pairs = set(zip(pool["query_id"].astype(str), pool["chunk_id"].astype(str)))
    if (qid, cid) not in pairs:
        raise InputError("a correction of a pair outside the pool", path=source, item=item,
                         fix="Correct a pair of the pool the key was frozen from")
    labels = sorted(int(s) for s in scale)
    if int(grade) not in labels:
        raise InputError("a corrected grade off the scale", path=source, item=item,
                         found=str(grade),
                         fix=f"Use a grade of the scale: {', '.join(map(str, labels))}")
    if not str(reason).strip():
        raise InputError("a correction without a reason", path=source, item=item,
                         fix="Say why the grade is corrected with --reason")
    if corrected_by is not None and not str(corrected_by).strip():
        raise InputError("a correction by a blank name", path=source, item=item,
                         fix="Name who corrects the grade with --by, or leave --by out")
    try:
        reason = check_free_text(reason, limit=MAX_REASON_CHARS, what="--reason")
        if corrected_by is not None:
            corrected_by = check_free_text(corrected_by, limit=MAX_NAME_CHARS, what="--by")
    except ValueError as e:
        raise InputError(str(e), path=source, item=item) from None
    before = current_grade(key, earlier, qid, cid)
    if before is None:
        raise InputError("a correction of a pair the frozen key does not hold (its query "
                         "was dropped: no relevant chunk)", path=source, item=item,
                         fix="Correct a pair of the frozen key")
    if before == int(grade):
        raise InputError("a correction identical to the recorded grade", path=source,
                         item=item, found=f"grade {before}",
                         fix="A correction must change the grade; nothing was recorded")
    made = dict(made_on or {})
    return {"query_id": qid, "chunk_id": cid, "grade_before": before, "grade": int(grade),
            "reason": str(reason).strip(), "grader": str(grader), "round": int(round),
            "corrected_at": str(corrected_at),
            "corrected_by": None if corrected_by is None else str(corrected_by).strip(),
            "key_sha256": str(key_sha256),
            **{k: made.get(k) for k in MADE_ON}}


def apply_corrections(key: pd.DataFrame, corrections: Sequence[Mapping], *,
                      made_on: pd.DataFrame) -> tuple[pd.DataFrame, list[dict], list[dict]]:
    """The key with its corrections applied, in the order recorded (the last one wins).

    A correction counts only for what it was made on (the pair's chunk, intent line and
    rubric): one whose pair left the key or whose pair now shows other content is set
    aside, never applied.

    Parameters
    ----------
    key : pandas.DataFrame of shape (n_pairs, 3)
        The frozen key (``query_id``, ``chunk_id``, ``grade``). Not modified.
    corrections : sequence of mapping
        Correction rows (:data:`CORRECTION`).
    made_on : pandas.DataFrame
        What each key pair's grade is made on now (``query_id``, ``chunk_id``,
        :data:`relgrade.schema.MADE_ON`).

    Returns
    -------
    corrected : pandas.DataFrame of shape (n_pairs, 3)
        ``key`` with the corrected grades (int64), same rows and order.
    applied : list of dict
        The corrections applied.
    aside : list of dict
        The corrections set aside.

    Examples
    --------
    >>> k = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [0, 1]})
    >>> m = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
    ...                   "content_sha256": ["x", "y"], "intent_sha256": ["i", "i"],
    ...                   "rubric_version": ["v", "v"], "rubric_sha256": ["r", "r"]})
    >>> c = {"query_id": "q", "chunk_id": "a", "grade": 2, "content_sha256": "x",
    ...      "intent_sha256": "i", "rubric_version": "v", "rubric_sha256": "r"}
    >>> out, applied, aside = apply_corrections(k, [c], made_on=m)
    >>> out["grade"].tolist(), len(applied), len(aside)
    ([2, 1], 1, 0)
    """
    now = {(str(q), str(c)): tuple(str(r[k]) for k in MADE_ON)
           for (q, c), r in zip(zip(made_on["query_id"], made_on["chunk_id"]),
                                made_on.to_dict("records"))}
    grades = {(str(q), str(c)): int(g)
              for q, c, g in zip(key["query_id"], key["chunk_id"], key["grade"])}
    applied, aside = [], []
    for row in corrections:
        pair = (str(row["query_id"]), str(row["chunk_id"]))
        made = tuple(str(row.get(k)) for k in MADE_ON)
        if pair not in grades or now.get(pair) != made:
            aside.append(dict(row))
            continue
        grades[pair] = int(row["grade"])
        applied.append(dict(row))
    corrected = key.assign(grade=[grades[(str(q), str(c))] for q, c in
                                  zip(key["query_id"], key["chunk_id"])])
    return corrected.astype({"grade": "int64"}), applied, aside
