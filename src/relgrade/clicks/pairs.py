"""IPS-weighted skip-above preference pairs: a click log made into pairwise training labels.

A click at position k after the user passed over the chunks above it says more than an
absolute click rate: the clicked chunk is preferred to each unclicked chunk ranked above it
(Joachims 2002, "Optimizing search engines using clickthrough data", KDD; Joachims, Granka,
Pan, Hembrooke & Gay 2005, "Accurately interpreting clickthrough data as implicit
feedback", SIGIR). Both chunks of such a pair were examined, so most of the position bias
cancels; what is left is corrected by weighting each pair with the inverse propensity of the
clicked position (Joachims, Swaminathan & Schnabel 2017, WSDM), clipped so that a few clicks
deep in the list cannot dominate the training set.

The pairs are produced by DuckDB (``sql/skip_above.sql``) as a lazy relation that the
caller writes straight to Parquet: they never pass through Python. A log stored sorted by
session that the compiled pass settles gets its pairs from that same pass, when it was opened
with the weights (``open_log(path, weights=...)``): one read of the log instead of three,
written by DuckDB as the same bytes (:func:`write_compiled`); every other log, and a log whose
compiled module is not built, takes the SQL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import duckdb
import numpy as np

from relgrade.clicks.log import ClickLog, encode_weights, sql
from relgrade.clicks.propensity import PropensityCurve
from relgrade.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

#: Default cap on an IPS weight: 1 / p(k) ≤ 10, i.e. propensities below 0.1 count as 0.1.
DEFAULT_CLIP = 10.0

#: The columns of the pairs table, in order.
PAIR_COLUMNS = ("query_id", "preferred_chunk_id", "other_chunk_id", "weight", "session_id")

#: The temporary table the compiled pass's pairs are written from (:func:`write_compiled`).
COMPILED_TABLE = "relgrade_clicks_pairs"

#: The name of the weights view the pair and click-through queries join on.
WEIGHTS_VIEW = "relgrade_clicks_weights"

#: The columns of :func:`weight_columns` and :func:`ips_weights`, with their dtypes.
WEIGHT_COLUMNS = {"position": np.int64, "propensity": np.float64, "weight": np.float64,
                  "clipped": np.bool_}


def weight_columns(propensity: PropensityCurve | Mapping[int, float], *,
                   clip: float = DEFAULT_CLIP) -> dict:
    """:func:`ips_weights` as a dict of numpy columns (no pandas).

    Parameters
    ----------
    propensity, clip
        As :func:`ips_weights`.

    Returns
    -------
    dict of str to numpy.ndarray
        ``position`` (int64), ``propensity`` (float64), ``weight`` (float64), ``clipped``
        (bool), of equal length, sorted by position: the columns of :func:`ips_weights`.

    Raises
    ------
    InputError
        As :func:`ips_weights`.

    Examples
    --------
    >>> weight_columns({1: 1.0, 2: 0.5, 3: 0.05}, clip=10)["weight"].tolist()
    [1.0, 2.0, 10.0]
    """
    if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not math.isfinite(clip) \
            or clip < 1:
        raise InputError("the weight clip must be a finite number of at least 1 "
                         "(weights are 1 / p(k) with p(k) at most p(1) = 1)", found=repr(clip))
    if isinstance(propensity, PropensityCurve):
        propensity = propensity.propensities()
    rows = []
    for k, p in sorted(propensity.items()):
        p = float(p)
        if math.isnan(p):
            continue
        if p < 0 or math.isinf(p):
            raise InputError("a propensity must be a number greater than 0",
                             item=f"position {k}", found=repr(p))
        raw = math.inf if p == 0 else 1.0 / p
        rows.append((int(k), p, min(raw, float(clip)), raw > clip))
    return {name: np.array([r[i] for r in rows], dtype=dtype)
            for i, (name, dtype) in enumerate(WEIGHT_COLUMNS.items())}


def ips_weights(propensity: PropensityCurve | Mapping[int, float], *,
                clip: float = DEFAULT_CLIP) -> pd.DataFrame:
    """The clipped inverse-propensity weight of a click at each position.

    Parameters
    ----------
    propensity : PropensityCurve or mapping of int to float
        p(k) relative to p(1) per 1-based position; positions whose propensity is undefined
        (NaN, or absent) get no weight, so clicks there give no pair.
    clip : float, default 10.0
        Largest weight, ≥ 1.

    Returns
    -------
    pandas.DataFrame
        Columns ``position`` (int64), ``propensity`` (float64), ``weight`` (float64,
        ``min(1 / p(k), clip)``), ``clipped`` (bool: ``1 / p(k) > clip``), sorted by
        position.

    Raises
    ------
    InputError
        ``clip`` is below 1 or not finite; a propensity is not > 0.

    Notes
    -----
    Clipping the weight at ``clip`` is clipping the propensity at ``1 / clip`` from below,
    as in Joachims, Swaminathan & Schnabel (2017, Sec. 6); it trades a small bias for a
    bounded variance (Strehl, Langford, Li & Kakade 2010). A propensity of 0 gets the clip.

    Examples
    --------
    >>> ips_weights({1: 1.0, 2: 0.5, 3: 0.05}, clip=10)["weight"].tolist()
    [1.0, 2.0, 10.0]
    """
    import pandas as pd

    return pd.DataFrame(weight_columns(propensity, clip=clip))


def _register(log: ClickLog, weights) -> None:
    """``weights``' positions and weights as the temporary table :data:`WEIGHTS_VIEW`
    (``position`` BIGINT, ``weight`` DOUBLE), from a DataFrame or a dict of columns alike."""
    log.con.execute(
        f"CREATE OR REPLACE TEMP TABLE {WEIGHTS_VIEW} AS "
        "SELECT unnest(CAST($position AS BIGINT[])) AS position, "
        "unnest(CAST($weight AS DOUBLE[])) AS weight",
        {"position": np.asarray(weights["position"], dtype=np.int64).tolist(),
         "weight": np.asarray(weights["weight"], dtype=np.float64).tolist()})


def skip_above(log: ClickLog, weights) -> duckdb.DuckDBPyRelation:
    """Skip-above preference pairs, each weighted by the clicked position's IPS weight.

    Parameters
    ----------
    log : ClickLog
        The impression log.
    weights : pandas.DataFrame or dict of str to numpy.ndarray
        From :func:`ips_weights` or :func:`weight_columns`: ``position``, ``weight``.

    Returns
    -------
    duckdb.DuckDBPyRelation
        Lazy, over a temporary table of the log's weighted clicks that this call creates
        (``relgrade_clicks_clicked``: one pass over the log, one row per click below
        position 1, which alone can give a pair; DuckDB keeps it in memory and spills it
        when needed). Columns :data:`PAIR_COLUMNS`:
        ``query_id``, ``preferred_chunk_id`` (clicked
        at position k), ``other_chunk_id`` (shown above k and not clicked), ``weight``
        (``weights`` at k) and ``session_id``; ordered by session id, then the clicked
        position, then the skipped one. Write it with ``relation.write_parquet(path)``.

    Notes
    -----
    For a session with clicks at positions K_c and chunk ``d_j`` at position j, the pairs
    are ``{(d_k > d_j) : k in K_c, j < k, j not in K_c}``, weighted ``w(k) = min(1 / p(k),
    clip)``. A click at position 1 gives no pair; a click at a position without a weight
    (beyond the curve, or undefined there) gives none either. The weight undoes the chance
    that the click was observed at all: under the position-based model a chunk clicked with
    probability ``p(k) r(q, d)`` enters with expected weight ``r(q, d)`` at every position
    it is shown at (the unbiasedness of IPS; Joachims et al. 2017, Prop. 1). The rule itself
    reads the unclicked chunks above a click as examined and passed over, which eye-tracking
    supports for a top-down scan (Joachims et al. 2005).

    Examples
    --------
    >>> import pandas as pd
    >>> rows = [("s1", "q", "a", 1, 0, "r", False), ("s1", "q", "b", 2, 1, "r", False)]
    >>> df = pd.DataFrame(rows, columns=["session_id", "query_id", "chunk_id", "position",
    ...                                  "clicked", "ranker", "randomized"])
    >>> skip_above(ClickLog.from_frame(df), ips_weights({1: 1.0, 2: 0.5})).fetchall()
    [('q', 'b', 'a', 2.0, 's1')]
    """
    _register(log, weights)
    log.con.execute(sql("clicked"))
    return log.con.sql(sql("skip_above"))


def compiled_weights(weights):
    """``weights`` when the compiled pass can make the pairs with them, else None.

    Parameters
    ----------
    weights : pandas.DataFrame or dict of str to numpy.ndarray, or None
        From :func:`ips_weights` or :func:`weight_columns`: ``position``, ``weight``.

    Returns
    -------
    dict of str to numpy.ndarray or None
        ``position`` (int64) and ``weight`` (float64) when every position is given once and
        every weight is a number (what :func:`weight_columns` makes); None otherwise, and for
        None, so that ``sql/skip_above.sql`` makes the pairs (its join repeats a pair for a
        position given twice and keeps a NaN weight, which the compiled pass does not).
    """
    if weights is None:
        return None
    position = np.asarray(weights["position"], dtype=np.int64)
    weight = np.asarray(weights["weight"], dtype=np.float64)
    if len(np.unique(position)) != len(position) or np.isnan(weight).any():
        return None
    return {"position": position, "weight": weight}


def compiled_for(log: ClickLog, weights):
    """The pairs the compiled pass made for ``log`` with ``weights``, or None.

    Parameters
    ----------
    log : ClickLog
        The impression log.
    weights : pandas.DataFrame or dict of str to numpy.ndarray
        The weights the pairs are asked for.

    Returns
    -------
    relgrade.clicks.log.CompiledPairs or None
        :attr:`ClickLog.compiled_pairs` when it was made with these same weights (compared
        as :func:`relgrade.clicks.log.encode_weights` gives them); None otherwise.
    """
    made = log.compiled_pairs
    usable = compiled_weights(weights)
    if made is None or usable is None or encode_weights(usable) != made.weights:
        return None
    return made


def write_compiled(log: ClickLog, made, out) -> int:
    """Write the compiled pass's pairs to the Parquet file ``out``; how many.

    Parameters
    ----------
    log : ClickLog
        The log the pairs were made from (its connection writes them).
    made : relgrade.clicks.log.CompiledPairs
        From :func:`compiled_for`.
    out : str or os.PathLike
        The Parquet file to write.

    Returns
    -------
    int
        The pairs written.

    Notes
    -----
    The file is the same bytes as the SQL path's (``skip_above(...).write_parquet``; tested).
    DuckDB's Parquet writer marks a column ``required`` when its statistics prove it holds
    no NULL, and ``optional`` otherwise, and that changes every page's bytes. In the SQL path
    the columns from the table of clicks (``query_id``, ``preferred_chunk_id``, ``weight``,
    ``session_id``) are known to hold none, and ``other_chunk_id``, from the typed view,
    is not. A scan of the Arrow stream has no statistics (every column ``optional``), so the
    pairs are first inserted into the temporary table :data:`COMPILED_TABLE` (which keeps
    statistics, in stored order) and ``other_chunk_id`` is read through the typed view's own
    ``NULLIF(..., '')`` (no id is empty in a settled log, so no value changes). The same
    rows in the same order then reach the writer as the SQL path's do, and the row groups
    and pages come out the same.
    """
    con = log.con
    kept = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    con.execute("SET preserve_insertion_order = true")
    try:
        con.from_arrow(made.table).create_view(f"{COMPILED_TABLE}_stream", replace=True)
        con.execute(f"CREATE OR REPLACE TEMP TABLE {COMPILED_TABLE} AS "
                    f"SELECT * FROM {COMPILED_TABLE}_stream")
        con.sql("SELECT query_id, preferred_chunk_id, "
                "NULLIF(other_chunk_id, '') AS other_chunk_id, weight, session_id "
                f"FROM {COMPILED_TABLE}").write_parquet(str(out))
    finally:
        con.execute(f"DROP TABLE IF EXISTS {COMPILED_TABLE}")
        con.execute(f"DROP VIEW IF EXISTS {COMPILED_TABLE}_stream")
        con.execute(f"SET preserve_insertion_order = {'true' if kept else 'false'}")
    return len(made.table)


def click_summary(log: ClickLog, weights) -> dict:
    """What a pairs run used and left out, per position (a small aggregate).

    Parameters
    ----------
    log : ClickLog
        The impression log.
    weights : pandas.DataFrame or dict of str to numpy.ndarray
        From :func:`ips_weights` or :func:`weight_columns`.

    Returns
    -------
    dict
        ``clicks`` (all clicks), ``clicks_weighted`` (at a position with a weight),
        ``clicks_without_propensity`` and ``positions_without_propensity`` (the positions
        with clicks but no weight), ``clicks_clipped`` and ``positions_clipped`` (clicks at
        positions whose weight was clipped), ``impressions``, ``sessions``.
    """
    return summary_from_positions(clicks_by_position(log), weights, sessions=log.sessions)


def clicks_by_position(log: ClickLog) -> pd.DataFrame:
    """Impressions and clicks per position, from the check's patterns when the log has them.

    Parameters
    ----------
    log : ClickLog
        The impression log.

    Returns
    -------
    pandas.DataFrame
        :func:`position_counts` as a table: ``position`` (int64), ``shown`` and ``clicks``
        (int64), one row per position the log shows, ordered by position.
    """
    import pandas as pd

    return pd.DataFrame(position_counts(log))


def position_counts(log: ClickLog) -> dict:
    """Impressions and clicks per position as numpy columns (no pandas).

    Parameters
    ----------
    log : ClickLog
        The impression log.

    Returns
    -------
    dict of str to numpy.ndarray
        ``position`` (int64), ``shown`` and ``clicks`` (int64: impressions and clicks at the
        position), one entry per position the log shows, ordered by position: read from
        :attr:`ClickLog.patterns` (the masks of shown and clicked positions per session)
        without another pass over the log, else by ``sql/clicks_by_position.sql``.
    """
    if log.patterns is None:
        rows = log.con.execute(sql("clicks_by_position")).fetchnumpy()
        order = np.argsort(np.asarray(rows["position"], dtype=np.int64), kind="stable")
        return {c: np.asarray(rows[c], dtype=np.int64)[order]
                for c in ("position", "shown", "clicks")}
    sessions = np.asarray(log.patterns["sessions"], dtype=np.int64)
    bits = np.arange(64, dtype=np.uint64)
    masks = {c: (np.asarray(log.patterns[c], dtype=np.uint64)[:, None] >> bits) & np.uint64(1)
             for c in ("shown", "clicks")}
    shown = sessions @ masks["shown"].astype(np.int64)
    clicks = sessions @ masks["clicks"].astype(np.int64)
    at = np.flatnonzero(shown)
    return {"position": (at + 1).astype(np.int64), "shown": shown[at], "clicks": clicks[at]}


def summary_from_positions(by_position, weights, *, sessions: int) -> dict:
    """:func:`click_summary` from impressions and clicks per position (any engine).

    Parameters
    ----------
    by_position : pandas.DataFrame or dict of str to numpy.ndarray
        ``position``, ``shown``, ``clicks`` (as ``sql/clicks_by_position.sql`` returns, or
        :func:`position_counts`), one entry per position.
    weights : pandas.DataFrame or dict of str to numpy.ndarray
        From :func:`ips_weights` or :func:`weight_columns`.
    sessions : int
        Sessions in the log.

    Returns
    -------
    dict
        As :func:`click_summary`.
    """
    position = np.asarray(by_position["position"], dtype=np.int64)
    shown = np.asarray(by_position["shown"], dtype=np.int64)
    clicks = np.asarray(by_position["clicks"], dtype=np.int64)
    weighted = np.asarray(weights["position"], dtype=np.int64)
    has_weight = np.isin(position, weighted)
    clipped = np.isin(position, weighted[np.asarray(weights["clipped"], dtype=bool)])
    clicked = clicks > 0
    return {
        "impressions": int(shown.sum()),
        "sessions": int(sessions),
        "clicks": int(clicks.sum()),
        "clicks_weighted": int(clicks[has_weight].sum()),
        "clicks_without_propensity": int(clicks[~has_weight].sum()),
        "positions_without_propensity": position[~has_weight & clicked].tolist(),
        "clicks_clipped": int(clicks[clipped].sum()),
        "positions_clipped": position[clipped & clicked].tolist(),
    }


def click_through(log: ClickLog, weights) -> duckdb.DuckDBPyRelation:
    """Impressions, clicks and IPS-weighted clicks per (query, chunk, position).

    Parameters
    ----------
    log : ClickLog
        The impression log.
    weights : pandas.DataFrame or dict of str to numpy.ndarray
        From :func:`ips_weights` or :func:`weight_columns`; rows at positions without a
        weight are left out.

    Returns
    -------
    duckdb.DuckDBPyRelation
        Lazy; columns ``query_id``, ``chunk_id``, ``position``, ``shown`` (impressions),
        ``clicks``, ``weighted_clicks`` (``sum(clicked * w(position))``), ordered by
        query, chunk and position.

    Notes
    -----
    ``weighted_clicks / shown`` is the IPS estimate of the chunk's click probability when
    examined, ``(1/n) sum_i c_i / p(k_i)`` (Joachims et al. 2017, Eq. 4 with a single
    item): unclipped and with the true propensities, its expectation is the same at every
    position the chunk was shown at.
    """
    _register(log, weights)
    return log.con.sql(sql("click_through"))


def weights_from_curve(curve: PropensityCurve, *, clip: float = DEFAULT_CLIP,
                       frame: bool = True):
    """:func:`ips_weights` of a curve read from a file; the positions it defines.

    Parameters
    ----------
    curve : PropensityCurve
        The curve.
    clip : float, default 10.0
        As :func:`ips_weights`.
    frame : bool, default True
        A ``pandas.DataFrame`` (:func:`ips_weights`); False: a dict of numpy columns
        (:func:`weight_columns`), which the pairs commands use so as not to import pandas.

    Returns
    -------
    pandas.DataFrame or dict of str to numpy.ndarray
        ``position``, ``propensity``, ``weight``, ``clipped``, at least one position.

    Raises
    ------
    InputError
        As :func:`ips_weights`, or the curve defines no position.
    """
    weights = ips_weights(curve, clip=clip) if frame else weight_columns(curve, clip=clip)
    if not len(weights["position"]):
        raise InputError("the propensity curve defines no position", fix="Estimate one with "
                         "`relgrade clicks propensity` on a log with clicks")
    return weights
