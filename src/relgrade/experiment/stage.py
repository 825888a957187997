"""What every stage script shares: loading the experiment and reporting errors.

A stage script is ``run_stage(main)`` around a ``main(experiment)`` that reads its inputs
through the :class:`~relgrade.experiment.files.Experiment`, calls the library once and
writes its outputs. The params are checked before ``main`` runs, so a bad value stops the
stage before any work. A :class:`~relgrade.errors.RelgradeError` becomes one
``Error: ...`` line on stderr and exit status 1; outputs are written atomically, so a
failed stage leaves none half-written. Pending work (graders still owe pairs) is not an
error: it prints ``Pending: ...`` naming what is owed, the command that does it and the
``dvc repro`` to run afterwards, and exits with
:data:`~relgrade.errors.PENDING_EXIT` so that DVC stops the pipeline there.
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
from collections.abc import Callable
from pathlib import Path

from relgrade.errors import PENDING_EXIT, GateFailed, PendingWork, RelgradeError
from relgrade.terminal import inert_output
from relgrade.text import inert
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import repro_command
from relgrade.experiment.params import PARAMS_FILE


def again_command(ex) -> str:
    """The command that resumes the pipeline, as typed at the repository's top and, for an
    experiment below it, in the experiment's folder; ``dvc exp run`` under ``dvc exp run``
    (DVC sets ``DVC_EXP_NAME`` for the stages of an experiment run).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment

    Returns
    -------
    str
        A phrase with the command(s) in backticks, e.g. ``"`dvc repro` again"`` or
        ``"`dvc repro experiments/x/dvc.yaml` again (at the repository's top; `dvc repro`
        in experiments/x)"``.
    """
    if os.environ.get("DVC_EXP_NAME"):
        return "`dvc exp run` again (in the folder you ran it in)"
    top, here = repro_command(ex), repro_command(ex, cwd=ex.root)
    if top == here:
        return f"`{top}` again"
    rel = top.split()[-1].removesuffix("/dvc.yaml")
    return f"`{top}` again (at the repository's top; `{here}` in {rel})"


def _named_from_top(error: RelgradeError, ex) -> str:
    """``error``'s message, its file named from the repository's top.

    DVC runs an experiment's stages in the experiment's folder, so a file an error names is
    relative to it (``data/audit/lock.json``); typed at the repository's top, where relgrade's
    commands and docs are given, that names the default experiment's file. For an experiment
    below the top, an :class:`~relgrade.errors.InputError` whose path is relative to the
    stage's folder is named as :func:`relgrade.experiment.layout.top_path` names a file
    (``experiments/x/data/audit/lock.json``), and so is that same path wherever the error's
    rule, what it found or its fix repeat it (``git checkout -- data/audit/lock.json``), and
    any path below the same folder there (a grade file's bank sidecar beside it); other
    words of that text are left as they are, since which of them name files is not known.
    A relgrade command the text names in backticks (`` `relgrade audit redraw` ``) without
    ``--experiment`` gets the experiment's option, as the commands relgrade prints elsewhere
    do. Any other error is printed as it is.
    """
    from relgrade.errors import InputError
    from relgrade.experiment.layout import aim_commands, experiment_option, top_path

    if ex is None or not isinstance(error, InputError) \
            or Path.cwd().resolve() != Path(ex.root).resolve():
        return str(error)
    option = experiment_option(ex)
    for field in ("rule", "found", "fix"):
        text = getattr(error, field)
        if isinstance(text, str):
            setattr(error, field, aim_commands(text, option))
    path = getattr(error, "path", None)
    if not path or os.path.isabs(path):
        return error._message()
    error.path = top_path(ex, path)
    # the same path, or one below the same folder (a grade file's bank sidecar beside it), as
    # a whole word: not the tail of a longer path (``x/data/a.json``) nor, for a path with no
    # folder, the head of a longer name (``a.json.bak`` for ``a.json``); a sentence's full
    # stop after it is not part of it
    folder = posixpath.dirname(path)
    body = re.escape(path) + (f"|{re.escape(folder + '/')}[\\w./-]*\\w" if folder else "")
    word = re.compile(rf"(?<![\w./-])(?:{body})(?![\w/-]|\.\w)")
    for field in ("rule", "found", "fix"):
        text = getattr(error, field)
        if isinstance(text, str):
            setattr(error, field, word.sub(lambda m: top_path(ex, m.group(0)), text))
    return error._message()


def run_stage(main: Callable[..., None], *args: str, params_path=PARAMS_FILE,
              check: Callable[..., None] | None = None) -> None:
    """Load the experiment from ``params_path``, call ``main(experiment, *args)``, map errors
    to exit 1.

    Parameters
    ----------
    main : callable
        The stage's work, given the :class:`Experiment` and ``args``.
    *args : str
        The stage's command-line arguments (the arm of a per-arm stage).
    params_path : str or os.PathLike, default "params.yaml"
        The params file; its folder is the experiment's root.
    check : callable, optional
        Called with the experiment before ``main``; a :class:`RelgradeError` it raises
        stops the stage as one of ``main``'s would (the pipeline's shape check).

    Everything the stage prints (its steps, ``Pending:``, ``Gate failed:``, ``Error:``)
    passes through :func:`relgrade.terminal.inert_output`: names, reasons and file names
    from outside show a bidi or control character as ``\\u202e``, never raw.
    """
    with inert_output():
        _run_stage(main, *args, params_path=params_path, check=check)


def _run_stage(main, *args, params_path, check) -> None:
    ex = None
    try:
        ex = Experiment.load(params_path)
        if check is not None:
            check(ex)
        main(ex, *args)
    except PendingWork as e:
        print(f"Pending: {e}, then {again_command(ex)}. This is work owed, not a failure: DVC "
              "reports the stage as failed so that the pipeline stops here.", file=sys.stderr)
        sys.exit(PENDING_EXIT)
    except GateFailed as e:
        for line in e.lines:
            print(f"Gate failed: {line}", file=sys.stderr)
        for line in e.advice:
            print(f"Advice: {line}", file=sys.stderr)
        for line in e.warnings:
            print(f"Warning: {line}", file=sys.stderr)
        sys.exit(1)
    except RelgradeError as e:
        print(f"Error: {inert(_named_from_top(e, ex), keep=chr(10))}", file=sys.stderr)
        sys.exit(1)
