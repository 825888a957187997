"""Reading and writing files: the only module of the library that touches the disk.

Text inputs accept a UTF-8 byte-order mark and CRLF line ends; invalid UTF-8 is rejected
with the line it is on. Writes are atomic (a temporary file in the same folder, fsync, then
``os.replace``), so a failed stage leaves no half-written output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

from relgrade.canonical import jsonl_bytes
from relgrade.errors import InputError

BOM = b"\xef\xbb\xbf"

#: The byte-order marks of UTF-16 (little- and big-endian).
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# --- paths given on a command line -----------------------------------------------------

def require_input_file(path, *, option: str | None = None) -> Path:
    """``path`` as an existing file to read, or the error that says why it is not one.

    Parameters
    ----------
    path : str or os.PathLike
        A path the user gave (a command's argument or option).
    option : str, optional
        The argument or option it came from (``--ab``), named in the error.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    InputError
        ``file not found`` (nothing at ``path``) or ``is a folder, not a file``, naming the
        path and ``option``.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, not a file", path=path, item=option,
                         fix="Give the file's path")
    if not path.is_file():
        raise InputError("file not found", path=path, item=option)
    return path


def require_output_file(path, *, option: str | None = None) -> Path:
    """``path`` as a file a command may write: not a folder, its folder not a file.

    Parameters
    ----------
    path : str or os.PathLike
        The output path the user gave.
    option : str, optional
        The option it came from (``--out``), named in the error.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    InputError
        ``path`` is a folder (``is a folder, where the output file goes``), or a part of
        its folder path is a file.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, where the output file goes", path=path, item=option,
                         fix="Give a file's path (in that folder, if it is the place)")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise InputError("a part of this path is a file, where a folder is expected",
                             path=path, item=option, found=parent.as_posix())
    return path


# --- hashing files ----------------------------------------------------------------------

def sha256_file(path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- reading text --------------------------------------------------------------------

def utf16_found(data: bytes) -> str | None:
    """What shows that ``data`` (a file's first bytes) is UTF-16 text, or None.

    Parameters
    ----------
    data : bytes
        The file's first bytes (any length; the first line, at most 64 bytes of it, is read).

    Returns
    -------
    str or None
        ``"the UTF-16 byte-order mark 0xff 0xfe"`` (or ``0xfe 0xff``) when ``data`` starts with
        one; ``"byte 0x00 at column N"`` (N 1-based, the first NUL) when the first line's
        bytes alternate NUL and ASCII (UTF-16 without a mark: ``"1\\x00 \\x00"``), in either
        order, over at least two characters; else None.

    Examples
    --------
    >>> utf16_found(b"\\xff\\xfeq\\x001\\x00")
    'the UTF-16 byte-order mark 0xff 0xfe'
    >>> utf16_found("q1 Q0 c1 1".encode("utf-16-le"))
    'byte 0x00 at column 2'
    >>> utf16_found(b"q1 Q0 c1 1") is None
    True
    """
    for mark in UTF16_BOMS:
        if data.startswith(mark):
            return f"the UTF-16 byte-order mark 0x{mark[0]:02x} 0x{mark[1]:02x}"
    first = data[:64].split(b"\n", 1)[0]
    pairs = len(first) // 2
    if pairs < 2:
        return None
    even, odd = first[0:2 * pairs:2], first[1:2 * pairs:2]
    for text, nul in ((even, odd), (odd, even)):
        if not nul.strip(b"\x00") and all(0 < b < 0x80 for b in text):
            return f"byte 0x00 at column {first.index(0) + 1}"
    return None


def refuse_utf16(path, data: bytes) -> None:
    """Refuse a file whose first bytes ``data`` look like UTF-16 (:func:`utf16_found`).

    The one place relgrade's text readers word it: ``FILE:1: not valid UTF-8: looks like
    UTF-16; save it as UTF-8 (found ...)``, instead of a byte 0xff that is not UTF-8 or a
    field holding NUL bytes.

    Raises
    ------
    InputError
        At ``path``, line 1, when ``data`` looks like UTF-16.
    """
    found = utf16_found(data)
    if found is not None:
        raise InputError("not valid UTF-8: looks like UTF-16; save it as UTF-8", path=path,
                         line=1, found=found)


def json_error(e: json.JSONDecodeError, *, path, line: int,
               cut_off: bool = False) -> InputError:
    """The error for JSON that does not parse, worded as one phrase with its column.

    Parameters
    ----------
    e : json.JSONDecodeError
        The parser's error (``e.msg`` ``"Unterminated string starting at"``, ``e.colno``).
    path : str or os.PathLike
        The file.
    line : int
        The 1-based line the error names.
    cut_off : bool, default False
        The line is the file's last and has no line end: it is said to look cut off (an
        interrupted write), with the fix for a grade file.

    Returns
    -------
    InputError
        ``not valid JSON: unterminated string starting at column 41``; cut off, that
        followed by ``: the last line has no line end, so it looks cut off (an interrupted
        write)`` and the fix.

    Examples
    --------
    >>> import json
    >>> try:
    ...     json.loads('{"a": "b')
    ... except json.JSONDecodeError as e:
    ...     print(json_error(e, path="g.jsonl", line=3))
    g.jsonl:3: not valid JSON: unterminated string starting at column 7
    """
    words = e.msg[:1].lower() + e.msg[1:]  # "Unterminated string starting at" ends in "at"
    rule = f"not valid JSON: {words}{'' if words.endswith(' at') else ' at'} column {e.colno}"
    if not cut_off:
        return InputError(rule, path=path, line=line)
    rule += ("; it is the last line and has no line end, so it looks cut off (an interrupted "
             "write)")
    return InputError(rule, path=path, line=line,
                      fix="For a grade file, run `relgrade grade run` for its grader again: "
                          "opening the file cuts a torn last line away, and its pair is "
                          "graded again. For another file, write it again")


def _ends_with_newline(path) -> bool:
    """Whether the file at ``path`` is empty or ends with ``\\n``."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_lines(path) -> list[str]:
    """Lines of a UTF-8 text file, without line ends.

    A leading BOM is dropped and CRLF/CR line ends are accepted.

    Raises
    ------
    InputError
        The file is missing, or a line is not valid UTF-8 (the error names that line; a
        file that looks like UTF-16 is named as such, see :func:`refuse_utf16`).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    refuse_utf16(path, data)
    if data.startswith(BOM):
        data = data[len(BOM):]
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for i, raw in enumerate(raw_lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise InputError("not valid UTF-8", path=path, line=i,
                             found=f"byte 0x{raw[e.start]:02x} at column {e.start + 1}") from None
    return lines


def read_utf8(path) -> str:
    """The exact text of a UTF-8 file (no BOM or line end is touched).

    Raises
    ------
    InputError
        The file is missing, or is not valid UTF-8 (the error names the line and column
        of the first byte that is not).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    refuse_utf16(path, data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError("not valid UTF-8", path=path, line=line,
                         found=f"byte 0x{data[e.start]:02x} at column {column}",
                         fix="Save the file as UTF-8") from None


def iter_jsonl(path, *, comments: str = "json") -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSON Lines file.

    Objects keep their key order (so callers can check it). Line numbers are 1-based.
    ``comments="refuse"`` refuses a line starting with ``#`` by name (judgment files have no
    comments) instead of reporting it as invalid JSON.

    Raises
    ------
    InputError
        A line is not valid JSON (worded by :func:`json_error`; a last line without its line
        end is said to look cut off), or is JSON but not an object.
    """
    lines = read_lines(path)
    ended = _ends_with_newline(path) if lines else True
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if comments == "refuse" and line.lstrip().startswith("#"):
            raise InputError("a comment line: no judgment format has comments", path=path,
                             line=i, fix="Delete the line")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            cut_off = i == len(lines) and not ended
            raise json_error(e, path=path, line=i, cut_off=cut_off) from None
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", path=path, line=i,
                             found=type(obj).__name__)
        yield i, obj


def iter_jsonl_blocks(path, *, size: int = 65_536) -> Iterator[tuple[list[int], list]]:
    """The objects of a JSON Lines file a block of lines at a time, read as they are needed.

    The lines and objects of :func:`iter_jsonl` (a leading BOM dropped, CRLF accepted, blank
    lines skipped, 1-based line numbers), but the file is read one line at a time, so memory
    holds one block, not the file.

    Parameters
    ----------
    path : str or os.PathLike
        A JSON Lines file.
    size : int, default 65,536
        The most objects in one block.

    Yields
    ------
    lines : list of int
        The file line of each object, ascending.
    objects : list
        The parsed JSON values, one per non-blank line (objects or not: the caller checks).

    Raises
    ------
    InputError
        The file is missing; a line is not valid UTF-8 or not valid JSON (naming the line).
        Unlike :func:`iter_jsonl`, whose :func:`read_lines` decodes the whole file first, an
        error is raised when its block is reached, after the blocks before it.
    """
    path = Path(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    with f:
        lines: list[int] = []
        objects: list = []
        for i, raw in enumerate(f, start=1):
            if i == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError("not valid UTF-8", path=path, line=i,
                                 found=f"byte 0x{raw[e.start]:02x} at column {e.start + 1}") from None
            if not line.strip():
                continue
            try:
                objects.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InputError("not valid JSON", path=path, line=i, found=e.msg) from None
            lines.append(i)
            if len(lines) >= size:
                yield lines, objects
                lines, objects = [], []
        if lines:
            yield lines, objects


def read_jsonl(path) -> list[dict]:
    """All objects of a JSON Lines file (see :func:`iter_jsonl`)."""
    return [obj for _, obj in iter_jsonl(path)]


def read_tsv(path, *, columns: list[str] | None = None) -> pd.DataFrame:
    """A tab-separated file with a header row, every column as ``str``.

    Raises
    ------
    InputError
        A row has a different number of fields than the header, or a required column
        in ``columns`` is missing.
    """
    lines = read_lines(path)
    if not lines:
        raise InputError("empty file (a header row is required)", path=path)
    header = lines[0].split("\t")
    rows = []
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise InputError(f"expected {len(header)} tab-separated fields", path=path,
                             line=i, found=len(fields))
        rows.append(fields)
    import pandas as pd

    df = pd.DataFrame(rows, columns=header, dtype=object)
    _require_columns(df, columns, path)
    return df


def read_table(path, *, columns: list[str] | None = None,
               only: bool = False) -> pd.DataFrame:
    """Read a table from ``.parquet``, ``.jsonl``/``.ndjson`` or ``.tsv``, by extension.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    columns : list of str, optional
        Columns the table must have.
    only : bool, default False
        Return ``columns`` alone, in that order; from a Parquet file only they are read
        (the others are never decoded), so the values are those of the whole table's.

    Raises
    ------
    InputError
        Unknown extension, unreadable file, or a column of ``columns`` missing.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = read_parquet(path, columns=_present_columns(path, columns) if only and columns
                          else None)
    elif suffix in (".jsonl", ".ndjson"):
        import pandas as pd

        df = pd.DataFrame(read_jsonl(path))
    elif suffix in (".tsv", ".tab"):
        df = read_tsv(path)
    else:
        raise InputError("unknown table format (use .parquet, .jsonl or .tsv)", path=path,
                         found=suffix or "no extension")
    _require_columns(df, columns, path)
    return df[list(columns)] if only and columns else df


