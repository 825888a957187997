"""Stage `key`: after a passed gate, freeze the key grader's grades as the hashed key."""

from datetime import datetime, timezone

from relgrade.experiment.stage import path_of, run_stage
from relgrade.io import files as io
from relgrade.io.trec import write_trec_qrels
from relgrade.protocol import key, ledger


def main(params):
    gate_path, grading = path_of(params, "gate"), params["grading"]
    key.require_gate(io.read_json(gate_path) if gate_path.exists() else None, source=gate_path)
    manifest = io.read_json(path_of(params, "grades_manifest"))
    pool_version = io.read_json(path_of(params, "pool_manifest"))["pool_version"]
    table, dropped = key.build_key(
        io.read_table(path_of(params, "grades")), key_grader=grading["key_grader"],
        round=int(grading["round"]), pool=io.read_table(path_of(params, "pool")),
        relevant_min=int(params["scale"]["relevant_min"]))
    used = io.read_jsonl(path_of(params, "ledger")) if path_of(params, "ledger").exists() else []
    status = ledger.check_void(used, pool_version=pool_version,
                               rubric_version=str(grading["rubric_version"]),
                               round=int(grading["round"]), key_sha256=key.key_sha256(table),
                               post_hoc=bool(params["grading"].get("post_hoc", False)))
    inputs = {name: io.read_json(path_of(params, f"{name}_manifest")).get("sha256")
              for name in ("corpus", "queries", "intents")}
    inputs["pool"] = io.sha256_file(path_of(params, "pool"))
    inputs["grades"] = {g: e["sha256"] for g, e in manifest["graders"].items() if e["sha256"]}
    record = key.build_record(
        table, frozen_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        rubric_version=grading["rubric_version"], round=grading["round"],
        grades_manifest=manifest, pool_version=pool_version, input_sha256=inputs,
        dropped_queries=dropped, post_hoc=status == ledger.POST_HOC)
    # Departures from the protocol travel with the key, so every number built on it has them.
    record["deviations"] = [str(d) for d in grading.get("deviations", [])]
    io.write_bytes(path_of(params, "key"), key.key_bytes(table))
    write_trec_qrels(path_of(params, "qrels"), key.qrels_frame(table))
    io.write_json(path_of(params, "record"), record)
    print(f"key {record['key_sha256']} ({status}): {record['pairs']} pairs, "
          f"{record['queries']} queries, dropped {', '.join(dropped) or 'none'}")


if __name__ == "__main__":
    run_stage(main)
