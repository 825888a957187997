"""A key judge's targeted re-check on disk: its plan, its locked draw, its two grade files.

When the key's model judge has no calibration for its identity now, or a stale one, people
owe a **re-check**: a sample of the judge's graded pool pairs, stratified by the grade the
key holds for each (:mod:`relgrade.protocol.recheck`), graded by people and by the judge
now; ``relgrade judge record`` then writes the stratified measurement to the ledger.

Everything of one re-check lives in ``paths.grades_in/GRADER/recheck/TAG/``
(TAG: the identity's first 12 hex digits and the measurement's number, :func:`tag`):

* ``draw.json`` - the draw, written once by ``relgrade judge recheck`` and never redrawn:
  the seed (derived from params ``seed``, stream ``judge-recheck``, the grader and the
  identity), the plan (size, per stratum, shares of the frame), the params it was sized
  with, and the pairs with their stratum;
* ``GRADER.jsonl`` (+ bank sidecar) - the judge now's grades of the drawn pairs
  (``relgrade grade run --grader GRADER --recheck``);
* ``PEOPLE.jsonl`` (+ bank sidecar) - people's grades of them (``relgrade packets export
  --recheck GRADER`` and ``relgrade grade import --grader PEOPLE --recheck GRADER``).

The grades stage reads only ``GRADER/round-N.jsonl`` files, so neither file enters the
grades table, the key, the agreement audit or the prediction-powered estimate's human
sample (see docs/judges.md, "The re-check and the ppi estimate").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.experiment.files import GraderFiles
from relgrade.experiment.judges import current_judge
from relgrade.experiment.layout import key_judges, repro_command
from relgrade.graders.store import bank_path, read_bank
from relgrade.io import files as io
from relgrade.io.judge_ledger import read_ledger
from relgrade.protocol.recheck import (RecheckPlan, draw_recheck, plan_recheck, planning_table,
                                       stratified_calibration)
from relgrade.rng import derive_seed

#: The stream the draw's seed is derived under.
STREAM = "judge-recheck"


def tag(ex, grader: str, judge: str) -> str:
    """The re-check's name: the identity's first 12 hex digits and the how-manieth
    measurement of it in this experiment's ledger it will be (``a06abfe96163-1``), so a
    calibration gone stale with age gets a fresh draw.

    Raises
    ------
    InputError
        The ledger does not read.
    """
    from relgrade.experiment.calibration import experiment_name, ledger_path

    name = experiment_name(ex)
    done = sum(1 for e in read_ledger(ledger_path(ex)) if e.get("experiment") == name
               and e.get("grader") == grader and e.get("judge") == judge)
    return f"{judge[:12]}-{done + 1}"


def folder(ex, grader: str, judge: str, name: str | None = None) -> Path:
    """``paths.grades_in/GRADER/recheck/TAG``: TAG ``name``, default the one now
    (:func:`tag`)."""
    return ex.path("grades_in") / grader / "recheck" / (name or tag(ex, grader, judge))


def draw_path(ex, grader: str, judge: str, name: str | None = None) -> Path:
    """The re-check's locked draw, ``.../recheck/TAG/draw.json``."""
    return folder(ex, grader, judge, name) / "draw.json"


def grade_path(ex, grader: str, judge: str, who: str, name: str | None = None) -> Path:
    """Where ``who`` (the judge or the people grader) records its re-check grades."""
    return folder(ex, grader, judge, name) / f"{who}.jsonl"


def judge_files(ex, grader: str, judge: str, who: str | None = None) -> GraderFiles:
    """The re-check files of ``who`` (default: the judge ``grader`` itself; else the people
    grader grading it), shaped as ``grade run`` writes a round's."""
    f = folder(ex, grader, judge)
    who = who or grader
    grades = f / f"{who}.jsonl"
    return GraderFiles(grader=who, round=ex.params.grading.round, grades=grades,
                       meta=f / f"{who}.meta.json", bank=bank_path(grades),
                       samples=f / "samples" / f"{who}.jsonl",
                       consistency=f / f"{who}.consistency.json",
                       corrections=f / f"{who}.corrections.jsonl")


def experiment_option(ex) -> str:
    """`` --experiment NAME`` for an experiment below the repository's top, else ``""``."""
    from relgrade.experiment.calibration import experiment_name

    name = experiment_name(ex)
    return "" if name == "." else f" --experiment {name}"


