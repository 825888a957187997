"""Adding and removing an arm of an experiment: params, pipeline and the price of the change.

``relgrade arm add`` and ``relgrade arm remove`` edit the params ``arms`` section
(:func:`relgrade.experiment.sections.write_section`: that section's lines only), render the
experiment's ``dvc.yaml`` from the stage registry (so a fused arm depends on every external
run it fuses) and keep the runs folder's ``.gitignore`` in step. When the experiment's pool
exists, the new arm's run is made in memory and the pool it would give is priced
(:func:`relgrade.pipeline.cost.plan_pool`): the pairs it adds and the judgments each grader
would owe, in annotator-hours. Nothing is written when the arm or the params are refused.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import check_name, find_repository
from relgrade.experiment.params import PARAMS_FILE
from relgrade.experiment.sections import drop_section, write_section
from relgrade.io.files import read_table, write_text
from relgrade.io.runs import read_run, run_lines
from relgrade.pipeline.registry import render
from relgrade.ranking import validate_run

#: The library file each computed arm kind is ranked by (its ``source``).
BUILT_IN = {"bm25": "src/relgrade/retrieve/bm25.py", "bm25f": "src/relgrade/retrieve/bm25f.py",
            "tfidf": "src/relgrade/retrieve/tfidf.py",
            "rrf": "src/relgrade/retrieve/fusion.py", "embed": "src/relgrade/retrieve/embed.py"}
#: Depth of a new arm's run.
ARM_DEPTH = 100


def _root_rel(ex: Experiment) -> str:
    rel = Path(os.path.relpath(find_repository(ex.root), ex.root.resolve())).as_posix()
    return "" if rel == "." else f"{rel}/"


def arm_spec(ex: Experiment, name: str, *, kind: str | None, run: Path | None,
             fuse: list[str] | None, depth: int = ARM_DEPTH) -> dict:
    """The params entry of a new arm ``name``.

    Parameters
    ----------
    ex : Experiment
        The experiment it joins.
    name : str
        The arm's name: one path segment of letters, digits, ``.``, ``_``, ``-``.
    kind : {"bm25", "bm25f", "tfidf", "rrf", "embed"} or None
        A computed arm; None with ``run``.
    run : pathlib.Path or None
        An external run (TREC, JSONL or Parquet): a ``file`` arm whose run is copied to
        ``data/input/runs/NAME.EXT``.
    fuse : list of str or None
        For an rrf arm, the arms it fuses (default: every arm of the experiment).
    depth : int, default 100
        The run's depth.

    Returns
    -------
    dict
        ``{"kind", "depth", ["k", "fuse"], "source"}`` as ``relgrade init`` writes an arm.

    Raises
    ------
    InputError
        The name is invalid or taken; neither or both of ``kind`` and ``run``; an unknown
        kind; ``fuse`` without rrf, or naming an arm that is not there; the run is missing.
    """
    arms = ex.params.arms_dict()
    try:
        check_name(name)
    except InputError:
        raise InputError("an arm name starts with a letter or digit and holds only letters, "
                         "digits, '.', '_' and '-'", item="NAME", found=repr(name)) from None
    if name in arms:
        raise InputError("the experiment already has this arm", path=ex.params.source,
                         item=f"arms.{name}", fix=f"Choose another name, or `relgrade arm "
                                                  f"remove {name}` first")
    if (kind is None) == (run is None):
        raise InputError("give --kind KIND or --run FILE (one of them)", item=name)
    if fuse and kind != "rrf":
        raise InputError("--fuse is for an rrf arm", item=name, found=", ".join(fuse))
    if run is not None:
        if not Path(run).is_file():
            raise InputError("input file not found", path=run)
        return {"kind": "file", "depth": depth,
                "source": f"data/input/runs/{name}{Path(run).suffix.lower() or '.trec'}"}
    if kind not in BUILT_IN:
        raise InputError(f"unknown arm kind (use {', '.join(BUILT_IN)}, or --run FILE for an "
                         "external run)", item="--kind", found=repr(kind))
    spec: dict = {"kind": kind, "depth": depth}
    if kind == "rrf":
        fused = list(fuse) if fuse else list(arms)
        bad = [f for f in fused if f not in arms]
        if bad or not fused:
            raise InputError("an rrf arm fuses other arms of this experiment", item="--fuse",
                             found=", ".join(bad) or "nothing")
        spec |= {"k": 60, "fuse": fused}
    spec["source"] = f"{_root_rel(ex)}{BUILT_IN[kind]}"
    return spec


def _gitignore(ex: Experiment, name: str, *, keep: bool) -> None:
    """Add (``keep``) or drop ``/NAME.trec`` in the runs folder's ``.gitignore``."""
    path = ex.path("runs") / ".gitignore"
    lines = path.read_text("utf-8").splitlines() if path.is_file() else []
    entry = f"/{name}.trec"
    new = [x for x in lines if x != entry] + ([entry] if keep else [])
    if new != lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, "".join(f"{x}\n" for x in new))


