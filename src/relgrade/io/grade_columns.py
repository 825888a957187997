"""Grade round files and their bank sidecars read as Arrow columns, in one pass each.

A grader's round file (``round-N.jsonl``, one grade row per line) and its bank sidecar
(``round-N.bank.jsonl``, what each row was made on) are written line by line, append-only
and crash-safe (:mod:`relgrade.graders.store`); a million-line file read as one Python dict
per line costs about 2.9 KB per judgment. The readers here parse them with Arrow's JSON
reader under an explicit schema instead, so a file costs its columns: the made-on hashes,
the rubric and the times of a sidecar are held as dictionary columns (each distinct value
once, a 4-byte code per line).

Arrow's reader is stricter than the row path (:func:`relgrade.io.files.iter_jsonl` with the
checks of :func:`relgrade.protocol.grades.validate_grade_rows`): a type other than the
schema's (an integer id, a grade written ``1.0`` or ``true``), a key given twice, a lone
surrogate escape or an unknown key of a grade row makes it refuse the whole file. The
readers then return None, and the caller reads the file row by row, which accepts what the
protocol accepts and words the error of the first bad row exactly as before. The same
happens for what the column path does not model: a byte-order mark, a carriage return, a
blank line of spaces, bytes that are not UTF-8, a sidecar whose last line is cut short.

Measured against DuckDB's ``read_json`` (which was cheaper, 0.41 against 0.68 CPU-s for
1.3M grade rows), Arrow's reader was kept for that strictness: DuckDB converts a number to
a ``VARCHAR`` column silently, so it could not tell the row path's cases apart.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from relgrade.schema import GRADE_KEYS, MADE_ON

#: A grade row's columns as Arrow reads them (:data:`relgrade.schema.GRADE_KEYS`).
GRADE_ROW_SCHEMA = pa.schema([("query_id", pa.string()), ("chunk_id", pa.string()),
                              ("reason", pa.string()), ("grade", pa.int64())])

#: The bank sidecar fields the readers of the bank use; any other field is skipped.
#: ``imported_from`` keeps only its ``format`` (:data:`relgrade.protocol.grades.IMPORTED_FROM`).
BANK_LINE_SCHEMA = pa.schema(
    [("query_id", pa.string()), ("chunk_id", pa.string()),
     *[(k, pa.string()) for k in MADE_ON], ("graded_at", pa.string()),
     ("row_sha256", pa.string()), ("cache", pa.string()), ("judge", pa.string()),
     ("template_sha256", pa.string()),
     ("imported_from", pa.struct([("format", pa.string())]))])

#: Sidecar columns held as dictionary columns: few distinct values, repeated on every line.
DICTIONARY_COLUMNS = ("intent_sha256", "rubric_version", "rubric_sha256", "graded_at",
                      "cache", "judge", "template_sha256")

_BOM = b"\xef\xbb\xbf"
_BLOCK = 1 << 24  # bytes per block when a sidecar is checked for UTF-8
_ROUND_BLOCK = 1 << 22  # bytes of a grade file per block of RoundBlocks


def _parse(source, schema: pa.Schema, *, unexpected: str) -> pa.Table | None:
    """``source`` parsed by Arrow under ``schema`` (one thread), or None when Arrow refuses."""
    try:
        return pj.read_json(source, read_options=pj.ReadOptions(use_threads=False),
                            parse_options=pj.ParseOptions(explicit_schema=schema,
                                                          unexpected_field_behavior=unexpected))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def read_grade_columns(path, *, block_size: int = _BLOCK,
                       digests: bool = True) -> pa.Table | None:
    """A grade round file as columns, with what the row rules need of each raw line.

    The file is read in blocks of whole lines (``block_size`` bytes, cut after the last
    newline of each), so the raw lines are never all held at once: each block's lines are
    checked for their key order and hashed (DuckDB's ``sha256`` over their UTF-8 bytes,
    one thread), then dropped.

    Parameters
    ----------
    path : str or os.PathLike
        The grade file (``round-N.jsonl``); it must exist.
    block_size : int, optional
        Bytes read at a time (16 MiB); a line longer than that is read whole.
    digests : bool, optional
        Whether to hash the lines (``line_sha256``); a reader of the rows' fields alone,
        which binds no bank line, passes False.

    Returns
    -------
    pyarrow.Table of shape (n_rows, 6), or None
        ``query_id``, ``chunk_id``, ``reason`` (string), ``grade`` (int64), in file order
        (blank lines skipped), plus ``keys_in_order`` (bool: the line names exactly
        ``query_id``, ``chunk_id``, ``reason``, ``grade`` in that order, each once, written
        ``"key":``) and ``line_sha256`` (string: the lowercase hex sha256 of the line's
        bytes without its newline, the hash its bank line binds it to; left out without
        ``digests``). None when Arrow
        refuses the file or it holds what only the row path reads (see the module): read it
        row by row then.
    """
    parts = []
    for part in _grade_blocks(path, block_size, digests=digests):
        if part is None:
            return None
        parts.append(part)
    schema = GRADE_ROW_SCHEMA.append(pa.field("keys_in_order", pa.bool_()))
    if digests:
        schema = schema.append(pa.field("line_sha256", pa.string()))
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schema.empty_table()
    table = pa.Table.from_batches([b for p in parts for b in p.to_batches()], schema)
    del parts
    pa.default_memory_pool().release_unused()  # the blocks' lines are garbage now
    return _combined(table)


def _grade_block(data: bytes) -> pa.Table | None:
    """One block of whole lines as columns plus ``line`` (its lines, blank ones left out),
    or None when it is not what the column path reads."""
    if b"\r" in data:
        return None
    try:
        text = pa.array([data], type=pa.large_binary()).cast(pa.large_string())
    except pa.ArrowInvalid:  # not UTF-8: the row path names the line
        return None
    table = _parse(pa.BufferReader(data), GRADE_ROW_SCHEMA, unexpected="error") \
        if data.strip() else GRADE_ROW_SCHEMA.empty_table()
    lines = pc.list_flatten(pc.split_pattern(text, "\n"))
    del text
    lines = lines.filter(pc.not_equal(pc.utf8_length(lines), 0))
    if table is None or table.num_rows != len(lines):
        return None  # refused, or a line of nothing but whitespace (the row path skips it)
    if any(table.column(k).null_count for k in GRADE_KEYS):
        return None  # a key missing, or null: the row path names it
    at = [pc.find_substring(lines, f'"{k}":') for k in GRADE_KEYS]
    ordered = pc.greater_equal(at[0], 0)
    for before, after in zip(at, at[1:]):
        ordered = pc.and_(ordered, pc.less(before, after))
    return table.append_column("keys_in_order", ordered).append_column("line", lines)


def _hasher():
    """A one-thread DuckDB connection that keeps row order (for :func:`_hashed`)."""
    # imported here: DuckDB adds about 13 MiB to a process, and only a grade file needs it
    from relgrade.tables.engine import connect

    con = connect(threads=1)
    con.execute("SET enable_progress_bar = false")  # a stage's output stays its own
    con.execute("SET preserve_insertion_order = true")
    return con


def _hashed(con, part: pa.Table) -> pa.Table:
    """``part`` with its ``line`` column replaced by ``line_sha256`` (hex, row order kept)."""
    lines = pa.table({"line": part.column("line")})
    con.register("block_lines", lines)
    try:
        digests = con.sql("SELECT sha256(line) AS d FROM block_lines") \
            .to_arrow_table().column("d")
    finally:
        con.unregister("block_lines")
    if len(digests) != part.num_rows:
        raise RuntimeError("DuckDB returned another number of hashes than lines")
    return part.drop_columns(["line"]).append_column(
        "line_sha256", digests.cast(pa.string()))


def read_bank_columns(path, fields=None) -> pa.Table | None:
    """A bank sidecar as columns, made-on hashes and other repeated strings as dictionaries.

    Parameters
    ----------
    path : str or os.PathLike
        The sidecar (``round-N.bank.jsonl``); it must exist.
    fields : sequence of str, optional
        Only these fields of :data:`BANK_LINE_SCHEMA` (a count needs two or three; the
        others are skipped, never built); all of them when None.

    Returns
    -------
    pyarrow.Table of shape (n_lines, 12), or None
        The fields of :data:`BANK_LINE_SCHEMA` (null where a line has none), those of
        :data:`DICTIONARY_COLUMNS` dictionary-encoded (int32 codes), ``imported_from`` as
        the string column ``imported_format``; in file order, blank lines skipped. None
        when the file is not what the column path reads (a last line cut short by a
        crash, a blank line, a byte-order mark, bytes that are not UTF-8, a value of another type, a
        line that is not one JSON object): read it with
        :func:`relgrade.graders.store.read_bank` then, which refuses or reads it as before.
    """
    path = Path(path)
    lines = _bank_line_count(path)
    if lines is None:
        return None
    schema = BANK_LINE_SCHEMA if fields is None else \
        pa.schema([f for f in BANK_LINE_SCHEMA if f.name in set(fields)])
    if not lines:  # an empty file
        return _dictionaries(schema.empty_table())
    table = _stream(path, schema)
    if table is None or table.num_rows != lines:
        return None  # refused, a blank line, or two objects on one line
    return table


def read_round_columns(grades, bank) -> tuple[pa.Table, pa.Table] | None:
    """A grade file and its bank sidecar as columns, or None when either is left to the rows.

    Parameters
    ----------
    grades, bank : str or os.PathLike
        The grade file (``round-N.jsonl``) and its sidecar (``round-N.bank.jsonl``).

    Returns
    -------
    tuple of (pyarrow.Table, pyarrow.Table) or None
        :func:`read_grade_columns`' and :func:`read_bank_columns`' tables; None when
        either file is missing or either reader returns None.
    """
    if not (Path(grades).is_file() and Path(bank).is_file()):
        return None
    rows = read_grade_columns(grades)
    if rows is None:
        return None
    lines = read_bank_columns(bank)
    return None if lines is None else (rows, lines)


class RoundBlocks:
    """A grade file and its bank sidecar read together, a block of rows at a time.

    Iterating yields ``(rows, lines)``: the next block of the grade file as
    :func:`read_grade_columns` reads it (``query_id``, ``chunk_id``, ``reason``, ``grade``,
    ``keys_in_order``, ``line_sha256``; whole lines of ``block_size`` bytes at most) and the
    sidecar's lines of the same rows as :func:`read_bank_columns` reads them (its
    dictionary columns encoded per block: each block has its own dictionaries). Row i of
    the file is paired with line i of the sidecar. Only one block of each file is held at a
    time, so reading a round costs a block, not the files. Trailing sidecar lines without a
    row are read (they must be what the reader accepts) but not yielded.

    Iteration stops early, with :attr:`refused` set, when either reader would return None
    for the whole file (see :func:`read_grade_columns` and :func:`read_bank_columns`: Arrow
    refuses a line, or the file holds what only the row path reads). A sidecar with fewer
    lines than the file has rows yields a last ``lines`` shorter than its ``rows``; the
    caller sends that file to the row path, as :func:`read_round_columns`' caller does.

    Parameters
    ----------
    grades, bank : str or os.PathLike
        The grade file (``round-N.jsonl``) and its sidecar (``round-N.bank.jsonl``); both
        must exist (see :meth:`of`).
    block_size : int, optional
        Bytes of the grade file read at a time (4 MiB: about 40,000 rows).
    bank_block_size : int, optional
        Bytes of the sidecar parsed at a time (2 MiB; at least its longest line). With
        the two defaults a round of 1,336,314 rows read into the bank peaked 190 MiB
        lower than with 16 and 8 MiB, in the same CPU-seconds.

    Attributes
    ----------
    refused : bool
        Whether a reader refused a file (set once iteration stops).
    rows : int
        Grade rows yielded so far.
    """

    def __init__(self, grades, bank, *, block_size: int = _ROUND_BLOCK,
                 bank_block_size: int = _ROUND_BLOCK // 2):
        self.grades, self.bank = Path(grades), Path(bank)
        self.block_size, self.bank_block_size = block_size, bank_block_size
        self.refused = False
        self.rows = 0

    @classmethod
    def of(cls, grades, bank) -> RoundBlocks | None:
        """The blocks of ``grades`` and ``bank``, or None when either file is missing."""
        if not (Path(grades).is_file() and Path(bank).is_file()):
            return None
        return cls(grades, bank)

    def __iter__(self):
        self.refused, self.rows = False, 0
        lines = _bank_lines(self.bank, self.bank_block_size)
        if lines is None:
            self.refused = True
            return
        held: list = []  # sidecar batches read ahead of the rows
        have = 0
        for rows in _grade_blocks(self.grades, self.block_size):
            if rows is None:
                self.refused = True
                return
            while have < rows.num_rows:
                batch = next(lines, _END)
                if batch is _END:
                    break
                if batch is None:
                    self.refused = True
                    return
                held.append(batch)
                have += batch.num_rows
            if held:
                taken = pa.concat_tables(held) if len(held) > 1 else held[0]
            else:
                taken = _dictionaries(BANK_LINE_SCHEMA.empty_table())
            n = min(rows.num_rows, have)
            part, rest = taken.slice(0, n), taken.slice(n)
            held, have = ([rest], rest.num_rows) if rest.num_rows else ([], 0)
            del taken
            self.rows += rows.num_rows
            yield rows, part
            del rows, part
        for batch in lines:  # trailing lines: read (and checked) but not yielded
            if batch is None:
                self.refused = True
                return


_END = object()


def _grade_blocks(path, block_size: int, *, digests: bool = True):
    """:func:`read_grade_columns`' blocks, one at a time (blocks without rows left out);
    yields None once, and stops, when the file is not what the column path reads."""
    con = None
    try:
        for part in _parsed_blocks(path, block_size):
            if part is None:
                yield None
                return
            if not digests:
                part = part.drop_columns(["line"])
            elif part.num_rows:
                if con is None:
                    con = _hasher()
                part = _hashed(con, part)
            if part.num_rows:
                yield part
            del part
    finally:
        if con is not None:
            con.close()


def _parsed_blocks(path, block_size: int, digest=None):
    """Grade file ``path`` in blocks of whole lines (:func:`relgrade.io.batches.line_blocks`),
    each parsed by :func:`_grade_block`; ``digest`` (a hashlib object), when given, is fed
    every byte read. Yields None once, and stops, at a byte-order mark or a block the
    column path refuses."""
    from relgrade.io.batches import line_blocks

    first = True
    for data in line_blocks(path, block_size):
        if digest is not None:
            digest.update(data)
        if first and data.startswith(_BOM):
            yield None
            return
        first = False
        part = _grade_block(data)
        del data
        yield part
        if part is None:
            return


def _bank_line_count(path: Path) -> int | None:
    """The newlines of bank sidecar ``path`` when its bytes are what the column path reads
    (UTF-8 throughout, no byte-order mark, a newline at the end), else None (read with
    :func:`relgrade.graders.store.read_bank` then: a torn last line, which it leaves out,
    or bytes it refuses)."""
    with path.open("rb") as f:
        decoder = codecs.getincrementaldecoder("utf-8")()
        last, lines = b"", 0
        while True:
            block = f.read(_BLOCK)
            if not block:
                break
            if not last and block.startswith(_BOM):
                return None
            try:
                decoder.decode(block)
            except UnicodeDecodeError:
                return None
            lines += block.count(b"\n")
            last = block
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return None
    return None if last and not last.endswith(b"\n") else lines


def bank_blocks(path, block_size: int = _ROUND_BLOCK // 2, fields=None):
    """A bank sidecar's lines as :func:`read_bank_columns` reads them, a block at a time:
    an iterator of tables (each block's dictionary columns encoded on its own) that yields
    None once, and stops, where that reader would return None; or None when the file's
    bytes already send it to :func:`relgrade.graders.store.read_bank`. For a count that
    holds a few numbers per line, not the lines.

    ``fields``: only these fields of :data:`BANK_LINE_SCHEMA`, as
    ``read_bank_columns(path, fields)`` reads them (the others are skipped, never built:
    a count of three fields parses three); all of them when None."""
    return _bank_lines(Path(path), block_size, fields)


def _bank_lines(path: Path, block_size: int, fields=None):
    """:func:`read_bank_columns`' table of ``path`` (``fields`` only, all when None) as a
    stream of blocks (each block's dictionary columns encoded on its own), after the same
    check of the whole file's bytes; yields None once, and stops, where that reader would
    return None. None (not a stream) when the bytes check already refuses the file."""
    count = _bank_line_count(path)
    if count is None:
        return None
    schema = BANK_LINE_SCHEMA if fields is None else \
        pa.schema([f for f in BANK_LINE_SCHEMA if f.name in set(fields)])

    def stream():
        if count == 0:
            return
        seen = 0
        try:
            reader = pj.open_json(path, read_options=pj.ReadOptions(use_threads=False,
                                                                    block_size=block_size),
                                  parse_options=pj.ParseOptions(
                                      explicit_schema=schema,
                                      unexpected_field_behavior="ignore"))
            for batch in reader:
                part = _dictionaries(pa.Table.from_batches([batch]))
                seen += part.num_rows
                if seen > count:
                    yield None  # two objects on one line
                    return
                yield part
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            yield None
            return
        if seen != count:
            yield None  # a blank line
    return stream()


def _stream(path: Path, schema: pa.Schema) -> pa.Table | None:
    """The sidecar parsed block by block (Arrow's streaming JSON reader, one thread), each
    block's repeated strings dictionary-encoded before the next is read; None when Arrow
    refuses it. The blocks' dictionaries are unified into one per column."""
    try:
        reader = pj.open_json(path, read_options=pj.ReadOptions(use_threads=False,
                                                                block_size=_BLOCK // 2),
                              parse_options=pj.ParseOptions(explicit_schema=schema,
                                                            unexpected_field_behavior="ignore"))
        parts = [_dictionaries(pa.Table.from_batches([batch])) for batch in reader]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if not parts:
        return _dictionaries(schema.empty_table())
    table = pa.concat_tables(parts).unify_dictionaries()
    del parts
    pa.default_memory_pool().release_unused()  # the parser's blocks are garbage now
    return _combined(table)


def _combined(table: pa.Table) -> pa.Table:
    """``table.combine_chunks()``, one column at a time: each column's blocks are let go
    once it is copied, so the copy costs one column's size, not the table's."""
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        if column.num_chunks > 1:
            table = table.set_column(i, name, pa.chunked_array([column.combine_chunks()],
                                                                column.type))
            del column
            pa.default_memory_pool().release_unused()
    return table


def _dictionaries(table: pa.Table) -> pa.Table:
    if "imported_from" in table.column_names:
        fmt = pc.struct_field(table.column("imported_from"), "format") \
            if table.num_rows else pa.chunked_array([], pa.string())
        table = table.drop_columns(["imported_from"]).append_column("imported_format", fmt)
    for name in DICTIONARY_COLUMNS:
        if name not in table.column_names:
            continue
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.dictionary_encode(table.column(name)))
    return table.combine_chunks()


class GradeBlocks:
    """A grade round file read a block of lines at a time, as columns, on every pass.

    :func:`read_grade_columns` without the whole table: each iteration reads the file
    again from its start, ``block_size`` bytes at a time (cut after the last newline of
    each), and yields each block's rows; what is held at once is one block. A reader that
    checks the rows on a first pass and writes them on a second holds no more than that.

    Parameters
    ----------
    path : str or os.PathLike
        The grade file; it must exist.
    block_size : int, optional
        Bytes read at a time (default :attr:`BLOCK`, 4 MiB: about 40,000 rows of the scale
        benchmark's grader); a line longer than that is read whole.

    Attributes
    ----------
    sha256 : str or None
        The hex sha256 of the file's bytes as the last complete pass read them (None before
        one): a caller that reads the file twice compares it with the first pass's.

    Notes
    -----
    Iterating yields ``pyarrow.Table`` blocks of shape (n_rows, 5): ``query_id``,
    ``chunk_id``, ``reason`` (string), ``grade`` (int64) and ``keys_in_order`` (bool), as
    :func:`read_grade_columns` (without ``digests``), in file order, blank lines skipped;
    blocks without rows are not yielded. It yields None (and stops) where
    :func:`read_grade_columns` returns None: the file is left to the row reader then.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> p = os.path.join(d, "round-1.jsonl")
    >>> with open(p, "w") as f:
    ...     _ = f.write('{"query_id":"q1","chunk_id":"c1","reason":"r","grade":2}\\n' * 3)
    >>> [t.num_rows for t in GradeBlocks(p, block_size=100)]
    [1, 2]
    """

    #: Bytes read at a time unless ``block_size`` is given.
    BLOCK = _BLOCK // 4

    def __init__(self, path, *, block_size: int | None = None):
        self.path = Path(path)
        self.block_size = int(self.BLOCK if block_size is None else block_size)
        self.sha256: str | None = None

    def __iter__(self):
        import hashlib

        digest = hashlib.sha256()
        for part in _parsed_blocks(self.path, self.block_size, digest):
            if part is None:
                yield None
                return
            part = part.drop_columns(["line"])
            if part.num_rows:
                yield part
            del part
        self.sha256 = digest.hexdigest()
