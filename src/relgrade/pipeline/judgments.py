"""The judgment bank as the experiment holds it: every round's grade files, what is current,
what a partial regrade owes.

The grades stage, the packets stage and ``relgrade status`` all need the same answer to
"which grades count for this round, and what is still owed"; it is computed here, once, from
the experiment's files, with the table rules of :mod:`relgrade.protocol.bank`,
:mod:`relgrade.protocol.grades` and :mod:`relgrade.protocol.regrade`. What each grader has
made and still owes (:func:`pending_status`) is computed here too, once, for ``relgrade
status`` and for the grades manifest the decision report prices the judging from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pandas as pd

from relgrade.experiment import revisions
from relgrade.pipeline import sharing
from relgrade.io import files as io
from relgrade.protocol import bank, bank_columns, grades, regrade, triage
from relgrade.schema import PENDING


@dataclass
class Judgments:
    """The bank of the current round's chain and what it owes.

    Attributes
    ----------
    bank : pandas.DataFrame
        :data:`relgrade.schema.BANK` plus ``sequence``: every grade of the rounds in
        ``rounds``, less the earlier rounds' grades of pairs this round regrades.
    files : dict of str to GraderFile
        Each grader's file of the current round (for the grades manifest: its source,
        sha256, round and meta; its rows and bank lines are in ``bank``, not kept here).
    rounds : list of int
        The chain of rounds merged (:func:`relgrade.protocol.regrade.round_chain`).
    scope : pandas.DataFrame or None
        The pairs a partial round regrades (``query_id``, ``chunk_id``); None for a full round.
    now : dict
        What a grade must be made on to be current: ``content``, ``intents`` (Series of
        sha256), ``rubric_sha256``, ``rubric_version``, ``carry`` (the rubric's revision
        chain: :func:`relgrade.experiment.revisions.carry`).
    pending : pandas.DataFrame
        :data:`relgrade.schema.PENDING`: who owes which pool pair, and why.
    round_pairs : pandas.DataFrame
        The pairs the round's packets hold (``query_id``, ``chunk_id``): the whole pool for a
        full round; for a partial one, the scope and whatever the earlier rounds left owed.
        It depends on earlier rounds only, so it stays fixed while the round is graded.
    triage_queue : pandas.DataFrame or None
        Triage mode: :data:`relgrade.schema.TRIAGE_QUEUE` once the triage grader has graded
        every pool pair; None before that, and outside triage mode.
    triage_grader : str or None
        Triage mode: the model grader of role triage.
    shared : pandas.DataFrame or None
        The grades reused from other experiments (params ``grading.share_from``;
        :func:`relgrade.pipeline.sharing.reuse`: their bank rows plus ``origin``), already
        in ``bank`` as grades of the current round; None when nothing is shared.
    ignored : pandas.DataFrame or None
        A partial round: its grades of pairs outside ``round_pairs`` (neither in the scope
        nor owed), left out of ``bank`` (``grader``, ``query_id``, ``chunk_id``, ``grade``);
        None for a full round.
    owed_by : dict of str to set of (str, str), or None
        A partial round: per grader, the pairs it owes this round (the key grader the scope
        and its own new pairs; the auditor the scope on audited queries and its audit
        pairs); its packets hold exactly these. None for a full round.
    made : dict of str to int
        Per grader, every judgment its own files of every round up to the current one hold
        (those outside ``rounds`` included: a full round sets the earlier rounds' grades
        aside, but they were made): each one was made (and paid for), whether it is current,
        stale, of a pair that left the pool, superseded by a regrade or ignored by a partial
        round. Grades reused from other experiments are not counted (they were made there).
    made_by_round : dict of str to dict of int to int
        ``made`` per grader and round (rounds ascending; a round without a file of the
        grader is left out).
    others_pending : pandas.DataFrame or None
        :data:`relgrade.schema.PENDING` of the other declared graders of role ``grader`` or
        ``auditor`` (an extra auditor, say): the pool pairs (an auditor: of the audited
        queries) they lack a current grade of. The grades stage does not wait for them; the
        judging cost counts them. None with a rater panel.
    """

    bank: pd.DataFrame
    files: dict
    rounds: list
    scope: pd.DataFrame | None
    now: dict
    pending: pd.DataFrame
    round_pairs: pd.DataFrame
    triage_queue: pd.DataFrame | None = None
    triage_grader: str | None = None
    shared: pd.DataFrame | None = None
    ignored: pd.DataFrame | None = None
    owed_by: dict | None = None
    made: dict = field(default_factory=dict)
    made_by_round: dict = field(default_factory=dict)
    others_pending: pd.DataFrame | None = None

    def merged_counts(self) -> dict:
        """Per grader, how many of the current round's grades were merged (a partial round)."""
        rnd = max(self.rounds)
        mine = self.bank[self.bank["round"].astype(int) == rnd]
        return {str(g): int(n) for g, n in mine.groupby("grader").size().items()}


