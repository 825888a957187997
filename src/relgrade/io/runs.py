"""Reading a run file: TREC text, JSON Lines or Parquet, chosen by the file's extension.

Whatever the format, the result has the columns of :data:`relgrade.schema.RUN` with
relgrade's dtypes (plus ``arm`` when the file has one); checking the run's rules is
:func:`relgrade.ranking.validate_run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from relgrade.errors import InputError
from relgrade.io.files import BOM, iter_jsonl, read_parquet
from relgrade.schema import RUN

if TYPE_CHECKING:
    import pandas as pd

# pandas (and the TREC reader, which imports it) are imported by the functions that build a
# DataFrame: the pool stage takes :func:`run_lines` from here and never loads pandas.

_TREC_SPACE = " \t\r\x0b\x0c"  # the ASCII whitespace a TREC line is split on


def _as_ids(values: pd.Series, name: str, path) -> pd.Series:
    import pandas as pd

    if values.isna().any():
        row = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise InputError(f"{name} is missing", path=path, item=f"row {row + 1}")
    if pd.api.types.is_float_dtype(values):
        raise InputError(f"{name} must be a string or an integer", path=path,
                         found=f"floats such as {values.iloc[0]!r}")
    return values.astype("str")


def _coerce(df: pd.DataFrame, path) -> pd.DataFrame:
    """Columns of the run contract with relgrade's dtypes; extra columns other than arm dropped."""
    import pandas as pd

    missing = [c for c in RUN if c not in df.columns]
    if missing:
        raise InputError(f"a run needs the columns {', '.join(RUN)}", path=path,
                         found="no " + ", ".join(missing))
    out = pd.DataFrame({
        "query_id": _as_ids(df["query_id"], "query_id", path),
        "chunk_id": _as_ids(df["chunk_id"], "chunk_id", path),
    })
    rank = df["rank"]
    if not pd.api.types.is_integer_dtype(rank):
        as_num = pd.to_numeric(rank, errors="coerce")
        bad = as_num.isna() | (as_num != np.round(as_num))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError("rank must be an integer", path=path, item=f"row {row + 1}",
                             found=repr(rank.iloc[row]))
        rank = as_num
    out["rank"] = rank.to_numpy().astype(np.int64, copy=False)
    if df["score"].dtype == np.float64:  # already numbers: no conversion, no copy
        out["score"] = df["score"].to_numpy()
    else:
        score = pd.to_numeric(df["score"], errors="coerce")
        bad = score.isna() & df["score"].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError("score must be a number", path=path, item=f"row {row + 1}",
                             found=repr(df["score"].iloc[row]))
        out["score"] = score.to_numpy(dtype=np.float64, na_value=np.nan)
    if "arm" in df.columns:
        out["arm"] = _as_ids(df["arm"], "arm", path)
    return out


def _read_jsonl_run(path: Path) -> pd.DataFrame:
    import pandas as pd

    cols = {c: [] for c in RUN}
    arms = []
    for line, obj in iter_jsonl(path):
        for c in RUN:
            if c not in obj:
                raise InputError(f"a run row needs the keys {', '.join(RUN)}",
                                 path=path, line=line, found=f"no {c}")
        for c in ("query_id", "chunk_id"):
            v = obj[c]
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise InputError(f"{c} must be a string or an integer", path=path, line=line,
                                 found=repr(v))
            cols[c].append(str(v))
        r = obj["rank"]
        if isinstance(r, bool) or not isinstance(r, int):
            raise InputError("rank must be an integer", path=path, line=line, found=repr(r))
        cols["rank"].append(r)
        s = obj["score"]
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            raise InputError("score must be a number", path=path, line=line, found=repr(s))
        if not np.isfinite(s):
            raise InputError("score must be a finite number", path=path, line=line,
                             found=repr(s))
        cols["score"].append(float(s))
        if "arm" in obj:
            arms.append(str(obj["arm"]))
    df = pd.DataFrame({
        "query_id": pd.Series(cols["query_id"], dtype="str"),
        "chunk_id": pd.Series(cols["chunk_id"], dtype="str"),
        "rank": np.asarray(cols["rank"], dtype=np.int64),
        "score": np.asarray(cols["score"], dtype=np.float64),
    })
    if arms and len(arms) == len(df):
        df["arm"] = pd.Series(arms, dtype="str")
    return df


