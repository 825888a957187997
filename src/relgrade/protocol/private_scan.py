"""The private-text scan of the publish bundle, fed one file, or one chunk of a file, at a time.

The rules are those of :func:`relgrade.protocol.publish.scan_private` (what counts as a leak
of a query, intent, chunk text or reason); this module applies them without holding the
bundle: a line file (the key's qrels) is fed in chunks of any size, its lines scanned as they
arrive and its run of lines (the text a private text split across a line break is found in)
scanned in windows that overlap by enough characters that nothing is missed at a chunk
boundary:

- a long private text (at least :data:`~relgrade.protocol.publish.MIN_SHARED` characters) is
  found through its aligned blocks, each hit extended in both directions; a window's block
  positions are scanned only once they have ``M`` characters of context on both sides, ``M``
  being the longest long private text, so an extension is never cut short by a window's edge;
- a short text of several words is looked for in every window; consecutive windows share at
  least ``2·M`` characters (``M`` at least ``MIN_SHARED``) and a window starts just after a
  space, so every occurrence of a phrase (shorter than ``MIN_SHARED``) lies whole inside one
  window with its word boundaries intact;
- single words and tiny texts are matched per line, which never crosses a chunk.

Memory is that of the private-text index (:class:`PrivateIndex`: each distinct private text
once, whoever it belongs to, the long ones as Arrow and numpy columns) plus one window of at most about ``max(chunk, 4·M)`` characters,
whatever the size of the file fed.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.protocol import publish as rules

#: A window of a streamed run is scanned once it holds this many characters.
WINDOW_CHARS = 1 << 20

_LETTERISH = re.compile(r"[^\W\d_]")  # every alphabetic character (and a few more)


class PrivateIndex:
    """Every distinct private text, normalised and sorted by how it is matched.

    The index holds each distinct normalised text once, never who it belongs to: a reason
    given for a million pairs is one entry. Whose a found text is (kind, id and the text as
    written) is looked up by a second pass over the private texts, made only when something
    was found (:meth:`BundleScan.leaks`).

    The long texts are held as one Arrow string column and their blocks as two numpy arrays
    (a 64-bit hash and a packed place per block), not as Python objects: about 16 bytes a
    block and the text's own bytes, where a dict of block strings took about ten times that
    (655 MiB for the million chunk texts of a 100,000-query experiment).

    Parameters
    ----------
    private_texts : mapping, or callable returning a mapping, of str to iterable of (str, str)
        kind → ``(id, text)`` pairs (``query``, ``intent``, ``chunk``, ``reason``), as for
        :func:`relgrade.protocol.publish.scan_private`. A callable is called once per pass
        and must give the same pairs in the same order each time (e.g. tables read in
        batches); a mapping is held in memory. A text that is not a ``str`` or holds no
        letter is not indexed.

    Attributes
    ----------
    tiny, single, phrases : set of str
        Texts shorter than ``MIN_SHORT``; single words; several words shorter than
        ``MIN_SHARED``.
    texts : pyarrow.LargeStringArray
        The long texts (at least ``MIN_SHARED`` characters), each once, in the order first
        given; a text's number is its place here.
    block_hash : numpy.ndarray of uint64, shape (blocks,)
        :func:`block_hashes` of each aligned ``MIN_SHARED // 2``-character block of a long
        text, sorted.
    block_at : numpy.ndarray of int64, shape (blocks,)
        Where each of those blocks is, as ``number << 32 | offset`` (offset in characters).
    longest : int
        Characters of the longest long text (0 when there is none).
    """

    #: Long texts gathered into one Arrow chunk at a time while the index is built.
    BATCH = 1 << 16
    #: Long texts whose blocks are hashed at a time (bounds the code-point arrays).
    BLOCK_BATCH = 1 << 13

    def __init__(self, private_texts):
        if callable(private_texts):
            self._source = private_texts
        else:
            held = {kind: list(items) for kind, items in private_texts.items()}
            self._source = lambda: held
        self.tiny: set[str] = set()
        self.single: set[str] = set()
        self.phrases: set[str] = set()
        chunks, batch, hashes = [], [], []
        for _, _, _, text in self.entries():
            if len(text) < rules.MIN_SHORT:
                self.tiny.add(text)
            elif len(text) >= rules.MIN_SHARED:
                batch.append(text)
                hashes.append(hash(text))
                if len(batch) >= self.BATCH:
                    chunks.append(pa.array(batch, pa.large_string()))
                    batch = []
            elif " " not in text:
                self.single.add(text)
            else:
                self.phrases.add(text)
        if batch:
            chunks.append(pa.array(batch, pa.large_string()))
        del batch
        gathered = pa.chunked_array(chunks, pa.large_string())
        del chunks
        keep = _first_of_each(gathered, np.array(hashes, dtype=np.int64))
        del hashes
        self.texts = (gathered.take(pa.array(keep)).combine_chunks() if len(keep)
                      else pa.array([], pa.large_string()))
        del gathered
        lengths = pc.utf8_length(self.texts).to_numpy(zero_copy_only=False).astype(np.int64)
        self.longest = int(lengths.max()) if lengths.size else 0
        block = rules._BLOCK
        count = np.maximum((lengths - block) // block + 1, 0)
        ends = np.cumsum(count)
        h = np.empty(int(ends[-1]) if ends.size else 0, np.uint64)
        at = np.empty(h.size, np.int64)
        for first in range(0, len(self.texts), self.BLOCK_BATCH):
            part = self.texts.slice(first, self.BLOCK_BATCH).to_pylist()
            lo = int(ends[first - 1]) if first else 0
            hi = int(ends[first + len(part) - 1])
            h[lo:hi], at[lo:hi] = _aligned_blocks(part, first)
        order = np.argsort(h, kind="stable")
        self.block_hash, self.block_at = h[order], at[order]
        del h, at, order
        self._number: dict[str, int] | None = None

    def text(self, number: int) -> str:
        """The long text numbered ``number``."""
        return self.texts[number].as_py()

    def number(self, text: str) -> int | None:
        """The number of the long text ``text``, or None. Builds a text → number table on
        first use (only the leak report needs it)."""
        if self._number is None:
            self._number = {t: i for i, t in enumerate(self.texts.to_pylist())}
        return self._number.get(text)

    def candidates(self, hashes):
        """For each block hash in ``hashes`` (uint64 array), the slice of :attr:`block_at`
        holding the blocks of that hash: ``(lo, hi)`` int arrays, ``lo == hi`` where none."""
        lo = np.searchsorted(self.block_hash, hashes, side="left")
        hi = np.searchsorted(self.block_hash, hashes, side="right")
        return lo, hi

    def entries(self):
        """Yield ``(kind, id, raw, text)`` for every private text that is indexed, in the
        order given: the original and its normalised form (one pass over the source)."""
        for kind, items in self._source().items():
            for ident, raw in items:
                if not isinstance(raw, str):
                    continue
                text = rules.normalise(raw)
                if any(ch.isalpha() for ch in text):
                    yield kind, str(ident), raw, text


#: The multiplier of the blocks' polynomial hash (FNV-1's 64-bit prime). Equal blocks hash
#: equal; a hash match is always confirmed by comparing the characters.
_PRIME = 0x100000001B3


def block_hashes(codes, width: int):
    """The polynomial hash of every ``width``-character run of a text, one per start.

    Parameters
    ----------
    codes : numpy.ndarray of uint64, shape (n,)
        The text's code points.
    width : int
        Characters per run.

    Returns
    -------
    numpy.ndarray of uint64, shape (max(n - width + 1, 0),)
        ``sum(codes[i + j] * P**(width - 1 - j))`` modulo 2**64 for each start ``i``
        (``P`` = :data:`_PRIME`; Karp & Rabin 1987, without the rolling update: ``width``
        vector passes over the text).
    """
    m = codes.size - width + 1
    if m <= 0:
        return np.zeros(0, np.uint64)
    h = np.zeros(m, np.uint64)
    prime = np.uint64(_PRIME)
    for j in range(width):
        h *= prime
        h += codes[j:j + m]
    return h


def _codes(text: str):
    """The code points of ``text`` as uint64 (UTF-32 holds one code unit per code point)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)


