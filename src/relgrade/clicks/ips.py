"""IPS estimates of a ranking's click reward from a logged impression log.

A ranking (an arm, or any run) is scored offline on the clicks users made on *other*
rankings: each logged click on chunk ``d`` at position ``k`` is weighted by the inverse of
the chance that position ``k`` was examined, ``w(k) = min(1 / p(k), clip)``, and credited
with the examination ``e_pi(d) = p(rank_pi(d))`` the arm would give ``d``. Over ``n``
logged sessions ``i`` with clicked chunks ``c``:

* IPS (seed 003's ``R̂(pi) = (1/n) sum_i c_i / p(k_i)``, with the arm's examination as the
  reward of a click; Joachims, Swaminathan & Schnabel 2017, "Unbiased learning-to-rank with
  biased feedback", WSDM, Sec. 4)::

      IPS(pi) = (1/n) sum_i sum_c w(k_c) e_pi(d_c)

  Under the position-based model, unclipped and with the true propensities, its expectation
  is ``sum_q P(q) sum_d p(rank_pi(d)) r(q, d)``: the clicks per session the arm would get,
  counted over the chunks the log shows.

* Self-normalised IPS (the ratio form ``sum w y / sum w`` of Swaminathan & Joachims 2015,
  "The self-normalized estimator for counterfactual learning", NeurIPS)::

      SNIPS(pi) = sum_i sum_c w(k_c) e_pi(d_c)  /  sum_i sum_c w(k_c)

  The share of the (examination-corrected) click mass that the arm puts where users look,
  in [0, 1] (``p`` relative to position 1): it estimates ``sum_q P(q) sum_d [p(rank_pi(d)) /
  p(1)] r(q, d) / sum_q P(q) sum_d r(q, d)``. It is biased for finite n but consistent, and
  its variance does not grow with the weights' spread as fast as IPS's does.

Both come with percentile bootstrap intervals over sessions, one multinomial draw per
resample shared by every arm (so arms are compared on the same resamples). When the curve
was estimated by randomization on the same log, each resample re-estimates it from its own
randomized sessions (``resample_propensity``), so the intervals carry the propensities'
error too; otherwise the curve is held fixed and the result says so.

Clipping (``clip``) caps the weights: it lowers the variance and biases IPS downward by the
clipped share of click mass (Strehl, Langford, Li & Kakade 2010, NeurIPS; Joachims et al.
2017, Sec. 4). The result reports how many clicks were clipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse

from relgrade.clicks.log import ClickLog, sql
from relgrade.clicks.pairs import DEFAULT_CLIP, weights_from_curve
from relgrade.clicks.propensity import PropensityCurve, chain
from relgrade.errors import InputError

#: The view of the arms' examinations the SQL joins on.
RANKINGS_VIEW = "relgrade_clicks_rankings"

#: Columns of a rankings table (one row per ranked chunk).
RANKING_COLUMNS = ("arm", "query_id", "chunk_id", "rank")

#: Columns of :attr:`IpsResult.table`.
TABLE_COLUMNS = ("arm", "ips", "ips_low", "ips_high", "snips", "snips_low", "snips_high",
                 "ranked", "ranked_not_in_log", "queries_not_in_log")

#: Draw-matrix elements (resamples x session patterns) per bootstrap block.
_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class IpsResult:
    """IPS and self-normalised IPS estimates of each arm, with bootstrap intervals.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per arm, columns :data:`TABLE_COLUMNS`: ``ips`` (float, clicks per session),
        ``snips`` (float in [0, 1]; NaN when no click has a weight), their ``_low`` /
        ``_high`` percentile bounds, ``ranked`` (int, ranked (query, chunk) pairs),
        ``ranked_not_in_log`` (int, of those, pairs the log never shows) and
        ``queries_not_in_log`` (int, ranked queries the log never answers).
    sessions : int
        Logged sessions ``n`` (sessions without a click included).
    clicks : int
        Clicks in the log.
    clicks_weighted : int
        Clicks at a position with a weight (the others are left out).
    clicks_clipped : int
        Clicks whose weight ``1 / p(k)`` exceeded ``clip``.
    clip : float
        The weight cap.
    n_boot : int
        Bootstrap resamples of sessions.
    level : float
        Confidence level of the intervals.
    propensity_resampled : bool
        Whether each resample re-estimated the propensity curve.
    notes : list of str
        The clipping bias note, clicks left out, chunks and queries absent from the log
        (with the share of logged impressions the arm's estimate rests on).
    """

    table: pd.DataFrame
    sessions: int
    clicks: int
    clicks_weighted: int
    clicks_clipped: int
    clip: float
    n_boot: int
    level: float
    propensity_resampled: bool = False
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """A JSON-ready dict: the settings, counts, notes and ``arms: {arm: {...}}``."""
        arms = {}
        for rec in self.table.to_dict("records"):
            arms[str(rec["arm"])] = {c: (int(rec[c]) if c.startswith(("ranked", "queries"))
                                         else _number(rec[c]))
                                     for c in TABLE_COLUMNS if c != "arm"}
        return {"sessions": self.sessions, "clicks": self.clicks,
                "clicks_weighted": self.clicks_weighted,
                "clicks_clipped": self.clicks_clipped, "clip": self.clip,
                "n_boot": self.n_boot, "level": self.level, "unit": "session",
                "propensity_resampled": self.propensity_resampled,
                "arms": arms, "notes": list(self.notes)}


def _number(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def examinations(rankings: pd.DataFrame, weights: pd.DataFrame, *,
                 source: str = "<rankings>") -> pd.DataFrame:
    """Each ranked chunk's examination under its arm: the propensity at its rank.

    Parameters
    ----------
    rankings : pandas.DataFrame
        Columns :data:`RANKING_COLUMNS`; ``rank`` a whole number ≥ 1; each (arm, query,
        chunk) at most once. Not modified.
    weights : pandas.DataFrame
        From :func:`relgrade.clicks.pairs.ips_weights`: ``position``, ``propensity``.
    source : str
        Where the rankings came from, for error messages.

    Returns
    -------
    pandas.DataFrame
        ``arm``, ``query_id``, ``chunk_id`` (strings), ``rank`` (int64), ``examination``
        (float64: p(rank) relative to p(1); 0 for a rank without a propensity, i.e. below
        the curve).

    Raises
    ------
    InputError
        A column is missing, a rank is missing or below 1, or an (arm, query, chunk) is
        ranked twice (naming it).
    """
    missing = [c for c in RANKING_COLUMNS if c not in rankings.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=source,
                         found="columns " + ", ".join(map(str, rankings.columns)))
    r = rankings[list(RANKING_COLUMNS)].copy()
    for c in ("arm", "query_id", "chunk_id"):
        r[c] = r[c].astype(str)
    rank = pd.to_numeric(r["rank"], errors="coerce")
    bad = rank.isna() | (rank < 1) | (rank != np.floor(rank))
    if bad.any():
        row = r[bad].iloc[0]
        raise InputError("rank must be a whole number of at least 1", path=source,
                         item=f"arm {row['arm']}, query {row['query_id']}, chunk "
                              f"{row['chunk_id']}", found=repr(rankings.loc[row.name, "rank"]))
    dup = r.duplicated(["arm", "query_id", "chunk_id"])
    if dup.any():
        row = r[dup].iloc[0]
        raise InputError("a ranking names each chunk at most once per query", path=source,
                         item=f"arm {row['arm']}, query {row['query_id']}",
                         found=f"chunk {row['chunk_id']} twice")
    r["rank"] = rank.astype(np.int64)
    p = dict(zip(weights["position"].astype(int), weights["propensity"].astype(float)))
    r["examination"] = r["rank"].map(p).fillna(0.0).astype(np.float64)
    return r[["arm", "query_id", "chunk_id", "rank", "examination"]].reset_index(drop=True)


def session_patterns(log: ClickLog, exams: pd.DataFrame, *, max_position: int,
                     joint: bool) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every session's IPS evidence as click counts, compressed to distinct patterns.

    Parameters
    ----------
    log : ClickLog
        The impression log.
    exams : pandas.DataFrame
        ``arm``, ``query_id``, ``chunk_id``, ``rank``, ``examination`` (from
        :func:`examinations`); registered as the view :data:`RANKINGS_VIEW`.
    max_position : int
        ``K``: clicks and ranks below it are left out.
    joint : bool
        Also count each session's randomized-pair clicks (the randomization estimator's
        evidence), so a resample can re-estimate the propensities.

    Returns
    -------
    arms : list of str
        The arms, sorted (arm ``a`` is block ``a`` of the layout below).
    patterns : scipy.sparse.csr_array of float64, shape (m, K + A K^2 + 2 (K - 1))
        Distinct session vectors (layout in ``sql/ips_patterns.sql``): clicks per position,
        clicks per (arm, position, arm's rank), randomized-pair clicks per link (zeros
        unless ``joint``). The last row is all zero (sessions without a counted click).
    counts : numpy.ndarray of int64, shape (m,)
        Sessions per pattern, summing to ``log.sessions``.
    """
    arms = sorted(exams["arm"].unique().tolist())
    codes = {a: i for i, a in enumerate(arms)}
    view = exams[["arm", "query_id", "chunk_id", "rank", "examination"]].copy()
    view["arm_code"] = exams["arm"].map(codes).astype(np.int64)
    log.con.register(RANKINGS_VIEW, view)
    log.con.execute(sql("randomized_pairs"))
    k = int(max_position)
    evidence = k + len(arms) * k * k
    rows = log.con.execute(sql("ips_patterns"), {"max_position": k, "evidence": evidence,
                                                 "joint": bool(joint)}).fetchall()
    lengths = np.array([len(cols) for cols, _, _ in rows], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths), [lengths.sum()]])
    indices = np.fromiter((c for cols, _, _ in rows for c in cols), dtype=np.int64,
                          count=int(lengths.sum()))
    data = np.fromiter((x for _, ns, _ in rows for x in ns), dtype=np.float64,
                       count=int(lengths.sum()))
    patterns = sparse.csr_array((data, indices, indptr),
                                shape=(len(rows) + 1, evidence + 2 * (k - 1)))
    counts = np.array([n for _, _, n in rows] + [0], dtype=np.int64)
    counts[-1] = log.sessions - counts[:-1].sum()
    return arms, patterns, counts


