"""Stage `queries`: the query file → the validated queries table and its manifest (sha256)."""

from pathlib import Path

from relgrade.experiment.stage import path_of, run_stage, section
from relgrade.io.files import read_rows, write_json, write_parquet
from relgrade.protocol import queries


def main(params):
    cfg = section(params, "queries")
    src = Path(cfg["input"])
    table, lines = read_rows(src, queries.REQUIRED_COLUMNS)
    validated = queries.validate_queries(table, groups=cfg["groups"], path=src, lines=lines)
    manifest = queries.queries_manifest(validated, groups=cfg["groups"])
    write_parquet(path_of(params, "queries"), validated)
    write_json(path_of(params, "queries_manifest"), manifest)


if __name__ == "__main__":
    run_stage(main)
