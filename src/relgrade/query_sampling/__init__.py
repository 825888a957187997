"""Query sampling from a query log: head / torso / tail strata by traffic, traffic weights.

An evaluation set should answer "how good is search for the traffic we serve", yet the
queries worth grading are not only the frequent ones: a failure on rare queries (a language
the analyzer mangles, a product line nobody searches for often) only shows up if some rare
queries are in the set. relgrade therefore samples in two steps:

1. :func:`strata` counts each distinct query in the log (after normalising case and
   whitespace) and cuts the distinct queries, most frequent first, into **head**, **torso**
   and **tail** by their share of the traffic.
2. :func:`sample_queries` draws a fixed number of queries from each stratum without
   replacement, with probability proportional to each query's count, and gives every
   sampled query a traffic **weight**: how many issued queries it stands for.

The queries table's ``group`` is the stratum and its ``weight`` the traffic weight, so the
audit can be balanced over strata and the metrics can report the traffic-weighted mean
(params ``metrics.weighted: true``).

The cut rule
------------
Distinct queries are ordered by count, highest first. Queries with the same count form one
*level*; a level never spans two strata (which of several equally frequent queries came
first would otherwise be an accident of spelling). Lay the levels end to end on the
cumulative traffic line ``[0, T)``; a level covering ``[a, b)`` goes to the stratum that
holds its midpoint ``(a + b) / 2``:

- head  when ``(a + b) / 2 <  head_share * T``,
- torso when ``(a + b) / 2 <  (head_share + torso_share) * T``,
- tail  otherwise.

A query (or level) that straddles a cut thus goes to the side holding the larger part of
its traffic, and a midpoint exactly on a cut goes to the lower stratum. The realised traffic
shares are close to ``head_share`` and ``torso_share`` but not equal to them; :func:`summary`
reports them. Shares are compared as exact fractions of their decimal form (0.3 is 3/10).

Query ids
---------
``"q"`` followed by the first 12 hex digits of the sha256 of the normalised query's UTF-8
bytes ("python tutorial" is ``qf4a20f191853``): the same query gets the same id in every
sample, under every seed, so a refreshed slice of the set keeps the ids of the queries it
keeps. Should two sampled queries share a prefix, every id of that sample is lengthened by
one hex digit until all differ.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import re
import unicodedata
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from relgrade.errors import InputError

#: The strata, most frequent first: the values of the sampled table's ``group`` column.
STRATA = ("head", "torso", "tail")

#: Columns of the table :func:`strata` returns.
STRATA_COLUMNS = ["query", "count", "stratum"]

#: Columns of the table :func:`sample_queries` returns (a valid queries table plus ``count``).
SAMPLE_COLUMNS = ["query_id", "query", "group", "weight", "count"]

#: Hex digits of the sha256 in a query id (more only when two sampled ids would collide).
ID_HEX = 12

#: What the sample's generator is seeded for: ``derive_seed(seed, SEED_PURPOSE)`` (see
#: :mod:`relgrade.rng`), the same for ``relgrade queries sample`` and the ``sample`` stage.
SEED_PURPOSE = "queries-sample"

_WHITESPACE = re.compile(r"\s+")
_DIGITS = re.compile(r"\s*\d+\s*")


def normalize_query(text: str) -> str:
    """The form in which a logged query is counted.

    Parameters
    ----------
    text : str
        A query as it appears in the log.

    Returns
    -------
    str
        Unicode NFKC form, lower case, leading and trailing whitespace removed and every
        inner run of whitespace (spaces, tabs, other Unicode spaces) replaced by one space.

    Examples
    --------
    >>> normalize_query("  Python\\tTUTORIAL ")
    'python tutorial'
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def query_id(query: str, *, hex_digits: int = ID_HEX) -> str:
    """The stable id of a normalised query: ``"q"`` + a sha256 prefix.

    Parameters
    ----------
    query : str
        A query in normalised form (:func:`normalize_query`).
    hex_digits : int, default 12
        How many hex digits of the digest to keep (1 to 64).

    Returns
    -------
    str
        ``"q" + sha256(query.encode("utf-8")).hexdigest()[:hex_digits]``.

    Examples
    --------
    >>> query_id("python tutorial", hex_digits=8)
    'qf4a20f19'
    """
    return "q" + hashlib.sha256(query.encode("utf-8")).hexdigest()[:hex_digits]


