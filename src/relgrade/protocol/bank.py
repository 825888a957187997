"""The judgment bank: what every grade was made on, which grades are current, what is pending.

A grade is evidence about one chunk's text, read against one intent line under one rubric.
The bank keeps every grade ever recorded together with what it was made on:

- ``content_sha256``: the chunk as shown to the grader (:func:`content_sha256`);
- ``intent_sha256``: the query's intent line (:func:`intent_sha256`);
- ``rubric_version`` and ``rubric_sha256``: the guideline and the bytes of its file;
- ``grader``, ``round`` and ``graded_at``.

A grade is **current** for a pool when the chunk, the intent line and the rubric are still
the ones it was made on; only current grades can enter a key. A pool change (an arm added, a
deeper pool, an edited chunk or intent) never deletes a grade: a pair that leaves the pool
stays in the bank and is current again if it comes back unchanged. What the pool needs and
the bank lacks is **pending work**, named per grader: ``new`` pairs (never graded), ``stale``
pairs (graded, but the content, intent or rubric has changed since) and, for the auditor,
the pairs of the audited queries.

Everything here works on tables; reading and writing the bank is :mod:`relgrade.graders`'.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.canonical import canonical_json, sha256_bytes
from relgrade.errors import PendingWork
from relgrade.ranking import arrow_ids, codes_in
from relgrade.schema import PENDING, require

#: Why a pool pair is pending for a grader.
NEW, STALE, AUDIT, REGRADE = "new", "stale", "audit", "regrade"

#: The ``why`` of a pair in the adjudication queue that the expert still owes (a rater panel).
ADJUDICATE = "adjudicate"


def content_sha256(chunks: pd.DataFrame) -> pd.Series:
    """The sha256 of each chunk as a grader sees it.

    Parameters
    ----------
    chunks : pandas.DataFrame of shape (n_chunks, >= 3)
        ``chunk_id``, ``header``, ``text``.

    Returns
    -------
    pandas.Series of str, indexed by chunk_id (in the table's order)
        64 hex digits: sha256 of the UTF-8 bytes of ``{"header":H,"text":T}`` in relgrade's
        canonical JSON (:func:`relgrade.canonical.canonical_json`: that key order, no spaces,
        non-ASCII kept). Only what a packet shows is hashed, so a change of ``source`` or of
        any column a grader never sees does not make a grade stale.

    Examples
    --------
    >>> t = pd.DataFrame({"chunk_id": ["c1"], "header": ["a.py › f"], "text": ["def f(): ..."]})
    >>> content_sha256(t)["c1"][:12]
    'c50f412f09b9'
    """
    values = [sha256_bytes(canonical_json({"header": str(h), "text": str(t)}).encode("utf-8"))
              for h, t in zip(chunks["header"], chunks["text"])]
    return pd.Series(values, index=chunks["chunk_id"].astype(str).to_numpy(), dtype=object,
                     name="content_sha256")


def intent_sha256(intents: pd.DataFrame) -> pd.Series:
    """The sha256 of each query's intent line.

    Parameters
    ----------
    intents : pandas.DataFrame of shape (n_queries, >= 2)
        The frozen intent table: ``query_id``, ``intent``.

    Returns
    -------
    pandas.Series of str, indexed by query_id
        sha256 of ``{"query_id":Q,"intent":I}`` in canonical JSON: an edit of one query's
        intent makes only that query's grades stale.
    """
    values = [sha256_bytes(canonical_json({"query_id": str(q), "intent": str(i)}).encode("utf-8"))
              for q, i in zip(intents["query_id"], intents["intent"])]
    return pd.Series(values, index=intents["query_id"].astype(str).to_numpy(), dtype=object,
                     name="intent_sha256")


def currency(bank: pd.DataFrame, *, content: pd.Series, intents: pd.Series,
             rubric_sha256: str, rubric_version: str | None = None,
             carry=None) -> pd.Series:
    """Whether each bank grade is current, and if not, what moved.

    Parameters
    ----------
    bank : pandas.DataFrame of shape (n_grades, >= 5)
        ``query_id``, ``chunk_id``, ``content_sha256``, ``intent_sha256``, ``rubric_sha256``.
    content : pandas.Series of str, indexed by chunk_id
        The corpus as it is now (:func:`content_sha256`).
    intents : pandas.Series of str, indexed by query_id
        The intent table as it is now (:func:`intent_sha256`).
    rubric_sha256 : str
        The current rubric file's sha256.
    rubric_version : str, optional
        The current rubric version (params ``grading.rubric_version``); when given, a grade
        recorded under another version (column ``rubric_version``) is ``"rubric"`` too.
    carry : relgrade.protocol.rubric.Carry, optional
        The rubric's revision chain: a grade made under an earlier rubric of the chain whose
        named sections no revision since has touched stays current
        (:meth:`relgrade.protocol.rubric.Carry.carried`; needs the column ``reason``).
        Without it, any other rubric makes a grade stale.

    Returns
    -------
    pandas.Series of str, aligned with ``bank``
        ``"current"``; else the first of ``"chunk gone"`` (no such chunk now), ``"content"``,
        ``"intent"``, ``"rubric"`` that differs.

    Raises
    ------
    InputError
        A column is missing.

    Examples
    --------
    >>> bank = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
    ...                      "content_sha256": ["h1", "old"], "intent_sha256": ["i", "i"],
    ...                      "rubric_sha256": ["r", "r"]})
    >>> currency(bank, content=pd.Series({"a": "h1", "b": "h2"}),
    ...          intents=pd.Series({"q": "i"}), rubric_sha256="r").tolist()
    ['current', 'content']
    """
    require(bank, ["query_id", "chunk_id", "content_sha256", "intent_sha256", "rubric_sha256"],
            what="the judgment bank")
    intent_moved, _ = _differs_mapped(bank["intent_sha256"], bank["query_id"], intents)
    content_moved, gone = _differs_mapped(bank["content_sha256"], bank["chunk_id"], content)
    status = pd.Series("current", index=bank.index, dtype=object)
    status[_differs(bank["rubric_sha256"], str(rubric_sha256))] = "rubric"
    if rubric_version is not None and "rubric_version" in bank.columns:
        status[_differs(bank["rubric_version"], str(rubric_version))] = "rubric"
    if carry is not None and carry.touched and "reason" in bank.columns:
        older = status.eq("rubric")
        if older.any():
            status[older & carry.carried(bank).reindex(bank.index, fill_value=False)] = "current"
    status[intent_moved] = "intent"
    status[content_moved] = "content"
    status[gone] = "chunk gone"
    return status


def _differs_mapped(column: pd.Series, keys: pd.Series,
                    now: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``_differs(column, keys.astype(str).map(now))`` and where that map finds nothing,
    without a string per row: each row's key is looked up among ``now``'s index and the
    values are compared as codes of one dictionary.

    Parameters
    ----------
    column : pandas.Series, shape (n,)
        A bank column (str or categorical of str).
    keys : pandas.Series, shape (n,)
        Each row's id (``chunk_id`` or ``query_id``), compared as str.
    now : pandas.Series of str
        The value now, indexed by id (a missing value counts as no value).

    Returns
    -------
    differs : numpy.ndarray of bool, shape (n,)
        As :func:`_differs` gives it for the mapped values.
    missing : numpy.ndarray of bool, shape (n,)
        Where the mapped value is missing (no such id now, or a missing value).
    """
    try:
        if not now.index.is_unique:
            raise ValueError("ids repeat")  # Series.map refuses them: keep its error
        ids = pa.chunked_array([pa.array(now.index.astype(str), type=pa.large_string())])
        values = pa.array(now.to_numpy(dtype=object), type=pa.large_string(),
                          from_pandas=True)
    except (ValueError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
        mapped = keys.astype(str).map(now)
        return _differs(column, mapped), mapped.isna().to_numpy()
    at = codes_in(arrow_ids(keys.astype(str)), ids).astype(np.int64)  # -1: no such id
    absent = values.is_null().to_numpy(zero_copy_only=False)
    if isinstance(column.dtype, pd.CategoricalDtype):
        # the value now as a code of the column's categories (-1: not one, or missing)
        code = column.cat.categories.get_indexer(now.to_numpy(dtype=object))
        code[absent] = -1
        now_codes = np.where(at >= 0, code[np.maximum(at, 0)], -1)
        differs = column.cat.codes.to_numpy() != now_codes
    else:
        # both sides as codes of the distinct values now; a missing side always differs
        distinct = pa.chunked_array([pc.unique(values.drop_null())])
        code = codes_in(pa.chunked_array([values]), distinct).astype(np.int64)
        code[absent] = -1
        now_codes = np.where(at >= 0, code[np.maximum(at, 0)], -1)
        mine = codes_in(arrow_ids(column.astype(str)), distinct)
        differs = (mine != now_codes) | (now_codes < 0) | (mine < 0)
    missing = (at < 0) | np.where(at >= 0, absent[np.maximum(at, 0)], True)
    return differs, missing


def pair_member(left: pd.DataFrame, right: pd.DataFrame) -> np.ndarray:
    """Whether each ``(query_id, chunk_id)`` of ``left`` is a pair of ``right``, over columns.

    What ``[(q, c) in set(zip(right...)) for q, c in zip(left...)]`` answers, with the ids
    compared as strings, without one Python tuple per pair (a million-pair pool's set of
    tuples costs hundreds of MiB).

    Parameters
    ----------
    left, right : pandas.DataFrame
        Columns ``query_id``, ``chunk_id`` (any dtype; compared as ``str``).

    Returns
    -------
    numpy.ndarray of bool, shape (len(left),)
        In ``left``'s row order.

    Examples
    --------
    >>> a = pd.DataFrame({"query_id": ["q", "q", "r"], "chunk_id": ["a", "b", "a"]})
    >>> b = pd.DataFrame({"query_id": ["q", "r", "r"], "chunk_id": ["b", "a", "a"]})
    >>> pair_member(a, b).tolist()
    [False, True, True]
    """
    if not len(left):
        return np.zeros(0, dtype=bool)
    if not len(right):
        return np.zeros(len(left), dtype=bool)
    # each pair as one int64 (its query's and chunk's positions among right's distinct ids),
    # so no Python string is made per row: Arrow's hash lookups, then a sorted membership
    at, width = [], []
    for k in ("query_id", "chunk_id"):
        ids = arrow_ids(right[k].astype(str))
        distinct = pa.chunked_array([pc.unique(ids.combine_chunks())])
        at.append((codes_in(arrow_ids(left[k].astype(str)), distinct).astype(np.int64),
                   codes_in(ids, distinct).astype(np.int64)))
        width.append(len(distinct))
    (lq, rq), (lc, rc) = at
    known = (lq >= 0) & (lc >= 0)
    hit = np.zeros(len(left), dtype=bool)
    hit[known] = np.isin(lq[known] * width[1] + lc[known], rq * width[1] + rc, kind="sort")
    return hit


def _differs(column: pd.Series, now) -> np.ndarray:
    """``column.astype(str) != now`` element by element, without one string per row when
    ``column`` is categorical (the judgment bank's made-on hashes): compared as codes.

    Parameters
    ----------
    column : pandas.Series, shape (n,)
        A bank column (str or categorical of str, never missing).
    now : str or pandas.Series of shape (n,) aligned with ``column``
        The value now, or per row (missing where there is none: then it differs).

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
    """
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return (column.astype(str) != now).to_numpy()
    cats = column.cat.categories
    codes = column.cat.codes.to_numpy()
    if isinstance(now, str):
        at = cats.get_indexer([now])[0]
        return codes != at if at >= 0 else np.ones(len(codes), dtype=bool)
    at = cats.get_indexer(now.to_numpy(dtype=object))  # -1 where now is not a category
    return codes != at


def current_grades(bank: pd.DataFrame, *, content: pd.Series, intents: pd.Series,
                   rubric_sha256: str, rubric_version: str | None = None,
                   carry=None, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """The bank's current grades, latest per (grader, query_id, chunk_id).

    Parameters
    ----------
    bank, content, intents, rubric_sha256, rubric_version, carry
        As for :func:`currency`.
    columns : iterable of str, optional
        Keep only these columns of ``bank`` besides ``grader``, ``query_id``, ``chunk_id``
        and ``round`` (the made-on hashes, say, are left out of the copy); all when None.

    Returns
    -------
    pandas.DataFrame
        The rows of ``bank`` whose :func:`currency` is ``"current"``; where a grader has
        more than one current grade of a pair (a later round regraded it), the one of the
        highest ``round`` is kept, and within a round the last recorded.
    """
    now = currency(bank, content=content, intents=intents, rubric_sha256=rubric_sha256,
                   rubric_version=rubric_version, carry=carry).eq("current")
    if columns is not None:
        wanted = {"grader", "query_id", "chunk_id", "round", *columns}
        bank = bank[[c for c in bank.columns if c in wanted]]
    return latest_grades(bank[now])


def latest_grades(bank: pd.DataFrame) -> pd.DataFrame:
    """The latest recorded grade per (grader, query_id, chunk_id): a later grade of a pair
    supersedes an earlier one.

    Parameters
    ----------
    bank : pandas.DataFrame
        Bank rows (``grader``, ``query_id``, ``chunk_id``, optional ``round``), each grader's
        rows of a round in the order they were recorded.

    Returns
    -------
    pandas.DataFrame
        One row per (grader, query_id, chunk_id): the one of the highest ``round``, and
        within a round the last recorded.

    Examples
    --------
    >>> t = pd.DataFrame({"grader": ["g", "g"], "query_id": ["q", "q"],
    ...                   "chunk_id": ["c", "c"], "round": [1, 1], "grade": [2, 0]})
    >>> latest_grades(t)["grade"].tolist()
    [0]
    """
    if "round" in bank.columns:
        bank = bank.sort_values("round", kind="stable")
    return bank.drop_duplicates(["grader", "query_id", "chunk_id"], keep="last")


def pending_work(pool: pd.DataFrame, bank: pd.DataFrame, *, key_grader: str, auditor: str,
                 audit_ids: Iterable[str], content: pd.Series, intents: pd.Series,
                 rubric_sha256: str, rubric_version: str | None = None,
                 regrade: pd.DataFrame | None = None, triage_grader: str | None = None,
                 key_pairs: pd.DataFrame | None = None,
                 carry=None) -> pd.DataFrame:
    """The pairs each grader still owes for the current pool.

    Parameters
    ----------
    pool : pandas.DataFrame of shape (n_pairs, >= 2)
        The current pool: ``query_id``, ``chunk_id``.
    bank : pandas.DataFrame
        Every recorded grade (:data:`relgrade.schema.BANK`; at least ``grader`` and the columns of
        :func:`currency`).
    key_grader, auditor : str
        The grader who owes every pool pair, and the one who owes the audited queries' pairs.
    audit_ids : iterable of str
        The locked audit sample.
    content, intents, rubric_sha256, rubric_version, carry
        As for :func:`currency`.
    regrade : pandas.DataFrame, optional
        The pairs a partial round regrades (``query_id``, ``chunk_id``; see
        :mod:`relgrade.protocol.regrade`); ``bank`` must already lack their earlier grades.
    triage_grader : str, optional
        Triage mode (:mod:`relgrade.protocol.triage`): the model grader who owes every pool
        pair (listed last).
    key_pairs : pandas.DataFrame, optional
        The pairs the key grader owes (``query_id``, ``chunk_id``), and of them the audited
        queries' pairs the auditor owes; the whole pool when not given. In triage mode: the
        people's queue (empty until the triage grader has graded the pool).

    Returns
    -------
    pandas.DataFrame of shape (n_pending, 4)
        :data:`relgrade.schema.PENDING`: the key grader's pairs first, then the auditor's,
        each sorted by query_id, chunk_id. ``why`` is ``"regrade"`` for a pair of
        ``regrade``, else ``"stale"`` when the grader has a grade of the pair that is no
        longer current, else ``"new"`` for the key grader and ``"audit"`` for the auditor.

    Examples
    --------
    >>> pool = pd.DataFrame({"query_id": ["q", "q", "r"], "chunk_id": ["a", "b", "c"]})
    >>> bank = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grader": ["g", "g"],
    ...                      "content_sha256": ["A", "old"], "intent_sha256": ["i", "i"],
    ...                      "rubric_sha256": ["r", "r"]})
    >>> pending_work(pool, bank, key_grader="g", auditor="x", audit_ids=["r"],
    ...              content=pd.Series({"a": "A", "b": "B", "c": "C"}),
    ...              intents=pd.Series({"q": "i", "r": "i"}), rubric_sha256="r")
      grader query_id chunk_id    why
    0      g        q        b  stale
    1      g        r        c    new
    2      x        r        c  audit
    """
    require(bank, ["grader"], what="the judgment bank")
    pairs = pool[["query_id", "chunk_id"]].astype(str).drop_duplicates()
    status = currency(bank, content=content, intents=intents, rubric_sha256=rubric_sha256,
                      rubric_version=rubric_version, carry=carry)
    ids = {str(q) for q in audit_ids}
    again = (set() if regrade is None else
             set(zip(regrade["query_id"].astype(str), regrade["chunk_id"].astype(str))))
    mine_pairs = pairs if key_pairs is None else \
        key_pairs[["query_id", "chunk_id"]].astype(str).drop_duplicates()
    owed = {key_grader: (mine_pairs, NEW),
            auditor: (mine_pairs[mine_pairs["query_id"].isin(ids)], AUDIT)}
    if triage_grader is not None:
        owed[triage_grader] = (pairs, NEW)
    frames = []
    for grader, (wanted, why) in owed.items():
        mine = (bank["grader"].astype(str) == grader).to_numpy()
        keys = bank.loc[mine, ["query_id", "chunk_id"]]
        current = keys[status[mine].eq("current").to_numpy()]
        # membership over columns, in the order of ``wanted`` (no set of pair tuples)
        owe = wanted[~pair_member(wanted, current)]
        if again:
            is_again = np.fromiter(((q, c) in again for q, c in
                                    zip(owe["query_id"], owe["chunk_id"])), dtype=bool,
                                   count=len(owe))
        else:
            is_again = np.zeros(len(owe), dtype=bool)
        is_graded = pair_member(owe, keys)
        reasons = np.where(is_again, REGRADE, np.where(is_graded, STALE, why))
        frames.append(pd.DataFrame({"grader": [grader] * len(owe),
                                    "query_id": owe["query_id"].tolist(),
                                    "chunk_id": owe["chunk_id"].tolist(),
                                    "why": reasons.tolist()}, columns=PENDING))
    out = pd.concat(frames, ignore_index=True)  # the key grader first, then the auditor
    return out.sort_values(["query_id", "chunk_id"], kind="stable") \
        .sort_values("grader", key=lambda g: g.ne(key_grader), kind="stable") \
        .reset_index(drop=True)


def pending_counts(pending: pd.DataFrame, graders: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per grader, how many pairs are pending and why.

    Returns
    -------
    dict
        ``{grader: {"pending_new": int, "pending_stale": int, "pending_audit": int,
        "pending_regrade": int}}`` for every grader named (zeros included), in the order
        given.
    """
    out = {}
    for g in graders:
        mine = pending.loc[pending["grader"] == g, "why"]
        out[g] = {f"pending_{why}": int((mine == why).sum())
                  for why in (NEW, STALE, AUDIT, REGRADE)}
    return out


#: Joins a command to run first and the grading command in a ``how`` entry of
#: :func:`pending_message` (``dvc repro packets`, then `relgrade grade run --grader g``).
THEN = "`, then `"


def pending_message(pending: pd.DataFrame, *, how: Mapping[str, str] | None = None,
                    sample: str = "audit") -> str:
    """One line saying who owes what, and how to do it.

    Parameters
    ----------
    pending : pandas.DataFrame
        :func:`pending_work`'s table (not empty).
    how : mapping of str to str, optional
        Per grader, the command that grades its pending pairs (each owing grader's is named
        once, in order); an entry ``FIRST`` + :data:`THEN` + ``COMMAND`` names a command to
        run before it (each such first command is named once, before all the others).
        Without it: ``relgrade grade run --grader NAME`` for the first owing grader, and
        ``relgrade serve`` as the other way.
    sample : str, default "audit"
        What the queries of the ``audit`` rows are called (``"audit"`` queries of the key's
        audit; ``"sampled"`` for a new arm's human sample of holes).

    Returns
    -------
    str
        E.g. ``"grading: 41 pairs need grader-a (38 new, 3 stale), 7 need auditor-b (audit
        queries kw02, qu05); run `relgrade grade run --grader grader-a` or `relgrade serve`"``.

    Examples
    --------
    >>> p = pd.DataFrame([("g", "q", "a", "new"), ("g", "q", "b", "stale"),
    ...                   ("x", "r", "c", "audit")], columns=PENDING)
    >>> pending_message(p)
    'grading: 2 pairs need g (1 new, 1 stale), 1 needs x (audit query r); run `relgrade grade run --grader g` or `relgrade serve`'
    >>> pending_message(p, how={"g": "relgrade grade run --grader g", "x": "relgrade serve"})
    'grading: 2 pairs need g (1 new, 1 stale), 1 needs x (audit query r); run `relgrade grade run --grader g` and `relgrade serve`'
    >>> pending_message(p, sample="sampled")[:60]
    'grading: 2 pairs need g (1 new, 1 stale), 1 needs x (sampled'
    >>> e = pd.DataFrame([("e", "q", "a", "adjudicate"), ("e", "r", "b", "adjudicate")],
    ...                  columns=PENDING)
    >>> pending_message(e, how={"e": "relgrade grade run --grader e"})
    'grading: 2 pairs need e (adjudication queries q, r); run `relgrade grade run --grader e`'
    >>> pending_message(p, how={"g": "dvc repro packets" + THEN + "relgrade grade run --grader g",
    ...                         "x": "dvc repro packets" + THEN + "relgrade serve"})
    'grading: 2 pairs need g (1 new, 1 stale), 1 needs x (audit query r); run `dvc repro packets`, then `relgrade grade run --grader g` and `relgrade serve`'
    """
    parts, first = [], None
    for grader, rows in pending.groupby("grader", sort=False):
        first = first or grader
        n = len(rows)
        counts = rows["why"].value_counts()
        detail = [f"{int(counts[w])} {w}" for w in (NEW, STALE, REGRADE) if w in counts]
        if AUDIT in counts:
            qids = sorted(rows.loc[rows["why"] == AUDIT, "query_id"].unique())
            detail.append(f"{sample} quer" + ("y " if len(qids) == 1 else "ies ")
                          + ", ".join(qids))
        if ADJUDICATE in counts:
            qids = sorted(rows.loc[rows["why"] == ADJUDICATE, "query_id"].unique())
            detail.append("adjudication quer" + ("y " if len(qids) == 1 else "ies ")
                          + ", ".join(qids))
        verb = "needs" if n == 1 else "need"
        if not parts:  # "41 pairs need grader-a ..., 7 need auditor-b ..."
            verb = "pair needs" if n == 1 else "pairs need"
        parts.append(f"{n} {verb} {grader} ({', '.join(detail)})")
    if how is None:
        return (f"grading: {', '.join(parts)}; run `relgrade grade run --grader {first}` or "
                "`relgrade serve`")
    commands = list(dict.fromkeys(how.get(g, f"relgrade grade run --grader {g}")
                                  for g in pending["grader"].drop_duplicates()))
    # a command to run first (``FIRST`, then `COMMAND``, e.g. a packets rebuild) is named once
    before, after = [], []
    for c in commands:
        *pre, last = c.split(THEN)
        before += pre
        after.append(last)
    run = " and ".join(f"`{c}`" for c in dict.fromkeys(after))
    if before:
        run = " and ".join(f"`{c}`" for c in dict.fromkeys(before)) + ", then " + run
    return f"grading: {', '.join(parts)}; run " + run


def packet_made_on(packets: Mapping[str, Mapping], *,
                   rubric_sha256: str) -> dict[tuple[str, str], dict]:
    """What a grade of each packet pair is made on: the chunk and intent as the packet shows them.

    Parameters
    ----------
    packets : mapping of str to mapping
        query_id → packet (``query_id``, ``intent``, ``rubric_version``, ``batches`` of
        ``{"chunk_id", "header", "text"}``), as :func:`relgrade.protocol.packets.build_packets`
        makes them.
    rubric_sha256 : str
        The sha256 of the rubric file the grader reads.

    Returns
    -------
    dict
        ``(query_id, chunk_id)`` → ``{"content_sha256", "intent_sha256", "rubric_version",
        "rubric_sha256"}`` (:data:`relgrade.schema.MADE_ON`, in that order), hashed exactly as
        :func:`content_sha256` and :func:`intent_sha256` hash the chunks and intent tables,
        so a grade made from a packet is current while the corpus and intents are unchanged.

    Examples
    --------
    >>> p = {"q": {"query_id": "q", "intent": "find f", "rubric_version": "v1",
    ...            "batches": [[{"chunk_id": "c1", "header": "a.py › f", "text": "def f(): ..."}]]}}
    >>> m = packet_made_on(p, rubric_sha256="r")[("q", "c1")]
    >>> m["content_sha256"][:12], m["rubric_version"], m["rubric_sha256"]
    ('c50f412f09b9', 'v1', 'r')
    """
    out: dict[tuple[str, str], dict] = {}
    for packet in packets.values():
        qid = str(packet["query_id"])
        intent = intent_sha256(pd.DataFrame({"query_id": [qid],
                                             "intent": [str(packet["intent"])]})).iat[0]
        chunks = [c for batch in packet["batches"] for c in batch]
        if not chunks:
            continue
        table = pd.DataFrame({"chunk_id": [str(c["chunk_id"]) for c in chunks],
                              "header": [c["header"] for c in chunks],
                              "text": [c["text"] for c in chunks]})
        for cid, digest in content_sha256(table).items():
            out[(qid, cid)] = {"content_sha256": digest, "intent_sha256": intent,
                               "rubric_version": str(packet["rubric_version"]),
                               "rubric_sha256": str(rubric_sha256)}
    return out


def require_no_pending(pending: pd.DataFrame, *, how: Mapping[str, str] | None = None,
                       sample: str = "audit") -> None:
    """Stop when any grader still owes pairs: pending work, named, is not an error of the data.

    Parameters
    ----------
    pending : pandas.DataFrame
        :func:`pending_work`'s table.
    how, sample
        As in :func:`pending_message`.

    Raises
    ------
    PendingWork
        ``pending`` is not empty; the message is :func:`pending_message` (one line naming
        per grader the counts and the command that does the work). Nothing is written.
    """
    if len(pending):
        raise PendingWork(pending_message(pending, how=how, sample=sample))