def people_steps(ex, judge_grader: str, people: str, *, run: bool = True) -> str:
    """The commands with which ``people`` grade the re-check of ``judge_grader``: the
    packets export and the import, and (with ``run``) ``grade run --recheck`` when
    ``people`` has a command (a simulated person)."""
    where = experiment_option(ex)
    steps = (f"relgrade packets export --recheck {judge_grader} --out recheck.jsonl{where}, "
             f"then relgrade grade import recheck-graded.jsonl --grader {people} "
             f"--recheck {judge_grader}{where}")
    spec = ex.params.graders.get(people)
    if run and spec is not None and spec.as_dict().get("command") is not None:
        steps += (f" (or, with {people}'s command: relgrade grade run --grader {people} "
                  f"--recheck{where})")
    return steps


def check_key_judge(ex, grader: str) -> None:
    """Refuse a re-check of ``grader`` unless it is a model grader of the key with a command
    (:func:`relgrade.experiment.layout.key_judges`).

    Raises
    ------
    InputError
        It is not one; the fix names the key judges, and for a human grader the commands
        with which people grade a key judge's re-check.
    """
    judges = key_judges(ex)
    if grader in judges:
        return
    spec = ex.params.graders.get(grader)
    if spec is not None and spec.kind == "human" and judges:
        mine = _measured_against(ex, grader)
        fix = (f"{grader} is a human grader: people grade the re-check drawn for the key's "
               "judge, " + "; ".join(people_steps(ex, j, grader, run=mine == [j])
                                     for j in judges))
    else:
        fix = ("name the key's model judge (grading.key_grader, or a triage grader) with "
               "--grader" if judges else "this experiment's key has no model judge with a "
               "command, so no re-check is owed")
    raise InputError("a re-check is drawn for, and graded against, a model grader of the key "
                     "with a command", path=ex.params.source, item=f"graders.{grader}",
                     found=", ".join(judges) or "no such grader", fix=fix)


def drawn(ex, grader: str) -> tuple[str, dict]:
    """The judge identity now of key judge ``grader`` and the re-check drawn for it: what
    ``grade run --recheck``, ``grade import --recheck`` and ``packets export --recheck``
    work on.

    Returns
    -------
    (str, dict)
        The identity (64 hex) and the draw (:func:`read_draw`).

    Raises
    ------
    InputError
        ``grader`` is not a key judge (:func:`check_key_judge`), or no re-check is drawn for
        its identity now (the fix names ``relgrade judge recheck``, which draws it).
    """
    check_key_judge(ex, grader)
    judge = current_judge(ex, grader)
    d = read_draw(ex, grader, judge)
    if d is None:
        raise InputError(f"no re-check is drawn for {grader}'s judge identity now "
                         f"({judge[:12]})", path=draw_path(ex, grader, judge),
                         item=f"graders.{grader}",
                         fix=f"Run: relgrade judge recheck --grader {grader}"
                             f"{experiment_option(ex)}")
    return judge, d


def _measured_against(ex, people: str) -> list[str]:
    """The key judges whose people grader is ``people``."""
    from relgrade.experiment.calibration import people_grader

    mine = []
    for j in key_judges(ex):
        try:
            if people_grader(ex, j) == people:
                mine.append(j)
        except InputError:
            continue
    return mine


def graded_by(ex, people: str) -> str:
    """The key judge whose re-check human grader ``people`` grades: the one key judge
    measured against them (:func:`relgrade.experiment.calibration.people_grader`).

    Raises
    ------
    InputError
        ``people`` is no human grader, or is the people grader of no key judge, or of more
        than one (then each judge's re-check is graded through its packets).
    """
    spec = ex.params.graders.get(people)
    judges = key_judges(ex)
    if spec is None or spec.kind != "human":
        check_key_judge(ex, people)  # a grader neither judge nor people: its error
    mine = _measured_against(ex, people)
    if len(mine) == 1:
        return mine[0]
    raise InputError(f"{people} grades the re-check of "
                     + (f"{len(mine)} key judges" if mine else "no key judge"),
                     path=ex.params.source, item=f"graders.{people}",
                     fix="; ".join(people_steps(ex, j, people, run=False)
                                   for j in (mine or judges))
                     or "this experiment's key has no model judge with a command")