def _share(value, name: str) -> Fraction:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not math.isfinite(float(value)):
        raise InputError(f"{name} must be a number", found=repr(value))
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    return Fraction(repr(float(value)))


def check_shares(head_share, torso_share) -> tuple[Fraction, Fraction]:
    """Validate the head and torso traffic shares.

    Parameters
    ----------
    head_share, torso_share : float
        Target traffic shares of head and torso.

    Returns
    -------
    tuple of fractions.Fraction
        Both shares as exact fractions of their decimal form.

    Raises
    ------
    InputError
        A share is not a finite number; ``head_share`` is not strictly between 0 and 1;
        ``torso_share`` is negative; or together they leave the tail no traffic
        (``head_share + torso_share >= 1``).
    """
    h, t = _share(head_share, "head share"), _share(torso_share, "torso share")
    if not 0 < h < 1:
        raise InputError("head share must be greater than 0 and less than 1",
                         found=repr(head_share))
    if t < 0:
        raise InputError("torso share must not be negative", found=repr(torso_share))
    if h + t >= 1:
        raise InputError("head share + torso share must be less than 1, so the tail has "
                         "a share of the traffic",
                         found=f"{head_share!r} + {torso_share!r}",
                         fix="Lower --head-share or --torso-share")
    return h, t


def _where(path, lines, row: int) -> dict:
    line = None if lines is None else lines[row]
    if line is None and path is None:
        return {"item": f"row {row + 1}"}
    return {"path": path, "line": line if line is not None else row + 1}


def _counts(values: pd.Series, *, path, lines) -> np.ndarray:
    if pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values) \
            and not values.isna().any():
        out = values.to_numpy(dtype=np.int64)
        bad = np.flatnonzero(out < 1)
        if len(bad):
            raise InputError("count must be a positive integer", found=repr(int(out[bad[0]])),
                             fix="Drop queries with no traffic",
                             **_where(path, lines, int(bad[0])))
        return out
    out = np.empty(len(values), dtype=np.int64)
    for row, value in enumerate(values.tolist()):
        n = None
        if isinstance(value, (bool, np.bool_)):
            n = None
        elif isinstance(value, numbers.Integral):
            n = int(value)
        elif isinstance(value, float) and value.is_integer():
            n = int(value)
        elif isinstance(value, str) and _DIGITS.fullmatch(value):
            n = int(value)
        if n is None or n < 1:
            raise InputError("count must be a positive integer", found=repr(value),
                             fix="Drop queries with no traffic" if n is not None else None,
                             **_where(path, lines, row))
        out[row] = n
    return out


