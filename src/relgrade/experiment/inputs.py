"""A new experiment's input files: read in the formats users bring, written in relgrade's own.

Each function reads one input, checks it, and writes it into the experiment's
``data/input/`` folder (a folder being filled, not yet in place), returning the name it was
written under and what the next inputs are checked against:

- the corpus: a source spec (``.yaml``, copied; a local ``sdist-file`` archive is copied
  beside it), a chunks file (``.jsonl``/``.parquet`` with ``chunk_id``, ``header``, ``text``,
  ``source``; copied) or a BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``; converted to
  chunks: ``chunk_id`` = ``_id``, ``header`` = ``title``, ``source`` = the file's name);
- the queries: a TSV or JSONL with ``query_id``, ``query``, ``group`` (copied) or a BEIR
  ``queries.jsonl`` (``_id``, ``text``; converted to a TSV whose ``group`` is
  ``metadata.group`` when given, else ``all``);
- the intents: a TSV or JSONL with ``query_id``, ``query``, ``intent``, checked against the
  queries (copied);
- external runs: TREC, JSONL or Parquet (:func:`relgrade.io.runs.read_run`), checked against
  the queries and, when the corpus is a chunks file, its chunk ids (copied).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import yaml

from relgrade.errors import InputError
from relgrade.io.files import (
    iter_jsonl,
    read_rows,
    read_table,
    read_yaml,
    write_jsonl,
    write_text,
    write_tsv,
)
from relgrade.io.runs import read_run, run_lines
from relgrade.protocol import corpus as corpus_mod
from relgrade.protocol import intents as intents_mod
from relgrade.protocol import queries as queries_mod
from relgrade.ranking import validate_run
from relgrade.schema import INTENTS

#: Default group of queries that come without one (BEIR).
DEFAULT_GROUP = "all"


#: ``relgrade init``'s advice for a chunk with no text: its option, and the params key it sets.
ALLOW_EMPTY_FIX = ("Remove those chunks, or run relgrade init again with --allow-empty to keep "
                   "them (params corpus.allow_empty: true; they are then counted in the corpus "
                   "manifest)")


def corpus_input(src, folder, *, allow_empty: bool = False) -> tuple[str, pd.Series | None]:
    """Check the corpus ``src`` and write it into ``folder``.

    Parameters
    ----------
    src : str or os.PathLike
        A source spec (``.yaml``/``.yml``), a chunks file or a BEIR corpus (``.jsonl``), or
        a chunks Parquet file.
    folder : pathlib.Path
        The experiment's ``data/input`` folder being filled.
    allow_empty : bool, default False
        Accept chunks whose text is empty or blank (``relgrade init --allow-empty``, params
        ``corpus.allow_empty``).

    Returns
    -------
    name : str
        The file written (``corpus.source.yaml``, ``chunks.jsonl`` or ``chunks.parquet``).
    chunk_ids : pandas.Series of str or None
        The corpus's chunk ids; None for a source spec (known once the corpus stage ran).

    Raises
    ------
    InputError
        An unknown suffix; a bad source spec (see
        :func:`relgrade.protocol.corpus.parse_source_spec`) or missing local archive; a chunks
        table that fails :func:`relgrade.protocol.corpus.validate_chunks`, or holds a chunk
        whose text is empty or blank unless ``allow_empty``
        (:func:`relgrade.protocol.corpus.check_empty`, the corpus stage's rule, naming the
        first such chunk and its line, and ``--allow-empty``); a BEIR line without ``_id`` (names the line) or without ``text``.
    """
    src = Path(src)
    suffix = src.suffix.lower()
    if suffix in (".yaml", ".yml"):
        raw = read_yaml(src)
        spec = corpus_mod.parse_source_spec(raw, path=src)
        if spec["kind"] == "sdist-file":
            archive = src.parent / spec["path"]
            if not archive.is_file():
                raise InputError("source archive not found", path=src, item=str(archive))
            shutil.copyfile(archive, folder / archive.name)
            raw = {**raw, "path": archive.name}
            write_text(folder / "corpus.source.yaml", yaml.safe_dump(raw, sort_keys=False))
        else:
            shutil.copyfile(src, folder / "corpus.source.yaml")
        return "corpus.source.yaml", None
    if suffix == ".parquet":
        chunks = corpus_mod.validate_chunks(read_table(src), path=src)
        # the corpus stage's rule, under the params init writes (corpus.allow_empty)
        corpus_mod.check_empty(chunks, path=src, allow_empty=allow_empty, fix=ALLOW_EMPTY_FIX)
        shutil.copyfile(src, folder / "chunks.parquet")
        return "chunks.parquet", chunks["chunk_id"].astype(str)
    if suffix in (".jsonl", ".ndjson"):
        rows = list(iter_jsonl(src))
        if any("_id" in row for _, row in rows) and not any("chunk_id" in row for _, row in rows):
            converted = beir_corpus(rows, path=src)
            corpus_mod.check_empty(converted, path=src, lines=[n for n, _ in rows],
                                   allow_empty=allow_empty, fix=ALLOW_EMPTY_FIX)
            write_jsonl(folder / "chunks.jsonl", converted.to_dict("records"))
            return "chunks.jsonl", converted["chunk_id"]
        table = pd.DataFrame([row for _, row in rows])
        chunks = corpus_mod.validate_chunks(table, path=src, lines=[n for n, _ in rows])
        corpus_mod.check_empty(chunks, path=src, lines=[n for n, _ in rows],
                               allow_empty=allow_empty, fix=ALLOW_EMPTY_FIX)
        shutil.copyfile(src, folder / "chunks.jsonl")
        return "chunks.jsonl", chunks["chunk_id"].astype(str)
    raise InputError("a corpus is a source spec (.yaml), a chunks file (.jsonl, .parquet) or "
                     "a BEIR corpus.jsonl", path=src, found=repr(src.suffix))


def beir_corpus(rows: list[tuple[int, dict]], *, path=None) -> pd.DataFrame:
    """The chunks table of a BEIR corpus's rows.

    Parameters
    ----------
    rows : list of (int, dict)
        ``(line, row)`` pairs as :func:`relgrade.io.files.iter_jsonl` yields them; each row
        has ``_id`` and ``text`` and may have ``title``.
    path : str or Path, optional
        The file, named in errors.

    Returns
    -------
    pandas.DataFrame
        Columns ``chunk_id`` (``_id`` as str), ``header`` (``title``, ``""`` when absent),
        ``text``, ``source`` (the file's name), checked by
        :func:`relgrade.protocol.corpus.validate_chunks`.

    Raises
    ------
    InputError
        A row lacks ``_id`` or ``text`` (names the line); any rule of ``validate_chunks``.

    Examples
    --------
    >>> beir_corpus([(1, {"_id": "d1", "title": "T", "text": "body"})])["header"].tolist()
    ['T']
    """
    name = Path(path).name if path is not None else "corpus.jsonl"
    out = []
    for line, row in rows:
        for key in ("_id", "text"):
            if key not in row:
                raise InputError(f"a BEIR corpus line needs `{key}`", path=path, line=line,
                                 found=", ".join(sorted(row)) or "no keys")
        out.append({"chunk_id": str(row["_id"]), "header": str(row.get("title") or ""),
                    "text": row["text"], "source": name})
    table = pd.DataFrame(out, columns=["chunk_id", "header", "text", "source"])
    corpus_mod.validate_chunks(table, path=path, lines=[n for n, _ in rows])
    return table


def queries_input(src, folder) -> tuple[str, pd.DataFrame, list[str]]:
    """Check the queries ``src`` and write them into ``folder``.

    Parameters
    ----------
    src : str or os.PathLike
        A TSV or JSONL with ``query_id``, ``query``, ``group`` (optional ``weight``), or a
        BEIR ``queries.jsonl`` (``_id``, ``text``, optional ``metadata.group``).
    folder : pathlib.Path
        The ``data/input`` folder being filled.

    Returns
    -------
    name : str
        The file written (``queries.tsv`` or ``queries.jsonl``).
    queries : pandas.DataFrame
        The validated queries table (see :func:`relgrade.protocol.queries.validate_queries`).
    groups : list of str
        The groups used, sorted (params ``queries.groups``).

    Raises
    ------
    InputError
        An unknown suffix; a BEIR line without ``_id`` or ``text`` (names the line); any rule
        of ``validate_queries``.
    """
    src = Path(src)
    suffix = src.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = list(iter_jsonl(src))
        if any("_id" in row for _, row in rows) and not any("query_id" in row for _, row in rows):
            table = beir_queries(rows, path=src)
            groups = sorted(set(table["group"]))
            validated = queries_mod.validate_queries(table, groups=groups, path=src,
                                                     lines=[n for n, _ in rows])
            write_tsv(folder / "queries.tsv", table)
            return "queries.tsv", validated, groups
    elif suffix not in (".tsv", ".tab"):
        raise InputError("queries are a TSV or JSONL (query_id, query, group) or a BEIR "
                         "queries.jsonl", path=src, found=repr(src.suffix))
    table, lines = read_rows(src, queries_mod.REQUIRED_COLUMNS)
    groups = sorted({str(g) for g in table["group"]})
    validated = queries_mod.validate_queries(table, groups=groups, path=src, lines=lines)
    name = "queries.jsonl" if suffix in (".jsonl", ".ndjson") else "queries.tsv"
    shutil.copyfile(src, folder / name)
    return name, validated, groups


def beir_queries(rows: list[tuple[int, dict]], *, path=None) -> pd.DataFrame:
    """The queries table of a BEIR ``queries.jsonl``'s rows.

    Parameters
    ----------
    rows : list of (int, dict)
        ``(line, row)`` pairs; each row has ``_id`` and ``text``.
    path : str or Path, optional
        The file, named in errors.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``query`` (str), ``group`` (``metadata.group`` when it
        is a string, else :data:`DEFAULT_GROUP`).

    Raises
    ------
    InputError
        A row lacks ``_id`` or ``text`` (names the line).

    Examples
    --------
    >>> beir_queries([(1, {"_id": 3, "text": "why"})]).values.tolist()
    [['3', 'why', 'all']]
    """
    out = []
    for line, row in rows:
        for key in ("_id", "text"):
            if key not in row:
                raise InputError(f"a BEIR queries line needs `{key}`", path=path, line=line,
                                 found=", ".join(sorted(row)) or "no keys")
        meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        group = meta.get("group") if isinstance(meta.get("group"), str) else DEFAULT_GROUP
        out.append({"query_id": str(row["_id"]), "query": str(row["text"]), "group": group})
    return pd.DataFrame(out, columns=["query_id", "query", "group"])


def intents_input(src, folder, *, queries: pd.DataFrame) -> str:
    """Check the intent table ``src`` against ``queries`` and copy it into ``folder``.

    Parameters
    ----------
    src : str or os.PathLike
        A TSV or JSONL with ``query_id``, ``query``, ``intent``, one row per query.
    folder : pathlib.Path
        The ``data/input`` folder being filled.
    queries : pandas.DataFrame
        The validated queries.

    Returns
    -------
    str
        ``intents.tsv`` or ``intents.jsonl``.

    Raises
    ------
    InputError
        As :func:`relgrade.protocol.intents.validate_intents` (a query without an intent,
        an intent for an unknown query, a query text that differs, ...).
    """
    src = Path(src)
    table, lines = read_rows(src, INTENTS)
    intents_mod.validate_intents(table, queries=queries, path=src, lines=lines)
    name = "intents.jsonl" if src.suffix.lower() in (".jsonl", ".ndjson") else "intents.tsv"
    shutil.copyfile(src, folder / name)
    return name


def run_input(arm: str, src, folder, *, queries: pd.DataFrame,
              chunk_ids: pd.Series | None) -> str:
    """Check arm ``arm``'s external run and copy it into ``folder/runs/``.

    Parameters
    ----------
    arm : str
        The arm's name.
    src : str or os.PathLike
        A TREC run, or a JSONL or Parquet run (see :func:`relgrade.io.runs.read_run`).
    folder : pathlib.Path
        The ``data/input`` folder being filled.
    queries : pandas.DataFrame
        The validated queries: a run may only name their ids.
    chunk_ids : pandas.Series or None
        The corpus's chunk ids, or None when the corpus is a source spec (its chunk ids are
        checked by the retrieve and pool stages once the corpus is built).

    Returns
    -------
    str
        The path written, relative to ``folder`` (``runs/ARM.EXT``, the source's suffix).

    Raises
    ------
    InputError
        As :func:`relgrade.ranking.validate_run`; an unknown chunk id names the first few.
    """
    src = Path(src)
    run = read_run(src)
    validate_run(run, path=src, queries=queries["query_id"].astype(str), chunks=chunk_ids,
                 lines=run_lines(src))
    name = f"runs/{arm}{src.suffix.lower() or '.trec'}"
    (folder / "runs").mkdir(exist_ok=True)
    shutil.copyfile(src, folder / name)
    return name
