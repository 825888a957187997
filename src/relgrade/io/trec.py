"""TREC run and qrels files: reading and writing.

A TREC run has one line per retrieved chunk, ``qid Q0 docid rank score tag``; TREC qrels one
line per judged pair, ``qid iter docid rel``. Fields are separated by whitespace. relgrade
reads both into its long tables (see ``docs/formats.md``): ids become strings, ``rank`` and
``grade`` int64, ``score`` float64.

Files whose fields are separated by single spaces or by tabs are parsed by Arrow's CSV reader
(multi-threaded C++). Anything else (runs of several spaces, mixed separators, blank lines) and
any file the fast reader rejects is read again line by line, which accepts every whitespace
layout and, when the file is bad, names the line and the rule it breaks. A UTF-8 byte-order
mark and CRLF line ends are accepted; invalid UTF-8 is rejected with its line number.
"""

from __future__ import annotations

import math
import mmap
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from relgrade.errors import InputError
from relgrade.io.files import atomic_path, read_lines
from relgrade.io.runtable import empty_or_holds
from relgrade.io.sniff import field_separator, read_head
from relgrade.ranking import arrow_array, numpy_values, pair_keys
from relgrade.schema import QRELS, RUN

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported by the functions that build a DataFrame: ``relgrade evaluate`` reads
# qrels through :func:`read_trec_qrels_table` and never loads it (0.26 CPU-s).

#: The Arrow schema of :func:`read_trec_qrels_table`'s table.
QRELS_SCHEMA = pa.schema([("query_id", pa.large_string()), ("chunk_id", pa.large_string()),
                          ("grade", pa.int64())])

_INT = re.compile(r"[+-]?[0-9]+\Z")
_ASCII_SPACE = " \t\r\x0b\x0c"  # C's isspace(), as trec_eval splits its lines
_WHITESPACE = re.compile(r"[ \t\r\x0b\x0c]+")

# name, Arrow type (None: read and dropped) for each field of a line
# (ids are read as large_string, the type pandas keeps them in: no conversion afterwards)
_RUN_FIELDS = [("query_id", pa.large_string()), ("q0", None), ("chunk_id", pa.large_string()),
               ("rank", pa.int64()), ("score", pa.float64()), ("tag", None)]
#: Key of ``DataFrame.attrs`` under which :func:`read_trec_run` reports lines whose fields
#: after the sixth were ignored: ``{"lines": count, "first": first line number}``.
EXTRA_FIELDS = "extra_fields"

_QRELS_FIELDS = [("query_id", pa.large_string()), ("iter", None),
                 ("chunk_id", pa.large_string()), ("grade", pa.int64())]


# --- reading -------------------------------------------------------------------------

def _has_hex_prefix(path: Path) -> bool:
    """Whether ``0x`` or ``0X`` occurs anywhere in the file.

    Arrow's integer parser reads ``0x1`` as 1, which the exact reader refuses; a qrels file
    that holds the prefix anywhere goes to the exact reader, so a grade is read one way only.
    (Run files skip this scan: their rank column is ignored by default and they are large.)
    """
    try:
        f = open(path, "rb")
    except OSError:
        return False  # the reader itself names a missing or unreadable file
    with f:
        if f.seek(0, 2) == 0:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b"0x") >= 0 or data.find(b"0X") >= 0


def _fast_table(path: Path, fields) -> pa.Table | None:
    """Arrow's CSV reader over single-tab or single-space separated lines; None if it fails.

    Arrow streams the file in blocks; anything the exact reader would split differently
    (an empty field from a doubled or leading separator, the other separator, a vertical
    tab or form feed inside a field) makes this return None.
    """
    separator = field_separator(read_head(path))
    if separator is None:
        return None
    delim, needles = separator
    names = [name for name, _ in fields]
    # fields relgrade drops are still read, so that an empty or odd one can be seen; as plain
    # strings (a block at a time, freed with it), which parse in about 2/3 of the CPU time
    # that dictionary-encoding them costs
    dropped = pa.string()
    types = {name: (typ if typ is not None else dropped) for name, typ in fields}
    kept = [name for name, typ in fields if typ is not None]
    batches = []
    try:
        # block by block: each block's dropped fields are checked and freed as it is read,
        # so the whole file's parse is never held at once
        reader = pacsv.open_csv(
            str(path),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter=delim.decode(), quote_char=False,
                                             double_quote=False, escape_char=False,
                                             ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(column_types=types, null_values=[],
                                                 true_values=[], false_values=[],
                                                 strings_can_be_null=False),
        )
        schema = pa.schema([reader.schema.field(name) for name in kept])
        for batch in reader:
            for name, typ in fields:
                col = batch.column(name)
                if (typ is None or pa.types.is_large_string(typ)) and empty_or_holds(
                        pa.chunked_array([col], type=col.type), needles):
                    return None
            batches.append(batch.select(kept))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    return pa.Table.from_batches(batches, schema=schema)

