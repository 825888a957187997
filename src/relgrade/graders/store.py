"""The grade store: one append-only JSON Lines file per grader and round, one writer.

Grading is slow and expensive (hours of people, thousands of model calls), so a recorded row
must survive Ctrl-C, ``kill -9`` and a crash, and a rerun must pick up exactly where the last
run stopped. :class:`GradeStore` owns one file (``paths.grades_in/GRADER/round-N.jsonl``) and
appends whole batches to it; :class:`SingleWriter` is the one thread that calls
:meth:`GradeStore.append`, so worker threads, web requests and imports hand their batches to
it and never write themselves.

Durability, batch by batch
--------------------------
Appending a batch is three steps:

1. an *in-flight marker* (``.round-N.jsonl.inflight`` beside the file, a fixed-size record
   ``offset end``) is overwritten in place and ``fdatasync``-ed;
2. the batch's rows are appended in one ``write`` and the file is ``fsync``-ed;
3. the marker is cleared (not synced: a stale marker whose ``end`` equals the file size
   describes a complete batch).

Batches that wait for the writer while a write is in progress are written together, under
one marker and one ``fsync`` (a group commit): each batch is still recorded whole or not at
all, and no submitter hears "saved" before its rows are on disk.

Opening the store recovers from whatever was interrupted:

* a marker whose ``end`` lies beyond the file's size means step 2 was cut short (a process
  killed mid-``write`` can leave part of a batch, even whole lines of it): the file is
  truncated back to the marker's ``offset``, so a batch is recorded whole or not at all;
* a last line without its line end (a torn write with no marker, e.g. a file written by
  another tool) is truncated away, unless it is a whole JSON object (a file saved by an
  editor without a final line end): then the line end is added;
* every other line must be a JSON object, else the store refuses to open, naming the line:
  it never drops a complete recorded row.

Holding the file by path and identity
-------------------------------------
The writer's lock is an exclusive ``flock`` on a separate lock file
(``.round-N.jsonl.lock`` beside the grade file, holding the writer's process id, removed on
close), taken before the grade file is opened: a second process opening the store while the
first holds it gets a :class:`~relgrade.errors.ProtocolError`, so two ``relgrade grade run``
for one grader cannot interleave rows, even when the grade file itself is replaced. The grade
file is also ``flock``-ed, so an importer that locks the file itself is kept out too.

The grade file can be replaced on disk while a store holds it (``git stash && git stash
pop``, ``git checkout``, an editor's save-by-rename, a ``grade import``): the store's
descriptor then points at the old, unlinked file. So the store compares the device and inode
of its descriptor with those of the path before every append and again after every append,
before any batch is acknowledged. On a mismatch it stops, says what happened (a warning on
the ``relgrade`` logger, and :attr:`GradeStore.replacements`), re-opens the file now at the
path, re-reads it (rows already in it count as recorded) and appends what is missing there.
No batch is acknowledged that is not in the file at the path.

What each grade was made on
---------------------------
A store given ``made_on`` (a function of a grade row returning
:data:`relgrade.schema.MADE_ON`: the chunk's content hash as the packet showed it, the intent
line's hash, the rubric version and the rubric file's sha256) keeps the judgment bank's record
of every row it writes in ``round-N.bank.jsonl`` beside the grade file (:func:`bank_path`), one
line per grade row, in step with it: row i was made on bank line i
(:mod:`relgrade.protocol.sidecar`). A line is ``{"query_id", "chunk_id", "content_sha256",
"intent_sha256", "rubric_version", "rubric_sha256", "graded_at", "row_sha256"}``, the last
binding it to its row; for a grade that ``grade run`` or a provider batch file produced,
``"cache": "hit"`` (the answer came from the call cache, no command ran) or ``"cache":
"miss"`` follows (see :mod:`relgrade.graders.cache`; older lines have neither and read as
before). A batch's bank lines are appended and ``fsync``-ed *before* its grade
rows, so a grade row never exists without its record; bank lines whose rows a crash lost can
only trail, and opening the store cuts them away (:func:`trim_bank`); a file and sidecar that
disagree in their body are refused, naming both. Whether a recorded pair is current is read
from the line paired with its last row, never from the pair's last bank line.

Full disks
----------
Every append checks that the whole write reached the file and ``fsync``-s it
(:func:`write_all`); a write the disk refused (``ENOSPC``, ``EFBIG``) is cut back, in the
grade file and in its sidecar, to where it started, and the batch is refused with a
:class:`~relgrade.errors.StorageError`: nothing is acknowledged, and the next batch is never
appended onto a torn line.

Leftovers of interrupted commands are cleaned when the store opens: temporary files of an
atomic write beside the grade file (``.round-N.*.tmp``), and a grade file left empty is
removed when the store closes (an empty file records nothing).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import itertools
import json
import logging
import os
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from relgrade.canonical import canonical_json, jsonl_bytes
from relgrade.errors import InputError, ProtocolError, StorageError
from relgrade.io.files import iter_jsonl, write_blocks
from relgrade.protocol.sidecar import pair_rows, row_sha256
from relgrade.schema import MADE_ON

#: The fields of one line of a grade file's bank sidecar, in order (``row_sha256``: the
#: sha256 of the grade row the line belongs to, :func:`relgrade.protocol.sidecar.row_sha256`).
BANK_FIELDS = ("query_id", "chunk_id", *MADE_ON, "graded_at", "row_sha256")

#: Size in bytes of the in-flight marker record.
_MARKER_SIZE = 64
_MARKER_RE = re.compile(rb"^relgrade-inflight (\d{20}) (\d{20}) *\n$")
_IDLE = b"relgrade-idle".ljust(_MARKER_SIZE - 1) + b"\n"


#: Re-opens of a replaced file tolerated within one append before giving up.
_MAX_REOPENS = 20


def bank_path(path) -> Path:
    """The bank sidecar of the grade file ``path``: ``round-N.bank.jsonl`` beside it."""
    path = Path(path)
    return path.with_name(path.name.removesuffix(".jsonl") + ".bank.jsonl")


def now_utc() -> str:
    """The time now, UTC, to the second: ``2026-12-01T12:00:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def bank_rows(rows: Iterable[dict], made_on, *, graded_at: str,
              notes: Sequence[dict | None] | None = None) -> list[dict]:
    """The bank sidecar lines of grade rows: the pair, what it was made on, and when.

    Parameters
    ----------
    rows : iterable of dict
        Grade rows (``query_id``, ``chunk_id``, ...).
    made_on : callable
        Grade row → mapping with the keys of :data:`relgrade.schema.MADE_ON`.
    graded_at : str
        The time of recording (:func:`now_utc`).
    notes : sequence of (dict or None), optional
        Per row, further fields for its bank line after ``graded_at`` (e.g.
        ``{"cache": "hit"}``); None adds nothing.

    Returns
    -------
    list of dict
        One ``{BANK_FIELDS}`` dict per row, keys in :data:`BANK_FIELDS` order;
        ``row_sha256`` binds the line to its grade row; then the row's note.

    Raises
    ------
    InputError
        ``made_on`` knows nothing of a row's pair (a pair that no packet showed).
    """
    rows = list(rows)
    notes = [None] * len(rows) if notes is None else list(notes)
    out = []
    for r, note in zip(rows, notes):
        m = made_on(r)
        if m is None:
            raise unknown_pair(r)
        out.append({"query_id": str(r["query_id"]), "chunk_id": str(r["chunk_id"]),
                    **{k: m[k] for k in MADE_ON}, "graded_at": graded_at,
                    "row_sha256": row_sha256(r), **(note or {})})
    return out


