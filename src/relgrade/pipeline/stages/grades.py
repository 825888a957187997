"""Stage `grades`: the judgment bank → the current grades of the pool, or the pending work.

Every grader's files of this round (and, for a partial regrade, of the rounds it merges) are
read with their bank sidecars (what each grade was made on). Grades of pairs outside the
pool stay in the bank, unused; a grade whose chunk, intent line or rubric changed since is
stale and left out. When a grader still owes pairs (new, stale, audit or regrade) the stage
stops with one line naming them, writing nothing.

In triage mode the triage model grader owes every pool pair, and the key grader (and on
audited queries the auditor) owe the people's triage queue; a person's grade of a pool pair
outside that queue is refused. With a rater panel (``grading.mode: raters``) the raters owe
their queues and the table goes to ``paths.rater_grades``, for the aggregation stage; a
rater's grade of a pair outside their current queue (made under an earlier assignment) is
left out of it, kept in the bank.

With params ``grading.share_from``, grades reused from other experiments' banks count as
this round's (:mod:`relgrade.pipeline.sharing`); the table then carries an ``origin``
column and the manifest a ``shared`` section (per source, per grader, the pairs reused).

In the common round (one round, nothing shared, neither triage nor a rater panel) the bank
is read, made current and written a block of whole queries at a time
(:mod:`relgrade.pipeline.judgments_blocks`): the same bytes, in memory that does not grow
with the bank. A file out of query order, any broken rule or any work owed sends the stage
to the whole path, which words every error and note as before.

The manifest's ``judging`` block holds, per grader, the judgments spent and pending, counted
as ``relgrade status`` counts them (:func:`relgrade.pipeline.judgments.judgment_counts`); the
decision report prices it.
"""

import pandas as pd

from relgrade.errors import InputError
from relgrade.pipeline import judgments_blocks, sharing
from relgrade.pipeline.judgments import judgment_counts, judgments, pending_status
from relgrade.pipeline.memory import arrow_from_jemalloc
from relgrade.experiment.layout import grade_commands
from relgrade.experiment.progress import QUIET_SECONDS, step_printer
from relgrade.io import files as io
from relgrade.protocol import bank, grades, triage


def run(ex):
    with arrow_from_jemalloc():
        _run(ex)


def _run(ex):
    grading = ex.params.grading
    step = step_printer("grades", 3, quiet=QUIET_SECONDS)
    step("the judgment bank: every grade file, checked, and what is owed")
    if judgments_blocks.eligible(ex) and _by_blocks(ex):
        return
    pool = io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    audit_ids = ex.audit_ids() or []
    held = judgments(ex, pool, audit_ids)
    pending = held.pending
    auditor = ex.params.need("grading.auditor")
    if ex.params.need("gates").audit_coverage_min < 1:
        # params accept an incomplete audit: the auditor's open pairs are the gate's to weigh
        # (it fails below gates.audit_coverage_min, naming the counts), not a stop here
        owed = pending["grader"] == auditor
        if owed.any():
            print(f"note: {int(owed.sum())} audit pairs not graded by {auditor}; the gate "
                  "checks gates.audit_coverage_min")
        pending = pending[~owed]
    if held.triage_grader is not None and held.triage_queue is None:
        print(f"note: the people's triage queue is built once {held.triage_grader} has graded "
              "every pool pair (dvc repro builds their packets)")
    bank.require_no_pending(pending, how=grade_commands(ex))
    key_pairs = None
    if held.triage_queue is not None:
        key_pairs = triage.people_queue(held.triage_queue)
        _people_in_queue(ex, held, pool)
    step("the current grade of every pool pair")
    # the table is sorted as it is written, a row group at a time, unless rows are added
    # to it or taken from it first (grades reused from other experiments, a rater panel)
    by_blocks = held.shared is None and grading.mode != "raters"
    table, manifest = grades.current_table(
        held.bank, graders=ex.params.graders_dict(), pool=pool, audit_query_ids=audit_ids,
        round=grading.round,
        intents_sha256=io.read_json(ex.path("intents_manifest")).get("sha256"),
        files=held.files, key_pairs=key_pairs, whole=not by_blocks, **held.now)
    # what each grader made and owes, counted as `relgrade status` counts it
    manifest["judging"] = judgment_counts(pending_status(
        ex, held=held, table=table.rows if by_blocks else table, adjudication=False))
    if held.shared is not None:  # grades reused from other experiments: each row's origin
        table, manifest["shared"] = _origins(ex, table, held.shared)
    if held.scope is not None:  # a partial regrade: which rounds merged, how many pairs again
        ignored = held.ignored if held.ignored is not None else pd.DataFrame()
        manifest["regrade"] = {
            "mode": grading.regrade, "rounds": held.rounds, "pairs": len(held.scope),
            "merged": held.merged_counts(),
            "ignored": {str(g): int(n) for g, n in ignored.groupby("grader").size().items()}
            if len(ignored) else {}}
        if len(ignored):
            pairs = sorted({f"{q}/{c}" for q, c in zip(ignored["query_id"], ignored["chunk_id"])})
            more = f" and {len(pairs) - 5} more" if len(pairs) > 5 else ""
            print(f"note: {len(ignored)} round-{grading.round} grades of pairs this partial "
                  f"round does not regrade are ignored (kept in the bank, unused): "
                  f"{', '.join(pairs[:5])}{more}")
    # with a rater panel this table is the raters' (and auditor's and expert's); the
    # aggregation and adjudication stages make the key grader's rows from it
    step("writing the grades table and its manifest")
    out = "rater_grades" if grading.mode == "raters" else "grades"
    if grading.mode == "raters":
        table = _queued_only(ex, table)
    if by_blocks:
        held.bank = pool = None  # counted: let them go before the table is written
        release_unused()
        with io.ParquetBlocks(ex.path(out)) as w:
            for block in table.blocks(WRITE_BLOCK_ROWS):
                w.write(block)
                del block
    else:
        io.write_parquet(ex.path(out), table)
    io.write_json(ex.path("grades_manifest"), manifest)
    for line in grades.coverage_lines(manifest):
        print(line)


