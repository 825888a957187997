"""The publish scan as it was before it streamed: the reference the streaming scan is tested
against (property tests over random bundles with planted leaks). Kept verbatim; not used by
relgrade itself.
"""
from __future__ import annotations

import bisect
import functools
import json
import re
import sys
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping

import pandas as pd

from relgrade.errors import ProtocolError
from relgrade.protocol.key import qrels_text

#: Record fields copied into the bundle.
PUBLIC_RECORD_KEYS = ("key_sha256", "pool_version", "rubric_version", "round", "frozen_at",
                      "dropped_queries", "post_hoc")

#: A long private text leaks when the bundle shares a run of this many characters with it.
MIN_SHARED = 40
#: ... and that run holds at least this many letters or digits (runs of spaces, dashes or
#: brackets say nothing private).
MIN_ALNUM = 12
#: Texts shorter than this (after normalising) are matched only as whole fields; texts with
#: no letter are not scanned.
MIN_SHORT = 4

#: Record and metrics fields that hold a version, hash, time or id, never text.
ID_FIELDS = ("key_sha256", "pool_version", "rubric_version", "frozen_at", "arm",
             "dropped_queries")
#: The longest value an id field may hold.
MAX_ID_CHARS = 64
_ID_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+/@=-]*")

_BLOCK = MIN_SHARED // 2
_SEP = "\x00"
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


@dataclass(frozen=True)
class Leak:
    """One private text found in the bundle.

    Attributes
    ----------
    kind : str
        ``query``, ``intent``, ``chunk`` or ``reason``.
    id : str
        Whose text it is (a query id, a chunk id, or ``grader query_id chunk_id``).
    file : str
        The bundle file it was found in.
    text : str
        The shared text, cut to 60 characters.
    """

    kind: str
    id: str
    file: str
    text: str

    def __str__(self) -> str:
        return f"{self.kind} {self.id} in {self.file}: {self.text!r}"


def normalise(text: str) -> str:
    r"""``text`` as the scan compares it: NFKC, case-folded, no format characters, one space.

    Examples
    --------
    >>> normalise("Ｗhere is\u200b the\nHTTP  Timeout")
    'where is the http timeout'
    >>> normalise("cafe\u0301") == normalise("CAFÉ")
    True
    """
    text = str(text)
    if text.isascii():  # NFKC leaves ASCII as it is, no ASCII character is Cf, casefold = lower
        return " ".join(text.lower().split())
    text = unicodedata.normalize("NFKC", text)
    text = text.translate(_format_chars())
    text = unicodedata.normalize("NFKC", text.casefold())
    return " ".join(text.split())


@functools.cache
def _format_chars() -> dict[int, None]:
    """Every code point of Unicode category ``Cf`` (format characters), mapped to None for
    :meth:`str.translate`: the same test as ``unicodedata.category(ch) == "Cf"``."""
    return {c: None for c in range(sys.maxunicode + 1)
            if unicodedata.category(chr(c)) == "Cf"}


_norm = normalise