def strata(log: pd.DataFrame, *, head_share: float = 0.5, torso_share: float = 0.3,
           path=None, lines: Sequence[int] | None = None) -> pd.DataFrame:
    """Count a query log's distinct queries and cut them into head, torso and tail.

    Parameters
    ----------
    log : pandas.DataFrame of shape (n_rows, 1 or 2)
        Column ``query`` (str): one row per issued query; or columns ``query`` and
        ``count`` (positive int, or a string of digits): one row per query with how often
        it was issued. Rows whose queries normalise to the same text are added up.
    head_share : float, default 0.5
        Target share of the traffic in the head, strictly between 0 and 1.
    torso_share : float, default 0.3
        Target share of the traffic in the torso, >= 0, with
        ``head_share + torso_share < 1``.
    path : str or os.PathLike, optional
        The log file, named in errors.
    lines : sequence of int of length n_rows, optional
        The file line of each row, named in errors (by default the 1-based row number).

    Returns
    -------
    pandas.DataFrame of shape (n_distinct, 3)
        Columns ``query`` (str, normalised by :func:`normalize_query`), ``count`` (int64,
        >= 1) and ``stratum`` (str, one of :data:`STRATA`), sorted by count descending and
        then by query (code-point order), with a fresh RangeIndex. The input is not modified.

    Raises
    ------
    InputError
        The log has no ``query`` column or no rows; a query is not a string or is empty
        after normalisation; a count is not a positive integer; a share is out of range
        (see :func:`check_shares`). Row errors name the file and line.

    Notes
    -----
    With distinct queries ordered by count, let a level be the queries sharing one count
    :math:`c`, :math:`A_c` the traffic of all queries more frequent than :math:`c`, and
    :math:`L_c` the level's own traffic. The level's midpoint :math:`m_c = A_c + L_c / 2`
    decides: head if :math:`m_c < h T`, torso if :math:`m_c < (h + t) T`, else tail, with
    :math:`T` the total traffic. The comparison is exact (integers and fractions).
    Head / torso / tail by cumulative traffic share is the usual split of a search log's
    power-law query distribution (Spink et al., "Searching the Web: The Public and Their
    Queries", JASIST 52(3), 2001, on the few queries that make most of the traffic).

    Examples
    --------
    >>> log = pd.DataFrame({"query": ["a"] * 6 + ["B"] * 3 + ["c"]})
    >>> strata(log).to_dict("list")
    {'query': ['a', 'b', 'c'], 'count': [6, 3, 1], 'stratum': ['head', 'torso', 'tail']}
    """
    h, t = check_shares(head_share, torso_share)
    if "query" not in log.columns:
        raise InputError("query log has no `query` column", path=path,
                         found="columns " + ", ".join(map(str, log.columns)))
    if len(log) == 0:
        raise InputError("query log is empty", path=path,
                         fix="Give a log with at least one query")
    if lines is not None and len(lines) != len(log):
        raise ValueError("lines must give one line number per row")
    lines = None if lines is None else list(lines)
    normalised = []
    for row, text in enumerate(log["query"].tolist()):
        norm = normalize_query(text) if isinstance(text, str) else None
        if not norm:
            raise InputError("query is empty" if isinstance(text, str)
                             else "query must be text", found=repr(text),
                             **_where(path, lines, row))
        normalised.append(norm)
    counts = (_counts(log["count"], path=path, lines=lines) if "count" in log.columns
              else np.ones(len(log), dtype=np.int64))
    table = (pd.DataFrame({"query": normalised, "count": counts})
             .groupby("query", sort=False, as_index=False)["count"].sum())
    table = table.sort_values(["count", "query"], ascending=[False, True], kind="stable",
                              ignore_index=True)
    total = int(table["count"].sum())
    head_cut, torso_cut = h * total, (h + t) * total
    stratum_of_level = {}
    before = 0
    for level, n in table["count"].value_counts(sort=False).sort_index(
            ascending=False).items():
        traffic = int(level) * int(n)
        mid = Fraction(2 * before + traffic, 2)
        stratum_of_level[int(level)] = ("head" if mid < head_cut else
                                        "torso" if mid < torso_cut else "tail")
        before += traffic
    table["count"] = table["count"].astype(np.int64)
    table["stratum"] = table["count"].map(stratum_of_level).astype("str")
    return table[STRATA_COLUMNS]


def _counts_arrays(counts: pd.DataFrame):
    """The strata table's columns as arrays, checked: (query, count, stratum)."""
    missing = [c for c in STRATA_COLUMNS if c not in counts.columns]
    if missing:
        raise InputError(f"counts table is missing column(s) {', '.join(missing)}",
                         found="columns " + ", ".join(map(str, counts.columns)),
                         fix="Pass the table strata() returns")
    if len(counts) == 0:
        raise InputError("query log is empty", fix="Give a log with at least one query")
    texts = counts["query"].to_numpy(dtype=object)
    stratum = counts["stratum"].to_numpy(dtype=object)
    c = counts["count"].to_numpy()
    unknown = sorted(set(stratum.tolist()) - set(STRATA), key=str)
    if unknown:
        raise InputError(f"stratum is not one of {', '.join(STRATA)}", found=repr(unknown[0]))
    if len(set(texts.tolist())) != len(texts):
        raise InputError("a query appears twice in the counts table",
                         fix="Pass the table strata() returns")
    if not pd.api.types.is_integer_dtype(c.dtype) or (c < 1).any():
        raise InputError("count must be a positive integer", fix="Pass the table strata() returns")
    return texts, c.astype(np.int64), stratum


