"""``relgrade design``: write the experiment's design record, DESIGN.md, again."""

from __future__ import annotations

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.command("design")
@params_option
@handle_errors
def design_cmd(params_path):
    """Write DESIGN.md from params and, once the key is frozen, its record (agreement reached,
    key sha256, pool version, dropped queries), keeping the text written in its person blocks.
    Lists the blocks (and rubric examples) still to be written."""
    from relgrade.pipeline.design import unfilled_parts, write_design
    from relgrade.experiment.files import Experiment

    ex = Experiment.load(params_path)
    if ex.params.clicks is not None and not ex.params.paths.pool:
        # a click experiment has no grading protocol to record: its DESIGN.md is written by hand
        click.echo(f"{(ex.root / 'DESIGN.md').as_posix()}: a click experiment's design record "
                   "is written by hand (no pool, graders or key to fill it from); left as it is")
        return
    path = write_design(ex)
    click.echo(f"Wrote {path.as_posix()}")
    for part in unfilled_parts(ex):
        click.echo(f"  unfilled: {part}")
