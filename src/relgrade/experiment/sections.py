"""Rewriting one top-level section of an experiment's ``params.yaml`` in place.

The file is the experiment's record, written with comments: a command that changes one
section (``relgrade arm add``) rewrites that section's lines only, as the YAML serializer
writes the new value, and keeps every other line byte for byte (comments above the section
included; comments inside it are replaced with the section). The new text is checked as
:func:`~relgrade.experiment.params.load_params` checks a file before anything is written.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from relgrade.errors import InputError
from relgrade.experiment.params import Params, parse_params
from relgrade.io.files import write_text

_TOP_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):")


def replace_section(text: str, name: str, value) -> str:
    """``text`` (a params file) with top-level section ``name`` set to ``value``.

    Parameters
    ----------
    text : str
        The params file's text.
    name : str
        A top-level key (``arms``).
    value : object
        The section's new value (plain YAML data).

    Returns
    -------
    str
        The text with the section's lines (from ``name:`` to the last indented line before
        the next top-level key or comment block) replaced by ``yaml.safe_dump({name: value})``
        in block style; a section not there is appended.

    Examples
    --------
    >>> replace_section("seed: 1\\narms:\\n  a: {kind: bm25}\\n# next\\npool: {}\\n", "arms",
    ...                 {"b": {"kind": "tfidf"}})
    'seed: 1\\narms:\\n  b:\\n    kind: tfidf\\n# next\\npool: {}\\n'
    """
    block = yaml.safe_dump({name: value}, sort_keys=False, allow_unicode=True, width=100)
    lines = text.splitlines(keepends=True)
    span = _span(lines, name)
    if span is None:
        return text + ("" if text.endswith("\n") or not text else "\n") + block
    start, last = span
    return "".join(lines[:start]) + block + "".join(lines[last + 1:])


def _span(lines: list[str], name: str) -> tuple[int, int] | None:
    """The first and last line of top-level section ``name`` (None when it is not there)."""
    start = next((i for i, line in enumerate(lines)
                  if (m := _TOP_KEY.match(line)) and m.group(1) == name), None)
    if start is None:
        return None
    end = start + 1
    last = start  # the section's last indented (or continued) line
    while end < len(lines):
        line = lines[end]
        if _TOP_KEY.match(line):
            break
        if line.strip() and not line.startswith("#"):
            last = end
        end += 1
    return start, last


def drop_section(path, name: str) -> Params:
    """Remove top-level section ``name`` from the params file at ``path`` (its lines as
    :func:`replace_section` finds them), every other line kept.

    Parameters
    ----------
    path : str or os.PathLike
        The params file.
    name : str
        The section (``holes``).

    Returns
    -------
    Params
        The params as written.

    Raises
    ------
    InputError
        The section is not there, or the params without it are invalid (nothing is written
        then).
    """
    path = Path(path)
    text = path.read_text("utf-8")
    lines = text.splitlines(keepends=True)
    span = _span(lines, name)
    if span is None:
        raise InputError(f"the params have no section `{name}`", path=path)
    new = "".join(lines[:span[0]]) + "".join(lines[span[1] + 1:])
    params = parse_params(yaml.safe_load(new) or {}, source=path)
    write_text(path, new)
    return params


def write_section(path, name: str, value) -> Params:
    """Set top-level section ``name`` of the params file at ``path`` to ``value``.

    Parameters
    ----------
    path : str or os.PathLike
        The params file.
    name : str
        The section (``arms``).
    value : object
        Its new value.

    Returns
    -------
    Params
        The params as written.

    Raises
    ------
    InputError
        The new params are invalid (as :func:`~relgrade.experiment.params.load_params`
        says; nothing is written then), or the rewrite would change another section.
    """
    path = Path(path)
    text = path.read_text("utf-8")
    new = replace_section(text, name, value)
    before, after = yaml.safe_load(text) or {}, yaml.safe_load(new) or {}
    if after.get(name) != value or {k: v for k, v in before.items() if k != name} != \
            {k: v for k, v in after.items() if k != name}:
        raise InputError(f"the section `{name}` could not be rewritten alone", path=path,
                         fix=f"Edit `{name}` by hand, then run `relgrade pipeline render`")
    params = parse_params(after, source=path)
    write_text(path, new)
    return params