def _exact_rows(path: Path, n_fields: int, layout: str, extra: list | None = None):
    """Split every non-blank line on whitespace; yield (line number, fields).

    With ``extra`` (a list), a line with more than ``n_fields`` fields is accepted, its
    trailing fields dropped, and its number appended to ``extra``; otherwise it is an error.
    """
    for i, line in enumerate(read_lines(path), start=1):
        fields = _WHITESPACE.split(line.strip(_ASCII_SPACE))
        if fields == [""]:
            continue
        if len(fields) > n_fields and extra is not None:
            extra.append(i)
            fields = fields[:n_fields]
        if len(fields) != n_fields:
            expected = f"at least {n_fields}" if extra is not None else str(n_fields)
            raise InputError(f"expected {expected} whitespace-separated fields ({layout})",
                             path=path, line=i, found=f"{len(fields)} fields")
        yield i, fields


def _parse_int(text: str, what: str, path: Path, line: int) -> int:
    if not _INT.match(text):
        raise InputError(f"{what} must be an integer", path=path, line=line, found=repr(text))
    return int(text)


def _parse_score(text: str, path: Path, line: int) -> float:
    try:
        if "_" in text:  # Python's float() accepts digit separators; TREC tools do not
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise InputError("score must be a number", path=path, line=line,
                         found=repr(text)) from None
    if not math.isfinite(value):
        raise InputError("score must be a finite number", path=path, line=line,
                         found=repr(text))
    return value


def _ids_frame(columns: dict) -> pd.DataFrame:
    import pandas as pd

    df = pd.DataFrame(columns)
    for name in ("query_id", "chunk_id"):
        df[name] = df[name].astype("str")
    return df


def _read_run_table(path: Path) -> tuple[pd.DataFrame, np.ndarray | None]:
    """The run and, when some lines were skipped, the line number of each row."""
    import pandas as pd

    # Arrow buffers freed since the last call (a previous run dropped by the caller) go back
    # to the system before the parser allocates, so they do not add to its peak
    pa.default_memory_pool().release_unused()
    table = _fast_table(path, _RUN_FIELDS)
    if table is not None:
        # chunk by chunk, zero-copy
        if all(np.isfinite(c.to_numpy()).all() for c in table["score"].chunks):
            table = table.select(RUN)
            # each column's Arrow buffers are let go as soon as pandas has it
            df = table.to_pandas(split_blocks=True, self_destruct=True)
            del table
            # the parser's block buffers are garbage now: hand them back to the system
            # rather than let them sit beside the arrays that scoring allocates next
            pa.default_memory_pool().release_unused()
            return df, None
    del table
    qids, dids, ranks, scores, lines, extra = [], [], [], [], [], []
    layout = "qid Q0 docid rank score tag"
    for i, f in _exact_rows(path, 6, layout, extra):
        qids.append(f[0])
        dids.append(f[2])
        ranks.append(_parse_int(f[3], "rank", path, i))
        scores.append(_parse_score(f[4], path, i))
        lines.append(i)
    df = _ids_frame({"query_id": pd.Series(qids, dtype="str"),
                     "chunk_id": pd.Series(dids, dtype="str"),
                     "rank": np.asarray(ranks, dtype=np.int64),
                     "score": np.asarray(scores, dtype=np.float64)})
    if extra:
        df.attrs[EXTRA_FIELDS] = {"lines": len(extra), "first": extra[0]}
    return df, np.asarray(lines, dtype=np.int64)


