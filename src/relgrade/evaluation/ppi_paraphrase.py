"""The paraphrase component of a model judge, in the units of a per-query metric.

``relgrade judge probe`` keeps the judge's answers on the audit sample's pairs under each
paraphrase of its prompt template (the ``paraphrase`` probe's ``answer_rows``, see
docs/judges.md). A prediction-powered estimate averages per-query metric values (nDCG and
the like), not grades; so the component that widens its interval must be measured on those
values. Two functions:

* :func:`paraphrase_metric_cells`: per arm, per probed query, per paraphrase and sample,
  the metric under the model key with the probed pairs' grades replaced by the judge's
  answers under that paraphrase (every other pair keeps its key grade);
* :func:`metric_prompt_variances`: from those cells, per arm and per paired difference,
  the pair x prompt x sample decomposition
  (:func:`relgrade.evaluation.robustness.variance_components`, a query in the role of the
  pair) and the prompt variance of the mean over ``N`` queries
  (:func:`relgrade.evaluation.robustness.prompt_variance_of_mean`), in metric units squared.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation import metrics
from relgrade.evaluation.robustness import prompt_variance_of_mean, variance_components

#: The columns of the paraphrase answers (the probe report's ``answers.columns``).
ANSWER_COLUMNS = ("query_id", "chunk_id", "prompt", "sample", "grade")

#: The columns of :func:`paraphrase_metric_cells`'s table.
CELL_COLUMNS = ("arm", "query_id", "prompt", "sample", "value")


def paraphrase_metric_cells(key: pd.DataFrame, answers: pd.DataFrame,
                            runs: Mapping[str, pd.DataFrame], *, measure: str,
                            cutoffs: Sequence[int], relevant_min: int, ties: str,
                            groups: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per arm, probed query, paraphrase and sample: the metric under the paraphrase's key.

    Parameters
    ----------
    key : pandas.DataFrame
        The model key: ``query_id``, ``chunk_id`` (str), ``grade`` (int), one row per pair.
    answers : pandas.DataFrame
        :data:`ANSWER_COLUMNS`: the judge's grade (int) of a pair under paraphrase
        ``prompt`` (int, 1..K) and sample ``sample`` (int).
    runs : mapping of str to pandas.DataFrame
        Per arm its run (``query_id``, ``chunk_id``, ``rank``, ``score``, as
        :func:`relgrade.io.runs.read_run` gives it).
    measure : str
        The measure's canonical name (a measure the metrics stage computes).
    cutoffs, relevant_min, ties, groups
        As :func:`relgrade.evaluation.metrics.evaluate_arm` takes them (the ppi stage's).

    Returns
    -------
    pandas.DataFrame
        :data:`CELL_COLUMNS`, ``value`` float64: one row per arm and per (query, prompt,
        sample) under which the query has at least one answer; a query with no relevant
        chunk under a key, or absent from a run, counts 0 (as in the ppi stage). Sorted by
        arm, prompt, sample, query.

    Raises
    ------
    InputError
        A column is missing, or an answered pair is not in the key.
    """
    missing = [c for c in ANSWER_COLUMNS if c not in answers.columns]
    if missing:
        raise InputError("the paraphrase answers lack columns", found=", ".join(missing))
    a = answers[list(ANSWER_COLUMNS)].astype({"query_id": str, "chunk_id": str})
    k = key[["query_id", "chunk_id", "grade"]].astype({"query_id": str, "chunk_id": str})
    outside = a.merge(k[["query_id", "chunk_id"]], how="left", indicator=True)
    outside = outside[outside["_merge"] == "left_only"]
    if not outside.empty:
        r = outside.iloc[0]
        raise InputError("a paraphrase answer names a pair the key does not hold",
                         item=f"{r['query_id']} {r['chunk_id']}")
    queries = sorted(set(a["query_id"]))
    k = k[k["query_id"].isin(queries)]
    rows = []
    for (prompt, sample), cell in a.groupby(["prompt", "sample"], sort=True):
        answered = sorted(set(cell["query_id"]))
        graded = cell.drop_duplicates(["query_id", "chunk_id"]).set_index(
            ["query_id", "chunk_id"])["grade"]
        variant = k[k["query_id"].isin(answered)].set_index(["query_id", "chunk_id"])
        variant.loc[graded.index, "grade"] = graded.to_numpy()
        variant = variant.reset_index()
        for arm in sorted(runs):
            run = runs[arm]
            _, table = metrics.evaluate_arm(
                key=variant, run=run[run["query_id"].astype(str).isin(answered)],
                cutoffs=cutoffs, relevant_min=relevant_min, ties=ties, groups=groups)
            t = table[table["measure"] == measure]
            values = pd.Series(t["value"].to_numpy(dtype=float),
                               index=t["query_id"].astype(str)).reindex(answered).fillna(0.0)
            rows += [(arm, q, int(prompt), int(sample), float(v))
                     for q, v in values.items()]
    return pd.DataFrame(rows, columns=list(CELL_COLUMNS)).astype({"value": "float64"})


def _components(cells: pd.DataFrame, n_queries: int) -> dict:
    c = variance_components(cells.assign(chunk_id="", grade=cells["value"]))
    return {"components": c, "prompt_variance": prompt_variance_of_mean(c, n_queries)}


def metric_prompt_variances(cells: pd.DataFrame, *, arms: Sequence[str],
                            pairs: Sequence[tuple[str, str]], n_queries: int) -> dict:
    """The paraphrase component of each arm's and each difference's per-query metric.

    Parameters
    ----------
    cells : pandas.DataFrame
        :func:`paraphrase_metric_cells`'s table.
    arms : sequence of str
    pairs : sequence of (arm_a, arm_b)
        The differences (A - B), per query and cell.
    n_queries : int
        ``N``, the queries behind the model term of the estimate (every pool query).

    Returns
    -------
    dict
        ``{"arms": {arm: entry}, "differences": {(arm_a, arm_b): entry}}``, each entry
        ``components`` (:func:`~relgrade.evaluation.robustness.variance_components` of the
        values, metric units squared, queries in the role of pairs) and
        ``prompt_variance`` (float, ``prompt + pair_x_prompt / n_queries``).

    Raises
    ------
    InputError
        An arm without cells; fewer than 2 queries answered under every paraphrase and
        sample, or fewer than 2 paraphrases.

    Examples
    --------
    >>> t = pd.DataFrame({"arm": "a", "query_id": ["q1", "q1", "q2", "q2"],
    ...                   "prompt": [1, 2, 1, 2], "sample": 0, "value": [0.5, 0.7, 0.1, 0.3]})
    >>> round(metric_prompt_variances(t, arms=["a"], pairs=[], n_queries=10)
    ...       ["arms"]["a"]["prompt_variance"], 4)
    0.02
    """
    wide = cells.pivot_table(index=["query_id", "prompt", "sample"], columns="arm",
                             values="value", aggfunc="first")
    absent = [a for a in arms if a not in wide.columns]
    if absent:
        raise InputError("an arm has no paraphrase metric values", item=f"arm {absent[0]}")
    out = {"arms": {}, "differences": {}}
    for arm in arms:
        t = wide[arm].dropna().rename("value").reset_index()
        out["arms"][arm] = _components(t, n_queries)
    for a, b in pairs:
        t = (wide[a] - wide[b]).dropna().rename("value").reset_index()
        out["differences"][(a, b)] = _components(t, n_queries)
    return out
