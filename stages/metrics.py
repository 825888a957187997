"""Stage `metrics ARM`: one arm's measures on the frozen key, and the key's use in the ledger.

Refuses when the key file's sha256 is not the one its record froze. Writes
`paths.metrics/ARM.json` (means, key hash, pool version, post-hoc flag) and
`paths.per_query/ARM.parquet` (query_id, group, measure, value). The ledger entry is written
first, so no metric exists without the key's use being recorded.
"""

import sys
from datetime import datetime, timezone

from relgrade.errors import InputError
from relgrade.evaluation import metrics
from relgrade.experiment.stage import run_stage
from relgrade.io.files import (
    read_jsonl,
    read_table,
    write_json,
    write_jsonl,
    write_parquet,
)
from relgrade.io.runs import read_run
from relgrade.protocol import ledger
from relgrade.ranking import validate_run


def main(ex):
    arm = sys.argv[1] if len(sys.argv) > 1 else None
    if arm not in ex.params.need("arms"):
        raise InputError("unknown arm", item=str(arm), fix="Name an arm of params `arms`")
    key, record = ex.read_key()
    key_sha = record["key_sha256"]
    queries = read_table(ex.path("queries"), columns=["query_id", "group"])
    run_path = ex.path("runs") / f"{arm}.trec"
    run = read_run(run_path)
    validate_run(run, path=run_path, queries=queries["query_id"])
    summary, table = metrics.evaluate_arm(
        key=key, run=run, cutoffs=ex.params.need("metrics").cutoffs,
        relevant_min=ex.params.need("scale").relevant_min, ties=ex.params.runs.ties,
        groups=queries)
    ledger_path = ex.path("ledger")
    write_jsonl(ledger_path, ledger.add_use(
        read_jsonl(ledger_path) if ledger_path.exists() else [],
        pool_version=record["pool_version"], rubric_version=record["rubric_version"],
        round=record["round"], key_sha256=key_sha,
        used_at=datetime.now(timezone.utc).isoformat(timespec="seconds")))
    write_json(ex.path("metrics") / f"{arm}.json",
               {"arm": arm, "key_sha256": key_sha, "pool_version": record["pool_version"],
                "post_hoc": bool(record.get("post_hoc", False)), **summary})
    write_parquet(ex.path("per_query") / f"{arm}.parquet", table)


if __name__ == "__main__":
    run_stage(main)
