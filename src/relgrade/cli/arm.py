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


def _next(ex, owed: int | None = None) -> list[str]:
    """What to run next; ``owed``: the judgments the pool with the arm owes, when priced
    (0: ``dvc repro`` has no grading to stop at)."""
    from relgrade.experiment.layout import repro_command

    repro = repro_command(ex, cwd=Path.cwd())
    if owed == 0:
        return [f"Next: {repro}; no judgment is owed with this pool, so it does not stop for "
                "grading."]
    return [f"Next: {repro} (it stops at the grading owed, naming the command), grade, then "
            f"{repro} again."]


@arm_cmd.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(["bm25", "bm25f", "tfidf", "rrf", "embed"]), default=None,
              help="A computed arm.")
@click.option("--run", "run", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="An external run (TREC, JSONL or Parquet): copied to "
                   "data/input/runs/NAME.EXT as a file arm.")
@click.option("--fuse", default=None, metavar="A,B",
              help="With --kind rrf: the arms it fuses (default: every arm).")
@click.option("--depth", type=click.IntRange(min=1), default=100, show_default=True,
              help="How many chunks per query the arm's run keeps.")
@click.option("--holes", "on_key", is_flag=True,
              help="With --run: keep the frozen key as it is; the arm goes under holes.arms, "
                   "its holes graded by a model grader and a sample of them by people "
                   "(docs/new-arm.md).")
@click.option("--model-grader", default=None, help="With --holes: grades every hole.")
@click.option("--human-grader", default=None,
              help="With --holes: people grading the sampled queries' holes.")
@click.option("--human-fraction", type=click.FloatRange(min=0, max=1, min_open=True),
              default=None, help="With --holes: the share of the queries with holes people "
                                 "grade.")
@params_option
@handle_errors
def add_cmd(name, kind, run, fuse, depth, on_key, model_grader, human_grader, human_fraction,
            params_path):
    """Add arm NAME (--kind KIND or --run FILE), render dvc.yaml, and price the pool it
    gives: the pairs it adds and the judgments each grader will owe. With --holes, a run
    joins a frozen key instead: the pool and the key stay as they are."""
    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.arms import add_arm, add_hole_arm, price_arm
    from relgrade.pipeline.cost import cost_lines

    holes_opts = {"--model-grader": model_grader, "--human-grader": human_grader,
                  "--human-fraction": human_fraction}
    if on_key:
        if run is None or kind is not None:
            raise InputError("--holes takes an external run", item=name,
                             fix="Give --run FILE (a computed arm joins the pool instead)")
        ex = add_hole_arm(Experiment.load(params_path), name, run=run, depth=depth,
                          model_grader=model_grader, human_grader=human_grader,
                          human_fraction=human_fraction)
        return _holes_added(ex, name)
    given = [k for k, v in holes_opts.items() if v is not None]
    if given:
        verb = "goes" if len(given) == 1 else "go"
        raise InputError(f"{', '.join(given)} {verb} with --holes", item=name)
    ex = add_arm(Experiment.load(params_path), name, kind=kind, run=run,
                 fuse=[f for f in fuse.split(",") if f] if fuse else None, depth=depth)
    spec = ex.params.arms_dict()[name]
    where = _where(ex)
    click.echo(f"Added arm {name} ({spec['kind']}) to {where}/params.yaml; rendered "
               f"{where}/dvc.yaml.")
    try:
        plan = price_arm(ex, name)
    except InputError as e:  # the arm is added; the pool it gives cannot be made as it is
        click.echo(f"warning: the pool with {name} cannot be priced: {e}", err=True)
        plan = False
    if plan is False:
        pass
    elif plan is None:
        click.echo("Pending: the experiment has no pool yet; `dvc repro` makes the arm's run "
                   "with the others.")
    else:
        click.echo(f"Pending: the pool with {name} holds {plan['pairs']} pairs, "
                   f"{plan['new_pairs']} of them new (today {plan['pairs_now']}).")
        for line in cost_lines(plan["cost"]):
            click.echo(line)
        note = frozen_key_note(ex, name, run=run)
        if note:
            click.echo(note)
    owed = plan["cost"].get("pending") if isinstance(plan, dict) else None
    for line in _next(ex, owed):
        click.echo(line)


