"""Stage `queries`: the query file → the validated queries table and its manifest (sha256)."""

from relgrade.io.files import read_rows, write_json, write_parquet
from relgrade.protocol import queries


def run(ex):
    cfg = ex.params.need("queries")
    src = ex.file(cfg.input)
    table, lines = read_rows(src, queries.REQUIRED_COLUMNS)
    validated = queries.validate_queries(table, groups=cfg.groups, path=src, lines=lines)
    manifest = queries.queries_manifest(validated, groups=cfg.groups)
    write_parquet(ex.path("queries"), validated)
    write_json(ex.path("queries_manifest"), manifest)