def _present_columns(path: Path, columns: list[str]) -> list[str]:
    """The columns of ``columns`` a Parquet file holds (a missing one is named by the check
    that follows the read)."""
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # a missing or corrupt file: read_parquet words the error
        return list(columns)
    return [c for c in columns if c in names]


def read_column(path, column: str):
    """One column of a table file (see :func:`read_table`), as Arrow.

    A Parquet file whose column is text is read alone from the file (the other columns, a
    corpus's text say, are never decoded); any other file, or a column of another type, is
    read as :func:`read_table` reads it, so the values are the same either way.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet``, ``.jsonl``/``.ndjson`` or ``.tsv``/``.tab`` file.
    column : str
        The column to read.

    Returns
    -------
    pyarrow.ChunkedArray of shape (n_rows,)
        The column's values in row order, as text: string or large_string from Parquet,
        otherwise what :func:`read_table` gives, as text (``astype("str")``).

    Raises
    ------
    InputError
        As :func:`read_table` with ``columns=[column]``: the file is missing or unreadable,
        its extension unknown, or ``column`` missing.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if path.suffix.lower() == ".parquet" and path.exists():
        try:
            field = pq.read_schema(path).field(column)
        except KeyError:
            field = None
        except Exception:  # not readable Parquet: read_table words it
            field = None
        if field is not None and (pa.types.is_string(field.type)
                                  or pa.types.is_large_string(field.type)):
            try:
                # ParquetFile, not read_table: pyarrow.dataset, which read_table loads,
                # imports pandas (0.26 CPU-s in a process that needs no pandas)
                with pq.ParquetFile(path) as parquet:
                    return parquet.read(columns=[column])[column]
            except Exception as e:  # pyarrow raises several types for a corrupt file
                raise InputError("not a readable Parquet file", path=path,
                                 found=str(e)) from None
    values = read_table(path, columns=[column])[column]
    return pa.chunked_array([pa.array(values.astype("str"))])


def read_rows(path, columns: list[str] | None = None) -> tuple[pd.DataFrame, list[int] | None]:
    """A table (see :func:`read_table`) and the file line each of its rows is on.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet``, ``.jsonl``/``.ndjson`` or ``.tsv``/``.tab`` file.
    columns : list of str, optional
        Columns the table must have.

    Returns
    -------
    table : pandas.DataFrame
        As :func:`read_table` returns it.
    lines : list of int of length n_rows, or None
        The 1-based file line of each row, in row order: text readers skip blank lines (and
        a TSV's header row), so row ``i`` sits on ``lines[i]``. ``None`` for Parquet, which
        has no lines.

    Raises
    ------
    InputError
        As :func:`read_table`.
    """
    path = Path(path)
    table = read_table(path, columns=columns)
    if path.suffix.lower() == ".parquet":
        return table, None
    return table, _row_lines(read_lines(path), header=path.suffix.lower() in (".tsv", ".tab"))


def _row_lines(lines: list[str], *, header: bool) -> list[int]:
    """1-based line numbers of the non-blank data lines (after the header, if any)."""
    start = 1 if header else 0
    return [i + 1 for i in range(start, len(lines)) if lines[i].strip()]


def read_parquet(path, columns: list[str] | None = None) -> pd.DataFrame:
    """A Parquet file as a DataFrame (only ``columns``, in that order, when given).

    Raises
    ------
    InputError
        The file is missing or is not readable Parquet.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=path)
    import pandas as pd

    try:
        return pd.read_parquet(path, columns=columns)
    except Exception as e:  # pyarrow raises several types for a corrupt file
        raise InputError("not a readable Parquet file", path=path, found=str(e)) from None


