"""The corpus: a pinned source archive (or a ready chunks file) turned into the chunks table.

Pure functions over bytes, dicts and DataFrames. The corpus stage does the I/O (download with
pip, reading files, atomic writes) and calls :func:`corpus_from_sdist` or
:func:`corpus_from_table`.

A source spec (``data/input/corpus.source.yaml``) is one of

- ``{kind: pypi-sdist, requirement: "click==8.1.8", filename: click-8.1.8.tar.gz,
  sha256: <64 hex>}``: the source distribution, downloaded with pip;
- ``{kind: sdist-file, path: some.tar.gz, sha256: <64 hex>}``: a local archive, ``path``
  relative to the spec file's folder.
"""

from __future__ import annotations

import io
import numbers
import re
import tarfile
import zlib
from pathlib import PurePosixPath

import numpy as np
import pandas as pd

from relgrade.canonical import canonical_json, jsonl_bytes, sha256_bytes
from relgrade.errors import InputError
from relgrade.protocol import chunking
from relgrade.schema import is_missing

SPEC_KINDS = ("pypi-sdist", "sdist-file")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_WHITESPACE = re.compile(r"\s")

#: refuse archives whose members add up to more than this (a decompression bomb guard)
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024

REQUIRED = ["chunk_id", "header", "text", "source"]
OPTIONAL_INT = ["line_start", "line_end"]


# --- the source spec -----------------------------------------------------------------

def parse_source_spec(spec, *, path=None) -> dict:
    """Check a source spec and return it with its fields normalised.

    Parameters
    ----------
    spec : dict
        The spec as read from YAML.
    path : str or Path, optional
        The spec file, named in errors.

    Returns
    -------
    dict
        ``{"kind", "sha256", ...}``: for ``pypi-sdist`` also ``requirement`` and
        ``filename``; for ``sdist-file`` also ``path`` (as written, unresolved). ``sha256``
        is lowercased.

    Raises
    ------
    InputError
        Not a mapping, unknown ``kind``, a required field missing or not a string, or a
        ``sha256`` that is not 64 hex digits.
    """
    if not isinstance(spec, dict):
        raise InputError("a corpus source spec must be a YAML mapping", path=path,
                         found=type(spec).__name__)
    kind = spec.get("kind")
    if kind not in SPEC_KINDS:
        raise InputError(f"unknown source kind (use {' or '.join(SPEC_KINDS)})", path=path,
                         found=repr(kind))
    fields = ["requirement", "filename"] if kind == "pypi-sdist" else ["path"]
    out = {"kind": kind}
    for name in fields + ["sha256"]:
        value = spec.get(name)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"source spec of kind {kind} needs a string `{name}`", path=path,
                             found=repr(value))
        out[name] = value.strip()
    out["sha256"] = out["sha256"].lower()
    if not _HEX64.match(out["sha256"]):
        raise InputError("`sha256` must be 64 hex digits", path=path, found=out["sha256"])
    return out


def source_label(spec: dict) -> str:
    """How the manifest names the source: ``pypi-sdist:click==8.1.8`` or ``sdist-file:PATH``."""
    if spec["kind"] == "pypi-sdist":
        return f"pypi-sdist:{spec['requirement']}"
    return f"sdist-file:{spec['path']}"


def check_sha256(data: bytes, expected: str, *, path=None, item=None) -> str:
    """The sha256 of ``data``; an error when it is not ``expected``.

    Parameters
    ----------
    data : bytes
        The downloaded or local archive.
    expected : str
        64 lowercase hex digits, from the spec.
    path : str or Path, optional
        The spec file, named in the error.
    item : str, optional
        The archive's file name, named in the error.

    Returns
    -------
    str
        The hex digest (equal to ``expected``).

    Raises
    ------
    InputError
        The digest differs: one line naming the spec, the archive, the expected and the
        found hash.
    """
    found = sha256_bytes(data)
    if found != expected:
        raise InputError(f"sha256 differs from the pinned {expected}", path=path, item=item,
                         found=found,
                         fix="The archive is not the one the experiment was frozen on; "
                             "restore it or pin the new hash on purpose")
    return found


# --- reading the archive -------------------------------------------------------------

