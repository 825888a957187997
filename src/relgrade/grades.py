"""Grade rows: validation of a grader's output and the long grades table.

A grade row is one JSON object per (query, chunk) pair, with exactly the keys
``query_id``, ``chunk_id``, ``reason``, ``grade`` in that order: the reason comes before the
grade so that a model grader states its evidence before it commits to a grade. Validation is
all-or-nothing: the first bad row rejects the whole file or batch, and the error names the
file, the line, the pair and the rule that row breaks.

The long grades table has one row per (query, chunk, grader, round), so any number of graders
(grader, auditor, several raters, gold questions) fits the same columns:
``query_id``, ``chunk_id``, ``grader``, ``role``, ``round``, ``grade``, ``reason``.
"""

from __future__ import annotations

import json
from typing import Callable, Iterable, Mapping

import pandas as pd

from relgrade.errors import InputError

#: The keys of a grade row, in the order a row must list them.
GRADE_KEYS = ("query_id", "chunk_id", "reason", "grade")

#: Columns of the validated rows of one grader (see :func:`validate_grade_rows`).
ROW_COLUMNS = ["query_id", "chunk_id", "reason", "grade"]

#: Columns of the long grades table (params ``paths.grades``).
GRADES_COLUMNS = ["query_id", "chunk_id", "grader", "role", "round", "grade", "reason"]

ROLES = ("grader", "auditor")
KINDS = ("model", "human", "import")


def reason_required(kind: str, role: str, grade: int) -> bool:
    """Whether a grade row from this grader must carry a non-empty reason.

    Parameters
    ----------
    kind : {"model", "human", "import"}
        How the grader grades: a model run as a command, a person on the web page, or an
        import of existing judgments (TREC qrels have no reasons).
    role : {"grader", "auditor"}
        The grader's role in the protocol.
    grade : int
        The grade of the row.

    Returns
    -------
    bool
        ``True`` for every row of a model grader and of a human grader; ``False`` for a
        human auditor's 0s and for imported judgments.

    Notes
    -----
    The protocol asks a model grader for a reason on every grade, 0s included: a short
    reason on a 0 exposes skimming and misread intents. A human auditor may leave a 0
    without one. Imported judgments (TREC qrels) carry none.

    Examples
    --------
    >>> reason_required("model", "auditor", 0)
    True
    >>> reason_required("human", "auditor", 0)
    False
    >>> reason_required("human", "auditor", 1)
    True
    """
    if kind == "import":
        return False
    if kind == "human" and role == "auditor" and grade == 0:
        return False
    return True


def scale_text(scale: Iterable[int]) -> str:
    """The scale as people write it: ``0-2`` when contiguous, else ``0, 1, 3``."""
    values = sorted(int(g) for g in scale)
    if values and values == list(range(values[0], values[-1] + 1)) and len(values) > 1:
        return f"{values[0]}-{values[-1]}"
    return ", ".join(str(v) for v in values)


def _shown(value) -> str:
    """A JSON value as it appears in the file (``true``, ``1.0``, ``"2"``)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _norm_id(value, name: str, *, source, line, item) -> str:
    """An id as ``str``: a JSON string or integer (never a bool, float or empty string)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{name} must be a string or an integer", path=source, line=line,
                         item=item, found=_shown(value))
    text = str(value)
    if not text.strip():
        raise InputError(f"{name} is empty", path=source, line=line, item=item)
    return text


def _pair_item(query_id, chunk_id) -> str:
    return f"pair ({query_id}, {chunk_id})"


