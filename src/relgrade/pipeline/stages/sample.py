"""Stage `sample`: the query set drawn from the query log (params `queries.log`, `sample`).

Cuts the log into head, torso and tail by traffic, draws `sample.n` distinct queries with
the seed derived from params `seed`, and writes them as the queries input (`queries.input`:
query_id, query, group, weight, count; the queries stage reads it) with a manifest of the
log's sha256, the seeds, the strata and the realised weights (`paths.sample_manifest`).
Only experiments with a query log have this stage (`relgrade init --query-log`).
"""

import numpy as np

from relgrade import query_sampling as querylog
from relgrade.io.files import sha256_file, write_json, write_text
from relgrade.io.querylog import read_query_log
from relgrade.rng import derive_seed


def run(ex):
    log = ex.file(ex.params.need("queries.log"))
    cfg = ex.params.need("sample")
    seed = ex.params.need("seed")
    table, lines = read_query_log(log)
    counts = querylog.strata(table, head_share=cfg.head_share, torso_share=cfg.torso_share,
                             path=log, lines=lines)
    child = derive_seed(seed, querylog.SEED_PURPOSE)
    sample = querylog.sample_queries(counts, n=cfg.n, allocation=cfg.allocation,
                                     rng=np.random.default_rng(child))
    manifest = querylog.sample_manifest(counts, sample, seed=seed, child_seed=child, n=cfg.n,
                                        allocation=cfg.allocation, head_share=cfg.head_share,
                                        torso_share=cfg.torso_share)
    manifest = {"log": ex.params.queries.log, "log_sha256": sha256_file(log), **manifest}
    write_text(ex.file(ex.params.queries.input), querylog.queries_tsv(sample))
    write_json(ex.path("sample_manifest"), manifest)
    print(f"sample: {len(sample)} of {manifest['distinct']} distinct queries "
          f"({manifest['issued']} issued), seed {child} (from {seed}); effective size "
          f"{manifest['effective_size']:.1f}")

