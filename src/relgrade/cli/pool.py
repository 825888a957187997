"""``relgrade pool plan``: price a re-pool before it is made."""

from __future__ import annotations

import json
from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("pool")
def pool_cmd():
    """The pool of the experiment's arms."""


@pool_cmd.command("plan")
@click.option("--depth", type=int, default=None,
              help="The pool depth to price (default: params pool.depth, today's depth).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@params_option
@handle_errors
def plan_cmd(depth, as_json, params_path):
    """Say what pooling the arms' runs at --depth would make, and what grading it would cost:
    the pool version it would create, its pairs, the pairs new to the pool, and the judgments
    the key grader and the auditor would owe: a person's in annotator-hours (params
    cost.seconds_per_judgment, or a grader's own), a model's in calls (one per judgment, or
    graders.NAME.samples). Without --depth, today's depth (params
    pool.depth): what an arm added to params would cost. Every arm in params is pooled: an
    arm whose run is not made yet (just added) has its run made in memory, as its retrieve
    stage will make it, and the plan says so. Writes nothing."""
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import repro_command
    from relgrade.pipeline.arms import plan_with_runs
    from relgrade.pipeline.cost import cost_lines

    ex = Experiment.load(params_path)
    plan = plan_with_runs(ex, depth)
    if as_json:
        click.echo(json.dumps(plan, indent=2))
        return
    click.echo(f"pool at depth {plan['depth']}: {plan['pairs']} pairs, version "
               f"{plan['pool_version']} (now {plan['pairs_now']} pairs, version "
               f"{plan['pool_version_now'] or 'none'}); {plan['new_pairs']} pairs new to the pool")
    made = plan["made_in_memory"]
    if made:
        stages = repro_command(ex, [f"retrieve@{a}" for a in made], cwd=Path.cwd())
        click.echo(f"{'arm' if len(made) == 1 else 'arms'} {', '.join(made)}: no run yet, "
                   f"made in memory for this plan as `{stages}` will make "
                   f"{'it' if len(made) == 1 else 'them'}")
    # the same cost lines `relgrade status` and `relgrade arm add` print: spent and pending
    for line in cost_lines(plan["cost"]):
        click.echo(line)
