"""Filing disputes in any experiment, and the pipeline that then depends on them.

The grades and key stages depend on the disputes file only once it exists
(:func:`relgrade.pipeline.registry.stage_body`): an experiment ships without one, so DVC has
no missing or empty dep to stop or warn on. Filing the first dispute creates the file; this
module then names it in params (``paths.disputes``, when the experiment's params predate it)
and renders the experiment's ``dvc.yaml`` again, as ``relgrade judge probe`` does for its
report. ``relgrade disputes import`` and the grading page both file through :func:`file`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from relgrade.errors import InputError
from relgrade.experiment import revisions
from relgrade.experiment.files import Experiment
from relgrade.experiment.params_edit import edited_params
from relgrade.io.files import write_text

#: Where an experiment whose params name no disputes file keeps its disputes.
DEFAULT_PATH = "data/disputes.jsonl"


@dataclass(frozen=True)
class Filed:
    """What filing did.

    Attributes
    ----------
    ids : list of str
        The filed disputes' ids, in order (one filed twice once).
    skipped : int
        How many of them were recorded before (nothing appended for them).
    path : pathlib.Path
        The disputes file.
    params_added : bool
        Params lacked ``paths.disputes``: :data:`DEFAULT_PATH` was added to the file.
    rendered : pathlib.Path or None
        The ``dvc.yaml`` written again (its grades and key stages now depend on the
        disputes file), or None when it was already as rendered, or there is none.
    """

    ids: list
    skipped: int
    path: Path
    params_added: bool
    rendered: Path | None


def file(ex: Experiment, rows, *, source, via: str, lines=None) -> Filed:
    """File disputes in ``ex``: :func:`relgrade.experiment.revisions.file_disputes`, then
    the params entry and the pipeline that the disputes file needs.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its params may lack ``paths.disputes``).
    rows : sequence of mapping
        Filed disputes (:data:`relgrade.protocol.disputes.FILED` keys, in order).
    source : str
        The file (or ``the grading page``) named in errors; ``lines`` the rows' line numbers.
    via : str
        ``import`` or ``page``, recorded.

    Returns
    -------
    Filed

    Raises
    ------
    InputError
        A row breaks a rule of :func:`relgrade.protocol.disputes.check_dispute`, or there
        is no row: nothing is written (neither the disputes file, nor params, nor
        ``dvc.yaml``).
    StorageError
        The disk did not take the whole append (the disputes file is as before).

    Notes
    -----
    The disputes are appended first (all or nothing, fsynced): once that is done they are
    recorded, whatever happens next. Params and ``dvc.yaml`` follow, each written
    atomically; if the process stops between, the next filing or ``relgrade pipeline
    render`` completes them, and ``dvc repro`` refuses a ``dvc.yaml`` of the wrong shape
    until then (:mod:`relgrade.pipeline.runner`).
    """
    params_text = None
    if ex.params.paths.disputes is None:
        params_text, params = edited_params(ex.params.source, {"paths.disputes": DEFAULT_PATH})
        ex = Experiment(ex.root, params)
    path = ex.path("disputes")
    ids, skipped = revisions.file_disputes(ex, rows, source=source, via=via, lines=lines)
    if params_text is not None:
        write_text(ex.params.source, params_text)
    return Filed(ids=ids, skipped=skipped, path=path, params_added=params_text is not None,
                 rendered=render_if_changed(ex))


def render_if_changed(ex: Experiment) -> Path | None:
    """Write ``ex``'s ``dvc.yaml`` again when its shape differs from the rendering of its
    params (:func:`relgrade.pipeline.registry.shape`).

    Returns
    -------
    pathlib.Path or None
        The file written; None when it has the right shape, there is none, or the experiment
        is not inside a relgrade repository (nothing to render against).
    """
    from relgrade.experiment.layout import find_repository
    from relgrade.pipeline.registry import render, shape

    dvc = Path(ex.root) / "dvc.yaml"
    if not dvc.is_file():
        return None
    try:
        repo = find_repository(ex.root)
    except InputError:  # a folder outside any relgrade repository: no stage registry to render
        return None
    if not shape(ex.root, ex=ex, repo=repo):
        return None
    write_text(dvc, render(ex, repo=repo))
    return dvc