def _shares(allocation, sizes: dict, traffic: dict) -> dict:
    if isinstance(allocation, str):
        if allocation == "equal":
            return {s: 1 for s in STRATA}
        if allocation == "proportional":
            return {s: traffic[s] for s in STRATA}
        raise InputError("allocation must be equal, proportional or a share per stratum",
                         found=repr(allocation))
    if not isinstance(allocation, Mapping):
        raise InputError("allocation must be equal, proportional or a share per stratum",
                         found=repr(allocation))
    unknown = [k for k in allocation if k not in STRATA]
    if unknown:
        raise InputError(f"allocation names a stratum that is not one of {', '.join(STRATA)}",
                         found=repr(unknown[0]))
    out = {}
    for s in STRATA:
        v = allocation.get(s, 0)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) \
                or not math.isfinite(float(v)) or v < 0:
            raise InputError("allocation share must be a non-negative number", item=s,
                             found=repr(v))
        out[s] = Fraction(repr(float(v))) if not isinstance(v, numbers.Integral) \
            else Fraction(int(v))
    if not any(out[s] > 0 and sizes[s] > 0 for s in STRATA):
        raise InputError("allocation gives no share to a stratum that has queries",
                         found=", ".join(f"{s}={allocation.get(s, 0)}" for s in STRATA))
    return out


def allocate(sizes: Mapping[str, int], shares: Mapping[str, float], *, n: int) -> dict:
    """Split ``n`` sampled queries over the strata.

    Parameters
    ----------
    sizes : mapping of str to int
        Distinct queries per stratum (the most a stratum can give).
    shares : mapping of str to number
        Relative share of the sample per stratum (non-negative; need not sum to 1). A
        stratum with share 0 or no queries gets none.
    n : int
        The sample size, at least the number of strata that get a share and at most the
        queries those strata hold.

    Returns
    -------
    dict of str to int
        Sampled queries per stratum, in :data:`STRATA` order; the values sum to ``n``.

    Raises
    ------
    InputError
        ``n`` is smaller than the number of strata to sample (each gets at least one) or
        larger than the queries they hold.

    Notes
    -----
    Each stratum's quota is :math:`q_s = n' \\, a_s / \\sum a`, over the strata still
    open and the :math:`n'` queries still to give. Repeatedly: a stratum whose quota is
    below 1 is given 1 (a stratum with traffic must be represented, or the weighted mean
    loses its traffic); else a stratum whose quota reaches its size is given all its
    queries; the others then get :math:`\\lfloor q_s \\rfloor` and the queries left go one
    each to the largest fractional parts (Hamilton's largest-remainder method), ties to
    the more frequent stratum. This is proportional allocation under bounds
    (Cochran, *Sampling Techniques*, 3rd ed., 1977, ch. 5).

    Examples
    --------
    >>> allocate({"head": 2, "torso": 30, "tail": 300}, {"head": 1, "torso": 1, "tail": 1},
    ...          n=30)
    {'head': 2, 'torso': 14, 'tail': 14}
    """
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral) or n < 1:
        raise InputError("n must be a positive integer", found=repr(n))
    n = int(n)
    share = {s: Fraction(shares.get(s, 0)) for s in STRATA}
    open_ = [s for s in STRATA if share[s] > 0 and sizes.get(s, 0) > 0]
    capacity = sum(int(sizes[s]) for s in open_)
    if n > capacity:
        raise InputError("n is larger than the distinct queries the sampled strata hold",
                         found=f"n={n}, {capacity} distinct queries",
                         fix=f"Ask for at most {capacity} queries")
    if n < len(open_):
        raise InputError(f"n must be at least {len(open_)}, one query per sampled stratum",
                         found=f"n={n}")
    alloc = {s: 0 for s in STRATA}
    left = n
    while open_:
        total = sum(share[s] for s in open_)
        quota = {s: left * share[s] / total for s in open_}
        under = [s for s in open_ if quota[s] < 1]
        full = [s for s in open_ if quota[s] >= sizes[s]]
        fixed = under or full
        if not fixed:
            break
        for s in fixed:
            alloc[s] = 1 if under else int(sizes[s])
            left -= alloc[s]
            open_.remove(s)
    if open_:
        total = sum(share[s] for s in open_)
        quota = {s: left * share[s] / total for s in open_}
        for s in open_:
            alloc[s] = math.floor(quota[s])
        rest = left - sum(alloc[s] for s in open_)
        order = sorted(open_, key=lambda s: (-(quota[s] - math.floor(quota[s])),
                                             STRATA.index(s)))
        for s in order[:rest]:
            alloc[s] += 1
    return alloc