def _require_columns(df: pd.DataFrame, columns, path) -> None:
    if not columns:
        return
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=path,
                         found="columns " + ", ".join(map(str, df.columns)))


def read_yaml(path) -> dict:
    """A YAML mapping from ``path`` (empty file → ``{}``).

    Parameters
    ----------
    path : str or os.PathLike
        The YAML file.

    Returns
    -------
    dict
        The parsed document (``{}`` for an empty file).

    Raises
    ------
    InputError
        The file is not valid YAML: the message names ``path``, the 1-based line and column
        PyYAML stopped at (its ``problem_mark``), the problem, and the line's text.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "p.yaml"
    >>> _ = f.write_text("pool:\\n  depth: 5: 3\\n")
    >>> try:
    ...     read_yaml(f)
    ... except InputError as e:
    ...     print(str(e).replace(str(f), "p.yaml"))
    p.yaml:2:11: not valid YAML (found mapping values are not allowed here: '  depth: 5: 3'). Check the indentation and the `key: value` spacing at that line, or above it
    """
    import yaml

    text = "\n".join(read_lines(path))
    fast = getattr(yaml, "CSafeLoader", None)  # libyaml's parser, when PyYAML was built with it
    if fast is not None:
        # the same constructor and resolver as yaml.safe_load, several times faster on a
        # large file (an experiment's dvc.lock); a document it refuses is parsed again below,
        # so the error names the line and column PyYAML's own parser stops at
        try:
            return yaml.load(text, Loader=fast) or {}
        except yaml.YAMLError:
            pass
    try:
        obj = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or str(e).splitlines()[0]
        if mark is None:
            raise InputError("not valid YAML", path=path, found=problem) from None
        lines = text.split("\n")
        shown = lines[mark.line] if mark.line < len(lines) else ""
        raise InputError("not valid YAML", path=path, line=mark.line + 1,
                         column=mark.column + 1,
                         found=f"{problem}: {shown!r}" if shown.strip() else problem,
                         fix="Check the indentation and the `key: value` spacing at that "
                             "line, or above it") from None
    except yaml.YAMLError as e:
        raise InputError("not valid YAML", path=path, found=str(e).splitlines()[0]) from None
    return obj or {}


