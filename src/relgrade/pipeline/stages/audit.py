"""Stage `audit`: pool provenance + queries → the audit queries, locked for the round.

The sample is drawn once per grading round and written to the audit lock
(``paths.audit_lock``), which is committed with git. While the lock's round is
``grading.round`` the stage only rewrites the audit table from the lock: a pool change (an
arm, a depth, a tail sample) never re-draws the audited queries. A new round, or
``relgrade audit redraw``, draws a new sample. A lock edited by hand is refused. A lock
holding queries a query-set refresh retired (the sample manifest's ``refresh.retired``) is
pending work naming ``relgrade audit redraw --force``: those queries can no longer be audited.

In dvc.yaml the lock is an output with ``cache: false`` (git keeps it, so a fresh clone has
it and ``dvc repro`` finds the stage up to date) and ``persist: true`` (dvc does not delete
it before the stage reruns after a pool change, so the stage can read it). A lock rewritten
by ``relgrade audit redraw`` is a changed output, and the next ``dvc repro`` reruns this stage.

The audit sample of an experiment: drawn from its files, locked per round, redrawn on request.

The audit stage and ``relgrade audit redraw`` share these: :func:`draw_audit` reads the
provenance and queries and draws with the params' seed; :func:`locked_audit` is the stage's
rule (keep the lock of the current round, else draw); :func:`redraw_audit` writes a new lock
for the current round, refusing while the auditor has grades of the round.

In ppi mode (``grading.mode: ppi``) the sample is the human sample of the prediction-powered
estimates: a seeded uniform draw of the pool's queries (``ppi.human_fraction`` or
``ppi.human_queries``, seed derived from ``seed`` and ``"ppi-sample"``, or
``"ppi-sample-round-R"`` for a round R >= 2), not the provenance-balanced draw; each locked
row's ``reason`` names the design, so the lock records it, and the lock records the sha256 of
the pooled query ids drawn from. The sample cannot be moved once any grader (under any name,
:func:`round_graded`) has a record of the round, nor replaced by a lock forged with its hash
recomputed (the draw is recomputed, :func:`verify_locked_draw`), nor re-drawn in a later round
with another seed than the recorded one (:func:`refuse_new_seed`); params that draw the same
queries in other words are accepted (:func:`same_draw`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd

from relgrade.errors import InputError, PendingWork, ProtocolError
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import redraw_command, top_path
from relgrade.io import batches as stream
from relgrade.io import files as io
from relgrade.io import githistory
from relgrade.protocol import audit
from relgrade.rng import stage_rng
from relgrade.io.files import write_jsonl
from relgrade.evaluation.ppi import MIN_SAMPLE, human_sample

#: The name the human sample's random generator is derived under (with params ``seed``).
PPI_SAMPLE_STREAM = "ppi-sample"


def draw_human_sample(ex: Experiment) -> pd.DataFrame:
    """The human sample of ppi mode: a seeded uniform draw of the pool's queries.

    Returns
    -------
    pandas.DataFrame
        The audit table's columns (``query_id``, ``group``, ``unique_share``, ``reason``),
        sorted by query id; ``reason`` states the design (uniform, size, share, seed).

    Raises
    ------
    InputError
        Params give a sample of fewer than 3 queries or more than the pool holds
        (:func:`check_sample_size`, the rule of ``relgrade init``).
    """
    cfg, seed = ex.params.need("ppi"), ex.params.need("seed")
    check_sample_size(ex)  # init's rule, before anything is drawn
    provenance = io.read_table(ex.path("provenance"))
    queries = io.read_table(ex.path("queries"), columns=["query_id", "group"])
    pooled = sorted(set(provenance["query_id"].astype(str)))
    try:
        picks = human_sample(len(pooled), fraction=cfg.human_fraction,
                             count=cfg.human_queries,
                             rng=stage_rng(seed, ppi_stream(ex.params.grading.round)))
    except InputError as e:
        raise InputError(f"the human sample cannot be drawn: {e}", path=ex.params.source,
                         item="ppi.human_fraction" if cfg.human_fraction is not None
                         else "ppi.human_queries", found=f"{len(pooled)} pooled queries",
                         fix="give a share in (0, 1] or a count from 2 to the number of "
                             "queries") from None
    share = audit.unique_share(provenance)
    group = dict(zip(queries["query_id"].astype(str), queries["group"].astype(str)))
    reason = (f"ppi human sample: seeded uniform draw of {picks.size} of {len(pooled)} pooled "
              f"queries ({sample_design(ex)})")
    rows = [{"query_id": pooled[i], "group": group.get(pooled[i], ""),
             "unique_share": float(share.get(pooled[i], 0.0)), "reason": reason} for i in picks]
    return pd.DataFrame(rows, columns=["query_id", "group", "unique_share", "reason"])


def ppi_stream(rnd: int) -> str:
    """The name the human sample of round ``rnd`` is drawn under (with params ``seed``).

    Round 1 draws under :data:`PPI_SAMPLE_STREAM`; a later round R under
    ``"ppi-sample-round-R"``, so a new round draws a new sample with the same seed (the seed
    of a round after grades exist is the recorded one: :func:`refuse_new_seed`).

    Examples
    --------
    >>> ppi_stream(1), ppi_stream(2)
    ('ppi-sample', 'ppi-sample-round-2')
    """
    return PPI_SAMPLE_STREAM if int(rnd) <= 1 else f"{PPI_SAMPLE_STREAM}-round-{int(rnd)}"


def sample_design(ex: Experiment) -> str:
    """What fixes the human sample in params, in the words its lock's ``reason`` records.

    Returns
    -------
    str
        ``"share F; seed S, stream ppi-sample"`` (``ppi.human_fraction``) or ``"count N;
        seed S, stream ppi-sample"`` (``ppi.human_queries``), with params ``seed`` and the
        round's stream (:func:`ppi_stream`).
    """
    cfg, seed = ex.params.need("ppi"), ex.params.need("seed")
    size = (f"share {cfg.human_fraction:g}" if cfg.human_fraction is not None
            else f"count {cfg.human_queries}")
    return f"{size}; seed {seed}, stream {ppi_stream(ex.params.grading.round)}"


#: The design words at the end of a ppi lock row's ``reason``.
_LOCKED_DESIGN = re.compile(r"\(((?:share|count) [^;()]+; seed [^,()]+, stream [^()]+)\)$")


def locked_design(lock: dict) -> str | None:
    """The design a ppi lock was drawn with (:func:`sample_design`'s words), or None when the
    lock was not drawn as a ppi human sample."""
    rows = lock.get("queries") or []
    found = _LOCKED_DESIGN.search(str(rows[0].get("reason", ""))) if rows else None
    return found.group(1) if found else None


#: The parts of :func:`sample_design`'s words, and the pool size a lock row's reason records.
_DESIGN_PARTS = re.compile(r"^(share|count) (\S+); seed (\S+), stream (\S+)$")
_DRAWN_OF = re.compile(r"draw of (\d+) of (\d+) pooled queries")


def parse_design(design: str) -> dict | None:
    """:func:`sample_design`'s words as values, or None when they do not parse.

    Returns
    -------
    dict or None
        ``fraction`` (float or None), ``count`` (int or None), ``seed`` (int), ``stream``
        (str).

    Examples
    --------
    >>> parse_design("share 0.2; seed 7, stream ppi-sample")
    {'fraction': 0.2, 'count': None, 'seed': 7, 'stream': 'ppi-sample'}
    """
    found = _DESIGN_PARTS.match(design or "")
    if not found:
        return None
    kind, value, seed, stream = found.groups()
    try:
        return {"fraction": float(value) if kind == "share" else None,
                "count": int(value) if kind == "count" else None, "seed": int(seed),
                "stream": stream}
    except ValueError:
        return None


def pooled_ids(ex: Experiment) -> list[str]:
    """The pool's query ids (``paths.provenance``), sorted: what the human sample is drawn from.

    Parameters
    ----------
    ex : Experiment
        The experiment (params ``paths.provenance``; only its ``query_id`` column is read).

    Returns
    -------
    list of str
        The distinct query ids, sorted.

    Raises
    ------
    InputError
        The provenance table is missing or unreadable (:func:`relgrade.io.files.read_table`).
    """
    provenance = io.read_table(ex.path("provenance"), columns=["query_id"])
    return sorted(set(provenance["query_id"].astype(str)))


def drawn_ids(pooled: list[str], *, fraction=None, count=None, seed: int,
              stream: str) -> list[str]:
    """The query ids a design draws from ``pooled`` (sorted ids), sorted: the draw of
    :func:`draw_human_sample`, as a pure function of the design.

    Raises
    ------
    InputError
        As :func:`relgrade.evaluation.ppi.human_sample` (a size the pool cannot give).
    """
    picks = human_sample(len(pooled), fraction=fraction, count=count,
                         rng=stage_rng(int(seed), stream))
    return sorted(pooled[i] for i in picks)


def verify_locked_draw(ex: Experiment, lock: dict, *, path) -> bool:
    """Check that a ppi lock's queries are the draw its recorded design gives.

    The human sample is a deterministic function of the design the lock records (share or
    count, seed, stream) and the sorted ids of the pooled queries it was drawn from, so a
    lock whose queries were rewritten (and its sha256 recomputed with
    :func:`relgrade.protocol.audit.lock_sha256`) is found by drawing again.

    What the draw is checked against: the current pool's query ids, when the lock's
    ``pool_version`` is the current pool's (then a recorded ``pooled_sha256`` must be their
    hash); else, for a lock that records ``pooled_sha256`` (every ppi lock drawn since it is
    recorded), when the pool's query ids hash to it; for an older lock without it, when the
    pool holds as many queries as its reason records ("draw of K of N pooled queries"). When the pool's queries have changed since the draw (queries
    added), the draw cannot be recomputed from the files at hand, and the lock is kept
    unverified (its hash and the params checks still apply). The stream must be the lock's
    round's (:func:`ppi_stream`).

    Parameters
    ----------
    ex : Experiment
        In ppi mode (its provenance read for the pooled query ids).
    lock : dict
        A lock that passed :func:`relgrade.protocol.audit.check_lock`.
    path : str or Path
        The lock file, named in the message.

    Returns
    -------
    bool
        True when the draw was recomputed and matches; False when it could not be (no
        design recorded, the pooled queries changed since the draw, or no provenance: DVC
        removes it before the pool stage reruns, and the audit stage checks after it).

    Raises
    ------
    InputError
        The locked queries are not the draw, or the design names another stream than its
        round's: one line naming the lock, the design, which queries differ, and the fix
        (restore the lock from git).
    """
    words = locked_design(lock)
    design = parse_design(words) if words else None
    if design is None:
        return False
    if not ex.path("provenance").is_file():
        return False  # the pool stage, run before the pool is rewritten: the audit stage checks
    locked = sorted(str(q["query_id"]) for q in lock["queries"])
    fix = (f"Restore the lock from git (`git checkout -- {path}`); the sample of a round is "
           "the seeded draw its lock records, never a hand-picked set")
    if design["stream"] != ppi_stream(lock["round"]):
        raise InputError(f"the locked human sample names a stream its round does not draw "
                         f"under (round {lock['round']} draws under "
                         f"{ppi_stream(lock['round'])})", path=path,
                         found=f"stream {design['stream']}", fix=fix)
    pooled = pooled_ids(ex)
    same_pool = str(lock["pool_version"]) == _pool_version(ex)
    if audit.POOLED_KEY in lock:
        if lock[audit.POOLED_KEY] != audit.pooled_sha256(pooled):
            if same_pool:
                raise InputError(
                    f"the lock's {audit.POOLED_KEY} is not the hash of its pool's query ids "
                    f"(pool {lock['pool_version']}, the current one)", path=path,
                    found=lock[audit.POOLED_KEY], fix=fix)
            return False
    elif not same_pool:
        sizes = {int(m.group(2)) for q in lock["queries"]
                 for m in [_DRAWN_OF.search(str(q.get("reason", "")))] if m}
        if sizes != {len(pooled)}:
            return False
    try:
        drawn = drawn_ids(pooled, fraction=design["fraction"], count=design["count"],
                          seed=design["seed"], stream=design["stream"])
    except InputError:
        drawn = []
    if drawn != locked:
        only_lock = sorted(set(locked) - set(drawn))
        only_draw = sorted(set(drawn) - set(locked))
        raise InputError(
            f"the locked human sample is not the draw its recorded design gives ({words}) "
            f"from the {len(pooled)} pooled queries",
            path=path, found=f"{len(locked)} locked, {len(drawn)} drawn; lock only: "
                             f"{', '.join(only_lock) or 'none'}; draw only: "
                             f"{', '.join(only_draw) or 'none'}", fix=fix)
    return True


def grader_named(ex: Experiment, grader: str) -> str:
    """A grader as messages name it: ``"model-m (the model grader)"`` for
    ``grading.key_grader``, ``"person-h (the human grader)"`` for ``grading.auditor``, and
    ``"model-m (a grader params no longer name)"`` for any other folder under
    ``paths.grades_in`` (a grader renamed in params)."""
    if grader == ex.params.grading.key_grader:
        return f"{grader} (the model grader)"
    if grader == ex.params.grading.auditor:
        return f"{grader} (the human grader)"
    return f"{grader} (a grader params no longer name)"


def round_graded(ex: Experiment, rnd: int | None = None, *,
                 skip: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """What records that some grader graded round ``rnd``, whatever grader params name now.

    Every folder under ``paths.grades_in`` counts, not only the graders params name: a grade
    seen under a name since renamed (``grading.key_grader: model-m`` made ``model-n``) was
    still seen. The judge's identity does not depend on the grader's name (docs/judges.md).

    In order: a grade file's rows (``GRADER/round-R.jsonl``; the key grader's first, then the
    auditor's, then other folders by name); the file's bank sidecar (the grade file deleted or
    emptied); the round's ``round-R.meta.json`` (written as a grader starts the round); git's
    history of any ``GRADER/round-R.jsonl`` with content.

    Parameters
    ----------
    ex : Experiment
        The experiment (``paths.grades_in``, ``grading.key_grader``, ``grading.auditor``).
    rnd : int, optional
        The round; default params ``grading.round``.
    skip : tuple of str
        Grader folders not to count (their files on disk and in git).

    Returns
    -------
    (grader, words) or None
        The grader folder and the words for a message ("has 24 grades of round 1 in FILE",
        "started grading round 1 (FILE exists)", "has grades of round 1 in FILE as
        committed in COMMIT (deleted since)"), files named as typed at the repository's top;
        None when nothing records a grade of the round.

    Raises
    ------
    ProtocolError
        git cannot be run where the experiment is a git working tree.
    """
    rnd = ex.params.grading.round if rnd is None else int(rnd)
    root = ex.path("grades_in")
    first = [g for g in (ex.params.grading.key_grader, ex.params.grading.auditor) if g]
    found = sorted(p.name for p in root.glob("*") if p.is_dir()
                   and not p.name.startswith(".")) if root.is_dir() else []
    graders = [g for g in dict.fromkeys([*first, *found]) if g not in skip]

    def named(path) -> str:  # as typed at the repository's top, whatever the working folder
        return top_path(ex, os.path.relpath(path, ex.root))

    def rows(path) -> int:
        return sum(1 for line in io.read_lines(path) if line.strip()) if path.is_file() else 0

    for grader in graders:
        files = ex.grader_files(grader, rnd)
        for record in (files.grades, files.bank):
            if rows(record):
                return grader, f"has {rows(record)} grades of round {rnd} in {named(record)}"
    for grader in graders:
        files = ex.grader_files(grader, rnd)
        if files.meta.is_file():
            return grader, f"started grading round {rnd} ({named(files.meta)} exists)"
    committed = githistory.last_nonempty_commit_matching(
        root, f"*/round-{rnd}.jsonl", keep=lambda path: path.parent.name not in skip)
    if committed is not None:
        commit, record = committed
        return record.parent.name, (f"has grades of round {rnd} in {named(record)} as "
                                    f"committed in {commit[:12]} (deleted since)")
    return None


def check_sample_lock(ex: Experiment, lock: dict, *, path) -> bool:
    """Whether params still draw the locked ppi human sample; refused when they would move it
    after grading began.

    The sample of a prediction-powered estimate must be chosen before the model grader's
    grades are seen: a sample chosen afterwards (a new seed, share or count tried until the
    estimate suits) is not a uniform draw, and the estimate is not valid.

    Parameters
    ----------
    ex : Experiment
        In ppi mode (else nothing is checked and True is returned).
    lock : dict
        The committed lock of the current round (checked by
        :func:`relgrade.protocol.audit.check_lock`).
    path : str or Path
        The lock file, named in the message.

    Returns
    -------
    bool
        True when params (``seed``, ``ppi.human_fraction``, ``ppi.human_queries``) are the
        ones the lock records, or draw the same queries from the current pool
        (:func:`same_draw`: the draw is compared, not the words), or the lock records none
        (drawn before they were recorded); False when they would move the sample and no
        grader has a grade of the round yet (the caller then draws the sample again:
        nothing was seen).

    Raises
    ------
    InputError
        Params would move the sample and any grader has a record of the round
        (:func:`round_graded`: every folder under ``paths.grades_in``, whatever params name
        now): one line naming the lock, the record, what is recorded, and how to go on
        (restore the params, or start a new ``grading.round``, which draws its sample before
        the model grades it; nothing recorded is lost). Or nothing of the round is graded
        but an earlier round is, and params change the seed (:func:`refuse_new_seed`).
    """
    if ex.params.grading.mode != "ppi":
        return True
    locked, now = locked_design(lock), sample_design(ex)
    if locked is None or locked == now or same_draw(ex, lock):
        return True
    model, rnd = ex.params.grading.key_grader, ex.params.grading.round
    seen = round_graded(ex)
    if seen is None:
        refuse_new_seed(ex, lock, path=path)
        return False
    what = f"{grader_named(ex, seen[0])} {seen[1]}"
    raise InputError(
        f"the human sample is locked: {what}, and params would move the sample",
        path=path, found=f"locked with {locked}; params now give {now}",
        fix=f"Restore seed and ppi.human_fraction/ppi.human_queries to the locked values, or "
            f"start a new round honestly: set grading.round: {rnd + 1} (its sample is drawn "
            f"before {model} grades that round; round {rnd}'s grades and lock stay in git)")


def same_draw(ex: Experiment, lock: dict) -> bool:
    """Whether params (``seed``, ``ppi.human_fraction`` or ``ppi.human_queries``, the round's
    stream) draw exactly the locked queries from the current pool, whatever words they are
    given in (``human_queries: 3`` and ``human_fraction: 0.2`` both draw 3 of 15).

    Returns
    -------
    bool
        False also when params give no sample the pool can hold, or there is no provenance
        to draw from (the pool stage's check, before it rewrites the pool).
    """
    cfg = ex.params.need("ppi")
    if not ex.path("provenance").is_file():
        return False  # DVC removed it before the pool stage reruns: nothing to draw from
    try:
        drawn = drawn_ids(pooled_ids(ex), fraction=cfg.human_fraction,
                          count=cfg.human_queries, seed=ex.params.need("seed"),
                          stream=ppi_stream(ex.params.grading.round))
    except InputError:
        return False
    return drawn == sorted(str(q["query_id"]) for q in lock["queries"])


def recorded_seed(lock: dict | None, *, path) -> int | None:
    """The seed the human samples of an experiment are drawn with, as recorded: the design
    of ``lock`` (the lock in force), else of the newest version of the lock file that git
    holds with one (the lock deleted); None when nothing records one.

    Parameters
    ----------
    lock : dict or None
        The lock in force (its queries' ``reason`` records the design), or None.
    path : str or os.PathLike
        The lock file (params ``paths.audit_lock``), whose git history is read when
        ``lock`` records no design.

    Returns
    -------
    int or None
        The recorded seed (params ``seed`` at the draw); None when neither the lock nor any
        committed version of it records a design (a version that is not JSON is skipped).
    """
    design = parse_design(locked_design(lock) or "") if lock is not None else None
    if design is not None:
        return design["seed"]
    for _, content in githistory.committed_versions(path) or []:
        try:
            old = json.loads(content)
        except ValueError:
            continue
        design = parse_design(locked_design(old) or "") if isinstance(old, dict) else None
        if design is not None:
            return design["seed"]
    return None


def refuse_new_seed(ex: Experiment, lock: dict | None, *, path) -> None:
    """Refuse a human sample of a later round drawn with another seed than the recorded one,
    once an earlier round has grades.

    A new round draws a new sample under its own stream (:func:`ppi_stream`), with the seed
    the experiment's samples were drawn with. A seed changed while an earlier round's grades
    are known would let a user draw the new round's sample again and again (seed 1, 2, 3…)
    until one suits those grades: a sample so chosen is not a uniform draw.

    Parameters
    ----------
    ex : Experiment
        In ppi mode, ``grading.round`` R (nothing is checked for round 1).
    lock : dict or None
        The lock in force (checked), of round R or earlier; None when there is none (the
        seed is then read from git's history of the lock file, :func:`recorded_seed`).
    path : str or Path
        The lock file, named in the message.

    Raises
    ------
    InputError
        Params ``seed`` is not the recorded seed and a round before R has a record of a
        grade (:func:`round_graded`): one line naming the lock, the recorded seed, the
        round graded and what records it, and the fix (set the recorded seed back).
    """
    rnd, now = ex.params.grading.round, ex.params.need("seed")
    if rnd <= 1:
        return
    seed = recorded_seed(lock, path=path)
    if seed is None or seed == now:
        return
    for earlier in range(rnd - 1, 0, -1):
        seen = round_graded(ex, earlier)
        if seen is not None:
            break
    else:
        return
    raise InputError(
        f"round {rnd}'s human sample is drawn with the recorded seed {seed}: "
        f"{grader_named(ex, seen[0])} {seen[1]}, and a sample drawn with another seed once "
        "grades are seen can be drawn again until one suits them", path=path,
        found=f"seed {now} in params, recorded seed {seed}",
        fix=f"Set seed: {seed} back in {params_shown(ex)}: round {rnd} draws under its own "
            f"stream ({ppi_stream(rnd)}), so its sample is a new one with the recorded seed")


def draw_audit(ex: Experiment) -> pd.DataFrame:
    """A fresh draw of the audit sample from the current provenance (params ``audit``, ``seed``).

    In ppi mode, the human sample (:func:`draw_human_sample`).

    Returns
    -------
    pandas.DataFrame
        :func:`relgrade.protocol.audit.choose_audit`'s table.
    """
    if ex.params.grading.mode == "ppi":
        return draw_human_sample(ex)
    cfg = ex.params.need("audit")
    try:
        share = unique_share(ex)  # the provenance first, as when it was read whole
        return audit.choose_audit(
            None,
            io.read_table(ex.path("queries"), columns=["query_id", "group"]),
            fraction=cfg.fraction, min_queries=cfg.min_queries,
            rng=stage_rng(ex.params.need("seed"), "audit"), share=share)
    except InputError as e:
        if e.path is not None or not str(e.item).startswith("audit."):
            raise
        # a size the pool cannot meet: the line to change is in the params file (named as
        # loaded; the stage's runner names it from the repository's top)
        raise InputError(e.rule, path=ex.params.source, item=e.item, found=e.found,
                         fix=e.fix) from None


def unique_share(ex: Experiment) -> pd.Series:
    """:func:`relgrade.protocol.audit.unique_share` of the provenance table
    (``paths.provenance``), read a block of whole queries at a time.

    The pool stage writes the provenance in query order, so memory holds one block, not the
    table; a table in another order (written by other means) is read whole, with the same
    result.

    Returns
    -------
    pandas.Series of float64, indexed by query_id (sorted)

    Raises
    ------
    InputError
        The provenance table is missing, unreadable or lacks a column.
    """
    path = ex.path("provenance")
    try:
        return audit.unique_share_blocks(stream.iter_query_blocks(
            path, ["query_id", "chunk_id", "arm", "source"]))
    except stream.QueryOrderError:
        return audit.unique_share(io.read_table(path))


def params_shown(ex: Experiment) -> str:
    """The experiment's params file as a user at the repository's top names it
    (``experiments/mine/params.yaml``), or its absolute path outside the working tree."""
    source = Path(ex.params.source).resolve()
    try:
        return source.relative_to(Path(ex.working_tree()).resolve()).as_posix()
    except ValueError:
        return source.as_posix()


def _pool_version(ex: Experiment) -> str:
    return str(io.read_json(ex.path("pool_manifest")).get("pool_version"))


def refuse_moved_sample(ex: Experiment) -> None:
    """Refuse params that would move the current round's locked ppi human sample after
    grading began, before a stage that runs ahead of the audit stage writes anything.

    Params ``seed`` is a param of the pool stage too (the tail sample's draw, the pool
    manifest), and DVC runs the pool stage first: the pool stage calls this before it
    reads a run, so a refused seed change leaves the pool and its manifest as they were.
    The check is the audit stage's (:func:`check_sample_lock`, on a lock that passes
    :func:`relgrade.protocol.audit.check_lock`), with the same message.

    Parameters
    ----------
    ex : Experiment
        Any experiment: outside ppi mode, or without a lock of the current round, nothing is
        checked (the audit stage then draws or refuses as usual).

    Raises
    ------
    InputError
        The lock was edited by hand or is malformed, or its queries are not the draw its
        design gives (:func:`verify_locked_draw`); params would move the locked sample and
        a grader has grades of the round; a later round's seed is not the recorded one
        after an earlier round was graded (:func:`refuse_new_seed`).
    """
    if ex.params.grading.mode != "ppi":
        return
    path = ex.path("audit_lock")
    if not path.exists():
        return
    lock = io.read_json(path)
    audit.check_lock(lock, path=path, fix=ppi_lock_fix(ex))
    verify_locked_draw(ex, lock, path=path)
    if lock.get("round") == ex.params.grading.round:
        check_sample_lock(ex, lock, path=path)
    else:
        refuse_new_seed(ex, lock, path=path)


def locked_audit(ex: Experiment) -> tuple[pd.DataFrame, dict, bool]:
    """The audit sample for ``grading.round``: the committed lock's, or a new draw (then locked).

    Returns
    -------
    (table, lock, drawn)
        As :func:`relgrade.protocol.audit.audit_for_round`; when ``drawn`` the new lock has
        been written to ``paths.audit_lock``, otherwise the lock file is left untouched.

    Raises
    ------
    InputError
        The lock was edited by hand or is malformed (with the fix); an input is missing; in
        ppi mode, the locked queries are not the draw the lock's design gives
        (:func:`verify_locked_draw`), params would move the locked sample after grading
        began (:func:`check_sample_lock`), a sample would be drawn while any grader has a
        record of the round (:func:`refuse_draw_after_model`: a deleted lock is this case),
        a later round's sample would be drawn with another seed than the recorded one after
        an earlier round was graded (:func:`refuse_new_seed`), or params give a sample too
        small for the ppi stage when one is drawn (:func:`check_sample_size`). In ppi mode
        a change of those params before any grade of the round draws the sample again, and
        a new ppi lock records the sha256 of the pooled query ids it was drawn from
        (``pooled_sha256``).
    """
    path = ex.path("audit_lock")
    lock = io.read_json(path) if path.exists() else None
    ppi = ex.params.grading.mode == "ppi"
    if lock is not None and ppi:
        audit.check_lock(lock, path=path, fix=ppi_lock_fix(ex))
        verify_locked_draw(ex, lock, path=path)
        if lock.get("round") == ex.params.grading.round \
                and not check_sample_lock(ex, lock, path=path):
            lock = None  # params moved the sample before anything was graded: draw again
    if ppi and (lock is None or lock.get("round") != ex.params.grading.round):
        refuse_draw_after_model(ex, lock, path=path)
        refuse_new_seed(ex, lock, path=path)
    table, lock, drawn = audit.audit_for_round(
        lock, lambda: draw_audit(ex),
        round=ex.params.grading.round, pool_version=_pool_version(ex), path=path,
        pooled=(lambda: audit.pooled_sha256(pooled_ids(ex))) if ppi else None)
    if drawn:
        io.write_json(path, lock)
    return table, lock, drawn


def ppi_lock_fix(ex: Experiment) -> str:
    """What to do about a ppi lock that fails :func:`relgrade.protocol.audit.check_lock`.

    Restore it from git, or start a new round, since ``relgrade audit redraw`` is refused in
    ppi mode once the model grader has graded.

    Parameters
    ----------
    ex : Experiment
        In ppi mode (params ``grading.round``).

    Returns
    -------
    str
        The fix sentence of the refusal, ``FILE`` standing for the lock's path (the caller
        puts it in).
    """
    rnd = ex.params.grading.round
    return ("Restore the lock from git (`git checkout -- FILE`): in ppi mode `relgrade audit "
            "redraw` is refused once the model grader has grades of the round; a new sample "
            f"is a new round (set grading.round: {rnd + 1}, whose sample is drawn before the "
            "model grades that round)")


def refuse_draw_after_model(ex: Experiment, lock: dict | None, *, path) -> None:
    """Refuse to draw a ppi human sample once any grader has graded the round.

    What records that grades were seen is a grade file of the round
    (``paths.grades_in``/GRADER/round-R.jsonl, committed with git), and the file's bank
    sidecar (``round-R.bank.jsonl``) when the grade file was deleted or emptied: the lock can
    be deleted, dvc.lock's outs and the audit table are rewritten by the stage itself, and
    neither says which grades were seen. So a draw is refused whenever such a file of any
    grader folder (the model's, the human grader's, one whose name params no longer give)
    holds a line, whether the lock is missing, of another round, or was never written; and
    with those gone, when a ``round-R.meta.json`` (written as a grader starts the round)
    exists, or git's history holds a grade file of the round with content
    (:func:`round_graded`).

    Parameters
    ----------
    ex : Experiment
        In ppi mode.
    lock : dict or None
        The lock found (checked), or None when there is none.
    path : str or Path
        The lock file, named in the message.

    Raises
    ------
    InputError
        A grader folder has at least one grade row in its file of ``grading.round`` (or,
        without one, in its bank sidecar), or its meta file of the round, or a grade file of
        the round was committed with content: one line naming the lock, the record and
        what it holds, and how to go on (restore the lock from git, or start a new
        ``grading.round``). Nothing is written.
    """
    model, rnd = ex.params.grading.key_grader, ex.params.grading.round
    seen = round_graded(ex)
    if seen is None:
        return
    grader, what = seen
    whose = "the model's grades" if grader == model else "grades of the round"
    found = (f"no lock of round {rnd}" if lock is None
             else f"a lock of round {lock.get('round')}, not of round {rnd}")
    raise InputError(
        f"the human sample cannot be drawn now: {grader_named(ex, grader)} {what}, and a "
        f"sample drawn after {whose} are seen gives no valid PPI++ estimate",
        path=path, found=found,
        fix=f"Restore the round's lock from git (`git checkout -- {path}`; if its deletion "
            f"was committed, from the commit before it: `git log -- {path}`), or start a new "
            f"round honestly: set grading.round: {rnd + 1}, whose sample is drawn before "
            f"{model} grades that round (round {rnd}'s grades stay in git)")


def check_sample_size(ex: Experiment) -> None:
    """Refuse params whose human sample would hold fewer queries than the ppi stage needs.

    The rule of ``relgrade init``
    (:func:`relgrade.pipeline.scaffold.human_sample_size`): ``round(ppi.human_fraction ×
    N)`` or ``ppi.human_queries``, with ``N`` the pooled queries, must be at least
    :data:`relgrade.evaluation.ppi.MIN_SAMPLE` and at most ``N``. Checked before a
    sample is drawn (:func:`draw_human_sample`), so a sample too small is never locked.

    Raises
    ------
    InputError
        Naming the params file and the key, what it gives on the pool, and the fix.
    """
    cfg = ex.params.need("ppi")
    provenance = io.read_table(ex.path("provenance"), columns=["query_id"])
    n = len(set(provenance["query_id"].astype(str)))
    if cfg.human_queries is not None:
        size, key, said = int(cfg.human_queries), "ppi.human_queries", str(cfg.human_queries)
    else:
        size = int(round(cfg.human_fraction * n))
        key, said = "ppi.human_fraction", f"{cfg.human_fraction:g} of {n} pooled queries = {size}"
    if size < MIN_SAMPLE:
        raise InputError(
            f"the human sample needs at least {MIN_SAMPLE} queries (the ppi stage's "
            "intervals and rank-sets need them)", path=ex.params.source, item=key, found=said,
            fix=f"Raise it (the pool has {n} queries) before the audit stage draws the sample")
    if size > n:
        raise InputError("the human sample cannot hold more queries than the pool has",
                         path=ex.params.source, item=key,
                         found=f"{said}, of {n} pooled queries",
                         fix=f"Give at most {n}")


def auditor_has_grades(ex: Experiment) -> bool:
    """Whether the auditor (``grading.auditor``) has any grade row in the current round's file."""
    auditor = ex.params.grading.auditor
    if not auditor:
        return False
    f = ex.grader_files(auditor).grades
    return f.exists() and any(line.strip() for line in io.read_lines(f))


def redraw_audit(ex: Experiment, *, force: bool = False) -> tuple[dict, dict | None]:
    """Draw the audit sample of ``grading.round`` again from the current pool and lock it.

    Parameters
    ----------
    ex : Experiment
    force : bool, default False
        Redraw even though the auditor has grades of this round.

    Returns
    -------
    (new, old) : tuple
        The new lock, and the one it replaced (None when there was none or it was
        unreadable).

    Raises
    ------
    ProtocolError
        In ppi mode, anything records that a grader other than the auditor (the model,
        under any name) graded this round (:func:`round_graded`), whatever ``force``: a human sample drawn after the model's grades are seen gives no valid
        prediction-powered estimate. The auditor already has grades of this round and
        ``force`` is False: the protocol
        draws the sample before grading, so a sample redrawn after the auditor has seen some
        of its queries is no longer blind to that grading; and grades of queries that leave
        the sample stop counting toward the audit.
    """
    auditor = ex.params.grading.auditor
    graded = round_graded(ex, skip=(auditor,) if auditor else ()) \
        if ex.params.grading.mode == "ppi" else None
    if graded:  # no --force: a human sample drawn after the judge is seen is not valid
        model, rnd = ex.params.grading.key_grader, ex.params.grading.round
        raise ProtocolError(
            f"{ex.path('audit_lock')}: the human sample is locked: "
            f"{grader_named(ex, graded[0])} {graded[1]}, and a "
            "sample drawn after the model's grades are seen gives no valid PPI++ estimate "
            "(--force does not apply). Keep the sample, or start a new round honestly: set "
            f"grading.round: {rnd + 1}, whose sample is drawn before {model} grades that "
            f"round (round {rnd}'s grades and lock stay in git)")
    if auditor_has_grades(ex) and not force:
        raise ProtocolError(
            f"{ex.grader_files(auditor).grades}: {auditor} already has grades for round "
            f"{ex.params.grading.round}; the audit sample is drawn before grading, and a "
            "redraw now would choose queries after the audit has begun. Start a new "
            "grading.round (which draws a new sample), or pass --force to redraw anyway "
            "(grades of queries that leave the sample no longer count toward the audit)")
    path = ex.path("audit_lock")
    try:
        old = io.read_json(path) if path.exists() else None
        if old is not None:
            audit.check_lock(old, path=path)
    except InputError:
        old = None
    ppi = ex.params.grading.mode == "ppi"
    if ppi:
        refuse_new_seed(ex, old, path=path)
    new = audit.lock_audit(draw_audit(ex), round=ex.params.grading.round,
                           pool_version=_pool_version(ex),
                           pooled=audit.pooled_sha256(pooled_ids(ex)) if ppi else None)
    io.write_json(path, new)
    return new, old


def _retired_in_lock(ex, table) -> None:
    """Pending work when the locked audit sample holds queries a query-set refresh retired
    (the sample manifest's ``refresh.retired``): they can no longer be audited."""
    if not getattr(ex.params.paths, "sample_manifest", None) \
            or not ex.path("sample_manifest").exists():
        return
    block = io.read_json(ex.path("sample_manifest")).get("refresh") or {}
    gone = sorted(set(table["query_id"].astype(str)) & set(block.get("retired") or []))
    if gone:
        raise PendingWork(f"audit: the locked audit sample holds {len(gone)} quer"
                          f"{'y' if len(gone) == 1 else 'ies'} the query-set refresh retired "
                          f"({', '.join(gone)}); run `{redraw_command(ex)}` to draw it from "
                          "the current pool")


def run(ex):
    table, lock, drawn = locked_audit(ex)
    _retired_in_lock(ex, table)
    write_jsonl(ex.path("audit"), table.to_dict(orient="records"))
    how = "drawn now" if drawn else "locked"
    print(f"audit: {len(table)} queries for round {lock['round']}, {how} (from pool "
          f"{lock['pool_version']}, lock sha256 {lock['sha256'][:12]})"
          f"{_ppi_note(ex, lock) if not drawn else ''}")
    if ex.params.grading.stop != "none":
        _start_stop_record(ex)


def _ppi_note(ex, lock) -> str:
    """What the stage's line adds about a kept ppi lock: params that draw the same sample in
    other words, and a draw that could not be checked (the pooled queries changed since)."""
    if ex.params.grading.mode != "ppi" or lock.get("round") != ex.params.grading.round:
        return ""
    notes = []
    locked = locked_design(lock)
    if locked is not None and locked != sample_design(ex):
        notes.append(f"params draw the same sample ({sample_design(ex)}; the lock keeps "
                     f"{locked})")
    if locked is not None and not verify_locked_draw(ex, lock, path=ex.path("audit_lock")):
        notes.append("the draw cannot be checked: the pooled queries changed since it was "
                     "drawn")
    return "".join(f"; {n}" for n in notes)


def _start_stop_record(ex) -> None:
    """Write the stopping rule's record of this round's sample when the file holds none, or
    one with no look that params no longer give (a record of the same sample with its looks
    is kept as it is); then the queries the rule reads now beside it
    (:meth:`~relgrade.experiment.files.Experiment.write_stop_reads`), each file only when its
    content changes."""
    record = ex.stop_record()
    path = ex.path("stop")
    if not path.is_file() or io.read_json(path) != record:
        io.write_json(path, record)
    reads = ex.write_stop_reads(record)
    graded = ex.stop_graded(record["order"])
    owed = [q for q in reads if q not in graded]
    print(f"audit: people grade the sample in a seeded order (seed {record['seed']}, stream "
          f"{record['stream']}), {ex.params.grading.stop_batch} queries a batch; the rule "
          f"reads the first {len(reads)} of {record['sample']} now, people owe {len(owed)} "
          f"of them ({len(graded)} of the sample graded)")