def extra_fields_note(path, run: pd.DataFrame) -> str | None:
    """The note printed when a run file had fields after the sixth (ignored, as trec_eval
    does), or None; shared by ``relgrade evaluate`` and the ``retrieve`` stage.

    Parameters
    ----------
    path : str or os.PathLike
        The run file, named in the note.
    run : DataFrame or pyarrow.Table
        The table :func:`read_trec_run` returned (its ``attrs[EXTRA_FIELDS]``); an Arrow
        table (read six fields a line) has no note.

    Examples
    --------
    >>> import pandas as pd
    >>> run = pd.DataFrame()
    >>> run.attrs[EXTRA_FIELDS] = {"lines": 3, "first": 2}
    >>> extra_fields_note("a.trec", run)
    'Note: a.trec: 3 line(s) have fields after the sixth (first: line 2); they were ignored.'
    """
    # an Arrow table comes from a reader that takes six fields a line and no more
    info = getattr(run, "attrs", {}).get(EXTRA_FIELDS)
    if not info:
        return None
    return (f"Note: {path}: {info['lines']} line(s) have fields after the sixth "
            f"(first: line {info['first']}); they were ignored.")


def read_trec_run(path) -> pd.DataFrame:
    """Read a TREC run file.

    Parameters
    ----------
    path : str or os.PathLike
        A text file with one line per retrieved chunk: ``qid Q0 docid rank score tag``,
        fields separated by whitespace. The ``Q0`` and ``tag`` fields are read and dropped.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``chunk_id`` (str), ``rank`` (int64), ``score``
        (float64), one row per line, in file order. Nothing is sorted or checked for
        duplicates here: see :func:`relgrade.ranking.validate_run` and
        :func:`relgrade.ranking.canonical_ranking`.

    Raises
    ------
    InputError
        Naming the file and line: the file is missing, a line is not valid UTF-8, a line has
        fewer than six fields, a rank is not an integer, a score is not a number or is not
        finite (NaN, inf).

    Notes
    -----
    The layout is trec_eval's results format. Blank lines are skipped. Ids keep their exact
    text: ``007`` stays ``"007"``. As trec_eval does, fields after the sixth are ignored;
    the returned frame's ``attrs[EXTRA_FIELDS]`` then says on how many lines, and the
    first.
    """
    return _read_run_table(Path(path))[0]


def last_run_tag(path, *, block: int = 1 << 16) -> str | None:
    """The run tag trec_eval prints on its ``runid`` line: the sixth field of the file's last
    non-blank line.

    Parameters
    ----------
    path : str or os.PathLike
        A TREC run file (``qid Q0 docid rank score tag``) that :func:`read_trec_run` has
        read; only its tail is read here, ``block`` bytes at a time from the end.
    block : int, default 65536
        Bytes read per step.

    Returns
    -------
    str or None
        The tag, as written; None when the file has no non-blank line or its last one has
        fewer than six fields.

    Raises
    ------
    OSError
        The file cannot be opened.

    Notes
    -----
    trec_eval keeps the tag of the last line it reads and checks no other line, so a file
    whose lines carry several tags is reported under its last line's (trec_eval's
    ``get_trec_results.c``). Blank lines are skipped, as the run readers skip them; fields
    are split on the ASCII whitespace every TREC line is split on, and the text is decoded as
    UTF-8 (the readers refuse a file that is not).

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "a.trec")
    ...     _ = open(p, "w").write("q1 Q0 a 1 2.0 first\\nq1 Q0 b 2 1.0 last x\\n\\n")
    ...     last_run_tag(p)
    'last'
    """
    space = _ASCII_SPACE.encode()
    with open(path, "rb") as f:
        end = f.seek(0, 2)
        tail = b""
        while True:
            start = max(0, end - block)
            f.seek(start)
            tail = f.read(end - start) + tail
            end = start
            lines = tail.split(b"\n")
            # every line but the first is whole; the first is whole at the file's start
            whole = range(len(lines)) if start == 0 else range(1, len(lines))
            last = next((i for i in reversed(whole) if lines[i].strip(space)), None)
            if last is not None or start == 0:
                break
    if last is None:
        return None
    text = lines[last].decode("utf-8", "replace")
    if start == 0 and last == 0:
        text = text.removeprefix("\ufeff")
    fields = _WHITESPACE.split(text.strip(_ASCII_SPACE))
    return fields[5] if len(fields) >= 6 else None