def read_json(path):
    """A JSON document from ``path``."""
    try:
        return json.loads("\n".join(read_lines(path)))
    except json.JSONDecodeError as e:
        raise json_error(e, path=path, line=e.lineno) from None


def read_json_object(path) -> dict:
    """A JSON document from ``path`` that must be an object (relgrade's records and
    manifests are).

    Parameters
    ----------
    path : str or pathlib.Path
        The file, UTF-8 JSON.

    Returns
    -------
    dict
        The object, as :func:`json.loads` gives it.

    Raises
    ------
    InputError
        Not valid JSON (as :func:`read_json`), or valid JSON of another type (an array, a
        number ...), naming the file and the type found.
    """
    obj = read_json(path)
    if not isinstance(obj, dict):
        kind = {list: "an array", str: "a string", bool: "true or false",
                type(None): "null"}.get(type(obj), "a number")
        raise InputError("must be a JSON object (relgrade writes one here)", path=path,
                         found=kind, fix="Restore it (git checkout, or dvc repro rewrites it)")
    return obj


# --- atomic writing ------------------------------------------------------------------

@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    On an exception the temporary file is removed and ``path`` is left as it was. The
    folder is made if missing; a path through a file, or a folder that cannot be made or
    written, raises :class:`~relgrade.errors.InputError` naming ``path`` before anything
    is written.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except (FileExistsError, NotADirectoryError) as e:
        raise InputError("cannot write there: a part of the path is a file, not a folder",
                         path=path, found=e.filename,
                         fix="Name a file in a folder (one that exists, or can be made)") from None
    except (FileNotFoundError, PermissionError) as e:
        raise InputError("cannot write there: the folder cannot be made or written",
                         path=path, found=f"{e.strerror}: {e.filename}",
                         fix="Name a file in a folder you can write") from None
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        # mkstemp creates files 0600; give the output the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_blocks(path, blocks: Iterable[bytes]) -> None:
    """Write ``blocks`` one after another to ``path`` atomically: the bytes of
    ``write_bytes(path, b"".join(blocks))`` without the joined copy in memory.

    Parameters
    ----------
    path : str or os.PathLike
        The file; replaced whole, or left as it was.
    blocks : iterable of bytes
        Consumed once, in order.

    Raises
    ------
    InputError
        The folder cannot be made or written (:func:`atomic_path`), before any write.
    OSError
        The write or the rename failed (a full disk); ``path`` is unchanged and the
        temporary file removed.
    """
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        for block in blocks:
            f.write(block)


