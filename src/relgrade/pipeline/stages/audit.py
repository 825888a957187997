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
``ppi.human_queries``, seed derived from ``seed`` and ``"ppi-sample"``), not the
provenance-balanced draw; each locked row's ``reason`` names the design, so the lock records it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from relgrade.errors import InputError, PendingWork, ProtocolError
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import redraw_command, top_path
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
                             count=cfg.human_queries, rng=stage_rng(seed, PPI_SAMPLE_STREAM))
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


def sample_design(ex: Experiment) -> str:
    """What fixes the human sample in params, in the words its lock's ``reason`` records.

    Returns
    -------
    str
        ``"share F; seed S, stream ppi-sample"`` (``ppi.human_fraction``) or ``"count N;
        seed S, stream ppi-sample"`` (``ppi.human_queries``), with params ``seed``.
    """
    cfg, seed = ex.params.need("ppi"), ex.params.need("seed")
    size = (f"share {cfg.human_fraction:g}" if cfg.human_fraction is not None
            else f"count {cfg.human_queries}")
    return f"{size}; seed {seed}, stream {PPI_SAMPLE_STREAM}"


#: The design words at the end of a ppi lock row's ``reason``.
_LOCKED_DESIGN = re.compile(r"\(((?:share|count) [^;()]+; seed [^,()]+, stream [^()]+)\)$")


def locked_design(lock: dict) -> str | None:
    """The design a ppi lock was drawn with (:func:`sample_design`'s words), or None when the
    lock was not drawn as a ppi human sample."""
    rows = lock.get("queries") or []
    found = _LOCKED_DESIGN.search(str(rows[0].get("reason", ""))) if rows else None
    return found.group(1) if found else None


