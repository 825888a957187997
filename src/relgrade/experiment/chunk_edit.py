"""Editing one chunk's text: the experiment's corpus input made an editable chunks file.

A source spec (a pinned PyPI sdist) cannot be edited: its chunks are cut from an archive
checked against its sha256. To change one chunk, the chunks it gives are exported once to a
chunks file beside it (``chunks.jsonl``, with ``chunks.origin.json`` recording the spec and
its sha256), params ``corpus.input`` is pointed at that file, and the chunk's text is
replaced there. A chunks file already in place is edited directly. The corpus stage then
rebuilds the chunk table, the chunk's grades become stale (their ``content_sha256`` no
longer matches), and ``dvc repro`` stops on the pairs of that chunk as pending work.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from relgrade.canonical import jsonl_bytes, sha256_bytes
from relgrade.errors import InputError
from relgrade.io.files import (
    iter_jsonl,
    read_table,
    write_bytes,
    write_jsonl,
    write_parquet,
    write_text,
)

#: The file a source spec's chunks are exported to, and its record, beside the spec.
EDITABLE_NAME, ORIGIN_NAME = "chunks.jsonl", "chunks.origin.json"


def replace_text(rows: list[dict], chunk_id: str, text: str, *, path) -> list[dict]:
    """The chunk rows with ``chunk_id``'s text replaced (a new list; ``rows`` is not changed).

    Parameters
    ----------
    rows : list of dict
        Chunk rows (``chunk_id``, ``header``, ``text``, ``source``, ...), any other keys kept.
    chunk_id : str
        The chunk to edit.
    text : str
        Its new text.
    path : str or os.PathLike
        The chunks file, named in errors.

    Returns
    -------
    list of dict

    Raises
    ------
    InputError
        No chunk has that id; the text is empty (or only white space); it equals the
        chunk's text now.

    Examples
    --------
    >>> replace_text([{"chunk_id": "a", "text": "x"}], "a", "y", path="c.jsonl")
    [{'chunk_id': 'a', 'text': 'y'}]
    """
    where = [i for i, r in enumerate(rows) if str(r.get("chunk_id")) == chunk_id]
    if not where:
        raise InputError("no chunk has this id", path=path, item=chunk_id,
                         fix="Take the id from `relgrade corpus export` or the packets")
    if not text.strip():
        raise InputError("a chunk's text cannot be empty", path=path, item=chunk_id,
                         fix="Write the new text to the --text-file")
    if rows[where[0]].get("text") == text:
        raise InputError("the text is the chunk's text already: nothing to edit", path=path,
                         item=chunk_id)
    out = [dict(r) for r in rows]
    out[where[0]]["text"] = text
    return out


def read_rows(path: Path) -> list[dict]:
    """A chunks file's rows in file order (JSON Lines or Parquet)."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return [row for _, row in iter_jsonl(path)]
    return read_table(path).to_dict("records")


def write_rows(path: Path, rows: list[dict], *, edited: str | None = None) -> None:
    """Write chunk rows back in the file's own format.

    Parameters
    ----------
    path : Path
        The chunks file (JSON Lines or Parquet).
    rows : list of dict
        Every row, in file order (:func:`read_rows`).
    edited : str, optional
        The id of the one chunk changed. For JSON Lines only that chunk's line is
        rewritten (as canonical JSON, its line end kept); every other line stays byte for
        byte, so the file's diff shows the edit alone. Without it, or for Parquet, the whole
        file is written.
    """
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        write_parquet(path, pd.DataFrame(rows))
        return
    if edited is None:
        write_jsonl(path, rows)
        return
    (row,) = [r for r in rows if str(r.get("chunk_id")) == edited]
    lines = path.read_bytes().splitlines(keepends=True)
    for i, raw in enumerate(lines):
        if raw.strip() and str(json.loads(raw.decode("utf-8")).get("chunk_id")) == edited:
            end = raw[len(raw.rstrip(b"\r\n")):] or b"\n"
            lines[i] = jsonl_bytes([row]).rstrip(b"\n") + end
            break
    write_bytes(path, b"".join(lines))


