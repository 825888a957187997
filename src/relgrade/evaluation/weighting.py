"""Traffic-weighted means of per-query values, beside the unweighted ones.

A query set sampled from a log by stratum (:mod:`relgrade.query_sampling`) over-represents
the tail on purpose; each query's ``weight`` is the traffic it stands for. The mean that
tracks what users see is the weighted one,

    mean_w = sum_i w_i v_i / sum_i w_i,

the Horvitz-Thompson estimate of the traffic-weighted mean over the log (Horvitz & Thompson,
JASA 47, 1952). With ``metrics.weighted: true`` the per-arm metrics carry it next to the
unweighted means; the comparisons (:mod:`relgrade.evaluation.compare`) weight their means,
bootstrap intervals and randomization tests, while the t test and d_z stay unweighted and say so.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: What the weighted block of an arm's metrics says about itself.
NOTE = ("traffic-weighted means: each query counts by its `weight` in the queries table; the "
        "means outside this block are unweighted")


def weighted_means(per_query: pd.DataFrame, weights: Mapping[str, float]) -> dict:
    """Per measure, the traffic-weighted mean of an arm's per-query values.

    Parameters
    ----------
    per_query : pandas.DataFrame
        ``query_id`` (str), ``measure`` (str), ``value`` (float): one arm's per-query table
        (:func:`relgrade.evaluation.metrics.evaluate_arm`'s ``table``).
    weights : mapping of str to float
        query_id → traffic weight (> 0), from the queries table.

    Returns
    -------
    dict
        ``{"note": NOTE, "weight_sum": float, "means": {measure: float or None}}``, measures
        in the table's order; ``weight_sum`` is the sum over the queries of the first
        measure; a measure without values gets None.

    Raises
    ------
    InputError
        A query of the table has no weight, or a weight is not a positive finite number.

    Examples
    --------
    >>> t = pd.DataFrame({"query_id": ["a", "b"], "measure": ["RR@10", "RR@10"],
    ...                   "value": [1.0, 0.0]})
    >>> weighted_means(t, {"a": 3.0, "b": 1.0})["means"]
    {'RR@10': 0.75}
    """
    w = {str(k): float(v) for k, v in dict(weights).items()}
    bad = [k for k, v in w.items() if not (np.isfinite(v) and v > 0)]
    if bad:
        raise InputError("a query weight is not a positive finite number", item=bad[0],
                         found=repr(w[bad[0]]))
    qids = per_query["query_id"].astype(str)
    missing = sorted(set(qids) - set(w))
    if missing:
        raise InputError("a query has no traffic weight", item=f"query {missing[0]}",
                         fix="Give every query a weight in the queries table, or set "
                             "metrics.weighted: false")
    frame = pd.DataFrame({"measure": per_query["measure"].astype(str),
                          "value": per_query["value"].astype(float),
                          "w": qids.map(w).astype(float)})
    means: dict = {}
    weight_sum = None
    for measure in dict.fromkeys(frame["measure"]):
        part = frame[(frame["measure"] == measure) & frame["value"].notna()]
        if weight_sum is None:
            weight_sum = float(part["w"].sum())
        means[measure] = (float((part["value"] * part["w"]).sum() / part["w"].sum())
                          if len(part) else None)
    return {"note": NOTE, "weight_sum": weight_sum or 0.0, "means": means}
