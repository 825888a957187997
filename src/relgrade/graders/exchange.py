"""The command grader exchange format: what relgrade writes to a grader command, what it reads.

A model grader is any program that reads one *batch request* on its standard input and
prints one grade row per chunk of the batch on its standard output. ``relgrade grade run``
starts a fresh process for every batch (at most ``grading.batch_size`` chunks, never more
than five): no process ever sees two queries, or two batches, so nothing one batch was told
can carry into the next. The batches of one query run one after another on one worker.

Request (standard input, one JSON object, UTF-8), with ``input: json`` (the default)::

    {"exchange": "relgrade-grader/1", "grader": "grader-a",
     "query_id": "q07", "query": "...", "intent": "...",
     "rubric_version": "v1", "rubric": "<the rubric text>",
     "scale": [0, 1, 2], "max_reason_words": 15, "reason_required": true,
     "batch": 0, "batches": 3, "sample": 0, "attempt": 1, "previous_error": null,
     "chunks": [{"chunk_id": "...", "header": "...", "text": "..."}, ...],
     "prompt": "<the whole request as one prompt for an LLM command-line tool>"}

With ``input: prompt`` the standard input is only the ``prompt`` text, so a command-line
model client can be the command itself. ``attempt`` counts from 1; on a retry
``previous_error`` says what was wrong with the last answer.

Response (standard output, JSON Lines): exactly one row per chunk of the batch,
``{"query_id", "chunk_id", "reason", "grade"}`` in that key order. Blank lines and Markdown
code-fence lines (starting with three backticks) are ignored; anything else that is not a
JSON object fails the batch. The process must exit with status 0.

A request never holds an arm, a rank, a score, provenance or another grader's grades: it is
built from the packet alone.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Mapping, Sequence

import pandas as pd

from relgrade.errors import InputError
from relgrade.protocol.grades import reason_required, validate_grade_rows
from relgrade.schema import GRADE_KEYS

#: The ``exchange`` value of every request; a new major version changes it.
EXCHANGE_VERSION = "relgrade-grader/1"

#: How a request is put on standard input.
INPUT_MODES = ("json", "prompt")


def parse_command(value, *, grader: str, path=None) -> list[str]:
    """A grader's ``command`` param as an argv list.

    Parameters
    ----------
    value : str or list of str
        An argv list (used as is) or one string, split the way a POSIX shell splits words
        (``shlex.split``; no shell runs, so pipes need ``["sh", "-c", "..."]``).
    grader : str
        The grader's name, for error messages.

    Returns
    -------
    list of str

    Raises
    ------
    InputError
        Missing, empty, or not a string / list of strings.
    """
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as e:
            raise InputError("grader command is not a valid command line", path=path,
                             item=f"graders.{grader}.command", found=str(e)) from None
    elif isinstance(value, (list, tuple)) and all(isinstance(a, (str, int, float)) for a in value):
        argv = [str(a) for a in value]
    else:
        raise InputError("grader command must be an argv list or a string", path=path,
                         item=f"graders.{grader}.command", found=repr(value),
                         fix="Set e.g. command: [python, graders/claude_grader.py]")
    if not argv:
        raise InputError("grader command is empty", path=path, item=f"graders.{grader}.command")
    return argv


def batch_request(
    packet: Mapping,
    batch: int,
    chunks: Sequence[Mapping],
    *,
    grader: str,
    rubric: str,
    scale: Sequence[int],
    max_reason_words: int,
    reason_is_required: bool = True,
    sample: int = 0,
    attempt: int = 1,
    previous_error: str | None = None,
) -> dict:
    """The request for one batch of one packet.

    Parameters
    ----------
    packet : dict
        The packet (``query_id``, ``query``, ``intent``, ``rubric_version``, ``batches``).
    batch : int
        0-based index of the batch in ``packet["batches"]``.
    chunks : sequence of dict
        The chunks to grade (``chunk_id``, ``header``, ``text``): the batch, or the part of
        it still lacking grades; at most the batch.
    grader : str
        The grader's name.
    rubric : str
        The rubric text (params ``grading.rubric``).
    scale : sequence of int
        Allowed grades.
    max_reason_words : int
        Longest reason allowed.
    reason_is_required : bool, default True
        Whether every row needs a reason (always, for a model grader).
    sample : int, default 0
        0-based sample number when the grader samples each pair several times.
    attempt : int, default 1
        1 for the first try, 2 and on for retries.
    previous_error : str, optional
        Why the previous attempt's answer was refused.

    Returns
    -------
    dict
        The request without ``prompt`` (see :func:`render_prompt`), keys in the documented
        order; chunks carry only ``chunk_id``, ``header`` and ``text``.
    """
    return {
        "exchange": EXCHANGE_VERSION,
        "grader": grader,
        "query_id": str(packet["query_id"]),
        "query": packet["query"],
        "intent": packet["intent"],
        "rubric_version": packet.get("rubric_version"),
        "rubric": rubric,
        "scale": [int(g) for g in scale],
        "max_reason_words": int(max_reason_words),
        "reason_required": bool(reason_is_required),
        "batch": int(batch),
        "batches": len(packet["batches"]),
        "sample": int(sample),
        "attempt": int(attempt),
        "previous_error": previous_error,
        "chunks": [{"chunk_id": str(c["chunk_id"]), "header": c.get("header", ""),
                    "text": c.get("text", "")} for c in chunks],
    }


def render_prompt(template, request: Mapping) -> str:
    """The request as one prompt, from the Jinja2 template ``prompts/grader.md``.

    Parameters
    ----------
    template : jinja2.Template
        The compiled prompt template.
    request : dict
        A request from :func:`batch_request`.

    Returns
    -------
    str
    """
    return template.render(**request)


def code_fence(text: str) -> str:
    """A Markdown code fence longer than any run of backticks in ``text`` (at least three).

    Examples
    --------
    >>> code_fence("x = 1")
    '```'
    >>> code_fence("see ```python blocks")
    '````'
    """
    longest = max((len(run) for run in re.findall(r"`+", text or "")), default=0)
    return "`" * max(3, longest + 1)


def encode_request(request: Mapping, *, mode: str = "json") -> bytes:
    """The bytes written to the command's standard input (``mode`` in :data:`INPUT_MODES`)."""
    if mode == "prompt":
        return str(request["prompt"]).encode("utf-8")
    return (json.dumps(request, ensure_ascii=False) + "\n").encode("utf-8")


