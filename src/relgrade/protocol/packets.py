"""Packets: exactly what a grader sees for one query, and the shuffled order it sees it in.

A packet holds the query, its locked intent, the rubric version, the hash of the reviewed
intent table, the grading round and the pooled chunks (``chunk_id``, ``header``, ``text``)
in batches of at most ``batch_size``. Nothing else: no arm, rank, score, number of arms or
inclusion probability (protocol invariant 1).

The display order of a query's chunks is a shuffle seeded per (query, role, round) with
:func:`relgrade.rng.order_seed`, applied to the chunk ids sorted in code-point order, so
it depends on nothing but the pool's set of chunks and the recorded seed (invariant 2). The
auditor's order and every new round's order are fresh shuffles, never a repeat of an earlier
one (see :func:`display_order`). The orders live in their own table (params ``paths.orders``)
outside the packets.
"""

from __future__ import annotations

import json
import math
import numbers
from json.encoder import encode_basestring as _encode_string
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from relgrade.canonical import canonical_json
from relgrade.errors import InputError
from relgrade.rng import order_seed, rng_for
from relgrade.schema import ORDERS, ROLES, TRIAGE_ROLE

#: The keys of a packet, in order; nothing else may appear in one.
PACKET_KEYS = ("query_id", "query", "intent", "rubric_version", "intents_sha256", "round",
               "batches")

#: The keys of one chunk inside a packet's batch, in order.
CHUNK_KEYS = ("chunk_id", "header", "text")

#: The most chunks a batch may hold, whatever ``grading.batch_size`` says: the protocol shows
#: a grader at most five chunks at a time, on every route (packets, the web page, exports,
#: command graders).
MAX_BATCH = 5


#: The file in the packets folder saying what the packets were built for (pool version,
#: round, intents sha256): the grading commands refuse packets of another pool or round.
PACKETS_MANIFEST = "manifest.json"


def check_batch(batch, *, cap: int = MAX_BATCH, path=None, item=None) -> None:
    """Refuse a batch of more than ``min(cap, MAX_BATCH)`` chunks.

    Parameters
    ----------
    batch : sequence
        The chunks of one batch.
    cap : int, default MAX_BATCH
        The batch size in force (``grading.batch_size``); never above :data:`MAX_BATCH`.
    path, item : optional
        The file and the packet/batch, for the message.

    Raises
    ------
    InputError
        ``batch`` holds more than ``min(cap, MAX_BATCH)`` chunks.

    Examples
    --------
    >>> check_batch(["a"] * 5)
    >>> try:
    ...     check_batch(["a"] * 6, item="kw01 batch 0")
    ... except InputError as e:
    ...     print(e)
    kw01 batch 0: a batch holds at most 5 chunks (found 6 chunks). Rebuild the packets with grading.batch_size from 1 to 5 (dvc repro packets)
    """
    limit = min(int(cap), MAX_BATCH)
    if len(batch) > limit:
        raise InputError(f"a batch holds at most {limit} chunks", path=path, item=item,
                         found=f"{len(batch)} chunks",
                         fix="Rebuild the packets with grading.batch_size from 1 to "
                             f"{MAX_BATCH} (dvc repro packets)")


def _check_int(value, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}",
                         item=name, found=repr(value))
    return int(value)


def _check_role(role: str) -> str:
    if role not in ROLES and role != TRIAGE_ROLE:
        raise InputError(f"role must be one of {', '.join((*ROLES, TRIAGE_ROLE))}",
                         item="role", found=repr(role))
    return role