class RunLines:
    """Where the rows a run reader returns sit in their file, found only when asked.

    Row ``i`` of :func:`read_run`'s table for a TREC or JSON Lines file is the file's
    ``i``-th line that is not blank (a TREC line of ASCII whitespace alone, a JSON Lines
    line of whitespace alone: the lines both readers skip). Nothing is read until
    :meth:`lines` is called, which :func:`relgrade.ranking.validate_run` does only to word
    an error. Make one with :func:`run_lines`.
    """

    def __init__(self, path, *, trec: bool):
        self.path = Path(path)
        self._blank = ((lambda text: not text.strip(_TREC_SPACE)) if trec
                       else (lambda text: not text.strip()))

    def lines(self, rows) -> list[int]:
        """The 1-based line of each 0-based row in ``rows``.

        Parameters
        ----------
        rows : sequence of int
            Rows of the table the reader returned for this file, each below its row count.

        Returns
        -------
        list of int
            One line number per row, in the order of ``rows``.

        Raises
        ------
        InputError
            The file is missing, or holds fewer rows than asked for (it changed since it
            was read).
        """
        want = {int(r) for r in rows}
        found: dict[int, int] = {}
        row = -1
        try:
            f = open(self.path, "rb")
        except OSError:
            raise InputError("file not found", path=self.path) from None
        with f:
            for i, raw in enumerate(f, start=1):
                if i == 1 and raw.startswith(BOM):
                    raw = raw[len(BOM):]
                text = raw.rstrip(b"\n").removesuffix(b"\r").decode("utf-8", "replace")
                if self._blank(text):
                    continue
                row += 1
                if row in want:
                    found[row] = i
                    if len(found) == len(want):
                        break
        if len(found) < len(want):
            raise InputError("the file changed since it was read: it has fewer rows",
                             path=self.path, found=f"{row + 1} rows")
        return [found[int(r)] for r in rows]


def run_lines(path) -> RunLines | None:
    """Where the rows :func:`read_run` returns for ``path`` sit in the file.

    Parameters
    ----------
    path : str or os.PathLike
        A run file, as for :func:`read_run`.

    Returns
    -------
    RunLines or None
        None for a Parquet file (it has no lines); the file is not read here.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "a.trec")
    ...     _ = open(p, "w").write("q Q0 a 1 2 t\\n\\n  \\nq Q0 b 2 1 t\\n")
    ...     run_lines(p).lines([1, 0])
    [4, 1]
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        return None
    return RunLines(path, trec=suffix not in (".jsonl", ".ndjson"))


def read_run(path) -> pd.DataFrame:
    """Read a run from a file, choosing the format by its extension.

    Parameters
    ----------
    path : str or os.PathLike
        ``.jsonl``/``.ndjson`` (one object per row with keys ``query_id``, ``chunk_id``,
        ``rank``, ``score``), ``.parquet`` (those columns), or anything else: a TREC run
        (``.trec``, ``.run``, ``.txt``, ...), read by :func:`relgrade.io.trec.read_trec_run`.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``chunk_id`` (str), ``rank`` (int64), ``score``
        (float64), and ``arm`` (str) when the file has it; rows in file order. Numeric ids
        become their decimal text (JSON ``4411`` is chunk ``"4411"``).

    Raises
    ------
    InputError
        The file is missing or unreadable, a column or key is missing, an id is not a
        string or integer, a rank is not an integer, a score is not a number. TREC and JSONL
        errors name the line.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl_run(path)
    if suffix == ".parquet":
        pa.default_memory_pool().release_unused()  # e.g. a previous run the caller dropped
        df = read_parquet(path)
        pa.default_memory_pool().release_unused()  # the decoder's buffers are garbage now
        return _coerce(df, path)
    from relgrade.io.trec import read_trec_run

    return read_trec_run(path)