def validate_grade_rows(
    rows: Iterable[tuple[int, Mapping]],
    *,
    pool_pairs: set[tuple[str, str]] | None,
    scale: Iterable[int],
    max_reason_words: int,
    require_reason: bool | Callable[[int], bool],
    source,
    grader: str | None = None,
) -> pd.DataFrame:
    """Validate a grader's rows and return them as a table, or reject them all.

    Parameters
    ----------
    rows : iterable of (int, dict)
        ``(line_number, row)`` pairs, as yielded by :func:`relgrade.io.iter_jsonl`; the
        dicts keep the key order of the file.
    pool_pairs : set of (str, str) or None
        The pool's ``(query_id, chunk_id)`` pairs; ``None`` skips the pool check.
    scale : iterable of int
        The allowed grades (params ``scale.grades``), e.g. ``[0, 1, 2]``.
    max_reason_words : int
        The longest reason allowed, in whitespace-separated words
        (params ``grading.max_reason_words``).
    require_reason : bool or callable
        Whether a reason must be non-empty; a callable is asked per row with the row's grade
        (e.g. ``lambda g: reason_required(kind, role, g)``).
    source : str or os.PathLike
        The file (or batch) name used in error messages.
    grader : str, optional
        The grader's name, added to error messages when given.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 4)
        Columns ``query_id`` (str), ``chunk_id`` (str), ``reason`` (str), ``grade``
        (int64), in file order.

    Raises
    ------
    InputError
        On the first row that breaks a rule, naming ``source``, the line, the pair and the
        rule: keys not exactly ``query_id, chunk_id, reason, grade`` in that order; an id
        that is not a non-empty string or integer; a grade that is not an integer on the
        scale (``true``, ``1.0`` and ``"2"`` are not); a reason that is not a string, is
        longer than ``max_reason_words`` words, or is empty when required; a pair outside the
        pool; a second row for a pair (naming both lines).

    Notes
    -----
    Words are counted as ``len(reason.split())`` (runs of whitespace separate words). Chunk
    ids written as JSON integers are normalised to strings (``4411`` and ``"4411"`` are the
    same chunk). The rules follow the protocol's output schema: grade on the fixed scale,
    reason of at most 15 words stated before the grade.
    """
    scale_values = {int(g) for g in scale}
    scale_str = scale_text(scale_values)
    seen: dict[tuple[str, str], int] = {}
    out = {c: [] for c in ROW_COLUMNS}
    who = f"{grader}: " if grader else ""

    for line, row in rows:
        keys = tuple(row.keys())
        qid_raw, cid_raw = row.get("query_id"), row.get("chunk_id")
        item = None
        if qid_raw is not None and cid_raw is not None:
            item = who + _pair_item(qid_raw, cid_raw)
        elif grader:
            item = grader
        if keys != GRADE_KEYS:
            if set(keys) == set(GRADE_KEYS):
                rule = "keys out of order: a grade row lists query_id, chunk_id, reason, grade"
                fix = "Write the reason before the grade"
            else:
                rule = "a grade row has exactly the keys query_id, chunk_id, reason, grade"
                missing = [k for k in GRADE_KEYS if k not in row]
                extra = [k for k in keys if k not in GRADE_KEYS]
                parts = []
                if missing:
                    parts.append("missing " + ", ".join(missing))
                if extra:
                    parts.append("unexpected " + ", ".join(extra))
                fix = "; ".join(parts).capitalize()
            raise InputError(rule, path=source, line=line, item=item,
                             found=", ".join(keys) or "no keys", fix=fix)

        query_id = _norm_id(qid_raw, "query_id", source=source, line=line, item=item)
        chunk_id = _norm_id(cid_raw, "chunk_id", source=source, line=line, item=item)
        item = who + _pair_item(query_id, chunk_id)

        grade = row["grade"]
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise InputError(f"grade must be an integer on the scale {scale_str}", path=source,
                             line=line, item=item, found=_shown(grade))
        if grade not in scale_values:
            raise InputError(f"grade outside the scale {scale_str}", path=source, line=line,
                             item=item, found=grade)

        reason = row["reason"]
        if not isinstance(reason, str):
            raise InputError("reason must be a string", path=source, line=line, item=item,
                             found=_shown(reason))
        n_words = len(reason.split())
        if n_words > max_reason_words:
            raise InputError(f"reason longer than {max_reason_words} words", path=source,
                             line=line, item=item, found=f"{n_words} words",
                             fix="Say what the chunk says about the target, in fewer words")
        needed = require_reason(grade) if callable(require_reason) else bool(require_reason)
        if needed and n_words == 0:
            raise InputError("reason required for every grade from this grader", path=source,
                             line=line, item=item, found="an empty reason",
                             fix="State what the chunk says about the target before the grade")

        pair = (query_id, chunk_id)
        if pool_pairs is not None and pair not in pool_pairs:
            raise InputError("pair not in the pool", path=source, line=line, item=item,
                             fix="Grade only the pool's pairs (see the packets)")
        if pair in seen:
            raise InputError(f"second row for one pair (first on line {seen[pair]})",
                             path=source, line=line, item=item,
                             fix="Keep one grade per pair and grader")
        seen[pair] = line

        out["query_id"].append(query_id)
        out["chunk_id"].append(chunk_id)
        out["reason"].append(reason)
        out["grade"].append(grade)

    return pd.DataFrame({
        "query_id": pd.Series(out["query_id"], dtype="str"),
        "chunk_id": pd.Series(out["chunk_id"], dtype="str"),
        "reason": pd.Series(out["reason"], dtype="str"),
        "grade": pd.Series(out["grade"], dtype="int64"),
    })
