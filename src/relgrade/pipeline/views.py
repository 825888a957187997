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
                    "p_holm", "estimator", "delta_estimator")


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


def _decision_of(metrics: Mapping, prefix: str) -> dict[str, dict]:
    # the decision files of one revision: "PREFIX/ARM.json" → its content
    out = {}
    for path, entry in (metrics or {}).items():
        folder, _, name = path.rpartition("/")
        if folder == prefix and name.endswith(".json") and isinstance(entry, Mapping):
            data = entry.get("data")
            if isinstance(data, Mapping):
                out[name[:-len(".json")]] = dict(data)
    return out


def exp_rows(entries: list, prefix: str) -> list[dict]:
    """One row per revision of ``dvc exp show --json``, with one experiment's decision files.

    Parameters
    ----------
    entries : list of dict
        ``dvc exp show --json``'s output (DVC 3): the workspace and each baseline commit,
        each with ``rev``, ``name``, ``data`` (``metrics``: path → ``{"data": {...}}``) and
        ``experiments`` (each with ``name`` and ``revs``, themselves entries).
    prefix : str
        The decision folder from the repository's top (``metrics/decision``,
        ``experiments/NAME/metrics/decision``), as DVC names the files.

    Returns
    -------
    list of dict
        ``{"rev": str, "commit": str or None, "arms": {ARM: {"mean", "delta", "p_holm",
        "baseline"}}}`` (and ``delta_estimator`` when the file names one: the difference
        was made by another estimator than the mean, e.g. the anytime stopping rule),
        in DVC's order: the workspace, then each baseline commit followed
        by the experiments based on it. ``rev`` is the experiment's, branch's or tag's name,
        else the commit's first 7 hex digits; ``commit`` the full hash (``None`` for the
        workspace). A revision DVC could not read (a failed experiment) has no arms.

    Examples
    --------
    >>> m = {"metrics/decision/a.json": {"data": {"mean": 0.5}},
    ...      "metrics/decision/b.json": {"data": {"mean": 0.6, "baseline": "a",
    ...                                           "delta": 0.1, "p_holm": 0.02}}}
    >>> rows = exp_rows([{"rev": "workspace", "name": None, "data": {"metrics": m}}],
    ...                 "metrics/decision")
    >>> rows[0]["rev"], rows[0]["arms"]["b"]["delta"]
    ('workspace', 0.1)
    """
    rows = []

    def add(entry: Mapping, fallback: str | None = None) -> None:
        rev = str(entry.get("rev") or "")
        name = entry.get("name") or fallback or (rev if rev == "workspace" else rev[:7])
        data = entry.get("data") if isinstance(entry.get("data"), Mapping) else {}
        files = _decision_of(data.get("metrics"), prefix)
        rows.append({"rev": str(name), "commit": None if rev == "workspace" else rev,
                     "arms": {arm: {k: d.get(k) for k in ("mean", "delta", "p_holm",
                                                          "baseline")}
                              | ({"delta_estimator": d["delta_estimator"]}
                                 if d.get("delta_estimator") else {})
                              for arm, d in sorted(files.items())}})

    for entry in entries:
        add(entry)
        for exp in entry.get("experiments") or []:
            for rev in exp.get("revs") or []:
                add(rev, exp.get("name"))
    return rows


#: The mark of a difference another estimator than the mean made (``delta_estimator``).
MARK = "*"


def exp_notes(rows: list[dict]) -> list[str]:
    """The lines under :func:`exp_table` naming the estimators of marked differences.

    Examples
    --------
    >>> exp_notes([{"rev": "workspace", "arms": {"b": {"mean": 0.6, "delta": 0.1,
    ...                                                "delta_estimator": "anytime"}}}])
    ['* delta and p: anytime (workspace)']
    """
    by: dict[str, list[str]] = {}
    for r in rows:
        for v in r["arms"].values():
            e = v.get("delta_estimator")
            if e and r["rev"] not in by.setdefault(str(e), []):
                by[str(e)].append(r["rev"])
    return [f"{MARK} delta and p: {e} ({', '.join(revs)})" for e, revs in sorted(by.items())]


