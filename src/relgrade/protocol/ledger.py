"""The void ledger: which keys have already been used for arm metrics.

Once metrics have been seen for a (pool version, rubric version, round), the key they were
computed from is the decision key. A key that differs for the same triple would let grades be
changed after seeing which arm they favour, so the run is void: the key stage refuses unless
params declare a new ``grading.round`` (a full blind regrade from fresh orders) or mark the run
``grading.post_hoc: true``, in which case every number built on it is labelled post-hoc.

One change is not a second look: when the text of a chunk, an intent line or the rubric
changes, the pairs that show it are regraded on something new. A key that differs from the
decision key only on such pairs is a **revision** (its record names the pairs and the content
they were regraded on); it becomes the decision key, and its ledger entry says which key it
``revises``. A grade that changes on unchanged content is still void.

In ppi mode the decision comes from the PPI++ estimates, whose human term is the human
grader's (``grading.auditor``) grades on the locked human sample: the **human key**. It falls
under the same rule. Once the ppi stage has written its estimates for a (pool version, rubric
version, round), the human key it used is recorded, and a different human key for the same
triple is void unless params declare a new round or ``grading.post_hoc: true`` (every ppi
number then labelled post-hoc); a human key that differs only on pairs whose chunk, intent
line or rubric changed and were regraded is a revision, decided as for the key
(:func:`relgrade.protocol.key.revision_pairs`). The human key's hash is the sha256 of its
canonical byte form, :func:`relgrade.protocol.key.key_bytes` of its ``(query_id, chunk_id,
grade)`` rows (one canonical JSON line per pair, in (query_id, chunk_id) order): the
grader's name is not part of it, so a renamed human grader with the same grades is the same
human key, and a grade folder deleted and imported again with other grades is a different one.

The ledger itself is a git-tracked JSON Lines file (params ``paths.ledger``), one entry per key
used for metrics: ``{"pool_version", "rubric_version", "round", "key_sha256", "used_at"}``
and, for a revision, ``"revises"``. An entry of a human key used by the ppi stage carries
``"kind": "ppi-human"`` after ``used_at`` (an entry without ``kind`` is a key's); its
``key_sha256`` is the human key's hash. Each kind has its own decision key: a key entry never
decides a human key, nor the reverse.
These functions work on its entries as a list of dicts; the stages read and write the file.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

from relgrade.errors import ProtocolError

LEDGER_KEYS = ("pool_version", "rubric_version", "round", "key_sha256", "used_at")

FRESH = "fresh"
SAME = "same"
REVISED = "revised"
POST_HOC = "post-hoc"

#: The kind of a ledger entry of a key used for metrics (entries without ``kind``).
KEY = "key"
#: The kind of a ledger entry of a human key used for PPI++ estimates (the ppi stage).
HUMAN = "ppi-human"
KINDS = (KEY, HUMAN)


def entry_kind(entry: Mapping) -> str:
    """An entry's kind: its ``kind``, or :data:`KEY` for an entry without one.

    Examples
    --------
    >>> entry_kind({"key_sha256": "k"}), entry_kind({"key_sha256": "h", "kind": "ppi-human"})
    ('key', 'ppi-human')
    """
    return str(entry.get("kind") or KEY)


def _triple(pool_version, rubric_version, round) -> tuple[str, str, int]:
    return str(pool_version), str(rubric_version), int(round)


def _entry_triple(entry: Mapping) -> tuple[str, str, int]:
    return _triple(entry["pool_version"], entry["rubric_version"], entry["round"])


def add_use(
    entries: Iterable[Mapping],
    *,
    pool_version: str,
    rubric_version: str,
    round: int,
    key_sha256: str,
    used_at: str,
    revises: str | None = None,
    kind: str = KEY,
    made_on_sha256: str | None = None,
) -> list[dict]:
    """The ledger with one more key used for metrics (idempotent).

    Parameters
    ----------
    entries : iterable of dict
        The ledger's entries, oldest first (not modified).
    pool_version, rubric_version : str
        The pool version (``p-`` + 12 hex digits) and rubric version the key was graded on.
    round : int
        The grading round (params ``grading.round``).
    key_sha256 : str
        The key's hash (64 hex digits).
    used_at : str
        When metrics were computed from it (UTC, ISO 8601).
    revises : str, optional
        The hash of the decision key this key revises because what some pairs were graded on
        changed (see :func:`check_void`); recorded as the entry's ``revises``.
    kind : {"key", "ppi-human"}, default "key"
        What was used: a key for metrics, or a human key for the ppi stage's estimates
        (recorded as the entry's ``kind``; a key's entry has none).
    made_on_sha256 : str, optional
        A human key's: the sha256 of its made-on file kept beside the ledger (what each
        of its grades was made on, :func:`relgrade.protocol.key.made_on_bytes`), so that a
        later human key can be checked to be a revision of it.

    Returns
    -------
    list of dict
        A new list: ``entries`` unchanged when the same (kind, pool_version, rubric_version,
        round, key_sha256) is already there (its first ``used_at`` is kept), else ``entries``
        plus one entry with the keys of :data:`LEDGER_KEYS`, in that order, then ``kind``
        (not for a key), ``made_on_sha256`` and ``revises`` when given.
    """
    out = [dict(e) for e in entries]
    triple = _triple(pool_version, rubric_version, round)
    for e in out:
        if (_entry_triple(e) == triple and e["key_sha256"] == key_sha256
                and entry_kind(e) == kind):
            return out
    entry = {
        "pool_version": str(pool_version),
        "rubric_version": str(rubric_version),
        "round": int(round),
        "key_sha256": str(key_sha256),
        "used_at": str(used_at),
    }
    if kind != KEY:
        entry["kind"] = str(kind)
    if made_on_sha256:
        entry["made_on_sha256"] = str(made_on_sha256)
    if revises:
        entry["revises"] = str(revises)
    out.append(entry)
    return out


def decision_key(entries: Iterable[Mapping], *, pool_version: str, rubric_version: str,
                 round: int, kind: str = KEY) -> str | None:
    """The decision key of a pool, rubric and round: the first key used for metrics, or the
    last revision of it (an entry whose ``revises`` names the decision key so far).

    ``kind`` (default ``"key"``) reads only the entries of that kind: ``"ppi-human"`` gives
    the decision human key of the ppi stage.

    Returns
    -------
    str or None
        Its hash; None when no key has been used for metrics on that triple.

    Examples
    --------
    >>> e = [{"pool_version": "p", "rubric_version": "v", "round": 1, "key_sha256": "k1"},
    ...      {"pool_version": "p", "rubric_version": "v", "round": 1, "key_sha256": "k9"},
    ...      {"pool_version": "p", "rubric_version": "v", "round": 1, "key_sha256": "k2",
    ...       "revises": "k1"}]
    >>> decision_key(e, pool_version="p", rubric_version="v", round=1)
    'k2'
    """
    triple = _triple(pool_version, rubric_version, round)
    used = [e for e in entries if _entry_triple(e) == triple and entry_kind(e) == kind]
    if not used:
        return None
    decision = used[0]["key_sha256"]
    for e in used[1:]:
        if e.get("revises") == decision:
            decision = e["key_sha256"]
    return decision


def check_void(
    entries: Iterable[Mapping],
    *,
    pool_version: str,
    rubric_version: str,
    round: int,
    key_sha256: str,
    post_hoc: bool,
    revises: str | None = None,
    kind: str = KEY,
    ledger_path=None,
    changed: Iterable = (),
) -> str:
    """Whether a key may be used, given the keys already used for metrics.

    Parameters
    ----------
    entries : iterable of dict
        The ledger's entries (see :func:`add_use`).
    pool_version, rubric_version : str
        The pool and rubric versions of the new key.
    round : int
        Its grading round.
    key_sha256 : str
        Its hash.
    post_hoc : bool
        Params ``grading.post_hoc``: a changed key is allowed, labelled post-hoc.
    revises : str, optional
        The hash of the decision key this key differs from only on pairs whose chunk
        content, intent line or rubric changed since (the caller compares the two keys'
        made-on tables, :func:`relgrade.protocol.key.content_revision`). Such pairs were
        regraded on something new, so the change is a revision, not a second look.
    kind : {"key", "ppi-human"}, default "key"
        Which decision key to compare with: a key used for metrics, or a human key used by
        the ppi stage (the void message then speaks of the human key).
    ledger_path : str or os.PathLike, optional
        The ledger file, named in the void message of a human key.
    changed : iterable of (query_id, chunk_id), optional
        The pairs whose grade differs from the decision key's (the caller's comparison),
        the first five named in the void message of a human key.

    Returns
    -------
    {"fresh", "same", "revised", "post-hoc"}
        ``"fresh"``: no key has been used for metrics for this pool, rubric and round;
        ``"same"``: this exact key was used before, as the first (decision) key of this pool,
        rubric and round (or its latest revision); ``"revised"``: ``revises`` names the
        decision key, which this key replaces as the decision key; ``"post-hoc"``: a different key was used first and ``post_hoc``
        allows this one, labelled post-hoc. A post-hoc key used again stays post-hoc: it
        never becomes the decision key.

    Raises
    ------
    ProtocolError
        ``void: ...`` when a different key was already used first for metrics for the same
        pool, rubric and round and ``post_hoc`` is false. The message names the old and new hash,
        the pool, rubric and round, and the two ways forward.

    Notes
    -----
    The protocol's rule: a grade changed after arm metrics have been seen voids the run; a
    corrected table may be reported beside it as post-hoc, but the decision stays with the
    frozen key or with a full blind regrade (a new round).
    """
    triple = _triple(pool_version, rubric_version, round)
    used = [e for e in entries if _entry_triple(e) == triple and entry_kind(e) == kind]
    decision = decision_key(entries, pool_version=pool_version, rubric_version=rubric_version,
                            round=round, kind=kind)
    if decision is None:
        return FRESH
    if decision == key_sha256:
        return SAME
    if revises is not None and revises == decision:
        return REVISED
    if post_hoc:
        return POST_HOC
    old = decision
    if kind == HUMAN:
        raise ProtocolError(human_void_message(
            old=old, new=key_sha256, triple=triple, used_at=used[0].get("used_at", "?"),
            ledger_path=ledger_path, changed=list(changed)))
    raise ProtocolError(
        f"void: key {old} was already used for metrics on pool {triple[0]}, rubric "
        f"{triple[1]}, round {triple[2]} (at {used[0].get('used_at', '?')}); this key differs "
        f"({key_sha256}). Either declare a new round (raise `grading.round` in the params file and "
        "regrade the whole pool blind from fresh orders) or set `grading.post_hoc: true` "
        "(every number is then labelled post-hoc)"
    )


def human_void_message(*, old: str, new: str, triple: tuple, used_at: str, ledger_path,
                       changed: list) -> str:
    """The void message of a changed human key (see :func:`check_void`).

    Parameters
    ----------
    old, new : str
        The decision human key's sha256 (as the ledger records it) and the one now.
    triple : tuple of (str, str, int)
        Its pool version, rubric version and round.
    used_at : str
        When the ledger records its use (ISO 8601).
    ledger_path : str or os.PathLike
        The ledger file, named first.
    changed : list of (str, str)
        The (query_id, chunk_id) pairs that differ (the first five are named); empty when
        the earlier human key is not at hand.

    Returns
    -------
    str
        One line: the rule broken, the pairs, and the two ways forward (a new
        ``grading.round``, or ``grading.post_hoc: true``).

    Examples
    --------
    >>> human_void_message(old="a" * 64, new="b" * 64, triple=("p-1", "v1", 1),
    ...     used_at="t", ledger_path="data/ledger.jsonl", changed=[("q1", "c1")])[:46]
    'void: data/ledger.jsonl records human key aaaa'
    """
    n = len(changed)
    if n:
        pairs = ", ".join(f"{q}/{c}" for q, c in changed[:5]) + (
            f" and {n - 5} more" if n > 5 else "")
        which = (f"{n} pair{'s' if n != 1 else ''} differ{'s' if n == 1 else ''}: a grade "
                 "changed on unchanged "
                 f"content, or a pair read that was not, or not read that was: {pairs}")
    else:
        which = "the pairs that changed are unknown (the earlier human key is not at hand)"
    return (f"void: {ledger_path} records human key {old} as the one the ppi stage "
            f"used on pool {triple[0]}, rubric {triple[1]}, round {triple[2]} (at {used_at}); "
            f"the human sample's grades now give {new} ({which}). People's grades of "
            "the sample may not change once PPI++ estimates were seen. Either declare a new "
            "round (raise `grading.round` in the params file: a new sample, graded blind) or "
            "set `grading.post_hoc: true` (every ppi number is then labelled post-hoc)")


def missing_uses(entries: Iterable[Mapping], used: Iterable[Mapping]) -> list[dict]:
    """The uses of a key for metrics that other files show but the ledger lacks.

    The ledger is one git-tracked file; deleting, truncating or editing it would make a
    changed key look fresh. The metrics files of every arm (and the frozen key's record)
    carry the key hash and pool version they were computed on, so they witness each use.

    Parameters
    ----------
    entries : iterable of dict
        The ledger's entries (see :func:`add_use`).
    used : iterable of dict
        Witnessed uses, each with ``key_sha256``, ``pool_version`` and ``source`` (the file
        that shows it, for the message); ``rubric_version`` and ``round`` when known;
        ``kind`` for a human key's use (``"ppi-human"``; matched with entries of that kind).

    Returns
    -------
    list of dict
        The witnessed uses with no ledger entry of the same key hash and pool version (and
        rubric version and round, where the witness gives them), in the order given.
    """
    entries = [dict(e) for e in entries]
    out = []
    for use in used:
        def matches(e, use=use):
            if entry_kind(e) != entry_kind(use):
                return False
            if e["key_sha256"] != use["key_sha256"] or str(e["pool_version"]) != str(use["pool_version"]):
                return False
            if use.get("rubric_version") is not None and str(e["rubric_version"]) != str(use["rubric_version"]):
                return False
            return use.get("round") is None or int(e["round"]) == int(use["round"])
        if not any(matches(e) for e in entries):
            out.append(dict(use))
    return out


def require_complete(entries: Iterable[Mapping], used: Iterable[Mapping], *, ledger_path) -> None:
    """Refuse a ledger that lacks a use of a key that metrics files show.

    Raises
    ------
    ProtocolError
        ``ledger: ...`` naming the ledger file, the first missing key hash, its pool version and
        the file that shows its use, with the fix (restore the ledger from git).
    """
    missing = missing_uses(entries, used)
    if missing:
        first = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        what = ("human key", "used by the ppi stage") if entry_kind(first) == HUMAN else \
            ("key", "used for metrics")
        raise ProtocolError(
            f"ledger: {ledger_path} has no entry for {what[0]} {first['key_sha256']} on pool "
            f"{first['pool_version']}, which {first['source']} shows was {what[1]}{more}; "
            f"the ledger was deleted, truncated or edited. Restore it (`git checkout -- "
            f"{ledger_path}`) before freezing or scoring a key")


def check_entries(entries: Iterable, *, ledger_path) -> list[dict]:
    """The ledger's entries, each checked to hold every key of :data:`LEDGER_KEYS`.

    Parameters
    ----------
    entries : iterable of dict
        The ledger's entries as read from the file, oldest first.
    ledger_path : str or os.PathLike
        The ledger file, named in the error.

    Returns
    -------
    list of dict
        The entries, unchanged.

    Raises
    ------
    ProtocolError
        ``ledger: ...`` when an entry is not an object, lacks a key of :data:`LEDGER_KEYS`
        or has a round that is not an integer: the ledger was edited by hand. The message
        names the entry (1-based) and the fix (restore it from git).
    """
    out = []
    for i, e in enumerate(entries, start=1):
        lacking = ([k for k in LEDGER_KEYS if k not in e] if isinstance(e, Mapping)
                   else list(LEDGER_KEYS))
        if not lacking:
            try:
                int(e["round"])
            except (TypeError, ValueError):
                lacking = ["round (an integer)"]
        if lacking:
            raise ProtocolError(
                f"ledger: {ledger_path} entry {i} lacks {', '.join(lacking)}: the ledger was "
                f"edited. Restore it (`git checkout -- {ledger_path}`) before freezing or "
                "scoring a key")
        out.append(dict(e))
    return out


def witnesses(metrics: Mapping[str, Mapping], records: Iterable[Mapping]) -> list[dict]:
    """The uses of keys for metrics that metrics files show, completed from the key records.

    Parameters
    ----------
    metrics : mapping of str to dict
        Each metrics file's path → its content (``key_sha256``, ``pool_version``, and
        ``rubric_version`` and ``round`` in files written since relgrade records them). Files
        without a ``key_sha256`` witness nothing.
    records : iterable of dict
        The key records at hand (the frozen key's and the post-hoc key's): a metrics file
        without its own round, computed on a record's key, takes that record's
        ``rubric_version`` and ``round``.

    Returns
    -------
    list of dict
        One use per metrics file, in the order given: ``key_sha256``, ``pool_version``,
        ``source`` and, when a record of that key is at hand, ``rubric_version`` and
        ``round`` (input for :func:`missing_uses` and :func:`require_complete`).

    Examples
    --------
    >>> witnesses({"metrics/arms/bm25.json": {"key_sha256": "k1", "pool_version": "p-1"}},
    ...           [{"key_sha256": "k1", "pool_version": "p-1", "rubric_version": "v1",
    ...             "round": 1}])
    [{'key_sha256': 'k1', 'pool_version': 'p-1', 'source': 'metrics/arms/bm25.json', 'rubric_version': 'v1', 'round': 1}]
    """
    known = {}
    for r in records:
        if r and r.get("key_sha256"):
            known.setdefault((r["key_sha256"], str(r.get("pool_version"))), r)
    out = []
    for source, m in metrics.items():
        if not isinstance(m, Mapping) or not m.get("key_sha256"):
            continue
        use = {"key_sha256": m["key_sha256"], "pool_version": m.get("pool_version"),
               "source": str(source)}
        r = known.get((m["key_sha256"], str(m.get("pool_version"))))
        if m.get("round") is not None:  # the file says which round it was computed for
            use |= {"rubric_version": m.get("rubric_version"), "round": m.get("round")}
        elif r is not None:
            use |= {"rubric_version": r.get("rubric_version"), "round": r.get("round")}
        out.append(use)
    return out


def human_witnesses(records: Mapping[str, Mapping]) -> list[dict]:
    """The uses of human keys that the ppi stage's kept records show.

    The ppi stage keeps, beside the ledger, each human key it used with a record of that
    use (:meth:`relgrade.experiment.files.Experiment.human_key_files`); like the metrics
    files for a key (:func:`witnesses`), the records witness the uses a deleted, truncated
    or edited ledger would lose.

    Parameters
    ----------
    records : mapping of str to dict
        Each record file's path → its content: ``key_sha256`` and ``uses``, a list of
        ``{"pool_version", "rubric_version", "round"}``. A record without ``key_sha256``
        witnesses nothing.

    Returns
    -------
    list of dict
        One use per record and use, in the order given: ``kind`` ``"ppi-human"``,
        ``key_sha256``, ``pool_version``, ``rubric_version``, ``round`` (those the record
        has) and ``source`` (input for :func:`missing_uses` and :func:`require_complete`).

    Examples
    --------
    >>> human_witnesses({"data/ledger.ppi-human/h.json": {"kind": "ppi-human",
    ...     "key_sha256": "h", "uses": [{"pool_version": "p-1", "rubric_version": "v1",
    ...                                  "round": 1}]}})
    [{'kind': 'ppi-human', 'key_sha256': 'h', 'pool_version': 'p-1', 'rubric_version': 'v1', 'round': 1, 'source': 'data/ledger.ppi-human/h.json'}]
    """
    out = []
    for source, r in records.items():
        if not isinstance(r, Mapping) or not r.get("key_sha256"):
            continue
        for at in r.get("uses") or []:
            if not isinstance(at, Mapping):
                continue
            use = {"kind": HUMAN, "key_sha256": r["key_sha256"],
                   "pool_version": at.get("pool_version")}
            use |= {k: at[k] for k in ("rubric_version", "round") if at.get(k) is not None}
            out.append(use | {"source": str(source)})
    return out


#: A round-N grade file is a copy of round N-1 when at least this share of its rows repeat
#: the previous round's reason for the same pair (see :func:`check_fresh_round`).
CARRIED_SHARE = 0.5


def round_to_check(round: int, meta: Mapping | None) -> bool:
    """Whether :func:`check_fresh_round` compares a round-``round`` file with the previous
    round's: from round 2 on, unless its sidecar ``meta`` records ``"round": round``.

    Examples
    --------
    >>> round_to_check(2, None), round_to_check(2, {"round": 2}), round_to_check(1, None)
    (True, False, False)
    """
    return int(round) >= 2 and not (isinstance(meta, Mapping)
                                    and meta.get("round") == int(round))


def carried_reasons(rows: pd.DataFrame, previous: pd.DataFrame) -> int:
    """How many rows repeat the previous round's reason for the same pair, over columns.

    Parameters
    ----------
    rows, previous : pandas.DataFrame
        The round-N and round-(N-1) grade rows (``query_id``, ``chunk_id``, ``reason``,
        strings); a pair repeated in ``previous`` counts with its last row.

    Returns
    -------
    int
        The rows of ``rows`` whose reason is not missing and equals the last reason of the
        same pair in ``previous`` (what :func:`check_fresh_round` counts row by row).

    Examples
    --------
    >>> a = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
    ...                   "reason": ["same", "new"]})
    >>> b = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["a", "b", "b"],
    ...                   "reason": ["same", "new", "old"]})
    >>> carried_reasons(a, b)
    1
    """
    keys = ["query_id", "chunk_id"]
    last = previous[[*keys, "reason"]].drop_duplicates(keys, keep="last") \
        .rename(columns={"reason": "before"})
    both = rows[[*keys, "reason"]].merge(last, on=keys, how="left", sort=False)
    return int((both["reason"].notna() & (both["reason"] == both["before"])
                .fillna(False).astype(bool)).sum())


def check_fresh_round(
    rows: Iterable[Mapping],
    previous: Iterable[Mapping],
    *,
    round: int,
    identical: bool,
    meta: Mapping | None,
    grader: str,
    source,
    previous_source,
) -> None:
    """Refuse a round-N grade file that was copied from round N-1 instead of regraded.

    A new round is the void rule's way out: a full blind regrade from fresh orders. A copy
    of the previous round's file (with a grade or two changed) is not one, and would turn a
    void key into a "fresh" one. The rule: a round-N file (N >= 2) is refused when it is
    byte-identical to the same grader's round-(N-1) file, or when at least
    :data:`CARRIED_SHARE` of its rows repeat the previous round's reason for the same pair
    (a fresh grader writes its own reasons), unless its sidecar (the ``.meta.json`` beside
    it) records ``"round": N`` (the grades came from the packets of round N).

    Parameters
    ----------
    rows, previous : iterable of dict, or pandas.DataFrame
        The round-N and round-(N-1) grade rows of one grader (``query_id``, ``chunk_id``,
        ``reason``): dicts as read row by row, or both as columns (string columns; counted
        by :func:`carried_reasons`).
    round : int
        N, the round of ``rows``.
    identical : bool
        Whether the two files are byte-identical.
    meta : mapping or None
        The round-N file's sidecar, if it has one.
    grader : str
        The grader, named in the message.
    source, previous_source : str or os.PathLike
        The two files, named in the message.

    Raises
    ------
    ProtocolError
        ``round N: ...`` naming both files, how many rows were carried over, and the fix.

    Examples
    --------
    >>> a = [{"query_id": "q1", "chunk_id": "c1", "reason": "Defines it.", "grade": 2}]
    >>> check_fresh_round(a, [{**a[0], "grade": 1}], round=2, identical=False,
    ...                   meta={"round": 2}, grader="g", source="r2", previous_source="r1")
    """
    if not round_to_check(round, meta):
        return
    if isinstance(rows, pd.DataFrame) and isinstance(previous, pd.DataFrame):
        carried, n_rows = carried_reasons(rows, previous), len(rows)
    else:
        before = {(str(r.get("query_id")), str(r.get("chunk_id"))): r.get("reason")
                  for r in previous}
        rows = list(rows)
        carried = sum(1 for r in rows
                      if before.get((str(r.get("query_id")), str(r.get("chunk_id"))))
                      == r.get("reason") and r.get("reason") is not None)
        n_rows = len(rows)
    if identical:
        found = "byte-identical to"
    elif n_rows and carried >= CARRIED_SHARE * n_rows:
        found = f"{carried} of its {n_rows} rows repeat the reason of"
    else:
        return
    n = int(round)
    raise ProtocolError(
        f"round {n}: {source} ({grader}) is {found} {previous_source}: grades of round {n} "
        f"must come from a blind regrade of the packets of round {n}, not a copy of the "
        f"previous round. Regrade the pool from the new packets (`relgrade grade run "
        f"--grader {grader}` or `relgrade serve`); if these rows did come from the packets "
        f"of round {n}, record it in the grade file's sidecar (\"round\": {n} in the "
        ".meta.json beside it)")