def read_sdist(data: bytes, *, path=None) -> list[tuple[str, bytes]]:
    """The regular files of a ``.tar.gz`` archive, read in memory.

    Parameters
    ----------
    data : bytes
        The archive.
    path : str, optional
        Its name, used in errors.

    Returns
    -------
    list of (str, bytes)
        ``(relative path, content)`` per regular file, in archive order; the single top
        folder every member shares (``click-8.1.8/``) is removed from the paths.
        Directories, links and device files are left out.

    Raises
    ------
    InputError
        The bytes are not a readable gzip-compressed tar archive; a member has an absolute
        path or a ``..`` component; the members add up to more than
        :data:`MAX_ARCHIVE_BYTES`; the archive holds no file.

    Notes
    -----
    Nothing is extracted to disk and no file of the archive is executed.
    """
    files: list[tuple[str, bytes]] = []
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                name = member.name
                parts = PurePosixPath(name).parts
                if (name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name)
                        or ".." in parts or ".." in name.split("\\")):
                    raise InputError("unsafe path in archive (absolute or with `..`)",
                                     path=path, item=name)
                if not member.isfile():
                    continue
                total += member.size
                if total > MAX_ARCHIVE_BYTES:
                    raise InputError(f"archive expands to more than {MAX_ARCHIVE_BYTES} bytes",
                                     path=path)
                f = tar.extractfile(member)
                files.append((name, f.read() if f is not None else b""))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise InputError("not a readable .tar.gz archive", path=path,
                         found=str(e) or type(e).__name__) from None
    if not files:
        raise InputError("archive holds no file", path=path)
    tops = {PurePosixPath(n).parts[0] for n, _ in files}
    if len(tops) == 1 and all(len(PurePosixPath(n).parts) > 1 for n, _ in files):
        files = [(str(PurePosixPath(*PurePosixPath(n).parts[1:])), b) for n, b in files]
    return files


# --- building the corpus -------------------------------------------------------------

def corpus_from_sdist(data: bytes, *, spec: dict, path=None,
                      allow_empty: bool = False) -> tuple[pd.DataFrame, dict]:
    """Verify, read and chunk a source archive.

    Parameters
    ----------
    data : bytes
        The archive's bytes.
    spec : dict
        A parsed source spec (:func:`parse_source_spec`).
    path : str or Path, optional
        The spec file, named in errors.
    allow_empty : bool, default False
        Accept chunks whose text is empty or blank (params ``corpus.allow_empty``); they are
        then counted in the manifest's ``empty_chunks``.

    Returns
    -------
    chunks : pandas.DataFrame
        The chunks table (:data:`relgrade.schema.CHUNKS`).
    manifest : dict
        ``{"source", "sha256", "chunks", "table_sha256", "files", "lines", "skipped"}``:
        the source label, the archive's sha256, the chunk count, :func:`table_sha256`,
        the number of chunked files, their total line count, and each skipped file with why;
        plus ``empty_chunks`` when ``allow_empty``.

    Raises
    ------
    InputError
        The archive's sha256 differs from the spec, or it cannot be read
        (:func:`read_sdist`); a chunk's text is empty or blank (see :func:`check_empty`).
    """
    name = spec.get("filename") or spec.get("path")
    digest = check_sha256(data, spec["sha256"], path=path, item=name)
    files = read_sdist(data, path=name)
    chunks, report = chunking.chunk_files(files)
    manifest = {
        "source": source_label(spec),
        "sha256": digest,
        "chunks": int(len(chunks)),
        "table_sha256": table_sha256(chunks),
        "files": report["files"],
        "lines": report["lines"],
        "skipped": report["skipped"],
    }
    empty = check_empty(chunks, allow_empty=allow_empty, path=name)
    if allow_empty:
        manifest["empty_chunks"] = empty
    return chunks, manifest


#: How to keep chunks with no text, in a params file (:func:`check_empty`'s default advice).
ALLOW_EMPTY_FIX = ("Remove those chunks, or set corpus.allow_empty: true to keep them (they are "
                   "then counted in the corpus manifest)")


