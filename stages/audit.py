"""Stage `audit`: pool provenance + queries → the audit queries and why each was chosen."""

from relgrade.experiment.stage import path_of, run_stage, section
from relgrade.io.files import read_table, write_jsonl
from relgrade.protocol import audit
from relgrade.rng import stage_rng


def main(params):
    cfg = section(params, "audit")
    chosen = audit.choose_audit(
        read_table(path_of(params, "provenance")),
        read_table(path_of(params, "queries"), columns=["query_id", "group"]),
        fraction=cfg["fraction"], min_queries=cfg["min_queries"],
        rng=stage_rng(params["seed"], "audit"))
    write_jsonl(path_of(params, "audit"), chosen.to_dict(orient="records"))
    print(f"audit: {len(chosen)} queries")


if __name__ == "__main__":
    run_stage(main)