def round_modes(ex, rounds) -> dict[int, str]:
    """Each round's regrade mode: params for the current round, the grade files' sidecars
    (``regrade``, written when the round was graded) for earlier ones; ``"all"`` when unknown."""
    current = int(ex.params.grading.round)
    modes = {current: ex.params.grading.regrade}
    for r in rounds:
        if r == current:
            continue
        for files in ex.grader_round_files(r).values():
            if files.meta.exists():
                mode = io.read_json(files.meta).get("regrade")
                if mode in (regrade.ALL, regrade.RELEVANT):
                    modes[r] = mode
                    break
    return modes


def current_now(ex, *, chunks: pd.DataFrame | None = None) -> dict:
    """What a grade must be made on today: the chunks, intents and rubric as they are.

    ``chunks`` (``chunk_id``, ``header``, ``text``) stands for the built chunk table: the
    corpus as it will be once the corpus stage has run on an edited input.
    """
    if chunks is None:
        chunks = io.read_table(ex.path("chunks"), columns=["chunk_id", "header", "text"])
    return dict(
        content=bank.content_sha256(chunks),
        intents=bank.intent_sha256(io.read_table(ex.path("intents"),
                                                 columns=["query_id", "intent"])),
        rubric_sha256=ex.rubric_sha256(), rubric_version=ex.params.grading.rubric_version,
        carry=revisions.carry(ex))