def rewards(totals: np.ndarray, n: int, *, propensity: np.ndarray | None, n_arms: int,
            max_position: int, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """IPS and self-normalised IPS of every arm from summed session patterns.

    Parameters
    ----------
    totals : numpy.ndarray of float, shape (..., K + A K^2 + 2 (K - 1))
        Summed patterns of :func:`session_patterns` (one row per resample, or one row).
    n : int
        Sessions behind each row.
    propensity : numpy.ndarray of float, shape (K,), or None
        p(k) relative to p(1) (NaN where undefined); None: re-estimated from each row's
        randomized-pair clicks with :func:`relgrade.clicks.propensity.chain`.
    n_arms, max_position : int
        ``A`` and ``K``.
    clip : float
        Largest click weight.

    Returns
    -------
    ips, snips : numpy.ndarray of float64, shape (..., A)
        ``sum_{k,j} N[a,k,j] w(k) p(j) / n`` and the same over ``sum_k C[k] w(k)`` (NaN
        when no click has a weight), with ``w(k) = min(1 / p(k), clip)``; a position where
        p is undefined has weight 0 and examination 0.
    """
    k = max_position
    totals = np.asarray(totals, dtype=np.float64)
    if propensity is None:
        p = chain(totals[..., k + n_arms * k * k:].reshape(*totals.shape[:-1], k - 1, 2))
    else:
        p = np.broadcast_to(np.asarray(propensity, dtype=np.float64),
                            totals.shape[:-1] + (k,))
    ok = np.isfinite(p) & (p > 0)
    safe = np.where(ok, p, 1.0)
    w = np.where(ok, np.minimum(1.0 / safe, clip), 0.0)
    e = np.where(ok, p, 0.0)
    clicks = totals[..., :k]
    per = totals[..., k:k + n_arms * k * k].reshape(*totals.shape[:-1], n_arms, k, k)
    num = np.einsum("...akj,...k,...j->...a", per, w, e)
    den = (clicks * w).sum(axis=-1)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        snips = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return num / n, snips


def arm_estimates(log: ClickLog, propensity, rankings: pd.DataFrame, *,
                  rng: np.random.Generator, clip: float = DEFAULT_CLIP, n_boot: int = 1000,
                  level: float = 0.95, resample_propensity: bool = False,
                  source: str = "<rankings>") -> IpsResult:
    """IPS and self-normalised IPS estimates of each arm's click reward, with intervals.

    Parameters
    ----------
    log : ClickLog
        The logged impressions.
    propensity : PropensityCurve or mapping of int to float
        p(k) relative to p(1) per position (as :func:`relgrade.clicks.pairs.ips_weights`
        takes it); it gives both the click weights and the arms' examinations, over
        positions 1..K (K its last position).
    rankings : pandas.DataFrame
        Columns :data:`RANKING_COLUMNS`, one row per ranked chunk of each arm.
    rng : numpy.random.Generator
        Source of the bootstrap draws: per block of resamples one
        ``rng.multinomial(n, counts / n, size=block)``.
    clip : float, default 10.0
        Largest click weight (≥ 1).
    n_boot : int, default 1000
        Bootstrap resamples of sessions (≥ 1).
    level : float, default 0.95
        Confidence level of the percentile intervals, in (0, 1).
    resample_propensity : bool, default False
        Re-estimate the curve by randomization in every resample, from the same resampled
        sessions, so the intervals carry the propensities' own error. Use it when the curve
        came from this log's randomized slice (``method: randomization``); otherwise the
        curve is held fixed and the intervals leave its error out.
    source : str
        Where the rankings came from, for error messages.

    Returns
    -------
    IpsResult

    Raises
    ------
    InputError
        Bad settings; a rankings table that breaks :func:`examinations`' rules; a curve
        that defines no position; with ``resample_propensity``, randomized rows that do not
        form adjacent pairs; an arm that no logged impression matches (see Notes), naming
        the log, the arms and ``source``.

    Notes
    -----
    A ranked chunk the log never shows, or a query it never answers, earns nothing: IPS
    can only credit what users were shown (the selection bias the seed warns of). Such
    chunks are counted per arm and named in the notes, with the share of the logged
    impressions the estimate rests on (:func:`log_coverage`). An arm that no
    impression matches at all is refused: its IPS and SNIPS would be 0 whatever users
    clicked, which is no estimate (a log whose query or chunk ids differ from the
    rankings' gives exactly this). The point estimates
    use ``propensity`` as given; the resamples only set the intervals.

    Examples
    --------
    >>> rows = [("s1", "q", "a", 1, 1, "r", False), ("s1", "q", "b", 2, 1, "r", False),
    ...         ("s2", "q", "a", 1, 0, "r", False), ("s2", "q", "b", 2, 0, "r", False)]
    >>> df = pd.DataFrame(rows, columns=["session_id", "query_id", "chunk_id", "position",
    ...                                  "clicked", "ranker", "randomized"])
    >>> flip = pd.DataFrame({"arm": "flip", "query_id": "q", "chunk_id": ["b", "a"],
    ...                      "rank": [1, 2]})
    >>> res = arm_estimates(ClickLog.from_frame(df), {1: 1.0, 2: 0.5}, flip,
    ...                     rng=np.random.default_rng(0), n_boot=10)
    >>> res.table[["ips", "snips"]].round(4).values.tolist()   # (1*1*.5 + 2*1) / 2 ; 2.5 / 3
    [[1.25, 0.8333]]
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise InputError("the number of bootstrap resamples must be at least 1",
                         found=repr(n_boot))
    if not (isinstance(level, (float, int)) and 0 < level < 1):
        raise InputError("the confidence level must be between 0 and 1", found=repr(level))
    weights = weights_from_curve(propensity, clip=clip)
    if isinstance(propensity, PropensityCurve):
        k_max = int(propensity.table["position"].max())
    else:
        k_max = int(max(propensity))
    k_max = max(k_max, 2)
    p_point = np.full(k_max, np.nan)
    p_point[weights["position"].to_numpy() - 1] = weights["propensity"].to_numpy()
    exams = examinations(rankings, weights, source=source)
    if resample_propensity:
        _check_pairs(log)
    arms, patterns, counts = session_patterns(log, exams, max_position=k_max,
                                              joint=resample_propensity)
    coverage = log_coverage(log, arms, weights["position"])
    _refuse_unmatched(log, coverage, source=source, k_max=k_max)
    n = int(counts.sum())
    settings = {"n_arms": len(arms), "max_position": k_max, "clip": float(clip)}
    ips, snips = rewards(counts @ patterns, n, propensity=p_point, **settings)
    reps_ips = np.empty((n_boot, len(arms)))
    reps_snips = np.empty((n_boot, len(arms)))
    block = max(1, min(n_boot, _BLOCK_ELEMENTS // max(patterns.shape[0], 1)))
    done = 0
    while done < n_boot:
        b = min(block, n_boot - done)
        draws = rng.multinomial(n, counts / n, size=b).astype(np.float64)
        reps_ips[done:done + b], reps_snips[done:done + b] = rewards(
            np.asarray(patterns.T @ draws.T).T, n,
            propensity=None if resample_propensity else p_point, **settings)
        done += b
    alpha = (1 - level) / 2
    ranked = exams.groupby("arm").size()
    table = pd.DataFrame({
        "arm": arms, "ips": ips, "ips_low": _nan_quantile(reps_ips, alpha),
        "ips_high": _nan_quantile(reps_ips, 1 - alpha), "snips": snips,
        "snips_low": _nan_quantile(reps_snips, alpha),
        "snips_high": _nan_quantile(reps_snips, 1 - alpha),
        "ranked": [int(ranked[a]) for a in arms],
        "ranked_not_in_log": [int(coverage.loc[a, "chunks"]) for a in arms],
        "queries_not_in_log": [int(coverage.loc[a, "queries"]) for a in arms]})
    by_position = log.con.execute(sql("clicks_by_position")).df().merge(
        weights, on="position", how="left")
    weighted = by_position["weight"].notna()
    clipped = by_position["clipped"].fillna(False).astype(bool)
    notes = _notes(table, by_position, weighted, clipped, float(clip),
                   matched=coverage["impressions"], impressions=log.rows)
    if not resample_propensity:
        notes.append("the propensity curve was held fixed: the intervals leave out its "
                     "own estimation error")
    undefined = int((~np.isfinite(reps_ips)).any(axis=1).sum())
    if undefined:
        notes.append(f"{undefined} of {n_boot} resamples left a propensity undefined; each "
                     "interval is over the others")
    return IpsResult(table=table, sessions=n, clicks=int(by_position["clicks"].sum()),
                     clicks_weighted=int(by_position.loc[weighted, "clicks"].sum()),
                     clicks_clipped=int(by_position.loc[clipped, "clicks"].sum()),
                     clip=float(clip), n_boot=int(n_boot), level=float(level),
                     propensity_resampled=bool(resample_propensity), notes=notes)


def log_coverage(log: ClickLog, arms: list[str], positions) -> pd.DataFrame:
    """Per arm, what of its ranking the log shows, and the impressions it can be scored on.

    An impression (a row of the log) matches an arm when it is shown at a position with a
    click weight and the arm ranks its (query, chunk) at a rank the curve covers
    (examination above 0): only such rows can credit the arm with a click.

    Parameters
    ----------
    log : ClickLog
        The impression log, with :data:`RANKINGS_VIEW` registered on its connection (by
        :func:`session_patterns`).
    arms : list of str
        The arms, as :func:`session_patterns` returns them.
    positions : array-like of int, shape (n_positions,)
        The positions with a click weight.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``arm`` (in the order of ``arms``), int64 columns ``chunks`` (ranked
        (query, chunk) pairs the log never shows), ``queries`` (ranked queries it never
        answers) and ``impressions`` (logged rows matching the arm, 0 for none).
    """
    table = log.con.execute(sql("ips_absent"),
                            {"positions": [int(k) for k in positions]}).df()
    return table.set_index("arm").reindex(arms).astype("int64")


def _refuse_unmatched(log: ClickLog, coverage: pd.DataFrame, *, source: str,
                      k_max: int) -> None:
    none = [str(a) for a in coverage.index[coverage["impressions"] == 0]]
    if not none:
        return
    raise InputError(
        f"no logged impression matches the ranking of arm(s) {', '.join(none)} in {source}: "
        "IPS and SNIPS would be 0 whatever users clicked, so there is no estimate",
        path=log.source,
        found=f"{'for each, ' if len(none) > 1 else ''}0 of {log.rows:,} impressions "
              f"showing a (query, chunk) it ranks within positions 1-{k_max} of the "
              "propensity curve",
        fix="Check that the rankings and the log use the same query and chunk ids, or "
            "leave the arm out of the rankings folder")


def _check_pairs(log: ClickLog) -> None:
    log.con.execute(sql("randomized_pairs"))
    bad = log.con.execute(sql("randomized_check")).fetchall()
    if bad:
        session, rows, upper, lower = bad[0]
        found = (f"a lone flagged row at position {upper}" if rows == 1
                 else f"positions {upper} and {lower} taken together")
        raise InputError("rows flagged randomized must come in adjacent pairs (k, k + 1)",
                         path=log.source, item=f"session {session}", found=found)


def _nan_quantile(reps: np.ndarray, q: float) -> np.ndarray:
    out = np.full(reps.shape[1], np.nan)
    for j in range(reps.shape[1]):
        ok = np.isfinite(reps[:, j])
        if ok.any():
            out[j] = np.quantile(reps[ok, j], q)
    return out


def _notes(table, by_position, weighted, clipped, clip, *, matched, impressions
           ) -> list[str]:
    notes = []
    n_clipped = int(by_position.loc[clipped, "clicks"].sum())
    if n_clipped:
        ks = ", ".join(map(str, by_position.loc[clipped, "position"].astype(int)))
        notes.append(f"{n_clipped:,} click(s) at position(s) {ks} had 1/p(k) above the clip "
                     f"{clip:g} and were weighted {clip:g}: IPS is biased downward by their "
                     "missing weight (clipping trades that bias for lower variance)")
    left = int(by_position.loc[~weighted, "clicks"].sum())
    if left:
        ks = ", ".join(map(str, by_position.loc[~weighted & (by_position["clicks"] > 0),
                                                "position"].astype(int)))
        notes.append(f"{left:,} click(s) at position(s) {ks} have no propensity and are left "
                     "out of every estimate")
    for rec in table.itertuples(index=False):
        m = int(matched[rec.arm])
        share = (f"the {m:,} of {impressions:,} logged impressions ({m / impressions:.1%}) "
                 "of chunks it ranks")
        if rec.ranked_not_in_log or rec.queries_not_in_log:
            notes.append(f"arm {rec.arm}: {rec.ranked_not_in_log:,} of {rec.ranked:,} ranked "
                         f"chunks never shown in the log ({rec.queries_not_in_log:,} ranked "
                         "queries never logged); they earn no clicks in either estimate, "
                         f"which rests on {share}")
        elif m < impressions:
            notes.append(f"arm {rec.arm}: the estimate rests on {share}; clicks on the "
                         "others earn it nothing")
    return notes
