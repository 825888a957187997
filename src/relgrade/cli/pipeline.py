"""``relgrade pipeline``: every experiment's ``dvc.yaml``, rendered from the stage registry."""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.render import handle_errors


def _folders(experiment, every: bool) -> list[Path]:
    from relgrade.experiment.layout import experiment_folder, experiment_folders, find_repository
    from relgrade.pipeline.registry import require_experiment

    if every:
        return experiment_folders(find_repository(Path(experiment or ".")))
    return [require_experiment(experiment_folder(experiment or "."))]


@click.group("pipeline")
def pipeline_cmd():
    """The DVC pipeline of each experiment, rendered from the stage registry. `render` writes
    dvc.yaml; `check` says whether the committed one equals its rendering; `list` names the
    experiments."""


@pipeline_cmd.command("list")
@handle_errors
def list_cmd():
    """Print every experiment of the repository, one folder a line, relative to its top: `.`
    (when the top holds params.yaml), then each folder under experiments/ holding a
    params.yaml, except one inside another experiment's folder (e.g. a holes folder)."""
    from relgrade.experiment.layout import experiment_folders, find_repository

    repo = find_repository(Path("."))
    for folder in experiment_folders(repo):
        click.echo(folder.relative_to(repo).as_posix() or ".")


@pipeline_cmd.command("render")
@click.option("--experiment", "experiment", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="The experiment's folder (default: this folder).")
@click.option("--all", "every", is_flag=True,
              help="Every experiment of the repository: the top one and experiments/*.")
@click.option("--stdout", "to_stdout", is_flag=True, help="Print the rendering, write nothing.")
@handle_errors
def render_cmd(experiment, every, to_stdout):
    """Write each experiment's dvc.yaml from the registry and its params.yaml."""
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.params import PARAMS_FILE
    from relgrade.io.files import write_text
    from relgrade.pipeline.registry import render

    for folder in _folders(experiment, every):
        text = render(Experiment.load(folder / PARAMS_FILE))
        if to_stdout:
            click.echo(text, nl=False)
            continue
        path = folder / "dvc.yaml"
        old = path.read_text("utf-8") if path.is_file() else None
        if old == text:
            click.echo(f"{path.as_posix()}: unchanged")
        else:
            write_text(path, text)
            click.echo(f"Wrote {path.as_posix()}")


@pipeline_cmd.command("check")
@click.option("--experiment", "experiment", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="The experiment's folder (default: this folder).")
@click.option("--all", "every", is_flag=True,
              help="Every experiment of the repository: the top one and experiments/*.")
@handle_errors
def check_cmd(experiment, every):
    """Exit 1 when a committed dvc.yaml differs from its rendering, printing the difference;
    `relgrade pipeline render` writes the rendering."""
    from relgrade.pipeline.registry import check

    stale = []
    for folder in _folders(experiment, every):
        found = check(folder)
        if found is None:
            click.echo(f"{(folder / 'dvc.yaml').as_posix()}: equals its rendering")
            continue
        stale.append(found)
        for line in found.diff:
            click.echo(line)
    if stale:
        names = " ".join(d.path.parent.as_posix() for d in stale)
        raise click.ClickException(
            f"{len(stale)} dvc.yaml differ from their rendering; run: relgrade pipeline "
            f"render --all (or --experiment DIR for one of: {names})")
