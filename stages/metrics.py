"""Stage `metrics ARM`: one arm's measures on the frozen key, and the key's use in the ledger.

Refuses when the key file's sha256 is not the one its record froze. Writes
`paths.metrics/ARM.json` (means, key hash, pool version, post-hoc flag) and
`paths.per_query/ARM.parquet` (query_id, group, measure, value). The ledger entry is written
first, so no metric exists without the key's use being recorded.
"""

import sys
from datetime import datetime, timezone

import pandas as pd

from relgrade.errors import InputError, ProtocolError
from relgrade.evaluation import metrics
from relgrade.experiment.stage import path_of, run_stage, section
from relgrade.io.files import (
    read_json,
    read_jsonl,
    read_table,
    sha256_file,
    write_json,
    write_jsonl,
    write_parquet,
)
from relgrade.io.runs import read_run
from relgrade.protocol import ledger
from relgrade.ranking import validate_run


def main(params):
    arm = sys.argv[1] if len(sys.argv) > 1 else None
    if arm not in section(params, "arms"):
        raise InputError("unknown arm", item=str(arm), fix="Name an arm of params `arms`")
    key_path, record = path_of(params, "key"), read_json(path_of(params, "record"))
    key_sha = sha256_file(key_path)
    if key_sha != record["key_sha256"]:
        raise ProtocolError(f"{key_path}: the key's sha256 {key_sha} is not the frozen "
                            f"{record['key_sha256']} of its record; rerun the key stage")
    key = pd.DataFrame(read_jsonl(key_path), columns=["query_id", "chunk_id", "grade"])
    queries = read_table(path_of(params, "queries"), columns=["query_id", "group"])
    run_path = path_of(params, "runs") / f"{arm}.trec"
    run = read_run(run_path)
    validate_run(run, path=run_path, queries=queries["query_id"])
    summary, table = metrics.evaluate_arm(
        key=key, run=run, cutoffs=section(params, "metrics")["cutoffs"],
        relevant_min=section(params, "scale")["relevant_min"],
        ties=section(params, "runs")["ties"], groups=queries)
    ledger_path = path_of(params, "ledger")
    write_jsonl(ledger_path, ledger.add_use(
        read_jsonl(ledger_path) if ledger_path.exists() else [],
        pool_version=record["pool_version"], rubric_version=record["rubric_version"],
        round=record["round"], key_sha256=key_sha,
        used_at=datetime.now(timezone.utc).isoformat(timespec="seconds")))
    write_json(path_of(params, "metrics") / f"{arm}.json",
               {"arm": arm, "key_sha256": key_sha, "pool_version": record["pool_version"],
                "post_hoc": bool(record.get("post_hoc", False)), **summary})
    write_parquet(path_of(params, "per_query") / f"{arm}.parquet", table)


if __name__ == "__main__":
    run_stage(main)
