"""Position propensities from a click log: result randomisation and intervention harvesting.

Under the position-based click model a chunk ``d`` shown for query ``q`` at position ``k``
is clicked with probability ``p(k) * r(q, d)``: ``p(k)`` is the chance that position ``k``
is examined, ``r`` the chance that an examined chunk is clicked. Both estimators here
measure the ratio ``p(k + 1) / p(k)`` of each pair of adjacent positions from clicks on the
same chunks at both positions, where ``r`` cancels, and chain the ratios into a curve
relative to the top position::

    p(1) = 1,    p(k) = prod_{j=1}^{k-1}  C_{j+1}(j) / C_j(j)

``C_j(j)`` and ``C_{j+1}(j)`` are the click evidence of link ``j`` (the positions j and
j + 1) at its upper and its lower position. Only relative propensities are identified:
an IPS weight 1 / p(k) is a weight relative to a click at position 1.

Each estimate comes with a percentile bootstrap interval (Efron & Tibshirani 1993) whose
resampling unit is the unit the evidence is independent over: the session for the randomized
slice, the query for harvesting.

Randomness
----------
Each resample draws, from the caller's :class:`numpy.random.Generator`, the number of times
every unit is taken: ``rng.multinomial(n, m / n)`` for ``n`` units grouped in rows of ``m``
identical ones (a session pattern). When every row is one unit (``m = 1``: a query), the
resample is ``n`` uniform picks ``rng.integers(0, n, n)``, counted per unit: the same
multinomial, drawn at a tenth of the cost. Either way this is resampling ``n`` units with
replacement. Resamples are drawn in blocks, one after the other: the multinomial's stream
does not depend on the block size, and the uniform picks' blocks are set by the number of
units alone, so a curve depends on its log and its seed only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from relgrade.clicks.log import ClickLog, sql
from relgrade.errors import InputError

#: Methods :func:`estimate` knows.
METHODS = ("randomization", "harvesting")

#: Weight-matrix elements (resamples x units) per bootstrap block.
_BLOCK_ELEMENTS = 1 << 22

#: The columns of :attr:`PropensityCurve.table`.
TABLE_COLUMNS = ("position", "propensity", "ci_low", "ci_high", "support", "clicks_upper",
                 "clicks_lower")


@dataclass(frozen=True)
class PropensityCurve:
    """A position propensity curve relative to position 1, with bootstrap intervals.

    Attributes
    ----------
    method : str
        ``"randomization"`` or ``"harvesting"``.
    max_position : int
        The last position estimated (``K``).
    level : float
        Confidence level of the intervals, e.g. 0.95.
    n_boot : int
        Bootstrap resamples behind the intervals.
    unit : str
        The resampling unit: ``"session"`` or ``"query"``.
    n_units : int
        Units with evidence (randomized sessions, or queries with an interventional pair).
    columns : dict of str to numpy.ndarray
        The curve as columns :data:`TABLE_COLUMNS` of one entry per position 1..K (what
        :attr:`table` shows as a DataFrame; kept as arrays so that estimating and printing
        a curve never imports pandas): ``propensity`` (float,
        p(k) / p(1); NaN where undefined), ``ci_low`` / ``ci_high`` (float; NaN where
        undefined), ``support`` (int: randomized pairs, or (query, chunk) pairs in the
        interventional set, of the link (k - 1, k); 0 for position 1), ``clicks_upper`` /
        ``clicks_lower`` (float: the link's click evidence at k - 1 and at k; click counts
        for randomization, sums of click-through rates for harvesting).
    notes : list of str
        Why a value is undefined, and resamples left out of an interval.
    """

    method: str
    max_position: int
    level: float
    n_boot: int
    unit: str
    n_units: int
    columns: dict
    notes: list = field(default_factory=list)

    @property
    def table(self):
        """The curve as a ``pandas.DataFrame``: one row per position, :attr:`columns`."""
        import pandas as pd

        return pd.DataFrame({c: self.columns[c] for c in TABLE_COLUMNS})

    def records(self) -> list[dict]:
        """One dict per position (keys :data:`TABLE_COLUMNS`; Python ints and floats, NaN
        where undefined), in position order."""
        values = [np.asarray(self.columns[c]).tolist() for c in TABLE_COLUMNS]
        return [dict(zip(TABLE_COLUMNS, row)) for row in zip(*values)]

    def propensities(self) -> dict[int, float]:
        """``{position: p(k)}`` for every position whose propensity is defined."""
        return {int(r["position"]): float(r["propensity"]) for r in self.records()
                if not math.isnan(r["propensity"])}

    def to_dict(self) -> dict:
        """The curve as a JSON-ready dict (undefined numbers as ``None``).

        Returns
        -------
        dict
            ``{"method", "max_position", "level", "n_boot", "unit", "n_units",
            "positions": [{"position", "propensity", "ci_low", "ci_high", "support",
            "clicks_upper", "clicks_lower"}, ...], "notes"}``.
        """
        rows = []
        for rec in self.records():
            rows.append({c: (int(rec[c]) if c in ("position", "support") else _number(rec[c]))
                         for c in TABLE_COLUMNS})
        return {"method": self.method, "max_position": self.max_position,
                "level": self.level, "n_boot": self.n_boot, "unit": self.unit,
                "n_units": self.n_units, "positions": rows, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, doc, *, source: str = "<propensity>") -> "PropensityCurve":
        """Read a curve written by :meth:`to_dict` (the ``--out`` file of the CLI).

        Only ``positions`` (each with an integer ``position`` ≥ 1 and a ``propensity`` that
        is a number > 0 or null) is required; the other keys default to unknown.

        Parameters
        ----------
        doc : dict
            The parsed JSON document.
        source : str
            The file it came from, for error messages.

        Returns
        -------
        PropensityCurve

        Raises
        ------
        InputError
            ``positions`` is missing or not a list; a position is not an integer ≥ 1 or is
            listed twice; a propensity is not a finite number > 0 (or null).
        """
        if not isinstance(doc, dict) or not isinstance(doc.get("positions"), list):
            raise InputError("a propensity file is a JSON object with a `positions` list",
                             path=source,
                             fix="Write one with `relgrade clicks propensity LOG --out FILE`")
        rows = []
        seen = set()
        for i, row in enumerate(doc["positions"]):
            where = f"positions[{i}]"
            if not isinstance(row, dict):
                raise InputError("each entry of `positions` is an object", path=source,
                                 item=where, found=type(row).__name__)
            k = row.get("position")
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise InputError("position must be an integer of at least 1", path=source,
                                 item=where, found=repr(k))
            if k in seen:
                raise InputError("each position is listed once", path=source, item=where,
                                 found=f"position {k} again")
            seen.add(k)
            p = row.get("propensity")
            if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float))
                                  or not math.isfinite(p) or p <= 0):
                raise InputError("propensity must be a number greater than 0, or null",
                                 path=source, item=f"position {k}", found=repr(p))
            rows.append({"position": k, "propensity": np.nan if p is None else float(p),
                         **{c: _float(row.get(c)) for c in ("ci_low", "ci_high",
                                                           "clicks_upper", "clicks_lower")},
                         "support": int(row.get("support") or 0)})
        rows.sort(key=lambda r: r["position"])
        table = {c: np.array([r[c] for r in rows],
                             dtype=np.int64 if c in ("position", "support") else np.float64)
                 for c in TABLE_COLUMNS}
        return cls(method=str(doc.get("method", "unknown")),
                   max_position=int(table["position"].max()) if rows else 0,
                   level=float(doc.get("level") or math.nan),
                   n_boot=int(doc.get("n_boot") or 0), unit=str(doc.get("unit", "unknown")),
                   n_units=int(doc.get("n_units") or 0), columns=table,
                   notes=list(doc.get("notes") or []))


def _number(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _float(x) -> float:
    return math.nan if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) \
        else float(x)


def _check_settings(max_position, n_boot, level) -> None:
    if isinstance(max_position, bool) or not isinstance(max_position, (int, np.integer)) \
            or max_position < 2:
        raise InputError("max_position must be an integer of at least 2",
                         found=repr(max_position))
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise InputError("the number of bootstrap resamples must be at least 1",
                         found=repr(n_boot))
    if not (isinstance(level, (float, int)) and 0 < level < 1):
        raise InputError("the confidence level must be between 0 and 1", found=repr(level))


def chain(evidence: np.ndarray) -> np.ndarray:
    """Propensities relative to position 1 from the click evidence of adjacent links.

    Parameters
    ----------
    evidence : numpy.ndarray of shape (..., K - 1, 2), float
        For each link ``j`` (positions j + 1 and j + 2, 0-based ``j``) the click evidence at
        its upper ``[..., j, 0]`` and its lower position ``[..., j, 1]``.

    Returns
    -------
    numpy.ndarray of shape (..., K), float64
        ``p[..., 0] = 1`` and ``p[..., k] = prod_{j<k} evidence[..., j, 1] /
        evidence[..., j, 0]``; NaN from the first link without evidence at its upper
        position onwards.

    Examples
    --------
    >>> chain(np.array([[10.0, 5.0], [6.0, 3.0]])).tolist()
    [1.0, 0.5, 0.25]
    """
    evidence = np.asarray(evidence, dtype=np.float64)
    upper, lower = evidence[..., 0], evidence[..., 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(upper > 0, lower / np.where(upper > 0, upper, 1.0), np.nan)
    ones = np.ones(ratio.shape[:-1] + (1,))
    return np.concatenate([ones, np.cumprod(ratio, axis=-1)], axis=-1)


def bootstrap_chain(evidence: np.ndarray, counts: np.ndarray, *, rng: np.random.Generator,
                    n_boot: int) -> np.ndarray:
    """Bootstrap replicates of :func:`chain` over resampled units.

    Parameters
    ----------
    evidence : numpy.ndarray of shape (n_rows, K - 1, 2), float
        Each row's click evidence per link (see :func:`chain`); a row stands for
        ``counts[i]`` identical units.
    counts : numpy.ndarray of shape (n_rows,), int
        Units per row (≥ 1).
    rng : numpy.random.Generator
        Source of every draw.
    n_boot : int
        Resamples.

    Returns
    -------
    numpy.ndarray of shape (n_boot, K), float64
        The curve of each resample (NaN where a resample leaves a link without evidence).

    Notes
    -----
    A resample takes ``n = counts.sum()`` units with replacement, drawn as the multinomial
    ``rng.multinomial(n, counts / n)`` of how often each row is taken, and sums their
    evidence per link; this is the nonparametric bootstrap (Efron & Tibshirani 1993) computed
    on grouped units. When every row is one unit (``counts`` all 1), the same multinomial is
    drawn as ``n`` uniform picks of a row (``rng.integers(0, n, size=(b, n))``) counted per
    row, which costs a tenth of numpy's multinomial over ``n`` equal cells (that draws one
    binomial per cell).
    """
    evidence = np.asarray(evidence, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.int64)
    n_rows, links = evidence.shape[0], evidence.shape[1]
    flat = evidence.reshape(n_rows, links * 2)
    total = int(counts.sum())
    probs = counts / total
    block = max(1, min(n_boot, _BLOCK_ELEMENTS // max(n_rows, 1)))
    out = np.empty((n_boot, links + 1))
    single = total == n_rows  # every row is one unit (counts are at least 1)
    done = 0
    while done < n_boot:
        b = min(block, n_boot - done)
        if single:
            picks = rng.integers(0, n_rows, size=(b, n_rows))
            picks += np.arange(b, dtype=picks.dtype)[:, None] * n_rows
            weights = np.bincount(picks.ravel(), minlength=b * n_rows).reshape(
                b, n_rows).astype(np.float64)
        else:
            weights = rng.multinomial(total, probs, size=b).astype(np.float64)
        out[done:done + b] = chain((weights @ flat).reshape(b, links, 2))
        done += b
    return out


def _curve(method, unit, evidence, counts, support, *, max_position, rng, n_boot, level,
           notes) -> PropensityCurve:
    """Point estimate, intervals and the table, shared by both estimators."""
    totals = (evidence * counts[:, None, None]).sum(axis=0) if len(counts) else \
        np.zeros((max_position - 1, 2))
    point = chain(totals)
    low = np.full(max_position, np.nan)
    high = np.full(max_position, np.nan)
    if len(counts):
        reps = bootstrap_chain(evidence, counts, rng=rng, n_boot=n_boot)
        alpha = (1 - level) / 2
        partial = []  # (position, resamples that leave it undefined)
        for k in range(max_position):
            if not np.isfinite(point[k]):
                continue
            col = reps[:, k]
            ok = np.isfinite(col)
            if not ok.all():
                partial.append((k + 1, int((~ok).sum())))
            if ok.any():
                low[k], high[k] = np.quantile(col[ok], [alpha, 1 - alpha])
        if partial:
            # Undefined resamples carry down the chain, so the last position has the most.
            notes.append(f"positions {partial[0][0]}-{partial[-1][0]}: {partial[0][1]} to "
                         f"{partial[-1][1]} of {n_boot} resamples had no click at the upper "
                         "position of a link above; each interval is over the others"
                         + ("" if partial[-1][1] < n_boot else
                            " (none left at some positions: no interval there)"))
    for j in range(max_position - 1):
        if totals[j, 0] == 0:
            why = ("no randomized pair" if support[j] == 0 and method == "randomization"
                   else "no interventional pair" if support[j] == 0
                   else "no click at the upper position")
            notes.append(f"positions {j + 1}-{j + 2}: {why}; p({j + 2}) and every position "
                         "below it are undefined")
            break
    table = {
        "position": np.arange(1, max_position + 1, dtype=np.int64),
        "propensity": point,
        "ci_low": low,
        "ci_high": high,
        "support": np.concatenate([[0], support]).astype(np.int64),
        "clicks_upper": np.concatenate([[np.nan], totals[:, 0]]),
        "clicks_lower": np.concatenate([[np.nan], totals[:, 1]]),
    }
    return PropensityCurve(method=method, max_position=int(max_position), level=float(level),
                           n_boot=int(n_boot), unit=unit, n_units=int(counts.sum()),
                           columns=table, notes=notes)


def unpaired_randomized_error(row: tuple, *, source: str) -> InputError:
    """The error for flagged rows that are not one adjacent swapped pair (every engine's).

    Parameters
    ----------
    row : tuple
        ``(session_id, rows, upper, lower)``: the first offending session of
        ``randomized_check.sql``, its number of flagged rows and their positions.
    source : str
        The log's path.
    """
    session, rows, upper, lower = row
    found = (f"a lone flagged row at position {upper}" if rows == 1
             else f"positions {upper} and {lower} taken together")
    return InputError("rows flagged randomized must come in adjacent pairs (k, k + 1)",
                      path=source, item=f"session {session}", found=found,
                      fix="Flag exactly the two rows of each swapped pair")


def randomization(log: ClickLog, *, rng: np.random.Generator, max_position: int = 10,
                  n_boot: int = 1000, level: float = 0.95) -> PropensityCurve:
    """Propensities from the randomized slice, where adjacent pairs were swapped at random.

    In a randomized session the two chunks of a flagged pair (k, k + 1) were placed by a
    coin flip, so the same chunks are shown at k and at k + 1 equally often and their
    relevance cancels from the ratio of clicks::

        p(k + 1) / p(k) = clicks at k + 1 / clicks at k      (over the pairs at (k, k + 1))

    (each pair gives one impression at each position, so click counts are click rates).

    Parameters
    ----------
    log : ClickLog
        The impression log; rows with ``randomized`` true, in position order two at a time,
        are the swapped pairs.
    rng : numpy.random.Generator
        Source of the bootstrap draws.
    max_position : int, default 10
        Last position estimated (K ≥ 2); pairs reaching below it are ignored.
    n_boot : int, default 1000
        Bootstrap resamples of sessions.
    level : float, default 0.95
        Confidence level of the percentile intervals.

    Returns
    -------
    PropensityCurve
        ``unit = "session"``; ``support`` counts the randomized pairs of each link.

    Raises
    ------
    InputError
        A session's flagged rows do not form adjacent pairs (an odd number of them, or two
        taken together that are not k and k + 1), naming the session; bad settings.

    Notes
    -----
    Swap interventions measure relative propensities without a click model's relevance
    estimates (Joachims, Swaminathan & Schnabel 2017, "Unbiased learning-to-rank with biased
    feedback", WSDM, Sec. 5); RandPair randomizes one pair of results per query (Wang,
    Bendersky, Metzler & Najork 2016, "Learning to rank with selection bias in personal
    search", SIGIR), FairPairs every pair of a random partition into adjacent pairs
    (Radlinski & Joachims 2006, AAAI). Adjacent swaps estimate neighbouring ratios, which are
    chained into p(k) / p(1); the interval is a percentile bootstrap over sessions.

    Examples
    --------
    >>> import pandas as pd
    >>> rows = [("s1", "q", "a", 1, 1, "r", True), ("s1", "q", "b", 2, 1, "r", True),
    ...         ("s2", "q", "b", 1, 1, "r", True), ("s2", "q", "a", 2, 0, "r", True)]
    >>> df = pd.DataFrame(rows, columns=["session_id", "query_id", "chunk_id", "position",
    ...                                  "clicked", "ranker", "randomized"])
    >>> curve = randomization(ClickLog.from_frame(df), rng=np.random.default_rng(0),
    ...                       max_position=2, n_boot=10)
    >>> curve.table["propensity"].tolist()
    [1.0, 0.5]
    """
    _check_settings(max_position, n_boot, level)
    if log.patterns is not None:
        # The check's pass already holds every session's flagged positions and clicks.
        patterns = patterns_from_masks(log.patterns, max_position=max_position)
        if patterns is not None:
            return from_patterns(patterns, rng=rng, max_position=max_position,
                                 n_boot=n_boot, level=level)
    con = log.con
    con.execute(sql("randomized_pairs"))
    bad = con.execute(sql("randomized_check")).fetchall()
    if bad:
        raise unpaired_randomized_error(bad[0], source=log.source)
    patterns = con.execute(sql("randomization"), {"max_position": int(max_position)}).fetchall()
    return from_patterns(patterns, rng=rng, max_position=max_position, n_boot=n_boot,
                         level=level)


def patterns_from_masks(masks, *, max_position: int) -> list | None:
    """The randomized slice's session patterns from :attr:`ClickLog.patterns` (no SQL).

    Parameters
    ----------
    masks : dict of str to numpy.ndarray, or pandas.DataFrame
        :attr:`relgrade.clicks.log.ClickLog.patterns`: ``flagged`` and ``flagged_clicks``
        (uint64 bit masks of positions 1..64) and ``sessions`` (int64).
    max_position : int
        As :func:`randomization`: pairs reaching below it are left out.

    Returns
    -------
    list of (list of int, list of int, list of int, int) or None
        What ``sql/randomization.sql`` returns, in its order (by links, then clicks at the
        upper, then at the lower positions): the upper positions of the session's pairs
        within ``max_position``, the clicks at each upper and lower position, and the number
        of sessions with that pattern. None when some session's flagged positions, taken two
        at a time in position order, are not adjacent (the caller's SQL then names the
        first such session).
    """
    totals: dict[tuple, int] = {}
    for flagged, clicks, n in zip(np.asarray(masks["flagged"]).tolist(),
                                  np.asarray(masks["flagged_clicks"]).tolist(),
                                  np.asarray(masks["sessions"]).tolist()):
        if not flagged:
            continue
        positions = [k + 1 for k in range(64) if flagged >> k & 1]
        if len(positions) % 2:
            return None
        links, upper, lower = [], [], []
        for k, below in zip(positions[::2], positions[1::2]):
            if below != k + 1:
                return None
            if below <= max_position:
                links.append(k)
                upper.append(clicks >> (k - 1) & 1)
                lower.append(clicks >> k & 1)
        if links:
            key = (tuple(links), tuple(upper), tuple(lower))
            totals[key] = totals.get(key, 0) + int(n)
    return [(list(a), list(b), list(c), n) for (a, b, c), n in sorted(totals.items())]


def from_patterns(patterns, *, rng: np.random.Generator, max_position: int, n_boot: int,
                  level: float) -> PropensityCurve:
    """The randomization curve from the randomized slice's session patterns (any engine).

    Parameters
    ----------
    patterns : sequence of (links, clicks_upper, clicks_lower, sessions)
        One entry per distinct session pattern, ordered as ``sql/randomization.sql`` orders
        them: ``links`` the upper positions k of the session's randomized pairs within
        ``max_position`` (ascending), the clicks at k and at k + 1 of each, and the number of
        sessions with that pattern.
    rng, max_position, n_boot, level
        As :func:`randomization`.

    Returns
    -------
    PropensityCurve
        As :func:`randomization`.
    """
    _check_settings(max_position, n_boot, level)
    links = max_position - 1
    evidence = np.zeros((len(patterns), links, 2))
    counts = np.zeros(len(patterns), dtype=np.int64)
    support = np.zeros(links, dtype=np.int64)
    for i, (uppers, above, below, n) in enumerate(patterns):
        for k, a, b in zip(uppers, above, below):
            evidence[i, k - 1, 0] += a
            evidence[i, k - 1, 1] += b
            support[k - 1] += n
        counts[i] = n
    notes = []
    if not len(patterns):
        notes.append("the log has no randomized pair within the positions estimated")
    return _curve("randomization", "session", evidence, counts, support,
                  max_position=max_position, rng=rng, n_boot=n_boot, level=level, notes=notes)


def harvesting(log: ClickLog, *, rng: np.random.Generator, max_position: int = 10,
               n_boot: int = 1000, level: float = 0.95) -> PropensityCurve:
    """Propensities harvested from rankers that showed the same chunks at different positions.

    Outside the randomized slice, a (query, chunk) that one ranker showed at k and another
    at k + 1 is an intervention the rankers made for free. Over the set ``S_k`` of such
    pairs, with ``ctr(q, d, k)`` the chunk's click-through rate at ``k`` pooled over the
    rankers that showed it there::

        p(k + 1) / p(k) = sum_{(q,d) in S_k} ctr(q, d, k + 1) / sum_{(q,d) in S_k} ctr(q, d, k)

    Parameters
    ----------
    log : ClickLog
        The impression log; sessions with any randomized row are left out.
    rng : numpy.random.Generator
        Source of the bootstrap draws.
    max_position : int, default 10
        Last position estimated (K ≥ 2).
    n_boot : int, default 1000
        Bootstrap resamples of queries.
    level : float, default 0.95
        Confidence level of the percentile intervals.

    Returns
    -------
    PropensityCurve
        ``unit = "query"``; ``support`` counts the (query, chunk) pairs of each link's
        interventional set.

    Raises
    ------
    InputError
        Bad settings.

    Notes
    -----
    This is the weighted ratio estimator of Agarwal, Zaitsev, Wang, Li, Najork & Joachims
    (2019, "Estimating position bias without intrusive interventions", WSDM, Sec. 4) on the
    interventional sets of adjacent positions: each click on d at k is weighted by
    ``1 / w(q, d, k)``, with ``w(q, d, k) = sum_i n_i(q) 1[rank_i(d | q) = k]`` the number of
    sessions of q in which some ranker put d at k, so that every (q, d) counts once at each
    position whatever the rankers' traffic shares. Under the position-based model the
    expected sums are ``p(k) * sum r(q, d)`` and ``p(k + 1) * sum r(q, d)`` over the same
    set, hence the ratio. Ranker assignment must not depend on the user (an A/B split).
    The interval is a percentile bootstrap over queries.
    """
    _check_settings(max_position, n_boot, level)
    rows = log.con.execute(sql("harvesting"), {"max_position": int(max_position)}).fetchnumpy()
    return from_links(rows, rng=rng, max_position=max_position, n_boot=n_boot, level=level)


def from_links(rows, *, rng: np.random.Generator, max_position: int,
               n_boot: int, level: float) -> PropensityCurve:
    """The harvesting curve from per-(query, link) click-through sums (any engine).

    Parameters
    ----------
    rows : pandas.DataFrame or dict of str to numpy.ndarray
        Columns as ``sql/harvesting.sql`` returns them, ordered by query then k: ``query_id``,
        ``k``, ``chunks`` (the link's interventional (query, chunk) pairs), ``ctr_upper``
        and ``ctr_lower`` (their summed click-through rates at k and k + 1).
    rng, max_position, n_boot, level
        As :func:`harvesting`.

    Returns
    -------
    PropensityCurve
        As :func:`harvesting`.
    """
    _check_settings(max_position, n_boot, level)
    links = max_position - 1
    queries, codes = np.unique(np.asarray(rows["query_id"]).astype(str), return_inverse=True)
    evidence = np.zeros((len(queries), links, 2))
    k = np.asarray(rows["k"], dtype=np.int64) - 1
    evidence[codes, k, 0] = np.asarray(rows["ctr_upper"], dtype=np.float64)
    evidence[codes, k, 1] = np.asarray(rows["ctr_lower"], dtype=np.float64)
    support = np.bincount(k, weights=np.asarray(rows["chunks"], dtype=np.float64),
                          minlength=links).astype(np.int64)
    counts = np.ones(len(queries), dtype=np.int64)
    notes = []
    if not len(queries):
        notes.append("no (query, chunk) was shown at adjacent positions by two rankers")
    return _curve("harvesting", "query", evidence, counts, support, max_position=max_position,
                  rng=rng, n_boot=n_boot, level=level, notes=notes)


def estimate(log: ClickLog, *, method: str, rng: np.random.Generator, max_position: int = 10,
             n_boot: int = 1000, level: float = 0.95) -> PropensityCurve:
    """:func:`randomization` or :func:`harvesting`, by name.

    Raises
    ------
    InputError
        ``method`` is not one of :data:`METHODS`.
    """
    if method not in METHODS:
        raise InputError("unknown propensity method", found=method,
                         fix="Use " + " or ".join(METHODS))
    fn = randomization if method == "randomization" else harvesting
    return fn(log, rng=rng, max_position=max_position, n_boot=n_boot, level=level)
