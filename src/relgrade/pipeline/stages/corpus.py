"""Stage `corpus`: the pinned source archive (or a chunks file) → the chunks table + manifest.

A source spec (.yaml) is downloaded with pip (or read from a local path), checked against its
sha256, read in memory and chunked; a chunks file (.jsonl/.parquet) is validated. Both
outputs are written only after everything succeeded.

An experiment's corpus input, built into the chunk table.

The corpus stage writes what :func:`build_corpus` returns; ``relgrade corpus export`` and
``relgrade init`` call it too, so a chunk table (and its ids, for an external run) is at
hand before any stage has run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from relgrade.errors import InputError
from relgrade.io.files import (
    iter_jsonl,
    iter_jsonl_blocks,
    read_rows,
    read_yaml,
    sha256_file,
    write_arrow_parquet,
    write_json,
    write_parquet,
)
from relgrade.io.sdist import fetch_sdist
from relgrade.protocol import corpus


def build_corpus(src, *, allow_empty: bool = False) -> tuple[pd.DataFrame, dict]:
    """The chunks of a corpus input and the manifest describing them.

    Parameters
    ----------
    src : str or os.PathLike
        A source spec (``.yaml``/``.yml``: a PyPI sdist or a local archive, pinned by
        sha256), or a chunks file (``.jsonl``, ``.parquet``).
    allow_empty : bool
        Accept a corpus with no chunks.

    Returns
    -------
    chunks : pandas.DataFrame
        The CHUNKS table (:data:`relgrade.schema.CHUNKS`), its rows in the input's order.
    manifest : dict
        The corpus manifest (source, sha256, counts).

    Raises
    ------
    InputError
        A file :func:`relgrade.io.files.read_table` cannot read; a bad spec, a failed
        download or a sha256 mismatch (see :func:`relgrade.io.sdist.fetch_sdist`,
        :func:`relgrade.protocol.corpus.check_sha256`);
        a chunks table that fails :func:`relgrade.protocol.corpus.validate_chunks`.
    """
    src = Path(src)
    suffix = src.suffix.lower()
    if suffix in (".yaml", ".yml"):
        spec = corpus.parse_source_spec(read_yaml(src), path=src)
        return corpus.corpus_from_sdist(fetch_sdist(spec, src), spec=spec, path=src,
                                        allow_empty=allow_empty)
    if suffix in (".jsonl", ".ndjson"):
        rows = list(iter_jsonl(src))
        table, lines = pd.DataFrame([r for _, r in rows]), [n for n, _ in rows]
    else:
        table, lines = read_rows(src)  # lines None for Parquet: errors then name the row
    return corpus.corpus_from_table(table, sha256=sha256_file(src), path=src, lines=lines,
                                    allow_empty=allow_empty)


def jsonl_chunks(src, *, allow_empty: bool = False):
    """A JSON Lines chunks file's table and manifest, read and checked a block at a time.

    Parameters
    ----------
    src : str or os.PathLike
        A ``.jsonl``/``.ndjson`` chunks file.
    allow_empty : bool
        Accept a chunk with an empty or blank text (params ``corpus.allow_empty``).

    Returns
    -------
    (pyarrow.Table, dict) or None
        What :func:`build_corpus` returns, the table as Arrow columns
        (:class:`relgrade.protocol.corpus.ChunkBlocks`), when every row is in the usual
        form; None when a row is not (or the file cannot be read as JSON Lines):
        :func:`build_corpus` then checks the whole file and names the first broken rule.
    """
    blocks = corpus.ChunkBlocks(allow_empty=allow_empty)
    try:
        for _, rows in iter_jsonl_blocks(src):
            if not blocks.add(rows):
                return None
    except InputError:
        return None
    return blocks.result(sha256=sha256_file(src), path=Path(src))


def run(ex):
    cfg = ex.params.need("corpus")
    src = ex.file(cfg.input)
    built = None
    if Path(src).suffix.lower() in (".jsonl", ".ndjson"):
        # the usual chunks file as compact columns, a block of lines at a time; any other
        # row is left to the table rules below, which word the refusal
        built = jsonl_chunks(src, allow_empty=cfg.allow_empty)
    if built is not None:
        write_arrow_parquet(ex.path("chunks"), built[0])
        manifest = built[1]
    else:
        chunks, manifest = build_corpus(src, allow_empty=cfg.allow_empty)
        write_parquet(ex.path("chunks"), chunks)
    write_json(ex.path("corpus_manifest"), manifest)

