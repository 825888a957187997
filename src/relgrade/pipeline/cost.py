"""Judging as a program with a cost: judgments spent and pending, priced by who did the work.

A person's judgment (one grade of one pair by a grader of kind ``human``, or of family
``human``) costs params ``cost.seconds_per_judgment`` seconds (default 30, the protocol's
estimate), or the grader's own ``graders.NAME.seconds_per_judgment``: annotator-hours are
judgments × seconds / 3600. A model's judgment (a grader of kind ``model``, or of kind
``import`` with a family other than ``human``) costs calls: one per judgment, or
``graders.NAME.samples`` with self-consistency sampling; no annotator-hours. Grades relgrade
cannot place (an undeclared grader, an import without a family) are priced as people's.
A re-pool is priced before it is made (:func:`plan_pool`): the pool the runs on disk give
at another depth, its version, and the pairs it would leave owed.
"""

from __future__ import annotations

from collections.abc import Mapping

from relgrade.errors import InputError
from relgrade.pipeline.judgments import judgment_counts

SECONDS_PER_HOUR = 3600.0


def seconds_per_judgment(params, grader: str) -> float:
    """Seconds one judgment of ``grader`` costs.

    Parameters
    ----------
    params : relgrade.experiment.params.Params
        The experiment's params.
    grader : str
        A grader's name (need not be declared: then the default applies).

    Returns
    -------
    float
        ``graders.GRADER.seconds_per_judgment`` when set, else ``cost.seconds_per_judgment``.

    Raises
    ------
    InputError
        The grader's override is not a positive number.
    """
    spec = params.graders.get(grader)
    value = spec.as_dict().get("seconds_per_judgment") if spec is not None else None
    if value is None:
        return float(params.cost.seconds_per_judgment)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InputError("must be a positive number of seconds", path=params.source,
                         item=f"graders.{grader}.seconds_per_judgment", found=repr(value))
    return float(value)


def people_seconds(ex):
    """``grader name -> seconds per judgment`` (:func:`seconds_per_judgment`) over the
    experiment ``ex``'s params: how the judge re-check's people's work is priced."""
    return lambda grader: seconds_per_judgment(ex.params, grader)


#: Who did a grader's work: a person (priced in annotator-hours) or a model (in calls).
PERSON, MODEL = "person", "model"


def worker(params, grader: str) -> str:
    """Whether ``grader``'s judgments are a person's or a model's, from params ``graders``.

    Returns
    -------
    str
        :data:`MODEL` for kind ``model`` (a command grader) unless its family is ``human``
        (a person answering through a command), and for kind ``import`` with a family other
        than ``human``; :data:`PERSON` otherwise (kind ``human``, family ``human``, an
        import without a family, an undeclared grader).
    """
    from relgrade.protocol.gate import PEOPLE_FAMILY

    spec = params.graders.get(grader)
    if spec is None:
        return PERSON
    family = str(spec.as_dict().get("family") or "").lower()
    if family == PEOPLE_FAMILY or spec.kind == "human":
        return PERSON
    if spec.kind == "model" or family:
        return MODEL
    return PERSON


def calls_per_judgment(params, grader: str) -> int:
    """Model calls one judgment of ``grader`` takes: ``graders.NAME.samples`` (self-consistency
    sampling grades each pair that many times), else 1."""
    spec = params.graders.get(grader)
    value = spec.as_dict().get("samples") if spec is not None else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 1 \
        else 1


def prices(params, graders) -> dict:
    """Per grader, what one judgment costs: ``{"worker", "seconds_per_judgment",
    "calls_per_judgment"}`` (see :func:`worker`, :func:`seconds_per_judgment`,
    :func:`calls_per_judgment`); the argument :func:`judging_cost` takes.

    Raises
    ------
    InputError
        A person's ``seconds_per_judgment`` override is not a positive number.
    """
    out = {}
    for g in graders:
        who = worker(params, g)
        out[g] = {"worker": who,
                  "seconds_per_judgment": seconds_per_judgment(params, g) if who == PERSON
                  else None,
                  "calls_per_judgment": calls_per_judgment(params, g) if who == MODEL else None}
    return out