def frame(ex, grader: str) -> pd.DataFrame:
    """The pairs the re-check is drawn from: ``grader``'s current grade of each pool pair,
    as the grades stage's table holds it (the grades the key is built from).

    Returns
    -------
    pandas.DataFrame
        ``query_id``, ``chunk_id`` (str), ``grade`` (int64), sorted by pair.

    Raises
    ------
    InputError
        The grades table is not built yet, or holds no grade of ``grader``.
    """
    path = ex.path("grades")
    if not path.exists():
        raise InputError("a re-check is drawn from the key judge's grades: the grades table "
                         "is not built yet", path=path, fix=f"Run: {repro_command(ex)}")
    table = io.read_table(path, columns=["query_id", "chunk_id", "grader", "grade"])
    mine = table[table["grader"].astype(str) == grader]
    if mine.empty:
        raise InputError(f"the grades table holds no grade of {grader} to draw a re-check from",
                         path=path, item=grader, fix=f"Run: {repro_command(ex)}")
    out = pd.DataFrame({"query_id": mine["query_id"].astype(str),
                        "chunk_id": mine["chunk_id"].astype(str),
                        "grade": mine["grade"].astype("int64")})
    return out.sort_values(["query_id", "chunk_id"], ignore_index=True)


def planning(ex, grader: str) -> tuple[np.ndarray, str]:
    """The planning table of the size rule and where it came from: the confusion of
    ``grader``'s newest ledger entry in this experiment (any identity) on the scale now,
    else params ``judges.recheck.planning_agreement``."""
    from relgrade.experiment.calibration import experiment_name, ledger_path

    scale = ex.params.need("scale").grades
    name = experiment_name(ex)
    entries = [e for e in read_ledger(ledger_path(ex))
               if e.get("experiment") == name and e.get("grader") == grader
               and list(e.get("scale") or []) == list(scale) and e.get("confusion")]
    if entries:
        e = entries[-1]
        return (planning_table(scale, confusion=e["confusion"]),
                f"the confusion of {e['judge'][:12]} measured {e['measured_at']}")
    agree = _params(ex).planning_agreement
    return (planning_table(scale, agreement=agree),
            f"judges.recheck.planning_agreement {agree:g}")


def _params(ex):
    from relgrade.experiment.calibration import judges_params

    return judges_params(ex).recheck


def plan(ex, grader: str, table: pd.DataFrame | None = None) -> tuple[RecheckPlan, str]:
    """The re-check's plan for ``grader`` now (:func:`relgrade.protocol.recheck.plan_recheck`
    with params ``judges.recheck``) and the planning source in words.

    Raises
    ------
    InputError
        As :func:`frame`.
    """
    table = frame(ex, grader) if table is None else table
    scale = ex.params.need("scale")
    r = _params(ex)
    counts = table["grade"].value_counts().to_dict()
    table_p, source = planning(ex, grader)
    return plan_recheck({int(k): int(v) for k, v in counts.items()}, scale=scale.grades,
                        relevant_min=scale.relevant_min, planning=table_p,
                        halfwidth=r.kappa_halfwidth, level=r.level, min_pairs=r.min_pairs,
                        max_pairs=r.max_pairs), source


def latest_draw(ex, grader: str, judge: str) -> dict | None:
    """The newest draw of ``grader``'s re-checks of identity ``judge``: the one owed now, else
    the one last recorded (so recording it again finds the same measurement); None."""
    now = int(tag(ex, grader, judge).rsplit("-", 1)[1])
    for k in range(now, 0, -1):
        d = read_draw(ex, grader, judge, f"{judge[:12]}-{k}")
        if d is not None:
            return d
    return None


def read_draw(ex, grader: str, judge: str, name: str | None = None) -> dict | None:
    """The locked draw of ``grader``'s re-check of identity ``judge`` (TAG ``name``, default
    the one owed now), or None.

    Raises
    ------
    InputError
        The file is not a draw relgrade wrote (no pairs, or pairs without a stratum).
    """
    path = draw_path(ex, grader, judge, name)
    if not path.exists():
        return None
    d = io.read_json(path)
    if not isinstance(d, dict) or not isinstance(d.get("pairs"), list) or d.get("judge") != judge \
            or d.get("tag") != path.parent.name \
            or any(not isinstance(p, dict) or {"query_id", "chunk_id", "stratum"} - set(p)
                   for p in d["pairs"]):
        raise InputError("a re-check draw names its judge and its pairs with their stratum",
                         path=path, fix="Restore the file from git; a draw is never redrawn")
    return d


