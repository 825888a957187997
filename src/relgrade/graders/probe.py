"""Asking a command grader the robustness battery's requests: the real grader path, apart.

Each probe request is built, sent and validated exactly as ``grade run`` does it
(:func:`relgrade.graders.exchange.batch_request`, the prompt rendered from the template the
probe gives, :func:`~relgrade.graders.exchange.encode_request`, a fresh process of the
grader's command per request with its timeout and retries,
:func:`~relgrade.graders.exchange.parse_response`). What differs is where the answers go:

* nowhere durable but the call cache: a probe answer is **not a grade**. It never enters
  the grade files, the bank or the key; it is returned to the caller;
* its call cache key is :func:`~relgrade.graders.cache.call_key` of the judge's identity
  extended with ``{"probe": NAME, "variant": K}``, so a probe answer can never answer a
  real grade's request (nor a real grade a probe's), even when the bytes sent are the same
  (the request itself carries no sign of being a probe: the judge cannot tell).

The processes run on this machine (``executor: ray`` graders are probed locally too).
"""

from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pandas as pd

from relgrade.errors import InputError
from relgrade.graders.cache import CallCache, call_key
from relgrade.graders.command import GraderSetup, ProcessRunner, _tail
from relgrade.graders.exchange import batch_request, encode_request, parse_response, render_prompt
from relgrade.protocol.grades import reason_required

#: The columns of :func:`ask_probes`'s answers.
ANSWER_COLUMNS = ("probe", "variant", "sample", "query_id", "chunk_id", "grade")


@dataclass(frozen=True)
class ProbeRequest:
    """One batch to ask under one probe.

    Attributes
    ----------
    probe : str
        The probe's name (:data:`relgrade.protocol.probes.PROBES`).
    variant : int
        The paraphrase's number (1..K) for ``paraphrase``; 0 for the chunk probes.
    sample : int
        The sample number (0..samples-1), sent as the request's ``sample``.
    packet : mapping
        The query's packet (``query_id``, ``query``, ``intent``, ``rubric_version``,
        ``batches``).
    batch : int
        The batch's index in the packet.
    chunks : tuple of dict
        The chunks to send, perturbed and in the order to show them.
    template : jinja2.Template
        The prompt template to render (a paraphrase, or the judge's own).
    """

    probe: str
    variant: int
    sample: int
    packet: Mapping
    batch: int
    chunks: tuple
    template: object


@dataclass
class ProbeRun:
    """What :func:`ask_probes` did: the answers, and the requests refused on every attempt."""

    answers: pd.DataFrame
    commands: int = 0
    cache_hits: int = 0
    failures: list = field(default_factory=list)


def probe_key(identity: Mapping, probe: str, variant: int, data: bytes) -> str:
    """The call cache key of a probe request: :func:`~relgrade.graders.cache.call_key` of
    the judge's identity with ``probe`` and ``variant`` added (never a real grade's key).

    Examples
    --------
    >>> from relgrade.graders.cache import command_identity
    >>> ident = command_identity(["g"], input_mode="json", grader="a", role="grader")
    >>> probe_key(ident, "inject", 0, b"{}") != call_key(ident, b"{}")
    True
    """
    return call_key({**identity, "probe": str(probe), "variant": int(variant)}, data)


def ask_probes(requests: Sequence[ProbeRequest], *, setup: GraderSetup, rubric: str,
               scale: Sequence[int], max_reason_words: int, identity: Mapping,
               max_reason_chars: int = 300, cache: CallCache | None = None,
               runner=None) -> ProbeRun:
    """Ask the grader every probe request; return the grades it answered.

    Parameters
    ----------
    requests : sequence of ProbeRequest
    setup : GraderSetup
        The grader's command settings (command, timeout, retries, workers, input mode).
    rubric : str
        The rubric text sent with every request.
    scale : sequence of int
    max_reason_words : int
    identity : mapping
        The grader's :func:`relgrade.graders.command.grader_identity` (keys the cache).
    max_reason_chars : int, default 300
    cache : CallCache, optional
        Answers found under :func:`probe_key` start no process; accepted answers are stored.
    runner : optional
        What runs the processes (default a :class:`relgrade.graders.command.ProcessRunner`).

    Returns
    -------
    ProbeRun
        ``answers`` has :data:`ANSWER_COLUMNS` (``grade`` int64), one row per chunk of each
        accepted request, in the requests' order.

    Raises
    ------
    KeyboardInterrupt
        Passed on after the running processes are killed.
    """
    s = setup
    runner = runner or ProcessRunner()
    lock = threading.Lock()
    run = ProbeRun(answers=pd.DataFrame(columns=list(ANSWER_COLUMNS)))
    results: list = [None] * len(requests)

    def one(i: int, r: ProbeRequest) -> None:
        qid = str(r.packet["query_id"])
        source = f"{s.name} command, probe {r.probe}" + \
            (f" {r.variant}" if r.probe == "paraphrase" else "") + f", {qid} batch {r.batch}"
        error, use_cache, attempt = None, cache is not None, 0
        while attempt < s.retries + 1:
            attempt += 1
            if runner.stopping.is_set():
                return
            req = batch_request(r.packet, r.batch, r.chunks, grader=s.name, rubric=rubric,
                                scale=scale, max_reason_words=max_reason_words,
                                reason_is_required=reason_required(s.kind, s.role, 0),
                                sample=r.sample, attempt=attempt, previous_error=error)
            req["prompt"] = render_prompt(r.template, req)
            data = encode_request(req, mode=s.input)
            key = None if cache is None else probe_key(identity, r.probe, r.variant, data)
            text, hit = (cache.get(key), True) if use_cache else (None, False)
            if text is None:
                hit = False
                with lock:
                    run.commands += 1
                res = runner.run(s.process_argv(), data, timeout=s.timeout)
                if res.killed:
                    return
                if res.timed_out or res.returncode != 0:
                    error = (f"grader command timed out after {s.timeout:g} s" if res.timed_out
                             else f"grader command exited with status {res.returncode}")
                    error += f" ({_tail(res.stderr)})" if res.stderr.strip() else ""
                    continue
                text = res.stdout
            try:
                df = parse_response(text, query_id=qid, chunks=r.chunks, scale=scale,
                                    max_reason_words=max_reason_words, kind=s.kind,
                                    role=s.role, source=source, grader=s.name,
                                    max_reason_chars=max_reason_chars)
            except InputError as e:
                if hit:  # stored, refused now (a stricter rule): ask the command instead
                    use_cache, attempt = False, attempt - 1
                    continue
                error = str(e)
                continue
            if key is not None and not hit:
                cache.put(key, text)
            with lock:
                run.cache_hits += int(hit)
            results[i] = [(r.probe, r.variant, r.sample, qid, str(c), int(g))
                          for c, g in zip(df["chunk_id"], df["grade"])]
            return
        with lock:
            run.failures.append(f"{source} sample {r.sample}: {error}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=s.workers,
                                               thread_name_prefix="relgrade-probe") as pool:
        futures = [pool.submit(one, i, r) for i, r in enumerate(requests)]
        try:
            for f in futures:
                f.result()
        except BaseException:
            runner.stop()
            for f in futures:
                f.cancel()
            raise
    rows = [row for got in results if got for row in got]
    run.answers = pd.DataFrame(rows, columns=list(ANSWER_COLUMNS)).astype(
        {"variant": "int64", "sample": "int64", "grade": "int64"})
    return run
