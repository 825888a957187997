"""Judgment files: grade rows, key JSONL, TREC qrels and Parquet grades, read by one rule set.

A judgment says how relevant one chunk is to one query: ``(query_id, chunk_id, grade)``.
relgrade meets judgments in four files, and reads them all here:

* **JSON Lines** (``.jsonl``, ``.ndjson``): one object per line with ``query_id``,
  ``chunk_id`` and ``grade`` (grade rows add ``reason``, the long grades table ``grader`` and
  ``round``; other keys are ignored). The key (``data/key/key.jsonl``) is such a file.
* **TREC qrels** (``.qrels``): ``qid iter docid grade`` per line, parsed by
  :func:`relgrade.io.trec.read_trec_qrels`, the one TREC qrels line parser.
* **Parquet** (``.parquet``): columns as in JSON Lines.
* A file of another extension is JSON Lines when its first non-blank character is ``{``,
  else TREC qrels.

The rules, the same for every format and every command that reads judgments
(``relgrade evaluate``, ``agreement``, ``aggregate``, ``grade import``):

1. **Encoding.** UTF-8; a leading byte-order mark and CRLF line ends are accepted; a line
   that is not valid UTF-8 is refused, naming it.
2. **Whitespace and blank lines.** Blank lines (nothing but whitespace) are skipped anywhere.
   TREC fields are separated by runs of ASCII whitespace (spaces, tabs), as trec_eval splits
   them; leading and trailing whitespace is ignored.
3. **No comments.** No judgment format has a comment syntax: a line whose first non-blank
   character is ``#`` is refused rather than guessed at (in TREC qrels, a query id starting
   with ``#``; in JSON Lines, a line that is not JSON).
4. **Ids.** ``query_id`` and ``chunk_id`` (and ``grader``) are non-empty and hold no
   whitespace, Unicode spaces such as the no-break space included (no TREC file could
   carry them); in JSON they are strings or integers
   (``4411`` and ``"4411"`` are the same chunk), never ``true``, ``1.5`` or ``null``.
   Ids are returned as ``str``.
5. **Grades.** An integer: in JSON a number without fraction or exponent (not ``true``,
   ``1.0`` or ``"1"``); in TREC qrels an optionally signed run of ASCII digits; in Parquet
   an integer column. When a scale is given, every grade must be on it. Text grades
   (``"good"``) are read only with their order declared (``labels``, lowest first; the
   CLI's ``--labels``), as their position: 0, 1, 2, ...
6. **One grade per pair.** A second row for the same (query, chunk) pair (per grader and
   round in the long grades table) is refused, naming both lines. (A grader's round file
   with its bank sidecar, where a regrade is recorded beside the grade it supersedes, is
   read through the bank instead: :mod:`relgrade.graders.recorded`.)
7. **Not empty.** A file without a single judgment is refused: an empty key or qrels file
   would otherwise score every run as undefined.

Every refusal is an :class:`~relgrade.errors.InputError` naming the file, the line (the
row for Parquet) and the pair.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relgrade.errors import InputError
from relgrade.io.files import BOM, iter_jsonl, read_lines, read_parquet
from relgrade.io.sniff import read_head
from relgrade.io.trec import QRELS_SCHEMA, read_trec_qrels, read_trec_qrels_table
from relgrade.ranking import numpy_values

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported by the functions that build a DataFrame: :func:`read_judgment_table`
# reads TREC qrels into Arrow for ``relgrade evaluate``, whose process never loads it.

#: The formats :func:`read_judgments` reads.
FORMATS = ("jsonl", "qrels", "parquet")

#: The columns of a judgments table (see :func:`read_judgments`).
JUDGMENT_COLUMNS = ["query_id", "chunk_id", "grade", "reason"]

_JSONL_SUFFIXES = (".jsonl", ".ndjson")


# --- which format --------------------------------------------------------------------

def judgment_format(path, fmt: str | None = None) -> str:
    """The format of a judgment file: ``fmt`` when given, else told from the file.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    fmt : {"jsonl", "qrels", "parquet"}, optional
        The format, when the caller knows it.

    Returns
    -------
    str
        One of :data:`FORMATS`: by extension (``.parquet``, ``.jsonl``/``.ndjson``,
        ``.qrels``), else ``"jsonl"`` when the first non-blank character (after a byte-order
        mark) is ``{``, else ``"qrels"``.

    Raises
    ------
    InputError
        ``fmt`` is not a known format, or (when the file must be looked at) the file is
        missing or is a folder.
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError("unknown judgment format", path=path, found=fmt,
                             fix="Use one of " + ", ".join(FORMATS))
        return fmt
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix in _JSONL_SUFFIXES:
        return "jsonl"
    if suffix == ".qrels":
        return "qrels"
    head = read_head(path, 1 << 12)
    return "jsonl" if head.removeprefix(BOM).lstrip().startswith(b"{") else "qrels"


# --- reading -------------------------------------------------------------------------

def read_judgments(path, *, scale: Iterable[int] | None = None,
                   fmt: str | None = None, labels: Sequence[str] | None = None) -> pd.DataFrame:
    """Read a judgment file (JSON Lines grade rows or key, TREC qrels, Parquet).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    scale : iterable of int, optional
        The allowed grades; ``None`` accepts every integer.
    fmt : {"jsonl", "qrels", "parquet"}, optional
        The format; by default told from the file (see :func:`judgment_format`).
    labels : sequence of str, optional
        Text grades in order, lowest first (``["bad", "fair", "good"]``): a grade written as
        the k-th label reads as the integer k. Without it text grades are refused; with it,
        every grade of a JSON Lines or Parquet file must be one of the labels (TREC qrels
        hold numbers only).

    Returns
    -------
    pandas.DataFrame of shape (n_judgments, 4)
        Columns ``query_id`` (str), ``chunk_id`` (str), ``grade`` (int64), ``reason`` (str,
        ``""`` where the file has none), in file order.

    Raises
    ------
    InputError
        Any rule of the module (see its docstring), naming the file, the line and the pair.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "key.qrels")
    >>> _ = open(path, "w").write("q1 0 c7 2\\n\\nq1 0 c9 0\\n")
    >>> read_judgments(path, scale=[0, 1, 2]).to_dict("records")[0]
    {'query_id': 'q1', 'chunk_id': 'c7', 'grade': 2, 'reason': ''}
    """
    return _read(Path(path), scale=scale, fmt=fmt, lines_needed=False, labels=labels)[0]


def read_judgment_table(path, *, scale: Iterable[int] | None = None) -> pa.Table:
    """:func:`read_judgments`' pairs and grades as an Arrow table, for scoring.

    TREC qrels that Arrow's CSV reader takes (:func:`relgrade.io.trec.read_trec_qrels_table`)
    are read and checked on Arrow columns, without pandas; any other file, and any file
    that breaks a rule, is read by :func:`read_judgments`, which accepts or refuses it with
    its own message. The rows are the same either way.

    Parameters
    ----------
    path : str or os.PathLike
        A judgment file, as for :func:`read_judgments` (its format told from the file).
    scale : iterable of int, optional
        The allowed grades; ``None`` accepts every integer.

    Returns
    -------
    pyarrow.Table of shape (n_judgments, 3)
        ``query_id``, ``chunk_id`` (large_string), ``grade`` (int64), in file order: the
        first three columns of ``read_judgments(path, scale=scale)``.

    Raises
    ------
    InputError
        As :func:`read_judgments`.
    """
    if judgment_format(path) == "qrels":
        table = read_trec_qrels_table(path)
        if _passes(table, scale):
            return table
    df = read_judgments(path, scale=scale)
    return pa.Table.from_pandas(df[["query_id", "chunk_id", "grade"]],
                                preserve_index=False).cast(QRELS_SCHEMA)


def _passes(table: pa.Table, scale) -> bool:
    """Whether TREC qrels read into Arrow keep the rules :func:`_read` checks after the
    reader's own (pairs graded twice are refused by the reader): no comment line, no
    empty or spaced id, every grade on the scale, not empty."""
    if table.num_rows == 0:
        return False
    if numpy_values(pc.starts_with(table["query_id"], pattern="#")).any():
        return False
    for name in ("query_id", "chunk_id"):
        if _blank_or_spaced(table[name]).any():
            return False
    if scale is not None and not np.isin(numpy_values(table["grade"]),
                                         [int(g) for g in scale]).all():
        return False
    return True


def judgment_rows(path, *, scale: Iterable[int] | None = None,
                  fmt: str | None = None) -> list[tuple[int, dict]]:
    """Judgments as grade rows with their line numbers, for a grade-row validator.

    Parameters
    ----------
    path, scale, fmt
        As :func:`read_judgments`.

    Returns
    -------
    list of (int, dict)
        ``(line, {"query_id", "chunk_id", "reason", "grade"})`` per judgment, in file order
        and in the grade row's key order (see
        :func:`relgrade.protocol.grades.validate_grade_rows`); the line is the row number
        for Parquet.

    Raises
    ------
    InputError
        As :func:`read_judgments`.
    """
    df, lines = _read(Path(path), scale=scale, fmt=fmt, lines_needed=True)
    return [(int(line), {"query_id": q, "chunk_id": c, "reason": r, "grade": int(g)})
            for line, q, c, r, g in zip(lines, df["query_id"], df["chunk_id"], df["reason"],
                                        df["grade"])]


def judgment_objects(path) -> list[tuple[int, dict]]:
    """The objects of a JSON Lines grade-row file, unchecked, for a validator of grade rows.

    Rules 1–3 of the module apply (encoding, blank lines, no comments); every line must be
    a JSON object. The objects keep the file's key order, so that
    :func:`relgrade.protocol.grades.validate_grade_rows` can check it and the rest.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    list of (int, dict)
        ``(line, object)`` per non-blank line.

    Raises
    ------
    InputError
        The file is missing, a line is not valid UTF-8, is a comment, is not JSON or is not
        a JSON object.
    """
    return list(_objects(Path(path)))


def read_key_table(path, columns: Sequence[str] = ("query_id", "chunk_id", "grade")
                   ) -> pd.DataFrame:
    """A key file (``key.jsonl``) as a table, read as Arrow columns.

    A key relgrade froze is canonical JSON lines of ``query_id``, ``chunk_id`` (strings)
    and ``grade`` (an integer); Arrow's JSON reader parses it under that schema (one
    thread) into pandas' ``str`` and int64 columns, without a Python dict per line. A file
    it refuses (another type, a key missing), an empty one or one with other keys is read
    one object per line (:func:`relgrade.io.files.read_jsonl`), as before.

    Parameters
    ----------
    path : str or os.PathLike
        The key file; it must exist.
    columns : sequence of str
        The table's columns, in order (the key's three).

    Returns
    -------
    pandas.DataFrame of shape (n_pairs, 3)
        ``pandas.DataFrame(read_jsonl(path), columns=columns)``: the file's rows in order.
    """
    import pandas as pd

    import pyarrow as pa
    import pyarrow.json as pj

    from relgrade.io.files import read_jsonl

    cols = list(columns)
    schema = pa.schema([("query_id", pa.string()), ("chunk_id", pa.string()),
                        ("grade", pa.int64())])
    table = None
    if cols == schema.names and Path(path).stat().st_size:
        try:
            table = pj.read_json(path, read_options=pj.ReadOptions(use_threads=False),
                                 parse_options=pj.ParseOptions(
                                     explicit_schema=schema,
                                     unexpected_field_behavior="error"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = None
    if table is None or not table.num_rows or any(c.null_count for c in table.columns):
        return pd.DataFrame(read_jsonl(path), columns=cols)
    text = pd.StringDtype("pyarrow", na_value=np.nan)
    out = table.to_pandas(types_mapper={pa.string(): text, pa.large_string(): text}.get)
    del table
    pa.default_memory_pool().release_unused()  # the parser's blocks are garbage now
    return out.astype({"query_id": "str", "chunk_id": "str", "grade": "int64"})


def read_made_on_table(path, columns: Sequence[str]) -> pd.DataFrame:
    """A key's made-on file (``made_on.jsonl``) as a table, read as Arrow columns.

    A made-on file relgrade wrote is canonical JSON lines of string fields, ``query_id``,
    ``chunk_id`` and the hashes of what each key row's grade was made on. Arrow's streaming
    JSON reader parses it under that schema (one thread, blocks of 8 MiB), each block's
    hashes dictionary-encoded before the next is read, so the hashes cost a code per line
    and each distinct hash once. A file it refuses (another type, a key missing or
    unknown), an empty one, or one with a null is read one object per line
    (:func:`relgrade.io.files.read_jsonl`), as before.

    Parameters
    ----------
    path : str or os.PathLike
        The made-on file; it must exist.
    columns : sequence of str
        The table's columns, in order (:data:`relgrade.protocol.key.MADE_ON_COLUMNS`).

    Returns
    -------
    pandas.DataFrame of shape (n_pairs, len(columns))
        The file's rows in order: ``query_id``, ``chunk_id`` as str, every other column a
        categorical of str (the values of ``pandas.DataFrame(read_jsonl(path),
        columns=columns)``); from the row reader, that frame itself.
    """
    import pandas as pd

    import pyarrow.json as pj

    from relgrade.io.files import read_jsonl

    cols = list(columns)
    schema = pa.schema([(name, pa.string()) for name in cols])
    table = None
    if Path(path).stat().st_size:
        try:
            reader = pj.open_json(path, read_options=pj.ReadOptions(use_threads=False,
                                                                    block_size=1 << 23),
                                  parse_options=pj.ParseOptions(
                                      explicit_schema=schema, unexpected_field_behavior="error"))
            parts = []
            for batch in reader:
                if any(c.null_count for c in batch.columns):
                    raise pa.ArrowInvalid("a null field")
                parts.append(pa.table([c if name in cols[:2] else pc.dictionary_encode(c)
                                       for name, c in zip(cols, batch.columns)], names=cols))
            table = pa.concat_tables(parts).unify_dictionaries() if parts else None
            del parts
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = None
    if table is None or not table.num_rows:
        return pd.DataFrame(read_jsonl(path), columns=cols)
    text = pd.StringDtype("pyarrow", na_value=np.nan)
    out = pd.DataFrame({name: (table[name].to_pandas(types_mapper={
        pa.string(): text, pa.large_string(): text}.get).astype("str") if name in cols[:2]
        else table[name].to_pandas()) for name in cols})
    del table
    pa.default_memory_pool().release_unused()  # the parser's blocks are garbage now
    return out


def read_grades_table(path, *, scale: Iterable[int] | None = None,
                      labels: Sequence[str] | None = None,
                      repeats: bool = False) -> pd.DataFrame:
    """The long grades table (several graders per pair) from Parquet or JSON Lines.

    Parameters
    ----------
    path : str or os.PathLike
        ``.parquet`` (the grades stage's output) or ``.jsonl``/``.ndjson`` rows with
        ``query_id``, ``chunk_id``, ``grader``, ``grade`` and optional ``round``.
    scale : iterable of int, optional
        The allowed grades; ``None`` accepts every integer.
    labels : sequence of str, optional
        Text grades in order, lowest first (see :func:`read_judgments`).
    repeats : bool, default False
        Accept several grades by one grader on one pair in one round (repeated labels);
        False refuses them, naming the grader, the pair and both lines.

    Returns
    -------
    pandas.DataFrame of shape (n_grades, n_columns)
        ``query_id``, ``chunk_id``, ``grader`` (str) and ``grade`` (int64), plus ``round``
        when any row has one (float64 with NaN for JSON rows without one, as read from
        Parquet otherwise) and every other column of a Parquet file, in file order.

    Raises
    ------
    InputError
        Any rule of the module, applied per grader and round; an unknown extension; a round
        that is not an integer.
    """
    import pandas as pd

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = read_parquet(path)
        _require(df, ["query_id", "chunk_id", "grader", "grade"], path)
        df = df.copy()
        lines = np.arange(1, len(df) + 1)
        for name in ("query_id", "chunk_id", "grader"):
            df[name] = _id_column(df[name], name, path, lines)
        df["grade"] = _grade_column(df, path, lines, labels=labels)
    elif suffix in _JSONL_SUFFIXES:
        df, lines = _jsonl_table(path, ids=("query_id", "chunk_id", "grader"), round_=True,
                                 labels=labels)
    else:
        raise InputError("unknown grades format (use .parquet or .jsonl)", path=path,
                         found=suffix or "no extension")
    key = ["grader", "query_id", "chunk_id"] + (["round"] if "round" in df.columns else [])
    _check(df, path=path, lines=lines, key=key, scale=scale, who="grader",
           pairs_checked=repeats)
    if "round" in df.columns and suffix != ".parquet" and df["round"].isna().all():
        df = df.drop(columns="round")
    return df


def _read(path: Path, *, scale, fmt, lines_needed: bool, labels=None):
    import pandas as pd

    kind = judgment_format(path, fmt)
    if kind == "qrels":
        df = read_trec_qrels(path)
        lines = None
        hashed = df["query_id"].str.startswith("#").to_numpy(dtype=bool)
        if hashed.any():
            lines = _nonblank_lines(path)
            i = int(hashed.argmax())
            raise InputError("a comment line: no judgment format has comments", path=path,
                             line=int(lines[i]), found=repr(df["query_id"].iat[i]),
                             fix="Delete the line")
        df["reason"] = ""
        if lines_needed:
            lines = _nonblank_lines(path)
    elif kind == "parquet":
        df = read_parquet(path)
        _require(df, ["query_id", "chunk_id", "grade"], path)
        lines = np.arange(1, len(df) + 1)
        reason = (df["reason"].where(df["reason"].map(lambda r: isinstance(r, str)), "")
                  if "reason" in df.columns else "")
        out = pd.DataFrame({"query_id": _id_column(df["query_id"], "query_id", path, lines),
                            "chunk_id": _id_column(df["chunk_id"], "chunk_id", path, lines)})
        out["grade"] = _grade_column(df, path, lines, labels=labels)
        out["reason"] = reason
        df = out
    else:
        df, lines = _jsonl_table(path, ids=("query_id", "chunk_id"), reason=True,
                                 labels=labels)
    # read_trec_qrels has refused a pair graded twice already, naming both lines
    _check(df, path=path, lines=lines, key=["query_id", "chunk_id"], scale=scale,
           where="line" if kind != "parquet" else "row", pairs_checked=kind == "qrels")
    return df[JUDGMENT_COLUMNS].astype({"reason": "str"}), lines


# --- JSON Lines ----------------------------------------------------------------------

def _objects(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line, object)`` per non-blank line; a comment or a non-object line is refused."""
    return iter_jsonl(path, comments="refuse")


def _json_id(value, name: str, path: Path, line: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{name} must be a string or an integer", path=path, line=line,
                         found=_shown(value))
    return str(value)


def _jsonl_table(path: Path, *, ids: tuple[str, ...], reason: bool = False,
                 round_: bool = False,
                 labels: Sequence[str] | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    import pandas as pd

    required = (*ids, "grade")
    cols: dict[str, list] = {name: [] for name in required}
    reasons, rounds, lines = [], [], []
    for line, obj in _objects(path):
        missing = [k for k in required if k not in obj]
        if missing:
            raise InputError(f"a row needs {', '.join(required)}", path=path, line=line,
                             found="no " + ", ".join(missing))
        for name in ids:
            cols[name].append(_json_id(obj[name], name, path, line))
        g = obj["grade"]
        if labels is not None:
            g = _label_code(g, labels, path=path, line=line, item=_item(obj, ids))
        elif isinstance(g, bool) or not isinstance(g, int):
            raise InputError("grade must be an integer", path=path, line=line,
                             item=_item(obj, ids), found=_shown(g), **_text_fix(g))
        cols["grade"].append(g)
        if reason:
            r = obj.get("reason")
            reasons.append(r if isinstance(r, str) else "")
        if round_:
            rnd = obj.get("round")
            if rnd is not None and (isinstance(rnd, bool) or not isinstance(rnd, int)):
                raise InputError("round must be an integer", path=path, line=line,
                                 item=_item(obj, ids), found=_shown(rnd))
            rounds.append(np.nan if rnd is None else float(rnd))
        lines.append(line)
    df = pd.DataFrame({name: pd.Series(cols[name], dtype="str") for name in ids})
    df["grade"] = pd.Series(cols["grade"], dtype="int64")
    if reason:
        df["reason"] = pd.Series(reasons, dtype="str")
    if round_:
        df["round"] = pd.Series(rounds, dtype="float64")
    return df, np.asarray(lines, dtype=np.int64)


# --- Parquet -------------------------------------------------------------------------

def _require(df: pd.DataFrame, columns: list[str], path: Path) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"a judgment table needs the columns {', '.join(columns)}",
                         path=path, found="no " + ", ".join(missing))


def _id_column(col: pd.Series, name: str, path: Path, rows: np.ndarray) -> pd.Series:
    import pandas as pd

    if pd.api.types.is_integer_dtype(col.dtype) and not col.isna().any():
        return col.astype("int64").astype("str")
    bad = col.map(lambda v: isinstance(v, bool) or not isinstance(v, (str, int, np.integer)))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{name} must be a string or an integer", path=path,
                         found=f"row {int(rows[i])}: {_shown(col.iat[i])}")
    return col.map(str).astype("str")


def _text_fix(value) -> dict:
    """The way forward for a grade written as text: declare the labels' order."""
    if isinstance(value, str) and not value.strip().lstrip("+-").isdigit():
        return {"fix": "Text grades need their order: --labels LOWEST,...,HIGHEST "
                       "(e.g. --labels bad,fair,good reads them as 0, 1, 2)"}
    return {}


def _label_code(value, labels: Sequence[str], *, path: Path, line: int, item: str) -> int:
    """The position of a text grade among ``labels`` (lowest first)."""
    if isinstance(value, str) and value in labels:
        return list(labels).index(value)
    raise InputError("grade is not one of the declared labels", path=path, line=line,
                     item=item, found=_shown(value),
                     fix="Use one of " + ", ".join(labels) + " (from --labels)")


def _grade_column(df: pd.DataFrame, path: Path, rows: np.ndarray,
                  labels: Sequence[str] | None = None) -> pd.Series:
    import pandas as pd

    col = df["grade"]
    if labels is not None:
        codes = [(_label_code(v, labels, path=path, line=int(r),
                              item=f"pair ({q}, {c})"))
                 for v, r, q, c in zip(col, rows, df["query_id"], df["chunk_id"])]
        return pd.Series(codes, index=df.index, dtype="int64")
    if pd.api.types.is_bool_dtype(col.dtype):
        ok = np.zeros(len(col), dtype=bool)
    elif pd.api.types.is_integer_dtype(col.dtype):
        ok = ~col.isna().to_numpy(dtype=bool)
    elif col.dtype == object:
        ok = col.map(lambda v: isinstance(v, (int, np.integer))
                     and not isinstance(v, bool)).to_numpy(dtype=bool)
    else:  # floats, strings: not an integer column, whatever the values
        ok = np.zeros(len(col), dtype=bool)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        fix = _text_fix(col.iat[i]).get("fix", "Store grades in an integer column")
        raise InputError("grade must be an integer", path=path,
                         item=f"pair ({df['query_id'].iat[i]}, {df['chunk_id'].iat[i]})",
                         found=f"row {int(rows[i])}: {_shown(col.iat[i])}", fix=fix)
    return col.astype("int64")


# --- the rules every format shares ---------------------------------------------------

def _off_scale(df: pd.DataFrame, scale) -> np.ndarray:
    if scale is None:
        return np.zeros(len(df), dtype=bool)
    return ~df["grade"].isin([int(g) for g in scale]).to_numpy(dtype=bool)


def _check(df: pd.DataFrame, *, path: Path, lines, key: list[str], scale,
           who: str | None = None, where: str = "line", pairs_checked: bool = False) -> None:
    """Empty file, ids, scale and repeated pairs: the rules every format shares.

    ``lines`` holds each row's line (or row) number; ``None`` for TREC qrels, whose line
    numbers are counted only when an error needs one. ``pairs_checked``: the reader has
    refused repeated pairs already (TREC qrels), so they are not looked for again.
    """
    if df.empty:
        raise InputError("no judgments in the file", path=path,
                         fix="A judgment file holds at least one (query, chunk, grade) row")

    def item(i: int) -> str:
        pair = f"pair ({df['query_id'].iat[i]}, {df['chunk_id'].iat[i]})"
        return f"{df[who].iat[i]}: {pair}" if who else pair

    numbers = lines

    def number_of(i: int) -> int:
        nonlocal numbers
        if numbers is None:  # TREC qrels: count the lines only now that an error needs one
            numbers = _nonblank_lines(path)
        return int(numbers[i])

    def refuse(rule: str, i: int, found: str, **kw):
        if where == "line":
            return InputError(rule, path=path, line=number_of(i), found=found, **kw)
        return InputError(rule, path=path, found=f"row {number_of(i)}: {found}", **kw)

    for name in [c for c in ("query_id", "chunk_id", who) if c]:
        bad = _blank_or_spaced(df[name])
        if bad.any():
            i = int(bad.argmax())
            raise refuse(f"{name} is empty or holds whitespace", i, repr(df[name].iat[i]))
    off = _off_scale(df, scale)
    if off.any():
        i = int(off.argmax())
        shown = ",".join(str(g) for g in sorted({int(g) for g in scale}))
        raise refuse(f"grade outside the scale {shown}", i, str(int(df["grade"].iat[i])),
                     item=item(i))
    if pairs_checked:
        return
    repeated = df.duplicated(key, keep=False).to_numpy(dtype=bool)
    if repeated.any():
        group = df.groupby(key, dropna=False, sort=False).ngroup().to_numpy()
        first = int(repeated.argmax())
        second = int(np.flatnonzero(group == group[first])[1])
        a, b = number_of(first), number_of(second)
        rule = ("one grader grades one (query, chunk) pair twice" if who
                else "one (query, chunk) pair is graded twice")
        extra = {"line": b} if where == "line" else {}
        raise InputError(rule, path=path, **extra, item=item(second),
                         found=f"{where}s {a} and {b}", fix="Keep one grade per pair")


def _blank_or_spaced(col) -> np.ndarray:
    """True where an id is empty or holds a character ``str.isspace`` calls whitespace.

    Arrow's regex engine finds the few ids with a character outside printable ASCII; only
    those are looked at in Python (TREC fields are already split on ASCII whitespace, but
    may hold a no-break space or another Unicode space).
    """
    if isinstance(col, (pa.Array, pa.ChunkedArray)):
        arr = col.cast(pa.large_string())
    else:
        arr = pa.array(col, type=pa.large_string())
    bad = numpy_values(pc.binary_length(arr)) == 0
    odd = np.flatnonzero(numpy_values(pc.match_substring_regex(arr, r"[^\x21-\x7e]")))
    for i in odd:
        bad[i] = any(ch.isspace() for ch in arr[int(i)].as_py())
    return bad


def _nonblank_lines(path: Path) -> np.ndarray:
    """The 1-based numbers of the file's non-blank lines (one per TREC qrels row)."""
    return np.asarray([i for i, line in enumerate(read_lines(path), start=1)
                       if line.strip(" \t\r\x0b\x0c")], dtype=np.int64)


def _item(obj: dict, ids: tuple[str, ...]) -> str:
    pair = f"pair ({obj.get('query_id')}, {obj.get('chunk_id')})"
    return f"{obj['grader']}: {pair}" if "grader" in ids else pair


def _shown(value) -> str:
    """A value as it appears in a JSON file (``true``, ``1.0``, ``"2"``)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
