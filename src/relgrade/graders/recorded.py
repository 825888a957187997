"""A recorded grade file read as the pipeline reads it: the latest grade of each pair.

A grader's round file may hold two rows for one pair: after the pair's chunk, intent line or
rubric changed, its regrade is recorded beside the old grade (never in its place), and the
bank sidecar says what each row was made on. The grades stage reads such a file through the
judgment bank (:func:`relgrade.protocol.grades.bank_of_file`): a second row of a pair made on
other content, intent or rubric supersedes the first; a second row made on the same is a
true duplicate and is refused. This module gives commands outside the pipeline
(``relgrade agreement``) the same reading.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from relgrade.errors import InputError
from relgrade.graders.store import bank_path, read_bank
from relgrade.io.files import iter_jsonl
from relgrade.io.grade_columns import read_round_columns
from relgrade.protocol.bank import latest_grades
from relgrade.protocol.grades import GraderFile, bank_of_file

#: How a file outside any experiment's params is validated: no reason is required and
#: none is too long (agreement reads grades, not reasons).
_ANY_GRADER = {"kind": "import", "role": "grader"}


@dataclass(frozen=True)
class Recorded:
    """A recorded grade file's latest grades.

    Attributes
    ----------
    table : pandas.DataFrame
        Columns ``query_id``, ``chunk_id`` (str), ``grade`` (int64), ``reason`` (str): the
        latest grade of each pair, in file order.
    superseded : int
        Rows left out because a later row of the same pair supersedes them.
    """

    table: pd.DataFrame
    superseded: int


def has_bank(path) -> bool:
    """Whether ``path`` is a JSON Lines grade file with a bank sidecar beside it."""
    path = Path(path)
    return path.suffix.lower() == ".jsonl" and bank_path(path).is_file()


def read_recorded(path, *, scale: Iterable[int]) -> Recorded:
    """A grade file with its bank sidecar, each pair's latest recorded grade.

    Parameters
    ----------
    path : str or os.PathLike
        A grader's round file (``round-N.jsonl``) with ``round-N.bank.jsonl`` beside it.
    scale : iterable of int
        The allowed grades.

    Returns
    -------
    Recorded

    Raises
    ------
    InputError
        The file holds no grade row; a rule of :func:`relgrade.protocol.grades.bank_of_file`: a bad row (keys, ids,
        grade off the scale), no sidecar, a file and sidecar that disagree, or a second row
        of a pair made on the same content, intent and rubric as its first (a true
        duplicate, not a supersession).
    """
    path = Path(path)
    columns = read_round_columns(path, bank_path(path))  # the rows only to word an error
    f = GraderFile(rows=iter_jsonl(path), source=path.as_posix(), sha256="",
                   bank=None if columns is not None else read_bank(path),
                   bank_source=bank_path(path).as_posix(), columns=columns,
                   load_bank=None if columns is None else (lambda: read_bank(path)))
    # a grader's files live in its own folder (data/grades/NAME/round-N.jsonl): errors name it
    rows = bank_of_file(f, name=path.parent.name or path.name, spec=_ANY_GRADER, scale=scale,
                        max_reason_words=sys.maxsize, max_reason_chars=sys.maxsize)
    if rows.empty:  # as every judgment file (relgrade.io.judgments, rule 7)
        raise InputError("no judgments in the file", path=path,
                         fix="A judgment file holds at least one (query, chunk, grade) row")
    latest = latest_grades(rows.drop(columns="round")).sort_index(kind="stable")
    table = latest[["query_id", "chunk_id", "grade", "reason"]].astype(
        {"query_id": "str", "chunk_id": "str", "grade": "int64", "reason": "str"})
    return Recorded(table=table.reset_index(drop=True), superseded=len(rows) - len(latest))