def frozen_key_note(ex, name: str, *, run) -> str | None:
    """The note ``arm add`` prints when arm ``name`` joins the pool of a frozen key.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment, with ``name`` already in its arms.
    name : str
        The arm just added.
    run : path or None
        The external run it was added with (None for a computed arm: no note).

    Returns
    -------
    str or None
        None without a frozen key (params ``paths.record`` absent) or for a computed arm.
        Else one line whose commands run as printed at the repository's top (``--experiment
        PATH`` for an experiment below it). Outside ppi mode: the run can keep the key as it
        is by joining under ``holes.arms`` (``relgrade arm remove NAME``, then ``relgrade arm
        add NAME --run FILE --holes`` with the holes' graders and sample, docs/new-arm.md).
        In ppi mode a holes section is refused (the key is the model grader's), so the note
        says the arm joins the pool: the next ``dvc repro`` owes the grading priced above
        and freezes a new key, which the report translates from the previous one, and
        ``relgrade arm remove NAME`` takes the arm back.
    """
    from relgrade.experiment.layout import experiment_option, repro_command

    if run is None or not ex.path("record").exists():
        return None
    remove = f"relgrade arm remove {name}{experiment_option(ex)}"
    if ex.params.grading.mode == "ppi":
        return (f"note: the key is frozen; in ppi mode the key is the model grader's, so an "
                f"arm cannot join it under holes: `{repro_command(ex, cwd=Path.cwd())}` owes "
                f"the grading priced above and freezes a new key (the report translates the "
                f"previous one); to take the arm back, `{remove}` (docs/new-arm.md).")
    return (f"note: the key is frozen; to keep it as it is, `{remove}`, then add the run with "
            f"--holes (docs/new-arm.md).")


def _holes_added(ex, name) -> None:
    """Print what adding ``name`` under ``holes.arms`` owes."""
    from relgrade.cli.render import holes_lines
    from relgrade.pipeline.new_arms import holes_status

    where = _where(ex)
    click.echo(f"Added arm {name} (file) to holes.arms in {where}/params.yaml; the pool and "
               f"the key stay as they are; rendered {where}/dvc.yaml.")
    click.echo("Pending: what the new arms' holes owe:")
    for line in holes_lines(holes_status(ex)):
        click.echo(f"  {line}")
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

    before = Experiment.load(params_path)
    ex = remove_arm(before, name)
    where = _where(ex)
    if before.params.holes is not None and name in before.params.holes.arms:
        click.echo(f"Removed arm {name} from holes.arms in {where}/params.yaml; rendered "
                   f"{where}/dvc.yaml.")
        click.echo(f"Pending: none; `{repro_command(ex, cwd=Path.cwd())}` rewrites the holes' "
                   "record and the report without it (no grading is owed; the grades "
                   "recorded for its holes stay).")
        return
    click.echo(f"Removed arm {name} from {where}/params.yaml; rendered {where}/dvc.yaml.")
    kept = _kept_copy(before, name)
    if kept:
        click.echo(kept)
    click.echo(f"Pending: none; `{repro_command(ex, cwd=Path.cwd())}` re-pools without it "
               "(no grading is owed).")


def _kept_copy(ex, name: str) -> str | None:
    """The line saying an external arm's copied run stays, and why; None for a computed
    arm, or one whose run file is gone."""
    import os

    arm = (ex.params.arms or {}).get(name)
    source = getattr(arm, "source", None)
    if not source or not ex.file(source).is_file():
        return None
    path = Path(os.path.relpath(ex.file(source).resolve(), Path.cwd())).as_posix()
    return (f"Kept its run {path}, the copy `arm add` made: it records what the arm ranked "
            f"when its pairs were pooled; `git rm {path}` drops it, and "
            f"`relgrade arm add {name} --run {path}` brings the arm back.")
