"""The ``relgrade`` command line: a thin face over the library.

Each subcommand lives in its own module and is registered here, explicitly; no module
registers a command by being imported. Library errors become ``Error: ...`` on stderr and
exit status 1 (:func:`relgrade.cli.render.handle_errors`).
"""

from __future__ import annotations

import click

from relgrade import __version__
from relgrade.cli.aggregate import aggregate_cmd
from relgrade.cli.agreement import agreement_cmd
from relgrade.cli.audit import audit_cmd
from relgrade.cli.clicks import clicks_cmd
from relgrade.cli.compare import compare_cmd
from relgrade.cli.corpus import corpus_cmd
from relgrade.cli.design import design_cmd
from relgrade.cli.evaluate import evaluate_cmd
from relgrade.cli.grade import grade_cmd
from relgrade.cli.graderun import run_cmd
from relgrade.cli.init import init_cmd
from relgrade.cli.intents import intents_cmd
from relgrade.cli.packets import packets_cmd
from relgrade.cli.pool import pool_cmd
from relgrade.cli.queries import queries_cmd
from relgrade.cli.serve import serve_cmd
from relgrade.cli.status import status_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="relgrade")
def main():
    """relgrade: blind pooled relevance grading, audited agreement, a frozen key, metrics."""


grade_cmd.add_command(run_cmd, "run")

#: Every top-level command, by the name it is called with.
COMMANDS = {
    "intents": intents_cmd, "packets": packets_cmd, "agreement": agreement_cmd,
    "grade": grade_cmd, "status": status_cmd, "serve": serve_cmd, "compare": compare_cmd,
    "evaluate": evaluate_cmd, "queries": queries_cmd, "aggregate": aggregate_cmd,
    "clicks": clicks_cmd, "audit": audit_cmd, "init": init_cmd,
    "design": design_cmd, "corpus": corpus_cmd, "pool": pool_cmd,
}
for name, command in COMMANDS.items():
    main.add_command(command, name)