def check_empty(chunks: pd.DataFrame, *, allow_empty: bool = False, path=None,
                lines=None, fix: str = ALLOW_EMPTY_FIX) -> int:
    """Refuse chunks with no text, unless allowed; the number of such chunks.

    A chunk whose text is empty or only whitespace gives a grader nothing to judge, and an
    empty text in a key is usually a broken export, so it is refused by default.

    Parameters
    ----------
    chunks : pandas.DataFrame
        Columns ``chunk_id`` (str) and ``text`` (str), shape (n_chunks, >= 2).
    allow_empty : bool, default False
        Accept them (params ``corpus.allow_empty``); they are only counted.
    path : str or Path, optional
        The file they came from, named in errors.
    lines : sequence of int, optional, length ``len(chunks)``
        The file line of each row, named in errors.
    fix : str, default :data:`ALLOW_EMPTY_FIX`
        The refusal's advice, in the caller's words (``relgrade init`` names its option).

    Returns
    -------
    int
        How many chunks have an empty or blank text.

    Raises
    ------
    InputError
        A chunk's text is empty or blank and ``allow_empty`` is false, naming the first such
        chunk id (and line) and how many there are.

    Examples
    --------
    >>> df = pd.DataFrame({"chunk_id": ["a", "b"], "text": ["x = 1", " "]})
    >>> check_empty(df, allow_empty=True)
    1
    """
    blank = [i for i, t in enumerate(chunks["text"].tolist()) if not str(t).strip()]
    if blank and not allow_empty:
        i = blank[0]
        line = None if lines is None else list(lines)[i]
        raise InputError("chunk text is empty", path=path, line=line,
                         item=str(chunks["chunk_id"].iat[i]),
                         found=f"{len(blank)} chunks with empty or blank text",
                         fix=fix)
    return len(blank)


def validate_chunks(df: pd.DataFrame, *, path=None, lines=None) -> pd.DataFrame:
    """Check a chunks table read from a file and return it in canonical form.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns ``chunk_id``, ``header``, ``text``, ``source``; optionally ``line_start``,
        ``line_end``. Other columns are dropped.
    path : str or Path, optional
        The file it came from, named in errors.
    lines : sequence of int, optional, length ``len(df)``
        The file line of each row (JSON Lines); errors then name the line.

    Returns
    -------
    pandas.DataFrame
        A new table (the input is not changed): ids as ``str`` (JSON numbers accepted),
        ``line_start``/``line_end`` as int64 when present, rows in input order.

    Raises
    ------
    InputError
        A required column is missing; an empty table; a row without a ``chunk_id`` (names
        its line, or its row when ``lines`` is None); a ``chunk_id`` that is empty, holds
        whitespace (TREC files are whitespace-separated) or repeats; a ``header``,
        ``text`` or ``source`` that is not a string; a line number that is not a
        non-negative integer.
    """
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise InputError(f"chunks table lacks column(s) {', '.join(missing)}", path=path,
                         found="columns " + ", ".join(map(str, df.columns)))
    if len(df) == 0:
        raise InputError("chunks table is empty", path=path)
    where = list(lines) if lines is not None else [None] * len(df)
    cols = REQUIRED + [c for c in OPTIONAL_INT if c in df.columns]
    records = df[cols].to_dict("records")
    seen: dict[str, int] = {}
    out = []
    for i, row in enumerate(records):
        line = where[i]
        ref = {"path": path, "line": line} if line is not None else {"path": path}
        row_name = None if line is not None else f"row {i + 1}"
        cid = row["chunk_id"]
        if is_missing(cid):
            raise InputError("chunk_id is missing: every chunk needs one", **ref,
                             item=row_name)
        if isinstance(cid, bool) or not isinstance(cid, (str, int)):
            raise InputError("chunk_id must be a string", **ref, item=row_name,
                             found=repr(cid))
        cid = str(cid)
        if not cid:
            raise InputError("chunk_id is empty", **ref, item=row_name)
        if _WHITESPACE.search(cid):
            raise InputError("chunk_id must not contain whitespace (TREC files split on it)",
                             **ref, item=cid)
        if cid in seen:
            first = f"line {seen[cid]}" if line is not None else f"row {seen[cid]}"
            raise InputError(f"duplicate chunk_id (first at {first})", **ref, item=cid)
        seen[cid] = line if line is not None else i + 1
        clean = {"chunk_id": cid}
        for name in ("header", "text", "source"):
            value = row[name]
            if not isinstance(value, str):
                raise InputError(f"`{name}` must be a string", **ref, item=cid,
                                 found=_describe(value))
            clean[name] = value
        for name in OPTIONAL_INT:
            if name in row:
                value = row[name]
                ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
                      and float(value).is_integer() and value >= 0)
                if not ok:
                    raise InputError(f"`{name}` must be a non-negative integer", **ref,
                                     item=cid, found=repr(value))
                clean[name] = int(value)
        out.append(clean)
    table = pd.DataFrame(out, columns=cols)
    for name in OPTIONAL_INT:
        if name in table.columns:
            table[name] = table[name].astype("int64")
    return table