def display_order(chunk_ids: Iterable[str], *, seed: int, query_id: str, role: str,
                  round: int) -> tuple[list[str], int]:  # noqa: A002
    """The order one query's chunks are shown in, for one role and grading round.

    Parameters
    ----------
    chunk_ids : iterable of str
        The query's pooled chunk ids, in any order (duplicates are ignored).
    seed : int
        The experiment seed (params ``seed``).
    query_id : str
        The query.
    role : {"grader", "auditor", "triage"}
        Whose order. The triage model grader's order is a plain seeded shuffle drawn outside
        the grader/auditor slots below.
    round : int
        The grading round, >= 1 (params ``grading.round``).

    Returns
    -------
    order : list of str
        The chunk ids in display order.
    order_seed : int
        :func:`relgrade.rng.order_seed` of (seed, query_id, role, round): the seed of the
        generator that drew this order, as the orders table records it.

    Notes
    -----
    The ids are sorted (code-point order) and permuted by
    ``rng_for(seed, query_id, role, round).permutation(n)``. Orders are drawn in a fixed
    sequence of slots, (grader, 1), (auditor, 1), (grader, 2), (auditor, 2), ...; a slot's
    generator keeps drawing permutations until it gives one that differs from the orders of
    the earlier slots (the most recent ``n! - 1`` of them when there are fewer possible
    orders than earlier slots). So for more than one chunk the auditor never sees the
    grader's order, and a new round never repeats an old one, while every order is still
    rebuilt exactly from the seed.

    Examples
    --------
    >>> a, _ = display_order(["c1", "c2", "c3", "c4"], seed=1, query_id="q", role="grader", round=1)
    >>> b, _ = display_order(["c1", "c2", "c3", "c4"], seed=1, query_id="q", role="auditor", round=1)
    >>> sorted(a) == sorted(b) and a != b
    True
    """
    _check_role(role)
    round = _check_int(round, "grading.round", minimum=1)
    ids = sorted({str(c) for c in chunk_ids})
    n = len(ids)
    if role == TRIAGE_ROLE:
        # the triage model grades outside the blind pair's slots: its own seeded shuffle,
        # so adding it leaves every grader and auditor order as it was
        perm = rng_for(seed, query_id, role, round).permutation(n).tolist()
        return [ids[i] for i in perm], order_seed(seed, query_id, role, round)
    distinct = math.factorial(min(n, 20))        # more than any number of rounds
    earlier: list[tuple[int, ...]] = []
    for r in range(1, round + 1):
        for slot_role in ROLES:
            rng = rng_for(seed, query_id, slot_role, r)
            avoid = set(earlier[len(earlier) - min(len(earlier), distinct - 1):])
            perm = tuple(rng.permutation(n).tolist())
            while perm in avoid:
                perm = tuple(rng.permutation(n).tolist())
            if r == round and slot_role == role:
                return [ids[i] for i in perm], order_seed(seed, query_id, role, round)
            earlier.append(perm)
    raise AssertionError("unreachable")  # pragma: no cover


