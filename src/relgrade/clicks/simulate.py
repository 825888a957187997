"""Simulated click logs under the position-based model, for checking the estimators.

Both the tests and the benchmark build their logs from these pieces, so an estimator is
always checked against the same randomisation scheme it is meant to read.
:func:`position_based_log` puts them together into a whole log with its truth (p(k), the
relevances, the rankers' lists), and :func:`true_click_reward` is the exact value an IPS
estimate of a ranking targets on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


def ranker_lists(rng: np.random.Generator, *, queries: int, chunks: int, positions: int,
                 rankers: int, swap_prob: float = 0.3) -> np.ndarray:
    """The lists several rankers show for each query: one base order and perturbed copies.

    Ranker 0 shows a random top ``positions`` of each query's ``chunks`` candidates; every
    other ranker shows the same list with each adjacent pair (j, j+1), taken in order from
    the top, swapped with probability ``swap_prob``. The same document then appears at
    different positions under different rankers: what intervention harvesting needs.

    Parameters
    ----------
    rng : numpy.random.Generator
        Drawn from in a fixed order: the base order, then one draw per (ranker, position).
    queries, chunks, positions, rankers : int
        Sizes; ``positions <= chunks``.
    swap_prob : float in [0, 1]

    Returns
    -------
    numpy.ndarray of int64, shape (queries, rankers, positions)
        Chunk indices (0 .. chunks-1) shown at each position.
    """
    base = np.argsort(rng.random((queries, chunks)), axis=1)[:, :positions]
    lists = np.empty((queries, rankers, positions), dtype=np.int64)
    for r in range(rankers):
        lst = base.copy()
        if r:
            for j in range(positions - 1):
                swap = rng.random(queries) < swap_prob
                upper, lower = lst[swap, j].copy(), lst[swap, j + 1].copy()
                lst[swap, j], lst[swap, j + 1] = lower, upper
        lists[:, r] = lst
    return lists


def fair_pairs(shown: np.ndarray, rng: np.random.Generator, *,
               share: float) -> tuple[np.ndarray, np.ndarray]:
    """Randomise a share of sessions by FairPairs: adjacent pairs swapped by a coin flip.

    A session in the randomised slice (probability ``share``) is cut into adjacent pairs
    starting at position 1 or 2 (offset 0 or 1, at random); each pair is swapped with
    probability 1/2 and both of its rows are flagged. Radlinski & Joachims, "Minimally
    invasive randomization for collecting unbiased preferences from clickthrough logs",
    AAAI 2006.

    Parameters
    ----------
    shown : numpy.ndarray of int, shape (n_sessions, positions)
        What each session would have shown; not modified.
    rng : numpy.random.Generator
        Drawn from in a fixed order: slice membership, offsets, then one coin per pair.
    share : float in [0, 1]
        Share of sessions in the randomised slice.

    Returns
    -------
    shown : numpy.ndarray, same shape
        The lists after the swaps.
    flagged : numpy.ndarray of bool, same shape
        True for the rows of a randomised pair (the log's ``randomized`` column).
    """
    shown = shown.copy()
    n, positions = shown.shape
    flagged = np.zeros((n, positions), dtype=bool)
    in_slice = rng.random(n) < share
    offset = rng.integers(0, 2, n)
    for j in range(positions // 2 + 1):
        a = offset + 2 * j
        rows = np.flatnonzero(in_slice & (a + 1 < positions))
        flagged[rows, a[rows]] = True
        flagged[rows, a[rows] + 1] = True
        coin = rows[rng.random(len(rows)) < 0.5]
        upper, lower = shown[coin, a[coin]].copy(), shown[coin, a[coin] + 1].copy()
        shown[coin, a[coin]], shown[coin, a[coin] + 1] = lower, upper
    return shown, flagged


@dataclass(frozen=True)
class SimulatedLog:
    """A click log simulated under the position-based model, with the truth that made it.

    Attributes
    ----------
    log : pandas.DataFrame
        The impression log, columns :data:`relgrade.schema.CLICK_LOG` (one row per chunk
        shown; ``clicked`` int64 0/1, ``randomized`` bool).
    propensity : numpy.ndarray of float64, shape (positions,)
        The true examination probability p(k) of positions 1..K.
    relevance : pandas.DataFrame
        The true click probability of an examined chunk: ``query_id``, ``chunk_id``,
        ``relevance`` (float64 in (0, 1)); every chunk of every query.
    rankings : pandas.DataFrame
        What each simulated ranker shows: ``ranker``, ``query_id``, ``chunk_id``, ``rank``
        (int64, 1-based).
    query_share : pandas.DataFrame
        ``query_id``, ``share``: the probability that a session answers the query.
    seed : int
        The seed every draw came from.
    """

    log: pd.DataFrame
    propensity: np.ndarray
    relevance: pd.DataFrame
    rankings: pd.DataFrame
    query_share: pd.DataFrame
    seed: int


def position_based_log(seed: int, *, sessions: int, queries: int, positions: int,
                       rankers: int = 3, randomized_share: float = 0.0,
                       propensity: np.ndarray | None = None,
                       relevance_range: tuple[float, float] = (0.05, 0.9)) -> SimulatedLog:
    """A seeded click log under the position-based model, every query's chunks all shown.

    Each query has ``positions`` candidate chunks with relevance r ~ U(relevance_range);
    the rankers show all of them (:func:`ranker_lists` with ``chunks = positions``), so every
    chunk a ranking of these queries can name is in the log. A session draws a query and a
    ranker uniformly; with probability ``randomized_share`` it is randomised by
    :func:`fair_pairs`. The chunk at position k is clicked with probability ``p(k) * r``
    (the position-based model; Craswell, Zoeter, Taylor & Ramsey 2008, WSDM).

    Parameters
    ----------
    seed : int
        Seed of :func:`numpy.random.default_rng`; draws in a fixed order (relevances, rankers'
        lists, queries, rankers, randomisation, clicks).
    sessions, queries, positions, rankers : int
        Sizes (each at least 1; ``positions`` at least 2).
    randomized_share : float in [0, 1], default 0
        Share of sessions in the FairPairs slice.
    propensity : numpy.ndarray of float, shape (positions,), optional
        The true p(k), each in (0, 1]; ``1 / k`` when None.
    relevance_range : (float, float), default (0.05, 0.9)
        Bounds of the uniform relevance draw, inside [0, 1].

    Returns
    -------
    SimulatedLog
        Ids are ``s000000`` (sessions), ``q000`` (queries), ``q000-c00`` (chunks), ``r0``
        (rankers).
    """
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, positions + 1) if propensity is None else \
        np.asarray(propensity, dtype=np.float64)
    low, high = relevance_range
    relevance = rng.uniform(low, high, size=(queries, positions))
    lists = ranker_lists(rng, queries=queries, chunks=positions, positions=positions,
                         rankers=rankers)
    q = rng.integers(0, queries, sessions)
    rk = rng.integers(0, rankers, sessions)
    shown, flagged = fair_pairs(lists[q, rk], rng, share=randomized_share)
    clicked = rng.random((sessions, positions)) < p[None, :] * relevance[q[:, None], shown]
    qid = np.array([f"q{x:03d}" for x in range(queries)])
    cid = np.array([[f"{qid[a]}-c{b:02d}" for b in range(positions)] for a in range(queries)])
    log = pd.DataFrame({
        "session_id": np.repeat([f"s{i:06d}" for i in range(sessions)], positions),
        "query_id": np.repeat(qid[q], positions),
        "chunk_id": cid[np.repeat(q, positions), shown.ravel()],
        "position": np.tile(np.arange(1, positions + 1, dtype=np.int64), sessions),
        "clicked": clicked.ravel().astype(np.int64),
        "ranker": np.repeat([f"r{x}" for x in rk], positions),
        "randomized": flagged.ravel(),
    })
    rel = pd.DataFrame({"query_id": np.repeat(qid, positions), "chunk_id": cid.ravel(),
                        "relevance": relevance.ravel()})
    a, r, k = np.meshgrid(np.arange(queries), np.arange(rankers), np.arange(positions),
                          indexing="ij")
    rankings = pd.DataFrame({
        "ranker": np.array([f"r{x}" for x in range(rankers)])[r.ravel()],
        "query_id": qid[a.ravel()],
        "chunk_id": cid[a.ravel(), lists[a.ravel(), r.ravel(), k.ravel()]],
        "rank": k.ravel().astype(np.int64) + 1,
    })
    share = pd.DataFrame({"query_id": qid, "share": np.full(queries, 1.0 / queries)})
    return SimulatedLog(log=log, propensity=p, relevance=rel, rankings=rankings,
                        query_share=share, seed=int(seed))


def true_click_reward(ranking: pd.DataFrame, sim: SimulatedLog) -> tuple[float, float]:
    """The expected clicks per session of a ranking, and its normalised share, exactly.

    Parameters
    ----------
    ranking : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``rank`` (1-based); chunks not ranked, or ranked below
        the simulation's last position, are not examined.
    sim : SimulatedLog
        The simulation whose click model is the truth.

    Returns
    -------
    (float, float)
        ``sum_q P(q) sum_d p(rank(d)) r(q, d)`` (the target of the IPS estimate, in clicks
        per session), and ``sum_q P(q) sum_d [p(rank(d)) / p(1)] r(q, d) / sum_q P(q)
        sum_d r(q, d)`` (the target of the self-normalised estimate, in [0, 1]).
    """
    p = sim.propensity
    merged = sim.relevance.merge(ranking[["query_id", "chunk_id", "rank"]],
                                 on=["query_id", "chunk_id"], how="left")
    merged = merged.merge(sim.query_share, on="query_id")
    rank = merged["rank"].to_numpy(dtype=np.float64)
    inside = np.isfinite(rank) & (rank >= 1) & (rank <= len(p))
    exam = np.zeros(len(merged))
    exam[inside] = p[rank[inside].astype(np.int64) - 1]
    mass = merged["share"].to_numpy() * merged["relevance"].to_numpy()
    return float((mass * exam).sum()), float((mass * exam / p[0]).sum() / mass.sum())