def inclusion_probabilities(counts, m: int) -> np.ndarray:
    """Inclusion probabilities proportional to count for a sample of ``m`` of them.

    Parameters
    ----------
    counts : array-like of shape (n_queries,), int
        Positive counts of one stratum's queries.
    m : int
        How many to sample, ``0 <= m <= n_queries``.

    Returns
    -------
    numpy.ndarray of shape (n_queries,), float64
        :math:`\\pi_i \\in [0, 1]` summing to ``m``: 1 for queries taken with certainty,
        else :math:`m' c_i / T'`.

    Notes
    -----
    :math:`\\pi_i = m c_i / T` can exceed 1 for a very frequent query. Such queries are
    taken with certainty (:math:`\\pi_i = 1`) and the rule is applied again to the rest,
    with :math:`m'` the places left and :math:`T'` their traffic, until no probability
    exceeds 1 (Tillé, *Sampling Algorithms*, Springer 2006). The comparisons are on
    integers (:math:`m' c_i \\ge T'`), so no rounding decides a certainty.

    Examples
    --------
    >>> inclusion_probabilities([10, 1, 1, 2], 2).tolist()
    [1.0, 0.25, 0.25, 0.5]
    """
    c = np.asarray(counts, dtype=np.int64)
    if not 0 <= m <= len(c):
        raise ValueError("m must be between 0 and the number of queries")
    certain = np.zeros(len(c), dtype=bool)
    left = int(m)
    while left > 0:
        rest = int(c[~certain].sum())
        new = ~certain & (left * c >= rest)
        if not new.any():
            break
        certain |= new
        left -= int(new.sum())
    pi = np.zeros(len(c), dtype=np.float64)
    pi[certain] = 1.0
    if left > 0:
        rest = int(c[~certain].sum())
        pi[~certain] = left * c[~certain] / rest
    return pi


def _sample_stratum(c: np.ndarray, m: int, rng: np.random.Generator):
    """Positions chosen among ``c`` and their weights (randomised systematic πps)."""
    pi = inclusion_probabilities(c, m)
    certain = np.flatnonzero(pi == 1.0)
    weight = {int(i): float(c[i]) for i in certain}
    left = m - len(certain)
    if left > 0:
        others = np.flatnonzero(pi < 1.0)
        rest = int(c[others].sum())
        order = rng.permutation(others)
        edges = (left * np.cumsum(c[order])).astype(np.float64)
        points = (rng.random() + np.arange(left)) * rest
        picked = order[np.searchsorted(edges, points, side="right")]
        for i in picked:
            weight[int(i)] = rest / left
    chosen = np.array(sorted(weight), dtype=np.int64)
    return chosen, np.array([weight[int(i)] for i in chosen], dtype=np.float64)


def sample_allocation(counts: pd.DataFrame, *, n: int, allocation="equal") -> dict:
    """How many of ``n`` sampled queries each stratum gives: :func:`sample_queries`'s split,
    which depends on the log's strata only (no random draw), so it is known before the
    sample is drawn.

    Parameters
    ----------
    counts : pandas.DataFrame of shape (n_distinct, 3)
        The table :func:`strata` returns.
    n : int
        The sample size (params ``sample.n``).
    allocation : {"equal", "proportional"} or mapping of str to float, default "equal"
        As :func:`sample_queries`.

    Returns
    -------
    dict of str to int
        Stratum (each of :data:`STRATA`) -> queries drawn from it; the values sum to ``n``.

    Raises
    ------
    InputError
        As :func:`sample_queries`.

    Examples
    --------
    >>> table = strata(pd.DataFrame({"query": list("aaaaaabbbc")}))
    >>> sample_allocation(table, n=3)
    {'head': 1, 'torso': 1, 'tail': 1}
    """
    _, c, stratum = _counts_arrays(counts)
    sizes = {s: int((stratum == s).sum()) for s in STRATA}
    traffic = {s: int(c[stratum == s].sum()) for s in STRATA}
    return allocate(sizes, _shares(allocation, sizes, traffic), n=n)