def _by_blocks(ex) -> bool:
    """The common round's grades table and manifest made a block of whole queries at a time
    (:func:`relgrade.pipeline.judgments_blocks.grades_by_blocks`); False, with nothing
    written, when the whole path must make them (it words every error and note)."""
    try:
        intents_sha256 = io.read_json(ex.path("intents_manifest")).get("sha256")
        audit_ids = ex.audit_ids() or []
    except InputError:
        return False  # the whole path says so, in its order
    manifest = judgments_blocks.grades_by_blocks(ex, ex.path("grades"), audit_ids=audit_ids,
                                                 intents_sha256=intents_sha256)
    if manifest is None:
        return False
    io.write_json(ex.path("grades_manifest"), manifest)
    for line in grades.coverage_lines(manifest):
        print(line)
    return True


#: Rows of the sorted grades table taken at a time while it is written (the file's row
#: groups are :data:`relgrade.io.files.ROW_GROUP_ROWS` rows, whatever this is).
WRITE_BLOCK_ROWS = 65536


def release_unused() -> None:
    """Hand Arrow's freed buffers back to the system (the bank's columns live there)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _origins(ex, table, shared):
    """The grades table with an ``origin`` column ("" for own grades, else the source as
    params ``grading.share_from`` names it) and the manifest's ``shared`` section."""
    keys = shared[["query_id", "chunk_id", "grader", "origin"]].astype(str)
    table = table.merge(keys, on=["query_id", "chunk_id", "grader"], how="left")
    table["origin"] = table["origin"].fillna(sharing.OWN).astype(str)
    counts = sharing.shared_counts(table)
    return table, {entry: {"pairs": counts.get(entry, {})}
                   for entry in ex.params.grading.share_from}


def _people_in_queue(ex, held, pool):
    """Refuse a key grader's or auditor's current grade of a pool pair outside the queue."""
    now = bank.current_grades(held.bank, **held.now)
    pairs = grades.pool_pairs_of(pool)
    for name in (ex.params.need("grading.key_grader"), ex.params.need("grading.auditor")):
        mine = now[now["grader"].astype(str) == name]
        keep = [(str(q), str(c)) in pairs for q, c in zip(mine["query_id"], mine["chunk_id"])]
        mine = mine[pd.Series(keep, index=mine.index, dtype=bool)]
        f = held.files.get(name)
        triage.check_people_grades(mine[["query_id", "chunk_id", "grade"]],
                                   held.triage_queue, grader=name,
                                   path=None if f is None else f.source)



def _queued_only(ex, table):
    """The table less the raters' grades of pairs outside their current queues (made under
    an earlier assignment: kept in the bank, unused), with a note saying how many."""
    from relgrade.pipeline.panel import queued_grades, raters_of, read_assignment

    is_rater = table["grader"].astype(str).isin(raters_of(ex))
    kept, aside = queued_grades(table[is_rater], read_assignment(ex))
    if aside:
        print(f"note: {aside} rater grades of pairs no longer in their rater's queue are "
              "set aside (kept in the bank, unused)")
    return pd.concat([table[~is_rater], kept], ignore_index=True)