def judging_cost(counts: Mapping[str, Mapping[str, int]],
                 seconds: Mapping[str, float | Mapping]) -> dict:
    """Judgments spent and pending per grader, priced by who did the work.

    Parameters
    ----------
    counts : mapping
        Grader → ``{"spent": int, "pending": int}`` (judgments made and still owed),
        optionally with ``"spent_by_round": {round: int}`` (kept as given) and
        ``"spent_recheck"`` (the judges' re-check judgments among ``spent``; kept).
    seconds : mapping
        Grader → its price, :func:`prices`' entry (``worker``, ``seconds_per_judgment``,
        ``calls_per_judgment``), or a bare number of seconds per judgment (a person's).

    Returns
    -------
    dict
        ``{"graders": {name: {"worker", "spent", "pending", ...[, "spent_by_round"]}},
        "spent", "pending", "spent_hours", "pending_hours", "spent_calls",
        "pending_calls"}``. A person's entry has ``seconds_per_judgment``, ``spent_hours``
        and ``pending_hours`` (judgments × seconds / 3600, unrounded); a model's has
        ``calls_per_judgment``, ``spent_calls`` and ``pending_calls`` (judgments × calls).
        The totals' hours are people's only, their calls models' only; ``spent`` and
        ``pending`` count every judgment.

    Examples
    --------
    >>> c = judging_cost({"a": {"spent": 120, "pending": 60}, "m": {"spent": 500,
    ...                   "pending": 0}}, {"a": 30.0, "m": {"worker": "model",
    ...                   "calls_per_judgment": 1}})
    >>> c["spent_hours"], c["pending_hours"], c["spent_calls"]
    (1.0, 0.5, 500)
    """
    out = {}
    for name, n in counts.items():
        price = seconds[name]
        if not isinstance(price, Mapping):
            price = {"worker": PERSON, "seconds_per_judgment": price}
        spent, pending = int(n["spent"]), int(n["pending"])
        if price["worker"] == MODEL:
            k = int(price.get("calls_per_judgment") or 1)
            out[name] = {"worker": MODEL, "spent": spent, "pending": pending,
                         "calls_per_judgment": k, "spent_calls": spent * k,
                         "pending_calls": pending * k}
        else:
            s = float(price["seconds_per_judgment"])
            out[name] = {"worker": PERSON, "spent": spent, "pending": pending,
                         "seconds_per_judgment": s,
                         "spent_hours": spent * s / SECONDS_PER_HOUR,
                         "pending_hours": pending * s / SECONDS_PER_HOUR}
        if n.get("spent_by_round"):
            out[name]["spent_by_round"] = {str(r): int(k) for r, k in n["spent_by_round"].items()}
        if n.get("spent_recheck"):  # judges' re-checks: in spent, said apart
            out[name]["spent_recheck"] = int(n["spent_recheck"])
    return {"graders": out,
            "spent": sum(g["spent"] for g in out.values()),
            "pending": sum(g["pending"] for g in out.values()),
            "spent_hours": sum(g.get("spent_hours", 0.0) for g in out.values()),
            "pending_hours": sum(g.get("pending_hours", 0.0) for g in out.values()),
            "spent_calls": sum(g.get("spent_calls", 0) for g in out.values()),
            "pending_calls": sum(g.get("pending_calls", 0) for g in out.values())}


def status_cost(params, pending: Mapping) -> dict | None:
    """The judging cost of the status's counts
    (:func:`relgrade.pipeline.judgments.judgment_counts` of
    :func:`~relgrade.pipeline.judgments.pending_status`).

    Parameters
    ----------
    params : relgrade.experiment.params.Params
        The experiment's params.
    pending : mapping
        :func:`~relgrade.pipeline.judgments.pending_status`'s result; a mapping with
        ``error`` instead gives None.

    Returns
    -------
    dict or None
        As :func:`judging_cost`.
    """
    if not pending or "graders" not in pending:
        return None
    counts = judgment_counts(pending)
    return judging_cost(counts, prices(params, counts))


def report_cost(params, grades_manifest: Mapping) -> dict | None:
    """The judging cost behind a key, from the grades manifest (for the decision report).

    Parameters
    ----------
    params : relgrade.experiment.params.Params
        The experiment's params (seconds per judgment).
    grades_manifest : mapping
        The grades stage's manifest; its ``judging`` block (grader → ``{"spent",
        "pending"}``, :func:`relgrade.pipeline.judgments.judgment_counts` as the grades
        stage found them) is priced.

    Returns
    -------
    dict or None
        As :func:`judging_cost`, graders in name order: the same numbers ``relgrade status``
        gives while the bank is as the grades stage read it. None when the manifest names no
        grader.

    Raises
    ------
    InputError
        The manifest has graders but no ``judging`` block (written by an older relgrade:
        rerun the grades stage); a grader's ``seconds_per_judgment`` override is not a
        positive number.
    """
    manifest = grades_manifest or {}
    if not manifest.get("graders"):
        return None
    counts = manifest.get("judging")
    if counts is None:
        raise InputError("the grades manifest has no `judging` counts (written by an older "
                         "relgrade)", item="judging",
                         fix="Rerun the grades stage: dvc repro -f -s grades")
    counts = {str(g): {"spent": int(c["spent"]), "pending": int(c["pending"]),
                       "spent_by_round": dict(c.get("spent_by_round") or {})}
              | ({"spent_recheck": int(c["spent_recheck"])} if c.get("spent_recheck") else {})
              for g, c in sorted(counts.items())}  # graders in name order, rounds kept
    return judging_cost(counts, prices(params, counts))


