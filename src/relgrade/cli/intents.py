"""``relgrade intents review``: validate the intent table, show what to check, sign the review."""

from __future__ import annotations

from datetime import datetime, timezone

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("intents")
def intents_cmd():
    """The intent table: one locked line per query, reviewed before any packet exists."""


@intents_cmd.command("review")
@click.option("--reviewer", required=True, help="Who reviewed the intent table (the auditor).")
@params_option
@handle_errors
def review_cmd(reviewer, params_path):
    """Validate the intent table against the queries, list intents that offer alternative
    readings, and write the review record (params `intents.review`) signing the table's
    sha256. Run it again after any change to the table."""
    from relgrade.experiment.files import Experiment
    from relgrade.io.files import read_rows, write_json
    from relgrade.protocol import intents, queries
    from relgrade.schema import INTENTS

    ex = Experiment.load(params_path)
    qcfg, icfg = ex.params.need("queries"), ex.params.need("intents")
    qsrc, isrc = ex.file(qcfg.input), ex.file(icfg.input)
    qtable, qlines = read_rows(qsrc, queries.REQUIRED_COLUMNS)
    query_set = queries.validate_queries(qtable, groups=qcfg.groups, path=qsrc, lines=qlines)
    itable, ilines = read_rows(isrc, INTENTS)
    table = intents.validate_intents(itable, queries=query_set, path=isrc, lines=ilines)

    flagged = intents.flag_alternatives(table)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = intents.review_record(table, reviewer=reviewer, reviewed_at=now)
    for qid, text, why in zip(flagged["query_id"], flagged["intent"], flagged["why"]):
        click.echo(f"flagged {qid} ({why!r}: one reading, never an alternative): {text}")
    review = ex.file(icfg.review)
    write_json(review, record)
    click.echo(f"Reviewed {len(table)} intents as {record['reviewer']}: sha256 "
               f"{record['table_sha256'][:12]}, {len(flagged)} flagged; wrote "
               f"{review.as_posix()}")
    if len(flagged):
        # advisory: the signature stands; the reviewer either meant one reading or edits the
        # intent and signs again (a signed table that changes is re-reviewed)
        click.echo("A flagged intent may offer a choice of readings, and an intent names one: "
                   "if it names one, nothing more to do; if not, edit its line in "
                   f"{isrc.as_posix()} and run this command again.")
