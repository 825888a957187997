"""Stage `audit`: pool provenance + queries → the audit queries and why each was chosen."""

from relgrade.experiment.stage import run_stage
from relgrade.io.files import read_table, write_jsonl
from relgrade.protocol import audit
from relgrade.rng import stage_rng


def main(ex):
    cfg = ex.params.need("audit")
    chosen = audit.choose_audit(
        read_table(ex.path("provenance")),
        read_table(ex.path("queries"), columns=["query_id", "group"]),
        fraction=cfg.fraction, min_queries=cfg.min_queries,
        rng=stage_rng(ex.params.need("seed"), "audit"))
    write_jsonl(ex.path("audit"), chosen.to_dict(orient="records"))
    print(f"audit: {len(chosen)} queries")


if __name__ == "__main__":
    run_stage(main)
