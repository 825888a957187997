"""Compiled bootstrap resampling that reproduces numpy's draws and sums bit for bit.

:func:`relgrade.evaluation.stats.bootstrap_means` draws each resample's query indices with
``Generator.integers(0, n, size=(rows, n), dtype=np.int64)``, gathers the values and sums
every row with numpy's pairwise summation. That costs three passes over 10^8 indices for
10,000 resamples of 10,000 queries, most of it the index array itself. This module does the
same work in one compiled pass per resample, with the same numbers:

* the 32-bit words come from the generator's own 64-bit outputs
  (``BitGenerator.random_raw``), low half first, as PCG64's ``next_uint32`` hands them out,
  including the half a previous draw left buffered in the generator's state;
* each index is Lemire's bounded integer, as numpy computes it for a range below 2^32:
  ``m = word * n``, the index is ``m >> 32``, and the word is rejected (the next one taken)
  when ``m mod 2^32`` falls below ``(2^32 - n) mod n`` (Lemire 2019, ACM TOMACS 29(1));
* each row's sum is numpy's pairwise summation (blocks of at most 128 values summed with
  eight accumulators, larger ranges split in two at a multiple of 8), so the float64 result
  is the one ``ndarray.sum`` gives;
* afterwards the generator's state is what numpy would have left: the words used, and a
  buffered half when an odd number of words was used.

It is used only for PCG64 and PCG64DXSM generators (whose ``next_uint32`` splits a 64-bit
output) and when numba is installed; :func:`bootstrap_means` falls back to numpy otherwise,
and a test checks that both give the same bytes.
"""

from __future__ import annotations

import sys

import numpy as np

#: Bit generators whose 32-bit words are the halves of their 64-bit outputs, low half first.
SPLIT_64 = ("PCG64", "PCG64DXSM")

KERNELS_MODULE = "relgrade.evaluation._resample_kernels"


def _kernels():
    """The compiled kernels ``(pairwise, rows, flip_count)``, imported on first use (numba
    caches their machine code on disk; the import lock makes threads share one import, and
    numba compiles each kernel once under its own lock); None without numba, or when numba
    finds no writable place for its cache (a read-only install with no writable user cache
    directory: numba raises RuntimeError when the module is imported). numpy's path gives the
    same numbers."""
    try:
        from relgrade.evaluation import _resample_kernels as k
    except (ImportError, RuntimeError):
        return None
    return k.pairwise, k.rows, k.flip_count


#: Elements (resamples x queries x arms) one call must resample before it loads the compiled
#: kernels: importing numba and loading its cached code costs about 0.5 CPU-s once per
#: process, the kernels save about 1 ns per element, so a few small comparisons stay on
#: numpy's path (same numbers) and never import numba.
COMPILED_MIN_ELEMENTS = 1 << 25


def kernels_for(elements: int):
    """The kernels if they are loaded already or a call of ``elements`` is worth loading them.

    Returns the kernels (see :func:`_kernels`) or None: then the caller takes numpy's path.
    """
    if KERNELS_MODULE not in sys.modules and elements < COMPILED_MIN_ELEMENTS:
        return None
    return _kernels()


def available(rng: np.random.Generator, n: int, elements: int) -> bool:
    """Whether :func:`bootstrap_rows` can, and should, draw ``elements`` from ``rng`` for
    ``n`` queries: a PCG64/PCG64DXSM generator, ``2 <= n < 2**32`` and kernels worth having
    (:func:`kernels_for`)."""
    return (type(rng.bit_generator).__name__ in SPLIT_64 and 2 <= n < 2 ** 32
            and kernels_for(elements) is not None)


def bootstrap_rows(src: np.ndarray, weights: np.ndarray | None, rng: np.random.Generator,
                   n_resamples: int, block_rows: int) -> np.ndarray:
    """Resample means, exactly as numpy's block-wise draw, gather and sum compute them.

    Parameters
    ----------
    src : numpy.ndarray of shape (m, n), float64, C-contiguous
        The numerators: values, or values times weights.
    weights : numpy.ndarray of shape (n,), float64, or None
        Traffic weights: a resample's denominator is the pairwise sum of its weights; None:
        the denominator is ``n``.
    rng : numpy.random.Generator
        A PCG64 or PCG64DXSM generator (see :func:`available`); advanced exactly as
        ``rng.integers(0, n, size=(n_resamples, n), dtype=np.int64)`` advances it.
    n_resamples : int
    block_rows : int
        Rows drawn per block (bounds the words held at once).

    Returns
    -------
    numpy.ndarray of shape (n_resamples, m), float64
    """
    rows = _kernels()[1]
    bg = rng.bit_generator
    m, n = src.shape
    threshold = (2 ** 32 - n) % n
    out = np.empty((n_resamples, m))
    idx = np.empty(n, dtype=np.int64)
    tmp = np.empty(n)
    w = np.empty(0) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    src = np.ascontiguousarray(src, dtype=np.float64)
    state = bg.state
    carry = np.array([state["uinteger"]], dtype=np.uint32) if state["has_uint32"] else None
    if carry is not None:
        bg.state = {**state, "has_uint32": 0}
    row = 0
    while row < n_resamples:
        last = min(n_resamples, row + block_rows)
        need = (last - row) * n - (0 if carry is None else carry.size)
        fresh = bg.random_raw(max(1, -(-need // 2))).view(np.uint32)
        words = fresh if carry is None else np.concatenate([carry, fresh])
        row, pos = rows(words, 0, n, threshold, src, w, out, row, last, idx, tmp)
        # the words a row could not finish (a rejected word made it run short) and any
        # unused half start the next block's stream
        carry = words[pos:] if pos < words.size else None
    if carry is not None:
        # at most one half is left: a block draws no more words than its rows need, rounded
        # up to a whole 64-bit output; numpy's generator keeps that half for the next draw
        if carry.size != 1:
            raise RuntimeError(f"bootstrap stream out of step: {carry.size} words left")
        bg.state = {**bg.state, "has_uint32": 1, "uinteger": int(carry[0])}
    return out