def write_blocks_together(paths: Sequence, blocks: Iterable[Sequence[bytes]]) -> None:
    """Write several files at once from one stream, each atomically: the files
    :func:`write_blocks` would write one after the other, made in a single pass.

    Parameters
    ----------
    paths : sequence of str or os.PathLike
        The files, each replaced whole, or all left as they were.
    blocks : iterable of sequences of bytes
        Consumed once; item ``i`` of each goes to ``paths[i]``, in order.

    Raises
    ------
    InputError
        A folder cannot be made or written (:func:`atomic_path`), before any write.
    OSError
        A write failed (a full disk): no file is replaced (nor are those that would have
        followed).
    """
    with contextlib.ExitStack() as stack:
        outs = [stack.enter_context(open(stack.enter_context(atomic_path(p)), "wb"))
                for p in paths]
        for parts in blocks:
            for f, part in zip(outs, parts):
                f.write(part)


class SameBytes:
    """Whether a stream of byte blocks is, in all, exactly a file's bytes, checked as the
    blocks come (the file read alongside, never whole).

    Parameters
    ----------
    path : str or os.PathLike
        The file; it must exist.

    Examples
    --------
    >>> import tempfile, os
    >>> fd, name = tempfile.mkstemp(); os.write(fd, b"abcdef"); os.close(fd)
    6
    >>> same = SameBytes(name); same.take(b"abc"); same.take(b"def"); same.finish()
    True
    >>> same = SameBytes(name); same.take(b"abc"); same.finish()
    False
    >>> os.remove(name)
    """

    def __init__(self, path):
        self._file = open(path, "rb")
        self._same = True

    def take(self, data) -> None:
        """Compare the next ``len(data)`` bytes of the file with ``data``."""
        if self._same:
            data = memoryview(data).cast("B")  # bytes' own format: compared as one block
            self._same = self._file.read(data.nbytes) == data

    def finish(self) -> bool:
        """True when every block so far matched and the file has no byte more; closes it."""
        same = self._same and self._file.read(1) == b""
        self._file.close()
        return same


