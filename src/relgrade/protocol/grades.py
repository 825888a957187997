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
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Mapping

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.protocol import bank_columns, sidecar
from relgrade.protocol.bank import currency, current_grades, pair_member
from relgrade.ranking import id_codes
from relgrade.schema import (
    BANK,
    GRADE_KEYS,
    GRADES,
    MADE_ON,
    PANEL_ROLES,
    ROW_COLUMNS,
    TRIAGE_ROLE,
)


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


#: The bank line's field naming the file a grade was imported from (``relgrade grade
#: import``): ``{"file", "sha256", "format"}``.
IMPORTED_FROM = "imported_from"

#: Import formats whose judgments carry no reasons.
REASONLESS_FORMATS = frozenset({"qrels"})


def imported_from(path, sha256: str, fmt: str) -> dict:
    """The bank note of a grade imported from a file: ``{"imported_from": {"file", "sha256",
    "format"}}`` (the file as named on the command line, its sha256, its format).

    Examples
    --------
    >>> imported_from("old/judged.qrels", "ab", "qrels")
    {'imported_from': {'file': 'old/judged.qrels', 'sha256': 'ab', 'format': 'qrels'}}
    """
    from pathlib import PurePath

    return {IMPORTED_FROM: {"file": PurePath(path).as_posix(), "sha256": str(sha256),
                            "format": str(fmt)}}


def imported_without_reasons(rows, bank) -> frozenset[int]:
    """The lines of ``rows`` whose grade was imported from a file without reasons.

    Row i was made on bank line i (:func:`relgrade.protocol.sidecar.pair_rows`); a row whose
    bank line says it was imported (:data:`IMPORTED_FROM`) from TREC qrels needs no reason,
    whatever its grader's kind, as the rows of a grader of kind ``import`` need none.

    Parameters
    ----------
    rows : sequence of (int, mapping)
        ``(line, row)`` of a grade file, in file order.
    bank : sequence of (int, mapping) or None
        Its bank sidecar's lines; None when it has none.

    Returns
    -------
    frozenset of int
        The rows' lines (empty without a sidecar).

    Examples
    --------
    >>> rows = [(1, {"query_id": "q"}), (2, {"query_id": "q"})]
    >>> bank = [(1, {}), (2, {"imported_from": {"file": "x.qrels", "format": "qrels"}})]
    >>> sorted(imported_without_reasons(rows, bank))
    [2]
    """
    if not bank:
        return frozenset()
    out = set()
    for (line, _), (_, note) in zip(rows, bank):
        origin = note.get(IMPORTED_FROM) if isinstance(note, Mapping) else None
        if isinstance(origin, Mapping) and origin.get("format") in REASONLESS_FORMATS:
            out.add(line)
    return frozenset(out)


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


def _utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogate such as ``"\\ud83d"``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(value) -> str:
    """``value`` as text safe to print: unencodable characters as ``\\udXXX`` escapes."""
    text = str(value)
    return text if _utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _unencodable(text: str) -> str:
    """Where ``text`` stops being UTF-8: the first bad character and its position."""
    for i, ch in enumerate(text):
        if not _utf8(ch):
            return f"{_printable(ch)} at character {i + 1}"
    return ""


