"""Label Studio: packets out as a task file, annotations back in as validated grade rows.

For graders who work in Label Studio rather than on relgrade's own web page. The export holds
one task per (query, chunk) pair, in the packets' display order (query by query, batch by
batch): each task shows the query, the locked intent, the chunk's header and text, and asks
for a reason and a grade. Nothing else goes in: no arm, rank, score or provenance (a packet
has none), no other grader's grade.

The import reads Label Studio's JSON export (*Export → JSON*: a list of tasks, each with its
``data`` and its ``annotations``) and turns every annotated task into a grade row
``{"query_id", "chunk_id", "reason", "grade"}``, then validates all of them with
:func:`relgrade.protocol.grades.validate_grade_rows`, exactly as a command grader's output is
validated. A task's position in the export (1-based) stands in for the line number in error
messages.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Mapping, Sequence
from xml.sax.saxutils import quoteattr

import pandas as pd

from relgrade.errors import InputError
from relgrade.protocol.grades import reason_required, validate_grade_rows
from relgrade.protocol.packets import check_batch

#: The control names the labeling configuration uses and the import reads.
GRADE_CONTROL = "grade"
REASON_CONTROL = "reason"

_INT = re.compile(r"^-?[0-9]+$")  # ASCII digits only: int() also reads "２"


def label_studio_tasks(packets: Iterable[Mapping]) -> list[dict]:
    """Label Studio tasks for packets: one task per chunk, in display order.

    Parameters
    ----------
    packets : iterable of dict
        Packets (see docs/formats.md), in the order to present them.

    Returns
    -------
    list of dict
        ``[{"data": {"query_id", "chunk_id", "query", "intent", "header", "text", "batch",
        "rubric_version"}}, ...]``.
    """
    tasks = []
    for p in packets:
        for b, batch in enumerate(p["batches"]):
            check_batch(batch, item=f"{p['query_id']} batch {b}")
            for c in batch:
                tasks.append({"data": {
                    "query_id": str(p["query_id"]), "chunk_id": str(c["chunk_id"]),
                    "query": p["query"], "intent": p["intent"], "header": c["header"],
                    "text": c["text"], "batch": b, "rubric_version": p.get("rubric_version"),
                }})
    return tasks


def label_studio_tasks_json(packets: Iterable[Mapping]) -> bytes:
    """:func:`label_studio_tasks` as the bytes of a JSON task file (UTF-8, LF-terminated).

    Same signature as the packet export formats of ``relgrade packets export``
    (``relgrade.cli.packets.EXPORT_FORMATS``).
    """
    return (json.dumps(label_studio_tasks(packets), ensure_ascii=False, indent=1) + "\n").encode()


def label_studio_config(scale: Sequence[int], max_reason_words: int) -> str:
    """The labeling configuration (XML) for the exported tasks.

    Parameters
    ----------
    scale : sequence of int
        The grades to offer (params ``scale.grades``).
    max_reason_words : int
        Shown in the reason box's placeholder.

    Returns
    -------
    str
        A ``<View>`` with the query and intent, the chunk's header and text, a
        ``TextArea`` named ``reason`` (before the grade, as the protocol orders them) and a
        single-choice ``Choices`` named ``grade``.
    """
    choices = "\n".join(f'      <Choice value="{int(g)}"/>' for g in scale)
    hint = quoteattr(f"At most {max_reason_words} words: what the chunk says about the target")
    return f"""<View>
  <Header value="Query: $query"/>
  <Text name="intent" value="$intent"/>
  <Header value="$header" size="5"/>
  <Text name="chunk" value="$text" granularity="word"/>
  <TextArea name="{REASON_CONTROL}" toName="chunk" maxSubmissions="1" rows="2"
            editable="true" placeholder={hint}/>
  <Choices name="{GRADE_CONTROL}" toName="chunk" choice="single" showInline="true"
           required="true">
{choices}
  </Choices>
