"""The call cache: every accepted answer of a grader, stored once under its request's key.

A grader's answer depends only on who answers (the grader, its command or a provider's model
and settings) and on the exact bytes relgrade sends it. So each batch request is keyed by

    sha256(canonical JSON of {"cache": "relgrade-call-cache/3", "identity": IDENTITY,
                              "request": REQUEST})

where ``IDENTITY`` is :func:`command_identity` (the grader's name and role, the command's
argv and input mode, the sha256 of every file of the working tree the argv names, the
grader's declared environment variables, the sha256 of the prompt template and of the
rubric, ``samples`` and the grader's declared identity settings; everything but the name and
role is the judge's identity, :func:`judge_identity`) or, for a provider batch file, :func:`model_identity` of the provider, model and
settings (:mod:`relgrade.graders.batchfiles`), and ``REQUEST`` is the request's bytes decoded
as UTF-8 (the JSON request or the prompt written to the command's standard input; a provider
request's body). The key is 64 hex digits (:func:`call_key`), which is also a valid
``custom_id`` for both providers' batch APIs.

Two graders are two independent draws: since the key holds the grader's name and role, no
grader is ever answered with another grader's answer, even when both run the same command on
the same prompt (answers reach another experiment's grader of the same name only through the
same cache file; grades reach another grader only through params ``grading.share_from``). An
edited grader script, or a changed value of a declared environment variable, is a new grader:
every request misses.

Before a batch's command starts, its key is looked up; on a hit the stored answer is
validated like any answer and recorded, and no process starts. Re-running ``grade run``
after a crash, over a round whose grade file was lost, or in another experiment pointed at
the same cache file therefore pays only for requests never answered.

What is stored
--------------
Only **accepted** answers: the command's standard output (or a provider's message text)
once it passed :func:`relgrade.graders.exchange.parse_response`. A refused answer (not
JSON, a grade off the scale, a timeout, a non-zero exit) is not stored: the next attempt, or
the next run, asks again, which is what re-running after a refusal is for. A stored answer
that fails validation later (say ``grading.max_reason_chars`` was lowered, which the request
does not carry) is treated as a miss and asked again.

The file
--------
``paths.call_cache`` (e.g. ``data/private/call-cache.jsonl``): JSON Lines, one line per
answer, ``{"key", "answer", "cached_at", "sha256"}`` (``sha256``: :func:`answer_digest` of
the key and answer, which the bank line of each grade the answer gave records as
``answer_sha256``; a line whose answer no longer matches it was edited, and is refused;
lines written before the digest existed carry none and are read as they are), appended whole and ``fsync``-ed under an
exclusive ``flock`` (:func:`relgrade.graders.store.append_lines`) before the grade it
produced is handed to the grade store, so a grade is never on disk without its answer in
the cache. A last line without its line end (a write cut short by a crash, never
acknowledged) is skipped on open and cut away by the next append; any other line that is
not a JSON object with a 64-hex ``key`` and a string ``answer`` is refused, naming the line.
Another process may append to the same file while a run reads it: a key not found is looked
up again in whatever was appended since.

The spool: answers that arrive as the run dies
----------------------------------------------
A command's standard output is written straight into a spool file,
``call-cache.jsonl.spool/KEY.TOKEN.out`` beside the cache, rather than a pipe. If the run is
killed after the command printed its answer but before the answer reached the cache, the
next run finds the spooled answer for that key and uses it (validated as any answer)
instead of starting the command again. A spool file is written under an exclusive ``flock``
held until the grader process is gone, so a run that finds one still being written (the
process of a killed run has not died yet) waits for it (:func:`wait_spool`) instead of
asking the same request again; spool files are removed once their answer is cached
or refused. A spooled answer is taken only when it is complete and valid (its exit status
died with the run).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.canonical import canonical_json, jsonl_bytes, sha256_bytes
from relgrade.errors import InputError
from relgrade.graders.store import append_lines, now_utc
from relgrade.io.files import command_script

#: The ``cache`` value hashed into every key; a new version changes every key.
CACHE_VERSION = "relgrade-call-cache/3"

#: The bank's values of ``cache``: the answer came from the cache, or from a call.
HIT, MISS = "hit", "miss"

_KEY_RE = re.compile(r"^[0-9a-f]{64}$")


def answer_digest(key: str, answer: str) -> str:
    """The per-entry digest of a cached answer, stored on its cache line and recorded on the
    bank line of every grade it gave (``answer_sha256``).

    Parameters
    ----------
    key : str
        The entry's :func:`call_key`.
    answer : str
        The answer's text.

    Returns
    -------
    str
        64 lowercase hex digits: sha256 of the canonical JSON of ``{"key", "answer"}`` (in
        that order).

    Examples
    --------
    >>> k = "0" * 64
    >>> answer_digest(k, "a") == answer_digest(k, "a") != answer_digest(k, "b")
    True
    """
    return sha256_bytes(canonical_json({"key": key, "answer": answer}).encode(
        "utf-8", "surrogateescape"))


def command_identity(argv: Sequence[str], *, input_mode: str, grader: str, role: str,
                     files: Mapping[str, str] | None = None,
                     env: Mapping[str, str | None] | None = None,
                     template: str | bytes | None = None, rubric: str | bytes | None = None,
                     samples: int = 1, settings: Mapping | None = None) -> dict:
    """Who answers a command grader's request: the grader, its command, what goes on standard
    input, the files its command names, the environment it declares, the prompt template and
    rubric it is given, its samples per pair and the settings it declares part of it.

    Parameters
    ----------
    argv : sequence of str
        The grader's command (params ``graders.NAME.command`` as split).
    input_mode : {"json", "prompt"}
        Params ``graders.NAME.input``.
    grader, role : str
        The grader's name (params ``graders.NAME``) and role: two graders never share a key.
    files : mapping of str to str, optional
        argv entry → sha256 (64 hex) of the file's bytes, for the entries that name a file of
        the working tree (:func:`named_files`).
    env : mapping of str to (str or None), optional
        Each declared environment variable (params ``graders.NAME.env_keys``) → its value, or
        None when unset (:func:`declared_env`).
    template, rubric : str or bytes, optional
        The prompt template's and the rubric's text (str is encoded as UTF-8); only their
        sha256 is kept. None: not given to the grader (recorded as null).
    samples : int, default 1
        Params ``graders.NAME.samples``.
    settings : mapping, optional
        The grader's settings it declares part of its identity (params
        ``graders.NAME.identity_keys``: name → value as written; JSON values).

    Returns
    -------
    dict
        ``{"grader", "role", "command": [...], "input", "files": {...}, "env": {...},
        "template", "rubric", "samples", "settings": {...}}``; ``template`` and ``rubric``
        are 64-hex sha256 digests or None.

    Examples
    --------
    >>> i = command_identity(["g"], input_mode="json", grader="a", role="grader")
    >>> i["command"], i["input"], i["template"], i["samples"]
    (['g'], 'json', None, 1)
    """
    return model_identity({"command": [str(a) for a in argv], "input": str(input_mode),
                           "files": dict(files or {}), "env": dict(env or {})},
                          grader=grader, role=role, template=template, rubric=rubric,
                          samples=samples, settings=settings)


def model_identity(answerer: Mapping, *, grader: str, role: str,
                   template: str | bytes | None = None, rubric: str | bytes | None = None,
                   samples: int = 1, settings: Mapping | None = None) -> dict:
    """The call cache identity of any model grader: who answers (a command, or a provider's
    model and settings) and what it is given besides each request.

    Parameters
    ----------
    answerer : mapping
        JSON values naming what answers: a command's ``{"command", "input", "files",
        "env"}`` (:func:`command_identity`), or a provider's ``{"provider", "model",
        "max_tokens", "temperature"}`` (:mod:`relgrade.graders.batchfiles`).
    grader, role, template, rubric, samples, settings
        As for :func:`command_identity`.

    Returns
    -------
    dict
        ``{"grader", "role", **answerer, "template", "rubric", "samples", "settings"}``.

    Examples
    --------
    >>> list(model_identity({"provider": "p", "model": "m"}, grader="g", role="grader"))
    ['grader', 'role', 'provider', 'model', 'template', 'rubric', 'samples', 'settings']
    """
    def digest(text):
        if text is None:
            return None
        return sha256_bytes(text.encode("utf-8") if isinstance(text, str) else bytes(text))

    return {"grader": str(grader), "role": str(role), **answerer,
            "template": digest(template), "rubric": digest(rubric), "samples": int(samples),
            "settings": dict(settings or {})}


#: The fields of a :func:`command_identity` that name the grader, not what decides its answers.
_WHO = ("grader", "role")


def judge_identity(identity: Mapping) -> str:
    """The judge's identity hash: what decides a model grader's answers, hashed.

    Parameters
    ----------
    identity : mapping
        A :func:`command_identity` (or a provider grader's identity: its model and settings).

    Returns
    -------
    str
        64 lowercase hex digits: sha256 of the canonical JSON of ``identity`` without the
        grader's name and role (two graders running the same command on the same template and
        rubric are the same judge). Shown shortened to 12 digits by ``relgrade status``.

    Examples
    --------
    >>> a = command_identity(["g"], input_mode="json", grader="a", role="grader")
    >>> b = command_identity(["g"], input_mode="json", grader="b", role="auditor")
    >>> judge_identity(a) == judge_identity(b)
    True
    >>> judge_identity(a) == judge_identity(a | {"rubric": "0" * 64})
    False
    """
    what = {k: v for k, v in identity.items() if k not in _WHO}
    return sha256_bytes(canonical_json(what).encode("utf-8", "surrogateescape"))


def named_files(argv: Sequence[str], *, tree, cwd=None) -> dict[str, str]:
    """The program or script of the working tree a command runs, with the sha256 of its bytes.

    Only the first argv entry that names a file of the tree counts: the grader's own code
    (``grader.py`` in ``python grader.py --log calls.txt``). Files named after it are the
    command's data, which it may read or write while it runs (a log it appends to would
    change every key it is part of); a data file that decides answers belongs in
    ``identity_keys`` or the script. An argv entry names a file when, taken as a path (relative ones from ``cwd``, where the
    command runs, else from the top of ``tree``, where params' commands are written from),
    it is a regular file (symlinks followed) that lies inside ``tree``. Files outside it (the
    interpreter, system tools) are not read: a changed interpreter is no change of the
    grader the cache can see. Reading a relative entry from the tree's top too gives one
    identity wherever it is computed: ``relgrade grade run`` at the top, a stage that DVC
    runs in the experiment's folder, ``relgrade status`` anywhere.

    Parameters
    ----------
    argv : sequence of str
        The command.
    tree : str or os.PathLike or None
        The working tree (the repository holding the experiment); None reads no file.
    cwd : str or os.PathLike, optional
        The folder relative paths are read from first: the experiment's folder (default:
        the current folder).

    Returns
    -------
    dict of str to str
        argv entry as written → sha256 of the file's bytes (64 hex): one entry at most.

    Raises
    ------
    InputError
        A named file exists but cannot be read.
    """
    found = command_script(argv, tree=tree, cwd=cwd)
    if found is None:
        return {}
    arg, path = found
    try:
        return {arg: sha256_bytes(path.read_bytes())}
    except OSError as e:
        raise InputError("a file the grader command names cannot be read", path=arg,
                         found=str(e)) from None


def declared_env(keys: Sequence[str], environ: Mapping[str, str]) -> dict[str, str | None]:
    """The values of a grader's declared environment variables.

    Parameters
    ----------
    keys : sequence of str
        Params ``graders.NAME.env_keys``.
    environ : mapping of str to str
        The environment the grader's processes get (``os.environ``).

    Returns
    -------
    dict
        name → value, or None when unset.

    Examples
    --------
    >>> declared_env(["MODEL", "TEMP"], {"MODEL": "m-1"})
    {'MODEL': 'm-1', 'TEMP': None}
    """
    return {str(k): environ.get(str(k)) for k in keys}


def call_key(identity: Mapping, request: bytes) -> str:
    """The cache key of one request.

    Parameters
    ----------
    identity : mapping
        Who answers, and the settings that change the answer (JSON values).
    request : bytes
        The exact bytes sent (UTF-8).

    Returns
    -------
    str
        64 lowercase hex digits: sha256 of the canonical JSON (see
        :func:`relgrade.canonical.canonical_json`) of ``{"cache", "identity", "request"}``.

    Examples
    --------
    >>> a = command_identity(["g"], input_mode="json", grader="a", role="grader")
    >>> k = call_key(a, b'{"q":1}\\n')
    >>> len(k), k == call_key(a, b'{"q":1}\\n')
    (64, True)
    >>> k == call_key(a | {"grader": "c"}, b'{"q":1}\\n')
    False
    """
    doc = {"cache": CACHE_VERSION, "identity": identity,
           "request": request.decode("utf-8", "surrogateescape")}
    return sha256_bytes(canonical_json(doc).encode("utf-8", "surrogateescape"))


class CallCache:
    """An append-only file of accepted answers, keyed by :func:`call_key`.

    Parameters
    ----------
    path : str or os.PathLike
        The cache file (params ``paths.call_cache``); created, with its folder, on the first
        answer stored.

    Raises
    ------
    InputError
        ``path`` is a folder, or a line of the file is malformed.

    Examples
    --------
    >>> import tempfile, os
    >>> cache = CallCache(os.path.join(tempfile.mkdtemp(), "calls.jsonl"))
    >>> key = call_key({"command": ["g"], "input": "json"}, b"{}")
    >>> cache.get(key) is None
    True
    >>> cache.put(key, '{"query_id":"q","chunk_id":"c","reason":"r","grade":1}\\n')
    >>> cache.get(key)
    '{"query_id":"q","chunk_id":"c","reason":"r","grade":1}\\n'
    """

    def __init__(self, path):
        self.path = Path(path)
        if self.path.is_dir():
            raise InputError("the call cache is a file (JSON Lines); this path is a folder",
                             path=self.path, item="paths.call_cache",
                             fix="Name a file, e.g. data/private/call-cache.jsonl")
        self._answers: dict[str, str] = {}
        self._offset = 0
        self._line = 0
        self._lock = threading.Lock()
        self._refresh()

    @property
    def spool(self) -> Path:
        """The spool folder: ``NAME.spool`` beside the cache file."""
        return self.path.with_name(self.path.name + ".spool")

    def __len__(self) -> int:
        with self._lock:
            return len(self._answers)

    def __contains__(self, key) -> bool:
        return self.get(key) is not None

    def _refresh(self) -> None:
        """Read whatever complete lines were appended since the last read."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # a last line without its line end is torn: skip it
        for raw in data[:end].split(b"\n")[:-1]:
            self._line += 1
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise InputError("a call cache line is not valid JSON", path=self.path,
                                 line=self._line, found=str(e),
                                 fix="Restore the file from the DVC cache, or remove that "
                                     "line (its request is then asked again)") from None
            if not (isinstance(obj, dict) and isinstance(obj.get("key"), str)
                    and _KEY_RE.match(obj["key"]) and isinstance(obj.get("answer"), str)):
                raise InputError("a call cache line must be a JSON object with a 64-hex "
                                 "`key` and a string `answer`", path=self.path,
                                 line=self._line, found=raw[:80].decode("utf-8", "replace"))
            recorded = obj.get("sha256")
            if recorded is not None and recorded != answer_digest(obj["key"], obj["answer"]):
                raise InputError("a call cache entry was edited after it was stored: its "
                                 "answer no longer matches the sha256 on its line",
                                 path=self.path, line=self._line, found=f"key {obj['key']}",
                                 fix="Restore the file from the DVC cache, or remove that "
                                     "line (its request is then asked again)")
            self._answers.setdefault(obj["key"], obj["answer"])
        self._offset += end

    def get(self, key: str) -> str | None:
        """The stored answer of ``key``, or None.

        Parameters
        ----------
        key : str
            A :func:`call_key`.

        Returns
        -------
        str or None

        Raises
        ------
        InputError
            A line appended since the last lookup is malformed.
        """
        with self._lock:
            answer = self._answers.get(key)
            if answer is None:
                self._refresh()
                answer = self._answers.get(key)
            return answer

    def put(self, key: str, answer: str) -> None:
        """Store an accepted answer durably (``fsync``-ed before this returns).

        A key already stored is not written again.

        Parameters
        ----------
        key : str
            A :func:`call_key`.
        answer : str
            The answer's text, as the parser accepted it.

        Raises
        ------
        ValueError
            ``key`` is not 64 hex digits.
        """
        self.put_many([(key, answer)])

    def put_many(self, items: Iterable[tuple[str, str]]) -> None:
        """Store several accepted answers with one write and one ``fsync``."""
        with self._lock:
            new, seen = [], set()
            for key, answer in items:
                if not _KEY_RE.match(str(key)):
                    raise ValueError(f"not a call cache key: {key!r}")
                if key in self._answers or key in seen:
                    continue
                seen.add(key)
                new.append((key, answer))
            if not new:
                return
            at = now_utc()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_lines(self.path, jsonl_bytes(
                {"key": k, "answer": a, "cached_at": at, "sha256": answer_digest(k, a)}
                for k, a in new))
            for k, a in new:
                self._answers[k] = a

    def digest(self, key: str) -> str | None:
        """:func:`answer_digest` of the stored answer of ``key`` (None when not stored)."""
        answer = self.get(key)
        return None if answer is None else answer_digest(key, answer)

    # --- the spool ---------------------------------------------------------------------

    def spool_file(self, key: str) -> Path:
        """A new spool file name for a call of ``key`` (the folder is created)."""
        self.spool.mkdir(parents=True, exist_ok=True)
        return self.spool / f"{key}.{uuid.uuid4().hex}.out"

    def spooled(self, key: str) -> list[Path]:
        """Spool files a killed run left for ``key``, oldest first."""
        if not self.spool.is_dir():
            return []
        files = list(self.spool.glob(f"{key}.*.out"))
        return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def read_spool(path) -> str | None:
    """A spool file's text, or None when it is gone or not UTF-8."""
    try:
        return Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def wait_spool(path, *, timeout: float, stopping=None, poll: float = 0.05) -> bool:
    """Wait until no process writes the spool file ``path``: whether it may be read now.

    A writer holds an exclusive ``flock`` on the file for as long as its call runs
    (:func:`relgrade.graders.raytask.open_spool`); a run killed while its grader process
    (or the Ray worker running it) outlives it for a moment leaves such a file behind. Reading
    it before the call is over would find a partial answer, drop it and ask again: the same
    request answered twice. The lock is released when the last process holding the file
    exits, however it ends.

    Parameters
    ----------
    path : str or os.PathLike
        A spool file.
    timeout : float
        Seconds to wait at most (the grader's own timeout and a margin: the writer kills its
        process by then).
    stopping : threading.Event, optional
        Stop waiting (and return False) once it is set.
    poll : float, default 0.05
        Seconds between tries.

    Returns
    -------
    bool
        True when the file is free (or gone); False when it is still held after ``timeout``
        seconds or the run is stopping (the caller must leave the file alone).
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return True
    deadline = time.monotonic() + timeout
    with f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
            if time.monotonic() > deadline or (stopping is not None and stopping.is_set()):
                return False
            time.sleep(poll)


def drop_spool(paths: Iterable) -> None:
    """Remove spool files (missing ones are fine)."""
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


#: The bank sidecar fields :func:`cache_counts` reads from a table.
CACHE_FIELDS = ("cache",)

#: The bank sidecar fields :func:`judge_counts` reads from a table.
JUDGE_FIELDS = ("query_id", "chunk_id", "judge")
#: The sidecar fields :func:`template_counts` (with :func:`judge_counts`) reads.
TEMPLATE_FIELDS = ("query_id", "chunk_id", "judge", "template_sha256")


def cache_counts(bank) -> dict[str, int]:
    """How a grade file's grades were answered, from its bank sidecar.

    Parameters
    ----------
    bank : iterable of (int, dict), pyarrow.Table, or None
        The bank lines (:func:`relgrade.graders.store.read_bank`), or the sidecar as
        columns (:func:`relgrade.io.grade_columns.read_bank_columns`, column ``cache``);
        None for a grade file without a sidecar.

    Returns
    -------
    dict
        ``{"hit": n, "miss": n, "none": n}``: bank lines marked ``"cache": "hit"`` (no
        call was made), ``"miss"`` (a call was made, its answer is now cached), and lines
        without the mark (a person's grade, an import, or a line written before the cache).

    Examples
    --------
    >>> cache_counts([(1, {"cache": "hit"}), (2, {"cache": "miss"}), (3, {})])
    {'hit': 1, 'miss': 1, 'none': 1}
    """
    out = {HIT: 0, MISS: 0, "none": 0}
    if isinstance(bank, pa.Table):
        marks = bank.column("cache").cast(pa.string())
        for mark in (HIT, MISS):
            out[mark] = int(pc.sum(pc.fill_null(pc.equal(marks, mark), False)).as_py() or 0)
        out["none"] = bank.num_rows - out[HIT] - out[MISS]
        return out
    for _, line in bank or ():
        mark = line.get("cache")
        out[mark if mark in (HIT, MISS) else "none"] += 1
    return out


def cache_status_line(grader: str, counts: Mapping[str, int]) -> str | None:
    """One ``relgrade status`` line for a grader's call cache use, or None when unused.

    Examples
    --------
    >>> cache_status_line("grader-a", {"hit": 30, "miss": 10, "none": 0})
    'call cache: grader-a 30 of 40 grades answered from the cache, 10 by a call'
    >>> cache_status_line("alice", {"hit": 0, "miss": 0, "none": 12}) is None
    True
    """
    hit, miss = int(counts.get(HIT, 0)), int(counts.get(MISS, 0))
    if hit + miss == 0:
        return None
    return (f"call cache: {grader} {hit} of {hit + miss} grades answered from the cache, "
            f"{miss} by a call")


#: The :func:`judge_counts` key of grades whose bank line names no judge identity.
NOT_RECORDED = "identity not recorded"


def judge_counts(bank) -> dict[str, int]:
    """Under which judge identity a grade file's grades were made, from its bank sidecar.

    Parameters
    ----------
    bank : iterable of (int, dict), pyarrow.Table, or None
        The bank lines (:func:`relgrade.graders.store.read_bank`), or the sidecar as
        columns (:func:`relgrade.io.grade_columns.read_bank_columns`: ``query_id``,
        ``chunk_id``, ``judge``); None for a grade file without a sidecar.

    Returns
    -------
    dict of str to int
        Judge identity (:func:`judge_identity`, 64 hex) → pairs whose latest bank line names
        it; :data:`NOT_RECORDED` → pairs whose latest line names none (a line written before
        identities were recorded, a person's grade, an import). In the order of the pairs'
        latest lines.

    Examples
    --------
    >>> judge_counts([(1, {"query_id": "q", "chunk_id": "a", "judge": "j1"}),
    ...               (2, {"query_id": "q", "chunk_id": "b"}),
    ...               (3, {"query_id": "q", "chunk_id": "a", "judge": "j2"})])
    {'identity not recorded': 1, 'j2': 1}
    """
    if isinstance(bank, pa.Table):
        return _latest_counts_of_columns(bank, "judge", NOT_RECORDED)
    return _latest_counts_of_lines(bank, "judge", NOT_RECORDED)


def _latest_counts_of_lines(bank, field: str, missing: str) -> dict[str, int]:
    """Pairs per value of ``field`` on each pair's last bank line (``missing`` where the
    line has none), in the order of those lines; ``bank`` as ``read_bank`` gives it."""
    latest: dict = {}
    for _, line in bank or ():
        pair = (line.get("query_id"), line.get("chunk_id"))
        latest.pop(pair, None)
        latest[pair] = line.get(field) or missing
    out: dict[str, int] = {}
    for value in latest.values():
        out[value] = out.get(value, 0) + 1
    return out


def _latest_counts_of_columns(bank: pa.Table, field: str, missing: str) -> dict[str, int]:
    """Pairs per value of ``field`` on each pair's last line (``missing`` where the line
    has none), counted in the order those lines come."""
    value = bank.column(field).cast(pa.string())
    value = pc.if_else(pc.fill_null(pc.equal(value, ""), True), missing, value)
    t = pd.DataFrame({"query_id": bank.column("query_id").to_pandas(),
                      "chunk_id": bank.column("chunk_id").to_pandas(),
                      "value": value.to_pandas()})
    last = t.drop_duplicates(["query_id", "chunk_id"], keep="last")
    sizes = last.groupby("value", sort=False).size()
    return {str(k): int(v) for k, v in sizes.items()}


#: The :func:`template_counts` key of grades whose bank line names no prompt template.
TEMPLATE_NOT_RECORDED = "template not recorded"


def template_counts(bank) -> dict[str, int]:
    """With which prompt template a grade file's grades were made, from its bank sidecar.

    A model grader's bank line names the sha256 of the prompt template its request was
    rendered with (``template_sha256``, the ``template`` digest of its judge identity,
    :func:`model_identity`), so the key's record names the templates its grades were made
    with, not the template file as it is when the key is frozen.

    Parameters
    ----------
    bank : iterable of (int, dict), pyarrow.Table, or None
        The bank lines (:func:`relgrade.graders.store.read_bank`), or the sidecar as
        columns (:func:`relgrade.io.grade_columns.read_bank_columns`: ``query_id``,
        ``chunk_id``, ``template_sha256``); None for a grade file without a sidecar.

    Returns
    -------
    dict of str to int
        Template sha256 (64 hex) → pairs whose latest bank line names it;
        :data:`TEMPLATE_NOT_RECORDED` → pairs whose latest line names none (a line written
        before templates were recorded, a person's grade, an import). In the order of the
        pairs' latest lines.

    Examples
    --------
    >>> template_counts([(1, {"query_id": "q", "chunk_id": "a", "template_sha256": "t1"}),
    ...                  (2, {"query_id": "q", "chunk_id": "b", "judge": "j"}),
    ...                  (3, {"query_id": "q", "chunk_id": "a", "template_sha256": "t2"})])
    {'template not recorded': 1, 't2': 1}
    """
    if isinstance(bank, pa.Table):
        return _latest_counts_of_columns(bank, "template_sha256", TEMPLATE_NOT_RECORDED)
    return _latest_counts_of_lines(bank, "template_sha256", TEMPLATE_NOT_RECORDED)


def judge_status_line(grader: str, current: str, counts: Mapping[str, int]) -> str:
    """One ``relgrade status`` line: a model grader's current judge identity (12 hex digits)
    and how many of its recorded grades were made under it, under others, or under none
    recorded.

    Examples
    --------
    >>> judge_status_line("g", "a" * 64, {"a" * 64: 3, "b" * 64: 2, NOT_RECORDED: 1})
    'judge: g identity aaaaaaaaaaaa; 3 grades made under it, 2 under bbbbbbbbbbbb, 1 identity not recorded'
    >>> judge_status_line("g", "a" * 64, {})
    'judge: g identity aaaaaaaaaaaa; no grades recorded'
    """
    parts = [f"{counts.get(current, 0)} grades made under it"] if counts else []
    parts += [f"{n} under {j[:12]}" for j, n in counts.items()
              if j not in (current, NOT_RECORDED)]
    if counts.get(NOT_RECORDED):
        parts.append(f"{counts[NOT_RECORDED]} identity not recorded")
    return f"judge: {grader} identity {current[:12]}; " + (", ".join(parts) or
                                                          "no grades recorded")
