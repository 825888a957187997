"""Arms that joined after the key froze (params ``holes``): their holes, the human sample and
what each grader owes, as the ``holes`` stage and ``relgrade status`` both see them.

:func:`hole_plan` reads the frozen key, the queries and each new arm's run and draws the human
sample (:func:`relgrade.evaluation.new_arm.owed_holes`, stream ``holes-ARM`` of params
``seed``): the ``holes`` stage grades what it lists. :func:`holes_status` adds what the
graders of the holes' own experiment (``paths.holes_work``) still owe per new arm, priced as
``relgrade status`` prices other work (:mod:`relgrade.pipeline.cost`: people in
annotator-hours, models in calls), and the level-claim verdict of ``paths.holes`` once the
stage has written it for the current key and sample. :func:`holes_parent` finds the
experiment a holes folder belongs to, so that ``relgrade status`` there points to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from relgrade.errors import InputError, RelgradeError
from relgrade.evaluation import new_arm
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import grade_commands
from relgrade.experiment.params import PARAMS_FILE
from relgrade.io import files as io
from relgrade.io.runs import read_run
from relgrade.pipeline.cost import judging_cost, prices
from relgrade.pipeline.judgments import judgments
from relgrade.rng import stage_rng

#: The holes' own pool, audit and packets inside ``paths.holes_work``.
POOL, AUDIT, PACKETS, GRADES = "pool.parquet", "audit.jsonl", "packets", "grades"

#: The holes' folder's record of each arm's human sample (``{"key_sha256", "arms": {arm:
#: [query ids]}}``), the lock :func:`check_hole_samples` holds people's grades to.
SAMPLES = "samples.json"


@dataclass(frozen=True)
class HolePlan:
    """What the new arms' holes are and who owes which grade.

    Attributes
    ----------
    measure : str
        The measure whose cutoff bounds the holes.
    key : pandas.DataFrame
        The frozen key (:data:`relgrade.schema.KEY`).
    record : dict
        The key's record.
    queries : list of str
        Every query of the experiment, sorted.
    runs : dict of str to pandas.DataFrame
        Each new arm's run.
    owed : dict of str to pandas.DataFrame
        Each new arm's holes (``query_id``, ``chunk_id``, ``sampled``;
        :func:`relgrade.evaluation.new_arm.owed_holes`).
    pool : pandas.DataFrame
        The holes of every new arm, once each (``query_id``, ``chunk_id``), sorted: the pool of
        the holes' own experiment.
    audit_ids : list of str
        The queries some new arm's sample holds, sorted: that experiment's "audit" queries,
        every pair of which people grade.
    """

    measure: str
    key: pd.DataFrame
    record: dict
    queries: list
    runs: dict
    owed: dict
    pool: pd.DataFrame
    audit_ids: list


def hole_plan(ex) -> HolePlan:
    """The new arms' holes and their human sample, from the frozen key and the runs.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        An experiment with a ``holes`` section.

    Returns
    -------
    HolePlan

    Raises
    ------
    InputError
        No ``holes`` section; the holes' folder holds grades of another grader
        (:func:`check_hole_graders`); the key, its record, the queries or a run is missing or
        unreadable; and as :func:`relgrade.evaluation.new_arm.owed_holes` (fewer than 3
        queries with holes, a sample below 3).
    """
    p = ex.params
    h, seed = p.need("holes"), p.need("seed")
    check_hole_graders(ex.path("holes_work"), model_grader=h.model_grader,
                       human_grader=h.human_grader)
    measure = h.measure or p.need("metrics").primary
    key, record = ex.read_key()
    queries = sorted(set(io.read_table(ex.path("queries"), columns=["query_id"])["query_id"]
                         .astype(str)))
    runs = {arm: read_run(ex.file(spec.source)) for arm, spec in sorted(h.arms.items())}
    owed = {arm: new_arm.owed_holes(run=r, key=key, queries=queries, measure=measure,
                                    fraction=h.human_fraction,
                                    relevant_min=p.need("scale").relevant_min,
                                    ties=p.runs.ties, rng=stage_rng(seed, f"holes-{arm}"))
            for arm, r in runs.items()}
    every = pd.concat(owed.values(), ignore_index=True)
    pool = (every[["query_id", "chunk_id"]].drop_duplicates()
            .sort_values(["query_id", "chunk_id"]).reset_index(drop=True))
    audit_ids = sorted(set(every.loc[every["sampled"], "query_id"]))
    return HolePlan(measure=measure, key=key, record=record, queries=queries, runs=runs,
                    owed=owed, pool=pool, audit_ids=audit_ids)


def reference_side(ex, key: pd.DataFrame, *, model_grader: str,
                   human_grader: str) -> pd.DataFrame:
    """The transport check's reference side: the key's pairs both holes graders graded, from
    the grades stage's table (its latest round).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (params ``paths.grades``).
    key : pandas.DataFrame
        The frozen key (``query_id``, ``chunk_id``, ...).
    model_grader, human_grader : str
        Params ``holes.model_grader`` and ``holes.human_grader``.

    Returns
    -------
    pandas.DataFrame
        :data:`relgrade.evaluation.new_arm.OLD_PAIRS`.

    Raises
    ------
    InputError
        As :func:`relgrade.evaluation.new_arm.reference_pairs` (no pair graded by both
        among them), naming the grades table.
    """
    path = ex.path("grades")
    grades = io.read_table(path, columns=["query_id", "chunk_id", "grader", "grade", "round"])
    grades = grades[grades["round"] == grades["round"].max()]
    try:
        return new_arm.reference_pairs(grades, model_grader=model_grader,
                                       human_grader=human_grader, pairs=key)
    except InputError as e:
        raise InputError(e.rule, path=path, item=e.item, found=e.found, fix=e.fix) from None


def check_hole_samples(work, plan: HolePlan, *, human_grader: str, key_sha256: str) -> dict:
    """Refuse a human sample of holes that moved after people graded it.

    A sample is drawn before anyone grades (seeded, ``holes.human_fraction``); a change of
    the fraction or the seed that moves an arm's sample once people graded its holes would
    choose the queries after the grades were seen, as ppi mode's locked sample forbids.

    Parameters
    ----------
    work : pathlib.Path
        The holes' folder (its :data:`SAMPLES` record and ``grades/HUMAN/round-*.jsonl``).
    plan : HolePlan
        The plan of the params now (:func:`hole_plan`).
    human_grader : str
        Params ``holes.human_grader``.
    key_sha256 : str
        The frozen key's sha256: a sample recorded for another key is not held to (the
        holes themselves changed).

    Returns
    -------
    dict
        The record to write (:data:`SAMPLES`): the key and each arm's sample now.

    Raises
    ------
    InputError
        An arm's recorded sample (same key) differs from the plan's while people have a
        grade of one of its queries, naming the arm, both samples and how to go on.
    """
    now = {arm: sorted(set(owed.loc[owed["sampled"], "query_id"].astype(str)))
           for arm, owed in plan.owed.items()}
    record = {"key_sha256": key_sha256, "arms": now}
    path = Path(work) / SAMPLES
    if not path.is_file():
        return record
    old = io.read_json_object(path)
    if old.get("key_sha256") != key_sha256 or not isinstance(old.get("arms"), dict):
        return record
    graded = set()
    for f in sorted((Path(work) / GRADES / str(human_grader)).glob("round-*.jsonl")):
        graded |= {str(row.get("query_id")) for _, row in io.iter_jsonl(f)}
    for arm, sample in now.items():
        before = old["arms"].get(arm)
        if before is None or list(before) == sample:
            continue
        seen = sorted(set(map(str, before)) & graded)
        if seen:
            raise InputError(
                f"arm {arm}'s human sample of holes would move after people graded it "
                f"({human_grader} graded holes of {', '.join(seen)})", path=path,
                item=f"holes.arms.{arm}",
                found=f"sample {', '.join(map(str, before))}; params now give "
                      f"{', '.join(sample)}",
                fix="Restore holes.human_fraction and seed as they were when the sample "
                    "was drawn, or add the arm again under a new name (its own sample)")
    return {"key_sha256": key_sha256, "arms": {**{a: s for a, s in old["arms"].items()
                                                    if a not in now}, **now}}


def check_hole_graders(work, *, model_grader: str, human_grader: str) -> None:
    """Refuse a holes' folder that holds grades of a grader other than the two holes graders.

    The folder's own experiment declares only the two, so the grades an earlier holes grader
    left there (they stay when an arm is removed) would stop every read of its bank.

    Parameters
    ----------
    work : pathlib.Path
        The holes' folder (params ``paths.holes_work``); it need not exist yet.
    model_grader, human_grader : str
        Params ``holes.model_grader`` and ``holes.human_grader``.

    Raises
    ------
    InputError
        A grader folder under ``work/grades`` with a grade file of a grader that is neither,
        naming the folder and how to go on.
    """
    folder = Path(work) / GRADES
    if not folder.is_dir():
        return
    ours = {str(model_grader), str(human_grader)}
    for sub in sorted(folder.iterdir()):
        if (sub.is_dir() and not sub.name.startswith(".") and sub.name not in ours
                and any(sub.glob("round-*.jsonl"))):
            raise InputError(
                "the holes' folder holds grades of a grader that is not a holes grader now",
                path=sub, item=sub.name,
                found=f"holes graders {model_grader} (model) and {human_grader} (people)",
                fix=f"Grade the holes with {sub.name} again (--model-grader or "
                    f"--human-grader {sub.name}: its grades are reused), or move {sub} out "
                    "of the holes' folder (`git mv`; its grades stay in git) to grade the "
                    "holes anew")


def _rel(path, start) -> str:
    return os.path.relpath(os.path.abspath(path), os.path.abspath(start)).replace(os.sep, "/")


def work_params(ex, work) -> dict:
    """The params of the holes' own experiment in folder ``work``: its paths (the main
    experiment's chunks, intents and rubric, named relative to ``work``), the scale, the
    grading settings, and the two graders as role grader (the model) and auditor (people)."""
    p, h = ex.params, ex.params.need("holes")
    g = p.grading
    graders = p.graders_dict()
    paths = {"pool": POOL, "audit": AUDIT, "packets": PACKETS, "grades_in": GRADES}
    for name in ("chunks", "intents", "intents_manifest", "call_cache"):
        if getattr(p.paths, name, None):
            paths[name] = _rel(ex.path(name), work)
    grading = {"key_grader": h.model_grader, "auditor": h.human_grader, "round": 1,
               "batch_size": g.batch_size, "rubric": _rel(ex.file(g.rubric), work),
               "rubric_version": g.rubric_version, "max_reason_words": g.max_reason_words}
    if g.max_reason_chars is not None:
        grading["max_reason_chars"] = g.max_reason_chars
    return {"seed": p.need("seed"), "paths": paths,
            "scale": p.need("scale").model_dump(exclude_none=True), "grading": grading,
            "graders": {h.model_grader: {**graders[h.model_grader], "role": "grader"},
                        h.human_grader: {**graders[h.human_grader], "role": "auditor"}}}


def _pairs(table: pd.DataFrame) -> set:
    return set(zip(table["query_id"].astype(str), table["chunk_id"].astype(str)))


def _verdict(record: dict | None, arm: str, *, key_sha256, sample: list, owed: int) -> dict:
    """The level-claim state of one new arm: ``computed`` (the record's, for the current key
    and sample, nothing owed), ``outdated`` (a record for another key or sample, or grades
    owed since), or ``not computed``."""
    arms = (record or {}).get("arms")
    mine = arms.get(arm) if isinstance(arms, dict) else None
    if mine is None:
        return {"state": "not computed"}
    try:
        e = mine["estimates"]["ppi++"]
        out = {"level_claim": mine["level_claim"], "measure": mine["measure"],
               "estimate": e["estimate"], "low": e["low"], "high": e["high"],
               "level": e["level"], "hole_rate": mine["hole_rate"],
               "transport_difference": mine["transport"]["difference"],
               "transport_p": mine["transport"]["p"]}
    except (KeyError, TypeError, IndexError):
        # not what the holes stage writes (a hand edit): dvc repro writes it again
        return {"state": "not computed", "error": "the holes' record is not of the shape the "
                                                  "holes stage writes; dvc repro rewrites it"}
    current = (record.get("key_sha256") == key_sha256 and list(mine.get("sample") or []) ==
               list(sample) and owed == 0)
    return {"state": "computed" if current else "outdated", **out}


def holes_status(ex) -> dict:
    """What the new arms' holes owe and where their level claim stands.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        An experiment with a ``holes`` section.

    Returns
    -------
    dict
        JSON-ready. ``{"state": "waiting", "error": str}`` while the holes cannot be listed
        (no frozen key yet, a run missing, fewer than 3 queries with holes ...); else
        ``state`` ``"owed"`` or ``"graded"``, ``work`` (the holes' folder), ``model_grader``,
        ``human_grader``, ``commands`` (grader → the command that grades its holes, for each
        grader that owes some), ``cost`` (:func:`relgrade.pipeline.cost.judging_cost` of the
        whole folder: judgments made and owed per grader, so a pair two arms share counts
        once) and ``arms``: per new arm ``holes``, ``hole_queries``, ``sampled_queries``
        (sorted ids), ``sampled_holes``, ``owed`` (grader → pairs of this arm's holes it
        owes: the model grader every hole, people the sampled ones), ``cost`` (the same,
        priced: ``judging_cost`` with ``spent`` the arm's holes already graded) and
        ``verdict`` (:func:`_verdict`'s ``state``, with the level claim, estimate, interval
        and transport difference once the stage has written them).

    Raises
    ------
    InputError
        A grade file of the holes' folder breaks a rule (as the grades stage would refuse it).
    """
    h = ex.params.need("holes")
    try:
        plan = hole_plan(ex)
    except RelgradeError as e:
        return {"state": "waiting", "error": str(e)}
    work = ex.path("holes_work")
    sub = Experiment.from_mapping(work_params(ex, work), root=work)
    model, human = h.model_grader, h.human_grader
    if work.is_dir():
        held = judgments(sub, plan.pool, plan.audit_ids)
        pending = held.pending.astype({"query_id": str, "chunk_id": str, "grader": str})
        graded = held.bank.astype({"query_id": str, "chunk_id": str, "grader": str})
        made = held.made
    else:  # the holes stage has not made the folder: nothing is graded, everything owed
        pool = plan.pool[["query_id", "chunk_id"]].astype(str)
        people = pool[pool["query_id"].isin(set(map(str, plan.audit_ids)))]
        pending = pd.concat([pool.assign(grader=model), people.assign(grader=human)],
                            ignore_index=True)
        graded, made = pending.iloc[0:0], {}
    price = prices(ex.params, [model, human])
    owing = {g: _pairs(pending[pending["grader"] == g]) for g in (model, human)}
    have = {g: _pairs(graded[graded["grader"] == g]) - owing[g] for g in (model, human)}
    record = None
    if ex.path("holes").exists():
        try:
            record = io.read_json_object(ex.path("holes"))
        except RelgradeError:
            record = None
    arms = {}
    for arm, owed in plan.owed.items():
        every = _pairs(owed)
        sampled = _pairs(owed[owed["sampled"]])
        mine = {model: every, human: sampled}
        counts = {g: {"spent": len(mine[g] & have[g]), "pending": len(mine[g] & owing[g])}
                  for g in (model, human)}
        sample = sorted(set(owed.loc[owed["sampled"], "query_id"]))
        arms[arm] = {"holes": len(every), "hole_queries": int(owed["query_id"].nunique()),
                     "sampled_queries": sample, "sampled_holes": len(sampled),
                     "owed": {g: c["pending"] for g, c in counts.items()},
                     "cost": judging_cost(counts, price),
                     "verdict": _verdict(record, arm, key_sha256=plan.record.get("key_sha256"),
                                         sample=sample,
                                         owed=sum(c["pending"] for c in counts.values()))}
    total = {g: {"spent": int(made.get(g, 0)), "pending": len(owing[g])}
             for g in (model, human)}
    how = grade_commands(sub)
    return {"state": "owed" if len(pending) else "graded", "work": work.as_posix(),
            "measure": plan.measure, "model_grader": model, "human_grader": human,
            "commands": {g: how[g] for g in (model, human) if owing[g]},
            "cost": judging_cost(total, price), "arms": arms}


def holes_parent(root) -> Path | None:
    """The experiment folder whose params ``paths.holes_work`` is ``root``, if any.

    Looks in ``root``'s parent folders, nearest first, up to the first one holding ``.git``
    or ``.dvc`` (the repository's top); params files are read as plain YAML, and one that
    cannot be read is passed over.

    Returns
    -------
    pathlib.Path or None
        That experiment's folder, or None when ``root`` is no experiment's holes folder.
    """
    here = Path(root).resolve()
    for folder in here.parents:
        params = folder / PARAMS_FILE
        if params.is_file():
            try:
                paths = (io.read_yaml(params) or {}).get("paths") or {}
            except RelgradeError:
                paths = {}
            work = paths.get("holes_work") if isinstance(paths, dict) else None
            if isinstance(work, str) and (folder / work).resolve() == here:
                return folder
        if (folder / ".git").exists() or (folder / ".dvc").exists():
            return None
    return None


def refuse_holes_folder(ex) -> None:
    """Refuse to treat a holes folder as an experiment of its own.

    Raises
    ------
    InputError
        ``ex`` has no key record (``paths.record``) and is the ``paths.holes_work`` folder
        of another experiment: its status is that experiment's (``relgrade status`` there
        says what the holes owe).
    """
    if getattr(ex.params.paths, "record", None):
        return
    parent = holes_parent(ex.root)
    if parent is None:
        return
    here = Path.cwd().resolve()
    try:
        where = parent.resolve().relative_to(here).as_posix()
    except ValueError:
        where = parent.resolve().as_posix()
    # named even when it is this folder: the error is about another folder's experiment,
    # whose own commands would otherwise be aimed at it
    command = f"relgrade status --experiment {where}"
    raise InputError("is the holes folder of another experiment (paths.holes_work there), "
                     "not an experiment with a key of its own", path=ex.params.source,
                     fix=f"Run `{command}`: it says what the holes owe")
