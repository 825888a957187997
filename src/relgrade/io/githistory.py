"""A file's committed history, read with git: every version of it that a commit holds.

The void ledger is git-tracked so that deleting or truncating it cannot make a used key look
fresh: its committed history still holds every use. This module asks git (run as a
subprocess, ``git log`` and ``git show``) for the versions of one file; outside a git
repository there is no history and nothing is asked.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from relgrade.errors import ProtocolError


def work_tree(start) -> Path | None:
    """The git working tree holding ``start`` (the nearest folder upward with ``.git``), or
    None outside any. No git command is run."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _git(tree: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(tree), *args], capture_output=True,
                              timeout=60, env={**os.environ, "GIT_PAGER": "cat",
                                               "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ProtocolError(f"git could not be run in {tree.as_posix()} to read the committed "
                            f"history ({e}); install git, or run relgrade where `git log` "
                            "works") from None


def _commits(path) -> tuple[Path, str, list[str]] | None:
    """The working tree, ``path`` relative to it and the commits touching it, newest first
    (none in a repository without commits); None outside any working tree."""
    path = Path(path).resolve()
    tree = work_tree(path.parent)
    if tree is None:
        return None
    rel = path.relative_to(tree.resolve()).as_posix()
    log = _git(tree, "log", "--format=%H", "--", rel)
    if log.returncode != 0:
        err = log.stderr.decode("utf-8", "replace").strip()
        if "does not have any commits" in err:
            return tree, rel, []
        raise ProtocolError(f"git log of {rel} failed in {tree.as_posix()}: {err}; repair the "
                            "repository (or run relgrade where `git log` works)")
    return tree, rel, log.stdout.decode().split()


def committed_versions(path) -> list[tuple[str, bytes]] | None:
    """Every committed version of the file ``path``, newest first.

    Parameters
    ----------
    path : str or os.PathLike
        The file (it need not exist now: a deleted file's history is read too).

    Returns
    -------
    list of (str, bytes) or None
        ``(commit, content)`` per commit that holds the file (commits that deleted it are
        left out); empty when git history has none; None when ``path`` is not inside a git
        working tree.

    Raises
    ------
    ProtocolError
        git cannot be run, or ``git log`` / ``git show`` fails in the working tree (the
        message quotes git's error).
    """
    found = _commits(path)
    if found is None:
        return None
    tree, rel, commits = found
    out = []
    for commit in commits:
        shown = _git(tree, "show", f"{commit}:{rel}")
        if shown.returncode != 0:
            err = shown.stderr.decode("utf-8", "replace")
            if "does not exist in" in err or "exists on disk, but not in" in err:
                continue  # the commit that deleted it
            raise ProtocolError(f"git show {commit[:12]}:{rel} failed in {tree.as_posix()}: "
                                f"{err.strip()}")
        out.append((commit, shown.stdout))
    return out


def last_nonempty_commit(path) -> str | None:
    """The newest commit holding a non-empty version of the file ``path``, or None.

    Cheaper than :func:`committed_versions` when only the fact matters: each commit's
    version is sized (``git cat-file -s``), not read.

    Parameters
    ----------
    path : str or os.PathLike
        The file (it need not exist now).

    Returns
    -------
    str or None
        The commit's full hash; None when no commit holds the file with content, or
        ``path`` is not inside a git working tree.

    Raises
    ------
    ProtocolError
        git cannot be run, or ``git log`` fails in the working tree.
    """
    found = _commits(path)
    if found is None:
        return None
    tree, rel, commits = found
    for commit in commits:
        size = _git(tree, "cat-file", "-s", f"{commit}:{rel}")
        if size.returncode == 0 and int(size.stdout.decode().strip() or 0) > 0:
            return commit
    return None


def last_nonempty_commit_matching(folder, pattern: str, *,
                                  keep=None) -> tuple[str, Path] | None:
    """The newest commit holding, with content, a file under ``folder`` that matches
    ``pattern``, and that file; None when none does.

    Parameters
    ----------
    folder : str or os.PathLike
        A folder (it need not exist now: deleted files' history is read too).
    pattern : str
        A git glob pathspec relative to ``folder`` (``"*/round-1.jsonl"``: ``*`` does not
        cross a ``/``).
    keep : callable, optional
        ``keep(path) -> bool`` on a matching file's absolute path: files it rejects are
        passed over (default: every file counts).

    Returns
    -------
    (str, pathlib.Path) or None
        The commit's full hash and the matching file's absolute path; None when no commit
        holds such a file with content, or ``folder`` is not inside a git working tree.

    Raises
    ------
    ProtocolError
        git cannot be run, or ``git log`` fails in the working tree.
    """
    folder = Path(folder).resolve()
    tree = work_tree(folder)
    if tree is None:
        return None
    rel = folder.relative_to(tree.resolve()).as_posix()
    spec = f":(glob){pattern}" if rel == "." else f":(glob){rel}/{pattern}"
    log = _git(tree, "log", "--format=%H", "--name-only", "--", spec)
    if log.returncode != 0:
        err = log.stderr.decode("utf-8", "replace").strip()
        if "does not have any commits" in err:
            return None
        raise ProtocolError(f"git log of {rel}/{pattern} failed in {tree.as_posix()}: {err}; "
                            "repair the repository (or run relgrade where `git log` works)")
    commit = None
    for line in log.stdout.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if len(line) == 40 and all(c in "0123456789abcdef" for c in line):
            commit = line
        elif line and commit is not None and (keep is None or keep(tree / line)):
            size = _git(tree, "cat-file", "-s", f"{commit}:{line}")
            if size.returncode == 0 and int(size.stdout.decode().strip() or 0) > 0:
                return commit, tree / line
    return None