def unknown_pair(row: dict) -> InputError:
    """The refusal of a grade row whose pair no packet shows (its made-on is unknown)."""
    return InputError("no packet shows this pair, so what its grade is made on is "
                      "unknown", item=f"pair ({row.get('query_id')}, {row.get('chunk_id')})",
                      fix="Grade only the pairs of the current packets")


#: Rows per block when an import writes its grade rows and bank lines: what is held of
#: them at once is one block's dicts and bytes (about 2 KB a row), whatever the file's size.
IMPORT_BLOCK = 16384


def storage_error(path, error: OSError) -> StorageError:
    """The refusal of a write the disk did not take whole (``ENOSPC``, ``EFBIG``, ...)."""
    why = os.strerror(error.errno) if error.errno else str(error)
    return StorageError(
        f"{Path(path).as_posix()}: the write was refused by the disk ({why}): no space left "
        "on the device or the file-size limit reached. Nothing of this batch was saved and "
        "the file is cut back to its last whole line; free space, then save again")


def write_all(fd: int, data: bytes, *, path, start: int) -> int:
    """Append ``data`` to the open file ``fd`` (which was ``start`` bytes long), ``fsync`` it
    and check that all of it reached the file.

    On any failure (a short write, ``ENOSPC``, ``EFBIG``, a failed ``fsync``) the file is
    truncated back to ``start`` and synced, and a :class:`~relgrade.errors.StorageError`
    is raised: the caller acknowledges nothing.

    Parameters
    ----------
    fd : int
        A descriptor opened with ``O_APPEND``.
    data : bytes
        Whole lines.
    path : str or os.PathLike
        The file, named in the error.
    start : int
        The file's size before the write (the end of its last whole line).

    Returns
    -------
    int
        The file's size afterwards (``start + len(data)``).

    Raises
    ------
    StorageError
        The disk did not take the whole write; nothing of it is left in the file.
    """
    end = start + len(data)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(28, os.strerror(28))
            view = view[n:]
        os.fsync(fd)
        size = os.fstat(fd).st_size
        if size != end:
            raise OSError(28, f"{size} bytes on disk, {end} expected")
    except OSError as e:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
            os.fsync(fd)
        raise storage_error(path, e) from None
    return end


def append_bank(path, rows: list[dict]) -> int:
    """Append bank lines to the bank sidecar of grade file ``path`` and ``fsync`` them.

    A last line cut short by an earlier crash (no line end) is cut away first: it belonged
    to a batch that was never acknowledged (see :func:`append_lines`).

    Returns
    -------
    int
        The sidecar's size before the append (to cut it back to if the grade rows of these
        lines cannot be written).

    Raises
    ------
    StorageError
        The disk did not take the whole write (:func:`write_all`); the sidecar is as before.
    """
    return append_lines(bank_path(path), jsonl_bytes(rows) if rows else b"")


