"""Options several commands share, each a decorator (``@params_option``)."""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.experiment.params import PARAMS_FILE


def params_option(fn):
    """``--params FILE``: the experiment's params file (default ``params.yaml``).

    The file is not checked by click: a missing or invalid file is reported by
    :func:`relgrade.experiment.params.load_params` as one ``Error:`` line naming it.
    """
    return click.option("--params", "params_path", default=str(PARAMS_FILE), show_default=True,
                        type=click.Path(dir_okay=False, path_type=Path),
                        help="The experiment's params file.")(fn)