def _norm_id(value, name: str, *, source, line, item) -> str:
    """An id as ``str``: a JSON string or integer (never a bool, float or empty string)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{name} must be a string or an integer", path=source, line=line,
                         item=item, found=_printable(_shown(value)))
    text = str(value)
    if not text.strip():
        raise InputError(f"{name} is empty", path=source, line=line, item=item)
    if not _utf8(text):
        raise InputError(f"{name} is not valid Unicode text (it cannot be written as UTF-8)",
                         path=source, line=line, item=item, found=_unencodable(text))
    return text


def _pair_item(query_id, chunk_id) -> str:
    return f"pair ({_printable(query_id)}, {_printable(chunk_id)})"


def is_ascii_grade(text: str) -> bool:
    """Whether ``text`` spells a grade: ASCII digits 0-9 only, optionally after a minus.

    ``int()`` also reads fullwidth and other Unicode digits (``int("２") == 2``); a grade
    typed or exported as text must be refused unless it is plain ASCII.

    Examples
    --------
    >>> [is_ascii_grade(t) for t in ("2", "-1", "２", "2.0", "", " 2", "true")]
    [True, True, False, False, False, False, False]
    """
    digits = text[1:] if text.startswith("-") else text
    return bool(digits) and all("0" <= ch <= "9" for ch in digits)


def validate_grade_rows(
    rows: Iterable[tuple[int, Mapping]],
    *,
    pool_pairs: set[tuple[str, str]] | None,
    scale: Iterable[int],
    max_reason_words: int,
    require_reason: bool | Callable[[int], bool],
    source,
    grader: str | None = None,
    max_reason_chars: int = 300,
    allow_repeats: bool = False,
    reasonless: Collection[int] = (),
) -> pd.DataFrame:
    """Validate a grader's rows and return them as a table, or reject them all.

    Parameters
    ----------
    rows : iterable of (int, dict)
        ``(line_number, row)`` pairs, as yielded by :func:`relgrade.io.files.iter_jsonl`; the
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
    max_reason_chars : int, default 300
        The longest reason allowed, in characters (params ``grading.max_reason_chars``): a
        one-word reason of megabytes is refused too.
    allow_repeats : bool, default False
        Accept a later row for a pair already graded in the file (a stale pair regraded; the
        judgment bank tells the two apart by what each was made on).
    reasonless : collection of int, optional
        Lines whose row needs no reason whatever ``require_reason`` says: grades imported
        from a file that carries none (TREC qrels, see :func:`imported_without_reasons`).

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
        longer than ``max_reason_words`` words or ``max_reason_chars`` characters, or is
        empty when required; an id or reason that cannot be written as UTF-8 (a lone
        surrogate such as ``"\\ud83d"``, e.g. an emoji cut in half); a pair outside the
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
                             line=line, item=item, found=_printable(_shown(grade)))
        if grade not in scale_values:
            raise InputError(f"grade outside the scale {scale_str}", path=source, line=line,
                             item=item, found=grade)

        reason = row["reason"]
        if not isinstance(reason, str):
            raise InputError("reason must be a string", path=source, line=line, item=item,
                             found=_printable(_shown(reason)))
        if not _utf8(reason):
            raise InputError("reason is not valid Unicode text (it cannot be written as UTF-8)",
                             path=source, line=line, item=item, found=_unencodable(reason),
                             fix="Write the reason again as plain text")
        if len(reason) > max_reason_chars:
            raise InputError(f"reason longer than {max_reason_chars} characters", path=source,
                             line=line, item=item, found=f"{len(reason)} characters",
                             fix="Say what the chunk says about the target, in fewer words")
        n_words = len(reason.split())
        if n_words > max_reason_words:
            raise InputError(f"reason longer than {max_reason_words} words", path=source,
                             line=line, item=item, found=f"{n_words} words",
                             fix="Say what the chunk says about the target, in fewer words")
        needed = require_reason(grade) if callable(require_reason) else bool(require_reason)
        if needed and n_words == 0 and line not in reasonless:
            raise InputError("reason required for every grade from this grader", path=source,
                             line=line, item=item, found="an empty reason",
                             fix="State what the chunk says about the target before the grade")

        pair = (query_id, chunk_id)
        if pool_pairs is not None and pair not in pool_pairs:
            raise InputError("pair not in the pool", path=source, line=line, item=item,
                             fix="Grade only the pool's pairs (see the packets)")
        if pair in seen and not allow_repeats:
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


# --- a grader's file, as the grades stage and `relgrade grade import` both check it ------

def check_meta(meta: Mapping | None, *, intents_sha256: str | None, rubric_version: str,
               source) -> None:
    """Refuse grades made from packets with other intents or another rubric.

    Parameters
    ----------
    meta : mapping or None
        The grade file's sidecar ``round-N.meta.json``: ``{"intents_sha256",
        "rubric_version"}`` copied from the packets it was graded from; ``None`` when the file
        has no sidecar (nothing to check).
    intents_sha256 : str or None
        The frozen intent table's hash (params ``paths.intents_manifest``, key ``sha256``).
    rubric_version : str
        Params ``grading.rubric_version``.
    source : str or os.PathLike
        The sidecar's path, for error messages.

    Raises
    ------
    InputError
        The sidecar is not an object, or either value differs from the current one.
    """
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        raise InputError("a grade file's sidecar must be a JSON object", path=source,
                         found=type(meta).__name__)
    got = meta.get("intents_sha256")
    if intents_sha256 is not None and got != intents_sha256:
        raise InputError("grades were made from packets with other intents", path=source,
                         found=f"intents_sha256 {got}, frozen intents {intents_sha256}",
                         fix="Regrade from the current packets (a new round)")
    got = meta.get("rubric_version")
    if got != rubric_version:
        raise InputError("grades were made under another rubric version", path=source,
                         found=f"rubric_version {got}, params grading.rubric_version "
                               f"{rubric_version}",
                         fix="Regrade from the current packets (a new round)")


