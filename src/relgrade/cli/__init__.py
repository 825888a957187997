"""The ``relgrade`` command line: a thin face over the library.

Each subcommand lives in its own module and is registered here. Library errors become
``Error: ...`` on stderr and exit status 1 (click's ``ClickException``).
"""

from __future__ import annotations

import functools

import click

from relgrade import __version__
from relgrade.errors import RelgradeError


def handle_errors(fn):
    """Turn a :class:`RelgradeError` into a ``click.ClickException`` (exit 1)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RelgradeError as e:
            raise click.ClickException(str(e)) from None

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="relgrade")
def main():
    """relgrade: blind pooled relevance grading, audited agreement, a frozen key, metrics."""


# Subcommands register below, one module each.
from relgrade.cli.intents import intents_cmd  # noqa: E402

main.add_command(intents_cmd, "intents")
from relgrade.cli.packets import packets_cmd  # noqa: E402

main.add_command(packets_cmd, "packets")
from relgrade.cli.agreement import agreement_cmd  # noqa: E402

main.add_command(agreement_cmd, "agreement")
from relgrade.cli.grade import grade_cmd  # noqa: E402

main.add_command(grade_cmd, "grade")
from relgrade.cli.status import status_cmd  # noqa: E402

main.add_command(status_cmd, "status")
from relgrade.cli import graderun as _graderun  # noqa: E402,F401  (adds `grade run`)
from relgrade.cli.serve import serve_cmd  # noqa: E402

main.add_command(serve_cmd, "serve")
from relgrade.cli.compare import compare_cmd  # noqa: E402

main.add_command(compare_cmd, "compare")
from relgrade.cli.evaluate import evaluate_cmd  # noqa: E402

main.add_command(evaluate_cmd, "evaluate")
from relgrade.cli.queries import queries_cmd  # noqa: E402

main.add_command(queries_cmd, "queries")
from relgrade.cli.aggregate import aggregate_cmd  # noqa: E402

main.add_command(aggregate_cmd, "aggregate")
from relgrade.cli.clicks import clicks_cmd  # noqa: E402

main.add_command(clicks_cmd, "clicks")
