"""Provider batch files: a round's owed batches as a hosted model's batch requests, and back.

Hosted models' batch APIs answer a file of requests within a day at about half the price.
``relgrade grade export --batch openai|anthropic`` writes every batch a grader still owes as
one request of that provider's batch-request JSON Lines, and ``relgrade grade import --batch
RESULTS`` reads the provider's results file back:

* one request per batch (at most five chunks of one query), holding **the same prompt** a
  command grader is given (:func:`relgrade.graders.exchange.render_prompt` of the batch's
  request) as the one user message; no arm, rank, score or other grader's grade;
* ``custom_id`` is the batch's call-cache key (:func:`relgrade.graders.cache.call_key` of
  the grader's name and role, the provider, its model and settings, the prompt template's
  and rubric's sha256 and the settings named in ``identity_keys``
  (:func:`batch_identity`), and the request body:
  two graders of one model never share an answer): 64 hex digits, within both
  providers' limits (Anthropic: ``^[a-zA-Z0-9_-]{1,64}$``);
* OpenAI (``/v1/batches``, endpoint ``/v1/chat/completions``), one line per request::

      {"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions",
       "body": {"model": M, "messages": [{"role": "user", "content": PROMPT}],
                "max_completion_tokens": N}}

  and its results ``{"custom_id", "response": {"status_code", "body": {"choices":
  [{"message": {"content": TEXT}}]}}, "error"}``;
* Anthropic (Message Batches), one line per request::

      {"custom_id": KEY, "params": {"model": M, "max_tokens": N,
                                    "messages": [{"role": "user", "content": PROMPT}]}}

  and its results ``{"custom_id", "result": {"type": "succeeded", "message": {"content":
  [{"type": "text", "text": TEXT}]}}}``.

``temperature`` is added to the body when params set it. The answer ``TEXT`` is parsed by
the same parser as a command's standard output
(:func:`relgrade.graders.exchange.parse_response`) and validated as every grade row is.

Importing is all or nothing per file: a line that is not JSON or not shaped like the
provider's results, a ``custom_id`` of no owed batch (already recorded, or from another
round's or grader's export), the same batch twice, or an answer the parser refuses (a grade
off the scale, a missing chunk) refuses the whole file, naming it, the line and the rule,
and nothing of it is recorded. A request the provider did not answer (an ``error``, a
non-200 status, ``errored``, ``canceled`` or ``expired``) is not an error: it stays owed, as
do the batches a partial results file does not mention; export again to send them.
Accepted answers go into the call cache too (before their grades are recorded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from relgrade.canonical import canonical_json, jsonl_bytes
from relgrade.errors import InputError
from relgrade.graders.cache import call_key, model_identity
from relgrade.graders.exchange import batch_request, parse_response, render_prompt
from relgrade.protocol.grades import reason_required

#: Providers whose batch files relgrade writes and reads.
PROVIDERS = ("openai", "anthropic")

#: ``max_tokens`` when params ``graders.NAME.max_tokens`` is not set.
DEFAULT_MAX_TOKENS = 1024

#: The endpoint of OpenAI batch requests.
OPENAI_URL = "/v1/chat/completions"


@dataclass(frozen=True)
class BatchSettings:
    """Who answers a batch file: the provider, its model and the settings sent.

    Attributes
    ----------
    provider : {"openai", "anthropic"}
    model_id : str
        The provider's model name (params ``graders.NAME.model_id``).
    max_tokens : int
        Longest answer, in tokens (params ``graders.NAME.max_tokens``, default 1024).
    temperature : float or None
        Params ``graders.NAME.temperature``; None leaves the provider's default.
    """

    provider: str
    model_id: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None

    def identity(self) -> dict:
        """The call cache identity: provider, model and settings."""
        return {"provider": self.provider, "model": self.model_id,
                "max_tokens": self.max_tokens, "temperature": self.temperature}


def batch_settings(spec: Mapping, name: str, provider: str, *, path=None) -> BatchSettings:
    """Read a grader's batch-file settings from its params entry ``graders.NAME``.

    Raises
    ------
    InputError
        ``provider`` is not one of :data:`PROVIDERS`; no ``model_id``; ``samples`` above 1
        (a batch file asks each pair once).
    """
    if provider not in PROVIDERS:
        raise InputError(f"batch files are written for {' or '.join(PROVIDERS)}",
                         item=name, found=repr(provider))
    model = spec.get("model_id")
    if not isinstance(model, str) or not model.strip():
        raise InputError("a batch file needs the provider's model name", path=path, item=name,
                         found=repr(model),
                         fix=f"Set graders.{name}.model_id (e.g. claude-sonnet-4-5 or gpt-4.1)")
    if int(spec.get("samples", 1) or 1) > 1:
        raise InputError("a batch file asks each pair once; samples > 1 needs grade run",
                         path=path, item=name, found=f"samples {spec.get('samples')}")
    return BatchSettings(provider=provider, model_id=model,
                         max_tokens=int(spec.get("max_tokens") or DEFAULT_MAX_TOKENS),
                         temperature=spec.get("temperature"))


@dataclass(frozen=True)
class OwedBatch:
    """One batch a grader owes, as a provider request.

    Attributes
    ----------
    key : str
        The request's call-cache key, its ``custom_id``.
    query_id : str
    batch : int
        The batch's index in its packet.
    chunks : tuple of dict
        The chunks asked for, in display order.
    body : dict
        The request body (OpenAI ``body``, Anthropic ``params``).
    """

    key: str
    query_id: str
    batch: int
    chunks: tuple
    body: dict


def request_body(settings: BatchSettings, prompt: str) -> dict:
    """The provider's request body for one prompt (see the module docstring)."""
    messages = [{"role": "user", "content": prompt}]
    if settings.provider == "openai":
        body = {"model": settings.model_id, "messages": messages,
                "max_completion_tokens": settings.max_tokens}
    else:
        body = {"model": settings.model_id, "max_tokens": settings.max_tokens,
                "messages": messages}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    return body


