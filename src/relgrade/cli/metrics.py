"""``relgrade metrics diff``: the decision per arm at two revisions, and whether it compares."""

from __future__ import annotations

import json

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("metrics")
def metrics_cmd():
    """The experiment's decision metrics (metrics/decision/ARM.json)."""


def _f(x) -> str:
    return "—" if x is None else f"{x:.4f}"


@metrics_cmd.command("diff")
@click.argument("a_rev", default="HEAD")
@click.argument("b_rev", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@params_option
@handle_errors
def diff_cmd(a_rev, b_rev, as_json, params_path):
    """Compare each arm's decision at git revision A_REV (default HEAD) with B_REV (default:
    the files on disk), as `dvc metrics diff` does, and say first whether the numbers are
    comparable: two keys of different pool versions are not ("not comparable: pool p-… vs
    p-…"). The report's translation section scores every arm under both keys instead."""
    from relgrade.evaluation.translate import diff_decisions
    from relgrade.pipeline.decisions import read_decisions
    from relgrade.experiment.files import Experiment

    ex = Experiment.load(params_path)
    diff = diff_decisions(read_decisions(ex, a_rev), read_decisions(ex, b_rev))
    if as_json:
        click.echo(json.dumps(diff, indent=2))
        return
    b_name = b_rev or "workspace"
    click.echo(diff["reason"] or f"comparable: pool {diff['pools'][1]} on both sides")
    click.echo(f"pool {diff['pools'][0]} (key {diff['keys'][0]}) at {a_rev}; pool "
               f"{diff['pools'][1]} (key {diff['keys'][1]}) at {b_name}")
    for r in diff["arms"]:
        change = "—" if r["change"] is None else f"{r['change']:+.4f}"
        click.echo(f"  {r['arm']}: {r['measure']} {_f(r['old'])} at {a_rev} -> "
                   f"{_f(r['new'])} at {b_name} ({change})")