def _first_of_each(texts, hashes):
    """Positions of the first occurrence of each distinct text, in order.

    ``hashes`` (int64, one per text) groups the candidates; texts of one hash are compared
    character by character, so two different texts that share a hash are both kept.
    """
    order = np.argsort(hashes, kind="stable")  # equal hashes keep their order of appearance
    ordered = hashes[order]
    new_group = np.ones(order.size, bool)
    new_group[1:] = ordered[1:] != ordered[:-1]
    keep = order[new_group]
    shared = np.flatnonzero(~new_group)  # later members of a group of equal hashes
    if shared.size:
        starts = np.flatnonzero(new_group)
        group_of = np.searchsorted(starts, shared, side="right") - 1
        members, firsts = order[shared], order[starts[group_of]]
        same = pc.equal(texts.take(pa.array(members)), texts.take(pa.array(firsts)))
        differ = np.flatnonzero(~same.to_numpy(zero_copy_only=False))
        extra: list[int] = []
        kept: dict[int, list[str]] = {}
        for k in differ.tolist():  # hash collisions: rare, compared one by one
            g, at = int(group_of[k]), int(members[k])
            seen = kept.setdefault(g, [texts[int(firsts[k])].as_py()])
            text = texts[at].as_py()
            if text not in seen:
                seen.append(text)
                extra.append(at)
        keep = np.concatenate([keep, np.array(extra, dtype=keep.dtype)])
    return np.sort(keep)


