"""numba kernels of :mod:`relgrade.io.trec_scan` (imported only when a run file is scanned).

Kept at module level so that numba caches their machine code between processes.
"""

import numba
import numpy as np

#: Outcomes of :func:`scan`: the file is parsed, or it is left to the existing reader.
OK = 0
NOT_MINE = 1

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
# 10^0 .. 10^22: every one exact in float64 (Clinger 1990's fast path)
_POW10 = np.array([10.0 ** i for i in range(23)], dtype=np.float64)
_TWO53 = 1 << 53


@numba.njit(cache=True, nogil=True)
def _fold(h, word):
    return (h ^ word) * _MIX1


@numba.njit(cache=True, nogil=True)
def _finish(h):
    h = h ^ (h >> np.uint64(30))
    h = h * _MIX1
    h = h ^ (h >> np.uint64(27))
    h = h * _MIX2
    return h ^ (h >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _printable(b):
    """Whether a byte may stand inside a field the scan accepts: printable ASCII, 0x21-0x7E
    (never a separator, a line end, another control byte or a non-ASCII byte: a file with
    one is left to the reader)."""
    return 0x21 <= b <= 0x7E


# positions in the counters array of scan()
ROW, NQ, NC, NHEADS, NSLOW, NS = 0, 1, 2, 3, 4, 5


@numba.njit(cache=True, nogil=True)
def scan(data, start, delim, qoff, qbytes, coff, cbytes, rank, score, slow, soff, sbytes,
         heads, counts):
    """Split, parse and code the whole lines of a TREC run held in ``data[start:]``.

    Resumable: ``counts`` (int64, 6) holds rows, query-id bytes, chunk-id bytes, heads, slow
    rows and slow-score bytes written so far, and is advanced; a file is fed in blocks of
    whole lines (the last block may lack its final LF). Returns ``(status, position)``:
    :data:`OK`, or :data:`NOT_MINE` and the offset in ``data`` where the scan gave up.
    ``qoff`` / ``coff`` (n_rows + 1, ``[0]`` set by the caller) and ``qbytes`` /
    ``cbytes``: the query and chunk ids' bytes, Arrow's string layout; ``rank`` int64;
    ``score`` float64, NaN on the ``slow`` rows, whose score text is copied to ``sbytes``
    (offsets ``soff``) for the caller to parse; ``heads``: the rows whose query id differs
    from the row before. (The chunk ids are hashed by :func:`hash_ids` afterwards: a pass of
    its own runs about three times faster than the same work here.)
    """
    n = data.shape[0]
    p = start
    row = counts[ROW]
    nq = counts[NQ]
    nc = counts[NC]
    nheads = counts[NHEADS]
    nslow = counts[NSLOW]
    ns = counts[NS]
    while p < n:
        # --- field 1: query id
        q0 = nq
        while p < n and data[p] != delim:
            b = data[p]
            if not _printable(b):
                return NOT_MINE, p
            qbytes[nq] = b
            nq += 1
            p += 1
        if nq == q0 or p >= n:
            return NOT_MINE, p
        p += 1
        qoff[row + 1] = nq
        # a new block of equal query ids?
        same = False
        if row > 0:
            prev = qoff[row - 1]
            if nq - q0 == q0 - prev:
                same = True
                for j in range(nq - q0):
                    if qbytes[q0 + j] != qbytes[prev + j]:
                        same = False
                        break
        if not same:
            heads[nheads] = row
            nheads += 1
        # --- field 2: Q0 (read, checked, dropped)
        f = p
        while p < n and data[p] != delim:
            if not _printable(data[p]):
                return NOT_MINE, p
            p += 1
        if p == f or p >= n:
            return NOT_MINE, p
        p += 1
        # --- field 3: chunk id
        c0 = nc
        while p < n and data[p] != delim:
            b = data[p]
            if not _printable(b):
                return NOT_MINE, p
            cbytes[nc] = b
            nc += 1
            p += 1
        length = nc - c0
        if length == 0 or p >= n:
            return NOT_MINE, p
        p += 1
        coff[row + 1] = nc
        # --- field 4: rank, -?[0-9]{1,18}
        neg = False
        if p < n and data[p] == 45:  # '-'
            neg = True
            p += 1
        f = p
        r = np.int64(0)
        while p < n and 48 <= data[p] <= 57:
            r = r * 10 + (data[p] - 48)
            p += 1
        if p == f or p - f > 18 or p >= n or data[p] != delim:
            return NOT_MINE, p
        rank[row] = -r if neg else r
        p += 1
        # --- field 5: score, -?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?
        s0 = p
        neg = False
        if p < n and data[p] == 45:
            neg = True
            p += 1
        m = np.uint64(0)
        digits = 0      # significant digits taken into m
        dropped = False  # a nonzero digit beyond what m can hold
        exp10 = 0
        f = p
        while p < n and 48 <= data[p] <= 57:
            d = data[p] - 48
            if digits < 19:
                if digits > 0 or d != 0:
                    m = m * np.uint64(10) + np.uint64(d)
                    digits += 1
            else:
                exp10 += 1
                if d != 0:
                    dropped = True
            p += 1
        if p == f:
            return NOT_MINE, p
        if p < n and data[p] == 46:  # '.'
            p += 1
            f = p
            while p < n and 48 <= data[p] <= 57:
                d = data[p] - 48
                if digits < 19:
                    if digits > 0 or d != 0:
                        m = m * np.uint64(10) + np.uint64(d)
                        digits += 1
                    exp10 -= 1
                elif d != 0:
                    dropped = True
                p += 1
            if p == f:
                return NOT_MINE, p
        if p < n and (data[p] == 101 or data[p] == 69):  # 'e', 'E'
            p += 1
            eneg = False
            if p < n and (data[p] == 43 or data[p] == 45):
                eneg = data[p] == 45
                p += 1
            f = p
            e = 0
            while p < n and 48 <= data[p] <= 57:
                if e < 100000:
                    e = e * 10 + (data[p] - 48)
                p += 1
            if p == f:
                return NOT_MINE, p
            exp10 += -e if eneg else e
        if p >= n or data[p] != delim:
            return NOT_MINE, p
        p += 1
        if m == 0 and not dropped:
            score[row] = -0.0 if neg else 0.0
        elif not dropped and m <= np.uint64(_TWO53) and -22 <= exp10 <= 22:
            v = np.float64(m)
            v = v / _POW10[-exp10] if exp10 < 0 else v * _POW10[exp10]
            score[row] = -v if neg else v
        else:
            score[row] = np.nan
            slow[nslow] = row
            for j in range(s0, p - 1):
                sbytes[ns] = data[j]
                ns += 1
            nslow += 1
            soff[nslow] = ns
        # --- field 6: tag; then the line's end (LF, CRLF, or the file's end)
        f = p
        while p < n and data[p] != 10:
            b = data[p]
            if b == 13 and p + 1 < n and data[p + 1] == 10:
                break
            if not _printable(b):
                return NOT_MINE, p
            p += 1
        if p == f:
            return NOT_MINE, p
        if p < n and data[p] == 13:
            p += 1
        p += 1
        row += 1
    counts[ROW] = row
    counts[NQ] = nq
    counts[NC] = nc
    counts[NHEADS] = nheads
    counts[NSLOW] = nslow
    counts[NS] = ns
    return OK, p


@numba.njit(cache=True, nogil=True)
def hash_ids(cbytes, coff, out):
    """``ranking._text_hash`` of each string ``cbytes[coff[r]:coff[r + 1]]``: ``h`` starts
    at the length; for each 8-byte little-endian word (the last one zero-padded)
    ``h = (h ^ word) * MIX1``; then splitmix64's finaliser."""
    for r in range(out.shape[0]):
        f = coff[r]
        e = coff[r + 1]
        hh = np.uint64(e - f)
        idx = f
        while idx + 8 <= e:
            w = (np.uint64(cbytes[idx]) | (np.uint64(cbytes[idx + 1]) << np.uint64(8))
                 | (np.uint64(cbytes[idx + 2]) << np.uint64(16))
                 | (np.uint64(cbytes[idx + 3]) << np.uint64(24))
                 | (np.uint64(cbytes[idx + 4]) << np.uint64(32))
                 | (np.uint64(cbytes[idx + 5]) << np.uint64(40))
                 | (np.uint64(cbytes[idx + 6]) << np.uint64(48))
                 | (np.uint64(cbytes[idx + 7]) << np.uint64(56)))
            hh = _fold(hh, w)
            idx += 8
        if idx < e:
            w = np.uint64(0)
            sh = np.uint64(0)
            while idx < e:
                w |= np.uint64(cbytes[idx]) << sh
                sh += np.uint64(8)
                idx += 1
            hh = _fold(hh, w)
        out[r] = _finish(hh)


@numba.njit(cache=True, nogil=True)
def last_line_end(data, n):
    """The offset of the last LF in ``data[:n]``, -1 when there is none."""
    for i in range(n - 1, -1, -1):
        if data[i] == 10:
            return i
    return -1


@numba.njit(cache=True, nogil=True)
def repeated_in_blocks(chash, heads, n_rows):
    """Whether some block of rows (``heads``: each block's first row) holds one chunk hash
    twice: when every query id forms one block, False proves no chunk is listed twice for
    one query.

    One open-addressing table, sized for the longest block and reused for every block: a
    slot holds a hash and the block that wrote it, so nothing is cleared between blocks.
    """
    longest = 1
    for b in range(heads.shape[0]):
        hi = heads[b + 1] if b + 1 < heads.shape[0] else n_rows
        longest = max(longest, hi - heads[b])
    size = 1
    while size < 2 * longest:
        size *= 2
    mask = np.uint64(size - 1)
    keys = np.empty(size, dtype=np.uint64)
    owner = np.full(size, -1, dtype=np.int64)
    for b in range(heads.shape[0]):
        lo = heads[b]
        hi = heads[b + 1] if b + 1 < heads.shape[0] else n_rows
        for r in range(lo, hi):
            h = chash[r]
            slot = np.int64(h & mask)
            while owner[slot] == b:
                if keys[slot] == h:
                    return True
                slot = (slot + 1) & (size - 1)
            owner[slot] = b
            keys[slot] = h
    return False
