"""Rewriting one top-level section of an experiment's ``params.yaml`` in place.

The file is the experiment's record, written with comments: a command that changes one
section (``relgrade arm add``) rewrites that section's lines only, as the YAML serializer
writes the new value, and keeps every other line byte for byte (comments above the section
included). Inside the section a ruamel.yaml round trip keeps the comments and layout of the
entries that stay (a user's note on an arm survives ``relgrade arm add``). The new text is
checked as :func:`~relgrade.experiment.params.load_params` checks a file before anything is
written.
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
        the next top-level key or comment block) rewritten by a ruamel.yaml round trip of
        those lines alone: an entry that keeps its value keeps its lines, comments and
        quoting; an entry whose value changed keeps the comment at the end of its line; a
        removed entry goes with its lines; a new one is written in block style at the
        section's end. A section not there is appended, in block style.

    Examples
    --------
    >>> replace_section("seed: 1\\narms:\\n  a: {kind: bm25}  # first\\n# next\\npool: {}\\n",
    ...                 "arms", {"a": {"kind": "bm25"}, "b": {"kind": "tfidf"}})
    'seed: 1\\narms:\\n  a: {kind: bm25}  # first\\n  b:\\n    kind: tfidf\\n# next\\npool: {}\\n'
    """
    lines = text.splitlines(keepends=True)
    span = _span(lines, name)
    if span is None:
        block = yaml.safe_dump({name: value}, sort_keys=False, allow_unicode=True, width=100)
        return text + ("" if text.endswith("\n") or not text else "\n") + block
    start, last = span
    section = "".join(lines[start:last + 1])
    if not section.endswith("\n"):
        section += "\n"
    return "".join(lines[:start]) + _round_trip(section, name, value) + "".join(lines[last + 1:])


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


def _indent(section: str) -> tuple[int, int]:
    """How a section's text indents: a mapping's keys (the first indented line; 2 when
    none) and a block sequence's dashes past the key that holds it (the first such
    sequence; 0, as PyYAML writes one, when none)."""
    step, offset, key_at = None, None, None
    for line in section.splitlines()[1:]:
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        at = len(line) - len(stripped)
        if step is None:
            step = max(at, 1)
        if stripped.startswith("- ") or stripped == "-":
            if key_at is not None and offset is None:
                offset = max(at - key_at, 0)
        else:
            key_at = at
    return step or 2, offset or 0


def _round_trip(section: str, name: str, value) -> str:
    """The text of one top-level section, set to ``value`` through a ruamel.yaml round
    trip of ``section`` (its own lines), so the comments and layout of what stays are kept."""
    import io as _io

    from ruamel.yaml import YAML

    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 4096  # a long line stays one line, as written
    step, offset = _indent(section)
    rt.indent(mapping=step, sequence=offset + 2, offset=offset)
    doc = rt.load(section)
    doc[name] = _merged(doc.get(name), value)
    out = _io.StringIO()
    rt.dump(doc, out)
    return out.getvalue()


def _merged(node, value):
    """``value`` as a ruamel.yaml node, reusing ``node``'s entries (their comments and
    style) where they hold the same value, and ``node`` itself where it is a mapping."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        if not isinstance(node, CommentedMap):
            node = CommentedMap()
        for key in [k for k in node if k not in value]:
            _drop(node, key)
        for key, sub in value.items():
            if key in node and _plain(node[key]) == sub:
                continue  # unchanged: its lines stay as they were
            node[key] = _merged(node.get(key), sub)
        return node
    if isinstance(value, list):
        if isinstance(node, CommentedSeq) and _plain(node) == value:
            return node
        seq = CommentedSeq(_merged(None, v) for v in value)
        return seq
    return value


def _last_comment(node, key):
    """The mapping and key whose comment token ends ``node[key]``'s lines (the deepest last
    entry of a nested mapping): ruamel.yaml keeps there the comment at the end of that line
    and the comment lines that follow it, up to the next entry."""
    from ruamel.yaml.comments import CommentedMap

    while isinstance(node[key], CommentedMap) and len(node[key]):
        node, key = node[key], list(node[key])[-1]
    return node, key


def _drop(node, key) -> None:
    """Delete ``node[key]`` with its comments: the comment lines above it (kept by ruamel.yaml
    after the entry before it) go with it; the lines above the entry after it stay there."""
    keys = list(node)
    at = keys.index(key)
    if at:
        before = _last_comment(node, keys[at - 1])
        gone = _last_comment(node, key)
        token = _token(*before)
        if token is not None:
            ending = _token(*gone)
            eol = token.value.split("\n", 1)[0]
            rest = ending.value.split("\n", 1)[1] if ending is not None and \
                "\n" in ending.value else ""
            if eol or rest:
                token.value = f"{eol}\n{rest}"
            else:
                before[0].ca.items.pop(before[1], None)
    del node[key]


def _token(node, key):
    """The comment token after ``node[key]``'s value, or None."""
    entry = node.ca.items.get(key)
    return entry[2] if entry and len(entry) > 2 else None


def _plain(node):
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


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
