"""Stage `sample`: the query set drawn from the query log (params `queries.log`, `sample`).

Cuts the log into head, torso and tail by traffic, draws `sample.n` distinct queries with
the seed derived from params `seed`, and writes them as the queries input (`queries.input`:
query_id, query, group, weight, count; the queries stage reads it) with a manifest of the
log's sha256, the seeds, the strata and the realised weights (`paths.sample_manifest`).
Only experiments with a query log have this stage (`relgrade init --query-log`).

With `sample.refresh` (written by `relgrade queries refresh`), the set is a refresh of the
set in `sample.refresh.previous`: `share` of it is replaced by queries the sampler draws
from the log, the rest kept, and the whole set weighted against the log; the manifest's
`refresh` block names the retired and the added queries.
"""

import numpy as np

from relgrade import query_sampling as querylog
from relgrade.io.files import read_rows, sha256_file, write_json, write_text
from relgrade.io.querylog import read_query_log
from relgrade.query_sampling import refresh as refreshing
from relgrade.rng import derive_seed


def _refresh(ex, cfg, counts, seed):
    """The refreshed set and the manifest's ``refresh`` block."""
    previous = ex.file(cfg.refresh.previous)
    table, _ = read_rows(previous, ["query_id", "query"])
    child = derive_seed(seed, refreshing.SEED_PURPOSE)
    out = refreshing.refresh(table, counts, share=cfg.refresh.share,
                             rng=np.random.default_rng(child),
                             what=f"{ex.params.source}: sample.refresh.share")
    block = {"previous": cfg.refresh.previous, "previous_sha256": sha256_file(previous),
             "seed_purpose": refreshing.SEED_PURPOSE, "child_seed": child, **out.to_dict()}
    return out.table, block


def run(ex):
    log = ex.file(ex.params.need("queries.log"))
    cfg = ex.params.need("sample")
    seed = ex.params.need("seed")
    table, lines = read_query_log(log)
    counts = querylog.strata(table, head_share=cfg.head_share, torso_share=cfg.torso_share,
                             path=log, lines=lines)
    child = derive_seed(seed, querylog.SEED_PURPOSE)
    block = None
    if cfg.refresh is not None:
        sample, block = _refresh(ex, cfg, counts, seed)
    else:
        sample = querylog.sample_queries(counts, n=cfg.n, allocation=cfg.allocation,
                                         rng=np.random.default_rng(child))
    manifest = querylog.sample_manifest(counts, sample, seed=seed, child_seed=child,
                                        n=len(sample), allocation=cfg.allocation,
                                        head_share=cfg.head_share, torso_share=cfg.torso_share)
    manifest = {"log": ex.params.queries.log, "log_sha256": sha256_file(log), **manifest}
    if block is not None:
        manifest["refresh"] = block
    write_text(ex.file(ex.params.queries.input), querylog.queries_tsv(sample))
    write_json(ex.path("sample_manifest"), manifest)
    print(f"sample: {len(sample)} of {manifest['distinct']} distinct queries "
          f"({manifest['issued']} issued), seed {child} (from {seed}); effective size "
          f"{manifest['effective_size']:.1f}")
    if block is not None:
        print(f"sample: refreshed {block['replaced']} of {len(sample)} queries from "
              f"{cfg.refresh.previous} (share {block['share']}, seed {block['child_seed']}); "
              f"kept {block['kept']}, added {', '.join(block['added'])}")