def _describe(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "a missing value"
    return repr(value)


def corpus_from_table(df: pd.DataFrame, *, sha256: str, path=None,
                      lines=None, allow_empty: bool = False) -> tuple[pd.DataFrame, dict]:
    """Validate a chunks file's table and describe it (see :func:`validate_chunks`).

    Parameters
    ----------
    df : pandas.DataFrame
        The table as read.
    sha256 : str
        The chunks file's sha256.
    path : str or Path, optional
        The chunks file, used as the manifest's ``source`` and in errors.
    lines : sequence of int, optional
        File line per row.
    allow_empty : bool, default False
        Accept chunks whose text is empty or blank (params ``corpus.allow_empty``); they are
        then counted in the manifest's ``empty_chunks``.

    Returns
    -------
    chunks : pandas.DataFrame
    manifest : dict
        ``{"source", "sha256", "chunks", "table_sha256", "files"}`` with ``files`` the
        number of distinct ``source`` values; plus ``empty_chunks`` when ``allow_empty``.

    Raises
    ------
    InputError
        As :func:`validate_chunks`; a chunk's text is empty or blank (see
        :func:`check_empty`).
    """
    chunks = validate_chunks(df, path=path, lines=lines)
    empty = check_empty(chunks, allow_empty=allow_empty, path=path, lines=lines)
    manifest = {
        "source": f"chunks-file:{path}",
        "sha256": sha256,
        "chunks": int(len(chunks)),
        "table_sha256": table_sha256(chunks),
        "files": int(chunks["source"].nunique()),
    }
    if allow_empty:
        manifest["empty_chunks"] = empty
    return chunks, manifest


class ChunkBlocks:
    """A chunks file's rows checked a block at a time, kept as compact columns.

    The usual chunks file (every row an object with string ``chunk_id``, ``header``,
    ``text`` and ``source``, the same optional line numbers on every row, no empty text
    unless allowed, no id twice) gives the table, manifest and hash of
    :func:`corpus_from_table` without a Python object per row surviving its block: the
    rows become Arrow columns, the canonical bytes of :func:`table_sha256` go through one
    running hash, each id is kept as a 64-bit hash for the duplicate check and each
    distinct ``source`` once. Any row outside that usual form (a rule broken, a type the
    table rules would convert, an id hash seen twice) makes :meth:`add` return False: the
    caller then checks the whole file with :func:`corpus_from_table`, whose messages name
    the first broken rule in file order.

    Parameters
    ----------
    allow_empty : bool, default False
        Params ``corpus.allow_empty``: an empty or blank text is counted, not refused
        (without it such a row returns False, and the table rules word the refusal).

    Examples
    --------
    >>> blocks = ChunkBlocks()
    >>> blocks.add([{"chunk_id": "a", "header": "h", "text": "x = 1", "source": "m.py"}])
    True
    >>> table, manifest = blocks.result(sha256="0" * 64, path="c.jsonl")
    >>> table.column_names, manifest["chunks"], manifest["files"]
    (['chunk_id', 'header', 'text', 'source'], 1, 1)
    """

    def __init__(self, *, allow_empty: bool = False):
        import hashlib

        self.allow_empty = bool(allow_empty)
        self.columns: list[str] | None = None
        self._blocks: list = []
        self._hashes: list[np.ndarray] = []
        self._digest = hashlib.sha256()
        self._sources: set[str] = set()
        self._blank = 0
        self._rows = 0

    def add(self, rows: list) -> bool:
        """Check one block of rows and keep it; False when a row needs the table rules.

        Parameters
        ----------
        rows : list
            The parsed JSON value of each non-blank line, in file order.

        Returns
        -------
        bool
            True when every row is in the usual form and the block was kept.
        """
        import pyarrow as pa

        if not rows:
            return True
        optional = None
        cols: dict[str, list] = {}
        for row in rows:
            if type(row) is not dict:
                return False
            have = tuple(c for c in OPTIONAL_INT if c in row)
            if optional is None:
                optional = have
                if self.columns is None:
                    self.columns = REQUIRED + list(have)
                if self.columns != REQUIRED + list(have):
                    return False
                cols = {c: [] for c in self.columns}
            elif have != optional:
                return False
            for name in REQUIRED:
                value = row.get(name)
                if type(value) is not str:
                    return False
                cols[name].append(value)
            cid = row["chunk_id"]
            if not cid or _WHITESPACE.search(cid):
                return False
            for name in have:
                value = row[name]
                if type(value) is not int or not 0 <= value < 2 ** 63:
                    return False
                cols[name].append(value)
            if not row["text"].strip():
                if not self.allow_empty:
                    return False
                self._blank += 1
        digest = self._digest
        for record in zip(*cols.values()):
            digest.update((canonical_json(dict(zip(self.columns, record))) + "\n")
                          .encode("utf-8"))
        self._hashes.append(pd.util.hash_array(np.asarray(cols["chunk_id"], dtype=object),
                                               categorize=False))
        self._sources.update(cols["source"])
        self._blocks.append(pa.table({
            c: pa.array(v, type=pa.int64() if c in OPTIONAL_INT else pa.large_string())
            for c, v in cols.items()}))
        self._rows += len(rows)
        return True

    def result(self, *, sha256: str, path=None):
        """The chunks table and manifest, or None when the rows need the table rules.

        Parameters
        ----------
        sha256 : str
            The chunks file's sha256.
        path : str or Path, optional
            The chunks file, the manifest's ``source``.

        Returns
        -------
        (pyarrow.Table, dict) or None
            The table :func:`corpus_from_table` returns (as Arrow: ``large_string`` ids and
            texts, int64 line numbers; rows in file order) and its manifest; None for an
            empty file or when two ids share a 64-bit hash (a repeated id, or a collision the
            table rules settle).
        """
        import pyarrow as pa

        if not self._rows:
            return None
        hashes = np.concatenate(self._hashes)
        self._hashes = []
        hashes.sort()
        if len(hashes) > 1 and bool(np.any(hashes[1:] == hashes[:-1])):
            return None
        del hashes
        table = pa.concat_tables(self._blocks)
        self._blocks = []
        manifest = {
            "source": f"chunks-file:{path}",
            "sha256": sha256,
            "chunks": int(self._rows),
            "table_sha256": self._digest.hexdigest(),
            "files": len(self._sources),
        }
        if self.allow_empty:
            manifest["empty_chunks"] = self._blank
        return table, manifest


def table_sha256(chunks: pd.DataFrame) -> str:
    """sha256 of the chunks table's canonical byte form.

    Parameters
    ----------
    chunks : pandas.DataFrame
        A chunks table.

    Returns
    -------
    str
        64 hex digits.

    Notes
    -----
    The canonical form is one JSON object per row, in table order, with the keys
    ``chunk_id, header, text, source[, line_start, line_end]`` in that order, written by
    :func:`relgrade.canonical.jsonl_bytes` (no spaces, UTF-8, LF after each row). It does not
    depend on the Parquet writer's version, so equal tables give equal hashes.
    """
    cols = REQUIRED + [c for c in OPTIONAL_INT if c in chunks.columns]
    rows = []
    for rec in chunks[cols].to_dict("records"):
        rows.append({c: (int(rec[c]) if c in OPTIONAL_INT else str(rec[c])) for c in cols})
    return sha256_bytes(jsonl_bytes(rows))
