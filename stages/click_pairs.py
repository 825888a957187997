"""Stage `pairs` (click experiments): IPS-weighted skip-above pairs of ``clicks.log``.

Reads the propensity curve (``paths.click_propensity``) and writes the pairs as Parquet
(``paths.click_pairs``: query_id, preferred_chunk_id, other_chunk_id, weight, session_id),
with weights min(1/p(k), ``clicks.clip``).
"""

from relgrade.clicks import engine
from relgrade.clicks import pairs as P
from relgrade.clicks import propensity as PR
from relgrade.experiment.stage import run_stage
from relgrade.io import files as io


def main(ex):
    c = ex.params.need("clicks")
    curve_path = ex.path("click_propensity")
    curve = PR.PropensityCurve.from_dict(io.read_json(curve_path), source=curve_path.as_posix())
    weights = P.weights_from_curve(curve, clip=c.clip)
    log_path = ex.file(c.log)
    out = ex.path("click_pairs")
    with engine.duckdb_errors(log_path):
        log = engine.open_log(log_path, memory_limit=c.memory_limit)
        with io.atomic_path(out) as tmp:
            P.skip_above(log, weights).write_parquet(str(tmp))
            n = log.con.execute("SELECT count(*) FROM read_parquet($p)",
                                {"p": str(tmp)}).fetchall()[0][0]
        summary = P.click_summary(log, weights)
    print(f"wrote {n:,} pairs from {summary['clicks_weighted']:,} clicks "
          f"({summary['clicks_clipped']:,} clipped at {c.clip:g})")


if __name__ == "__main__":
    run_stage(main)