def write_text(path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (LF line ends as given)."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path, obj, *, indent: int | None = 2) -> None:
    """Write ``obj`` as JSON (UTF-8, sorted as given, trailing newline) atomically."""
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def write_text_into(folder, name: str, text: str) -> None:
    """Write UTF-8 ``text`` as a new file ``name`` of a folder that :func:`atomic_dir` is
    filling.

    No temporary file and no fsync of its own: the folder is swapped in whole, after one
    flush of everything written into it, so each file costs one ``write`` (thousands of
    per-file fsyncs made the packets stage wait on the disk far longer than it computed).

    Raises
    ------
    FileExistsError
        ``folder/name`` exists already (a folder being filled holds only what was written).
    """
    with open(Path(folder) / name, "xb") as f:
        f.write(text.encode("utf-8"))


def write_jsonl(path, rows: Iterable[dict]) -> None:
    """Write ``rows`` as canonical JSON Lines atomically (see :mod:`relgrade.canonical`)."""
    write_bytes(path, jsonl_bytes(rows))


def write_parquet(path, df: pd.DataFrame) -> None:
    """Write ``df`` to Parquet atomically, without the pandas index."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


# Arrow type -> (pandas_type, numpy_type) as pandas' metadata names a column written from
# pandas' default dtypes (pandas 3: text is dtype `str`)
_PANDAS_TYPES = {"large_string": ("object", "str"), "string": ("object", "str"),
                 "int64": ("int64", "int64"), "double": ("float64", "float64"),
                 "bool": ("bool", "bool")}


def pandas_schema_metadata(table: pa.Table) -> bytes:
    """The ``pandas`` schema metadata pyarrow stores when it writes a DataFrame without its
    index (``DataFrame.to_parquet(index=False)``), made without importing pandas.

    Parameters
    ----------
    table : pyarrow.Table
        Columns of type large_string or string (pandas 3's ``str`` dtype), int64, float64
        or bool.

    Returns
    -------
    bytes
        The JSON pyarrow's ``pandas_compat.construct_metadata`` writes for the DataFrame
        ``table.to_pandas()`` (``json.dumps`` with its default separators): ``index_columns``
        and ``column_indexes`` empty, one entry per column (``name``, ``field_name``,
        ``pandas_type``, ``numpy_type``, ``metadata``), ``attributes``, ``creator``
        (pyarrow and its version) and ``pandas_version`` (the installed pandas' version,
        from its package metadata).

    Raises
    ------
    ValueError
        A column of another type, or a column name that is not a string.
    """
    import importlib.metadata

    import pyarrow as pa

    columns = []
    for field in table.schema:
        kind = _PANDAS_TYPES.get(str(field.type))
        if kind is None or not isinstance(field.name, str):
            raise ValueError(f"no pandas metadata for column {field.name!r} of type "
                             f"{field.type}")
        columns.append({"name": field.name, "field_name": field.name, "pandas_type": kind[0],
                        "numpy_type": kind[1], "metadata": None})
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": columns,
                       "attributes": {},
                       "creator": {"library": "pyarrow", "version": pa.__version__},
                       "pandas_version": importlib.metadata.version("pandas")}).encode()


def write_arrow_parquet(path, table: pa.Table) -> None:
    """Write an Arrow table to Parquet atomically, byte for byte as :func:`write_parquet`
    writes ``table.to_pandas()`` (the same schema metadata, :func:`pandas_schema_metadata`,
    and the same writer options), without importing pandas.

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file to write.
    table : pyarrow.Table
        Columns of the types :func:`pandas_schema_metadata` takes; its own schema metadata
        is replaced; as the round trip through pandas does, a string column is written as
        large_string and a NaN of a float column as null.

    Raises
    ------
    ValueError
        As :func:`pandas_schema_metadata`.
    InputError
        As :func:`atomic_path`: the folder cannot be made or written.
    """
    import pyarrow.parquet as pq

    table = _as_written(table)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


#: Rows in one Parquet row group as pyarrow writes a table by default (the C++ writer's
#: ``DEFAULT_MAX_ROW_GROUP_LENGTH``): :class:`ParquetBlocks` cuts its row groups alike.
ROW_GROUP_ROWS = 1024 * 1024


class ParquetBlocks:
    """A Parquet file written from blocks of rows, byte for byte as :func:`write_parquet`
    writes the DataFrame of all the blocks stacked, holding at most one row group.

    Blocks are buffered until a row group's :data:`ROW_GROUP_ROWS` rows are there; that row
    group is written and dropped. The file is written beside ``path`` and swapped in by
    :meth:`close` (as :func:`atomic_path` does); :meth:`abort`, or leaving a ``with`` block
    by an exception, removes it and leaves ``path`` as it was.

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file to write.

    Raises
    ------
    ValueError
        A block whose columns differ from the first block's, or of a type
        :func:`pandas_schema_metadata` does not take.
    InputError
        As :func:`atomic_path`: the folder cannot be made or written.

    Examples
    --------
    >>> import tempfile
    >>> import pandas as pd
    >>> out = Path(tempfile.mkdtemp()) / "t.parquet"
    >>> with ParquetBlocks(out) as w:
    ...     w.write(pd.DataFrame({"a": ["x"], "n": [1]}))
    ...     w.write(pd.DataFrame({"a": ["y"], "n": [2]}))
    >>> pd.read_parquet(out)["a"].tolist()
    ['x', 'y']
    """

    def __init__(self, path):
        self.path = Path(path)
        self._context = atomic_path(self.path)
        self._tmp = self._context.__enter__()
        self._writer = None
        self._schema = None
        self._buffer: list = []
        self._buffered = 0

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.close()
        else:
            self.abort()
        return False

    def write(self, block) -> None:
        """Append a block of rows: a pandas DataFrame (as :func:`write_parquet` takes it)
        or a pyarrow Table (as :func:`write_arrow_parquet` takes it)."""
        import pyarrow as pa

        table = block if isinstance(block, pa.Table) else pa.Table.from_pandas(
            block, preserve_index=False)
        table = _as_written(table)
        if self._schema is None:
            self._schema = table.schema
        elif table.schema != self._schema:
            raise ValueError(f"a block's columns differ from the first block's: "
                             f"{table.schema} against {self._schema}")
        if len(table):
            self._buffer.append(table)
            self._buffered += len(table)
        while self._buffered >= ROW_GROUP_ROWS:
            self._flush(ROW_GROUP_ROWS)

    def _flush(self, rows: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.concat_tables(self._buffer)
        group, rest = table.slice(0, rows).combine_chunks(), table.slice(rows)
        self._buffer = [rest] if len(rest) else []
        self._buffered = len(rest)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._tmp, group.schema)
        self._writer.write_table(group)

    def close(self) -> None:
        """Write the last row group and put the file in place."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._context is None:
            return
        if self._buffered or self._writer is None:
            if self._buffered:
                self._flush(self._buffered)
            else:  # no row at all: the file of an empty table
                if self._schema is None:
                    raise ValueError("no block was written")
                pq.write_table(pa.Table.from_batches([], schema=self._schema), self._tmp)
        if self._writer is not None:
            self._writer.close()
        context, self._context = self._context, None
        context.__exit__(None, None, None)

    def abort(self) -> None:
        """Remove the file being written; ``path`` is left as it was."""
        if self._context is None:
            return
        if self._writer is not None:
            self._writer.close()
        context, self._context = self._context, None
        try:
            raise RuntimeError("aborted")
        except RuntimeError as e:
            context.__exit__(type(e), e, e.__traceback__)


def _as_written(table):
    """``table`` with the schema :func:`write_arrow_parquet` writes: strings as
    large_string, a float NaN as null, pandas' schema metadata."""
    import pyarrow as pa
    import pyarrow.compute as pc

    metadata = pandas_schema_metadata(table)
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type):  # pandas' str dtype comes back as large_string
            table = table.set_column(i, field.with_type(pa.large_string()),
                                     table[i].cast(pa.large_string()))
        # pandas hands a float NaN to Arrow as a null
        if pa.types.is_floating(field.type) and pc.any(pc.is_nan(table[i])).as_py():
            column = table[i]
            table = table.set_column(i, field, pc.if_else(
                pc.is_nan(column), pa.scalar(None, field.type), column))
    return table.replace_schema_metadata({b"pandas": metadata})


def write_tsv(path, df: pd.DataFrame) -> None:
    """Write ``df`` as tab-separated text with a header row, atomically."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, sep="\t", index=False, lineterminator="\n")


# --- atomic folders ------------------------------------------------------------------

@contextlib.contextmanager
def atomic_dir(path) -> Iterator[Path]:
    """Yield an empty folder beside ``path``; on success it replaces the folder ``path``.

    The new folder is filled completely before it is swapped in, so a failure (an exception
    inside the ``with`` block) leaves the previous folder untouched and no temporary folder
    behind. Before the swap everything written is flushed to disk once (``os.sync``), so
    files written into the folder with :func:`write_json_into` need no fsync of their own.

    Parameters
    ----------
    path : str or os.PathLike
        The folder to replace (its parent is created when missing).

    Yields
    ------
    pathlib.Path
        The temporary folder to write into.

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "bundle"
    >>> with atomic_dir(out) as tmp:
    ...     _ = (tmp / "a.txt").write_text("a")
    >>> sorted(p.name for p in out.iterdir())
    ['a.txt']
    """
    import shutil

    root = Path(path)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=root.parent))
    old = root.with_name(f".{root.name}.{os.getpid()}.old")
    try:
        yield tmp
        os.sync()
        if root.exists():
            os.replace(root, old)
        os.replace(tmp, root)
    finally:
        for leftover in (tmp, old):
            if leftover.exists():
                shutil.rmtree(leftover)


def command_script(argv, *, tree, cwd=None) -> tuple[str, Path] | None:
    """The file of the working tree a command runs: its first argv entry that, taken as a
    path (relative ones from ``cwd``, else from the top of ``tree``), is a regular file
    (symlinks followed) inside ``tree``; with that file's resolved path. None when no entry
    names one, or ``tree`` is None. Files outside the tree (the interpreter, system tools)
    never count; entries after the first file are the command's data.

    Parameters
    ----------
    argv : sequence of str
    tree : str or os.PathLike or None
    cwd : str or os.PathLike, optional
        Where the command runs (default: the current folder).

    Returns
    -------
    (str, pathlib.Path) or None
        The argv entry as written and the file.
    """
    if tree is None:
        return None
    top = Path(tree).resolve()
    here = Path.cwd() if cwd is None else Path(cwd)
    for arg in argv:
        arg = str(arg)
        if not arg or "\0" in arg:
            continue
        try:
            found = [p for p in ((here / arg).resolve(), (top / arg).resolve())
                     if p.is_relative_to(top) and p.is_file()]
        except (OSError, ValueError):  # not a path at all
            continue
        if found:
            return arg, found[0]
    return None
