"""Stage `key`: after a passed gate, freeze the key grader's grades as the hashed key."""

from datetime import datetime, timezone

from relgrade.experiment.stage import run_stage
from relgrade.io import files as io
from relgrade.io.trec import write_trec_qrels
from relgrade.protocol import key, ledger


def main(ex):
    gate_path, grading = ex.path("gate"), ex.params.grading
    rubric_version = ex.params.need("grading.rubric_version")
    key.require_gate(io.read_json(gate_path) if gate_path.exists() else None, source=gate_path)
    manifests = {name: io.read_json(ex.path(f"{name}_manifest"))
                 for name in ("corpus", "queries", "intents", "pool", "grades")}
    table, dropped = key.build_key(
        io.read_table(ex.path("grades")), key_grader=ex.params.need("grading.key_grader"),
        round=grading.round, pool=io.read_table(ex.path("pool")),
        relevant_min=ex.params.need("scale").relevant_min)
    ledger_path = ex.path("ledger")
    used = io.read_jsonl(ledger_path) if ledger_path.exists() else []
    status = ledger.check_void(used, pool_version=manifests["pool"]["pool_version"],
                               rubric_version=rubric_version, round=grading.round,
                               key_sha256=key.key_sha256(table), post_hoc=grading.post_hoc)
    record = key.build_record(
        table, frozen_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        rubric_version=rubric_version, round=grading.round, manifests=manifests,
        pool_sha256=io.sha256_file(ex.path("pool")), dropped_queries=dropped,
        post_hoc=status == ledger.POST_HOC, deviations=grading.deviations)
    io.write_bytes(ex.path("key"), key.key_bytes(table))
    write_trec_qrels(ex.path("qrels"), key.qrels_frame(table))
    io.write_json(ex.path("record"), record)
    print(f"key {record['key_sha256']} ({status}): {record['pairs']} pairs, "
          f"{record['queries']} queries, dropped {', '.join(dropped) or 'none'}")


if __name__ == "__main__":
    run_stage(main)