def key_grader_grades(ex: Experiment) -> int:
    """How many grade rows the key grader (``grading.key_grader``) has in the current round's
    file (0 without a file or a key grader)."""
    grader = ex.params.grading.key_grader
    if not grader:
        return 0
    f = ex.grader_files(grader).grades
    return sum(1 for line in io.read_lines(f) if line.strip()) if f.exists() else 0


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
        ones the lock records, or the lock records none (drawn before they were recorded);
        False when they differ and neither grader has a grade of the round yet (the caller
        then draws the sample again: nothing was seen).

    Raises
    ------
    InputError
        Params differ from the lock's and the key grader (the model) or the auditor has
        grades of the round: one line naming the lock, what is recorded, and how to go on
        (restore the params, or start a new ``grading.round``, which draws its sample before
        the model grades it; nothing recorded is lost).
    """
    if ex.params.grading.mode != "ppi":
        return True
    locked, now = locked_design(lock), sample_design(ex)
    if locked is None or locked == now:
        return True
    model, auditor = ex.params.grading.key_grader, ex.params.grading.auditor
    graded = key_grader_grades(ex)
    rnd = ex.params.grading.round
    if graded:
        what = f"{model} (the model grader) has {graded} grades of round {rnd}"
    elif auditor_has_grades(ex):
        what = f"{auditor} (the human grader) has grades of round {rnd}"
    else:
        return False
    raise InputError(
        f"the human sample is locked: {what}, and params would move the sample",
        path=path, found=f"locked with {locked}; params now give {now}",
        fix=f"Restore seed and ppi.human_fraction/ppi.human_queries to the locked values, or "
            f"start a new round honestly: set grading.round: {rnd + 1} (its sample is drawn "
            f"before {model} grades that round; round {rnd}'s grades and lock stay in git)")


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
        return audit.choose_audit(
            io.read_table(ex.path("provenance")),
            io.read_table(ex.path("queries"), columns=["query_id", "group"]),
            fraction=cfg.fraction, min_queries=cfg.min_queries,
            rng=stage_rng(ex.params.need("seed"), "audit"))
    except InputError as e:
        if e.path is not None or not str(e.item).startswith("audit."):
            raise
        # a size the pool cannot meet: the line to change is in the params file (named as
        # loaded; the stage's runner names it from the repository's top)
        raise InputError(e.rule, path=ex.params.source, item=e.item, found=e.found,
                         fix=e.fix) from None


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
        The lock was edited by hand or is malformed; params would move the locked sample
        and the model grader or the human grader has grades of the round.
    """
    if ex.params.grading.mode != "ppi":
        return
    path = ex.path("audit_lock")
    if not path.exists():
        return
    lock = io.read_json(path)
    audit.check_lock(lock, path=path, fix=ppi_lock_fix(ex))
    if lock.get("round") == ex.params.grading.round:
        check_sample_lock(ex, lock, path=path)


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
        ppi mode, params would move the locked sample after grading began
        (:func:`check_sample_lock`), a sample would be drawn while the model grader has
        grades of the round (:func:`refuse_draw_after_model`: a deleted lock is this case),
        or params give a sample too small for the ppi stage when one is drawn
        (:func:`check_sample_size`). In ppi mode a change of those params before any grade
        of the round draws the sample again.
    """
    path = ex.path("audit_lock")
    lock = io.read_json(path) if path.exists() else None
    ppi = ex.params.grading.mode == "ppi"
    if lock is not None and ppi:
        audit.check_lock(lock, path=path, fix=ppi_lock_fix(ex))
        if lock.get("round") == ex.params.grading.round \
                and not check_sample_lock(ex, lock, path=path):
            lock = None  # params moved the sample before anything was graded: draw again
    if ppi and (lock is None or lock.get("round") != ex.params.grading.round):
        refuse_draw_after_model(ex, lock, path=path)
    table, lock, drawn = audit.audit_for_round(
        lock, lambda: draw_audit(ex),
        round=ex.params.grading.round, pool_version=_pool_version(ex), path=path)
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


def model_graded(ex: Experiment) -> str | None:
    """What records that the key grader (the model, in ppi mode) graded ``grading.round``.

    In order: its grade file's rows; the file's bank sidecar (the grade file deleted or
    emptied); the round's ``round-R.meta.json`` (written as the grader starts the round);
    git's history of the grade file with content.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (params ``grading.key_grader``, ``grading.round``; the key grader's
        files under ``paths.grades_in``).

    Returns
    -------
    str or None
        The words for a message ("has 24 grades of round 1 in FILE", "started grading round
        1 (FILE exists)", "has grades of round 1 in FILE as committed in COMMIT (deleted
        since)"); None when nothing records a grade.
    """
    model, rnd = ex.params.grading.key_grader, ex.params.grading.round
    files = ex.grader_files(model)
    graded, record = key_grader_grades(ex), files.grades

    def named(path) -> str:  # as typed at the repository's top, whatever the working folder
        return top_path(ex, os.path.relpath(path, ex.root))

    if not graded and files.bank.is_file():
        # the grade file gone or emptied: its bank sidecar still records what was graded
        graded = sum(1 for line in io.read_lines(files.bank) if line.strip())
        record = files.bank
    if graded:
        return f"has {graded} grades of round {rnd} in {named(record)}"
    if files.meta.is_file():
        return f"started grading round {rnd} ({named(files.meta)} exists)"
    commit = githistory.last_nonempty_commit(files.grades)
    if commit is None:
        return None
    return (f"has grades of round {rnd} in {named(files.grades)} as committed in "
            f"{commit[:12]} (deleted since)")


def refuse_draw_after_model(ex: Experiment, lock: dict | None, *, path) -> None:
    """Refuse to draw a ppi human sample once the model grader has graded the round.

    What records that the model's grades were seen is its grade file of the round
    (``paths.grades_in``/GRADER/round-R.jsonl, committed with git), and the file's bank
    sidecar (``round-R.bank.jsonl``) when the grade file was deleted or emptied: the lock can
    be deleted, dvc.lock's outs and the audit table are rewritten by the stage itself, and
    neither says which grades were seen. So a draw is refused whenever either file holds a
    line, whether the lock is missing, of another round, or was never written; and with both
    gone, when the round's ``round-R.meta.json`` (written as the grader starts the round)
    exists, or git's history holds the grade file with content.

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
        ``grading.key_grader`` has at least one grade row in its file of ``grading.round``
        (or, without one, in its bank sidecar), or has its meta file of the round, or its
        grade file was committed with content: one line naming the lock, the record and
        what it holds, and how to go on (restore the lock from git, or start a new
        ``grading.round``). Nothing is written.
    """
    model, rnd = ex.params.grading.key_grader, ex.params.grading.round
    what = model_graded(ex)
    if what is None:
        return
    found = (f"no lock of round {rnd}" if lock is None
             else f"a lock of round {lock.get('round')}, not of round {rnd}")
    raise InputError(
        f"the human sample cannot be drawn now: {model} (the model grader) {what}, and a "
        "sample drawn after the model's grades are seen gives no valid PPI++ estimate",
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
        In ppi mode, anything records that the key grader (the model) graded this round
        (:func:`model_graded`), whatever ``force``: a human sample drawn after the model's grades are seen gives no valid
        prediction-powered estimate. The auditor already has grades of this round and
        ``force`` is False: the protocol
        draws the sample before grading, so a sample redrawn after the auditor has seen some
        of its queries is no longer blind to that grading; and grades of queries that leave
        the sample stop counting toward the audit.
    """
    auditor = ex.params.grading.auditor
    graded = model_graded(ex) if ex.params.grading.mode == "ppi" else None
    if graded:  # no --force: a human sample drawn after the judge is seen is not valid
        model, rnd = ex.params.grading.key_grader, ex.params.grading.round
        raise ProtocolError(
            f"{ex.path('audit_lock')}: the human sample is locked: {model} (the model grader) "
            f"{graded}, and a "
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
    new = audit.lock_audit(draw_audit(ex), round=ex.params.grading.round,
                           pool_version=_pool_version(ex))
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
          f"{lock['pool_version']}, lock sha256 {lock['sha256'][:12]})")
    if ex.params.grading.stop != "none":
        _start_stop_record(ex)


def _start_stop_record(ex) -> None:
    """Write the stopping rule's record of this round's sample when the file holds none, or
    one with no look that params no longer give (a record of the same sample with its looks
    is kept as it is)."""
    record = ex.stop_record()
    path = ex.path("stop")
    if not path.is_file() or io.read_json(path) != record:
        io.write_json(path, record)
    reads = ex.audit_ids() or []
    graded = ex.stop_graded(record["order"])
    owed = [q for q in reads if q not in graded]
    print(f"audit: people grade the sample in a seeded order (seed {record['seed']}, stream "
          f"{record['stream']}), {ex.params.grading.stop_batch} queries a batch; the rule "
          f"reads the first {len(reads)} of {record['sample']} now, people owe {len(owed)} "
          f"of them ({len(graded)} of the sample graded)")

