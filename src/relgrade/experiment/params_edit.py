"""Editing an experiment's params file, its comments and key order kept."""

from __future__ import annotations

import io as _io
from collections.abc import Mapping
from pathlib import Path

from relgrade.errors import InputError
from relgrade.experiment.params import Params, parse_params
from relgrade.io.files import read_utf8


def edited_params(path, changes: Mapping[str, object]) -> tuple[str, Params]:
    """The text of a params file with some keys set, every comment and the key order kept.

    Parameters
    ----------
    path : str or os.PathLike
        The params file (``params.yaml``); it is read, never written.
    changes : mapping of str to object
        Dotted key (``"sample.refresh"``) → its new value (plain YAML values: str, number,
        list, dict). A key that is missing is added at the end of its section, before the
        comment lines that follow the section. A key that already holds the value is left as
        it is; a key given a new value keeps the comment at the end of its line (the user's
        words about the key).

    Returns
    -------
    text : str
        The edited file's text (the caller writes it).
    params : Params
        The edited params, checked as :func:`relgrade.experiment.params.parse_params` checks
        a file.

    Raises
    ------
    InputError
        The file is not a YAML mapping, or the edited params are not valid.

    Notes
    -----
    A round trip through ruamel.yaml (the YAML library DVC itself uses).
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    path = Path(path)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    doc = yaml.load(read_utf8(path))
    if not isinstance(doc, dict):
        raise InputError("params file is not a YAML mapping", path=path)
    for dotted, value in changes.items():
        parent = doc
        *heads, last = dotted.split(".")
        for head in heads:
            if not isinstance(parent.get(head), dict):
                parent[head] = CommentedMap()
            parent = parent[head]
        if last in parent and _plain(parent[last]) == _plain(value):
            continue  # already so: the line, its comment and its quoting stay as they are
        if last in parent or not isinstance(parent, CommentedMap) or not len(parent):
            parent[last] = _commented(value)
            continue
        # the comment lines after a section's last key belong to what follows the section:
        # they move to the new last key
        before = list(parent)[-1]
        trailing = parent.ca.items.pop(before, None)
        parent[last] = node = _commented(value)
        if trailing is not None:
            target, key = (node, list(node)[-1]) if isinstance(node, CommentedMap) and len(node) \
                else (parent, last)
            target.ca.items[key] = trailing
    params = parse_params(_plain(doc), source=path)
    out = _io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue(), params


def _commented(value):
    from ruamel.yaml.comments import CommentedMap

    if isinstance(value, Mapping):
        node = CommentedMap()
        for k, v in value.items():
            node[k] = _commented(v)
        return node
    return value


def _plain(node):
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node
