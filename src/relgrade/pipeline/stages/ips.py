"""Stage `ips` (click experiments): IPS and self-normalised IPS estimates of each ranking.

Every run file in ``clicks.rankings`` (a folder; the arm is the file's name without its
extension) is scored on the logged clicks of ``clicks.log`` with the propensity curve of
``paths.click_propensity``; when that curve came from the randomized slice, every
bootstrap resample re-estimates it from its own sessions. The estimates, their session-bootstrap intervals, the clipping
note and the chunks absent from the log go to ``paths.click_ips`` (dvc metrics, JSON).
"""

import numpy as np
import pandas as pd

from relgrade.clicks import engine, ips
from relgrade.clicks import propensity as PR
from relgrade.errors import InputError
from relgrade.io import files as io
from relgrade.io.runs import read_run
from relgrade.ranking import canonical_ranking
from relgrade.rng import derive_seed


def read_rankings(folder) -> pd.DataFrame:
    """Every run file of ``folder`` as (arm, query_id, chunk_id, rank), canonical ranks."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputError("the rankings folder holds no run file", path=folder)
    runs = []
    for path in files:
        run = canonical_ranking(read_run(path))
        run.insert(0, "arm", path.name.split(".")[0])
        runs.append(run[["arm", "query_id", "chunk_id", "rank"]])
    return pd.concat(runs, ignore_index=True)


def run(ex):
    c = ex.params.need("clicks")
    folder = ex.file(ex.params.need("clicks.rankings"))
    rankings = read_rankings(folder)
    curve_path = ex.path("click_propensity")
    curve = PR.PropensityCurve.from_dict(io.read_json(curve_path), source=curve_path.as_posix())
    seed = ex.params.need("seed")
    rng = np.random.default_rng(derive_seed(seed, "clicks", "ips"))
    log_path = ex.file(c.log)
    with engine.duckdb_errors(log_path):
        log = engine.open_log(log_path, memory_limit=c.memory_limit)
        result = ips.arm_estimates(log, curve, rankings, rng=rng, clip=c.clip,
                                   n_boot=c.bootstrap, level=c.level,
                                   resample_propensity=curve.method == "randomization",
                                   source=folder.as_posix())
    io.write_json(ex.path("click_ips"), {"log": c.log, "seed": seed, **result.to_dict()})
    for r in result.table.itertuples(index=False):
        print(f"{r.arm}: IPS {r.ips:.4f} [{r.ips_low:.4f}, {r.ips_high:.4f}] clicks/session, "
              f"SNIPS {r.snips:.4f} [{r.snips_low:.4f}, {r.snips_high:.4f}]")
    for note in result.notes:
        print(f"Note: {note}")

