"""Simulated click logs under the position-based model, for checking the estimators.

Both the tests and the benchmark build their logs from these two pieces, so an estimator is
always checked against the same randomisation scheme it is meant to read.
"""

from __future__ import annotations

import numpy as np


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
