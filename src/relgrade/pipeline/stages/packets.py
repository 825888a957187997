"""Stage `packets`: pool + chunks + frozen, reviewed intents → one packet per query and role.

A partial regrade round (``grading.regrade: relevant``) holds only the pairs graded
relevant in the round before, plus any pair still owed.

In triage mode (``grading.mode: triage``) the triage model grader's packets hold every pool
pair; the key grader's (and on audited queries the auditor's) hold the people's triage queue:
the pairs the model graded relevant plus the seeded sample of its 0s, written with their
inclusion probabilities to ``paths.triage_queue``. Until the model has graded the whole pool
the queue is empty and the people have no packets yet (pending work of the model grader).

Refuses (ProtocolError) unless the intents manifest names a reviewer and its sha256 matches
the frozen intent table. The packet folder is written complete beside its target and then
swapped in, so a failure leaves the previous packets untouched.

With a rater panel (``grading.mode: raters``) every rater gets its own packets,
``packets/rater/NAME/``: the pairs assigned to it and its gold questions, in one seeded
shuffle per query; the private assignment table (``paths.assignment``) records which is
which.

With params ``grading.share_from``, a pair whose grade by a grader of a role is reused from
another experiment's bank (:mod:`relgrade.pipeline.sharing`) is left out of that role's
packets: ``relgrade grade run`` and ``relgrade serve`` show only the remainder.
"""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from relgrade.errors import InputError
from relgrade.pipeline.judgments import judgments
from relgrade.io.files import (
    ParquetBlocks,
    atomic_dir,
    read_json,
    read_table,
    write_json,
    write_text_into,
    write_parquet,
    write_tsv,
)
from relgrade.protocol import intents, packets, triage
from relgrade.ranking import arrow_ids, pair_hashes
from relgrade.schema import ORDERS, ROLES, TRIAGE_QUEUE, TRIAGE_ROLE


def run(ex):
    grading, manifest_path = ex.params.grading, ex.path("intents_manifest")
    manifest = read_json(manifest_path) if manifest_path.exists() else None
    frozen = read_table(ex.path("intents")) if manifest is not None else None
    sha = intents.check_frozen(frozen, manifest, path=manifest_path)
    if (not (grading.regrade == "relevant" and grading.round > 1)
            and grading.mode not in ("triage", "raters") and not grading.share_from):
        try:
            # the usual round: the pool read, its packets written and its orders recorded
            # a block of queries at a time
            _by_query_blocks(ex, frozen, sha)
            return
        except (_Whole, InputError, OSError, pa.ArrowException):
            pass  # what only the whole tables word or handle: built below, as ever
    pool = read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    audit_ids = ex.audit_ids() or []
    owed_by = None
    if grading.regrade == "relevant" and grading.round > 1:
        # a partial regrade: only the pairs graded relevant in the round before (and any
        # still owed), in fresh orders of this round
        held = judgments(ex, pool, audit_ids)
        pool, owed_by = held.round_pairs, held.owed_by
    roles = ROLES
    if grading.mode == "triage":
        pool, audit_ids, model_orders = _triage(ex, pool, audit_ids)
        roles = (*ROLES, TRIAGE_ROLE)
    build = dict(seed=ex.params.need("seed"), round=grading.round,
                 batch_size=grading.batch_size, audit_ids=audit_ids)
    if owed_by is None:
        orders = packets.build_orders(pool, **build)
    else:  # each role's packets hold exactly what its grader owes this round
        orders = pd.concat([
            _role_orders(pool, owed_by.get(ex.params.need(name), set()), role, build)
            for role, name in (("grader", "grading.key_grader"), ("auditor", "grading.auditor"))],
            ignore_index=True)
    if grading.mode == "triage":
        orders = pd.concat([orders, model_orders], ignore_index=True)
    if grading.share_from:  # a pair another experiment graded for this role's grader is not owed
        orders = _without_reused(ex, orders, pool, audit_ids)
    chunks = read_table(ex.path("chunks"))
    make = dict(chunks=chunks, intents=frozen, intents_sha256=sha,
                rubric_version=ex.params.need("grading.rubric_version"))
    panel_orders = None
    if grading.mode == "raters":
        # the key grader is the panel's aggregate: the auditor keeps its packets, and each
        # rater gets its own queue, gold hidden among the work (the flags stay private)
        from relgrade.pipeline.panel import build_rater_orders

        orders = orders[orders["role"] == "auditor"].reset_index(drop=True)
        panel_orders = build_rater_orders(ex, pool, on_dealt=_say_dealt)
    built_for = {**ex.packets_current(), "regrade": grading.regrade}
    with atomic_dir(ex.path("packets")) as tmp:
        # what these packets were built for: grade run, serve and grade import refuse
        # packets of another pool version, round or intent table
        write_json(tmp / packets.PACKETS_MANIFEST, built_for)
        for role in roles:
            (tmp / role).mkdir()
        # one packet at a time, straight to its file: memory stays that of one packet
        for role, packet in packets.iter_packets(orders, **make):
            if role in roles:
                write_text_into(tmp / role, packets.packet_filename(packet["query_id"]),
                                packets.packet_json(packet))
        if panel_orders is not None:
            for name, mine in panel_orders.groupby("grader", sort=True):
                folder = tmp / "rater" / str(name)
                folder.mkdir(parents=True)
                shown = mine[list(ORDERS)]
                for role, packet in packets.iter_packets(shown, **make):
                    if role == "rater":
                        write_text_into(folder, packets.packet_filename(packet["query_id"]),
                                        packets.packet_json(packet))
    write_parquet(ex.path("orders"), orders)
    if panel_orders is not None:
        write_parquet(ex.path("assignment"), panel_orders)