def draw(ex, grader: str, judge: str) -> tuple[dict, bool]:
    """Draw ``grader``'s re-check of identity ``judge`` and lock it, unless it is drawn.

    Returns
    -------
    (dict, bool)
        The draw (``grader``, ``judge``, ``seed``, ``stream``, ``params``, ``planning``,
        ``plan``, ``pairs``) and whether it was written now.
    """
    old = read_draw(ex, grader, judge)
    if old is not None:
        return old, False
    table = frame(ex, grader)
    p, source = plan(ex, grader, table)
    seed = derive_seed(ex.params.need("seed"), STREAM, grader, judge)
    pairs = draw_recheck(table, p, rng=np.random.default_rng(seed))
    out = {"grader": grader, "judge": judge, "tag": tag(ex, grader, judge), "seed": seed,
           "stream": STREAM,
           "params": _params(ex).model_dump(), "planning": source, "plan": p.as_dict(),
           "pairs": [{"query_id": q, "chunk_id": c, "stratum": int(s)} for q, c, s in
                     zip(pairs["query_id"], pairs["chunk_id"], pairs["stratum"])]}
    io.write_json(draw_path(ex, grader, judge), out)
    return out, True


def _latest(path: Path, *, judge: str | None, rubric_sha256: str) -> dict:
    """Pair -> (grade, graded_at) of a re-check grade file's latest row per pair whose bank
    line was made on the rubric now (and, with ``judge``, under that identity)."""
    if not path.exists():
        return {}
    rows = [r for _, r in io.iter_jsonl(path)]
    bank = [b for _, b in read_bank(path) or ()]
    out = {}
    for r, b in zip(rows, bank):
        if b.get("rubric_sha256") != rubric_sha256 or (judge and b.get("judge") != judge):
            continue
        out[(str(r["query_id"]), str(r["chunk_id"]))] = (int(r["grade"]),
                                                          str(b.get("graded_at") or ""))
    return out


def graded(ex, grader: str, judge: str, against: str, d: dict) -> tuple[pd.DataFrame, str | None]:
    """The drawn pairs both the judge ``judge`` and ``against`` graded for the re-check.

    Returns
    -------
    (pandas.DataFrame, str or None)
        Columns of :data:`relgrade.protocol.recheck.GRADED`, sorted by pair, and the latest
        ``graded_at`` of the grades used (None with no pair).
    """
    rubric = ex.rubric_sha256()
    model = _latest(grade_path(ex, grader, judge, grader, d["tag"]), judge=judge,
                    rubric_sha256=rubric)
    human = _latest(grade_path(ex, grader, judge, against, d["tag"]), judge=None,
                    rubric_sha256=rubric)
    rows, times = [], []
    for p in d["pairs"]:
        pair = (str(p["query_id"]), str(p["chunk_id"]))
        if pair in model and pair in human:
            rows.append((*pair, int(p["stratum"]), model[pair][0], human[pair][0]))
            times += [model[pair][1], human[pair][1]]
    table = pd.DataFrame(rows, columns=["query_id", "chunk_id", "stratum", "model", "human"])
    times = [t for t in times if t]
    return table, (max(times) if times else None)


def owed(ex, grader: str, judge: str, against: str | None, *, seconds: float) -> dict:
    """What the re-check of ``grader``'s identity ``judge`` still owes.

    ``seconds`` is what one judgment of ``against`` costs
    (:func:`relgrade.pipeline.cost.seconds_per_judgment`, which the caller passes: the
    pipeline layer prices people's work).

    Returns
    -------
    dict
        ``drawn`` (bool), ``size``, ``frame``, ``per_stratum`` (the draw's, or the plan's
        before the draw), ``people`` (pairs ``against`` still owes), ``judge`` (pairs the
        judge still owes), ``against``, ``seconds`` (per people's judgment), ``hours``
        (``people * seconds / 3600``), ``draw`` (the draw file, relative to the experiment).

    Raises
    ------
    InputError
        As :func:`plan` (before the draw).
    """
    d = read_draw(ex, grader, judge)
    if d is None:
        p, _ = plan(ex, grader)
        size, per, frame_n = p.size, p.per_stratum, p.frame
        people = model = size
    else:
        size, frame_n = len(d["pairs"]), d["plan"]["frame"]
        per = {int(k): v for k, v in d["plan"]["per_stratum"].items()}
        rubric = ex.rubric_sha256()
        pairs = {(p["query_id"], p["chunk_id"]) for p in d["pairs"]}
        model = len(pairs - set(_latest(grade_path(ex, grader, judge, grader), judge=judge,
                                        rubric_sha256=rubric)))
        people = size if against is None else len(pairs - set(_latest(
            grade_path(ex, grader, judge, against), judge=None, rubric_sha256=rubric)))
    return {"drawn": d is not None, "size": size, "frame": frame_n, "per_stratum": per,
            "people": people, "judge": model, "against": against, "seconds": seconds,
            "hours": people * seconds / 3600.0,
            "draw": draw_path(ex, grader, judge).relative_to(ex.root).as_posix()}