def judgments(ex, pool: pd.DataFrame, audit_ids, *,
              chunks: pd.DataFrame | None = None,
              assignment: pd.DataFrame | None = None) -> Judgments:
    """The current round's judgments for ``pool``: merged bank, partial scope, pending work.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.
    pool : pandas.DataFrame
        The current pool (``query_id``, ``chunk_id``).
    audit_ids : iterable of str
        The locked audit sample.
    chunks : pandas.DataFrame, optional
        The chunk table to judge currency against instead of the built one (see
        :func:`current_now`): what would be pending after an edit of the corpus.
    assignment : pandas.DataFrame, optional
        With a rater panel, the raters' queues to count what they owe against
        (:func:`relgrade.pipeline.panel.build_rater_orders` of ``pool``, for a pool not made
        yet); None: the assignment the packets stage wrote.

    Returns
    -------
    Judgments

    Raises
    ------
    InputError
        A grade file or its sidecar breaks a rule of
        :func:`relgrade.protocol.grades.judgment_bank`; a share source is refused
        (:func:`relgrade.pipeline.sharing.sources`).
    """
    grading = ex.params.grading
    current = int(grading.round)
    chain = regrade.round_chain(current, round_modes(ex, range(1, current + 1)))
    by_grader: dict[str, list] = {}
    for r in chain:
        for name, f in ex.grader_round_files(r).items():
            by_grader.setdefault(name, []).append((r, f))
    rules = dict(graders=ex.params.graders_dict(), scale=ex.params.need("scale").grades,
                 max_reason_words=grading.max_reason_words,
                 max_reason_chars=grading.max_reason_chars)
    # the bank's rows as judgment_bank orders them (graders by name, rounds in chain order),
    # one file read at a time: its rows and bank lines are let go once they are in the table
    judged = grades.judgment_bank({name: [] for name in by_grader}, **rules)
    parts, files = [], {}
    for name in sorted(by_grader):
        for r, f in by_grader[name]:
            gf = ex.grader_file(f)
            parts.append(grades.judgment_bank({name: [gf]}, **rules))
            if r == current:
                files[name] = replace(gf, rows=(), bank=None, columns=None, load_bank=None,
                                      blocks=None)
            del gf
    if parts:
        # the made-on columns stay categorical (pandas.concat would spell out every row's
        # hash as a string when the graders' categories differ), and the parts go at once
        judged = bank_columns.concat_bank(parts)
    del parts
    # every judgment of every round's own files (the chain's before sharing, regrades or
    # currency set any aside; earlier full rounds' too): what was made, and so paid for
    made_by_round = judgments_made(ex, judged, rounds=chain)
    made = {g: sum(by_round.values()) for g, by_round in made_by_round.items()}
    now = current_now(ex, chunks=chunks)
    shared = sharing.shared_grades(ex, judged, pool, now=now)
    if shared is not None:  # reused grades count as this round's; own rows are origin ""
        judged = pd.concat([judged.assign(origin=sharing.OWN),
                            shared.assign(round=current)], ignore_index=True)
    key_grader = ex.params.need("grading.key_grader")
    auditor = ex.params.need("grading.auditor")
    scope = None
    round_pairs = pool[["query_id", "chunk_id"]].astype(str)
    if len(chain) > 1:
        before = bank.current_grades(judged[judged["round"] < current], **now)
        scope = regrade.scope(before, pool, graders=[key_grader, auditor],
                              relevant_min=ex.params.need("scale").relevant_min)
        judged = judged[~regrade.superseded(judged, scope, round=current)]
        owed = bank.pending_work(pool, judged[judged["round"] < current],
                                 key_grader=key_grader, auditor=auditor,
                                 audit_ids=audit_ids, **now)
        wanted = set(zip(owed["query_id"], owed["chunk_id"]))
        keep = [(q, c) in wanted for q, c in zip(round_pairs["query_id"],
                                                   round_pairs["chunk_id"])]
        round_pairs = round_pairs[pd.Series(keep, index=round_pairs.index, dtype=bool)]
        # what each grader owes this round: the key grader the scope and its own new pairs,
        # the auditor the scope on audited queries and its own audit pairs
        owed_by = {str(g): set(zip(rows["query_id"].astype(str), rows["chunk_id"].astype(str)))
                   for g, rows in owed.groupby("grader")}
        # this round's grades count only for the pairs its grader regrades or still owes: a
        # grade of any other pair would change a grade the partial round keeps from before
        inside = pd.Series([(str(q), str(c)) in owed_by.get(str(g), ())
                            for g, q, c in zip(judged["grader"], judged["query_id"],
                                               judged["chunk_id"])],
                           index=judged.index, dtype=bool)
        outside = (judged["round"].astype(int) == current) & ~inside
        ignored = judged.loc[outside, ["grader", "query_id", "chunk_id", "grade"]]
        judged = judged[~outside]
    else:
        ignored, owed_by = None, None
    queue, model, key_pairs = None, None, None
    if grading.mode == "triage":
        model = ex.params.triage_grader_name()
        queue = triage_queue(ex, judged, pool, now=now, grader=model)
        key_pairs = (triage.people_queue(queue) if queue is not None
                     else pool.iloc[0:0][["query_id", "chunk_id"]])
    pending = bank.pending_work(pool, judged, key_grader=key_grader, auditor=auditor,
                                audit_ids=audit_ids, regrade=scope, triage_grader=model,
                                key_pairs=key_pairs, **now)
    others = None
    if grading.mode == "raters":
        # the key grader is the panel's aggregate, made by the aggregation stage: the raters
        # owe their queues (work and gold alike), the auditor the audit queries
        from relgrade.pipeline.panel import rater_pending

        pending = pd.concat([rater_pending(ex, judged, now, pool, queue=assignment),
                             pending[pending["grader"] != key_grader]], ignore_index=True)
    else:
        others = others_pending(ex, judged, pool, audit_ids, now=now, regrade=scope,
                                 key_pairs=key_pairs, skip={key_grader, auditor, model})
    return Judgments(bank=judged, files=files, rounds=chain, scope=scope, now=now,
                     pending=pending, round_pairs=round_pairs, triage_queue=queue,
                     triage_grader=model, shared=shared, ignored=ignored, owed_by=owed_by,
                     made=made, made_by_round=made_by_round, others_pending=others)


