"""The experiment's per-arm decision files (``paths.decision/ARM.json``) in the workspace or at a
git revision, for ``relgrade metrics diff``.

A revision is read with ``git show REV:PATH`` (the files are kept in git, ``cache: false``),
so two commits' decisions can be set side by side without checking either out. ``PATH`` is
the folder's path from the repository's top, and git runs there: ``git ls-tree`` run in a
subfolder lists only what lies under that subfolder, whatever path it is given.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from relgrade.errors import InputError
from relgrade.io import files as io


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


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
        is not valid JSON (naming the file, and the revision).
    """
    folder = ex.path("decision")
    if rev is None:
        if not folder.is_dir():
            return {}
        return {p.stem: io.read_json(p) for p in sorted(folder.glob("*.json"))}
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
            out[name[:-len(".json")]] = json.loads(shown.stdout)
        except json.JSONDecodeError as e:
            raise InputError("not valid JSON", path=f"{rev}:{relative}/{name}", line=e.lineno,
                             found=e.msg) from None
    return out
