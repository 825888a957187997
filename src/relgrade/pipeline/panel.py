"""A rater panel on disk (``grading.mode: raters``): queues, packets, pending work, the expert.

The files of a panel, all under params ``paths``:

* ``assignment``: the private queue table, one row per (rater, pair) with its display
  order and the ``work`` / ``gold`` flags (:data:`relgrade.raters.assign.RATER_ORDERS`);
  written by the packets stage, never shown to a rater;
* ``packets/rater/NAME/QUERY_ID.json``: each rater's packets, gold and work chunks alike;
* ``rater_grades``: the grades stage's table of every grader's current grades;
* ``aggregate`` (report), ``aggregated`` (per pair), ``adjudication_queue`` and
  ``adjudication_packets`` (the expert's packets): the aggregation stage's outputs;
* ``adjudication`` (provenance of the expert's grades) and ``grades`` (the table agreement,
  gate and key read, with the key grader's rows): the adjudication stage's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from relgrade.errors import InputError
from relgrade.io import files as io
from relgrade.protocol import bank
from relgrade.raters.assign import (
    assign_pairs,
    check_panel_gold,
    rater_orders,
    rater_queues,
    redeal,
    select_gold,
)
from relgrade.raters.panel import removed_on_gold
from relgrade.rng import stage_rng
from relgrade.schema import PENDING

#: The adjudication stage's ``why`` of a pair the expert owes.
ADJUDICATE = "adjudicate"


def is_panel(ex) -> bool:
    """Whether the experiment grades with a rater panel (params ``grading.mode: raters``)."""
    return ex.params.grading.mode == "raters"


def raters_of(ex) -> list[str]:
    """The graders with role ``rater``, sorted by name."""
    return sorted(n for n, g in ex.params.graders.items() if g.role == "rater")


def read_gold(ex, pool: pd.DataFrame) -> pd.DataFrame | None:
    """The gold table (params ``gold.input``), checked against the pool and the scale.

    Returns
    -------
    pandas.DataFrame or None
        ``query_id``, ``chunk_id``, ``grade``; None when params declare no ``gold``.

    Raises
    ------
    InputError
        The file is missing or malformed, a gold pair is not in the pool, or a gold grade
        is off the scale (see :func:`relgrade.raters.assign.check_panel_gold`).
    """
    gold = ex.params.gold
    if gold is None:
        return None
    path = ex.file(gold.input)
    if not path.exists():
        raise InputError("gold file not found", path=path, item="gold.input")
    table = io.read_table(path)
    return check_panel_gold(table, pool=pool, scale=ex.params.need("scale").grades, path=path)


def check_gold_file(path, *, scale, queries=None) -> pd.DataFrame:
    """A gold file given to ``relgrade init --gold``, checked before the pool exists.

    The rules of the packets stage (:func:`read_gold`,
    :func:`relgrade.raters.assign.check_panel_gold`) with their messages, except that a
    pair's place in the pool cannot be checked yet: the packets stage checks it once the pool
    exists. A pair whose query is not one of the experiment's queries can never be pooled,
    and is refused here.

    Parameters
    ----------
    path : str or os.PathLike
        The gold file (TSV, JSONL, CSV or Parquet: ``query_id``, ``chunk_id``, ``grade``).
    scale : iterable of int
        The grade scale params will hold (``scale.grades``).
    queries : iterable of str, optional
        The experiment's query ids; None to skip that check.

    Returns
    -------
    pandas.DataFrame of shape (n_gold, 3)
        As :func:`relgrade.raters.gold.check_gold`.

    Raises
    ------
    InputError
        A column is missing, an id empty, a grade missing, not a whole number or off the
        scale, a pair listed twice, or a pair's query not among ``queries``; each names the
        file and the pair.
    """
    known = check_panel_gold(io.read_table(path), pool=None, scale=scale, path=path)
    if queries is not None:
        ids = set(map(str, queries))
        outside = known[~known["query_id"].isin(ids)]
        if len(outside):
            row = outside.iloc[0]
            raise InputError("a gold pair is not in the pool", path=path,
                             item=f"pair ({row['query_id']}, {row['chunk_id']})",
                             found=f"query {row['query_id']} is not one of the experiment's "
                                   "queries",
                             fix="Gold questions are pool pairs with a known grade")
    return known


def build_rater_orders(ex, pool: pd.DataFrame, *, on_dealt=None) -> pd.DataFrame:
    """Every rater's queue in display order, gold among the work (the private assignment table).

    The gold questions are drawn from ``stage_rng(seed, "gold")``
    (:func:`relgrade.raters.assign.select_gold`) and the assignment from
    ``stage_rng(seed, "raters")`` (:func:`relgrade.rng.stage_rng`), so both are rebuilt
    exactly from params ``seed``. Every pool pair, gold or not, goes to ``raters.per_pair``
    raters; the gold questions are dealt first, so each rater gets its share of them. With
    gold, the open pairs of a rater removed on their grades so far are dealt again
    (:func:`dealt_queues`); ``on_dealt``, when given, is called with the :class:`Dealt`.

    It writes nothing: the packets stage writes its result as the assignment, and a plan
    (:func:`relgrade.pipeline.cost.plan_pool`) prices a pool not made yet from it.

    Parameters
    ----------
    pool : pandas.DataFrame
        The pool (``query_id``, ``chunk_id``), made or only planned.

    Returns
    -------
    pandas.DataFrame
        :data:`relgrade.raters.assign.RATER_ORDERS`, one row per (rater, pair).

    Raises
    ------
    InputError
        The gold file is missing or malformed, or a gold pair is not in ``pool``
        (:func:`read_gold`); the gold file holds too few of ``pool``'s pairs for params
        ``gold.fraction`` (naming the params file); as :func:`dealt_queues`.
    """
    seed, grading = ex.params.need("seed"), ex.params.grading
    gold = read_gold(ex, pool)
    if gold is not None:
        try:
            gold = select_gold(gold, pool=pool, fraction=ex.params.gold.fraction,
                               rng=stage_rng(seed, "gold"))
        except InputError as e:  # a params rule: name the params file, as params errors do
            if e.path is not None:
                raise
            raise InputError(e.rule, path=ex.params.source, item=e.item, found=e.found,
                             fix=e.fix) from None
    assignment = assign_pairs(pool, raters_of(ex), per_pair=ex.params.need("raters").per_pair,
                              rng=stage_rng(seed, "raters"), first=gold)
    queues = rater_queues(assignment, gold)
    if gold is not None:
        dealt = dealt_queues(ex, pool, queues)
        queues = dealt.queues
        if on_dealt is not None:
            on_dealt(dealt)
    return rater_orders(queues, seed=seed, round=grading.round,
                        batch_size=grading.batch_size)


@dataclass(frozen=True)
class Dealt:
    """The queues once every rater removed on gold has had their pairs dealt again.

    Attributes
    ----------
    queues : pandas.DataFrame
        :data:`relgrade.raters.assign.QUEUE`, the dealt rows included.
    removed : tuple of str
        The raters removed on gold, sorted.
    dealt : int
        Rows added for the raters who stay.
    short : tuple of (str, str)
        Pairs no staying rater could take.
    """

    queues: pd.DataFrame
    removed: tuple = ()
    dealt: int = 0
    short: tuple = ()


def rater_bank(ex) -> tuple[pd.DataFrame, dict]:
    """The raters' judgment bank of this round and what a grade must be made on now.

    Returns
    -------
    judged : pandas.DataFrame
        :data:`relgrade.schema.BANK` rows of the raters' grade files of params
        ``grading.round`` (empty when none is written yet).
    now : dict
        :func:`relgrade.pipeline.judgments.current_now`; empty when no rater has a grade
        file of the round.

    Raises
    ------
    InputError
        A grade file or its sidecar breaks a rule of
        :func:`relgrade.protocol.grades.judgment_bank`.
    """
    from relgrade.pipeline.judgments import current_now
    from relgrade.protocol import grades

    grading = ex.params.grading
    rules = dict(graders=ex.params.graders_dict(), scale=ex.params.need("scale").grades,
                 max_reason_words=grading.max_reason_words,
                 max_reason_chars=grading.max_reason_chars)
    raters = set(raters_of(ex))
    files = {n: [ex.grader_file(f)] for n, f in
             sorted(ex.grader_round_files(int(grading.round)).items()) if n in raters}
    if not files:  # nothing graded yet: nothing to judge currency against
        return grades.judgment_bank({n: [] for n in sorted(raters)}, **rules), {}
    return grades.judgment_bank(files, **rules), current_now(ex)


def dealt_queues(ex, pool: pd.DataFrame, queues: pd.DataFrame) -> Dealt:
    """The queues with the open pairs of every rater removed on gold dealt to raters who stay.

    A rater is removed by the aggregate stage's rule (:func:`removed_raters`: the raters'
    current grades of their queued pairs, scored on their gold questions), as soon as
    their grades so far meet it: their grades are discarded then, so grading on would be
    work for nothing. Each pair of their queue they hold no current grade of (their open
    work) goes to a rater who stays
    (:func:`relgrade.raters.assign.redeal`, ties broken by ``stage_rng(seed, "redeal")``).
    A dealt pair that is a gold question scores whoever answers it, so a removal can
    follow from dealt work: the rule is applied again to the dealt queues until no one
    more is removed (at most once per rater).

    Parameters
    ----------
    pool : pandas.DataFrame
        The pool (``query_id``, ``chunk_id``).
    queues : pandas.DataFrame
        :func:`relgrade.raters.assign.rater_queues`' table, as first dealt from ``seed``.

    Returns
    -------
    Dealt

    Raises
    ------
    InputError
        As :func:`rater_bank` and :func:`removed_raters`.
    """
    judged, now = rater_bank(ex)
    seed = ex.params.need("seed")
    graded = set()
    if len(judged):
        cur = bank.current_grades(judged, **now)
        graded = set(zip(cur["grader"].astype(str), cur["query_id"].astype(str),
                         cur["chunk_id"].astype(str)))
    removed: set[str] = set()
    current, short = queues, []
    while True:
        found = set(removed_raters(ex, judged, now, pool, current))
        if found <= removed:
            break
        removed |= found
        rows = queues[queues["grader"].astype(str).isin(removed)]
        keep = [(str(g), str(q), str(c)) not in graded
                for g, q, c in zip(rows["grader"], rows["query_id"], rows["chunk_id"])]
        rows = rows[pd.Series(keep, index=rows.index, dtype=bool)]
        current, short = redeal(queues, rows, rng=stage_rng(seed, "redeal"))
    return Dealt(current, tuple(sorted(removed)), len(current) - len(queues), tuple(short))


def gold_questions(gold: pd.DataFrame | None, queues: pd.DataFrame) -> pd.DataFrame | None:
    """The rows of the gold table the queues hold as gold questions (``gold`` flag set).

    Raters are scored on these pairs only: a pair of the gold file left out by
    :func:`relgrade.raters.assign.select_gold` was graded as work, not as a gold question.

    Parameters
    ----------
    gold : pandas.DataFrame or None
        The gold table (:func:`read_gold`).
    queues : pandas.DataFrame
        The private assignment table (``query_id``, ``chunk_id``, ``gold``).

    Returns
    -------
    pandas.DataFrame or None
        ``gold``'s rows whose pair is flagged gold in some queue; None when ``gold`` is None.
    """
    if gold is None:
        return None
    flagged = queues[queues["gold"].astype(bool)]
    asked = set(zip(flagged["query_id"].astype(str), flagged["chunk_id"].astype(str)))
    keep = [(str(q), str(c)) in asked for q, c in zip(gold["query_id"], gold["chunk_id"])]
    return gold[pd.Series(keep, index=gold.index, dtype=bool)].reset_index(drop=True)


def queued_grades(grades: pd.DataFrame, queues: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The raters' grades of pairs in their current queues, and how many were set aside.

    A grade recorded under an earlier assignment (before the pool, the raters or the gold
    questions changed) stays in the judgment bank but does not count: a pair's grades are
    those of the raters it is dealt to now, ``raters.per_pair`` of them.

    Parameters
    ----------
    grades : pandas.DataFrame
        Long grades (``grader``, ``query_id``, ``chunk_id``, ...). Not modified.
    queues : pandas.DataFrame
        The private assignment table (``grader``, ``query_id``, ``chunk_id``).

    Returns
    -------
    (pandas.DataFrame, int)
        The rows of ``grades`` whose (grader, pair) is queued, index reset; the number of
        rows left out.
    """
    queued = set(zip(queues["grader"].astype(str), queues["query_id"].astype(str),
                     queues["chunk_id"].astype(str)))
    keep = pd.Series([(g, q, c) in queued for g, q, c in
                      zip(grades["grader"].astype(str), grades["query_id"].astype(str),
                          grades["chunk_id"].astype(str))], index=grades.index, dtype=bool)
    return grades[keep].reset_index(drop=True), int((~keep).sum())