def cost_lines(cost: Mapping) -> list[str]:
    """Plain-words lines of :func:`judging_cost`'s result: one total (people's annotator-hours
    and models' calls, each named only when such a grader is there; with the judgments of
    each round when more than one round was graded), one per grader with who it is (person or
    model) and its price (likewise)."""
    def rounds(by_round):
        if len(by_round or {}) < 2:
            return ""
        return ", ".join(f"round {r}: {n}" for r, n in
                         sorted(by_round.items(), key=lambda x: int(x[0])))

    total: dict[str, int] = {}
    for g in cost["graders"].values():
        for r, n in (g.get("spent_by_round") or {}).items():
            total[str(r)] = total.get(str(r), 0) + int(n)
    by_round = f"; {rounds(total)}" if rounds(total) else ""
    kinds = {g.get("worker", PERSON) for g in cost["graders"].values()}

    def price(which):
        parts = []
        if PERSON in kinds:
            parts.append(f"{cost[f'{which}_hours']:.2f} annotator-hours")
        if MODEL in kinds:
            parts.append(f"{cost.get(f'{which}_calls', 0)} model calls")
        return " + ".join(parts) or "nothing"

    out = [f"judging cost: {cost['spent']} judgments spent ({price('spent')}{by_round}), "
           f"{cost['pending']} pending ({price('pending')})"]
    for name, g in cost["graders"].items():
        mine = rounds(g.get("spent_by_round"))
        if g.get("worker", PERSON) == MODEL:
            each = (f"{g['calls_per_judgment']} call{'s' if g['calls_per_judgment'] != 1 else ''}"
                    f" each ({g['pending_calls']} calls to go)")
        else:
            each = f"{g['seconds_per_judgment']:g} s each ({g['pending_hours']:.2f} h to go)"
        recheck = (f"{', ' if mine else ''}{g['spent_recheck']} for judge calibration"
                   if g.get("spent_recheck") else "")
        said = f" ({mine}{recheck})" if mine or recheck else ""
        out.append(f"  {name} ({g.get('worker', PERSON)}): {g['spent']} spent{said}, "
                   f"{g['pending']} pending at {each}")
    return out


def _need_runs(ex, arms: list[str]) -> None:
    """Stop, naming them, when some ``arms`` have no run in params ``paths.runs`` yet.

    Raises
    ------
    InputError
        One arm: at its run's path; several: at the runs folder, naming each. The fix is the
        experiment's ``dvc repro`` of those arms' ``retrieve@ARM`` stages.
    """
    from relgrade.experiment.layout import repro_command

    folder = ex.path("runs")
    missing = [a for a in arms if not (folder / f"{a}.trec").is_file()]
    if not missing:
        return
    repro = repro_command(ex, [f"retrieve@{a}" for a in missing])
    if len(missing) == 1:
        what, path = f"arm {missing[0]} has no run yet", folder / f"{missing[0]}.trec"
        it, them = "it", missing[0]
    else:
        what, path = f"arms {', '.join(missing)} have no runs yet", folder
        it, them = "them", "them"
    raise InputError(what, path=path,
                     fix=(f"Make {it} first with `{repro}`: the plan pools every arm of params "
                          f"`arms`, and a pool without {them} is not the one `dvc repro` "
                          "makes"))


