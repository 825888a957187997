"""One experiment's view of its metrics and plots, and DVC's own commands scoped to it.

Run at the top of the repository or inside an experiment's folder, ``dvc metrics show``,
``dvc plots show`` and ``dvc exp show`` read every ``dvc.yaml`` of the repository, so they
show every experiment at once. Each DVC command takes a scope, spelled differently:

- ``dvc metrics show PATH``: metrics files or folders, relative to the folder it runs in;
- ``dvc plots show DVC_YAML``: the plots declared in that ``dvc.yaml`` (a plot's own file
  path as a target is read relative to the repository's top, whatever the folder);
- ``dvc exp show --drop '.*' --keep REGEX``: columns named ``PATH:KEY``, each path relative
  to the repository's top.

:func:`dvc_commands` writes the three for one experiment; :func:`decision_rows` is the
table ``relgrade metrics show`` prints from the experiment's decision files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from relgrade.experiment.layout import experiment_label, find_repository

#: The columns of :func:`decision_rows`, in order.
DECISION_COLUMNS = ("arm", "measure", "mean", "low", "high", "judged", "baseline", "delta",
                    "p_holm")


def _relative(path: Path, start: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(start).resolve())).as_posix()


def _regex(path: str) -> str:
    # a path as a regex matching itself; "-" and "/" are literal outside a class, so a folder
    # name such as crowd-sim reads as written
    return re.escape(path).replace("\\-", "-").replace("\\/", "/")


def dvc_commands(ex, *, cwd=".") -> dict[str, list[str]]:
    """DVC's ``metrics show``, ``plots show`` and ``exp show`` limited to experiment ``ex``.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (params ``paths.decision``).
    cwd : str or os.PathLike, default "."
        The folder the commands are to be run in.

    Returns
    -------
    dict of str to list of str
        ``"metrics"``, ``"plots"`` and ``"exp"``: each an argument list, paths relative to
        ``cwd`` (``metrics``, ``plots``) or to the repository's top (``exp``'s column regex).

    Raises
    ------
    InputError
        ``ex.root`` is not inside a relgrade repository, or params ``paths`` has no
        ``decision``.
    """
    repo = find_repository(ex.root)
    decision = ex.path("decision")
    return {
        "metrics": ["dvc", "metrics", "show", _relative(decision, cwd)],
        "plots": ["dvc", "plots", "show", _relative(Path(ex.root) / "dvc.yaml", cwd)],
        "exp": ["dvc", "exp", "show", "--drop", ".*", "--keep",
                f"^(Experiment|rev)$|^{_regex(_relative(decision, repo))}/"],
    }


def experiment_name(ex) -> str:
    """The experiment's name in headings and plot titles (see
    :func:`relgrade.experiment.layout.experiment_label`)."""
    return experiment_label(ex.root, find_repository(ex.root))


def decision_rows(decisions: Mapping[str, Mapping]) -> list[dict]:
    """One row per arm of the experiment's decision files, baseline first.

    Parameters
    ----------
    decisions : mapping of str to mapping
        Arm → its ``paths.decision/ARM.json`` content
        (:func:`relgrade.pipeline.decisions.read_decisions`).

    Returns
    -------
    list of dict
        Keys :data:`DECISION_COLUMNS`; a value the file lacks (the baseline has no
        ``delta``) is ``None``. The arm with no ``baseline`` (the baseline itself) comes
        first, the others in name order.

    Examples
    --------
    >>> rows = decision_rows({"b": {"measure": "nDCG@10", "mean": 0.5, "baseline": "a",
    ...                             "delta": 0.1, "p_holm": 0.03},
    ...                       "a": {"measure": "nDCG@10", "mean": 0.4}})
    >>> [(r["arm"], r["mean"], r["delta"]) for r in rows]
    [('a', 0.4, None), ('b', 0.5, 0.1)]
    """
    order = sorted(decisions, key=lambda a: (decisions[a].get("baseline") is not None, a))
    return [{"arm": arm, **{c: decisions[arm].get(c) for c in DECISION_COLUMNS[1:]}}
            for arm in order]