#: Pool rows read at once by the usual round's packets (whole queries are kept together):
#: the stage's memory is about one such block, its orders and its packets.
BLOCK_ROWS = 131_072


class _Whole(Exception):
    """The pool or corpus holds what only the whole-table path words or handles (an
    unsorted pool, a chunk missing from the corpus, an audit query missing from the pool,
    a refused packet): that path builds the packets instead, from scratch."""


def _by_query_blocks(ex, frozen, sha) -> None:
    """The packets and orders of the usual round, the pool read a block of queries at a
    time; the same files, byte for byte, as the whole-table path below writes.

    Pass 1 writes every pooled query's grader packet and orders, pass 2 every audit
    query's auditor packet and orders, so the orders file keeps its row order (role
    grader first, then query, then position). The corpus is held as Arrow columns (id,
    header, text) and looked up per block; everything else is one block.

    Raises
    ------
    _Whole
        The pool file is not sorted by ``query_id`` (as the pool stage writes it), or is
        empty; a pooled chunk is not in the corpus or the corpus repeats an id; an audit
        query is not in the pool. Every packet and orders row written so far is removed.
    InputError
        A rule :func:`relgrade.protocol.packets.build_orders` or
        :func:`~relgrade.protocol.packets.iter_packets` enforces; the whole-table path
        then words it in its own order.
    """
    grading = ex.params.grading
    audit_ids = [str(q) for q in (ex.audit_ids() or [])]
    build = dict(seed=ex.params.need("seed"), round=grading.round,
                 batch_size=grading.batch_size)
    chunks = pq.read_table(ex.path("chunks"), columns=["chunk_id", "header", "text"])
    corpus_ids = chunks.column("chunk_id")
    # the corpus looked up by the 64-bit hash of each id, sorted once (8 + 8 bytes a chunk);
    # a block's ids are found by binary search and then compared as strings
    hashes = pair_hashes(None, arrow_ids(corpus_ids))
    by_hash = np.argsort(hashes, kind="stable")
    hashes = hashes[by_hash]
    if len(hashes) > 1 and bool(np.any(hashes[1:] == hashes[:-1])):
        raise _Whole("the corpus repeats a chunk id (or two ids share a hash)")
    rubric = ex.params.need("grading.rubric_version")
    intent_rows = frozen[["query_id", "query", "intent"]]
    intent_ids = intent_rows["query_id"].astype(str)

    def write_packets(tmp, orders):
        """One block's packets, looked up in the corpus by id."""
        wanted = arrow_ids(orders["chunk_id"])
        h = pair_hashes(None, wanted)
        at = np.minimum(np.searchsorted(hashes, h), max(len(hashes) - 1, 0))
        if not len(hashes) or bool(np.any(hashes[at] != h)):
            raise _Whole("a pooled chunk is not in the corpus")
        at = by_hash[at]
        if not pc.all(pc.equal(corpus_ids.take(pa.array(at)), wanted)).as_py():
            raise _Whole("a pooled chunk is not in the corpus (its hash is another id's)")
        rows = np.unique(at)
        seen = chunks.take(pa.array(rows))
        block_chunks = pd.DataFrame({c: seen.column(c).to_pandas() for c in seen.column_names})
        block_intents = intent_rows[intent_ids.isin(set(orders["query_id"]))]
        for role, packet in packets.iter_packets(orders, chunks=block_chunks,
                                                 intents=block_intents, intents_sha256=sha,
                                                 rubric_version=rubric):
            write_text_into(tmp / role, packets.packet_filename(packet["query_id"]),
                            packets.packet_json(packet))

    built_for = {**ex.packets_current(), "regrade": grading.regrade}
    wanted = set(audit_ids)
    found: set[str] = set()
    with ParquetBlocks(ex.path("orders")) as recorded:
        with atomic_dir(ex.path("packets")) as tmp:
            write_json(tmp / packets.PACKETS_MANIFEST, built_for)
            for role in ROLES:
                (tmp / role).mkdir()
            any_rows = False
            for block in _query_blocks(ex.path("pool")):
                any_rows = True
                orders = packets.build_orders(block, **build)
                write_packets(tmp, orders)
                recorded.write(orders)
            if not any_rows:
                raise _Whole("an empty pool")
            if wanted:
                for block in _query_blocks(ex.path("pool")):
                    mine = block[block["query_id"].isin(wanted)]
                    if not len(mine):
                        continue
                    ids = sorted(set(mine["query_id"]))
                    found.update(ids)
                    orders = packets.build_orders(mine, **build, audit_ids=ids)
                    orders = orders[orders["role"] == "auditor"].reset_index(drop=True)
                    write_packets(tmp, orders)
                    recorded.write(orders)
                if found != wanted:
                    raise _Whole("an audit query has no pooled chunk")