def _aligned_blocks(texts: list[str], first: int):
    """Hash and place of every aligned block of ``texts`` (numbered from ``first``)."""
    block = rules._BLOCK
    lengths = np.fromiter((len(t) for t in texts), np.int64, len(texts))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(texts) else lengths
    codes = _codes("".join(texts))
    count = np.maximum((lengths - block) // block + 1, 0)
    owner = np.repeat(np.arange(len(texts)), count)
    within = (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)) * block
    pos = starts[owner] + within
    h = np.zeros(pos.size, np.uint64)
    prime = np.uint64(_PRIME)
    for j in range(block):
        h *= prime
        h += codes[pos + j]
    at = ((owner + first).astype(np.int64) << 32) | within.astype(np.int64)
    return h, at


class BundleScan:
    """The leaks of a bundle fed to it file by file (:meth:`add_file`) or chunk by chunk
    (:meth:`lines`).

    Parameters
    ----------
    index : PrivateIndex
        The private texts.
    allowed : iterable of str
        Public strings (query ids, chunk ids, arm names): a JSON string or a whitespace field
        equal to one of them is not searched.

    Notes
    -----
    Which file a leak is reported in, and which of several texts of one id is shown, follow
    the whole-bundle scan: the files in name order, the first place in a file, a short text
    before a long one. Feed each file once.
    """

    def __init__(self, index: PrivateIndex, allowed: Iterable[str] = ()):
        self.index = index
        self.allowed = {str(a) for a in allowed}
        self._short: dict[str, str] = {}  # short text -> first file (by name) it is in
        self._long: dict[int, tuple] = {}  # long text number -> (file, offset, s, left, right)

    # --- feeding ----------------------------------------------------------------------

    def add_file(self, name: str, data: bytes) -> None:
        """Scan one whole bundle file (a JSON file, the README, or any small file).

        Parameters
        ----------
        name : str
            The file's name in the bundle (``README.txt`` is relgrade's own wording: only
            long texts are searched there).
        data : bytes
            Its content, UTF-8 (undecodable bytes are replaced, as the whole-bundle scan does).
        """
        for text, mode in rules._segments(name, bytes(data), self.allowed):
            if not text:
                continue
            if mode in ("json", "key", "line"):
                self._point(name, text, mode)
            else:
                self._window(name, text, base=0, lo=0, hi=len(text), phrases=mode == "run")

    def lines(self, name: str) -> "LineStream":
        """A scan of the text file ``name`` fed in chunks of bytes (:class:`LineStream`).

        The file must not be JSON (a JSON document is scanned by :meth:`add_file`): each line
        is scanned as the whole-bundle scan scans a text file's lines.
        """
        return LineStream(self, name)

    # --- matching ---------------------------------------------------------------------

    def _hit_short(self, name: str, text: str) -> None:
        seen = self._short.get(text)
        if seen is None or name < seen:
            self._short[text] = name

    def _point(self, name: str, text: str, mode: str) -> None:
        """A JSON string (``json``), object key (``key``) or a text line's fields (``line``)."""
        idx = self.index
        for w in (text.split(" ") if mode == "line" else (text,)):
            if (mode != "key" and w in idx.tiny) or w in idx.single:
                self._hit_short(name, w)

    def _window(self, name: str, hay: str, *, base: int, lo: int, hi: int,
                phrases: bool) -> None:
        """Scan ``hay`` (a window of a file's run starting at offset ``base`` of the run):
        block hits at window positions ``lo <= i < hi``, and every phrase when ``phrases``."""
        idx = self.index
        if phrases and idx.phrases and _LETTERISH.search(hay):
            found = rules._Phrases(hay)
            for text in idx.phrases:
                if found.first(text) is not None:
                    self._hit_short(name, text)
        block, n = rules._BLOCK, len(hay)
        stop = min(hi, n - block + 1)
        if not idx.block_hash.size or lo >= stop:
            return
        lo = max(lo, 0)
        hashes = block_hashes(_codes(hay[lo:stop + block - 1]), block)
        first, last = idx.candidates(hashes)
        for k in (last > first).nonzero()[0].tolist():
            i = lo + k
            for packed in idx.block_at[first[k]:last[k]].tolist():
                no, s = packed >> 32, packed & 0xFFFFFFFF
                seen = self._long.get(no)
                if seen is not None and seen[:2] <= (name, base + i):
                    continue
                text = idx.text(no)
                if hay[i:i + block] != text[s:s + block]:  # a hash collision
                    continue
                left = 0
                while (i - left - 1 >= 0 and s - left - 1 >= 0
                       and hay[i - left - 1] == text[s - left - 1]):
                    left += 1
                right = block
                while i + right < n and s + right < len(text) and hay[i + right] == text[s + right]:
                    right += 1
                shared = text[s - left:s + right]
                if (len(shared) >= rules.MIN_SHARED
                        and sum(ch.isalnum() for ch in shared) >= rules.MIN_ALNUM):
                    self._long[no] = (name, base + i, s, left, right)

    # --- the result -------------------------------------------------------------------

    def leaks(self) -> list[rules.Leak]:
        """Every private text found so far, sorted by kind and id.

        When anything was found, the private texts are read once more to name whose they
        are (:meth:`PrivateIndex.entries`).

        Returns
        -------
        list of Leak
            One per (kind, id): the first of its texts (in the order given) found as a short
            text, else the first place (file name order, then offset) a long one was found.
        """
        if not self._short and not self._long:
            return []
        short: dict[tuple[str, str], rules.Leak] = {}
        long: dict[tuple[str, str], tuple[tuple, rules.Leak]] = {}
        index = self.index
        for order, (kind, ident, raw, text) in enumerate(self.index.entries()):
            key = (kind, ident)
            if len(text) < rules.MIN_SHARED:
                if text in self._short and key not in short:
                    short[key] = rules.Leak(kind, ident, self._short[text], " ".join(raw.split()))
                continue
            hit = self._long.get(index.number(text))
            if hit is None:
                continue
            name, pos, s, left, right = hit
            seen = long.get(key)
            if seen is not None and seen[0] <= (name, pos, order):
                continue
            plain = " ".join(raw.split())
            shown = (plain if len(plain) == len(text) else text)[s - left:s + right]
            long[key] = ((name, pos, order), rules.Leak(kind, ident, name,
                                                        rules._cut(shown.strip())))
        out = dict(short)
        for key, (_, leak) in long.items():
            out.setdefault(key, leak)
        return sorted(out.values(), key=lambda leak: (leak.kind, leak.id))