def sample_queries(counts: pd.DataFrame, *, n: int, allocation="equal",
                   rng: np.random.Generator) -> pd.DataFrame:
    """A stratified sample of ``n`` distinct queries with traffic weights.

    Parameters
    ----------
    counts : pandas.DataFrame of shape (n_distinct, 3)
        The table :func:`strata` returns (``query``, ``count``, ``stratum``).
    n : int
        How many queries to sample; at most the distinct queries of the strata sampled.
    allocation : {"equal", "proportional"} or mapping of str to float, default "equal"
        How ``n`` is split over the strata (see :func:`allocate`): ``"equal"`` the same
        number from each stratum that has queries; ``"proportional"`` in proportion to
        each stratum's traffic; a mapping ``{"head": a, "torso": b, "tail": c}`` in
        proportion to the given non-negative numbers (a missing stratum gets 0).
    rng : numpy.random.Generator
        The source of every random draw, used stratum by stratum in :data:`STRATA` order.

    Returns
    -------
    pandas.DataFrame of shape (n, 5)
        Columns ``query_id`` (str, see the module notes), ``query`` (str, normalised),
        ``group`` (str, the stratum), ``weight`` (float64, > 0, the traffic the query
        stands for) and ``count`` (int64, its own traffic), ordered by stratum, then count
        descending, then query. Without ``count`` it is a valid queries table
        (:func:`relgrade.protocol.queries.validate_queries` with groups :data:`STRATA`).

    Raises
    ------
    InputError
        ``counts`` is not a strata table; ``n`` is not a positive integer, is larger than
        the distinct queries of the strata sampled, or smaller than the number of those
        strata; ``allocation`` is not one of the forms above.
    TypeError
        ``rng`` is not a :class:`numpy.random.Generator`.

    Notes
    -----
    Within stratum :math:`h`, :math:`m_h` queries are drawn without replacement with
    inclusion probability :math:`\\pi_i` proportional to count (:func:`inclusion_probabilities`),
    by randomised systematic sampling: shuffle the stratum's queries, lay intervals of
    length :math:`\\pi_i` end to end and take the queries hit by :math:`u, u+1, \\dots,
    u+m'-1` with :math:`u \\sim U[0, 1)` (Madow, Ann. Math. Statist. 20, 1949; with the
    random order of Hartley & Rao, Ann. Math. Statist. 33, 1962). Each query's weight is
    its Horvitz–Thompson expansion :math:`w_i = c_i / \\pi_i` (Horvitz & Thompson, JASA 47,
    1952): :math:`T_h / m_h` (the stratum's traffic over its sampled queries) when no query
    of the stratum is certain, and in general :math:`c_i` for a certain query and
    :math:`T'_h / m'_h` for the others. The weights of a stratum sum to its traffic
    :math:`T_h` in every sample, so for any per-query value :math:`v`

    .. math:: \\hat\\mu = \\frac{\\sum_{i \\in s} w_i v_i}{\\sum_{i \\in s} w_i}
              = \\frac{1}{T} \\sum_{i \\in s} \\frac{c_i v_i}{\\pi_i}

    is the Horvitz–Thompson estimator of the traffic-weighted mean
    :math:`\\mu = \\sum_i c_i v_i / T` over the sampled strata: unbiased, and equal to
    :math:`\\mu` when every stratum is taken whole.

    Examples
    --------
    >>> table = strata(pd.DataFrame({"query": list("aaaaaabbbc")}))
    >>> s = sample_queries(table, n=3, rng=np.random.default_rng(0))
    >>> s["group"].tolist(), s["weight"].tolist()
    (['head', 'torso', 'tail'], [6.0, 3.0, 1.0])
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator")
    texts, c, stratum = _counts_arrays(counts)
    alloc = sample_allocation(counts, n=n, allocation=allocation)
    rows, weights = [], []
    for s in STRATA:
        if alloc[s] == 0:
            continue
        members = np.flatnonzero(stratum == s)
        chosen, w = _sample_stratum(c[members], alloc[s], rng)
        rows.append(members[chosen])
        weights.append(w)
    rows, weights = np.concatenate(rows), np.concatenate(weights)
    order = sorted(range(len(rows)), key=lambda i: (STRATA.index(stratum[rows[i]]),
                                                    -c[rows[i]], texts[rows[i]]))
    rows, weights = rows[order], weights[order]
    return pd.DataFrame({
        "query_id": _ids(texts[rows].tolist()),
        "query": texts[rows],
        "group": stratum[rows],
        "weight": weights.astype(np.float64),
        "count": c[rows].astype(np.int64),
    }, columns=SAMPLE_COLUMNS)


def _ids(queries: list[str], hex_digits: int = ID_HEX) -> list[str]:
    for digits in range(hex_digits, 65):
        ids = [query_id(q, hex_digits=digits) for q in queries]
        if len(set(ids)) == len(ids):
            return ids
    raise ValueError("two sampled queries have the same sha256")  # distinct texts: impossible


def summary(counts: pd.DataFrame, sample: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per stratum: distinct queries, traffic and its share, and what was sampled.

    Parameters
    ----------
    counts : pandas.DataFrame
        The table :func:`strata` returns.
    sample : pandas.DataFrame, optional
        The table :func:`sample_queries` returns.

    Returns
    -------
    pandas.DataFrame of shape (3, 4) or (3, 6)
        Indexed by stratum in :data:`STRATA` order: ``queries`` (int64, distinct queries),
        ``traffic`` (int64, issued queries), ``share`` (float64, traffic / total traffic);
        with ``sample`` also ``sampled`` (int64) and ``weight`` (float64, the weight each
        sampled query of the stratum carries when they are equal, else their mean).
    """
    grouped = counts.groupby("stratum")["count"]
    out = pd.DataFrame({
        "queries": grouped.size().reindex(STRATA, fill_value=0).astype(np.int64),
        "traffic": grouped.sum().reindex(STRATA, fill_value=0).astype(np.int64),
    })
    out["share"] = (out["traffic"] / out["traffic"].sum()).astype(np.float64)
    if sample is not None:
        by = sample.groupby("group")["weight"]
        out["sampled"] = by.size().reindex(STRATA, fill_value=0).astype(np.int64)
        out["weight"] = by.mean().reindex(STRATA).astype(np.float64)
    out.index.name = "stratum"
    return out


