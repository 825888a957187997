"""Options several commands share, bundled as decorators.

Each function returns a decorator that adds one option (or a pair of them) to a click
command, with the same name, type, default and help wherever it appears, so a command says
``@scale_option()`` or ``@params_option`` instead of repeating the option's spelling.
"""

from __future__ import annotations

import functools
from pathlib import Path

import click

from relgrade.errors import InputError


def parse_scale(text: str | None) -> list[int] | None:
    """The grades of a ``--scale`` value (``"0,1,2"``), checked; ``None`` stays ``None``.

    Parameters
    ----------
    text : str or None
        Integer grades separated by commas.

    Returns
    -------
    list of int or None
        The scale, ascending (see :func:`relgrade.schema.check_scale`).

    Raises
    ------
    InputError
        A value is not an integer, or the scale has fewer than two distinct grades.

    Examples
    --------
    >>> parse_scale("2,0,1")
    [0, 1, 2]
    """
    from relgrade.schema import check_scale

    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip() != ""]
    except ValueError:
        raise InputError("--scale lists integer grades separated by commas",
                         found=repr(text), fix="For example --scale 0,1,2") from None
    return check_scale(values)


def format_option(*, markdown: bool = False, json_help: str = "Print one JSON document."):
    """``--json`` (parameter ``as_json``) and, with ``markdown=True``, ``--markdown``.

    Parameters
    ----------
    markdown : bool, default False
        Also add ``--markdown`` (parameter ``as_markdown``).
    json_help : str
        The help text of ``--json``.
    """

    def decorator(fn):
        if markdown:
            fn = click.option("--markdown", "as_markdown", is_flag=True,
                              help="Print Markdown tables instead.")(fn)
        return click.option("--json", "as_json", is_flag=True, help=json_help)(fn)

    return decorator


def scale_option(*, default: str | None = "0,1,2",
                 help: str = "The grade scale, comma-separated."):
    """``--scale`` (parameter ``scale``): the grade scale, parsed by :func:`parse_scale`.

    A bad value is an ``Error:`` line (exit 1) when the command runs, as every other bad
    input is.

    Parameters
    ----------
    default : str or None, default "0,1,2"
        The scale when the option is not given; ``None`` leaves ``scale`` as ``None``.
    help : str
        The option's help text.
    """
    return click.option("--scale", "scale", default=default, show_default=default is not None,
                        help=help)


def labels_option():
    """``--labels`` (parameter ``labels``): text grades in order, lowest first.

    ``--labels bad,fair,good`` reads a grade written ``"fair"`` as 1; the scale is then
    0..n-1 (n labels) whatever ``--scale`` says.
    """
    return click.option("--labels", "labels", default=None,
                        help="Text grades in order, lowest first (e.g. bad,fair,good: read "
                             "as 0, 1, 2); the scale is then 0..n-1.")


def parse_labels(text: str | None) -> list[str] | None:
    """The labels of a ``--labels`` value (``"bad,fair,good"``), checked.

    Returns
    -------
    list of str or None
        The labels in the order given; ``None`` when the option was not given.

    Raises
    ------
    InputError
        Fewer than two labels, an empty label, or a label named twice.

    Examples
    --------
    >>> parse_labels("bad, fair ,good")
    ['bad', 'fair', 'good']
    """
    from relgrade.errors import InputError

    if text is None:
        return None
    labels = [x.strip() for x in text.split(",")]
    if len(labels) < 2 or not all(labels) or len(set(labels)) != len(labels):
        raise InputError("--labels needs two or more distinct, non-empty labels, lowest "
                         "first", item="--labels", found=repr(text))
    return labels


def seed_option(*, default: int | None = 0, help: str = "Seed of the random choices."):
    """``--seed`` (parameter ``seed``): an integer seed, shown with its default.

    Parameters
    ----------
    default : int or None, default 0
        The seed when the option is not given (``None``: the command decides, e.g. from
        params).
    help : str
        The option's help text.
    """
    if default is None:
        return click.option("--seed", type=click.IntRange(min=0), default=None, help=help)
    return click.option("--seed", type=int, default=default, show_default=True, help=help)


def params_path_of(experiment: Path | None, params_path: Path | None) -> Path:
    """The params file a command reads, from ``--experiment`` and ``--params``.

    Parameters
    ----------
    experiment : pathlib.Path or None
        The experiment's folder (``--experiment``): its ``params.yaml`` is read.
    params_path : pathlib.Path or None
        The params file itself (``--params``).

    Returns
    -------
    pathlib.Path
        ``EXPERIMENT/params.yaml``, else ``params_path``, else ``params.yaml`` in the
        folder the command runs in. A relative ``EXPERIMENT`` with no params file here is
        read from the repository's top too
        (:func:`relgrade.experiment.layout.experiment_folder`): a printed command works from
        any folder of the repository.

    Raises
    ------
    click.UsageError
        Both options are given.

    Examples
    --------
    >>> params_path_of(Path("experiments/httpx"), None).as_posix()
    'experiments/httpx/params.yaml'
    >>> params_path_of(None, None).as_posix()
    'params.yaml'
    """
    # imported when a command runs, not when it is loaded: the params module needs pydantic
    from relgrade.experiment.params import PARAMS_FILE

    if experiment is not None and params_path is not None:
        raise click.UsageError("give --experiment or --params, not both")
    if experiment is not None:
        from relgrade.experiment.layout import experiment_folder

        return experiment_folder(experiment) / PARAMS_FILE
    return Path(params_path) if params_path is not None else PARAMS_FILE


def params_option(fn):
    """``--experiment DIR`` and ``--params FILE``: which experiment the command reads.

    The command receives one parameter, ``params_path``: ``DIR/params.yaml`` with
    ``--experiment``, the file given with ``--params``, else ``params.yaml`` in the folder
    the command runs in (the repository's own experiment when run at its top). The file is
    not checked by click: a missing or invalid file is reported by
    :func:`relgrade.experiment.params.load_params` as one ``Error:`` line naming it.
    """

    @functools.wraps(fn)
    def command(*args, experiment=None, params_path=None, **kwargs):
        return fn(*args, params_path=params_path_of(experiment, params_path), **kwargs)

    # functools.wraps shares fn's option list; the two options are added to it here.
    command = click.option("--params", "params_path", default=None,
                           type=click.Path(dir_okay=False, path_type=Path),
                           help="The experiment's params file (default: params.yaml here).")(command)
    return click.option("--experiment", "experiment", default=None,
                        type=click.Path(file_okay=False, path_type=Path),
                        help="The experiment's folder, e.g. experiments/NAME (default: the "
                             "folder the command runs in).")(command)