def append_lines(path, data: bytes | Iterable[bytes]) -> int:
    """Append whole lines to the file ``path`` durably, under an exclusive ``flock``.

    The lock is taken on the file itself, so several processes may append to one file (a
    call cache two experiments share); under it, a last line without its line end (a write
    cut short by a crash: never acknowledged) is cut away, ``data`` is written whole and the
    file ``fsync``-ed (:func:`write_all`) before the lock is released. A file created here
    has its name made durable too. ``data`` given as blocks is written block by block (each
    made only when the one before is on disk, then synced); when any block fails (the disk,
    or an exception while making it), the file is cut back to its size before the first,
    so it is all or nothing as for one block.

    Parameters
    ----------
    path : str or os.PathLike
        The file (created when missing; its folder must exist).
    data : bytes or iterable of bytes
        One or more complete lines, each ending with ``\n`` (may be empty); or blocks of
        such lines.

    Returns
    -------
    int
        The file's size before the append, after any torn last line was cut away.

    Raises
    ------
    StorageError
        The disk did not take the whole write; the file is as it was before it.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = [data]
    with LineAppender(path) as out:
        for block in data:
            out.write(block)
    return out.start


class LineAppender:
    """Whole lines appended to a file block by block, durably, all or nothing.

    What :func:`append_lines` does, for a caller that makes each block between other
    writes (an import that appends a block's bank lines, then writes the block's grade
    rows elsewhere): on entering, the file is opened (created when missing, its name made
    durable), ``flock``-ed and a torn last line cut away; each :meth:`write` appends one
    block and ``fsync``-s it (:func:`write_all`). Leaving by an exception cuts the file
    back to its size on entering, so no block of an unfinished append outlives it; the
    lock is released on leaving.

    Parameters
    ----------
    path : str or os.PathLike
        The file (created when missing; its folder must exist).
    remove_created : bool, default False
        Leaving by an exception removes the file when it was created here (for a caller
        that holds the only writer's lock of it, e.g. a grade file's bank sidecar under
        :func:`writer_lock`: a refused import leaves no file behind).

    Attributes
    ----------
    start : int
        The file's size on entering, after any torn last line was cut away.

    Raises
    ------
    StorageError
        From :meth:`write`: the disk did not take the whole block (the file is cut back to
        its size before it; leaving the ``with`` block cuts it back to :attr:`start`).
    """

    def __init__(self, path, *, remove_created: bool = False):
        self.path = Path(path)
        self.remove_created = remove_created
        self.start = 0
        self._end = 0
        self._fd: int | None = None
        self._created = False

    def __enter__(self) -> "LineAppender":
        path = self.path
        self._created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size:
                tail = _pread_all(fd, max(0, size - 65536), size)
                if not tail.endswith(b"\n"):
                    cut = tail.rfind(b"\n")
                    if cut < 0 and size > 65536:  # one enormous torn line: find its start
                        size = _pread_all(fd, 0, size).rfind(b"\n") + 1
                    else:
                        size = (size - len(tail) + cut + 1) if cut >= 0 else 0
                    os.ftruncate(fd, size)
        except BaseException:
            os.close(fd)
            if self._created:
                _fsync_dir(path.parent)
            raise
        self._fd, self.start, self._end = fd, size, size
        return self

    def write(self, block: bytes) -> None:
        """Append ``block`` (whole lines, may be empty) and ``fsync`` it."""
        if block:
            self._end = write_all(self._fd, block, path=self.path, start=self._end)

    def __exit__(self, kind, error, trace) -> None:
        fd, self._fd = self._fd, None
        try:
            if kind is not None and self._end != self.start:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, self.start)
                    os.fsync(fd)
            if kind is not None and self._created and self.remove_created:
                with contextlib.suppress(OSError):
                    self.path.unlink()
        finally:
            os.close(fd)  # releases the lock
            if self._created:
                _fsync_dir(self.path.parent)


def cut_bank(path, size: int) -> None:
    """Truncate the bank sidecar of grade file ``path`` back to ``size`` bytes, synced."""
    fd = os.open(bank_path(path), os.O_RDWR)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def trim_bank(path, rows: list[tuple[int, dict]]) -> list | None:
    """Bring the bank sidecar of grade file ``path`` in step with its ``rows``.

    Trailing bank lines without a grade row (a batch interrupted between its bank lines and
    its rows: never acknowledged) and a torn last line are cut away. Call only while holding
    the writer's lock.

    Parameters
    ----------
    path : str or os.PathLike
        The grade file.
    rows : list of (int, dict)
        Its rows, in file order.

    Returns
    -------
    list of dict or None
        The record of each row (row i → bank line i), or None when there is no sidecar.

    Raises
    ------
    InputError
        The grade file and the sidecar disagree in their body
        (:func:`relgrade.protocol.sidecar.pair_rows`): one error naming both files and how
        to restore them.
    """
    path = Path(path)
    bank = read_bank(path)
    if bank is None:
        return None
    paired = pair_rows(rows, bank, source=path.as_posix(),
                       bank_source=bank_path(path).as_posix())
    raw = bank_path(path).read_bytes()
    keep, seen = 0, 0
    for line in raw.split(b"\n")[:-1]:
        if seen == paired.keep_lines:
            break
        keep += len(line) + 1
        if line.strip():
            seen += 1
    if keep < len(raw):
        cut_bank(path, keep)
    return paired.records


def read_bank(path) -> list[tuple[int, dict]] | None:
    """The bank sidecar lines of grade file ``path``, or None when it has no sidecar.

    Returns
    -------
    list of (int, dict) or None
        ``(line_number, row)`` in file order; a last line without its line end (a write cut
        short by a crash) is left out.

    Raises
    ------
    InputError
        A complete line is not a JSON object.
    """
    target = bank_path(path)
    if not target.exists():
        return None
    out = []
    lines = target.read_bytes().split(b"\n")
    # one object per distinct short value: a query's intent hash, the rubric's hash, a
    # batch's time repeat on every line, and a million lines would hold a million copies
    shared: dict[str, str] = {}
    # and one per distinct small record (an import's file, sha256 and format on every line);
    # the rows are read, never changed in place
    records: dict[tuple, dict] = {}
    for i, raw in enumerate(lines[:-1], start=1):
        if not raw.strip():
            continue
        row = _object_or_none(raw)  # parsed once: the check and the row are one parse
        if row is None:
            raise InputError("a bank line is not a JSON object", path=target, line=i,
                             fix="Restore the file from git; relgrade writes it, never edit it")
        # json.loads makes fresh key strings for every line: the row is rebuilt on shared ones
        row = {shared.setdefault(k, k): _shared_value(k, v, shared, records)
               for k, v in row.items()}
        out.append((i, row))
        lines[i - 1] = b""  # the raw line is parsed: let it go
    return out


def marker_path(path) -> Path:
    """The in-flight marker of the store file ``path``: ``.NAME.inflight`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.inflight")


def lock_path(path) -> Path:
    """The writer's lock file of the store file ``path``: ``.NAME.lock`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open descriptor ``fd`` is the file now at ``path`` (device and inode)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    fs = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (fs.st_dev, fs.st_ino)


def _pread_all(fd: int, start: int, end: int) -> bytes:
    """Bytes ``start:end`` of the open file ``fd`` (without moving its offset)."""
    parts = []
    while start < end:
        chunk = os.pread(fd, min(end - start, 1 << 30), start)
        if not chunk:
            break
        parts.append(chunk)
        start += len(chunk)
    return b"".join(parts)


def _shared_value(key: str, value, shared: dict, records: dict):
    """``value`` as one object per distinct value: a short string (not a row's own hash) or a
    small record of strings and integers; anything else as it is."""
    if type(value) is str and key != "row_sha256":
        return shared.setdefault(value, value)
    if type(value) is dict and all(type(x) in (str, int) for x in value.values()):
        return records.setdefault((key, *sorted(value.items())), value)
    return value


def _object_or_none(raw: bytes) -> dict | None:
    """``raw`` parsed, when it is one whole JSON object in UTF-8 (a complete row); else None."""
    try:
        row = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return row if isinstance(row, dict) else None


def _is_object(raw: bytes) -> bool:
    """Whether ``raw`` is one whole JSON object (a complete row)."""
    return _object_or_none(raw) is not None