def add_arm(ex: Experiment, name: str, *, kind: str | None = None, run: Path | None = None,
            fuse: list[str] | None = None, depth: int = ARM_DEPTH) -> Experiment:
    """Add arm ``name`` to experiment ``ex`` and render its pipeline.

    Returns
    -------
    Experiment
        The experiment as written.

    Raises
    ------
    InputError
        As :func:`arm_spec`; an external run naming a query (or chunk) the experiment does
        not have, once its queries (chunks) are made; invalid params. Nothing is written then.
    """
    spec = arm_spec(ex, name, kind=kind, run=run, fuse=fuse, depth=depth)
    if run is not None:
        _check_run(ex, run)
    arms = ex.params.arms_dict() | {name: spec}
    params_path = ex.root / PARAMS_FILE
    text = params_path.read_text("utf-8")
    params = write_section(params_path, "arms", arms)
    try:
        if run is not None:
            target = ex.file(spec["source"])
            target.parent.mkdir(parents=True, exist_ok=True)
            # the copy an earlier `arm remove` kept is added back as it is
            if not (target.exists() and target.samefile(run)):
                shutil.copyfile(run, target)
        new = Experiment(ex.root, params)
        write_text(ex.root / "dvc.yaml", render(new))
        _gitignore(new, name, keep=True)
    except BaseException:
        write_text(params_path, text)  # the params as they were: nothing half-added
        raise
    return Experiment.load(params_path)


#: Where a holes section's outputs go when params ``paths`` lacks them (as ``relgrade init``
#: writes them).
HOLES_PATHS = {"holes": "metrics/holes.json", "holes_work": "data/holes"}


def add_hole_arm(ex: Experiment, name: str, *, run: Path, depth: int = ARM_DEPTH,
                 model_grader: str | None = None, human_grader: str | None = None,
                 human_fraction: float | None = None) -> Experiment:
    """Add arm ``name`` under params ``holes.arms``: scored on the frozen key, its holes graded
    by ``holes.model_grader`` and a sample of them by people (docs/new-arm.md).

    The pool, the key and every old arm's numbers stay as they are. Without a ``holes``
    section yet, ``model_grader``, ``human_grader`` and ``human_fraction`` make it; with one,
    a value given replaces the section's. Missing ``paths.holes`` / ``paths.holes_work`` are
    added with their usual values (:data:`HOLES_PATHS`).

    Parameters
    ----------
    ex : Experiment
        The experiment (not in ppi mode).
    name : str
        The new arm's name: not an arm under ``arms`` nor under ``holes.arms``.
    run : pathlib.Path
        Its run (TREC, JSONL or Parquet), copied to ``data/input/runs/NAME.EXT``.
    depth : int, default 100
        How many chunks per query the run keeps.
    model_grader, human_grader : str, optional
        Graders declared under params ``graders``.
    human_fraction : float in (0, 1], optional
        The share of the queries with holes whose holes people grade.

    Returns
    -------
    Experiment
        The experiment as written.

    Raises
    ------
    InputError
        As :func:`arm_spec`; the name is taken under ``holes.arms``; a new section lacks one
        of the three settings; the run names a query or chunk the experiment does not have;
        the holes' folder holds grades of another grader
        (:func:`relgrade.pipeline.new_arms.check_hole_graders`); with a frozen key, the two
        holes graders graded no pair of it in common
        (:func:`relgrade.pipeline.new_arms.reference_side`), or the new arm has fewer than 3
        queries with holes or a human sample below 3 queries
        (:func:`relgrade.pipeline.new_arms.hole_plan`);
        the params are invalid (a holes section in ppi mode, an unknown grader ...). Nothing
        is written then.
    """
    spec = arm_spec(ex, name, kind=None, run=run, fuse=None, depth=depth)
    holes = ex.params.holes
    section = holes.model_dump(mode="json", exclude_defaults=True) if holes is not None else {}
    if name in section.get("arms", {}):
        raise InputError("the experiment already has this arm", path=ex.params.source,
                         item=f"holes.arms.{name}", fix="Choose another name")
    given = {"model_grader": model_grader, "human_grader": human_grader,
             "human_fraction": human_fraction}
    section |= {k: v for k, v in given.items() if v is not None}
    lacking = [k for k in given if k not in section]
    if lacking:
        raise InputError("an arm on the frozen key needs the holes' graders and sample",
                         path=ex.params.source, item="holes",
                         fix="Add " + ", ".join(f"--{k.replace('_', '-')}" for k in lacking)
                             + " (docs/new-arm.md)")
    section["arms"] = {**section.get("arms", {}), name: spec}
    _check_run(ex, run)
    params_path = ex.root / PARAMS_FILE
    text = params_path.read_text("utf-8")
    copied = None
    try:
        paths = ex.params.paths.model_dump(mode="json", exclude_none=True)
        if any(k not in paths for k in HOLES_PATHS):
            write_section(params_path, "paths", {**paths, **{k: v for k, v in
                                                             HOLES_PATHS.items()
                                                             if k not in paths}})
        params = write_section(params_path, "holes", section)
        _check_hole_graders(ex, section)  # after the params' own checks (the graders' kinds)
        target = ex.file(spec["source"])
        if not (target.exists() and target.resolve() == Path(run).resolve()):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run, target)
            copied = target
        _check_hole_plan(Experiment(ex.root, params))
        write_text(ex.root / "dvc.yaml", render(Experiment(ex.root, params)))
    except BaseException:
        write_text(params_path, text)  # the params as they were: nothing half-added
        if copied is not None:
            copied.unlink(missing_ok=True)
        raise
    return Experiment.load(params_path)