class LineStream:
    """One text file of the bundle scanned as its bytes arrive (see :meth:`BundleScan.lines`).

    :meth:`feed` takes chunks of any size (a chunk may end inside a line or inside a UTF-8
    character); :meth:`close` scans what is left. The run of the file's lines is held as one
    window of about :data:`WINDOW_CHARS` characters (or ``4·M``, see the module's notes) and
    the overlap carried to the next.
    """

    def __init__(self, scan: BundleScan, name: str):
        self.scan, self.name = scan, name
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._pending = ""  # the start of a line whose end has not arrived
        self._parts: list[str] = []  # normalised lines not yet in a window
        self._size = 0
        self._carry = ""  # the end of the last window, scanned again at the next one's start
        self._base = 0  # run offset of _carry's first character
        self._done = 0  # block positions before this run offset are scanned
        self._margin = max(scan.index.longest, rules.MIN_SHARED)
        self._closed = False

    def feed(self, data: bytes) -> None:
        """Scan the complete lines in ``data`` (with the start of a line left from before)."""
        text = self._pending + self._decode(data)
        lines = text.splitlines(keepends=True)
        self._pending = ""
        if lines and lines[-1].splitlines()[0] == lines[-1]:  # no line end yet
            self._pending = lines.pop()
        for line in lines:
            self._line(line.splitlines()[0])
        if self._size >= max(WINDOW_CHARS, 4 * self._margin):
            self._flush(final=False)

    def close(self) -> None:
        """Scan the rest: the last line and the run's last window."""
        if self._closed:
            return
        self._closed = True
        for line in (self._pending + self._decode(b"", final=True)).splitlines():
            self._line(line)
        self._pending = ""
        self._flush(final=True)

    def _line(self, line: str) -> None:
        scan = self.scan
        if '"' in line:  # JSON strings inside a text line are searched unescaped as well
            for lit in rules._JSON_STRING.findall(line):
                try:
                    value = json.loads(lit)
                except ValueError:
                    continue
                if isinstance(value, str) and value not in scan.allowed:
                    text = rules.normalise(value)
                    if text:
                        scan._point(self.name, text, "json")
        text = rules.normalise(" ".join(f for f in line.split() if f not in scan.allowed))
        if text:
            scan._point(self.name, text, "line")
            self._parts.append(text)
            self._size += len(text) + 1

    def _flush(self, *, final: bool) -> None:
        if not self._parts and not final:
            return
        body = " ".join(self._parts)
        hay = self._carry + (" " if self._carry and body else "") + body
        self._parts, self._size = [], 0
        m = self._margin
        hi = len(hay) if final else len(hay) - m
        self.scan._window(self.name, hay, base=self._base, lo=self._done - self._base,
                          hi=hi, phrases=True)
        if final:
            self._carry = ""
            return
        self._done = self._base + max(hi, self._done - self._base)
        # the next window starts just after a space, at least 2·M characters before the end
        cut = hay.rfind(" ", 0, max(0, len(hay) - 2 * m)) + 1
        self._carry, self._base = hay[cut:], self._base + cut