def _cut(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def bundle_files(key: pd.DataFrame, record: Mapping, metrics: Mapping[str, Mapping]) -> dict:
    """The public bundle's files.

    Parameters
    ----------
    key : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``grade``: the frozen key.
    record : mapping
        The key's record (params ``paths.record``).
    metrics : mapping of str to mapping
        arm → its metrics JSON (params ``paths.metrics``/ARM.json).

    Returns
    -------
    dict of str to bytes
        ``key.qrels`` (TREC qrels, canonical order), ``record.json`` (the fields of
        :data:`PUBLIC_RECORD_KEYS`), ``metrics.json`` (arm → metrics, arms sorted) and
        ``README.txt`` (what the bundle holds).

    Raises
    ------
    ProtocolError
        A metrics file was computed from another key than the record's (its ``key_sha256``
        differs), there are no metrics, or a field of :data:`ID_FIELDS` holds text (see
        :func:`check_id_fields`).
    """
    if not metrics:
        raise ProtocolError("nothing to publish: no arm has metrics yet; run the metrics "
                            "stage after the key is frozen")
    for arm, m in sorted(metrics.items()):
        if m.get("key_sha256") != record.get("key_sha256"):
            raise ProtocolError(f"metrics of arm {arm} were computed from key "
                                f"{m.get('key_sha256')}, not the frozen key "
                                f"{record.get('key_sha256')}; rerun the metrics stage")
    public = {k: record[k] for k in PUBLIC_RECORD_KEYS if k in record}
    check_id_fields(public, source="record")
    for arm in sorted(metrics):
        check_id_fields({"arm": arm}, source="metrics")  # the arm's name, a key of the bundle
        check_id_fields(metrics[arm], source=f"metrics of arm {arm}")

    def dumps(obj) -> bytes:
        return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    readme = (
        "relgrade public bundle\n\n"
        "key.qrels     the frozen key as TREC qrels: query_id 0 chunk_id grade\n"
        "record.json   the key's sha256, pool version, rubric version, round, freeze time,\n"
        "              dropped query ids and whether the numbers are post-hoc\n"
        "metrics.json  per-arm metrics computed from that key, keyed by arm\n\n"
        f"key sha256: {record.get('key_sha256')}\n"
        f"pool version: {record.get('pool_version')}\n"
        f"arms: {len(metrics)}; graded pairs: {len(key)}\n\n"
        "The key's hash is the sha256 of its canonical JSON Lines form (see relgrade's\n"
        "docs/formats.md). Query text, intents, chunk text and reasons are not included.\n"
    )
    if any("traffic_weighted" in m for m in metrics.values()):
        readme += ("\nEach arm's `traffic_weighted` block holds means weighted by the traffic each\n"
                   "query stands for (its weight in the query sample); every other mean is\n"
                   "unweighted.\n")
    return {
        "key.qrels": qrels_text(key).encode("utf-8"),
        "record.json": dumps(public),
        "metrics.json": dumps({arm: dict(metrics[arm]) for arm in sorted(metrics)}),
        "README.txt": readme.encode("utf-8"),
    }


def check_id_fields(doc: Mapping, *, source: str) -> None:
    """Refuse text in the fields of ``doc`` that hold versions, hashes, times or ids.

    A value of a field in :data:`ID_FIELDS` (each item, for a list) must be a string of at
    most :data:`MAX_ID_CHARS` characters of ASCII letters, digits and ``. _ : + / @ = -``,
    starting with a letter or digit: no spaces, no prose.

    Raises
    ------
    ProtocolError
        Naming ``source``, the field and the value found (cut to 60 characters).
    """
    for name in ID_FIELDS:
        if name not in doc:
            continue
        value = doc[name]
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            ok = (isinstance(v, str) and len(v) <= MAX_ID_CHARS
                  and _ID_VALUE.fullmatch(v) is not None)
            if not ok:
                shown = _cut(v if isinstance(v, str) else repr(v))
                raise ProtocolError(
                    f"{source}: field {name} must hold a version or id (at most "
                    f"{MAX_ID_CHARS} characters of letters, digits and . _ : + / @ = -, no "
                    f"spaces), not text (found {shown!r}). Nothing was published; set it to "
                    "an id (e.g. params grading.rubric_version: v2)")


#: Bundle files written from relgrade's own fixed wording: only long texts are searched there,
#: since a short query ("version", "chunk text") could match the template's own words.
PROSE_FILES = ("README.txt",)


def _segments(name: str, data: bytes, allowed: set[str]) -> list[tuple[str, str]]:
    """The searchable strings of one bundle file, without the public ids in ``allowed``.

    Returns normalised ``(text, mode)`` pairs: ``json`` for a JSON string value, ``key`` for a
    JSON object key, ``line`` for a line of a text file with its allowed fields removed,
    ``run`` for all of a file's strings or lines joined by spaces (found across line breaks),
    ``prose`` for the whole of a file in :data:`PROSE_FILES`.
    """
    text = data.decode("utf-8", errors="replace")
    if name in PROSE_FILES:
        return [(_norm(text), "prose")]
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    out: list[tuple[str, str]] = []

    def walk(obj, mode="json"):
        if isinstance(obj, str):
            if obj not in allowed:
                out.append((_norm(obj), mode))
        elif isinstance(obj, Mapping):
            for k, v in obj.items():
                walk(k, "key")
                walk(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)

    if isinstance(doc, (Mapping, list)):
        walk(doc)
        # the file's strings in order, as one run: a text split over two fields is found too
        out.append((" ".join(t for t, _ in out if t), "run"))
        return out
    lines = []
    for line in text.splitlines():
        # JSON strings inside a text line are searched unescaped as well
        for lit in _JSON_STRING.findall(line):
            try:
                walk(json.loads(lit))
            except ValueError:
                continue
        fields = " ".join(f for f in line.split() if f not in allowed)
        out.append((_norm(fields), "line"))
        lines.append(fields)
    # the lines as one run: a text split across a line break is found too
    out.append((_norm(" ".join(lines)), "run"))
    return out


def _word(ch: str) -> bool:
    """Whether ``ch`` is a word character as ``re``'s ``\\w`` reads a str."""
    return ch.isalnum() or ch == "_"


class _Phrases:
    """Where a phrase of several words first occurs in a text, between word boundaries.

    ``first(p)`` is the start of the leftmost match of ``(?<!\\w)p(?!\\w)`` in the text, or
    None: what ``re.search`` gives, found through an index of the text's space-separated
    tokens instead of a scan of the whole text per phrase (the scan made the publish check
    quadratic: one pass over the bundle for each private text).

    Both the text and the phrases are normalised (:func:`normalise`): single spaces, none
    at either end. A phrase ``w1 w2 ... wk`` (k >= 2) then occurs at a token ``j`` exactly
    when token ``j`` ends in ``w1``, tokens ``j+1 .. j+k-2`` equal ``w2 .. w(k-1)`` and
    token ``j+k-1`` starts with ``wk``; the boundaries ask for no word character right
    before ``w1`` inside token ``j`` and right after ``wk`` inside token ``j+k-1``.
    """

    def __init__(self, text: str):
        self.tokens = text.split(" ") if text else []
        self.starts: list[int] = []
        pos = 0
        for t in self.tokens:
            self.starts.append(pos)
            pos += len(t) + 1
        self._at: dict[str, list[int]] | None = None
        self._pairs: dict[tuple[str, str], int] | None = None

    def _positions(self) -> dict[str, list[int]]:
        if self._at is None:
            self._at = {}
            for j, t in enumerate(self.tokens):
                self._at.setdefault(t, []).append(j)
        return self._at

    @staticmethod
    def _ends(token: str, word: str) -> bool:
        n = len(token) - len(word)
        return token.endswith(word) and (n == 0 or not _word(token[n - 1]))

    @staticmethod
    def _begins(token: str, word: str) -> bool:
        n = len(word)
        return token.startswith(word) and (n == len(token) or not _word(token[n]))

    def _pair_index(self) -> dict[tuple[str, str], int]:
        """Every (end, start) of two adjacent tokens a two-word phrase can match, with the
        first token index where it does: an end is a suffix of a token with no word
        character right before it, a start a prefix with none right after it."""
        if self._pairs is None:
            self._pairs = {}
            cut = MIN_SHARED  # a short phrase has fewer characters than this
            ends_of: dict[str, list[str]] = {}
            begins_of: dict[str, list[str]] = {}
            for j in range(len(self.tokens) - 1):
                a, b = self.tokens[j], self.tokens[j + 1]
                if a not in ends_of:
                    ends_of[a] = [a[i:] for i in range(max(0, len(a) - cut), len(a))
                                  if i == 0 or not _word(a[i - 1])]
                if b not in begins_of:
                    begins_of[b] = [b[:i] for i in range(1, min(len(b), cut) + 1)
                                    if i == len(b) or not _word(b[i])]
                for e in ends_of[a]:
                    for g in begins_of[b]:
                        self._pairs.setdefault((e, g), j)
        return self._pairs

    def first(self, phrase: str) -> int | None:
        words = phrase.split(" ")
        k = len(words)
        if k == 2:
            j = self._pair_index().get((words[0], words[1]))
        else:
            at = self._positions()
            # anchor on the rarest middle word: each of its places is checked in full
            m = min(range(1, k - 1), key=lambda i: len(at.get(words[i], ())))
            j = None
            for p in at.get(words[m], ()):
                lo = p - m
                if lo < 0 or lo + k > len(self.tokens):
                    continue
                if (self.tokens[lo + 1:lo + k - 1] == words[1:k - 1]
                        and self._ends(self.tokens[lo], words[0])
                        and self._begins(self.tokens[lo + k - 1], words[-1])):
                    j = lo
                    break
        if j is None:
            return None
        return self.starts[j] + len(self.tokens[j]) - len(words[0])


def find_private(bundle: bytes | Mapping[str, bytes],
                 private_texts: Mapping[str, Iterable[tuple[str, str]]], *,
                 allowed: Iterable[str] = ()) -> list[Leak]:
    """Every private text that appears in the bundle (see :func:`scan_private`)."""
    files = {"bundle": bundle} if isinstance(bundle, (bytes, bytearray)) else dict(bundle)
    allowed = {str(a) for a in allowed}
    segs: list[tuple[str, str, str]] = []  # (text, mode, file)
    for name in sorted(files):
        segs += [(t, mode, name) for t, mode in _segments(name, bytes(files[name]), allowed) if t]

    def joined(parts):
        """The parts joined by a separator no text holds, and each part's start offset."""
        starts, pos = [], 0
        for t, _, _ in parts:
            starts.append(pos)
            pos += len(t) + 1
        return _SEP.join(t for t, _, _ in parts), starts

    def owner(parts, starts, i):
        return parts[bisect.bisect_right(starts, i) - 1][2]

    runs = [s for s in segs if s[1] in ("run", "prose")]
    hay, hay_starts = joined(runs)
    short_segs = [s for s in segs if s[1] == "run"]
    short_hay, short_starts = joined(short_segs)
    whole = {}  # a single word matches a whole JSON string or a field of a text line
    values = {}  # ... and a tiny text only a whole JSON value or a field, never a key
    for t, mode, name in segs:
        if mode in ("json", "key"):
            whole.setdefault(t, name)
            if mode == "json":
                values.setdefault(t, name)
        elif mode == "line":
            for w in t.split(" "):
                whole.setdefault(w, name)
                values.setdefault(w, name)

    phrases = _Phrases(short_hay)
    found_at: dict[str, int | None] = {}  # a short phrase -> where it first matches, if it does
    leaks: dict[tuple[str, str], Leak] = {}
    blocks: dict[str, list[tuple[str, str, str, int, str]]] = {}
    for kind, items in private_texts.items():
        for ident, raw in items:
            if not isinstance(raw, str):
                continue
            ident, text = str(ident), _norm(raw)
            plain = " ".join(raw.split())  # shown in messages, as the private text has it
            if not any(ch.isalpha() for ch in text):
                continue
            if len(text) < MIN_SHORT:
                if text in values:
                    leaks.setdefault((kind, ident), Leak(kind, ident, values[text], plain))
                continue
            if len(text) >= MIN_SHARED:
                for s in range(0, len(text) - _BLOCK + 1, _BLOCK):
                    blocks.setdefault(text[s:s + _BLOCK], []).append(
                        (kind, ident, text, s, plain))
            elif " " not in text:
                if text in whole:
                    leaks.setdefault((kind, ident), Leak(kind, ident, whole[text], plain))
            else:
                if text not in found_at:
                    found_at[text] = phrases.first(text)
                at = found_at[text]
                if at is not None:
                    leaks.setdefault((kind, ident), Leak(
                        kind, ident, owner(short_segs, short_starts, at), plain))
    if blocks:
        for i in range(len(hay) - _BLOCK + 1):
            cands = blocks.get(hay[i:i + _BLOCK])
            if not cands:
                continue
            for kind, ident, text, s, plain in cands:
                if (kind, ident) in leaks:
                    continue
                left = 0
                while (i - left - 1 >= 0 and s - left - 1 >= 0
                       and hay[i - left - 1] == text[s - left - 1]):
                    left += 1
                right = _BLOCK
                while (i + right < len(hay) and s + right < len(text)
                       and hay[i + right] == text[s + right]):
                    right += 1
                shared = text[s - left:s + right]
                if len(shared) >= MIN_SHARED and sum(ch.isalnum() for ch in shared) >= MIN_ALNUM:
                    # the private text's own letters when normalising kept every offset
                    if len(plain) == len(text):
                        shared = plain[s - left:s + right]
                    leaks[(kind, ident)] = Leak(kind, ident, owner(runs, hay_starts, i),
                                                _cut(shared.strip()))
    return sorted(leaks.values(), key=lambda leak: (leak.kind, leak.id))


def scan_private(bundle: bytes | Mapping[str, bytes],
                 private_texts: Mapping[str, Iterable[tuple[str, str]]], *,
                 allowed: Iterable[str] = (), limit: int = 10) -> list[Leak]:
    """Refuse a bundle that holds any private text.

    Parameters
    ----------
    bundle : bytes or mapping of str to bytes
        The bundle, whole or as file name → bytes (see :func:`bundle_files`).
    private_texts : mapping of str to iterable of (str, str)
        kind → ``(id, text)`` pairs: ``query`` (query text), ``intent``, ``chunk`` (chunk
        text), ``reason`` (graders' reasons).
    allowed : iterable of str, optional
        Public strings (query ids, chunk ids, arm names): a JSON string or a whitespace field
        equal to one of them is not searched.
    limit : int, optional
        At most this many leaks are listed in the error.

    Returns
    -------
    list of Leak
        Empty: the bundle is clean.

    Raises
    ------
    ProtocolError
        Any private text is in the bundle; the message lists the leaks (kind, id, file and
        the shared text cut to 60 characters), at most ``limit`` of them.

    Notes
    -----
    Both sides are normalised with :func:`normalise` (NFKC, case-folded, format characters
    such as zero-width spaces removed, whitespace collapsed) and JSON strings are searched
    unescaped; each file is also searched as one run of its lines (or strings), so a text
    split across a line break is found. A text of
    at least :data:`MIN_SHARED` characters leaks when the bundle shares any run of
    :data:`MIN_SHARED` characters with it holding at least :data:`MIN_ALNUM` letters or
    digits, so a chunk quoted in part is caught. Found by indexing each text's aligned
    ``MIN_SHARED // 2``-character blocks (any shared run of ``MIN_SHARED`` characters covers
    one) and extending every block hit in both directions. A shorter text leaks when it
    appears whole: a several-word text anywhere between word boundaries, a single word only
    as a whole JSON string or a whitespace-separated field of a text line (a keyword query
    such as ``echo`` must not match inside a measure name or a chunk id). Short texts are not
    searched in :data:`PROSE_FILES`, relgrade's own fixed wording; long ones are.

    A text shorter than :data:`MIN_SHORT` characters (with at least one letter) leaks only
    where it is a whole field: a whole JSON string value (not an object key, which is
    relgrade's own wording) or a whole whitespace-separated field of a text line. Inside a
    longer string it would match by chance (``db`` inside ``nDCG@10``'s neighbours).
    """
    leaks = find_private(bundle, private_texts, allowed=allowed)
    if leaks:
        shown = "; ".join(str(leak) for leak in leaks[:limit])
        more = f"; and {len(leaks) - limit} more" if len(leaks) > limit else ""
        raise ProtocolError(f"private text in the publish bundle ({len(leaks)} found): "
                            f"{shown}{more}. Nothing was published")
    return []
