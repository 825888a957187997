"""The experiment's per-arm decision files (``paths.decision/ARM.json``) in the workspace or at a
git revision, for ``relgrade metrics diff``.

A revision is read with ``git show REV:PATH`` (the files are kept in git, ``cache: false``),
so two commits' decisions can be set side by side without checking either out. ``PATH`` is
the folder's path from the repository's top, and git runs there: ``git ls-tree`` run in a
subfolder lists only what lies under that subfolder, whatever path it is given.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

from relgrade.errors import InputError
from relgrade.io import files as io


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


#: Fields of a decision file that hold a number (or null), besides those starting with
#: ``model_only_`` or ``human_only_`` (ppi mode's labelled estimates).
NUMBER_FIELDS = ("mean", "low", "high", "judged", "delta", "p_holm", "rank_low", "rank_high",
                 "human_queries")

#: Fields of a decision file that hold text (or null).
TEXT_FIELDS = ("measure", "baseline", "estimator", "delta_estimator", "pool_version", "key")


def check_decision(data, *, path, committed: bool = False) -> dict:
    """A decision file's content, checked to be of the shape the metrics stage writes.

    Parameters
    ----------
    data : object
        The file as read from JSON.
    path : str or Path
        The file (or ``REV:PATH``), named in the message.
    committed : bool, default False
        The file was read from a git revision: the message's fix says that revision cannot
        be compared as it is, rather than to restore the file.

    Returns
    -------
    dict
        ``data`` itself.

    Raises
    ------
    InputError
        ``data`` is not a JSON object; it lacks ``measure`` or ``mean``; a field of
        :data:`NUMBER_FIELDS` (or one starting with ``model_only_`` or ``human_only_``) is
        neither a number nor null, or is NaN or infinite; a field of :data:`TEXT_FIELDS` is neither text nor null.

    Examples
    --------
    >>> check_decision({"measure": "nDCG@10", "mean": 0.5}, path="d/a.json")["mean"]
    0.5
    >>> check_decision({"measure": "nDCG@10", "mean": "x"}, path="d/a.json")
    Traceback (most recent call last):
    ...
    relgrade.errors.InputError: d/a.json: a decision file's mean must be a number or null (found 'x'). Restore the file (git checkout, or dvc repro rewrites it)
    """
    fix = ("That revision's file cannot be compared; compare other revisions, or commit a "
           "file `dvc repro` rewrote" if committed else
           "Restore the file (git checkout, or dvc repro rewrites it)")
    if not isinstance(data, dict):
        raise InputError("a decision file must be a JSON object of one arm's decision "
                         "(measure, mean, ...)", path=path,
                         found=f"a JSON {type(data).__name__.replace('dict', 'object')}",
                         fix=fix)
    for name in ("measure", "mean"):
        if name not in data:
            raise InputError(f"a decision file needs {name}", path=path, found="none",
                             fix=fix)
    for name, value in data.items():
        number = name in NUMBER_FIELDS or name.startswith(("model_only_", "human_only_"))
        if number and value is not None and (isinstance(value, bool)
                                             or not isinstance(value, (int, float))):
            raise InputError(f"a decision file's {name} must be a number or null", path=path,
                             found=repr(value), fix=fix)
        if number and isinstance(value, float) and not math.isfinite(value):
            # relgrade writes these files without NaN or infinity (JSON has neither)
            raise InputError(f"a decision file's {name} must be a finite number or null",
                             path=path, found=repr(value), fix=fix)
        if name in TEXT_FIELDS and value is not None and not isinstance(value, str):
            raise InputError(f"a decision file's {name} must be text or null", path=path,
                             found=repr(value), fix=fix)
    return data


def read_decisions(ex, rev: str | None = None) -> dict[str, dict]:
    """Arm → its decision file, from the workspace (``rev`` None) or from git revision ``rev``.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (params ``paths.decision``).
    rev : str, optional
        A git revision (``HEAD``, ``HEAD~1``, a tag or a commit); None: the files on disk.

    Returns
    -------
    dict
        Arm name (the file's stem) → the file's content; empty when the folder does not
        exist there.

    Raises
    ------
    InputError
        Not inside a git repository, or ``rev`` is not a revision of it (naming it); a file
        is not valid JSON, or not of a decision file's shape (:func:`check_decision`),
        naming the file, and the revision.
    """
    folder = ex.path("decision")
    if rev is None:
        if not folder.is_dir():
            return {}
        return {p.stem: check_decision(io.read_json(p), path=p)
                for p in sorted(folder.glob("*.json"))}
    top = _git(ex.root, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise InputError("reading an earlier revision needs a git repository",
                         path=ex.root, fix="run it inside the experiment's git repository")
    if _git(ex.root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode != 0:
        raise InputError("not a git revision", item=rev,
                         fix="name a commit, a branch or a tag (e.g. HEAD~1)")
    top = Path(top.stdout.strip()).resolve()
    relative = folder.resolve().relative_to(top).as_posix()
    listing = _git(top, "ls-tree", "--name-only", f"{rev}:{relative}")
    if listing.returncode != 0:
        return {}
    out = {}
    for name in sorted(listing.stdout.split()):
        if not name.endswith(".json"):
            continue
        shown = _git(top, "show", f"{rev}:{relative}/{name}")
        try:
            data = json.loads(shown.stdout)
        except json.JSONDecodeError as e:
            raise io.json_error(e, path=f"{rev}:{relative}/{name}", line=e.lineno) from None
        out[name[:-len(".json")]] = check_decision(data, path=f"{rev}:{relative}/{name}",
                                                   committed=True)
    return out