def _fsync_dir(folder: Path) -> None:
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _take_writer_lock(path: Path, *,
                      advice: str = "wait for it to finish (one writer per grader and round)"
                      ) -> int:
    """Lock ``path``'s lock file; the descriptor holding the lock.

    Raises
    ------
    ProtocolError
        Another process (or another open store in this one) holds the lock.
    """
    lpath = lock_path(path)
    while True:
        fd = os.open(lpath, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ProtocolError(f"{path.as_posix()}: another relgrade process is writing this "
                                f"grade file; {advice}") from None
        if _same_file(fd, lpath):  # not a lock file its last holder unlinked meanwhile
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)


def _release_writer_lock(fd: int, path: Path) -> None:
    lpath = lock_path(path)
    with contextlib.suppress(OSError):
        if _same_file(fd, lpath):
            lpath.unlink()
    os.close(fd)


@contextlib.contextmanager
def writer_lock(path, *, advice: str = "wait for it to finish"):
    """Hold the writer's lock of the grade file ``path`` (the one :class:`GradeStore` takes).

    For writers that replace the whole file (``relgrade grade import``): while the lock is
    held no store has the file open, and leftovers of an interrupted writer are cleaned.
    ``advice`` ends the message of the refusal. The grade file is not created, and a folder
    made for the lock is removed again when it stays empty.

    Raises
    ------
    ProtocolError
        A store (``grade run``, ``serve``) or another import holds the file.
    """
    path = Path(path)
    made_dir = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = _take_writer_lock(path, advice=advice)
        try:
            clean_litter(path)
            yield
        finally:
            _release_writer_lock(fd, path)
    finally:
        if made_dir:  # a folder made for nothing is left out too
            with contextlib.suppress(OSError):
                path.parent.rmdir()


def clean_litter(path) -> list[Path]:
    """Remove what interrupted writers left beside the grade file ``path``.

    Removed: temporary files of atomic writes of this round's files (``.round-N.*.tmp``), and
    the grade file itself when it is empty. Call only while holding the writer's lock.

    Returns
    -------
    list of Path
        The files removed.
    """
    path = Path(path)
    stem = path.name.split(".", 1)[0]
    gone = []
    for tmp in sorted(path.parent.glob(f".{stem}.*.tmp")):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            gone.append(tmp)
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size == 0:
            path.unlink()
            gone.append(path)
    return gone


@dataclass
class Recovery:
    """What :meth:`GradeStore.open` repaired.

    Attributes
    ----------
    truncated_bytes : int
        Bytes cut from the end of the file (0 when nothing was torn).
    reason : str
        ``""``, ``"interrupted batch"`` (marker-guided) or ``"torn last line"``.
    """

    truncated_bytes: int = 0
    reason: str = ""


