"""Stage `intents`: the intent table + its review record → the frozen intent table and manifest.

Refuses (ProtocolError) unless the review record signs exactly this table's sha256.
"""

from pathlib import Path

from relgrade.experiment.stage import path_of, run_stage, section
from relgrade.io.files import (
    read_json,
    read_rows,
    read_table,
    write_json,
    write_parquet,
)
from relgrade.protocol import intents
from relgrade.schema import INTENTS


def main(params):
    cfg = section(params, "intents")
    src, review = Path(cfg["input"]), Path(cfg["review"])
    table, lines = read_rows(src, INTENTS)
    frozen = intents.validate_intents(table, queries=read_table(path_of(params, "queries")),
                                      path=src, lines=lines)
    record = read_json(review) if review.exists() else None
    manifest = intents.check_review(frozen, record, path=review)
    write_parquet(path_of(params, "intents"), frozen)
    write_json(path_of(params, "intents_manifest"), manifest)


if __name__ == "__main__":
    run_stage(main)