</View>
"""


def _annotator(annotation: Mapping):
    who = annotation.get("completed_by")
    if isinstance(who, Mapping):
        return who.get("email") or who.get("id")
    return who


def _row_from_annotation(data: Mapping, annotation: Mapping) -> dict:
    grade, reasons = None, []
    for item in annotation.get("result") or []:
        name, value = item.get("from_name"), item.get("value") or {}
        if name == GRADE_CONTROL:
            chosen = value.get("choices") or []
            grade = chosen[0] if len(chosen) == 1 else chosen
        elif name == REASON_CONTROL:
            text = value.get("text") or []
            reasons.extend(text if isinstance(text, list) else [text])
    if isinstance(grade, str) and _INT.match(grade.strip()):
        grade = int(grade.strip())  # Label Studio stores a choice as its text
    return {"query_id": data.get("query_id"), "chunk_id": data.get("chunk_id"),
            "reason": " ".join(str(r) for r in reasons).strip(), "grade": grade}


def annotation_rows(export, *, source, annotator=None) -> tuple[list[tuple[int, dict]], int]:
    """Grade rows from a Label Studio JSON export, before validation.

    Parameters
    ----------
    export : list of dict
        The parsed export: tasks with ``data`` and ``annotations``.
    source : str or os.PathLike
        The export file, for error messages.
    annotator : str or int, optional
        Keep only annotations by this annotator (``completed_by``: user id or email).

    Returns
    -------
    rows : list of (int, dict)
        ``(task position, grade row)`` for every task with one kept annotation.
    unannotated : int
        Tasks with no kept annotation (not graded yet: left out).

    Raises
    ------
    InputError
        The export is not a list of tasks; a task lacks ``data.query_id`` or
        ``data.chunk_id``; a task has two or more kept annotations (pass ``annotator``).
    """
    if not isinstance(export, list):
        raise InputError("a Label Studio export is a JSON list of tasks", path=source,
                         found=type(export).__name__, fix="Use Export → JSON in Label Studio")
    rows, unannotated = [], 0
    for i, task in enumerate(export, start=1):
        if not isinstance(task, Mapping) or not isinstance(task.get("data"), Mapping):
            raise InputError("task has no `data` object", path=source, line=i)
        data = task["data"]
        for k in ("query_id", "chunk_id"):
            if k not in data:
                raise InputError(f"task data lacks `{k}`", path=source, line=i,
                                 item=f"task {task.get('id', i)}",
                                 fix="Import the tasks written by relgrade packets export "
                                     "--format label-studio")
        kept = [a for a in task.get("annotations") or []
                if not a.get("was_cancelled")
                and (annotator is None or str(_annotator(a)) == str(annotator))]
        if not kept:
            unannotated += 1
            continue
        if len(kept) > 1:
            raise InputError("task has more than one annotation", path=source, line=i,
                             item=f"pair ({data['query_id']}, {data['chunk_id']})",
                             found=f"{len(kept)} annotations by "
                                   + ", ".join(str(_annotator(a)) for a in kept),
                             fix="Choose whose grades to import with --annotator")
        rows.append((i, _row_from_annotation(data, kept[0])))
    return rows, unannotated


def import_label_studio(export, *, pool_pairs: set, scale: Sequence[int], max_reason_words: int,
                        kind: str, role: str, source, grader: str | None = None,
                        annotator=None) -> tuple[pd.DataFrame, int]:
    """Validated grade rows from a Label Studio JSON export.

    Parameters
    ----------
    export : list of dict
        The parsed export.
    pool_pairs : set of (str, str)
        The pairs the grader's packets hold.
    scale, max_reason_words :
        As in :func:`relgrade.protocol.grades.validate_grade_rows`.
    kind, role : str
        The grader's kind and role (whether a reason is required).
    source : str or os.PathLike
        The export file, for error messages.
    grader : str, optional
        The grader's name, for error messages.
    annotator : str or int, optional
        See :func:`annotation_rows`.

    Returns
    -------
    rows : pandas.DataFrame of shape (n_rows, 4)
        ``query_id``, ``chunk_id``, ``reason``, ``grade``, in export order.
    unannotated : int
        Tasks left out because nobody annotated them.

    Raises
    ------
    InputError
        Any error of :func:`annotation_rows`, or the first row that breaks a rule of
        :func:`~relgrade.protocol.grades.validate_grade_rows` (the error names the task position).
    """
    rows, unannotated = annotation_rows(export, source=source, annotator=annotator)
    df = validate_grade_rows(rows, pool_pairs=pool_pairs, scale=scale,
                             max_reason_words=max_reason_words,
                             require_reason=lambda g: reason_required(kind, role, g),
                             source=source, grader=grader)
    return df, unannotated