def _check_hole_graders(ex: Experiment, section: dict) -> None:
    """The holes' folder holds no other grader's grades, and with a frozen key the two holes
    graders graded some of its pairs in common (before anyone grades a hole)."""
    from relgrade.pipeline.new_arms import check_hole_graders, reference_side

    work = ex.params.paths.holes_work or HOLES_PATHS["holes_work"]
    graders = {"model_grader": section["model_grader"], "human_grader": section["human_grader"]}
    check_hole_graders(ex.root / work, **graders)
    if ex.params.paths.key and ex.path("key").is_file() and ex.path("grades").is_file():
        reference_side(ex, ex.read_key()[0], **graders)


def _check_hole_plan(ex: Experiment) -> None:
    """With a frozen key, the holes stage's own refusals now rather than at the next ``dvc
    repro``: a new arm with fewer than 3 queries with holes, or a human sample
    (``holes.human_fraction``) below 3 queries."""
    from relgrade.pipeline.new_arms import hole_plan

    if ex.path("record").exists() and ex.path("key").is_file():
        hole_plan(ex)


def _check_run(ex: Experiment, run: Path) -> None:
    """Refuse a run naming a query or chunk the experiment does not have (once made)."""
    table = read_run(run)
    queries = (read_table(ex.path("queries"), columns=["query_id"])["query_id"]
               if ex.path("queries").exists() else None)
    chunks = (read_table(ex.path("chunks"), columns=["chunk_id"])["chunk_id"]
              if ex.path("chunks").exists() else None)
    if queries is not None:
        validate_run(table, path=run, queries=queries.astype(str), lines=run_lines(run),
                     chunks=chunks.astype(str) if chunks is not None else None)


def remove_arm(ex: Experiment, name: str) -> Experiment:
    """Remove arm ``name`` from experiment ``ex``, render its pipeline and drop its run.

    The arm's run under params ``paths.runs`` (a cached output) is deleted, so the pool
    stage no longer sees it, and so are its metrics file (params ``paths.metrics``) and its
    per-query values (``paths.per_query``), so the publish stage and ``status`` no longer
    read them as an arm's; an external run's copy under ``data/input/runs/`` stays, in git.

    An arm under params ``holes.arms`` (one that joined after the key froze) leaves that
    section (the whole section with its last arm); its run file stays, in git. The holes
    stage's record and the report stage's decision files are rewritten without it at the
    next ``dvc repro``; the grades recorded in the holes folder (``paths.holes_work``) stay.

    Raises
    ------
    InputError
        The arm is not there, is the baseline (params ``metrics.baseline``), is fused by
        another arm, or is the experiment's last arm.
    """
    holes = ex.params.holes
    if holes is not None and name in holes.arms:
        return _remove_hole_arm(ex, name)
    arms = ex.params.arms_dict()
    if name not in arms:
        found = ", ".join(arms)
        if holes is not None:
            found += "; under holes.arms: " + ", ".join(holes.arms)
        raise InputError("not an arm of the experiment", path=ex.params.source,
                         item=f"arms.{name}", found=found)
    if len(arms) == 1:
        raise InputError("an experiment needs at least one arm", path=ex.params.source,
                         item=f"arms.{name}")
    baseline = ex.params.metrics.baseline if ex.params.metrics is not None else None
    if name == baseline:
        raise InputError("the arm is the baseline others are compared with",
                         path=ex.params.source, item="metrics.baseline", found=name,
                         fix="Set metrics.baseline to another arm first")
    fusing = sorted(a for a, c in arms.items() if name in (c.get("fuse") or []))
    if fusing:
        raise InputError("the arm is fused by other arms", path=ex.params.source,
                         item=f"arms.{name}", found=", ".join(fusing),
                         fix="Remove those arms, or the arm from their `fuse`, first")
    params_path = ex.root / PARAMS_FILE
    params = write_section(params_path, "arms", {a: c for a, c in arms.items() if a != name})
    new = Experiment(ex.root, params)
    write_text(ex.root / "dvc.yaml", render(new))
    _gitignore(new, name, keep=False)
    # the arm's own outputs go with its stages: a metrics file left behind would be read
    # as an arm's metrics computed from an older key
    for made in (ex.path("runs") / f"{name}.trec", ex.path("metrics") / f"{name}.json",
                 *([ex.path("per_query") / f"{name}.parquet"]
                   if getattr(ex.params.paths, "per_query", None) else [])):
        if made.is_file():
            made.unlink()
    return Experiment.load(params_path)


