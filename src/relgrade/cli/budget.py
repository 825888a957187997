"""``relgrade budget``: what would have been decided with fewer human judgments.

One call: :func:`relgrade.pipeline.budget.experiment_budget` on the experiment's files (the
frozen key, the runs and, in ppi mode, the human sample's grades); printed as a table or JSON.
"""

from __future__ import annotations

import json

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.command("budget")
@params_option
@click.option("--fraction", "fractions", multiple=True, type=click.FloatRange(0, 1, min_open=True),
              help="A budget, as a share of the human judgments, in (0, 1] (repeatable; "
                   "default ppi.budget.fractions, or 0.1 to 1.0).")
@click.option("--json", "as_json", is_flag=True, help="Print the curve as one JSON document.")
@handle_errors
def budget_cmd(params_path, fractions, as_json):
    """The judging-budget curve of a graded experiment: Kendall tau, top-half tau and the share
    of Holm verdicts preserved at each budget, for uniform query samples, PPI with the model
    key (ppi mode) and bandit orders of pairs (MaxMean, MTF), with annotator-hours from
    params cost.seconds_per_judgment when people made the reference judgments, calls when a
    model did (the frozen key of a model grader outside ppi mode); in ppi mode it also names
    the model calls the ppi strategy rests on."""
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.budget import experiment_budget

    ex = Experiment.load(params_path)
    curve, info = experiment_budget(ex, fractions=list(fractions) or None)
    if as_json:
        rows = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
                for r in curve.to_dict(orient="records")]
        click.echo(json.dumps({"reference": info, "curve": rows}, indent=2, allow_nan=False))
        return
    model = info["reference_worker"] == "model"
    who = (f"judgments of {info['reference_grader']}, a model: priced in calls" if model
           else "human judgments: priced in annotator-hours")
    click.echo(f"Reference: {info['reference']} ({info['human_judgments']} {who}).")
    if info.get("model_calls") is not None:
        click.echo(f"The ppi strategy also uses {info['model_grader']}'s {info['model_calls']} "
                   "model calls (every pool pair) at every budget.")
    click.echo(f"strategy  budget  judgments  {'calls' if model else 'hours'}  tau    top-half  "
               "verdicts")
    for r in curve.itertuples():
        tau = "-" if r.kendall_tau != r.kendall_tau else f"{r.kendall_tau:.3f}"
        top = "-" if r.top_half_tau != r.top_half_tau else f"{r.top_half_tau:.3f}"
        price = (f"{r.judgments * info['calls_per_judgment']:<6d}" if model
                 else f"{r.annotator_hours:<6.2f}")
        click.echo(f"{r.strategy:<9} {r.budget:<7.2f} {r.judgments:<10d} "
                   f"{price} {tau:<6} {top:<9} {r.verdicts_preserved:.3f}")