def read_trec_qrels(path) -> pd.DataFrame:
    """Read TREC qrels.

    Parameters
    ----------
    path : str or os.PathLike
        A text file with one line per judged pair, ``qid iter docid rel``; the ``iter`` field
        is read and dropped, ``rel`` is an integer grade.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``chunk_id`` (str), ``grade`` (int64), in file order.

    Raises
    ------
    InputError
        Naming the file and line: the file is missing, a line is not valid UTF-8, a line does
        not have four fields, a grade is not an integer; or naming the query, the chunk and
        both lines when one (query, chunk) pair is graded twice.
    """
    path = Path(path)
    # grades decide the key: a file with a 0x anywhere is read exactly (see _has_hex_prefix)
    table = None if _has_hex_prefix(path) else _fast_table(path, _QRELS_FIELDS)
    if table is not None:
        _refuse_repeated_pairs(table["query_id"], table["chunk_id"], None, path)
        return table.select(QRELS).to_pandas()
    df, lines = _exact_qrels(path)
    _refuse_repeated_pairs(pa.chunked_array([pa.array(df["query_id"])]).cast(pa.large_string()),
                           pa.chunked_array([pa.array(df["chunk_id"])]).cast(pa.large_string()),
                           lines, path)
    return df


def read_trec_qrels_table(path) -> pa.Table:
    """Read TREC qrels into an Arrow table: :func:`read_trec_qrels`'s rows and rules.

    Parameters
    ----------
    path : str or os.PathLike
        As for :func:`read_trec_qrels`.

    Returns
    -------
    pyarrow.Table of shape (n_pairs, 3)
        :data:`QRELS_SCHEMA`: ``query_id``, ``chunk_id`` (large_string), ``grade`` (int64),
        in file order; the values of ``read_trec_qrels(path)``. A file that Arrow's CSV
        reader takes (single spaces or single tabs, no ``0x``) is read without pandas;
        any other is read by :func:`read_trec_qrels` itself.

    Raises
    ------
    InputError
        As :func:`read_trec_qrels`, with the same messages.
    """
    path = Path(path)
    table = None if _has_hex_prefix(path) else _fast_table(path, _QRELS_FIELDS)
    if table is None:
        return pa.Table.from_pandas(read_trec_qrels(path)[QRELS],
                                    preserve_index=False).cast(QRELS_SCHEMA)
    _refuse_repeated_pairs(table["query_id"], table["chunk_id"], None, path)
    return table.select(QRELS).cast(QRELS_SCHEMA)


def _exact_qrels(path: Path):
    """Qrels read line by line (every whitespace layout): the frame and each row's line."""
    import pandas as pd

    qids, dids, grades, line_list = [], [], [], []
    for i, f in _exact_rows(path, 4, "qid iter docid rel"):
        qids.append(f[0])
        dids.append(f[2])
        grades.append(_parse_int(f[3], "grade", path, i))
        line_list.append(i)
    df = _ids_frame({"query_id": pd.Series(qids, dtype="str"),
                     "chunk_id": pd.Series(dids, dtype="str"),
                     "grade": np.asarray(grades, dtype=np.int64)})
    return df, np.asarray(line_list, dtype=np.int64)


def _refuse_repeated_pairs(qids: pa.ChunkedArray, cids: pa.ChunkedArray, lines, path) -> None:
    """InputError naming the first pair graded twice (query, chunk and both lines), if any.

    ``qids``, ``cids``: large_string columns of the qrels' rows; ``lines``: each row's line
    number, None when row i is on line i + 1.
    """
    pairs = pair_keys(qids, cids)
    counts = pc.value_counts(pairs)
    repeated = counts.field("values").filter(
        arrow_array(numpy_values(counts.field("counts")) > 1))
    if len(repeated):
        same = np.flatnonzero(numpy_values(pc.equal(pairs, repeated[0])))
        q, c = repeated[0].as_py().split("\x1f", 1)
        line_no = lines[same] if lines is not None else same + 1
        raise InputError("one (query, chunk) pair is graded twice", path=path,
                         line=int(line_no[1]), item=f"query {q}, chunk {c}",
                         found=f"lines {int(line_no[0])} and {int(line_no[1])}",
                         fix="Keep one grade per pair")
    del pairs, counts, repeated
    pa.default_memory_pool().release_unused()  # the check's hash tables are garbage now