def effective_size(weights) -> float:
    """Kish's effective sample size of weighted queries.

    Parameters
    ----------
    weights : array-like of shape (n_queries,), float
        Positive weights.

    Returns
    -------
    float
        :math:`(\\sum w)^2 / \\sum w^2`, between 1 and ``n_queries``: how many equally
        weighted queries give a weighted mean as precise (Kish, *Survey Sampling*, 1965).

    Examples
    --------
    >>> effective_size([1.0, 1.0, 2.0])
    2.6666666666666665
    """
    w = np.asarray(weights, dtype=np.float64)
    return float(w.sum() ** 2 / (w ** 2).sum())


def queries_tsv(sample: pd.DataFrame) -> str:
    """The sample as a queries TSV: header, then one row per query.

    Parameters
    ----------
    sample : pandas.DataFrame
        :func:`sample_queries`' table (:data:`SAMPLE_COLUMNS`).

    Returns
    -------
    str
        Tab-separated, ``\\n``-terminated lines; weights written with ``repr`` so they read
        back exactly.
    """
    rows = ["\t".join(SAMPLE_COLUMNS)]
    for qid, text, group, weight, count in sample[SAMPLE_COLUMNS].itertuples(index=False):
        rows.append(f"{qid}\t{text}\t{group}\t{float(weight)!r}\t{int(count)}")
    return "\n".join(rows) + "\n"