def validate_grader_file(
    rows: Iterable[tuple[int, Mapping]],
    *,
    name: str,
    spec: Mapping,
    pool_pairs: set[tuple[str, str]] | None,
    audit_query_ids: Iterable[str] | None,
    scale: Iterable[int],
    max_reason_words: int,
    source,
    max_reason_chars: int = 300,
    allow_repeats: bool = False,
    reasonless: Collection[int] = (),
) -> pd.DataFrame:
    """Validate one grader's file for one round: rows, reasons by grader kind, audit scope.

    Parameters
    ----------
    rows : iterable of (int, dict)
        As yielded by :func:`relgrade.io.judgments.judgment_rows` (or
        :func:`relgrade.io.files.iter_jsonl`).
    name : str
        The grader.
    spec : mapping
        Its params entry (``graders.NAME``: ``role``, ``kind``, ``family``, ...).
    pool_pairs : set of (str, str) or None
        The pool's pairs; ``None`` skips the pool check (a file already recorded, whose
        pairs that left the pool stay in it, unused).
    audit_query_ids : iterable of str or None
        The audit queries; an auditor may grade only these. ``None`` skips that check.
    scale : iterable of int
        The allowed grades.
    max_reason_words : int
        The longest reason allowed.
    source : str or os.PathLike
        The file name used in errors.
    max_reason_chars : int, default 300
        The longest reason allowed, in characters.
    allow_repeats, reasonless
        As for :func:`validate_grade_rows`.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 4)
        As :func:`validate_grade_rows`.

    Raises
    ------
    InputError
        Any rule of :func:`validate_grade_rows` (a reason is required as
        :func:`reason_required` says for the grader's kind and role), or an auditor's row for
        a query outside the audit sample (naming the line).
    """
    lines: list[int] = []

    def tracked():
        for line, row in rows:
            lines.append(line)
            yield line, row

    kind, role = spec["kind"], spec["role"]
    df = validate_grade_rows(
        tracked(), pool_pairs=pool_pairs, scale=scale, max_reason_words=max_reason_words,
        require_reason=lambda g: reason_required(kind, role, g), source=source, grader=name,
        max_reason_chars=max_reason_chars, allow_repeats=allow_repeats,
        reasonless=reasonless)
    if role == "auditor" and audit_query_ids is not None:
        audit = set(audit_query_ids)
        outside = ~df["query_id"].isin(audit).to_numpy()
        if outside.any():
            i = int(outside.argmax())
            raise InputError("the auditor grades only the audit queries", path=source,
                             line=lines[i], item=f"{name}: query {df['query_id'].iat[i]}",
                             fix="Remove the rows of queries outside the audit sample")
    return df


# --- the long grades table and its manifest ---------------------------------------------

def pool_pairs_of(pool: pd.DataFrame) -> set[tuple[str, str]]:
    """The pool's ``(query_id, chunk_id)`` pairs as a set of string tuples."""
    return set(zip(pool["query_id"].astype(str), pool["chunk_id"].astype(str)))


