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
resample shared by every arm (so arms are compared on the same resamples); the propensity
curve is held fixed, so the intervals leave out its own estimation error.

Clipping (``clip``) caps the weights: it lowers the variance and biases IPS downward by the
clipped share of click mass (Strehl, Langford, Li & Kakade 2010, NeurIPS; Joachims et al.
2017, Sec. 4). The result reports how many clicks were clipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from relgrade.clicks.log import ClickLog, sql
from relgrade.clicks.pairs import DEFAULT_CLIP, WEIGHTS_VIEW, weights_from_curve
from relgrade.errors import InputError

#: The view of the arms' examinations the SQL joins on.
RANKINGS_VIEW = "relgrade_clicks_rankings"

#: Columns of a rankings table (one row per ranked chunk).
RANKING_COLUMNS = ("arm", "query_id", "chunk_id", "rank")

#: Columns of :attr:`IpsResult.table`.
TABLE_COLUMNS = ("arm", "ips", "ips_low", "ips_high", "snips", "snips_low", "snips_high",
                 "ranked", "ranked_not_in_log", "queries_not_in_log")

#: Weight-matrix elements (resamples x session patterns) per bootstrap block.
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
    notes : list of str
        The clipping bias note, clicks left out, chunks and queries absent from the log.
    """

    table: pd.DataFrame
    sessions: int
    clicks: int
    clicks_weighted: int
    clicks_clipped: int
    clip: float
    n_boot: int
    level: float
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
        ``arm``, ``query_id``, ``chunk_id`` (strings), ``examination`` (float64: p(rank)
        relative to p(1); 0 for a rank without a propensity, i.e. below the curve).

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
    return r[["arm", "query_id", "chunk_id", "examination"]].reset_index(drop=True)


def session_evidence(log: ClickLog, weights: pd.DataFrame,
                     exams: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every session's IPS evidence, compressed to distinct patterns with their counts.

    Parameters
    ----------
    log : ClickLog
        The impression log.
    weights : pandas.DataFrame
        ``position``, ``weight`` (from :func:`relgrade.clicks.pairs.ips_weights`).
    exams : pandas.DataFrame
        From :func:`examinations`.

    Returns
    -------
    arms : list of str
        The arms, sorted; column ``1 + j`` of ``patterns`` is arm ``j``'s numerator.
    patterns : numpy.ndarray of float64, shape (m, 1 + len(arms))
        Distinct session rows ``[sum_c w(k_c), sum_c w(k_c) e_arm(d_c) ...]``; sessions
        without a weighted click are the all-zero row.
    counts : numpy.ndarray of int64, shape (m,)
        Sessions per pattern; they sum to ``log.sessions``.
    """
    log.con.register(WEIGHTS_VIEW, weights[["position", "weight"]].copy())
    log.con.register(RANKINGS_VIEW, exams)
    arms = sorted(exams["arm"].unique().tolist())
    rows = log.con.execute(sql("ips_sessions")).df()
    sessions = pd.Index(rows["session_id"].unique())
    matrix = np.zeros((len(sessions), 1 + len(arms)))
    if len(rows):
        s_code = sessions.get_indexer(rows["session_id"])
        matrix[s_code, 0] = rows["den"].to_numpy(dtype=np.float64)
        has_arm = rows["arm"].notna().to_numpy()
        a_code = pd.Index(arms).get_indexer(rows.loc[has_arm, "arm"])
        matrix[s_code[has_arm], 1 + a_code] = rows.loc[has_arm, "num"].to_numpy(np.float64)
    zero = log.sessions - len(sessions)
    if zero:
        matrix = np.vstack([matrix, np.zeros((1, 1 + len(arms)))])
    patterns, inverse = np.unique(matrix, axis=0, return_inverse=True)
    counts = np.bincount(inverse.ravel(), minlength=len(patterns)).astype(np.int64)
    if zero:
        # The all-zero row stands for every session without a weighted click.
        counts[inverse.ravel()[-1]] += zero - 1
    return arms, patterns, counts