def sample_manifest(counts: pd.DataFrame, sample: pd.DataFrame, *, seed: int, child_seed: int,
                    n: int, allocation, head_share: float, torso_share: float) -> dict:
    """What a drawn query set was drawn from and how: the ``sample`` stage's manifest.

    Parameters
    ----------
    counts : pandas.DataFrame
        :func:`strata`' table of the log.
    sample : pandas.DataFrame
        :func:`sample_queries`' table drawn from it.
    seed : int
        The experiment seed (params ``seed``).
    child_seed : int
        ``derive_seed(seed, SEED_PURPOSE)``, the generator's seed.
    n, allocation, head_share, torso_share
        The sample's params, as given.

    Returns
    -------
    dict
        JSON-ready: ``seed``, ``seed_purpose``, ``child_seed``, ``n``, ``allocation``,
        ``head_share``, ``torso_share``, ``issued`` (total traffic), ``distinct``,
        ``strata`` (stratum → ``{"queries", "traffic", "share", "sampled", "weight"}``),
        ``weight_sum`` (equal to the traffic of the sampled strata) and ``effective_size``.
    """
    table = summary(counts, sample)
    strata_out = {}
    for r in table.reset_index().itertuples(index=False):
        strata_out[str(r.stratum)] = {
            "queries": int(r.queries), "traffic": int(r.traffic), "share": float(r.share),
            "sampled": int(r.sampled),
            "weight": None if int(r.sampled) == 0 else float(r.weight)}
    return {"seed": int(seed), "seed_purpose": SEED_PURPOSE, "child_seed": int(child_seed),
            "n": int(n), "allocation": allocation, "head_share": float(head_share),
            "torso_share": float(torso_share), "issued": int(table["traffic"].sum()),
            "distinct": int(len(counts)), "strata": strata_out,
            "weight_sum": float(sample["weight"].sum()),
            "effective_size": float(effective_size(sample["weight"]))}


def query_set_drift(queries: pd.DataFrame, log: pd.DataFrame) -> dict:
    """How far the evaluated query set is from the traffic of a current query log.

    Parameters
    ----------
    queries : pandas.DataFrame of shape (n_queries, >= 2)
        ``query_id`` and ``query`` (text, matched after :func:`normalize_query`) of the
        evaluated set. Not modified.
    log : pandas.DataFrame of shape (n_distinct, >= 2)
        The current log counted by :func:`strata`: ``query`` (normalised) and ``count``
        (int > 0); other columns are ignored. Not modified.

    Returns
    -------
    dict
        ``log_queries`` (distinct) and ``log_traffic`` (issued queries); ``present`` (list
        of query ids found in the log) and ``absent`` (the others); ``absent_share``
        (float in [0, 1]); ``covered_traffic`` (share of the log's traffic the set's queries
        account for). No distance between the set's and the log's strata: that has one
        definition, :func:`relgrade.query_sampling.drift.drift`'s total variation over the
        strata of the log the set was drawn from, which needs a sampled set (``relgrade
        drift``; ``relgrade reconcile`` adds it when params name ``queries.log``).

    Raises
    ------
    InputError
        The log holds no queries.

    Examples
    --------
    >>> q = pd.DataFrame({"query_id": ["a", "b"], "query": ["X ", "gone"]})
    >>> log = pd.DataFrame({"query": ["x", "y"], "count": [3, 1]})
    >>> d = query_set_drift(q, log)
    >>> d["absent"], d["absent_share"], d["covered_traffic"]
    (['b'], 0.5, 0.75)
    """
    if len(log) == 0 or int(log["count"].sum()) == 0:
        raise InputError("the query log holds no queries",
                         fix="Give a log with at least one issued query")
    total = int(log["count"].sum())
    counts = dict(zip(log["query"].astype(str), log["count"].astype(int)))
    q = pd.DataFrame({"query_id": queries["query_id"].astype(str),
                      "query": [normalize_query(str(t)) for t in queries["query"]]})
    issued = [t in counts for t in q["query"]]
    present = [i for i, hit in zip(q["query_id"], issued) if hit]
    absent = [i for i, hit in zip(q["query_id"], issued) if not hit]
    n = max(len(q), 1)
    covered = sum(counts[t] for t in set(q["query"]) if t in counts) / total
    return {"log_queries": int(len(log)), "log_traffic": total, "present": present,
            "absent": absent, "absent_share": len(absent) / n, "covered_traffic": covered}