def judgments_made(ex, judged: pd.DataFrame, *, rounds) -> dict[str, dict[int, int]]:
    """Per grader and round, the judgments its own files hold, every round up to params
    ``grading.round``.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.
    judged : pandas.DataFrame
        The judgment bank of the rounds in ``rounds`` (``grader``, ``round``), as read
        from the grade files, before sharing or regrades set any row aside.
    rounds : iterable of int
        The rounds ``judged`` holds; the other rounds' files are counted by their non-blank
        lines (one judgment each), unparsed: they were checked when their round was graded.

    Returns
    -------
    dict
        Grader → {round: judgments}, graders in name order, rounds ascending.
    """
    sizes = {(str(g), int(r)): int(n)
             for (g, r), n in judged.groupby(["grader", "round"]).size().items()}
    return judgments_made_of(ex, sizes, rounds=rounds)


def judgments_made_of(ex, sizes: Mapping, *, rounds) -> dict[str, dict[int, int]]:
    """:func:`judgments_made` from the judgments counted per grader and round already.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.
    sizes : mapping of (str, int) to int
        (grader, round) → the rows its file of a round in ``rounds`` holds (none left out).
    rounds : iterable of int
        As for :func:`judgments_made`.

    Returns
    -------
    dict
        As :func:`judgments_made`.
    """
    rounds = {int(r) for r in rounds}
    out: dict[str, dict[int, int]] = {}
    for (g, r), n in sizes.items():
        if n:
            out.setdefault(str(g), {})[int(r)] = int(n)
    for r in range(1, int(ex.params.grading.round) + 1):
        if r in rounds:
            continue
        for name, f in ex.grader_round_files(r).items():
            n = sum(1 for line in io.read_lines(f.grades) if line.strip())
            if n:
                out.setdefault(str(name), {})[r] = n
    return {g: dict(sorted(out[g].items())) for g in sorted(out)}


def others_pending(ex, judged, pool, audit_ids, *, now, regrade, key_pairs,
                   skip) -> pd.DataFrame:
    """What the declared graders of role grader or auditor outside ``skip`` owe: counted by
    :func:`relgrade.protocol.bank.pending_work`'s rules, each as the key grader (the pool) or
    the auditor (the audited queries) it stands beside.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its graders).
    judged : pandas.DataFrame
        The judgment bank (:attr:`Judgments.bank`), or its rows of some whole queries.
    pool : pandas.DataFrame
        The pool (``query_id``, ``chunk_id``), or its pairs of the same queries.
    audit_ids : iterable of str
        The locked audit sample.
    now : dict
        What a grade must be made on to be current (:func:`current_now`).
    regrade, key_pairs
        As for :func:`relgrade.protocol.bank.pending_work`.
    skip : set of str
        Graders left out (the key grader, the auditor, the triage grader).

    Returns
    -------
    pandas.DataFrame
        :data:`relgrade.schema.PENDING`, graders in name order (empty when none owes).
    """
    key_grader = ex.params.need("grading.key_grader")
    auditor = ex.params.need("grading.auditor")
    frames = [pd.DataFrame(columns=PENDING)]
    for name, spec in sorted(ex.params.graders_dict().items()):
        if name in skip or spec["role"] not in ("grader", "auditor"):
            continue
        roles = ({"key_grader": name, "auditor": auditor} if spec["role"] == "grader"
                 else {"key_grader": key_grader, "auditor": name})
        owed = bank.pending_work(pool, judged, **roles, audit_ids=audit_ids, regrade=regrade,
                                 key_pairs=key_pairs, **now)
        frames.append(owed[owed["grader"] == name])
    return pd.concat(frames, ignore_index=True)