def read_assignment(ex) -> pd.DataFrame:
    """The private assignment table the packets stage wrote.

    Raises
    ------
    InputError
        It does not exist yet (the fix names ``dvc repro packets``).
    """
    path = ex.path("assignment")
    if not path.exists():
        raise InputError("the raters' assignment does not exist yet", path=path,
                         fix="Run: dvc repro packets")
    return io.read_table(path)


def removed_raters(ex, judged: pd.DataFrame, now: dict, pool: pd.DataFrame,
                   queue: pd.DataFrame) -> list[str]:
    """The raters the aggregation stage removes on gold, from the bank's current grades.

    The same rule and the same grades as the ``aggregate`` stage (the raters' current
    grades of this round's queued pairs, scored on their gold questions), so a rater it
    removes is owed nothing: their grades are discarded whatever they add.

    Parameters
    ----------
    judged : pandas.DataFrame
        The judgment bank of the round (:data:`relgrade.schema.BANK`).
    now : dict
        What a grade must be made on now.
    pool : pandas.DataFrame
        The pool (``query_id``, ``chunk_id``).
    queue : pandas.DataFrame
        The private assignment table (:func:`read_assignment`).

    Returns
    -------
    list of str
        Removed raters, sorted; empty without params ``gold``.

    Raises
    ------
    InputError
        The gold file is missing or malformed (:func:`read_gold`).
    """
    p = ex.params
    if p.gold is None or not len(judged):
        return []
    current = bank.current_grades(judged, **now)
    mine = current[current["grader"].astype(str).isin(raters_of(ex))
                   & (current["round"].astype(int) == int(p.grading.round))]
    mine, _ = queued_grades(mine[["query_id", "chunk_id", "grader", "grade"]], queue)
    return removed_on_gold(mine, queues=queue, gold=gold_questions(read_gold(ex, pool), queue),
                           min_accuracy=p.gold.min_accuracy, min_gold=p.gold.min_gold)