def owed_words(ex, grader: str, o: dict) -> str:
    """The re-check owed in words, with the commands that do it."""
    from relgrade.experiment.calibration import experiment_name

    name = experiment_name(ex)
    where = "" if name == "." else f" --experiment {name}"
    strata = ", ".join(f"grade {k}: {v}" for k, v in sorted(o["per_stratum"].items()))
    who = o["against"] or "people"
    head = (f"a re-check of {o['size']} pairs of {o['frame']} stratified by the judge's grade "
            f"({strata}); {who} {'owe' if who == 'people' else 'owes'} {o['people']} "
            f"({o['hours']:.2f} annotator-hours at "
            f"{o['seconds']:g} s each), the judge {o['judge']}")
    if not o["drawn"]:
        return head + f": relgrade judge recheck --grader {grader}{where}"
    steps = []
    if o["judge"]:
        steps.append(f"relgrade grade run --grader {grader} --recheck{where}")
    if o["people"]:
        steps.append(people_steps(ex, grader, who))
    steps.append(f"relgrade judge record --grader {grader}{where}")
    return head + ": " + "; ".join(steps)


def recheck_packets(ex, grader: str, d: dict, *, owed_by: str | None = None,
                    judge: str | None = None) -> dict:
    """The key grader's packets cut down to the drawn pairs (and, with ``owed_by``, to those
    that grader has no re-check grade of under the rubric now), batches in their order.

    Returns
    -------
    dict
        query id -> packet.
    """
    pairs = {(p["query_id"], p["chunk_id"]) for p in d["pairs"]}
    if owed_by is not None:
        done = _latest(grade_path(ex, grader, d["judge"], owed_by, d["tag"]), judge=judge,
                       rubric_sha256=ex.rubric_sha256())
        pairs -= set(done)
    out = {}
    for qid, packet in ex.grader_packets(grader).items():
        batches = [[c for c in b if (str(qid), str(c["chunk_id"])) in pairs]
                   for b in packet["batches"]]
        batches = [b for b in batches if b]
        if batches:
            out[qid] = {**packet, "batches": batches}
    return out


def measure_recheck(ex, grader: str, judge: str, against: str, d: dict) -> dict | None:
    """The ledger entry's measurement from a graded re-check, or None when no drawn pair is
    graded by both. The estimate is :func:`relgrade.protocol.recheck.stratified_calibration`
    (each stratum weighted by its share of the frame); the entry keeps the sample's confusion
    counts, the estimated population table and the draw (file, seed, plan)."""
    table, measured_at = graded(ex, grader, judge, against, d)
    if table.empty:
        return None
    scale = ex.params.need("scale")
    shares = {int(k): float(v) for k, v in d["plan"]["shares"].items()}
    est = stratified_calibration(table, shares, scale=scale.grades,
                                 relevant_min=scale.relevant_min,
                                 level=d["params"]["level"])
    index = {v: i for i, v in enumerate(scale.grades)}
    conf = np.zeros((len(index), len(index)), dtype=int)
    np.add.at(conf, (table["model"].map(index).to_numpy(dtype=int),
                     table["human"].map(index).to_numpy(dtype=int)), 1)
    return {"measured_at": measured_at, "pairs": est["pairs"], "queries": est["queries"],
            "weighted_kappa": est["weighted_kappa"], "binary_kappa": est["binary_kappa"],
            "confusion": conf.tolist(), "scale": list(scale.grades),
            "relevant_min": scale.relevant_min, "leniency": est["leniency"],
            "leniency_by_family": {}, "notes": est["notes"],
            "recheck": {"draw": draw_path(ex, grader, judge, d["tag"]).relative_to(
                            ex.root).as_posix(),
                        "seed": d["seed"], "stream": d["stream"], "size": len(d["pairs"]),
                        "strata": est["strata"], "population": est["population"],
                        "estimator": "stratified (weights: the strata's shares of the frame), "
                                     "delta-method intervals"}}
