"""Judgments shared across experiments: another experiment's bank as a source of grades.

An experiment may name other experiments of the repository in params ``grading.share_from``
(folders relative to its own). Each source's grades are read in place, through the
source's own params (its ``paths.grades_in``, every round's grade files and bank sidecars),
and a source's grade counts here for the grader of the same name when it is **current
here**: made on the same chunk content, intent line and rubric (version and file bytes) as
this experiment shows now (:func:`relgrade.protocol.bank.currency`). Grades of pairs outside
this pool are ignored. This experiment's own current grade of a pair wins over a shared one;
of several sources, the first listed wins. Shared grades are never copied into this
experiment's grade files; only the remainder is pending.

A source must be an experiment of the same repository (named relative to this one, resolving
inside the repository's working tree with symlinks followed; never an absolute path), not this
experiment, and built from the same corpus version (its corpus manifest's ``sha256`` equals this one's).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import share_source
from relgrade.experiment.params import PARAMS_FILE
from relgrade.io import files as io
from relgrade.protocol import bank, grades

#: The ``origin`` of a grade this experiment holds itself.
OWN = ""


def _item(entry: str) -> str:
    return f"grading.share_from: {entry}"


def sources(ex: Experiment) -> list[tuple[str, Experiment]]:
    """The experiments ``ex`` shares grades from, checked (over the same corpus version too).

    Returns and raises as :func:`source_folders`; besides, an InputError when a source was
    built from another corpus version (its corpus manifest's ``sha256`` differs from this
    experiment's: both are named), or has no corpus manifest (``dvc repro`` has not built
    its corpus).
    """
    found = source_folders(ex)
    for entry, source in found:
        _same_corpus(ex, source, entry)
    return found


def source_folders(ex: Experiment) -> list[tuple[str, Experiment]]:
    """The experiments ``ex`` names in params ``grading.share_from``, as folders.

    Parameters
    ----------
    ex : Experiment
        The experiment whose params ``grading.share_from`` name the sources.

    Returns
    -------
    list of (str, Experiment)
        Each entry as written in params, with the source experiment (its root under
        ``ex.root``), in the order listed; empty when nothing is shared.

    Raises
    ------
    InputError
        An entry is an absolute path, resolves (symlinks followed) outside the repository's
        working tree or is not one of its experiments
        (:func:`relgrade.experiment.layout.share_source`); is not an experiment folder (no
        ``params.yaml`` in it), is this experiment itself, or is listed twice; a source's
        params file is invalid.
    """
    out: list[tuple[str, Experiment]] = []
    here = ex.root.resolve()
    seen = set()
    for entry in ex.params.grading.share_from:
        share_source(entry, ex.root, item=_item(entry), source=ex.params.source)
        folder = ex.root / entry
        if not (folder / PARAMS_FILE).is_file():
            raise InputError("a share source is not an experiment folder (it holds no "
                             "params.yaml)", path=ex.params.source, item=_item(entry),
                             found=f"no {(folder / PARAMS_FILE).as_posix()}",
                             fix="Name another experiment's folder, relative to this one "
                                 "(e.g. ../other, or ../.. for the repository's top experiment)")
        if folder.resolve() == here:
            raise InputError("a share source is this experiment itself", path=ex.params.source,
                             item=_item(entry), fix="Name another experiment's folder")
        if folder.resolve() in seen:
            raise InputError("a share source is listed twice", path=ex.params.source,
                             item=_item(entry), fix="List each source once")
        seen.add(folder.resolve())
        out.append((entry, Experiment.load(folder / PARAMS_FILE)))
    return out


def _same_corpus(ex: Experiment, source: Experiment, entry: str) -> None:
    """Refuse a source built from another corpus version than ``ex``."""
    mine, theirs = ex.path("corpus_manifest"), source.path("corpus_manifest")
    if not theirs.exists():
        raise InputError("a share source has no corpus manifest yet", path=ex.params.source,
                         item=_item(entry), found=f"no {theirs.as_posix()}",
                         fix=f"Run `dvc repro {(source.root / 'dvc.yaml').as_posix()}:corpus` "
                             "first")
    if not mine.exists():  # nothing to compare with before this corpus is built
        return
    a, b = io.read_json(mine).get("sha256"), io.read_json(theirs).get("sha256")
    if a != b:
        raise InputError("a share source was built from another corpus version",
                         path=ex.params.source, item=_item(entry),
                         found=f"{theirs.as_posix()} sha256 {b}, {mine.as_posix()} sha256 {a}",
                         fix="Share only between experiments over the same corpus version")


def source_bank(source: Experiment, graders) -> pd.DataFrame:
    """Every grade in ``source``'s bank of the graders named, every round, as it holds them.

    Parameters
    ----------
    source : Experiment
        The source experiment.
    graders : iterable of str
        The grader names this experiment knows; the source's other graders are not read.

    Returns
    -------
    pandas.DataFrame
        :func:`relgrade.protocol.grades.judgment_bank`'s table (:data:`relgrade.schema.BANK`
        plus ``sequence``), validated under the source's params.

    Raises
    ------
    InputError
        A source grade file or its sidecar breaks a rule of
        :func:`relgrade.protocol.grades.judgment_bank`.
    """
    wanted = set(graders) & set(source.params.graders_dict())
    by_grader: dict[str, list] = {}
    for r in range(1, int(source.params.grading.round) + 1):
        for name, f in source.grader_round_files(r).items():
            if name in wanted:
                by_grader.setdefault(name, []).append(source.grader_file(f))
    g = source.params.grading
    return grades.judgment_bank(by_grader, graders=source.params.graders_dict(),
                                scale=source.params.need("scale").grades,
                                max_reason_words=g.max_reason_words,
                                max_reason_chars=g.max_reason_chars)


def reuse(own: pd.DataFrame, shared, *, graders, pool: pd.DataFrame, content: pd.Series,
          intents: pd.Series, rubric_sha256: str,
          rubric_version: str | None = None, carry=None) -> pd.DataFrame:
    """The shared grades that count here: current, of a grader here, of a pool pair, not owned.

    Parameters
    ----------
    own : pandas.DataFrame
        This experiment's bank (:data:`relgrade.schema.BANK`, at least ``grader`` and the
        columns of :func:`relgrade.protocol.bank.currency`).
    shared : sequence of (str, pandas.DataFrame)
        Per source, in priority order: its name (the ``origin`` recorded) and its bank.
    graders : iterable of str
        The graders of this experiment; a source's grade counts for the grader of its name.
    pool : pandas.DataFrame
        This experiment's pool (``query_id``, ``chunk_id``).
    content, intents, rubric_sha256, rubric_version, carry
        What this experiment shows now (as for :func:`relgrade.protocol.bank.currency`).

    Returns
    -------
    pandas.DataFrame
        The reused rows of the sources' banks (their columns plus ``origin``, str), at most
        one per (grader, query_id, chunk_id): a source grade is kept when it is current
        here, its grader is one of ``graders``, its pair is in ``pool``, no earlier source
        gave the pair a current grade of that grader, and ``own`` holds no current grade of
        that grader and pair (a stale own grade does not block a current shared one).
        Rows in source order, then bank order.
    """
    now = dict(content=content, intents=intents, rubric_sha256=rubric_sha256,
               rubric_version=rubric_version, carry=carry)
    names = {str(g) for g in graders}
    pairs = grades.pool_pairs_of(pool)
    mine = bank.current_grades(own, **now)
    taken = set(zip(mine["grader"].astype(str), mine["query_id"].astype(str),
                    mine["chunk_id"].astype(str)))
    parts = []
    for origin, table in shared:
        if not len(table):
            continue
        current = bank.current_grades(table, **now)
        keep = [g in names and (q, c) in pairs and (g, q, c) not in taken
                for g, q, c in zip(current["grader"].astype(str),
                                   current["query_id"].astype(str),
                                   current["chunk_id"].astype(str))]
        part = current[pd.Series(keep, index=current.index, dtype=bool)].assign(origin=origin)
        taken |= set(zip(part["grader"].astype(str), part["query_id"].astype(str),
                         part["chunk_id"].astype(str)))
        parts.append(part)
    if not parts:
        return own.iloc[0:0].assign(origin=pd.Series([], dtype="str"))
    return pd.concat(parts, ignore_index=True)


def shared_grades(ex: Experiment, own: pd.DataFrame, pool: pd.DataFrame, *,
                  now: dict) -> pd.DataFrame | None:
    """The grades ``ex`` reuses from its sources (:func:`reuse` over :func:`sources`).

    Returns
    -------
    pandas.DataFrame or None
        As :func:`reuse`; None when params ``grading.share_from`` is empty.

    Raises
    ------
    InputError
        As :func:`sources` and :func:`source_bank`.
    """
    found = sources(ex)
    if not found:
        return None
    names = list(ex.params.graders_dict())
    return reuse(own, [(entry, source_bank(src, names)) for entry, src in found],
                 graders=names, pool=pool, **now)


def shared_counts(table: pd.DataFrame) -> dict:
    """Per source and grader, how many pairs of a grades table came from that source.

    Parameters
    ----------
    table : pandas.DataFrame
        A grades table with an ``origin`` column (:data:`OWN` for this experiment's grades).

    Returns
    -------
    dict
        ``{origin: {grader: int}}``, sources and graders in name order; own rows are not
        counted.
    """
    out: dict = {}
    theirs = table[table["origin"].astype(str) != OWN]
    for (origin, grader), rows in theirs.groupby(["origin", "grader"], sort=True):
        out.setdefault(str(origin), {})[str(grader)] = int(len(rows))
    return out


def expected_deps(ex: Experiment) -> list[str]:
    """The ``dvc.yaml`` dep on each source's grade files, relative to ``ex``'s folder.

    Returns
    -------
    list of str
        Per source, ``ENTRY/GRADES_IN`` normalised (``../other/data/grades``): what the
        stages reading grades (``packets``, ``grades``) must depend on for DVC to rerun them
        when a source's grades change.
    """
    return [Path(os.path.normpath(Path(entry) / src.params.paths.grades_in)).as_posix()
            for entry, src in source_folders(ex)]


def missing_deps(ex: Experiment, pipeline) -> list[dict]:
    """Where the experiment's ``dvc.yaml`` lacks a dep on a share source's grades.

    Parameters
    ----------
    ex : Experiment
        The experiment.
    pipeline : mapping
        Its ``dvc.yaml`` as read.

    Returns
    -------
    list of dict
        One ``{"stage", "dep"}`` per stage of ``packets`` and ``grades`` (those present)
        without the dep :func:`expected_deps` names; empty when all are there.
    """
    out = []
    stages = pipeline.get("stages") or {}
    for dep in expected_deps(ex):
        for name in ("packets", "grades"):
            stage = stages.get(name)
            if not isinstance(stage, dict):
                continue
            have = {Path(os.path.normpath(str(d))).as_posix() for d in stage.get("deps") or []}
            if dep not in have:
                out.append({"stage": name, "dep": dep})
    return out