def build_orders(pool: pd.DataFrame, *, seed: int, round: int, batch_size: int,  # noqa: A002
                 audit_ids: Sequence[str] = ()) -> pd.DataFrame:
    """Display orders for every pooled query (grader) and every audit query (auditor).

    Parameters
    ----------
    pool : pandas.DataFrame of shape (n_pairs, >= 2)
        The pool: ``query_id``, ``chunk_id`` (other columns are ignored and never read).
    seed : int
        The experiment seed (params ``seed``).
    round : int
        The grading round (params ``grading.round``).
    batch_size : int
        Most chunks in one batch (params ``grading.batch_size``).
    audit_ids : sequence of str
        The audit queries (params ``paths.audit``); each must be in the pool.

    Returns
    -------
    pandas.DataFrame of shape (n_pairs + n_audit_pairs, 7)
        ``query_id``, ``chunk_id``, ``role``, ``round`` (int64), ``position`` (0-based,
        int64), ``batch`` (``position // batch_size``, int64), ``order_seed`` (int64),
        sorted by role (grader first), query_id and position.

    Raises
    ------
    InputError
        ``round`` or ``batch_size`` is not a positive integer, or ``batch_size`` is above
        :data:`MAX_BATCH`; an audit query has no pooled chunk.
    """
    round = _check_int(round, "grading.round", minimum=1)
    batch_size = _check_int(batch_size, "grading.batch_size", minimum=1)
    if batch_size > MAX_BATCH:
        raise InputError(f"grading.batch_size must be an integer from 1 to {MAX_BATCH}: the "
                         f"protocol shows a grader at most {MAX_BATCH} chunks at a time",
                         item="grading.batch_size", found=repr(batch_size))
    by_query = {str(q): g["chunk_id"].astype(str).tolist()
                for q, g in pool[["query_id", "chunk_id"]].groupby("query_id", sort=True)}
    audit_ids = [str(q) for q in audit_ids]
    absent = [q for q in audit_ids if q not in by_query]
    if absent:
        raise InputError("audit query has no pooled chunk", item=absent[0],
                         fix="Rebuild the audit sample from the current pool (dvc repro audit)")
    columns = {c: [] for c in ORDERS}
    for role, qids in (("grader", list(by_query)), ("auditor", sorted(set(audit_ids)))):
        for qid in qids:
            order, oseed = display_order(by_query[qid], seed=seed, query_id=qid, role=role,
                                         round=round)
            n = len(order)
            columns["query_id"] += [qid] * n
            columns["chunk_id"] += order
            columns["role"] += [role] * n
            columns["round"] += [round] * n
            columns["position"] += range(n)
            columns["batch"] += [p // batch_size for p in range(n)]
            columns["order_seed"] += [oseed] * n
    out = pd.DataFrame(columns)
    for c in ("round", "position", "batch", "order_seed"):
        out[c] = out[c].astype(np.int64)
    return out


def build_triage_orders(pool: pd.DataFrame, *, seed: int, round: int,  # noqa: A002
                        batch_size: int) -> pd.DataFrame:
    """Display orders of every pooled query for the triage model grader (role ``triage``).

    Parameters, returns and errors are those of :func:`build_orders`, for the one role
    ``triage`` and without an audit sample.
    """
    orders = build_orders(pool.iloc[0:0], seed=seed, round=round, batch_size=batch_size)
    columns = {c: [] for c in ORDERS}
    for qid, g in pool[["query_id", "chunk_id"]].groupby("query_id", sort=True):
        order, oseed = display_order(g["chunk_id"].astype(str), seed=seed, query_id=str(qid),
                                     role=TRIAGE_ROLE, round=round)
        n = len(order)
        columns["query_id"] += [str(qid)] * n
        columns["chunk_id"] += order
        columns["role"] += [TRIAGE_ROLE] * n
        columns["round"] += [int(round)] * n
        columns["position"] += range(n)
        columns["batch"] += [p // int(batch_size) for p in range(n)]
        columns["order_seed"] += [oseed] * n
    out = pd.DataFrame(columns) if columns["query_id"] else orders
    for c in ("round", "position", "batch", "order_seed"):
        out[c] = out[c].astype(np.int64)
    return out


def build_packets(orders: pd.DataFrame, *, chunks: pd.DataFrame, intents: pd.DataFrame,
                  rubric_version: str, intents_sha256: str) -> dict[str, list[dict]]:
    """The packets of every role: what each grader sees, in the recorded display order.

    Parameters
    ----------
    orders : pandas.DataFrame
        Display orders (:func:`build_orders`).
    chunks : pandas.DataFrame
        The corpus: ``chunk_id``, ``header``, ``text``.
    intents : pandas.DataFrame
        The frozen intent table: ``query_id``, ``query``, ``intent``.
    rubric_version : str
        Params ``grading.rubric_version``.
    intents_sha256 : str
        The reviewed intent table's hash (:func:`relgrade.protocol.intents.check_frozen`).

    Returns
    -------
    dict of str to list of dict
        Role → its packets sorted by ``query_id``. Each packet has exactly the keys
        :data:`PACKET_KEYS` in that order; ``batches`` is a list of lists of
        ``{"chunk_id", "header", "text"}``, each of at most ``batch_size`` chunks.

    Raises
    ------
    InputError
        A chunk in the orders is not in the corpus; a query has no frozen intent; the
        orders put more than :data:`MAX_BATCH` chunks in one batch.

    Notes
    -----
    Holds every packet in memory at once; :func:`iter_packets` gives the same packets one
    at a time.
    """
    out: dict[str, list[dict]] = {}
    for role, packet in iter_packets(orders, chunks=chunks, intents=intents,
                                     rubric_version=rubric_version,
                                     intents_sha256=intents_sha256):
        out.setdefault(role, []).append(packet)
    return out


def iter_packets(orders: pd.DataFrame, *, chunks: pd.DataFrame, intents: pd.DataFrame,
                 rubric_version: str, intents_sha256: str) -> Iterator[tuple[str, dict]]:
    """The packets of :func:`build_packets`, one ``(role, packet)`` at a time.

    Parameters, packets and errors are those of :func:`build_packets`; the packets come
    sorted by role, then ``query_id``. Every check on the orders as a whole (a chunk not in
    the corpus) is made before the first packet is yielded; a query without a frozen intent
    or a batch above :data:`MAX_BATCH` is refused when its packet is reached.

    Time and memory are linear in the number of order rows: the corpus is looked up once
    for all rows (one hash join), and only one packet is held at a time.
    """
    chunk_ids = pd.Index(chunks["chunk_id"].astype(str))
    intent_of = {str(q): (str(t), str(i)) for q, t, i in
                 zip(intents["query_id"], intents["query"], intents["intent"])}
    ordered = orders.sort_values(["role", "query_id", "position"], kind="stable")
    wanted = ordered["chunk_id"].astype(str)
    at = chunk_ids.get_indexer_for(wanted) if chunk_ids.is_unique else None
    if at is None:  # a corpus with a repeated id: the first row of each id, as before
        first = ~chunk_ids.duplicated()
        chunk_ids, chunks = chunk_ids[first], chunks[np.asarray(first)]
        at = chunk_ids.get_indexer(wanted)
    missing = at < 0
    if missing.any():
        row = ordered[missing].iloc[0]
        raise InputError("pooled chunk is not in the corpus", item=str(row["chunk_id"]),
                         found=f"in the pool of query {row['query_id']}")
    headers = chunks["header"].to_numpy(dtype=object)[at]
    texts = chunks["text"].to_numpy(dtype=object)[at]
    roles = ordered["role"].to_numpy(dtype=object)
    qids = ordered["query_id"].to_numpy(dtype=object)
    cids = wanted.to_numpy(dtype=object)
    batch_of = ordered["batch"].to_numpy(dtype=np.int64)
    round_of = ordered["round"].to_numpy(dtype=np.int64)
    n = len(ordered)
    if n == 0:
        return
    # the rows of one (role, query): runs of equal keys in the sorted table
    change = np.flatnonzero((roles[1:] != roles[:-1]) | (qids[1:] != qids[:-1])) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [n]])
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        role, qid = str(roles[lo]), str(qids[lo])
        if qid not in intent_of:
            raise InputError("pooled query has no frozen intent", item=str(qid),
                             fix="Add its intent, review the table and rerun dvc repro intents")
        query, intent = intent_of[qid]
        rounds = np.unique(round_of[lo:hi])
        if len(rounds) != 1:
            raise InputError("orders hold more than one round for one query and role",
                             item=str(qid))
        batches: list[list[dict]] = []
        for i in range(lo, hi):
            b = int(batch_of[i])
            while len(batches) <= b:
                batches.append([])
            batches[b].append({"chunk_id": str(cids[i]), "header": _text(headers[i]),
                               "text": _text(texts[i])})
        for b, chunks_of in enumerate(batches):
            check_batch(chunks_of, item=f"{qid} batch {b} ({role})")
        yield role, {
            "query_id": qid,
            "query": query,
            "intent": intent,
            "rubric_version": str(rubric_version),
            "intents_sha256": str(intents_sha256),
            "round": int(rounds[0]),
            "batches": [b for b in batches if b],
        }