def _is_noise(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("```")


def parse_response(
    stdout: str,
    *,
    query_id: str,
    chunks: Sequence[Mapping],
    scale: Sequence[int],
    max_reason_words: int,
    kind: str,
    role: str,
    source: str,
    grader: str | None = None,
    max_reason_chars: int = 300,
) -> pd.DataFrame:
    """Validate a grader command's answer to one batch, all or nothing.

    Parameters
    ----------
    stdout : str
        What the command printed.
    query_id : str
        The batch's query.
    chunks : sequence of dict
        The chunks the request asked for (``chunk_id`` used).
    scale, max_reason_words, max_reason_chars :
        As in :func:`relgrade.protocol.grades.validate_grade_rows`.
    kind, role : str
        The grader's kind and role (decide whether a reason is required).
    source : str
        Names the batch in error messages (e.g. ``"grader-a command, q07 batch 1"``).
    grader : str, optional
        The grader's name for error messages.

    Returns
    -------
    pandas.DataFrame of shape (len(chunks), 4)
        ``query_id``, ``chunk_id``, ``reason``, ``grade`` in the order printed.

    Raises
    ------
    InputError
        A line that is not a JSON object; a row for a chunk or query not in this batch; any
        rule of :func:`~relgrade.protocol.grades.validate_grade_rows`; too few rows (naming the chunks
        left without one).
    """
    wanted = [str(c["chunk_id"]) for c in chunks]
    batch_pairs = {(str(query_id), c) for c in wanted}
    rows = []
    for i, line in enumerate(stdout.splitlines(), start=1):
        if _is_noise(line):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError("grader output line is not JSON", path=source, line=i,
                             found=f"{e.msg}: {line[:80]!r}",
                             fix="Print only JSON Lines grade rows on standard output") from None
        if not isinstance(obj, dict):
            raise InputError("grader output line is not a JSON object", path=source, line=i,
                             found=type(obj).__name__)
        q, c = obj.get("query_id"), obj.get("chunk_id")
        if q is not None and c is not None and tuple(obj.keys()) == GRADE_KEYS \
                and (str(q), str(c)) not in batch_pairs:
            raise InputError("row for a chunk that is not in this batch", path=source, line=i,
                             item=f"pair ({q}, {c})",
                             fix="Grade exactly the chunks of the request, nothing else")
        rows.append((i, obj))
    df = validate_grade_rows(
        rows, pool_pairs=batch_pairs, scale=scale, max_reason_words=max_reason_words,
        require_reason=lambda g: reason_required(kind, role, g), source=source, grader=grader,
        max_reason_chars=max_reason_chars)
    got = set(df["chunk_id"])
    missing = [c for c in wanted if c not in got]
    if missing:
        raise InputError("too few rows: every chunk of the batch needs one row", path=source,
                         item="missing " + ", ".join(missing),
                         found=f"{len(got)} of {len(wanted)} rows")
    return df


def prompt_template_text() -> str:
    """The text of the grader prompt template shipped with relgrade
    (``relgrade/prompts/grader.md``): what :func:`prompt_template` compiles, and what the
    judge's identity hashes (:func:`relgrade.graders.cache.command_identity`)."""
    from importlib import resources

    return (resources.files("relgrade") / "prompts" / "grader.md").read_text("utf-8")


def prompt_template():
    """The grader prompt template shipped with relgrade (``relgrade/prompts/grader.md``).

    Returns
    -------
    jinja2.Template
        Strict (an undefined variable is an error), with the ``code_fence`` filter
        (:func:`code_fence`); rendered by :func:`render_prompt`.
    """
    import jinja2

    text = prompt_template_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["code_fence"] = code_fence
    return env.from_string(text)