def removed_now(ex) -> list[str]:
    """The raters removed on gold by their grades so far (:func:`removed_raters` over the
    assignment the packets stage wrote); empty without ``gold``, or before the pool and the
    assignment exist.

    Raises
    ------
    InputError
        As :func:`rater_bank` and :func:`removed_raters`.
    """
    if ex.params.gold is None or not ex.path("pool").exists() \
            or not ex.path("assignment").exists():
        return []
    pool = io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    judged, now = rater_bank(ex)
    return removed_raters(ex, judged, now, pool, read_assignment(ex))


def rater_pending(ex, judged: pd.DataFrame, now: dict, pool: pd.DataFrame, *,
                  queue: pd.DataFrame | None = None) -> pd.DataFrame:
    """The pairs each rater still owes: their queue (work and gold alike) less current grades;
    nothing for a rater removed on gold (:func:`removed_raters`).

    Parameters
    ----------
    judged : pandas.DataFrame
        The judgment bank of the round (:data:`relgrade.schema.BANK`).
    now : dict
        What a grade must be made on now (``content``, ``intents``, ``rubric_sha256``,
        ``rubric_version``).
    pool : pandas.DataFrame
        The pool (``query_id``, ``chunk_id``).
    queue : pandas.DataFrame, optional
        The assignment to count against (:func:`build_rater_orders` of a pool not made yet);
        None: the one the packets stage wrote (:func:`read_assignment`).

    Returns
    -------
    pandas.DataFrame
        :data:`relgrade.schema.PENDING`, ``why`` ``"new"`` or ``"stale"``, raters in name
        order.

    Raises
    ------
    InputError
        ``queue`` is None and the packets stage has written no assignment.
    """
    if queue is None:
        queue = read_assignment(ex)
    removed = set(removed_raters(ex, judged, now, pool, queue))
    status = bank.currency(judged, **now) if len(judged) else pd.Series([], dtype=str)
    frames = []
    for name, mine in queue.groupby("grader", sort=True):
        if name in removed:
            continue
        rows = judged["grader"].astype(str) == name
        keys = list(zip(judged.loc[rows, "query_id"].astype(str),
                        judged.loc[rows, "chunk_id"].astype(str)))
        current = {k for k, s in zip(keys, status[rows]) if s == "current"}
        graded = set(keys)
        owed = [(name, q, c, bank.STALE if (q, c) in graded else bank.NEW)
                for q, c in sorted(zip(mine["query_id"], mine["chunk_id"]))
                if (q, c) not in current]
        frames.append(pd.DataFrame(owed, columns=PENDING))
    if not frames:
        return pd.DataFrame(columns=PENDING)
    return pd.concat(frames, ignore_index=True)


def expert_pending(ex) -> pd.DataFrame:
    """The queued pairs the expert has not graded yet (empty when there is no queue file).

    Returns
    -------
    pandas.DataFrame
        :data:`relgrade.schema.PENDING` with ``why`` ``"adjudicate"``.
    """
    expert = ex.params.adjudication.expert
    if not getattr(ex.params.paths, "adjudication_queue", None):
        return pd.DataFrame(columns=PENDING)
    path = ex.path("adjudication_queue")
    if not path.exists():
        return pd.DataFrame(columns=PENDING)
    queued = [(str(r["query_id"]), str(r["chunk_id"])) for r in io.read_jsonl(path)]
    done = set()
    if expert is not None:
        f = ex.grader_files(expert).grades
        if f.exists():
            done = {(str(r.get("query_id")), str(r.get("chunk_id")))
                    for _, r in io.iter_jsonl(f)}
    rows = [(expert or "(no expert declared)", q, c, ADJUDICATE)
            for q, c in sorted(queued) if (q, c) not in done]
    return pd.DataFrame(rows, columns=PENDING)
