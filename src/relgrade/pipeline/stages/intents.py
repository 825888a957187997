"""Stage `intents`: the intent table + its review record → the frozen intent table and manifest.

Refuses (ProtocolError) unless the review record signs exactly this table's sha256; no review
yet (the record ``relgrade init`` writes, or none) is pending work naming
``relgrade intents review``. After a query-set refresh (the sample manifest's ``refresh``
block), intents still owed for the queries it added, or lines left for the queries it
retired, are pending work naming both, not an error.
"""

from relgrade.io.files import (
    read_json,
    read_rows,
    read_table,
    write_json,
    write_parquet,
)
from relgrade.errors import PendingWork
from relgrade.experiment.layout import review_command, top_path
from relgrade.protocol import intents
from relgrade.schema import INTENTS


def run(ex):
    cfg = ex.params.need("intents")
    src, review = ex.file(cfg.input), ex.file(cfg.review)
    table, lines = read_rows(src, INTENTS)
    queries = read_table(ex.path("queries"))
    # the pending work names the files as typed at the repository's top, beside its commands
    _refresh_pending(ex, table, queries, top_path(ex, cfg.input), review_command(ex))
    frozen = intents.validate_intents(table, queries=queries,
                                      path=src, lines=lines)
    record = read_json(review) if review.exists() else None
    manifest = intents.check_review(frozen, record, path=top_path(ex, cfg.review),
                                    fix=review_command(ex))
    write_parquet(ex.path("intents"), frozen)
    write_json(ex.path("intents_manifest"), manifest)



def _refresh_pending(ex, table, queries, src, review):
    """Pending work when the intent table differs from the query set only by a refresh."""
    if not getattr(ex.params.paths, "sample_manifest", None) or not ex.path(
            "sample_manifest").exists():
        return
    block = read_json(ex.path("sample_manifest")).get("refresh")
    if not block:
        return
    have = set(table["query_id"].astype(str))
    want = set(queries["query_id"].astype(str))
    owed, stale = sorted(want - have), sorted(have - want)
    if not owed and not stale:
        return
    if set(owed) <= set(block["added"]) and set(stale) <= set(block["retired"]):
        parts = []
        if owed:
            parts.append(f"{len(owed)} quer{'y' if len(owed) == 1 else 'ies'} added by the "
                         f"query-set refresh need an intent ({', '.join(owed)})")
        if stale:
            parts.append(f"the lines of {len(stale)} retired quer"
                         f"{'y' if len(stale) == 1 else 'ies'} go ({', '.join(stale)})")
        raise PendingWork(f"intents: {'; '.join(parts)}: edit {src}, then {review}")