def batch_identity(settings: BatchSettings, *, grader: str, role: str,
                   template_text: str | None, rubric: str | None,
                   identity_settings: Mapping | None = None) -> dict:
    """A provider grader's call cache identity (:func:`relgrade.graders.cache.model_identity`
    of its provider, model and settings); its
    :func:`~relgrade.graders.cache.judge_identity` is the judge's identity recorded on the
    bank lines of the grades its results give."""
    return model_identity(settings.identity(), grader=grader, role=role,
                          template=template_text, rubric=rubric, samples=1,
                          settings=identity_settings)


def owed_batches(tasks: Sequence, *, settings: BatchSettings, grader: str, kind: str,
                 role: str, rubric: str, scale: Sequence[int], max_reason_words: int,
                 template, template_text: str | None = None,
                 identity_settings: Mapping | None = None) -> list[OwedBatch]:
    """Every batch of ``tasks`` as a provider request.

    Parameters
    ----------
    tasks : sequence of relgrade.graders.command.QueryTask
        The work left (:func:`relgrade.graders.command.plan`).
    settings : BatchSettings
    grader, kind, role : str
        The grader's name, kind and role (the request names the grader; kind and role
        decide whether a reason is required).
    rubric : str
        The rubric text.
    scale : sequence of int
    max_reason_words : int
    template : jinja2.Template
        The grader prompt template (:func:`relgrade.graders.exchange.prompt_template`).
    template_text : str, optional
        Its text, hashed into the call cache identity (:func:`batch_identity`).
    identity_settings : mapping, optional
        The grader's settings named in ``identity_keys``, with their values.

    Returns
    -------
    list of OwedBatch
        In the tasks' order.
    """
    identity = batch_identity(settings, grader=grader, role=role, template_text=template_text,
                              rubric=rubric, identity_settings=identity_settings)
    out = []
    for task in tasks:
        for bt in task.batches:
            req = batch_request(task.packet, bt.batch, bt.chunks, grader=grader, rubric=rubric,
                                scale=scale, max_reason_words=max_reason_words,
                                reason_is_required=reason_required(kind, role, 0))
            body = request_body(settings, render_prompt(template, req))
            key = call_key(identity, canonical_json(body).encode("utf-8"))
            out.append(OwedBatch(key=key, query_id=task.query_id, batch=bt.batch,
                                 chunks=tuple(bt.chunks), body=body))
    return out