def triage_queue(ex, judged: pd.DataFrame, pool: pd.DataFrame, *, now: dict,
                 grader: str) -> pd.DataFrame | None:
    """The people's triage queue, once the triage grader holds a current grade of every pool
    pair (:func:`relgrade.protocol.triage.select_for_people`); None before that."""
    current = bank.current_grades(judged[judged["grader"].astype(str) == grader], **now)
    pairs = grades.pool_pairs_of(pool)
    keep = [(str(q), str(c)) in pairs for q, c in zip(current["query_id"], current["chunk_id"])]
    model = current[pd.Series(keep, index=current.index, dtype=bool)]
    if len(model) < len(pairs):
        return None
    p = ex.params
    return triage.select_for_people(
        model[["query_id", "chunk_id", "grade"]], relevant_min=p.need("scale").relevant_min,
        zero_sample=p.need("triage").zero_sample, seed=p.need("seed"), round=p.grading.round)


def owing_graders(ex, held: Judgments) -> tuple[list[str], pd.DataFrame]:
    """Who owes the round's work and the table of what they owe.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its graders and mode).
    held : Judgments
        The round's judgments (:func:`judgments`).

    Returns
    -------
    names : list of str
        The key grader and the auditor; in triage mode the triage grader; with a rater panel
        the raters and the auditor instead; then every other declared grader of role grader
        or auditor (an extra auditor).
    owing : pandas.DataFrame
        :attr:`Judgments.pending`, with :attr:`Judgments.others_pending` below it.
    """
    from relgrade.pipeline.panel import is_panel, raters_of

    key_grader = ex.params.need("grading.key_grader")
    auditor = ex.params.need("grading.auditor")
    names = [key_grader, auditor]
    if held.triage_grader is not None:  # triage mode: the model grader owes the pool too
        names.append(held.triage_grader)
    if is_panel(ex):  # the key grader is the aggregate: the raters are who owes the work
        names = [*raters_of(ex), auditor]
    if held.others_pending is None:
        return names, held.pending
    # other declared graders (an extra auditor, say)
    names += [g for g, spec in sorted(ex.params.graders_dict().items())
              if spec["role"] in ("grader", "auditor") and g not in names]
    return names, pd.concat([held.pending, held.others_pending], ignore_index=True)


def pending_status(ex, *, held: Judgments, table: pd.DataFrame,
                   adjudication: bool = True) -> dict:
    """Per grader, its judgments made, its current grades of the pool and the pairs it owes.

    ``relgrade status`` and the grades manifest (which the decision report prices the
    judging from) both take their counts from here, so the two say the same.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (for the pool version and the grader names).
    held : Judgments
        The round's judgments (:func:`judgments`).
    table : pandas.DataFrame
        The current grades table built from ``held`` (:data:`relgrade.schema.GRADES`).
    adjudication : bool, default True
        With a rater panel, count the adjudication queue's pairs the expert has not graded
        (``pending_adjudication``); the grades stage, which runs before the queue is built,
        leaves them out.

    Returns
    -------
    dict
        ``{"pool_version": str or None, "rounds": [int, ...], "graders": {name: {"made",
        "made_by_round", "current", "pending_new", "pending_stale", "pending_audit",
        "pending_regrade"}}}`` for the key grader and the auditor, then every other declared
        grader of role grader or auditor (an extra auditor owes its audited queries' pairs;
        :attr:`Judgments.others_pending`), and in triage mode the triage grader; with a
        panel the raters, the auditor and the expert. ``made`` is :attr:`Judgments.made`
        (every round's files), ``made_by_round`` :attr:`Judgments.made_by_round`;
        ``rounds`` lists the rounds merged (more than one in a partial regrade).
    """
    from relgrade.pipeline.panel import expert_pending, is_panel, raters_of, removed_now

    names, owing = owing_graders(ex, held)
    counts = bank.pending_counts(owing, names)
    manifest = ex.path("pool_manifest")
    version = io.read_json(manifest).get("pool_version") if manifest.exists() else None

    rechecks = recheck_judgments(ex)

    def entry(g):
        return {"made": int(held.made.get(g, 0)),
                "made_by_round": {int(r): int(n)
                                  for r, n in held.made_by_round.get(g, {}).items()},
                "current": int((table["grader"] == g).sum())} | (
            {"made_recheck": rechecks[g]} if rechecks.get(g) else {})

    out = {"pool_version": version, "rounds": list(held.rounds),
           "graders": {g: {**entry(g), **counts[g]} for g in names}}
    if is_panel(ex):
        owed = expert_pending(ex) if adjudication else None
        expert = ex.params.adjudication.expert
        if expert is not None:
            out["graders"][expert] = {
                **entry(expert), **bank.pending_counts(held.pending.iloc[:0], [expert])[expert]}
            if owed is not None:
                out["graders"][expert]["pending_adjudication"] = int(len(owed))
        if owed is not None:
            out["adjudication"] = {"expert": expert, "pending": int(len(owed)),
                                   "queries": sorted(owed["query_id"].unique().tolist())}
        out["raters"] = raters_of(ex)
        out["removed_on_gold"] = removed_now(ex)
    return out


