"""A learning-to-rank training set: the frozen human key and the IPS-weighted click pairs.

Seed 003's rule, applied here: **human grades for evaluation, clicks for training, never
the reverse.** The key's graded pairs enter the training set as graded rows (so a model can
also learn from them), and the debiased click pairs as preference rows; nothing from the
clicks ever reaches the key. With ``exclude_eval_queries`` (the default in params), click
rows of every query the key grades are left out: a model trained on users' clicks for the
evaluation queries would be tuned to the very queries it is then judged on (leakage), and
the offline numbers would overstate it.

Rows (:data:`TRAINING_COLUMNS`):

===================  =========================================================================
``query_id``         the query (string)
``chunk_id``         the graded chunk, or the preferred (clicked) chunk of a pair (string)
``other_chunk_id``   the chunk it is preferred to (string; empty for a graded row)
``label``            the grade (float; NaN for a pair row)
``weight``           1.0 for a graded row; for a pair the summed IPS weights of the sessions
                     that gave it (float)
``sessions``         sessions behind the row (int; 0 for a graded row)
``source``           ``"key"`` or ``"clicks"``
===================  =========================================================================

Rows are sorted by source (key first), query (byte order), then chunk ids, so each
(source, query) is one contiguous group: the group sizes are what LightGBM's
``Dataset(group=...)`` and its ``.query`` file take. Features are left to the user, joined
on (query_id, chunk_id).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: Columns of the training set, in order.
TRAINING_COLUMNS = ("query_id", "chunk_id", "other_chunk_id", "label", "weight", "sessions",
                    "source")

#: Columns of the click pairs the training set reads (as ``relgrade clicks pairs`` writes).
PAIR_INPUT = ("query_id", "preferred_chunk_id", "other_chunk_id", "weight")


def key_rows(key: pd.DataFrame) -> pd.DataFrame:
    """The key's graded pairs as training rows.

    Parameters
    ----------
    key : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``grade`` (int), one row per graded pair.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TRAINING_COLUMNS`, ``source = "key"``, ``weight = 1``,
        ``sessions = 0``, sorted by query then chunk.

    Raises
    ------
    InputError
        A column is missing or a (query, chunk) is graded twice.
    """
    missing = [c for c in ("query_id", "chunk_id", "grade") if c not in key.columns]
    if missing:
        raise InputError(f"the key lacks column(s) {', '.join(missing)}")
    k = key[["query_id", "chunk_id", "grade"]].astype({"query_id": str, "chunk_id": str})
    dup = k.duplicated(["query_id", "chunk_id"])
    if dup.any():
        row = k[dup].iloc[0]
        raise InputError("the key grades each (query, chunk) once",
                         item=f"query {row['query_id']}, chunk {row['chunk_id']}",
                         found="two grades")
    out = pd.DataFrame({"query_id": k["query_id"], "chunk_id": k["chunk_id"],
                        "other_chunk_id": "", "label": k["grade"].astype(np.float64),
                        "weight": 1.0, "sessions": np.int64(0), "source": "key"})
    return _sorted(out)


def click_rows(pairs: pd.DataFrame, *, exclude_queries=()) -> tuple[pd.DataFrame, dict]:
    """IPS-weighted skip-above pairs as training rows, one per distinct preference.

    Parameters
    ----------
    pairs : pandas.DataFrame
        Columns :data:`PAIR_INPUT` (one row per session's pair, as written by
        :func:`relgrade.clicks.pairs.skip_above`).
    exclude_queries : iterable of str
        Queries whose pairs are left out (the key's queries, under the leakage rule).

    Returns
    -------
    rows : pandas.DataFrame
        Columns :data:`TRAINING_COLUMNS`, ``source = "clicks"``, ``label`` NaN, ``weight``
        the sum of the pair's IPS weights over sessions, ``sessions`` their number.
    summary : dict
        ``pairs_in`` (rows read), ``pairs_excluded`` (rows of excluded queries),
        ``queries_excluded`` (distinct excluded queries that had pairs).

    Raises
    ------
    InputError
        A column is missing.
    """
    missing = [c for c in PAIR_INPUT if c not in pairs.columns]
    if missing:
        raise InputError(f"the click pairs lack column(s) {', '.join(missing)}")
    p = pairs[list(PAIR_INPUT)].astype({"query_id": str, "preferred_chunk_id": str,
                                        "other_chunk_id": str})
    drop = p["query_id"].isin(pd.Index(list(exclude_queries), dtype=object))
    summary = {"pairs_in": int(len(p)), "pairs_excluded": int(drop.sum()),
               "queries_excluded": int(p.loc[drop, "query_id"].nunique())}
    kept = p[~drop]
    agg = kept.groupby(["query_id", "preferred_chunk_id", "other_chunk_id"], sort=False) \
        .agg(weight=("weight", "sum"), sessions=("weight", "size")).reset_index()
    out = pd.DataFrame({"query_id": agg["query_id"], "chunk_id": agg["preferred_chunk_id"],
                        "other_chunk_id": agg["other_chunk_id"], "label": np.nan,
                        "weight": agg["weight"].astype(np.float64),
                        "sessions": agg["sessions"].astype(np.int64), "source": "clicks"})
    return _sorted(out), summary


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    df = df[list(TRAINING_COLUMNS)]
    # Byte order of the ids, as everywhere else in relgrade, whatever the locale.
    key = df[["query_id", "chunk_id", "other_chunk_id"]].map(lambda s: s.encode("utf-8"))
    order = np.lexsort((key["other_chunk_id"], key["chunk_id"], key["query_id"]))
    return df.iloc[order].reset_index(drop=True)


def training_set(key: pd.DataFrame, pairs: pd.DataFrame, *,
                 exclude_eval_queries: bool = True) -> tuple[pd.DataFrame, dict]:
    """The key's graded rows followed by the click pairs' preference rows.

    Parameters
    ----------
    key : pandas.DataFrame
        As :func:`key_rows`.
    pairs : pandas.DataFrame
        As :func:`click_rows`.
    exclude_eval_queries : bool, default True
        Leave out the click rows of every query the key grades (the leakage rule).

    Returns
    -------
    rows : pandas.DataFrame
        Columns :data:`TRAINING_COLUMNS`; key rows first, each (source, query) contiguous.
    summary : dict
        ``key_rows``, ``key_queries``, ``click_rows``, ``click_queries``, the counts of
        :func:`click_rows` and ``exclude_eval_queries``.

    Examples
    --------
    >>> key = pd.DataFrame({"query_id": ["q1", "q1"], "chunk_id": ["a", "b"], "grade": [2, 0]})
    >>> pairs = pd.DataFrame({"query_id": ["q1", "q2", "q2"], "preferred_chunk_id": ["b", "d", "d"],
    ...                       "other_chunk_id": ["a", "c", "c"], "weight": [2.0, 1.5, 3.0]})
    >>> rows, s = training_set(key, pairs)
    >>> rows[["query_id", "chunk_id", "label", "weight", "source"]].values.tolist()
    [['q1', 'a', 2.0, 1.0, 'key'], ['q1', 'b', 0.0, 1.0, 'key'], ['q2', 'd', nan, 4.5, 'clicks']]
    >>> s["pairs_excluded"]
    1
    """
    kr = key_rows(key)
    excluded = kr["query_id"].unique().tolist() if exclude_eval_queries else []
    cr, counts = click_rows(pairs, exclude_queries=excluded)
    rows = pd.concat([kr, cr], ignore_index=True)
    summary = {"key_rows": int(len(kr)), "key_queries": int(kr["query_id"].nunique()),
               "click_rows": int(len(cr)), "click_queries": int(cr["query_id"].nunique()),
               "exclude_eval_queries": bool(exclude_eval_queries), **counts}
    return rows, summary


def group_sizes(rows: pd.DataFrame) -> np.ndarray:
    """The sizes of the contiguous query groups of ``rows``, in order (LightGBM's ``group``).

    Parameters
    ----------
    rows : pandas.DataFrame
        With a ``query_id`` column whose equal values are contiguous.

    Returns
    -------
    numpy.ndarray of int64, shape (n_groups,)
        Summing to ``len(rows)``.

    Raises
    ------
    InputError
        A query's rows are not contiguous.

    Examples
    --------
    >>> group_sizes(pd.DataFrame({"query_id": ["a", "a", "b", "c", "c", "c"]})).tolist()
    [2, 1, 3]
    """
    q = rows["query_id"].to_numpy()
    if not len(q):
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    if len(starts) != len(pd.unique(q)):
        raise InputError("each query's rows must be contiguous to form groups")
    return np.diff(np.r_[starts, len(q)]).astype(np.int64)