def _query_blocks(path, rows: int = BLOCK_ROWS):
    """The pool file's ``query_id`` and ``chunk_id`` as DataFrames of whole queries, about
    ``rows`` rows each, in file order.

    Raises
    ------
    _Whole
        The file's ``query_id`` is not in ascending (code-point) order, as the pool stage
        writes it.
    """
    carry = None
    last = None
    for batch in pq.ParquetFile(path).iter_batches(batch_size=rows,
                                                   columns=["query_id", "chunk_id"]):
        if not batch.num_rows:
            continue
        table = pa.Table.from_batches([batch])
        q = table.column("query_id")
        if last is not None and q[0].as_py() < last:
            raise _Whole("the pool is not sorted by query_id")
        if len(q) > 1 and not pc.all(pc.less_equal(q.slice(0, len(q) - 1),
                                                   q.slice(1))).as_py():
            raise _Whole("the pool is not sorted by query_id")
        last = q[-1].as_py()
        if carry is not None:
            table = pa.concat_tables([carry, table])
        # the rows of the last query may go on in the next batch: kept for later
        cut = pc.index(table.column("query_id"), last).as_py()
        carry = table.slice(cut)
        if cut:
            yield table.slice(0, cut).to_pandas()
    if carry is not None and len(carry):
        yield carry.to_pandas()


def _say_dealt(dealt) -> None:
    """One line when raters were removed on gold: who, and where their pairs went."""
    if not dealt.removed:
        return
    short = (f"; {len(dealt.short)} pairs had no rater left to take them"
             if dealt.short else "")
    print(f"packets: removed on gold: {', '.join(dealt.removed)}; "
          f"{dealt.dealt} of their open pairs dealt to the raters who stay{short}")


def _role_orders(pool, owed, role, build):
    """One role's orders over the pool pairs its grader owes (a partial regrade: the
    auditor's audit pairs of a newly audited query are not the key grader's work)."""
    keep = [(str(q), str(c)) in owed for q, c in zip(pool["query_id"], pool["chunk_id"])]
    mine = pool[pd.Series(keep, index=pool.index, dtype=bool)]
    orders = packets.build_orders(mine, **build)
    return orders[orders["role"] == role]


def _without_reused(ex, orders, pool, audit_ids):
    """``orders`` less the rows of pairs whose grade, by a grader of the row's role, is
    reused from a share source (params ``grading.share_from``)."""
    shared = judgments(ex, pool, audit_ids).shared
    roles = {name: spec["role"] for name, spec in ex.params.graders_dict().items()}
    drop = {(roles.get(str(g)), str(q), str(c))
            for g, q, c in zip(shared["grader"], shared["query_id"], shared["chunk_id"])}
    keep = [(str(r), str(q), str(c)) not in drop
            for r, q, c in zip(orders["role"], orders["query_id"], orders["chunk_id"])]
    return orders[pd.Series(keep, index=orders.index, dtype=bool)].reset_index(drop=True)


def _triage(ex, pool, audit_ids):
    """The people's pairs and audited queries, and the model's orders, in triage mode."""
    grading = ex.params.grading
    model_orders = packets.build_triage_orders(pool, seed=ex.params.need("seed"),
                                               round=grading.round,
                                               batch_size=grading.batch_size)
    held = judgments(ex, pool, audit_ids)
    queue = held.triage_queue
    if queue is None:
        print(f"note: people's triage queue waits for {held.triage_grader} to grade every "
              "pool pair")
        queue = pd.DataFrame({c: [] for c in TRIAGE_QUEUE})
    write_tsv(ex.path("triage_queue"), queue)
    people = triage.people_queue(queue)
    audited = [q for q in audit_ids if q in set(people["query_id"])]
    skipped = sorted(set(audit_ids) - set(audited))
    if skipped and len(people):
        print(f"note: audit queries with no pair in the triage queue: {', '.join(skipped)}")
    return people, audited, model_orders