def packet_json(packet: dict) -> str:
    """``json.dumps(packet, indent=2, ensure_ascii=False) + "\\n"``, the bytes of a packet
    file, written without the standard library's pure-Python indenting encoder.

    Parameters
    ----------
    packet : dict
        A packet as :func:`iter_packets` makes it: the keys of :data:`PACKET_KEYS`, string
        values but for the integer ``round``, ``batches`` a list of lists of chunks with the
        string values of :data:`CHUNK_KEYS`.

    Returns
    -------
    str
        The packet's JSON text, identical to the standard encoder's: two-space indent,
        ``", "``-free separators (``","`` at line ends, ``": "`` after keys), strings escaped
        by :func:`json.encoder.encode_basestring` (non-ASCII kept). Any other shape falls
        back to :func:`json.dumps` itself.

    Examples
    --------
    >>> p = {"query_id": "q1", "query": "é", "intent": "i", "rubric_version": "v1",
    ...      "intents_sha256": "ab", "round": 1,
    ...      "batches": [[{"chunk_id": "c1", "header": "h", "text": "a\\nb"}]]}
    >>> packet_json(p) == json.dumps(p, indent=2, ensure_ascii=False) + "\\n"
    True
    """
    plain = (type(packet) is dict and tuple(packet) == PACKET_KEYS
             and type(packet["round"]) is int
             and all(type(packet[k]) is str for k in PACKET_KEYS[:5])
             and type(packet["batches"]) is list
             and all(type(b) is list and b and all(
                 type(c) is dict and tuple(c) == CHUNK_KEYS
                 and all(type(v) is str for v in c.values()) for c in b)
                 for b in packet["batches"]))
    if not plain:
        return json.dumps(packet, indent=2, ensure_ascii=False) + "\n"
    enc = _encode_string
    head = "".join(f'  {enc(k)}: {enc(packet[k])},\n' for k in PACKET_KEYS[:5])
    head += f'  "round": {packet["round"]},\n'
    if not packet["batches"]:
        return "{\n" + head + '  "batches": []\n}\n'
    batches = ",\n".join(
        "    [\n" + ",\n".join(
            f'      {{\n        "chunk_id": {enc(c["chunk_id"])},\n'
            f'        "header": {enc(c["header"])},\n'
            f'        "text": {enc(c["text"])}\n      }}' for c in batch) + "\n    ]"
        for batch in packet["batches"])
    return "{\n" + head + '  "batches": [\n' + batches + "\n  ]\n}\n"


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def packet_filename(query_id: str) -> str:
    """The file name of a query's packet: ``QUERY_ID.json``.

    Raises
    ------
    InputError
        The id cannot be a file name (empty, ``.``/``..``, or holds ``/``, ``\\`` or NUL).
    """
    qid = str(query_id)
    if qid in ("", ".", "..") or any(ch in qid for ch in "/\\\0"):
        raise InputError("query id cannot name a packet file", item=repr(qid),
                         fix="Use query ids without /, \\ or NUL")
    return f"{qid}.json"