# --- writing -------------------------------------------------------------------------

def _check_ids(col: pa.ChunkedArray, what: str, path) -> None:
    bad = pc.match_substring_regex(col, r"(^$)|\s")
    if pc.any(bad).as_py():
        idx = pc.index(bad, True).as_py()
        raise InputError(f"a {what} cannot be written to a TREC file: it is empty or holds "
                         "whitespace", path=path, found=repr(col[idx].as_py()))


def _join_lines(parts: list, path) -> None:
    """Write the space-joined fields of each row as one LF-terminated line."""
    parts = [p.cast(pa.large_string()) for p in parts]
    line = pc.binary_join_element_wise(*parts, pa.scalar(" ", pa.large_string()))
    # each line ends in LF
    line = pc.binary_join_element_wise(line, pa.scalar("", pa.large_string()),
                                       pa.scalar("\n", pa.large_string()))
    chunks = line.chunks if isinstance(line, pa.ChunkedArray) else [line]
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        for chunk in chunks:
            if len(chunk) == 0:
                continue
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[
                chunk.offset: chunk.offset + len(chunk) + 1]
            f.write(memoryview(chunk.buffers()[2])[offsets[0]: offsets[-1]])


def write_trec_run(path, run: pd.DataFrame, tag: str) -> None:
    """Write a run as a TREC run file, atomically, rows in the order given.

    Parameters
    ----------
    path : str or os.PathLike
        Where to write.
    run : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``rank`` (int), ``score`` (float). Pass
        ``relgrade.ranking.canonical_ranking(run)`` to write the canonical ranking.
    tag : str
        The run tag written in the last field (usually the arm's name).

    Raises
    ------
    InputError
        An id or the tag is empty or holds whitespace, or a score is not finite.

    Notes
    -----
    Scores are written in the shortest form that reads back to the same float64, so
    ``read_trec_run(write_trec_run(run))`` returns ``run`` exactly.
    """
    if not tag or re.search(r"\s", tag):
        raise InputError("a run tag cannot be empty or hold whitespace", path=path,
                         found=repr(tag))
    table = pa.Table.from_pandas(run[RUN].astype({"query_id": "str", "chunk_id": "str"}),
                                 preserve_index=False)
    _check_ids(table["query_id"], "query id", path)
    _check_ids(table["chunk_id"], "chunk id", path)
    score = table["score"].cast(pa.float64())
    if not np.isfinite(score.to_numpy()).all():
        raise InputError("a score is not a finite number", path=path)
    if table.num_rows == 0:
        _write_empty(path)
        return
    # Arrow writes the shortest text that reads back to the same float64
    _join_lines([table["query_id"], pa.scalar("Q0"), table["chunk_id"],
                 table["rank"].cast(pa.int64()).cast(pa.string()), score.cast(pa.string()),
                 pa.scalar(tag)], path)


def write_trec_qrels(path, qrels: pd.DataFrame) -> None:
    """Write qrels as TREC qrels (``qid 0 docid grade``), atomically, rows in the order given.

    Parameters
    ----------
    path : str or os.PathLike
        Where to write.
    qrels : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``grade`` (int).

    Raises
    ------
    InputError
        An id is empty or holds whitespace.
    """
    table = pa.Table.from_pandas(
        qrels[QRELS].astype({"query_id": "str", "chunk_id": "str"}), preserve_index=False)
    _check_ids(table["query_id"], "query id", path)
    _check_ids(table["chunk_id"], "chunk id", path)
    if table.num_rows == 0:
        _write_empty(path)
        return
    _join_lines([table["query_id"], pa.scalar("0"), table["chunk_id"],
                 table["grade"].cast(pa.int64()).cast(pa.string())], path)


