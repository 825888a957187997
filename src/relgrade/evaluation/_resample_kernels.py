"""numba kernels of :mod:`relgrade.evaluation._resample` (imported only when first needed).

Kept at module level so that numba caches their machine code between processes.
"""

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _leaf(a, lo, n):
    # numpy's pairwise summation of at most 128 values (numpy/_core/src/umath/loops_utils.h.src)
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    i = 8
    stop = n - (n % 8)
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@numba.njit(cache=True, nogil=True)
def pairwise(a, lo, n, stack, sums):
    """numpy's pairwise sum of ``a[lo:lo + n]``, the same float64 bits.

    numpy splits a range of more than 128 values at ``n2 = n // 2 - (n // 2) % 8`` and adds
    the two halves' sums; this walks that tree without recursion (numba's cache cannot hold
    recursive functions). ``stack`` (int64, shape (64, 3): start, length, state of each
    frame) and ``sums`` (float64, shape (64,): the left halves' sums) are scratch; the tree
    is less than 32 deep for any ``n < 2**32``.
    """
    if n <= 128:
        return _leaf(a, lo, n)
    top = 0
    stack[0, 0] = lo
    stack[0, 1] = n
    stack[0, 2] = 0
    while True:
        m = stack[top, 1]
        if m <= 128:
            ret = _leaf(a, stack[top, 0], m)
            while True:  # hand the sum up to the frames waiting for it
                top -= 1
                if top < 0:
                    return ret
                if stack[top, 2] == 1:  # it was the left half: now the right one
                    sums[top] = ret
                    stack[top, 2] = 2
                    half = stack[top, 1] // 2
                    half -= half % 8
                    stack[top + 1, 0] = stack[top, 0] + half
                    stack[top + 1, 1] = stack[top, 1] - half
                    stack[top + 1, 2] = 0
                    top += 1
                    break
                ret = sums[top] + ret  # it was the right half
        else:
            half = m // 2
            half -= half % 8
            stack[top, 2] = 1
            stack[top + 1, 0] = stack[top, 0]
            stack[top + 1, 1] = half
            stack[top + 1, 2] = 0
            top += 1


@numba.njit(cache=True, nogil=True)
def rows(words, pos, n, threshold, src, weights, out, first, last, idx, tmp):
    """Fill out[first:last]; stop before a row the words cannot finish.

    Returns (next row, next word position).
    """
    m = src.shape[0]
    nn = np.uint64(n)
    low = np.uint64(0xFFFFFFFF)
    thr = np.uint64(threshold)
    size = words.shape[0]
    stack = np.empty((64, 3), dtype=np.int64)
    sums = np.empty(64)
    fused = m == 1 and weights.shape[0] == 0
    s0 = src[0]
    for row in range(first, last):
        p = pos
        rejected = False
        gathered = False
        if p + n <= size:
            # the common case: no word of the row is rejected (about 2e-6 of words are
            # for 10,000 queries), so the row reads exactly n words
            if fused:  # one arm, no weights: gather as the indices are made
                for j in range(n):
                    x = np.uint64(words[p + j]) * nn
                    rejected |= (x & low) < thr
                    tmp[j] = s0[np.int64(x >> np.uint64(32))]
                gathered = True
            else:
                for j in range(n):
                    x = np.uint64(words[p + j]) * nn
                    rejected |= (x & low) < thr
                    idx[j] = np.int64(x >> np.uint64(32))
            p += n
        if rejected or pos + n > size:
            gathered = False
            p = pos
            for j in range(n):
                while True:
                    if p >= size:
                        return row, pos
                    x = np.uint64(words[p]) * nn
                    p += 1
                    if (x & low) >= thr:
                        break
                idx[j] = np.int64(x >> np.uint64(32))
        pos = p
        if gathered:
            out[row, 0] = pairwise(tmp, 0, n, stack, sums) / float(n)
            continue
        if weights.shape[0]:
            for j in range(n):
                tmp[j] = weights[idx[j]]
            den = pairwise(tmp, 0, n, stack, sums)
        else:
            den = float(n)
        for i in range(m):
            si = src[i]
            for j in range(n):
                tmp[j] = si[idx[j]]
            out[row, i] = pairwise(tmp, 0, n, stack, sums) / den
    return last, pos


@numba.njit(cache=True, nogil=True)
def flip_count(byte, table, bound):
    """How many rows of ``byte`` give ``|sum_p table[p, byte[r, p]]| >= bound``.

    byte : uint8, shape (rows, P); table : float64, shape (P, 256). Each row's sum is numpy's
    pairwise sum of its P looked-up values, so the count is the one numpy's
    ``np.take(...).sum(axis=1)`` gives.
    """
    rows, p = byte.shape
    tmp = np.empty(p)
    stack = np.empty((64, 3), dtype=np.int64)
    sums = np.empty(64)
    count = 0
    for r in range(rows):
        for k in range(p):
            tmp[k] = table[k, byte[r, k]]
        if abs(pairwise(tmp, 0, p, stack, sums)) >= bound:
            count += 1
    return count