def missing_pairs(graded: pd.DataFrame, pool: pd.DataFrame, *,
                  queries: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Pool pairs without a grade, grouped by query.

    Parameters
    ----------
    graded : pandas.DataFrame
        Columns ``query_id``, ``chunk_id`` (str): the pairs one grader has graded.
    pool : pandas.DataFrame
        Columns ``query_id``, ``chunk_id`` (str).
    queries : iterable of str, optional
        The queries to check; by default every query ``graded`` touches (a grader must cover
        the whole pool of each query it has started).

    Returns
    -------
    dict of str to list of str
        query_id → the chunk ids of its pool that lack a grade; queries in Python string
        order, chunk ids sorted the same way; queries with nothing missing left out.
    """
    wanted = set(graded["query_id"].astype(str).unique()) if queries is None else set(queries)
    pairs = pool[["query_id", "chunk_id"]]
    pairs = pairs[pairs["query_id"].astype(str).isin(wanted).to_numpy()]
    # the pairs lacking a grade found over columns; only those (few) become tuples
    lacking = pairs[~pair_member(pairs, graded)]
    out: dict[str, list[str]] = {}
    for q, c in sorted(set(zip(lacking["query_id"].astype(str),
                               lacking["chunk_id"].astype(str)))):
        out.setdefault(q, []).append(c)
    return out


def long_table(tables: Mapping[str, pd.DataFrame], *, roles: Mapping[str, str],
               round: int) -> pd.DataFrame:
    """Stack validated per-grader tables into the long grades table.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        grader → its validated rows (see :func:`validate_grade_rows`).
    roles : mapping of str to str
        grader → role (``grader`` or ``auditor``).
    round : int
        The grading round these rows belong to.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 8)
        Columns :data:`relgrade.schema.GRADES`: ``query_id``, ``chunk_id``, ``grader``,
        ``role`` (str), ``round`` (int64), ``grade`` (int64), ``reason`` (str), ``sequence`` (int64,
        0-based position of the row in its grader's file, i.e. the order of grading, which
        the leniency-drift diagnostic reads: a ``sequence`` column of the input when it has
        one, else the row's position in it); one row per (pair, grader, round), sorted by
        (query_id, chunk_id, grader) in Python string order.
    """
    return long_rows(tables, roles=roles, round=round).table()


@dataclass(frozen=True)
class LongRows:
    """The long grades table as its rows in grader order and the order that sorts them.

    :func:`long_table` is ``LongRows.table()``; a writer that takes the table a block of rows
    at a time (:meth:`blocks`) never holds a second, sorted copy of it.

    Attributes
    ----------
    rows : pandas.DataFrame of shape (n_rows, 8)
        Columns :data:`relgrade.schema.GRADES` with :func:`long_table`'s dtypes, each
        grader's rows together, in the order the ``tables`` were given.
    order : numpy.ndarray of int64, shape (n_rows,)
        Positions in ``rows`` in the table's order: (query_id, chunk_id, grader) in Python
        string order, ties in row order.
    """

    rows: pd.DataFrame
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.order)

    def table(self) -> pd.DataFrame:
        """The whole sorted table (:func:`long_table`'s result)."""
        return self.rows.iloc[self.order].reset_index(drop=True)[GRADES]

    def blocks(self, size: int):
        """The sorted table in consecutive blocks of ``size`` rows (the last one shorter; one
        empty block when there is no row): stacked, they are :meth:`table`."""
        if not len(self.order):
            yield self.table()
            return
        for start in range(0, len(self.order), size):
            yield self.rows.iloc[self.order[start:start + size]].reset_index(drop=True)[GRADES]


def long_rows(tables: Mapping[str, pd.DataFrame], *, roles: Mapping[str, str],
              round: int) -> LongRows:
    """:func:`long_table`, unsorted: its rows and the order that sorts them.

    Parameters
    ----------
    tables, roles, round
        As for :func:`long_table`.

    Returns
    -------
    LongRows
    """
    parts = []
    for name, df in tables.items():
        part = df[["query_id", "chunk_id"]].copy()
        part["grader"] = name
        part["role"] = roles[name]
        part["round"] = int(round)
        part["grade"] = df["grade"].astype("int64")
        part["reason"] = df["reason"]
        part["sequence"] = (df["sequence"].to_numpy(dtype="int64") if "sequence" in df.columns
                            else np.arange(len(df), dtype="int64"))
        parts.append(part)
    if not parts:
        out = pd.DataFrame({c: pd.Series([], dtype="str") for c in GRADES})
    else:
        out = pd.concat(parts, ignore_index=True)
    del parts
    return _long_rows_of(out)


def _long_rows_of(out: pd.DataFrame) -> LongRows:
    """:class:`LongRows` of the stacked rows ``out`` (the columns of :func:`long_rows`'
    stack, in its order), cast to the table's dtypes."""
    out = out.astype({"query_id": "str", "chunk_id": "str", "grader": "str", "role": "str",
                      "round": "int64", "grade": "int64", "reason": "str",
                      "sequence": "int64"})
    # Python string order, ties in row order: a stable sort of the ids' codes, whose order
    # is the ids' byte order (code point order, as Python compares str); no str per row
    keys = [id_codes(out[k])[0] for k in ("grader", "chunk_id", "query_id")] if len(out) \
        else []
    order = np.lexsort(keys) if keys else np.zeros(0, dtype=np.int64)
    del keys
    return LongRows(rows=out, order=np.asarray(order, dtype=np.int64))


def grader_entry(name: str, spec: Mapping, *, graded: pd.DataFrame, pool: pd.DataFrame,
                 audit_query_ids: Iterable[str], rubric_version: str, round: int,
                 file: str | None, sha256: str | None) -> dict:
    """One grader's entry of the grades manifest: its setup and its coverage.

    Parameters
    ----------
    name : str
        The grader.
    spec : mapping
        Its params entry.
    graded : pandas.DataFrame
        Its validated rows (columns ``query_id``, ``chunk_id``).
    pool : pandas.DataFrame
        The pool (columns ``query_id``, ``chunk_id``).
    audit_query_ids : iterable of str
        The audit queries (the pool an auditor must cover).
    rubric_version : str
        Params ``grading.rubric_version``.
    round : int
        Params ``grading.round``.
    file, sha256 : str or None
        The grade file and its hash; ``None`` when the grader has no file for this round.

    Returns
    -------
    dict
        ``kind``, ``family``, ``model`` or ``person``, ``role``, ``rubric_version``,
        ``round``, ``file``, ``sha256``, ``rows``, ``queries`` (queries with a grade),
        ``pairs_missing`` (count) and ``missing`` (query → chunk ids). A grader-role grader
        must cover the pool of every query it graded; an auditor the audit queries' pools;
        a rater or an expert is not checked here (their queues are not the pool's).
    """
    queries = None if spec["role"] in ("grader", TRIAGE_ROLE) else list(audit_query_ids)
    if spec["role"] in PANEL_ROLES:  # a rater owes its own queue, an expert the queue of
        queries = []                 # adjudication: both checked where those are known
    missing = missing_pairs(graded, pool, queries=queries)
    entry = {"kind": spec["kind"], "family": spec.get("family")}
    for k in ("model", "person"):
        if k in spec:
            entry[k] = spec[k]
    entry.update({
        "role": spec["role"], "rubric_version": rubric_version, "round": int(round),
        "file": file, "sha256": sha256, "rows": int(len(graded)),
        "queries": int(graded["query_id"].nunique()),
        "pairs_missing": sum(len(v) for v in missing.values()), "missing": missing,
    })
    return entry


@dataclass
class GraderFile:
    """One grader's committed file for the current round, as read by the grades stage.

    Attributes
    ----------
    rows : iterable of (int, dict)
        Its rows, as yielded by :func:`relgrade.io.files.iter_jsonl`.
    source : str
        Its path (for error messages and the manifest).
    sha256 : str
        The hex sha256 of its bytes.
    meta : dict or None
        Its sidecar ``round-N.meta.json``, if it has one.
    meta_source : str or None
        The sidecar's path.
    round : int or None
        The round the file belongs to (``round-N``).
    bank : list of (int, dict) or None
        Its bank sidecar ``round-N.bank.jsonl`` (what each row was made on), None when it
        has none.
    bank_source : str or None
        The bank sidecar's path.
    columns : tuple of (pyarrow.Table, pyarrow.Table) or None
        The grade file and its bank sidecar read as columns
        (:func:`relgrade.io.grade_columns.read_grade_columns` and
        :func:`~relgrade.io.grade_columns.read_bank_columns`), when both could be; the
        judgment bank is then built from them (:mod:`relgrade.protocol.bank_columns`) and
        ``rows`` and the bank lines are read only when a row breaks a rule, to word it.
    load_bank : callable or None
        Returns the bank lines when ``bank`` is None because they were not read yet (with
        ``columns`` or ``blocks``); None when ``bank`` is all there is.
    blocks : relgrade.io.grade_columns.RoundBlocks or None
        The grade file and its bank sidecar read together a block of rows at a time; the
        judgment bank is then built from them
        (:func:`relgrade.protocol.bank_columns.bank_of_column_blocks`), holding one block of
        the files at a time, and ``rows`` and the bank lines are read only to word a
        refusal (the bank lines first when a reader refused a file, as when ``columns`` is
        None).
    """

    rows: Iterable[tuple[int, Mapping]]
    source: str
    sha256: str
    meta: Mapping | None = None
    meta_source: str | None = None
    round: int | None = None
    bank: list | None = None
    bank_source: str | None = None
    columns: tuple | None = None
    load_bank: Callable[[], list | None] | None = None
    blocks: Any = None


def collect_grades(
    files: Mapping[str, GraderFile],
    *,
    graders: Mapping,
    pool: pd.DataFrame,
    audit_query_ids: Iterable[str],
    scale: Iterable[int],
    max_reason_words: int,
    rubric_version: str,
    round: int,
    intents_sha256: str | None,
    max_reason_chars: int = 300,
) -> tuple[pd.DataFrame, dict]:
    """Validate every grader's file for one round; build the long table and the manifest.

    Parameters
    ----------
    files : mapping of str to GraderFile
        grader → its file for round ``round`` (graders without a file are left out).
    graders : mapping
        Params ``graders``: grader name → its entry (``role`` one of :data:`ROLES`,
        ``kind`` one of :data:`KINDS`, as :mod:`relgrade.experiment.params` checks them).
    pool : pandas.DataFrame
        Columns ``query_id``, ``chunk_id`` (str): the pool.
    audit_query_ids : iterable of str
        The audit sample.
    scale : iterable of int
        Params ``scale.grades``.
    max_reason_words : int
        Params ``grading.max_reason_words``.
    rubric_version : str
        Params ``grading.rubric_version``.
    round : int
        Params ``grading.round``.
    intents_sha256 : str or None
        The frozen intent table's hash, checked against each file's sidecar.
    max_reason_chars : int, default 300
        Params ``grading.max_reason_chars``.

    Returns
    -------
    grades : pandas.DataFrame
        The long table (see :func:`long_table`).
    manifest : dict
        ``{"rubric_version", "round", "intents_sha256", "pool_pairs", "graders": {name:
        entry}}`` with one entry per grader of params (see :func:`grader_entry`).

    Raises
    ------
    InputError
        A file of a grader not in params; a sidecar that does not match (see
        :func:`check_meta`); any row rule of :func:`validate_grader_file`. Nothing is
        returned unless every file is valid.
    """
    for name in files:
        if name not in graders:
            raise InputError("grader not declared in params `graders`", item=name,
                             found=f"graders {', '.join(sorted(graders)) or 'none'}",
                             fix=f"Add `{name}` with role, kind and family under `graders`")
    pairs = pool_pairs_of(pool)
    audit = sorted(set(audit_query_ids))
    tables, roles, entries = {}, {}, {}
    for name in sorted(graders):
        spec = graders[name]
        roles[name] = spec["role"]
        f = files.get(name)
        if f is None:
            df = validate_grade_rows([], pool_pairs=None, scale=scale, max_reason_words=1,
                                     require_reason=False, source="")
        else:
            check_meta(f.meta, intents_sha256=intents_sha256, rubric_version=rubric_version,
                       source=f.meta_source)
            rows = list(f.rows)
            df = validate_grader_file(rows, name=name, spec=spec, pool_pairs=pairs,
                                      audit_query_ids=audit, scale=scale,
                                      max_reason_words=max_reason_words, source=f.source,
                                      max_reason_chars=max_reason_chars,
                                      reasonless=imported_without_reasons(
                                          rows, f.bank if f.load_bank is None
                                          else f.load_bank()))
            tables[name] = df
        entries[name] = grader_entry(
            name, spec, graded=df, pool=pool, audit_query_ids=audit,
            rubric_version=rubric_version, round=round,
            file=None if f is None else f.source, sha256=None if f is None else f.sha256)
    manifest = {"rubric_version": rubric_version, "round": int(round),
                "intents_sha256": intents_sha256, "pool_pairs": len(pairs),
                "graders": entries}
    return long_table(tables, roles=roles, round=round), manifest


# --- the judgment bank: every grader's files, with what each grade was made on ----------

def bank_of_file(f: GraderFile, *, name: str, spec: Mapping, scale: Iterable[int],
                 max_reason_words: int, max_reason_chars: int = 300) -> pd.DataFrame:
    """One grade file and its bank sidecar as judgment-bank rows.

    The rows are validated as a grader's rows are (keys, ids, scale, reasons, one row per
    pair) but not against the pool or the audit sample: a pair that left the pool, or an
    auditor's query that is no longer audited, stays in the bank, unused.

    Parameters
    ----------
    f : GraderFile
        The file, its round and its bank sidecar.
    name : str
        The grader.
    spec : mapping
        Its params entry (``role``, ``kind``).
    scale, max_reason_words, max_reason_chars
        As for :func:`validate_grade_rows`.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 13)
        :data:`relgrade.schema.BANK` plus ``sequence`` (the row's 0-based position in its
        file), one row per grade row, in file order.

    Raises
    ------
    InputError
        A row rule of :func:`validate_grade_rows`; the file has rows but no bank sidecar (what its
        grades were made on is unknown: refused, never assumed); a grade row without its
        bank line, or a file and sidecar that disagree in their body
        (:func:`relgrade.protocol.sidecar.pair_rows`: row i is made on bank line i; trailing
        bank lines without rows are ignored); a bank line without a value of
        :data:`relgrade.schema.MADE_ON`.

    Notes
    -----
    With ``f.columns`` (or ``f.blocks``) the rules are checked over columns first
    (:func:`relgrade.protocol.bank_columns.bank_of_columns`); the rows are read one by one
    only when a row breaks one, to name the first such row as the row path does.
    """
    if f.columns is not None:
        out = bank_columns.bank_of_columns(
            *f.columns, name=name, spec=spec, round=int(f.round or 0), scale=scale,
            max_reason_words=max_reason_words, max_reason_chars=max_reason_chars,
            reasonless_formats=REASONLESS_FORMATS)
        if out is not None:
            return out
    early = None
    if f.blocks is not None:
        out = bank_columns.bank_of_column_blocks(
            f.blocks, name=name, spec=spec, round=int(f.round or 0), scale=scale,
            max_reason_words=max_reason_words, max_reason_chars=max_reason_chars,
            reasonless_formats=REASONLESS_FORMATS)
        if out is not None:
            return out
        if f.blocks.refused:  # as when the files are not read as columns: the lines first
            early = [f.load_bank()]
    rows = [(line, row) for line, row in f.rows]
    bank_lines = early[0] if early is not None else \
        f.bank if f.load_bank is None else f.load_bank()
    # a grade imported from TREC qrels has no reason, whatever the grader's kind: its bank
    # line says so (and the sidecar pairing below checks the line is the row's)
    df = validate_grader_file(rows, name=name, spec=spec, pool_pairs=None,
                              audit_query_ids=None, scale=scale,
                              max_reason_words=max_reason_words, source=f.source,
                              max_reason_chars=max_reason_chars, allow_repeats=True,
                              reasonless=imported_without_reasons(rows, bank_lines))
    if bank_lines is None and not rows:
        bank_lines = []  # an empty grade file (a page opened, nothing saved): nothing unknown
    if bank_lines is None:
        raise InputError("a grade file without its bank sidecar: what its grades were made "
                         "on (chunk content, intent line, rubric) is unknown", path=f.source,
                         item=name, found=f"no {f.bank_source}",
                         fix=f"Record grades through {sidecar.regrade_commands(name)}, "
                             "which write the sidecar; or restore it from git")
    # Row i was made on bank line i (sidecar.pair_rows); trailing lines without a row
    # belong to a batch that was never acknowledged and are left out.
    paired = sidecar.pair_rows(rows, bank_lines, source=f.source, bank_source=f.bank_source)
    cols: dict[str, list] = {c: [] for c in (*MADE_ON, "graded_at")}
    used: dict[tuple[str, str], list[tuple]] = {}
    for (q, c), (line, _), row in zip(zip(df["query_id"], df["chunk_id"]), bank_lines,
                                      paired.records):
        before = used.setdefault((q, c), [])
        now = tuple(row.get(k) for k in MADE_ON)
        if now in before:
            raise InputError("second row for one pair, made on the same content, intent "
                             "and rubric", path=f.source, item=f"{name}: {_pair_item(q, c)}",
                             fix="Keep one grade per pair and grader")
        before.append(now)
        for k in cols:
            value = row.get(k)
            if k != "graded_at" and (not isinstance(value, str) or not value):
                raise InputError(f"bank line without {k}", path=f.bank_source, line=line,
                                 item=f"{name}: {_pair_item(q, c)}",
                                 fix="Restore the bank sidecar from git")
            cols[k].append("" if value is None else str(value))
    held = {k: bank_columns.as_categorical(v) if k in bank_columns.CATEGORICAL
            else pd.Series(v, dtype="str") for k, v in cols.items()}
    del cols
    out = pd.DataFrame({"query_id": df["query_id"], "chunk_id": df["chunk_id"],
                        "grader": name, "round": int(f.round or 0), "grade": df["grade"],
                        "reason": df["reason"]})
    for k, v in held.items():
        out[k] = v.array  # by position: ``df`` keeps the file's row index
    out["sequence"] = np.arange(len(out), dtype="int64")
    return out[[*BANK, "sequence"]]


def judgment_bank(files: Mapping[str, Iterable[GraderFile]], *, graders: Mapping,
                  scale: Iterable[int], max_reason_words: int,
                  max_reason_chars: int = 300) -> pd.DataFrame:
    """Every recorded grade of every grader and round, with what it was made on.

    Parameters
    ----------
    files : mapping of str to iterable of GraderFile
        grader → its grade files (any rounds).
    graders : mapping
        Params ``graders``.
    scale, max_reason_words, max_reason_chars
        As for :func:`validate_grade_rows`.

    Returns
    -------
    pandas.DataFrame
        :data:`relgrade.schema.BANK` plus ``sequence``; graders in name order, each one's
        rounds in the order given.

    Raises
    ------
    InputError
        A file of a grader not in params, or any rule of :func:`bank_of_file`.
    """
    for name in files:
        if name not in graders:
            raise InputError("grader not declared in params `graders`", item=name,
                             found=f"graders {', '.join(sorted(graders)) or 'none'}",
                             fix=f"Add `{name}` with role, kind and family under `graders`")
    parts = [bank_of_file(f, name=name, spec=graders[name], scale=scale,
                          max_reason_words=max_reason_words, max_reason_chars=max_reason_chars)
             for name in sorted(files) for f in files[name]]
    if not parts:
        return pd.DataFrame({c: bank_columns.as_categorical([])
                             if c in bank_columns.CATEGORICAL else
                             pd.Series([], dtype="int64" if c in ("round", "grade", "sequence")
                                       else "str")
                             for c in [*BANK, "sequence"]})
    return bank_columns.concat_bank(parts)


def current_table(bank: pd.DataFrame, *, graders: Mapping, pool: pd.DataFrame,
                  audit_query_ids: Iterable[str], content: pd.Series, intents: pd.Series,
                  rubric_sha256: str, rubric_version: str, round: int,
                  intents_sha256: str | None,
                  files: Mapping[str, GraderFile] | None = None,
                  key_pairs: pd.DataFrame | None = None,
                  carry=None, whole: bool = True) -> tuple[pd.DataFrame | LongRows, dict]:
    """The grades table of the current pool: current grades only, and its manifest.

    Parameters
    ----------
    bank : pandas.DataFrame
        :func:`judgment_bank`'s table, limited to the rounds this round uses.
    graders : mapping
        Params ``graders``.
    pool : pandas.DataFrame
        The current pool (``query_id``, ``chunk_id``).
    audit_query_ids : iterable of str
        The audit sample: an auditor's grades count only on these queries.
    content, intents, rubric_sha256, rubric_version, carry
        What the pool shows now (see :func:`relgrade.protocol.bank.currency`).
    round : int
        Params ``grading.round``: the round every row of the table serves in.
    intents_sha256 : str or None
        The frozen intent table's hash, copied to the manifest.
    files : mapping of str to GraderFile, optional
        grader → its file of this round, named (with its sha256) in the manifest.
    key_pairs : pandas.DataFrame, optional
        Triage mode: the people's queue (``query_id``, ``chunk_id``), the pairs the key
        grader and the auditor are measured against in the manifest's coverage (the triage
        grader's against the whole pool). The whole pool when not given.
    whole : bool, default True
        Return the sorted table; False: its rows unsorted and their order
        (:class:`LongRows`), for a reader that counts them or a writer that takes them a
        block at a time.

    Returns
    -------
    grades : pandas.DataFrame or LongRows
        :data:`relgrade.schema.GRADES`: per grader, its current grade of each pool pair (an
        auditor's on the audited queries only); a stale grade, or one of a pair outside the
        pool, is never in it.
    manifest : dict
        As :func:`collect_grades`' manifest, plus ``rubric_sha256``, ``rounds`` (the rounds
        whose grades were used) and per grader ``bank_rows`` (its grades in the bank) and
        ``unused`` (those not in the table: stale, or of pairs outside the pool or audit).
    """
    files = files or {}
    audit = sorted({str(q) for q in audit_query_ids})
    n_pairs = len(pool[["query_id", "chunk_id"]].astype(str).drop_duplicates())
    # which bank rows are in the table, as positions: the columns are taken once, at the
    # end (a copy of the bank per step, filter and grader would each cost the bank again)
    chosen = current_positions(bank, pool=pool, content=content, intents=intents,
                               rubric_sha256=rubric_sha256, rubric_version=rubric_version,
                               carry=carry)
    grader_col = bank["grader"].to_numpy(dtype=object)
    in_audit = bank["query_id"].isin(audit).to_numpy()
    sequence = bank["sequence"].to_numpy(dtype="int64")
    picked, roles, names = [], {}, []
    for name in sorted(graders):
        spec = graders[name]
        roles[name] = spec["role"]
        mine = chosen[grader_col[chosen] == name]
        if spec["role"] == "auditor":
            mine = mine[in_audit[mine]]
        # each grader's rows in grading order, ties in the order the rows were chosen
        mine = mine[np.argsort(sequence[mine], kind="stable")]
        picked.append(mine)
        names.append(name)
    del chosen, in_audit
    taken = bank[["query_id", "chunk_id", "reason", "grade", "sequence"]].iloc[
        np.concatenate(picked) if picked else np.zeros(0, np.int64)].reset_index(drop=True)
    tables, entries, start = {}, {}, 0
    for name, mine in zip(names, picked):
        spec = graders[name]
        graded = taken.iloc[start:start + len(mine)]
        start += len(mine)
        if len(graded):
            tables[name] = graded
        f = files.get(name)
        owed = pool if key_pairs is None or spec["role"] == TRIAGE_ROLE else key_pairs
        entry = grader_entry(name, spec, graded=graded, pool=owed, audit_query_ids=audit,
                             rubric_version=rubric_version, round=round,
                             file=None if f is None else f.source,
                             sha256=None if f is None else f.sha256)
        n_bank = int((grader_col == name).sum())
        entry.update({"bank_rows": n_bank, "unused": n_bank - int(len(graded))})
        entries[name] = entry
    del grader_col, sequence
    manifest = {"rubric_version": rubric_version, "rubric_sha256": rubric_sha256,
                "round": int(round), "rounds": sorted({int(r) for r in bank["round"]}),
                "intents_sha256": intents_sha256, "pool_pairs": n_pairs,
                "graders": entries}
    if not tables:
        rows = long_rows({}, roles=roles, round=round)
    else:
        # ``taken`` is already the graders' tables stacked in order: long_rows' rows
        # without a copy per grader
        sizes = [len(m) for m in picked]
        rows = _long_rows_of(pd.DataFrame({
            "query_id": taken["query_id"], "chunk_id": taken["chunk_id"],
            "grader": pd.Series(np.repeat(np.array(names, dtype=object), sizes),
                                dtype="str"),
            "role": pd.Series(np.repeat(np.array([roles[n] for n in names], dtype=object),
                                        sizes), dtype="str"),
            "round": int(round), "grade": taken["grade"].astype("int64"),
            "reason": taken["reason"], "sequence": taken["sequence"].astype("int64")},
            copy=False))  # the taken columns themselves, not a second copy of them
    del tables, taken, picked
    return (rows.table() if whole else rows), manifest


def current_positions(bank: pd.DataFrame, *, pool: pd.DataFrame, content: pd.Series,
                      intents: pd.Series, rubric_sha256: str,
                      rubric_version: str | None = None, carry=None) -> np.ndarray:
    """The bank rows of the current grades of pool pairs, as positions.

    The rows of ``current_grades(bank, ...)`` whose pair is in ``pool``, in that order,
    found over codes: no copy of the bank is made.

    Parameters
    ----------
    bank : pandas.DataFrame of shape (n, >= 8)
        :func:`judgment_bank`'s table (``grader``, ``query_id``, ``chunk_id``, ``round`` and
        the columns of :func:`relgrade.protocol.bank.currency`).
    pool : pandas.DataFrame
        ``query_id``, ``chunk_id`` (compared as str).
    content, intents, rubric_sha256, rubric_version, carry
        As for :func:`relgrade.protocol.bank.currency`.

    Returns
    -------
    numpy.ndarray of int64, shape (n_current,)
        Positions in ``bank``: per (grader, query_id, chunk_id) the current grade of the
        highest ``round``, within a round the last recorded (as
        :func:`relgrade.protocol.bank.latest_grades` keeps it), in the order
        ``latest_grades`` leaves them (by round, then bank order), pool pairs only.
    """
    now = currency(bank, content=content, intents=intents, rubric_sha256=rubric_sha256,
                   rubric_version=rubric_version, carry=carry).eq("current").to_numpy()
    at = np.flatnonzero(now)
    del now
    if "round" in bank.columns:
        at = at[np.argsort(bank["round"].to_numpy()[at], kind="stable")]
    # the last of each (grader, query, chunk) in that order: the first seen backwards
    key = np.zeros(len(bank), dtype=np.int64)
    for k in ("grader", "query_id", "chunk_id"):
        codes, uniques = id_codes(bank[k])
        if len(key) and int(key.max()) >= (2 ** 62) // max(len(uniques), 1):
            key = np.unique(key, return_inverse=True)[1].astype(np.int64)  # dense again
        key = key * max(len(uniques), 1) + codes
        del codes, uniques
    _, first_back = np.unique(key[at][::-1], return_index=True)
    del key
    last = np.zeros(len(at), dtype=bool)
    last[len(at) - 1 - first_back] = True
    at = at[last]
    del last, first_back
    member = pair_member(pd.DataFrame({"query_id": bank["query_id"],
                                       "chunk_id": bank["chunk_id"]}), pool)
    return at[member[at]]


def coverage_lines(manifest: Mapping, *, limit: int = 10) -> list[str]:
    """Plain-words coverage report of a grades manifest: one line per grader with gaps.

    Parameters
    ----------
    manifest : mapping
        As returned by :func:`collect_grades`.
    limit : int, optional
        At most this many queries are named per grader.

    Returns
    -------
    list of str
        e.g. ``"grader-a: 3 pool pairs lack a grade, in 2 queries: q1 (2), q4 (1)"``.
    """
    out = []
    for name, e in manifest["graders"].items():
        if not e["pairs_missing"]:
            continue
        parts = [f"{q} ({len(c)})" for q, c in list(e["missing"].items())[:limit]]
        more = len(e["missing"]) - limit
        pairs = "1 pool pair lacks" if e["pairs_missing"] == 1 else \
            f"{e['pairs_missing']} pool pairs lack"
        queries = "1 query" if len(e["missing"]) == 1 else f"{len(e['missing'])} queries"
        out.append(f"{name}: {pairs} a grade, in {queries}: {', '.join(parts)}"
                   + (f" and {more} more" if more > 0 else ""))
    return out