def plan_pool(ex, depth: int | None = None, *, runs: Mapping | None = None) -> dict:
    """What re-pooling at ``depth`` would make and cost, computed without writing anything.

    The runs in params ``paths.runs`` are pooled as the pool stage pools them (same seed,
    ties, tail sample), at ``depth``; the judgment bank then says which of the new pool's
    pairs already hold a current grade and which the key grader and the auditor would owe.

    Every arm of params ``arms`` is pooled, as the pool stage pools them: an arm whose run is
    not made yet (added to params since the last ``dvc repro``) stops the plan, naming the
    arm and the ``dvc repro`` that makes its run, rather than pricing a pool without it that
    ``dvc repro`` would never make.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment; its chunks, queries, runs, intents and audit sample must exist.
    depth : int, optional
        The pool depth to price, >= 1; None: params ``pool.depth`` (today's depth).
    runs : mapping of str to pandas.DataFrame, optional
        Arm → its run, made in memory (an arm just added): used instead of its file.

    Returns
    -------
    dict
        ``{"depth", "pool_version" (the version the pool would have), "pool_version_now",
        "pairs", "pairs_now", "new_pairs" (pairs not in today's pool), "cost"
        (:func:`judging_cost` of the judgments owed, with ``spent`` the judgments each
        grader's files already hold, over the graders the status names, both counted as
        ``relgrade status`` counts them: :func:`relgrade.pipeline.judgments.pending_status`;
        with a rater panel the raters owe the queues the packets stage would deal from the
        new pool, in memory from the same seeds, and the expert is listed)}``.

    Raises
    ------
    InputError
        ``depth`` below 1; the chunks, the queries or the audit sample is missing; an arm's
        run is not made yet (naming the arm and the ``dvc repro`` to run first); a run is
        invalid; with a rater panel, the new pool holds too few gold pairs for params
        ``gold.fraction`` (the packets stage would refuse it the same way).
    """
    import pandas as pd

    from relgrade import ranking
    from relgrade.pipeline.judgments import judgments, pending_status
    from relgrade.pipeline.panel import build_rater_orders, is_panel
    from relgrade.io.files import read_json, read_table
    from relgrade.io.runs import read_run, run_lines
    from relgrade.protocol import pool as pool_mod
    from relgrade.rng import stage_rng

    cfg, ties, seed = ex.params.need("pool"), ex.params.runs.ties, ex.params.need("seed")
    if depth is None:
        depth = cfg.depth
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError("the pool depth must be an integer >= 1", item="--depth",
                         found=repr(depth))
    arms = ex.params.need("arms")
    for name in ("chunks", "queries", "audit"):
        if not ex.path(name).exists():
            raise InputError("is needed to plan a pool; run `dvc repro` up to the pool first",
                             path=ex.path(name), item=f"paths.{name}")
    runs = dict(runs or {})
    _need_runs(ex, [str(a) for a in arms if str(a) not in runs])
    queries = read_table(ex.path("queries"), columns=["query_id"])["query_id"]
    chunks = read_table(ex.path("chunks"), columns=["chunk_id"])["chunk_id"]
    deepest = max(cfg.tail_depth or depth, depth) if cfg.tail_sample else depth
    stacked = []
    for arm in arms:
        path = ex.path("runs") / f"{arm}.trec"
        made = str(arm) in runs  # a run made in memory has no lines
        run = runs[str(arm)] if made else read_run(path)
        ranking.validate_run(run, path=path, queries=queries, chunks=chunks,
                             lines=None if made else run_lines(path))
        stacked.append(pool_mod.top_candidates(run, deepest, ties=ties).assign(arm=str(arm)))
    table, _, _ = pool_mod.build_pool(
        ranking.canonical_ranking(pd.concat(stacked, ignore_index=True), ties=ties),
        depth=depth, tail_sample=cfg.tail_sample, tail_depth=cfg.tail_depth,
        rng=stage_rng(seed, "pool"))
    version = pool_mod.pool_manifest(table, seed=seed, depth=depth, tail_sample=cfg.tail_sample,
                                     tail_depth=cfg.tail_depth, arms=list(arms))["pool_version"]
    now_path, manifest_path = ex.path("pool"), ex.path("pool_manifest")
    now = (read_table(now_path, columns=["query_id", "chunk_id"]) if now_path.exists()
           else table.iloc[0:0])
    have = set(zip(now["query_id"].astype(str), now["chunk_id"].astype(str)))
    new_pairs = sum((q, c) not in have
                    for q, c in zip(table["query_id"].astype(str), table["chunk_id"].astype(str)))
    audit = ex.audit_ids() or []
    # a rater panel: the raters owe the queues the packets stage would deal from this pool
    # (same seeds, gold and re-deals), not the assignment of today's pool
    assignment = build_rater_orders(ex, table) if is_panel(ex) else None
    held = judgments(ex, table, audit, assignment=assignment)
    # every grader the status names (an extra auditor, a panel's expert included), counted
    # as the status counts them: spent every judgment its files hold, pending what it owes
    made = judgment_counts(pending_status(ex, held=held, table=pd.DataFrame({"grader": []})))
    counts = {g: {"spent": c["spent"], "pending": c["pending"]} for g, c in made.items()}
    seconds = prices(ex.params, counts)
    return {"depth": depth, "pool_version": version,
            "pool_version_now": (read_json(manifest_path).get("pool_version")
                                 if manifest_path.exists() else None),
            "pairs": int(len(table)), "pairs_now": len(have), "new_pairs": int(new_pairs),
            "cost": judging_cost(counts, seconds)}
