"""The judges' calibration ledger: one append-only, sha256-chained JSON Lines file per
repository (``judges/ledger.jsonl`` at its top, tracked in git).

Each line is one entry in relgrade's canonical JSON (keys in the order written, no spaces,
UTF-8) whose last two keys are ``prev``, the ``sha256`` of the line before it (64 zeros on
the first line), and ``sha256``, the sha256 of the line's canonical JSON without its own
``sha256`` key. Reading checks every line: a line that is not canonical JSON, whose hash
does not match its content, or whose ``prev`` does not name the line before (a line
edited, removed or reordered by hand) is refused, naming the file and the line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from relgrade.canonical import canonical_json, sha256_bytes
from relgrade.errors import InputError

#: The ledger's place in a repository, relative to its top.
LEDGER = Path("judges") / "ledger.jsonl"

#: ``prev`` of the first line.
GENESIS = "0" * 64

_FIX = ("Restore the file from git (git checkout -- judges/ledger.jsonl): the ledger is "
        "written only by `relgrade judge record`")


def entry_sha256(entry: dict) -> str:
    """The sha256 (64 hex) of ``entry``'s canonical JSON, its own ``sha256`` key left out."""
    body = {k: v for k, v in entry.items() if k != "sha256"}
    return sha256_bytes(canonical_json(body).encode("utf-8"))


def read_ledger(path) -> list[dict]:
    """Every entry of the ledger at ``path``, oldest first, each line checked.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file; a file that does not exist is an empty ledger.

    Returns
    -------
    list of dict
        The entries as written (``prev`` and ``sha256`` included).

    Raises
    ------
    InputError
        A line (named by number) is not a canonical JSON object, its ``sha256`` does not
        match its content, or its ``prev`` is not the line before's ``sha256``; or the
        last line lacks its line end.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    if data and not data.endswith(b"\n"):
        raise InputError("the ledger's last line has no line end (a write cut short or a "
                         "hand edit)", path=p, line=data.count(b"\n") + 1, fix=_FIX)
    out, prev = [], GENESIS
    for i, raw in enumerate(data.split(b"\n")[:-1], start=1):
        try:
            entry = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            entry = None
        if not isinstance(entry, dict):
            raise InputError("a ledger line must be one JSON object", path=p, line=i,
                             fix=_FIX)
        if canonical_json(entry).encode("utf-8") != raw:
            raise InputError("a ledger line must be in canonical JSON (edited by hand?)",
                             path=p, line=i, fix=_FIX)
        if entry.get("prev") != prev:
            raise InputError("a ledger line must name the line before it in `prev` "
                             "(a line was removed, reordered or edited)", path=p, line=i,
                             found=str(entry.get("prev")), fix=_FIX)
        if entry.get("sha256") != entry_sha256(entry):
            raise InputError("a ledger line's sha256 does not match its content (edited by "
                             "hand?)", path=p, line=i, fix=_FIX)
        out.append(entry)
        prev = entry["sha256"]
    return out


def append_entry(path, entry: dict) -> dict:
    """Append ``entry`` to the ledger at ``path``, chained to its last line.

    The ledger is read (and so checked) first; the line is written with one ``write`` of
    the whole line and flushed to disk, so a crash leaves either the line or nothing (a
    line cut short is refused by :func:`read_ledger`).

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file; it and its folder are created when missing.
    entry : dict
        JSON-ready; must not hold ``prev`` or ``sha256``.

    Returns
    -------
    dict
        The entry as written, with ``prev`` and ``sha256``.

    Raises
    ------
    InputError
        The ledger does not read (see :func:`read_ledger`), or ``entry`` holds ``prev`` or
        ``sha256``.
    """
    if "prev" in entry or "sha256" in entry:
        raise InputError("a new ledger entry gets its prev and sha256 when appended",
                         path=path)
    entries = read_ledger(path)
    line = dict(entry) | {"prev": entries[-1]["sha256"] if entries else GENESIS}
    line["sha256"] = entry_sha256(line)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "ab") as f:
        f.write((canonical_json(line) + "\n").encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    return line