def check_packet(packet: dict, *, path=None) -> dict:
    """Refuse a packet whose keys are not exactly :data:`PACKET_KEYS` and :data:`CHUNK_KEYS`.

    Raises
    ------
    InputError
        A key is missing, extra or out of order, in the packet or in one of its chunks; a
        batch holds more than :data:`MAX_BATCH` chunks.
    """
    if not isinstance(packet, dict) or tuple(packet) != PACKET_KEYS:
        raise InputError(f"packet keys must be exactly {', '.join(PACKET_KEYS)}", path=path,
                         found=", ".join(packet) if isinstance(packet, dict) else type(packet).__name__)
    for b, batch in enumerate(packet["batches"]):
        check_batch(batch, path=path, item=f"{packet['query_id']} batch {b}")
        for chunk in batch:
            if not isinstance(chunk, dict) or tuple(chunk) != CHUNK_KEYS:
                raise InputError(f"packet chunk keys must be exactly {', '.join(CHUNK_KEYS)}",
                                 path=path, item=str(packet["query_id"]))
    return packet


def packets_jsonl(packets: Iterable[dict]) -> bytes:
    """Packets as JSON Lines: one packet per line, canonical JSON (keys in packet order).

    Parameters
    ----------
    packets : iterable of dict
        Packets as :func:`build_packets` makes them, in the order to write.

    Returns
    -------
    bytes
        UTF-8, one line per packet, each ending in LF.
    """
    return "".join(canonical_json(check_packet(p)) + "\n" for p in packets).encode("utf-8")