def _cell(values: Mapping | None) -> str:
    if not values or values.get("mean") is None:
        return "—"
    text = f"{values['mean']:.3f}"
    if values.get("delta") is not None:
        text += f" {values['delta']:+.3f}" + (MARK if values.get("delta_estimator") else "")
        p = values.get("p_holm")
        if p is not None:
            text += " p<.01" if p < 0.005 else f" p{p:.2f}"
    return text


def exp_title(name: str, revisions: int, *, width: int = 80) -> list[str]:
    """The title of :func:`exp_table`, wrapped at word boundaries to ``width`` characters.

    Parameters
    ----------
    name : str
        The experiment's name (:func:`experiment_name`).
    revisions : int
        How many revisions the table has.
    width : int, default 80
        Characters per line (at least 40); a line after the first is indented two spaces.

    Returns
    -------
    list of str
        The title's lines; a word longer than a line (a long experiment name) is the only
        thing ever broken inside.

    Examples
    --------
    >>> exp_title("ppi-sim", 1, width=40)
    ['ppi-sim: 1 revision; per arm: mean,', '  delta from the baseline, Holm p']
    """
    import textwrap

    text = (f"{name}: {revisions} revision{'s' if revisions != 1 else ''}; per arm: mean, "
            "delta from the baseline, Holm p")
    return textwrap.wrap(text, width=width, subsequent_indent="  ", break_on_hyphens=False)


def exp_table(rows: list[dict], *, width: int = 80) -> list[str]:
    """:func:`exp_rows` as text lines no wider than ``width``, arms in blocks that fit.

    Each cell reads ``MEAN DELTA pP``: the arm's primary mean, its difference from the
    baseline and the Holm-adjusted p-value (the baseline: its mean alone; ``—`` where the
    revision has no decision for the arm), three and two decimals, a p-value below 0.005 as
    ``p<.01``; a difference made by another estimator than the mean (``delta_estimator``,
    the anytime stopping rule's) is marked :data:`MARK` and :func:`exp_notes` says why. The
    arms (baseline
    first, then by name) are split into as many blocks as needed so that no line is
    wider than ``width``; each block repeats the revision column and is set off by a blank
    line.

    Parameters
    ----------
    rows : list of dict
        :func:`exp_rows`' rows.
    width : int, default 80
        Characters per line (at least 40).

    Returns
    -------
    list of str
        The lines, header first in each block; empty when there are no rows.

    Raises
    ------
    ValueError
        ``width`` is below 40.
    """
    if width < 40:
        raise ValueError(f"width {width} is below 40 characters")
    if not rows:
        return []
    baselines = {v.get("baseline") for r in rows for v in r["arms"].values()} - {None}
    arms = sorted({a for r in rows for a in r["arms"]}, key=lambda a: (a not in baselines, a))
    revs = [r["rev"][:24] for r in rows]
    rev_width = max(len("rev"), *(len(r) for r in revs))
    columns = [(arm, [_cell(r["arms"].get(arm)) for r in rows]) for arm in arms]
    blocks, block, used = [], [], rev_width
    for arm, cells in columns:
        w = 2 + max(len(arm), *(len(c) for c in cells))
        if block and used + w > width:
            blocks.append(block)
            block, used = [], rev_width
        block.append((arm[: width - rev_width - 2], cells))
        used += w
    blocks.append(block)
    lines = []
    for i, block in enumerate(blocks):
        if i:
            lines.append("")
        header = ["rev"] + [arm for arm, _ in block]
        cells = [[revs[j]] + [c[j] for _, c in block] for j in range(len(rows))]
        widths = [max(len(t) for t in col) for col in zip(header, *cells)]
        for line in [header, *cells]:
            lines.append("  ".join([line[0].ljust(widths[0])]
                                   + [t.rjust(w) for t, w in zip(line[1:], widths[1:])])
                         .rstrip())
    return lines
