"""``relgrade compare ARM_A ARM_B``: is one arm better than another, and how sure is that?

It reads what a comparison needs through
:meth:`relgrade.experiment.files.Experiment.compare_inputs`, as the ``compare`` stage does,
so both read the same inputs the same way.
"""

from __future__ import annotations

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError
from relgrade.evaluation import compare as cmp
from relgrade.evaluation.settings import design_pairs
from relgrade.experiment.files import Experiment


@click.command("compare")
@click.argument("arm_a")
@click.argument("arm_b")
@click.option("--measure", "-m", default=None,
              help="Only this measure, e.g. \"nDCG(dcg='exp-log2')@10\" (default: every "
                   "measure except Judged@k).")
@click.option("--json", "fmt", flag_value="json", help="Print the comparison as JSON.")
@click.option("--markdown", "fmt", flag_value="markdown", help="Print a Markdown report.")
@params_option
@click.option("--workers", type=int, default=None,
              help="Threads to use (default: chosen by the amount of work). Never changes "
                   "a number.")
@handle_errors
def compare_cmd(arm_a, arm_b, measure, fmt, params_path, workers):
    """Compare ARM_A against ARM_B over the queries of the frozen key.

    Reads the per-query values the metrics stage wrote and prints each arm's mean with its
    bootstrap confidence interval, then the paired difference ARM_A - ARM_B with its
    interval, the sign-flip randomization p-value, the p-value after Holm's correction, the
    paired t test, Cohen's d_z, per-group differences, and a one-line verdict per measure.
    Holm runs over the same family as the compare stage (params metrics.pairs, every
    measure), plus this pair if the design does not already hold it, so the numbers equal
    those in metrics/comparisons.json. With the key, runs, grades and audit present, the
    verdict also weighs the label-noise band.
    """
    kwargs = Experiment.load(params_path).compare_inputs(full=False)
    settings = kwargs["settings"]
    arms = sorted(kwargs["per_query"]["arm"].unique())
    for arm in (arm_a, arm_b):
        if arm not in arms:
            raise InputError("unknown arm", item=arm, fix="Arms: " + ", ".join(arms))
    if arm_a == arm_b:
        raise InputError("compare two different arms", item=arm_a)
    design = design_pairs(arms, baseline=settings.baseline, mode=settings.pairs)
    if (arm_a, arm_b) not in design and (arm_b, arm_a) not in design:
        design.append((arm_a, arm_b))
    result = cmp.full_report(**kwargs, pairs=design, workers=workers)
    view = result.subset(pair=(arm_a, arm_b), measure=measure)
    if fmt == "json":
        click.echo(view.to_json(), nl=False)
        return
    if fmt == "markdown":
        click.echo(view.to_markdown(), nl=False)
        return
    import sys

    from rich.console import Console

    # a pipe or file gets wide lines rather than wrapped cells
    console = Console(width=None if sys.stdout.isatty() else 160)
    for table in view.rich_tables(measure=measure, pair=(arm_a, arm_b)):
        console.print(table)
    for line in view.verdicts():
        click.echo(line)