def recheck_judgments(ex) -> dict[str, int]:
    """Per grader, the judgments it made for judges' re-checks: the non-blank lines of its
    files ``paths.grades_in/JUDGE/recheck/TAG/GRADER.jsonl`` (:mod:`relgrade.experiment.recheck`;
    the judge's own grades of the drawn pairs, and people's). They enter no key, but each
    was made, so the judging cost counts them.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (params ``paths.grades_in``).

    Returns
    -------
    dict of str to int
        Grader -> re-check judgments, only graders with at least one, in name order.
    """
    folder = ex.path("grades_in")
    out: dict[str, int] = {}
    for f in sorted(folder.glob("*/recheck/*/*.jsonl")) if folder.is_dir() else []:
        if f.name.endswith(".bank.jsonl"):
            continue
        n = sum(1 for line in io.read_lines(f) if line.strip())
        if n:
            out[f.stem] = out.get(f.stem, 0) + n
    return dict(sorted(out.items()))


def judgment_counts(pending: Mapping) -> dict[str, dict[str, int]]:
    """Per grader, the judgments spent and pending, from what it has made and owes.

    The one count behind ``relgrade status``'s judging cost and the decision report's (the
    grades stage records it in its manifest as ``judging``; both priced by
    :mod:`relgrade.pipeline.cost`), so the two say the same.

    Parameters
    ----------
    pending : mapping
        ``{"graders": {name: {"made", "current", "pending_..." ...}}}``
        (:func:`pending_status`).

    Returns
    -------
    dict
        Grader → ``{"spent": made + made_recheck, "pending": the sum of every pending_*
        count}``, plus ``"spent_by_round": {round (str): made that round}`` when the
        grader's files span more than one round, and ``"spent_recheck"`` when it made
        judges' re-check judgments (:func:`recheck_judgments`): spent is every judgment the
        grader's files of every round hold (stale, superseded by a regrade, set aside by a
        later full round or unused ones included: each was made, so paid for) and its
        re-check files, pending what
        it owes now for any reason (new, stale, audit, regrade, adjudication). The rounds are
        strings, as the grades manifest's JSON keeps them.

    Examples
    --------
    >>> judgment_counts({"graders": {"g": {"made": 12, "made_by_round": {1: 7, 2: 5},
    ...                                    "current": 10, "pending_new": 3,
    ...                                    "pending_regrade": 2},
    ...                              "h": {"made": 4, "made_by_round": {2: 4}, "current": 4,
    ...                                    "pending_audit": 1}}})
    {'g': {'spent': 12, 'pending': 5, 'spent_by_round': {'1': 7, '2': 5}}, 'h': {'spent': 4, 'pending': 1}}
    """
    out = {}
    for g, c in pending["graders"].items():
        recheck = int(c.get("made_recheck", 0))
        out[str(g)] = {"spent": int(c["made"]) + recheck,
                       "pending": int(sum(v for k, v in c.items() if k.startswith("pending_")))}
        if recheck:
            out[str(g)]["spent_recheck"] = recheck
        by_round = c.get("made_by_round") or {}
        if len(by_round) > 1:
            out[str(g)]["spent_by_round"] = {str(r): int(n) for r, n in by_round.items()}
    return out
