"""A grade file and its bank sidecar, line by line: which record each grade row was made on.

Every grade file ``round-N.jsonl`` has a bank sidecar ``round-N.bank.jsonl`` beside it,
written in step with it: the n-th grade row of the file was made on what the n-th line of the
sidecar records (the chunk's content hash, the intent line's hash, the rubric). relgrade
appends a batch's bank lines first and its grade rows after them, so the only way the two
can part after a crash is a *trailing* run of bank lines without rows (their batch was never
acknowledged); such lines are ignored by readers and cut away by the next writer. Bank lines
written since this rule also carry ``row_sha256``, the sha256 of the grade row they belong to
(:func:`row_sha256`), so a grade file replaced or edited under its sidecar is found, not
silently paired with the wrong record.

Anything else is a grade file and a sidecar that disagree in their body (a row removed or
moved, a grade file or sidecar restored alone from another time): refused with one error
naming both files and how to restore them, never guessed. What a grade is made on is
decided from the record paired with its row, never from the pair's last bank line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from relgrade.canonical import canonical_json, sha256_bytes
from relgrade.errors import InputError


def row_sha256(row: Mapping) -> str:
    """The sha256 of a grade row as its file holds it: canonical JSON, key order kept.

    Parameters
    ----------
    row : mapping
        One grade row (``query_id``, ``chunk_id``, ``reason``, ``grade``, in its order).

    Returns
    -------
    str
        64 hex digits over the UTF-8 bytes of :func:`relgrade.canonical.canonical_json`.

    Examples
    --------
    >>> row_sha256({"query_id": "q1", "chunk_id": "c1", "reason": "defines it", "grade": 2})[:12]
    '18c330e64921'
    """
    return sha256_bytes(canonical_json(dict(row)).encode("utf-8", "surrogatepass"))


def _pair(row: Mapping) -> tuple[str, str]:
    return str(row.get("query_id")), str(row.get("chunk_id"))


def regrade_commands(grader: str) -> str:
    """The commands that record a grader's grades with their bank sidecar, each complete as
    printed: ``relgrade grade run --grader G`` (a command grader), ``relgrade serve`` and
    ``relgrade grade import FILE --grader G`` (people; FILE their grades).

    Parameters
    ----------
    grader : str
        The grader (params ``graders``; the grade file's folder).

    Returns
    -------
    str
        The three commands in backticks, in words, for an error's fix.
    """
    return (f"`relgrade grade run --grader {grader}` (a command grader), `relgrade serve` or "
            f"`relgrade grade import FILE --grader {grader}` (people's grades in FILE)")


def repair_hint(source, bank_source) -> str:
    """The fix named when a grade file and its sidecar disagree; the grader is the grade
    file's folder (``paths.grades_in``/GRADER/round-R.jsonl)."""
    return (f"Restore both from the same commit (`git checkout -- {Path(source).as_posix()} "
            f"{Path(bank_source).as_posix()}`), then grade again what is missing with "
            f"{regrade_commands(Path(source).parent.name)}; relgrade never guesses which "
            "record a grade was made on")


@dataclass(frozen=True)
class Pairing:
    """The records of a grade file's rows.

    Attributes
    ----------
    records : list of dict
        One bank record per grade row, in the file's row order (``records[i]`` is what
        row ``i`` was made on).
    unpaired : int
        Trailing bank lines without a grade row (a batch cut short before its rows were
        written; never acknowledged): ignored, and cut away by the next writer.
    keep_lines : int
        How many bank lines belong to rows: a writer truncates the sidecar to these.
    """

    records: list
    unpaired: int
    keep_lines: int


def pair_rows(rows: Sequence[tuple[int, Mapping]], bank: Sequence[tuple[int, Mapping]], *,
              source, bank_source) -> Pairing:
    """Pair each grade row with its bank line, position by position, and check the pairs.

    Parameters
    ----------
    rows : sequence of (int, mapping)
        ``(line, row)`` of the grade file's rows, in file order (blank lines left out).
    bank : sequence of (int, mapping)
        ``(line, record)`` of the sidecar's lines, in file order (a torn last line left out).
    source, bank_source : str or os.PathLike
        The grade file and its sidecar, named in errors.

    Returns
    -------
    Pairing

    Raises
    ------
    InputError
        The files disagree in their body: a row's record names another pair, or its
        ``row_sha256`` is not the row's; or rows outnumber the sidecar's lines (grade rows
        without what they were made on). The message names both files and how to restore
        them.

    Examples
    --------
    >>> r = {"query_id": "q", "chunk_id": "c", "reason": "", "grade": 0}
    >>> b = {"query_id": "q", "chunk_id": "c", "content_sha256": "A"}
    >>> p = pair_rows([(1, r)], [(1, b), (2, dict(b, content_sha256="B"))],
    ...               source="g.jsonl", bank_source="g.bank.jsonl")
    >>> [x["content_sha256"] for x in p.records], p.unpaired, p.keep_lines
    (['A'], 1, 1)
    """
    fix = repair_hint(source, bank_source)
    for (line, row), (bline, record) in zip(rows, bank):
        if not isinstance(record, Mapping):
            raise InputError("a bank line is not a JSON object", path=bank_source, line=bline,
                             fix=fix)
        digest = record.get("row_sha256")
        if _pair(record) != _pair(row) or (digest is not None and digest != row_sha256(row)):
            what = ("another pair" if _pair(record) != _pair(row)
                    else "another grade of the pair")
            raise InputError(
                f"the grade file and its bank sidecar {Path(bank_source).as_posix()} disagree: "
                f"the record of this row (bank line {bline}) is of {what}",
                path=source, line=line, item=f"pair ({_pair(row)[0]}, {_pair(row)[1]})",
                found=f"record of ({_pair(record)[0]}, {_pair(record)[1]})", fix=fix)
    if len(rows) > len(bank):
        line, row = rows[len(bank)]
        raise InputError(
            f"grade row without its bank line (what it was made on): "
            f"{len(rows) - len(bank)} rows beyond the {len(bank)} lines of "
            f"{Path(bank_source).as_posix()}", path=source, line=line,
            item=f"pair ({_pair(row)[0]}, {_pair(row)[1]})", fix=fix)
    return Pairing(records=[record for _, record in bank[:len(rows)]],
                   unpaired=len(bank) - len(rows), keep_lines=len(rows))