def _remove_hole_arm(ex: Experiment, name: str) -> Experiment:
    """Remove ``name`` from params ``holes.arms`` (the section with its last arm, and then the
    holes' record ``paths.holes``, which no stage would rewrite), render."""
    params_path = ex.root / PARAMS_FILE
    section = ex.params.holes.model_dump(mode="json", exclude_defaults=True)
    section["arms"] = {a: c for a, c in section["arms"].items() if a != name}
    params = (write_section(params_path, "holes", section) if section["arms"]
              else drop_section(params_path, "holes"))
    new = Experiment(ex.root, params)
    write_text(ex.root / "dvc.yaml", render(new))
    # its decision file would be read as a decision until the report stage reruns
    decision_file = ex.path("decision") / f"{name}.json" if ex.params.paths.decision else None
    if decision_file is not None and decision_file.is_file():
        decision_file.unlink()
    record = ex.path("holes") if ex.params.paths.holes else None
    if not section["arms"] and record is not None and record.is_file():
        # with the section gone no stage rewrites the record: it would still name the arm
        record.unlink()
    return Experiment.load(params_path)


def price_arm(ex: Experiment, name: str) -> dict | None:
    """What the pool with arm ``name`` would cost, its run (and that of any other arm not
    made yet) made in memory.

    Returns
    -------
    dict or None
        :func:`relgrade.pipeline.cost.plan_pool`'s plan; None when the experiment has no
        pool or audit sample yet (nothing to price against).

    Raises
    ------
    InputError
        An arm's run is invalid, or another arm's run is not made yet.
    """
    needed = ("chunks", "queries", "pool", "audit")
    if not all(ex.path(n).exists() for n in needed):
        return None
    return plan_with_runs(ex, made=[name])


def plan_with_runs(ex: Experiment, depth: int | None = None, *,
                   made: Sequence[str] = ()) -> dict:
    """:func:`relgrade.pipeline.cost.plan_pool`'s plan, with the run of every arm of params
    ``arms`` that has none under ``paths.runs`` yet (an arm just added) made in memory as
    its ``retrieve`` stage makes it (:func:`relgrade.pipeline.stages.retrieve.arm_run`).

    Parameters
    ----------
    ex : Experiment
    depth : int, optional
        The pool depth to price; None: params ``pool.depth``.
    made : sequence of str, optional
        Arms whose run is made in memory even when a file exists (``relgrade arm add``'s
        new arm, whose file may be an older arm's of that name).

    Returns
    -------
    dict
        The plan, plus ``made_in_memory``: the arms (in params order) whose runs were made
        in memory, which the next ``dvc repro`` writes.

    Raises
    ------
    InputError
        As ``plan_pool`` (a missing chunks, queries or audit file is named before any run
        is made); an arm whose run is made here is invalid (the retrieve stage's message).
    """
    from relgrade.pipeline.cost import plan_pool
    from relgrade.pipeline.stages.retrieve import arm_run

    missing = [str(a) for a in ex.params.arms_dict()
               if str(a) in made or not (ex.path("runs") / f"{a}.trec").is_file()]
    if missing and all(ex.path(n).exists() for n in ("chunks", "queries", "audit")):
        runs = {a: arm_run(ex, a) for a in missing}
    else:  # plan_pool names what is missing, or there is no run to make
        runs, missing = {}, []
    return plan_pool(ex, depth, runs=runs) | {"made_in_memory": missing}
