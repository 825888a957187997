"""Stage `propensity` (click experiments): the position propensity curve of ``clicks.log``.

Writes the curve with its bootstrap intervals as dvc metrics (``paths.click_propensity``,
JSON: the log, the method, the seed and every position) and as a plot table
(``paths.click_propensity_plot``, CSV: position, propensity, ci_low, ci_high). A log whose
curve defines no position below the first (``method: randomization`` on a log without
randomised traffic, or harvesting without interventions) is an error: nothing downstream
could be weighted. ``clicks.engine`` picks DuckDB (default) or Spark (``clicks.spark_master``).
"""

import numpy as np

from relgrade.clicks import engine
from relgrade.errors import InputError
from relgrade.io import files as io
from relgrade.rng import derive_seed


def run(ex):
    c = ex.params.need("clicks")
    seed = ex.params.need("seed")
    log_path = ex.file(c.log)
    rng = np.random.default_rng(derive_seed(seed, "clicks", "propensity", c.method))
    runner = engine.get(c.engine, memory_limit=c.memory_limit, spark_master=c.spark_master)
    with runner.errors(log_path):
        log = runner.open_log(log_path)
        curve = runner.propensity(log, method=c.method, rng=rng, max_position=c.max_position,
                                  n_boot=c.bootstrap, level=c.level)
    if len(curve.propensities()) < 2:
        raise InputError(f"the log gives no propensity below position 1 by {c.method}",
                         path=log_path, found="; ".join(curve.notes) or "no evidence",
                         fix="Use clicks.method: harvesting on a log without randomised "
                             "traffic, or log a randomised slice (RandPair / FairPairs)")
    doc = {"log": c.log, "log_rows": log.rows, "log_sessions": log.sessions, "seed": seed,
           **curve.to_dict()}
    io.write_json(ex.path("click_propensity"), doc)
    plot = curve.table[["position", "propensity", "ci_low", "ci_high"]]
    with io.atomic_path(ex.path("click_propensity_plot")) as tmp:
        plot.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
    print(f"propensity by {c.method} on {log.rows:,} impressions: "
          + ", ".join(f"p({k})={p:.3f}" for k, p in curve.propensities().items()))