def qrels_lines(qrels: pa.Table, path) -> memoryview:
    """The lines :func:`write_trec_qrels` writes for ``qrels``, for a writer that writes a
    block of rows at a time (the blocks' lines, one after the other, are the file).

    Parameters
    ----------
    qrels : pyarrow.Table
        ``query_id``, ``chunk_id`` (string), ``grade`` (integer), in the order to write.
    path : str or os.PathLike
        The file they go to, named in the error.

    Returns
    -------
    memoryview
        ``query_id 0 chunk_id grade`` and LF per row (empty for no row).

    Raises
    ------
    InputError
        An id is empty or holds whitespace (:func:`write_trec_qrels`' message).
    """
    check_qrels_ids(qrels, path)
    if qrels.num_rows == 0:
        return memoryview(b"")
    parts = [c.cast(pa.large_string()) for c in
             (qrels["query_id"], pa.scalar("0"), qrels["chunk_id"],
              qrels["grade"].cast(pa.int64()).cast(pa.string()))]
    line = pc.binary_join_element_wise(*parts, pa.scalar(" ", pa.large_string()))
    line = pc.binary_join_element_wise(line, pa.scalar("", pa.large_string()),
                                       pa.scalar("\n", pa.large_string()))
    line = line.combine_chunks() if isinstance(line, pa.ChunkedArray) else line
    offsets = np.frombuffer(line.buffers()[1], dtype=np.int64)[
        line.offset: line.offset + len(line) + 1]
    return memoryview(line.buffers()[2])[offsets[0]: offsets[-1]]


def check_qrels_ids(qrels: pa.Table, path) -> None:
    """Refuse ids a TREC qrels file cannot hold, as :func:`write_trec_qrels` does.

    Raises
    ------
    InputError
        A ``query_id`` or ``chunk_id`` is empty or holds whitespace (the first in row
        order, query ids checked first; ``path`` named).
    """
    _check_ids(qrels["query_id"], "query id", path)
    _check_ids(qrels["chunk_id"], "chunk id", path)