def _estimates(totals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(IPS, SNIPS) per arm from summed patterns ``[den, num_arm...]`` over ``n`` sessions."""
    den = totals[..., :1]
    num = totals[..., 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        snips = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return num / n, snips


def arm_estimates(log: ClickLog, propensity, rankings: pd.DataFrame, *,
                  rng: np.random.Generator, clip: float = DEFAULT_CLIP, n_boot: int = 1000,
                  level: float = 0.95, source: str = "<rankings>") -> IpsResult:
    """IPS and self-normalised IPS estimates of each arm's click reward, with intervals.

    Parameters
    ----------
    log : ClickLog
        The logged impressions.
    propensity : PropensityCurve or mapping of int to float
        p(k) relative to p(1) per position (as :func:`relgrade.clicks.pairs.ips_weights`
        takes it); it gives both the click weights and the arms' examinations.
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
    source : str
        Where the rankings came from, for error messages.

    Returns
    -------
    IpsResult

    Raises
    ------
    InputError
        Bad settings; a rankings table that breaks :func:`examinations`' rules; a curve
        that defines no position.

    Notes
    -----
    A ranked chunk the log never shows, or a query it never answers, earns nothing: IPS
    can only credit what users were shown (the selection bias the seed warns of). Such
    chunks are counted per arm and named in the notes, never an error.

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
    exams = examinations(rankings, weights, source=source)
    arms, patterns, counts = session_evidence(log, weights, exams)
    n = int(counts.sum())
    ips, snips = _estimates((patterns * counts[:, None]).sum(axis=0), n)
    reps_ips = np.empty((n_boot, len(arms)))
    reps_snips = np.empty((n_boot, len(arms)))
    block = max(1, min(n_boot, _BLOCK_ELEMENTS // max(len(patterns), 1)))
    done = 0
    while done < n_boot:
        b = min(block, n_boot - done)
        draws = rng.multinomial(n, counts / n, size=b).astype(np.float64)
        reps_ips[done:done + b], reps_snips[done:done + b] = _estimates(draws @ patterns, n)
        done += b
    alpha = (1 - level) / 2
    absent = log.con.execute(sql("ips_absent")).df().set_index("arm")
    ranked = exams.groupby("arm").size()
    table = pd.DataFrame({
        "arm": arms, "ips": ips, "ips_low": np.quantile(reps_ips, alpha, axis=0),
        "ips_high": np.quantile(reps_ips, 1 - alpha, axis=0), "snips": snips,
        "snips_low": _nan_quantile(reps_snips, alpha), "snips_high":
        _nan_quantile(reps_snips, 1 - alpha),
        "ranked": [int(ranked[a]) for a in arms],
        "ranked_not_in_log": [int(absent.loc[a, "chunks"]) for a in arms],
        "queries_not_in_log": [int(absent.loc[a, "queries"]) for a in arms]})
    by_position = log.con.execute(sql("clicks_by_position")).df().merge(
        weights, on="position", how="left")
    weighted = by_position["weight"].notna()
    clipped = by_position["clipped"].fillna(False).astype(bool)
    clip = float(clip)
    notes = _notes(table, by_position, weighted, clipped, clip)
    return IpsResult(table=table, sessions=n, clicks=int(by_position["clicks"].sum()),
                     clicks_weighted=int(by_position.loc[weighted, "clicks"].sum()),
                     clicks_clipped=int(by_position.loc[clipped, "clicks"].sum()),
                     clip=clip, n_boot=int(n_boot), level=float(level), notes=notes)


def _nan_quantile(reps: np.ndarray, q: float) -> np.ndarray:
    out = np.full(reps.shape[1], np.nan)
    for j in range(reps.shape[1]):
        ok = np.isfinite(reps[:, j])
        if ok.any():
            out[j] = np.quantile(reps[ok, j], q)
    return out


def _notes(table, by_position, weighted, clipped, clip) -> list[str]:
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
        if rec.ranked_not_in_log or rec.queries_not_in_log:
            notes.append(f"arm {rec.arm}: {rec.ranked_not_in_log:,} of {rec.ranked:,} ranked "
                         f"chunks never shown in the log ({rec.queries_not_in_log:,} ranked "
                         "queries never logged); they earn no clicks in either estimate")
    return notes