@dataclass
class GradeStore:
    """An append-only JSON Lines file of rows, opened by one writer at a time.

    Parameters
    ----------
    path : str or os.PathLike
        The file (created with its folder when missing).
    key_fields : sequence of str, default ("query_id", "chunk_id")
        The fields that identify a row; a second row with the same key is refused.
    made_on : callable, optional
        Grade row → what it is made on (:data:`relgrade.schema.MADE_ON`); when given, every
        row written is first recorded in the bank sidecar (:func:`bank_path`). One with a
        ``for_rows`` method (a block of rows → such a callable for them, e.g.
        :class:`relgrade.experiment.made_on.MadeOnNow`) is asked once per block when
        :meth:`import_rows` writes.
    carried : callable, optional
        ``(latest row, its made-on dict) -> bool``: a recorded grade whose rubric alone
        differs from now is current when this says so (a rubric revision left its sections
        alone); without it, any difference makes it outdated.

    Attributes
    ----------
    rows : list of (int, dict)
        ``(line_number, row)`` of every recorded row, in file order, key order kept.
    recovery : Recovery
        What opening the file repaired.
    replacements : list of str
        One message per time the file was found replaced on disk and re-opened.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with GradeStore(os.path.join(d, "round-1.jsonl")).open() as store:
    ...     n = store.append([{"query_id": "q1", "chunk_id": "c1", "reason": "defines it", "grade": 2}])
    ...     (n, len(store), ("q1", "c1") in store)
    (1, 1, True)
    """

    path: Path
    key_fields: Sequence[str] = ("query_id", "chunk_id")
    made_on: Callable[[dict], dict | None] | None = None
    #: ``(row, made-on dict) -> bool``: whether a recorded grade made under an earlier rubric
    #: is still current (:meth:`relgrade.protocol.rubric.Carry.carried`); None: never.
    carried: Callable[[dict, dict], bool] | None = None
    rows: list = field(default_factory=list, init=False)
    recovery: Recovery = field(default_factory=Recovery, init=False)
    replacements: list = field(default_factory=list, init=False)
    _fd: int | None = field(default=None, init=False, repr=False)
    _marker_fd: int | None = field(default=None, init=False, repr=False)
    _lock_fd: int | None = field(default=None, init=False, repr=False)
    _stale: bool = field(default=False, init=False, repr=False)
    _keys: set = field(default_factory=set, init=False, repr=False)
    _size: int = field(default=0, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _made: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        self.path = Path(self.path)
        self.key_fields = tuple(self.key_fields)

    # --- opening and recovery ----------------------------------------------------------

    def open(self) -> "GradeStore":
        """Lock the file, repair an interrupted append, and read the recorded rows.

        Returns
        -------
        GradeStore
            ``self``, usable as a context manager (closing on exit).

        Raises
        ------
        ProtocolError
            Another process (or another open store in this one) holds the file.
        InputError
            A complete line of the file is not a JSON object, or two rows share a key.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stale = False
        self._lock_fd = _take_writer_lock(self.path)
        try:
            clean_litter(self.path)
            self._open_data(wait=0.0)
            self._recover()
            self._read()
            self._read_made()
            self._marker_fd = os.open(marker_path(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        except BaseException:
            self.close()
            raise
        return self

    def _open_data(self, *, wait: float) -> None:
        """Open and ``flock`` the file now at the path (created when missing).

        Retries when the file is replaced between the open and the lock; waits up to ``wait``
        seconds for an importer that holds the file itself.
        """
        deadline = time.monotonic() + wait
        while True:
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            if created:  # make the new file's name durable too
                _fsync_dir(self.path.parent)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise ProtocolError(
                        f"{self.path}: another relgrade process is writing this grade file; "
                        "wait for it to finish (one writer per grader and round)") from None
                time.sleep(0.05)
                continue
            if _same_file(fd, self.path):
                self._fd = fd
                return
            os.close(fd)  # replaced between open and lock: take the new one

    def _is_current(self) -> bool:
        return not self._stale and self._fd is not None and _same_file(self._fd, self.path)

    def _reopen(self, when: str) -> None:
        """The file at the path is not the one held: say so, then hold and re-read the new one."""
        message = (f"{self.path}: the grade file was replaced on disk while relgrade held it "
                   f"({when}); re-reading the file now at that path, and appending there: "
                   "grades already in it count as recorded, a batch is acknowledged only once "
                   "it is in that file")
        self.replacements.append(message)
        logging.getLogger("relgrade").warning(message)
        self._stale = True  # until the new file is held and read: a failure here is retried
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._marker_fd is not None:
            os.close(self._marker_fd)
            self._marker_fd = None
        self._open_data(wait=30.0)
        self._recover()
        self._read()
        self._read_made()
        self._marker_fd = os.open(marker_path(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        self._stale = False

    def _recover(self) -> None:
        size = os.fstat(self._fd).st_size
        mpath = marker_path(self.path)
        target = size
        reason = ""
        if mpath.exists():
            m = _MARKER_RE.match(mpath.read_bytes()[:_MARKER_SIZE])
            if m:
                offset, end = int(m.group(1)), int(m.group(2))
                # end > size: the append was cut short; keep only what came before it.
                if offset <= size < end:
                    target, reason = offset, "interrupted batch"
        if target == size and size > 0:
            # A last line without its LF is torn, whatever wrote it.
            tail = _pread_all(self._fd, max(0, size - 65536), size)
            if not tail.endswith(b"\n") and _is_object(tail[tail.rfind(b"\n") + 1:]):
                # A complete row without its line end (an editor's save): keep it, end it.
                os.write(self._fd, b"\n")
                os.fsync(self._fd)
            elif not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n")
                if cut >= 0:
                    target = size - len(tail) + cut + 1
                elif size <= 65536:
                    target = 0
                else:  # one enormous line: scan the whole file for the last LF
                    data = _pread_all(self._fd, 0, size)
                    target = data.rfind(b"\n") + 1
                reason = "torn last line"
        if target < size:
            os.ftruncate(self._fd, target)
            os.fsync(self._fd)
            self.recovery = Recovery(truncated_bytes=size - target, reason=reason)
        if mpath.exists():
            mpath.unlink()

    def _read(self) -> None:
        # through the descriptor held, never the path: the path may name another file by now
        data = _pread_all(self._fd, 0, os.fstat(self._fd).st_size)
        rows, keys = [], set()
        for i, raw in enumerate(data.split(b"\n")[:-1] if data else [], start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise InputError("a recorded grade line is not valid JSON", path=self.path,
                                 line=i, found=str(e),
                                 fix="Repair or remove that line by hand; relgrade never "
                                     "drops a complete recorded line") from None
            if not isinstance(row, dict):
                raise InputError("each line must be a JSON object", path=self.path, line=i,
                                 found=type(row).__name__)
            key = self._key(row)
            if key in keys and self.made_on is None:
                # with a bank, a later row of a pair is a stale pair graded again (the
                # grades stage checks that the two were made on different content)
                raise InputError("second row for one pair", path=self.path, line=i,
                                 item=str(key))
            keys.add(key)
            rows.append((i, row))
        # swapped in whole: a reader on another thread never sees half of a re-read
        self.rows, self._keys, self._size = rows, keys, len(data)

    # --- state -------------------------------------------------------------------------

    def _read_made(self) -> None:
        """What each recorded pair's latest grade was made on: the bank line paired with its
        last row (never the pair's last bank line), after cutting away trailing bank lines of
        a batch that never got its rows (:func:`trim_bank`)."""
        self._made = {}
        if self.made_on is None:
            return
        records = trim_bank(self.path, self.rows)
        for (_, row), line in zip(self.rows, records or []):
            self._made[self._key(row)] = tuple(line.get(k) for k in MADE_ON)

    def _made_now(self, row) -> tuple | None:
        m = self.made_on(row)
        return None if m is None else tuple(m.get(k) for k in MADE_ON)

    def _outdated(self, key, row) -> bool:
        """Whether recorded ``key`` was graded on other content, intent or rubric than
        ``row`` would be now: then a new grade of it is taken (the old one stays)."""
        if self.made_on is None or key not in self._made:
            return False
        now = self._made_now(row)
        return now is not None and now != self._made[key]

    def is_current(self, key) -> bool:
        """Whether ``key`` is recorded with a grade made on what the packets show now.

        Without ``made_on``, whether it is recorded at all (as ``key in store``).
        """
        k = tuple(str(x) for x in key)
        with self._lock:
            if k not in self._keys:
                return False
            if self.made_on is None or k not in self._made:
                return True
            return self._current(k)

    def _current(self, k, latest: dict | None = None) -> bool:
        """Whether recorded key ``k``'s latest grade is current (``latest``: key → its last
        row, when the caller has it)."""
        now = self._made_now(dict(zip(self.key_fields, k)))
        if now == self._made[k]:
            return True
        if self.carried is None or now is None:
            return False
        moved = {f for f, a, b in zip(MADE_ON, now, self._made[k]) if a != b}
        if not moved <= {"rubric_version", "rubric_sha256"}:
            return False
        row = (latest.get(k) if latest is not None else
               next((r for _, r in reversed(self.rows) if self._key(r) == k), None))
        return row is not None and bool(self.carried(row, dict(zip(MADE_ON, self._made[k]))))

    def current_keys(self) -> frozenset:
        """Recorded keys whose latest grade was made on what the packets show now.

        Without ``made_on``, every recorded key; a key without a bank line counts as
        recorded too (never graded twice here: the grades stage refuses such a file).
        """
        with self._lock:
            if self.made_on is None:
                return frozenset(self._keys)
            latest = ({self._key(r): r for _, r in self.rows} if self.carried is not None
                      else None)
            return frozenset(k for k in self._keys
                             if k not in self._made or self._current(k, latest))

    def _key(self, row) -> tuple:
        return tuple(str(row.get(k)) for k in self.key_fields)

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, key) -> bool:
        return tuple(str(k) for k in key) in self._keys

    @property
    def keys(self) -> frozenset:
        """The keys (tuples of ``key_fields`` values, as str) of every recorded row."""
        with self._lock:
            return frozenset(self._keys)

    # --- appending ---------------------------------------------------------------------

    def append(self, rows: Iterable[dict], *, note: dict | None = None) -> int:
        """Append one batch of rows durably, all or nothing.

        Parameters
        ----------
        rows : iterable of dict
            The batch, already validated by the caller; written as canonical JSON lines in
            the given key order.
        note : dict, optional
            Further fields for each row's bank line (e.g. ``{"cache": "hit"}``); ignored by
            a store without ``made_on``.

        Returns
        -------
        int
            The number of rows appended.

        Raises
        ------
        ProtocolError
            The store is not open.
        InputError
            A row's key is already recorded, or appears twice in the batch, or a row holds
            text that cannot be written as UTF-8 (nothing is written).
        """
        result = self.append_many([rows], notes=[note])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def append_many(self, batches: Sequence[Iterable[dict]],
                    notes: Sequence[dict | None] | None = None) -> list:
        """Append several batches with one marker and one ``fsync`` (a group commit).

        Each batch is checked on its own: a batch with a key already recorded (or recorded
        by an earlier batch of the group, or repeated within itself) is left out and gets an
        :class:`~relgrade.errors.InputError`; the others are written together. A crash
        during the write loses the whole group and nothing before it.

        Parameters
        ----------
        batches : sequence of iterable of dict
            The batches, in the order to write them.
        notes : sequence of (dict or None), optional
            Per batch, further fields for its rows' bank lines (see :meth:`append`).

        Returns
        -------
        list
            Per batch, the number of rows written or the ``InputError`` that refused it.

        Raises
        ------
        ProtocolError
            The store is not open.
        """
        batches = [[dict(r) for r in rows] for rows in batches]
        notes = [None] * len(batches) if notes is None else list(notes)
        results: list = []
        accepted = []
        with self._lock:
            if self._fd is None and not self._stale:
                raise ProtocolError(f"{self.path}: the grade store is not open")
            if not self._is_current():
                self._reopen("found before writing a batch")
            taken: set = set()
            for rows, note in zip(batches, notes):
                keys = [self._key(r) for r in rows]
                seen: set = set()
                bad = None
                for k, r in zip(keys, rows):
                    if (k in self._keys and not self._outdated(k, r)) or k in taken or k in seen:
                        bad = k
                        break
                    seen.add(k)
                if bad is not None:
                    results.append(InputError(
                        "pair already recorded for this grader", path=self.path,
                        item=", ".join(bad), fix="A saved grade is final; nothing was written"))
                    continue
                try:
                    jsonl_bytes(rows)
                except UnicodeEncodeError as e:  # e.g. a lone surrogate that skipped validation
                    results.append(InputError(
                        "a row holds text that cannot be written as UTF-8", path=self.path,
                        found=e.object[e.start:e.end].encode("utf-8", "backslashreplace")
                        .decode("ascii"), fix="Nothing of this batch was written"))
                    continue
                taken |= seen
                accepted.append((rows, keys, note))
                results.append(len(rows))
            if not taken:
                return results
            pending = [(k, r, note) for rows, keys, note in accepted
                       for k, r in zip(keys, rows)]
            for _ in range(_MAX_REOPENS):
                # Rows already in the file at the path (a re-read after a replacement) count.
                todo = [(k, r, note) for k, r, note in pending
                        if k not in self._keys or self._outdated(k, r)]
                if todo:
                    self._write_block([r for _, r, _ in todo], [n for _, _, n in todo])
                if self._is_current():
                    break
                self._reopen("found after appending a batch; it went to the old file")
            else:
                raise ProtocolError(f"{self.path}: the grade file keeps being replaced on disk; "
                                    "nothing more is acknowledged. Stop whatever rewrites it "
                                    "and run relgrade again")
            line = (self.rows[-1][0] + 1) if self.rows else 1
            for k, r, _ in todo:
                self._keys.add(k)
                if self.made_on is not None:
                    self._made[k] = self._made_now(r)
                self.rows.append((line, r))
                line += 1
        return results

    def _write_block(self, rows: list, notes: list | None = None) -> None:
        """Append ``rows`` (their bank lines first) under the in-flight marker, then ``fsync``.

        A write the disk does not take whole leaves neither file longer than before: both are
        cut back and :class:`~relgrade.errors.StorageError` is raised (nothing acknowledged).
        """
        data = jsonl_bytes(rows)
        bank_size = None
        if self.made_on is not None:
            bank_size = append_bank(self.path, bank_rows(rows, self.made_on,
                                                         graded_at=now_utc(), notes=notes))
        offset, end = self._size, self._size + len(data)
        record = (b"relgrade-inflight %020d %020d" % (offset, end))
        try:
            os.pwrite(self._marker_fd, record.ljust(_MARKER_SIZE - 1) + b"\n", 0)
            os.fdatasync(self._marker_fd)
        except OSError as e:
            error = storage_error(marker_path(self.path), e)
        else:
            try:
                write_all(self._fd, data, path=self.path, start=offset)
                error = None
            except StorageError as e:
                error = e
        if error is not None:
            if bank_size is not None:  # its bank lines must not outlive the refused rows
                try:
                    cut_bank(self.path, bank_size)
                except OSError:
                    self._stale = True  # re-open (and trim) before anything more is written
            with contextlib.suppress(OSError):
                os.pwrite(self._marker_fd, _IDLE, 0)
            raise error
        os.pwrite(self._marker_fd, _IDLE, 0)
        self._size = end

    def close(self) -> None:
        """Release the lock and remove the (idle) marker and an empty file; safe to call twice."""
        with self._lock:
            if self._marker_fd is not None:
                os.close(self._marker_fd)
                self._marker_fd = None
                mpath = marker_path(self.path)
                if mpath.exists():
                    mpath.unlink()
            if self._fd is not None:
                try:
                    if self._is_current() and os.fstat(self._fd).st_size == 0:
                        self.path.unlink()  # an empty grade file records nothing
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                finally:
                    os.close(self._fd)
                    self._fd = None
            if self._lock_fd is not None:
                _release_writer_lock(self._lock_fd, self.path)
                self._lock_fd = None

    # --- importing -------------------------------------------------------------------

    def import_rows(self, rows: Sequence[dict], *, check=None, source=None,
                    note: dict | None = None, skipped: list | None = None) -> int:
        """Add a file's worth of already-validated rows, all or nothing, under the lock.

        The import holds the writer lock that :meth:`open` takes (:func:`writer_lock`), so it
        refuses rather than race a grading run; it refuses while an interrupted batch is not
        recovered yet (the next :meth:`open` repairs it); it refuses every row whose key is
        already recorded with a grade that is still current (with ``made_on``: a recorded
        pair whose grade was made on other content, intent or rubric than ``made_on`` gives
        now is stale, and its new row is taken as a new grade, the old one kept). The
        recorded bytes are kept as they are and the new rows are written after them, the
        whole file replaced atomically. A file that did not exist is not left behind (nor a
        folder made for it) when the import is refused.

        Parameters
        ----------
        rows : sequence of dict
            The rows to add, in order, each with the keys to write (written as canonical
            JSON lines in that key order); a :class:`FrameRows` or :class:`TableRows`
            makes them a block at a time (read again on each pass, so never more than a
            block of dicts at once).
        check : callable, optional
            Called with the recorded rows, ``[(line, row), ...]``, before anything is
            compared, e.g. to validate them as the grades stage would; it raises to refuse.
        source : str or os.PathLike, optional
            The file the rows come from, named in the refusal of already recorded keys.
        note : dict, optional
            Fields every new row's bank line gets after ``graded_at`` (e.g. the file the
            grades were imported from, :func:`relgrade.protocol.grades.imported_from`).
        skipped : list, optional
            When given, a row whose key is recorded with a current grade and whose canonical
            JSON line equals the recorded line byte for byte (the same grade and reason,
            exported again) is skipped rather than refused, and its key appended here; a
            recorded key with any other line is still refused.

        Returns
        -------
        int
            The number of rows recorded afterwards (before + added).

        Raises
        ------
        ProtocolError
            Another process holds the file, or an interrupted batch is not recovered.
            (Bank lines a stopped import left past the grade file's last row, or in a
            sidecar with no grade file, are not an interrupted batch: they are cut first.)
        InputError
            A recorded line is not a JSON object; ``check`` refuses the recorded rows; a
            row's key is already recorded (naming up to ten of them; nothing is written);
            the grade file and its bank sidecar disagree in their body.
        StorageError
            The disk did not take the whole write; nothing was imported.
        """
        target = self.path
        with writer_lock(target, advice="import when it has finished"):
            inflight = marker_path(target)
            if inflight.exists() and inflight.read_bytes().startswith(b"relgrade-inflight"):
                raise ProtocolError(f"{target.as_posix()}: a grading batch was interrupted "
                                    "and is not recovered yet; rerun `relgrade grade run` for "
                                    "this grader first, then import")
            before = target.read_bytes() if target.exists() else b""
            recorded = list(iter_jsonl(target)) if before else []
            if check is not None:
                check(recorded)
            done_keys = {self._key(row) for _, row in recorded}
            made = {}
            if self.made_on is not None:
                # bank lines past the last recorded row were left by a write that stopped
                # (a killed import or batch, never acknowledged; with no grade file yet, all
                # of them): cut before anything is added, as opening the store cuts them, so
                # the new rows pair with their own lines. Then what each recorded pair's
                # latest grade was made on (its paired record).
                records = trim_bank(target, recorded)
                for (_, row), line in zip(recorded, records or []):
                    made[self._key(row)] = tuple(line.get(k) for k in MADE_ON)

            def stale(k, r):  # recorded, but made on other content, intent or rubric
                if k not in made:
                    return False
                now = self._made_now(r)
                return k in made and now is not None and now != made[k]

            if skipped is not None:
                if done_keys:
                    latest = {self._key(row): canonical_json(row) for _, row in recorded}
                    same = {i for i, r in enumerate(rows) if self._key(r) in done_keys
                            and not stale(self._key(r), r)
                            and latest[self._key(r)] == canonical_json(r)}
                    skipped.extend(self._key(r) for i, r in enumerate(rows) if i in same)
                    if same:
                        rows = [r for i, r in enumerate(rows) if i not in same]
                if not len(rows):
                    return len(recorded)
            again = [self._key(r) for r in rows
                     if self._key(r) in done_keys and not stale(self._key(r), r)] if done_keys else []
            if again:
                shown = ", ".join(f"({', '.join(k)})" for k in again[:10])
                name = Path(source).name if source is not None else "the imported file"
                n = len(again)
                raise InputError(f"{n} pair{'s' if n != 1 else ''} already recorded in "
                                 f"{target.as_posix()}", path=source,
                                 found=shown + (" ..." if n > 10 else ""),
                                 fix=f"Remove {'them' if n != 1 else 'it'} from {name}; "
                                     "recorded grades are never replaced (a changed grade "
                                     "needs a new round, or, once the key is frozen, "
                                     "`relgrade grade correct` records a post-hoc correction "
                                     "beside it)")
            if before and not before.endswith(b"\n"):
                before += b"\n"
            # One pass, a block at a time: each block's dicts are made once, its bank lines
            # appended and synced, then its grade lines written to the temporary file that
            # replaces the grade file after the last block. So every bank line is on disk
            # before the grade file holds its row; a refusal (a pair whose made-on is
            # unknown) or a failure in any block cuts the sidecar back to its size before
            # the first (removing it when the import made it) and leaves the grade file as
            # it was.
            blocks = _row_blocks(rows, IMPORT_BLOCK)
            try:
                if self.made_on is None:
                    write_blocks(target, itertools.chain(
                        [before], (jsonl_bytes(block) for block in blocks)))
                else:
                    graded_at = now_utc()
                    with LineAppender(bank_path(target), remove_created=True) as bank:
                        write_blocks(target, self._import_lines(before, blocks, bank,
                                                                graded_at=graded_at,
                                                                note=note))
            except StorageError:
                raise
            except OSError as e:
                raise storage_error(target, e) from None
            return len(recorded) + len(rows)

    def _import_lines(self, before: bytes, blocks, bank: "LineAppender", *, graded_at: str,
                      note: dict | None):
        """The grade file's bytes for :meth:`import_rows`, block by block: ``before``, then
        each block's grade lines, once that block's bank lines are appended to ``bank``.
        A ``made_on`` with a ``for_rows`` method (block → made-on function) looks each
        block up at once."""
        yield before
        for block in blocks:
            made_on = self.made_on
            if hasattr(made_on, "for_rows"):
                made_on = made_on.for_rows(block)
            bank.write(jsonl_bytes(bank_rows(block, made_on, graded_at=graded_at,
                                             notes=[note] * len(block))))
            yield jsonl_bytes(block)

    def __enter__(self) -> "GradeStore":
        return self if self._fd is not None else self.open()

    def __exit__(self, *exc) -> None:
        self.close()


def _row_blocks(rows, step: int):
    """``rows`` (a sequence of dicts) as lists of at most ``step`` dicts, in order; rows
    that make their own blocks (``rows.blocks()``, e.g. :class:`TableRows`) give those."""
    if hasattr(rows, "blocks"):
        yield from rows.blocks(step)
        return
    for i in range(0, len(rows), step):
        yield list(rows[i:i + step])


class FrameRows(Sequence):
    """A table's rows as dicts (column → value), made a block at a time as they are read.

    What :meth:`GradeStore.import_rows` takes, without a dict per row of a whole file in
    memory at once: iterating or slicing makes the dicts of :data:`IMPORT_BLOCK` rows (or
    of the slice) with ``DataFrame.to_dict("records")``, the same values that call gives for
    the whole table.

    Parameters
    ----------
    frame : pandas.DataFrame of shape (n_rows, n_columns)
        The rows, in order; its columns are the dicts' keys, in order.

    Examples
    --------
    >>> import pandas as pd
    >>> rows = FrameRows(pd.DataFrame({"query_id": ["q1", "q2"], "grade": [0, 2]}))
    >>> len(rows), rows[1], list(rows) == rows[0:2]
    (2, {'query_id': 'q2', 'grade': 2}, True)
    """

    def __init__(self, frame):
        self.frame = frame

    def __len__(self) -> int:
        return len(self.frame)

    def __getitem__(self, at):
        if isinstance(at, slice):
            return self.frame.iloc[at].to_dict("records")
        return self.frame.iloc[[at]].to_dict("records")[0]

    def __iter__(self):
        for i in range(0, len(self.frame), IMPORT_BLOCK):
            yield from self.frame.iloc[i:i + IMPORT_BLOCK].to_dict("records")


class TableRows:
    """Rows as dicts made from Arrow tables a block at a time, on every pass.

    What :meth:`GradeStore.import_rows` takes for a file read a block of lines at a time
    (:class:`relgrade.io.grade_columns.GradeBlocks`): the tables are read again on each
    pass, and only one block's dicts exist at once.

    Parameters
    ----------
    tables : iterable of pyarrow.Table
        Re-iterable (each ``iter`` reads from the start); each table holds ``columns``.
    n_rows : int
        How many rows all the tables hold together (``len``).
    columns : sequence of str
        The dicts' keys, in order (e.g. :data:`relgrade.schema.ROW_COLUMNS`).

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"query_id": ["q1", "q2"], "grade": [0, 2], "extra": [1, 1]})
    >>> rows = TableRows([t, t], 4, ["query_id", "grade"])
    >>> len(rows), list(rows)[1], [len(b) for b in rows.blocks(3)]
    (4, {'query_id': 'q2', 'grade': 2}, [2, 2])
    """

    def __init__(self, tables, n_rows: int, columns):
        self.tables = tables
        self.n_rows = int(n_rows)
        self.columns = list(columns)

    def __len__(self) -> int:
        return self.n_rows

    def blocks(self, rows: int = 0):
        """The rows as lists of dicts, in order: each table's rows, in lists of at most
        ``rows`` (default :data:`IMPORT_BLOCK`)."""
        rows = rows or IMPORT_BLOCK
        for table in self.tables:
            table = table.select(self.columns)
            for i in range(0, table.num_rows, rows):
                yield table.slice(i, rows).to_pylist()

    def __iter__(self):
        for block in self.blocks():
            yield from block


class SingleWriter:
    """The one thread that appends batches to grade stores.

    Workers (grading threads, web requests, an import) call :meth:`submit` and may wait on
    the returned future, which resolves once the batch is on disk (after its ``fsync``).
    Batches are written in submission order, each as one contiguous block, so rows of two
    batches never interleave, whichever stores they go to. Batches that queue up while a
    write is in progress are written together with one ``fsync`` (a group commit, see
    :meth:`GradeStore.append_many`).

    Examples
    --------
    >>> import tempfile, os
    >>> store = GradeStore(os.path.join(tempfile.mkdtemp(), "r.jsonl")).open()
    >>> with SingleWriter() as writer:
    ...     writer.submit(store, [{"query_id": "q", "chunk_id": "c", "reason": "", "grade": 0}]).result()
    1
    >>> store.close()
    """

    _STOP = object()

    #: The most batches written with one ``fsync``.
    max_group = 64

    def __init__(self):
        self._queue: queue.Queue = queue.Queue()
        self._gate = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="relgrade-writer", daemon=True)
        self._closed = False
        self._thread.start()

    def _loop(self) -> None:
        while True:
            items = [self._queue.get()]
            # Group commit: take whatever else is already waiting, up to a bound.
            while len(items) < self.max_group:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(it is self._STOP for it in items)
            work = [it for it in items if it is not self._STOP]
            by_store: dict[int, list] = {}
            for store, rows, note, future in work:
                if future.set_running_or_notify_cancel():
                    by_store.setdefault(id(store), []).append((store, rows, note, future))
            for group in by_store.values():
                store = group[0][0]
                try:
                    results = store.append_many([rows for _, rows, _, _ in group],
                                                notes=[note for _, _, note, _ in group])
                except BaseException as e:  # handed back to every submitter
                    for _, _, _, future in group:
                        future.set_exception(e)
                    continue
                for (_, _, _, future), result in zip(group, results):
                    if isinstance(result, BaseException):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
            if stop:
                return

    def submit(self, store: GradeStore, rows: Sequence[dict], *,
               note: dict | None = None) -> concurrent.futures.Future:
        """Queue one batch for ``store``; the future gives the row count or the error.

        ``note`` adds fields to the batch's bank lines (see :meth:`GradeStore.append`).
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._gate:
            if self._closed:
                raise ProtocolError("the grade writer is closed")
            self._queue.put((store, list(rows), note, future))
        return future

    def close(self) -> None:
        """Write every batch already queued, then stop the thread."""
        with self._gate:
            if self._closed:
                return
            self._closed = True
            self._queue.put(self._STOP)
        self._thread.join()

    def __enter__(self) -> "SingleWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
