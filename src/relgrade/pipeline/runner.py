"""The stage runner the entry scripts call: the experiment's stage runner, after a check that
the ``dvc.yaml`` DVC is running has the shape the experiment's params give.

A params edit that changes the pipeline's shape (an arm added by hand, a mode switched, a
share source) and was not followed by ``relgrade pipeline render`` leaves a ``dvc.yaml`` whose
deps and stages are wrong for the params: a fused arm that does not depend on the run it
fuses, say. Every stage that DVC runs (the ``DVC_STAGE`` variable is set) compares the
shapes first (:func:`relgrade.pipeline.registry.shape`: no import graph, a YAML load and a
rendering) and refuses to run, naming ``relgrade pipeline render``. Run by hand, outside
DVC, or in a folder that is not inside a relgrade repository (no ``stages/`` and ``dvc.yaml``
above it: nothing to render against), a stage skips the check.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable

from relgrade.errors import InputError
from relgrade.experiment import stage
from relgrade.experiment.layout import experiment_option, find_repository
from relgrade.experiment.params import PARAMS_FILE

#: The environment variable DVC sets for every stage command it runs.
DVC_STAGE = "DVC_STAGE"


def require_rendered(ex) -> None:
    """Refuse a ``dvc.yaml`` that differs in shape from the rendering of ``ex``'s params.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment whose stage DVC is about to run.

    Raises
    ------
    InputError
        At ``dvc.yaml``: the stages that differ, and the fix: ``relgrade pipeline render``
        (with ``--experiment`` for an experiment below the repository's top), then the
        ``dvc repro`` again.
    """
    from relgrade.pipeline.registry import shape

    if not os.environ.get(DVC_STAGE):
        return
    try:
        repo = find_repository(ex.root)
    except InputError:
        # no repository layout to render against (a pipeline copied out of one, as test
        # rigs and hand-made folders are): nothing to compare with, so nothing refused
        return
    differ = shape(ex.root, ex=ex, repo=repo)
    if not differ:
        return
    where = experiment_option(ex)
    raise InputError(
        f"the pipeline differs from what {PARAMS_FILE} gives (stages: {', '.join(differ)}): "
        "the params were edited without rendering the pipeline", path=ex.root / "dvc.yaml",
        fix=f"Run `relgrade pipeline render{where}` (at the repository's top), then "
            f"{stage.again_command(ex)}")


def run_stage(main: Callable[..., None], *args: str, params_path=PARAMS_FILE) -> None:
    """:func:`relgrade.experiment.stage.run_stage` with :func:`require_rendered` as its check.

    Parameters
    ----------
    main : callable
        The stage's work, given the :class:`~relgrade.experiment.files.Experiment` and
        ``args``.
    *args : str
        The stage's command-line arguments (the arm of a per-arm stage).
    params_path : str or os.PathLike, default "params.yaml"
        The params file; its folder is the experiment's root.

    Notes
    -----
    The objects the stage's imports made (modules, functions, classes, the params models)
    live until the process ends, so they are frozen (:func:`gc.freeze`) before the work
    starts: the collector no longer walks them in each full collection of the stage's work
    nor at the interpreter's shutdown. Nothing is skipped: objects are still freed and
    streams still flushed (benchmarks/README.md, "Test suite time").
    """
    gc.freeze()
    stage.run_stage(main, *args, params_path=params_path, check=require_rendered)
