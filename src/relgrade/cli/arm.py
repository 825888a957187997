"""``relgrade arm add|remove``: change an experiment's arms, its pipeline with them."""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("arm")
def arm_cmd():
    """Add or remove an arm. Each command edits params `arms`, renders the experiment's
    dvc.yaml (`relgrade pipeline render`) and says what `dvc repro` will owe."""


def _where(ex) -> str:
    import os

    rel = Path(os.path.relpath(ex.root.resolve(), Path.cwd())).as_posix()
    return "." if rel == "." else rel


def _next(ex) -> list[str]:
    from relgrade.experiment.layout import repro_command

    repro = repro_command(ex, cwd=Path.cwd())
    return [f"Next: {repro} (it stops at the grading owed, naming the command), grade, then "
            f"{repro} again."]


@arm_cmd.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(["bm25", "tfidf", "rrf", "embed"]), default=None,
              help="A computed arm.")
@click.option("--run", "run", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="An external run (TREC, JSONL or Parquet): copied to "
                   "data/input/runs/NAME.EXT as a file arm.")
@click.option("--fuse", default=None, metavar="A,B",
              help="With --kind rrf: the arms it fuses (default: every arm).")
@params_option
@handle_errors
def add_cmd(name, kind, run, fuse, params_path):
    """Add arm NAME (--kind KIND or --run FILE), render dvc.yaml, and price the pool it
    gives: the pairs it adds and the judgments each grader will owe."""
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.arms import add_arm, price_arm
    from relgrade.pipeline.cost import cost_lines

    ex = add_arm(Experiment.load(params_path), name, kind=kind, run=run,
                 fuse=[f for f in fuse.split(",") if f] if fuse else None)
    spec = ex.params.arms_dict()[name]
    where = _where(ex)
    click.echo(f"Added arm {name} ({spec['kind']}) to {where}/params.yaml; rendered "
               f"{where}/dvc.yaml.")
    plan = price_arm(ex, name)
    if plan is None:
        click.echo("Pending: the experiment has no pool yet; `dvc repro` makes the arm's run "
                   "with the others.")
    else:
        click.echo(f"Pending: the pool with {name} holds {plan['pairs']} pairs, "
                   f"{plan['new_pairs']} of them new (today {plan['pairs_now']}).")
        for line in cost_lines(plan["cost"]):
            click.echo(line)
    for line in _next(ex):
        click.echo(line)


@arm_cmd.command("remove")
@click.argument("name")
@params_option
@handle_errors
def remove_cmd(name, params_path):
    """Remove arm NAME (not the baseline, nor an arm another fuses), render dvc.yaml and
    delete its run; its pairs leave the pool at the next `dvc repro`."""
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import repro_command
    from relgrade.pipeline.arms import remove_arm

    ex = remove_arm(Experiment.load(params_path), name)
    where = _where(ex)
    click.echo(f"Removed arm {name} from {where}/params.yaml; rendered {where}/dvc.yaml.")
    click.echo(f"Pending: none; `{repro_command(ex, cwd=Path.cwd())}` re-pools without it "
               "(no grading is owed).")
