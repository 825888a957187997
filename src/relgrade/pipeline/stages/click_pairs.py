"""Stage `pairs` (click experiments): IPS-weighted skip-above pairs of ``clicks.log``.

Reads the propensity curve (``paths.click_propensity``) and writes the pairs as Parquet
(``paths.click_pairs``: query_id, preferred_chunk_id, other_chunk_id, weight, session_id),
with weights min(1/p(k), ``clicks.clip``). With ``clicks.engine: spark`` the pairs are a folder
of Parquet part files at that path (read by pandas, DuckDB or Spark as one table).
"""

from relgrade.clicks import engine
from relgrade.clicks import pairs as P
from relgrade.clicks import propensity as PR
from relgrade.io import files as io


def run(ex):
    c = ex.params.need("clicks")
    curve_path = ex.path("click_propensity")
    curve = PR.PropensityCurve.from_dict(io.read_json(curve_path), source=curve_path.as_posix())
    weights = P.weights_from_curve(curve, clip=c.clip, frame=False)
    log_path = ex.file(c.log)
    out = ex.path("click_pairs")
    runner = engine.get(c.engine, memory_limit=c.memory_limit, spark_master=c.spark_master)
    with runner.errors(log_path):
        log = runner.open_log(log_path, weights=weights)
        atomic = io.atomic_path if runner.pairs_layout == "file" else io.atomic_dir
        with atomic(out) as tmp:
            n = runner.write_pairs(log, weights, tmp)
        summary = P.summary_from_positions(runner.clicks_by_position(log), weights,
                                           sessions=log.sessions)
    print(f"wrote {n:,} pairs from {summary['clicks_weighted']:,} clicks "
          f"({summary['clicks_clipped']:,} clipped at {c.clip:g})")

