"""Running command graders over a pool: fresh processes, parallel workers, one writer.

``relgrade grade run --grader NAME`` grades every pool pair that still lacks a valid grade
from that grader:

* the work is planned from the grader's packets and the rows already recorded, so a rerun
  resumes where the last run stopped, and an arm added later costs only its new pairs;
* every batch (at most five chunks of one query) goes to a **fresh process** of the grader's
  command, described in :mod:`relgrade.graders.exchange`: no process sees two queries or two batches;
* the answer is validated as it arrives with :func:`relgrade.graders.exchange.parse_response` (the
  same rules as every other way grades come in); a refused answer is retried with the error
  in the request, up to ``retries`` times, then reported, and nothing of it is recorded;
* ``workers`` threads each drive one process at a time; a query's batches stay on one worker
  and run in display order;
* the process runs on this machine (``executor: local``) or, with ``executor: ray``, as a Ray
  task on a cluster (:mod:`relgrade.graders.rayexec`): the same fresh process, the same
  exchange, the answer returned to this process;
* with a call cache (:mod:`relgrade.graders.cache`), a request answered before is answered
  from it and no process starts; an accepted answer is stored there before its grades are
  handed to the writer;
* accepted batches are handed to the single writer (:class:`relgrade.graders.store.SingleWriter`)
  that appends them durably, batch by batch;
* with ``samples: N`` every batch is answered N times, each sample by its own fresh process;
  the samples are recorded in their own store and the majority (see :mod:`relgrade.graders.self_consistency`)
  is recorded as the grade once all N are in.

Ctrl-C (or SIGTERM) stops the run: running commands are killed, batches already accepted are
written, and the summary says the run was interrupted. ``kill -9`` loses at most the batches
in flight, never half of one (see :mod:`relgrade.graders.store`).

Grader processes die with the run
---------------------------------
Each grader process runs in its own session (a timeout or Ctrl-C kills its whole process
group), so a terminal's signals do not reach it directly. So that none outlives a run killed
with ``kill -9`` (a paid model command would go on unobserved), every process is started with
the Linux parent-death signal set to ``SIGKILL`` (``prctl(PR_SET_PDEATHSIG)``), and carries
the environment variable :data:`RUN_MARKER` naming the grade file. Whatever still carries it
when the next run for that file starts (e.g. a process the grader command started itself) is
killed first: see :func:`kill_stragglers`.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from relgrade.errors import InputError, ProtocolError
from relgrade.graders.cache import (
    HIT,
    MISS,
    CallCache,
    call_key,
    command_identity,
    declared_env,
    judge_identity,
    drop_spool,
    named_files,
    read_spool,
    wait_spool,
)
from relgrade.graders.exchange import (
    INPUT_MODES,
    batch_request,
    encode_request,
    parse_command,
    parse_response,
    render_prompt,
)
from relgrade.graders.raytask import open_spool
from relgrade.graders.self_consistency import aggregate_samples
from relgrade.graders.store import GradeStore, SingleWriter, read_bank
from relgrade.protocol.grades import (
    imported_without_reasons,
    reason_required,
    validate_grade_rows,
)
from relgrade.protocol.packets import MAX_BATCH, check_batch

#: Defaults of the command settings of a grader in params ``graders.NAME``.
DEFAULTS = {"timeout": 600.0, "retries": 2, "workers": 1, "samples": 1, "input": "json",
            "executor": "local", "connect_timeout": 30.0}

#: Where a command grader's processes run (params ``graders.NAME.executor``).
EXECUTORS = ("local", "ray")

#: Times a batch whose Ray worker died is sent again before the attempt counts as failed.
MAX_LOST = 3


def cluster_broken(streak: int, since: float | None, now: float, *, workers: int,
                   timeout: float) -> bool:
    """Whether lost processes say the cluster itself stopped running tasks.

    One worker that dies loses one process; a dead raylet or runtime-environment agent
    loses every process sent to it. Counted over the whole run, not per batch: ``streak``
    sends lost in a row (no answer, good or bad, in between) beyond what every worker
    losing each of its sends :data:`MAX_LOST` times would give, or a streak that has lasted
    the grader's timeout, ends the run.

    Parameters
    ----------
    streak : int
        Sends lost in a row, over the run.
    since : float or None
        ``time.monotonic()`` of the first loss of the streak.
    now : float
        ``time.monotonic()`` now.
    workers : int
        Processes at once.
    timeout : float
        The grader's timeout (seconds).

    Examples
    --------
    >>> cluster_broken(4, 0.0, 1.0, workers=1, timeout=60)
    True
    >>> cluster_broken(3, 0.0, 1.0, workers=1, timeout=60), cluster_broken(3, 0.0, 61.0, workers=1, timeout=60)
    (False, True)
    """
    if streak <= 0 or since is None:
        return False
    return streak > MAX_LOST * workers or now - since >= timeout

#: Seconds beyond a grader's timeout to wait for a spool file another process still writes.
SPOOL_GRACE = 10.0

#: Environment variable set in every grader process: the grade file it grades for.
RUN_MARKER = "RELGRADE_GRADER_RUN"

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class GraderSetup:
    """A command grader's settings, from params ``graders.NAME``.

    Attributes
    ----------
    name, role, kind : str
        The grader's name, role (``grader`` or ``auditor``) and kind.
    argv : tuple of str
        The command (``command``), run without a shell.
    timeout : float
        Seconds a process may run before it is killed and the attempt fails.
    retries : int
        Extra attempts for a refused batch.
    workers : int
        Processes run at once.
    samples : int
        Times each pair is graded (majority recorded).
    input : {"json", "prompt"}
        What goes on standard input (see :mod:`relgrade.graders.exchange`).
    executor : {"local", "ray"}
        Where the processes run (see :mod:`relgrade.graders.rayexec`).
    address : str or None
        The Ray cluster's address (``executor: ray``); None: ``RAY_ADDRESS``, else a local
        Ray instance started for the run.
    env_keys : tuple of str
        The environment variables the command reads (``env_keys``): their values are part of
        the call cache key (:mod:`relgrade.graders.cache`).
    connect_timeout : float
        Seconds to reach the Ray cluster's address before the run ends in an error
        (``graders.NAME.connect_timeout``, default 30).
    settings : tuple of (str, object)
        The settings the grader declares part of its identity (``identity_keys``), each with
        its value as written: part of :func:`grader_identity`.
    folder : str or None
        The experiment's folder (resolved): relative paths in the command are read from it
        first, then from the top of the working tree (:func:`resolve_command`). None: from
        the folder the process runs in.
    run_argv : tuple of str
        The command as it is run: ``argv`` with every entry naming a file of the working
        tree replaced by that file's absolute path, resolved once when the setup is read
        (empty: ``argv`` as written). ``argv`` as written stays the identity's.
    """

    name: str
    role: str
    kind: str
    argv: tuple
    timeout: float = DEFAULTS["timeout"]
    retries: int = DEFAULTS["retries"]
    workers: int = DEFAULTS["workers"]
    samples: int = DEFAULTS["samples"]
    input: str = DEFAULTS["input"]
    executor: str = DEFAULTS["executor"]
    address: str | None = None
    env_keys: tuple = ()
    connect_timeout: float = DEFAULTS["connect_timeout"]
    settings: tuple = ()
    folder: str | None = None
    run_argv: tuple = ()

    def process_argv(self, *, remote: bool = False) -> tuple:
        """The argv a process of this grader is started with: :attr:`run_argv` (else
        :attr:`argv`) on this machine; ``argv`` as written with ``remote`` (a Ray cluster's
        workers have their own folders)."""
        return self.argv if remote else (self.run_argv or self.argv)


#: Name endings of the scripts a grader command may run (``python sim/grader.py``): an argv
#: entry ending so that names no file is a missing script (:func:`resolve_command`).
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".r",
                   ".jl", ".php", ".lua")


def resolve_command(argv: Sequence[str], *, grader: str, folder, tree=None,
                    path=None) -> tuple:
    """A grader command with its relative file paths resolved once, whatever the folder the
    command is typed in.

    Each argv entry after the program (and the program itself when written as a path, with a
    ``/``) that is not an option (``-x``, ``--x=...``) is looked up as a path relative to the
    experiment's ``folder``, then relative to the top of ``tree`` (the form the shipped
    experiments use: ``python experiments/NAME/sim/grader.py``), then relative to the folder
    the command is typed in (a folder of experiments with no relgrade top, where such a path
    was always read from there); the first that is a regular file is put in the argv as an
    absolute path. Other entries stay as written.

    Parameters
    ----------
    argv : sequence of str
        The command as written (:func:`relgrade.graders.exchange.parse_command`).
    grader : str
        The grader's name, for the error message.
    folder : str or os.PathLike
        The experiment's folder.
    tree : str or os.PathLike, optional
        The working tree (the repository); None looks only in ``folder``.
    path : str, optional
        The params file, for the error message.

    Returns
    -------
    tuple of str
        The argv to start processes with.

    Raises
    ------
    InputError
        An argument that names a script (it ends in one of :data:`SCRIPT_SUFFIXES`) is a
        file in neither place: a permanent error, so no process is started (a missing script
        is not a failure a retry can mend). A missing program is :func:`run_grader`'s
        "grader command not found" error.
    """
    bases = []
    for base in (Path(folder), None if tree is None else Path(tree), Path.cwd()):
        if base is not None and base.resolve() not in [b.resolve() for b in bases]:
            bases.append(base)
    out = []
    for i, arg in enumerate(argv):
        arg = str(arg)
        pathlike = bool(arg) and not arg.startswith("-") and "\0" not in arg \
            and (i > 0 or "/" in arg)
        if not pathlike:
            out.append(arg)
            continue
        given = Path(arg)
        found = [given] if given.is_absolute() else [b / given for b in bases]
        hit = next((p for p in found if p.is_file()), None)
        if hit is not None:
            out.append(str(hit.resolve()))
            continue
        if i > 0 and arg.lower().endswith(SCRIPT_SUFFIXES):
            where = " or ".join(str(p) for p in found)
            raise InputError(f"grader {grader}: its command names a script that does not "
                             f"exist ({where}); a missing script is not retried",
                             path=path, item=f"graders.{grader}.command", found=arg,
                             fix="Write the script's path relative to the experiment's folder "
                                 "(or to the repository's top), or restore the file")
        out.append(arg)
    return tuple(out)


def _int_param(value, name, grader, path, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"graders.{grader}.{name} must be an integer >= {minimum}", path=path,
                         item=grader, found=repr(value))
    return value


def grader_setup(spec: Mapping, name: str, *, path=None, workers: int | None = None,
                 executor: str | None = None, address: str | None = None,
                 connect_timeout: float | None = None, folder=None,
                 tree=None, where: str = "") -> GraderSetup:
    """Read and check one command grader's settings.

    Parameters
    ----------
    spec : mapping
        The grader's params entry ``graders.NAME`` (``role`` and ``kind`` already checked,
        see :meth:`relgrade.experiment.params.Params.grader`).
    name : str
        The grader to run.
    path : str, optional
        The params file, for error messages.
    workers : int, optional
        Overrides ``graders.NAME.workers`` (the ``--workers`` option).
    executor : {"local", "ray"}, optional
        Overrides ``graders.NAME.executor`` (the ``--executor`` option).
    address : str, optional
        Overrides ``graders.NAME.address`` (the ``--address`` option).
    connect_timeout : float, optional
        Overrides ``graders.NAME.connect_timeout`` (the ``--connect-timeout`` option).
    folder : str or os.PathLike, optional
        The experiment's folder: the command's relative paths are resolved from it (then
        from ``tree``'s top) once, here (:func:`resolve_command`). None leaves them as
        written, read from the folder the process runs in.
    tree : str or os.PathLike, optional
        The working tree (the repository holding the experiment).
    where : str, default ""
        The ``--experiment NAME`` option (with its leading space) the commands named in
        the errors need, for an experiment below the repository's top.

    Returns
    -------
    GraderSetup

    Raises
    ------
    InputError
        No ``command`` (for a human grader the message names ``relgrade serve`` and
        ``relgrade grade import``; for a grader of kind ``import``, ``relgrade grade
        import``); a ``timeout``, ``retries``, ``workers`` or ``samples`` that is not a valid number; an
        ``input`` mode other than ``json`` or ``prompt``; an ``executor`` other than
        ``local`` or ``ray``; an ``address`` that is not a string; a ``connect_timeout``
        that is not a number of seconds > 0; with ``folder``, a script the command names
        that does not exist (:func:`resolve_command`).
    """
    g = spec
    role, kind = g["role"], g["kind"]
    if g.get("command") is None and kind == "human":
        raise InputError("a human grader has no command to run: a person grades on the web "
                         "page", path=path, item=name,
                         fix=f"Run `relgrade serve --grader {name}{where}` and open the login "
                             f"link it prints, or record grades made elsewhere with `relgrade "
                             f"grade import --grader {name} FILE{where}`")
    if g.get("command") is None and kind == "import":
        raise InputError("a grader of kind import has no command to run: its grades come "
                         "from a file", path=path, item=name,
                         fix=f"Record them with `relgrade grade import --grader {name} "
                             f"FILE{where}`")
    if g.get("command") is None:
        raise InputError("grader has no command to run", path=path, item=name,
                         fix=f"Set graders.{name}.command (see docs/graders.md)")
    argv = tuple(parse_command(g["command"], grader=name, path=path))
    timeout = g.get("timeout", DEFAULTS["timeout"])
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InputError(f"graders.{name}.timeout must be a number of seconds > 0", path=path,
                         item=name, found=repr(timeout))
    retries = _int_param(g.get("retries", DEFAULTS["retries"]), "retries", name, path, 0)
    n_workers = _int_param(g.get("workers", DEFAULTS["workers"]) if workers is None else workers,
                           "workers", name, path, 1)
    samples = _int_param(g.get("samples", DEFAULTS["samples"]), "samples", name, path, 1)
    mode = g.get("input", DEFAULTS["input"])
    if mode not in INPUT_MODES:
        raise InputError(f"graders.{name}.input must be one of {', '.join(INPUT_MODES)}",
                         path=path, item=name, found=repr(mode))
    where = g.get("executor", DEFAULTS["executor"]) if executor is None else executor
    if where not in EXECUTORS:
        raise InputError(f"graders.{name}.executor must be one of {', '.join(EXECUTORS)}",
                         path=path, item=name, found=repr(where))
    addr = g.get("address") if address is None else address
    if addr is not None and not (isinstance(addr, str) and addr.strip()):
        raise InputError(f"graders.{name}.address must be a Ray address such as "
                         "ray://head:10001 or auto", path=path, item=name, found=repr(addr))
    connect = g.get("connect_timeout", DEFAULTS["connect_timeout"]) \
        if connect_timeout is None else connect_timeout
    if isinstance(connect, bool) or not isinstance(connect, (int, float)) or not connect > 0:
        raise InputError(f"graders.{name}.connect_timeout must be a number of seconds > 0",
                         path=path, item=name, found=repr(connect))
    settings = []
    for k in g.get("identity_keys") or ():
        if k not in g:
            raise InputError(f"graders.{name}.identity_keys names {k}, which the grader's "
                             "entry does not set", path=path, item=name, found=repr(k),
                             fix=f"Set graders.{name}.{k} or remove it from identity_keys")
        settings.append((str(k), g[k]))
    here = None if folder is None else str(Path(folder).resolve())
    run_argv = () if here is None else resolve_command(
        argv, grader=name, folder=here, tree=None if tree is None else Path(tree).resolve(),
        path=path)
    return GraderSetup(name=name, role=role, kind=kind, argv=argv, timeout=float(timeout),
                       retries=retries, workers=n_workers, samples=samples, input=mode,
                       executor=where, address=addr, env_keys=tuple(g.get("env_keys") or ()),
                       connect_timeout=float(connect), settings=tuple(settings),
                       folder=here, run_argv=run_argv)


def grader_identity(setup: GraderSetup, *, template_text: str | None, rubric: str | None,
                    tree=None, environ: Mapping[str, str] | None = None) -> dict:
    """A command grader's :func:`~relgrade.graders.cache.command_identity`: the call cache's
    identity, whose :func:`~relgrade.graders.cache.judge_identity` is the judge's identity.

    Parameters
    ----------
    setup : GraderSetup
    template_text : str or None
        The prompt template's text (:func:`relgrade.graders.exchange.prompt_template_text`);
        None when no template is given to the grader.
    rubric : str or None
        The rubric's text.
    tree : str or os.PathLike, optional
        The working tree: the files of it the command names are hashed
        (:func:`~relgrade.graders.cache.named_files`).
    environ : mapping, optional
        The environment (default ``os.environ``) the declared ``env_keys`` are read from.

    Returns
    -------
    dict
        JSON values; see :func:`relgrade.graders.cache.command_identity`.

    Raises
    ------
    InputError
        A file the command names cannot be read.
    """
    s = setup
    return command_identity(
        s.argv, input_mode=s.input, grader=s.name, role=s.role,
        files=named_files(s.argv, tree=tree, cwd=s.folder),
        env=declared_env(s.env_keys, os.environ if environ is None else environ),
        template=template_text, rubric=rubric, samples=s.samples, settings=dict(s.settings))


def check_packets(packets: Mapping[str, Mapping], *, batch_size: int, source="packets") -> None:
    """Refuse packets a grader must not be given.

    Raises
    ------
    InputError
        A packet lacks a field, its ``query_id`` differs from its name, a batch is empty or
        holds more than ``min(batch_size, 5)`` chunks, or a chunk appears twice in a packet.
    """
    cap = min(int(batch_size), MAX_BATCH)
    for qid, p in packets.items():
        where = f"{source}/{qid}.json"
        for k in ("query_id", "query", "intent", "batches"):
            if k not in p:
                raise InputError(f"packet lacks `{k}`", path=where, item=qid)
        if str(p["query_id"]) != str(qid):
            raise InputError("packet's query_id differs from its file name", path=where,
                             item=qid, found=str(p["query_id"]))
        seen = set()
        for b, batch in enumerate(p["batches"]):
            if not batch or len(batch) > cap:
                raise InputError(f"a batch holds 1 to {cap} chunks", path=where,
                                 item=f"{qid} batch {b}", found=f"{len(batch)} chunks")
            for c in batch:
                cid = str(c["chunk_id"])
                if cid in seen:
                    raise InputError("chunk listed twice in one packet", path=where,
                                     item=f"pair ({qid}, {cid})")
                seen.add(cid)


def packet_pairs(packets: Mapping[str, Mapping]) -> set[tuple[str, str]]:
    """Every ``(query_id, chunk_id)`` pair the packets ask for."""
    return {(str(q), str(c["chunk_id"])) for q, p in packets.items()
            for batch in p["batches"] for c in batch}


def recorded_pairs(rows, *, packets, scale, max_reason_words, kind, role, source,
                   grader=None, max_reason_chars=300, bank=None) -> set[tuple[str, str]]:
    """Validate rows already recorded and return their pairs.

    Parameters
    ----------
    rows : list of (int, dict)
        The store's rows (:attr:`GradeStore.rows`).
    bank : list of (int, dict), optional
        The store's bank sidecar lines (:func:`relgrade.graders.store.read_bank`): a row
        imported from TREC qrels needs no reason, whatever the grader's kind
        (:func:`relgrade.protocol.grades.imported_without_reasons`).

    Returns
    -------
    set of (str, str)
        The recorded pairs the packets hold (a recorded pair that left the pool is kept in
        the file, not counted).

    Raises
    ------
    InputError
        A recorded row breaks a rule of :func:`~relgrade.protocol.grades.validate_grade_rows`.
    """
    rows = list(rows)
    df = validate_grade_rows(rows, pool_pairs=None, scale=scale,
                             max_reason_words=max_reason_words,
                             require_reason=lambda g: reason_required(kind, role, g),
                             source=source, grader=grader, max_reason_chars=max_reason_chars,
                             allow_repeats=True,
                             reasonless=imported_without_reasons(rows, bank))
    return set(zip(df["query_id"], df["chunk_id"])) & packet_pairs(packets)


def recorded_samples(rows, *, packets, scale, max_reason_words, kind, role, source,
                     grader=None, max_reason_chars=300) -> pd.DataFrame:
    """Validate recorded sample rows; the samples table (see :mod:`relgrade.graders.self_consistency`).

    Sample rows are grade rows with a ``sample`` number between ``chunk_id`` and ``reason``.
    The table holds the samples of the pairs the packets hold: a recorded sample of a pair
    that left the pool is kept in the file, not counted (as :func:`recorded_pairs`).
    """
    wanted = packet_pairs(packets)
    by_sample: dict[int, list] = {}
    for line, row in rows:
        s = row.get("sample")
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise InputError("sample must be an integer >= 0", path=source, line=line,
                             found=repr(s))
        grade_row = {k: v for k, v in row.items() if k != "sample"}
        by_sample.setdefault(s, []).append((line, grade_row))
    frames = []
    for s, srows in sorted(by_sample.items()):
        df = validate_grade_rows(srows, pool_pairs=None, scale=scale,
                                 max_reason_words=max_reason_words,
                                 require_reason=lambda g: reason_required(kind, role, g),
                                 source=source, grader=grader, max_reason_chars=max_reason_chars)
        keep = [(q, c) in wanted for q, c in zip(df["query_id"], df["chunk_id"])]
        df = df[pd.Series(keep, index=df.index, dtype=bool)].reset_index(drop=True)
        df.insert(2, "sample", s)
        frames.append(df)
    if not frames:
        return pd.DataFrame({"query_id": pd.Series(dtype="str"),
                             "chunk_id": pd.Series(dtype="str"),
                             "sample": pd.Series(dtype="int64"),
                             "reason": pd.Series(dtype="str"),
                             "grade": pd.Series(dtype="int64")})
    return pd.concat(frames, ignore_index=True)


# --- planning ------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchTask:
    """One batch still to grade: its index, the chunks still lacking a grade, and per
    sample number the chunks still lacking that sample."""

    batch: int
    chunks: tuple
    todo: tuple  # ((sample, (chunk, ...)), ...)


@dataclass(frozen=True)
class QueryTask:
    """One query's pending batches, in display order."""

    query_id: str
    packet: Mapping
    batches: tuple

    @property
    def pairs(self) -> int:
        return sum(len(b.chunks) for b in self.batches)


def plan(packets: Mapping[str, Mapping], *, recorded: set, samples: int = 1,
         sampled: Mapping | None = None) -> list[QueryTask]:
    """The work left: per query, the batches with pairs that lack a recorded grade.

    Parameters
    ----------
    packets : dict
        query id → packet, in the order to grade them.
    recorded : set of (str, str)
        Pairs that already have a valid grade row from this grader.
    samples : int, default 1
        Samples per pair.
    sampled : dict, optional
        ``(query_id, chunk_id)`` → set of sample numbers already recorded.

    Returns
    -------
    list of QueryTask
        Queries with nothing left are omitted. A batch with some pairs already graded keeps
        only the rest; its other chunks are never shown again.
    """
    sampled = sampled or {}
    tasks = []
    for qid, p in packets.items():
        qid = str(qid)
        batches = []
        for b, batch in enumerate(p["batches"]):
            check_batch(batch, item=f"{qid} batch {b}")  # never more than 5 to a process
            pending = tuple(c for c in batch if (qid, str(c["chunk_id"])) not in recorded)
            if not pending:
                continue
            todo = []
            for s in range(samples):
                need = tuple(c for c in pending
                             if s not in sampled.get((qid, str(c["chunk_id"])), ()))
                if need:
                    todo.append((s, need))
            batches.append(BatchTask(batch=b, chunks=pending, todo=tuple(todo)))
        if batches:
            tasks.append(QueryTask(query_id=qid, packet=p, batches=tuple(batches)))
    return tasks


# --- running -------------------------------------------------------------------------

@dataclass
class CommandResult:
    """What one grader process did."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    killed: bool = False
    lost: bool = False  # the process's host (a Ray worker) died: nothing is known of it


def _die_with_parent():
    """A ``preexec_fn``: ask Linux to ``SIGKILL`` this child when its parent dies.

    Returns None off Linux (no ``prctl``). The function it returns runs in the child between
    ``fork`` and ``exec``; it also exits at once if the parent died before the request
    took effect.
    """
    if not os.uname().sysname == "Linux":
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: don't outlive it
            os._exit(1)

    return preexec


def kill_stragglers(marker: str, *, proc_root="/proc") -> list[int]:
    """Kill processes left by an earlier run for the same grade file.

    Parameters
    ----------
    marker : str
        The value of :data:`RUN_MARKER` the earlier run's grader processes carry (the grade
        file's absolute path).
    proc_root : str, default "/proc"
        Where to look (Linux's process table; nothing is done where it does not exist).

    Returns
    -------
    list of int
        The process ids sent ``SIGKILL``. Only processes of this user whose environment
        holds ``RELGRADE_GRADER_RUN=marker`` are touched; call it while holding the grade
        file's lock, so no live run for that file owns them.
    """
    needle = f"{RUN_MARKER}={marker}".encode("utf-8", "surrogateescape") + b"\0"
    killed = []
    me = os.getpid()
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return killed
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(os.path.join(proc_root, name, "environ"), "rb") as f:
                env = f.read() + b"\0"
        except OSError:  # gone, or another user's
            continue
        if b"\0" + needle in b"\0" + env:
            try:
                os.kill(int(name), signal.SIGKILL)
                killed.append(int(name))
            except (ProcessLookupError, PermissionError):
                pass
    return killed


class ProcessRunner:
    """Starts grader processes and can kill every running one (on Ctrl-C).

    Each process gets its own session, so a timeout kills the command together with
    whatever it started; on Linux it is also killed when this process dies, even by
    ``kill -9`` (see the module docstring).

    Parameters
    ----------
    marker : str, optional
        Set as :data:`RUN_MARKER` in every process's environment (see
        :func:`kill_stragglers`).
    """

    def __init__(self, marker: str | None = None):
        self._active: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._preexec = _die_with_parent()
        self._env = None if marker is None else {**os.environ, RUN_MARKER: marker}

    def run(self, argv: Sequence[str], data: bytes, *, timeout: float,
            spool: Path | None = None) -> CommandResult:
        """Run ``argv`` with ``data`` on stdin; kill its process group after ``timeout`` s.

        With ``spool``, standard output goes straight into that file (created; see
        :mod:`relgrade.graders.cache`) and is read back from it, so an answer printed just
        before this process dies is still on disk.
        """
        t0 = time.perf_counter()
        out_file = None
        with self._lock:
            if self.stopping.is_set():
                return CommandResult(None, "", "", 0.0, killed=True)
            if spool is not None:
                out_file = open_spool(spool)
            try:
                proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE if out_file is None else out_file,
                                        stderr=subprocess.PIPE, start_new_session=True,
                                        preexec_fn=self._preexec, env=self._env)
            except BaseException:
                if out_file is not None:
                    out_file.close()
                raise
            self._active.add(proc)
        timed_out = False
        try:
            try:
                out, err = proc.communicate(data, timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
                out, err = proc.communicate()
        finally:
            with self._lock:
                self._active.discard(proc)
            if out_file is not None:
                out_file.close()
        if out_file is not None:
            out = Path(spool).read_bytes()
        return CommandResult(proc.returncode, out.decode("utf-8", "replace"),
                             err.decode("utf-8", "replace"), time.perf_counter() - t0,
                             timed_out=timed_out, killed=self.stopping.is_set())

    def stop(self) -> None:
        """Refuse new processes and kill the running ones."""
        with self._lock:
            self.stopping.set()
            procs = list(self._active)
        for p in procs:
            _kill_group(p)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(text: str, n: int = 300) -> str:
    text = " ".join(text.strip().split())
    return text if len(text) <= n else "..." + text[-n:]


@dataclass
class Failure:
    """A batch that was refused on every attempt (nothing of it recorded)."""

    query_id: str
    batch: int
    sample: int
    error: str


@dataclass
class RunSummary:
    """What a run did.

    Attributes
    ----------
    total_pairs : int
        Pairs the packets hold.
    already : int
        Pairs recorded before the run started.
    graded : int
        Pairs recorded by this run.
    batches : int
        Batches recorded by this run.
    commands : int
        Grader processes started.
    retried : int
        Attempts beyond the first.
    command_seconds : float
        Time spent inside grader processes, start to exit, summed over all of them.
    cache_hits : int
        Requests answered from the call cache (or its spool): no process started.
    cache_misses : int
        Requests looked up in the call cache and not found (a process was started).
    lost : int
        Processes whose Ray worker died before answering (each sent again).
    failures : list of Failure
    seconds : float
    interrupted : bool
    broken : str or None
        Why the run was ended early because the Ray cluster stopped running its tasks
        (:func:`cluster_broken`); None otherwise.
    capped : str or None
        Which cap (``--max-calls`` or ``grading.max_cost``) stopped the run before the
        request that would have crossed it (:class:`relgrade.graders.price.Cap`); None
        when no cap was reached.
    judge : str or None
        The grader's judge identity (:func:`relgrade.graders.cache.judge_identity`), recorded
        on every bank line this run wrote.
    """

    total_pairs: int = 0
    already: int = 0
    graded: int = 0
    batches: int = 0
    commands: int = 0
    retried: int = 0
    command_seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    lost: int = 0
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    broken: str | None = None
    capped: str | None = None
    judge: str | None = None

    @property
    def remaining(self) -> int:
        return self.total_pairs - self.already - self.graded


class _Run:
    """The state one :func:`run_grader` call shares between its worker threads."""

    def __init__(self, setup, *, store, sample_store, writer, rubric, scale, max_reason_words,
                 template, runner, progress, summary, sampled_rows, max_reason_chars=300,
                 cache=None, identity=None, cap=None):
        self.setup = setup
        self.store = store
        self.sample_store = sample_store
        self.writer = writer
        self.rubric = rubric
        self.scale = list(scale)
        self.max_reason_words = max_reason_words
        self.max_reason_chars = max_reason_chars
        self.template = template
        self.runner = runner
        self.progress = progress
        self.summary = summary
        self.sampled_rows = sampled_rows  # (q, c) -> {sample: (reason, grade)}
        self.cache = cache
        self.identity = identity
        self.judge = judge_identity(identity)
        self.cap = cap
        self.capped = threading.Event()
        self.lock = threading.Lock()
        self.lost_streak, self.lost_since = 0, None

    def note_send(self, res) -> bool:
        """Count a send toward the run's streak of lost processes; True when the cluster
        is deemed broken (:func:`cluster_broken`), or the runner found a service of its
        node dead (:attr:`relgrade.graders.rayexec.RayRunner.dead`): then the run is
        stopped."""
        with self.lock:
            if not res.lost:
                self.lost_streak, self.lost_since = 0, None
                return False
            self.lost_streak += 1
            if self.lost_since is None:
                self.lost_since = time.monotonic()
            dead = getattr(self.runner, "dead", None)
            broken = dead is not None or cluster_broken(
                self.lost_streak, self.lost_since, time.monotonic(),
                workers=self.setup.workers, timeout=self.setup.timeout)
            if dead is not None and self.summary.broken is None:
                self.summary.broken = (
                    f"{dead} refuses connections: it died, and this machine's Ray node can "
                    "run no more tasks")
            elif broken and self.summary.broken is None:
                self.summary.broken = (
                    f"{self.lost_streak} grader processes in a row were lost with their Ray "
                    f"worker over {time.monotonic() - self.lost_since:.0f} s (last: "
                    f"{_tail(res.stderr) or 'no detail'}): the Ray cluster stopped running "
                    "tasks (a dead raylet or runtime-environment agent)")
        if broken:
            self.runner.stop()
        return broken

    def count(self, **inc) -> None:
        with self.lock:
            for k, v in inc.items():
                setattr(self.summary, k, getattr(self.summary, k) + v)

    def _validate(self, text, task, chunks, source) -> list:
        """An answer's rows in the chunks' order; InputError when it is refused."""
        s = self.setup
        df = parse_response(text, query_id=task.query_id, chunks=chunks, scale=self.scale,
                            max_reason_words=self.max_reason_words, kind=s.kind, role=s.role,
                            source=source, grader=s.name, max_reason_chars=self.max_reason_chars)
        by_chunk = {c: (q, c, r, int(g)) for q, c, r, g in zip(
            df["query_id"].tolist(), df["chunk_id"].tolist(), df["reason"].tolist(),
            df["grade"].tolist())}
        return [dict(zip(("query_id", "chunk_id", "reason", "grade"),
                         by_chunk[str(c["chunk_id"])])) for c in chunks]

    def _stored_answer(self, key, task, chunks, source) -> list | None:
        """The rows of ``key``'s answer from the cache, else from a spool file a killed run
        left (then cached); None when neither holds a valid answer."""
        text = self.cache.get(key)
        if text is not None:
            try:
                return self._validate(text, task, chunks, source)
            except InputError:  # valid when stored, refused now (a stricter rule): ask again
                pass
        # a spool file still written to belongs to a call that outlived its run: wait for it
        spooled = [f for f in self.cache.spooled(key)
                   if wait_spool(f, timeout=self.setup.timeout + SPOOL_GRACE,
                                 stopping=self.runner.stopping)]
        for f in spooled:
            text = read_spool(f)
            if text is None:
                continue
            try:
                rows = self._validate(text, task, chunks, source)
            except InputError:
                continue
            self.cache.put(key, text)
            drop_spool(spooled)
            return rows
        drop_spool(spooled)
        return None

    def attempt_batch(self, task: QueryTask, bt: BatchTask, sample: int,
                      chunks) -> tuple[list, bool, str | None] | None:
        """Grade ``chunks`` once (with retries): the validated rows in the chunks' order,
        whether they came from the call cache and the cache entry's
        :func:`~relgrade.graders.cache.answer_digest` (None without a cache), or None
        (refused on every attempt, or stopped)."""
        s = self.setup
        source = f"{s.name} command, {task.query_id} batch {bt.batch}"
        if s.samples > 1:
            source += f" sample {sample}"
        error = None
        for attempt in range(1, s.retries + 2):
            if self.runner.stopping.is_set() or self.capped.is_set():
                return None
            if attempt > 1:
                self.count(retried=1)
            req = batch_request(task.packet, bt.batch, chunks, grader=s.name, rubric=self.rubric,
                                scale=self.scale, max_reason_words=self.max_reason_words,
                                reason_is_required=reason_required(s.kind, s.role, 0),
                                sample=sample, attempt=attempt, previous_error=error)
            if self.template is not None:
                req["prompt"] = render_prompt(self.template, req)
            data = encode_request(req, mode=s.input)
            key = None if self.cache is None else call_key(self.identity, data)
            if key is not None:
                rows = self._stored_answer(key, task, chunks, source)
                if rows is not None:
                    self.count(cache_hits=1)
                    return rows, True, self.cache.digest(key)
                self.count(cache_misses=1)
            if self.cap is not None and not self.cap.reserve(
                    req.get("prompt") or data.decode("utf-8", "surrogateescape"),
                    task.query_id, [str(c["chunk_id"]) for c in chunks]):
                with self.lock:
                    self.summary.capped = self.cap.reached
                self.capped.set()
                return None
            lost = 0
            while True:
                spool = None if key is None else self.cache.spool_file(key)
                self.count(commands=1)
                res = self.runner.run(s.process_argv(remote=s.executor == "ray"), data,
                                      timeout=s.timeout, spool=spool)
                self.count(command_seconds=res.seconds)
                if not res.killed and self.note_send(res):
                    res = CommandResult(None, "", "", res.seconds, killed=True)
                if not res.lost or lost >= MAX_LOST or self.runner.stopping.is_set():
                    break
                # the host died: an answer the command printed before is in the spool
                lost += 1
                self.count(lost=1)
                rows = self._stored_answer(key, task, chunks, source) \
                    if key is not None else None
                if rows is not None:
                    return rows, False, self.cache.digest(key)
            if res.killed:
                if spool is not None:
                    drop_spool([spool])
                return None
            try:
                if res.lost:
                    raise InputError(f"the Ray worker running the grader command died "
                                     f"{lost + 1} times", path=source,
                                     found=_tail(res.stderr) or None)
                if res.timed_out:
                    raise InputError(f"grader command timed out after {s.timeout:g} s",
                                     path=source, found=_tail(res.stderr) or None)
                if res.returncode != 0:
                    raise InputError(f"grader command exited with status {res.returncode}",
                                     path=source, found=_tail(res.stderr) or None)
                rows = self._validate(res.stdout, task, chunks, source)
            except InputError as e:
                if spool is not None:
                    drop_spool([spool])
                error = str(e)
                continue
            if key is not None:
                self.cache.put(key, res.stdout)  # durable before the grades are handed on
                drop_spool([spool])
            return rows, False, (None if key is None else self.cache.digest(key))
        with self.lock:
            self.summary.failures.append(Failure(task.query_id, bt.batch, sample, error))
        return None

    def grade_query(self, task: QueryTask) -> None:
        s = self.setup
        for bt in task.batches:
            if self.runner.stopping.is_set() or self.capped.is_set():
                return
            if s.samples == 1:
                got = self.attempt_batch(task, bt, 0, bt.chunks)
                if got is None:
                    continue
                rows, hit, digest = got
                digests = [digest]
            else:
                ok, hit, digests = True, True, []
                for sample, chunks in bt.todo:
                    got = self.attempt_batch(task, bt, sample, chunks)
                    if got is None:
                        ok = False
                        break
                    got, sample_hit, digest = got
                    hit = hit and sample_hit
                    digests.append(digest)
                    srows = [{"query_id": r["query_id"], "chunk_id": r["chunk_id"],
                              "sample": sample, "reason": r["reason"], "grade": r["grade"]}
                             for r in got]
                    self.writer.submit(self.sample_store, srows).result()
                    with self.lock:
                        for r in srows:
                            self.sampled_rows.setdefault((r["query_id"], r["chunk_id"]), {})[
                                sample] = (r["reason"], r["grade"])
                if not ok:
                    continue
                table = []
                with self.lock:
                    for c in bt.chunks:
                        key = (task.query_id, str(c["chunk_id"]))
                        for sample, (reason, grade) in sorted(self.sampled_rows[key].items()):
                            if sample < s.samples:
                                table.append((key[0], key[1], sample, reason, grade))
                agg = aggregate_samples(pd.DataFrame(table, columns=["query_id", "chunk_id",
                                                                     "sample", "reason", "grade"]),
                                        scale=self.scale)
                rows = agg.to_dict("records")
            rows = [{"query_id": str(r["query_id"]), "chunk_id": str(r["chunk_id"]),
                     "reason": str(r["reason"]), "grade": int(r["grade"])} for r in rows]
            # the bank line names the judge and the prompt template the request was made with
            note = {"judge": self.judge}
            if self.identity.get("template"):
                note["template_sha256"] = self.identity["template"]
            if self.cache is not None:
                note.update({"cache": HIT if hit else MISS,
                             "answer_sha256": digests[0] if len(digests) == 1 else digests})
            self.writer.submit(self.store, rows, note=note).result()
            self.count(graded=len(rows), batches=1)
            if self.progress is not None:
                self.progress(len(rows))


def owed(packets: Mapping[str, Mapping], *, setup: GraderSetup, store: GradeStore,
         sample_store: GradeStore | None, scale: Sequence[int], max_reason_words: int,
         max_reason_chars: int = 300) -> tuple[list, set, dict]:
    """The work a run of ``setup`` would do: what :func:`run_grader` plans, with no process.

    Returns
    -------
    tasks : list of QueryTask
        :func:`plan` over the pairs without a current recorded grade.
    recorded : set of (str, str)
        Pairs with a current recorded grade.
    sampled_rows : dict
        ``(query_id, chunk_id)`` → ``{sample: (reason, grade)}`` already recorded.

    Raises
    ------
    InputError
        A recorded row is invalid.
    """
    s = setup
    common = dict(packets=packets, scale=scale, max_reason_words=max_reason_words, kind=s.kind,
                  role=s.role, grader=s.name, max_reason_chars=max_reason_chars)
    recorded = recorded_pairs(store.rows, source=store.path, bank=read_bank(store.path),
                              **common)
    if getattr(store, "made_on", None) is not None:
        # only grades made on what the packets show now count: a stale pair is graded again
        recorded &= set(store.current_keys())
    sampled_rows: dict = {}
    if s.samples > 1 and sample_store is not None:
        sdf = recorded_samples(sample_store.rows, source=sample_store.path, **common)
        for q, c, smp, r, g in sdf.itertuples(index=False, name=None):
            sampled_rows.setdefault((q, c), {})[int(smp)] = (r, int(g))
    sampled = {k: set(v) for k, v in sampled_rows.items()}
    return plan(packets, recorded=recorded, samples=s.samples, sampled=sampled), recorded, \
        sampled_rows


def owed_requests(tasks: Sequence[QueryTask], *, setup: GraderSetup, rubric: str,
                  scale: Sequence[int], max_reason_words: int, template,
                  reason_chars: int) -> list:
    """Each first-attempt request ``tasks`` would send, rendered as it would be sent.

    Returns
    -------
    list of relgrade.graders.price.Request
        One per batch and owed sample: the rendered prompt's characters (the bytes sent when
        ``template`` is None) and its answer's characters (:func:`relgrade.graders.price.request_of`).
    """
    from relgrade.graders.price import request_of

    s = setup
    out = []
    for task in tasks:
        for bt in task.batches:
            for sample, chunks in bt.todo:
                req = batch_request(task.packet, bt.batch, chunks, grader=s.name, rubric=rubric,
                                    scale=scale, max_reason_words=max_reason_words,
                                    reason_is_required=reason_required(s.kind, s.role, 0),
                                    sample=sample)
                text = render_prompt(template, req) if template is not None else \
                    encode_request(req, mode=s.input).decode("utf-8", "surrogateescape")
                out.append(request_of(task.query_id, [str(c["chunk_id"]) for c in chunks],
                                      text, reason_chars=reason_chars, scale=scale))
    return out


def run_grader(
    packets: Mapping[str, Mapping],
    *,
    setup: GraderSetup,
    store: GradeStore,
    rubric: str,
    scale: Sequence[int],
    max_reason_words: int,
    template=None,
    sample_store: GradeStore | None = None,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[RunSummary], None] | None = None,
    max_reason_chars: int = 300,
    cache: CallCache | None = None,
    tree=None,
    runner=None,
    template_text: str | None = None,
    cap=None,
) -> RunSummary:
    """Grade every pair of ``packets`` that ``store`` does not hold yet.

    Parameters
    ----------
    packets : dict
        query id → packet (see docs/formats.md), in the order to grade; checked with
        :func:`check_packets` by the caller.
    setup : GraderSetup
        The grader's command settings.
    store : GradeStore
        The grader's open grade file for this round.
    rubric : str
        The rubric text given to the command.
    scale : sequence of int
        Allowed grades.
    max_reason_words : int
        Longest reason allowed, in words.
    template : jinja2.Template, optional
        The prompt template; required for ``input: prompt``, and when given the ``prompt``
        field is filled in JSON requests too.
    sample_store : GradeStore, optional
        Where samples are recorded; required when ``setup.samples > 1`` (keyed by
        ``query_id, chunk_id, sample``).
    progress : callable, optional
        Called with the number of pairs each time a batch is recorded.
    on_plan : callable, optional
        Called once with the summary (``total_pairs`` and ``already`` set) before grading.
    max_reason_chars : int, default 300
        Longest reason allowed, in characters (params ``grading.max_reason_chars``).
    cache : CallCache, optional
        The call cache (params ``paths.call_cache``): requests answered before are not
        sent again, accepted answers are stored, and each batch's bank lines say
        ``"cache": "hit"`` or ``"miss"``. Without it every request starts a process.
    tree : str or os.PathLike, optional
        The working tree (the repository holding the experiment): the files of it that the
        command names are part of the cache key (:func:`relgrade.graders.cache.named_files`,
        read once, when the run starts). None reads no file.
    runner : optional
        What runs the processes: an object with ``run(argv, data, *, timeout, spool)``
        returning :class:`CommandResult` and ``stop()``, and a ``stopping`` event. Default:
        a :class:`ProcessRunner` for ``executor: local``, a
        :class:`relgrade.graders.rayexec.RayRunner` for ``executor: ray`` (closed at the
        end of the run).

    Returns
    -------
    RunSummary

    Raises
    ------
    InputError
        A recorded row is invalid, or the command cannot be found.
    ProtocolError
        ``samples > 1`` without a sample store, or ``input: prompt`` without a template.
    RelgradeError
        ``executor: ray`` and Ray is not installed, or its cluster cannot be reached.

    Notes
    -----
    A batch is recorded only when every chunk it asked for has exactly one valid row; the
    rows are written in the batch's display order. When the run is interrupted
    (``KeyboardInterrupt`` in the calling thread), running commands are killed, batches
    already accepted are written, and ``interrupted`` is set in the returned summary.
    """
    s = setup
    if s.samples > 1 and sample_store is None:
        raise ProtocolError("samples > 1 needs a sample store")
    if s.input == "prompt" and template is None:
        raise ProtocolError("input: prompt needs the prompt template")
    exe = s.process_argv(remote=s.executor == "ray")[0]
    if s.executor == "local" and shutil.which(exe) is None \
            and not (os.sep in exe and os.access(exe, os.X_OK)):
        raise InputError("grader command not found or not executable", item=s.name, found=exe,
                         fix=f"Check graders.{s.name}.command")
    t0 = time.perf_counter()
    tasks, recorded, sampled_rows = owed(packets, setup=s, store=store,
                                         sample_store=sample_store, scale=scale,
                                         max_reason_words=max_reason_words,
                                         max_reason_chars=max_reason_chars)
    summary = RunSummary(total_pairs=len(packet_pairs(packets)), already=len(recorded))
    if on_plan is not None:
        on_plan(summary)
    marker = str(Path(store.path).resolve())
    stragglers = kill_stragglers(marker)
    if stragglers:
        logging.getLogger("relgrade").warning(
            f"{store.path}: killed {len(stragglers)} grader processes left running by an "
            "earlier run that was killed")
    env = declared_env(s.env_keys, os.environ)
    identity = grader_identity(s, template_text=template_text, rubric=rubric, tree=tree)
    own_runner = runner is None
    if runner is None and s.executor == "ray" and tasks:
        from relgrade.graders.rayexec import RayRunner

        runner = RayRunner(marker, address=s.address, workers=s.workers, env=env,
                           connect_timeout=s.connect_timeout)
    elif runner is None:
        runner = ProcessRunner(marker)
    writer = SingleWriter()
    run = _Run(s, store=store, sample_store=sample_store, writer=writer, rubric=rubric,
               scale=scale, max_reason_words=max_reason_words, template=template, runner=runner,
               progress=progress, summary=summary, sampled_rows=sampled_rows,
               max_reason_chars=max_reason_chars, cache=cache, identity=identity, cap=cap)
    summary.judge = run.judge
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=s.workers,
                                                 thread_name_prefix="relgrade-grader")
    futures = [pool.submit(run.grade_query, t) for t in tasks]
    try:
        pending = set(futures)
        while pending:
            done, pending = concurrent.futures.wait(pending, timeout=0.2)
            for f in done:
                f.result()
    except KeyboardInterrupt:
        summary.interrupted = True
        runner.stop()
        for f in futures:
            f.cancel()
    except BaseException:
        runner.stop()
        for f in futures:
            f.cancel()
        pool.shutdown(wait=True)
        writer.close()
        if own_runner and hasattr(runner, "close"):
            runner.close()
        raise
    pool.shutdown(wait=True)
    writer.close()
    if own_runner and hasattr(runner, "close"):
        runner.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def packet_meta(packets: Mapping[str, Mapping], *, source="packets") -> dict:
    """The ``{"intents_sha256", "rubric_version", "round"}`` every packet shares.

    This is what the grade file's sidecar ``round-N.meta.json`` records, so the grades stage
    can refuse grades made from packets with other intents or another rubric
    (:func:`relgrade.protocol.grades.check_meta`).

    Raises
    ------
    InputError
        No packets, or packets that disagree on either value (packets from two builds).
    """
    if not packets:
        raise InputError("no packets to grade", path=source, fix="Run: dvc repro packets")
    meta = {}
    # the round says the grades came from this round's packets (a new round is no copy)
    for key in ("intents_sha256", "rubric_version", "round"):
        values = {p.get(key) for p in packets.values()}
        if len(values) != 1:
            raise InputError(f"packets disagree on {key}", path=source,
                             found=", ".join(sorted(map(str, values))),
                             fix="Rebuild the packets: dvc repro packets")
        meta[key] = values.pop()
    return meta
