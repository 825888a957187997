"""Stage `intents`: the intent table + its review record → the frozen intent table and manifest.

Refuses (ProtocolError) unless the review record signs exactly this table's sha256; no review
yet (the record ``relgrade init`` writes, or none) is pending work naming
``relgrade intents review``.
"""

from relgrade.io.files import (
    read_json,
    read_rows,
    read_table,
    write_json,
    write_parquet,
)
from relgrade.experiment.layout import review_command
from relgrade.protocol import intents
from relgrade.schema import INTENTS


def run(ex):
    cfg = ex.params.need("intents")
    src, review = ex.file(cfg.input), ex.file(cfg.review)
    table, lines = read_rows(src, INTENTS)
    frozen = intents.validate_intents(table, queries=read_table(ex.path("queries")),
                                      path=src, lines=lines)
    record = read_json(review) if review.exists() else None
    manifest = intents.check_review(frozen, record, path=cfg.review, fix=review_command(ex))
    write_parquet(ex.path("intents"), frozen)
    write_json(ex.path("intents_manifest"), manifest)