def set_corpus_input(params_text: str, value: str, *, path) -> str:
    """``params.yaml``'s text with ``corpus.input`` set to ``value``, comments kept.

    Raises
    ------
    InputError
        The text has no ``input:`` line in its top-level ``corpus:`` section.

    Examples
    --------
    >>> set_corpus_input("corpus:\\n  input: a.yaml   # spec\\nx: 1\\n", "chunks.jsonl",
    ...                  path="params.yaml")
    'corpus:\\n  input: chunks.jsonl   # spec\\nx: 1\\n'
    """
    lines = params_text.splitlines(keepends=True)
    inside = False
    for i, line in enumerate(lines):
        if re.match(r"^\S", line):
            inside = line.startswith("corpus:")
            continue
        m = re.match(r"^(\s+input:\s*)(\S+)(.*)$", line, flags=re.S)
        if inside and m:
            lines[i] = f"{m.group(1)}{value}{m.group(3)}"
            return "".join(lines)
    raise InputError("params have no `corpus.input` line to point at the chunks file",
                     path=path, item="corpus.input",
                     fix="Write `corpus:` with `input: PATH` in params.yaml")


def export_spec(spec: Path, chunks: pd.DataFrame) -> tuple[Path, dict]:
    """Write a source spec's chunks to an editable chunks file beside it, with its origin.

    Parameters
    ----------
    spec : pathlib.Path
        The source spec the chunks were built from.
    chunks : pandas.DataFrame
        Its chunk table (:func:`relgrade.pipeline.stages.corpus.build_corpus`).

    Returns
    -------
    (pathlib.Path, dict)
        The chunks file and the origin record written beside it: ``exported_from`` (the
        spec's file name), ``source_spec_sha256`` (of its bytes) and ``archive_sha256``
        (the pinned archive's, from the spec).

    Raises
    ------
    InputError
        The chunks file exists already (it is never overwritten).
    """
    out = spec.with_name(EDITABLE_NAME)
    if out.exists():
        raise InputError("the file exists; relgrade does not overwrite a chunks file",
                         path=out, fix="Point params corpus.input at it, or move it away")
    data = spec.read_bytes()
    import yaml

    origin = {"exported_from": spec.name, "source_spec_sha256": sha256_bytes(data),
              "archive_sha256": (yaml.safe_load(data) or {}).get("sha256")}
    write_jsonl(out, chunks.to_dict("records"))
    write_text(spec.with_name(ORIGIN_NAME), json.dumps(origin, indent=2) + "\n")
    return out, origin


def edited_since_build(ex) -> str | None:
    """Why the packets predate the corpus input, or None when they do not.

    After ``relgrade corpus edit`` the chunks file differs from the one the corpus stage
    built the chunk table (and so the packets) from, until ``dvc repro`` runs: the corpus
    manifest (params ``paths.corpus_manifest``) records the sha256 of the chunks file it
    read. A source spec input is pinned by its archive's sha256 and never edited in place,
    so only a chunks-file input is compared.

    Parameters
    ----------
    ex : Experiment

    Returns
    -------
    str or None
        One sentence naming the input and both digests (first 12 hex digits), or None: no
        corpus section or manifest yet, a spec input, or the file is the one built from.
    """
    from relgrade.io.files import read_json, sha256_file

    if ex.params.corpus is None:
        return None
    src = ex.file(ex.params.corpus.input)
    manifest_path = ex.path("corpus_manifest") if ex.params.paths.corpus_manifest else None
    if (manifest_path is None or not manifest_path.is_file() or not src.is_file()
            or src.suffix.lower() in (".yaml", ".yml")):
        return None
    manifest = read_json(manifest_path)
    now = sha256_file(src)
    if (str(manifest.get("source", "")).startswith("chunks-file:")
            and manifest.get("sha256") == now):
        return None
    return (f"the corpus input {src.as_posix()} changed since the chunk table and the "
            f"packets were built (built from {str(manifest.get('sha256'))[:12]}, now "
            f"{now[:12]}): the packets predate the edit")