def request_lines(owed: Sequence[OwedBatch], provider: str) -> bytes:
    """The provider's batch-request file for ``owed``, as JSON Lines bytes.

    Examples
    --------
    >>> b = OwedBatch(key="k" * 64, query_id="q", batch=0, chunks=(), body={"model": "m"})
    >>> request_lines([b], "anthropic")[:30]
    b'{"custom_id":"kkkkkkkkkkkkkkkk'
    """
    if provider == "openai":
        rows = ({"custom_id": b.key, "method": "POST", "url": OPENAI_URL, "body": b.body}
                for b in owed)
    else:
        rows = ({"custom_id": b.key, "params": b.body} for b in owed)
    return jsonl_bytes(rows)


# --- results ----------------------------------------------------------------------------

@dataclass
class BatchResults:
    """What a provider's results file holds.

    Attributes
    ----------
    answered : list of (OwedBatch, list of dict, str)
        Per accepted batch: the batch, its grade rows in display order, the answer text.
    unanswered : list of (int, str, str)
        ``(line, custom_id, why)`` of requests the provider did not answer (they stay owed).
    provider : str or None
        The provider whose format the file has (None for an empty file).
    refused : list of InputError
        With ``partial``: one error per refused line (naming the file, the line and the
        rule); those lines were skipped and their batches stay owed.
    """

    answered: list
    unanswered: list
    provider: str | None = None
    refused: list = field(default_factory=list)


def _shape(obj) -> str | None:
    if "result" in obj:
        return "anthropic"
    if "response" in obj or "error" in obj:
        return "openai"
    return None


def _result_line(raw: bytes, *, line: int, source: str) -> tuple[object, str | None]:
    """One line of a provider's results file: the parsed JSON value and its provider shape
    (:func:`_shape`; None when it is not an object of either provider's results).

    Raises
    ------
    InputError
        The line is not UTF-8 JSON, naming ``source`` and ``line``.
    """
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError("a results line is not valid JSON", path=source, line=line,
                         found=str(e), fix="Nothing of this file was recorded") from None
    return obj, (_shape(obj) if isinstance(obj, dict) else None)


