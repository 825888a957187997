"""``relgrade audit redraw``: draw the round's audit sample again from the current pool."""

from __future__ import annotations

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("audit")
def audit_cmd():
    """The audit sample: drawn once per round, locked, redrawn only on request."""


@audit_cmd.command("redraw")
@click.option("--force", is_flag=True,
              help="Redraw even though the auditor has grades of this round.")
@params_option
@handle_errors
def redraw_cmd(force, params_path):
    """Draw the audit sample of the current grading.round again, from the current pool's
    provenance, and write it to the audit lock (paths.audit_lock). Refused once the auditor
    has grades of the round (the sample is chosen before grading) unless --force. Commit the
    lock, then run the experiment's `dvc repro` (printed) to rebuild the audit table and the
    packets."""
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import repro_command
    from relgrade.pipeline.stages.audit import redraw_audit

    ex = Experiment.load(params_path)
    new, old = redraw_audit(ex, force=force)
    ids = [q["query_id"] for q in new["queries"]]
    was = ", ".join(q["query_id"] for q in old["queries"]) if old else "no readable lock"
    click.echo(f"audit lock for round {new['round']} redrawn from pool {new['pool_version']}: "
               f"{', '.join(ids)} (was: {was}); wrote {ex.path('audit_lock').as_posix()}, sha256 "
               f"{new['sha256'][:12]}. Commit it and run `{repro_command(ex)}`.")