def _write_empty(path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(b"")


# --- sampled-pool inclusion probabilities ----------------------------------------------

_PRELS_LAYOUT = "qid iter docid stratum rel [prob]"


def read_trec_inclusion(path) -> pd.DataFrame:
    """Read a sampled pool's judgments with their inclusion probabilities ("prels").

    Parameters
    ----------
    path : str or os.PathLike
        A text file with one line per pooled pair in the qrels layout of NIST's
        ``sample_eval.pl`` (Yilmaz, Kanoulas & Aslam 2008), ``qid iter docid stratum rel``,
        optionally followed by the pair's inclusion probability ``prob``. ``rel`` is an
        integer; a negative ``rel`` marks a pair that was pooled but not drawn into the
        judged sample. Every line has the same number of fields (5 or 6). Without ``prob``,
        a pair's inclusion probability is that of its stratum within its query: judged
        lines (``rel >= 0``) over all lines, as ``sample_eval.pl`` estimates it.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``chunk_id`` (str), ``stratum`` (str), ``inclusion_prob``
        (float64 in (0, 1]), one row per line, in file order. Grades are not returned: the
        qrels give them.

    Raises
    ------
    InputError
        Naming the file and line: the file is missing or holds no line; a line does not
        have 5 or 6 fields, or has a different number than the first line; ``rel`` is not an
        integer; ``prob`` is not a number or lies outside (0, 1]; a (query, docid) pair is
        listed twice (naming both lines). Without ``prob``: naming the query and stratum
        when a stratum has no judged line (its probability would be 0).
    """
    import pandas as pd

    path = Path(path)
    qids, dids, strata, rels, probs, lines = [], [], [], [], [], []
    width = None
    seen: dict[tuple[str, str], int] = {}
    for i, line in enumerate(read_lines(path), start=1):
        f = _WHITESPACE.split(line.strip(_ASCII_SPACE))
        if f == [""]:
            continue
        if len(f) not in (5, 6) or (width is not None and len(f) != width):
            expected = str(width) if width is not None else "5 or 6"
            raise InputError(f"expected {expected} whitespace-separated fields "
                             f"({_PRELS_LAYOUT})", path=path, line=i,
                             found=f"{len(f)} fields")
        width = len(f)
        rels.append(_parse_int(f[4], "rel", path, i))
        if width == 6:
            if not _is_number(f[5]):
                raise InputError("an inclusion probability must be a number", path=path,
                                 line=i, item=f"query {f[0]}, docid {f[2]}", found=repr(f[5]))
            p = float(f[5])
            if not 0.0 < p <= 1.0:
                raise InputError("an inclusion probability must be in (0, 1]", path=path,
                                 line=i, item=f"query {f[0]}, docid {f[2]}", found=f[5])
            probs.append(p)
        pair = (f[0], f[2])
        if pair in seen:
            raise InputError("one (query, docid) pair is listed twice", path=path, line=i,
                             item=f"query {f[0]}, docid {f[2]}",
                             found=f"lines {seen[pair]} and {i}", fix="List each pair once")
        seen[pair] = i
        qids.append(f[0])
        dids.append(f[2])
        strata.append(f[3])
        lines.append(i)
    if not qids:
        raise InputError("no line: an inclusion file lists the pooled pairs", path=path,
                         fix=f"Write one line per pooled pair: {_PRELS_LAYOUT}")
    df = _ids_frame({"query_id": pd.Series(qids, dtype="str"),
                     "chunk_id": pd.Series(dids, dtype="str"),
                     "stratum": pd.Series(strata, dtype="str")})
    if width == 6:
        df["inclusion_prob"] = np.asarray(probs, dtype=np.float64)
        return df
    # sample_eval.pl's estimate: the judged share of each (query, stratum)
    judged = pd.Series(np.asarray(rels) >= 0, dtype=np.float64)
    by = [df["query_id"], df["stratum"]]
    share = judged.groupby(by).transform("mean").to_numpy()
    if (share == 0).any():
        row = int(np.flatnonzero(share == 0)[0])
        raise InputError("a stratum has no judged line, so its inclusion probability is 0",
                         path=path, line=lines[row],
                         item=f"query {qids[row]}, stratum {strata[row]}",
                         fix="Give each line its probability as a sixth field, or judge at "
                             "least one pair of the stratum")
    df["inclusion_prob"] = share
    return df


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return "_" not in text


def read_inclusion(path) -> pd.DataFrame:
    """Read inclusion probabilities: a prels text file, or relgrade's pool table as Parquet.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.parquet`` file with the columns ``query_id``, ``chunk_id``, ``inclusion_prob``
        (the pool stage's table), or a text file read by :func:`read_trec_inclusion`.

    Returns
    -------
    pandas.DataFrame
        ``query_id`` (str), ``chunk_id`` (str), ``inclusion_prob`` (float64 in (0, 1]); a
        text file's ``stratum`` (str) too.

    Raises
    ------
    InputError
        As :func:`read_trec_inclusion`; for Parquet: the file is missing or unreadable, a
        column is missing, or a probability is not in (0, 1] (naming the row, 1-based, and
        the pair).
    """
    import pandas as pd

    path = Path(path)
    if path.suffix != ".parquet":
        return read_trec_inclusion(path)
    import pyarrow.parquet as pq

    if not path.exists():
        raise InputError("file not found", path=path)
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError("not a readable Parquet file", path=path, found=str(e)) from None
    need = ["query_id", "chunk_id", "inclusion_prob"]
    missing = [c for c in need if c not in table.column_names]
    if missing:
        raise InputError("an inclusion table needs the columns query_id, chunk_id, "
                         "inclusion_prob", path=path, found="no " + ", ".join(missing))
    df = _ids_frame({c: table.column(c).to_pandas() for c in need})
    prob = pd.to_numeric(df["inclusion_prob"], errors="coerce").to_numpy(dtype=np.float64,
                                                                          na_value=np.nan)
    bad = ~((prob > 0) & (prob <= 1))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("an inclusion probability must be in (0, 1]", path=path,
                         item=f"row {row + 1}, query {df['query_id'].iat[row]}, "
                              f"chunk {df['chunk_id'].iat[row]}",
                         found=str(df["inclusion_prob"].iat[row]))
    df["inclusion_prob"] = prob
    return df