def _answer(obj, provider) -> tuple[str | None, str | None]:
    """(the answer text, None) or (None, why the provider gave none); KeyError/TypeError
    when the line is not shaped like the provider's results."""
    if provider == "openai":
        if obj.get("error"):
            err = obj["error"]
            return None, f"error {err.get('code') or ''} {err.get('message') or ''}".strip() \
                if isinstance(err, dict) else f"error {err}"
        response = obj["response"]
        status = response["status_code"]
        if status != 200:
            return None, f"status {status}"
        content = response["body"]["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError("content is not text")
        return content, None
    result = obj["result"]
    kind = result["type"]
    if kind != "succeeded":
        return None, kind
    blocks = result["message"]["content"]
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise TypeError("no text block")
    return "".join(texts), None


def read_results(data: bytes, *, source, owed: Sequence[OwedBatch], grader: str, kind: str,
                 role: str, scale: Sequence[int], max_reason_words: int,
                 max_reason_chars: int = 300, partial: bool = False) -> BatchResults:
    """Read and validate a provider's batch results file, all or nothing (or line by line).

    Parameters
    ----------
    data : bytes
        The results file's bytes (JSON Lines, UTF-8).
    source : str or os.PathLike
        The file, named in errors.
    owed : sequence of OwedBatch
        The batches the grader owes now (:func:`owed_batches` with the settings the file
        was exported with).
    grader, kind, role, scale, max_reason_words, max_reason_chars :
        As for :func:`relgrade.graders.exchange.parse_response`.
    partial : bool, default False
        False: the first refused line refuses the file. True: each refused line is kept in
        ``refused`` (its error without the "nothing recorded" advice) and skipped; every
        other line is read as usual.

    Returns
    -------
    BatchResults

    Raises
    ------
    InputError
        (Without ``partial``.) Naming ``source`` and the line: a line that is not UTF-8 JSON object; a line not
        shaped like either provider's results, or shaped like the other provider's than
        the file's first line; a ``custom_id`` of no owed batch; a batch answered twice;
        an answer the parser refuses (with its rule, e.g. a grade off the scale).
    """
    source = str(Path(source))
    by_key = {b.key: b for b in owed}
    answered, unanswered, refused, state = [], [], [], {"provider": None, "seen": {}}
    for i, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            _read_line(raw, i, source=source, by_key=by_key, state=state, answered=answered,
                       unanswered=unanswered, grader=grader, kind=kind, role=role, scale=scale,
                       max_reason_words=max_reason_words, max_reason_chars=max_reason_chars)
        except InputError as e:
            if not partial:
                raise
            refused.append(InputError(e.rule, path=e.path, line=e.line, item=e.item,
                                      found=e.found))
    return BatchResults(answered=answered, unanswered=unanswered,
                        provider=state["provider"], refused=refused)


def _read_line(raw: bytes, i: int, *, source, by_key, state, answered, unanswered, grader,
               kind, role, scale, max_reason_words, max_reason_chars) -> None:
    """One line of :func:`read_results`: appended to ``answered`` or ``unanswered``, or an
    :class:`InputError` naming the line and its rule."""
    provider, seen = state["provider"], state["seen"]
    obj, shape = _result_line(raw, line=i, source=source)
    if shape is None or not isinstance(obj.get("custom_id"), str):
        raise InputError("a results line must be an OpenAI or Anthropic batch result "
                         "with a custom_id", path=source, line=i,
                         found=raw[:80].decode("utf-8", "replace"),
                         fix="Nothing of this file was recorded")
    if provider is None:
        provider = state["provider"] = shape
    elif shape != provider:
        raise InputError(f"a {shape} result in a file of {provider} results", path=source,
                         line=i, fix="Nothing of this file was recorded")
    cid = obj["custom_id"]
    batch = by_key.get(cid)
    if batch is None:
        raise InputError("result for a batch this grader does not owe (already recorded, "
                         "or exported for another grader, round or model)", path=source,
                         line=i, found=f"custom_id {cid}",
                         fix="Import the results of the latest `relgrade grade export "
                             "--batch` for this grader; nothing of this file was recorded")
    if cid in seen:
        raise InputError("a second result for one batch", path=source, line=i,
                         found=f"custom_id {cid}, first on line {seen[cid]}",
                         fix="Nothing of this file was recorded")
    seen[cid] = i
    try:
        text, why = _answer(obj, provider)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise InputError(f"a {provider} result line lacks its answer text", path=source,
                         line=i, found=f"{type(e).__name__}: {e}",
                         fix="Nothing of this file was recorded") from None
    if text is None:
        unanswered.append((i, cid, why))
        return
    where = f"{batch.query_id} batch {batch.batch}"
    try:
        df = parse_response(text, query_id=batch.query_id, chunks=batch.chunks,
                            scale=scale, max_reason_words=max_reason_words, kind=kind,
                            role=role, source=where, grader=grader,
                            max_reason_chars=max_reason_chars)
    except InputError as e:
        inner = f"answer line {e.line}: " if e.line is not None else ""
        raise InputError(f"{inner}{e.rule}", path=source, line=i,
                         item=f"{where}" + (f", {e.item}" if e.item else ""),
                         found=e.found,
                         fix="Nothing of this file was recorded") from None
    by_chunk = {c: (q, c, r, int(g)) for q, c, r, g in zip(
        df["query_id"].tolist(), df["chunk_id"].tolist(), df["reason"].tolist(),
        df["grade"].tolist())}
    rows = [dict(zip(("query_id", "chunk_id", "reason", "grade"),
                     by_chunk[str(c["chunk_id"])])) for c in batch.chunks]
    answered.append((batch, rows, text))


def results_provider(data: bytes, *, source) -> str:
    """The provider whose results format the file's first line has.

    Raises
    ------
    InputError
        The file holds no line, or its first line is not a JSON object shaped like either
        provider's results.
    """
    for i, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        obj, shape = _result_line(raw, line=i, source=source)
        if shape is None:
            raise InputError("a results line must be an OpenAI or Anthropic batch result "
                             "with a custom_id", path=source, line=i,
                             found=raw[:80].decode("utf-8", "replace"))
        return shape
    raise InputError("the results file holds no result", path=source)
