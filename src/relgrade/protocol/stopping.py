"""The stopping rule's record: the seeded grading order of the human sample, the looks taken,
and how many of its queries people owe now.

With params ``grading.stop: anytime`` people grade the locked human sample (ppi mode) in one
seeded order, ``grading.stop_batch`` queries at a time. After each batch the ppi stage looks
(:func:`relgrade.evaluation.anytime.run_stop`) and records the look here; once every verdict
is settled the record says where (``settled_at``) and nobody owes another query. What people
owe is counted from the grades recorded: queries at the head of the order they graded ahead of
the rule (in another order, or the whole sample before the rule was turned on) are read at the
next looks, batch by batch, and grades beyond a settled point are not read
(:func:`owed_count`). The record is a small JSON file in git (params ``paths.stop``), so the
order and every look can be checked:

``{"rule": "anytime", "round": 1, "sample_lock_sha256": "...", "seed": 0, "stream":
"stop-order", "order": ["q07", "q02", ...], "sample": 12, "batch": 4, "margin": 0.05,
"looks": [{"t": 4, "settled": false}, {"t": 8, "settled": true}], "settled_at": 8}``

Functions here are pure (lists and mappings in, the same out); the file is read and written by
:class:`relgrade.experiment.files.Experiment` and the stages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from relgrade.errors import InputError
from relgrade.rng import stage_rng

#: The stream of params ``seed`` the grading order is drawn from.
ORDER_STREAM = "stop-order"

#: The rule's name in params ``grading.stop`` and in the record.
ANYTIME = "anytime"


def grading_order(sample: Sequence[str], *, seed: int) -> list[str]:
    """The seeded order people grade the human sample in.

    Parameters
    ----------
    sample : sequence of str
        The locked sample's query ids (any order: they are sorted first, so the order depends
        only on the set and the seed).
    seed : int
        Params ``seed``; the permutation comes from its stream ``"stop-order"``.

    Returns
    -------
    list of str
        The sample's ids, permuted.

    Examples
    --------
    >>> grading_order(["b", "a", "c"], seed=0) == grading_order(["c", "b", "a"], seed=0)
    True
    """
    ids = sorted(map(str, sample))
    perm = stage_rng(seed, ORDER_STREAM).permutation(len(ids))
    return [ids[i] for i in perm]


def new_record(sample: Sequence[str], *, seed: int, batch: int, margin: float, level: float,
               round: int, lock_sha256: str) -> dict:  # noqa: A002
    """A record with no look yet: people owe the first batch."""
    order = grading_order(sample, seed=seed)
    return {"rule": ANYTIME, "round": int(round), "sample_lock_sha256": lock_sha256,
            "seed": int(seed), "stream": ORDER_STREAM, "order": order, "sample": len(order),
            "batch": int(batch), "margin": float(margin), "level": float(level),
            "looks": [], "settled_at": None}


def matches(record: Mapping | None, *, round: int, lock_sha256: str) -> bool:  # noqa: A002
    """Whether ``record`` belongs to this round's locked sample."""
    return bool(record) and record.get("round") == int(round) \
        and record.get("sample_lock_sha256") == lock_sha256


def graded_prefix(order: Sequence[str], graded) -> int:
    """How many queries at the head of ``order`` people have graded (``graded``: a set of
    query ids), counted up to the first one they have not.

    Examples
    --------
    >>> graded_prefix(["q3", "q1", "q2"], {"q3", "q2"})
    1
    """
    n = 0
    for q in order:
        if q not in graded:
            break
        n += 1
    return n


def owed_count(record: Mapping, *, batch: int, graded=frozenset()) -> int:
    """How many queries of the order the rule reads now (people owe those not yet graded).

    The settled point once settled; else the last look plus one batch (``batch``, the params'
    current batch size), at most the whole sample; the first batch before any look. Queries
    people graded ahead of the rule count too: when the head of the order up to query ``k``
    is graded (``graded``, the sample's query ids the human grader has grades of, in any
    order), the rule reads at least those ``k``, so the next look takes them in. Grades
    beyond a settled point are not read (the rule decided at its stop).

    Examples
    --------
    >>> r = {"order": ["a", "b", "c", "d", "e"], "sample": 5, "looks": [], "settled_at": None}
    >>> owed_count(r, batch=2), owed_count(r, batch=2, graded={"a", "b", "c", "e"})
    (2, 3)
    >>> owed_count(r | {"settled_at": 2}, batch=2, graded=set("abcde"))
    2
    """
    size = int(record["sample"])
    if record.get("settled_at") is not None:
        return int(record["settled_at"])
    looks = record.get("looks") or []
    seen = int(looks[-1]["t"]) if looks else 0
    return max(min(size, seen + int(batch)),
               graded_prefix(list(record["order"]), set(map(str, graded))))


def owed_queries(record: Mapping, *, batch: int, graded=frozenset()) -> list[str]:
    """The first :func:`owed_count` queries of the record's order."""
    return list(record["order"])[: owed_count(record, batch=batch, graded=graded)]


def next_look(record: Mapping, *, batch: int) -> int:
    """Where the rule looks next: the last look plus ``batch`` (the first batch before any
    look), at most the whole sample."""
    looks = record.get("looks") or []
    seen = int(looks[-1]["t"]) if looks else 0
    return min(int(record["sample"]), seen + int(batch))


def check_unchanged(record: Mapping, *, margin: float, level: float, seed: int,
                    path=None) -> None:
    """Refuse a change of the rule's settings once a look was taken.

    A margin, level or seed chosen after seeing how the sequences stand is no longer the rule
    whose error the looks control.

    Raises
    ------
    InputError
        ``grading.stop_margin``, ``ppi.level`` or ``seed`` differs from the record's and the
        record holds a look.
    """
    if not record.get("looks"):
        return
    now = {"grading.stop_margin": float(margin), "ppi.level": float(level), "seed": int(seed)}
    was = {"grading.stop_margin": float(record["margin"]),
           "ppi.level": float(record["level"]), "seed": int(record["seed"])}
    changed = [k for k in now if now[k] != was[k]]
    if changed:
        k = changed[0]
        raise InputError(f"{k} changed after the stopping rule's first look", path=path,
                         item=k, found=f"{now[k]} (the looks were taken with {was[k]})",
                         fix="restore it, or start a new round (grading.round) with a new "
                             "human sample")
