"""A TREC run file read, coded and checked for repeated chunks in one compiled pass.

:func:`relgrade.io.trec.read_trec_run` parses a run with Arrow's CSV reader, then
:func:`relgrade.ranking.run_codes` codes its query ids and hashes its chunk ids, and
:func:`relgrade.ranking.validate_run` sorts a million hashes to find a chunk listed twice.
:func:`scan_trec_run` does the three in one pass over the file's bytes (read 4 MiB of whole
lines at a time into one numpy byte array, never a Python object per line), compiled by
a C module built with the package (``relgrade.io._trec_scan``, from ``_trec_scan.c``),
with the same results: the same table, the same :class:`relgrade.ranking.RunCodes`, and a
proof that no query lists a chunk twice when it can give one. The chunk ids are then hashed
in a second, tight pass over their copied bytes, and the proof is one hash table per block
of adjacent rows of one query (when a query's rows are split over the file, no proof is
given and :func:`relgrade.ranking.validate_run` checks the whole run as before).

The C module is built when the package is installed (``pip install``; optional: without a
C compiler the package installs without it, and every run is then read by the reader).
Loading it costs nothing worth counting, and no compiler runs in the process.

It accepts only lines it is sure to read as the existing reader does, and leaves every other
file to it (it returns None), so that file is read, accepted or refused exactly as before,
with the same message:

* fields separated by single spaces, or by single tabs when the file's first line holds a
  tab (:func:`relgrade.io.sniff.field_separator`); six fields a line; a line ends in LF or
  CRLF (the last one may end the file); a UTF-8 byte-order mark at the start is skipped;
* every id, ``Q0`` and tag field is one or more printable ASCII bytes (0x21-0x7E): no
  empty field, no other separator, control byte (U+001F among them) or non-ASCII byte;
* the rank is ``-?[0-9]{1,18}``;
* the score is ``-?[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?``; when its significant digits
  form an integer ``w <= 2^53`` and its decimal exponent ``e`` lies in [-22, 22], it is
  ``w * 10^e`` (or ``w / 10^-e``) in float64, exact operands and one correctly rounded
  operation (Clinger 1990, "How to read floating point numbers accurately", PLDI); other
  scores are parsed by Python's ``float()`` (correctly rounded, as Arrow's parser is), and
  a score that is not finite leaves the file to the reader.

Blank lines, fields after the sixth, ``+`` signs, hex ranks, ``inf``/``nan`` and the like
all leave the file to the reader. Without the C module (or an empty file), too.

:class:`KnownIds` checks the ids a scan read against known ones (the pool stage: every
row's chunk against the corpus, every query against the query set) in the same C module:
an open-addressing table of the known ids keyed by the scan's chunk hash, each match
confirmed byte for byte.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from relgrade.io.files import BOM
from relgrade.io.sniff import field_separator, read_head

KERNELS_MODULE = "relgrade.io._trec_scan"

#: Bytes of run files one process must read before it uses the compiled scan. 0: the C
#: module costs nothing worth counting to load, and the scan costs no more than the reader
#: on a run of 2,000 lines and less from there on (0.78 of the reader's CPU on one run of
#: 40 MB; benchmarks/README.md, "The TREC scan in C"). (It was 256 MiB while the scan was
#: numba code, whose load cost 0.5 CPU-s a process.) Set it higher to make callers read
#: with the reader.
SCAN_MIN_BYTES = 0


def worth_scanning(paths) -> bool:
    """Whether reading ``paths`` should go through the compiled scan.

    Parameters
    ----------
    paths : iterable of str or os.PathLike
        The run files one process is about to read.

    Returns
    -------
    bool
        True when the C module is loaded already, or the files (those that exist) hold at
        least :data:`SCAN_MIN_BYTES` bytes together.
    """
    if KERNELS_MODULE in sys.modules:
        return True
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_size
        except OSError:
            continue  # the reader names a missing file
    return total >= SCAN_MIN_BYTES


@dataclass(frozen=True, eq=False)
class ScannedRun:
    """One TREC run file's columns and codes, as :func:`scan_trec_run` makes them.

    Arrays of shape (n_rows,), in file order.
    """

    query_offsets: np.ndarray  # int64 (n_rows + 1,): Arrow string offsets into query_bytes
    query_bytes: np.ndarray    # uint8: the query ids' bytes, one after the other
    chunk_offsets: np.ndarray  # int64 (n_rows + 1,)
    chunk_bytes: np.ndarray    # uint8
    rank: np.ndarray           # int64
    score: np.ndarray          # float64, finite
    chunk_hash: np.ndarray     # uint64: ranking._text_hash of each chunk id
    heads: np.ndarray          # int64 (n_blocks,): first row of each block of equal query ids
    repeated_hash: bool        # some block holds one chunk hash twice

    @property
    def n_rows(self) -> int:
        return len(self.rank)


def _kernels():
    """The compiled scan, :mod:`relgrade.io._trec_scan`; None when the package was installed
    without it (no C compiler at install time). The reader gives the same table either way."""
    try:
        from relgrade.io import _trec_scan as k
    except ImportError:
        return None
    return k


#: Bytes read from a run file at a time: the file is never held whole, only its columns.
BLOCK_BYTES = 1 << 22


class _Columns:
    """The scan's output arrays, sized for a file of ``size`` bytes (a line takes at least
    12: six one-byte fields, five separators, a line end), and what is written so far."""

    def __init__(self, size: int, compiled):
        rows = size // 12 + 2
        self.k = compiled
        self.qoff = np.empty(rows + 1, dtype=np.int64)
        self.coff = np.empty(rows + 1, dtype=np.int64)
        self.soff = np.empty(rows + 1, dtype=np.int64)
        self.qoff[0] = self.coff[0] = self.soff[0] = 0
        self.rank = np.empty(rows, dtype=np.int64)
        self.score = np.empty(rows, dtype=np.float64)
        self.slow = np.empty(rows, dtype=np.int64)
        self.heads = np.empty(rows, dtype=np.int64)
        # at most the file's size each; pages never written are never touched
        self.qbytes = np.empty(size, dtype=np.uint8)
        self.cbytes = np.empty(size, dtype=np.uint8)
        self.sbytes = np.empty(size, dtype=np.uint8)
        self.counts = np.zeros(6, dtype=np.int64)

    def feed(self, data: np.ndarray, start: int, delim: bytes) -> bool:
        """Scan the whole lines of ``data[start:]``; False: the file is not the scan's, or
        it outgrew the arrays (it grew while read: the C scan answers FULL and writes
        nothing past them)."""
        status, _ = self.k.scan(data, start, delim[0], self.qoff, self.qbytes, self.coff,
                                self.cbytes, self.rank, self.score, self.slow, self.soff,
                                self.sbytes, self.heads, self.counts)
        return status == self.k.OK

    def finish(self, *, repeated: bool = True) -> ScannedRun | None:
        """The scanned run; None when it has no row or a score is not finite. Without
        ``repeated``, its ``repeated_hash`` is left False (the caller finds it)."""
        k = self.k
        n, nq, nc, n_heads, n_slow, ns = (int(x) for x in self.counts)
        if n == 0:
            return None
        if n_slow:
            # rare scores outside Clinger's fast path: Python's float(), correctly rounded
            text = self.sbytes[:ns].tobytes()
            offs = self.soff[:n_slow + 1].tolist()
            values = [float(text[offs[i]:offs[i + 1]]) for i in range(n_slow)]
            if not all(map(math.isfinite, values)):
                return None  # inf: the reader names the line
            self.score[self.slow[:n_slow]] = values
        chash = np.empty(n, dtype=np.uint64)
        k.hash_ids(self.cbytes, self.coff[:n + 1], chash)
        heads = self.heads[:n_heads].copy()
        return ScannedRun(query_offsets=self.qoff[:n + 1], query_bytes=self.qbytes[:nq],
                          chunk_offsets=self.coff[:n + 1], chunk_bytes=self.cbytes[:nc],
                          rank=self.rank[:n], score=self.score[:n], chunk_hash=chash,
                          heads=heads,
                          repeated_hash=repeated and bool(k.repeated_in_blocks(chash, heads,
                                                                               n)))


def _columns(size: int, compiled) -> _Columns | None:
    """The output arrays for ``size`` bytes, or None when the system refuses them (their
    bound is generous: a line of 12 bytes; the reader then reads the file as before)."""
    try:
        return _Columns(size, compiled)
    except MemoryError:
        return None


def scan_bytes(data: np.ndarray, delim: bytes, *, compiled=None) -> ScannedRun | None:
    """Scan a TREC run held in memory.

    Parameters
    ----------
    data : ndarray of uint8, shape (n_bytes,)
        The file's bytes (a byte-order mark included).
    delim : bytes
        ``b" "`` or ``b"\\t"``: the separator :func:`relgrade.io.sniff.field_separator` tells.
    compiled : module, optional
        The kernels (default: imported on first use).

    Returns
    -------
    ScannedRun or None
        None when a line is outside what the scan accepts (see the module's notes), the
        file holds no line, or the C module is not built.

    Examples
    --------
    >>> line = np.frombuffer(b"q1 Q0 d7 3 2.5e-1 bm25\\n", dtype=np.uint8)
    >>> s = scan_bytes(line, b" ")
    >>> s.n_rows, s.rank.tolist(), s.score.tolist(), s.chunk_bytes.tobytes()
    (1, [3], [0.25], b'd7')
    >>> scan_bytes(np.frombuffer(b"q1 Q0 d7 3 inf bm25\\n", dtype=np.uint8), b" ") is None
    True
    """
    k = compiled or _kernels()
    if k is None or len(data) == 0:
        return None
    start = len(BOM) if data[:len(BOM)].tobytes() == BOM else 0
    out = _columns(len(data), k)
    if out is None:
        return None
    return out.finish() if out.feed(data, start, delim) else None


def scan_trec_run(path) -> ScannedRun | None:
    """Scan a TREC run file in one compiled pass (see the module's notes).

    Parameters
    ----------
    path : str or os.PathLike
        The run file.

    Returns
    -------
    ScannedRun or None
        None: the file is left to :func:`relgrade.io.trec.read_trec_run` (a layout or line
        the scan does not accept, an empty file, no C module).

    Raises
    ------
    InputError
        The file is missing or is a folder (:func:`relgrade.io.sniff.read_head`).
    """
    path = Path(path)
    separator = field_separator(read_head(path))
    if separator is None:
        return None
    k = _kernels()
    if k is None:
        return None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return None
        out = _columns(size, k)
        if out is None:
            return None
        # room for a byte-order mark in the first read, whatever the block
        buf = np.empty(max(min(size, BLOCK_BYTES), len(BOM)) + 1, dtype=np.uint8)
        carry, start = 0, None
        while True:
            got = f.readinto(memoryview(buf)[carry:])
            end = carry + got
            if start is None:
                start = len(BOM) if buf[:min(end, len(BOM))].tobytes() == BOM else 0
            if got and end == len(buf):
                # a full block: scan its whole lines, keep the rest for the next block
                last = int(k.last_line_end(buf, end))
                if last < start:  # a line longer than the block
                    buf = np.concatenate([buf, np.empty(len(buf), dtype=np.uint8)])
                    carry = end
                    continue
                if not out.feed(buf[:last + 1], start, separator[0]):
                    return None
                carry = end - last - 1
                buf[:carry] = buf[last + 1:end].copy()
                start = 0
                continue
            # the file's end: the rest, whose last line may lack its LF
            if end > start and not out.feed(buf[:end], start, separator[0]):
                return None
            return out.finish()


def scan_trec_blocks(path, *, block_bytes: int | None = None) -> Iterator[ScannedRun | None]:
    """Scan a TREC run file a block of whole queries at a time (see the module's notes).

    The file is read ``block_bytes`` of whole lines at a time; each block's rows are
    yielded once the next block shows where their last query ends, so a query's rows
    (adjacent in the file) are never split between two yields. Memory is bounded by a
    block (and the longest query), not by the file.

    Parameters
    ----------
    path : str or os.PathLike
        The run file.
    block_bytes : int, optional
        Bytes read at a time (default :data:`BLOCK_BYTES`; a line longer than that is read
        whole).

    Yields
    ------
    ScannedRun or None
        The rows of one or more whole blocks of adjacent equal query ids, in file order;
        ``heads`` and ``repeated_hash`` are those of these rows alone (a query whose rows
        are split over the file shows up in two yields). None, and nothing after it, when
        the rest of the file is not the scan's (as :func:`scan_trec_run` answers None:
        the caller reads the file with the reader).

    Raises
    ------
    InputError
        The file is missing or is a folder (:func:`relgrade.io.sniff.read_head`).
    """
    path = Path(path)
    block_bytes = block_bytes or BLOCK_BYTES
    separator = field_separator(read_head(path))
    k = _kernels()
    if separator is None or k is None:
        yield None
        return
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield None
            return
        buf = np.empty(max(min(size, block_bytes), len(BOM)) + 1, dtype=np.uint8)
        carry, start = 0, None
        while True:
            got = f.readinto(memoryview(buf)[carry:])
            end = carry + got
            if start is None:
                start = len(BOM) if buf[:min(end, len(BOM))].tobytes() == BOM else 0
            whole = got and end == len(buf)
            last = int(k.last_line_end(buf, end)) if whole else end - 1
            if whole and last < start:  # a line longer than the block
                buf = np.concatenate([buf, np.empty(len(buf), dtype=np.uint8)])
                carry = end
                continue
            if last + 1 <= start:  # the file's end, nothing left
                return
            out = _columns(last + 1 - start, k)
            if out is None or not out.feed(buf[:last + 1], start, separator[0]):
                yield None
                return
            piece = out.finish(repeated=False)
            if piece is None:
                yield None
                return
            if not whole:  # the file's end: every row
                yield _with_repeats(piece, k)
                return
            # the last query may go on in the next block: its lines are read again there
            cut = int(piece.heads[-1])
            if cut == 0:  # one query fills the block: a larger block
                buf = np.concatenate([buf, np.empty(len(buf), dtype=np.uint8)])
                carry = end
                continue
            again = _line_start(buf, start, last, piece.n_rows - cut)
            yield _with_repeats(_rows(piece, 0, cut), k)
            del piece, out
            carry = end - again
            buf[:carry] = buf[again:end].copy()
            start = 0


def _line_start(buf: np.ndarray, start: int, last: int, lines: int) -> int:
    """Where the last ``lines`` lines of ``buf[start:last + 1]`` begin: after the line end
    before them (``buf[last]`` ends the last line; one line per scanned row, so fewer
    lines than the scan's rows are never asked for)."""
    window = 1 << 14
    while True:
        lo = max(start, last + 1 - window)
        tail = buf[lo:last + 1].tobytes()
        pos = len(tail)
        for _ in range(lines + 1):
            pos = tail.rfind(b"\n", 0, pos)
            if pos < 0:
                break
        if pos >= 0:
            return lo + pos + 1
        if lo == start:
            return start  # every line of the block
        window *= 4


def _rows(run: ScannedRun, a: int, b: int) -> ScannedRun:
    """Rows ``a`` to ``b - 1`` of a scanned run (``a`` a head, or 0); views of its arrays
    where they can be."""
    qo, co = run.query_offsets, run.chunk_offsets
    heads = run.heads[(run.heads >= a) & (run.heads < b)] - a
    return ScannedRun(query_offsets=qo[a:b + 1] - qo[a],
                      query_bytes=run.query_bytes[qo[a]:qo[b]],
                      chunk_offsets=co[a:b + 1] - co[a],
                      chunk_bytes=run.chunk_bytes[co[a]:co[b]],
                      rank=run.rank[a:b], score=run.score[a:b],
                      chunk_hash=run.chunk_hash[a:b], heads=heads, repeated_hash=False)


def _with_repeats(run: ScannedRun, k) -> ScannedRun:
    """``run`` with its ``repeated_hash`` found (some block of it holds a hash twice)."""
    return replace(run, repeated_hash=bool(k.repeated_in_blocks(
        run.chunk_hash, np.asarray(run.heads, dtype=np.int64), run.n_rows)))


#: The longest ids a :class:`KnownIds` table holds in its slots (two 8-byte words hold 15
#: bytes and the length); a longer one makes the table hold references to the ids' bytes.
SHORT_ID_BYTES = 15


class KnownIds:
    """Known ids (a query set, a corpus's chunk ids) in a compiled hash table, for an exact
    check of every id a scanned run names.

    Built once from the ids' Arrow buffers (no Python object per id): each id is keyed by
    the 64-bit hash the scan gives each chunk id (``ScannedRun.chunk_hash``), and a probe
    that finds its hash compares the bytes themselves, so a hash collision never passes an
    unknown id. When every id is at most :data:`SHORT_ID_BYTES` bytes (a corpus's chunk
    ids, usually), the table holds the ids' bytes themselves in place of their hash and
    a reference, so a probe compares them in the slot it reads, without a second cache
    miss into the ids' bytes. Use :meth:`build`, which answers None where the table cannot
    be made.

    Attributes
    ----------
    n_ids : int
        How many ids the table holds (repeats kept; nulls dropped).
    """

    def __init__(self, data: np.ndarray, table: np.ndarray, n_ids: int, compiled, *,
                 short: bool = False):
        self._data, self._table, self.n_ids, self._k = data, table, n_ids, compiled
        self._short = short

    @classmethod
    def build(cls, ids) -> KnownIds | None:
        """The table of ``ids``.

        Parameters
        ----------
        ids : pyarrow.Array or pyarrow.ChunkedArray of string or large_string, shape (n,)
            The known ids (as :func:`relgrade.io.files.read_column` reads them). Nulls
            are dropped: they name no id.

        Returns
        -------
        KnownIds or None
            None without the C module, for ids of another type, or an id of 2^24 bytes
            or more (the caller then checks the ids as before).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        k = _kernels()
        if k is None or not isinstance(ids, (pa.Array, pa.ChunkedArray)) or not (
                pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
            return None
        if ids.null_count:
            ids = pc.drop_null(ids)
        arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
        arr = arr.cast(pa.large_string())
        n = len(arr)
        data, offsets = _string_buffers(arr)
        slots = 1 << max(1, (2 * n - 1).bit_length())  # at most half full
        table = np.empty(2 * slots, dtype=np.uint64)
        # ids held in the slots when every one is short enough, else references to them
        # (the first long id stops the short fill; no array of lengths is made: a
        # temporary the size of the corpus, freed, would move glibc's mmap threshold and
        # leave the run's blocks in a heap that keeps about 100 MiB more)
        short = bool(k.id_table(data, offsets, table, True))
        if not short and not k.id_table(data, offsets, table):
            return None
        return cls(data, table, n, k, short=short)

    def unknown_at(self, data: np.ndarray, offsets: np.ndarray, *,
                   hashes: np.ndarray | None = None, rows: np.ndarray | None = None) -> int:
        """The first of some strings that is not a known id.

        Parameters
        ----------
        data : ndarray of uint8
            The strings' bytes.
        offsets : ndarray of int64, shape (n + 1,)
            String ``r`` is ``data[offsets[r]:offsets[r + 1]]`` (Arrow's string layout).
        hashes : ndarray of uint64, optional
            Each checked string's hash (``ScannedRun.chunk_hash``), one per checked string;
            computed when None.
        rows : ndarray of int64, optional
            Check only these strings (``ScannedRun.heads``: one row per block of a query);
            None: every one.

        Returns
        -------
        int
            The position (in ``rows``, or the row) of the first string not known; -1 when
            every one is.

        Raises
        ------
        ValueError
            Offsets outside ``data``, ``rows`` outside the strings, or ``hashes`` of
            another length.
        """
        return int(self._k.unknown_at(self._table, self._data, data, offsets, hashes, rows,
                                      self._short))


def _string_buffers(arr) -> tuple[np.ndarray, np.ndarray]:
    """A large_string Arrow array's bytes (uint8) and its ``len + 1`` offsets (int64, into
    those bytes; a slice's offsets as they stand), without a copy."""
    n = len(arr)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[arr.offset:arr.offset + n + 1] \
        if buffers[1] is not None else np.zeros(n + 1, dtype=np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None \
        else np.zeros(0, dtype=np.uint8)
    return data, offsets


def scanned_ids_known(scanned: ScannedRun, *, queries: KnownIds | None = None,
                      chunks: KnownIds | None = None) -> bool:
    """Whether every row of a scanned run names a known query and a known chunk.

    Parameters
    ----------
    scanned : ScannedRun
    queries, chunks : KnownIds, optional
        The query set's and the corpus's ids; a check is skipped when None.

    Returns
    -------
    bool
        True when every chunk id (every row's, by its hash and then its bytes) is in
        ``chunks`` and every query id is in ``queries`` (the first row of each block of
        equal query ids stands for the block's rows). Exact: ids compare byte for byte.
    """
    if chunks is not None and chunks.unknown_at(
            scanned.chunk_bytes, scanned.chunk_offsets, hashes=scanned.chunk_hash) >= 0:
        return False
    if queries is not None and queries.unknown_at(
            scanned.query_bytes, scanned.query_offsets,
            rows=np.asarray(scanned.heads, dtype=np.int64)) >= 0:
        return False
    return True


def coded_run(scanned: ScannedRun):
    """The run table and its :class:`relgrade.ranking.RunCodes`, from a scan.

    Parameters
    ----------
    scanned : ScannedRun

    Returns
    -------
    (pandas.DataFrame, RunCodes)
        The table :func:`relgrade.io.trec.read_trec_run` returns for the same file
        (``query_id``, ``chunk_id`` str, ``rank`` int64, ``score`` float64, file order), and
        the codes :func:`relgrade.ranking.run_codes` makes of it; ``RunCodes.distinct`` is
        True when every query id's rows are adjacent and none of them holds one chunk
        hash twice, which proves that no chunk is listed twice for one query.
    """
    from relgrade.io.runcolumns import scanned_table

    table, codes = scanned_table(scanned)  # the Arrow table relgrade evaluate scores
    return table.to_pandas(split_blocks=True, self_destruct=True), codes


def read_run_coded(path, *, scan: bool = True) -> tuple:
    """Read a run and code its ids once: :func:`relgrade.io.runs.read_run` and
    :func:`relgrade.ranking.run_codes`, with one compiled pass over a TREC file's bytes
    where it can.

    Parameters
    ----------
    path : str or os.PathLike
        A run file, as for :func:`relgrade.io.runs.read_run`.
    scan : bool, default True
        Try :func:`scan_trec_run` first on a TREC file (any extension
        but ``.jsonl``, ``.ndjson``, ``.parquet``). Its result is the same, at a lower cost
        (see :func:`worth_scanning`); False reads with the reader.

    Returns
    -------
    (pandas.DataFrame, RunCodes or None)
        The table ``read_run`` returns, and :func:`relgrade.ranking.run_codes` of it;
        None for a file with an ``arm`` column (several arms' rows are not coded as one).
        Codes from the scan may carry ``distinct=True``: the scan proved that no chunk is
        listed twice for one query.

    Raises
    ------
    InputError
        As ``read_run`` (a file the scan does not accept is read by it, with its
        messages), and as :func:`relgrade.ranking.run_codes`.
    """
    from relgrade.io.runs import read_run
    from relgrade.ranking import run_codes
    from relgrade.schema import RUN

    path = Path(path)
    if scan and path.suffix.lower() not in (".jsonl", ".ndjson", ".parquet"):
        scanned = scan_trec_run(path)
        if scanned is not None:
            return coded_run(scanned)
    run = read_run(path)
    codes = run_codes(run, path=path) if set(run.columns) == set(RUN) else None
    return run, codes
